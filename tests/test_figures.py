"""Figures on a small hand-built sweep: labels with units, one line per series, clean refusals."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.figure import Figure

from analysis import figures as F
from analysis import stats, tidy
from test_tidy import write_synthetic_run

# (folder, scheme, V, seed, partition, budget J, energy scale)
SWEEP = [
    ("tt_v10", "two_timescale", 10.0, 0, "iid", 0.35, 0.8),
    ("tt_v100_s0", "two_timescale", 100.0, 0, "iid", 0.35, 1.0),
    ("tt_v100_s1", "two_timescale", 100.0, 1, "iid", 0.35, 1.2),
    ("ideal", "ideal", 100.0, 0, "iid", 0.35, 2.0),
    ("tt_dir", "two_timescale", 100.0, 0, "dirichlet", 0.35, 1.0),
    ("ideal_dir", "ideal", 100.0, 0, "dirichlet", 0.35, 2.0),
    ("tt_b05", "two_timescale", 100.0, 0, "iid", 0.5, 1.5),
]
N_SERIES = 6  # seeds s0 and s1 of V = 100 share a line


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The tidy tables and summary of the hand-built sweep."""
    root = tmp_path_factory.mktemp("figsweep")
    for folder, scheme, v, seed, part, budget, scale in SWEEP:
        write_synthetic_run(
            root / folder, scheme=scheme, V=v, seed=seed, partition=part, budget=budget, scale=scale
        )
    d = tidy.load(root)
    summary = stats.summary(d.device_slots, d.slots, d.evaluations)
    return d, summary


def _labels(fig: Figure) -> list[str]:
    return [ax.get_xlabel() + " | " + ax.get_ylabel() for ax in fig.axes]


def _legend_texts(fig: Figure) -> list[str]:
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [t.get_text() for lg in legends for t in lg.get_texts()]


def test_stable_parameters_one_line_per_series(data):
    """Fig. 1: percent axis and one line per series."""
    d, _ = data
    fig = F.stable_parameters(d.slots)
    (ax,) = fig.axes
    assert ax.get_ylabel() == "stable parameters (%)"
    assert len(ax.get_lines()) == N_SERIES
    assert max(ax.get_lines()[0].get_ydata()) == pytest.approx(60.0)


def test_stable_parameters_refuses_network_only(data):
    """Without stable_fraction values the figure raises InsufficientData."""
    d, _ = data
    with pytest.raises(F.InsufficientData, match="stable_fraction"):
        F.stable_parameters(d.slots.assign(stable_fraction=float("nan")))


def test_impact_of_v_three_panels(data):
    """Impact of V: three panels against V, one errorbar series (the only one with two V)."""
    _, summary = data
    fig = F.impact_of_v(summary)
    assert len(fig.axes) == 3
    assert all(ax.get_xlabel() == "control parameter V" for ax in fig.axes)
    assert "(J per device-slot)" in fig.axes[1].get_ylabel()
    assert "(J)" in fig.axes[2].get_ylabel()
    assert all(len(ax.containers) == 1 for ax in fig.axes)
    assert _legend_texts(fig) == ["Proposed, IID, E_bar 0.35 J"]


def test_impact_of_v_needs_two_values(data):
    """A single V raises InsufficientData naming what was found."""
    _, summary = data
    with pytest.raises(F.InsufficientData, match="two V values"):
        F.impact_of_v(summary[summary["V"] == 100.0])


def test_time_evolution_two_panels(data):
    """Time evolution: energy and cost panels, one line per series, seeds averaged."""
    d, _ = data
    fig = F.time_evolution(d.slots)
    assert len(fig.axes) == 2
    assert [len(ax.get_lines()) for ax in fig.axes] == [N_SERIES, N_SERIES]
    assert fig.axes[0].get_xlabel() == "slot t (communication round)"
    assert "(J per device-slot)" in fig.axes[0].get_ylabel()


def test_time_evolution_averages_seeds(data):
    """The V = 100 IID line ends at the mean of its two seeds' running averages."""
    d, _ = data
    fig = F.time_evolution(d.slots[d.slots["run"].isin(["tt_v100_s0", "tt_v100_s1"])])
    (line,) = fig.axes[0].get_lines()
    assert line.get_ydata()[-1] == pytest.approx(0.2625 * (1.0 + 1.2) / 2)


def test_accuracy_vs_energy_panels_per_partition(data):
    """Accuracy vs energy: an IID and a non-IID panel, with their own series."""
    d, _ = data
    fig = F.accuracy_vs_energy(d.evaluations)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["digits (non-IID (Dir 0.3))", "digits (IID)"]
    assert [len(ax.get_lines()) for ax in fig.axes] == [2, 4]
    assert fig.axes[0].get_xlabel() == "total energy consumption (J, all devices)"
    assert fig.axes[0].get_ylabel() == "test accuracy (%)"


def test_accuracy_vs_latency(data):
    """Accuracy vs latency: x in seconds, a line ends at 4.5 s and 80 %."""
    d, _ = data
    fig = F.accuracy_vs_latency(d.evaluations[d.evaluations["run"] == "ideal"])
    (ax,) = fig.axes
    assert ax.get_xlabel() == "total latency (s)"
    (line,) = ax.get_lines()
    assert (line.get_xdata()[-1], line.get_ydata()[-1]) == pytest.approx((4.5, 80.0))


def test_accuracy_refuses_without_evaluations(data):
    """No evaluations (network-only) raises InsufficientData."""
    d, _ = data
    with pytest.raises(F.InsufficientData, match="no evaluations"):
        F.accuracy_vs_energy(d.evaluations.iloc[0:0])


def test_impact_of_energy_budget(data):
    """Impact of E_bar: two panels; one series plus the E_av = E_bar reference line."""
    _, summary = data
    fig = F.impact_of_energy_budget(summary)
    assert len(fig.axes) == 2
    assert "energy budget E_bar (J" in fig.axes[0].get_xlabel()
    assert [len(ax.containers) for ax in fig.axes] == [1, 1]
    assert "E_av = E_bar" in _legend_texts(fig)


def test_impact_of_energy_budget_needs_two(data):
    """One budget only raises InsufficientData."""
    _, summary = data
    with pytest.raises(F.InsufficientData, match="two budgets"):
        F.impact_of_energy_budget(summary[summary["energy_budget"] == "0.35"])


def test_gamma_queue_and_latency_figures(data):
    """The extra figures draw one line per series with labelled axes."""
    d, _ = data
    g = F.gamma_evolution(d.frames)
    assert g.axes[0].get_xlabel() == "frame k" and len(g.axes[0].get_lines()) == N_SERIES
    q = F.queue_evolution(d.slots)
    assert q.axes[0].get_ylabel() == "mean queue length Q (J)"
    p = F.participation_and_latency(d.slots)
    assert [ax.get_ylabel() for ax in p.axes][0] == "mean slot latency (s)"
    assert all(len(ax.get_lines()) == N_SERIES for ax in p.axes)


def test_series_labels_order_proposed_first(data):
    """Series put the proposed scheme first and name only the fields that vary."""
    d, _ = data
    labels = [lab for lab, _ in F.iter_series(d.slots)]
    assert labels[0].startswith("Proposed")
    assert "Ideal FL, V=100, IID, E_bar 0.35 J" in labels


def test_figures_save_as_png(data, tmp_path):
    """A figure renders to a PNG file without pyplot."""
    d, _ = data
    path = tmp_path / "f.png"
    F.time_evolution(d.slots).savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_single_run_single_series(data):
    """A one-run table makes a one-line figure labelled by its scheme."""
    d, _ = data
    one = d.slots[d.slots["run"] == "ideal"]
    fig = F.queue_evolution(one)
    assert _legend_texts(fig) == ["Ideal FL"]
    assert isinstance(one, pd.DataFrame)


def test_energy_budget_per_device_points_and_reference(data):
    """Per-device budgets: two panels, one marker series per configuration, E_av = E_bar line."""
    d, _ = data
    per_device = stats.energy_per_device(d.device_slots)
    fig = F.energy_budget_per_device(per_device)
    assert len(fig.axes) == 2
    assert "device's energy budget E_bar_n (J" in fig.axes[0].get_xlabel()
    n_series = len(
        list(F.iter_series(per_device, exclude=["energy_budget", "energy_budget_mean_j"]))
    )
    assert len(fig.axes[1].get_lines()) == n_series
    assert len(fig.axes[0].get_lines()) == n_series + 1
    assert sum(len(line.get_xdata()) for line in fig.axes[1].get_lines()) == len(per_device)
    assert "E_av = E_bar" in _legend_texts(fig)


def test_energy_budget_per_device_needs_two_budgets(data):
    """All devices on one budget raises InsufficientData."""
    d, _ = data
    per_device = stats.energy_per_device(d.device_slots)
    one = per_device[per_device["energy_budget_j"] == per_device["energy_budget_j"].iloc[0]]
    with pytest.raises(F.InsufficientData, match="same budget"):
        F.energy_budget_per_device(one)
