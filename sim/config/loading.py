"""Reading scenario files: TOML in, ``--set`` overrides applied, a validated :class:`Scenario`
out (types, ranges, unknown fields, the work a mobility model makes). Every problem is a
:class:`wflsim.sim.errors.ScenarioError` naming the dotted field and the fix.

The ``[scheme]`` table is validated here as a name and a table of parameters only: the schemes
are built on this package (``wflsim.sim.schemes`` imports ``wflsim.sim.config``), so checking the
name and the parameters against the scheme registry is the application's step after this one
(:func:`wflsim.app.scenario.validate_scenario`, which every entry point uses).

Types are strict, the same for a file, ``--set``, a sweep and the Python API: a bool is not a
number, text is not a number or a bool, a float is not an integer; an integer stands for a float
(``V = 100``). NumPy scalars in a table given from Python count as the Python value they hold
(``np.bool_`` as a bool only).
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from ..errors import ScenarioError
from ..files import read_capped, utf8_text
from ..radio.modes import uplink_mode
from ..radio.ns3.uplink import resource_blocks
from ..world.availability import (
    MAX_CHANGES_PER_SLOT,
    AlwaysConfig,
    MarkovConfig,
    expected_changes_per_slot,
)
from .errors import scenario_error
from .limits import MAX_DEVICES, path_problem, shorten
from .schema import Scenario, Seed, Strict, SweepConfig

#: Largest scenario file read (explicit positions of 1,000,000 devices take about 40 MB).
MAX_FILE_BYTES = 64 * 2**20
#: Deepest nesting of tables and lists a scenario may have (the deepest field needs 5).
MAX_DEPTH = 32
#: Most times a random-waypoint device may cross the cell (its radius) per slot: beyond it,
#: walking the legs costs far more than simulating the slot, and nothing a channel drawn per
#: frame can show.
MAX_CROSSINGS_PER_SLOT = 1000.0


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``--set a.b.c=VALUE``; VALUE is read as a TOML value, else kept as a string."""
    if "=" not in text:
        raise ScenarioError(
            text, "override must look like section.field=value", "e.g. --set learning.lr=0.01"
        )
    key, raw = text.split("=", 1)
    path = [k.strip() for k in key.strip().split(".")]
    if not all(path):
        raise ScenarioError(
            shorten(key), "empty component in the field path", "e.g. --set learning.lr=0.01"
        )
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    except RecursionError:
        raise ScenarioError(
            shorten(key.strip()),
            f"the --set value is nested more than {MAX_DEPTH} levels deep",
            "give a value as the field takes it (docs/scenario.md)",
        ) from None
    except ValueError:  # an integer of more than 4300 digits
        raise ScenarioError(
            shorten(key.strip()), "the --set value holds a number too long to read", _FIX_DIGITS
        ) from None
    return path, value


_FIX_DIGITS = "write numbers with at most a few dozen digits (docs/scenario.md gives each range)"


#: Most items a list in a scenario may hold (a per-device list or positions: one per device).
MAX_LIST_ITEMS = MAX_DEVICES


def plain_value(value: Any, where: str = "", depth: int = 0) -> Any:
    """A copy of a scenario table (or a value in it) made of plain Python values: NumPy scalars
    become the Python value they hold (``np.bool_`` a bool), tuples lists, mappings dicts;
    anything else is kept (the schema refuses what it cannot take).

    Raises:
        ScenarioError: nested more than :data:`MAX_DEPTH` levels deep, a list longer than
            :data:`MAX_LIST_ITEMS` (its length is checked before any item is read), or a
            table key that is not text (names where).
    """
    if depth > MAX_DEPTH:
        raise ScenarioError(
            where or "(top level)",
            f"is nested more than {MAX_DEPTH} levels deep",
            "give a value as the field takes it (docs/scenario.md)",
        )
    if isinstance(value, list | tuple) and len(value) > MAX_LIST_ITEMS:
        raise ScenarioError(
            where or "(top level)",
            f"is a list of {len(value):,} items; a scenario's lists hold at most "
            f"{MAX_LIST_ITEMS:,} (one per device)",
            "give per-device values as a distribution, or positions as a mobility trace file",
        )
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise ScenarioError(
                    where or "(top level)",
                    f"has the key {shorten(repr(key))} of type {type(key).__name__}; field "
                    "names are text",
                    'write each field name as a string, e.g. {"run": {"frames": 3}}',
                )
    if isinstance(value, np.generic):
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
        return value.item() if isinstance(value, np.str_) else value
    if isinstance(value, Mapping):
        return {
            key: plain_value(v, f"{where}.{shorten(str(key))}".lstrip("."), depth + 1)
            for key, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [plain_value(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    return value


def check_table(table: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Check what a scenario table given from Python can hold but a scenario file cannot,
    before it is copied or written as TOML: a dotted top-level key (``"run.frames"``; a table
    nests its sections, and one beside its section, ``{"run": {...}, "run.frames": 3}``, would
    set a field twice) is refused; the paths of the ``None`` values in its tables are returned
    (a file leaves such a field out: whether that is what ``None`` meant is for the caller to
    decide, :func:`wflsim.app.scenario.check_nones`). Keys that are not text and lists too long
    are refused by :func:`plain_value`.

    Raises:
        ScenarioError: naming the key (and its section).
    """
    for key in table:
        if not isinstance(key, str) or "." not in key:
            continue
        section = key.split(".", 1)[0]
        if section in table:
            raise ScenarioError(
                shorten(key),
                f"sets a field of {section!r}, which the key {shorten(section)!r} sets too",
                f"give each field once, inside {section!r}",
            )
        raise ScenarioError(
            shorten(key),
            "is a dotted key; a scenario table nests its sections",
            f'write {{"{shorten(section, 20)}": {{...}}}}, or give the value in overrides',
        )
    found: list[tuple[str, ...]] = []
    _none_paths(table, (), found)
    return found


def _none_paths(value: Any, path: tuple[str, ...], found: list[tuple[str, ...]]) -> None:
    """Append to ``found`` the path of every ``None`` value of a table in ``value``."""
    if len(path) > MAX_DEPTH or not isinstance(value, Mapping):
        return  # plain_value names a nesting too deep; None in a list is no TOML value
    for key, item in value.items():
        where = (*path, str(key))
        if item is None:
            found.append(where)
        else:
            _none_paths(item, where, found)


@dataclass(frozen=True)
class Override:
    """One field of a scenario set to a value: a ``--set`` text parsed (:meth:`parse`), or a
    value given from Python (:meth:`of`), which is set as it is, never written out and read
    back. ``text`` is its ``--set`` form, which a run's manifest records (a run continued from
    its folder applies that text, which gives the same value back)."""

    #: the field's path (``("run", "frames")``)
    path: tuple[str, ...]
    #: the value (plain Python values, :func:`plain_value`)
    value: Any
    #: the ``--set`` text of the override (``run.frames=3``)
    text: str

    @classmethod
    def parse(cls, text: str) -> Override:
        """A ``--set`` text (:func:`parse_override`).

        Raises:
            ScenarioError: not ``section.field=value``, or a value too deep or too long.
        """
        path, value = parse_override(text)
        return cls(tuple(path), value, text)

    @classmethod
    def of(cls, key: str, value: Any) -> Override:
        """The field of dotted name ``key`` set to the Python ``value`` (NumPy scalars and
        tuples as the plain values they hold).

        Raises:
            ScenarioError: an empty part of ``key``, a ``None`` value (a scenario cannot hold
                one: leave the field out), or a value TOML cannot hold (names the field).
        """
        path = tuple(k.strip() for k in key.strip().split("."))
        if not all(path):
            raise ScenarioError(
                shorten(key), "empty component in the field path", 'e.g. {"learning.lr": 0.01}'
            )
        where = ".".join(path)
        if value is None:
            raise ScenarioError(
                shorten(key), "is None, which a scenario cannot hold", "leave the field out"
            )
        plain = plain_value(value, where, len(path))
        return cls(path, plain, f"{key}={toml_value(plain, key)}")


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str | Override]) -> dict[str, Any]:
    """Apply ``--set`` overrides (texts, or :class:`Override` values) to the raw scenario table
    (a plain copy, :func:`plain_value`, is returned)."""
    out = plain_value(data)
    if isinstance(overrides, str):  # one override, not its characters
        overrides = [overrides]
    for item in overrides:
        override = item if isinstance(item, Override) else Override.parse(item)
        path, value = list(override.path), override.value
        node = out
        for i, k in enumerate(path[:-1]):
            nxt = node.setdefault(k, {})
            if not isinstance(nxt, dict):
                raise ScenarioError(
                    ".".join(path[: i + 1]), "is a value, not a table", "check the --set path"
                )
            node = nxt
        node[path[-1]] = plain_value(value, ".".join(path), len(path))
    return out


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_value(key, key)


def toml_value(value: Any, where: str) -> str:
    """A plain value (:func:`plain_value`) as TOML text (``tomllib`` reads it back).

    Raises:
        ScenarioError: a value TOML cannot hold (names ``where``).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        # JSON's escapes of a string without ASCII escaping are TOML basic-string escapes (DEL,
        # which TOML does not allow raw, escaped too)
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v, where) for v in value) + "]"
    if isinstance(value, dict):
        items = [
            f"{_toml_key(str(k))} = {toml_value(v, f'{where}.{k}')}"
            for k, v in value.items()
            if v is not None
        ]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    raise ScenarioError(where, f"has a value of type {type(value).__name__}", "use TOML values")


def scenario_text(table: dict[str, Any]) -> str:
    """A scenario table (as :func:`read_scenario_file` returns it, or a ``Scenario``'s
    ``model_dump(mode="json")``) as TOML text: top-level values, then one ``[section]`` per
    table; deeper tables inline; ``None`` values left out. ``tomllib.loads`` of the text gives
    the table back (without the ``None`` values).

    Raises:
        ScenarioError: a value TOML cannot hold (names its field).
    """
    lines = [
        f"{_toml_key(k)} = {toml_value(v, k)}"
        for k, v in table.items()
        if v is not None and not isinstance(v, dict)
    ]
    for name, section in table.items():
        if not isinstance(section, dict):
            continue
        lines += ["", f"[{_toml_key(name)}]"]
        lines += [
            f"{_toml_key(str(k))} = {toml_value(v, f'{name}.{k}')}"
            for k, v in section.items()
            if v is not None
        ]
    return "\n".join(lines) + "\n"


def validate_scenario(data: Mapping[str, Any]) -> Scenario:
    """Validate a raw scenario table (types, strictly; ranges, unknown fields; the work a
    random-waypoint mobility makes). The scheme's name and parameters are checked against the
    scheme registry by :func:`wflsim.app.scenario.validate_scenario`."""
    data = plain_value(data)
    try:
        scenario = Scenario.model_validate(data, strict=True)
    except ValidationError as err:
        raise scenario_error(err) from None
    _check_mobility_work(scenario)
    _check_uplink(scenario)
    _check_availability(scenario)
    check_cells(scenario)
    return scenario


def check_cells(scenario: Scenario) -> None:
    """Several cells: a layout that can be built; where their uploads interact (a cell shares
    its band, or two cells share one), the event kernel and the energy actually spent."""
    if scenario.cells is None:
        if scenario.server.hierarchy is not None:
            raise ScenarioError(
                "server.hierarchy",
                "hierarchical aggregation needs edge servers: the base stations of [cells]",
                "add a [cells] table, or remove [server.hierarchy]",
            )
        return
    from ..radio.cells.component import refuse_replay
    from ..radio.cells.config import cell_uplink_mode
    from ..radio.cells.layout import build_layout

    refuse_replay(scenario.channel.replay)
    if scenario.cells.sites_file is not None:
        return  # checked again once the file is read (wflsim.app.prepare)
    layout = build_layout(
        scenario.cells, scenario.network.cell_radius_m, cell_uplink_mode(scenario.uplink.mode)
    )
    if not layout.interacts or scenario.uplink.mode == "aircomp":  # aircomp: a closed form
        return
    why = (
        "cells share a band (inter-cell interference)"
        if layout.interferes
        else ("a cell shares its band among its uploads")
    )
    if scenario.run.kernel == "closed_form":
        raise ScenarioError(
            "run.kernel",
            f'"closed_form" cannot play these cells: {why}, so uploads interact',
            'use kernel = "auto" or "event", or give each cell its own band and a dedicated uplink',
        )
    if scenario.trace.late_upload_energy == "full":
        raise ScenarioError(
            "trace.late_upload_energy",
            f'"full" charges a late upload its whole payload at a rate these cells do not '
            f"have ({why}: the rate changes as uploads come and go)",
            'use "until_deadline" (energy = power x time actually transmitted)',
        )


def _check_uplink(scenario: Scenario) -> None:
    """A shared uplink needs the event kernel, and charges the time actually transmitted."""
    mode = scenario.uplink.mode
    if mode == "aircomp" and scenario.cells is not None and scenario.cells.uplink is not None:
        raise ScenarioError(
            "cells.uplink",
            'under uplink.mode = "aircomp" every cell\'s uploads are its over-the-air sum; a '
            "cell cannot share its band digitally at the same time",
            "remove cells.uplink, or another uplink.mode (docs/aircomp.md)",
        )
    if mode == "ns3_lte":
        _check_ns3(scenario)
    if not uplink_mode(mode).interacting:  # dedicated bands, or one over-the-air sum
        return
    if scenario.run.kernel == "closed_form":
        raise ScenarioError(
            "run.kernel",
            f'"closed_form" cannot play a shared uplink (uplink.mode = "{mode}"): uploads interact',
            'use kernel = "auto" or "event", or uplink.mode = "dedicated"',
        )
    if scenario.trace.late_upload_energy == "full":
        raise ScenarioError(
            "trace.late_upload_energy",
            f'"full" charges a late upload its whole payload at a rate a shared uplink '
            f'(uplink.mode = "{mode}") does not have',
            'use "until_deadline" (energy = power x time actually transmitted)',
        )


def _check_ns3(scenario: Scenario) -> None:
    """ns-3's LTE: an LTE channel bandwidth, every cell an eNB."""
    w = scenario.network.bandwidth_hz
    if resource_blocks(w) is None:
        raise ScenarioError(
            "network.bandwidth_hz",
            f'uplink.mode = "ns3_lte" plays LTE, whose channel is 1.4, 3, 5, 10, 15 or 20 MHz '
            f"(6 to 100 resource blocks), not {w:g} Hz",
            "set network.bandwidth_hz to one of 1.4e6, 3e6, 5e6, 10e6, 15e6, 20e6",
        )
    if scenario.cells is not None and scenario.cells.uplink is not None:
        raise ScenarioError(
            "cells.uplink",
            'under uplink.mode = "ns3_lte" every cell is an LTE eNB whose scheduler shares its '
            "band; a cell cannot take a Shannon abstraction instead",
            "remove cells.uplink, or another uplink.mode",
        )


def _check_availability(scenario: Scenario) -> None:
    """Devices that come and go need the event kernel, and a bounded number of changes."""
    avail = scenario.availability
    if isinstance(avail, AlwaysConfig):
        return
    if scenario.run.kernel == "closed_form":
        raise ScenarioError(
            "run.kernel",
            f'"closed_form" cannot play devices that go offline (availability.model = '
            f'"{avail.model}"): a drop interrupts a device\'s work',
            'use kernel = "auto" or "event", or availability.model = "always"',
        )
    if isinstance(avail, MarkovConfig):
        changes = expected_changes_per_slot(avail, scenario.run.deadline_s)
        if changes > MAX_CHANGES_PER_SLOT:
            raise ScenarioError(
                "availability.online_s",
                f"online and offline periods of {avail.online_s.expected_s():g} s and "
                f"{avail.offline_s.expected_s():g} s on average make {changes:,.0f} changes per "
                f"device and slot (run.deadline_s = {scenario.run.deadline_s:g} s); at most "
                f"{MAX_CHANGES_PER_SLOT:g} are simulated",
                "lengthen the periods (they are in seconds)",
            )


def _check_mobility_work(scenario: Scenario) -> None:
    """Random waypoint walks every leg of every device: refuse speeds that would make it walk
    more than :data:`MAX_CROSSINGS_PER_SLOT` cell radii per device and slot."""
    mob = scenario.mobility
    if mob.model != "random_waypoint":
        return
    crossings = mob.speed_mps[1] * scenario.run.deadline_s / scenario.network.cell_radius_m
    if crossings > MAX_CROSSINGS_PER_SLOT:
        raise ScenarioError(
            "mobility.speed_mps",
            f"a device at {mob.speed_mps[1]:g} m/s crosses the cell radius "
            f"({scenario.network.cell_radius_m:g} m) {crossings:,.0f} times per slot "
            f"(run.deadline_s = {scenario.run.deadline_s:g} s); at most "
            f"{MAX_CROSSINGS_PER_SLOT:,.0f} are simulated",
            "lower mobility.speed_mps or run.deadline_s, or raise network.cell_radius_m",
        )


class _SweepDefaults(Strict):
    """The parts of a scenario table that ``wflsim sweep`` reads before its grid points."""

    seed: Seed = 0
    sweep: SweepConfig = Field(default_factory=SweepConfig)


def sweep_defaults(table: Mapping[str, Any]) -> tuple[int, SweepConfig]:
    """The seed and the ``[sweep]`` table of a raw scenario table, validated as
    :func:`validate_scenario` would (the rest is validated with each grid point).

    Raises:
        ScenarioError: naming the field (``seed``, ``sweep.grid``, ``sweep.seeds``).
    """
    data = plain_value(table)
    part = {k: data[k] for k in ("seed", "sweep") if k in data}
    try:
        got: BaseModel = _SweepDefaults.model_validate(part, strict=True)
    except ValidationError as err:
        raise scenario_error(err) from None
    assert isinstance(got, _SweepDefaults)
    return got.seed, got.sweep


def read_scenario_file(path: str | Path) -> tuple[str, dict[str, Any]]:
    """Read a TOML scenario file: ``(text, table)``.

    Raises:
        ScenarioError: missing or unreadable file, not UTF-8 text, TOML syntax error.
    """
    problem = path_problem(str(path))
    if problem is not None:
        raise ScenarioError(shorten(str(path)), f"the scenario path {problem}", "check the path")
    if not os.path.lexists(path):
        raise ScenarioError(str(path), "scenario file not found", "check the path")
    raw = read_capped(
        path,
        str(path),
        MAX_FILE_BYTES,
        "scenario",
        fix="give per-device values as distributions, or positions as a mobility trace file",
    )
    text = utf8_text(raw, str(path), "scenario")
    return text, parse_scenario_text(text, str(path))


def parse_scenario_text(text: str, source: str = "scenario") -> dict[str, Any]:
    """Parse scenario TOML text into a table (errors name ``source``, never echo the text)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        # tomllib's messages give the position ("Invalid value (at line 3, column 5)"), not text
        raise ScenarioError(source, f"not valid TOML: {err}", "fix the syntax") from None
    except RecursionError:
        raise ScenarioError(
            source,
            f"holds lists or tables nested more than {MAX_DEPTH} levels deep",
            "give each field a value as it takes it (docs/scenario.md)",
        ) from None
    except ValueError:  # an integer of more than 4300 digits
        raise ScenarioError(source, "holds a number too long to read", _FIX_DIGITS) from None


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> tuple[Scenario, str]:
    """Read, override and validate a scenario file: ``(scenario, original_text)`` (the
    scheme's parameters: :func:`wflsim.app.scenario.load_scenario`)."""
    text, data = read_scenario_file(path)
    return validate_scenario(apply_overrides(data, overrides or [])), text
