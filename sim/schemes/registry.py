"""The one way in for a scheme: ``scheme.name`` in a scenario -> the scheme's class.

:data:`SCHEMES` is :data:`wflsim.sim.registry.SCHEMES`: the built-in schemes (the classes listed in
``wflsim.sim.schemes.BUILT_IN``) and those registered with :func:`register` (``wflsim.register_scheme``),
checked alike (a ``name``, a pydantic ``Params``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel

from .. import registry
from ..world.system import SystemConstants
from .base import Scheme

_C = TypeVar("_C", bound=type)


class SchemeClass(Protocol):
    """A registered scheme class: its name, its parameter model, and its constructor."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def __call__(self, params: Any, system: SystemConstants) -> Scheme: ...


SCHEMES = registry.SCHEMES


def register(cls: _C, *, replace: bool = False) -> _C:
    """Register the scheme class ``cls`` under ``cls.name``; usable as a class decorator.

    Raises:
        ValueError: a bad, built-in or taken name (without ``replace``), or a class without a
            pydantic ``Params`` model.
    """
    name: Any = getattr(cls, "name", None)
    entry: Any = cls
    SCHEMES.register(name, entry, replace=replace)
    return cls


def build_scheme(name: str, params: dict[str, Any], system: SystemConstants) -> Scheme:
    """Instantiate a registered scheme with validated parameters.

    Raises:
        KeyError: unknown name; pydantic ``ValidationError``: bad parameters (scenario loading
            reports both as a one-line ``ScenarioError`` first).
    """
    cls = SCHEMES[name]
    return cls(cls.Params.model_validate(params), system)
