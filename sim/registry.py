"""Every registry of the simulation side, in one module: what a scenario may name, by kind.

One :class:`Registry` per kind of extension holds the kind's built-in entries and those
registered from Python (``wflsim.register_*``), in one table, through one way in
(:meth:`Registry.register`):

* :data:`DATASETS` -- ``learning.dataset``: a :class:`~wflsim.sim.config.catalogue.DatasetInfo` (input
  shape, classes, training samples), what validation and a network-only run need;
* :data:`MODELS` -- ``learning.model``: a :class:`~wflsim.sim.config.catalogue.ModelInfo` (the datasets
  it fits, its parameter count ``D`` per dataset);
* :data:`PARTITIONS` -- ``learning.partition``: a :class:`~wflsim.sim.config.catalogue.PartitionInfo`;
* :data:`SCHEMES` -- ``scheme.name``: the scheme's class (:mod:`wflsim.sim.schemes`);
* :data:`UPDATE_RULES` -- the name in a scheme's ``UpdateRuleSpec``: the rule's parameters and
  frame-input record (:class:`~wflsim.sim.updates.UpdateRule`);
* :data:`STRATEGIES` -- ``strategy.name``: the server strategy's parameter model and description
  (:class:`~wflsim.sim.strategies.StrategyInfo`).

Everything here is torch-free. The learner side of the kinds that have one (a dataset's tensors,
a model's factory, a partition's function, an update rule's or a strategy's builder) is registered under the same
name in :mod:`wflsim.models.registry`, which uses this module's :class:`Registry`.

Each registry reads its built-in entries, on first use, from the module that defines them
(:mod:`wflsim.sim.config.catalogue`, :mod:`wflsim.sim.schemes`, :mod:`wflsim.sim.updates`,
:mod:`wflsim.sim.strategies`), so importing this module
alone gives complete registries and imports nothing else of the package. Built-in entries cannot
be replaced or unregistered; entries registered later are the user's (:meth:`Registry.user_names`:
what a sweep ships to its worker processes). A new kind (the design's ``server``) is one more
``_kind(...)`` line below.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from .config.catalogue import DatasetInfo, ModelInfo, PartitionInfo
    from .schemes.registry import SchemeClass
    from .servers.base import Server
    from .strategies import StrategyInfo
    from .updates import UpdateRule

T = TypeVar("T")
#: A name every registry takes: 1 to 64 letters, digits or ``_.-``, starting with a letter.
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


def _shown(name: object, limit: int = 60) -> str:
    """``repr(name)`` cut to ``limit`` characters, for error messages."""
    text = repr(name)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class UnknownNameError(KeyError, ValueError):
    """A name no registry entry has: a ``KeyError`` (a registry is read like a mapping) and a
    ``ValueError`` (the name came from the user); the message lists the known names."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """The registered entries of one kind of extension, by name: the built-in ones (read on
    first use from ``builtins``) and those registered later.

    Read it like a read-only mapping (``name in r``, ``r[name]``, iteration over the names in
    the order registered, built-ins first); change it only through :meth:`register` and
    :meth:`unregister`.

    Args:
        kind: the kind's name (``"dataset"``, ``"update_rule"``, ...), as messages and
            ``wflsim.unregister(kind, name)`` write it.
        builtins: returns the built-in entries by name (None: the kind has none).
        check: refuses an entry that cannot serve (raises ValueError), for built-in and
            registered entries alike.
    """

    def __init__(
        self,
        kind: str,
        *,
        builtins: Callable[[], Mapping[str, T]] | None = None,
        check: Callable[[str, T], None] | None = None,
    ) -> None:
        self.kind = kind
        self._builtins = builtins
        self._check = check
        self._entries: dict[str, T] = {}
        self._builtin: frozenset[str] = frozenset()
        self._loaded = builtins is None
        self._loading = False
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.names())})"

    # -- reading ---------------------------------------------------------------------------------

    def _table(self) -> dict[str, T]:
        """The entries, with the built-in ones read first if they have not been."""
        if not self._loaded:
            self._load()
        return self._entries

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            if self._loading:
                raise RuntimeError(f"the {self.kind} registry was read while its built-ins load")
            assert self._builtins is not None
            self._loading = True
            try:
                builtins = dict(self._builtins())
                for name, entry in builtins.items():
                    self._refuse_bad(self._valid(name), entry)
                self._entries = {**builtins, **self._entries}
                self._builtin = frozenset(builtins)
                self._loaded = True
            finally:
                self._loading = False

    def get(self, name: str) -> T:
        """The entry registered as ``name``.

        Raises:
            UnknownNameError: no entry has that name (the message lists the known ones).
        """
        table = self._table()
        try:
            return table[name]
        except (KeyError, TypeError):
            raise UnknownNameError(
                f"unknown {self.kind} {_shown(name)}; known: {', '.join(table)}"
            ) from None

    __getitem__ = get

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._table()

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._table()))

    def __len__(self) -> int:
        return len(self._table())

    def names(self) -> tuple[str, ...]:
        """Every name, built-in ones first, then in the order registered."""
        return tuple(self._table())

    def items(self) -> tuple[tuple[str, T], ...]:
        """``(name, entry)`` of every entry, in the order of :meth:`names`."""
        return tuple(self._table().items())

    def builtin_names(self) -> tuple[str, ...]:
        """The built-in names, in their order."""
        return tuple(n for n in self._table() if n in self._builtin)

    def user_names(self) -> tuple[str, ...]:
        """The names registered after the built-ins (from Python), in the order registered."""
        return tuple(n for n in self._table() if n not in self._builtin)

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` is one of the kind's built-in entries."""
        self._table()
        return name in self._builtin

    # -- changing --------------------------------------------------------------------------------

    def check_name(self, name: object, *, replace: bool = False) -> str:
        """``name`` if :meth:`register` would take it (without registering anything).

        Raises:
            ValueError: a name that is not 1 to 64 letters, digits or ``_.-`` starting with a
                letter, a built-in name, or a taken one without ``replace``.
        """
        name = self._valid(name)
        if self.is_builtin(name):
            raise ValueError(f"{name!r} is a built-in {self.kind}; choose another name")
        if name in self._table() and not replace:
            raise ValueError(
                f"{self.kind} {name!r} is already registered; pass replace=True to replace it"
            )
        return name

    def _valid(self, name: object) -> str:
        """``name`` if it has the form of a name, else ValueError."""
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ValueError(
                f"a {self.kind} name must be 1 to 64 letters, digits or _.- starting with a "
                f"letter (got {_shown(name)})"
            )
        return name

    def _refuse_bad(self, name: str, entry: T) -> None:
        """Apply the kind's check to ``entry`` (built-in or registered alike)."""
        if self._check is not None:
            self._check(name, entry)

    def register(self, name: str, entry: T, *, replace: bool = False) -> T:
        """Add ``entry`` under ``name`` (with ``replace``, in place of an earlier registration,
        keeping its position); returns ``entry``.

        Raises:
            ValueError: a bad, built-in or taken name (:meth:`check_name`), or an entry the
                kind's check refuses.
        """
        with self._lock:
            self.check_name(name, replace=replace)
            self._refuse_bad(name, entry)
            self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> T:
        """Remove the registered entry ``name``; returns it.

        Raises:
            ValueError: ``name`` is built-in; :class:`UnknownNameError` (a ValueError too): no
                entry has that name.
        """
        with self._lock:
            if self.is_builtin(name):
                raise ValueError(f"{name!r} is a built-in {self.kind} and cannot be unregistered")
            entry = self.get(name)
            del self._entries[name]
        return entry


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
