"""Every registry of the simulation side, in one module: what a scenario may name, by kind.

One :class:`~wflsim.sim.registry_base.Registry` per kind of extension holds the kind's built-in
entries and those registered from Python (``wflsim.register_*``), in one table, through one way
in (:meth:`~wflsim.sim.registry_base.Registry.register`):

* :data:`DATASETS` -- ``learning.dataset``: a :class:`~wflsim.sim.config.catalogue.DatasetInfo` (input
  shape, classes, training samples), what validation and a network-only run need;
* :data:`MODELS` -- ``learning.model``: a :class:`~wflsim.sim.config.catalogue.ModelInfo` (the datasets
  it fits, its parameter count ``D`` per dataset);
* :data:`PARTITIONS` -- ``learning.partition``: a :class:`~wflsim.sim.config.catalogue.PartitionInfo`;
* :data:`SCHEMES` -- ``scheme.name``: the scheme's class (:mod:`wflsim.sim.schemes`);
* :data:`UPDATE_RULES` -- the name in a scheme's ``UpdateRuleSpec``: the rule's parameters and
  frame-input record (:class:`~wflsim.sim.updates.UpdateRule`);
* :data:`STRATEGIES` -- ``strategy.name``: the server strategy's parameter model and description
  (:class:`~wflsim.sim.strategies.StrategyInfo`);
* :data:`SERVERS` -- ``[server] mode``: the server class that runs it (:mod:`wflsim.sim.servers`).

Everything here is torch-free. The learner side of the kinds that have one (a dataset's tensors,
a model's factory, a partition's function, an update rule's or a strategy's builder) is registered under the same
name in :mod:`wflsim.models.registry`, which uses the same :class:`~wflsim.sim.registry_base.Registry` class.

This module sits above the modules whose built-in entries it lists
(:mod:`wflsim.sim.config.catalogue`, :mod:`wflsim.sim.schemes`, :mod:`wflsim.sim.servers`,
:mod:`wflsim.sim.updates`, :mod:`wflsim.sim.strategies`): it reads each kind's built-ins from
them on first use, and none of them imports it back (docs/architecture.md, "Registries"). What
looks a name up lives here or above (:func:`build_scheme`, :func:`make_server`, the catalogue's
lookups :func:`model_num_params`, ...), or is handed the table (``UpdateRuleSpec.entry(rules)``,
``StrategySpec.validated(strategies)``). The registry class, :data:`NAME` and
:class:`UnknownNameError` live in :mod:`wflsim.sim.registry_base`, below everything, and are
re-exported here.

Built-in entries cannot be replaced or unregistered; entries registered later are the user's
(``Registry.user_names``: what a sweep ships to its worker processes). A new kind is one more
``_kind(...)`` line below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from .registry_base import NAME, Registry, UnknownNameError

if TYPE_CHECKING:
    from .config.catalogue import DatasetInfo, ModelInfo, PartitionInfo
    from .schemes.base import Scheme, SchemeClass
    from .servers.base import Server
    from .servers.config import ServerConfig
    from .strategies import StrategyInfo
    from .updates import UpdateRule
    from .world.system import SystemConstants

_C = TypeVar("_C", bound=type)

# -- the kinds -------------------------------------------------------------------------------------


def _datasets() -> Mapping[str, DatasetInfo]:
    from .config.catalogue import builtin_datasets

    return builtin_datasets()


def _models() -> Mapping[str, ModelInfo]:
    from .config.catalogue import builtin_models

    return builtin_models()


def _partitions() -> Mapping[str, PartitionInfo]:
    from .config.catalogue import builtin_partitions

    return builtin_partitions()


def _schemes() -> Mapping[str, SchemeClass]:
    from .schemes import BUILT_IN

    classes: dict[str, Any] = {cls.name: cls for cls in BUILT_IN}
    return classes


def _update_rules() -> Mapping[str, UpdateRule]:
    from .updates import builtin_update_rules

    return builtin_update_rules()


def _strategies() -> Mapping[str, StrategyInfo]:
    from .strategies import builtin_strategies

    return builtin_strategies()


def _servers() -> Mapping[str, type[Server]]:
    from .servers import BUILT_IN_SERVERS

    return {mode: cls for cls in BUILT_IN_SERVERS for mode in cls.modes}


def _check_scheme_class(name: str, cls: Any) -> None:
    """Refuse a scheme class that cannot be registered as ``name``: its ``name`` attribute must
    be ``name`` and its ``Params`` a pydantic model (``wflsim.sim.schemes.base.Scheme``).

    Raises:
        ValueError: naming what is missing.
    """
    if getattr(cls, "name", None) != name:
        raise ValueError(f"scheme {name!r}: the class's name attribute must be {name!r}")
    params = getattr(cls, "Params", None)
    if not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise ValueError(f"scheme {name!r} needs a pydantic model as its Params attribute")


def _check_strategy(name: str, entry: Any) -> None:
    """Refuse a strategy entry whose ``params`` is not a pydantic model.

    Raises:
        ValueError: naming what is missing.
    """
    params = getattr(entry, "params", None)
    if not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise ValueError(f"strategy {name!r} needs a pydantic model of its parameters")


_KINDS: dict[str, Registry[Any]] = {}


def _kind(
    kind: str,
    builtins: Callable[[], Mapping[str, Any]] | None = None,
    check: Callable[[str, Any], None] | None = None,
) -> Registry[Any]:
    """The registry of ``kind``, listed in :data:`REGISTRIES`."""
    _KINDS[kind] = registry = Registry[Any](kind, builtins=builtins, check=check)
    return registry


DATASETS: Registry[DatasetInfo] = _kind("dataset", _datasets)
MODELS: Registry[ModelInfo] = _kind("model", _models)
PARTITIONS: Registry[PartitionInfo] = _kind("partition", _partitions)
SCHEMES: Registry[SchemeClass] = _kind("scheme", _schemes, _check_scheme_class)
UPDATE_RULES: Registry[UpdateRule] = _kind("update_rule", _update_rules)
#: ``strategy.name`` -> the server strategy's parameters and description
STRATEGIES: Registry[StrategyInfo] = _kind("strategy", _strategies, _check_strategy)
#: ``[server] mode`` -> the server class that runs it (:mod:`wflsim.sim.servers`)
SERVERS: Registry[type[Server]] = _kind("server", _servers)

#: Every registry of the simulation side, by kind, in the order above.
REGISTRIES: Mapping[str, Registry[Any]] = MappingProxyType(_KINDS)


# -- the lookups: what reads a table to validate, size or build ------------------------------------


def known_datasets() -> tuple[str, ...]:
    """The built-in datasets, then those registered from Python."""
    return DATASETS.names()


def known_models() -> tuple[str, ...]:
    """The built-in models, then those registered from Python."""
    return MODELS.names()


def known_partitions() -> tuple[str, ...]:
    """``iid``, ``dirichlet``, then the partitions registered from Python (sorted)."""
    return (*PARTITIONS.builtin_names(), *sorted(PARTITIONS.user_names()))


def model_datasets(model: str) -> tuple[str, ...]:
    """The datasets ``model`` is built for (a built-in model: its own; a registered one: those
    it was registered for, else every known dataset)."""
    fits = MODELS[model].datasets
    return known_datasets() if fits is None else fits


def model_num_params(model: str, dataset: str) -> int:
    """Trainable parameters ``D`` of ``model`` built for ``dataset``.

    Raises:
        ValueError: an unknown model or dataset, or a model that does not fit the dataset.
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(known_models())}")
    if dataset not in model_datasets(model):
        raise ValueError(f"model {model!r} does not fit dataset {dataset!r}")
    return MODELS[model].count(dataset)


def train_samples(dataset: str) -> int:
    """Training samples ``M`` of a built-in or registered dataset."""
    return DATASETS[dataset].num_train


def register_scheme(cls: _C, *, replace: bool = False) -> _C:
    """Register the scheme class ``cls`` under ``cls.name`` in :data:`SCHEMES`; usable as a
    class decorator (``wflsim.register_scheme``).

    Raises:
        ValueError: a bad, built-in or taken name (without ``replace``), or a class without a
            pydantic ``Params`` model.
    """
    name: Any = getattr(cls, "name", None)
    entry: Any = cls
    SCHEMES.register(name, entry, replace=replace)
    return cls


def build_scheme(name: str, params: dict[str, Any], system: SystemConstants) -> Scheme:
    """Instantiate a registered scheme with validated parameters, and check the update rule it
    names against :data:`UPDATE_RULES`.

    Raises:
        KeyError: unknown name; pydantic ``ValidationError``: bad parameters (scenario loading
            reports both as a one-line ``ScenarioError`` first); ValueError: the scheme names an
            unknown update rule or parameters the rule does not take.
    """
    cls = SCHEMES[name]
    scheme = cls(cls.Params.model_validate(params), system)
    scheme.update_rule.entry(UPDATE_RULES)
    return scheme


def make_server(config: ServerConfig, kernel: Any) -> Server:
    """The server of a ``[server]`` table (:data:`SERVERS`: mode -> server class; the one place
    that decides it); ``kernel`` (:func:`wflsim.sim.kernels.make_kernel`) plays the slots of a
    synchronous one."""
    return SERVERS[config.mode].build(config, kernel)


__all__ = [
    "DATASETS",
    "MODELS",
    "NAME",
    "PARTITIONS",
    "REGISTRIES",
    "SCHEMES",
    "SERVERS",
    "STRATEGIES",
    "UPDATE_RULES",
    "Registry",
    "UnknownNameError",
    "build_scheme",
    "known_datasets",
    "known_models",
    "known_partitions",
    "make_server",
    "model_datasets",
    "model_num_params",
    "register_scheme",
    "train_samples",
]
