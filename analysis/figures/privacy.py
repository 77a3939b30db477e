"""The figures of privacy (runs with ``[privacy]``): final accuracy against the epsilon spent
and against the energy (:func:`privacy_tradeoffs`), and the epsilon over simulated time
(:func:`epsilon_evolution`). Series, colours and bands as in every figure
(:mod:`wflsim.analysis.figures`): a series per configuration (scheme, and where the runs differ,
the mechanism and its settings, in ``variant``), its seeds as a 95 % Student-t interval cut to
the seeds' range.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..stats import seed_intervals
from .bands import _draw_band, _legend, _per_run, _record
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


def _point(
    ax: Axes, s: _Series, x: str, y: str, xscale: float, yscale: float, style: dict
) -> float:
    """One series as one point: the mean over its seeds of ``x`` and ``y`` with their 95 %
    intervals as error bars (recorded in the figure's ``intervals``); returns the mean x."""
    xm, xl, xh, _ = _interval(s.rows, x, xscale)
    ym, yl, yh, n = _interval(s.rows, y, yscale)
    if not (np.isfinite(xm) and np.isfinite(ym)):
        return np.nan
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
    return xm


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
    for s in series:
        style = _style(ranks[s.rest], s.scheme, color=colors.get(s.label))
        if _private(s.rows):
            _point(eps_ax, s, "epsilon_max", "final_accuracy", 1.0, 100.0, style)
        else:
            acc = 100.0 * float(s.rows.drop_duplicates("run")["final_accuracy"].mean())
            eps_ax.axhline(
                acc, color=style["color"], linestyle=":", linewidth=1.4, label=s.label, zorder=2
            )
        _point(energy_ax, s, "total_energy_j", "final_accuracy", 1.0, 100.0, style)
    eps_ax.set_xlabel(EPSILON_MAX_LABEL + (" (log scale)" if log_x else ""))
    eps_ax.set_title("accuracy against epsilon (dotted: no DP)", fontsize="medium")
    energy_ax.set_xlabel(ENERGY_LABEL)
    energy_ax.set_title("accuracy against energy", fontsize="medium")
    for ax in axes:
        ax.set_ylabel(ACCURACY_LABEL)
        ax.grid(alpha=0.3)
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
        for s in series:
            xs = _mean_by(s.rows, "slot", ["end_s"]).set_index("slot")["end_s"]
            per_run = _per_run(s.rows, "slot", col)
            style = _style(ranks[s.rest], s.scheme, len(xs), color=colors.get(s.label))
            _draw_band(ax, per_run, "slot", col, s.label, style, s.scheme, x_values=xs)
        ax.set_xlabel(TIME_LABEL)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0.0)
        ax.grid(alpha=0.3)
    _legend(fig, axes, order=[s.label for s in series])
    return _finish(fig)


__all__ = ["epsilon_evolution", "privacy_tradeoffs"]
