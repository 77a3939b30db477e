"""The figures of a study: what it varies (:func:`axes_figure`, the headline metrics along each
varied field) and its own claims (:func:`claims_figure`, :mod:`wflsim.analysis.hypotheses`: one
row per claim and context, the mean paired difference ``a - b`` over the seeds with its 95 %
Student-t interval, the claimed side of the margin shaded, the verdict in the row's colour)."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from .common import DataFigure, InsufficientData, _need, _no_offset

#: The colour of each verdict (the report's page uses the same).
VERDICT_COLORS: dict[str, str] = {
    "holds": "#1a7f37",
    "does not hold": "#b42318",
    "inconclusive": "#9a6700",
    "not measurable here": "#6e7781",
}
#: The most rows (claim contexts) the figure draws.
MAX_ROWS = 40
#: The x range of a row whose difference is 0 in every seed (in the metric's unit).
_FLAT_SPAN = 0.02
_COLUMNS = ["claim", "context", "metric", "mean", "low", "high", "n", "status", "margin", "better"]


def _unit(metric: str) -> str:
    from ..hypotheses import metric_unit

    unit = metric_unit(metric)
    return "" if unit in ("", "fraction", "ratio") else f" ({unit})"


def claims_figure(measured: pd.DataFrame) -> DataFigure:
    """One panel per claim and context (rows), each on its own axis in its metric's unit: the
    mean of ``a - b`` over the seeds (point) with its 95 % interval (bar; none with one seed),
    the margin as a dashed line with the claimed side shaded, coloured by the verdict.

    ``measured``: rows of :class:`wflsim.analysis.hypotheses.Measured` (as a table).

    Raises:
        InsufficientData: no claim was measured (no rows).
    """
    _need(measured, _COLUMNS, "the study's claims")
    rows = measured.reset_index(drop=True)
    shown = rows.head(MAX_ROWS)
    n = len(shown)
    fig = DataFigure(figsize=(7.0, 0.5 + 1.05 * n), layout="constrained")
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    fig.suptitle("The study's claims: the difference a - b paired by seed (mean, 95 % interval)")
    if len(rows) > n:
        fig.notes.append(f"the first {n} of {len(rows)} claim contexts are drawn (claims.csv: all)")
    for ax, (_, r) in zip(axes, shown.iterrows(), strict=True):
        color = VERDICT_COLORS.get(str(r["status"]), "#6e7781")
        margin = float(r["margin"]) * (1 if r["better"] == "higher" else -1)
        lo, hi = float(r["low"]), float(r["high"])
        has_bar = int(r["n"]) >= 2 and np.isfinite(lo) and np.isfinite(hi)
        values = [float(r["mean"]), margin, *([lo, hi] if has_bar else [])]
        span = max(values) - min(values)
        if span <= 1e-9 * max(1.0, *map(abs, values)):  # no difference in any seed
            span = max(abs(float(r["mean"])) * 0.1, _FLAT_SPAN)
            values = [values[0] - span / 2, values[0] + span / 2]
        left, right = min(values) - 0.15 * span, max(values) + 0.15 * span
        ax.set_xlim(left, right)
        if r["better"] == "higher":
            ax.axvspan(margin, right, color=color, alpha=0.08, lw=0)
        else:
            ax.axvspan(left, margin, color=color, alpha=0.08, lw=0)
        ax.axvline(margin, color="#444444", lw=0.8, ls="--")
        if has_bar:
            ax.errorbar(
                [float(r["mean"])], [0], xerr=[[float(r["mean"]) - lo], [hi - float(r["mean"])]],
                fmt="o", color=color, capsize=4, ms=6,
            )  # fmt: skip
        else:
            ax.plot([float(r["mean"])], [0], "o", color=color, ms=6)
        ax.set_yticks([])
        ax.set_ylim(-1, 1)
        seeds = f"{int(r['n'])} seed{'s' if int(r['n']) != 1 else ''}"
        head = f"{r['claim']}: {r['status']} ({seeds})"
        if str(r["context"]):
            head += f" | {r['context']}"
        ax.set_title("\n".join(textwrap.wrap(head, 95)), fontsize=8, loc="left", color=color)
        ax.set_xlabel(f"{r['metric']}: {r['a']} - {r['b']}{_unit(str(r['metric']))}", fontsize=8)
        ax.tick_params(labelsize=7)
    return _no_offset(fig)


#: The metrics of the figure of what a study varies: column, axis label.
AXES_METRICS: list[tuple[str, str]] = [
    ("final_accuracy", "final test accuracy"),
    ("energy_per_device_slot_j", "energy per device-slot (J)"),
    ("outage_rate", "outage rate (late uploads per participation)"),
    ("total_latency_s", "total latency (s)"),
]
#: The prefix of the columns that hold each run's value of a varied field.
AXIS_PREFIX = "axis:"
#: The most fields (rows) and series (per row) the figure draws.
MAX_AXES = 4
MAX_SERIES = 12


def axes_figure(table: pd.DataFrame) -> DataFigure:
    """What the study varies: one row per varied field (the columns ``axis:<field>``), one
    panel per headline metric (:data:`AXES_METRICS` that the runs measured), the field's values
    along x; per combination of the other varied fields (a series, its own colour, dodged along
    x) the mean over seeds with its 95 % Student-t interval cut to the seeds' range
    (:func:`wflsim.analysis.stats.seed_intervals`).

    Raises:
        InsufficientData: no field varies, or no metric was measured.
    """
    from ..stats import seed_intervals
    from .common import _SERIES_COLORS

    axes_cols = [c for c in table.columns if c.startswith(AXIS_PREFIX)]
    if not axes_cols:
        raise InsufficientData("what the study varies: the runs differ only in their seed")
    measured = [(m, label) for m, label in AXES_METRICS if m in table and table[m].notna().any()]
    metrics = [(m, label) for m, label in measured if (table[m].fillna(0) != 0).any()]
    if not metrics:
        raise InsufficientData("what the study varies: no headline metric was measured")
    shown = axes_cols[:MAX_AXES]
    fig = DataFigure(figsize=(3.2 * len(metrics), 0.6 + 2.9 * len(shown)), layout="constrained")
    grid = fig.subplots(len(shown), len(metrics), squeeze=False)
    fig.suptitle("What the study varies: each field's values (mean over seeds, 95 % interval)")
    if len(axes_cols) > len(shown):
        fig.notes.append(f"the first {len(shown)} of {len(axes_cols)} varied fields are drawn")
    zero = [label for m, label in measured if (m, label) not in metrics]
    if zero:
        fig.notes.append(f"0 in every run, not drawn: {', '.join(zero)}")
        fig.suptitle(f"{fig.get_suptitle()}\n(0 in every run: {', '.join(zero)})")
    for row, col in zip(grid, shown, strict=True):
        others = [c for c in axes_cols if c != col]
        values = sorted(table[col].dropna().unique(), key=_order)
        pos = {v: i for i, v in enumerate(values)}
        series = list(table.groupby(others, dropna=False, sort=True)) if others else [((), table)]
        if len(series) > MAX_SERIES:
            fig.notes.append(f"{col[len(AXIS_PREFIX) :]}: the first {MAX_SERIES} series drawn")
            series = series[:MAX_SERIES]
        width = 0.6 / max(len(series), 1)
        for k, (key, rows) in enumerate(series):
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(
                f"{c[len(AXIS_PREFIX) :]}={v}" for c, v in zip(others, key, strict=True)
            )
            color = _SERIES_COLORS[k % len(_SERIES_COLORS)]
            offset = (k - (len(series) - 1) / 2) * width
            for ax, (m, _) in zip(row, metrics, strict=True):
                iv = seed_intervals(rows.assign(_x=rows[col].map(pos)), ["_x"], m)
                if iv.empty:
                    continue
                x = iv["_x"].to_numpy(float) + offset
                y = iv[m].to_numpy(float)
                lo = (y - iv[f"{m}_ci_low"].to_numpy(float)).clip(min=0)
                hi = (iv[f"{m}_ci_high"].to_numpy(float) - y).clip(min=0)
                ax.errorbar(
                    x, y, yerr=[np.nan_to_num(lo), np.nan_to_num(hi)], fmt="o", ms=5,
                    color=color, capsize=3, label=label or None,
                )  # fmt: skip
        for ax, (_, ylabel) in zip(row, metrics, strict=True):
            ax.set_xticks(range(len(values)))
            ax.set_xticklabels([_tick(v) for v in values], fontsize=7, rotation=20, ha="right")
            ax.set_xlim(-0.6, len(values) - 0.4)
            ax.set_xlabel(col[len(AXIS_PREFIX) :], fontsize=8)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.tick_params(axis="y", labelsize=7)
        if others:
            handles, labels = row[0].get_legend_handles_labels()
            if handles:
                row[-1].legend(handles, labels, fontsize=6, loc="best", framealpha=0.8)
    return _no_offset(fig)


def _order(v: object) -> tuple:
    try:
        return (0, float(str(v)), "")
    except ValueError:
        return (1, 0.0, str(v))


def _tick(v: object) -> str:
    text = str(v)
    return text if len(text) <= 18 else text[:17] + "…"
