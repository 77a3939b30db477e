"""The wflsim command: runs, outputs, and one-line errors for bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from conftest import REPO
from wflsim.app.cli import main

QUICK = REPO / "scenarios" / "quickstart.toml"
MNIST = REPO / "scenarios" / "mnist_ideal.toml"
SHORT = [
    "--set",
    "run.frames=2",
    "--set",
    "run.slots_per_frame=5",
    "--set",
    "learning.eval_every_slots=5",
    "--quiet",
]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


def _bad(tmp_path: Path, capsys, args: list[str]) -> str:
    out = tmp_path / "out"
    code = main(["run", *args, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert not out.exists()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_negative_bandwidth_exits_2_without_output(tmp_path, capsys):
    """A negative bandwidth: exit 2, one line naming the field, no output directory."""
    err = _bad(tmp_path, capsys, [str(QUICK), "--set", "network.bandwidth_hz=-5"])
    assert "network.bandwidth_hz" in err


def test_unknown_field_exits_2(tmp_path, capsys):
    """An unknown field: exit 2 naming it."""
    assert "learning.speed" in _bad(tmp_path, capsys, [str(QUICK), "--set", "learning.speed=3"])


def test_wrong_type_exits_2(tmp_path, capsys):
    """A wrong type: exit 2 naming the field."""
    assert "run.frames" in _bad(tmp_path, capsys, [str(QUICK), "--set", "run.frames=many"])


def test_deadline_below_compute_time_exits_2(tmp_path, capsys):
    """tau_0 below the compute time: exit 2 naming run.deadline_s and the fix."""
    err = _bad(tmp_path, capsys, [str(QUICK), "--set", "run.deadline_s=0.01"])
    assert "run.deadline_s" in err and "fix:" in err


def test_missing_data_directory_exits_2(tmp_path, capsys):
    """MNIST with an empty data directory: exit 2 naming learning.data_dir."""
    err = _bad(tmp_path, capsys, [str(MNIST), "--data-dir", str(tmp_path / "nowhere")])
    assert "learning.data_dir" in err


def test_malformed_toml_exits_2(tmp_path, capsys):
    """A TOML syntax error: exit 2, one line."""
    assert "not valid TOML" in _bad(tmp_path, capsys, [str(_write(tmp_path, "[run\nframes=1"))])


def test_missing_scenario_file_exits_2(tmp_path, capsys):
    """A scenario path that does not exist: exit 2."""
    assert "not found" in _bad(tmp_path, capsys, [str(tmp_path / "nope.toml")])


def test_existing_output_directory_is_not_overwritten(tmp_path, capsys):
    """An existing non-empty --out is refused unless --overwrite."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    code = main(["run", str(QUICK), "--out", str(out), *SHORT])
    assert code == 2 and (out / "keep.txt").exists()
    assert "--overwrite" in capsys.readouterr().err


def test_validate_accepts_the_quickstart(capsys):
    """wflsim validate prints a one-line summary and exits 0."""
    assert main(["validate", str(QUICK)]) == 0
    assert "ok" in capsys.readouterr().out


def test_run_writes_trace_and_manifest(tmp_path, capsys):
    """A short run writes its trace (one part per frame, with metadata) and a completed manifest."""
    out = tmp_path / "run"
    assert main(["run", str(QUICK), "--out", str(out), *SHORT]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["scenario_resolved"]["run"]["frames"] == 2
    assert manifest["overrides"][:1] == ["run.frames=2"]
    meta = pq.read_schema(sorted((out / "events").iterdir())[0]).metadata
    assert b"wflsim.scenario_text" in meta
    df = pd.read_parquet(out / "events")
    assert (df.event == "eval").sum() == 3  # initial + 2 periodic
    assert "final accuracy" in capsys.readouterr().out


def test_seed_flag_changes_the_run(tmp_path):
    """--seed overrides the scenario's seed (recorded in the manifest)."""
    out = tmp_path / "run"
    assert main(["run", str(QUICK), "--out", str(out), "--seed", "5", *SHORT]) == 0
    assert json.loads((out / "manifest.json").read_text())["seed"] == 5


def test_same_seed_gives_identical_events_with_training(tmp_path):
    """Same scenario + seed with real training gives an identical events table; another seed does not."""
    tables = []
    for name, seed in [("a", "0"), ("b", "0"), ("c", "1")]:
        out = tmp_path / name
        assert main(["run", str(QUICK), "--out", str(out), "--seed", seed, *SHORT]) == 0
        tables.append(pq.read_table(out / "events").replace_schema_metadata(None))
    assert tables[0].equals(tables[1])
    assert not tables[0].equals(tables[2])


def test_failed_run_keeps_a_readable_trace(tmp_path, monkeypatch):
    """A crash mid-run leaves a readable trace of the frames done and a 'failed' manifest."""
    from wflsim.sim.schemes.ideal import Ideal

    original = Ideal.plan_frame

    def boom(self, ctx):
        if ctx.frame == 1:
            raise RuntimeError("injected failure")
        return original(self, ctx)

    monkeypatch.setattr(Ideal, "plan_frame", boom)  # the quick start's scheme fails in frame 1
    out = tmp_path / "run"
    assert main(["run", str(QUICK), "--out", str(out), *SHORT]) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "injected failure" in manifest["error"]
    df = pd.read_parquet(out / "events")
    assert df["frame"].max() == 0 and (df.event == "frame_end").sum() == 1


def test_console_script_reports_errors_without_traceback(tmp_path):
    """The installed wflsim command exits 2 with one stderr line for a bad scenario."""
    exe = shutil.which("wflsim") or pytest.skip("wflsim console script not installed")
    res = subprocess.run(
        [exe, "validate", str(QUICK), "--set", "network.num_devices=0"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "network.num_devices" in res.stderr


@pytest.mark.mnist
@pytest.mark.slow
def test_mnist_ideal_short_run_learns(tmp_path, data_dir):
    """The paper's MNIST scenario, shortened by --set, runs and its accuracy rises."""
    out = tmp_path / "mnist"
    args = [
        "run",
        str(MNIST),
        "--data-dir",
        str(data_dir),
        "--out",
        str(out),
        "--quiet",
        "--set",
        "run.frames=2",
        "--set",
        "run.slots_per_frame=4",
        "--set",
        "devices.batch_size=64",
        "--set",
        "learning.eval_every_slots=4",
        "--set",
        "learning.eval_max_samples=2000",
    ]
    assert main(args) == 0
    ev = pd.read_parquet(out / "events").query("event == 'eval'")
    assert ev["accuracy"].iloc[-1] > ev["accuracy"].iloc[0] + 0.1


@pytest.mark.slow  # a wflsim process run end to end; CI runs it (pytest -m slow)
def test_python_module_entry_point(tmp_path):
    """python -m wflsim.app.cli works like the console script."""
    res = subprocess.run(
        [sys.executable, "-m", "wflsim", "validate", str(QUICK)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr


@pytest.mark.slow
def test_cifar10_scenario_runs_on_a_small_pickle_set(tmp_path):
    """The paper's CIFAR-10 scenario runs end to end (MobileNetV2, freezing) on a tiny fake CIFAR-10 set."""
    import numpy as np

    from conftest import write_fake_cifar

    write_fake_cifar(tmp_path / "data", per_batch=16, rng=np.random.default_rng(0))
    out = tmp_path / "cifar"
    args = [
        "run",
        str(REPO / "scenarios" / "paper" / "cifar10_noniid.toml"),
        "--data-dir",
        str(tmp_path / "data"),
        "--out",
        str(out),
        "--quiet",
        "--set",
        "run.frames=2",
        "--set",
        "run.slots_per_frame=2",
        "--set",
        "devices.batch_size=4",
        "--set",
        "network.num_devices=4",
        "--set",
        "learning.eval_every_slots=2",
    ]
    assert main(args) == 0
    df = pd.read_parquet(out / "events")
    assert json.loads((out / "manifest.json").read_text())["num_params"] == 502_538
    assert (df.event == "eval").sum() == 3


def test_overwrite_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    """--overwrite replaces a previous run's files but never deletes a folder holding other files."""
    out = tmp_path / "precious"
    out.mkdir()
    (out / "thesis.tex").write_text("x")
    assert main(["run", str(QUICK), "--out", str(out), "--overwrite", *SHORT]) == 2
    assert (out / "thesis.tex").exists()
    assert "only replaces run folders" in capsys.readouterr().err


def test_overwrite_replaces_a_previous_run(tmp_path):
    """Running twice into the same --out with --overwrite succeeds and leaves one run."""
    out = tmp_path / "run"
    assert main(["run", str(QUICK), "--out", str(out), *SHORT]) == 0
    assert main(["run", str(QUICK), "--out", str(out), "--overwrite", *SHORT]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        ".wflsim-run",
        "checkpoint.npz",
        "events",
        "manifest.json",
    ]


def test_cuda_without_gpu_is_a_one_line_error(tmp_path, capsys):
    """learning.device = "cuda" on a machine without CUDA: exit 2 naming learning.device."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    err = _bad(tmp_path, capsys, [str(QUICK), "--set", "learning.device=cuda"])
    assert "learning.device" in err


def test_validate_catches_cuda_without_gpu(capsys):
    """`wflsim validate` builds the learner, so a missing GPU is reported before any run."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["validate", str(QUICK), "--set", "learning.device=cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert "learning.device" in err and len(err.splitlines()) == 1


def test_network_only_summary_prints_no_nan_accuracy(tmp_path, capsys):
    """A network-only run's summary says there is no training instead of printing nan."""
    args = ["--set", "learning.enabled=false", "--set", "run.frames=1", "--quiet"]
    assert main(["run", str(QUICK), "--out", str(tmp_path / "r"), *args]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out and "network only: no training" in out


def test_summary_notes_energy_above_every_budget(tmp_path, capsys):
    """ideal on the paper's network spends more than any budget: the summary says why."""
    paper = QUICK.parent / "paper" / "mnist_iid.toml"
    args = ["--set", "learning.enabled=false", "--set", "run.frames=2", "--quiet"]
    args += ["--set", "scheme.name=ideal"]
    assert main(["run", str(paper), "--out", str(tmp_path / "r"), *args]) == 0
    out = capsys.readouterr().out
    assert "exceeds every device's budget" in out and "waits for every upload" in out


def _cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m wflsim.app.cli ARGS`` in a fresh process (its own logging setup)."""
    return subprocess.run(
        [sys.executable, "-m", "wflsim", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )


@pytest.mark.slow  # a wflsim process run end to end; CI runs it (pytest -m slow)
def test_verbose_logs_the_run_and_each_frame(tmp_path):
    """-v logs the run's start, each completed frame and the end on stderr, one line each."""
    res = _cli("-v", "run", str(QUICK), *SHORT, "--out", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("wflsim INFO")]
    assert sum("frame" in ln and "done" in ln for ln in lines) == 2
    assert any("completed" in ln for ln in lines)


@pytest.mark.slow  # a wflsim process run end to end; CI runs it (pytest -m slow)
def test_default_logs_nothing(tmp_path):
    """Without -v the run writes no log line (only the summary on stdout)."""
    res = _cli("run", str(QUICK), *SHORT, "--out", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    assert "wflsim INFO" not in res.stderr and "wflsim DEBUG" not in res.stderr


@pytest.mark.slow  # a wflsim process run end to end; CI runs it (pytest -m slow)
def test_log_level_reaches_the_sweep_workers(tmp_path):
    """--log-level debug in a two-worker sweep: both workers log their points and checkpoints."""
    res = _cli(
        "--log-level",
        "debug",
        "sweep",
        str(QUICK),
        "--grid",
        "scheme=ideal,only_pc",
        *SHORT,
        "--workers",
        "2",
        "--out",
        str(tmp_path / "sw"),
    )
    assert res.returncode == 0, res.stderr
    points = [ln for ln in res.stderr.splitlines() if "app.sweep: point" in ln]
    assert len(points) == 2
    assert len({ln.split("[")[1].split("]")[0] for ln in points}) == 2  # two processes
    assert "checkpoint after frame 2" in res.stderr
