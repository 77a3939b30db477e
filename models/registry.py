"""Every registry of the learning side, in one module: the torch implementations of what
:mod:`wflsim.sim.registry` names.

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
  ones (:func:`wflsim.models.learner.strategies.builtin_strategies`) and those registered from
  Python.

The built-in datasets, models and partitions are implemented by :mod:`wflsim.models.data` and
:mod:`wflsim.models.nets` themselves (they read files, take ``alpha``, ...); their registries here hold
only those registered from Python. ``wflsim.app.extensions`` registers each user entry on both
sides, description first.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from wflsim.sim.registry import Registry

if TYPE_CHECKING:
    from .extensions import ModelFactory, PartitionFn, Tensors
    from .learner.rules import RuleBuilder
    from .learner.strategies import StrategyBuilder


def _rules() -> Mapping[str, RuleBuilder]:
    from .learner.rules import builtin_rules

    return builtin_rules()


def _strategies() -> Mapping[str, StrategyBuilder]:
    from .learner.strategies import builtin_strategies

    return builtin_strategies()


def _callable(name: str, entry: Any) -> None:
    if not callable(entry):
        raise ValueError(f"the learner side of {name!r} must be callable")


DATASET_TENSORS: Registry[Tensors] = Registry("dataset")
MODEL_FACTORIES: Registry[ModelFactory] = Registry("model", check=_callable)
PARTITION_FUNCTIONS: Registry[PartitionFn] = Registry("partition", check=_callable)
RULE_BUILDERS: Registry[RuleBuilder] = Registry("update_rule", builtins=_rules, check=_callable)
STRATEGY_BUILDERS: Registry[StrategyBuilder] = Registry(
    "strategy", builtins=_strategies, check=_callable
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
