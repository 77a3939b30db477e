"""Learner-side update rules: what each device trains on, what it uploads, how the server
aggregates, and the per-device state that carries across slots and frames.

One module per rule, named by the schemes through ``wflsim.sim.updates.UpdateRuleSpec`` (the registry
of names, parameters and frame inputs is ``wflsim.sim.registry.UPDATE_RULES``;
:data:`wflsim.models.registry.RULE_BUILDERS` implements it, name for name: the built-in builders of
:func:`builtin_rules` and those registered from Python; :func:`wflsim.models.registry.build_rule`
builds one; the registry imports this package, never the other way round):

* ``freezing`` -- :class:`Freezing` (the paper's; selection by stability or at random);
* ``topk_ef`` -- :class:`TopKResidual` (Top-K with error accumulation);
* ``pruning`` -- :class:`ImportancePruning` (``(g w)^2`` importance);
* ``quantisation`` -- :class:`StochasticQuantisation` (FedHQ-like);
* ``ordered_dropout`` -- :class:`OrderedDropout` (FjORD's width-p sub-models).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
    "RuleBuilder",
    "RuleSettings",
    "UpdateRule",
    "builtin_rules",
    "freeze_masks",
    "stability_scores",
]


@dataclass(frozen=True)
class RuleSettings:
    """The learner's settings a rule may need (besides the scheme's parameters)."""

    num_devices: int
    num_params: int
    device: torch.device
    aggregation: str
    unmoved_stability: float
    streams: Any
    model: nn.Module | None = None
    architecture: tuple[str, str] | None = None


def _freezing(params: Mapping[str, Any], s: RuleSettings) -> UpdateRule:
    return Freezing(
        s.num_devices,
        s.num_params,
        s.device,
        selection=str(params.get("selection", "stability")),
        aggregation=s.aggregation,
        unmoved_stability=s.unmoved_stability,
        streams=s.streams,
    )


def _topk(params: Mapping[str, Any], s: RuleSettings) -> UpdateRule:
    return TopKResidual(s.num_devices, s.num_params, s.device)


def _pruning(params: Mapping[str, Any], s: RuleSettings) -> UpdateRule:
    aggregation = str(params.get("aggregation", "zeros"))
    return ImportancePruning(s.num_devices, s.num_params, s.device, aggregation)


def _quantisation(params: Mapping[str, Any], s: RuleSettings) -> UpdateRule:
    return StochasticQuantisation(s.num_devices, s.num_params, s.device, s.streams)


def _ordered_dropout(params: Mapping[str, Any], s: RuleSettings) -> UpdateRule:
    if s.model is None or s.architecture is None:
        raise ValueError(
            "ordered_dropout needs a catalogue model (TorchLearner.from_config, or "
            "architecture=(model, dataset))"
        )
    from wflsim.sim.config.architectures import layers

    tiers = int(params.get("bn_tiers", 10))
    return OrderedDropout(
        s.num_devices, s.num_params, s.device, s.model, layers(*s.architecture), tiers
    )


#: A rule's builder from the scheme's parameters and the learner's settings.
RuleBuilder = Callable[[Mapping[str, Any], RuleSettings], UpdateRule]


def builtin_rules() -> dict[str, RuleBuilder]:
    """The built-in rules' builders (the built-in entries of
    :data:`wflsim.models.registry.RULE_BUILDERS`, the implementation of every rule of
    ``wflsim.sim.registry.UPDATE_RULES`` by the same name)."""
    return {
        "freezing": _freezing,
        "topk_ef": _topk,
        "pruning": _pruning,
        "quantisation": _quantisation,
        "ordered_dropout": _ordered_dropout,
    }
