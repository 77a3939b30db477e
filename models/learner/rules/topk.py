"""Top-K sparsification with error accumulation (Shi et al., IJCAI 2019): rule ``topk_ef``.

Per device a residual ``r`` in R^D (gradient units), starting at 0. When device ``n`` trains in a
slot it computes its full gradient ``g`` (at the global model), forms ``acc = r + g``, sends the
``K_n`` entries of largest ``|acc|`` (ties: the lower index) and keeps ``acc`` with those entries
zeroed as its new residual. If the upload then misses the deadline, nothing reached the server:
the sent entries go back into the residual, so nothing a device computed is ever lost. Mass
conservation: (sum of the uploads that arrived) + (sum of the residuals) = (sum of all gradients
computed). The server averages the arrived uploads weighted by ``B_n`` (eq. 3).

The residual is kept in gradient units, as the authors do: the learning rate is applied after
aggregation, so under a decaying learning rate (the CIFAR-10 setting) a residual built up at an
earlier rate is applied at the current one.

Stale updates (``[server]`` semi_sync / async): the residual is the device's own and moves with
its uploads in the order its updates started. An update's gradient is computed at the model
version it downloaded, with ``K_n`` of the frame it started in, and its upload is formed from the
residual its device's previous update left (:meth:`TopKResidual.stale_uploads`), whatever order
the learner computes updates in (it forms a device's uploads in start order and refuses to form
one while an earlier update of the device is neither applied nor dropped). An update that is
dropped (the device went offline) or discarded as too stale is never computed and leaves the
residual as it was: the device's next update starts from the residual before the lost one. Mass
conservation then reads: (sum of the uploads formed) + (sum of the residuals) = (sum of the
gradients computed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from wflsim.sim.updates import TopKInputs, UpdateInputs, expect_inputs

from .. import aggregate
from .base import FrameView, PlainRule, StaleUpdate, check_counts


def top_k_mask(values: torch.Tensor, k: int) -> torch.Tensor:
    """Bool mask of the ``k`` entries of ``values`` ``(D,)`` with the largest magnitude; ties at
    the threshold are broken towards the lower index. ``O(D)`` (a selection, not a sort)."""
    d = values.shape[0]
    if k >= d:
        return torch.ones(d, dtype=torch.bool, device=values.device)
    if k <= 0:
        return torch.zeros(d, dtype=torch.bool, device=values.device)
    mag = values.abs()
    threshold = mag.kthvalue(d - k + 1).values  # the k-th largest magnitude
    mask = mag > threshold
    short = k - int(mask.sum())
    if short > 0:
        ties = torch.nonzero(mag == threshold).flatten()[:short]
        mask[ties] = True
    return mask


class TopKView(FrameView):
    """A frame's ``K`` per device ``(N,)``, for updates computed later (stale updates)."""

    def __init__(self, k: np.ndarray) -> None:
        self.k = k

    def state_dict(self) -> dict[str, Any]:
        """``K`` per device."""
        return {"k": self.k.copy()}


class TopKResidual(PlainRule):
    """Top-K with error accumulation (see the module docstring).

    Frame input ``{"k": (N,) int64}`` in ``[0, D]``. State: ``residual`` ``(N, D)`` float32.
    """

    #: a device's residual moves from one of its uploads to the next (stale updates)
    ordered_uploads = True

    def __init__(self, num_devices: int, num_params: int, device: torch.device) -> None:
        self.num_devices = num_devices
        self.num_params = num_params
        self.device = device
        self.frame: int | None = None
        self.k = np.zeros(num_devices, dtype=np.int64)
        self.residual = torch.zeros(num_devices, num_params, device=device)
        self._pending: tuple[np.ndarray, torch.Tensor] | None = None

    def begin_frame(self, frame: int, w: torch.Tensor, update: UpdateInputs) -> None:
        """Take the frame's ``K`` per device."""
        self.k = check_counts(
            "k", expect_inputs(update, TopKInputs).k, self.num_devices, self.num_params
        )
        self.frame = int(frame)

    def local_params(self, w: torch.Tensor, ids: np.ndarray) -> torch.Tensor:
        """Full compute at the global model."""
        return w

    def uploads(self, grads: torch.Tensor, ids: np.ndarray, slot: int) -> torch.Tensor:
        """``acc = r + g``; send its top ``K_n``; keep the rest as the residual."""
        rows = torch.as_tensor(ids, device=self.device)
        acc = self.residual[rows] + grads
        sent = torch.zeros_like(acc)
        for row, n in enumerate(ids):
            mask = top_k_mask(acc[row], int(self.k[n]))
            sent[row] = torch.where(mask, acc[row], 0.0)
        self.residual[rows] = acc - sent
        self._pending = (ids, sent)
        return sent

    def aggregate(
        self, uploads: torch.Tensor, ok: np.ndarray, weights: torch.Tensor
    ) -> torch.Tensor:
        """Eq. 3 over the sparse uploads that arrived."""
        return aggregate.weighted_mean(uploads, weights)

    def settle(self, ok: np.ndarray) -> None:
        """Uploads that did not arrive go back into their devices' residuals."""
        if self._pending is None:
            return
        ids, sent = self._pending
        self._pending = None
        lost = np.flatnonzero(~np.isin(ids, ok))
        if lost.size:
            rows = torch.as_tensor(ids[lost], device=self.device)
            self.residual[rows] += sent[torch.as_tensor(lost, device=self.device)]

    # ------------------------------------------------------------------ stale updates
    def frame_view(self) -> TopKView:
        """The frame's ``K`` (replaced, never changed, at the next frame start)."""
        return TopKView(self.k)

    def view_from_state(self, state: dict[str, Any]) -> TopKView:
        """The view of :meth:`TopKView.state_dict`."""
        return TopKView(np.asarray(state["k"], dtype=np.int64))

    def stale_uploads(
        self, grads: Sequence[torch.Tensor], updates: Sequence[StaleUpdate]
    ) -> tuple[list[torch.Tensor], list[Any]]:
        """In start order: ``acc = r_n + g``, send its top ``K_n`` (of the update's frame), keep
        the rest as device ``n``'s residual (the module docstring)."""
        out = []
        for g, u in zip(grads, updates, strict=True):
            n = u.device
            acc = self.residual[n] + g
            mask = top_k_mask(acc, int(u.view.k[n]))
            sent = torch.where(mask, acc, 0.0)
            self.residual[n] = acc - sent
            out.append(sent)
        return out, [None] * len(out)

    def aggregate_stale(
        self,
        uploads: torch.Tensor,
        frozen: torch.Tensor | None,
        weights: torch.Tensor,
        aux: Sequence[Any],
    ) -> torch.Tensor:
        """Eq. 3 over the step's sparse uploads."""
        return aggregate.weighted_mean(uploads, weights)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The residuals ``(N, D)`` (float32)."""
        if self._pending is not None:
            raise RuntimeError("the Top-K rule's state can only be saved between slots")
        return {"residual": self.residual.cpu().numpy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the residuals."""
        r = np.asarray(state["residual"], dtype=np.float32)
        if r.shape != (self.num_devices, self.num_params):
            raise ValueError(f"saved residuals have shape {r.shape}")
        self.residual = torch.as_tensor(r, device=self.device).clone()
