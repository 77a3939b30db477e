"""The test-accuracy figures: accuracy against the total energy and the total
latency (one panel per dataset and partition), and accuracy in the second half of training.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from .bands import (
    _draw_band,
    _legend,
    _note_coinciding,
    _per_run,
)
from .common import (
    _DATASETS,
    InsufficientData,
    _figure,
    _finish,
    _mean_by,
    _need,
    _one_v,
    _ranks,
    _Series,
    _series,
    _style,
    series_colors,
    shaded_legend_title,
)


def _panel_keys(df: pd.DataFrame) -> list[tuple[str, str]]:
    keys = df[["dataset", "partition"]].drop_duplicates().itertuples(index=False, name=None)
    # The paper's order: non-IID before IID, datasets alphabetically.
    return sorted(keys, key=lambda k: (str(k[0]), not str(k[1]).startswith("non-IID"), str(k[1])))


def _accuracy_data(evaluations: pd.DataFrame, xs: Sequence[str], what: str) -> pd.DataFrame:
    """The evaluations an accuracy figure draws (one ``V``; rows with ``accuracy`` and every
    column of ``xs``).

    Raises:
        InsufficientData: no learning runs with two evaluations or more.
    """
    if evaluations.empty:
        raise InsufficientData(f"{what}: no evaluations (network-only runs have none)")
    _need(evaluations, ["run", "slot", "accuracy", *xs, "dataset", "partition"], what)
    data = _one_v(evaluations.dropna(subset=["accuracy", *xs]))
    evaluations_per_run = data.groupby("run")["slot"].count()
    if data.empty or evaluations_per_run.max() < 2:
        raise InsufficientData(f"{what}: needs runs with two evaluations or more (learning runs)")
    return data


def _accuracy_panel(
    ax: Axes,
    series: Sequence[_Series],
    ranks: dict[tuple, int],
    key: tuple[str, str],
    x: str,
    xlabel: str,
    first_slot: float | None = None,
    colors: dict[str, str] | None = None,
) -> None:
    """One panel of test accuracy (%) against ``x`` for the runs of one (dataset, partition):
    per series, x is the mean over seeds at each evaluation, y the mean and 95 % band; only the
    evaluations from slot ``first_slot`` on (``None``: all, the one before training at slot -1
    too); ``colors``: series label -> colour where not the scheme's (:func:`series_colors`)."""
    dataset, partition = key
    colors = colors or {}
    drawn: list[tuple[str, Line2D | None]] = []
    for s in series:
        rows = s.rows
        sub = rows[(rows["dataset"] == dataset) & (rows["partition"] == partition)]
        if first_slot is not None:
            sub = sub[sub["slot"] >= first_slot]
        if sub.empty:
            continue
        xs = _mean_by(sub, "slot", [x]).set_index("slot")[x]
        per_run = _per_run(sub, "slot", "accuracy", 100.0)
        style = _style(ranks[s.rest], s.scheme, color=colors.get(s.label))
        line = _draw_band(ax, per_run, "slot", "accuracy", s.label, style, s.scheme, x_values=xs)
        drawn.append((s.label, line))
    ax.set_title(f"{_DATASETS.get(str(dataset), dataset)} ({partition})", fontsize="medium")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test accuracy (%)")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # large totals: no overlapping labels
    ax.grid(alpha=0.3)
    _note_coinciding(ax, drawn)


def _accuracy_vs(evaluations: pd.DataFrame, x: str, xlabel: str, what: str, title: str) -> Figure:
    data = _accuracy_data(evaluations, [x], what)
    panels = _panel_keys(data)
    # Series over all panels, so that a scheme keeps its label and style from panel to panel.
    series = _series(data, exclude=["dataset", "partition"])
    ranks = _ranks(series)
    fig, axes = _figure(len(panels), title, height=3.6)
    fig.legend_title = shaded_legend_title(series)
    for ax, key in zip(axes, panels, strict=True):
        _accuracy_panel(ax, series, ranks, key, x, xlabel, colors=series_colors(series))
    _legend(fig, axes, order=[s.label for s in series])
    return _finish(fig)


def accuracy_vs_energy(evaluations: pd.DataFrame, title: str | None = None) -> Figure:
    """Test accuracy against the total energy of all devices, one panel per dataset and
    partition (IID / non-IID), one line per series (paper, "Test accuracy vs total energy");
    mean over seeds with a 95 % band."""
    return _accuracy_vs(
        evaluations,
        "cum_energy_j",
        "total energy consumption (J, all devices)",
        "accuracy vs energy",
        title or "Test accuracy vs total energy consumption",
    )


def accuracy_vs_latency(evaluations: pd.DataFrame, title: str | None = None) -> Figure:
    """Test accuracy against the total latency (simulated time, the sum of the slot durations),
    one panel per dataset and partition (paper, "Test accuracy vs total latency"); mean over
    seeds with a 95 % band."""
    return _accuracy_vs(
        evaluations,
        "cum_latency_s",
        "total latency (s)",
        "accuracy vs latency",
        title or "Test accuracy vs total latency",
    )


#: The x axes of :func:`accuracy_late`: column, axis label.
_LATE_AXES = (
    ("cum_energy_j", "total energy consumption (J, all devices)"),
    ("cum_latency_s", "total latency (s)"),
)


def accuracy_late(evaluations: pd.DataFrame, title: str | None = None) -> Figure:
    """Test accuracy in the second half of training, against the total energy (left) and the
    total latency (right), one row per dataset and partition; the accuracy axis spans only what
    these evaluations reach, so that differences of a point or two between schemes late in
    training (where the paper's Figs. 9-10 compare them) can be read. Mean over seeds with a
    95 % band; the evaluations from half of the longest run's slots on."""
    what = "accuracy late in training"
    data = _accuracy_data(evaluations, [x for x, _ in _LATE_AXES], what)
    panels = _panel_keys(data)
    series = _series(data, exclude=["dataset", "partition"])
    ranks = _ranks(series)
    fig, axes = _figure(
        len(_LATE_AXES),
        title or "Test accuracy in the second half of training",
        height=3.6,
        rows=len(panels),
        sharey="row",
    )
    fig.legend_title = shaded_legend_title(series)
    for i, key in enumerate(panels):
        on = data[(data["dataset"] == key[0]) & (data["partition"] == key[1])]
        half = 0.5 * float(on["slot"].max() + 1)  # slots are counted from 0
        for j, (x, xlabel) in enumerate(_LATE_AXES):
            _accuracy_panel(
                axes[i * len(_LATE_AXES) + j],
                series,
                ranks,
                key,
                x,
                xlabel,
                half,
                colors=series_colors(series),
            )
    _legend(fig, axes, order=[s.label for s in series])
    return _finish(fig)
