"""Fields that apply to one scheme, mode or model only, and the grids that sweep such a choice.

A *family* is a section of the scenario whose fields depend on one of its own fields, the
selector: ``[scheme]`` on ``name`` (each scheme's parameter model), ``[uplink]`` and
``[server]`` on ``mode`` (:data:`~wflsim.sim.config.schema.UPLINK_MODE_FIELDS`,
:data:`~wflsim.sim.servers.config.SERVER_MODE_FIELDS`), ``[mobility]`` on ``model``
(:data:`~wflsim.sim.world.mobility.config.MOBILITY_MODEL_FIELDS`), and every table chosen by its
``model`` (``channel.pathloss``, ``channel.fading``, ``channel.fading.correlation``,
``compute.jitter``, ``availability``: the members of the scenario's discriminated unions,
found in the schema). A grid that sweeps a selector and a field of some of its choices leaves
that field's value out at the points whose choice does not take it
(:func:`wflsim.app.sweep_plan.applied_overrides`), as a grid over ``scheme.name`` does with the
parameters of other schemes; :func:`way_out` tells how to set such a field when a point is
refused because the scenario or ``--set`` gives it.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from wflsim.sim.config.loading import Override, parse_override
from wflsim.sim.errors import ScenarioError

#: An override: ``--set`` text or a value given from Python.
_Override = str | Override


@dataclass(frozen=True)
class Family:
    """A section whose fields depend on its selector: ``accepted(choice)`` is the set of the
    section's fields (and aliases) that the choice takes, None for a choice that is not one (a
    misspelling: validation says why)."""

    section: tuple[str, ...]
    selector: str
    default: str
    accepted: Callable[[str], frozenset[str] | None]

    @property
    def selector_path(self) -> str:
        """The selector's dotted name (``uplink.mode``)."""
        return ".".join((*self.section, self.selector))

    def field_of(self, override: _Override) -> str | None:
        """The field of the section that ``override`` sets (``uplink.power_control=...`` ->
        ``power_control``; ``uplink.ns3.rbs=6`` -> ``ns3``); None for the selector, other
        sections and what does not parse."""
        try:
            path = override.path if isinstance(override, Override) else parse_override(override)[0]
        except ScenarioError:
            return None
        n = len(self.section)
        if len(path) <= n or tuple(path[:n]) != self.section or path[n] == self.selector:
            return None
        return str(path[n])

    def choice(self, table: Mapping[str, Any]) -> str | None:
        """The section's choice in a scenario table (its default where the table does not
        give it; None where the table is malformed)."""
        node: Any = table
        for k in self.section:
            if not isinstance(node, Mapping):
                return None
            node = node.get(k)
            if node is None:
                return self.default
        if isinstance(node, str):  # a bare model name
            return node
        if not isinstance(node, Mapping):
            return None
        value = node.get(self.selector, self.default)
        return value if isinstance(value, str) else None


def _field_names(model: type[BaseModel]) -> frozenset[str]:
    """A pydantic model's fields and their aliases."""
    fields = model.model_fields
    return frozenset([*fields, *(f.alias for f in fields.values() if f.alias)])


def _scheme_fields(name: str) -> frozenset[str] | None:
    """The parameters (and their aliases) of the registered scheme ``name``."""
    from wflsim.sim.registry import SCHEMES

    return _field_names(SCHEMES[name].Params) if name in SCHEMES else None


def _moded(
    all_fields: Sequence[str], modes: Mapping[str, frozenset[str]], known: Sequence[str]
) -> Callable[[str], frozenset[str] | None]:
    """``accepted`` of a section whose ``modes`` table says which fields apply to which modes
    only (the other fields apply to every mode)."""

    def accepted(mode: str) -> frozenset[str] | None:
        if mode not in known:
            return None
        return frozenset(f for f in all_fields if f not in modes or mode in modes[f])

    return accepted


def _union_families() -> list[Family]:
    """The scenario's tables chosen by their ``model`` (its discriminated unions), each with
    the fields of its members."""
    from wflsim.sim.config.schema import Scenario

    out: list[Family] = []

    def walk(cls: type[BaseModel], path: tuple[str, ...]) -> None:
        for name, info in cls.model_fields.items():
            args = typing.get_args(info.annotation) or (info.annotation,)
            members = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            if info.discriminator == "model" and members:
                fields = {m.model_fields["model"].default: _field_names(m) for m in members}
                default = info.get_default(call_default_factory=True)
                out.append(
                    Family(
                        (*path, name),
                        "model",
                        str(getattr(default, "model", "")),
                        fields.get,
                    )
                )
            for m in members:
                walk(m, (*path, name))

    walk(Scenario, ())
    unique: dict[tuple[str, ...], Family] = {}
    for f in out:
        unique.setdefault(f.section, f)
    return list(unique.values())


@functools.cache
def _fixed_families() -> tuple[Family, ...]:
    """The families of the schema (not of the registry): ``[uplink]``, ``[server]`` and the
    tables chosen by their ``model``."""
    from wflsim.sim.config.schema import UPLINK_MODE_FIELDS, UplinkConfig
    from wflsim.sim.servers.config import SERVER_MODE_FIELDS, SERVER_MODES, ServerConfig
    from wflsim.sim.world.mobility.config import MOBILITY_MODEL_FIELDS, MobilityConfig

    uplink_modes = typing.get_args(UplinkConfig.model_fields["mode"].annotation)
    return (
        Family(
            ("uplink",),
            "mode",
            str(UplinkConfig.model_fields["mode"].default),
            _moded(list(UplinkConfig.model_fields), UPLINK_MODE_FIELDS, uplink_modes),
        ),
        Family(
            ("server",),
            "mode",
            str(ServerConfig.model_fields["mode"].default),
            _moded(list(ServerConfig.model_fields), SERVER_MODE_FIELDS, SERVER_MODES),
        ),
        Family(
            ("mobility",),
            "model",
            str(MobilityConfig.model_fields["model"].default),
            _moded(
                list(MobilityConfig.model_fields),
                MOBILITY_MODEL_FIELDS,
                typing.get_args(MobilityConfig.model_fields["model"].annotation),
            ),
        ),
        *_union_families(),
    )


def families() -> list[Family]:
    """Every family: ``[scheme]`` (which reads the schemes registered now), ``[uplink]``,
    ``[server]`` and the tables chosen by their ``model``."""
    from wflsim.sim.config.schema import SchemeConfig

    scheme = Family(("scheme",), "name", SchemeConfig().name, _scheme_fields)
    return [scheme, *_fixed_families()]


def _refused_field(error: ScenarioError, fam: Family) -> str | None:
    """The field of ``fam``'s section that ``error`` refuses, as the validators name it: in
    the error's field (``channel.fading.rayleigh.k_db``, ``uplink.power_control``) or, for a
    refusal of the section, the first word of its problem (``buffer_size applies to ...``)."""
    section = ".".join(fam.section)
    if error.field == section:
        first = error.problem.split(" ", 1)[0].rstrip(",")
        return first or None
    if not error.field.startswith(section + "."):
        return None
    rest = error.field[len(section) + 1 :].split(".")
    if len(rest) > 1 and fam.accepted(rest[0]) is not None:  # a union's member names itself
        return rest[1]
    return rest[0]


def way_out(error: ScenarioError, grid_keys: Sequence[str], table: Mapping[str, Any]) -> str | None:
    """The fix of a grid point's refusal (``table``: the point's scenario table with its
    overrides): the error's own, and where the grid sweeps the selector of a section
    (``uplink.mode``) and the point's choice does not take the field refused, how to give that
    field so that the points of other choices leave it out."""
    for fam in families():
        if fam.selector_path not in grid_keys:
            continue
        refused = _refused_field(error, fam)
        choice = fam.choice(table)
        fields = None if choice is None else fam.accepted(choice)
        if refused is None or fields is None or refused in fields:
            continue
        section = ".".join(fam.section)
        return (
            (f"{error.fix}; or " if error.fix else "")
            + f"give {section}.{refused} in the grid rather than in the scenario "
            f"or --set (--grid {section}.{refused}=VALUE): a grid over {fam.selector_path} "
            f"leaves a field out at the points whose {fam.selector} does not take it"
        )
    return error.fix
