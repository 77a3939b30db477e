"""Sweeps: many runs of one scenario over a grid of field values and seeds.

``wflsim sweep FILE --grid scheme=two_timescale,ideal --grid scheme.V=10,100 --seeds 0-2``

* One run directory per grid point under the sweep directory, named after its overrides
  (``scheme.name=ideal__scheme.V=10__seed=0``), plus ``sweep.json``: the scenario, the grid, and
  each point's status.
* Every grid point is validated before anything runs or is written (a bad value anywhere stops
  the sweep with the usual one-line error).
* Completed runs (their ``manifest.json`` says ``completed`` with the same overrides) are skipped
  when the command is repeated, so an interrupted sweep resumes where it stopped.
* Common random numbers: a run's randomness depends only on its seed (``sim/rng.py``), so for a
  given seed every grid point sees the same positions, mobility, fading and data partition.
* Executors: ``local`` (a process pool; ``--workers N``) and ``ray`` (each point a Ray task; a
  local ``ray.init()`` by default or an existing cluster with ``--ray-address``; needs the
  optional extra ``pip install -e ".[ray]"``).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.errors import ScenarioError
from sim.trace import write_json_atomic

#: Grid keys that name a section rather than a field mean its ``name``.
_SECTION_NAMES = {"scheme": "scheme.name"}


@dataclass(frozen=True)
class GridPoint:
    """One run of a sweep: its ``--set`` overrides and seed."""

    overrides: tuple[str, ...]
    seed: int

    @property
    def name(self) -> str:
        """The run directory's name: ``key=value__...__seed=N`` (filesystem-safe)."""
        parts = [*self.overrides, f"seed={self.seed}"]
        raw = "__".join(parts)
        return "".join(c if c.isalnum() or c in "-_.=," else "_" for c in raw)

    def all_overrides(self) -> list[str]:
        return [*self.overrides, f"seed={self.seed}"]


@dataclass
class SweepPlan:
    """A validated sweep: the grid points in a fixed order."""

    scenario: Path
    grid: list[tuple[str, list[str]]]
    seeds: list[int]
    points: list[GridPoint] = field(default_factory=list)


def parse_grid(specs: Iterable[str]) -> list[tuple[str, list[str]]]:
    """``["scheme=a,b", "scheme.V=10,100"]`` -> ``[("scheme.name", ["a", "b"]), ("scheme.V", ["10", "100"])]``.

    Values stay text; each is read as a TOML value by ``--set`` (so ``10`` is a number).
    """
    out: list[tuple[str, list[str]]] = []
    for spec in specs:
        if "=" not in spec:
            raise ScenarioError(
                "--grid", f"{spec!r} must look like field=v1,v2,...", "e.g. --grid scheme.V=10,100"
            )
        key, values = spec.split("=", 1)
        key = _SECTION_NAMES.get(key.strip(), key.strip())
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not key or not vals:
            raise ScenarioError(
                "--grid", f"{spec!r} has no field or no values", "e.g. --grid scheme.V=10,100"
            )
        if any(k == key for k, _ in out):
            raise ScenarioError("--grid", f"field {key!r} appears twice", "give each field once")
        out.append((key, vals))
    return out


def parse_seeds(text: str) -> list[int]:
    """``"0-2"`` -> ``[0, 1, 2]``; ``"0,3,5"`` -> ``[0, 3, 5]``; ``"1-2,7"`` -> ``[1, 2, 7]``."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                seeds.extend(range(lo, hi + 1))
            elif part:
                seeds.append(int(part))
    except ValueError:
        raise ScenarioError(
            "--seeds", f"{text!r} is not a list of seeds", "e.g. --seeds 0-2 or --seeds 0,3,5"
        ) from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ScenarioError(
            "--seeds", f"{text!r} must name distinct seeds >= 0", "e.g. --seeds 0-2"
        )
    return seeds


def expand(grid: list[tuple[str, list[str]]], seeds: list[int]) -> list[GridPoint]:
    """The Cartesian product of the grid values and the seeds (seed varies fastest)."""
    keys = [k for k, _ in grid]
    points: list[GridPoint] = []
    for combo in itertools.product(*(v for _, v in grid)):
        overrides = tuple(f"{k}={v}" for k, v in zip(keys, combo, strict=True))
        points.extend(GridPoint(overrides, s) for s in seeds)
    return points


def plan_sweep(
    scenario: str | Path,
    grid_specs: list[str],
    seeds: str | None,
    *,
    data_dir: str | None = None,
    extra_overrides: list[str] | None = None,
) -> SweepPlan:
    """Build and validate every grid point (nothing is written).

    The scenario file's optional ``[sweep]`` table (``grid = { "scheme.V" = [10, 100] }``,
    ``seeds = [0, 1]``) is used where the command line gives no grid or seeds.

    Raises:
        ScenarioError: a malformed grid, or a grid point whose scenario is invalid (the message
            names the point).
    """
    from sim.config.loading import read_scenario_file
    from sim.run import prepare

    path = Path(scenario)
    _, table = read_scenario_file(path)
    file_sweep = table.get("sweep", {}) if isinstance(table.get("sweep"), dict) else {}
    if grid_specs:
        grid = parse_grid(grid_specs)
    else:
        grid = parse_grid(
            f"{k}={','.join(_toml_text(v) for v in vals)}"
            for k, vals in file_sweep.get("grid", {}).items()
        )
    if seeds is not None:
        seed_list = parse_seeds(seeds)
    elif "seeds" in file_sweep:
        seed_list = parse_seeds(",".join(str(s) for s in file_sweep["seeds"]))
    else:
        seed_list = [int(table.get("seed", 0))]
    points = expand(grid, seed_list)
    for point in points:
        try:
            prepare(path, [*(extra_overrides or []), *point.overrides], point.seed, data_dir)
        except ScenarioError as err:
            raise ScenarioError(
                err.field, f"{err.problem} [grid point {point.name}]", err.fix
            ) from None
    return SweepPlan(path, grid, seed_list, points)


def _toml_text(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def is_complete(run_dir: Path, point: GridPoint, extra: list[str]) -> bool:
    """A finished run of exactly this point is already in ``run_dir``."""
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    wanted = [*extra, *point.overrides, f"seed={point.seed}"]
    return manifest.get("status") == "completed" and manifest.get("overrides") == wanted


def run_point(
    scenario: str,
    overrides: list[str],
    seed: int,
    out: str,
    data_dir: str | None,
    threads: int | None,
) -> dict[str, Any]:
    """Run one grid point into ``out`` (the worker function of every executor)."""
    if threads:
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        os.environ.setdefault("MKL_NUM_THREADS", str(threads))
    from sim.run import execute, make_learner, prepare

    prep = prepare(scenario, overrides, seed, data_dir)
    if threads and prep.scenario.learning.enabled:
        import torch

        torch.set_num_threads(threads)
    learner = make_learner(prep)
    try:
        stats = execute(prep, learner, Path(out), overwrite=True)
    except Exception as err:  # recorded in the run's manifest and the sweep's
        return {"status": "failed", "error": f"{type(err).__name__}: {err}"}
    return {"status": "completed", "summary": stats.as_dict()}


ProgressFn = Callable[[str, dict[str, Any]], None]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


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
) -> dict[str, Any]:
    """Run every grid point not yet completed; returns the sweep manifest (also ``out/sweep.json``)."""
    extra = list(extra_overrides or [])
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "sweep.json"
    try:  # a previous execution of this sweep: its records of completed points are kept
        previous = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = {}
    manifest: dict[str, Any] = {
        "scenario_file": str(plan.scenario),
        "scenario_text": plan.scenario.read_text(encoding="utf-8"),
        "grid": [{"field": k, "values": v} for k, v in plan.grid],
        "seeds": plan.seeds,
        "overrides": extra,
        "executor": executor,
        "workers": workers,
        "first_started_at": previous.get("first_started_at")
        or previous.get("started_at")
        or _now(),
        "started_at": _now(),
        "finished_at": None,
        "points": {},
    }
    todo: list[GridPoint] = []
    for p in plan.points:
        entry = {"overrides": list(p.overrides), "seed": p.seed, "dir": p.name}
        if is_complete(out / p.name, p, extra):
            entry = {**previous.get("points", {}).get(p.name, {}), **entry}
            entry["status"] = "skipped (already completed)"
        else:
            entry["status"] = "pending"
            todo.append(p)
        manifest["points"][p.name] = entry
    write_json_atomic(manifest_path, manifest)

    threads = max(1, (os.cpu_count() or 1) // max(1, workers)) if workers > 1 else None
    args = {
        p.name: (
            str(plan.scenario),
            [*extra, *p.overrides],
            p.seed,
            str(out / p.name),
            data_dir,
            threads,
        )
        for p in todo
    }

    def record(name: str, result: dict[str, Any]) -> None:
        manifest["points"][name].update(result)
        write_json_atomic(manifest_path, manifest)
        if progress is not None:
            progress(name, result)

    if not todo:
        pass  # nothing to run; the manifest still records this execution
    elif executor == "ray":
        _run_ray(args, record, ray_address)
    elif workers <= 1:
        for name, a in args.items():
            record(name, run_point(*a))
    else:
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(run_point, *a): name for name, a in args.items()}
            for fut in as_completed(futures):
                name = futures[fut]
                try:
                    result = fut.result()
                except Exception as err:
                    result = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
                record(name, result)
    manifest["finished_at"] = _now()
    write_json_atomic(manifest_path, manifest)
    return manifest


def _run_ray(
    args: dict[str, tuple], record: Callable[[str, dict[str, Any]], None], address: str | None
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
        refs = {task.remote(*a): name for name, a in args.items()}
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
