"""Sweep planning, before anything is written: ``--grid`` and ``--seeds`` text is read into a
grid (:func:`parse_grid`, :func:`parse_seeds`) and its points (:func:`expand`; a
:class:`GridPoint` is a point's overrides, seed and folder name); :func:`plan_sweep` (a
scenario's grid) and :func:`plan_points` (any points, a comparison's variants) validate every
point and record in a :class:`SweepPlan` what its run will be: its fingerprint, the grid
overrides it applies (:func:`applied_overrides`: a scheme parameter the point's scheme does not
declare is left out) and a hash of everything it reads (:func:`run_identity`), by which points
whose runs would be identical share one (:func:`~wflsim.app.sweep_folder.shared_points`).
Nothing here reads or writes a sweep folder; :mod:`wflsim.app.sweep` re-exports the public
names."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wflsim.sim.config.limits import MAX_POINT_NAME_BYTES, MAX_SEED, MAX_SWEEP_POINTS, shorten
from wflsim.sim.config.loading import Override, parse_override, toml_value
from wflsim.sim.errors import ScenarioError

if TYPE_CHECKING:
    from .run import Prepared

from .run import ScenarioSource

#: Grid keys that name a section rather than a field mean its ``name``.
_SECTION_NAMES = {"scheme": "scheme.name", "strategy": "strategy.name"}
#: Longest point folder name (file systems allow 255 bytes).
_MAX_NAME = MAX_POINT_NAME_BYTES

#: An override of a sweep point: ``--set`` text, or a value given from Python (set as it is).
PointOverride = str | Override
#: A grid value: ``--grid`` text (read as a TOML value), or a value given from Python.
GridValue = str | Override


def override_text(override: PointOverride) -> str:
    """The ``--set`` text of an override (``sweep.json`` and the run's manifest record it)."""
    return override.text if isinstance(override, Override) else override


def shown(override: PointOverride) -> str:
    """An override as a point's folder name and ``sweep.json``'s grid show it: ``--set`` text as
    given; a value from Python as ``field=value`` with text bare (``scheme.name=ideal``) and
    other values as TOML writes them (``scheme.V=10``, ``run.deadline_s=0.1``)."""
    if isinstance(override, str):
        return override
    return f"{'.'.join(override.path)}={shown_value(override)}"


def shown_value(value: GridValue) -> str:
    """A grid value as ``sweep.json``'s grid and a point's folder name show it (:func:`shown`)."""
    if isinstance(value, str):
        return value
    v = value.value
    return v if isinstance(v, str) else toml_value(v, ".".join(value.path))


def grid_of_values(grid: Mapping[str, Sequence[Any]]) -> list[tuple[str, list[GridValue]]]:
    """A grid given from Python (``{"scheme.V": [10, 100]}``; ``"scheme"`` means
    ``scheme.name``, ``"strategy"`` ``strategy.name``): each value set as it is (:class:`~wflsim.sim.config.loading.Override`),
    not written as ``--grid`` text and read back (a text value like ``"true"`` stays text, a
    list value is one value).

    Raises:
        ScenarioError: a key that is not a field's dotted name, no values, a key given twice,
            or a value a scenario cannot hold.
    """
    out: list[tuple[str, list[GridValue]]] = []
    for key, values in grid.items():
        if not isinstance(key, str) or not key.strip():
            raise ScenarioError(
                "grid", f"has the key {shorten(repr(key))}", 'use keys like "scheme.V"'
            )
        field_name = _SECTION_NAMES.get(key.strip(), key.strip())
        if not values:
            raise ScenarioError(
                f"grid {shorten(key)}", "has no values", 'e.g. {"scheme.V": [10, 100]}'
            )
        if any(k == field_name for k, _ in out):
            raise ScenarioError(
                "grid", f"field {field_name!r} appears twice", "give each field once"
            )
        out.append((field_name, [Override.of(field_name, v) for v in values]))
    return out


@dataclass(frozen=True)
class GridPoint:
    """One run of a sweep: its overrides (``--set`` text, or values given from Python) and seed
    (and, for a comparison's variant, the label that names its folder instead of the
    overrides)."""

    overrides: tuple[PointOverride, ...]
    seed: int
    label: str = ""

    @property
    def name(self) -> str:
        """The run directory's name: ``key=value__...__seed=N`` (filesystem-safe: other
        characters become ``_``; a name longer than 160 bytes in UTF-8, which letters outside
        ASCII reach sooner than 160 characters, is cut at a character boundary and ends with a
        hash of the whole)."""
        parts = [self.label] if self.label else [shown(o) for o in self.overrides]
        parts.append(f"seed={self.seed}")
        raw = "__".join(parts)
        safe = "".join(c if c.isalnum() or c in "-_.=," else "_" for c in raw)
        if len(safe.encode("utf-8")) > _MAX_NAME:
            digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:12]
            head = safe.encode("utf-8")[: _MAX_NAME - 14].decode("utf-8", errors="ignore")
            safe = f"{head}~{digest}"
        return safe


@dataclass
class SweepPlan:
    """A validated sweep: the grid points in a fixed order."""

    scenario: ScenarioSource
    grid: list[tuple[str, list[GridValue]]]
    seeds: list[int]
    points: list[GridPoint] = field(default_factory=list)
    #: point name -> the fingerprint its run records (:func:`wflsim.app.run.fingerprint`)
    fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: point name -> the grid overrides its run applies (:func:`applied_overrides`; absent: all)
    run_overrides: dict[str, tuple[PointOverride, ...]] = field(default_factory=dict)
    #: point name -> a hash of what its run reads (:func:`run_identity`): equal, identical runs
    identities: dict[str, str] = field(default_factory=dict)
    #: whether points with identical runs share one
    #: (:func:`~wflsim.app.sweep_folder.shared_points`)
    dedup: bool = True
    #: whether the points' missing datasets are downloaded before they run (their data folders
    #: are then checked only after that, :func:`wflsim.app.sweep.run_sweep`)
    download: bool = False
    #: point name -> the dataset and data folder its run reads (the points that learn)
    datasets: dict[str, tuple[str, Path]] = field(default_factory=dict)

    def applied(self, point: GridPoint) -> tuple[PointOverride, ...]:
        """The grid overrides ``point``'s run applies."""
        return self.run_overrides.get(point.name, point.overrides)


def parse_grid(specs: Iterable[str]) -> list[tuple[str, list[str]]]:
    """``["scheme=a,b", "scheme.V=10,100"]`` -> ``[("scheme.name", ["a", "b"]), ("scheme.V", ["10", "100"])]``.

    Values stay text; each is read as a TOML value by ``--set`` (so ``10`` is a number).
    """
    out: list[tuple[str, list[str]]] = []
    if isinstance(specs, str):  # one spec, not its characters
        specs = [specs]
    for spec in specs:
        if "=" not in spec:
            raise ScenarioError(
                "--grid",
                f"{shorten(spec)!r} must look like field=v1,v2,...",
                "e.g. --grid scheme.V=10,100",
            )
        key, values = spec.split("=", 1)
        key = _SECTION_NAMES.get(key.strip(), key.strip())
        if values.count(",") >= MAX_SWEEP_POINTS:
            raise ScenarioError(
                "--grid",
                f"field {shorten(key)!r} has more than {MAX_SWEEP_POINTS:,} values; a sweep may "
                f"have at most {MAX_SWEEP_POINTS:,} runs",
                "sweep fewer values, or split the sweep into several",
            )
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not key or not vals:
            raise ScenarioError(
                "--grid",
                f"{shorten(spec)!r} has no field or no values",
                "e.g. --grid scheme.V=10,100",
            )
        if any(k == key for k, _ in out):
            raise ScenarioError("--grid", f"field {key!r} appears twice", "give each field once")
        out.append((key, vals))
    return out


def parse_seeds(text: str) -> list[int]:
    """``"0-2"`` -> ``[0, 1, 2]``; ``"0,3,5"`` -> ``[0, 3, 5]``; ``"1-2,7"`` -> ``[1, 2, 7]``."""
    seeds: list[int] = []
    too_many = ScenarioError(
        "--seeds",
        f"{shorten(text)!r} names more than {MAX_SWEEP_POINTS:,} seeds; a sweep may have at "
        f"most {MAX_SWEEP_POINTS:,} runs",
        "give fewer seeds, or split the sweep into several",
    )
    if text.count(",") >= MAX_SWEEP_POINTS:
        raise too_many
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (_seed_int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                if hi - lo + 1 + len(seeds) > MAX_SWEEP_POINTS:
                    raise too_many
                seeds.extend(range(lo, hi + 1))
            elif part:
                seeds.append(_seed_int(part))
    except ScenarioError:
        raise
    except ValueError:
        raise ScenarioError(
            "--seeds",
            f"{shorten(text)!r} is not a list of seeds",
            "e.g. --seeds 0-2 or --seeds 0,3,5",
        ) from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ScenarioError(
            "--seeds", f"{shorten(text)!r} must name distinct seeds >= 0", "e.g. --seeds 0-2"
        )
    if max(seeds) > MAX_SEED:
        raise ScenarioError(
            "--seeds", f"seeds must be at most {MAX_SEED} (2^63 - 1)", "give smaller seeds"
        )
    return seeds


def _seed_int(text: str) -> int:
    """A seed's digits as an int (``ValueError`` for anything else, or more than 30 digits)."""
    text = text.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 30):
        raise ValueError(text)
    return int(text)


def expand(grid: Sequence[tuple[str, Sequence[GridValue]]], seeds: list[int]) -> list[GridPoint]:
    """The Cartesian product of the grid values and the seeds (seed varies fastest).

    Raises:
        ScenarioError: two points would share a run folder (a value given twice, or values
            that differ only in characters a folder name cannot hold, like ``"a b"`` and
            ``"a_b"``).
    """
    count = math.prod(len(v) for _, v in grid) * len(seeds)
    if count > MAX_SWEEP_POINTS:
        raise ScenarioError(
            "--grid",
            f"the grid and seeds make {count:,} runs; a sweep may have at most "
            f"{MAX_SWEEP_POINTS:,}",
            "sweep fewer values or seeds, or split the sweep into several",
        )
    keys = [k for k, _ in grid]
    points: list[GridPoint] = []
    for combo in itertools.product(*(v for _, v in grid)):
        overrides = tuple(
            v if isinstance(v, Override) else f"{k}={v}" for k, v in zip(keys, combo, strict=True)
        )
        points.extend(GridPoint(overrides, s) for s in seeds)
    seen: dict[str, GridPoint] = {}
    for p in points:
        other = seen.setdefault(p.name, p)
        if other is not p:
            a, b = (", ".join(shown(o) for o in q.overrides) for q in (other, p))
            raise ScenarioError(
                "--grid",
                f"the grid points [{a}] and [{b}] would share the run folder {p.name!r}",
                "give each value once, and values that differ in letters, digits or -_.=, "
                "(other characters become _ in folder names)",
            )
    return points


def plan_sweep(
    scenario: str | Path | ScenarioSource,
    grid_specs: Sequence[str] | Mapping[str, Sequence[Any]],
    seeds: str | None,
    *,
    data_dir: str | None = None,
    extra_overrides: Sequence[PointOverride] | None = None,
    strict: bool = False,
    dedup: bool = True,
    download: bool = False,
) -> SweepPlan:
    """Build and validate every grid point (nothing is written).

    ``grid_specs``: ``--grid`` texts, or a grid of values given from Python
    (:func:`grid_of_values`). The scenario file's optional ``[sweep]`` table (``grid = { "scheme.V" = [10, 100] }``,
    ``seeds = [0, 1]``) is used where the command line gives no grid or seeds. Values
    implausible for their unit are checked at every point and each distinct finding is reported
    once, as a :class:`~wflsim.sim.errors.PlausibilityWarning` (with ``strict``, the first is an
    error naming the point). ``dedup``: points whose runs would be identical share one run
    (:func:`~wflsim.app.sweep_folder.shared_points`). ``download``: a dataset missing from a
    point's data folder is not refused here; :func:`wflsim.app.sweep.run_sweep` downloads each
    distinct one once, before any point runs.

    Raises:
        ScenarioError: a malformed grid, or a grid point whose scenario is invalid (the message
            names the point), or with ``strict`` implausible.
    """
    from wflsim.sim.config.loading import sweep_defaults

    source = ScenarioSource.of(scenario)
    table = source.table()
    file_seed, file_sweep = sweep_defaults(table)
    if isinstance(grid_specs, str):  # one spec, not its characters
        grid_specs = [grid_specs]
    grid: list[tuple[str, list[GridValue]]]
    if isinstance(grid_specs, Mapping) and grid_specs:
        grid = grid_of_values(grid_specs)
    elif grid_specs:
        grid = [(k, list(v)) for k, v in parse_grid(grid_specs)]
    else:
        grid = [
            (k, list(v))
            for k, v in parse_grid(
                f"{k}={','.join(_toml_text(v, f'sweep.grid.{k}') for v in vals)}"
                for k, vals in file_sweep.grid.items()
            )
        ]
    if seeds is not None:
        seed_list = parse_seeds(seeds)
    elif file_sweep.seeds:
        seed_list = parse_seeds(",".join(str(s) for s in file_sweep.seeds))
    else:
        seed_list = [file_seed]
    return plan_points(
        source,
        grid,
        seed_list,
        expand(grid, seed_list),
        data_dir=data_dir,
        extra_overrides=extra_overrides,
        strict=strict,
        dedup=dedup,
        download=download,
    )


def plan_points(
    source: ScenarioSource,
    grid: Sequence[tuple[str, Sequence[GridValue]]],
    seeds: list[int],
    points: list[GridPoint],
    *,
    data_dir: str | None = None,
    extra_overrides: Sequence[PointOverride] | None = None,
    strict: bool = False,
    dedup: bool = True,
    as_written: bool = False,
    download: bool = False,
) -> SweepPlan:
    """Validate every point of a sweep (nothing is written); each distinct implausible value is
    reported once (:func:`plan_sweep`). ``dedup``: points whose runs would be identical share
    one run (:func:`~wflsim.app.sweep_folder.shared_points`). ``as_written``: every point's
    overrides apply as given (a comparison's variants), none is left out for a scheme that does
    not declare it (:func:`applied_overrides`, a grid's rule). ``download``: as in
    :func:`plan_sweep`.

    Raises:
        ScenarioError: a point whose scenario is invalid (the message names the point), or with
            ``strict`` implausible.
    """
    from wflsim.sim.config.plausibility import cross_findings

    from .run import fingerprint, prepare_source
    from .scenario import report_findings, report_implausible

    reported: set[str] = set()
    applied = (
        {p.name: p.overrides for p in points}
        if as_written
        else applied_overrides(points, source.table(), [*(extra_overrides or [])])
    )
    fingerprints, identities = {}, {}
    datasets: dict[str, tuple[str, Path]] = {}
    for point in points:
        overrides = [*(extra_overrides or []), *applied[point.name]]
        try:
            prep = prepare_source(
                source,
                overrides,
                point.seed,
                data_dir,
                strict=strict,
                warn=False,
                check_data=not download,
            )
        except ScenarioError as err:
            raise ScenarioError(
                err.field, f"{err.problem} [grid point {point.name}]", err.fix
            ) from None
        report_implausible(prep.scenario, reported=reported)
        report_findings(
            cross_findings(prep.scenario, prep.system.devices),
            reported=reported,
        )
        fingerprints[point.name] = fingerprint(prep)
        identities[point.name] = run_identity(prep, fingerprints[point.name])
        if prep.scenario.learning.enabled:
            datasets[point.name] = (prep.scenario.learning.dataset, prep.data_dir)
    return SweepPlan(
        source,
        [(k, list(v)) for k, v in grid],
        seeds,
        points,
        fingerprints,
        applied,
        identities,
        dedup,
        download=download,
        datasets=datasets,
    )


# ------------------------------------------------------------------ points sharing one run


def applied_overrides(
    points: list[GridPoint], table: dict[str, Any], extra: list[PointOverride]
) -> dict[str, tuple[PointOverride, ...]]:
    """Each point's grid overrides as its run applies them: a value of a scheme parameter
    (``scheme.tol=1e-6``) that the point's scheme does not declare in its parameter model, but
    the scheme of another point does, is left out (that scheme would refuse it; its runs at the
    parameter's values are identical and share, :func:`~wflsim.app.sweep_folder.shared_points`).
    A parameter no scheme of the sweep declares is kept, and refused by validation (a
    misspelling).

    ``table``: the raw scenario table; ``extra``: the ``--set`` overrides of every point.
    """
    declared = {p.name: _scheme_fields(table, [*extra, *p.overrides]) for p in points}
    known = set().union(*(f for f in declared.values() if f is not None))

    def used(override: PointOverride, fields: frozenset[str] | None) -> bool:
        param = _scheme_parameter(override)
        return fields is None or param is None or param in fields or param not in known

    return {p.name: tuple(o for o in p.overrides if used(o, declared[p.name])) for p in points}


def _scheme_parameter(override: PointOverride) -> str | None:
    """The scheme parameter an override sets (``scheme.csi_margin.target_outage=0.1`` ->
    ``csi_margin``); None for other fields, ``scheme.name`` and what does not parse."""
    try:
        path = override.path if isinstance(override, Override) else parse_override(override)[0]
    except ScenarioError:
        return None
    return path[1] if len(path) > 1 and path[0] == "scheme" and path[1] != "name" else None


def _scheme_fields(table: dict[str, Any], overrides: list[PointOverride]) -> frozenset[str] | None:
    """The parameters (and their aliases) of the scheme that ``overrides`` on ``table`` name;
    None when it names no registered scheme (validation says why)."""
    from wflsim.sim.config.loading import apply_overrides
    from wflsim.sim.config.schema import SchemeConfig
    from wflsim.sim.schemes import SCHEMES

    try:
        section = apply_overrides(table, overrides).get("scheme", {})
    except ScenarioError:
        return None
    name = section.get("name", SchemeConfig().name) if isinstance(section, dict) else None
    if not isinstance(name, str) or name not in SCHEMES:
        return None
    cls = SCHEMES[name]
    fields = cls.Params.model_fields
    return frozenset([*fields, *(f.alias for f in fields.values() if f.alias)])


def run_identity(prep: Prepared, fp: dict[str, Any] | None = None) -> str:
    """A hash of everything a run reads: its fingerprint (``fp``, :func:`wflsim.app.run.fingerprint`:
    the wflsim version, the scenario file's text, the seed and the input files' contents)
    without the ``--set`` texts, and instead of the resolved scenario's hash, the resolved
    scenario with the scheme's parameters normalised by the scheme's own parameter model
    (defaults filled in, ``10`` and ``10.0`` alike) and without those the scheme declares to
    change only its logged cost (``cost_only_params``: ``V`` of ``ideal`` and ``fixed_power``),
    and the data directory. Two points with equal identities make identical runs (the run reads
    the scheme's parameters only through that model), but for the ``cost`` column of a
    cost-only parameter, which readers recompute at each point's value
    (:mod:`wflsim.analysis.tidy`)."""
    from wflsim.sim.schemes import SCHEMES
    from wflsim.sim.schemes.base import cost_only_params

    from .run import fingerprint

    sc = prep.scenario
    cls = SCHEMES[sc.scheme.name]
    params = cls.Params.model_validate(sc.scheme.params).model_dump(mode="json")
    cost_only = cost_only_params(cls)
    resolved = sc.model_dump(mode="json")
    resolved["scheme"] = {
        "name": sc.scheme.name,
        **{k: v for k, v in params.items() if k not in cost_only},
    }
    reads = {k: v for k, v in (fp or fingerprint(prep)).items() if k not in _NOT_READ}
    reads |= {"scenario": resolved, "data_dir": str(prep.data_dir)}
    return hashlib.sha256(json.dumps(reads, sort_keys=True).encode("utf-8")).hexdigest()


#: Fingerprint entries a run records but does not read (``run_identity`` reads the resolved
#: scenario itself, normalised).
_NOT_READ = ("overrides", "scenario_sha256")


def _toml_text(value: Any, field: str) -> str:
    """A ``[sweep] grid`` value as ``--grid`` text (a number, a bool or text without commas)."""
    if isinstance(value, list | dict):
        raise ScenarioError(
            shorten(field),
            "a grid value is a list or a table, which --grid cannot pass",
            "sweep numbers, true/false or text; set the other fields with --set",
        )
    if isinstance(value, str):
        text = json.dumps(value)
    else:
        text = str(value).lower() if isinstance(value, bool) else str(value)
    if "," in text:
        raise ScenarioError(
            shorten(field),
            f"the grid value {shorten(text)} holds a comma",
            "use values without commas",
        )
    return text
