"""Extension points: a researcher's own datasets, models, partitions, schemes and update rules,
registered from Python in their own module or notebook (no edit of the package).

A registered name is used in a scenario like a built-in one (``learning.dataset``,
``learning.model``, ``learning.partition``, ``scheme.name``; a scheme names its update rule).
Registrations belong to the process that makes them; a sweep or :func:`wflsim.compare` with
worker processes (``workers > 1``, or Ray) sends them to every worker (:func:`shipment`: the
registered objects pickled by value with ``cloudpickle``, so functions and classes defined in a
script or a notebook cell travel too). A scenario file can name registered things but never
registers them: no input executes code.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from wflsim.sim.config.catalogue import DATASETS, MODELS, PARTITIONS
from wflsim.sim.schemes import SCHEMES
from wflsim.sim.updates import UPDATE_RULES, UpdateRule

if TYPE_CHECKING:
    from torch import nn

KINDS = ("dataset", "model", "partition", "scheme", "update_rule")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
#: (kind, name) -> the registration's arguments, in the order made (what a worker replays)
_RECORDS: dict[tuple[str, str], tuple[tuple[Any, ...], dict[str, Any]]] = {}
_BUILT_IN = {
    "dataset": frozenset(DATASETS),
    "model": frozenset(MODELS),
    "partition": frozenset(PARTITIONS),
    "scheme": frozenset(SCHEMES),
    "update_rule": frozenset(UPDATE_RULES),
}


def _check_name(kind: str, name: Any, replace: bool) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"a {kind} name must be 1 to 64 letters, digits or _.- starting with a letter "
            f"(got {name!r})"
        )
    if name in _BUILT_IN[kind]:
        raise ValueError(f"{name!r} is a built-in {kind}; choose another name")
    if (kind, name) in _RECORDS and not replace:
        raise ValueError(f"{kind} {name!r} is already registered; pass replace=True to replace it")
    return name


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
    from wflsim.models import extensions as _ext

    _check_name("dataset", name, replace)
    _ext.add_dataset(name, train, test, num_classes)
    x_tr, y_tr, x_te, y_te = _ext.dataset(name)
    classes = _ext.dataset_spec(name)[1]
    _RECORDS[("dataset", name)] = ((name, (x_tr, y_tr), (x_te, y_te)), {"num_classes": classes})


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
    from wflsim.models import extensions as _ext

    _check_name("model", name, replace)
    if not callable(factory):
        raise ValueError(f"the factory of model {name!r} must be callable")
    fits = None if datasets is None else tuple(str(d) for d in datasets)
    _ext.add_model(name, factory, fits)
    _RECORDS[("model", name)] = ((name, factory), {"datasets": fits})


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
    from wflsim.models import extensions as _ext

    _check_name("partition", name, replace)
    if not callable(fn):
        raise ValueError(f"partition {name!r} must be a function")
    _ext.add_partition(name, fn)
    _RECORDS[("partition", name)] = ((name, fn), {})


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
    name = _check_name("scheme", getattr(cls, "name", None), replace)
    params = getattr(cls, "Params", None)
    if not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise ValueError(f"scheme {name!r} needs a pydantic model as its Params attribute")
    SCHEMES[name] = cls  # type: ignore[assignment]
    _RECORDS[("scheme", name)] = ((cls,), {})
    return cls


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
    from wflsim.models.learner.rules import RULES

    _check_name("update_rule", name, replace)
    if not callable(builder) or not isinstance(inputs, type):
        raise ValueError(f"update rule {name!r} needs a callable builder and an inputs type")
    UPDATE_RULES[name] = UpdateRule(tuple(params), inputs, no_stale_updates)
    RULES[name] = builder
    _RECORDS[("update_rule", name)] = (
        (name, builder),
        {"inputs": inputs, "params": tuple(params), "no_stale_updates": no_stale_updates},
    )


_REGISTER: dict[str, Callable[..., Any]] = {
    "dataset": register_dataset,
    "model": register_model,
    "partition": register_partition,
    "scheme": register_scheme,
    "update_rule": register_update_rule,
}


def unregister(kind: str, name: str) -> None:
    """Forget a registration made from Python (built-in names cannot be removed).

    Raises:
        ValueError: an unknown kind, or ``name`` not registered as ``kind``.
    """
    if kind not in KINDS or (kind, name) not in _RECORDS:
        raise ValueError(f"no {kind} {name!r} registered from Python")
    del _RECORDS[(kind, name)]
    if kind == "scheme":
        SCHEMES.pop(name, None)
    elif kind == "update_rule":
        from wflsim.models.learner.rules import RULES

        UPDATE_RULES.pop(name, None)
        RULES.pop(name, None)
    else:
        from wflsim.models import extensions as _ext

        _ext.remove(kind, name)


def registered() -> dict[str, list[str]]:
    """The names registered from Python in this process, by kind."""
    out: dict[str, list[str]] = {k: [] for k in KINDS}
    for kind, name in _RECORDS:
        out[kind].append(name)
    return out


def shipment() -> bytes | None:
    """This process's registrations for a worker process (None: there are none).

    Raises:
        ValueError: a registered object that cannot be pickled (the message names it).
    """
    if not _RECORDS:
        return None
    import cloudpickle

    try:
        return bytes(cloudpickle.dumps(list(_RECORDS.items())))
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
