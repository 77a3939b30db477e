"""FedHQ-like heterogeneous quantisation (after Chen, Shen, Zhang, Tang, IEEE TWC 2021) at the
proposed scheme's ``gamma``: stochastic uniform quantisation at ``floor(32 (1 - gamma))`` bits per
coordinate, error-weighted aggregation (a documented stand-in for the paper's weights)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..updates import QuantisationInputs, UpdateRuleSpec
from ..world.system import SystemConstants
from .base import F64, CostPlan
from .common import Compression, CompressionScheme, ThresholdOptions

#: Bits per upload besides the coordinates: the gradient's norm and its quantisation error.
SIDE_BITS = 64
#: Fewest bits per coordinate that carry a level (1 sign bit + at least 1 level bit).
MIN_BITS = 2


def fedhq_costs(gamma: F64, system: SystemConstants) -> Compression:
    """``b_n = floor(b (1 - gamma_n))`` bits per coordinate (``b`` = bits per parameter, 32):
    1 sign bit and ``b_n - 1`` level bits (``s_n = 2^(b_n - 1) - 1`` levels), payload
    ``D b_n + 64``, full compute. Below 2 bits no level fits the budget: the device does not
    upload (payload 0, it sits the frame's slots out). Update-rule input ``{"bits": b_n}``."""
    d, b = system.num_params, system.bits_per_param
    bits = np.floor(b * (1.0 - gamma) + 1e-9).astype(np.int64)
    bits = np.where(bits >= MIN_BITS, bits, 0)
    sends = bits > 0
    n = bits.shape[0]
    return Compression(
        cost=CostPlan(
            payload_bits=np.where(sends, d * bits.astype(np.float64) + SIDE_BITS, 0.0),
            compute_fraction=np.ones(n),
        ),
        update=QuantisationInputs(bits=bits),
        columns={
            "compute_fraction": np.ones(n),
            "sent_values": np.where(sends, d, 0).astype(np.int64),
            "bits_per_value": bits.astype(np.float64),
        },
    )


class FedHQ(CompressionScheme):
    """Each device quantises its full gradient stochastically and without bias at ``b_n`` bits
    per coordinate and sends its relative quantisation error ``e_n = ||Q(g) - g||^2 / ||g||^2``;
    the server weights the uploads that arrived by ``B_n / (1 + e_n)`` (learner rule
    ``quantisation``; named "FedHQ-like" because the original weight formula is a stand-in).
    Power: Proposition 1 on the quantised payload and full compute; deadline enforced."""

    name: ClassVar[str] = "fedhq"
    Params = ThresholdOptions

    def __init__(self, params: ThresholdOptions, system: SystemConstants) -> None:
        super().__init__(
            params,
            system,
            cost_model=lambda gamma, frame: fedhq_costs(gamma, system),
            update_rule=UpdateRuleSpec("quantisation"),
        )
