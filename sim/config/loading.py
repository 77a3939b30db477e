"""Reading scenario files: TOML in, ``--set`` overrides applied, a validated :class:`Scenario`
out (types, ranges, unknown fields, the scheme's name and its own parameters). Every problem is a
:class:`sim.errors.ScenarioError` naming the dotted field and the fix.
"""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim.config.schema import Scenario
from sim.errors import ScenarioError
from sim.schemes import SCHEMES


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
