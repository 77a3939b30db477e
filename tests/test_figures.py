"""Figures on a small hand-built sweep: labels with units, one line per series, clean refusals,
one colour per scheme, no offset notation, seed bands, panels that say why they are empty."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure

from test_tidy import write_synthetic_run
from wflsim.analysis import figures as F
from wflsim.analysis import stats, tidy
from wflsim.analysis.figures.common import _markevery

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
# Facets by V (V = 10: tt_v10 and both Ideal FL; V = 100: the other four series and both Ideal FL)
LINES_PER_FACET = [3, 5]


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
    """Fig. 1: percent axis, one facet per V, one line per series in each."""
    d, _ = data
    fig = F.stable_parameters(d.slots)
    # (the synthetic runs' stable fractions coincide: the titles' further lines say so)
    assert [ax.get_title().splitlines()[0] for ax in fig.axes] == [
        "Stable parameters, V = 10",
        "Stable parameters, V = 100",
    ]
    assert fig.axes[0].get_ylabel() == "stable parameters (%)"
    assert [len(ax.get_lines()) for ax in fig.axes] == LINES_PER_FACET
    assert max(fig.axes[0].get_lines()[0].get_ydata()) == pytest.approx(60.0)


def test_stable_parameters_refuses_network_only(data):
    """Without stable_fraction values the figure raises InsufficientData."""
    d, _ = data
    with pytest.raises(F.InsufficientData, match="stable_fraction"):
        F.stable_parameters(d.slots.assign(stable_fraction=float("nan")))


def test_impact_of_v_three_panels(data):
    """Impact of V: three panels against V, one errorbar series (the only one with two V) and
    Ideal FL, which ignores V, as one flat line per partition."""
    _, summary = data
    fig = F.impact_of_v(summary)
    assert len(fig.axes) == 3
    assert all(ax.get_xlabel() == "control parameter V (J^2)" for ax in fig.axes)
    assert "(J per device-slot)" in fig.axes[1].get_ylabel()
    assert "(J)" in fig.axes[2].get_ylabel()
    assert all(len(ax.containers) == 1 for ax in fig.axes)
    assert _legend_texts(fig) == [
        "Proposed, IID, E_bar 0.35 J",
        "Ideal FL, IID, E_bar 0.35 J (ignores V)",
        "Ideal FL, non-IID (Dir 0.3), E_bar 0.35 J (ignores V)",
    ]


def test_impact_of_v_needs_two_values(data):
    """A single V raises InsufficientData naming what was found."""
    _, summary = data
    with pytest.raises(F.InsufficientData, match="two V values"):
        F.impact_of_v(summary[summary["V"] == 100.0])


def test_time_evolution_two_panels(data):
    """Time evolution: energy and cost rows, one column per V, one line per series there."""
    d, _ = data
    fig = F.time_evolution(d.slots)
    assert len(fig.axes) == 4
    # Ideal FL runs only at V = 100: the cost depends on V, so it is not drawn at V = 10
    assert [len(ax.get_lines()) for ax in fig.axes] == [1, 5, 1, 5]
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
    titles = [ax.get_title().splitlines()[0] for ax in fig.axes]
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


def test_accuracy_late_draws_the_second_half_on_a_zoomed_axis(data):
    """Accuracy late in training: an energy and a latency panel per partition, with only the
    evaluations from half of the slots on (slot 3 of 0-3) and an accuracy axis not held at 0."""
    d, _ = data
    fig = F.accuracy_late(d.evaluations)
    titles = [ax.get_title().splitlines()[0] for ax in fig.axes]  # then coincidence notes
    assert titles == ["digits (non-IID (Dir 0.3))"] * 2 + ["digits (IID)"] * 2
    assert [ax.get_xlabel() for ax in fig.axes[:2]] == [
        "total energy consumption (J, all devices)",
        "total latency (s)",
    ]
    ideal = F.accuracy_late(d.evaluations[d.evaluations["run"] == "ideal"])
    energy, latency = (
        [ln for ln in ax.get_lines() if ln.get_label() == "Ideal FL"] for ax in ideal.axes
    )
    assert (energy[0].get_xdata().tolist(), energy[0].get_ydata().tolist()) == ([4.2], [80.0])
    assert (latency[0].get_xdata().tolist(), latency[0].get_ydata().tolist()) == ([4.5], [80.0])
    assert ideal.axes[0].get_ylim()[0] > 50.0


def test_accuracy_vs_energy_starts_at_the_evaluation_before_training(data):
    """The full-length figure keeps the evaluation before training (slot -1: 0 J, 10 %)."""
    d, _ = data
    fig = F.accuracy_vs_energy(d.evaluations[d.evaluations["run"] == "ideal"])
    (line,) = fig.axes[0].get_lines()
    assert (line.get_xdata()[0], line.get_ydata()[0]) == pytest.approx((0.0, 10.0))


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
    assert g.axes[0].get_xlabel() == "frame k"
    assert [len(ax.get_lines()) for ax in g.axes] == LINES_PER_FACET
    q = F.queue_evolution(d.slots)
    assert q.axes[0].get_ylabel().startswith("mean queue length Q (J)")
    p = F.participation_and_latency(d.slots)
    assert [ax.get_ylabel() for ax in p.axes][0] == "share of slots (ECDF)"
    assert [len(ax.get_lines()) for ax in p.axes] == LINES_PER_FACET * 3


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


def test_energy_budget_per_device_one_row_per_scheme_and_v(data):
    """Per-device budgets: a row (energy, queue) per scheme and V (Ideal FL, which ignores V,
    once), every device and run drawn once, the E_av = E_bar line in each energy panel."""
    d, _ = data
    per_device = stats.energy_per_device(d.device_slots)
    fig = F.energy_budget_per_device(per_device)
    titles = [ax.get_title().splitlines()[0] for ax in fig.axes]
    assert titles == [
        "Proposed, V = 10: energy",
        "Proposed, V = 10: queue",
        "Proposed, V = 100: energy",
        "Proposed, V = 100: queue",
        "Ideal FL: energy",
        "Ideal FL: queue",
    ]
    queue_axes, energy_axes = fig.axes[1::2], fig.axes[0::2]
    points = [ln for ax in queue_axes for ln in ax.get_lines()]
    assert sum(len(line.get_xdata()) for line in points) == len(per_device)
    for ax in energy_axes:
        assert [ln.get_label() for ln in ax.get_lines()][-1] == "E_av = E_bar"
    assert all("device's budget E_bar_n (J" in ax.get_xlabel() for ax in fig.axes)
    assert "E_av = E_bar" in _legend_texts(fig)


def test_energy_budget_per_device_tells_other_series_apart_by_shade(data):
    """Within a scheme's panel the other series (here the partition) are shades of the
    scheme's colour, the first the colour itself, the next lighter."""
    d, _ = data
    per_device = stats.energy_per_device(d.device_slots)
    fig = F.energy_budget_per_device(per_device)
    v100 = next(ax for ax in fig.axes if ax.get_title() == "Proposed, V = 100: queue")
    colours = [to_hex(ln.get_color()) for ln in v100.get_lines()]
    assert len(colours) == 2  # IID, non-IID (the budget is the x axis)
    assert colours[0] == F.SCHEME_COLORS["two_timescale"]
    assert colours[1] == F.shade(F.SCHEME_COLORS["two_timescale"], 1, 2) != colours[0]
    assert F.shade("#000000", 1, 2) == "#808080"  # halfway to white for the last of two


def test_energy_budget_per_device_needs_two_budgets(data):
    """All devices on one budget raises InsufficientData."""
    d, _ = data
    per_device = stats.energy_per_device(d.device_slots)
    one = per_device[per_device["energy_budget_j"] == per_device["energy_budget_j"].iloc[0]]
    with pytest.raises(F.InsufficientData, match="same budget"):
        F.energy_budget_per_device(one)


# --------------------------------------------------------------------------- conventions


def _scheme_colours(fig: Figure) -> dict[str, str]:
    """Legend label -> colour (hex) of its line or error bars, over the figure's legends."""
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    out = {}
    for lg in legends:
        for handle, text in zip(lg.legend_handles, lg.get_texts(), strict=True):
            line = handle.lines[0] if isinstance(handle, ErrorbarContainer) else handle
            out[text.get_text()] = to_hex(line.get_color())
    return out


def _with_ideal_at_v10(table: pd.DataFrame) -> pd.DataFrame:
    """The table plus a copy of the IID Ideal FL run at V = 10 (the same run: it ignores V)."""
    extra = table[table["run"] == "ideal"].assign(run="ideal_v10", V=10.0)
    return pd.concat([table, extra], ignore_index=True)


def _all_figures(d, summary) -> list[Figure]:
    per_device = stats.energy_per_device(d.device_slots)
    return [
        F.stable_parameters(d.slots),
        F.impact_of_v(summary),
        F.time_evolution(d.slots),
        F.accuracy_vs_energy(d.evaluations),
        F.accuracy_vs_latency(d.evaluations),
        F.accuracy_late(d.evaluations),
        F.impact_of_energy_budget(summary),
        F.energy_budget_per_device(per_device),
        F.gamma_evolution(d.frames),
        F.queue_evolution(d.slots),
        F.participation_and_latency(d.slots),
    ]


def test_scheme_colour_is_the_same_in_every_figure(data):
    """A scheme's lines have its SCHEME_COLORS colour in the time-evolution, queue and V figures
    (its series in other settings, lighter shades of it)."""
    d, summary = data
    figs = [F.time_evolution(d.slots), F.queue_evolution(d.slots), F.impact_of_v(summary)]
    for fig in figs:
        colours = _scheme_colours(fig)
        for scheme, name in (("two_timescale", "Proposed"), ("ideal", "Ideal FL")):
            mine = [c for lab, c in colours.items() if lab.startswith(name)]
            base = F.SCHEME_COLORS[scheme]
            assert base in mine
            assert set(mine) <= {F.shade(base, k, len(mine)) for k in range(len(mine))}


def test_every_registered_scheme_has_its_own_colour():
    """SCHEME_COLORS covers every registered scheme, with distinct colours."""
    from wflsim.sim.registry import SCHEMES

    assert set(SCHEMES) <= set(F.SCHEME_COLORS)
    assert len(set(F.SCHEME_COLORS.values())) == len(F.SCHEME_COLORS)


@pytest.mark.slow  # every figure drawn: about 10 s
def test_no_axis_uses_an_offset_text(data):
    """No axis of any figure shows an offset, even for latencies equal to 1e-12."""
    d, summary = data
    flat = d.slots.assign(
        slot_duration_s=0.8 + 1e-12 * np.arange(len(d.slots)),
        participation=0.8 + 1e-13 * np.arange(len(d.slots)),
    )
    figs = _all_figures(d, summary) + [F.participation_and_latency(flat)]
    for fig in figs:
        FigureCanvasAgg(fig).draw()
        for ax in fig.axes:
            assert ax.xaxis.get_offset_text().get_text() == ""
            assert ax.yaxis.get_offset_text().get_text() == ""


def test_outage_row_without_outages_is_left_out_and_said(data):
    """Without a single outage there is no outage panel (two rows per V, not three); the
    title and the notes say why."""
    d, _ = data
    fig = F.participation_and_latency(d.slots.assign(outage_rate=0.0))
    assert not [ax for ax in fig.axes if ax.get_title().startswith("Outage rate")]
    assert len(fig.axes) == 2 * 2  # latency and participation, V = 10 and 100
    assert all(ax.get_lines() for ax in fig.axes)
    said = "Outage rate: not drawn, no outage in any run"
    assert said in fig.get_suptitle().replace("\n", " ")
    assert any(n.startswith(said) for n in fig.notes)
    with_outages = F.participation_and_latency(d.slots.assign(outage_rate=0.25))
    assert len(with_outages.axes) == 3 * 2


def test_a_figure_with_nothing_to_draw_raises():
    """A queue figure whose runs logged no queue has no panel to draw: InsufficientData."""
    slots = _seed_slots([1.0, 1.1, 1.05]).assign(mean_queue_j=np.nan)
    with pytest.raises(F.InsufficientData, match="no queue logged"):
        F.queue_evolution(slots)


def _seed_slots(levels: list[float], jump: float = 0.0, at: int = 30) -> pd.DataFrame:
    """Ideal FL's queue over 40 slots, one run per seed: ``level * (1 + t / 10)``, plus
    ``jump`` from slot ``at`` on for the last seed."""
    rows = []
    for seed, level in enumerate(levels):
        for t in range(40):
            q = level * (1 + t / 10) + (jump if seed == len(levels) - 1 and t >= at else 0.0)
            rows.append(
                {"run": f"ideal_s{seed}", "scheme": "ideal", "V": 100.0, "seed": seed}
                | {"slot": t, "mean_queue_j": q}
            )
    return pd.DataFrame(rows)


def test_outlier_seed_is_drawn_dashed_and_named():
    """Of five seeds, seed 4's queue jumps by 30 J at slot 30: it is drawn on its own (dashed,
    named "seed 4" at its end and in the legend), the notes say where it jumps, and the line is
    still the mean over all five seeds."""
    slots = _seed_slots([1.0, 1.1, 1.05, 0.95, 1.02], jump=30.0)
    fig = F.queue_evolution(slots)
    (out,) = fig.outliers
    assert (out.label, out.name, out.step_at) == ("Ideal FL", "seed 4", 30.0)
    assert out.line.get_linestyle() == "--"
    assert "Ideal FL: seed 4 (outlier)" in _legend_texts(fig)
    assert any(t.get_text() == "seed 4" for t in fig.axes[0].texts)
    assert any("seed 4 is an outlier seed" in n and "slot 30" in n for n in fig.notes)
    mean = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "Ideal FL")
    last = slots[slots["slot"] == 39]["mean_queue_j"].mean()
    assert mean.get_ydata()[-1] == pytest.approx(last)


def test_outlier_too_close_to_see_is_not_marked():
    """Seeds 1.0, 1.001, 1.0005, 0.9995 and 1.01 times one queue: by the rule the last is an
    outlier, but its line stays within a tenth of the panel's height of the others: not
    marked."""
    from wflsim.analysis.stats import outlier_mask

    slots = _seed_slots([1.0, 1.001, 1.0005, 0.9995, 1.01])
    means = slots.groupby("run")["mean_queue_j"].mean().to_numpy()
    assert outlier_mask(means).tolist() == [False, False, False, False, True]
    fig = F.queue_evolution(slots)
    assert fig.outliers == []
    assert [ln.get_label() for ln in fig.axes[0].get_lines()] == ["Ideal FL"]


def test_v_free_scheme_is_drawn_once(data):
    """Ideal FL run at two V is one series (one line per facet), not one per V, and its runs
    at the two V are not pooled as seeds."""
    d, summary = data
    fig = F.queue_evolution(_with_ideal_at_v10(d.slots))
    assert [t for t in _legend_texts(fig) if t.startswith("Ideal FL")] == [
        "Ideal FL, IID, E_bar 0.35 J",
        "Ideal FL, non-IID (Dir 0.3), E_bar 0.35 J",
    ]
    v = F.impact_of_v(_with_ideal_at_v10(summary))
    assert sum(t.startswith("Ideal FL, IID") for t in _legend_texts(v)) == 1
    assert not any(isinstance(c, PolyCollection) for c in v.axes[0].collections)


def test_several_seeds_get_a_95_percent_band(data):
    """Two seeds: the mean line and a band; one seed: no band. With two seeds the Student-t
    interval (t = 12.7) is wider than the two values, so the band is cut to their range."""
    d, _ = data
    two = d.slots[d.slots["run"].isin(["tt_v100_s0", "tt_v100_s1"])]
    fig = F.queue_evolution(two)
    (ax,) = fig.axes
    (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    one = F.queue_evolution(two[two["run"] == "tt_v100_s0"])
    assert not [c for c in one.axes[0].collections if isinstance(c, PolyCollection)]
    q = two.pivot(index="slot", columns="run", values="mean_queue_j").to_numpy()
    mean, se = q.mean(axis=1), q.std(axis=1, ddof=1) / np.sqrt(2)
    assert np.nanmax(mean + 12.706204736 * se) > np.nanmax(q)  # t_{0.975, 1}: beyond the seeds
    ys = band.get_paths()[0].vertices[:, 1]
    assert np.nanmax(ys) == pytest.approx(np.nanmax(q))
    assert np.nanmin(ys) == pytest.approx(np.nanmin(q))


def test_dwarfed_series_get_a_log_axis(data):
    """When one scheme's queue is 100 times the others', the queue axis is logarithmic."""
    d, _ = data
    big = d.slots.assign(
        mean_queue_j=np.where(d.slots["scheme"] == "ideal", 100.0, 1.0) * (1 + d.slots["slot"])
    )
    fig = F.queue_evolution(big)
    assert {ax.get_yscale() for ax in fig.axes} <= {"log", "symlog"}
    assert "log" in fig.axes[0].get_ylabel()


def test_long_series_labels_go_below_and_leave_the_panel_its_width(data):
    """Series with 100-character variant labels get a legend below the panel, and the panel
    keeps most of the figure's width (it used to be squeezed to nothing by a side legend)."""
    d, _ = data
    ev = d.evaluations.copy()
    long = "availability.model=always, compute.jitter.model=background_load, uplink.mode=dedicated"
    ev["variant"] = np.where(ev["run"] == "ideal", long + ", k=1", long + ", k=30")
    fig = F.accuracy_vs_latency(ev[ev["run"].isin(["ideal", "tt_v100_s0"])])
    fig.canvas.draw()
    (legend,) = fig.legends
    assert legend.get_window_extent().y1 < fig.axes[0].get_window_extent().y0
    assert fig.axes[0].get_position().width > 0.6


# ------------------------------------------------------------- overlapping lines, scales, units


def _relabelled(table: pd.DataFrame, run: str, scheme: str, factor: float = 1.0) -> pd.DataFrame:
    """``table`` with a copy of ``run`` as a run of ``scheme`` (its queue scaled by ``factor``)."""
    copy = table[table["run"] == run].assign(run=run + "_" + scheme, scheme=scheme)
    copy["mean_queue_j"] = factor * copy["mean_queue_j"]
    return pd.concat([table[table["run"] == run], copy], ignore_index=True)


def test_coinciding_lines_are_noted_and_both_stay_visible(data):
    """Only-PC's line equal to Proposed's: the figure says "Only-PC coincides with Proposed",
    Proposed is drawn on top, Only-PC wider beneath it with its own marker, and the legend
    shows Only-PC at its usual width."""
    d, _ = data
    fig = F.queue_evolution(_relabelled(d.slots, "tt_v100_s0", "only_pc"))
    (ax,) = fig.axes
    assert fig.notes == ["Only-PC coincides with Proposed"]
    assert "Only-PC coincides with Proposed" in ax.get_title()
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    top, under = lines["Proposed"], lines["Only-PC"]
    assert top.get_zorder() > under.get_zorder()
    assert under.get_linewidth() > top.get_linewidth()
    assert (top.get_marker(), under.get_marker()) == ("o", "s")
    legend = ax.get_legend() or fig.legends[0]
    widths = {
        t.get_text(): h.get_linewidth()
        for h, t in zip(legend.legend_handles, legend.get_texts(), strict=True)
    }
    assert widths["Only-PC"] == widths["Proposed"]


def test_many_coinciding_lines_leave_the_panel_its_room():
    """Eleven equal lines: the panel's title says how many coincide in one short note (a list of
    them would squeeze the panel to nothing), and the figure's notes name every one of them."""
    from wflsim.analysis.figures.bands import _note_coinciding
    from wflsim.analysis.figures.common import DataFigure

    fig = DataFigure(figsize=(4.0, 3.4), layout="constrained")
    ax = fig.subplots()
    ax.set_title("Participation")
    x = np.arange(10.0)
    drawn = [
        (f"a long series label number {i}", ax.plot(x, np.ones(10), zorder=3 + i)[0])
        for i in range(11)
    ]
    notes = _note_coinciding(ax, drawn)
    assert ax.get_title().splitlines()[0] == "Participation"
    assert len(ax.get_title().splitlines()) <= 1 + 3 and "10 lines coincide" in ax.get_title()
    assert fig.notes == notes and all(f"number {i}" in " ".join(notes) for i in range(10))


def test_distinct_lines_are_not_noted(data):
    """Only-PC's queue 1.5 times Proposed's: no note, both lines at the same width."""
    d, _ = data
    fig = F.queue_evolution(_relabelled(d.slots, "tt_v100_s0", "only_pc", factor=1.5))
    (ax,) = fig.axes
    assert fig.notes == []
    assert "coincides" not in ax.get_title()
    assert len({ln.get_linewidth() for ln in ax.get_lines()}) == 1


def test_markers_of_a_long_line_are_shifted_per_scheme():
    """On a line of 80 points each scheme marks every 10th point from its own offset, so the
    markers of coinciding lines do not sit on one another."""
    starts = {s: _markevery(80, s)[0] for s in ("two_timescale", "only_pf", "only_pc", "ideal")}
    assert starts == {"two_timescale": 0, "only_pf": 2, "only_pc": 5, "ideal": 7}
    assert _markevery(80, "ideal")[1] == 10
    assert _markevery(12, "ideal") == 1  # short: every point


def test_every_registered_scheme_has_its_own_marker():
    """SCHEME_MARKERS covers every registered scheme, with distinct markers."""
    from wflsim.sim.registry import SCHEMES

    assert set(SCHEMES) <= set(F.SCHEME_MARKERS)
    assert len(set(F.SCHEME_MARKERS.values())) == len(F.SCHEME_MARKERS)


def _queue_table(values_by_run: dict[tuple[str, str], float], slots: int = 5) -> pd.DataFrame:
    """A slots table: runs ``(scheme, run)`` with mean_queue_j = value * (1 + slot)."""
    return pd.DataFrame(
        [
            {"run": run, "scheme": scheme, "slot": t, "mean_queue_j": v * (1 + t)}
            for (scheme, run), v in values_by_run.items()
            for t in range(slots)
        ]
    )


def test_band_on_a_log_axis_is_geometric_and_within_the_seeds():
    """Proposed's three seeds at 1, 10, 100 (x (1 + t)) beside Ideal FL at 1e4: a log axis; the
    line is the geometric mean 10 (1 + t) and the band lies within [1, 100] (1 + t), although
    the linear t interval of the seeds reaches below 0."""
    table = _queue_table(
        {("two_timescale", "a"): 1.0, ("two_timescale", "b"): 10.0, ("two_timescale", "c"): 100.0}
        | {("ideal", "i"): 1e4}
    )
    fig = F.queue_evolution(table)
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "Proposed")
    t = np.arange(5.0)
    assert line.get_ydata() == pytest.approx(10.0 * (1 + t))
    (iv,) = fig.intervals
    assert np.all(iv.low >= (1 + t) * (1 - 1e-12)) and np.all(
        iv.high <= 100 * (1 + t) * (1 + 1e-12)
    )
    assert all(iv.low < line.get_ydata()) and all(iv.high > line.get_ydata())
    assert 37.0 - 4.303 * np.std([1.0, 10.0, 100.0], ddof=1) / np.sqrt(3) < 0  # linear: < 0


def test_per_device_panels_share_y_and_go_log_when_a_scheme_is_ten_times_another(data):
    """Energy per device: the rows (schemes and V) of a column share one y axis; Ideal FL's
    energy 100 times the proposed scheme's makes the energy column logarithmic, the queue
    column stays linear."""
    d, _ = data
    per_device = stats.energy_per_device(d.device_slots)
    linear = F.energy_budget_per_device(per_device)
    assert len({ax.get_ylim() for ax in linear.axes[0::2]}) == 1
    assert {ax.get_yscale() for ax in linear.axes} == {"linear"}
    big = per_device.assign(
        mean_energy_j=np.where(per_device["scheme"] == "ideal", 100.0, 1.0)
        * per_device["mean_energy_j"]
    )
    fig = F.energy_budget_per_device(big)
    energy, queue = fig.axes[0::2], fig.axes[1::2]
    assert {ax.get_yscale() for ax in energy} == {"log"}
    assert {ax.get_yscale() for ax in queue} == {"linear"}
    assert len({ax.get_ylim() for ax in energy}) == 1
    assert "(log scale)" in energy[0].get_ylabel()


def _trace_units() -> dict[str, str]:
    """Column -> unit, read from docs/trace.md."""
    from conftest import REPO

    doc = (REPO / "docs" / "trace.md").read_text(encoding="utf-8")
    return {
        name: unit.strip()
        for name, _, unit in re.findall(r"^\| `([a-z_0-9]+)` \| ([^|]+) \| ([^|]+) \|", doc, re.M)
    }


def _label_unit(label: str) -> str:
    """The unit an axis label gives: its first line's last parenthesised text, up to a comma
    or " per" ("(J per device-slot)" -> "J", "(J, all devices)" -> "J")."""
    text = " ".join(line for line in label.splitlines() if "log" not in line)
    unit = re.findall(r"\(([^()]*)\)\s*$", text)[-1]
    return re.split(r",| per ", unit)[0].strip()


def test_axis_units_match_the_trace_doc(data):
    """Every axis drawn from a trace column gives the column's unit of docs/trace.md (a
    fraction shown as %, "-" as dimensionless); V is in the cost's unit."""
    d, summary = data
    units = _trace_units()
    shown = {"fraction": "%", "-": "dimensionless", "step": "server steps"}
    te = F.time_evolution(d.slots)
    iv = F.impact_of_v(summary)
    acc = F.accuracy_vs_energy(d.evaluations)
    lat = F.accuracy_vs_latency(d.evaluations)
    part = F.participation_and_latency(d.slots)
    checks = [
        (te.axes[0].get_ylabel(), "energy_j"),
        (te.axes[2].get_ylabel(), "cost"),
        (F.queue_evolution(d.slots).axes[0].get_ylabel(), "queue_j"),
        (iv.axes[0].get_ylabel(), "conv_error"),
        (iv.axes[1].get_ylabel(), "energy_j"),
        (iv.axes[2].get_ylabel(), "queue_j"),
        (iv.axes[0].get_xlabel(), "cost"),  # V: z = V X + Q E with X dimensionless
        (acc.axes[0].get_xlabel(), "energy_j"),
        (acc.axes[0].get_ylabel(), "accuracy"),
        (lat.axes[0].get_xlabel(), "slot_duration_s"),
        (part.axes[0].get_xlabel(), "slot_duration_s"),
        (F.gamma_evolution(d.frames).axes[0].get_ylabel(), "gamma"),
        (F.stable_parameters(d.slots).axes[0].get_ylabel(), "stable_fraction"),
    ]
    assert units["cost"] == "J^2"
    for label, column in checks:
        assert _label_unit(label) == shown.get(units[column], units[column]), (label, column)


def test_save_study_figure_titles_and_writes_into_a_new_folder(tmp_path):
    """save_study_figure puts the title above the panels and writes the PNG, making its folder."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    out = F.save_study_figure(fig, tmp_path / "new" / "fig.png", "a title", fontsize=9)
    assert out == tmp_path / "new" / "fig.png" and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert fig.get_suptitle() == "a title"
    assert ax.get_position().y1 <= 0.95
    plt.close(fig)


def test_a_figure_shows_as_a_png_in_a_notebook():
    """A DataFigure's PNG repr (what IPython displays) is a PNG of figsize x dpi pixels."""
    import struct

    from wflsim.analysis.figures.common import DataFigure

    fig = DataFigure(figsize=(4.0, 3.0), dpi=50)
    fig.subplots().plot([0.0, 1.0], [1.0, 0.0])
    png = fig._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (200, 150)


# ------------------------------------------------------------ readability (issue 47, item 4)

STRATEGIES = ["FedAdam", "FedAvg", "SCAFFOLD"]


def _strategy_slots(schemes: list[str], latency_s: float = 0.1) -> pd.DataFrame:
    """Slots of one run per scheme, strategy (the ``variant``) and seed 0-2: 4 frames of 5
    slots, every slot lasting ``latency_s``, no outage, the queue a line per run."""
    rows = []
    for i, scheme in enumerate(schemes):
        for j, strategy in enumerate(STRATEGIES):
            for seed in range(3):
                for t in range(20):
                    rows.append(
                        {"run": f"{scheme}_{strategy}_{seed}", "scheme": scheme, "V": 100.0}
                        | {"seed": seed, "variant": strategy, "slot": t, "frame": t // 5}
                        | {"slot_duration_s": latency_s, "participation": 0.9, "outage_rate": 0.0}
                        | {"mean_queue_j": (1 + i + 0.3 * j + 0.01 * seed) * (1 + t / 10)}
                    )
    return pd.DataFrame(rows)


def _per_device_strategies(budgets: np.ndarray) -> pd.DataFrame:
    """Per device and run: Proposed under three strategies, 3 seeds, devices on ``budgets``;
    FedAvg's points are FedAdam's (the same energies), SCAFFOLD's 10 % higher."""
    rows = []
    for strategy in STRATEGIES:
        factor = 1.1 if strategy == "SCAFFOLD" else 1.0
        for seed in range(3):
            for n, b in enumerate(budgets):
                energy = factor * b * (0.8 + 0.01 * seed + 0.001 * n)
                rows.append(
                    {"run": f"{strategy}_{seed}", "scheme": "two_timescale", "seed": seed}
                    | {"variant": strategy, "device": n, "energy_budget_j": float(b)}
                    | {"mean_energy_j": energy, "mean_queue_j": 0.5 * energy}
                )
    return pd.DataFrame(rows)


def _boxes_overlap(boxes: list) -> bool:
    """Whether any two of ``boxes`` (display bounding boxes) intersect, by their corners."""
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1:
                return True
    return False


def test_tick_labels_do_not_overlap():
    """Budgets of 0.030-0.045 J in a narrow per-device panel: the rendered tick labels of every
    axis lie apart (they used to run together: "0.03000.032500.0350")."""
    fig = F.energy_budget_per_device(_per_device_strategies(np.linspace(0.03, 0.045, 30)))
    FigureCanvasAgg(fig).draw()
    for ax in fig.axes:
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            x0, x1 = ax.get_window_extent().x0 - 60, ax.get_window_extent().x1 + 60
            boxes = [
                t.get_window_extent()
                for t in labels
                if t.get_visible() and t.get_text() and x0 <= t.get_window_extent().x0 <= x1
            ]
            boxes = [b for b in boxes if b.width > 0]
            assert len(boxes) >= 2
            assert not _boxes_overlap(boxes), [t.get_text() for t in labels]


def test_legend_does_not_overlap_the_title():
    """Three strategies' long labels and a title of three lines (the outage row left out): the
    figure legend's box and the title's box do not meet."""
    fig = F.participation_and_latency(_strategy_slots(["two_timescale"]))
    FigureCanvasAgg(fig).draw()
    title = fig._suptitle.get_window_extent()  # noqa: SLF001
    assert "no outage in any run" in fig._suptitle.get_text()  # noqa: SLF001
    assert fig.legends
    for legend in fig.legends:
        assert not _boxes_overlap([title, legend.get_window_extent()])


def _legend_styles(fig: Figure) -> dict[str, tuple[str, str, str]]:
    """Legend label -> (colour, line style, marker) of its handle."""
    (legend,) = list(fig.legends) or [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return {
        t.get_text(): (to_hex(h.get_color()), str(h.get_linestyle()), str(h.get_marker()))
        for h, t in zip(legend.legend_handles, legend.get_texts(), strict=True)
    }


def test_series_of_different_strategies_get_distinct_styles():
    """Two schemes under three strategies: six series, six different looks; each keeps its
    scheme's hue (the first strategy its very colour, the others lighter shades of it) and the
    legend's title says how they are told apart."""
    fig = F.queue_evolution(_strategy_slots(["two_timescale", "ideal"]))
    styles = _legend_styles(fig)
    assert len(styles) == 6
    assert len(set(styles.values())) == 6
    for scheme, name in (("two_timescale", "Proposed"), ("ideal", "Ideal FL")):
        colours = [styles[f"{name}, {s}"][0] for s in STRATEGIES]
        base = F.SCHEME_COLORS[scheme]
        assert colours == [F.shade(base, k, 3) for k in range(3)]
        assert len(set(colours)) == 3
    (legend,) = fig.legends or [fig.axes[0].get_legend()]
    assert "shade" in legend.get_title().get_text()


def test_per_device_strategies_get_distinct_colours_and_markers():
    """One scheme under three strategies in the per-device figure: each strategy its own
    colour and marker (they used to share the scheme's colour, FedAvg's hiding FedAdam's), the
    markers hollow, and the panel says FedAvg's points coincide with FedAdam's."""
    fig = F.energy_budget_per_device(_per_device_strategies(np.linspace(0.03, 0.045, 10)))
    ax = fig.axes[0]
    points = [ln for ln in ax.get_lines() if ln.get_linestyle() == "None"]
    assert len(points) == 3
    assert len({to_hex(ln.get_color()) for ln in points}) == 3
    assert len({ln.get_marker() for ln in points}) == 3
    assert all(ln.get_markerfacecolor() == "none" for ln in points)
    assert "Proposed, FedAvg coincides with Proposed, FedAdam" in ax.get_title().replace("\n", " ")


def test_no_outlier_marking_below_the_seed_minimum():
    """Three seeds, the last jumping by 30 J at slot 30 (marked with five seeds): below the
    rule's five seeds no seed is named or drawn dashed."""
    fig = F.queue_evolution(_seed_slots([1.0, 1.1, 1.05], jump=30.0))
    assert fig.outliers == []
    assert [ln.get_label() for ln in fig.axes[0].get_lines()] == ["Ideal FL"]
    assert not any("outlier" in n for n in fig.notes)


def test_latency_is_an_ecdf_where_per_frame_means_coincide():
    """Every slot of every strategy lasts 0.1 s: the latency panel is each series' ECDF (0
    below 0.1 s, 1 from it on), not per-frame markers on one spot, and says they coincide."""
    fig = F.participation_and_latency(_strategy_slots(["two_timescale"]))
    ax = fig.axes[0]
    assert ax.get_xlabel() == "slot latency (s)"
    assert ax.get_ylabel() == "share of slots (ECDF)"
    lines = ax.get_lines()
    assert len(lines) == 3
    for line in lines:
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        assert line.get_drawstyle() == "steps-post"
        assert line.get_marker() in ("None", "", None)
        assert (y[x < 0.1] == 0).all() and (y[x >= 0.1] == 1).all()
    assert "coincide" in ax.get_title()


def test_latency_ecdf_is_the_share_of_slots_at_or_below():
    """Slots of 0.1, 0.2, 0.2 and 0.4 s (one run): the ECDF is 0.25 at 0.1 s, 0.75 at 0.2 s and
    0.3 s, 1 at 0.4 s."""
    slots = _strategy_slots(["ideal"]).query("variant == 'FedAvg' and seed == 0").head(4)
    slots = slots.assign(slot_duration_s=[0.1, 0.2, 0.2, 0.4], frame=0)
    fig = F.participation_and_latency(slots.drop(columns="variant"))
    (line,) = fig.axes[0].get_lines()
    x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    at = dict(zip(np.round(x, 9), y, strict=True))
    assert (at[0.1], at[0.2], at[0.4]) == (0.25, 0.75, 1.0)
