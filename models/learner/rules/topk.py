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
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from wflsim.sim.updates import TopKInputs, UpdateInputs, expect_inputs

from .. import aggregate
from .base import PlainRule, check_counts


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


class TopKResidual(PlainRule):
    """Top-K with error accumulation (see the module docstring).

    Frame input ``{"k": (N,) int64}`` in ``[0, D]``. State: ``residual`` ``(N, D)`` float32.
    """

    def __init__(self, num_devices: int, num_params: int, device: torch.device) -> None:
        self.num_devices = num_devices
        self.num_params = num_params
        self.device = device
        self.k = np.zeros(num_devices, dtype=np.int64)
        self.residual = torch.zeros(num_devices, num_params, device=device)
        self._pending: tuple[np.ndarray, torch.Tensor] | None = None

    def begin_frame(self, frame: int, w: torch.Tensor, update: UpdateInputs) -> None:
        """Take the frame's ``K`` per device."""
        self.k = check_counts(
            "k", expect_inputs(update, TopKInputs).k, self.num_devices, self.num_params
        )

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
