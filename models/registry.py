"""Every registry of the learning side, in one module: the torch implementations of what
:mod:`wflsim.sim.registry` names, and the ways in and out of them.

A kind of :mod:`wflsim.sim.registry` that needs learner-side code has its implementations here, under
the same names, in a :class:`wflsim.sim.registry.Registry` of its own (``sim`` never imports torch, so
it cannot hold them):

* :data:`DATASET_TENSORS` -- a registered dataset's ``(x_train, y_train, x_test, y_test)``;
* :data:`MODEL_FACTORIES` -- a registered model's ``factory(input_shape, num_classes)``;
* :data:`PARTITION_FUNCTIONS` -- a registered partition's ``fn(labels, num_devices, rng)``;
* :data:`RULE_BUILDERS` -- every update rule's ``builder(params, settings)``: the built-in ones
  (:func:`wflsim.models.learner.rules.builtin_rules`) and those registered from Python;
* :data:`STRATEGY_BUILDERS` -- every server strategy's ``builder(params, settings)`` (a
  ``wflsim.models.learner.strategies.Strategy`` class or a function returning one): the built-in
  ones (:func:`builtin_strategies`) and those registered from Python.

The built-in datasets, models and partitions are implemented by :mod:`wflsim.models.data` and
:mod:`wflsim.models.nets` themselves (they read files, take ``alpha``, ...); their registries here hold
only those registered from Python. ``wflsim.app.extensions`` registers each user entry on both
sides, description first (:func:`add_dataset`, :func:`add_model`, :func:`add_partition`, which
check the objects with :mod:`wflsim.models.extensions`).

The direction: this module sits above what it lists (:mod:`wflsim.models.extensions`,
:mod:`wflsim.models.nets`, :mod:`wflsim.models.learner.rules` and the strategies' modules), which
never import it; what builds by name (:func:`build_model`, :func:`build_rule`,
:func:`build_strategy`) is here, and the learner (:mod:`wflsim.models.learner.core`) and
:mod:`wflsim.models.data` look names up here. The built-in rules and strategies are read on a
registry's first use (the modules under :mod:`wflsim.models.learner` import the learner, which
imports this module).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from torch import nn

from wflsim.sim import registry as sim_registry
from wflsim.sim.config.catalogue import PartitionInfo
from wflsim.sim.registry import Registry

from . import extensions, nets
from .extensions import ModelFactory, PartitionFn, Tensors

if TYPE_CHECKING:
    from .learner.rules import RuleBuilder, UpdateRule
    from .learner.strategies import Strategy, StrategyBuilder, StrategySettings


def _rules() -> Mapping[str, RuleBuilder]:
    from .learner.rules import builtin_rules

    return builtin_rules()


def builtin_strategies() -> dict[str, StrategyBuilder]:
    """The built-in entries of :data:`STRATEGY_BUILDERS`: the server-side strategies of
    :mod:`wflsim.models.learner.strategies`, the aggregating ones of
    :mod:`wflsim.models.learner.strategies_aggregation` and the client-side ones of
    :mod:`wflsim.models.learner.strategies_client`."""
    from .learner.strategies import BUILT_IN
    from .learner.strategies_aggregation import AGGREGATING
    from .learner.strategies_client import CLIENT_BUILT_IN

    return {**BUILT_IN, **AGGREGATING, **CLIENT_BUILT_IN}


def _callable(name: str, entry: Any) -> None:
    if not callable(entry):
        raise ValueError(f"the learner side of {name!r} must be callable")


DATASET_TENSORS: Registry[Tensors] = Registry("dataset")
MODEL_FACTORIES: Registry[ModelFactory] = Registry("model", check=_callable)
PARTITION_FUNCTIONS: Registry[PartitionFn] = Registry("partition", check=_callable)
RULE_BUILDERS: Registry[RuleBuilder] = Registry("update_rule", builtins=_rules, check=_callable)
STRATEGY_BUILDERS: Registry[StrategyBuilder] = Registry(
    "strategy", builtins=builtin_strategies, check=_callable
)

#: The learner-side registries, by the kind of :data:`wflsim.sim.registry.REGISTRIES` they implement.
REGISTRIES: Mapping[str, Registry[Any]] = MappingProxyType(
    {
        r.kind: r
        for r in (
            DATASET_TENSORS,
            MODEL_FACTORIES,
            PARTITION_FUNCTIONS,
            RULE_BUILDERS,
            STRATEGY_BUILDERS,
        )
    }
)


def add_dataset(
    name: str, train: Any, test: Any, num_classes: int | None = None, *, replace: bool = False
) -> None:
    """Register a dataset (see :func:`wflsim.register_dataset`) in both registries.

    Raises:
        ValueError: a bad or taken name, or data that cannot be a classification dataset (the
            message says which).
    """
    sim_registry.DATASETS.check_name(name, replace=replace)
    tensors, info = extensions.checked_dataset(train, test, num_classes)
    DATASET_TENSORS.register(name, tensors, replace=replace)
    sim_registry.DATASETS.register(name, info, replace=replace)


def add_model(
    name: str, factory: ModelFactory, datasets: tuple[str, ...] | None, *, replace: bool = False
) -> None:
    """Register a model factory (see :func:`wflsim.register_model`) in both registries; its
    parameter count is computed on first need, per dataset, from a model it builds."""
    sim_registry.MODELS.check_name(name, replace=replace)
    MODEL_FACTORIES.register(name, factory, replace=replace)
    sim_registry.MODELS.register(
        name, extensions.model_info(name, factory, datasets), replace=replace
    )


def add_partition(name: str, fn: PartitionFn, *, replace: bool = False) -> None:
    """Register a partition (see :func:`wflsim.register_partition`) in both registries."""
    sim_registry.PARTITIONS.check_name(name, replace=replace)
    PARTITION_FUNCTIONS.register(name, fn, replace=replace)
    sim_registry.PARTITIONS.register(name, PartitionInfo("registered from Python"), replace=replace)


def build_model(name: str, dataset: str) -> nn.Module:
    """Model ``name`` built for ``dataset``: one registered from Python
    (:func:`wflsim.models.extensions.build`, checked) or the catalogue's
    (:func:`wflsim.models.nets.build_model`), with the global torch RNG.

    Raises:
        DatasetError: a registered factory failed or built no usable module.
        ValueError: an unknown model, or a dataset it does not fit.
    """
    if name in MODEL_FACTORIES:
        return extensions.build(name, MODEL_FACTORIES[name], dataset)
    return nets.build_model(name, dataset)


def build_rule(name: str, params: Mapping[str, Any], **settings: Any) -> UpdateRule:
    """The rule ``name`` with the scheme's ``params`` and the learner's settings
    (:class:`wflsim.models.learner.rules.RuleSettings`: ``model`` and its catalogue
    ``architecture`` for the rules that need the network's structure).

    Raises:
        ValueError: an unknown rule.
    """
    from .learner.rules import RuleSettings

    if name not in RULE_BUILDERS:
        raise ValueError(f"unknown update rule {name!r}; known: {sorted(RULE_BUILDERS)}")
    return RULE_BUILDERS[name](params, RuleSettings(**settings))


def build_strategy(spec: Any, settings: StrategySettings) -> Strategy:
    """The strategy of ``spec`` (a ``wflsim.sim.strategies.StrategySpec``: its parameters
    validated by the strategy's model) built for ``settings``.

    Raises:
        ValueError: an unknown strategy, bad parameters, or a builder that returns no
            :class:`~wflsim.models.learner.strategies.Strategy`.
    """
    from .learner.strategies import Strategy

    built = STRATEGY_BUILDERS[spec.name](spec.validated(sim_registry.STRATEGIES), settings)
    if not isinstance(built, Strategy):
        raise ValueError(
            f"strategy {spec.name!r}: its builder returned {type(built).__name__}, not a "
            "wflsim.Strategy"
        )
    built.registered_name = spec.name
    return built
