"""Top-K sparsification with error accumulation (Shi et al., IJCAI 2019) at the proposed
scheme's ``gamma``: full local compute, the ``K`` largest entries of gradient + residual sent."""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field

from ..config.distributions import WHOLE_NUMBER
from ..updates import TopKInputs, UpdateRuleSpec
from ..world.system import SystemConstants
from .base import F64, CostPlan
from .common import Compression, CompressionScheme, ThresholdOptions


class TopKParams(ThresholdOptions):
    """``index_bits``: bits sent per index with each value: 0 (the paper's accounting: values
    only), 32, or ``"log2"`` (``ceil(log2 D)``, a dense index code). With indices counted the
    payload stays the proposed scheme's: ``K = (1 - gamma) S / (32 + index_bits)``."""

    index_bits: Annotated[Literal[0, 32, "log2"], WHOLE_NUMBER] = Field(0)


def topk_costs(gamma: F64, system: SystemConstants, index_bits: int) -> Compression:
    """``K = rint((1 - gamma) S / (b + index_bits))`` values (``b`` bits each, plus the index),
    full compute (``c B / f``); update-rule input ``{"k": K}``."""
    d, b = system.num_params, system.bits_per_param
    per_value = b + index_bits
    k = np.clip(np.rint((1.0 - gamma) * b * d / per_value), 0, d).astype(np.int64)
    n = k.shape[0]
    return Compression(
        cost=CostPlan(payload_bits=k.astype(np.float64) * per_value, compute_fraction=np.ones(n)),
        update=TopKInputs(k=k),
        columns={
            "compute_fraction": np.ones(n),
            "sent_values": k,
            "bits_per_value": np.full(n, float(per_value)),
        },
    )


class TopKEF(CompressionScheme):
    """Each device computes its full gradient, adds its residual, sends the ``K_n`` entries of
    largest magnitude (``K_n`` from the controller's ``gamma_n``) and keeps the rest, and what an
    outage lost, in its residual (learner rule ``topk_ef``). Power: Proposition 1 on the full
    compute time and the Top-K payload; deadline enforced."""

    name: ClassVar[str] = "topk_ef"
    Params = TopKParams

    def __init__(self, params: TopKParams, system: SystemConstants) -> None:
        ib = (
            math.ceil(math.log2(system.num_params))
            if params.index_bits == "log2"
            else int(params.index_bits)
        )
        self.index_bits = ib
        super().__init__(
            params,
            system,
            cost_model=lambda gamma, frame: topk_costs(gamma, system, ib),
            update_rule=UpdateRuleSpec("topk_ef"),
        )
