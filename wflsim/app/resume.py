"""Continuing a run folder from its last checkpoint (``--resume``): the manifest's scenario
prepared again, every kept file checked against the hash the manifest records (BLAKE3, or
SHA-256 in a folder written before issue 49), the frames
after the checkpoint discarded, so the events equal the uninterrupted run's."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from wflsim.sim import rundir
from wflsim.sim import state as checkpoints
from wflsim.sim.config.loading import (
    apply_overrides,
    parse_scenario_text,
)
from wflsim.sim.engine import Engine, Hooks, ProgressFn, RunStats
from wflsim.sim.errors import ScenarioError
from wflsim.sim.learner import Learner
from wflsim.sim.trace import EVENTS_DIR, list_parts

from . import folders
from .assemble import build_engine
from .manifest import fingerprint, fingerprint_difference
from .prepare import Prepared, prepare_scenario
from .runner import begin_run, drive, new_recorder
from .scenario import validate_scenario

log = logging.getLogger(__name__)


def prepare_from_manifest(
    manifest: dict[str, Any],
    data_dir: str | None = None,
    *,
    strict: bool = False,
    folder: Path | None = None,
    download: bool = False,
) -> Prepared:
    """The prepared scenario of a run folder's manifest: its scenario text, overrides and the
    folder its scenario file was in (``data_dir``: where the data is now, if it moved);
    implausible values as :func:`prepare_scenario` reports them (``strict``: the first is an
    error). ``folder``: the run folder, to name in a refusal. ``download``: a missing
    MNIST, Fashion-MNIST or CIFAR-10 is downloaded into the data folder first, as
    :func:`prepare_scenario` does.

    Raises:
        ScenarioError: the manifest lacks the scenario (edited or damaged), or it no longer
            validates.
    """
    text = manifest.get("scenario_text")
    overrides = manifest.get("overrides")
    if not isinstance(text, str) or not isinstance(overrides, list):
        lacks = "scenario_text" if not isinstance(text, str) else "overrides"
        raise _unresumable(Path("DIR") if folder is None else Path(folder), lacks)
    table = parse_scenario_text(text, "manifest.json scenario_text")
    scenario = validate_scenario(apply_overrides(table, [str(o) for o in overrides]))
    base = manifest.get("scenario_dir")
    if data_dir is None and manifest.get("data_dir"):
        data_dir = str(manifest["data_dir"])
    file = manifest.get("scenario_file")
    return prepare_scenario(
        scenario,
        text=text,
        path=Path(file) if isinstance(file, str) else None,
        overrides=[str(o) for o in overrides],
        data_dir=data_dir,
        base_dir=Path(base) if isinstance(base, str) else None,
        strict=strict,
        download=download,
        privacy_noise_multiplier=_recorded_noise_multiplier(manifest),
    )


def _recorded_noise_multiplier(manifest: dict[str, Any]) -> float | None:
    """The ``z`` a run calibrated for its ``privacy.target_epsilon`` (its manifest's
    ``privacy``; None: none calibrated), so that its continuation uses the same."""
    privacy = manifest.get("privacy")
    if not isinstance(privacy, dict) or not privacy.get("calibrated"):
        return None
    z = privacy.get("noise_multiplier")
    return float(z) if isinstance(z, int | float) and not isinstance(z, bool) else None


def resume_manifest(out: Path) -> dict[str, Any]:
    """The manifest of the run folder ``out`` that ``--resume DIR`` (no SCENARIO) continues.

    Raises:
        ScenarioError: not a run folder; no frame completed (nothing says what to run: run it
            again); a manifest that does not parse (truncated, edited).
    """
    rundir.require_run_folder(out)
    manifest = rundir.read_manifest(out)
    if manifest is not None:
        return manifest
    if folders.never_started(out):
        raise ScenarioError(
            "--resume",
            f"{str(out)!r} holds no completed frame (its run stopped before the first)",
            f"run it again: wflsim run SCENARIO --out {out} (or --resume with SCENARIO)",
        )
    raise rundir.unreadable_manifest(out)


def resume(
    prep: Prepared,
    learner: Learner,
    out: Path,
    *,
    progress: ProgressFn | None = None,
    hooks: Hooks | None = None,
) -> RunStats | None:
    """Continue the run in folder ``out`` from its last checkpoint (None: it had completed).

    Every file kept is checked first against the SHA-256 the manifest records for it: the
    checkpoint and the parts of the frames before it (a damaged or edited one is refused).
    Whether the run is complete is decided from these files, not from the manifest's
    ``status``. The parts of frames after the checkpoint are discarded, so the events equal the
    uninterrupted run's. A folder whose run stopped before it wrote its first manifest (no frame
    completed: :func:`wflsim.app.folders.never_started`) is started from frame 0. ``prep`` must
    have the run's fingerprint (:func:`fingerprint`).

    Raises:
        ScenarioError: not a run folder, in use, another fingerprint, a symbolic link inside
            it, or a damaged checkpoint or trace (the message says which, and the fix).
    """
    out = Path(out)
    rundir.require_run_folder(out)
    with folders.RunLock(out, option="--resume"):
        rundir.check_no_links(out, "--resume")  # again, now that no other wflsim writes it
        manifest = rundir.read_manifest(out)
        if manifest is None:
            if not folders.never_started(out):
                raise rundir.unreadable_manifest(out)
            log.info("resume %s: no frame was completed; starting from frame 0", out)
            return begin_run(
                prep, prep.system, build_engine(prep, learner, progress=progress, hooks=hooks), out
            )
        _check_resumable_manifest(manifest, out)
        diff = fingerprint_difference(manifest.get("fingerprint"), fingerprint(prep))
        if diff:
            raise ScenarioError(
                "--resume",
                f"{str(out)!r} was made by another run: {diff}",
                "resume with the run's own scenario, --set and --seed (or just --resume DIR), "
                "or start a new run with --overwrite",
            )
        engine = build_engine(prep, learner, progress=progress, hooks=hooks)
        checkpoint = _load_verified_checkpoint(engine, manifest, out)
        start = engine.next_frame
        events_dir = out / EVENTS_DIR
        completed = manifest.get("status") == "completed"
        parts = _verified_parts(
            events_dir, start, engine.stats.rows, out, manifest.get("parts"), completed
        )
        channel_parts = None
        if prep.scenario.channel.record:
            rows = start * prep.scenario.run.slots_per_frame * prep.channel.num_devices
            channel_parts = _verified_parts(
                out / rundir.CHANNEL_DIR, start, rows, out, manifest.get("channel_parts"), completed
            )
        frames = prep.scenario.run.frames
        if start >= frames and manifest.get("status") == "completed":
            return None
        if engine.stats.stopped_early is not None and manifest.get("status") == "completed":
            return None  # stopped on purpose (a callback): complete as it is
        if manifest.get("status") == "completed":
            log.warning("%s says completed but holds %d of %d frames: resuming", out, start, frames)
        log.info("resume %s from frame %d of %d", out, start, frames)
        folders.remove_parts_from(events_dir, start)
        if channel_parts is not None:
            folders.remove_parts_from(out / rundir.CHANNEL_DIR, start)
            manifest["channel_parts"] = channel_parts
        manifest.update(
            status="running",
            writer=folders.writer_identity(),
            error=None,
            finished_at=None,
            parts=parts,
            frames_completed=start,
            checkpoint=checkpoint,
            previous_checkpoint=None,
            command=sys.argv,
            resumed=[
                *(manifest.get("resumed") or []),
                {"at": folders.now_iso(), "from_frame": start, "host": rundir.hostname()},
            ],
        )
        if start == 0:
            manifest.update(summary=None)
        recorder = new_recorder(out, manifest, prep)
        engine.writer = recorder
        return drive(engine, recorder)


#: What the writer of a resumed run takes from its manifest (the trace's metadata) and what
#: tells which run made it, with the JSON type each must have.
_RESUMED_KEYS: dict[str, type | tuple[type, ...]] = {
    "fingerprint": dict,
    "scenario_text": str,
    "scenario_resolved": dict,
    "seed": int,
    "versions": dict,
    "num_params": int,
    "channel": dict,
}


def _check_resumable_manifest(manifest: dict[str, Any], out: Path) -> None:
    """Refuse a manifest that lacks what resuming needs (edited or damaged; every run since 0.3
    records it), naming the first missing field instead of failing on it later."""
    for key, kind in _RESUMED_KEYS.items():
        value = manifest.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _unresumable(out, key)


def _unresumable(out: Path, key: str) -> ScenarioError:
    """The refusal of a run folder whose manifest lacks ``key`` that resuming needs."""
    return ScenarioError(
        "--resume",
        f"{str(out / rundir.MANIFEST)!r} has no valid {key!r} (edited or damaged), so the run "
        "cannot be continued",
        f"compute the run again: wflsim run SCENARIO --out {out} --overwrite",
    )


def _tampered(path: Path, what: str) -> ScenarioError:
    """The refusal of a run file that the manifest does not vouch for."""
    return ScenarioError(
        "--resume",
        f"{str(path)!r} {what} (damaged or edited)",
        "start the run again with --overwrite",
    )


def _load_verified_checkpoint(
    engine: Engine, manifest: dict[str, Any], out: Path
) -> dict[str, Any] | None:
    """Load ``out``'s checkpoint into ``engine`` once its hash equals the one the manifest
    records for it (``checkpoint``, or ``previous_checkpoint`` after a kill before the new one
    replaced it); the manifest's entry of the checkpoint loaded (None: there is none yet, the run
    starts from frame 0).

    Raises:
        ScenarioError: the checkpoint is missing though one was complete, or it matches no
            recorded hash, or it is damaged.
    """
    ckpt = out / rundir.CHECKPOINT
    known = [
        e
        for e in (manifest.get("checkpoint"), manifest.get("previous_checkpoint"))
        if isinstance(e, dict)
    ]
    if not ckpt.exists():
        if isinstance(manifest.get("previous_checkpoint"), dict):
            raise _tampered(ckpt, "is missing, but manifest.json records a completed one")
        return None  # no checkpoint was complete yet: the run starts from frame 0
    entry = None
    for e in known:  # each entry with the hash it names (a folder may hold both kinds)
        recorded = rundir.entry_digest(e)
        if recorded is not None and folders.digest_file(ckpt, recorded[0]) == recorded[1]:
            entry = e
            break
    if entry is None:
        names = sorted({rundir.DIGESTS[r[0]] for e in known if (r := rundir.entry_digest(e))})
        raise _tampered(
            ckpt,
            f"does not match the {' or '.join(names) or 'hash'} that manifest.json records for it",
        )
    try:
        checkpoints.load_run_state(engine, checkpoints.load(ckpt))
    except (ValueError, KeyError, TypeError) as err:
        raise ScenarioError(
            "--resume",
            f"the checkpoint of {str(out)!r} is damaged ({type(err).__name__})",
            "start the run again with --overwrite",
        ) from None
    if entry.get("next_frame") != engine.next_frame:
        raise _tampered(ckpt, "is not the checkpoint manifest.json records for it")
    return entry


def _recorded_files(entries: Any, sub: str) -> dict[int, list[rundir.PartFile]]:
    """Frame -> the files (name, rows, algorithm, hash) of the part entries a manifest lists
    (malformed entries are skipped)."""
    out: dict[int, list[rundir.PartFile]] = {}
    for e in entries if isinstance(entries, list) else []:
        frame = e.get("frame") if isinstance(e, dict) else None
        if isinstance(frame, int):
            files = rundir.entry_files(e, sub, frame)
            if files is not None:
                out[frame] = files
    return out


def _verified_parts(
    events_dir: Path,
    frames: int,
    rows: int,
    out: Path,
    recorded: Any = None,
    completed: bool = False,
) -> list[dict[str, Any]]:
    """The manifest entries of the parts ``0 .. frames-1`` in ``events_dir`` (the events or the
    channel table), checked complete against the checkpoint's row count ``rows`` and each file
    (a part, or a shard of one) against the hash the manifest lists for it (``recorded``: its
    ``parts`` entries, which keep the algorithm they name), after
    refusing a part the manifest does not list (copied in), except the frame in flight of a run
    that did not complete (``completed``: its manifest says it did), which resume recomputes
    (:func:`wflsim.sim.rundir.unlisted_parts`)."""
    import pyarrow.parquet as pq

    found: dict[int, list[Path]] = {}
    for f, p in list_parts(events_dir):
        found.setdefault(f, []).append(p)
    files = _recorded_files(recorded, events_dir.name)
    in_flight = None if completed else next(f for f in range(len(files) + 1) if f not in files)
    names = {f: {n for n, *_ in fs} for f, fs in files.items()}
    foreign = [
        p
        for f, ps in sorted(found.items())
        for p in ps
        if f != in_flight and p.name not in names.get(f, ())
    ]
    if foreign:
        raise rundir.foreign_part_error(foreign[0])
    missing = [
        f
        for f in range(frames)
        if f not in found or set(names.get(f, ())) - {p.name for p in found[f]}
    ]
    entries, total = [], 0
    if not missing:
        for f in range(frames):
            if f not in files:
                raise _tampered(found[f][0], "is not listed in manifest.json")
            checked: list[rundir.PartFile] = []
            for name, _, algorithm, digest in files[f]:
                p = events_dir / name
                if folders.digest_file(p, algorithm) != digest:
                    raise _tampered(
                        p, f"does not match the {rundir.DIGESTS[algorithm]} hash in manifest.json"
                    )
                try:
                    n = pq.ParquetFile(p).metadata.num_rows
                except Exception:  # a damaged part: reported below
                    missing.append(f)
                    break
                checked.append((name, n, algorithm, digest))
            else:
                total += sum(c[1] for c in checked)
                entries.append(rundir.part_entry(events_dir.name, f, checked))
    if missing or total != rows:
        what = f"frame {missing[0]}'s part is missing or damaged" if missing else "row counts"
        raise ScenarioError(
            "--resume",
            f"the trace of {str(out)!r} does not match its checkpoint ({what})",
            "start the run again with --overwrite",
        )
    return entries
