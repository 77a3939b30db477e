"""The figures against ``V`` and the energy budget: the impact of ``V`` (a scheme
that ignores ``V`` as a level), the impact of the energy budget over runs, and each device's
energy and queue against its own budget (series of one scheme told apart by :func:`shade`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..stats import seed_intervals
from ..tidy import SCHEME_LABELS
from .bands import (
    _axis_transform,
    _draw_errorbars,
    _find_outliers,
    _legend,
    _note_coinciding,
    _per_run,
    _record,
    _scale_from,
)
from .common import (
    _BAND_ALPHA,
    _MARKERS,
    _SCHEME_ORDER,
    V_FREE_SCHEMES,
    V_UNIT,
    DataFigure,
    InsufficientData,
    _facet_values,
    _figure,
    _finish,
    _need,
    _one_v,
    _ranks,
    _scale_for,
    _Series,
    _series,
    _set_scale,
    _style,
    scheme_color,
    scheme_marker,
    series_colors,
    shaded_legend_title,
)


def impact_of_v(
    summary: pd.DataFrame, schemes: Sequence[str] | None = None, title: str | None = None
) -> DataFigure:
    """Average convergence error X, energy per device-slot and queue length against ``V``
    (paper, "Impact of V"): three panels, one line per series that has at least two ``V``
    values (mean over seeds in the axis' scale, bars: its 95 % Student-t interval cut to the
    seeds' range, when there are several seeds). A scheme that ignores ``V``
    (:data:`V_FREE_SCHEMES`) is a horizontal line (and band) over the ``V`` range, drawn once.

    Args:
        summary: :func:`wflsim.analysis.stats.summary` (one row per run).
        schemes: keep only these schemes (``None``: all).
    """
    cols = ["V", "mean_conv_error", "energy_per_device_slot_j", "mean_queue_j"]
    _need(summary, cols, "impact of V")
    data = summary if schemes is None else summary[summary["scheme"].isin(schemes)]
    free = data["scheme"].isin(V_FREE_SCHEMES) if "scheme" in data else pd.Series(False, data.index)
    both = pd.concat([data[~free], _one_v(data[free])]) if free.any() else data
    every = _series(both, exclude=["V"])
    series = [s for s in every if s.scheme not in V_FREE_SCHEMES and s.rows["V"].nunique() >= 2]
    if not series:
        found = sorted(data["V"].dropna().unique().tolist())
        raise InsufficientData(
            f"impact of V: needs two V values or more in one series (found V = {found})"
        )
    flat = [s for s in every if s.scheme in V_FREE_SCHEMES]
    panels = [
        ("mean_conv_error", "convergence error X_av (dimensionless)", "Convergence error"),
        ("energy_per_device_slot_j", "average energy E_av (J per device-slot)", "Energy"),
        ("mean_queue_j", "average queue length Q_av (J)", "Queue length"),
    ]
    fig, axes = _figure(3, title or "Impact of the control parameter V")
    all_v = pd.concat([s.rows["V"] for s in series])
    v_lo, v_hi = float(all_v.min()), float(all_v.max())
    log_x = v_lo > 0 and v_hi / v_lo >= 10
    ranks = _ranks(series + flat)
    colors = series_colors(series + flat)
    fig.legend_title = shaded_legend_title(series + flat)
    for ax, (col, ylabel, sub) in zip(axes, panels, strict=True):
        ax.set_ylabel(ylabel)
        sloped = [(s, _per_run(s.rows, "V", col)) for s in series]
        level = [(s, _per_run(s.rows.assign(V=v_lo), "V", col)) for s in flat]
        _scale_from([ax], [pr for _, pr in sloped + level], "V", col)
        drawn: list[tuple[str, Line2D | None]] = []
        for s, pr in sloped:
            style = _style(ranks[s.rest], s.scheme, color=colors.get(s.label))
            drawn.append((s.label, _draw_errorbars(ax, pr, "V", col, s.label, style)))
        for s, pr in level:
            label = f"{s.label} (ignores V)"
            drawn.append((label, _draw_level(ax, pr, col, (v_lo, v_hi), label, s, ranks, colors)))
        ax.set_xlabel(f"control parameter V ({V_UNIT})")
        ax.set_title(sub, fontsize="medium")
        if log_x:
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
        _note_coinciding(ax, drawn)
    order = [s.label for s in series] + [f"{s.label} (ignores V)" for s in flat]
    order = sorted(order, key=lambda lab: _label_rank(lab, series + flat))
    _legend(fig, axes, order=order)
    return _finish(fig)


def _draw_level(
    ax: Axes,
    per_run: pd.DataFrame,
    y: str,
    xs: tuple[float, float],
    label: str,
    s: _Series,
    ranks: dict[tuple, int],
    colors: dict[str, str],
) -> Line2D | None:
    """A scheme that ignores ``V``: its mean over seeds (in the axis' scale) as a thick
    horizontal line over ``xs`` and, with several seeds, its interval as a band."""
    m = seed_intervals(per_run.assign(V=0.0), ["V"], y, _axis_transform(ax))
    if m.empty:
        return None
    style = _style(ranks[s.rest], s.scheme, color=colors.get(s.label))
    two = pd.concat([m, m], ignore_index=True)
    (line,) = ax.plot(
        list(xs),
        two[y],
        label=label,
        color=style["color"],
        linestyle=style["linestyle"],
        linewidth=2.2,
        alpha=0.8,
        zorder=style["zorder"],
    )
    if int(m["n"].iloc[0]) > 1:
        poly = ax.fill_between(
            list(xs),
            two[y + "_ci_low"],
            two[y + "_ci_high"],
            color=style["color"],
            alpha=_BAND_ALPHA,
            linewidth=0,
        )
        _record(ax, poly, label, np.array(xs, dtype=float), two, y)
    means = per_run.groupby("run", sort=True)[y].mean()
    level = pd.DataFrame(
        {"run": np.repeat(means.index.to_numpy(), 2), "V": list(xs) * len(means)}
    ).assign(**{y: np.repeat(means.to_numpy(), 2)})
    _find_outliers(ax, per_run, "V", y, label, style, lines=level)
    return line


def _label_rank(label: str, series: Sequence[_Series]) -> tuple:
    """Schemes in the paper's order (then by label), whatever the suffix of the label."""
    for s in series:
        if label.startswith(s.label):
            return (_SCHEME_ORDER.get(s.scheme, len(_SCHEME_ORDER)), label)
    return (len(_SCHEME_ORDER) + 1, label)


def impact_of_energy_budget(summary: pd.DataFrame, title: str | None = None) -> Figure:
    """Average energy per device-slot and average queue length against the energy budget E_bar
    (``energy_budget_mean_j``: the budget specification's mean over devices), one line per
    series with two budgets or more (paper, "Impact of E_n"), mean over seeds with 95 %
    intervals; the dashed line in the energy panel is E_av = E_bar."""
    cols = ["energy_budget_mean_j", "energy_per_device_slot_j", "mean_queue_j"]
    _need(summary, cols, "impact of the energy budget")
    data = _one_v(summary.dropna(subset=["energy_budget_mean_j"]))
    series = [
        s
        for s in _series(data, exclude=["energy_budget", "energy_budget_mean_j"])
        if s.rows["energy_budget_mean_j"].nunique() >= 2
    ]
    if not series:
        found = sorted(summary["energy_budget"].dropna().unique().tolist())
        raise InsufficientData(
            f"impact of the energy budget: needs two budgets or more in one series (found {found})"
        )
    fig, axes = _figure(2, title or "Impact of the energy budget E_bar")
    panels = [
        ("energy_per_device_slot_j", "average energy E_av (J per device-slot)", "Energy"),
        ("mean_queue_j", "average queue length Q_av (J)", "Queue length"),
    ]
    ranks = _ranks(series)
    colors = series_colors(series)
    fig.legend_title = shaded_legend_title(series)
    x = "energy_budget_mean_j"
    lo, hi = float(data[x].min()), float(data[x].max())
    for i, (ax, (col, ylabel, sub)) in enumerate(zip(axes, panels, strict=True)):
        ax.set_ylabel(ylabel)
        cells = [(s, _per_run(s.rows, x, col)) for s in series]
        _scale_from([ax], [pr for _, pr in cells], x, col)
        drawn = [
            (
                s.label,
                _draw_errorbars(
                    ax,
                    pr,
                    x,
                    col,
                    s.label,
                    _style(ranks[s.rest], s.scheme, color=colors.get(s.label)),
                ),
            )
            for s, pr in cells
        ]
        if i == 0:
            ax.plot([lo, hi], [lo, hi], "k--", linewidth=1, label="E_av = E_bar")
        ax.set_xlabel("energy budget E_bar (J per slot)")
        ax.set_title(sub, fontsize="medium")
        ax.grid(alpha=0.3)
        _note_coinciding(ax, drawn)
    _legend(fig, axes)
    return _finish(fig)


def _per_device_colors(series: Sequence[_Series]) -> dict[str, str]:
    """Series label -> colour in the per-device figure: as in every other figure
    (:func:`~wflsim.analysis.figures.common.series_colors`), else the scheme's own."""
    own = series_colors(series)
    return {s.label: own.get(s.label, scheme_color(s.scheme)) for s in series}


def _per_device_marker(scheme: str, k: int) -> str:
    """The ``k``-th series of ``scheme`` in a per-device panel: the scheme's marker first, then
    the other markers (never the scheme's again)."""
    own = scheme_marker(scheme)
    return [own, *(m for m in _MARKERS if m != own)][k % len(_MARKERS)]


def _coinciding_points(points: Sequence[tuple[str, pd.DataFrame]]) -> list[str]:
    """ "B coincides with A" for each series whose points (device budget, value) are those of an
    earlier one (to 1e-9 relative): drawn nested (hollow markers of growing size), said in the
    panel's title."""
    keys = []
    for _, rows in points:
        arr = np.round(rows.to_numpy(dtype=float), 9)
        keys.append(arr[np.lexsort(arr.T[::-1])].tobytes())
    out = []
    for i, (label, _) in enumerate(points):
        first = next((points[j][0] for j in range(i) if keys[j] == keys[i]), None)
        if first is not None:
            out.append(f"{label} coincides with {first}")
    return out


def energy_budget_per_device(per_device: pd.DataFrame, title: str | None = None) -> Figure:
    """Each device's average energy per slot and average queue length against its own budget
    E_bar_n (``wflsim.analysis.stats.energy_per_device``: one point per device and run): one
    row of two panels (energy, queue) per scheme and, where it takes several values, per ``V``
    (a scheme that ignores ``V`` once), so that neither schemes nor ``V`` values pile up on each
    other; within a panel the other series columns (partition, strategy, uplink, ...) are told
    apart by colour (as in every other figure: :func:`~wflsim.analysis.figures.common.series_colors`)
    and by hollow markers of their own shape and growing size, so that coinciding points show
    nested (and the panel's title says which series coincide). Each column has one y axis for every row; the dashed line in
    the energy panels is E_av = E_bar. This is the impact of the energy budget inside one
    configuration whose devices have different budgets (the paper's budgets are drawn per
    device from a range)."""
    cols = ["energy_budget_j", "mean_energy_j", "mean_queue_j"]
    _need(per_device, cols, "energy against each device's budget")
    data = _one_v(per_device.dropna(subset=["energy_budget_j"]))
    if data["energy_budget_j"].nunique() < 2:
        raise InsufficientData(
            "energy against each device's budget: every device has the same budget"
        )
    by_v = _facet_values(data) != [None] if "V" in data.columns else False
    exclude = ["energy_budget", "energy_budget_mean_j"] + (["V"] if by_v else [])
    series = _series(data, exclude)
    schemes = list(dict.fromkeys(s.scheme for s in series))
    # the rows: (scheme, V) in the paper's order, V ascending; V = None for one row per scheme
    facets: list[tuple[str, float | None]] = []
    for scheme in schemes:
        rows = data[data["scheme"] == scheme] if "scheme" in data.columns else data
        vs = sorted(rows["V"].dropna().unique().tolist()) if by_v else []
        facets += [(scheme, float(v)) for v in vs] or [(scheme, None)]
    fig = DataFigure(figsize=(8.4, 0.6 + 2.5 * len(facets)), layout="constrained")
    # one y axis per column: the schemes' rows compare on one scale (a log one when one
    # scheme's values reach 10 times another's)
    grid = fig.subplots(len(facets), 2, squeeze=False, sharex=True, sharey="col")
    fig.suptitle(title or "Energy and queue against each device's budget E_bar_n")
    panels = [
        ("mean_energy_j", "average energy E_av,n\n(J per slot)", "energy"),
        ("mean_queue_j", "average queue length Q_av,n\n(J)", "queue"),
    ]
    for j, (col, ylabel, _) in enumerate(panels):
        for i in range(len(facets)):
            grid[i][j].set_ylabel(ylabel)  # before the scale, which adds its note
        values = pd.to_numeric(data[col], errors="coerce")
        peaks = values.abs().groupby(data["scheme"]).max() if "scheme" in data else values.abs()
        _set_scale(
            [grid[i][j] for i in range(len(facets))],
            _scale_for(peaks.tolist(), values.to_numpy(dtype=float)),
        )
    lo, hi = float(data["energy_budget_j"].min()), float(data["energy_budget_j"].max())
    colors = _per_device_colors(series)
    if shaded_legend_title(series):
        fig.legend_title = "colour: scheme; shade and hollow marker: the rest of the label"
    for i, (scheme, v) in enumerate(facets):
        mine = [s for s in series if s.scheme == scheme]
        ranks = _ranks(mine)
        name = SCHEME_LABELS.get(scheme, scheme or "all runs")
        row_title = name if v is None else f"{name}, V = {v:g}"
        for j, (col, _, what) in enumerate(panels):
            ax = grid[i][j]
            points: list[tuple[str, pd.DataFrame]] = []
            for s in mine:
                rows = s.rows if v is None else s.rows[s.rows["V"] == v]
                if rows.empty:
                    continue
                k = ranks[s.rest]
                style = _style(k, s.scheme)
                for key in ("markevery", "linestyle", "color", "marker", "markersize"):
                    style.pop(key)
                ax.plot(
                    rows["energy_budget_j"],
                    rows[col],
                    linestyle="none",
                    label=s.label,
                    color=colors[s.label],
                    marker=_per_device_marker(scheme, k),
                    markerfacecolor="none" if len(mine) > 1 else colors[s.label],
                    markeredgewidth=1.1,
                    markersize=4.5 + 2.0 * k,  # nested, where points coincide
                    alpha=0.8,
                    **style,
                )
                points.append((s.label, rows[["energy_budget_j", col]]))
            if j == 0:
                ax.plot([lo, hi], [lo, hi], "k--", linewidth=1, label="E_av = E_bar")
            said = _coinciding_points(points)
            ax.set_title(
                "\n".join([f"{row_title}: {what}", *[textwrap.fill(n, 48) for n in said]]),
                fontsize="medium",
            )
            if said:
                fig.notes += [f"{row_title}, {what}: {n}" for n in said]
            ax.set_xlabel("device's budget E_bar_n (J per slot)")
            ax.tick_params(labelbottom=True)
            ax.grid(alpha=0.3)
    axes = [ax for row in grid for ax in row]
    _legend(fig, axes, order=[s.label for s in series])
    return _finish(fig)
