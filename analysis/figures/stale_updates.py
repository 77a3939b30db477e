"""The figure of runs with stale updates (``[server] mode`` semi_sync /
async): the staleness of the applied updates and what became of the uploads.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from ..stats import seed_intervals
from .bands import (
    _draw_band,
    _legend,
    _note_coinciding,
    _per_run,
    _record,
)
from .common import (
    InsufficientData,
    _figure,
    _finish,
    _need,
    _one_v,
    _ranks,
    _series,
    _style,
    series_colors,
    shaded_legend_title,
)


def staleness(updates: pd.DataFrame, title: str | None = None) -> Figure:
    """Runs with stale updates (``[server] mode`` semi_sync / async): left, the share of applied
    updates of each staleness (server steps between an update's model version and the step that
    applies it); right, what became of the uploads (applied, discarded as too stale, dropped
    when the device went offline), as a share of the cycles that ended. One line or bar group
    per series; mean over seeds with a 95 % band or interval."""
    what = "staleness"
    if updates.empty:
        raise InsufficientData(f"{what}: no runs with stale updates ([server] mode)")
    _need(updates, ["run", "outcome", "staleness"], what)
    applied = updates[updates["outcome"] == "applied"]
    series = _series(_one_v(updates))
    ranks = _ranks(series)
    colors = series_colors(series)
    fig, axes = _figure(2, title or "Staleness of the updates and what became of them")
    fig.legend_title = shaded_legend_title(series)
    ax, bx = axes
    top = int(np.nanpercentile(applied["staleness"], 99)) if len(applied) else 0
    outcomes = ["applied", "stale", "dropped"]
    width = 0.8 / max(1, len(series))
    drawn: list[tuple[str, Line2D | None]] = []
    for i, s in enumerate(series):
        style = _style(ranks[s.rest], s.scheme, color=colors.get(s.label))
        rows = s.rows
        app = rows[rows["outcome"] == "applied"]
        if len(app):
            counts = (
                app.assign(s=app["staleness"].clip(upper=top).astype(int))
                .groupby(["run", "s"])
                .size()
                .rename("count")
                .reset_index()
            )
            runs = counts["run"].unique()
            grid = pd.MultiIndex.from_product([runs, range(top + 1)], names=["run", "s"])
            counts = counts.set_index(["run", "s"]).reindex(grid, fill_value=0).reset_index()
            counts["share"] = counts["count"] / counts.groupby("run")["count"].transform("sum")
            per_run = _per_run(counts, "s", "share", 100.0)
            drawn.append((s.label, _draw_band(ax, per_run, "s", "share", s.label, style, s.scheme)))
        shares = (
            rows.groupby(["run", "outcome"])
            .size()
            .unstack(fill_value=0)
            .reindex(columns=outcomes, fill_value=0)
        )
        shares = 100.0 * shares.div(shares.sum(axis=1), axis=0)
        long = shares.reset_index().melt(id_vars="run", var_name="outcome", value_name="pct")
        long["x"] = long["outcome"].map({o: j for j, o in enumerate(outcomes)})
        m = seed_intervals(long, ["x"], "pct")  # linear axis; within the seeds' range
        lo = (m["pct"] - m["pct_ci_low"]).fillna(0.0)
        hi = (m["pct_ci_high"] - m["pct"]).fillna(0.0)
        err = np.vstack([lo.to_numpy(), hi.to_numpy()]) if (m["n"] > 1).any() else None
        bars = bx.bar(
            m["x"] + (i - (len(series) - 1) / 2) * width,
            m["pct"],
            width=width,
            yerr=err,
            capsize=2,
            color=style["color"],
            hatch=["", "//", "..", "xx", "\\\\"][ranks[s.rest] % 5],
            edgecolor="white",
            label=s.label,
        )
        if err is not None and bars.errorbar is not None:
            _record(bx, bars.errorbar, s.label, m["x"].to_numpy(dtype=float), m, "pct")
    ax.set_xlabel(f"staleness (server steps; {top} = {top} or more)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("applied updates (%)")
    ax.grid(alpha=0.3)
    _note_coinciding(ax, drawn)
    bx.set_xticks(range(len(outcomes)), ["applied", "too stale", "dropped (offline)"])
    bx.set_ylabel("uploads that ended (%)")
    bx.set_xlabel("outcome")
    bx.grid(alpha=0.3, axis="y")
    _legend(fig, axes, order=[s.label for s in series])
    return _finish(fig)
