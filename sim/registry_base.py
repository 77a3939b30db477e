"""The registry class, below everything of the simulation side: a table of named entries of one
kind of extension (:class:`Registry`), the form a name takes (:data:`NAME`) and the error of an
unknown name (:class:`UnknownNameError`).

It imports nothing of the package, so any module may use the class or name it in a type; the
tables themselves, with their built-in entries, are in :mod:`wflsim.sim.registry`, which sits
above the modules whose built-ins it lists (docs/architecture.md, "Registries").
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

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
