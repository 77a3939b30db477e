"""Fault injection on real `wflsim` processes: SIGKILL at random instants then --resume, a full
disk, concurrent runs on one folder, interrupted and killed sweeps.

Every test runs the command line in subprocesses (``python -m wflsim.app.cli``) on tiny scenarios and
checks the promise of the run folder: a kill loses at most the frame in flight, a resumed run's
events equal the uninterrupted run's, and every failure is one line with the documented code.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import REPO, run_in_memory
from golden_runs import column_hashes
from wflsim.analysis.io import events_files
from wflsim.sim.rundir import pid_alive, read_manifest

#: Real processes killed at random instants, full disks, concurrent writers: long, run by CI with
#: ``pytest -m slow`` (docs/guide/testing.md).
pytestmark = pytest.mark.slow

ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}

NETWORK = """
name = "faults"
seed = 11
[run]
frames = {frames}
slots_per_frame = 5
deadline_s = 0.8
[network]
num_devices = 300
cell_radius_m = 600.0
[mobility]
model = "random_waypoint"
speed_mps = [10.0, 30.0]
[learning]
enabled = false
num_params = 200000
[scheme]
name = "{scheme}"
V = 10.0
"""

DIGITS = """
name = "faults_digits"
seed = 5
[run]
frames = 8
slots_per_frame = 2
deadline_s = 0.1
[network]
num_devices = 12
bandwidth_hz = 1e6
[mobility]
model = "random_waypoint"
[devices]
batch_size = 32
energy_budget_j = { dist = "uniform", low = 0.01, high = 0.02 }
[learning]
dataset = "digits"
model = "mlp"
lr = 0.5
eval_every_slots = 2
[scheme]
name = "two_timescale"
V = 100.0
"""


def start(*args: str, **kw) -> subprocess.Popen:
    """``python -m wflsim.app.cli ARGS`` in the background (stdout and stderr captured)."""
    return subprocess.Popen(
        [sys.executable, "-m", "wflsim", *args],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def wflsim(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """``python -m wflsim.app.cli ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "wflsim", *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_until(predicate: Callable[[], bool], timeout: float = 120.0) -> bool:
    """Poll every 10 ms until ``predicate()`` holds (False after ``timeout`` seconds)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def frames_done(out: Path) -> int:
    """Frames the run folder's manifest says are complete (-1 without a manifest)."""
    m = read_manifest(out)
    return -1 if m is None else int(m.get("frames_completed", 0))


def disk_hashes(out: Path) -> dict[str, str]:
    """Column hashes of a run folder's trace."""
    tables = [pq.read_table(f).replace_schema_metadata(None) for f in events_files(out)]
    return column_hashes(pa.concat_tables(tables))


def memory_table(text: str) -> pa.Table:
    """The uninterrupted run's events (in memory) of a scenario text."""
    table, _ = run_in_memory(tomllib.loads(text))
    return table


def kill_and_resume(path: Path, out: Path, frames: int, seed: int, kills: int) -> list[int]:
    """Run ``path`` into ``out`` and SIGKILL it ``kills`` times, continuing after each kill, at
    seeded random instants: the first within 1.5 s of the start and before a quarter of the
    frames are complete (often before any frame is complete, sometimes before anything is
    written), the others a random fraction of a frame
    after a random frame completed. Then continue to the end. A run continues with
    ``--resume`` once its folder has a manifest, else it starts again (``--overwrite``).
    Returns the frames completed at each kill."""
    rng = random.Random(seed)
    targets = sorted(rng.sample(range(1, frames - 1), kills - 1))

    def again() -> list[str]:
        if read_manifest(out) is not None:
            return ["run", "--resume", str(out), "--quiet"]
        return ["run", str(path), "--out", str(out), "--overwrite", "--quiet"]

    seen = []
    for i in range(kills):
        proc = start(*again())
        if i == 0:  # a random instant, but before a quarter of the frames (runs are fast)
            until = time.monotonic() + rng.uniform(0.0, 1.5)
            wait_until(
                lambda p=proc, until=until: (
                    time.monotonic() >= until
                    or frames_done(out) >= max(1, frames // 4)
                    or p.poll() is not None
                )
            )
        else:
            target = targets[i - 1]
            wait_until(lambda t=target, p=proc: frames_done(out) >= t or p.poll() is not None)
            time.sleep(rng.uniform(0.0, 0.05))
        proc.kill()
        proc.communicate()
        seen.append(frames_done(out))
    res = wflsim(*again())
    assert res.returncode == 0, res.stderr
    manifest = read_manifest(out)
    assert manifest["status"] == "completed"
    # once a kill landed after a completed frame, the run went on from its checkpoints
    if any(0 < s < frames for s in seen):
        froms = [r["from_frame"] for r in manifest.get("resumed", [])]
        assert max(froms, default=0) > 0, (seen, manifest.get("resumed"))
    return seen


@pytest.mark.parametrize(("scheme", "seed"), [("two_timescale", 0), ("ideal", 1)])
def test_sigkill_at_random_instants_then_resume_network_only(tmp_path, scheme, seed):
    """A network-only run killed with SIGKILL 3 times and resumed has the uninterrupted events."""
    text = NETWORK.format(frames=30, scheme=scheme)
    path = tmp_path / "s.toml"
    path.write_text(text)
    seen = kill_and_resume(path, tmp_path / "run", 30, seed, kills=3)
    assert any(0 < s < 30 for s in seen), seen  # kills landed in the middle of the run
    assert disk_hashes(tmp_path / "run") == column_hashes(memory_table(text))


def test_sigkill_at_random_instants_then_resume_with_training(tmp_path):
    """Digits with training and freezing, killed twice and resumed: identical events."""
    path = tmp_path / "s.toml"
    path.write_text(DIGITS)
    seen = kill_and_resume(path, tmp_path / "run", 8, 2, kills=2)
    assert any(0 < s < 8 for s in seen), seen
    assert disk_hashes(tmp_path / "run") == column_hashes(memory_table(DIGITS))


def test_a_killed_run_reads_as_crashed_with_its_frames(tmp_path):
    """After SIGKILL the manifest still says running, readers see 'crashed', and every
    completed frame reads back equal to the uninterrupted run's."""
    from wflsim.analysis import load_events
    from wflsim.analysis.tidy import run_status

    text = NETWORK.format(frames=40, scheme="two_timescale")
    path = tmp_path / "s.toml"
    path.write_text(text)
    out = tmp_path / "run"
    proc = start("run", str(path), "--out", str(out), "--quiet")
    wait_until(lambda: frames_done(out) >= 3 or proc.poll() is not None)
    proc.kill()
    proc.communicate()
    assert run_status(out) == "crashed"
    got = load_events(out)
    ref = memory_table(text).to_pandas()
    done = int(got["frame"].max()) + 1
    assert done >= 3
    assert len(got) == int((ref["frame"] < done).sum())


DISK_FULL_CHILD = """
import json, resource, sys, time
from pathlib import Path
from wflsim import Hooks
from wflsim.app.cli import main

out = Path(sys.argv[2])

def frame_start(engine, k):
    if k == 3:  # from frame 3 on, no file may grow past a little more than the manifest
        while json.loads((out / "manifest.json").read_text())["frames_completed"] < 3:
            time.sleep(0.01)  # frame 2's part and checkpoint are written in the background
        size = (out / "manifest.json").stat().st_size
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(size * 1.5), int(size * 1.5)))

argv = ["run", sys.argv[1], "--out", sys.argv[2], "--quiet"]
sys.exit(main(argv, hooks=Hooks(frame_start=frame_start)))
"""


def test_full_disk_fails_cleanly_and_keeps_completed_frames(tmp_path):
    """A file-size limit hit in frame 3 (a full disk): exit 1, one line, status failed, frames
    0-2 readable and correct; with space again, --resume completes the identical run."""
    resource = pytest.importorskip("resource")
    if not hasattr(resource, "RLIMIT_FSIZE"):
        pytest.skip("no RLIMIT_FSIZE on this platform")
    text = NETWORK.format(frames=8, scheme="two_timescale")
    path = tmp_path / "s.toml"
    path.write_text(text)
    out = tmp_path / "run"
    res = subprocess.run(
        [sys.executable, "-c", DISK_FULL_CHILD, str(path), str(out)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.returncode == 1, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "File too large" in manifest["error"]
    assert [p["frame"] for p in manifest["parts"]] == [0, 1, 2]
    assert not [p for p in out.rglob("*.tmp")]  # no half-written file left behind
    ref = memory_table(text)
    first = ref.filter(pa.compute.less(ref["frame"], 3))
    assert disk_hashes(out) == column_hashes(first)
    res = wflsim("run", "--resume", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert disk_hashes(out) == column_hashes(ref)


def test_simultaneous_starts_on_one_folder_give_one_run(tmp_path):
    """Four runs started at once into one new --out: exactly one runs (exit 0), the others exit 2
    in one line, and the trace is the one uninterrupted run's."""
    text = NETWORK.format(frames=6, scheme="only_pc")
    path = tmp_path / "s.toml"
    path.write_text(text)
    out = tmp_path / "run"
    procs = [start("run", str(path), "--out", str(out), "--quiet") for _ in range(4)]
    results = [(p.wait(timeout=240), p.communicate()[1]) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2, 2, 2], results
    for code, err in results:
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and ("in use" in err or "exists" in err)
    assert disk_hashes(out) == column_hashes(memory_table(text))


SLOW_CHILD = """
import sys, time
from wflsim import Hooks
from wflsim.app.cli import main

def frame_start(engine, k):  # a run that takes a while without using the CPU
    time.sleep(0.25)

argv = ["run", sys.argv[1], "--out", sys.argv[2], "--quiet"]
sys.exit(main(argv, hooks=Hooks(frame_start=frame_start)))
"""


def test_second_writer_is_refused_while_a_run_is_live(tmp_path, capsys):
    """While a run writes a folder, --overwrite and --resume into it exit 2 ('in use') and the
    live run completes unharmed."""
    from wflsim.app.cli import main

    text = NETWORK.format(frames=30, scheme="two_timescale")
    path = tmp_path / "s.toml"
    path.write_text(text)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_CHILD, str(path), str(out)], env=ENV, stderr=subprocess.PIPE
    )
    assert wait_until(lambda: frames_done(out) >= 1 or proc.poll() is not None)
    for args in (
        ["run", str(path), "--out", str(out), "--overwrite"],
        ["run", "--resume", str(out)],
    ):
        assert proc.poll() is None, "the run finished before the test could race it"
        assert main([*args, "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert "in use" in err and len(err.splitlines()) == 1, err
    assert proc.wait(timeout=240) == 0
    assert disk_hashes(out) == column_hashes(memory_table(text))


SWEEP = ["--grid", "scheme=two_timescale,only_pc,ideal", "--seeds", "0", "--workers", "2"]


def sweep_scenario(tmp_path: Path) -> Path:
    """A network-only scenario for 3-point sweeps (each point a few seconds: long enough that a
    point seen running is still running when the test signals the sweep, even on a loaded
    machine)."""
    path = tmp_path / "s.toml"
    text = NETWORK.format(frames=50, scheme="two_timescale")
    path.write_text(text.replace("num_devices = 300", "num_devices = 150"))
    return path


def _sweep_points(out: Path) -> dict[str, dict]:
    return json.loads((out / "sweep.json").read_text())["points"]


def _running_points(out: Path) -> list[Path]:
    """Point folders whose run has completed a frame and is still running."""
    return [
        d
        for d in out.iterdir()
        if d.is_dir()
        and frames_done(d) >= 1
        and (read_manifest(d) or {}).get("status") == "running"
    ]


def test_ctrl_c_stops_a_sweep_and_a_repeat_resumes_it(tmp_path):
    """Ctrl-C (SIGINT to the process group) during a 2-worker sweep: exit 130 in one line, the
    runs in flight 'interrupted', no worker left; repeating the command resumes them."""
    path = sweep_scenario(tmp_path)
    out = tmp_path / "sw"
    cmd = ["sweep", str(path), *SWEEP, "--out", str(out), "--quiet"]
    # a foreground program hears Ctrl-C: SIGINT at its default even where the test runner was
    # started in the background of a script (which starts it, and so its children, ignoring it)
    proc = start(
        *cmd,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert wait_until(lambda: out.is_dir() and bool(_running_points(out)))
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    points = _sweep_points(out)
    assert json.loads((out / "sweep.json").read_text())["status"] == "interrupted"
    states = {p["status"] for p in points.values()}
    assert "interrupted" in states and not states & {"pending", "running"}
    for name, p in points.items():
        m = read_manifest(out / name)
        if m is not None:
            assert not pid_alive(m["writer"]["pid"]), name  # no worker outlived the sweep
            if p["status"] == "interrupted":
                assert m["status"] == "interrupted", name
    repeat = ["sweep", str(path), *SWEEP[:-2], "--workers", "1", "--out", str(out), "--quiet"]
    res = wflsim(*repeat)  # the repeat, run serially
    assert res.returncode == 0, res.stderr
    resumed = [n for n in points if (read_manifest(out / n) or {}).get("resumed")]
    assert resumed
    name = resumed[0]
    scheme = read_manifest(out / name)["scenario_resolved"]["scheme"]["name"]
    text = path.read_text().replace('name = "two_timescale"', f'name = "{scheme}"')
    assert disk_hashes(out / name) == column_hashes(
        memory_table(text.replace("seed = 11", "seed = 0"))
    )


def test_workers_die_with_a_killed_sweep(tmp_path):
    """SIGKILL of the sweep's own process: its workers stop within seconds (their runs say
    'interrupted'), and repeating the command completes every point."""
    path = sweep_scenario(tmp_path)
    out = tmp_path / "sw"
    cmd = ["sweep", str(path), *SWEEP, "--out", str(out), "--quiet"]
    proc = start(*cmd)
    assert wait_until(lambda: out.is_dir() and bool(_running_points(out)))
    running = _running_points(out)
    pids = [read_manifest(d)["writer"]["pid"] for d in running]
    proc.kill()
    _, err = proc.communicate(timeout=120)  # returns once the workers closed its stderr too
    assert "Traceback" not in err
    assert wait_until(lambda: not any(pid_alive(p) for p in pids), timeout=40), pids
    assert all(read_manifest(d)["status"] == "interrupted" for d in running)
    res = wflsim("sweep", str(path), *SWEEP[:-2], "--workers", "1", "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    done = ("completed", "skipped (already completed)")  # a point may have finished before
    assert all(p["status"] in done for p in _sweep_points(out).values())
    assert all(read_manifest(out / n)["status"] == "completed" for n in _sweep_points(out))
