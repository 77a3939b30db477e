"""The scheme registry: ``scheme.name`` in a scenario -> the scheme's class."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from ..world.system import SystemConstants
from .base import Scheme


class SchemeClass(Protocol):
    """A registered scheme class: its name, its parameter model, and its constructor."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def __call__(self, params: Any, system: SystemConstants) -> Scheme: ...


SCHEMES: dict[str, SchemeClass] = {}


def register(cls: Any) -> Any:
    """Class decorator adding a scheme to :data:`SCHEMES` under ``cls.name``."""
    if cls.name in SCHEMES:
        raise ValueError(f"scheme {cls.name!r} registered twice")
    SCHEMES[cls.name] = cls
    return cls


def build_scheme(name: str, params: dict[str, Any], system: SystemConstants) -> Scheme:
    """Instantiate a registered scheme with validated parameters.

    Raises:
        KeyError: unknown name; pydantic ``ValidationError``: bad parameters (scenario loading
            reports both as a one-line ``ScenarioError`` first).
    """
    cls = SCHEMES[name]
    return cls(cls.Params.model_validate(params), system)
