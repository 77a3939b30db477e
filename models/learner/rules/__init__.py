"""Learner-side update rules: what each device trains on, what it uploads, how the server
aggregates, and the per-device state that carries across slots and frames.

One module per rule, named by the schemes through ``sim.learner.UpdateRuleSpec``:

* ``freezing`` -- :class:`Freezing` (the paper's; selection by stability or at random);
* ``topk_ef`` -- :class:`TopKResidual` (Top-K with error accumulation);
* ``pruning`` -- :class:`ImportancePruning` (``(g w)^2`` importance);
* ``quantisation`` -- :class:`StochasticQuantisation` (FedHQ-like);
* ``ordered_dropout`` -- :class:`OrderedDropout` (FjORD's width-p sub-models).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from .base import AGGREGATIONS, PlainRule, UpdateRule
from .freezing import Freezing, freeze_masks, stability_scores
from .ordered_dropout import OrderedDropout
from .pruning import ImportancePruning
from .quantisation import StochasticQuantisation
from .topk import TopKResidual

__all__ = [
    "AGGREGATIONS",
    "Freezing",
    "ImportancePruning",
    "OrderedDropout",
    "PlainRule",
    "StochasticQuantisation",
    "TopKResidual",
    "UpdateRule",
    "build_rule",
    "freeze_masks",
    "stability_scores",
]


def build_rule(
    name: str,
    params: Mapping[str, Any],
    *,
    num_devices: int,
    num_params: int,
    device: torch.device,
    aggregation: str,
    unmoved_stability: float,
    streams: Any,
    model: nn.Module | None = None,
    architecture: tuple[str, str] | None = None,
) -> UpdateRule:
    """The rule ``name`` with the scheme's ``params`` and the learner's settings (``model`` and
    its catalogue ``architecture`` for the rules that need the network's structure)."""
    if name == "freezing":
        return Freezing(
            num_devices,
            num_params,
            device,
            selection=str(params.get("selection", "stability")),
            aggregation=aggregation,
            unmoved_stability=unmoved_stability,
            streams=streams,
        )
    if name == "topk_ef":
        return TopKResidual(num_devices, num_params, device)
    if name == "pruning":
        return ImportancePruning(
            num_devices, num_params, device, str(params.get("aggregation", "zeros"))
        )
    if name == "quantisation":
        return StochasticQuantisation(num_devices, num_params, device, streams)
    if name == "ordered_dropout":
        if model is None or architecture is None:
            raise ValueError(
                "ordered_dropout needs a catalogue model (TorchLearner.from_config, or "
                "architecture=(model, dataset))"
            )
        from wflsim.sim.config.architectures import layers

        return OrderedDropout(
            num_devices,
            num_params,
            device,
            model,
            layers(*architecture),
            int(params.get("bn_tiers", 10)),
        )
    raise ValueError(f"unknown update rule {name!r}")
