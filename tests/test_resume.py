"""Resume, the run folder's manifest and the refusals of `wflsim run` (in-process)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import failing_at_frame, run_in_memory
from golden_runs import column_hashes
from wflsim.analysis.io import events_files, load_events
from wflsim.app.cli import main
from wflsim.sim.registry import SCHEMES

#: A network-only scenario with moving devices and the paper's controller: 6 frames x 4 slots.
NETWORK = """
name = "resume"
seed = 7
[run]
frames = 6
slots_per_frame = 4
deadline_s = 0.8
checkpoint_every_frames = {every}
[network]
num_devices = 12
cell_radius_m = 400.0
[mobility]
model = "random_waypoint"
speed_mps = [20.0, 40.0]
[learning]
enabled = false
num_params = 100000
[scheme]
name = "two_timescale"
V = 10.0
"""


def scenario(tmp_path: Path, every: int = 1) -> Path:
    """The scenario file above in ``tmp_path``."""
    path = tmp_path / "s.toml"
    path.write_text(NETWORK.format(every=every))
    return path


def reference(path: Path) -> dict[str, str]:
    """Column hashes of the uninterrupted run of a scenario file (in memory)."""
    table, _ = run_in_memory(tomllib.loads(path.read_text()))
    return column_hashes(table)


def disk_hashes(out: Path) -> dict[str, str]:
    """Column hashes of a run folder's trace (all its parts, in order)."""
    tables = [pq.read_table(f).replace_schema_metadata(None) for f in events_files(out)]
    return column_hashes(pa.concat_tables(tables))


def run(*args: str) -> int:
    """``wflsim run ... --quiet``."""
    return main(["run", *args, "--quiet"])


def fail_at_frame(monkeypatch, frame: int, exc: type[BaseException] = RuntimeError) -> None:
    """Make the run's scheme raise ``exc`` when it plans frame ``frame``."""
    from wflsim.sim.schemes.two_timescale import TwoTimescale

    original = TwoTimescale.plan_frame

    def boom(self, ctx):
        if ctx.frame == frame:
            raise exc("injected")
        return original(self, ctx)

    monkeypatch.setattr(TwoTimescale, "plan_frame", boom)


def strict(path: Path) -> dict:
    """A JSON file parsed by a parser that refuses NaN and infinities."""

    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_failed_run_resumes_to_the_uninterrupted_events(tmp_path, monkeypatch):
    """A run failed in frame 3 and resumed gives the uninterrupted run's events."""
    path, out = scenario(tmp_path), tmp_path / "run"
    with monkeypatch.context() as m:
        fail_at_frame(m, 3)
        assert run(str(path), "--out", str(out)) == 1
    manifest = strict(out / "manifest.json")
    assert manifest["status"] == "failed" and manifest["frames_completed"] == 3
    assert run("--resume", str(out)) == 0
    manifest = strict(out / "manifest.json")
    assert manifest["status"] == "completed" and manifest["resumed"][0]["from_frame"] == 3
    assert disk_hashes(out) == reference(path)


def test_parts_after_the_checkpoint_are_recomputed(tmp_path, monkeypatch):
    """With checkpoints every 2 frames, a run failed in frame 3 resumes from frame 2: frame 2's
    part is written again, a temporary file left by a cut write is removed, and the events equal
    the uninterrupted run's."""
    path, out = scenario(tmp_path, every=2), tmp_path / "run"
    with monkeypatch.context() as m:
        fail_at_frame(m, 3)
        assert run(str(path), "--out", str(out)) == 1
    assert len(events_files(out)) == 3
    before = (out / "events" / "part-000002.parquet").stat().st_mtime_ns
    stray = out / "events" / ".part-000003.parquet.4242.tmp"  # a write cut by a kill
    stray.write_bytes(b"half a file")
    assert run("--resume", str(out)) == 0
    assert not stray.exists()
    assert strict(out / "manifest.json")["resumed"][0]["from_frame"] == 2
    assert (out / "events" / "part-000002.parquet").stat().st_mtime_ns != before
    assert disk_hashes(out) == reference(path)


def test_interrupted_manifest_counts_only_completed_frames(tmp_path, monkeypatch):
    """Ctrl-C in frame 2: exit 130, status interrupted, summary and parts of frames 0-1 only."""
    path, out = scenario(tmp_path), tmp_path / "run"
    fail_at_frame(monkeypatch, 2, KeyboardInterrupt)
    assert run(str(path), "--out", str(out)) == 130
    manifest = strict(out / "manifest.json")
    assert manifest["status"] == "interrupted"
    assert manifest["summary"]["slots"] == 2 * 4
    assert [p["frame"] for p in manifest["parts"]] == [0, 1]
    assert load_events(out)["frame"].max() == 1


def test_resume_with_other_overrides_is_refused(tmp_path, capsys, monkeypatch):
    """Resuming with a different --set exits 2 in one line naming the overrides and the fix."""
    path, out = scenario(tmp_path), tmp_path / "run"
    with monkeypatch.context() as m:
        fail_at_frame(m, 2)
        assert run(str(path), "--out", str(out)) == 1
    capsys.readouterr()
    assert run(str(path), "--set", "scheme.V=20", "--resume", str(out)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--set overrides" in err and "--overwrite" in err
    assert strict(out / "manifest.json")["status"] == "failed"  # untouched


def test_resume_with_an_edited_scenario_is_refused(tmp_path, capsys, monkeypatch):
    """Resuming with an edited scenario file exits 2 naming the scenario text."""
    path, out = scenario(tmp_path), tmp_path / "run"
    with monkeypatch.context() as m:
        fail_at_frame(m, 2)
        assert run(str(path), "--out", str(out)) == 1
    path.write_text(path.read_text().replace("V = 10.0", "V = 11.0"))
    capsys.readouterr()
    assert run(str(path), "--resume", str(out)) == 2
    assert "scenario file's text" in capsys.readouterr().err


def test_resume_of_another_version_is_refused(tmp_path, capsys, monkeypatch):
    """A run made by another wflsim version is not continued by this one."""
    path, out = scenario(tmp_path), tmp_path / "run"
    with monkeypatch.context() as m:
        fail_at_frame(m, 2)
        assert run(str(path), "--out", str(out)) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["fingerprint"]["wflsim_version"] = "0.0.1"
    (out / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert run("--resume", str(out)) == 2
    assert "made by 0.0.1" in capsys.readouterr().err


def test_resume_of_a_completed_run_does_nothing(tmp_path, capsys):
    """--resume of a completed run exits 0 and changes no file."""
    path, out = scenario(tmp_path), tmp_path / "run"
    assert run(str(path), "--out", str(out)) == 0
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert run("--resume", str(out)) == 0
    assert "already completed" in capsys.readouterr().out
    assert stamps == {p: p.stat().st_mtime_ns for p in out.rglob("*")}


def test_resume_of_a_folder_that_is_not_a_run_is_refused(tmp_path, capsys):
    """--resume of a folder without the run marker exits 2 and writes nothing."""
    (tmp_path / "x").mkdir()
    assert run("--resume", str(tmp_path / "x")) == 2
    assert "not a wflsim run folder" in capsys.readouterr().err
    assert list((tmp_path / "x").iterdir()) == []


def test_resume_with_a_damaged_checkpoint_is_refused(tmp_path, capsys, monkeypatch):
    """A checkpoint that is not a checkpoint: exit 2, naming the fix (--overwrite)."""
    path, out = scenario(tmp_path), tmp_path / "run"
    with monkeypatch.context() as m:
        fail_at_frame(m, 2)
        assert run(str(path), "--out", str(out)) == 1
    (out / "checkpoint.npz").write_bytes(b"garbage")
    capsys.readouterr()
    assert run("--resume", str(out)) == 2
    err = capsys.readouterr().err
    assert "checkpoint" in err and "--overwrite" in err


def test_resume_with_a_missing_part_is_refused(tmp_path, capsys, monkeypatch):
    """A part the checkpoint counts on is gone: exit 2 instead of a trace with a hole."""
    path, out = scenario(tmp_path), tmp_path / "run"
    with monkeypatch.context() as m:
        fail_at_frame(m, 3)
        assert run(str(path), "--out", str(out)) == 1
    (out / "events" / "part-000001.parquet").unlink()
    capsys.readouterr()
    assert run("--resume", str(out)) == 2
    assert "frame 1's part is missing" in capsys.readouterr().err


def test_overwrite_keeps_the_old_run_when_the_new_one_is_bad(tmp_path):
    """--overwrite with a bad scenario exits 2 and leaves the previous run as it was."""
    path, out = scenario(tmp_path), tmp_path / "run"
    assert run(str(path), "--out", str(out)) == 0
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert run(str(path), "--set", "run.frames=-1", "--out", str(out), "--overwrite") == 2
    assert stamps == {p: p.stat().st_mtime_ns for p in out.rglob("*")}


def test_network_only_manifest_is_strict_json(tmp_path):
    """A network-only run (accuracy NaN) writes null, never NaN, in manifest.json."""
    path, out = scenario(tmp_path), tmp_path / "run"
    assert run(str(path), "--out", str(out)) == 0
    manifest = strict(out / "manifest.json")
    assert manifest["summary"]["final_accuracy"] is None
    assert [p["rows"] for p in manifest["parts"]] == [
        pq.ParquetFile(f).metadata.num_rows for f in events_files(out)
    ]


def test_diverging_training_fails_with_a_clear_message(tmp_path, capsys, monkeypatch):
    """A step that makes the weights non-finite: exit 1, status failed, the error says it diverged."""
    from wflsim.models.learner import TorchLearner

    original = TorchLearner.apply

    def diverging_apply(self, slot, success_ids):  # stands in for a learning rate far too large
        original(self, slot, success_ids)
        if slot == 2:
            self._w[0] = float("inf")

    monkeypatch.setattr(TorchLearner, "apply", diverging_apply)
    quick = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.toml"
    out = tmp_path / "run"
    args = ["--set", "run.frames=2", "--set", "run.slots_per_frame=3"]
    assert run(str(quick), *args, "--out", str(out)) == 1
    manifest = strict(out / "manifest.json")
    assert manifest["status"] == "failed" and "diverged" in manifest["error"]
    assert "non-finite weights" in manifest["error"] and manifest["summary"] is None
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "learning.lr" in err


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_every_scheme_resumes_to_the_uninterrupted_events(tmp_path, scheme):
    """For every scheme, a run that failed in frame 4 and was resumed from the command line
    has the uninterrupted run's events."""
    path, out = scenario(tmp_path), tmp_path / "run"
    text = path.read_text().replace('name = "two_timescale"', f'name = "{scheme}"')
    if scheme == "fjord":  # its sub-models need the architecture, not a bare parameter count
        text = text.replace("num_params = 100000", 'dataset = "mnist"\nmodel = "cnn_mnist"')
    path.write_text(text)
    failed = main(["run", str(path), "--out", str(out), "--quiet"], hooks=failing_at_frame(4))
    assert failed == 1
    assert run("--resume", str(out)) == 0
    assert disk_hashes(out) == reference(path)
