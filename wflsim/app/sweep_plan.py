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
from dataclasses import dataclass, field, replace
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
    overrides; for a grid's point, the folder name :func:`expand` gave it)."""

    overrides: tuple[PointOverride, ...]
    seed: int
    label: str = ""
    #: the run folder's name (:func:`point_names`); empty: :func:`full_name`'s
    folder: str = field(default="", compare=False)

    @property
    def name(self) -> str:
        """The run directory's name: the name :func:`expand` gave the point
        (:func:`point_names`: ``ideal__V=10__seed=0``), else :func:`full_name`'s."""
        return self.folder or full_name(
            [self.label] if self.label else [shown(o) for o in self.overrides], self.seed
        )


def full_name(parts: Sequence[str], seed: int) -> str:
    """A folder name of every override in full, ``key=value__...__seed=N`` (a comparison's
    variants, ``label__seed=N``; and every grid point's before short names, which a sweep folder
    written then keeps: :func:`~wflsim.app.sweep_folder.adopt_names`): filesystem-safe (other
    characters become ``_``); a name longer than 160 bytes in UTF-8, which letters outside
    ASCII reach sooner than 160 characters, is cut at a character boundary and ends with a hash
    of the whole."""
    raw = "__".join([*parts, f"seed={seed}"])
    return _cut(_safe(raw), raw, _MAX_NAME)


def _safe(text: str) -> str:
    """``text`` with every character but letters, digits and ``-_.=,+`` as ``_``."""
    return "".join(c if c.isalnum() or c in "-_.=,+" else "_" for c in text)


def _digest(raw: str) -> str:
    """The 12 hex digits of ``raw``'s SHA-256 that tell apart names cut or alike."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:12]


def _cut(safe: str, raw: str, limit: int) -> str:
    """``safe`` if it fits in ``limit`` bytes of UTF-8, else its start cut at a character
    boundary and ``~`` and :func:`_digest` of ``raw``."""
    if len(safe.encode("utf-8")) <= limit:
        return safe
    head = safe.encode("utf-8")[: limit - 13].decode("utf-8", errors="ignore")
    return f"{head}~{_digest(raw)}"


#: A field whose last name is one of these is named by its value alone in a point's folder name
#: (``ideal``, ``aircomp``, ``rician``; not ``scheme.name=ideal``), as is a table's value.
_BY_VALUE = frozenset({"name", "mode", "model"})
#: The most bytes of a point folder's name before ``__seed=N``: longer names are cut and end
#: in a hash of the point's overrides (:func:`point_names`).
_READABLE_BYTES = 96


def _key_labels(keys: Sequence[str]) -> dict[str, str]:
    """Each grid field's label in folder names: its shortest ending of dotted names that no
    other field of the grid ends with (``scheme.V`` -> ``V``; ``scheme.tol`` and ``strategy.tol``
    keep ``scheme.tol`` and ``strategy.tol``)."""
    out: dict[str, str] = {}
    split = {k: k.split(".") for k in keys}
    for key, parts in split.items():
        for n in range(1, len(parts) + 1):
            tail = parts[-n:]
            others = [p for k, p in split.items() if k != key]
            if not any(p[-n:] == tail for p in others):
                break
        out[key] = ".".join(parts[-n:])
    return out


def _value_text(override: PointOverride) -> tuple[str, Any]:
    """An override's field and its value as a folder name shows it: text without quotes,
    a number as written, a table's or list's values joined by ``.``."""
    if isinstance(override, Override):
        key, value, raw = ".".join(override.path), override.value, None
    else:
        try:
            path, value = parse_override(override)
        except ScenarioError:
            key, _, raw = override.partition("=")
            return key.strip(), raw.strip()
        key, raw = ".".join(path), override.split("=", 1)[1].strip()

    def flat(v: Any) -> str:
        if isinstance(v, dict):
            return ".".join(flat(x) for x in v.values())
        if isinstance(v, list | tuple):
            return ".".join(flat(x) for x in v)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return repr(v)
        return str(v)

    if raw is not None and isinstance(value, int | float) and not isinstance(value, bool):
        return key, raw  # as written: 1e-6 stays 1e-6
    return key, flat(value)


def point_names(points: Sequence[GridPoint], keys: Sequence[str]) -> list[str]:
    """The folder names of a grid's points (``keys``: the grid's fields, in order): each
    field's value, after its label where the field is not a name, mode or model
    (:func:`_key_labels`: ``ideal__V=10__seed=0``,
    ``aircomp.controller__noise_dbm=-104__seed=0``), then the seed; filesystem-safe (characters
    other than letters, digits and ``-_.=,+`` become ``_``, and so does a leading ``.``). A name
    whose readable part is longer than 96 bytes, or that two points with other values would
    share (values alike but for such characters), ends its readable part with ``~`` and a hash
    of the point's overrides in full. But for such values, a name depends only on the point and
    the grid's fields, not on the other values: adding values to a grid keeps the names of the
    points already there (and a sweep folder keeps the names it records,
    :func:`~wflsim.app.sweep_folder.adopt_names`). ``sweep.json`` records each point's
    overrides in full."""
    labels = _key_labels(list(keys))
    readable: list[tuple[str, str]] = []  # (the safe readable part, the full text)
    for p in points:
        parts, full = [], []
        for o in p.overrides:
            key, text = _value_text(o)
            last = key.split(".")[-1]
            by_value = last in _BY_VALUE or key in _SECTION_NAMES or "." not in key
            parts.append(text if by_value else f"{labels.get(key, key)}={text}")
            full.append(shown(o))
        raw = "\x00".join(full)
        readable.append((_cut(_safe("__".join(parts)), raw, _READABLE_BYTES), raw))
    count: dict[tuple[str, int], set[str]] = {}
    for p, (safe, raw) in zip(points, readable, strict=True):
        count.setdefault((safe, p.seed), set()).add(raw)
    names = []
    for p, (safe, raw) in zip(points, readable, strict=True):
        if len(count[safe, p.seed]) > 1 and "~" not in safe:
            safe = f"{safe}~{_digest(raw)}"
        name = f"{safe}__seed={p.seed}" if safe else f"seed={p.seed}"
        names.append("_" + name[1:] if name.startswith(".") else name)  # never a hidden folder
    return names


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
    """The Cartesian product of the grid values and the seeds (seed varies fastest), each point
    named by :func:`point_names`.

    Raises:
        ScenarioError: a value given twice (two points with the same overrides and seed).
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
    seen: set[tuple[str, ...]] = set()
    for p in points:
        shown_all = (*(shown(o) for o in p.overrides), str(p.seed))
        if shown_all in seen:
            a = ", ".join(shown(o) for o in p.overrides)
            raise ScenarioError(
                "--grid",
                f"the grid point [{a}] with seed {p.seed} appears twice",
                "give each value of a field once",
            )
        seen.add(shown_all)
    names = point_names(points, keys)
    return [replace(p, folder=n) for p, n in zip(points, names, strict=True)]


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
    from wflsim.sim.config.loading import apply_overrides
    from wflsim.sim.config.plausibility import cross_findings

    from .run import fingerprint, prepare_source
    from .scenario import report_findings, report_implausible
    from .sweep_modes import way_out

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
            try:
                point_table = apply_overrides(source.table(), overrides)
            except ScenarioError:
                point_table = {}
            fix = way_out(err, [k for k, _ in grid], point_table)
            raise ScenarioError(
                err.field, f"{err.problem} [grid point {point.name}]", fix
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
    """Each point's grid overrides as its run applies them: a value of a field that applies to
    some choices of its section only (:mod:`wflsim.app.sweep_modes`: a scheme's parameter such
    as ``scheme.tol``, an uplink mode's field such as ``uplink.power_control``, a server mode's,
    a fading model's such as ``channel.fading.k_db``) that the point's choice does not take,
    but the choice of another point does, is left out (that choice would refuse it; its runs
    at the field's values are identical and share,
    :func:`~wflsim.app.sweep_folder.shared_points`). A field no choice of the sweep takes is
    kept, and refused by validation (a misspelling, or a field of a mode the sweep never
    runs).

    ``table``: the raw scenario table; ``extra``: the ``--set`` overrides of every point.
    """
    from wflsim.sim.config.loading import apply_overrides

    from .sweep_modes import families

    fams = families()
    taken: dict[str, list[frozenset[str] | None]] = {}
    for p in points:
        try:
            resolved = apply_overrides(table, [*extra, *p.overrides])
        except ScenarioError:
            resolved = None
        taken[p.name] = [
            None if resolved is None or (c := f.choice(resolved)) is None else f.accepted(c)
            for f in fams
        ]
    known: list[set[str]] = [set() for _ in fams]
    for fields_of_point in taken.values():
        for i, fields in enumerate(fields_of_point):
            known[i] |= fields or set()

    def used(override: PointOverride, name: str) -> bool:
        for i, fam in enumerate(fams):
            field_name = fam.field_of(override)
            fields = taken[name][i]
            if field_name is not None and fields is not None and field_name in known[i]:
                if field_name not in fields:
                    return False
        return True

    return {p.name: tuple(o for o in p.overrides if used(o, p.name)) for p in points}


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
    from wflsim.sim.registry import SCHEMES
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
