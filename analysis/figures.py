"""Figures of the paper's experimental section (and a few more), from the tidy tables.

Every function takes DataFrames (from :mod:`wflsim.analysis.tidy` / :mod:`wflsim.analysis.stats`,
never paths) and returns a :class:`DataFigure`, a :class:`matplotlib.figure.Figure` built without
pyplot (no global state, no backend needed: ``fig.savefig("x.png")`` renders with Agg) that keeps
what it plots: ``fig.intervals`` (every band and set of error bars with the seeds' values behind it),
``fig.outliers`` (the outlier seeds it marks) and ``fig.notes`` (the lines that coincide, the
outlier seeds, the panels left out). Lines are *series*: runs with the same scheme and,
where they differ between the runs given, the same ``V``, dataset, partition, energy budget and
``variant``; runs of one series that differ only in their seed are averaged.

Conventions (the same in every figure):

* one colour and one marker per scheme, fixed (:data:`SCHEME_COLORS`, :data:`SCHEME_MARKERS`),
  whatever the figure or the runs given; the second variable (``V``, budget, partition, ...) is
  a line style, or a facet; the proposed scheme is drawn on top, the paper's benchmarks next;
* markers sit on about 8 points of a long line, each scheme's shifted along it, so that the
  markers of coinciding lines do not cover each other; two series whose lines coincide (within
  0.5 % of the panel's height, over the same x range) are said so in the panel's title ("Only-PC
  coincides with Proposed") and the lower line is drawn wider, an outline around the upper one;
* figures over time facet by ``V`` (one column per value) when it takes several values; schemes
  whose decisions ignore ``V`` (:data:`V_FREE_SCHEMES`, e.g. Ideal FL) are drawn once, not once
  per ``V`` (in the ``V`` figure: a horizontal line over the ``V`` range); panels that compare
  schemes side by side share their y axis;
* an axis where one series dwarfs another (10 times or more) is logarithmic (symmetric-log,
  linear near 0, where a value can be negative or 0); its label says so. The scale is chosen
  before anything is drawn, so that lines and bands are computed in it;
* with several seeds: the mean over seeds in the axis' scale (the geometric mean on a log axis)
  and its 95 % Student-t band or error bars, computed in that scale and cut to the range of the
  seeds' values (:func:`wflsim.analysis.stats.seed_intervals`): a band never reaches beyond the
  seeds, so the y range shows it whole; one seed: the line alone;
* an outlier seed (:func:`outlier_runs`, the rule of the claims' verdicts) whose line lies
  visibly apart from the other seeds' (:data:`OUTLIER_VISIBLE`) is drawn as its own thin dashed
  line, named at its end and in the legend ("Ideal FL: seed 1 (outlier)"); the mean and the band
  keep it, and :attr:`DataFigure.outliers` and the notes list it;
* no offset or scientific-offset tick notation; every axis says its unit (those of
  ``docs/trace.md``; ``V`` and the cost in J^2);
* a metric with nothing to draw (no outage at all, no cost logged) gets no panel: the title
  and the notes say why.

A function raises :class:`InsufficientData` when the tables cannot make its figure (e.g. a single
``V`` for the impact of ``V``); :func:`wflsim.analysis.report.write_report` turns that into a note.
"""

from __future__ import annotations

import textwrap
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex, to_rgb
from matplotlib.container import Container
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from .stats import outlier_mask, seed_intervals
from .tidy import SCHEME_LABELS

_F = TypeVar("_F", bound=Figure)


class InsufficientData(ValueError):
    """The tables given lack what the figure needs (the message says what)."""


#: Columns that split runs into series (in label order); ``seed`` never does.
SERIES_COLUMNS: list[str] = ["scheme", "V", "dataset", "partition", "energy_budget", "variant"]

#: The colour of each registered scheme, the same in every figure.
SCHEME_COLORS: dict[str, str] = {
    "two_timescale": "#d62728",  # Proposed: red
    "only_pf": "#2ca02c",  # green
    "only_pc": "#1f77b4",  # blue
    "ideal": "#303030",  # the reference: near-black
    "fixed_power": "#ff7f0e",  # orange
    "random_freezing": "#9467bd",  # purple
    "topk_ef": "#8c564b",  # brown
    "pruning": "#e377c2",  # pink
    "fedhq": "#bcbd22",  # olive
    "fjord": "#17becf",  # cyan
}
_SPARE_COLORS = ["#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94"]

#: The marker of each registered scheme, the same in every figure (with its colour, it tells
#: apart schemes whose lines coincide).
SCHEME_MARKERS: dict[str, str] = {
    "two_timescale": "o",
    "only_pf": "^",
    "only_pc": "s",
    "ideal": "D",
    "fixed_power": "v",
    "random_freezing": "P",
    "topk_ef": "X",
    "pruning": "*",
    "fedhq": "<",
    "fjord": ">",
}
_SPARE_MARKERS = ["h", "p", "8", "d", "H"]

#: The unit of the Lyapunov weight ``V`` and of the cost ``z = V X + Q E``: ``Q E`` is J x J and
#: ``X`` is dimensionless (``docs/trace.md``: ``cost`` in J^2).
V_UNIT = "J^2"

#: Schemes whose decisions do not depend on ``V`` (runs at several ``V`` are the same run).
V_FREE_SCHEMES: frozenset[str] = frozenset({"ideal", "fixed_power"})

_SCHEME_ORDER = {s: i for i, s in enumerate(SCHEME_LABELS)}
_LINESTYLES: list = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 3))]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]
#: Markers per line: about this many along a line, each scheme's shifted by a fraction of the
#: step, so that the markers of coinciding lines sit side by side, not on top of each other.
_MARKS_PER_LINE = 8
#: Two lines coincide when they differ by at most this share of the panel's y span (in the
#: axis' scale) wherever both are drawn: closer than a line's width.
_COINCIDE = 0.005
#: A line under a coinciding one is drawn this much wider (points; its markers larger): an
#: outline around the line on top.
_OUTLINE_WIDTH = 2.4
_OUTLINE_MARKER = 1.5
_OUTLINE_GID = "wflsim-outline"
_DATASETS = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "digits": "digits",
}
_PANEL = 4.2  # inches per panel (width)
_BAND_ALPHA = 0.18
_SYMLOG_RATIO = 10.0
#: Legend labels longer than this (characters) go below the panels, one per line.
_LONG_LABEL = 45


def scheme_color(scheme: str) -> str:
    """The colour of ``scheme`` (:data:`SCHEME_COLORS`; an unknown name gets a fixed spare one)."""
    if scheme in SCHEME_COLORS:
        return SCHEME_COLORS[scheme]
    return _SPARE_COLORS[zlib.crc32(scheme.encode()) % len(_SPARE_COLORS)]


def scheme_marker(scheme: str) -> str:
    """The marker of ``scheme`` (:data:`SCHEME_MARKERS`; an unknown name gets a fixed spare one)."""
    if scheme in SCHEME_MARKERS:
        return SCHEME_MARKERS[scheme]
    return _SPARE_MARKERS[zlib.crc32(scheme.encode()) % len(_SPARE_MARKERS)]


# --------------------------------------------------------------------------- series helpers


def _fmt(col: str, v: object) -> str:
    if col == "scheme":
        return SCHEME_LABELS.get(str(v), str(v))
    if col == "V":
        return f"V={float(v):g}"  # type: ignore[arg-type]
    if col == "dataset":
        return _DATASETS.get(str(v), str(v))
    if col == "energy_budget":
        return f"E_bar {v} J"
    return str(v)


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or str(v) in ("", "nan")


def series_columns(df: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """The columns of :data:`SERIES_COLUMNS` that split ``df`` into series: ``scheme`` always
    (when present), the others where they take more than one value."""
    cols = []
    for c in SERIES_COLUMNS:
        if c not in df.columns or c in exclude:
            continue
        if c == "scheme" or df[c].nunique(dropna=True) > 1:
            cols.append(c)
    return cols


def _sort_key(cols: list[str], key: tuple) -> tuple:
    out: list[tuple] = []
    for c, v in zip(cols, key, strict=True):
        if c == "scheme":
            out.append((_SCHEME_ORDER.get(v, len(_SCHEME_ORDER)), str(v)))
        else:
            out.append((1, 0) if _missing(v) else (0, v))
    return tuple(out)


@dataclass
class _Series:
    label: str
    scheme: str
    rest: tuple  # the values of the other series columns (line style and marker)
    rows: pd.DataFrame


def _series(df: pd.DataFrame, exclude: Sequence[str] = ()) -> list[_Series]:
    cols = series_columns(df, exclude)
    if not cols:
        return [_Series("all runs", "", (), df)] if len(df) else []
    groups = list(df.groupby(cols, sort=False, dropna=False))
    keys = [k if isinstance(k, tuple) else (k,) for k, _ in groups]
    order = sorted(range(len(groups)), key=lambda i: _sort_key(cols, keys[i]))
    out = []
    for i in order:
        pairs = [(c, v) for c, v in zip(cols, keys[i], strict=True) if not _missing(v)]
        label = ", ".join(_fmt(c, v) for c, v in pairs)
        scheme = str(dict(zip(cols, keys[i], strict=True)).get("scheme", ""))
        rest = tuple(v for c, v in zip(cols, keys[i], strict=True) if c != "scheme")
        out.append(_Series(label or "all runs", scheme, rest, groups[i][1]))
    return out


def iter_series(
    df: pd.DataFrame, exclude: Sequence[str] = ()
) -> Iterator[tuple[str, pd.DataFrame]]:
    """``(label, rows)`` per series of ``df``, the paper's schemes first (Proposed, Only-PF, ...)."""
    for s in _series(df, exclude):
        yield s.label, s.rows


def _one_v(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of :data:`V_FREE_SCHEMES` kept at one ``V`` only (the smallest of each configuration)
    and their ``V`` blanked (NaN), so that such a scheme is one series, not one per ``V`` (its
    runs at several ``V`` are the same runs)."""
    if "V" not in df.columns or "scheme" not in df.columns:
        return df
    free = df["scheme"].isin(V_FREE_SCHEMES)
    if not free.any():
        return df
    cols = [c for c in SERIES_COLUMNS if c in df.columns and c != "V"]
    first_v = df[free].groupby(cols, dropna=False)["V"].transform("min")
    keep = ~free | (df["V"] == first_v.reindex(df.index))
    out = df[keep].copy()
    out["V"] = out["V"].astype(float)
    out.loc[out["scheme"].isin(V_FREE_SCHEMES), "V"] = np.nan
    return out


def _facet_values(df: pd.DataFrame) -> list[float | None]:
    """The ``V`` facets: the ``V`` values of the schemes that use ``V`` when there are several,
    else ``[None]`` (no facets)."""
    if "V" not in df.columns or "scheme" not in df.columns:
        return [None]
    vs = sorted(df.loc[~df["scheme"].isin(V_FREE_SCHEMES), "V"].dropna().unique().tolist())
    return [float(v) for v in vs] if len(vs) > 1 else [None]


def _scheme_rank(scheme: str) -> int:
    return _SCHEME_ORDER.get(scheme, len(_SCHEME_ORDER))


def _markevery(n_points: int, scheme: str) -> int | tuple[int, int]:
    """Every point marked on short lines; on long ones about :data:`_MARKS_PER_LINE` markers,
    each scheme's shifted by its own fraction of the step (Proposed first, then a quarter of a
    step later for Only-PF, ...), so that coinciding lines show both markers."""
    step = n_points // _MARKS_PER_LINE
    if step < 2:
        return 1
    return ((_scheme_rank(scheme) % 4) * step // 4, step)


def _style(rank: int, scheme: str, n_points: int = 1) -> dict:
    """Colour, marker and drawing order from the scheme (the proposed scheme on top); line
    style from ``rank``, the series' place among the values of the other series columns."""
    return {
        "color": scheme_color(scheme) if scheme else "#303030",
        "linestyle": _LINESTYLES[rank % len(_LINESTYLES)],
        "marker": scheme_marker(scheme) if scheme else _MARKERS[rank % len(_MARKERS)],
        "markevery": _markevery(n_points, scheme),
        "markersize": 4.5,
        "linewidth": 1.6,
        # lines above the bands (z 1) and the grid; the paper's own schemes first, so on top
        "zorder": 3.0 - 0.01 * min(_scheme_rank(scheme), 99),
    }


def _ranks(series: Sequence[_Series]) -> dict[tuple, int]:
    rests = sorted({s.rest for s in series}, key=lambda r: tuple((_missing(v), str(v)) for v in r))
    # numbers sort as numbers (V=10 before V=100)
    rests = sorted(rests, key=lambda r: tuple((1, 0) if _missing(v) else (0, v) for v in r))
    return {r: i for i, r in enumerate(rests)}


@dataclass(frozen=True)
class Interval:
    """One band or set of error bars as drawn, with the seeds' values behind it (all arrays
    over the points ``x``, in the units of the axis)."""

    axes: Axes
    artist: Artist | Container  # the band (PolyCollection) or the error bars (a container)
    label: str
    x: np.ndarray  # numbers, or the categories of a categorical axis
    centre: np.ndarray  # the line or point: the mean in the axis' scale
    low: np.ndarray  # NaN where a single seed
    high: np.ndarray
    seed_min: np.ndarray  # the range of the seeds' values at x
    seed_max: np.ndarray
    n: np.ndarray  # seeds at x


class DataFigure(Figure):
    """A :class:`~matplotlib.figure.Figure` that keeps what it plots: :attr:`intervals`, every
    band and set of error bars with the seeds' values behind it, :attr:`outliers`, the outlier
    seeds it marks, and :attr:`notes`, what the figure says about coinciding lines, outlier
    seeds and panels left out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.intervals: list[Interval] = []
        self.notes: list[str] = []
        self.outliers: list[Outlier] = []
        self.pending: list[_Pending] = []


def _figure(
    n_panels: int,
    title: str,
    height: float = 3.4,
    rows: int = 1,
    sharey: bool | Literal["none", "all", "row", "col"] = False,
) -> tuple[DataFigure, list[Axes]]:
    fig = DataFigure(figsize=(_PANEL * n_panels, height * rows), layout="constrained")
    axes = fig.subplots(rows, n_panels, squeeze=False, sharey=sharey)
    fig.suptitle(title)
    return fig, [ax for row in axes for ax in row]


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
            if not lab.startswith("_") and (lab not in seen or _is_outline(seen[lab])):
                seen[lab] = h  # a line drawn as an outline in one panel: its own look if any
    if not seen:
        return
    rank = {lab: i for i, lab in enumerate(order)}
    labels = sorted(seen, key=lambda lab: rank.get(lab, len(rank)))
    handles = [_plain(seen[lab]) for lab in labels]
    w, h = fig.get_size_inches()
    longest = max(len(lab) for lab in labels)
    if len(axes) == 1 and len(labels) <= 5 and longest <= _LONG_LABEL:
        axes[0].legend(handles, labels, fontsize="small")
    elif len(labels) <= (6 if len(axes) == 1 else 12) and longest <= _LONG_LABEL:
        # a single panel is too short for a longer list beside it (it would cover the title)
        fig.set_size_inches(w + min(0.6 + 0.065 * longest, 4.5), h)
        # a narrow figure's title reaches over the legend's corner: beside the panels' middle
        if w >= 8.0:
            fig.legend(handles, labels, loc="outside right upper", fontsize="small")
        else:
            fig.legend(handles, labels, loc="outside right center", fontsize="small")
    else:  # many lines, or labels too long for the side: below, as wide as the labels need
        ncol = 1 if longest > _LONG_LABEL else min(4, (len(labels) + 5) // 6)
        width = max(w, min(0.065 * longest * ncol + 1.0, 16.0))
        fig.set_size_inches(width, h + 0.22 * -(-len(labels) // ncol) + 0.3)
        fig.legend(handles, labels, loc="outside lower center", fontsize="small", ncol=ncol)


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


def _need(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InsufficientData(f"{what}: the table lacks columns {missing}")
    if df.empty:
        raise InsufficientData(f"{what}: no rows")


def _mean_by(rows: pd.DataFrame, x: str, ys: Sequence[str]) -> pd.DataFrame:
    """Mean of ``ys`` per value of ``x`` over the runs (seeds) in ``rows``."""
    return rows.groupby(x, sort=True)[list(ys)].mean().reset_index()


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
    if "run" not in per_run.columns or per_run["run"].nunique() < 3:
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


@dataclass(frozen=True)
class Outlier:
    """An outlier seed a figure marks: its panel, the series' label, its name ("seed 1"), its
    line and where the line moves most (``step_at``: the ``x`` of its largest step, NaN for a
    level)."""

    axes: Axes
    label: str
    name: str
    line: Line2D
    step_at: float


@dataclass(frozen=True)
class _Pending:
    """An outlier seed found while drawing a series, marked once the panel's range is known
    (:func:`_mark_outliers`): the series' runs, the outlier's run, where its line goes."""

    ax: Axes
    per_run: pd.DataFrame
    run: object
    x: str
    y: str
    label: str
    style: dict
    xs: np.ndarray
    ys: np.ndarray


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


@dataclass(frozen=True)
class _Scale:
    name: Literal["linear", "log", "symlog"] = "linear"
    linthresh: float = 1.0


def _scale_for(peaks: Sequence[float], values: np.ndarray) -> _Scale:
    """A log scale when the largest series (peak absolute mean) is :data:`_SYMLOG_RATIO` times
    the smallest non-zero one or more: logarithmic when every value (every seed's) is
    positive, else symmetric-log (linear within the smallest series' order of magnitude)."""
    p = np.array([v for v in peaks if np.isfinite(v) and v > 0])
    if len(p) < 2 or p.max() < _SYMLOG_RATIO * p.min():
        return _Scale()
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) and v.min() > 0:
        return _Scale("log")
    return _Scale("symlog", float(10 ** np.floor(np.log10(p.min()))))


def _set_scale(axes: Sequence[Axes], scale: _Scale) -> None:
    """Put ``scale`` on ``axes`` and say it in their y labels."""
    if scale.name == "linear":
        return
    for ax in axes:
        if scale.name == "log":
            ax.set_yscale("log")
            note = "(log scale)"
        else:
            ax.set_yscale("symlog", linthresh=scale.linthresh, linscale=0.6)
            note = f"(symlog, linear within ±{scale.linthresh:g})"
        if ax.get_ylabel():
            ax.set_ylabel(ax.get_ylabel() + "\n" + note)


def _scale_from(axes: Sequence[Axes], per_runs: Sequence[pd.DataFrame], x: str, y: str) -> None:
    """:func:`_scale_for` the series ``per_runs`` (:func:`_per_run` tables of ``y`` against
    ``x``) put on ``axes``: call it before drawing, so that lines and bands are computed in the
    scale they are drawn in."""
    per_runs = [pr for pr in per_runs if len(pr)]
    values = np.concatenate([pr[y].to_numpy(dtype=float) for pr in per_runs] or [np.array([])])
    _set_scale(axes, _scale_for([_peak(pr, x, y) for pr in per_runs], values))


def _symlog_if_dwarfed(axes: Sequence[Axes], peaks: Sequence[float]) -> bool:
    """:func:`_scale_for` decided on the lines already drawn on ``axes`` (their means), put on
    ``axes`` (for :mod:`wflsim.analysis.channel`, which draws first); whether the axis became
    logarithmic."""
    ys = [np.asarray(ln.get_ydata(), dtype=float) for ax in axes for ln in ax.lines]
    scale = _scale_for(peaks, np.concatenate(ys) if ys else np.array([]))
    _set_scale(axes, scale)
    return scale.name != "linear"


def _fit_to_lines(axes: Sequence[Axes]) -> None:
    """The y range of ``axes`` from their lines (the means) and bands (for
    :mod:`wflsim.analysis.channel`)."""
    ys = [np.asarray(ln.get_ydata(), dtype=float) for ax in axes for ln in ax.lines]
    for ax in axes:
        for c in ax.collections:
            if isinstance(c, PolyCollection):
                ys += [np.asarray(p.vertices, dtype=float)[:, 1] for p in c.get_paths()]
    if not ys:
        return
    y = np.concatenate(ys)
    y = y[np.isfinite(y)]
    if not len(y):
        return
    lo, hi = float(y.min()), float(y.max())
    scale = axes[0].get_yscale()
    if scale == "log" and lo > 0:
        axes[0].set_ylim(lo / 1.4, hi * 1.4)
    elif scale == "linear":
        pad = 0.08 * (hi - lo) if hi > lo else 0.05 * max(abs(hi), 1e-12)
        axes[0].set_ylim(lo - pad, hi + pad)


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


def _note_coinciding(ax: Axes, drawn: Sequence[tuple[str, Line2D | None]]) -> list[str]:
    """Lines of different series that coincide (within :data:`_COINCIDE` of the panel's y span
    in the axis' scale, over the same x range): the lower one is drawn wider, as an outline
    around the one on top (markers of both stay visible), and the panel's title says
    "Only-PC coincides with Proposed". Call once the axis' scale is set. Returns the notes."""
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
        lines_out = [ax.get_title()] + [textwrap.fill(n, wrap) for n in notes]
        ax.set_title("\n".join(t for t in lines_out if t), fontsize="medium")
        if isinstance(fig, DataFigure):
            fig.notes += [n for n in notes if n not in fig.notes]
    return notes


def say_empty(ax: Axes, message: str) -> None:
    """An empty panel that says why: ``message`` in its middle, no ticks."""
    for artist in list(ax.lines) + list(ax.collections):
        artist.remove()
    ax.set_yscale("linear")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    ax.text(
        0.5,
        0.5,
        message,
        transform=ax.transAxes,
        ha="center",
        va="center",
        wrap=True,
        fontsize="medium",
        color="0.25",
    )


def _no_offset(fig: _F) -> _F:
    """No offset / scientific-offset tick notation on any axis; a flat range (all values equal
    to 1e-9 relative) is widened, so that its ticks do not need an offset."""
    for ax in fig.axes:
        for axis, get, set_ in (
            (ax.xaxis, ax.get_xlim, ax.set_xlim),
            (ax.yaxis, ax.get_ylim, ax.set_ylim),
        ):
            fmt = axis.get_major_formatter()
            if isinstance(fmt, ScalarFormatter):
                fmt.set_useOffset(False)
                fmt.set_scientific(False)
                lo, hi = get()
                mid = (lo + hi) / 2
                if hi - lo <= 1e-9 * max(abs(mid), 1e-300):
                    d = 0.05 * abs(mid) if mid != 0 else 1.0
                    set_(mid - d, mid + d)
    return fig


# --------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class _Panel:
    col: str
    scale: float
    ylabel: str
    title: str
    empty: str  # what the panel says when it has nothing to draw
    nothing: str = "nan"  # "zero": all values 0 also count as nothing to draw


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

    ``keep_v``: the schemes of :data:`V_FREE_SCHEMES` keep their ``V`` (a metric that depends on
    ``V`` even when the decisions do not, e.g. the cost ``V X + Q E``), so a facet shows the run at
    its own ``V``. ``only``: draw only these series labels.

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
    for p, row in zip(panels, grid, strict=True):
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
            style = _style(ranks[s.rest], s.scheme)
            line = _draw_band(ax, pr, x, p.col, s.label, style, s.scheme, alpha)
            drawn[ax].append((s.label, line))
        for ax in row:
            _note_coinciding(ax, drawn[ax])
        if p.scale == 100.0 and row[0].get_yscale() == "linear":
            row[0].set_ylim(bottom=0)
    _legend(fig, flat, order=[s.label for s in series])
    _no_offset(fig)
    return fig


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
    for ax, (col, ylabel, sub) in zip(axes, panels, strict=True):
        ax.set_ylabel(ylabel)
        sloped = [(s, _per_run(s.rows, "V", col)) for s in series]
        level = [(s, _per_run(s.rows.assign(V=v_lo), "V", col)) for s in flat]
        _scale_from([ax], [pr for _, pr in sloped + level], "V", col)
        drawn: list[tuple[str, Line2D | None]] = []
        for s, pr in sloped:
            style = _style(ranks[s.rest], s.scheme)
            drawn.append((s.label, _draw_errorbars(ax, pr, "V", col, s.label, style)))
        for s, pr in level:
            label = f"{s.label} (ignores V)"
            drawn.append((label, _draw_level(ax, pr, col, (v_lo, v_hi), label, s, ranks)))
        ax.set_xlabel(f"control parameter V ({V_UNIT})")
        ax.set_title(sub, fontsize="medium")
        if log_x:
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
        _note_coinciding(ax, drawn)
    order = [s.label for s in series] + [f"{s.label} (ignores V)" for s in flat]
    order = sorted(order, key=lambda lab: _label_rank(lab, series + flat))
    _legend(fig, axes, order=order)
    return _no_offset(fig)


def _draw_level(
    ax: Axes,
    per_run: pd.DataFrame,
    y: str,
    xs: tuple[float, float],
    label: str,
    s: _Series,
    ranks: dict[tuple, int],
) -> Line2D | None:
    """A scheme that ignores ``V``: its mean over seeds (in the axis' scale) as a thick
    horizontal line over ``xs`` and, with several seeds, its interval as a band."""
    m = seed_intervals(per_run.assign(V=0.0), ["V"], y, _axis_transform(ax))
    if m.empty:
        return None
    style = _style(ranks[s.rest], s.scheme)
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
) -> None:
    """One panel of test accuracy (%) against ``x`` for the runs of one (dataset, partition):
    per series, x is the mean over seeds at each evaluation, y the mean and 95 % band; only the
    evaluations from slot ``first_slot`` on (``None``: all, the one before training at slot -1
    too)."""
    dataset, partition = key
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
        style = _style(ranks[s.rest], s.scheme)
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
    for ax, key in zip(axes, panels, strict=True):
        _accuracy_panel(ax, series, ranks, key, x, xlabel)
    _legend(fig, axes, order=[s.label for s in series])
    return _no_offset(fig)


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
    for i, key in enumerate(panels):
        on = data[(data["dataset"] == key[0]) & (data["partition"] == key[1])]
        half = 0.5 * float(on["slot"].max() + 1)  # slots are counted from 0
        for j, (x, xlabel) in enumerate(_LATE_AXES):
            _accuracy_panel(axes[i * len(_LATE_AXES) + j], series, ranks, key, x, xlabel, half)
    _legend(fig, axes, order=[s.label for s in series])
    return _no_offset(fig)


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
    fig, axes = _figure(2, title or "Staleness of the updates and what became of them")
    ax, bx = axes
    top = int(np.nanpercentile(applied["staleness"], 99)) if len(applied) else 0
    outcomes = ["applied", "stale", "dropped"]
    width = 0.8 / max(1, len(series))
    drawn: list[tuple[str, Line2D | None]] = []
    for i, s in enumerate(series):
        style = _style(ranks[s.rest], s.scheme)
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
    return _no_offset(fig)


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
    x = "energy_budget_mean_j"
    lo, hi = float(data[x].min()), float(data[x].max())
    for i, (ax, (col, ylabel, sub)) in enumerate(zip(axes, panels, strict=True)):
        ax.set_ylabel(ylabel)
        cells = [(s, _per_run(s.rows, x, col)) for s in series]
        _scale_from([ax], [pr for _, pr in cells], x, col)
        drawn = [
            (s.label, _draw_errorbars(ax, pr, x, col, s.label, _style(ranks[s.rest], s.scheme)))
            for s, pr in cells
        ]
        if i == 0:
            ax.plot([lo, hi], [lo, hi], "k--", linewidth=1, label="E_av = E_bar")
        ax.set_xlabel("energy budget E_bar (J per slot)")
        ax.set_title(sub, fontsize="medium")
        ax.grid(alpha=0.3)
        _note_coinciding(ax, drawn)
    _legend(fig, axes)
    return _no_offset(fig)


def shade(color: str, k: int, n: int) -> str:
    """The ``k``-th of ``n`` shades of ``color`` (hex): the colour itself for ``k = 0``, then
    lighter, up to halfway to white for ``k = n - 1``: series of one scheme told apart by
    shade, keeping the scheme's hue."""
    if n <= 1 or k <= 0:
        return to_hex(color)
    t = 0.5 * min(k, n - 1) / (n - 1)
    rgb = np.asarray(to_rgb(color))
    return to_hex(tuple(rgb + t * (1.0 - rgb)))


def energy_budget_per_device(per_device: pd.DataFrame, title: str | None = None) -> Figure:
    """Each device's average energy per slot and average queue length against its own budget
    E_bar_n (``wflsim.analysis.stats.energy_per_device``: one point per device and run): one
    row of two panels (energy, queue) per scheme and, where it takes several values, per ``V``
    (a scheme that ignores ``V`` once), so that neither schemes nor ``V`` values pile up on each
    other; within a panel the other series columns (partition, variant, ...) are shades of the
    scheme's colour and markers. Each column has one y axis for every row; the dashed line in
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
    for i, (scheme, v) in enumerate(facets):
        mine = [s for s in series if s.scheme == scheme]
        ranks = _ranks(mine)
        name = SCHEME_LABELS.get(scheme, scheme or "all runs")
        row_title = name if v is None else f"{name}, V = {v:g}"
        for j, (col, _, what) in enumerate(panels):
            ax = grid[i][j]
            for s in mine:
                rows = s.rows if v is None else s.rows[s.rows["V"] == v]
                if rows.empty:
                    continue
                k = ranks[s.rest]
                style = _style(k, s.scheme)
                for key in ("markevery", "linestyle", "color", "marker"):
                    style.pop(key)
                ax.plot(
                    rows["energy_budget_j"],
                    rows[col],
                    linestyle="none",
                    alpha=0.6,
                    label=s.label,
                    color=shade(scheme_color(scheme), k, len(ranks)),
                    marker=scheme_marker(scheme) if k == 0 else _MARKERS[k % len(_MARKERS)],
                    **style,
                )
            if j == 0:
                ax.plot([lo, hi], [lo, hi], "k--", linewidth=1, label="E_av = E_bar")
            ax.set_title(f"{row_title}: {what}", fontsize="medium")
            ax.set_xlabel("device's budget E_bar_n (J per slot)")
            ax.tick_params(labelbottom=True)
            ax.grid(alpha=0.3)
    axes = [ax for row in grid for ax in row]
    _legend(fig, axes, order=[s.label for s in series])
    return _no_offset(fig)


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
    """Per frame (mean over its slots): slot latency, participation and outage rate, one line
    per series (mean over seeds, 95 % band; facets by ``V``). Without a single outage in any run
    the outage row is left out and the title and notes say so, instead of drawing zeros."""
    cols = ["run", "frame", "slot_duration_s", "participation", "outage_rate"]
    _need(slots, cols, "participation and latency")
    panels = [
        _Panel("slot_duration_s", 1.0, "mean slot latency (s)", "Round latency", "no slot logged"),
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
        title or "Latency, participation and outages per frame",
    )
