"""Importance pruning (Liu et al., IEEE Trans. Commun. 2022) at the proposed scheme's ``gamma``."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from ..updates import PruningInputs, UpdateRuleSpec
from ..world.system import SystemConstants
from .base import F64, CostPlan
from .common import Compression, CompressionScheme, ThresholdOptions


class PruningParams(ThresholdOptions):
    """``aggregation``: pruned coordinates count as 0 in the average (``"zeros"``, eq. 3 as is) or
    each coordinate is averaged over the devices that kept it (``"per_coordinate"``)."""

    aggregation: Literal["zeros", "per_coordinate"] = Field("zeros")


def pruning_costs(gamma: F64, system: SystemConstants) -> Compression:
    """``kept = rint((1 - gamma) D)`` parameters trained and sent (no indices: the server
    recomputes the mask from broadcast quantities); modelled compute ``kept / D`` (an
    unstructured mask does not cut the dense FLOPs of the real PyTorch run); update-rule input
    ``{"kept": kept}``."""
    d, b = system.num_params, system.bits_per_param
    kept = np.clip(np.rint((1.0 - gamma) * d), 0, d).astype(np.int64)
    fraction = kept / d
    return Compression(
        cost=CostPlan(payload_bits=kept.astype(np.float64) * b, compute_fraction=fraction),
        update=PruningInputs(kept=kept),
        columns={
            "compute_fraction": fraction,
            "sent_values": kept,
            "bits_per_value": np.full(kept.shape, float(b)),
        },
    )


class Pruning(CompressionScheme):
    """Each slot, device ``n`` keeps its ``kept_n`` most important parameters, importance
    ``(g_j w_j)^2`` with ``g`` the last aggregated global gradient and ``w`` the global model
    (first-order Taylor saliency), trains the pruned model (pruned weights 0 in the forward pass)
    and uploads its gradient on the kept coordinates (learner rule ``pruning``). Power:
    Proposition 1 on the kept payload and the modelled compute; deadline enforced."""

    name: ClassVar[str] = "pruning"
    Params = PruningParams

    def __init__(self, params: PruningParams, system: SystemConstants) -> None:
        super().__init__(
            params,
            system,
            cost_model=lambda gamma, frame: pruning_costs(gamma, system),
            update_rule=UpdateRuleSpec("pruning", {"aggregation": params.aggregation}),
        )
