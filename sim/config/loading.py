"""Reading scenario files: TOML in, ``--set`` overrides applied, a validated :class:`Scenario`
out (types, ranges, unknown fields, the scheme's name and its own parameters). Every problem is a
:class:`sim.errors.ScenarioError` naming the dotted field and the fix.
"""

from __future__ import annotations

import copy
import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wflsim.sim.config.schema import Scenario
from wflsim.sim.errors import ScenarioError
from wflsim.sim.schemes import SCHEMES


def _from_validation_error(err: ValidationError) -> ScenarioError:
    errors = err.errors(include_url=False)
    first = errors[0]
    field = ".".join(f"[{x}]" if isinstance(x, int) else str(x) for x in first["loc"]).replace(
        ".[", "["
    )
    msg = first["msg"].removeprefix("Value error, ")
    fix = None
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
        fix = "remove it or check its spelling against docs/scenario.md"
    elif first["type"] == "missing":
        fix = "add it to the scenario"
    elif "input" in first and not isinstance(first["input"], dict | list):
        msg += f" (got {first['input']!r})"
    more = f"; and {len(errors) - 1} more problem(s)" if len(errors) > 1 else ""
    return ScenarioError(field or "(top level)", msg + more, fix)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``--set a.b.c=VALUE``; VALUE is read as a TOML value, else kept as a string."""
    if "=" not in text:
        raise ScenarioError(
            text, "override must look like section.field=value", "e.g. --set learning.lr=0.01"
        )
    key, raw = text.split("=", 1)
    path = [k.strip() for k in key.strip().split(".")]
    if not all(path):
        raise ScenarioError(key, "empty component in the field path", "e.g. --set learning.lr=0.01")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return path, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides to the raw scenario table (a deep copy is returned)."""
    out = copy.deepcopy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for i, k in enumerate(path[:-1]):
            nxt = node.setdefault(k, {})
            if not isinstance(nxt, dict):
                raise ScenarioError(
                    ".".join(path[: i + 1]), "is a value, not a table", "check the --set path"
                )
            node = nxt
        node[path[-1]] = value
    return out


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_value(key, key)


def _toml_value(value: Any, where: str) -> str:
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
        return "[" + ", ".join(_toml_value(v, where) for v in value) + "]"
    if isinstance(value, dict):
        items = [
            f"{_toml_key(str(k))} = {_toml_value(v, f'{where}.{k}')}"
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
        f"{_toml_key(k)} = {_toml_value(v, k)}"
        for k, v in table.items()
        if v is not None and not isinstance(v, dict)
    ]
    for name, section in table.items():
        if not isinstance(section, dict):
            continue
        lines += ["", f"[{_toml_key(name)}]"]
        lines += [
            f"{_toml_key(str(k))} = {_toml_value(v, f'{name}.{k}')}"
            for k, v in section.items()
            if v is not None
        ]
    return "\n".join(lines) + "\n"


def validate_scenario(data: dict[str, Any]) -> Scenario:
    """Validate a raw scenario table (types, ranges, unknown fields, scheme parameters)."""
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as err:
        raise _from_validation_error(err) from None
    name = scenario.scheme.name
    if name not in SCHEMES:
        raise ScenarioError(
            "scheme.name",
            f"unknown scheme {name!r}; known: {', '.join(sorted(SCHEMES))}",
            "see docs/scenario.md, [scheme]",
        )
    try:
        SCHEMES[name].Params.model_validate(scenario.scheme.params)
    except ValidationError as err:
        e = _from_validation_error(err)
        raise ScenarioError(f"scheme.{e.field}", e.problem, e.fix) from None
    return scenario


def read_scenario_file(path: str | Path) -> tuple[str, dict[str, Any]]:
    """Read a TOML scenario file: ``(text, table)``.

    Raises:
        ScenarioError: missing or unreadable file, not UTF-8 text, TOML syntax error.
    """
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(str(path), "scenario file not found", "check the path")
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise ScenarioError(
            str(path), f"cannot read the scenario file ({err.strerror or type(err).__name__})"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(
            str(path), "the scenario file is not UTF-8 text", "save it as UTF-8 TOML"
        ) from None
    return text, parse_scenario_text(text, str(path))


def parse_scenario_text(text: str, source: str = "scenario") -> dict[str, Any]:
    """Parse scenario TOML text into a table (errors name ``source``, never echo the text)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        # tomllib's messages give the position ("Invalid value (at line 3, column 5)"), not text
        raise ScenarioError(source, f"not valid TOML: {err}", "fix the syntax") from None


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> tuple[Scenario, str]:
    """Read, override and validate a scenario file: ``(scenario, original_text)``."""
    text, data = read_scenario_file(path)
    return validate_scenario(apply_overrides(data, overrides or [])), text
