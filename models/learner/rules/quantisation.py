"""FedHQ-like heterogeneous quantisation: rule ``quantisation``.

Device ``n`` quantises its full gradient ``v`` with QSGD's stochastic uniform quantiser at
``b_n`` bits per coordinate (1 sign bit, ``s_n = 2^(b_n - 1) - 1`` levels):
``level_i = s |v_i| / ||v||``, rounded down or up with probability equal to its fractional part,
``Q(v)_i = ||v|| sign(v_i) level_i / s``. ``E[Q(v)] = v`` (unbiased) and
``E||Q(v) - v||^2 <= min(D / s^2, sqrt(D) / s) ||v||^2`` (Alistarh et al., QSGD, Lemma 3.1). The
rounding draws of device ``n`` in slot ``t`` come from ``streams.device("quantise", n, t)``.

With its upload the device sends its relative error ``e_n = ||Q(v) - v||^2 / ||v||^2``; the server
weights the uploads that arrived by ``B_n / (1 + e_n)``, normalised. The original FedHQ weight
formula (Chen et al., IEEE TWC 2021) is not available here: this is a documented stand-in that
keeps its idea (precise uploads count more), hence "FedHQ-like".

Stale updates (``[server]`` semi_sync / async): an update is quantised at ``b_n`` of the frame it
started in, with rounding draws keyed by the update, ``streams.device("quantise", n, key)`` with
``key`` its minibatch key: the slot it started in under ``semi_sync`` (so a run without late
uploads draws what the synchronous run draws), the device's cycle index under ``async`` (a
device may start several updates in one slot; each draws its own). The error ``e_n`` travels with
the upload to the step that applies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from wflsim.sim.updates import QuantisationInputs, UpdateInputs, expect_inputs

from .. import aggregate
from .base import FrameView, PlainRule, StaleUpdate, check_counts


def quantise(v: torch.Tensor, bits: int, uniforms: torch.Tensor) -> torch.Tensor:
    """QSGD's stochastic uniform quantiser of ``v`` ``(D,)`` at ``bits >= 2`` bits per coordinate.

    ``uniforms`` ``(D,)`` in ``[0, 1)`` decide the rounding. Computed in float64 (levels up to
    ``2^31 - 1`` exceed float32's mantissa); returns ``v``'s dtype.
    """
    if bits < 2:
        raise ValueError(f"bits must be >= 2, got {bits}")
    s = float(2 ** (bits - 1) - 1)
    x = v.to(torch.float64)
    norm = torch.linalg.vector_norm(x)
    if norm == 0:
        return torch.zeros_like(v)
    level = x.abs() / norm * s
    low = torch.floor(level)
    q = low + (uniforms.to(torch.float64) < (level - low)).to(torch.float64)
    return (torch.sign(x) * q * (norm / s)).to(v.dtype)


class QuantisationView(FrameView):
    """A frame's bits per coordinate ``(N,)``, for updates computed later (stale updates)."""

    def __init__(self, bits: np.ndarray) -> None:
        self.bits = bits

    def state_dict(self) -> dict[str, Any]:
        """The bits per device."""
        return {"bits": self.bits.copy()}


class StochasticQuantisation(PlainRule):
    """FedHQ-like quantisation (see the module docstring). Frame input ``{"bits": (N,) int64}``
    (0: the device does not upload); needs the run's random streams."""

    def __init__(
        self, num_devices: int, num_params: int, device: torch.device, streams: Any
    ) -> None:
        if streams is None:
            raise ValueError("the quantisation rule needs the run's random streams")
        self.num_devices = num_devices
        self.num_params = num_params
        self.device = device
        self.streams = streams
        self.frame: int | None = None
        self.bits = np.zeros(num_devices, dtype=np.int64)
        self.errors: dict[int, float] = {}

    def begin_frame(self, frame: int, w: torch.Tensor, update: UpdateInputs) -> None:
        """Take the frame's bits per coordinate."""
        self.bits = check_counts(
            "bits", expect_inputs(update, QuantisationInputs).bits, self.num_devices, 64
        )
        self.frame = int(frame)

    def local_params(self, w: torch.Tensor, ids: np.ndarray) -> torch.Tensor:
        """Full compute at the global model."""
        return w

    def uploads(self, grads: torch.Tensor, ids: np.ndarray, slot: int) -> torch.Tensor:
        """Each device's quantised gradient; remembers its relative error ``e_n``."""
        out = torch.empty_like(grads)
        self.errors = {}
        for row, n in enumerate(ids):
            q, err = self._quantised(grads[row], int(n), int(self.bits[n]), int(slot))
            out[row] = q
            self.errors[int(n)] = err
        return out

    def _quantised(self, g: torch.Tensor, n: int, b: int, key: int) -> tuple[torch.Tensor, float]:
        """Device ``n``'s gradient ``g`` quantised at ``b`` bits with the draws of ``key``, and
        its relative error."""
        if b < 2:
            raise ValueError(f"device {n} computes with {b} bits per coordinate (< 2)")
        rng = self.streams.device("quantise", n, key)
        u = torch.from_numpy(rng.random(self.num_params)).to(self.device)
        q = quantise(g, b, u)
        g2 = float(torch.sum(g.to(torch.float64) ** 2))
        err = float(torch.sum((q.to(torch.float64) - g.to(torch.float64)) ** 2))
        return q, err / g2 if g2 > 0 else 0.0

    def weights_for(self, ok: np.ndarray, weights: torch.Tensor) -> torch.Tensor:
        """``B_n / (1 + e_n)`` of the devices ``ok`` (not yet normalised)."""
        e = torch.as_tensor([self.errors[int(n)] for n in ok], dtype=weights.dtype)
        return weights / (1.0 + e.to(weights.device))

    def aggregate(
        self, uploads: torch.Tensor, ok: np.ndarray, weights: torch.Tensor
    ) -> torch.Tensor:
        """The error-weighted average of the uploads that arrived."""
        return aggregate.weighted_mean(uploads, self.weights_for(ok, weights))

    # ------------------------------------------------------------------ stale updates
    def frame_view(self) -> QuantisationView:
        """The frame's bits (replaced, never changed, at the next frame start)."""
        return QuantisationView(self.bits)

    def view_from_state(self, state: dict[str, Any]) -> QuantisationView:
        """The view of :meth:`QuantisationView.state_dict`."""
        return QuantisationView(np.asarray(state["bits"], dtype=np.int64))

    def stale_uploads(
        self, grads: Sequence[torch.Tensor], updates: Sequence[StaleUpdate]
    ) -> tuple[list[torch.Tensor], list[Any]]:
        """Each update's quantised gradient at its frame's bits, its draws keyed by its device
        and minibatch key (the module docstring); its relative error goes with it."""
        out, errors = [], []
        for g, u in zip(grads, updates, strict=True):
            q, err = self._quantised(g, u.device, int(u.view.bits[u.device]), u.sample_key)
            out.append(q)
            errors.append(err)
        return out, errors

    def aggregate_stale(
        self,
        uploads: torch.Tensor,
        frozen: torch.Tensor | None,
        weights: torch.Tensor,
        aux: Sequence[Any],
    ) -> torch.Tensor:
        """The error-weighted average of the step's uploads (``aux``: their errors ``e``)."""
        e = torch.as_tensor([float(x) for x in aux], dtype=weights.dtype)
        return aggregate.weighted_mean(uploads, weights / (1.0 + e.to(weights.device)))

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """No state crosses a frame boundary (the rounding draws are keyed)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""
