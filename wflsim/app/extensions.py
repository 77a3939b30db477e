"""Extension points: a researcher's own datasets, models, partitions, schemes, update rules and
server strategies, registered from Python in their own module or notebook (no edit of the package).

A registered name is used in a scenario like a built-in one (``learning.dataset``,
``learning.model``, ``learning.partition``, ``scheme.name``, ``strategy.name``; a scheme names its
update rule).
Registrations belong to the process that makes them; a sweep or :func:`wflsim.compare` with
worker processes (``workers > 1``, or Ray) sends them to every worker (:func:`shipment`: the
registered objects pickled by value with ``cloudpickle``, so functions and classes defined in a
script or a notebook cell travel too). A scenario file can name registered things but never
registers them: no input executes code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from wflsim.sim import registry
from wflsim.sim.strategies import NoParams, StrategyInfo
from wflsim.sim.updates import UpdateRule

if TYPE_CHECKING:
    from pydantic import BaseModel
    from torch import nn

#: The kinds of extension registered from Python (each a registry of :mod:`sim.registry`).
KINDS = ("dataset", "model", "partition", "scheme", "update_rule", "strategy")
#: The kinds with a learner side (a registry of :mod:`wflsim.models.registry` as well).
_LEARNER_KINDS = frozenset({"dataset", "model", "partition", "update_rule", "strategy"})


def _check_name(kind: str, name: Any, replace: bool) -> str:
    """``name`` if ``kind``'s registry takes it (a well-formed name, not built-in, not taken
    unless ``replace``), else ValueError."""
    return registry.REGISTRIES[kind].check_name(name, replace=replace)


def register_dataset(
    name: str, train: Any, test: Any, *, num_classes: int | None = None, replace: bool = False
) -> None:
    """Register a classification dataset under ``name`` (``learning.dataset = name``).

    Args:
        train, test: each a pair ``(x, y)`` of arrays or tensors (``x`` ``(M, ...)`` one sample
            per row, any per-sample shape; ``y`` ``(M,)`` class indices), or a torchvision-style
            dataset (``len()`` and items ``(x, y)`` with ``x`` a tensor or array: give it a
            ``transform`` such as ``ToTensor()``). Read once, now, into float32 / int64 tensors
            (the samples are used as given: normalise them first).
        num_classes: the number of classes (default: the largest label + 1).
        replace: replace an earlier registration of ``name``.

    Raises:
        ValueError: a bad name, or data that cannot be a classification dataset.
    """
    from wflsim.models import registry as _learner

    _check_name("dataset", name, replace)
    _learner.add_dataset(name, train, test, num_classes, replace=replace)


def register_model(
    name: str,
    factory: Callable[[tuple[int, ...], int], nn.Module],
    *,
    datasets: Sequence[str] | None = None,
    replace: bool = False,
) -> None:
    """Register a model under ``name`` (``learning.model = name``).

    Args:
        factory: ``factory(input_shape, num_classes) -> torch.nn.Module``, called with one
            sample's shape (e.g. ``(1, 28, 28)``) and the dataset's class count; the module maps
            a batch ``(B, *input_shape)`` to logits ``(B, num_classes)``. Each run builds its model
            with the run's own seed; the trainable parameter count is the payload ``D``.
        datasets: the datasets it fits (default: every dataset).
        replace: replace an earlier registration of ``name``.

    Raises:
        ValueError: a bad name or a factory that is not callable.
    """
    from wflsim.models import registry as _learner

    _check_name("model", name, replace)
    if not callable(factory):
        raise ValueError(f"the factory of model {name!r} must be callable")
    fits = None if datasets is None else tuple(str(d) for d in datasets)
    _learner.add_model(name, factory, fits, replace=replace)


def register_partition(
    name: str,
    fn: Callable[[Any, int, Any], Sequence[Any]],
    *,
    replace: bool = False,
) -> None:
    """Register a data partition under ``name`` (``learning.partition = name``).

    Args:
        fn: ``fn(labels, num_devices, rng) -> index lists``: ``labels`` the training labels
            ``(M,)`` (a NumPy copy), ``rng`` the run's ``numpy.random.Generator`` for the
            partition (keyed by the seed: use it, not global random state, and the partition is
            the same in every run of the seed); returns one non-empty sequence of sample indices
            in ``[0, M)`` per device (checked).
        replace: replace an earlier registration of ``name``.

    Raises:
        ValueError: a bad name or a function that is not callable.
    """
    from wflsim.models import registry as _learner

    _check_name("partition", name, replace)
    if not callable(fn):
        raise ValueError(f"partition {name!r} must be a function")
    _learner.add_partition(name, fn, replace=replace)


def register_scheme(cls: type, *, replace: bool = False) -> type:
    """Register a scheme class under ``cls.name`` (``scheme.name``); usable as a decorator.

    The class follows the ``wflsim.sim.schemes.base.Scheme`` protocol (``docs/architecture.md``,
    "Adding a scheme"): a class attribute ``name``, a pydantic ``Params`` model of its
    ``[scheme]`` parameters (validated strictly, like every field), and
    ``cls(params, system)``; subclassing ``wflsim.sim.schemes.common.FreezingScheme`` gives the
    paper's family of schemes.

    Raises:
        ValueError: a bad or taken name, or a class without ``name`` / ``Params``.
    """
    return registry.register_scheme(cls, replace=replace)


def register_update_rule(
    name: str,
    builder: Callable[[Mapping[str, Any], Any], Any],
    *,
    inputs: type,
    params: Sequence[str] = (),
    no_stale_updates: str | None = None,
    replace: bool = False,
) -> None:
    """Register a learner-side update rule under ``name`` (a scheme names it in its
    ``UpdateRuleSpec``).

    Args:
        builder: ``builder(params, settings) -> rule``: ``params`` the scheme's rule parameters,
            ``settings`` a ``wflsim.models.learner.rules.RuleSettings`` (devices, ``D``, torch
            device, streams); the rule implements ``wflsim.models.learner.rules.UpdateRule``
            (subclass ``PlainRule`` for the defaults).
        inputs: the type of the rule's per-frame inputs (a frozen dataclass the scheme's frame
            plan hands it).
        params: the parameter names the rule takes.
        no_stale_updates: why the rule cannot compute stale updates (``[server]`` semi_sync /
            async refuse it with this reason); None: it can.
        replace: replace an earlier registration of ``name``.

    Raises:
        ValueError: a bad name or a builder that is not callable.
    """
    from wflsim.models.registry import RULE_BUILDERS

    _check_name("update_rule", name, replace)
    if not callable(builder) or not isinstance(inputs, type):
        raise ValueError(f"update rule {name!r} needs a callable builder and an inputs type")
    RULE_BUILDERS.register(name, builder, replace=replace)
    registry.UPDATE_RULES.register(
        name, UpdateRule(tuple(params), inputs, no_stale_updates), replace=replace
    )


def register_strategy(
    name: str,
    builder: Callable[[Any, Any], Any],
    *,
    params: type[BaseModel] | None = None,
    description: str | None = None,
    costs: Any = None,
    replace: bool = False,
) -> None:
    """Register a server strategy under ``name`` (``[strategy] name = name``).

    Args:
        builder: a subclass of ``wflsim.Strategy`` (``wflsim.models.learner.strategies``), or a
            function ``builder(params, settings) -> Strategy``: ``params`` an instance of
            ``params`` (the ``[strategy]`` table's other fields, validated), ``settings`` a
            ``StrategySettings`` (``D``, the torch device). The strategy's ``server_step(w, g,
            lr)`` takes every server step of a run (docs/api.md, "Strategies").
        params: the pydantic model of its parameters (validated strictly, like every field;
            a field the model does not declare is refused); None: it takes none.
        description: one line saying what it does (default: the first line of the builder's
            docstring).
        costs: what it costs a device beyond FedAvg, a ``wflsim.StrategyCosts``
            (extra CPU cycles per local step per parameter, upload factor), charged by the
            network side; None: nothing.
        replace: replace an earlier registration of ``name``.

    Raises:
        ValueError: a bad or taken name, a builder that is not callable, ``params`` that is
            not a pydantic model, or ``costs`` that is not a ``StrategyCosts``.
    """
    from pydantic import BaseModel

    from wflsim.models.registry import STRATEGY_BUILDERS
    from wflsim.sim.strategies import NO_EXTRA_COSTS, StrategyCosts

    _check_name("strategy", name, replace)
    if not callable(builder):
        raise ValueError(f"the builder of strategy {name!r} must be callable")
    if params is not None and not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise ValueError(f"the params of strategy {name!r} must be a pydantic model (or None)")
    if description is None:
        description = ((getattr(builder, "__doc__", None) or "").strip().splitlines() or [""])[0]
    if costs is not None and not isinstance(costs, StrategyCosts):
        raise ValueError(f"the costs of strategy {name!r} must be a StrategyCosts (or None)")
    info = StrategyInfo(
        NoParams if params is None else params, description, costs or NO_EXTRA_COSTS
    )
    STRATEGY_BUILDERS.register(name, builder, replace=replace)
    registry.STRATEGIES.register(name, info, replace=replace)


#: Each kind's registration function (what a worker replays a shipment with).
_REGISTER: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {
        "dataset": register_dataset,
        "model": register_model,
        "partition": register_partition,
        "scheme": register_scheme,
        "update_rule": register_update_rule,
        "strategy": register_strategy,
    }
)


def unregister(kind: str, name: str) -> None:
    """Forget a registration made from Python (built-in names cannot be removed).

    Raises:
        ValueError: an unknown kind, or ``name`` not registered as ``kind``.
    """
    if kind not in KINDS or name not in registry.REGISTRIES[kind].user_names():
        raise ValueError(f"no {kind} {name!r} registered from Python")
    registry.REGISTRIES[kind].unregister(name)
    if kind in _LEARNER_KINDS:
        from wflsim.models.registry import REGISTRIES as LEARNER_SIDE

        if name in LEARNER_SIDE[kind]:
            LEARNER_SIDE[kind].unregister(name)


def registered() -> dict[str, list[str]]:
    """The names registered from Python in this process, by kind."""
    return {kind: list(registry.REGISTRIES[kind].user_names()) for kind in KINDS}


def _arguments(kind: str, name: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments of the registration of ``name`` as ``kind`` (``register_<kind>(*args,
    **kwargs)`` makes it again), read from the registries."""
    entry: Any = registry.REGISTRIES[kind][name]
    if kind == "scheme":
        return (entry,), {}
    from wflsim.models.registry import REGISTRIES as LEARNER_SIDE

    learner: Any = LEARNER_SIDE[kind][name]
    if kind == "dataset":
        x_tr, y_tr, x_te, y_te = learner
        return (name, (x_tr, y_tr), (x_te, y_te)), {"num_classes": entry.num_classes}
    if kind == "model":
        return (name, learner), {"datasets": entry.datasets}
    if kind == "partition":
        return (name, learner), {}
    if kind == "strategy":
        return (name, learner), {
            "params": entry.params,
            "description": entry.description,
            "costs": entry.costs,
        }
    return (name, learner), {
        "inputs": entry.inputs,
        "params": entry.params,
        "no_stale_updates": entry.no_stale_updates,
    }


def records() -> list[tuple[tuple[str, str], tuple[tuple[Any, ...], dict[str, Any]]]]:
    """This process's registrations from Python: ``((kind, name), (args, kwargs))`` by kind, in
    the order made (what :func:`install` replays in a worker)."""
    return [
        ((kind, name), _arguments(kind, name))
        for kind, names in registered().items()
        for name in names
    ]


def shipment() -> bytes | None:
    """This process's registrations for a worker process (None: there are none).

    Raises:
        ValueError: a registered object that cannot be pickled (the message names it).
    """
    if not any(registered().values()):
        return None
    import cloudpickle

    made = records()
    try:
        return bytes(cloudpickle.dumps(made))
    except Exception as err:
        raise ValueError(
            f"the registered extensions cannot be sent to worker processes ({type(err).__name__}: "
            f"{err}); run with workers=1, or define them in a module"
        ) from None


_INSTALLED: set[str] = set()


def install(blob: bytes | None) -> None:
    """Make a :func:`shipment` this process's registrations (in a worker; once per shipment)."""
    if blob is None:
        return
    digest = hashlib.sha256(blob).hexdigest()
    if digest in _INSTALLED:
        return
    import pickle

    for (kind, _), (args, kwargs) in pickle.loads(blob):  # our own shipment, from the parent
        _REGISTER[kind](*args, **kwargs, replace=True)
    _INSTALLED.add(digest)
