"""Sweeps: many runs of one scenario over a grid of field values and seeds.

``wflsim sweep FILE --grid scheme=two_timescale,ideal --grid scheme.V=10,100 --seeds 0-2``

* One run directory per grid point under the sweep directory, named after its overrides
  (``scheme.name=ideal__scheme.V=10__seed=0``), plus ``sweep.json``: the scenario, the grid, and
  each point's status.
* Every grid point is validated before anything runs or is written (a bad value anywhere stops
  the sweep with the usual one-line error).
* Each point's run folder records the fingerprint of what produced it (scenario text, overrides,
  seed, wflsim version: :func:`wflsim.app.run.fingerprint`). Repeating the command skips the points
  completed with the same fingerprint and resumes the killed, failed or interrupted ones from
  their last checkpoint; a point whose folder holds a run of another fingerprint (the scenario
  file was edited, other ``--set`` values) is refused before anything runs, naming the point,
  unless ``--overwrite`` recomputes it.
* Point names are unique: two grid points whose folder names would coincide (``"a b"`` and
  ``"a_b"``) are refused.
* Ctrl-C (or SIGTERM) stops starting points, interrupts the points in flight (their manifests say
  ``interrupted``; repeating the command resumes them) and exits 130. Worker processes die with
  the sweep: a killed sweep leaves no orphans (on Linux the kernel signals them; elsewhere a
  watchdog thread in each worker notices the parent is gone).
* Identical points share one run: points whose runs would be identical (the same seed and
  everything else the run reads: :func:`run_identity`) run once, in the first such point's
  folder; the others record ``same_as`` in ``sweep.json`` and get no folder
  (:func:`shared_points`; ``plan_sweep(..., dedup=False)`` gives every point its own). A grid
  value of a scheme parameter that a point's scheme does not declare, but another scheme of the
  sweep does (``--grid scheme=ideal,two_timescale --grid scheme.tol=1e-6,1e-9``: ``ideal`` has
  no ``tol``), is left out of that point's run (:func:`applied_overrides`), which then shares.
  So does a value of a parameter that a point's scheme declares to change only its logged cost
  (``scheme.V`` of ``ideal`` and ``fixed_power``): readers recompute the shared run's ``cost``
  column at each point's value (:mod:`wflsim.analysis.tidy`).
* Common random numbers: a run's randomness depends only on its seed (``sim/rng.py``), so for a
  given seed every grid point sees the same positions, mobility, fading and data partition.
* Executors: ``local`` (a process pool; ``--workers N``) and ``ray`` (each point a Ray task; a
  local ``ray.init()`` by default or an existing cluster with ``--ray-address``; needs the
  optional extra ``pip install -e ".[ray]"``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.util
import itertools
import json
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wflsim.sim import rundir
from wflsim.sim.config.limits import MAX_POINT_NAME_BYTES, MAX_SEED, MAX_SWEEP_POINTS, shorten
from wflsim.sim.errors import ScenarioError
from wflsim.sim.trace import write_json_atomic

if TYPE_CHECKING:
    from wflsim.sim.engine import Hooks

    from .run import Prepared

from . import folders
from .extensions import shipment
from .log import configure_logging
from .run import ScenarioSource

log = logging.getLogger(__name__)

#: Grid keys that name a section rather than a field mean its ``name``.
_SECTION_NAMES = {"scheme": "scheme.name"}
#: Longest point folder name (file systems allow 255 bytes).
_MAX_NAME = MAX_POINT_NAME_BYTES


@dataclass(frozen=True)
class GridPoint:
    """One run of a sweep: its ``--set`` overrides and seed (and, for a comparison's variant,
    the label that names its folder instead of the overrides)."""

    overrides: tuple[str, ...]
    seed: int
    label: str = ""

    @property
    def name(self) -> str:
        """The run directory's name: ``key=value__...__seed=N`` (filesystem-safe: other
        characters become ``_``; a name longer than 160 bytes in UTF-8, which letters outside
        ASCII reach sooner than 160 characters, is cut at a character boundary and ends with a
        hash of the whole)."""
        parts = [self.label] if self.label else [*self.overrides]
        parts.append(f"seed={self.seed}")
        raw = "__".join(parts)
        safe = "".join(c if c.isalnum() or c in "-_.=," else "_" for c in raw)
        if len(safe.encode("utf-8")) > _MAX_NAME:
            digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:12]
            head = safe.encode("utf-8")[: _MAX_NAME - 14].decode("utf-8", errors="ignore")
            safe = f"{head}~{digest}"
        return safe

    def all_overrides(self) -> list[str]:
        return [*self.overrides, f"seed={self.seed}"]


@dataclass
class SweepPlan:
    """A validated sweep: the grid points in a fixed order."""

    scenario: ScenarioSource
    grid: list[tuple[str, list[str]]]
    seeds: list[int]
    points: list[GridPoint] = field(default_factory=list)
    #: point name -> the fingerprint its run records (:func:`wflsim.app.run.fingerprint`)
    fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: point name -> the grid overrides its run applies (:func:`applied_overrides`; absent: all)
    run_overrides: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: point name -> a hash of what its run reads (:func:`run_identity`): equal, identical runs
    identities: dict[str, str] = field(default_factory=dict)
    #: whether points with identical runs share one (:func:`shared_points`)
    dedup: bool = True

    def applied(self, point: GridPoint) -> tuple[str, ...]:
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


def expand(grid: list[tuple[str, list[str]]], seeds: list[int]) -> list[GridPoint]:
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
        overrides = tuple(f"{k}={v}" for k, v in zip(keys, combo, strict=True))
        points.extend(GridPoint(overrides, s) for s in seeds)
    seen: dict[str, GridPoint] = {}
    for p in points:
        other = seen.setdefault(p.name, p)
        if other is not p:
            a, b = ", ".join(other.overrides), ", ".join(p.overrides)
            raise ScenarioError(
                "--grid",
                f"the grid points [{a}] and [{b}] would share the run folder {p.name!r}",
                "give each value once, and values that differ in letters, digits or -_.=, "
                "(other characters become _ in folder names)",
            )
    return points


def plan_sweep(
    scenario: str | Path | ScenarioSource,
    grid_specs: list[str],
    seeds: str | None,
    *,
    data_dir: str | None = None,
    extra_overrides: list[str] | None = None,
    strict: bool = False,
    dedup: bool = True,
) -> SweepPlan:
    """Build and validate every grid point (nothing is written).

    The scenario file's optional ``[sweep]`` table (``grid = { "scheme.V" = [10, 100] }``,
    ``seeds = [0, 1]``) is used where the command line gives no grid or seeds. Values
    implausible for their unit are checked at every point and each distinct finding is reported
    once, as a :class:`~wflsim.sim.errors.PlausibilityWarning` (with ``strict``, the first is an
    error naming the point). ``dedup``: points whose runs would be identical share one run
    (:func:`shared_points`).

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
    if grid_specs:
        grid = parse_grid(grid_specs)
    else:
        grid = parse_grid(
            f"{k}={','.join(_toml_text(v, f'sweep.grid.{k}') for v in vals)}"
            for k, vals in file_sweep.grid.items()
        )
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
    )


def plan_points(
    source: ScenarioSource,
    grid: list[tuple[str, list[str]]],
    seeds: list[int],
    points: list[GridPoint],
    *,
    data_dir: str | None = None,
    extra_overrides: list[str] | None = None,
    strict: bool = False,
    dedup: bool = True,
    as_written: bool = False,
) -> SweepPlan:
    """Validate every point of a sweep (nothing is written); each distinct implausible value is
    reported once (:func:`plan_sweep`). ``dedup``: points whose runs would be identical share
    one run (:func:`shared_points`). ``as_written``: every point's overrides apply as given
    (a comparison's variants), none is left out for a scheme that does not declare it
    (:func:`applied_overrides`, a grid's rule).

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
        else applied_overrides(points, source.table(), extra_overrides or [])
    )
    fingerprints, identities = {}, {}
    for point in points:
        overrides = [*(extra_overrides or []), *applied[point.name]]
        try:
            prep = prepare_source(
                source, overrides, point.seed, data_dir, strict=strict, warn=False
            )
        except ScenarioError as err:
            raise ScenarioError(
                err.field, f"{err.problem} [grid point {point.name}]", err.fix
            ) from None
        report_implausible(prep.scenario, reported=reported)
        report_findings(
            cross_findings(prep.scenario, prep.devices),
            reported=reported,
        )
        fingerprints[point.name] = fingerprint(prep)
        identities[point.name] = run_identity(prep, fingerprints[point.name])
    return SweepPlan(source, grid, seeds, points, fingerprints, applied, identities, dedup)


# ------------------------------------------------------------------ points sharing one run


def applied_overrides(
    points: list[GridPoint], table: dict[str, Any], extra: list[str]
) -> dict[str, tuple[str, ...]]:
    """Each point's grid overrides as its run applies them: a value of a scheme parameter
    (``scheme.tol=1e-6``) that the point's scheme does not declare in its parameter model, but
    the scheme of another point does, is left out (that scheme would refuse it; its runs at the
    parameter's values are identical and share, :func:`shared_points`). A parameter no scheme of
    the sweep declares is kept, and refused by validation (a misspelling).

    ``table``: the raw scenario table; ``extra``: the ``--set`` overrides of every point.
    """
    declared = {p.name: _scheme_fields(table, [*extra, *p.overrides]) for p in points}
    known = set().union(*(f for f in declared.values() if f is not None))

    def used(override: str, fields: frozenset[str] | None) -> bool:
        param = _scheme_parameter(override)
        return fields is None or param is None or param in fields or param not in known

    return {p.name: tuple(o for o in p.overrides if used(o, declared[p.name])) for p in points}


def _scheme_parameter(override: str) -> str | None:
    """The scheme parameter an override sets (``scheme.csi_margin.target_outage=0.1`` ->
    ``csi_margin``); None for other fields, ``scheme.name`` and what does not parse."""
    from wflsim.sim.config.loading import parse_override

    try:
        path, _ = parse_override(override)
    except ScenarioError:
        return None
    return path[1] if len(path) > 1 and path[0] == "scheme" and path[1] != "name" else None


def _scheme_fields(table: dict[str, Any], overrides: list[str]) -> frozenset[str] | None:
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


def shared_points(plan: SweepPlan, out: Path | None = None) -> dict[str, str]:
    """The points that share another point's run: name -> the point whose folder holds it.

    With ``plan.dedup``, points whose runs are identical (equal :func:`run_identity`) share one
    run: the first of them in grid order, or, when some of them already have folders in
    ``out`` (made without sharing, or before the grid changed), the first with a folder. A point
    with a folder of its own keeps it.
    """
    if not plan.dedup:
        return {}
    groups: dict[str, list[str]] = {}
    for p in plan.points:
        groups.setdefault(plan.identities.get(p.name, p.name), []).append(p.name)
    same_as: dict[str, str] = {}
    for names in groups.values():
        if len(names) < 2:
            continue
        own = [n for n in names if out is not None and _has_folder(out / n, plan, n)]
        original = own[0] if own else names[0]
        same_as.update((n, original) for n in names if n != original and n not in own)
    return same_as


def point_counts(plan: SweepPlan, out: Path, overwrite: bool = False) -> dict[str, int]:
    """What a sweep into ``out`` has before it starts: its ``points``, the ``runs`` they need
    (``shared``: points sharing another's run), and of those runs how many were ``completed``
    before, are to ``resume`` and are to ``start`` (new or recomputed).

    Raises:
        ScenarioError: as :func:`check_points`.
    """
    same_as = shared_points(plan, out)
    modes = check_points(plan, out, overwrite) if out.is_dir() else {}
    counts = {"points": len(plan.points), "runs": 0, "shared": len(same_as)}
    counts.update(completed=0, resume=0, start=0)
    for p in plan.points:
        if p.name in same_as:
            continue
        counts["runs"] += 1
        mode = modes.get(p.name, "new")
        counts[{"skip": "completed", "resume": "resume"}.get(mode, "start")] += 1
    return counts


def _has_folder(run_dir: Path, plan: SweepPlan, name: str) -> bool:
    """Whether a point's folder holds anything of a run (or anything else)."""
    return run_dir.is_symlink() or point_state(run_dir, plan.fingerprints.get(name, {})) != "new"


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


def point_state(run_dir: Path, wanted: dict[str, Any]) -> str:
    """What a point's folder holds: ``new`` (nothing), ``completed`` / ``resume`` (a run of
    this fingerprint, finished or not), ``other`` (a run of another fingerprint), ``stale`` (a
    run killed before it wrote its manifest: nothing to keep), ``foreign`` (files not made by a
    wflsim run)."""
    if not run_dir.exists() or (run_dir.is_dir() and folders.never_started(run_dir)):
        return "new"  # nothing, or a run killed before it began (its lock, no marker)
    if not rundir.is_run_folder(run_dir):
        return "foreign"
    from .run import fingerprint_difference

    manifest = rundir.read_manifest(run_dir)
    if manifest is None:
        return "stale"  # killed before its manifest was written: nothing to keep
    if fingerprint_difference(manifest.get("fingerprint"), wanted):
        return "other"
    # a status alone is not trusted: an incomplete run is resumed (which checks its files)
    stopped = bool((manifest.get("summary") or {}).get("stopped_early"))  # ended on purpose
    done = manifest.get("frames_completed") == manifest.get("frames") or stopped
    return "completed" if manifest.get("status") == "completed" and done else "resume"


# A worker's run in progress, whether it is being stopped, and its parent (signal handlers
# read these).
_IN_RUN = threading.Event()
_STOPPING = threading.Event()
_PARENT: list[int] = []


def _stop_worker(signum: int, frame: object) -> None:
    """SIGTERM / SIGINT in a worker: interrupt the run in progress once (its manifest then
    says ``interrupted``) and start no other; an idle worker whose parent is gone leaves."""
    if _STOPPING.is_set():
        return
    _STOPPING.set()
    if _IN_RUN.is_set():
        raise KeyboardInterrupt
    if _PARENT and os.getppid() != _PARENT[0]:
        os._exit(130)


def _worker_init(parent_pid: int, extensions: bytes | None = None) -> None:
    """Initializer of a sweep's worker process: the parent's registered extensions
    (:mod:`wflsim.app.extensions`), stop on SIGTERM / SIGINT (:func:`_stop_worker`) and die with
    the parent (Linux: the kernel sends SIGTERM when the parent dies; everywhere: a watchdog
    thread that checks the parent's pid every second)."""
    from . import extensions as _extensions

    _extensions.install(extensions)
    _PARENT[:] = [parent_pid]
    configure_logging(None)  # the sweep's level, through the environment
    signal.signal(signal.SIGTERM, _stop_worker)
    signal.signal(signal.SIGINT, _stop_worker)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:  # the parent died before the line above
        os._exit(130)

    def watchdog() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)  # interrupts the run in progress
        for _ in range(300):  # up to 30 s to record it as interrupted, then leave
            time.sleep(0.1)
            if not _IN_RUN.is_set():
                break
        os._exit(130)

    threading.Thread(target=watchdog, name="wflsim-parent-watchdog", daemon=True).start()


def run_point(
    scenario: str | ScenarioSource,
    overrides: list[str],
    seed: int,
    out: str,
    data_dir: str | None,
    threads: int | None,
    mode: str = "new",
    in_worker: bool = False,
    hooks: Hooks | None = None,
    extensions: bytes | None = None,
) -> dict[str, Any]:
    """Run one grid point into ``out`` (the worker function of every executor; ``extensions``:
    the parent's registrations, installed first, :func:`wflsim.app.extensions.install`).

    ``mode``: ``new`` (an empty folder), ``resume`` (continue this fingerprint's run) or
    ``overwrite`` (replace a run of another fingerprint). In a worker process (``in_worker``)
    an interruption is returned as ``{"status": "interrupted"}``; in the sweep's own process it
    is raised, to stop the sweep.
    """
    if threads:
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        os.environ.setdefault("MKL_NUM_THREADS", str(threads))
    from .run import execute, make_learner, prepare_source, resume

    if in_worker and _STOPPING.is_set():
        return {"status": "not started"}
    if extensions is not None:
        from . import extensions as _extensions

        _extensions.install(extensions)
    log.info("point %s: %s", Path(out).name, mode)
    try:
        source = ScenarioSource.of(scenario)
        prep = prepare_source(source, overrides, seed, data_dir, warn=False)  # the plan warned
        if threads and prep.scenario.learning.enabled:
            import torch

            torch.set_num_threads(threads)
        learner = make_learner(prep)
        _IN_RUN.set()
        try:
            if mode == "resume":
                stats = resume(prep, learner, Path(out), hooks=hooks)
                if stats is None:
                    return {"status": "completed", "note": "already completed"}
            else:
                stats = execute(
                    prep, learner, Path(out), overwrite=mode == "overwrite", hooks=hooks
                )
        finally:
            _IN_RUN.clear()
            if in_worker and _PARENT and os.getppid() != _PARENT[0]:
                os._exit(130)  # the sweep is gone: nobody will read a result
    except KeyboardInterrupt:
        if not in_worker:
            raise
        return {"status": "interrupted", "error": "interrupted"}
    except Exception as err:  # recorded in the run's manifest and the sweep's
        return {"status": "failed", "error": f"{type(err).__name__}: {err}"}
    return {"status": "completed", "summary": stats.as_dict()}


ProgressFn = Callable[[str, dict[str, Any]], None]
#: :func:`run_point`'s positional arguments: scenario, overrides, seed, out, data_dir, threads, mode
PointArgs = tuple[ScenarioSource, list[str], int, str, str | None, int | None, str]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class SweepInterrupted(KeyboardInterrupt):
    """The sweep was stopped by Ctrl-C or SIGTERM; ``counts`` says how its points ended."""

    def __init__(self, counts: dict[str, int]) -> None:
        super().__init__()
        self.counts = counts


def check_points(plan: SweepPlan, out: Path, overwrite: bool) -> dict[str, str]:
    """Each point's mode (``skip``, ``new``, ``resume``, ``overwrite``), checked before anything
    runs or is written.

    Raises:
        ScenarioError: a point's folder holds a run of another fingerprint (without
            ``overwrite``) or files not made by wflsim.
    """
    modes: dict[str, str] = {}
    for p in plan.points:
        if (out / p.name).is_symlink():  # a point's folder is the sweep's: never a link
            raise rundir.link_error(out / p.name)
        rundir.check_no_links(out / p.name)
        st = point_state(out / p.name, plan.fingerprints.get(p.name, {}))
        if st == "foreign":
            raise ScenarioError(
                "--out",
                f"grid point {p.name}: {str(out / p.name)!r} holds files not made by a wflsim run",
                "choose another --out",
            )
        if st == "other" and not overwrite:
            from .run import fingerprint_difference

            made = (rundir.read_manifest(out / p.name) or {}).get("fingerprint")
            why = fingerprint_difference(made, plan.fingerprints[p.name])
            raise ScenarioError(
                "--out",
                f"grid point {p.name} in {str(out)!r} was made by another run ({why})",
                "pass --overwrite to recompute such points, or choose another --out",
            )
        modes[p.name] = {
            "completed": "skip",
            "new": "new",
            "resume": "resume",
            "other": "overwrite",
            "stale": "overwrite",
        }[st]
    return modes


def run_sweep(
    plan: SweepPlan,
    out: Path,
    *,
    workers: int = 1,
    executor: str = "local",
    data_dir: str | None = None,
    extra_overrides: list[str] | None = None,
    ray_address: str | None = None,
    progress: ProgressFn | None = None,
    overwrite: bool = False,
    hooks: Hooks | None = None,
) -> dict[str, Any]:
    """Run every grid point not yet completed; returns the sweep manifest (also ``out/sweep.json``).

    One sweep writes a sweep folder at a time: it holds the folder's lock
    (:class:`wflsim.app.folders.RunLock`, ``wflsim.lock``) while it runs; a lock left by a dead
    process is taken over.

    Raises:
        ScenarioError: a point's folder cannot be used (:func:`check_points`; nothing written),
            or another sweep (or run) writes the folder.
        SweepInterrupted: Ctrl-C / SIGTERM (``sweep.json`` records every point's state).
    """
    if executor not in ("local", "ray"):
        raise ScenarioError("--executor", f"unknown executor {executor!r}", "use local or ray")
    if hooks is not None and (executor != "local" or workers > 1):
        raise ScenarioError(
            "hooks",
            "are called in the sweep's own process, but its points run in worker processes",
            "use workers = 1 with the local executor",
        )
    shipped = None  # the registered extensions, checked before anything is written
    if executor == "ray" or workers > 1:
        try:
            shipped = shipment()
        except ValueError as err:
            raise ScenarioError("extensions", str(err)) from None
    if executor == "ray" and importlib.util.find_spec("ray") is None:  # before anything is written
        raise ScenarioError(
            "--executor", "ray is not installed", 'pip install -e ".[ray]", or use --executor local'
        )
    if out.is_dir():
        if (out / "sweep.json").is_symlink():
            raise rundir.link_error(out / "sweep.json")
        check_points(plan, out, overwrite)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    lock = folders.RunLock(out, kind="sweep")
    try:
        lock.acquire()
    except BaseException:
        if created:
            try:
                out.rmdir()
            except OSError:
                pass
        raise
    try:
        return _run_sweep_locked(
            plan,
            out,
            workers=workers,
            executor=executor,
            data_dir=data_dir,
            extra=list(extra_overrides or []),
            ray_address=ray_address,
            progress=progress,
            overwrite=overwrite,
            hooks=hooks,
            shipped=shipped,
        )
    finally:
        lock.release()


def _run_sweep_locked(
    plan: SweepPlan,
    out: Path,
    *,
    workers: int,
    executor: str,
    data_dir: str | None,
    extra: list[str],
    ray_address: str | None,
    progress: ProgressFn | None,
    overwrite: bool,
    hooks: Hooks | None,
    shipped: bytes | None = None,
) -> dict[str, Any]:
    """:func:`run_sweep` once this process holds the sweep folder's lock (``shipped``: the
    registered extensions for the worker processes, :func:`wflsim.app.extensions.shipment`)."""
    if (out / "sweep.json").is_symlink():
        raise rundir.link_error(out / "sweep.json")
    modes = check_points(plan, out, overwrite)  # again: the folder may have changed meanwhile
    manifest_path = out / "sweep.json"
    try:  # a previous execution of this sweep: its records of completed points are kept
        previous = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = {}
    manifest: dict[str, Any] = {
        "scenario_file": None if plan.scenario.path is None else str(plan.scenario.path),
        "scenario_text": plan.scenario.text,
        "grid": [{"field": k, "values": v} for k, v in plan.grid],
        "seeds": plan.seeds,
        "overrides": extra,
        "executor": executor,
        "workers": workers,
        "dedup": plan.dedup,
        "first_started_at": previous.get("first_started_at")
        or previous.get("started_at")
        or _now(),
        "started_at": _now(),
        "finished_at": None,
        "status": "running",
        "points": {},
    }
    same_as = shared_points(plan, out)
    manifest["points"], todo = _point_entries(plan, modes, same_as, previous.get("points"))
    write_json_atomic(manifest_path, manifest)

    threads = max(1, (os.cpu_count() or 1) // max(1, workers)) if workers > 1 else None
    args: dict[str, PointArgs] = {
        p.name: (
            plan.scenario,
            [*extra, *plan.applied(p)],
            p.seed,
            str(out / p.name),
            data_dir,
            threads,
            modes.get(p.name, "new"),
        )
        for p in todo
    }

    followers: dict[str, list[str]] = {}
    for name, original in same_as.items():
        followers.setdefault(original, []).append(name)

    def record(name: str, result: dict[str, Any]) -> None:
        manifest["points"][name].update(result)
        for f in followers.get(name, ()):
            _follow(manifest["points"], f)
        write_json_atomic(manifest_path, manifest)
        if progress is not None:
            for n in (name, *followers.get(name, ())):
                progress(n, result)

    if progress is not None:  # the points this execution does not run (a bar counts them too)
        running = {p.name for p in todo} | {n for n, o in same_as.items() if o in args}
        for name, entry in manifest["points"].items():
            if name not in running:
                progress(name, entry)

    try:
        if not todo:
            pass  # nothing to run; the manifest still records this execution
        elif executor == "ray":
            _run_ray(args, record, ray_address, shipped)
        elif workers <= 1:
            for name, a in args.items():
                manifest["points"][name]["status"] = "running"
                for f in followers.get(name, ()):
                    _follow(manifest["points"], f)
                write_json_atomic(manifest_path, manifest)
                record(name, run_point(*a, hooks=hooks))
        else:
            _run_pool(args, record, workers, shipped)
    except KeyboardInterrupt:
        counts = _mark_interrupted(manifest, out)
        manifest["status"] = "interrupted"
        manifest["finished_at"] = _now()
        write_json_atomic(manifest_path, manifest)
        raise SweepInterrupted(counts) from None
    manifest["status"] = "completed"
    manifest["finished_at"] = _now()
    write_json_atomic(manifest_path, manifest)
    return manifest


#: The entries of a point's record that say how its run went (a point sharing another's run
#: has that point's).
_RESULT_KEYS = ("status", "summary", "error", "note")


def _point_entries(
    plan: SweepPlan,
    modes: dict[str, str],
    same_as: dict[str, str],
    previous: Any,
) -> tuple[dict[str, dict[str, Any]], list[GridPoint]]:
    """``sweep.json``'s record of each point (``previous``: the last execution's records, whose
    results a completed point keeps) and the points to run, in grid order. A point sharing
    another's run records ``same_as`` and ``dir``: that point's name, and its status."""
    previous = previous if isinstance(previous, dict) else {}
    entries: dict[str, dict[str, Any]] = {}
    todo: list[GridPoint] = []
    for p in plan.points:
        entry: dict[str, Any] = {
            "overrides": list(p.overrides),
            "seed": p.seed,
            "dir": same_as.get(p.name, p.name),
            "fingerprint": plan.fingerprints.get(p.name),
        }
        entry["values"] = _grid_values(p.overrides)
        unused = [o for o in p.overrides if o not in plan.applied(p)]
        if unused:
            entry["unused_overrides"] = unused
        mode = modes.get(p.name, "new")
        if p.name in same_as:
            entry["same_as"] = same_as[p.name]
        elif mode == "skip":
            before = previous.get(p.name)
            before = before if isinstance(before, dict) else {}
            entry = {**{k: v for k, v in before.items() if k in _RESULT_KEYS}, **entry}
            entry["status"] = "skipped (already completed)"
        else:
            entry["status"] = "pending"
            entry["mode"] = mode
            todo.append(p)
        entries[p.name] = entry
    for name in same_as:
        _follow(entries, name)
    return entries, todo


def _grid_values(overrides: tuple[str, ...]) -> dict[str, Any]:
    """A point's grid values as read (``{"scheme.tol": 1e-06}``), for readers of
    ``sweep.json`` (:mod:`wflsim.analysis.tidy` shows them as the point's configuration)."""
    from wflsim.sim.config.loading import parse_override

    values: dict[str, Any] = {}
    for o in overrides:
        try:
            path, value = parse_override(o)
        except ScenarioError:
            continue
        plain = isinstance(value, str | int | float | bool)  # not a TOML date or time
        values[".".join(path)] = value if plain else str(value)
    return values


def _follow(points: dict[str, dict[str, Any]], name: str) -> None:
    """Give the point ``name`` the result of the point whose run it shares."""
    entry = points[name]
    original = points[entry["same_as"]]
    for k in _RESULT_KEYS:
        entry.pop(k, None)
        if k in original:
            entry[k] = original[k]


def _mark_interrupted(manifest: dict[str, Any], out: Path) -> dict[str, int]:
    """After an interruption: every point not finished is ``interrupted`` (it had started: its
    folder has a manifest) or ``not started`` (a point sharing another's run: that point's
    state); returns the counts of the points' states."""
    counts = {"completed": 0, "interrupted": 0, "not started": 0, "failed": 0}
    points = manifest["points"]
    for name in sorted(points, key=lambda n: "same_as" in points[n]):  # followers last
        entry = points[name]
        st = str(entry.get("status", ""))
        if "same_as" in entry:
            _follow(points, name)
        elif not (st in ("completed", "failed") or st.startswith("skipped")):
            started = rundir.read_manifest(out / name) is not None
            entry["status"] = "interrupted" if started else "not started"
        st = str(entry.get("status", ""))
        key = "completed" if st.startswith("skipped") else st
        counts[key] = counts.get(key, 0) + 1
    return counts


def _run_pool(
    args: dict[str, PointArgs],
    record: Callable[[str, dict[str, Any]], None],
    workers: int,
    extensions: bytes | None = None,
) -> None:
    """Run the points in a pool of spawned worker processes that die with this one."""
    import multiprocessing as mp

    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=mp.get_context("spawn"),
        initializer=_worker_init,
        initargs=(os.getpid(), extensions),
    )
    futures: dict[Future[dict[str, Any]], str] = {}
    try:
        # The workers are spawned in submit(). Spawned with SIGINT ignored (an ignored signal
        # stays ignored across exec, and Python then installs no KeyboardInterrupt handler), a
        # worker still importing when Ctrl-C reaches the process group does not die with a
        # traceback; _worker_init installs its handler, and this process stops the workers.
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            for name, a in args.items():
                futures[pool.submit(run_point, *a, in_worker=True)] = name
        finally:
            if main:
                signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
        for fut in as_completed(futures):
            name = futures[fut]
            try:
                result = fut.result()
            except Exception as err:
                result = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
            record(name, result)
    except KeyboardInterrupt:
        for fut in futures:
            fut.cancel()  # the points not yet handed to a worker never start
        # the pool's worker processes (a private attribute, stable since Python 3.2)
        procs = list(getattr(pool, "_processes", {}).values())
        for proc in procs:
            if proc.is_alive() and proc.pid is not None:
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        pool.shutdown(wait=False, cancel_futures=True)  # idle workers leave
        deadline = time.monotonic() + 60.0
        for proc in procs:  # the runs in flight write their 'interrupted' manifests
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
        for fut, name in futures.items():
            if fut.done() and not fut.cancelled():
                try:
                    result = fut.result(timeout=0)
                except BaseException:
                    continue
                if result.get("status") in ("completed", "failed"):
                    record(name, result)
        raise
    pool.shutdown(wait=True)


def _run_ray(
    args: dict[str, tuple],
    record: Callable[[str, dict[str, Any]], None],
    address: str | None,
    extensions: bytes | None = None,
) -> None:
    try:
        import ray
    except ImportError:
        raise ScenarioError(
            "--executor", "ray is not installed", 'pip install -e ".[ray]", or use --executor local'
        ) from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True
        )
    try:
        task = ray.remote(num_cpus=1)(run_point)
        shipped = None if extensions is None else ray.put(extensions)
        refs = {task.remote(*a, extensions=shipped): name for name, a in args.items()}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    result = ray.get(ref)
                except Exception as err:
                    result = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
                record(refs[ref], result)
    finally:
        if started_here:
            ray.shutdown()
