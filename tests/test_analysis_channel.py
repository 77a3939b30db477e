"""analysis.channel: per-run outcomes of channel studies, the controller's planning gap, paired
differences of schemes replayed on one channel."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import base_scenario
from sim.config.loading import validate_scenario
from sim.run import execute, make_learner, prepare_scenario

PAPER = dict(
    run={"frames": 20, "slots_per_frame": 20, "deadline_s": 0.8},
    network={"num_devices": 30, "cell_radius_m": 1000.0},
    devices={"batch_size": 512, "energy_budget_j": {"dist": "uniform", "low": 0.30, "high": 0.45}},
    learning={"enabled": False, "num_params": 440_812},
)


def run(out: Path, scheme: str = "two_timescale", seed: int = 3, **sections: Any) -> Path:
    data = base_scenario(**PAPER, scheme={"name": scheme, "V": 100.0}, seed=seed, **sections)
    prep = prepare_scenario(validate_scenario(data))
    execute(prep, make_learner(prep), out)
    return out


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """Three two_timescale runs of the paper's network setting: Rayleigh, Rician K = 12 dB, CSI
    error 0.2 (seed 3)."""
    root = tmp_path_factory.mktemp("study")
    run(root / "rayleigh")
    run(root / "rician", channel={"fading": {"model": "rician", "k_db": 12.0}})
    run(root / "csi", channel={"csi": {"error_variance": 0.2}})
    return root


def _gaps(run_dir: Path) -> np.ndarray:
    from analysis import tidy

    t = tidy.load(run_dir, ["device_slots", "frames"])
    real = t.device_slots.groupby(["frame", "device"])["cost"].mean()
    exp = t.frames.set_index(["frame", "device"])["expected_cost"]
    return (real - exp).dropna().to_numpy()


def test_controller_expected_cost_matches_simulation_under_its_own_assumption(study):
    """Under Rayleigh fading with perfect CSI, the realised mean per-slot cost of each of 600
    device-frames minus Theorem 2's expected cost Z(gamma) averages 0 within 4 SE."""
    d = _gaps(study / "rayleigh")
    assert len(d) == 600
    assert abs(d.mean()) < 4 * d.std(ddof=1) / math.sqrt(len(d))


def test_planning_gap_reveals_a_mismatched_channel(study):
    """Under Rician fading (K = 12 dB) the controller's expected cost is off by more than 10 SE."""
    d = _gaps(study / "rician")
    assert abs(d.mean()) > 10 * d.std(ddof=1) / math.sqrt(len(d))


def test_outcomes_has_settings_and_outcomes_per_run(study):
    """One row per run with its CSI and fading settings; perfect CSI has no outage and no waste."""
    from analysis import channel

    t = channel.outcomes(study).set_index("run")
    assert set(t.index) == {"rayleigh", "rician", "csi"}
    assert (
        t.loc["csi", "csi_error_variance"] == 0.2 and t.loc["rayleigh", "csi_error_variance"] == 0
    )
    assert t.loc["rician", "fading"] == "rician" and t.loc["rician", "k_db"] == 12.0
    for name in ("rayleigh", "rician"):
        assert t.loc[name, "outage_rate"] == 0 and t.loc[name, "wasted_share"] == 0
    assert t.loc["csi", "outage_rate"] > 0.1 and 0 < t.loc["csi", "wasted_share"] < 1
    assert t.loc["rayleigh", "planning_gap"] == pytest.approx(_gaps(study / "rayleigh").mean())


def test_paired_differences_on_a_replayed_channel(tmp_path):
    """Two schemes replayed on one recording: per-slot differences are exact (the reference
    differs from itself by nothing) and the paired standard error is below the unpaired one."""
    from analysis import channel

    ch = {"fading": {"model": "rician", "k_db": 3.0}, "csi": {"error_variance": 0.1}}
    rec = run(tmp_path / "rec", channel={**ch, "record": True})
    table = str(rec)  # a recorded run folder
    for scheme in ("two_timescale", "only_pc"):
        run(tmp_path / "replayed" / scheme, scheme=scheme, channel={**ch, "replay": table})
    pdiff = channel.paired_differences(tmp_path / "replayed", "two_timescale", "energy_j")
    row = pdiff.set_index("scheme").loc["only_pc"]
    assert row["slots"] == 400
    assert row["paired_se"] < row["unpaired_se"]
    with pytest.raises(ValueError, match="reference"):
        channel.paired_differences(tmp_path / "replayed", "ideal")


def test_the_command_prints_tables_and_draws_figures(study, tmp_path, capsys):
    """python -m analysis.channel DIR --by ... --figures OUT: a Markdown table over seeds and a PNG."""
    from analysis import channel

    assert channel.main([str(study), "--by", "fading", "--figures", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| two_timescale | rician |" in out and "planning_gap" in out
    assert (tmp_path / "outcomes_vs_fading.png").stat().st_size > 0


def test_accuracy_figure_of_training_runs(tmp_path):
    """Runs with training give an accuracy-against-slot figure; network-only runs give none."""
    from analysis import channel

    small = dict(
        run={"frames": 2, "slots_per_frame": 2, "deadline_s": 0.1},
        network={"num_devices": 4, "cell_radius_m": 500.0, "bandwidth_hz": 1e6},
        devices={"batch_size": 16},
        learning={"enabled": True, "dataset": "digits", "model": "mlp", "eval_every_slots": 2},
        scheme={"name": "only_pc"},
    )
    for e2 in (0.0, 0.3):
        data = base_scenario(**small, channel={"csi": {"error_variance": e2}})
        del data["learning"]["num_params"]  # training: the payload is the model's
        prep = prepare_scenario(validate_scenario(data))
        execute(prep, make_learner(prep), tmp_path / "runs" / f"e2-{e2}")
    png = channel.accuracy_figure(tmp_path / "runs", "csi_error_variance", tmp_path / "a.png")
    assert png is not None and png.stat().st_size > 0
    net = run(tmp_path / "net")
    assert channel.accuracy_figure(net, "csi_error_variance", tmp_path / "b.png") is None
