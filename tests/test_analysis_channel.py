"""analysis.channel: per-run outcomes of channel studies, the controller's planning gap, paired
differences of schemes replayed on one channel, means over seeds with 95 % t-intervals, figures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from scipy import stats as st

from conftest import base_scenario
from wflsim.analysis import channel, figures
from wflsim.analysis.tidy import SCHEME_LABELS
from wflsim.app.run import execute, make_learner, prepare_scenario
from wflsim.sim.config.loading import validate_scenario

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
    from wflsim.analysis import tidy

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
    """python -m wflsim.analysis.channel DIR --by ... --figures OUT: a Markdown table over seeds (the
    number of seeds n, each outcome as "mean [95 % interval]", the mean alone for one seed) and
    a PNG."""
    assert channel.main([str(study), "--by", "fading", "--figures", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| scheme | fading | n | participation |" in out and "planning_gap" in out
    assert "| two_timescale | rician | 1 |" in out and "_std" not in out
    assert (tmp_path / "outcomes_vs_fading.png").stat().st_size > 0


def test_accuracy_figure_of_training_runs(tmp_path):
    """Runs with training give an accuracy-against-slot figure; network-only runs give none."""
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


# --------------------------------------------------------------------------- over seeds, figures

SCHEMES = ["two_timescale", "only_pc", "ideal"]


def _table(seeds: int = 3) -> pd.DataFrame:
    """A hand-made outcomes table: three schemes, CSI error 0 / 0.1 / 0.3, ``seeds`` seeds."""
    rng = np.random.default_rng(0)
    rows = []
    for k, scheme in enumerate(SCHEMES):
        for e2 in (0.0, 0.1, 0.3):
            for seed in range(seeds):
                rows.append(
                    {
                        "run": f"{scheme}-{e2}-{seed}",
                        "scheme": scheme,
                        "seed": seed,
                        "csi_error_variance": e2,
                        "outage_rate": 0.0 if scheme == "ideal" else e2 + 0.05 * rng.random(),
                        "energy_per_device_slot_j": 0.2 + 0.1 * k + 0.02 * rng.random(),
                        "wasted_share": 0.0 if scheme == "ideal" else e2 * rng.random(),
                        "mean_slot_s": 0.8 if scheme != "ideal" else 5.0 + 40 * rng.random(),
                    }
                )
    return pd.DataFrame(rows)


YS = ["outage_rate", "energy_per_device_slot_j", "wasted_share", "mean_slot_s"]


def _bars(ax) -> dict[str, list]:
    """Label -> the (x, low, high) of each error bar of that line in ``ax``."""
    out = {}
    for c in ax.containers:
        segs = c.lines[2][0].get_segments() if c.has_yerr else []
        out[c.get_label()] = [(s[0][0], s[0][1], s[1][1]) for s in segs]
    return out


def test_over_seeds_gives_mean_se_and_t_interval():
    """channel.over_seeds: n, the mean, its standard error and the 95 % Student-t interval of
    every outcome per configuration (no standard deviation columns)."""
    t = channel.over_seeds(_table(), ["scheme", "csi_error_variance"])
    row = t[(t["scheme"] == "only_pc") & (t["csi_error_variance"] == 0.1)].iloc[0]
    v = _table().query("scheme == 'only_pc' and csi_error_variance == 0.1")["outage_rate"]
    se = v.std(ddof=1) / np.sqrt(3)
    assert row["n"] == 3 and row["outage_rate"] == pytest.approx(v.mean())
    assert row["outage_rate_se"] == pytest.approx(se)
    assert row["outage_rate_ci_high"] == pytest.approx(v.mean() + st.t.ppf(0.975, 2) * se)
    assert not [c for c in t.columns if c.endswith("_std")]


def test_outcomes_figure_draws_each_scheme_in_its_colour():
    """Every line of a scheme in every panel has analysis.figures.scheme_color(scheme)."""
    fig = channel.outcomes_figure(_table(), "csi_error_variance", YS)
    seen = set()
    for ax in fig.axes:
        for c in ax.containers:
            scheme = next(s for s in SCHEMES if SCHEME_LABELS[s] == c.get_label())
            assert to_hex(c.lines[0].get_color()) == figures.scheme_color(scheme)
            seen.add(scheme)
    assert seen == set(SCHEMES)


def test_outcomes_figure_error_bars_are_the_95_percent_t_interval():
    """The bars of a line span mean -+ t(0.975, n - 1) s / sqrt(n) over the seeds (scipy), cut
    to the range of the seeds' values."""
    table = _table()
    fig = channel.outcomes_figure(table, "csi_error_variance", ["energy_per_device_slot_j"])
    bars = _bars(fig.axes[0])["Proposed"]
    assert len(bars) == 3
    for x, lo, hi in bars:
        own = (table["scheme"] == "two_timescale") & (table["csi_error_variance"] == x)
        v = table.loc[own, "energy_per_device_slot_j"].to_numpy()
        half = st.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
        want = (max(v.mean() - half, v.min()), min(v.mean() + half, v.max()))
        assert (lo, hi) == pytest.approx(want)


def test_outcomes_figure_without_bars_for_one_seed():
    """With one seed per configuration the figure draws the means and no error bars."""
    fig = channel.outcomes_figure(_table(seeds=1), "csi_error_variance", YS)
    containers = [c for ax in fig.axes for c in ax.containers]
    assert containers and not any(c.has_yerr for c in containers)


def test_outcomes_figure_axis_labels_carry_units():
    """Readable x labels with units (the column's name for an unknown setting), y labels with
    units, and no offset notation on any axis."""
    fig = channel.outcomes_figure(_table(), "csi_error_variance", YS)
    assert {ax.get_xlabel() for ax in fig.axes} == {"CSI error variance (normalised)"}
    ylabels = [ax.get_ylabel() for ax in fig.axes]
    assert ylabels[:3] == [
        "outage rate (fraction of uploads)",
        "energy per device-slot (J)",
        "wasted share of the energy (fraction)",
    ]
    assert ylabels[3].startswith("mean slot length (s)")
    FigureCanvasAgg(fig).draw()
    for ax in fig.axes:
        assert ax.xaxis.get_offset_text().get_text() == ""
        assert ax.yaxis.get_offset_text().get_text() == ""
    assert channel.setting_label("csi_delay_slots") == "CSI delay (slots)"
    assert channel.setting_label("some_new_field") == "some_new_field"


def test_outcomes_figure_mean_slot_on_a_log_axis():
    """The mean slot length is drawn on a logarithmic axis."""
    fig = channel.outcomes_figure(_table(), "csi_error_variance", ["mean_slot_s"])
    assert fig.axes[0].get_yscale() == "log"


def test_accuracy_vs_slot_panels_per_scheme_lines_per_setting():
    """One panel per scheme titled with its label; within a panel the values of the setting
    differ in colour, line style and marker."""
    rows = [
        {
            "run": f"{s}-{e2}-{seed}",
            "scheme": s,
            "seed": seed,
            "slot": slot,
            "csi_error_variance": e2,
            "accuracy": 0.1 + 0.2 * slot - e2 + 0.01 * seed,
        }
        for s in ("two_timescale", "only_pc")
        for e2 in (0.0, 0.1, 0.3)
        for seed in range(2)
        for slot in range(4)
    ]
    fig = channel.accuracy_vs_slot(pd.DataFrame(rows), "csi_error_variance")
    assert [ax.get_title() for ax in fig.axes] == ["Proposed", "Only-PC"]
    for ax in fig.axes:
        looks = {
            (to_hex(ln.get_color()), str(ln.get_linestyle()), ln.get_marker()) for ln in ax.lines
        }
        assert len(ax.lines) == 3
        assert [len({lk[i] for lk in looks}) for i in range(3)] == [3, 3, 3]
