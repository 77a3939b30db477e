"""Running a prepared scenario into its run folder: lock the folder, build the engine, replace a
previous run's files only once the new run has started cleanly, then simulate frame by frame,
each frame a complete Parquet part and every ``run.checkpoint_every_frames`` a checkpoint
(:mod:`wflsim.app.recorder`); the final manifest records how the run ended."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from wflsim._version import __version__
from wflsim.sim.engine import Engine, Hooks, ProgressFn, RunStats
from wflsim.sim.learner import Learner
from wflsim.sim.world.channel import ChannelRecorder
from wflsim.sim.world.system import SystemConstants

from . import folders
from .assemble import build_engine
from .folders import check_out_dir
from .manifest import run_manifest, trace_metadata
from .prepare import Prepared
from .recorder import RunRecorder

log = logging.getLogger(__name__)


def new_recorder(out: Path, manifest: dict[str, Any], prep: Prepared) -> RunRecorder:
    """The writer of the run folder ``out`` for a run of ``prep`` whose manifest is
    ``manifest`` (its trace metadata, checkpoints, channel table)."""
    sc = prep.scenario
    metadata = trace_metadata(manifest)
    return RunRecorder(
        out,
        manifest,
        metadata,
        frames=sc.run.frames,
        checkpoint_every=sc.run.checkpoint_every_frames,
        channel=_channel_recorder(prep, metadata),
        compression=sc.trace.compression,
    )


def drive(engine: Engine, recorder: RunRecorder) -> RunStats:
    """Run the engine to the end with ``recorder`` as its sink and write the final manifest.

    On an exception the manifest records ``interrupted`` (KeyboardInterrupt) or ``failed`` with
    the error; its summary stays the one of the last completed frame; the exception is re-raised.
    """
    try:
        stats = engine.run()
        recorder.flush()
    except BaseException as err:
        status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
        log.info("run %s %s: %s: %s", recorder.folder, status, type(err).__name__, err)
        try:
            recorder.close(
                status=status, error=f"{type(err).__name__}: {err}", finished_at=folders.now_iso()
            )
        except OSError:  # a full disk: the manifest keeps its last state (writer dead: crashed)
            pass
        raise
    recorder.close(
        status="completed", summary=stats.as_dict(), error=None, finished_at=folders.now_iso()
    )
    log.info("run %s completed: %d events, %.1f J", recorder.folder, stats.rows, stats.energy_j)
    return stats


def _channel_recorder(prep: Prepared, metadata: dict[str, str]) -> ChannelRecorder | None:
    """With ``[channel] record = true``: the gatherer of every slot's channel, attached to the
    channel; the run folder's writer takes a frame's rows at a time (``channel/`` parts)."""
    if not prep.scenario.channel.record:
        prep.channel.recorder = None
        return None
    keep = ("wflsim.seed", "wflsim.channel", "wflsim.scenario_resolved")
    recorder = ChannelRecorder(
        prep.channel.num_devices,
        shadowing=prep.channel.has_shadowing,
        los=prep.channel.has_los,
        metadata={k: metadata[k] for k in keep},
    )
    prep.channel.recorder = recorder
    return recorder


def execute(
    prep: Prepared,
    learner: Learner,
    out: Path,
    *,
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    hooks: Hooks | None = None,
) -> RunStats:
    """Run a prepared scenario into the run folder ``out`` (:mod:`wflsim.sim.rundir`).

    ``out`` must not exist or be empty, or (``overwrite``) carry the marker of a wflsim run:
    its previous run's files are removed only once this run has the lock and its engine is
    built. Raises :class:`~wflsim.sim.errors.ScenarioError` (nothing written) for a folder in use or not a run's.
    """
    out = Path(out)
    check_out_dir(out, overwrite)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    lock = folders.RunLock(out)
    try:
        lock.acquire()
        check_out_dir_locked(out, overwrite)
    except BaseException:
        lock.release()
        if created:
            _remove_empty(out)
        raise
    try:
        try:
            system = prep.system
            engine = build_engine(prep, learner, progress=progress, hooks=hooks)
        except BaseException:
            lock.release()
            if created:
                _remove_empty(out)
            raise
        # the new run has started cleanly: now the previous run's files go
        return begin_run(prep, system, engine, out)
    finally:
        lock.release()


def begin_run(prep: Prepared, system: SystemConstants, engine: Engine, out: Path) -> RunStats:
    """Replace the run files in ``out`` (locked by this process) by a new run of ``prep`` on
    ``engine`` from frame 0, and run it to the end."""
    log.info(
        "run %s: scenario %r, scheme %s, seed %d, %d frames x %d slots, %d devices",
        out,
        prep.scenario.name,
        prep.scenario.scheme.name,
        prep.scenario.seed,
        prep.scenario.run.frames,
        prep.scenario.run.slots_per_frame,
        prep.scenario.network.num_devices,
    )
    folders.clear_run_files(out)
    folders.write_marker(out, __version__)
    manifest = run_manifest(prep, system)
    recorder = new_recorder(out, manifest, prep)
    engine.writer = recorder
    return drive(engine, recorder)


def check_out_dir_locked(out: Path, overwrite: bool) -> None:
    """:func:`wflsim.app.folders.check_out_dir` again once this process holds the folder's lock
    (another run may have written the folder meanwhile)."""
    check_out_dir(out, overwrite)


def _remove_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
