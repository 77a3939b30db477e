"""Importance pruning (Liu et al., IEEE Trans. Commun. 2022, "Joint model pruning and device
selection"): rule ``pruning``.

Importance of parameter ``j``: ``(g_j w_j)^2`` with ``g`` the last aggregated global gradient and
``w`` the current global model (first-order Taylor saliency). Each slot, device ``n`` keeps its
``kept_n`` most important parameters (ties: the lower index; the masks of different devices are
nested because they share the ranking), trains the pruned model (pruned weights are 0 in the
forward pass) and uploads its gradient on the kept coordinates; the server can recompute the
masks from broadcast quantities, so no indices are sent, and the global model stays dense.
Before any global gradient exists, the importance is ``w_j^2`` (magnitude), so a device always
keeps exactly ``kept_n`` parameters and the trace's payload is what was trained.

Aggregation: ``"zeros"`` (pruned coordinates count as 0, eq. 3) or ``"per_coordinate"`` (each
coordinate averaged over the devices that kept it). A coordinate that no device keeps gets no
gradient; its importance stays 0 until the ranking moves: the method's own behaviour.

Stale updates (``[server]`` semi_sync / async): the importance is what the device downloaded,
``(g^(v) w^(v))^2`` with ``w^(v)`` the model version ``v`` of its update and ``g^(v)`` the
aggregated gradient of the last server step with updates that made a version at or before ``v``
(the gradient broadcast with that version; a step without updates leaves it, as a synchronous
slot without arrivals does); ``kept_n`` is that of the frame the update started in. The mask is a
function of the version and the frame alone: no device's gradient need be computed for it, and
the learner's batching order cannot change it (:class:`PruningAt` keeps ``g^(v)`` with each
version that updates not yet computed started on).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from wflsim.sim.updates import PruningInputs, UpdateInputs, expect_inputs

from .. import aggregate
from .base import FrameView, PlainRule, check_counts

PRUNING_AGGREGATIONS = ("zeros", "per_coordinate")


def importance_ranks(w: torch.Tensor, g: torch.Tensor | None) -> torch.Tensor:
    """Rank of each parameter by importance ``(g w)^2`` (``w^2`` without ``g``), 0 = most
    important, ties by the lower index; ``(D,)`` int64."""
    imp = (w * w) if g is None else (g * w) ** 2
    order = torch.argsort(imp, descending=True, stable=True)
    ranks = torch.empty_like(order)
    ranks[order] = torch.arange(order.shape[0], device=order.device)
    return ranks


class PruningAt:
    """The importance a device downloads with model version ``w`` ``(D,)``: ``g`` the aggregated
    gradient broadcast with it (None before the first step with updates); the ranks are computed
    once, when an update first needs them."""

    def __init__(self, w: torch.Tensor, g: torch.Tensor | None) -> None:
        self.w = w
        self.g = g
        self._ranks: torch.Tensor | None = None

    def ranks(self) -> torch.Tensor:
        """:func:`importance_ranks` of the version."""
        if self._ranks is None:
            self._ranks = importance_ranks(self.w, self.g)
        return self._ranks

    def kept_mask(self, kept: int) -> torch.Tensor:
        """``(D,)`` bool: the ``kept`` most important parameters."""
        return self.ranks() < int(kept)


class PruningView(FrameView):
    """A frame's kept counts ``(N,)``, for updates computed later (stale updates): device ``n``
    trains ``w^(v) * m_n`` and uploads its gradient on ``m_n``, the ``kept_n`` most important
    parameters of the version it downloaded (``at``: :class:`PruningAt`)."""

    def __init__(self, kept: np.ndarray, num_params: int) -> None:
        self.kept = kept
        self.num_params = num_params

    def local_params(self, w: torch.Tensor, device: int, at: Any = None) -> torch.Tensor:
        """The pruned model ``w * m_n`` (``w`` when nothing is pruned)."""
        k = int(self.kept[device])
        return w if k >= self.num_params else w * at.kept_mask(k)

    def frozen(self, device: int, at: Any = None) -> torch.Tensor | None:
        """The pruned coordinates (None: nothing pruned)."""
        k = int(self.kept[device])
        return None if k >= self.num_params else ~at.kept_mask(k)

    def state_dict(self) -> dict[str, Any]:
        """The kept counts."""
        return {"kept": self.kept.copy()}


class ImportancePruning(PlainRule):
    """Importance pruning (see the module docstring). Frame input ``{"kept": (N,) int64}``;
    state: the last aggregated global gradient ``g`` ``(D,)`` (None before the first)."""

    def __init__(
        self, num_devices: int, num_params: int, device: torch.device, aggregation: str = "zeros"
    ) -> None:
        if aggregation not in PRUNING_AGGREGATIONS:
            raise ValueError(
                f"unknown aggregation {aggregation!r}; known: {list(PRUNING_AGGREGATIONS)}"
            )
        self.num_devices = num_devices
        self.num_params = num_params
        self.device = device
        self.aggregation = aggregation
        self.frame: int | None = None
        self.kept = np.full(num_devices, num_params, dtype=np.int64)
        self.g_prev: torch.Tensor | None = None
        self._ids = np.empty(0, dtype=np.int64)
        self._masks: torch.Tensor | None = None

    def begin_frame(self, frame: int, w: torch.Tensor, update: UpdateInputs) -> None:
        """Take the frame's kept counts."""
        self.kept = check_counts(
            "kept", expect_inputs(update, PruningInputs).kept, self.num_devices, self.num_params
        )
        self.frame = int(frame)

    def masks_for(self, w: torch.Tensor, ids: np.ndarray) -> torch.Tensor | None:
        """``(n, D)`` bool masks of the kept parameters of ``ids`` (None: nothing pruned)."""
        kk = self.kept[ids]
        if (kk >= self.num_params).all():
            return None
        ranks = importance_ranks(w, self.g_prev)
        k = torch.as_tensor(kk, device=self.device).view(-1, 1)
        return ranks.view(1, -1) < k

    def local_params(self, w: torch.Tensor, ids: np.ndarray) -> torch.Tensor:
        """The pruned models ``w * m_n`` ``(n, D)`` (``w`` when nothing is pruned)."""
        self._ids = ids
        self._masks = self.masks_for(w, ids)
        return w if self._masks is None else w * self._masks

    def trained(self, ids: np.ndarray) -> torch.Tensor | None:
        """The kept coordinates of the last :meth:`local_params` (None: nothing pruned)."""
        if not np.array_equal(ids, self._ids):
            raise RuntimeError("trained() must follow local_params() for the same devices")
        return self._masks

    def uploads(self, grads: torch.Tensor, ids: np.ndarray, slot: int) -> torch.Tensor:
        """The gradients on the kept coordinates."""
        if not np.array_equal(ids, self._ids):
            raise RuntimeError("uploads() must follow local_params() for the same devices")
        return grads if self._masks is None else grads.masked_fill(~self._masks, 0.0)

    def aggregate(
        self, uploads: torch.Tensor, ok: np.ndarray, weights: torch.Tensor
    ) -> torch.Tensor:
        """``zeros`` (eq. 3) or ``per_coordinate``; remembers the result as ``g``."""
        if self.aggregation == "per_coordinate" and self._masks is not None:
            pos = {int(n): r for r, n in enumerate(self._ids)}
            rows = torch.as_tensor([pos[int(n)] for n in ok], device=self.device)
            g = aggregate.per_coordinate_mean(uploads, weights, self._masks[rows])
        else:
            g = aggregate.weighted_mean(uploads, weights)
        self.g_prev = g.detach().clone()
        return g

    def server_gradient(self, g: torch.Tensor) -> None:
        """Remember the aggregate the server stepped with as ``g`` (under a strategy that
        aggregates without the rule, e.g. the median, the importance follows the server's
        gradient, not one the rule never computed)."""
        self.g_prev = g.detach().clone()

    def settle(self, ok: np.ndarray) -> None:
        """Forget the slot's masks."""
        self._masks = None
        self._ids = np.empty(0, dtype=np.int64)

    # ------------------------------------------------------------------ stale updates
    def frame_view(self) -> PruningView:
        """The frame's kept counts (replaced, never changed, at the next frame start)."""
        return PruningView(self.kept, self.num_params)

    def view_from_state(self, state: dict[str, Any]) -> PruningView:
        """The view of :meth:`PruningView.state_dict`."""
        return PruningView(np.asarray(state["kept"], dtype=np.int64), self.num_params)

    def version_state(self, w: torch.Tensor) -> PruningAt:
        """The importance of the materialised version ``w``: with the last aggregated gradient
        (replaced, never changed, by the next step with updates)."""
        return PruningAt(w, self.g_prev)

    def version_state_dict(self, at: Any) -> dict[str, Any]:
        """The version's aggregated gradient (None before the first)."""
        return {"g": None if at.g is None else at.g.cpu().numpy()}

    def version_state_from(self, state: Any, w: torch.Tensor) -> PruningAt:
        """The :class:`PruningAt` of :meth:`version_state_dict` for the version ``w``."""
        g = state["g"]
        return PruningAt(
            w, None if g is None else torch.as_tensor(np.asarray(g, np.float32), device=w.device)
        )

    def aggregate_stale(
        self,
        uploads: torch.Tensor,
        frozen: torch.Tensor | None,
        weights: torch.Tensor,
        aux: Sequence[Any],
    ) -> torch.Tensor:
        """:meth:`aggregate` of uploads pruned by their own versions' masks (``frozen``
        ``(k, D)``: the pruned coordinates); remembers the result as ``g``, the importance of the
        version the step makes."""
        if self.aggregation == "per_coordinate" and frozen is not None:
            g = aggregate.per_coordinate_mean(uploads, weights, ~frozen)
        else:
            g = aggregate.weighted_mean(uploads, weights)
        self.g_prev = g.detach().clone()
        return g

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The last aggregated global gradient (None before the first)."""
        return {"g_prev": None if self.g_prev is None else self.g_prev.cpu().numpy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore it."""
        g = state["g_prev"]
        self.g_prev = (
            None if g is None else torch.as_tensor(np.asarray(g, np.float32), device=self.device)
        )
