"""Per-device parameter freezing, the paper's update rule (eqs. 1, 5, 6).

* :class:`Freezing` (rule ``"freezing"``): device ``n`` freezes
  ``frozen_count[n]`` parameters for the frame. A frozen parameter holds its frame-start value on
  that device, gets no gradient and is not uploaded; active ones follow the broadcast. Which
  parameters: the smallest stability scores of the previous frame (``selection = "stability"``,
  the paper's) or a uniformly random subset drawn from ``streams.device("freeze_choice", n, k)``
  (``selection = "random"``, an ablation that measures what the stability criterion is worth).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from wflsim.sim.updates import FreezingInputs, UpdateInputs, expect_inputs

from .. import aggregate
from .base import AGGREGATIONS, FrameView, PlainRule, check_counts

SELECTIONS = ("stability", "random")


class FreezingView(FrameView):
    """A frame's freezing state as an update computed later needs it (stale updates,
    :meth:`Freezing.frame_view`): the frame-start model ``w_frame`` ``(D,)`` and the masks
    ``(N, D)`` (None: nothing frozen). Device ``n``'s local model at a version ``w_v`` is
    ``where(mask_n, w_frame, w_v)`` (eq. 1); its upload is its gradient with frozen entries 0."""

    def __init__(self, w_frame: torch.Tensor, mask: torch.Tensor | None) -> None:
        self.w_frame = w_frame
        self.mask = mask

    def local_params(self, w: torch.Tensor, device: int, at: Any = None) -> torch.Tensor:
        """Device ``device``'s local model ``(D,)`` at the global model ``w``."""
        if self.mask is None:
            return w
        return torch.where(self.mask[device], self.w_frame, w)

    def frozen(self, device: int, at: Any = None) -> torch.Tensor | None:
        """Device ``device``'s mask ``(D,)`` (None: nothing frozen)."""
        return None if self.mask is None else self.mask[device]

    def state_dict(self) -> dict[str, Any]:
        """The frame-start model and the masks (numpy)."""
        return {
            "w_frame": self.w_frame.cpu().numpy(),
            "mask": None if self.mask is None else self.mask.cpu().numpy(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], device: torch.device) -> FreezingView:
        """The view of :meth:`state_dict`."""
        mask = state["mask"]
        return cls(
            torch.as_tensor(np.asarray(state["w_frame"], dtype=np.float32), device=device),
            None if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool), device=device),
        )


def stability_scores(
    dU: torch.Tensor, dU_abs: torch.Tensor, unmoved_stability: float = 1.0
) -> torch.Tensor:
    """Paper eq. 6: ``s = |dU| / dU_abs`` elementwise, ``0/0 -> unmoved_stability``.

    ``s`` lies in ``[0, 1]``: near 0 the updates of the frame cancelled out (stable), 1 means they
    all pointed the same way. Any shape; returns the same shape.
    """
    moved = dU_abs > 0
    return torch.where(
        moved,
        dU.abs() / torch.where(moved, dU_abs, torch.ones_like(dU_abs)),
        torch.full_like(dU_abs, float(unmoved_stability)),
    )


def freeze_masks(scores: torch.Tensor, counts: np.ndarray) -> torch.Tensor:
    """Masks freezing, per device, the ``counts[n]`` parameters with the smallest score.

    Args:
        scores: ``(N, D)`` or ``(1, D)`` (one score vector shared by all devices).
        counts: ``(N,)`` ints in ``[0, D]``.

    Returns:
        ``(N, D)`` bool, ``True`` = frozen; ties are broken by the lower parameter index.
    """
    n_dev, d = counts.shape[0], scores.shape[1]
    order = torch.argsort(scores, dim=1, stable=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(d, device=scores.device).expand_as(order))
    k = torch.as_tensor(counts, dtype=ranks.dtype, device=scores.device).view(n_dev, 1)
    return ranks < k  # broadcasts (1, D) ranks against (N, 1) counts


class Freezing(PlainRule):
    """Per-device parameter freezing (paper eqs. 1, 5, 6; see the module docstring).

    State (on the torch device): ``w_frame`` ``(D,)`` the frame-start model; ``mask`` ``(N, D)``
    bool, True = frozen (None while nothing is frozen); ``dU``, ``dU_abs`` ``(N, D)`` (``(1, D)``
    while nothing is frozen: then all devices' accumulators are equal), eq. 5; ``scores`` of the
    last finished frame, eq. 6 (None before the first). Device ``n``'s local model is
    ``w_tilde_n = where(mask_n, w_frame, w)`` (eq. 1).

    Args:
        num_devices, num_params: ``N``, ``D``.
        device: the torch device.
        selection: ``"stability"`` or ``"random"``.
        aggregation: ``"weighted"`` (eq. 3, frozen entries count as 0) or ``"per_coordinate"``
            (each coordinate divided by the ``B`` weight of the devices that uploaded it).
        unmoved_stability: the score of a parameter that never moved in a frame (0/0).
        streams: the run's random streams (``"freeze_choice"``; needed for ``"random"``).
    """

    def __init__(
        self,
        num_devices: int,
        num_params: int,
        device: torch.device,
        *,
        selection: str = "stability",
        aggregation: str = "weighted",
        unmoved_stability: float = 1.0,
        streams: Any = None,
    ) -> None:
        if selection not in SELECTIONS:
            raise ValueError(f"unknown selection {selection!r}; known: {list(SELECTIONS)}")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {aggregation!r}; known: {list(AGGREGATIONS)}")
        if selection == "random" and streams is None:
            raise ValueError("selection 'random' needs the run's random streams")
        self.num_devices = num_devices
        self.num_params = num_params
        self.device = device
        self.selection = selection
        self.aggregation = aggregation
        self.unmoved_stability = float(unmoved_stability)
        self.streams = streams
        self.frame: int | None = None
        self.w_frame = torch.zeros(num_params, device=device)
        self.mask: torch.Tensor | None = None
        self.dU = torch.zeros(1, num_params, device=device)
        self.dU_abs = torch.zeros(1, num_params, device=device)
        self.scores: torch.Tensor | None = None

    # ------------------------------------------------------------------ frame
    def begin_frame(self, frame: int, w: torch.Tensor, update: UpdateInputs) -> None:
        """Fix the frame's masks (``FreezingInputs.frozen_count``: ``(N,)`` ints in ``[0, D]``)."""
        counts = check_counts(
            "frozen_count",
            expect_inputs(update, FreezingInputs).frozen_count,
            self.num_devices,
            self.num_params,
        )
        self.frame = int(frame)
        self.w_frame = w.clone()
        if not counts.any():
            self.mask = None
        elif self.selection == "random":
            self.mask = self._random_masks(counts, frame)
        elif self.scores is None:
            raise ValueError(
                "freezing by stability needs the scores of a finished frame; frame 0 must freeze "
                "nothing (the scheme's cost model sees to it)"
            )
        else:
            self.mask = freeze_masks(self.scores, counts.astype(np.int64))
        rows = 1 if self.mask is None else self.num_devices
        self.dU = torch.zeros(rows, self.num_params, device=self.device)
        self.dU_abs = torch.zeros(rows, self.num_params, device=self.device)

    def _random_masks(self, counts: np.ndarray, frame: int) -> torch.Tensor:
        mask = np.zeros((self.num_devices, self.num_params), dtype=bool)
        for n in np.flatnonzero(counts):
            rng = self.streams.device("freeze_choice", int(n), int(frame))
            mask[n, rng.choice(self.num_params, size=int(counts[n]), replace=False)] = True
        return torch.as_tensor(mask, device=self.device)

    def end_frame(self) -> None:
        """Stability scores of the frame (eq. 6) from the accumulators, which are then reset."""
        self.scores = stability_scores(self.dU, self.dU_abs, self.unmoved_stability)
        self.dU = torch.zeros_like(self.dU)
        self.dU_abs = torch.zeros_like(self.dU_abs)

    def frame_view(self) -> FreezingView:
        """The current frame's state for updates computed later (tensors are replaced, never
        changed in place, at the next frame start: the view stays valid)."""
        return FreezingView(self.w_frame, self.mask)

    def view_from_state(self, state: dict[str, Any]) -> FreezingView:
        """A view saved with :meth:`FreezingView.state_dict`."""
        return FreezingView.from_state(state, self.device)

    def aggregate_stale(
        self,
        uploads: torch.Tensor,
        frozen: torch.Tensor | None,
        weights: torch.Tensor,
        aux: Sequence[Any] = (),
    ) -> torch.Tensor:
        """:meth:`aggregate` of uploads made under their own frames' masks (``frozen``
        ``(k, D)``, None: nothing frozen)."""
        if self.aggregation == "per_coordinate" and frozen is not None:
            return aggregate.per_coordinate_mean(uploads, weights, ~frozen)
        return aggregate.weighted_mean(uploads, weights)

    # ------------------------------------------------------------------ slot
    def _frozen_rows(self, ids: np.ndarray) -> torch.Tensor | None:
        """``mask[ids]`` if any of ``ids`` froze something, else None."""
        if self.mask is None:
            return None
        rows = self.mask[torch.as_tensor(ids, device=self.device)]
        return rows if bool(rows.any()) else None

    def local_params(self, w: torch.Tensor, ids: np.ndarray) -> torch.Tensor:
        """``w`` (shared) when none of ``ids`` froze anything, else ``(n, D)`` ``w_tilde_n``."""
        rows = self._frozen_rows(ids)
        return w if rows is None else torch.where(rows, self.w_frame, w)

    def trained(self, ids: np.ndarray) -> torch.Tensor | None:
        """Everything but the frozen parameters (None when none of ``ids`` froze anything)."""
        rows = self._frozen_rows(ids)
        return None if rows is None else ~rows

    def uploads(self, grads: torch.Tensor, ids: np.ndarray, slot: int) -> torch.Tensor:
        """The gradients with frozen entries set to 0 (not trained, not uploaded)."""
        rows = self._frozen_rows(ids)
        return grads if rows is None else grads.masked_fill(rows, 0.0)

    def aggregate(
        self, uploads: torch.Tensor, ok: np.ndarray, weights: torch.Tensor
    ) -> torch.Tensor:
        """Eq. 3 (``weighted``), or per-coordinate normalisation while something is frozen."""
        if self.aggregation == "per_coordinate" and self.mask is not None:
            uploaded = ~self.mask[torch.as_tensor(ok, device=self.device)]
            return aggregate.per_coordinate_mean(uploads, weights, uploaded)
        return aggregate.weighted_mean(uploads, weights)

    def after_step(self, w_t: torch.Tensor, w_next: torch.Tensor) -> None:
        """Eq. 5 for every device: ``dU += w_tilde - w_next``, ``dU_abs += |...|``."""
        if self.mask is None:
            diff = (w_t - w_next).unsqueeze(0)
        else:
            diff = torch.where(self.mask, self.w_frame - w_next, w_t - w_next)
        self.dU += diff
        self.dU_abs += diff.abs()

    # ------------------------------------------------------------------ views and state
    def masks(self) -> torch.Tensor:
        """``(N, D)`` bool, True where device ``n`` has frozen parameter ``d`` this frame."""
        if self.mask is None:
            return torch.zeros(self.num_devices, self.num_params, dtype=torch.bool)
        return self.mask.detach().cpu()

    def frozen_fraction(self) -> np.ndarray:
        """``(N,)`` fraction of parameters each device has frozen in the current frame."""
        if self.mask is None:
            return np.zeros(self.num_devices)
        return (self.mask.sum(dim=1).cpu().numpy() / self.num_params).astype(np.float64)

    def score_array(self) -> np.ndarray | None:
        """``(N, D)`` stability scores of the last finished frame (None before the first)."""
        if self.scores is None:
            return None
        return self.scores.expand(self.num_devices, -1).cpu().numpy().copy()

    def accumulators(self) -> tuple[np.ndarray, np.ndarray]:
        """``(dU, dU_abs)``, each ``(N, D)``, accumulated so far in the current frame."""
        n, d = self.num_devices, self.num_params
        return (
            self.dU.expand(n, d).cpu().numpy().copy(),
            self.dU_abs.expand(n, d).cpu().numpy().copy(),
        )

    def state_dict(self) -> dict[str, Any]:
        """At a frame boundary the accumulators are empty and the next frame sets new masks:
        the state is the last frame's scores (None before the first frame ended)."""
        if self.dU_abs.any():
            raise RuntimeError("the freezing rule's state can only be saved at a frame boundary")
        return {"scores": None if self.scores is None else self.scores.cpu().numpy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the scores."""
        scores = state["scores"]
        if scores is None:
            self.scores = None
            return
        arr = np.asarray(scores, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[1] != self.num_params:
            raise ValueError(f"saved scores have shape {arr.shape}, D is {self.num_params}")
        self.scores = torch.as_tensor(arr, device=self.device)
