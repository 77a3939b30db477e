"""Hostile run and sweep folders: symbolic links inside them, a run stopped before its first
manifest, files edited behind the manifest's back, and two sweeps into one folder.

Every command runs as ``python -m wflsim`` in a child process (with this tree first on the path),
on a small network-only scenario.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}

#: 6 frames x 4 slots, 12 moving devices, the paper's controller: a second per run.
NETWORK = """
name = "hostile"
seed = 3
[run]
frames = 6
slots_per_frame = 4
deadline_s = 0.8
[network]
num_devices = 12
cell_radius_m = 400.0
[mobility]
model = "random_waypoint"
[learning]
enabled = false
num_params = 100000
[scheme]
name = "two_timescale"
V = 10.0
"""

#: ``wflsim run SCENARIO --out OUT`` whose scheme raises when frame FRAME starts (exit 1).
FAIL_CHILD = """
import sys
from wflsim import Hooks
from wflsim.app.cli import main

stop = int(sys.argv[3])

def frame_start(engine, k):
    if k == stop:
        raise RuntimeError("injected")

argv = ["run", sys.argv[1], "--out", sys.argv[2], "--quiet", *sys.argv[4:]]
sys.exit(main(argv, hooks=Hooks(frame_start=frame_start)))
"""

#: ``wflsim run SCENARIO --out OUT`` on a disk that is full when the first manifest is written.
FULL_DISK_CHILD = """
import errno, sys
from wflsim.app.recorder import RunRecorder
from wflsim.app.cli import main

def write_manifest(self, **updates):
    raise OSError(errno.ENOSPC, "No space left on device")

RunRecorder.write_manifest = write_manifest
sys.exit(main(["run", sys.argv[1], "--out", sys.argv[2], "--quiet"]))
"""

#: ``wflsim run SCENARIO --out OUT`` killed (os._exit) as it writes its checkpoint of frame 3.
KILL_AT_CHECKPOINT_CHILD = """
import os, sys
import wflsim.app.recorder as recorder
from wflsim.app.cli import main

original = recorder.write_atomic
seen = []

def write_atomic(path, data):
    if path.name == "checkpoint.npz":
        seen.append(path)
        if len(seen) == 4:
            os._exit(9)
    return original(path, data)

recorder.write_atomic = write_atomic
sys.exit(main(["run", sys.argv[1], "--out", sys.argv[2], "--quiet"]))
"""

#: ``wflsim sweep ARGS`` (after the first argument, RELEASE) whose first frame waits until the
#: file RELEASE exists: a sweep that holds its folder until the test lets it go.
HELD_SWEEP_CHILD = """
import sys, time
from pathlib import Path
from wflsim import Hooks
from wflsim.app.cli import main

release = Path(sys.argv[1])

def frame_start(engine, k):
    deadline = time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.01)

sys.exit(main(["sweep", *sys.argv[2:]], hooks=Hooks(frame_start=frame_start)))
"""


def scenario(tmp_path: Path) -> Path:
    """The scenario file above in ``tmp_path``."""
    path = tmp_path / "s.toml"
    path.write_text(NETWORK)
    return path


def wflsim(*args: str) -> subprocess.CompletedProcess:
    """``python -m wflsim ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "wflsim", *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


def child(code: str, *args: str) -> subprocess.CompletedProcess:
    """``python -c CODE ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=ENV, capture_output=True, text=True, timeout=120
    )


def refused(res: subprocess.CompletedProcess, *words: str) -> bool:
    """Exit 2 with one line on stderr that holds every word, and no traceback."""
    err = res.stderr.strip()
    return (
        res.returncode == 2
        and len(err.splitlines()) == 1
        and "Traceback" not in err
        and all(w in err for w in words)
    )


def table(out: Path) -> pa.Table:
    """A run folder's events (every part, in order) without the file metadata."""
    parts = sorted((out / "events").glob("part-*.parquet"))
    return pa.concat_tables(pq.read_table(p).replace_schema_metadata(None) for p in parts)


def reference(tmp_path: Path, path: Path) -> pa.Table:
    """The events of the uninterrupted run of ``path``."""
    out = tmp_path / "reference"
    res = wflsim("run", str(path), "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    return table(out)


def failed_run(path: Path, out: Path, frame: int = 4, *args: str) -> None:
    """A run of ``path`` (``args``: more options) into ``out`` that failed as frame ``frame``
    began."""
    res = child(FAIL_CHILD, str(path), str(out), str(frame), *args)
    assert res.returncode == 1, res.stderr
    assert json.loads((out / "manifest.json").read_text())["frames_completed"] == frame


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (not following links) with its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# ---------------------------------------------------------------------- symbolic links


def test_new_run_does_not_write_through_a_lock_link(tmp_path):
    """A wflsim.lock link in an empty --out: exit 2 naming it; its target is untouched."""
    out, victim = tmp_path / "d", tmp_path / "v"
    out.mkdir()
    victim.write_text("x\n")
    (out / "wflsim.lock").symlink_to(victim)
    res = wflsim("run", str(scenario(tmp_path)), "--out", str(out), "--quiet")
    assert refused(res, "wflsim.lock", "link"), res.stderr
    assert victim.read_text() == "x\n"
    assert [p.name for p in out.iterdir()] == ["wflsim.lock"]


@pytest.mark.slow
def test_resume_of_a_completed_run_does_not_write_through_a_lock_link(tmp_path):
    """--resume of a completed run whose lock is a link: exit 2; the link's target is kept."""
    out, victim = tmp_path / "d", tmp_path / "v"
    assert wflsim("run", str(scenario(tmp_path)), "--out", str(out), "--quiet").returncode == 0
    victim.write_text("x\n")
    (out / "wflsim.lock").symlink_to(victim)
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert refused(res, "wflsim.lock", "link"), res.stderr
    assert victim.read_text() == "x\n"


@pytest.mark.slow
def test_resume_does_not_delete_or_write_through_an_events_link(tmp_path):
    """--resume of a failed run whose events/ is a link: exit 2; nothing in its target changes."""
    path, out, elsewhere = scenario(tmp_path), tmp_path / "d", tmp_path / "elsewhere"
    failed_run(path, out)
    (out / "events").rename(elsewhere)
    (out / "events").symlink_to(elsewhere, target_is_directory=True)
    (elsewhere / "part-000005.parquet").write_bytes(b"not wflsim's")
    before = snapshot(elsewhere)
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert refused(res, "events", "link"), res.stderr
    assert snapshot(elsewhere) == before


@pytest.mark.slow
def test_report_does_not_write_through_a_report_link(tmp_path):
    """`wflsim report RUN` with RUN/report a link: exit 2; the link's target is untouched."""
    out, elsewhere = tmp_path / "d", tmp_path / "elsewhere"
    assert wflsim("run", str(scenario(tmp_path)), "--out", str(out), "--quiet").returncode == 0
    elsewhere.mkdir()
    (elsewhere / "report.html").write_text("keep")
    (out / "report").symlink_to(elsewhere, target_is_directory=True)
    res = wflsim("report", str(out))
    assert refused(res, "report", "link"), res.stderr
    assert snapshot(elsewhere) == {"report.html": b"keep"}


def test_out_given_as_a_link_to_a_directory_is_used(tmp_path):
    """An --out that is itself a link to a directory is the user's choice: the run goes there."""
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    res = wflsim("run", str(scenario(tmp_path)), "--out", str(link), "--quiet")
    assert res.returncode == 0, res.stderr
    assert (real / "manifest.json").is_file() and link.is_symlink()


# ---------------------------------------------------------------------- stopped before a frame


@pytest.mark.slow  # a full run in a subprocess, resumed
def test_rerun_proceeds_in_a_folder_stopped_before_its_first_manifest(tmp_path):
    """A disk full at the first manifest leaves marker and events/: a re-run proceeds."""
    path, out = scenario(tmp_path), tmp_path / "d"
    res = child(FULL_DISK_CHILD, str(path), str(out))
    assert res.returncode == 1, res.stderr
    assert (out / ".wflsim-run").is_file() and not (out / "manifest.json").exists()
    res = wflsim("run", str(path), "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert table(out).equals(reference(tmp_path, path))


@pytest.mark.slow  # a full run in a subprocess, resumed
def test_resume_starts_a_folder_stopped_before_its_first_manifest_from_frame_0(tmp_path):
    """--resume with the scenario of a folder that holds no completed frame runs from frame 0."""
    path, out = scenario(tmp_path), tmp_path / "d"
    assert child(FULL_DISK_CHILD, str(path), str(out)).returncode == 1
    res = wflsim("run", str(path), "--resume", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "manifest.json").read_text())["status"] == "completed"
    assert table(out).equals(reference(tmp_path, path))


@pytest.mark.slow
def test_resume_alone_of_a_folder_without_a_frame_says_to_run_again(tmp_path):
    """--resume DIR (no scenario) of a folder that holds no completed frame: exit 2, run again."""
    path, out = scenario(tmp_path), tmp_path / "d"
    assert child(FULL_DISK_CHILD, str(path), str(out)).returncode == 1
    before = snapshot(out)
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert refused(res, "no completed frame", "run it again"), res.stderr
    assert snapshot(out) == before


def test_full_disk_before_the_first_manifest_says_nothing_was_recorded(tmp_path):
    """A disk full at the first manifest: the error says no manifest.json was written rather
    than pointing at one."""
    res = child(FULL_DISK_CHILD, str(scenario(tmp_path)), str(tmp_path / "d"))
    assert res.returncode == 1, res.stderr
    assert "no manifest.json was written" in res.stderr and "see" not in res.stderr


# ---------------------------------------------------------------------- edited manifests


def edited_manifest(tmp_path: Path, drop: str) -> Path:
    """A completed run whose manifest lost its field ``drop`` and says it failed."""
    out = tmp_path / "d"
    assert wflsim("run", str(scenario(tmp_path)), "--out", str(out), "--quiet").returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest[drop]
    manifest["status"] = "failed"
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def test_resume_of_a_truncated_manifest_names_it_and_the_overwrite_that_repairs_it(tmp_path):
    """A manifest.json cut in half: --resume exits 2 saying it is not readable and that
    --overwrite computes the run again (not 'give the --out folder of a run')."""
    out = tmp_path / "d"
    assert wflsim("run", str(scenario(tmp_path)), "--out", str(out), "--quiet").returncode == 0
    text = (out / "manifest.json").read_text()
    (out / "manifest.json").write_text(text[: len(text) // 2])
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert refused(res, "manifest.json", "not readable", "truncated", "--overwrite"), res.stderr


def test_resume_of_a_manifest_without_its_scenario_says_it_was_edited(tmp_path):
    """--resume DIR of a manifest without scenario_text: exit 2 naming the field as edited or
    damaged and --overwrite, not 'holds no scenario (start a new run instead)'."""
    out = edited_manifest(tmp_path, "scenario_text")
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert refused(res, "'scenario_text'", "edited or damaged", "--overwrite"), res.stderr


def test_resume_of_a_manifest_without_its_fingerprint_says_it_was_edited(tmp_path):
    """A manifest without its fingerprint: exit 2 saying it was edited or damaged, not that
    an older wflsim made the run."""
    out = edited_manifest(tmp_path, "fingerprint")
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert refused(res, "'fingerprint'", "edited or damaged", "--overwrite"), res.stderr
    assert "older" not in res.stderr


@pytest.mark.slow
def test_resume_with_the_scenario_of_a_manifest_missing_a_field_is_refused(tmp_path):
    """wflsim run SCENARIO --resume DIR of a manifest without 'versions': exit 2 naming the
    field, not a failed run with a KeyError."""
    out = edited_manifest(tmp_path, "versions")
    res = wflsim("run", str(scenario(tmp_path)), "--resume", str(out), "--quiet")
    assert refused(res, "'versions'", "edited or damaged", "--overwrite"), res.stderr


# ---------------------------------------------------------------------- the manifest's hashes


@pytest.mark.slow
def test_resume_refuses_a_part_with_flipped_bytes(tmp_path):
    """8 bytes flipped in the middle of a kept part's data: --resume exits 2 naming the part."""
    path, out = scenario(tmp_path), tmp_path / "d"
    failed_run(path, out)
    part = out / "events" / "part-000001.parquet"
    group = pq.ParquetFile(part).metadata.row_group(0)
    chunk = max(
        (group.column(i) for i in range(group.num_columns)), key=lambda c: c.total_compressed_size
    )
    mid = chunk.data_page_offset + chunk.total_compressed_size // 2  # not the footer
    data = bytearray(part.read_bytes())
    data[mid : mid + 8] = bytes(b ^ 0xFF for b in data[mid : mid + 8])
    part.write_bytes(bytes(data))
    before = snapshot(out)
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert refused(res, "part-000001.parquet", "BLAKE3", "--overwrite"), res.stderr
    assert snapshot(out) == before


@pytest.mark.slow
def test_resume_refuses_an_edited_checkpoint(tmp_path):
    """A checkpoint with one number changed: --resume exits 2 naming checkpoint.npz."""
    path, out = scenario(tmp_path), tmp_path / "d"
    failed_run(path, out)
    ckpt = out / "checkpoint.npz"
    with np.load(ckpt, allow_pickle=False) as npz:
        members = {k: npz[k] for k in npz.files}
    name = next(k for k, v in members.items() if v.dtype.kind == "f" and v.size)
    members[name] = members[name] + 1.0
    with open(ckpt, "wb") as f:
        np.savez(f, **members)
    before = snapshot(out)
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert refused(res, "checkpoint.npz", "--overwrite"), res.stderr
    assert snapshot(out) == before


@pytest.mark.slow  # a full run in a subprocess, resumed
def test_resume_ignores_an_edited_status_and_completes_the_run(tmp_path):
    """A failed run whose manifest was edited to say completed: --resume finishes it anyway."""
    path, out = scenario(tmp_path), tmp_path / "d"
    failed_run(path, out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["status"] = "completed"
    (out / "manifest.json").write_text(json.dumps(manifest))
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "manifest.json").read_text())["frames_completed"] == 6
    assert table(out).equals(reference(tmp_path, path))


@pytest.mark.slow  # a full run in a subprocess, resumed
def test_sweep_resumes_a_point_whose_status_was_edited_to_completed(tmp_path):
    """A sweep's point that failed, its manifest edited to say completed: the sweep's repeat
    resumes it instead of skipping it, and its events are the uninterrupted run's."""
    path, out = scenario(tmp_path), tmp_path / "sw"
    failed_run(path, out / "seed=3", 4, "--seed", "3")
    manifest = json.loads((out / "seed=3" / "manifest.json").read_text())
    manifest["status"] = "completed"
    (out / "seed=3" / "manifest.json").write_text(json.dumps(manifest))
    res = wflsim("sweep", str(path), "--seeds", "3", "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert table(out / "seed=3").equals(reference(tmp_path, path))


@pytest.mark.slow  # a full run in a subprocess, resumed
def test_resume_after_a_kill_while_the_checkpoint_is_replaced(tmp_path):
    """Killed as the checkpoint of frame 3 was written (the manifest already names it): --resume
    takes the previous checkpoint, which the manifest also records, and completes the run."""
    path, out = scenario(tmp_path), tmp_path / "d"
    assert child(KILL_AT_CHECKPOINT_CHILD, str(path), str(out)).returncode == 9
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert table(out).equals(reference(tmp_path, path))


@pytest.mark.slow
def test_report_refuses_a_completed_run_missing_a_part(tmp_path):
    """`wflsim report` of a completed run whose part of frame 5 was deleted: exit 2 naming the
    part and the fix, and no report is written."""
    out = tmp_path / "d"
    assert wflsim("run", str(scenario(tmp_path)), "--out", str(out), "--quiet").returncode == 0
    (out / "events" / "part-000005.parquet").unlink()
    res = wflsim("report", str(out))
    assert refused(res, "part-000005.parquet", "missing", "--overwrite"), res.stderr
    assert not (out / "report").exists()


def copy_part(out: Path, frame: int, as_frame: int) -> str:
    """Copy the part of ``frame`` in run folder ``out`` as the part of ``as_frame``; its name."""
    name = f"part-{as_frame:06d}.parquet"
    (out / "events" / name).write_bytes((out / "events" / f"part-{frame:06d}.parquet").read_bytes())
    return name


def resume_refuses_a_copy_of_frame_0(out: Path, as_frame: int) -> bool:
    """With frame 0's part copied in as frame ``as_frame``'s, --resume exits 2 naming the copy
    as not listed, and changes nothing."""
    name = copy_part(out, 0, as_frame)
    before = snapshot(out)
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert refused(res, name, "not listed"), res.stderr
    return snapshot(out) == before


@pytest.mark.slow
def test_resume_refuses_a_copied_part_in_a_completed_run(tmp_path):
    """--resume of a completed run holding a copied part-000030.parquet that its manifest does
    not list: exit 2 naming it, instead of 'already completed' with frame 0 counted twice."""
    out = tmp_path / "d"
    assert wflsim("run", str(scenario(tmp_path)), "--out", str(out), "--quiet").returncode == 0
    assert resume_refuses_a_copy_of_frame_0(out, 30)


@pytest.mark.slow
def test_resume_refuses_a_copied_part_beyond_the_frame_in_flight(tmp_path):
    """--resume of a failed run (frames 0-3 listed) holding a copied part of frame 9: exit 2
    naming it; only the part of the frame in flight (4) may lie there unlisted."""
    failed_run(scenario(tmp_path), tmp_path / "d")
    assert resume_refuses_a_copy_of_frame_0(tmp_path / "d", 9)


@pytest.mark.slow  # a full run in a subprocess, resumed
def test_resume_recomputes_the_unlisted_part_of_the_frame_in_flight(tmp_path):
    """A failed run with an unlisted part of frame 4 (what a kill between the part and the
    manifest leaves): --resume replaces it and the events equal the uninterrupted run's."""
    path, out = scenario(tmp_path), tmp_path / "d"
    failed_run(path, out)
    copy_part(out, 0, 4)
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert table(out).equals(reference(tmp_path, path))


@pytest.mark.slow  # a full run in a subprocess, resumed
def test_resume_takes_over_a_lock_naming_a_pid_another_process_now_has(tmp_path):
    """A failed run whose lock names the pid of a live process that is no wflsim writer (the
    pid was reused): --resume completes the run instead of 'in use ... wait' for ever."""
    path, out = scenario(tmp_path), tmp_path / "d"
    failed_run(path, out)
    other = subprocess.Popen(["sleep", "60"])
    try:
        lock = {"pid": other.pid, "host": socket.gethostname(), "kind": "run", "since": "x"}
        (out / "wflsim.lock").write_text(json.dumps(lock))
        res = wflsim("run", "--resume", str(out), "--quiet")
    finally:
        other.kill()
        other.wait()
    assert res.returncode == 0, res.stderr
    assert table(out).equals(reference(tmp_path, path))


# ---------------------------------------------------------------------- one sweep per folder

SWEEP = ["--grid", "scheme=two_timescale,only_pc", "--seeds", "0", "--quiet"]


@pytest.mark.slow
def test_second_sweep_into_a_folder_in_use_exits_2(tmp_path):
    """A sweep into the folder of a live sweep exits 2 ('in use'); the first completes every
    point and sweep.json lists none as failed."""
    path, out = scenario(tmp_path), tmp_path / "sw"
    release = tmp_path / "release"
    first = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HELD_SWEEP_CHILD,
            str(release),
            str(path),
            *SWEEP,
            "--out",
            str(out),
        ],
        env=ENV,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        end = time.monotonic() + 60
        while not (out / "sweep.json").exists() and first.poll() is None:
            assert time.monotonic() < end, "the first sweep did not start"
            time.sleep(0.01)
        assert first.poll() is None, "the first sweep ended before the second started"
        second = wflsim("sweep", str(path), *SWEEP, "--out", str(out))
    finally:
        release.touch()  # the first sweep goes on whatever happened
    assert refused(second, "in use"), second.stderr
    assert first.wait(timeout=120) == 0, first.communicate()[1]
    points = json.loads((out / "sweep.json").read_text())["points"]
    assert sorted(p["status"] for p in points.values()) == ["completed", "completed"]


def test_sweep_takes_over_the_lock_of_a_dead_sweep(tmp_path):
    """A sweep folder whose lock names a dead process is taken over: the sweep runs."""
    path, out = scenario(tmp_path), tmp_path / "sw"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    (out / "wflsim.lock").write_text(json.dumps({"pid": dead.pid, "host": host}))
    res = wflsim("sweep", str(path), *SWEEP, "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert not (out / "wflsim.lock").exists()
