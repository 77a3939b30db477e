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
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from wflsim.sim.updates import QuantisationInputs, UpdateInputs, expect_inputs

from .. import aggregate
from .base import PlainRule, check_counts


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
        self.bits = np.zeros(num_devices, dtype=np.int64)
        self.errors: dict[int, float] = {}

    def begin_frame(self, frame: int, w: torch.Tensor, update: UpdateInputs) -> None:
        """Take the frame's bits per coordinate."""
        self.bits = check_counts(
            "bits", expect_inputs(update, QuantisationInputs).bits, self.num_devices, 64
        )

    def local_params(self, w: torch.Tensor, ids: np.ndarray) -> torch.Tensor:
        """Full compute at the global model."""
        return w

    def uploads(self, grads: torch.Tensor, ids: np.ndarray, slot: int) -> torch.Tensor:
        """Each device's quantised gradient; remembers its relative error ``e_n``."""
        out = torch.empty_like(grads)
        self.errors = {}
        for row, n in enumerate(ids):
            b = int(self.bits[n])
            if b < 2:
                raise ValueError(f"device {n} computes with {b} bits per coordinate (< 2)")
            rng = self.streams.device("quantise", int(n), int(slot))
            u = torch.from_numpy(rng.random(self.num_params)).to(self.device)
            q = quantise(grads[row], b, u)
            out[row] = q
            g2 = float(torch.sum(grads[row].to(torch.float64) ** 2))
            err = float(torch.sum((q.to(torch.float64) - grads[row].to(torch.float64)) ** 2))
            self.errors[int(n)] = err / g2 if g2 > 0 else 0.0
        return out

    def weights_for(self, ok: np.ndarray, weights: torch.Tensor) -> torch.Tensor:
        """``B_n / (1 + e_n)`` of the devices ``ok`` (not yet normalised)."""
        e = torch.as_tensor([self.errors[int(n)] for n in ok], dtype=weights.dtype)
        return weights / (1.0 + e.to(weights.device))

    def aggregate(
        self, uploads: torch.Tensor, ok: np.ndarray, weights: torch.Tensor
    ) -> torch.Tensor:
        """The error-weighted average of the uploads that arrived."""
        return aggregate.weighted_mean(uploads, self.weights_for(ok, weights))

    def state_dict(self) -> dict[str, Any]:
        """No state crosses a frame boundary (the rounding draws are keyed)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""
