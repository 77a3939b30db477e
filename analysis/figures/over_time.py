"""The figures over time (slots or frames), faceted by ``V``: the stable
parameters (paper Fig. 1), the time evolution of energy and cost (paper Figs. 3-4), the
freezing fraction, the queue, and the latency, participation and outages per frame; all drawn
by :func:`_time_figure`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
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
    _scale_from,
)
from .common import (
    _BAND_ALPHA,
    _PANEL,
    V_UNIT,
    DataFigure,
    InsufficientData,
    _facet_values,
    _figure,
    _finish,
    _need,
    _one_v,
    _ranks,
    _Series,
    _series,
    _style,
    iter_series,
    series_colors,
    shaded_legend_title,
)


@dataclass(frozen=True)
class _Panel:
    col: str
    scale: float
    ylabel: str
    title: str
    empty: str  # what the panel says when it has nothing to draw
    nothing: str = "nan"  # "zero": all values 0 also count as nothing to draw
    #: "ecdf": the distribution of the metric over every row (slot) of every seed, instead of
    #: its mean per ``x``: for a metric whose per-``x`` means of different series coincide
    #: (the slot latency, the deadline in every frame of a synchronous run)
    kind: Literal["line", "ecdf"] = "line"


def _nothing_to_draw(data: pd.DataFrame, p: _Panel) -> bool:
    """Whether the metric of panel ``p`` has nothing to draw in ``data``: no value, or (for a
    panel whose :attr:`_Panel.nothing` is "zero") only zeros."""
    values = pd.to_numeric(data[p.col], errors="coerce") if p.col in data else pd.Series([])
    return bool(values.isna().all() or (p.nothing == "zero" and (values.fillna(0) == 0).all()))


def _time_figure(
    data: pd.DataFrame,
    x: str,
    xlabel: str,
    panels: Sequence[_Panel],
    title: str,
    *,
    keep_v: bool = False,
    only: Sequence[str] | None = None,
) -> DataFigure:
    """Metrics (rows, or columns without facets) against ``x``: mean over seeds with a 95 % band
    (in the axis' scale, within the seeds' range), one facet column per ``V`` when ``V`` takes
    several values (:func:`_facet_values`); the facets of a row share their y axis.

    ``keep_v``: the schemes of :data:`~wflsim.analysis.figures.common.V_FREE_SCHEMES` keep their
    ``V`` (a metric that depends on ``V`` even when the decisions do not, e.g. the cost
    ``V X + Q E``), so a facet shows the run at its own ``V``. ``only``: draw only these series
    labels.

    A metric with nothing to draw (:attr:`_Panel.empty`: not logged, or no outage at all) gets
    no panel: the figure's title and notes say why; with nothing to draw at all it raises
    :class:`InsufficientData`."""
    facets = _facet_values(data)
    shown = [p for p in panels if not _nothing_to_draw(data, p)]
    left_out = [f"{p.title}: not drawn, {p.empty}" for p in panels if p not in shown]
    if not shown:
        raise InsufficientData("; ".join(left_out))
    panels = shown
    if left_out:
        width = (len(panels) if len(facets) == 1 else len(facets)) * _PANEL
        said = textwrap.fill("(" + "; ".join(left_out) + ")", max(40, int(11 * width)))
        title = f"{title}\n{said}"
    if not keep_v:
        data = _one_v(data)
    exclude = ["V"] if facets != [None] else []
    series = [s for s in _series(data, exclude) if only is None or s.label in only]
    ranks = _ranks(series)
    colors = series_colors(series)
    # many series: fainter bands, so that overlapping ones stay readable
    alpha = max(0.06, _BAND_ALPHA * min(1.0, 4.0 / max(1, len(series))))
    nf = len(facets)
    if nf == 1:
        fig, flat = _figure(len(panels), title)
        grid = [[ax] for ax in flat]  # grid[panel][facet]
    else:
        fig, flat = _figure(nf, title, height=2.9, rows=len(panels), sharey="row")
        grid = [flat[i * nf : (i + 1) * nf] for i in range(len(panels))]
    fig.notes += left_out
    fig.legend_title = shaded_legend_title(series)
    for p, row in zip(panels, grid, strict=True):
        if p.kind == "ecdf":
            _ecdf_row(p, row, facets, series, ranks, colors)
            continue
        row[0].set_ylabel(p.ylabel)
        for v, ax in zip(facets, row, strict=True):
            ax.set_title(p.title if v is None else f"{p.title}, V = {v:g}", fontsize="medium")
            ax.set_xlabel(xlabel)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))  # slots, frames
            ax.grid(alpha=0.3)
        # what each facet draws, per run: the scale is chosen on all of it before drawing
        cells: list[tuple[Axes, _Series, pd.DataFrame]] = []
        for v, ax in zip(facets, row, strict=True):
            for s in series:
                rows = s.rows if v is None else s.rows[(s.rows["V"] == v) | s.rows["V"].isna()]
                per_run = _per_run(rows, x, p.col, p.scale)
                if len(per_run):
                    cells.append((ax, s, per_run))
        _scale_from(row, [pr for _, _, pr in cells], x, p.col)
        drawn: dict[Axes, list[tuple[str, Line2D | None]]] = {ax: [] for ax in row}
        for ax, s, pr in cells:
            style = _style(ranks[s.rest], s.scheme, color=colors.get(s.label))
            line = _draw_band(ax, pr, x, p.col, s.label, style, s.scheme, alpha)
            drawn[ax].append((s.label, line))
        for ax in row:
            _note_coinciding(ax, drawn[ax])
        if p.scale == 100.0 and row[0].get_yscale() == "linear":
            row[0].set_ylim(bottom=0)
    _legend(fig, flat, order=[s.label for s in series])
    return _finish(fig)


def _ecdf_row(
    p: _Panel,
    row: Sequence[Axes],
    facets: Sequence[float | None],
    series: Sequence[_Series],
    ranks: dict[tuple, int],
    colors: dict[str, str],
) -> None:
    """Panel ``p`` as the empirical distribution function of its metric, one step line per
    series and facet over every row (slot) of every seed, all on one grid of x values (the
    values of every series, widened by 5 % each side), so that coinciding distributions are
    found and outlined as coinciding lines are (:func:`_note_coinciding`); no markers (they
    would sit on each other at a common value)."""
    row[0].set_ylabel("share of slots (ECDF)")
    for v, ax in zip(facets, row, strict=True):
        ax.set_title(p.title if v is None else f"{p.title}, V = {v:g}", fontsize="medium")
        ax.set_xlabel(p.ylabel)
        ax.grid(alpha=0.3)
        samples: list[tuple[_Series, np.ndarray]] = []
        for s in series:
            rows = s.rows if v is None else s.rows[(s.rows["V"] == v) | s.rows["V"].isna()]
            values = p.scale * pd.to_numeric(rows[p.col], errors="coerce").dropna()
            if len(values):
                samples.append((s, np.sort(values.to_numpy(dtype=float))))
        if not samples:
            continue
        grid = np.unique(np.concatenate([x for _, x in samples]))
        pad = 0.05 * (grid[-1] - grid[0]) or 0.05 * max(abs(float(grid[0])), 1e-12)
        grid = np.concatenate([[grid[0] - pad], grid, [grid[-1] + pad]])
        drawn: list[tuple[str, Line2D | None]] = []
        for s, x in samples:
            style = _style(ranks[s.rest], s.scheme, color=colors.get(s.label))
            for key in ("marker", "markevery", "markersize"):
                style.pop(key)
            share = np.searchsorted(x, grid, side="right") / len(x)
            (line,) = ax.plot(grid, share, drawstyle="steps-post", label=s.label, **style)
            drawn.append((s.label, line))
        ax.set_ylim(-0.03, 1.03)
        _note_coinciding(ax, drawn)


def stable_parameters(slots: pd.DataFrame, title: str | None = None) -> Figure:
    """Percentage of stable parameters of the global model against the round (paper Fig. 1),
    from ``slots.stable_fraction``; one line per series, mean over seeds and 95 % band."""
    _need(slots, ["slot", "stable_fraction"], "stable parameters")
    data = slots.dropna(subset=["stable_fraction"])
    if data.empty:
        raise InsufficientData(
            "stable parameters: no stable_fraction values (network-only runs, or under 10 slots)"
        )
    data = data.assign(round=data["slot"] + 1)
    panel = _Panel("stable_fraction", 100.0, "stable parameters (%)", "Stable parameters", "")
    fig = _time_figure(
        data,
        "round",
        "training round t",
        [panel],
        title or "Percentage of stable parameters",
    )
    for ax in fig.axes:
        ax.set_ylim(0, 100)
    return fig


def time_evolution(slots: pd.DataFrame, title: str | None = None) -> Figure:
    """Running time-average of the energy per device-slot and of the cost z against the slot,
    one line per series (paper Figs. 3-4: E_av and z_av over the frames), mean over seeds and
    95 % band; one facet column per ``V`` when there are several. The cost depends on ``V`` for
    every scheme (``z = V X + Q E``), so each facet shows the runs at its ``V``."""
    _need(slots, ["run", "slot", "mean_energy_j", "mean_cost"], "time evolution")
    data = slots.sort_values(["run", "slot"], kind="stable").copy()
    grp = data.groupby("run")
    data["avg_energy_j"] = grp["mean_energy_j"].transform(lambda s: s.expanding().mean())
    data["avg_cost"] = grp["mean_cost"].transform(lambda s: s.expanding().mean())
    panels = [
        _Panel(
            "avg_energy_j",
            1.0,
            "average energy E_av\n(J per device-slot)",
            "Average energy",
            "no energy logged",
        ),
        _Panel(
            "avg_cost",
            1.0,
            f"average cost z_av\n= avg(V X + Q E) ({V_UNIT})",
            "Average cost",
            "no cost logged (the scheme has no Lyapunov cost)",
        ),
    ]
    return _time_figure(
        data,
        "slot",
        "slot t (communication round)",
        panels,
        title or "Time evolution of the average energy and cost",
        keep_v=True,
    )


def gamma_evolution(frames: pd.DataFrame, title: str | None = None) -> Figure:
    """Mean freezing fraction gamma over devices against the frame, one line per series that
    freezes anything (mean over seeds, 95 % band; facets by ``V``)."""
    _need(frames, ["run", "frame", "gamma"], "gamma evolution")
    data = frames.dropna(subset=["gamma"])
    labels = [lab for lab, r in iter_series(data) if (r["gamma"] > 0).any()]
    if not labels:
        raise InsufficientData("gamma evolution: no run freezes any parameter")
    keep = {
        s.label
        for s in _series(_one_v(data), ["V"] if _facet_values(data) != [None] else [])
        if (s.rows["gamma"] > 0).any()
    }
    panel = _Panel("gamma", 100.0, "mean freezing fraction gamma (%)", "Freezing fraction", "")
    return _time_figure(
        data,
        "frame",
        "frame k",
        [panel],
        title or "Freezing fraction over frames",
        only=sorted(keep),
    )


def queue_evolution(slots: pd.DataFrame, title: str | None = None) -> Figure:
    """Mean energy-deficit queue Q over devices against the slot, one line per series (mean over
    seeds, 95 % band; facets by ``V``; symmetric-log when one scheme dwarfs the rest)."""
    _need(slots, ["run", "slot", "mean_queue_j"], "queue evolution")
    panel = _Panel("mean_queue_j", 1.0, "mean queue length Q (J)", "Queue", "no queue logged")
    return _time_figure(
        slots,
        "slot",
        "slot t (communication round)",
        [panel],
        title or "Energy-deficit queue over time",
    )


def participation_and_latency(slots: pd.DataFrame, title: str | None = None) -> Figure:
    """The distribution of the slot latency (its ECDF over every slot of every seed: in a
    synchronous run most slots last the deadline, and per-frame means of every series would
    sit on each other) and, per frame (mean over its slots), participation and outage rate, one
    line per series (mean over seeds, 95 % band; facets by ``V``). Without a single outage in
    any run the outage row is left out and the title and notes say so, instead of drawing
    zeros."""
    cols = ["run", "frame", "slot_duration_s", "participation", "outage_rate"]
    _need(slots, cols, "participation and latency")
    panels = [
        _Panel(
            "slot_duration_s",
            1.0,
            "slot latency (s)",
            "Slot latency",
            "no slot logged",
            kind="ecdf",
        ),
        _Panel(
            "participation",
            100.0,
            "participating devices (%)",
            "Participation",
            "no participation logged",
        ),
        _Panel(
            "outage_rate",
            100.0,
            "outages (% of participants)",
            "Outage rate",
            "no outage in any run (every upload met the deadline, or the server waited for it)",
            nothing="zero",
        ),
    ]
    return _time_figure(
        slots,
        "frame",
        "frame k",
        panels,
        title or "Slot latency (distribution); participation and outages per frame",
    )
