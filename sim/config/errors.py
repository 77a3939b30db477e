"""The one-line error of a pydantic validation error in a scenario (or claims) table: the
first problem's dotted field, message and fix. Beside the schema so that every part of it (the
scenario's loading, the ``[[claims]]``) turns errors into the same words."""

from __future__ import annotations

from pydantic import ValidationError

from ..errors import ScenarioError
from .limits import shorten

#: What to write instead, for each kind of wrong type (pydantic's error types).
_TYPE_FIXES = {
    "int_type": "write a whole number without quotes, e.g. 3",
    "float_type": "write a number without quotes, e.g. 0.5",
    "bool_type": "write true or false without quotes",
    "string_type": 'write quoted text, e.g. "name"',
    "list_type": "write a list, e.g. [1, 2]",
    "tuple_type": "write a list, e.g. [1, 2]",
    "dict_type": "write a table, e.g. { key = 1 }",
    "model_type": "write a table, e.g. { key = 1 }",
    "finite_number": "write a finite number",
}
_RANGE_TYPES = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}
_LENGTH_TYPES = {"string_too_long", "string_too_short", "too_long", "too_short"}


def scenario_error(err: ValidationError) -> ScenarioError:
    """The one-line :class:`ScenarioError` of a pydantic ``ValidationError``: its first
    problem's dotted field, message and fix (and how many more problems there are)."""
    errors = err.errors(include_url=False)
    first = errors[0]
    field = ".".join(
        f"[{x}]" if isinstance(x, int) else shorten(str(x)) for x in first["loc"]
    ).replace(".[", "[")
    msg = first["msg"].removeprefix("Value error, ")
    fix = _TYPE_FIXES.get(first["type"])
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
        fix = "remove it or check its spelling against docs/scenario.md"
    elif first["type"] == "missing":
        fix = "add it to the scenario"
    elif (
        "input" in first
        and not isinstance(first["input"], dict | list | tuple)
        and "got " not in msg  # the validator's message quotes the value already
    ):
        msg += f" (got {shorten(repr(first['input']))})"
    if first["type"] in _RANGE_TYPES:
        fix = "use a value in the field's range (docs/scenario.md)"
    elif first["type"] in _LENGTH_TYPES:
        fix = "keep to the length docs/scenario.md gives for the field"
    elif first["type"] == "value_error":
        fix = "see the field in docs/scenario.md"
    more = f"; and {len(errors) - 1} more problem(s)" if len(errors) > 1 else ""
    return ScenarioError(field or "(top level)", msg + more, fix)
