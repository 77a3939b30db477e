"""Aggregation of the uploads that arrived in time: pure functions (paper eq. 3).

Shapes: ``uploads`` ``(k, D)`` (one row per successful device), ``weights`` ``(k,)`` float32 (the
devices' ``B_n``), results ``(D,)``.
"""

from __future__ import annotations

import numpy as np
import torch


def weighted_mean(uploads: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Eq. 3: ``g = sum_n B_n g_n / sum_n B_n`` (an entry a device did not upload counts as 0)."""
    return (weights @ uploads) / weights.sum()


def per_coordinate_mean(
    uploads: torch.Tensor, weights: torch.Tensor, uploaded: torch.Tensor
) -> torch.Tensor:
    """Each coordinate's weighted sum divided by the weight of the devices that uploaded it
    (``uploaded`` ``(k, D)`` bool); 0 where no device did."""
    total = weights @ uploads
    denom = weights @ uploaded.to(torch.float32)
    return torch.where(denom > 0, total / denom.clamp_min(1e-30), 0.0)


def average_buffers(
    per_device: dict[str, torch.Tensor], rows: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Global buffers from the successful devices' copies ``{name: (n, ...)}`` (rows ``rows``):
    the mean of floating buffers (BatchNorm running statistics), the max of integer counters."""
    out = {}
    for k, v in per_device.items():
        sel = v[rows]
        out[k] = sel.mean(dim=0) if sel.is_floating_point() else sel.max(dim=0).values
    return out


def computed_rows(
    computed: np.ndarray,
    uploads: torch.Tensor,
    trained: torch.Tensor | None,
    ids: np.ndarray,
    rows: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The uploads ``(len(ids), D)`` and ``trained`` masks of the devices ``ids`` among the
    slot's ``computed`` devices (at ``rows`` of ``uploads``): the slot's own tensors, not copies,
    when ``ids`` are every computed device in order (everyone made the deadline), else the rows
    gathered (read only)."""
    if ids.size == computed.size and bool((ids == computed).all()):
        return uploads, trained
    return uploads[rows], None if trained is None else trained[rows]
