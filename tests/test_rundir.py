"""The run folder: its lock, marker, liveness and strict-JSON manifest."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from wflsim.app import folders
from wflsim.sim import rundir
from wflsim.sim.errors import ScenarioError
from wflsim.sim.trace import json_text, write_atomic


def _dead_pid() -> int:
    """The pid of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_second_lock_on_a_folder_is_refused(tmp_path):
    """While one RunLock holds a folder, another is refused with the holder's pid in one line."""
    first = folders.RunLock(tmp_path)
    first.acquire()
    try:
        with pytest.raises(ScenarioError) as err:
            folders.RunLock(tmp_path).acquire()
        assert "in use" in err.value.one_line() and str(os.getpid()) in err.value.one_line()
    finally:
        first.release()
    assert not (tmp_path / rundir.LOCK).exists()


def _taken_over(folder) -> bool:
    """Whether a RunLock of ``folder`` is granted and records this process as its holder."""
    lock = folders.RunLock(folder)
    lock.acquire()
    try:
        return json.loads((folder / rundir.LOCK).read_text())["pid"] == os.getpid()
    finally:
        lock.release()


def test_lock_of_a_dead_process_is_taken_over(tmp_path):
    """A lock file left by a dead process of this host is recognised and taken over."""
    stale = {"pid": _dead_pid(), "host": rundir.hostname(), "start_ticks": 1, "since": "x"}
    (tmp_path / rundir.LOCK).write_text(json.dumps(stale))
    assert _taken_over(tmp_path)


def test_lock_of_another_host_is_refused_with_the_fix(tmp_path):
    """A lock naming another host cannot be checked from here: refused, naming the lock file."""
    other = {"pid": 1, "host": rundir.hostname() + "-elsewhere", "since": "x"}
    (tmp_path / rundir.LOCK).write_text(json.dumps(other))
    with pytest.raises(ScenarioError) as err:
        folders.RunLock(tmp_path).acquire()
    assert "another host" in err.value.problem and rundir.LOCK in (err.value.fix or "")


@pytest.fixture
def other_process():
    """A live process that is not wflsim (``sleep``), ended after the test."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def _lock_naming(folder, pid: int, **more) -> None:
    """A lock file left in ``folder`` naming ``pid`` on this host (no flock held on it)."""
    info = {"pid": pid, "host": rundir.hostname(), "since": "x", **more}
    (folder / rundir.LOCK).write_text(json.dumps(info))


def _without_flock(monkeypatch) -> None:
    """A file system without flock (ENOLCK), where the recorded pid decides."""
    import errno

    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(folders.fcntl, "flock", no_flock)


def test_lock_naming_a_pid_another_live_process_now_has_is_taken_over(tmp_path, other_process):
    """A lock file whose pid now belongs to a live process that is no wflsim writer (its flock is
    free) is taken over, not refused for ever as 'in use'."""
    _lock_naming(tmp_path, other_process.pid)
    assert _taken_over(tmp_path)


def test_without_flock_a_live_pid_without_start_time_is_refused_with_how_to_clear_it(
    tmp_path, other_process, monkeypatch
):
    """Without flock, a lock naming a live pid and no start time cannot be told from its
    writer: refused, naming the process now under that pid and the lock file to delete."""
    _without_flock(monkeypatch)
    _lock_naming(tmp_path, other_process.pid)
    with pytest.raises(ScenarioError) as err:
        folders.RunLock(tmp_path).acquire()
    line = err.value.one_line()
    assert "(sleep)" in line and f"delete {tmp_path / rundir.LOCK}" in line


def test_without_flock_a_pid_reused_since_the_lock_was_written_is_taken_over(
    tmp_path, other_process, monkeypatch
):
    """Without flock, a lock whose recorded start time is not that of the live process under
    its pid (the pid was reused) is taken over."""
    _without_flock(monkeypatch)
    start = rundir.process_start_ticks(other_process.pid)
    assert start is not None
    _lock_naming(tmp_path, other_process.pid, start_ticks=start - 1)
    assert _taken_over(tmp_path)


def test_without_flock_the_live_writer_of_a_lock_is_refused(tmp_path, other_process, monkeypatch):
    """Without flock, a lock naming a live process with that process's own start time (its
    writer) is refused as in use."""
    _without_flock(monkeypatch)
    start = rundir.process_start_ticks(other_process.pid)
    _lock_naming(tmp_path, other_process.pid, start_ticks=start)
    with pytest.raises(ScenarioError, match="in use"):
        folders.RunLock(tmp_path).acquire()


def test_liveness_tells_a_crashed_run_from_a_live_one():
    """A 'running' manifest is crashed when its writer's pid is dead, running while it lives."""
    me = folders.writer_identity()
    live = {"status": "running", "writer": me}
    dead = {"status": "running", "writer": {**me, "pid": _dead_pid()}}
    assert rundir.liveness(live) == "running"
    assert rundir.liveness(dead) == "crashed"
    assert rundir.liveness({"status": "completed", "writer": me}) == "completed"


def test_liveness_of_another_host_follows_the_heartbeat():
    """On another host the heartbeat decides: recent = running, older than the limit = crashed."""
    writer = {"pid": 1, "host": rundir.hostname() + "-elsewhere"}
    fresh = {"status": "running", "writer": writer, "heartbeat_at": folders.now_iso()}
    old = {**fresh, "heartbeat_at": "2000-01-01T00:00:00+00:00"}
    assert rundir.liveness(fresh) == "running"
    assert rundir.liveness(old) == "crashed"


def test_manifest_json_is_strict():
    """NaN and infinities become null; the text parses with a parser that rejects NaN."""
    text = json_text({"a": math.nan, "b": [1.0, math.inf], "c": {"d": -math.inf}})

    def refuse(name):
        raise ValueError(name)

    assert json.loads(text, parse_constant=refuse) == {
        "a": None,
        "b": [1.0, None],
        "c": {"d": None},
    }


def test_atomic_write_failure_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    """A write that fails before the rename leaves the previous file intact and no temp file."""
    target = tmp_path / "m.json"
    target.write_text("old")

    def boom(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.fsync", boom)
    with pytest.raises(OSError):
        write_atomic(target, b"new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_overwrite_needs_the_marker_even_with_a_manifest(tmp_path):
    """A folder holding manifest.json and events.parquet but no marker is never replaced."""
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "events.parquet").write_bytes(b"x")
    with pytest.raises(ScenarioError, match="not made by a wflsim run"):
        folders.check_out_dir(tmp_path, overwrite=True)
    folders.write_marker(tmp_path, "test")
    folders.check_out_dir(tmp_path, overwrite=True)  # now it is a run's folder


def test_a_folder_with_only_a_lock_and_temporaries_is_free(tmp_path):
    """A run killed before its marker left a lock and a temporary: the folder takes a new run."""
    (tmp_path / "wflsim.lock").write_text("{}")
    (tmp_path / ".wflsim-run.9.tmp").write_text("{")
    folders.check_out_dir(tmp_path, overwrite=False)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ScenarioError, match="not empty"):
        folders.check_out_dir(tmp_path, overwrite=False)


def test_clearing_a_run_folder_keeps_other_files(tmp_path):
    """clear_run_files removes the run's files and temporaries, and nothing else."""
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "part-000000.parquet").write_bytes(b"x")
    for name in ("manifest.json", "checkpoint.npz", rundir.MARKER, ".manifest.json.1.tmp"):
        (tmp_path / name).write_text("x")
    (tmp_path / "notes.txt").write_text("mine")
    folders.clear_run_files(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
