"""Values given to the Python API (:mod:`wflsim.api`) checked and turned into what the
application takes: the scenario (a file, a table, a ``Scenario``), overrides (``--set`` strings,
or values set as they are), seeds, a grid, folders and worker counts. Each refusal is a
:class:`~wflsim.sim.errors.ScenarioError` naming the argument and the fix."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wflsim.sim.config.limits import MAX_SWEEP_POINTS, MAX_WORKERS, out_path_problem, shorten
from wflsim.sim.config.loading import Override, plain_value
from wflsim.sim.config.schema import Scenario
from wflsim.sim.errors import ScenarioError

from .prepare import ScenarioSource
from .scenario import check_nones

#: A scenario: a TOML file, a table shaped like one, or a validated ``Scenario``.
ScenarioLike = str | os.PathLike[str] | Mapping[str, Any] | Scenario
#: Overrides: ``--set`` strings, one string, or a mapping of dotted field names (or sections)
#: to values.
Overrides = str | Sequence[str] | Mapping[str, Any]


def scenario_source(scenario: ScenarioLike) -> ScenarioSource:
    """A scenario given from Python as the source it is prepared from (a table is kept as its
    values, :meth:`~wflsim.app.prepare.ScenarioSource.from_table`)."""
    if isinstance(scenario, (str, os.PathLike)):
        return ScenarioSource.from_file(Path(scenario))
    if isinstance(scenario, Scenario):
        return ScenarioSource.from_table(scenario.model_dump(mode="json", exclude_none=True))
    if isinstance(scenario, Mapping):
        check_nones(scenario)
        return ScenarioSource.from_table(scenario)
    raise ScenarioError(
        "scenario",
        f"is a {type(scenario).__name__}",
        "give a TOML file path, a dict shaped like the file, or a Scenario",
    )


def overrides_of(overrides: Overrides) -> list[str | Override]:
    """Overrides given from Python: ``--set`` strings (a single string is one override, not its
    characters), or a mapping that gives each field's value by its dotted path
    (``{"run.frames": 2}``), or a section's fields as a nested mapping (``{"run": {"frames":
    2}}``: the fields it names are set, the others kept, as ``--set`` does); a value that is
    itself a mapping or a list sets the whole field (``{"compute.jitter": {"model":
    "throttling", "sigma": 0.3}}``). A mapping's values are set as they are
    (:class:`~wflsim.sim.config.loading.Override`), not written as text and read back."""
    if isinstance(overrides, str):
        return [overrides]
    if isinstance(overrides, Mapping):
        return [Override.of(key, value) for key, value in _dotted(overrides)]
    out: list[str | Override] = []
    for o in overrides:
        if not isinstance(o, str):
            raise ScenarioError(
                "overrides",
                f"holds a {type(o).__name__} ({shorten(repr(o))}), not a --set string",
                'give strings like "run.frames=3", or a dict like {"run.frames": 3}',
            )
        out.append(str(o))
    return out


def _dotted(overrides: Mapping[Any, Any], section: str = "") -> list[tuple[str, Any]]:
    """A mapping of overrides as ``(dotted path, value)`` pairs: a top-level key without a dot
    whose value is a mapping is a section (its keys are its fields; their values are set whole).

    Raises:
        ScenarioError: a key that is not text, or two keys that set the same field (or a
            field and a part of it: ``{"run": {"frames": 2}, "run.frames": 3}``), naming both.
    """
    pairs = []
    origins = []  # the top-level key each pair comes from
    for key, value in overrides.items():
        if not isinstance(key, str) or not key.strip():
            raise ScenarioError(
                "overrides",
                f"has the key {shorten(repr(key))}, not a field's dotted name",
                'use keys like "run.frames"',
            )
        if section:
            pairs.append((f"{section}.{key}", value))
        elif "." not in key and isinstance(value, Mapping):
            inner = _dotted(value, key)
            pairs += inner
            origins += [key] * len(inner)
        else:
            pairs.append((key, value))
            origins.append(key)
    if not section:
        _check_distinct([path for path, _ in pairs], origins)
    return pairs


def _check_distinct(paths: list[str], origins: list[str]) -> None:
    """Refuse two overrides of one field, or of a field and a part of it (the later would
    silently win), naming the keys (``origins``, one per path) that give them."""
    parts = [tuple(k.strip() for k in path.split(".")) for path in paths]
    # sorted, a path is followed by the paths it is a prefix of: neighbours suffice
    order = sorted(range(len(parts)), key=lambda i: parts[i])
    for a, b in itertools.pairwise(order):
        common = parts[a]
        if parts[b][: len(common)] == common:
            i, j = sorted((a, b))
            raise ScenarioError(
                "overrides",
                f"the keys {shorten(origins[i])!r} and {shorten(origins[j])!r} both set "
                f"{shorten('.'.join(common))}; the later would silently win",
                "give each field once",
            )


def seed_of(seed: Any) -> int:
    """A seed given from Python: an int or a NumPy integer (not a bool, a float or text)."""
    value = plain_value(seed)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(
            "seed", f"must be a whole number >= 0 (got {shorten(repr(seed))})", "e.g. seed=3"
        )
    return value


def check_out(out: Path, field: str, room: int = 64) -> None:
    problem = out_path_problem(out, room=room)
    if problem is not None:
        raise ScenarioError(field, f"{shorten(str(out))!r} {problem}", f"choose another {field}")


def folder_of(out: Any, field: str = "out") -> Path:
    """A folder argument given from Python: a path (text or ``os.PathLike``)."""
    if isinstance(out, str | os.PathLike):
        return Path(out)
    raise ScenarioError(
        field,
        f"is {shorten(repr(out))}, not a folder path",
        f'give the folder to write, e.g. {field}="runs/my-study"',
    )


def seeds_text(seeds: Any, field: str = "seeds") -> str | None:
    """Seeds given from Python (``"0-2"``, ``[0, 1, 2]``, ``range(3)``, any iterable of whole
    numbers) as ``--seeds`` text; at most :data:`MAX_SWEEP_POINTS` of them, counted with
    ``len()`` where the object has one, and never read past the cap.

    Raises:
        ScenarioError: not seeds, or more than the cap.
    """
    if seeds is None or isinstance(seeds, str):
        return seeds
    items = capped(seeds, field, "seeds", 'e.g. seeds=[0, 1, 2] or seeds="0-2"')
    return ",".join(str(seed_of(s)) for s in items)


def capped(values: Any, field: str, what: str, example: str) -> list[Any]:
    """The items of ``values`` (an iterable that is not text), at most
    :data:`MAX_SWEEP_POINTS`: ``len()`` is checked first where there is one, and an iterator
    is read only up to one item past the cap.

    Raises:
        ScenarioError: not iterable, or more items than the cap.
    """
    too_many = ScenarioError(
        field,
        f"names more than {MAX_SWEEP_POINTS:,} {what}; a sweep may have at most "
        f"{MAX_SWEEP_POINTS:,} runs",
        "give fewer, or split the sweep into several",
    )
    try:
        count = len(values)
    except OverflowError:  # a range longer than sys.maxsize
        raise too_many from None
    except TypeError:
        count = None
    if count is not None and count > MAX_SWEEP_POINTS:
        raise too_many
    if not isinstance(values, Iterable):
        raise ScenarioError(field, f"is {shorten(repr(values))}, not a list of {what}", example)
    items = list(itertools.islice(values, MAX_SWEEP_POINTS + 1))
    if len(items) > MAX_SWEEP_POINTS:
        raise too_many
    return items


def grid_of(
    grid: Mapping[str, Sequence[Any]] | Sequence[str] | None,
) -> list[str] | dict[str, list[Any]]:
    """A grid given from Python: ``--grid`` strings as they are, or a mapping of each field to
    its values (set as they are, :func:`wflsim.app.sweep_plan.grid_of_values`)."""
    if grid is None:
        return []
    if isinstance(grid, str):  # one --grid string, not its characters
        return [grid]
    if isinstance(grid, Mapping):
        return {key: grid_values_of(key, values) for key, values in grid.items()}
    return [str(g) for g in grid]


def grid_values_of(key: str, values: Any) -> list[Any]:
    """A grid entry's values (a single number or text is one value), at most
    :data:`MAX_SWEEP_POINTS` (counted before they are listed)."""
    if isinstance(values, str) or not isinstance(values, Sequence | np.ndarray):
        return [values]
    return capped(values, f"grid {key}", "values", f'e.g. grid={{"{key}": [1, 2]}}')


def check_workers(workers: Any) -> None:
    if isinstance(workers, bool) or not isinstance(plain_value(workers), int):
        raise ScenarioError("workers", f"must be a whole number (got {shorten(repr(workers))})")
    if not 1 <= workers <= MAX_WORKERS:
        raise ScenarioError("workers", f"must be in [1, {MAX_WORKERS}]", "e.g. workers=2")
