"""FjORD ordered dropout (Horvath et al., NeurIPS 2021): rule ``ordered_dropout``.

Device ``n`` trains the sub-model of width ``p_n`` (frame input ``{"width": (N,)}``): every hidden
layer keeps its first ``ceil(p C)`` channels, the first layer all input channels, the classifier all
classes (the masks come from :func:`wflsim.models.submodels.flat_width_mask` on the layer table of
:mod:`wflsim.sim.config.architectures`). The sub-model is the full model with the dropped parameters
set to 0: it trains at ``w * m_n`` and uploads ``g * m_n`` (the mask on the gradient matters: with
ResNet-20's option-A shortcuts below ``p = 1/2`` some dropped weights get non-zero gradients). The
server averages each coordinate over exactly the devices whose sub-model holds it (nested
per-coordinate averaging, weights ``B_n``); a coordinate no device trained keeps its value.

BatchNorm: FjORD keeps separate running statistics per width. Here per width tier: ``p`` rounded
up to a multiple of ``1 / bn_tiers``; a device starts from its tier's statistics, and after a slot
each tier's statistics become, channel by channel, the mean over the tier's successful devices
that kept the channel (integer counters: the max). The global model is evaluated at full width
with the full-width tier's statistics.

Stale updates (``[server]`` semi_sync / async): an update trains the sub-model of the width its
device had in the frame it started in (the frame's widths are kept, :class:`WidthView`, until
every update started in that frame is computed or dropped), at the model version it downloaded,
from its tier's statistics at that version (:meth:`OrderedDropout.version_state`: the tiers as
they were; a tier that did not exist yet starts from the version's global statistics); the step
that applies it averages each coordinate over the step's updates whose sub-model holds it, and
updates each tier from the step's updates of that tier, by their own widths. A tier comes to
exist when a step first applies an update of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from wflsim.sim.config.architectures import Layer, kept
from wflsim.sim.updates import OrderedDropoutInputs, UpdateInputs, expect_inputs

from ...submodels import flat_width_mask
from .. import aggregate
from .base import FrameView, PlainRule, StaleUpdate


class WidthView(FrameView):
    """A frame's widths ``(N,)``, for updates computed later (stale updates): device ``n``
    trains ``w^(v) * m_n`` (its width's mask) from its tier's statistics at the version it
    downloaded (``at``: the tiers then, :meth:`OrderedDropout.version_state`)."""

    def __init__(self, widths: np.ndarray, rule: OrderedDropout) -> None:
        self.widths = widths
        self.rule = rule

    def width(self, device: int) -> float:
        """Device ``device``'s width in the frame (> 0: a device of width 0 does not train)."""
        p = float(self.widths[device])
        if p <= 0:
            raise ValueError(f"device {device} has width 0 and cannot train")
        return p

    def local_params(self, w: torch.Tensor, device: int, at: Any = None) -> torch.Tensor:
        """``w * m_n`` (``w`` at full width)."""
        p = self.width(device)
        return w if p >= 1.0 else w * self.rule.width_mask(p)

    def frozen(self, device: int, at: Any = None) -> torch.Tensor | None:
        """The coordinates outside the sub-model (None at full width)."""
        p = self.width(device)
        return None if p >= 1.0 else ~self.rule.width_mask(p)

    def local_buffers(
        self, buffers: dict[str, torch.Tensor], device: int, at: Any = None
    ) -> dict[str, torch.Tensor]:
        """The device's tier's statistics at the downloaded version (the version's global
        statistics where the tier did not exist yet)."""
        if not buffers or at is None:
            return buffers
        tier: dict[str, torch.Tensor] | None = at.get(self.rule.tier(self.width(device)))
        return buffers if tier is None else tier

    def state_dict(self) -> dict[str, Any]:
        """The widths."""
        return {"width": self.widths.copy()}


class OrderedDropout(PlainRule):
    """Ordered dropout (see the module docstring).

    Args:
        num_devices, num_params: ``N``, ``D``.
        device: the torch device.
        model: the learner's network (the layer table is checked against it).
        table: its layer table (``sim.config.architectures.layers(model, dataset)``).
        bn_tiers: number of width tiers with their own BatchNorm statistics.
    """

    #: each coordinate is averaged over the devices whose sub-model holds it (always)
    aggregation: ClassVar[str] = "per_coordinate"

    def __init__(
        self,
        num_devices: int,
        num_params: int,
        device: torch.device,
        model: nn.Module,
        table: Sequence[Layer],
        bn_tiers: int = 10,
    ) -> None:
        if bn_tiers < 1:
            raise ValueError(f"bn_tiers must be >= 1, got {bn_tiers}")
        self.num_devices = num_devices
        self.num_params = num_params
        self.device = device
        self.model = model
        self.table = tuple(table)
        self.bn_tiers = int(bn_tiers)
        self.bn_layers = [
            (layer.name, layer.out_channels) for layer in table if layer.kind == "batchnorm"
        ]
        self.frame: int | None = None
        self.widths = np.ones(num_devices)
        self.tiers: dict[int, dict[str, torch.Tensor]] = {}
        self._masks_by_width: dict[float, torch.Tensor] = {}
        self._ids = np.empty(0, dtype=np.int64)
        self._masks: torch.Tensor | None = None

    # ------------------------------------------------------------------ masks
    def width_mask(self, width: float) -> torch.Tensor:
        """``(D,)`` bool mask of the width-``width`` sub-model (cached per width)."""
        key = float(width)
        if key not in self._masks_by_width:
            mask = flat_width_mask(self.model, self.table, key).to(self.device)
            self._masks_by_width[key] = mask
        return self._masks_by_width[key]

    def tier(self, width: float) -> int:
        """The BatchNorm tier of a width: ``ceil(p bn_tiers)`` in ``[1, bn_tiers]``."""
        return min(self.bn_tiers, max(1, math.ceil(width * self.bn_tiers - 1e-9)))

    # ------------------------------------------------------------------ frame and slot
    def begin_frame(self, frame: int, w: torch.Tensor, update: UpdateInputs) -> None:
        """Take the frame's widths (0: the device does not train)."""
        widths = np.asarray(expect_inputs(update, OrderedDropoutInputs).width, dtype=np.float64)
        if widths.shape != (self.num_devices,) or not np.all((widths >= 0) & (widths <= 1)):
            raise ValueError(f"width must be ({self.num_devices},) values in [0, 1]")
        self.widths = widths.copy()
        self.frame = int(frame)

    def local_params(self, w: torch.Tensor, ids: np.ndarray) -> torch.Tensor:
        """``w * m_n`` per device (``w`` when every device of ``ids`` runs at full width)."""
        widths = self.widths[ids]
        if (widths <= 0).any():
            raise ValueError(f"devices {ids[widths <= 0].tolist()} have width 0 and cannot train")
        self._ids = ids
        if (widths >= 1.0).all():
            self._masks = None
            return w
        self._masks = torch.stack([self.width_mask(p) for p in widths])
        return w * self._masks

    def trained(self, ids: np.ndarray) -> torch.Tensor | None:
        """The sub-models' coordinates of the last :meth:`local_params` (None: full width)."""
        if not np.array_equal(ids, self._ids):
            raise RuntimeError("trained() must follow local_params() for the same devices")
        return self._masks

    def uploads(self, grads: torch.Tensor, ids: np.ndarray, slot: int) -> torch.Tensor:
        """The gradients on the sub-model's coordinates."""
        if not np.array_equal(ids, self._ids):
            raise RuntimeError("uploads() must follow local_params() for the same devices")
        return grads if self._masks is None else grads.masked_fill(~self._masks, 0.0)

    def aggregate(
        self, uploads: torch.Tensor, ok: np.ndarray, weights: torch.Tensor
    ) -> torch.Tensor:
        """Each coordinate averaged over the successful devices whose sub-model holds it."""
        if self._masks is None:
            return aggregate.weighted_mean(uploads, weights)
        pos = {int(n): r for r, n in enumerate(self._ids)}
        rows = torch.as_tensor([pos[int(n)] for n in ok], device=self.device)
        return aggregate.per_coordinate_mean(uploads, weights, self._masks[rows])

    def settle(self, ok: np.ndarray) -> None:
        """Forget the slot's masks."""
        self._masks = None

    # ------------------------------------------------------------------ BatchNorm tiers
    def _tier_buffers(self, t: int, buffers: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if t not in self.tiers:
            self.tiers[t] = {k: v.clone() for k, v in buffers.items()}
        return self.tiers[t]

    def local_buffers(
        self, buffers: dict[str, torch.Tensor], ids: np.ndarray
    ) -> dict[str, torch.Tensor] | None:
        """Each device starts from its width tier's statistics."""
        if not buffers:
            return None
        per = [self._tier_buffers(self.tier(p), buffers) for p in self.widths[ids]]
        return {k: torch.stack([b[k] for b in per]) for k in buffers}

    def aggregate_buffers(
        self,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor],
        rows: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """Update each tier present among the successful devices, channel by channel over the
        devices that kept the channel; the global buffers become the full-width tier's."""
        if not device_buffers:
            return buffers
        ids = self._ids[rows.cpu().numpy()]
        return self._update_tiers(buffers, device_buffers, rows, self.widths[ids])

    def _update_tiers(
        self,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor],
        rows: torch.Tensor,
        widths: np.ndarray,
    ) -> dict[str, torch.Tensor]:
        """:meth:`aggregate_buffers` for the rows ``rows`` of widths ``widths``."""
        tiers = np.array([self.tier(p) for p in widths])
        for t in np.unique(tiers):
            sel = np.flatnonzero(tiers == t)
            tb = self._tier_buffers(int(t), buffers)
            sel_rows = rows[torch.as_tensor(sel, device=rows.device)]
            for name, channels in self.bn_layers:
                keep = torch.as_tensor(
                    [[c < kept(channels, float(widths[i])) for c in range(channels)] for i in sel],
                    device=self.device,
                )
                weight = keep.to(torch.float32)
                count = weight.sum(dim=0)
                for stat in ("running_mean", "running_var"):
                    key = f"{name}.{stat}"
                    if key not in device_buffers:
                        continue
                    vals = device_buffers[key][sel_rows]
                    mean = (weight * vals).sum(dim=0) / count.clamp_min(1.0)
                    tb[key] = torch.where(count > 0, mean, tb[key])
                key = f"{name}.num_batches_tracked"
                if key in device_buffers:
                    tb[key] = device_buffers[key][sel_rows].max(dim=0).values
        full = self.tiers.get(self.bn_tiers)
        return dict(buffers) if full is None else {k: v.clone() for k, v in full.items()}

    # ------------------------------------------------------------------ stale updates
    def frame_view(self) -> WidthView:
        """The frame's widths (replaced, never changed, at the next frame start)."""
        return WidthView(self.widths, self)

    def view_from_state(self, state: dict[str, Any]) -> WidthView:
        """The view of :meth:`WidthView.state_dict`."""
        return WidthView(np.asarray(state["width"], dtype=np.float64), self)

    def version_state(self, w: torch.Tensor) -> dict[int, dict[str, torch.Tensor]]:
        """The tiers' statistics now (a shallow copy: a step replaces a tier's tensors, never
        changes them)."""
        return {t: dict(bufs) for t, bufs in self.tiers.items()}

    def version_state_dict(self, at: Any) -> dict[str, Any]:
        """The tiers of a version (numpy)."""
        return {str(t): {k: v.cpu().numpy() for k, v in bufs.items()} for t, bufs in at.items()}

    def version_state_from(self, state: Any, w: torch.Tensor) -> dict[int, dict[str, Any]]:
        """The tiers of :meth:`version_state_dict`."""
        return {
            int(t): {k: torch.as_tensor(np.asarray(v), device=self.device) for k, v in b.items()}
            for t, b in (state or {}).items()
        }

    def stale_uploads(
        self, grads: Sequence[torch.Tensor], updates: Sequence[StaleUpdate]
    ) -> tuple[list[torch.Tensor], list[Any]]:
        """The gradients on the sub-models' coordinates (masked already); each update's width
        goes with it (the step's nested averaging and tiers)."""
        return list(grads), [float(u.view.widths[u.device]) for u in updates]

    def aggregate_stale(
        self,
        uploads: torch.Tensor,
        frozen: torch.Tensor | None,
        weights: torch.Tensor,
        aux: Sequence[Any],
    ) -> torch.Tensor:
        """Each coordinate averaged over the step's updates whose sub-model holds it
        (``frozen``: the coordinates outside each update's sub-model; None: all at full width)."""
        if frozen is None:
            return aggregate.weighted_mean(uploads, weights)
        return aggregate.per_coordinate_mean(uploads, weights, ~frozen)

    def aggregate_buffers_stale(
        self,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor],
        rows: torch.Tensor,
        aux: Sequence[Any],
    ) -> dict[str, torch.Tensor]:
        """:meth:`aggregate_buffers` with each update's own width (``aux``)."""
        if not device_buffers:
            return buffers
        widths = np.array([float(aux[int(r)]) for r in rows.cpu().numpy()], dtype=np.float64)
        return self._update_tiers(buffers, device_buffers, rows, widths)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The BatchNorm statistics of every tier that exists."""
        return {
            "tiers": {
                str(t): {k: v.cpu().numpy() for k, v in bufs.items()}
                for t, bufs in self.tiers.items()
            }
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the tiers."""
        self.tiers = {
            int(t): {k: torch.as_tensor(np.asarray(v), device=self.device) for k, v in bufs.items()}
            for t, bufs in state["tiers"].items()
        }
