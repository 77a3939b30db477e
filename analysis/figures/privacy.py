"""The figures of privacy (runs with ``[privacy]``): final accuracy against the epsilon spent
and against the energy (:func:`privacy_tradeoffs`), and the epsilon over simulated time
(:func:`epsilon_evolution`). Series, colours and bands as in every figure
(:mod:`wflsim.analysis.figures`): a series per configuration (scheme, and where the runs differ,
the mechanism and its settings, in ``variant``), its seeds as a 95 % Student-t interval cut to
the seeds' range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..stats import seed_intervals
from .bands import _draw_band, _legend, _note_coinciding, _per_run, _record
from .common import (
    InsufficientData,
    _figure,
    _finish,
    _mean_by,
    _need,
    _ranks,
    _Series,
    _series,
    _style,
    series_colors,
    shaded_legend_title,
)

#: The axis labels of the privacy figures (epsilon has no unit; the titles say it is at each
#: run's delta).
EPSILON_MAX_LABEL = "epsilon (max over devices)"
EPSILON_MEAN_LABEL = "epsilon (mean over devices)"
_AT_DELTA = "epsilon at each run's delta, no unit"
ACCURACY_LABEL = "final test accuracy (%)"
ENERGY_LABEL = "total energy consumption (J, all devices)"
TIME_LABEL = "simulated time (s)"


def _interval(rows: pd.DataFrame, col: str, scale: float = 1.0) -> tuple[float, float, float, int]:
    """The mean over the runs (seeds) of ``scale * col`` and its 95 % Student-t interval cut to
    the seeds' range (:func:`wflsim.analysis.stats.seed_intervals`; NaN bounds with one seed)."""
    per_run = rows.drop_duplicates("run").assign(_all=0, _v=scale * rows[col].astype(float))
    m = seed_intervals(per_run, ["_all"], "_v")
    if m.empty:
        return (np.nan, np.nan, np.nan, 0)
    r = m.iloc[0]
    return (float(r["_v"]), float(r["_v_ci_low"]), float(r["_v_ci_high"]), int(r["n"]))


def _errors(mean: float, low: float, high: float) -> list[list[float]] | None:
    if not np.isfinite(low):
        return None
    return [[max(mean - low, 0.0)], [max(high - mean, 0.0)]]


@dataclass
class _Drawn:
    """A point as drawn: its panel, centre, marker line and series label."""

    ax: Axes
    x: float
    y: float
    line: Line2D
    label: str


def _point(
    ax: Axes, s: _Series, x: str, y: str, xscale: float, yscale: float, style: dict
) -> _Drawn | None:
    """One series as one point: the mean over its seeds of ``x`` and ``y`` with their 95 %
    intervals as error bars (recorded in the figure's ``intervals``)."""
    xm, xl, xh, _ = _interval(s.rows, x, xscale)
    ym, yl, yh, n = _interval(s.rows, y, yscale)
    if not (np.isfinite(xm) and np.isfinite(ym)):
        return None
    st = {k: v for k, v in style.items() if k not in ("markevery", "linestyle")}
    bars = ax.errorbar(
        [xm], [ym], xerr=_errors(xm, xl, xh), yerr=_errors(ym, yl, yh), label=s.label,
        capsize=3, linestyle="none", **st,
    )  # fmt: skip
    if n > 1:
        m = pd.DataFrame(
            {"n": [n], "y": [ym], "y_ci_low": [yl], "y_ci_high": [yh], "y_min": [yl], "y_max": [yh]}
        )
        m[["y_min", "y_max"]] = [[yscale * s.rows[y].min(), yscale * s.rows[y].max()]]
        _record(ax, bars, s.label, np.array([xm]), m, "y")
    line = bars.lines[0]
    return _Drawn(ax, xm, ym, line, s.label) if isinstance(line, Line2D) else None


#: Two points closer than this share of their panel's span on both axes coincide.
_SAME_POINT = 0.005


def _nest_coinciding(fig: Figure, drawn: Sequence[_Drawn]) -> None:
    """Points of one panel that coincide are drawn nested (the first drawn largest, behind)
    and said in the panel's title and the figure's notes ("B coincides with A")."""
    for ax in dict.fromkeys(d.ax for d in drawn):
        mine = [d for d in drawn if d.ax is ax]
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        xs = np.log10([max(d.x, 1e-300) for d in mine]) if ax.get_xscale() == "log" else None
        span_x = abs(np.log10(x1 / x0)) if xs is not None else abs(x1 - x0)
        groups: list[list[int]] = []
        for i, d in enumerate(mine):
            xi = xs[i] if xs is not None else d.x
            for g in groups:
                j = g[0]
                xj = xs[j] if xs is not None else mine[j].x
                near_x = abs(xi - xj) <= _SAME_POINT * span_x
                if near_x and abs(d.y - mine[j].y) <= _SAME_POINT * abs(y1 - y0):
                    g.append(i)
                    break
            else:
                groups.append([i])
        said = []
        for g in (g for g in groups if len(g) > 1):
            for rank, i in enumerate(g):
                line = mine[i].line
                line.set_markersize(line.get_markersize() + 3.5 * (len(g) - 1 - rank))
                line.set_zorder(line.get_zorder() + 0.1 * rank)
            first = mine[g[0]].label
            said += [f"{mine[i].label} coincides with {first}" for i in g[1:]]
        if said:
            fig_notes = getattr(fig, "notes", None)
            if isinstance(fig_notes, list):
                fig_notes += said
            ax.set_title(f"{ax.get_title()}\n(coinciding points nested)", fontsize="medium")


def _private(rows: pd.DataFrame) -> bool:
    return bool(rows["epsilon_max"].notna().any())


def privacy_tradeoffs(summary: pd.DataFrame, title: str | None = None) -> Figure:
    """Final test accuracy against the epsilon spent (max over devices, left) and against the
    total energy (right): one point per configuration (series), the mean over its seeds with
    95 % intervals on both axes. A configuration without ``[privacy]`` (no epsilon) is a
    horizontal dotted line at its accuracy on the left (the accuracy privacy is measured
    against) and a point on the right. ``summary``: the report's summary table
    (:func:`wflsim.analysis.stats.summary`), the runs of the privacy study.

    Raises:
        InsufficientData: no run with ``[privacy]``, or no final accuracy (network-only runs).
    """
    what = "privacy trade-offs"
    _need(summary, ["run", "epsilon_max", "final_accuracy", "total_energy_j"], what)
    if not _private(summary):
        raise InsufficientData(f"{what}: no run with [privacy]")
    data = summary.dropna(subset=["final_accuracy"])
    if data.empty or not _private(data):
        raise InsufficientData(f"{what}: no final accuracy (network-only runs have none)")
    series = _series(data)
    ranks = _ranks(series)
    colors = series_colors(series)
    fig, axes = _figure(
        2, title or f"Accuracy against privacy and energy ({_AT_DELTA})", height=3.8
    )
    fig.legend_title = shaded_legend_title(series)
    eps_ax, energy_ax = axes
    eps = data["epsilon_max"].to_numpy(float)
    eps = eps[np.isfinite(eps) & (eps > 0)]
    log_x = len(eps) > 1 and eps.max() >= 10.0 * eps.min()
    if log_x:
        eps_ax.set_xscale("log")
    drawn: list[_Drawn | None] = []
    for s in series:
        style = _style(ranks[s.rest], s.scheme, color=colors.get(s.label))
        if _private(s.rows):
            drawn.append(_point(eps_ax, s, "epsilon_max", "final_accuracy", 1.0, 100.0, style))
        else:
            acc = 100.0 * float(s.rows.drop_duplicates("run")["final_accuracy"].mean())
            eps_ax.axhline(
                acc, color=style["color"], linestyle=":", linewidth=1.4, label=s.label, zorder=2
            )
        drawn.append(_point(energy_ax, s, "total_energy_j", "final_accuracy", 1.0, 100.0, style))
    eps_ax.set_xlabel(EPSILON_MAX_LABEL + (" (log scale)" if log_x else ""))
    eps_ax.set_title("accuracy against epsilon (dotted: no DP)", fontsize="medium")
    energy_ax.set_xlabel(ENERGY_LABEL)
    energy_ax.set_title("accuracy against energy", fontsize="medium")
    for ax in axes:
        ax.set_ylabel(ACCURACY_LABEL)
        ax.grid(alpha=0.3)
    _nest_coinciding(fig, [d for d in drawn if d is not None])
    _legend(fig, axes, order=[s.label for s in series])
    return _finish(fig)


#: The panels of :func:`epsilon_evolution`: column, axis label.
_EPSILON_PANELS: Sequence[tuple[str, str]] = (
    ("epsilon_max", EPSILON_MAX_LABEL),
    ("epsilon_mean", EPSILON_MEAN_LABEL),
)


def epsilon_evolution(over_time: pd.DataFrame, title: str | None = None) -> Figure:
    """The epsilon spent over simulated time, the largest over the devices (left) and their
    mean (right), one line per configuration with privacy: per slot, the mean over seeds of
    each run's epsilon after the slot (x: the slot's end, mean over seeds) and its 95 % band.
    ``over_time``: :func:`wflsim.analysis.privacy.epsilon_over_time`.

    Raises:
        InsufficientData: no run with ``[privacy]`` (no rows).
    """
    what = "epsilon over time"
    _need(over_time, ["run", "slot", "end_s", "epsilon_max", "epsilon_mean"], what)
    series = _series(over_time)
    ranks = _ranks(series)
    colors = series_colors(series)
    fig, axes = _figure(2, title or f"Privacy spent over simulated time ({_AT_DELTA})", height=3.6)
    fig.legend_title = shaded_legend_title(series)
    for ax, (col, label) in zip(axes, _EPSILON_PANELS, strict=True):
        lines: list[tuple[str, Line2D | None]] = []
        for s in series:
            xs = _mean_by(s.rows, "slot", ["end_s"]).set_index("slot")["end_s"]
            per_run = _per_run(s.rows, "slot", col)
            style = _style(ranks[s.rest], s.scheme, len(xs), color=colors.get(s.label))
            line = _draw_band(ax, per_run, "slot", col, s.label, style, s.scheme, x_values=xs)
            lines.append((s.label, line))
        ax.set_xlabel(TIME_LABEL)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0.0)
        ax.grid(alpha=0.3)
        _note_coinciding(ax, lines)
    _legend(fig, axes, order=[s.label for s in series])
    return _finish(fig)


__all__ = ["epsilon_evolution", "privacy_tradeoffs"]
