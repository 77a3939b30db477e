"""Run diagnostics (computed from the trace) and the warnings across fields before a run."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import wflsim
from conftest import REPO, base_scenario
from wflsim.analysis.diagnostics import (
    CODES,
    DIAGNOSED_EVENTS,
    diagnose,
    diagnose_folder,
    upload_concurrency,
)
from wflsim.analysis.tidy import plain_dtypes
from wflsim.app.cli import main
from wflsim.app.run import prepare, prepare_scenario
from wflsim.sim.config.loading import validate_scenario
from wflsim.sim.config.plausibility import MAX_STEP_RATIO, cross_findings
from wflsim.sim.errors import PlausibilityWarning
from wflsim.sim.servers.config import ServerConfig

#: 12 devices on one OFDMA band; the two_timescale controller lands uploads on the deadline.
SHARED: dict[str, Any] = {
    "uplink": {"mode": "ofdma"},
    "scheme": {"name": "two_timescale"},
    "network": {"num_devices": 12, "cell_radius_m": 500.0},
}


_RUNS: dict[str, wflsim.RunResult] = {}


def _run(**sections: Any) -> wflsim.RunResult:
    """The in-memory run of ``base_scenario(**sections)`` (made once per module)."""
    key = json.dumps(sections, sort_keys=True)
    if key not in _RUNS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PlausibilityWarning)
            _RUNS[key] = wflsim.run(base_scenario(**sections), progress=False)
    return _RUNS[key]


def _shared(k: int) -> wflsim.RunResult:
    return _run(
        uplink={"mode": "ofdma", "planned_concurrent_uploads": k},
        scheme={"name": "two_timescale"},
        network={"num_devices": 12, "cell_radius_m": 500.0},
    )


def _codes(found: list[Any]) -> list[str]:
    return [d.code for d in found]


def _plain(result: wflsim.RunResult) -> pd.DataFrame:
    ev = plain_dtypes(result.events)
    ev["event"] = ev["event"].astype(str)
    return ev


def _with_evals(result: wflsim.RunResult, loss: list[float], acc: list[float]) -> pd.DataFrame:
    """``result``'s events with eval rows of these losses and accuracies, one per slot from -1."""
    ev = _plain(result)
    evals = pd.DataFrame(
        {
            "event": "eval",
            "slot": np.arange(len(loss)) - 1,
            "time_s": np.arange(len(loss), dtype=np.float64),
            "loss": loss,
            "accuracy": acc,
        }
    )
    return pd.concat([ev, evals], ignore_index=True)


def _learning(result: wflsim.RunResult) -> dict[str, Any]:
    return {**result.scenario, "learning": {**result.scenario["learning"], "enabled": True}}


# ---- the trace's findings ------------------------------------------------------------------


def test_every_upload_lost_names_the_planned_concurrency() -> None:
    """OFDMA planned on W / 1 for 12 devices: every upload lost, the field named is k."""
    found = _shared(1).diagnostics
    first = found[0]
    assert first.code == "all_uploads_lost"
    assert first.field == "uplink.planned_concurrent_uploads"


def test_planned_concurrency_far_from_the_run_is_named() -> None:
    """OFDMA planned on W / 1 while about 12 share it: the mismatch names k and its size."""
    found = {d.code: d for d in _shared(1).diagnostics}
    d = found["planned_concurrency_mismatch"]
    assert d.field == "uplink.planned_concurrent_uploads"
    assert "raise it towards" in d.fix


def test_aircomp_sum_is_no_concurrency_mismatch() -> None:
    """Over the air every update is on the band at once by design: no concurrency finding."""
    result = _run(
        uplink={"mode": "aircomp"},
        scheme={"name": "ideal"},
        network={"num_devices": 12, "cell_radius_m": 500.0},
    )
    assert (result.events["event"] == "aircomp").any()
    assert "planned_concurrency_mismatch" not in _codes(result.diagnostics)


def test_dedicated_band_healthy_run_has_no_diagnostics() -> None:
    """The paper's setting (dedicated bands, fixed power) gives no diagnostic."""
    assert _run().diagnostics == []


def test_concurrency_matches_a_brute_force_time_grid() -> None:
    """The time-weighted concurrency of random intervals equals a fine grid's average."""
    rng = np.random.default_rng(4)
    starts = rng.uniform(0.0, 10.0, 40).round(3)
    ends = (starts + rng.uniform(0.1, 3.0, 40)).round(3)
    devices = np.arange(40)
    ev = pd.DataFrame(
        {
            "event": ["upload_start"] * 40 + ["upload_end"] * 40,
            "device": np.r_[devices, devices],
            "time_s": np.r_[starts, ends],
        }
    )
    got = upload_concurrency(ev, "ofdma")
    grid = np.arange(0.0, 14.0, 1e-4) + 5e-5  # cell midpoints, 1e-4 s cells
    n = ((grid[:, None] >= starts) & (grid[:, None] < ends)).sum(axis=1)
    for j, i in enumerate(np.argsort(ends, kind="stable")):  # in the order of the ends
        inside = (grid >= starts[i]) & (grid < ends[i])
        assert got[j] == pytest.approx(n[inside].mean(), rel=2e-3)


def test_concurrency_pairs_each_end_with_its_devices_last_start() -> None:
    """Two uploads of one device, one of another overlapping the second: 1 and 2 in flight."""
    ev = pd.DataFrame(
        {
            "event": ["upload_start", "upload_end", "upload_start", "upload_start", "upload_end"]
            + ["upload_end"],
            "device": [0, 0, 0, 1, 0, 1],
            "time_s": [0.0, 1.0, 2.0, 2.0, 3.0, 3.0],
        }
    )
    np.testing.assert_allclose(np.sort(upload_concurrency(ev, "ofdma")), [1.0, 2.0, 2.0])


def test_tdma_concurrency_counts_the_queue_from_compute_end() -> None:
    """Under TDMA an upload's life starts at its compute_end (its wait in the queue)."""
    ev = pd.DataFrame(
        {
            "event": ["compute_end", "compute_end", "upload_start", "upload_end"]
            + ["upload_start", "upload_end"],
            "device": [0, 1, 0, 0, 1, 1],
            "time_s": [0.0, 0.0, 0.0, 1.0, 1.0, 2.0],
        }
    )
    np.testing.assert_allclose(np.sort(upload_concurrency(ev, "tdma")), [1.5, 2.0])


def test_diverged_training_names_the_learning_rate() -> None:
    """A test loss that turns NaN is a diverged training, naming learning.lr."""
    base = _run()
    ev = _with_evals(base, [2.3, 1.0, float("nan")], [0.1, 0.5, 0.1])
    found = {d.code: d for d in diagnose(ev, _learning(base), base.summary)}
    assert found["training_diverged"].field == "learning.lr"


def test_loss_that_doubles_is_diverged() -> None:
    """A final loss above twice the initial one is a diverged training."""
    base = _run()
    ev = _with_evals(base, [2.3, 3.0, 4.7], [0.1, 0.1, 0.1])
    assert "training_diverged" in _codes(diagnose(ev, _learning(base), base.summary))


def test_accuracy_back_at_its_start_is_found() -> None:
    """A final accuracy at the initial one (the model updated) is flagged."""
    base = _run()
    ev = _with_evals(base, [2.3, 2.0, 2.2], [0.1, 0.3, 0.1])
    found = {d.code: d for d in diagnose(ev, _learning(base), base.summary)}
    assert "0.3000" in found["accuracy_not_improved"].problem


def test_accuracy_that_fell_from_its_best_is_found() -> None:
    """Accuracy 0.05 -> 0.34 -> 0.10 lost more than half its gain: flagged with the best."""
    base = _run()
    ev = _with_evals(base, [2.3, 1.5, 2.0], [0.05, 0.34, 0.10])
    found = {d.code: d for d in diagnose(ev, _learning(base), base.summary)}
    assert "0.3400" in found["accuracy_fell"].problem


def test_small_dip_after_the_best_is_not_flagged() -> None:
    """Accuracy 0.1 -> 0.9 -> 0.88 is a normal wobble: no finding."""
    base = _run()
    ev = _with_evals(base, [2.3, 0.4, 0.45], [0.1, 0.9, 0.88])
    assert diagnose(ev, _learning(base), base.summary) == []


def test_device_that_never_took_part_is_named() -> None:
    """A device never participating over 20 slots or more is named, with its budget field."""
    base = _run(run={"frames": 4, "slots_per_frame": 5, "deadline_s": 0.8})
    ev = _plain(base)
    out = ev["event"].isin(["energy"]) & (ev["device"] == 3)
    ev.loc[out, "participating"] = False
    ev.loc[out, "success"] = False
    found = {d.code: d for d in diagnose(ev, base.scenario, base.summary)}
    d = found["device_never_took_part"]
    assert d.problem.startswith("device 3 never") and d.field == "devices.energy_budget_j"


def test_async_step_far_above_sync_is_found() -> None:
    """async with buffer 1 and server_lr 1 over 6 devices: 6 times sync's step per update."""
    found = {
        d.code: d for d in _run(server={"mode": "async"}, scheme={"name": "ideal"}).diagnostics
    }
    d = found["server_step_too_large"]
    assert d.field == "server.server_lr" and "6 times" in d.problem


def test_async_at_the_synchronous_step_is_not_flagged() -> None:
    """server_lr = buffer_size / N gives sync's step per update: no finding."""
    result = _run(
        server={"mode": "async", "buffer_size": 3, "server_lr": 0.5}, scheme={"name": "ideal"}
    )
    assert "server_step_too_large" not in _codes(result.diagnostics)


def test_step_ratio_closed_forms() -> None:
    """step_ratio: sync 1, semi_sync eta_g, async eta_g N / b."""
    assert ServerConfig().step_ratio(30) == 1.0
    assert ServerConfig(mode="semi_sync", server_lr=2.0).step_ratio(30) == 2.0
    assert ServerConfig(mode="async", buffer_size=5).step_ratio(30) == 6.0


def test_trace_side_step_ratio_and_limit_equal_the_scenario_sides() -> None:
    """The diagnostics' step ratio and limit equal ServerConfig.step_ratio and the warning's."""
    from wflsim.analysis import diagnostics

    assert diagnostics.MAX_STEP_RATIO == MAX_STEP_RATIO
    for mode in ("sync", "semi_sync", "async"):
        for b in (1, 5) if mode == "async" else (1,):
            for lr in (1.0,) if mode == "sync" else (0.1, 1.0, 7.5):
                config = ServerConfig(mode=mode, buffer_size=b, server_lr=lr)
                table = config.model_dump(mode="json")
                for n in (1.0, 12.5, 30.0):
                    want = config.step_ratio(n)
                    assert diagnostics._Server.of(table).step_ratio(n) == want


@pytest.mark.parametrize("level", ["events", "device_slots"])
def test_device_slot_outcomes_equal_the_tidy_tables(level: str) -> None:
    """The checks' per device-slot outcomes equal analysis.tidy's table, at both trace levels."""
    from wflsim.analysis.diagnostics import device_slot_outcomes
    from wflsim.analysis.tidy import device_slots_from_events

    result = _run(
        availability={"model": "markov", "online_s": 2.0, "offline_s": 1.0},
        trace={"level": level},
    )
    mine = device_slot_outcomes(result.events).sort_values(["slot", "device"])
    tidy = device_slots_from_events(result.events)
    cols = ["slot", "device", "participating", "success", "dropped", "available"]
    assert not tidy["available"].all() and tidy["dropped"].any()
    pd.testing.assert_frame_equal(
        mine[cols].reset_index(drop=True), tidy[cols].reset_index(drop=True), check_dtype=False
    )


@pytest.mark.parametrize(("level", "dense"), [("events", 4), ("events", 0), ("device_slots", 4)])
def test_arrow_device_slot_outcomes_equal_the_dataframe_ones(
    level: str, dense: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run folder's device-slot outcomes, built from Arrow, equal the DataFrame path's exactly."""
    from wflsim.analysis import diagnostics
    from wflsim.analysis.diagnostics import device_slot_outcomes, device_slot_outcomes_arrow

    monkeypatch.setattr(diagnostics, "_DENSE_FACTOR", dense)  # 0: the sorted-keys lookup
    from wflsim.analysis.io import load_events, load_events_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlausibilityWarning)
        wflsim.run(
            base_scenario(
                availability={"model": "markov", "online_s": 2.0, "offline_s": 1.0},
                trace={"level": level},
            ),
            out=tmp_path / "r",
            progress=False,
        )
    table, _ = load_events_table(tmp_path / "r")
    frame = load_events(tmp_path / "r")
    fast = device_slot_outcomes_arrow(table)
    slow = device_slot_outcomes(frame)
    assert not fast["available"].all() and fast["participating"].any()
    pd.testing.assert_frame_equal(fast, slow)


def test_every_code_is_documented() -> None:
    """Every diagnostic code is in docs/diagnostics.md's table."""
    text = (REPO / "docs" / "diagnostics.md").read_text(encoding="utf-8")
    assert [c for c in CODES if f"`{c}`" not in text] == []


def test_folder_diagnostics_equal_the_in_memory_ones(tmp_path: Path) -> None:
    """A run folder's diagnostics (its trace filtered to the events read) equal the run's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlausibilityWarning)
        result = wflsim.run(base_scenario(**SHARED), out=tmp_path / "r", progress=False)
    assert diagnose_folder(tmp_path / "r") == _shared(1).diagnostics == result.diagnostics
    assert "upload_end" in DIAGNOSED_EVENTS


# ---- the API and the command ---------------------------------------------------------------


def test_strict_api_run_raises_with_the_result() -> None:
    """wflsim.run(strict=True) of a run with diagnostics raises DiagnosticsError holding it."""
    table = base_scenario(
        **{**SHARED, "uplink": {"mode": "ofdma", "planned_concurrent_uploads": 2}},
        run={"frames": 1, "slots_per_frame": 3, "deadline_s": 0.8},
    )
    with pytest.raises(wflsim.DiagnosticsError) as err:
        wflsim.run(table, progress=False, strict=True)
    assert err.value.result.summary["slots"] == 3
    assert err.value.diagnostics[0].code == "all_uploads_lost"


def _toml(tmp_path: Path, **sections: Any) -> Path:
    from wflsim.sim.config.loading import scenario_text

    path = tmp_path / "s.toml"
    path.write_text(scenario_text(base_scenario(**sections)), encoding="utf-8")
    return path


def test_cli_prints_diagnostics_after_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """wflsim run prints each diagnostic after the summary and exits 0."""
    path = _toml(tmp_path, **SHARED)
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [i for i, line in enumerate(out) if line.startswith("  diagnostic: ")]
    wall = next(i for i, line in enumerate(out) if "wall time" in line)
    assert lines and min(lines) > wall
    assert "uplink.planned_concurrent_uploads" in out[lines[0]]


def test_cli_strict_run_with_diagnostics_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--strict turns a completed run's diagnostics into exit code 3 (the trace is kept)."""
    path = _toml(
        tmp_path,
        uplink={"mode": "ofdma", "planned_concurrent_uploads": 2},
        scheme={"name": "two_timescale"},
        network={"num_devices": 12, "cell_radius_m": 500.0},
    )
    code = main(["run", str(path), "--out", str(tmp_path / "r"), "--quiet", "--strict"])
    assert code == 3
    assert "--strict" in capsys.readouterr().err
    assert (tmp_path / "r" / "manifest.json").is_file()


def test_cli_sweep_prints_one_line_per_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """wflsim sweep lists each kind of diagnostic once, with how many runs have it."""
    path = _toml(tmp_path, **SHARED)
    argv = ["sweep", str(path), "--seeds", "1,2", "--out", str(tmp_path / "sw"), "--quiet"]
    assert main(argv) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "diagnostic:" in x]
    assert any("all_uploads_lost in 2 of 2 runs" in x for x in lines)


# ---- warnings across fields, before the run ------------------------------------------------


def _cross(**sections: Any) -> list[Any]:
    prep = prepare_scenario(validate_scenario(base_scenario(**sections)), warn=False)
    return cross_findings(prep.scenario, prep.devices)


def test_shared_uplink_planned_alone_warns() -> None:
    """OFDMA with planned_concurrent_uploads = 1 and 12 devices is a warning on that field."""
    assert [f.field for f in _cross(**SHARED)] == ["uplink.planned_concurrent_uploads"]


def test_shared_uplink_planned_for_its_devices_does_not_warn() -> None:
    """OFDMA planned for 12 concurrent uploads: no warning on k."""
    sections = {**SHARED, "uplink": {"mode": "ofdma", "planned_concurrent_uploads": 12}}
    assert "uplink.planned_concurrent_uploads" not in [f.field for f in _cross(**sections)]


def test_dedicated_band_does_not_warn_on_k() -> None:
    """A dedicated band with k = 1 (the paper's) gives no finding across fields."""
    assert _cross() == []


def test_async_step_above_the_limit_warns_before_the_run() -> None:
    """async, buffer 1, server_lr 1 over 6 devices (ratio 6 > 3) warns on server.server_lr."""
    found = _cross(server={"mode": "async"}, scheme={"name": "ideal"})
    assert [f.field for f in found] == ["server.server_lr"]
    assert MAX_STEP_RATIO < 6


def test_semi_sync_default_step_does_not_warn() -> None:
    """semi_sync with server_lr = 1 steps as sync does: no warning."""
    assert _cross(server={"mode": "semi_sync"}, scheme={"name": "ideal"}) == []


def test_the_papers_setting_gives_no_warning_across_fields() -> None:
    """The paper's MNIST setting (network only) gives no finding across fields."""
    prep = prepare(
        str(REPO / "scenarios" / "paper" / "mnist_noniid.toml"),
        ["learning.enabled=false", "learning.num_params=440812"],
        warn=False,
    )
    assert cross_findings(prep.scenario, prep.devices) == []


def test_cross_warnings_reach_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """wflsim validate prints the warning across fields as one line; --strict refuses it."""
    path = _toml(tmp_path, **SHARED)
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: uplink.planned_concurrent_uploads: 1 with uplink.mode")
    assert main(["validate", str(path), "--strict"]) == 2


# ---- the report ----------------------------------------------------------------------------


def test_report_lists_each_runs_diagnostics(tmp_path: Path) -> None:
    """wflsim report of a sweep writes diagnostics.csv and a section naming each run's findings."""
    from wflsim.analysis.report import write_report

    path = _toml(tmp_path, **SHARED)
    argv = ["sweep", str(path), "--seeds", "1,2", "--out", str(tmp_path / "sw"), "--quiet"]
    assert main(argv) == 0
    write_report(tmp_path / "sw", tmp_path / "rep", formats="png")
    table = pd.read_csv(tmp_path / "rep" / "diagnostics.csv")
    assert sorted(table.loc[table["code"] == "all_uploads_lost", "run"]) == ["seed=1", "seed=2"]
    md = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert "## Run diagnostics" in md and "2 of 2 run(s) have diagnostics" in md


def test_report_of_a_healthy_run_says_none(tmp_path: Path) -> None:
    """A run without findings: the report's section says no run has a diagnostic."""
    from wflsim.analysis.report import write_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlausibilityWarning)
        wflsim.run(base_scenario(), out=tmp_path / "r", progress=False)
    write_report(tmp_path / "r", tmp_path / "rep", formats="png")
    md = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert "No run has a diagnostic" in md
    assert len(pd.read_csv(tmp_path / "rep" / "diagnostics.csv")) == 0


# ---- the quick start's two silent failures -------------------------------------------------

QUICKSTART = str(REPO / "scenarios" / "quickstart.toml")


def test_quickstart_on_ofdma_warns_and_diagnoses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quick start on one OFDMA band planned on W: a warning before, a diagnostic after."""
    sets = ['scheme.name="two_timescale"', 'uplink.mode="ofdma"', "run.frames=1"]
    argv = ["run", QUICKSTART, "--out", str(tmp_path / "r"), "--quiet"]
    assert main(argv + [a for s in sets for a in ("--set", s)]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: uplink.planned_concurrent_uploads: 1 with uplink.mode")
    assert "  diagnostic: every upload was lost" in out
    assert "(uplink.planned_concurrent_uploads: " in out


def test_quickstart_async_default_server_lr_warns_and_diagnoses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quick start under async with buffer 5 and server_lr 1: warned and diagnosed."""
    sets = ['server.mode="async"', "server.buffer_size=5", "run.frames=1"]
    argv = ["run", QUICKSTART, "--out", str(tmp_path / "r"), "--quiet"]
    assert main(argv + [a for s in sets for a in ("--set", s)]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: server.server_lr: 1 under mode = 'async'")
    assert "each applied update moved the model 6 times" in out
    assert "(server.server_lr: server_lr = 0.167" in out


# ---- slots without a participant, co-band cells, LTE's lowest MCS ---------------------------


def _idle_case(mode: str = "sync", uplink: str = "ofdma") -> dict[str, Any]:
    """6 devices, 3 local steps of c B / f = 2e6 x 32 / 2e9 = 0.032 s each: 0.096 s of the
    0.1 s deadline; the paper's controller freezes nothing in frame 0."""
    up: dict[str, Any] = {"mode": uplink}
    if uplink in ("ofdma", "tdma"):
        up["planned_concurrent_uploads"] = 6
    return base_scenario(
        run={"frames": 2, "slots_per_frame": 4, "deadline_s": 0.1},
        devices={"batch_size": 32, "cpu_hz": 2e9, "cycles_per_sample": 2e6},
        learning={"enabled": False, "num_params": 100_000, "local_steps": 3},
        scheme={"name": "two_timescale"},
        uplink=up,
        server={"mode": mode, "server_lr": 1.0 / 6 if mode == "async" else 1.0},
    )


def _coband(reuse: int, plan_on: str = "noise") -> dict[str, Any]:
    """7 hexagonal cells (one ring) on ``reuse`` bands, 14 devices, the paper's controller."""
    return base_scenario(
        run={"frames": 1, "slots_per_frame": 4, "deadline_s": 0.8},
        network={"num_devices": 14, "cell_radius_m": 500.0},
        devices={"batch_size": 32},
        scheme={"name": "two_timescale"},
        cells={"rings": 1, "reuse_factor": reuse, "plan_on": plan_on},
    )


def _findings_of(data: dict[str, Any]) -> list[str]:
    prep = prepare_scenario(validate_scenario(data), warn=False)
    return [f.field for f in cross_findings(prep.scenario, prep.system.devices)]


def test_compute_filling_the_deadline_warns_before_the_run() -> None:
    """3 steps of 0.032 s fill 0.096 s of a 0.1 s deadline: a warning on learning.local_steps."""
    assert "learning.local_steps" in _findings_of(_idle_case())


def test_compute_below_the_fill_share_does_not_warn() -> None:
    """2 steps (0.064 s of 0.1 s, below 0.9 of it) give no warning on the local steps."""
    data = _idle_case()
    data["learning"]["local_steps"] = 2
    assert "learning.local_steps" not in _findings_of(data)


@pytest.mark.parametrize(
    ("mode", "uplink"),
    [("sync", "ofdma"), ("semi_sync", "ofdma"), ("async", "ofdma"), ("sync", "aircomp")],
)
def test_an_idle_first_frame_names_the_local_steps(mode: str, uplink: str) -> None:
    """Frame 0 computes in full and leaves 0.004 s to upload: every server mode and AirComp
    find its slots idle and name learning.local_steps."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlausibilityWarning)
        result = wflsim.run(_idle_case(mode, uplink), progress=False)
    found = {d.code: d for d in result.diagnostics}
    d = found["idle_slots"]
    assert d.field == "learning.local_steps"
    assert "frame 0 entirely" in d.problem and "0.096 s of the 0.1 s" in d.problem


def test_an_idle_first_frame_is_found_at_the_device_slots_level() -> None:
    """At [trace] level = "device_slots" the idle frame is found and its cause named alike."""
    data = _idle_case()
    data["trace"] = {"level": "device_slots"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlausibilityWarning)
        found = {d.code: d for d in wflsim.run(data, progress=False).diagnostics}
    assert found["idle_slots"].field == "learning.local_steps"


@pytest.mark.parametrize("level", ["events", "device_slots"])
def test_folder_idle_diagnostics_equal_the_in_memory_ones(tmp_path: Path, level: str) -> None:
    """A run folder's idle-slot diagnostic (read leanly) equals the in-memory one."""
    data = _idle_case()
    data["trace"] = {"level": level}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlausibilityWarning)
        result = wflsim.run(data, out=tmp_path / "run", progress=False)
    assert "idle_slots" in _codes(result.diagnostics)
    assert diagnose_folder(tmp_path / "run") == diagnose(result.events, result.scenario)


def test_a_run_of_idle_slots_by_power_is_not_blamed_on_budgets() -> None:
    """Every slot idle for want of power: idle_slots names the compute, no_participation (the
    budgets) is not said."""
    data = _idle_case(uplink="dedicated")
    data["run"]["frames"] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlausibilityWarning)
        codes = _codes(wflsim.run(data, progress=False).diagnostics)
    assert "idle_slots" in codes and "no_participation" not in codes


def test_co_band_cells_planned_on_noise_warn_before_the_run() -> None:
    """7 cells on one band planned on the noise: a warning on cells.plan_on."""
    assert "cells.plan_on" in _findings_of(_coband(1))


@pytest.mark.parametrize(("reuse", "plan_on"), [(7, "noise"), (1, "mean_interference")])
def test_separate_bands_or_an_interference_plan_do_not_warn(reuse: int, plan_on: str) -> None:
    """Reuse 7 on 7 cells (no co-band pair), or a plan with the interference: no warning."""
    assert "cells.plan_on" not in _findings_of(_coband(reuse, plan_on))


def test_co_band_cells_that_lose_every_upload_name_plan_on() -> None:
    """7 cells on one band planned on the noise lose every upload: the field is cells.plan_on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlausibilityWarning)
        found = {d.code: d for d in wflsim.run(_coband(1), progress=False).diagnostics}
    assert found["all_uploads_lost"].field == "cells.plan_on"


def test_co_band_cells_that_lose_most_uploads_name_plan_on() -> None:
    """Reuse 3 on 7 cells planned on the noise: most uploads lost, cells.plan_on named."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlausibilityWarning)
        found = {d.code: d for d in wflsim.run(_coband(3), progress=False).diagnostics}
    assert found["interference_unplanned"].field == "cells.plan_on"


def _lost_over_lte(tx_dbm: float, loss_db: float) -> pd.DataFrame:
    """2 devices x 2 slots over ns-3, every upload lost, each sent at ``tx_dbm`` over a
    ``loss_db`` link."""
    rows: list[dict[str, Any]] = []
    for slot in range(2):
        for device in range(2):
            key = {"slot": slot, "device": device, "time_s": 0.8 * slot}
            rows.append({**key, "event": "decision", "available": True})
            rows.append(
                {
                    **key,
                    "event": "energy",
                    "participating": True,
                    "success": False,
                    "dropped": False,
                }
            )
            rows.append(
                {**key, "event": "upload_end", "ns3_tx_dbm": tx_dbm, "ns3_loss_db": loss_db}
            )
    return pd.DataFrame(rows)


LTE_SCENARIO = {
    "network": {"num_devices": 2, "noise_dbm": -104.0},
    "uplink": {"mode": "ns3_lte", "planned_concurrent_uploads": 2},
    "channel": {"rate_model": "shannon"},
}


def test_lte_uploads_below_the_lowest_mcs_name_the_rate_model() -> None:
    """Sent at 0 dBm over 110 dB against -104 dBm of noise (SNR -6 dB < -2.95 dB): every loss
    is put on the Shannon planning model (channel.rate_model), not on the deadline."""
    found = diagnose(_lost_over_lte(0.0, 110.0), LTE_SCENARIO)
    lost = {d.code: d for d in found}["all_uploads_lost"]
    assert lost.field == "channel.rate_model" and "-6 dB" in lost.fix


def test_lte_uploads_above_the_lowest_mcs_keep_the_deadline() -> None:
    """At 10 dBm over 110 dB (SNR 4 dB) the lowest MCS is not the cause: run.deadline_s."""
    found = diagnose(_lost_over_lte(10.0, 110.0), LTE_SCENARIO)
    assert {d.code: d for d in found}["all_uploads_lost"].field == "run.deadline_s"


def test_trace_side_limits_equal_the_scenario_sides() -> None:
    """The compute share and LTE's lowest SNR the diagnostics use are the warning's and the
    truncated Shannon model's."""
    from wflsim.analysis import diagnostics
    from wflsim.sim.config import plausibility
    from wflsim.sim.radio.rates import TRUNCATED_DEFAULTS

    assert diagnostics.COMPUTE_FILL_SHARE == plausibility.COMPUTE_FILL_SHARE
    assert diagnostics.LTE_MIN_SNR_DB == TRUNCATED_DEFAULTS["snr_min_db"]


@pytest.mark.parametrize("rings", [0, 1, 2])
@pytest.mark.parametrize("reuse", [1, 3, 7])
def test_trace_side_co_band_equals_the_layouts(rings: int, reuse: int) -> None:
    """The diagnostics' co-band test from the [cells] table agrees with the built layout's."""
    from wflsim.analysis.diagnostics import _co_band
    from wflsim.sim.radio.cells.config import CellsConfig
    from wflsim.sim.radio.cells.layout import build_layout

    table = {"rings": rings, "reuse_factor": reuse}
    layout = build_layout(CellsConfig.model_validate(table), 500.0, "dedicated")
    assert _co_band(table) == layout.interferes
