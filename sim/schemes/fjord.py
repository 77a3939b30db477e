"""FjORD ordered dropout (Horvath et al., NeurIPS 2021) at the proposed scheme's ``gamma``: each
device trains the width-``p`` sub-model, ``p = sqrt(1 - gamma)`` by default."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from ..config.architectures import width_costs
from ..errors import ScenarioError
from ..updates import OrderedDropoutInputs, UpdateRuleSpec
from ..world.system import SystemConstants
from .base import F64, CostPlan
from .common import Compression, CompressionScheme, ThresholdOptions


class FjordParams(ThresholdOptions):
    """``width_rule``: ``"sqrt"`` (``p = sqrt(1 - gamma)``: the sub-model has about ``1 - gamma`` of
    the parameters, the payload matches the proposed scheme's) or ``"linear"`` (``p = 1 - gamma``,
    "dropout percentage = freezing percentage" read literally: about ``(1 - gamma)^2`` of the
    parameters). ``bn_tiers``: BatchNorm running statistics are kept per width tier (``p`` rounded
    up to a multiple of ``1 / bn_tiers``); evaluation uses the full-width tier."""

    width_rule: Literal["sqrt", "linear"] = Field("sqrt")
    bn_tiers: int = Field(10, ge=1, le=100)


def fjord_costs(
    gamma: F64, system: SystemConstants, width_rule: str, architecture: tuple[str, str]
) -> Compression:
    """Width ``p`` per device; payload = the sub-model's parameters x 32 bits; compute fraction =
    the sub-model's multiply-accumulates / the full model's (counted layer by layer from the
    architecture, :mod:`wflsim.sim.config.architectures`); update-rule input ``{"width": p}``."""
    u = np.clip(1.0 - gamma, 0.0, 1.0)
    width = np.sqrt(u) if width_rule == "sqrt" else u
    params, macs = width_costs(*architecture, width)
    b = float(system.bits_per_param)
    return Compression(
        cost=CostPlan(payload_bits=params.astype(np.float64) * b, compute_fraction=macs),
        update=OrderedDropoutInputs(width=width),
        columns={
            "compute_fraction": macs,
            "sent_values": params.astype(np.int64),
            "bits_per_value": np.full(width.shape, b),
            "width": width,
        },
    )


class FjORD(CompressionScheme):
    """Each device trains and uploads the sub-model of width ``p_n``: every hidden layer keeps its
    first ``ceil(p C)`` channels (depthwise convolutions ``ceil(p C)`` groups), the first layer
    all input channels, the classifier all classes (learner rule ``ordered_dropout``); the server
    averages each coordinate over exactly the devices whose sub-model holds it. Power:
    Proposition 1 on the sub-model's payload and compute; deadline enforced.

    Needs the model's architecture: a network-only run takes it from ``learning.model`` and
    ``learning.dataset`` (``learning.num_params`` must be left unset).
    """

    name: ClassVar[str] = "fjord"
    Params = FjordParams

    def __init__(self, params: FjordParams, system: SystemConstants) -> None:
        arch = system.architecture
        if arch is None:
            raise ScenarioError(
                "learning.num_params",
                "scheme fjord computes each device's sub-model from the model's architecture, "
                "but learning.num_params replaces the model by a bare parameter count",
                "remove learning.num_params (a network-only run takes D from learning.model)",
            )
        rule, architecture = params.width_rule, arch
        super().__init__(
            params,
            system,
            cost_model=lambda gamma, frame: fjord_costs(gamma, system, rule, architecture),
            update_rule=UpdateRuleSpec("ordered_dropout", {"bn_tiers": params.bn_tiers}),
        )
