"""What is drawn of the seeds: the mean over seeds with its 95 % band or error bars
(recorded as :class:`~wflsim.analysis.figures.common.Interval`), the outlier seeds
(:func:`outlier_runs`, marked as their own dashed lines when :data:`OUTLIER_VISIBLE` apart),
coinciding lines (outlined, and named in the panel's title), and the figure's legend, which
lists the outlier seeds and shows outlined lines in their own look.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.container import Container
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..stats import OUTLIER_MIN_SEEDS, outlier_mask, seed_intervals
from .common import (
    _BAND_ALPHA,
    _PANEL,
    DataFigure,
    Interval,
    Outlier,
    _markevery,
    _Pending,
    _scale_for,
    _set_scale,
)

#: Two lines coincide when they differ by at most this share of the panel's y span (in the
#: axis' scale) wherever both are drawn: closer than a line's width.
_COINCIDE = 0.005
#: A line under a coinciding one is drawn this much wider (points; its markers larger): an
#: outline around the line on top.
_OUTLINE_WIDTH = 2.4
_OUTLINE_MARKER = 1.5
_OUTLINE_GID = "wflsim-outline"


#: Legend labels longer than this (characters) go below the panels, one per line.
_LONG_LABEL = 45


def _legend(fig: Figure, axes: Sequence[Axes], order: Sequence[str] = ()) -> None:
    """One legend for the figure (labels of all panels, once each, those in ``order`` first and
    in that order): inside a single panel when there are few lines, else outside, to the right
    (or below, when there are many). The outlier seeds found while drawing are marked first
    (:func:`_mark_outliers`), each right after its series in the legend."""
    _mark_outliers(fig)
    marked: dict[str, list[str]] = {}
    for o in getattr(fig, "outliers", []):
        text = _outlier_label(o.label, o.name)
        if text not in marked.setdefault(o.label, []):
            marked[o.label].append(text)
    order = [t for lab in order for t in [lab, *marked.get(lab, [])]]
    seen: dict[str, Artist] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if not lab.startswith("_") and (
                lab not in seen or _is_outline(seen[lab]) or _unmarked(seen[lab], h)
            ):
                # a line drawn as an outline, or without markers (an ECDF), in one panel: its
                # own look, with its markers, from another if any
                seen[lab] = h
    if not seen:
        return
    rank = {lab: i for i, lab in enumerate(order)}
    labels = sorted(seen, key=lambda lab: rank.get(lab, len(rank)))
    handles = [_plain(seen[lab]) for lab in labels]
    w, h = fig.get_size_inches()
    title = getattr(fig, "legend_title", None)
    kw: dict[str, Any] = {"fontsize": "small", "title": title, "title_fontsize": "small"}
    if isinstance(fig, DataFigure):
        fig.legend_entries = (handles, labels)
    longest = max([len(lab) for lab in labels] + [int(0.9 * len(title or ""))])
    if len(axes) == 1 and len(labels) <= 5 and longest <= _LONG_LABEL:
        axes[0].legend(handles, labels, **kw)
    elif len(labels) <= (6 if len(axes) == 1 else 12) and longest <= _LONG_LABEL:
        # a single panel is too short for a longer list beside it (it would cover the title)
        fig.set_size_inches(w + min(0.6 + 0.065 * longest, 4.5), h)
        # a narrow figure's title reaches over the legend's corner: beside the panels' middle
        if w >= 8.0:
            fig.legend(handles, labels, loc="outside right upper", **kw)
        else:
            fig.legend(handles, labels, loc="outside right center", **kw)
    else:  # many lines, or labels too long for the side: below, as wide as the labels need
        ncol = 1 if longest > _LONG_LABEL else min(4, (len(labels) + 5) // 6)
        width = max(w, min(0.065 * longest * ncol + 1.0, 16.0))
        fig.set_size_inches(width, h + 0.22 * -(-len(labels) // ncol) + 0.3)
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol, **kw)


def _unmarked(handle: Artist, other: Artist) -> bool:
    """Whether ``handle`` is a line without markers and ``other`` a plain line with them."""
    return (
        isinstance(handle, Line2D)
        and isinstance(other, Line2D)
        and handle.get_marker() in ("None", "", None)
        and other.get_marker() not in ("None", "", None)
        and not _is_outline(other)
    )


def _is_outline(handle: Artist) -> bool:
    return isinstance(handle, Line2D) and str(handle.get_gid()).startswith(_OUTLINE_GID)


def _plain(handle: Artist) -> Artist:
    """A legend handle with the series' own look: a line drawn as an outline under a
    coinciding one (:func:`_note_coinciding`) gets a copy at its usual width."""
    if not isinstance(handle, Line2D) or not _is_outline(handle):
        return handle
    _, width, size = str(handle.get_gid()).split()
    return Line2D(
        [],
        [],
        color=handle.get_color(),
        linestyle=handle.get_linestyle(),
        marker=handle.get_marker(),
        linewidth=float(width),
        markersize=float(size),
    )


def _per_run(rows: pd.DataFrame, x: str, y: str, scale: float = 1.0) -> pd.DataFrame:
    """``scale * y`` per run and value of ``x`` (a run's rows at one ``x`` averaged), NaN left
    out: columns ``run``, ``x``, ``y`` and, where ``rows`` has it, the run's ``seed``."""
    rows = rows.dropna(subset=[y])
    if "run" in rows.columns:
        out = rows.groupby(["run", x], sort=True)[y].mean().reset_index()
        if "seed" in rows.columns:
            seeds = rows.drop_duplicates("run").set_index("run")["seed"]
            out["seed"] = out["run"].map(seeds)
    else:
        out = rows[[x, y]].assign(run="")
    return out.assign(**{y: scale * out[y].astype(float)})


def _run_name(per_run: pd.DataFrame, run: object) -> str:
    """How a figure names one run of a series: "seed 1" (its seed), else "run <name>"."""
    if "seed" in per_run.columns:
        seeds = per_run.loc[per_run["run"] == run, "seed"].dropna().unique()
        if len(seeds) == 1:
            seed = seeds[0]
            return f"seed {int(seed) if float(seed).is_integer() else seed}"
    return f"run {run}"


def outlier_runs(per_run: pd.DataFrame, x: str, y: str) -> list[object]:
    """The runs of a series (a :func:`_per_run` table) that are outlier seeds by the rule of
    :func:`wflsim.analysis.stats.outlier_mask`, applied to each run's mean of ``y`` over its
    ``x`` values (the values as measured, not in the axis' scale): the same rule the claims'
    verdicts name outliers by (docs/decisions.md, "Verdicts and outlier seeds")."""
    if "run" not in per_run.columns or per_run["run"].nunique() < OUTLIER_MIN_SEEDS:
        return []
    means = per_run.groupby("run", sort=True)[y].mean()
    return [
        run for run, out in zip(means.index, outlier_mask(means.to_numpy()), strict=True) if out
    ]


#: How an outlier seed's own line is drawn: thin, dashed, in its scheme's colour.
_OUTLIER_STYLE: dict[str, Any] = {"linewidth": 0.9, "linestyle": (0, (4, 2)), "alpha": 0.95}
#: An outlier seed is marked in a panel where its line lies somewhere at least this share of the
#: panel's height (in the axis' scale) from the mean of the other seeds: visibly apart (a seed
#: that makes most of a spread too small to see, or that differs only in the first noisy slots
#: where every seed does, is not marked).
OUTLIER_VISIBLE = 0.10


def _find_outliers(
    ax: Axes,
    per_run: pd.DataFrame,
    x: str,
    y: str,
    label: str,
    style: dict,
    x_values: pd.Series | None = None,
    lines: pd.DataFrame | None = None,
) -> None:
    """Keep the outlier seeds of a series (:func:`outlier_runs` of ``per_run``) for
    :func:`_mark_outliers`. ``x_values``: where to draw each ``x`` (as :func:`_draw_band`);
    ``lines``: what to draw for each run instead of its rows of ``per_run`` (a level)."""
    fig = ax.get_figure(root=True)
    if not isinstance(fig, DataFigure):
        return
    drawn = per_run if lines is None else lines
    for run in outlier_runs(per_run, x, y):
        own = drawn[drawn["run"] == run].sort_values(x)
        xs = own[x] if x_values is None else x_values.reindex(own[x])
        fig.pending.append(
            _Pending(
                ax,
                per_run,
                run,
                x,
                y,
                label,
                style,
                np.asarray(xs, dtype=float),
                own[y].to_numpy(dtype=float),
            )
        )


def _apart(p: _Pending) -> bool:
    """Whether the outlier's line lies somewhere at least :data:`OUTLIER_VISIBLE` of the
    panel's height from the mean of the other seeds (both in the axis' scale)."""
    fwd = p.ax.yaxis.get_transform().transform
    mine = p.per_run[p.per_run["run"] == p.run].groupby(p.x)[p.y].mean()
    others = p.per_run[p.per_run["run"] != p.run]
    if mine.empty or others.empty:
        return False
    with np.errstate(divide="ignore", invalid="ignore"):
        lo, hi = np.asarray(fwd(np.asarray(p.ax.get_ylim(), dtype=float)), dtype=float)
        t = np.asarray(fwd(others[p.y].to_numpy(dtype=float)), dtype=float)
        centre = pd.Series(t).groupby(others[p.x].to_numpy()).mean()
        own = pd.Series(np.asarray(fwd(mine.to_numpy(dtype=float)), dtype=float), mine.index)
    gap = (own - centre.reindex(own.index)).abs().to_numpy(dtype=float)
    gap = gap[np.isfinite(gap)]
    span = abs(float(hi - lo))
    return bool(len(gap) and np.isfinite(span) and span > 0 and gap.max() >= OUTLIER_VISIBLE * span)


def _mark_outliers(fig: Figure) -> None:
    """Draw the outlier seeds found while drawing ``fig`` (:func:`_find_outliers`) that lie
    visibly apart (:func:`_apart`): each as its own thin dashed line in its series' colour,
    named at its end ("seed 1") and in the legend ("Ideal FL: seed 1 (outlier)"); the notes
    say where its line moves most. The series' mean and band keep every seed. Called by
    :func:`_legend`, once the panels' ranges are known."""
    if not isinstance(fig, DataFigure):
        return
    pending, fig.pending = fig.pending, []
    for p in [p for p in pending if _apart(p)]:
        name = _run_name(p.per_run, p.run)
        (line,) = p.ax.plot(
            p.xs,
            p.ys,
            color=p.style["color"],
            label=_outlier_label(p.label, name),
            zorder=p.style["zorder"] - 0.5,
            **_OUTLIER_STYLE,
        )
        p.ax.annotate(
            name,
            (p.xs[-1], p.ys[-1]),
            xytext=(-2, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize="x-small",
            color=p.style["color"],
        )
        step_at, where = float("nan"), ""
        own = p.per_run[p.per_run["run"] == p.run].sort_values(p.x)
        ys = own[p.y].to_numpy(dtype=float)
        if len(ys) > 2 and np.isfinite(ys).sum() > 2:
            k = int(np.nanargmax(np.abs(np.diff(ys)))) + 1
            step_at = float(own[p.x].iloc[k])
            where = f"; its largest step is at {p.x} {step_at:g}"
        fig.outliers.append(Outlier(p.ax, p.label, name, line, step_at))
        title = p.ax.get_title().splitlines()[0] if p.ax.get_title() else ""
        panel = title.split(", V = ")[0]
        note = (
            f"{panel + ': ' if panel else ''}{p.label}, {name} is an outlier seed (dashed "
            f"line{where}); the line and band are the mean and interval over all "
            f"{p.per_run['run'].nunique()} seeds"
        )
        if note not in fig.notes:
            fig.notes.append(note)


def _outlier_label(label: str, name: str) -> str:
    return f"{label}: {name} (outlier)"


def _peak(per_run: pd.DataFrame, x: str, y: str) -> float:
    """The largest absolute mean over seeds of ``y`` (NaN: nothing)."""
    means = per_run.groupby(x)[y].mean().abs()
    return float(means.max()) if len(means) else float("nan")


def _axis_transform(ax: Axes) -> tuple[Callable, Callable]:
    """``(forward, inverse)`` of the y axis' scale (identity, log10, symmetric log)."""
    tr = ax.yaxis.get_transform()
    return tr.transform, tr.inverted().transform


def _record(
    ax: Axes, artist: Artist | Container, label: str, x: np.ndarray, m: pd.DataFrame, y: str
) -> None:
    fig = ax.get_figure(root=True)
    if isinstance(fig, DataFigure):
        fig.intervals.append(
            Interval(
                ax,
                artist,
                label,
                np.asarray(x),
                m[y].to_numpy(dtype=float),
                m[y + "_ci_low"].to_numpy(dtype=float),
                m[y + "_ci_high"].to_numpy(dtype=float),
                m[y + "_min"].to_numpy(dtype=float),
                m[y + "_max"].to_numpy(dtype=float),
                m["n"].to_numpy(),
            )
        )


def _draw_band(
    ax: Axes,
    per_run: pd.DataFrame,
    x: str,
    y: str,
    label: str,
    style: dict,
    scheme: str,
    alpha: float = _BAND_ALPHA,
    x_values: pd.Series | None = None,
) -> Line2D | None:
    """The mean over seeds of ``y`` against ``x`` in the axis' scale (geometric on a log axis)
    and, with several seeds, its 95 % band (:func:`wflsim.analysis.stats.seed_intervals`: a
    Student-t interval in the axis' scale, cut to the seeds' range). The axis' scale must be set
    first. ``x_values``: what to plot at each ``x`` instead (indexed by ``x``). Returns the line."""
    m = seed_intervals(per_run, [x], y, _axis_transform(ax))
    if m.empty:
        return None
    xs = m[x] if x_values is None else x_values.reindex(m[x]).to_numpy()
    st = dict(style, markevery=_markevery(len(m), scheme))
    (line,) = ax.plot(xs, m[y], label=label, **st)
    band = (m["n"] > 1).to_numpy()
    if band.any():
        poly = ax.fill_between(
            xs,
            m[y + "_ci_low"],
            m[y + "_ci_high"],
            where=band,
            color=st["color"],
            alpha=alpha,
            linewidth=0,
        )
        _record(ax, poly, label, np.asarray(xs, dtype=float), m, y)
    _find_outliers(ax, per_run, x, y, label, st, x_values)
    return line


def _draw_errorbars(
    ax: Axes, per_run: pd.DataFrame, x: str, y: str, label: str, style: dict
) -> Line2D | None:
    """Mean over seeds of ``y`` per ``x`` in the axis' scale with its 95 % interval as error
    bars (where several seeds; in the axis' scale, cut to the seeds' range). Returns the line."""
    m = seed_intervals(per_run, [x], y, _axis_transform(ax))
    if m.empty:
        return None
    st = dict(style)
    st.pop("markevery", None)
    several = (m["n"] > 1).to_numpy()
    lo = (m[y] - m[y + "_ci_low"]).fillna(0.0).to_numpy()
    hi = (m[y + "_ci_high"] - m[y]).fillna(0.0).to_numpy()
    err = np.vstack([lo, hi]) if several.any() else None
    bars = ax.errorbar(m[x], m[y], yerr=err, label=label, capsize=3, **st)
    if several.any():
        _record(ax, bars, label, m[x].to_numpy(), m, y)
    line = bars.lines[0]
    return line if isinstance(line, Line2D) else None


def _band_line(
    ax: Axes,
    rows: pd.DataFrame,
    x: str,
    y: str,
    scale: float,
    label: str,
    style: dict,
    alpha: float = _BAND_ALPHA,
) -> float:
    """:func:`_draw_band` of ``scale * y`` from the rows of the runs, in the axis' current
    scale, for figures that choose their scale after drawing (:mod:`wflsim.analysis.channel`; a band
    never leaves the seeds' values, so never the values ``y`` can take); returns the largest
    absolute mean drawn (NaN: nothing)."""
    per_run = _per_run(rows, x, y, scale)
    scheme = str(rows["scheme"].iloc[0]) if "scheme" in rows.columns and len(rows) else ""
    _draw_band(ax, per_run, x, y, label, style, scheme, alpha)
    return _peak(per_run, x, y)


def _point_errorbars(
    ax: Axes, rows: pd.DataFrame, x: str, y: str, label: str, style: dict
) -> float:
    """:func:`_draw_errorbars` from the rows of the runs, in the axis' current scale (for
    :mod:`wflsim.analysis.channel`); returns the largest absolute mean (NaN: nothing)."""
    per_run = _per_run(rows, x, y)
    _draw_errorbars(ax, per_run, x, y, label, style)
    return _peak(per_run, x, y)


def _scale_from(axes: Sequence[Axes], per_runs: Sequence[pd.DataFrame], x: str, y: str) -> None:
    """:func:`_scale_for` the series ``per_runs`` (:func:`_per_run` tables of ``y`` against
    ``x``) put on ``axes``: call it before drawing, so that lines and bands are computed in the
    scale they are drawn in."""
    per_runs = [pr for pr in per_runs if len(pr)]
    values = np.concatenate([pr[y].to_numpy(dtype=float) for pr in per_runs] or [np.array([])])
    _set_scale(axes, _scale_for([_peak(pr, x, y) for pr in per_runs], values))


def _curve(ax: Axes, line: Line2D) -> tuple[np.ndarray, np.ndarray]:
    """A line's points in the axis' scale, finite ones only, sorted by x."""
    x = np.asarray(line.get_xdata(), dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.asarray(ax.yaxis.get_transform().transform(np.asarray(line.get_ydata(), float)))
    ok = np.isfinite(x) & np.isfinite(y)
    order = np.argsort(x[ok], kind="stable")
    return x[ok][order], y[ok][order]


def _coincide(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], tol: float
) -> bool:
    """Whether two curves span the same x range and differ by at most ``tol`` (in y) at
    every point of either (each interpolated at the other's points)."""
    (xa, ya), (xb, yb) = a, b
    if len(xa) < 1 or len(xb) < 1:
        return False
    span = max(xa[-1], xb[-1]) - min(xa[0], xb[0])
    if abs(xa[0] - xb[0]) > 1e-9 * span or abs(xa[-1] - xb[-1]) > 1e-9 * span:
        return False
    if len(xa) == 1 or len(xb) == 1:
        return len(xa) == len(xb) and abs(float(ya[0] - yb[0])) <= tol
    gap_a = np.abs(ya - np.interp(xa, xb, yb))
    gap_b = np.abs(yb - np.interp(xb, xa, ya))
    return bool(max(gap_a.max(), gap_b.max()) <= tol)


#: A panel's title says which lines coincide in at most this many lines of text; beyond, it says
#: how many do and the figure's notes name them (many series: the panel would have no room left).
_TITLE_NOTE_LINES = 3


def _note_coinciding(ax: Axes, drawn: Sequence[tuple[str, Line2D | None]]) -> list[str]:
    """Lines of different series that coincide (within :data:`_COINCIDE` of the panel's y span
    in the axis' scale, over the same x range): the lower one is drawn wider, as an outline
    around the one on top (markers of both stay visible), and the panel's title says
    "Only-PC coincides with Proposed" (beyond :data:`_TITLE_NOTE_LINES` lines of such text, how
    many lines coincide; the figure's notes name them). Call once the axis' scale is set.
    Returns the notes."""
    lines = [(label, ln) for label, ln in drawn if ln is not None]
    lines.sort(key=lambda item: -item[1].get_zorder())  # top first
    curves = [_curve(ax, ln) for _, ln in lines]
    ys = np.concatenate([y for _, y in curves]) if curves else np.array([])
    if len(ys) == 0:
        return []
    tol = _COINCIDE * max(float(ys.max() - ys.min()), 1e-12 * float(np.abs(ys).max()), 1e-300)
    under: dict[str, list[str]] = {}  # the label on top -> the labels it hides
    below: set[int] = set()
    for i, (top, _) in enumerate(lines):
        for j in range(i + 1, len(lines)):
            label, line = lines[j]
            if j in below or label == top or not _coincide(curves[i], curves[j], tol):
                continue
            below.add(j)
            under.setdefault(top, []).append(label)
            k = len(under[top])  # the k-th line under this one: an outline around the others
            width, size = line.get_linewidth(), line.get_markersize()
            line.set_gid(f"{_OUTLINE_GID} {width} {size}")  # its own look, for the legend
            line.set_linewidth(width + k * _OUTLINE_WIDTH)
            line.set_markersize(size + k * _OUTLINE_MARKER)
    notes = [
        f"{' and '.join(hidden)} {'coincides' if len(hidden) == 1 else 'coincide'} with {top}"
        for top, hidden in under.items()
    ]
    if notes:
        fig = ax.get_figure(root=True)
        width_in = ax.get_position().width * fig.get_figwidth() if fig is not None else _PANEL
        wrap = max(30, int(11 * width_in))  # characters per title line at the title's size
        said = [textwrap.fill(n, wrap) for n in notes]
        long = sum(t.count("\n") + 1 for t in said) > _TITLE_NOTE_LINES
        if long and isinstance(fig, DataFigure):  # the figure's notes list them
            hidden = sum(len(h) for h in under.values())
            said = [
                textwrap.fill(
                    f"{hidden} {'line coincides' if hidden == 1 else 'lines coincide'} with "
                    "another (listed in the notes)",
                    wrap,
                )
            ]
        lines_out = [ax.get_title(), *said]
        ax.set_title("\n".join(t for t in lines_out if t), fontsize="medium")
        if isinstance(fig, DataFigure):
            fig.notes += [n for n in notes if n not in fig.notes]
    return notes
