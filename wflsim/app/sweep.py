"""Sweeps: many runs of one scenario over a grid of field values and seeds.

``wflsim sweep FILE --grid scheme=two_timescale,ideal --grid scheme.V=10,100 --seeds 0-2``

* One run directory per grid point under the sweep directory, named after its grid values
  (``ideal__V=10__seed=0``: :func:`point_names`), plus ``sweep.json``: the scenario, the grid,
  and each point's overrides in full and status.
* Every grid point is validated before anything runs or is written (a bad value anywhere stops
  the sweep with the usual one-line error).
* Each point's run folder records the fingerprint of what produced it (scenario text, overrides,
  seed, wflsim version: :func:`wflsim.app.run.fingerprint`). Repeating the command skips the points
  completed with the same fingerprint and resumes the killed, failed or interrupted ones from
  their last checkpoint; a point whose folder holds a run of another fingerprint (the scenario
  file was edited, other ``--set`` values) is refused before anything runs, naming the point,
  unless ``--overwrite`` recomputes it.
* Point names are unique: two grid points whose readable names would coincide (``"a b"`` and
  ``"a_b"``) end in a hash of their values; a value given twice is refused. A sweep folder
  written when names held every override in full keeps its names (:func:`adopt_names`).
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
  no ``tol``), is left out of that point's run (:func:`applied_overrides`), which then shares;
  so is a field of one uplink or server mode or channel model under a grid over the mode or
  model (:mod:`wflsim.app.sweep_modes`).
  So does a value of a parameter that a point's scheme declares to change only its logged cost
  (``scheme.V`` of ``ideal`` and ``fixed_power``): readers recompute the shared run's ``cost``
  column at each point's value (:mod:`wflsim.analysis.tidy`).
* Common random numbers: a run's randomness depends only on its seed (``sim/rng.py``), so for a
  given seed every grid point sees the same positions, mobility, fading and data partition.
* Executors: ``local`` (a process pool; ``--workers N``) and ``ray`` (each point a Ray task; a
  local ``ray.init()`` by default or an existing cluster with ``--ray-address``; needs the
  optional extra ``pip install -e ".[ray]"``).
* Modules: :mod:`wflsim.app.sweep_plan` reads the grid and validates the points,
  :mod:`wflsim.app.sweep_folder` reads the sweep folder and builds ``sweep.json``'s records, and
  this module runs the points (the workers, their signals, the executors); the public names of
  all three are imported from here.
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wflsim.sim import rundir
from wflsim.sim.errors import ScenarioError
from wflsim.sim.trace import write_json_atomic

if TYPE_CHECKING:
    from wflsim.sim.engine import Hooks

from . import folders
from .extensions import shipment
from .log import configure_logging
from .run import ScenarioSource
from .sweep_folder import (
    _follow,
    _mark_interrupted,
    _point_entries,
    adopt_names,
    check_points,
    point_counts,
    point_state,
    shared_points,
)
from .sweep_plan import (
    GridPoint,
    PointOverride,
    SweepPlan,
    applied_overrides,
    expand,
    override_text,
    parse_grid,
    parse_seeds,
    plan_points,
    plan_sweep,
    point_names,
    run_identity,
    shown_value,
)

__all__ = [
    "GridPoint",
    "PointArgs",
    "ProgressFn",
    "SweepInterrupted",
    "SweepPlan",
    "adopt_names",
    "applied_overrides",
    "check_points",
    "expand",
    "parse_grid",
    "parse_seeds",
    "plan_points",
    "plan_sweep",
    "point_counts",
    "point_names",
    "point_state",
    "run_identity",
    "run_point",
    "run_sweep",
    "shared_points",
]

log = logging.getLogger(__name__)


# A worker's run in progress, whether it is being stopped, and its parent (signal handlers
# read these).
_IN_RUN = threading.Event()
_STOPPING = threading.Event()
_PARENT: list[int] = []


def _stop_worker(signum: int, frame: object) -> None:
    """SIGTERM / SIGINT in a worker: interrupt the run in progress once (its manifest then
    says ``interrupted``) and start no other; an idle worker whose parent is gone, or one told
    a second time, leaves."""
    if _STOPPING.is_set():
        if not _IN_RUN.is_set():  # told again while idle: nothing left to record, leave now
            os._exit(130)
        return  # the run in progress is writing its 'interrupted' manifest
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
    overrides: list[PointOverride],
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
            if in_worker and _STOPPING.is_set():
                # told to stop while preparing (the handler saw no run to interrupt then): a
                # signal from here on finds _IN_RUN set and interrupts the run instead
                return {"status": "not started"}
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
PointArgs = tuple[ScenarioSource, list[PointOverride], int, str, str | None, int | None, str]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class SweepInterrupted(KeyboardInterrupt):
    """The sweep was stopped by Ctrl-C or SIGTERM; ``counts`` says how its points ended."""

    def __init__(self, counts: dict[str, int]) -> None:
        super().__init__()
        self.counts = counts


def run_sweep(
    plan: SweepPlan,
    out: Path,
    *,
    workers: int = 1,
    executor: str = "local",
    data_dir: str | None = None,
    extra_overrides: Sequence[PointOverride] | None = None,
    ray_address: str | None = None,
    progress: ProgressFn | None = None,
    overwrite: bool = False,
    hooks: Hooks | None = None,
) -> dict[str, Any]:
    """Run every grid point not yet completed; returns the sweep manifest (also ``out/sweep.json``).

    One sweep writes a sweep folder at a time: it holds the folder's lock
    (:class:`wflsim.app.folders.RunLock`, ``wflsim.lock``) while it runs; a lock left by a dead
    process is taken over. A plan made with ``download`` (:func:`plan_sweep`) first downloads
    the datasets its points need (:func:`_fetch_datasets`), in this process, once the folder
    has been checked and before anything is written to it.

    Raises:
        ScenarioError: a point's folder cannot be used (:func:`check_points`; nothing written),
            or another sweep (or run) writes the folder; a dataset missing or, with
            ``download``, a download that fails (nothing written to the sweep folder).
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
    modes: dict[str, str] = {}
    if out.is_dir():
        if (out / "sweep.json").is_symlink():
            raise rundir.link_error(out / "sweep.json")
        adopt_names(plan, out)  # a folder written under the full names keeps them
        modes = check_points(plan, out, overwrite)
    if plan.download:
        _fetch_datasets(plan, modes)
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


def _fetch_datasets(plan: SweepPlan, modes: dict[str, str]) -> None:
    """Download the datasets the points to run need (``modes``: :func:`check_points`; a
    completed point needs none), each distinct dataset and data folder once, one after the
    other, then check them as a run does (:func:`wflsim.app.fetch.fetch_dataset`: a dataset
    already there is not downloaded again). A missing dataset that cannot be downloaded (not
    MNIST, Fashion-MNIST or CIFAR-10) is refused before anything is downloaded.

    Raises:
        ScenarioError: a download that fails, or a dataset still missing (naming a point).
    """
    from wflsim.sim.config.resolve import check_data_dir

    from .fetch import FETCHABLE, fetch_dataset

    needed: dict[tuple[str, Path], str] = {}  # (dataset, data folder) -> the first point's name
    for p in plan.points:
        if p.name in plan.datasets and modes.get(p.name) != "skip":
            needed.setdefault(plan.datasets[p.name], p.name)
    for (dataset, ddir), name in needed.items():  # first those that cannot be downloaded
        if dataset not in FETCHABLE:
            try:
                check_data_dir(dataset, ddir)
            except ScenarioError as err:
                raise ScenarioError(
                    err.field, f"{err.problem} [grid point {name}]", err.fix
                ) from None
    for dataset, ddir in needed:
        if dataset in FETCHABLE:
            fetch_dataset(dataset, ddir, "learning.data_dir")
            check_data_dir(dataset, ddir)


def _run_sweep_locked(
    plan: SweepPlan,
    out: Path,
    *,
    workers: int,
    executor: str,
    data_dir: str | None,
    extra: list[PointOverride],
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
    adopt_names(plan, out)  # again: the folder may have changed meanwhile
    modes = check_points(plan, out, overwrite)
    manifest_path = out / "sweep.json"
    # a previous execution of this sweep: its records of completed points are kept
    previous = rundir.read_json(manifest_path) or {}
    manifest: dict[str, Any] = {
        "scenario_file": None if plan.scenario.path is None else str(plan.scenario.path),
        "scenario_text": plan.scenario.text,
        "grid": [{"field": k, "values": [shown_value(o) for o in v]} for k, v in plan.grid],
        "seeds": plan.seeds,
        "overrides": [override_text(o) for o in extra],
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
        for proc in procs:  # a worker still there after a minute: the sweep does not wait on it
            # (is_alive can also say True of a worker the pool's own thread has just reaped)
            if proc.is_alive() and proc.pid is not None:
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                    log.info("sweep worker %d still there after 60 s: killed", proc.pid)
                except ProcessLookupError:
                    pass
                proc.join(timeout=5.0)
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
