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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from wflsim.sim.config.architectures import Layer, kept
from wflsim.sim.updates import OrderedDropoutInputs, UpdateInputs, expect_inputs

from ...submodels import flat_width_mask
from .. import aggregate
from .base import PlainRule


class OrderedDropout(PlainRule):
    """Ordered dropout (see the module docstring).

    Args:
        num_devices, num_params: ``N``, ``D``.
        device: the torch device.
        model: the learner's network (the layer table is checked against it).
        table: its layer table (``sim.config.architectures.layers(model, dataset)``).
        bn_tiers: number of width tiers with their own BatchNorm statistics.
    """

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
        self.widths = widths

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
        widths = self.widths[ids]
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
