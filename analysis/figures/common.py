"""The common machinery of the figures: the fixed colour and marker of each scheme
(:data:`SCHEME_COLORS`, :data:`SCHEME_MARKERS`) and the other styles, the series a table splits
into (:data:`SERIES_COLUMNS`, :func:`iter_series`, the ``V`` facets), :class:`DataFigure` and the
:class:`Interval` records it keeps, the figure and panel helpers, the choice of a log or
symmetric-log axis, :func:`say_empty` and :class:`InsufficientData`.
"""

from __future__ import annotations

import io
import textwrap
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
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
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator, ScalarFormatter
from matplotlib.transforms import Bbox

from ..tidy import SCHEME_LABELS

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
#: The colours of the series of a figure whose series are all of one scheme (its colour alone
#: would not tell them apart): matplotlib's tab20, the dark shades first, then the light ones.
_SERIES_COLORS = [
    *("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"),
    *("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"),
    *("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5"),
    *("#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5"),
]

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


_DATASETS = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "digits": "digits",
}
_PANEL = 4.2  # inches per panel (width)
_BAND_ALPHA = 0.18
_SYMLOG_RATIO = 10.0


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


def one_scheme_colors(series: Sequence[_Series]) -> dict[str, str]:
    """Series label -> colour when several series are all of one scheme (a study of one
    scheme's variants: strategies, server modes, uplinks), one colour each in series order;
    empty otherwise, where each series has its scheme's colour."""
    if len(series) < 2 or len({s.scheme for s in series}) > 1:
        return {}
    return {s.label: _SERIES_COLORS[i % len(_SERIES_COLORS)] for i, s in enumerate(series)}


def shade(color: str, k: int, n: int) -> str:
    """The ``k``-th of ``n`` shades of ``color`` (hex): the colour itself for ``k = 0``, then
    lighter, up to halfway to white for ``k = n - 1``: series of one scheme told apart by
    shade, keeping the scheme's hue."""
    if n <= 1 or k <= 0:
        return to_hex(color)
    t = 0.5 * min(k, n - 1) / (n - 1)
    rgb = np.asarray(to_rgb(color))
    return to_hex(tuple(rgb + t * (1.0 - rgb)))


#: The legend's title where series of several schemes also differ in another swept setting
#: (strategy, uplink, partition, ...): how the two are told apart.
SHADE_LEGEND_TITLE = "colour: scheme; shade and line style: the rest of the label"


def series_colors(series: Sequence[_Series]) -> dict[str, str]:
    """Series label -> colour, for series that are not told apart by their scheme's colour
    alone: several series of one scheme only get :func:`one_scheme_colors`; series of several
    schemes, some of which come in several settings (strategies, uplinks, ...), get shades of
    their scheme's colour (:func:`shade`: the first setting the colour itself, the next
    lighter), so that the hue still says the scheme. Empty where each scheme has one series."""
    own = one_scheme_colors(series)
    if own:
        return own
    out: dict[str, str] = {}
    for scheme in dict.fromkeys(s.scheme for s in series):
        mine = [s for s in series if s.scheme == scheme]
        rests = sorted({s.rest for s in mine}, key=lambda r: _ranks_key(r))
        if len(rests) < 2:
            continue
        for s in mine:
            out[s.label] = shade(scheme_color(scheme), rests.index(s.rest), len(rests))
    return out


def shaded_legend_title(series: Sequence[_Series]) -> str | None:
    """:data:`SHADE_LEGEND_TITLE` where :func:`series_colors` shades a scheme's series, else
    ``None``."""
    if one_scheme_colors(series) or not series_colors(series):
        return None
    return SHADE_LEGEND_TITLE


def _style(rank: int, scheme: str, n_points: int = 1, color: str | None = None) -> dict:
    """Colour, marker and drawing order from the scheme (the proposed scheme on top), the colour
    ``color`` instead where given (:func:`one_scheme_colors`); line style from ``rank``, the
    series' place among the values of the other series columns."""
    return {
        "color": color or (scheme_color(scheme) if scheme else "#303030"),
        "linestyle": _LINESTYLES[rank % len(_LINESTYLES)],
        "marker": scheme_marker(scheme) if scheme else _MARKERS[rank % len(_MARKERS)],
        "markevery": _markevery(n_points, scheme),
        "markersize": 4.5,
        "linewidth": 1.6,
        # lines above the bands (z 1) and the grid; the paper's own schemes first, so on top
        "zorder": 3.0 - 0.01 * min(_scheme_rank(scheme), 99),
    }


def _ranks_key(rest: tuple) -> tuple:
    # numbers sort as numbers (V=10 before V=100), missing values last
    return tuple((1, 0) if _missing(v) else (0, v) for v in rest)


def _ranks(series: Sequence[_Series]) -> dict[tuple, int]:
    rests = sorted({s.rest for s in series}, key=lambda r: tuple((_missing(v), str(v)) for v in r))
    rests = sorted(rests, key=_ranks_key)
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
    (:func:`~wflsim.analysis.figures.bands._mark_outliers`): the series' runs, the outlier's run,
    where its line goes."""

    ax: Axes
    per_run: pd.DataFrame
    run: object
    x: str
    y: str
    label: str
    style: dict
    xs: np.ndarray
    ys: np.ndarray


class DataFigure(Figure):
    """A :class:`~matplotlib.figure.Figure` that keeps what it plots: :attr:`intervals`, every
    band and set of error bars with the seeds' values behind it, :attr:`outliers`, the outlier
    seeds it marks, and :attr:`notes`, what the figure says about coinciding lines, outlier
    seeds and panels left out. A notebook shows it as an image when it is a cell's value
    (:meth:`_repr_png_`), with or without pyplot."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.intervals: list[Interval] = []
        self.notes: list[str] = []
        self.outliers: list[Outlier] = []
        self.pending: list[_Pending] = []
        #: the legend's title (how series are told apart, where not by colour alone)
        self.legend_title: str | None = None
        #: the figure legend's handles and labels (:func:`_finish` may move it below)
        self.legend_entries: tuple[list[Artist], list[str]] | None = None

    def _repr_png_(self) -> bytes:
        """The figure as PNG bytes (Agg, at the figure's dpi), for IPython's display: a figure
        built without pyplot has no display of its own, so a fresh kernel would print
        ``<DataFigure size ...>`` instead of drawing it."""
        buffer = io.BytesIO()
        self.savefig(buffer, format="png")
        return buffer.getvalue()


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


def _need(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InsufficientData(f"{what}: the table lacks columns {missing}")
    if df.empty:
        raise InsufficientData(f"{what}: no rows")


def _mean_by(rows: pd.DataFrame, x: str, ys: Sequence[str]) -> pd.DataFrame:
    """Mean of ``ys`` per value of ``x`` over the runs (seeds) in ``rows``."""
    return rows.groupby(x, sort=True)[list(ys)].mean().reset_index()


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


#: Tick labels closer than this (pixels at the figure's dpi) count as colliding.
_TICK_GAP_PX = 3.0


def _collide(boxes: Sequence[Bbox], along: Literal["x", "y"]) -> bool:
    """Whether any two of ``boxes`` (tick labels, in axis order) overlap or come within
    :data:`_TICK_GAP_PX` of each other along ``along``."""
    spans = sorted((b.x0, b.x1) if along == "x" else (b.y0, b.y1) for b in boxes)
    return any(a[1] + _TICK_GAP_PX > b[0] for a, b in zip(spans, spans[1:], strict=False))


def _tick_boxes(ax: Axes, along: Literal["x", "y"]) -> list[Bbox]:
    """The drawn major tick labels of ``ax``'s x or y axis (inside the view), as boxes."""
    axis = ax.xaxis if along == "x" else ax.yaxis
    lo, hi = sorted(axis.get_view_interval())
    eps = 1e-9 * max(abs(hi - lo), 1e-300)
    return [
        t.label1.get_window_extent()
        for t in axis.get_major_ticks()
        if t.label1.get_visible() and t.label1.get_text() and lo - eps <= t.get_loc() <= hi + eps
    ]


def _thin_ticks(fig: Figure) -> bool:
    """Fewer ticks, at round steps (1, 2 or 5 times a power of ten), on every linear axis whose
    tick labels collide (a narrow panel with 5-digit labels: "0.03000.032500.0350"), from the
    figure as last drawn; whether any axis changed."""
    new: list[MaxNLocator] = []  # shared axes share theirs: one change per round
    for ax in fig.axes:
        for along in ("x", "y"):
            axis = ax.xaxis if along == "x" else ax.yaxis
            loc = axis.get_major_locator()
            if axis.get_scale() != "linear" or not isinstance(loc, MaxNLocator):
                continue
            if any(loc is n for n in new):
                continue
            boxes = _tick_boxes(ax, along)
            if len(boxes) < 3 or not _collide(boxes, along):
                continue
            integer = bool(getattr(loc, "_integer", False))
            new.append(
                MaxNLocator(nbins=max(2, len(boxes) - 2), steps=[1, 2, 5, 10], integer=integer)
            )
            axis.set_major_locator(new[-1])
    return bool(new)


def _title_lines(text: str, chars: int) -> str:
    """``text`` (a title, then what it adds on further lines) wrapped at ``chars`` characters:
    the first line on its own, the rest as one paragraph."""
    first, *rest = text.split("\n")
    paras = [first, " ".join(r.strip() for r in rest)] if rest else [first]
    return "\n".join(textwrap.fill(p, chars) for p in paras if p)


def _title_over_panels(fig: Figure) -> bool:
    """The figure's title centred over its panels (not over the panels and a legend beside
    them) and wrapped to their width, so that it never reaches over a legend at their side; a
    figure legend that still meets it goes below the panels. From the figure as last drawn;
    whether the layout must be done again (the title rewrapped, the legend moved)."""
    st = getattr(fig, "_suptitle", None)  # where matplotlib keeps the figure's title
    if not isinstance(st, Text) or not st.get_text() or not fig.axes:
        return False
    boxes = [ax.get_position() for ax in fig.axes if ax.get_visible()]
    x0, x1 = min(b.x0 for b in boxes), max(b.x1 for b in boxes)
    st.set_x((x0 + x1) / 2)
    st.set_horizontalalignment("center")
    room = (x1 - x0) * fig.bbox.width
    text = st.get_text()
    chars = max(len(line) for line in text.split("\n"))
    wrapped = False
    while st.get_window_extent().width > room and chars > 20:
        chars = int(chars * 0.9)
        st.set_text(_title_lines(text, chars))
        wrapped = True
    if wrapped:
        return True
    title = st.get_window_extent()
    entries = getattr(fig, "legend_entries", None)
    moved = False
    for legend in list(fig.legends):
        if entries is not None and legend.get_window_extent().overlaps(title):
            legend.remove()
            handles, labels = entries
            fig.legend(
                handles,
                labels,
                loc="outside lower center",
                fontsize="small",
                ncol=min(4, max(1, len(labels) // 3)),
                title=getattr(fig, "legend_title", None),
                title_fontsize="small",
            )
            moved = True
    return moved


def _finish(fig: _F) -> _F:
    """The last step of every figure: no offset notation (:func:`_no_offset`), the title over
    the panels and clear of the legend (:func:`_title_over_panels`), tick labels that do not
    collide (:func:`_thin_ticks`); laid out again only while one of them changes something."""
    _no_offset(fig)
    for _ in range(6):
        fig.draw_without_rendering()
        changed = _title_over_panels(fig)
        if not (_thin_ticks(fig) or changed):
            break
    return fig


def save_study_figure(
    fig: Figure,
    out: str | Path,
    title: str,
    *,
    fontsize: float = 11,
    rect: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 0.95),
    dpi: int = 120,
) -> Path:
    """What a study script's figure ends with: ``title`` above the panels, the panels laid out
    within ``rect`` (figure fractions: left, bottom, right, top; the title above ``top``), the
    file written to ``out`` at ``dpi`` (its folder made; the format from its suffix). Returns
    ``out`` as a path."""
    fig.suptitle(title, fontsize=fontsize)
    fig.tight_layout(rect=rect)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path
