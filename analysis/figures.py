"""Figures of the paper's experimental section (and a few more), from the tidy tables.

Every function takes DataFrames (from :mod:`analysis.tidy` / :mod:`analysis.stats`, never paths)
and returns a :class:`matplotlib.figure.Figure` built without pyplot (no global state, no
backend needed: ``fig.savefig("x.png")`` renders with Agg). Lines are *series*: runs with the same
scheme and, where they differ between the runs given, the same ``V``, dataset, partition, energy
budget and ``variant``; runs of one series that differ only in their seed are averaged.

Conventions (the same in every figure):

* one colour per scheme, fixed (:data:`SCHEME_COLORS`), whatever the figure or the runs given;
  the second variable (``V``, budget, partition, ...) is a line style and marker, or a facet;
* figures over time facet by ``V`` (one column per value) when it takes several values; schemes
  whose decisions ignore ``V`` (:data:`V_FREE_SCHEMES`, e.g. Ideal FL) are drawn once, not once
  per ``V`` (in the ``V`` figure: a horizontal line over the ``V`` range);
* with several seeds: the mean over seeds and a 95 % Student-t band or interval
  (:func:`analysis.stats.over_seeds`); one seed: the line alone;
* an axis where one series dwarfs another (10 times or more) is logarithmic (symmetric-log,
  linear near 0, where values can be negative or 0); its label says so;
* the y range fits the mean lines: a wide band (few seeds) is clipped at the panel's edge;
* no offset or scientific-offset tick notation; every axis says its unit;
* a panel with nothing to draw (no outage at all, no cost logged) says so in words.

A function raises :class:`InsufficientData` when the tables cannot make its figure (e.g. a single
``V`` for the impact of ``V``); :func:`analysis.report.write_report` turns that into a note.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from .stats import over_seeds
from .tidy import SCHEME_LABELS


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

#: Schemes whose decisions do not depend on ``V`` (runs at several ``V`` are the same run).
V_FREE_SCHEMES: frozenset[str] = frozenset({"ideal", "fixed_power"})

_SCHEME_ORDER = {s: i for i, s in enumerate(SCHEME_LABELS)}
_LINESTYLES: list = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 3))]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]
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


def _style(rank: int, scheme: str, n_points: int = 1) -> dict:
    """Colour from the scheme; line style and marker from ``rank``, the series' place among the
    values of the other series columns."""
    return {
        "color": scheme_color(scheme) if scheme else "#303030",
        "linestyle": _LINESTYLES[rank % len(_LINESTYLES)],
        "marker": _MARKERS[rank % len(_MARKERS)],
        "markevery": max(1, n_points // 8),
        "markersize": 4.5,
        "linewidth": 1.6,
    }


def _ranks(series: Sequence[_Series]) -> dict[tuple, int]:
    rests = sorted({s.rest for s in series}, key=lambda r: tuple((_missing(v), str(v)) for v in r))
    # numbers sort as numbers (V=10 before V=100)
    rests = sorted(rests, key=lambda r: tuple((1, 0) if _missing(v) else (0, v) for v in r))
    return {r: i for i, r in enumerate(rests)}


def _figure(
    n_panels: int,
    title: str,
    height: float = 3.4,
    rows: int = 1,
    sharey: bool | Literal["none", "all", "row", "col"] = False,
) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(_PANEL * n_panels, height * rows), layout="constrained")
    axes = fig.subplots(rows, n_panels, squeeze=False, sharey=sharey)
    fig.suptitle(title)
    return fig, [ax for row in axes for ax in row]


def _legend(fig: Figure, axes: Sequence[Axes], order: Sequence[str] = ()) -> None:
    """One legend for the figure (labels of all panels, once each, those in ``order`` first and
    in that order): inside a single panel when there are few lines, else outside, to the right
    (or below, when there are many)."""
    seen: dict[str, Artist] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if not lab.startswith("_"):
                seen.setdefault(lab, h)
    if not seen:
        return
    rank = {lab: i for i, lab in enumerate(order)}
    labels = sorted(seen, key=lambda lab: rank.get(lab, len(rank)))
    handles = [seen[lab] for lab in labels]
    w, h = fig.get_size_inches()
    longest = max(len(lab) for lab in labels)
    if len(axes) == 1 and len(labels) <= 5 and longest <= _LONG_LABEL:
        axes[0].legend(handles, labels, fontsize="small")
    elif len(labels) <= (6 if len(axes) == 1 else 12) and longest <= _LONG_LABEL:
        # a single panel is too short for a longer list beside it (it would cover the title)
        fig.set_size_inches(w + min(0.6 + 0.065 * longest, 4.5), h)
        fig.legend(handles, labels, loc="outside right upper", fontsize="small")
    else:  # many lines, or labels too long for the side: below, as wide as the labels need
        ncol = 1 if longest > _LONG_LABEL else min(4, (len(labels) + 5) // 6)
        width = max(w, min(0.065 * longest * ncol + 1.0, 16.0))
        fig.set_size_inches(width, h + 0.22 * -(-len(labels) // ncol) + 0.3)
        fig.legend(handles, labels, loc="outside lower center", fontsize="small", ncol=ncol)


def _need(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InsufficientData(f"{what}: the table lacks columns {missing}")
    if df.empty:
        raise InsufficientData(f"{what}: no rows")


def _mean_by(rows: pd.DataFrame, x: str, ys: Sequence[str]) -> pd.DataFrame:
    """Mean of ``ys`` per value of ``x`` over the runs (seeds) in ``rows``."""
    return rows.groupby(x, sort=True)[list(ys)].mean().reset_index()


def _seed_stats(rows: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Per value of ``x``: the mean of ``y`` over the runs of ``rows`` (each run first averaged
    over its rows at that ``x``) and its 95 % interval over them (``y``, ``y_ci_low``,
    ``y_ci_high``, ``n``: :func:`analysis.stats.over_seeds`)."""
    if "run" in rows.columns:
        per_run = rows.groupby(["run", x], sort=True)[y].mean().reset_index()
    else:
        per_run = rows[[x, y]]
    return over_seeds(per_run, by=[x], value_cols=[y]).sort_values(x)


def _band_line(
    ax: Axes,
    rows: pd.DataFrame,
    x: str,
    y: str,
    scale: float,
    label: str,
    style: dict,
    alpha: float = _BAND_ALPHA,
    clip: tuple[float, float] | None = None,
) -> float:
    """The mean over seeds of ``scale * y`` against ``x`` and, with several seeds, its 95 % band
    (cut to ``clip``, the values ``scale * y`` can take, when given); returns the largest absolute
    value drawn (NaN: nothing)."""
    m = _seed_stats(rows.dropna(subset=[y]), x, y)
    if m.empty:
        return float("nan")
    st = dict(style, markevery=max(1, len(m) // 8))
    ax.plot(m[x], scale * m[y], label=label, **st)
    band = m["n"] > 1
    if band.any():
        lo, hi = scale * m[y + "_ci_low"], scale * m[y + "_ci_high"]
        if clip is not None:
            lo, hi = lo.clip(*clip), hi.clip(*clip)
        ax.fill_between(
            m[x],
            lo,
            hi,
            where=band.to_numpy(),
            color=st["color"],
            alpha=alpha,
            linewidth=0,
        )
    return float(np.nanmax(np.abs(scale * m[y].to_numpy())))


def _point_errorbars(
    ax: Axes, rows: pd.DataFrame, x: str, y: str, label: str, style: dict
) -> float:
    """Mean over seeds of ``y`` per ``x`` with 95 % intervals as error bars (where several seeds)."""
    m = _seed_stats(rows.dropna(subset=[y]), x, y)
    if m.empty:
        return float("nan")
    st = dict(style)
    st.pop("markevery", None)
    lo = (m[y] - m[y + "_ci_low"]).fillna(0.0)
    hi = (m[y + "_ci_high"] - m[y]).fillna(0.0)
    err = np.vstack([lo.to_numpy(), hi.to_numpy()]) if (m["n"] > 1).any() else None
    ax.errorbar(m[x], m[y], yerr=err, label=label, capsize=3, **st)
    return float(np.nanmax(np.abs(m[y].to_numpy())))


def _symlog_if_dwarfed(axes: Sequence[Axes], peaks: Sequence[float]) -> bool:
    """A log y axis on ``axes`` when the largest series (peak absolute value) is
    :data:`_SYMLOG_RATIO` times the smallest non-zero one or more: logarithmic when every value
    drawn is positive, else symmetric-log (linear near 0, up to the smallest series' scale)."""
    p = np.array([v for v in peaks if np.isfinite(v) and v > 0])
    if len(p) < 2 or p.max() < _SYMLOG_RATIO * p.min():
        return False
    ys = np.concatenate([np.asarray(ln.get_ydata(), dtype=float) for ax in axes for ln in ax.lines])
    ys = ys[np.isfinite(ys)]
    if len(ys) and ys.min() > 0:
        for ax in axes:
            ax.set_yscale("log")
            if ax.get_ylabel():
                ax.set_ylabel(ax.get_ylabel() + "\n(log scale)")
        return True
    lin = float(10 ** np.floor(np.log10(p.min())))
    for ax in axes:
        ax.set_yscale("symlog", linthresh=lin, linscale=0.6)
        if ax.get_ylabel():
            ax.set_ylabel(ax.get_ylabel() + f"\n(symmetric log; linear within -+{lin:g})")
    return True


def _fit_to_lines(axes: Sequence[Axes]) -> None:
    """The y range of ``axes`` from their lines (the means), not from the 95 % bands: with few
    seeds a band can be many times wider than the lines and would flatten them (it is clipped
    at the panel's edge instead)."""
    ys = [np.asarray(ln.get_ydata(), dtype=float) for ax in axes for ln in ax.lines]
    if not ys:
        return
    y = np.concatenate(ys)
    y = y[np.isfinite(y)]
    if not len(y):
        return
    lo, hi = float(y.min()), float(y.max())
    scale = axes[0].get_yscale()
    if scale == "log":
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


def _no_offset(fig: Figure) -> Figure:
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


def _time_figure(
    data: pd.DataFrame,
    x: str,
    xlabel: str,
    panels: Sequence[_Panel],
    title: str,
    *,
    keep_v: bool = False,
    only: Sequence[str] | None = None,
) -> Figure:
    """Metrics (rows, or columns without facets) against ``x``: mean over seeds with a 95 % band,
    one facet column per ``V`` when ``V`` takes several values (:func:`_facet_values`).

    ``keep_v``: the schemes of :data:`V_FREE_SCHEMES` keep their ``V`` (a metric that depends on
    ``V`` even when the decisions do not, e.g. the cost ``V X + Q E``), so a facet shows the run at
    its own ``V``. ``only``: draw only these series labels."""
    facets = _facet_values(data)
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
    for p, row in zip(panels, grid, strict=True):
        peaks: list[float] = []
        for v, ax in zip(facets, row, strict=True):
            for s in series:
                rows = s.rows
                if v is not None:
                    rows = rows[(rows["V"] == v) | rows["V"].isna()]
                if rows.empty:
                    continue
                peak = _band_line(
                    ax, rows, x, p.col, p.scale, s.label, _style(ranks[s.rest], s.scheme), alpha
                )
                peaks.append(peak)
            if v is not None:
                ax.set_title(f"{p.title}, V = {v:g}", fontsize="medium")
            else:
                ax.set_title(p.title, fontsize="medium")
            ax.set_xlabel(xlabel)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))  # slots, frames
            ax.grid(alpha=0.3)
        row[0].set_ylabel(p.ylabel)
        values = pd.to_numeric(data[p.col], errors="coerce") if p.col in data else pd.Series([])
        nothing = values.isna().all() or (p.nothing == "zero" and (values.fillna(0) == 0).all())
        if nothing:
            for ax in row:
                say_empty(ax, p.empty)
            continue
        _symlog_if_dwarfed(row, peaks)
        _fit_to_lines(row)
        if p.scale == 100.0 and row[0].get_yscale() == "linear":
            row[0].set_ylim(bottom=0)
    _legend(fig, flat, order=[s.label for s in series])
    return _no_offset(fig)


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
) -> Figure:
    """Average convergence error X, energy per device-slot and queue length against ``V``
    (paper, "Impact of V"): three panels, one line per series that has at least two ``V``
    values (mean over seeds, bars: 95 % Student-t interval over seeds when there are several).
    A scheme that ignores ``V`` (:data:`V_FREE_SCHEMES`) is a horizontal line (and band) over
    the ``V`` range, drawn once.

    Args:
        summary: :func:`analysis.stats.summary` (one row per run).
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
    for ax, (col, ylabel, _) in zip(axes, panels, strict=True):
        ax.set_ylabel(ylabel)
        peaks = []
        for s in series:
            style = _style(ranks[s.rest], s.scheme)
            peaks.append(_point_errorbars(ax, s.rows, "V", col, s.label, style))
        for s in flat:
            mean, _, lo, hi, n = _t(s.rows[col])
            if not np.isfinite(mean):
                continue
            style = _style(ranks[s.rest], s.scheme)
            label = f"{s.label} (ignores V)"
            ax.plot(
                [v_lo, v_hi],
                [mean, mean],
                label=label,
                color=style["color"],
                linestyle=style["linestyle"],
                linewidth=2.2,
                alpha=0.8,
            )
            if n > 1:
                ax.fill_between(
                    [v_lo, v_hi],
                    [lo, lo],
                    [hi, hi],
                    color=style["color"],
                    alpha=_BAND_ALPHA,
                    linewidth=0,
                )
            peaks.append(abs(mean))
        _symlog_if_dwarfed([ax], peaks)
    for ax, (_, _, sub) in zip(axes, panels, strict=True):
        ax.set_xlabel("control parameter V (dimensionless)")
        ax.set_title(sub, fontsize="medium")
        if log_x:
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
    order = [s.label for s in series] + [f"{s.label} (ignores V)" for s in flat]
    order = sorted(order, key=lambda lab: _label_rank(lab, series + flat))
    _legend(fig, axes, order=order)
    return _no_offset(fig)


def _label_rank(label: str, series: Sequence[_Series]) -> tuple:
    """Schemes in the paper's order (then by label), whatever the suffix of the label."""
    for s in series:
        if label.startswith(s.label):
            return (_SCHEME_ORDER.get(s.scheme, len(_SCHEME_ORDER)), label)
    return (len(_SCHEME_ORDER) + 1, label)


def _t(values: pd.Series) -> tuple[float, float, float, float, int]:
    from .stats import t_interval

    mean, se, lo, hi, n = t_interval(values.to_numpy(dtype=float))
    return float(mean), float(se), float(lo), float(hi), int(n)


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
            "average energy E_av (J per device-slot)",
            "Average energy",
            "no energy logged",
        ),
        _Panel(
            "avg_cost",
            1.0,
            "average cost z_av = avg(V X + Q E) (J^2)",
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


def _accuracy_vs(evaluations: pd.DataFrame, x: str, xlabel: str, what: str, title: str) -> Figure:
    if evaluations.empty:
        raise InsufficientData(f"{what}: no evaluations (network-only runs have none)")
    _need(evaluations, ["run", "slot", "accuracy", x, "dataset", "partition"], what)
    data = _one_v(evaluations.dropna(subset=["accuracy", x]))
    per_run = data.groupby("run")["slot"].count()
    if data.empty or per_run.max() < 2:
        raise InsufficientData(f"{what}: needs runs with two evaluations or more (learning runs)")
    panels = _panel_keys(data)
    # Series over all panels, so that a scheme keeps its label and style from panel to panel.
    series = _series(data, exclude=["dataset", "partition"])
    ranks = _ranks(series)
    fig, axes = _figure(len(panels), title, height=3.6)
    for ax, (dataset, partition) in zip(axes, panels, strict=True):
        for s in series:
            rows = s.rows
            sub = rows[(rows["dataset"] == dataset) & (rows["partition"] == partition)]
            if sub.empty:
                continue
            # x: the mean over seeds at each evaluation; y: mean and 95 % band over seeds
            xs = _mean_by(sub, "slot", [x])
            acc = _seed_stats(sub, "slot", "accuracy").merge(xs, on="slot")
            style = _style(ranks[s.rest], s.scheme, len(acc))
            ax.plot(acc[x], 100.0 * acc["accuracy"], label=s.label, **style)
            band = acc["n"] > 1
            if band.any():
                ax.fill_between(  # an accuracy lies in [0, 100] %
                    acc[x],
                    (100.0 * acc["accuracy_ci_low"]).clip(0.0, 100.0),
                    (100.0 * acc["accuracy_ci_high"]).clip(0.0, 100.0),
                    where=band.to_numpy(),
                    color=style["color"],
                    alpha=_BAND_ALPHA,
                    linewidth=0,
                )
        ax.set_title(f"{_DATASETS.get(str(dataset), dataset)} ({partition})", fontsize="medium")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy (%)")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # large totals: no overlapping labels
        ax.grid(alpha=0.3)
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
            _band_line(ax, counts, "s", "share", 100.0, s.label, style, clip=(0.0, 100.0))
        shares = (
            rows.groupby(["run", "outcome"])
            .size()
            .unstack(fill_value=0)
            .reindex(columns=outcomes, fill_value=0)
        )
        shares = 100.0 * shares.div(shares.sum(axis=1), axis=0)
        long = shares.reset_index().melt(id_vars="run", var_name="outcome", value_name="pct")
        long["x"] = long["outcome"].map({o: j for j, o in enumerate(outcomes)})
        m = _seed_stats(long, "x", "pct")
        lo = (m["pct"] - m["pct_ci_low"]).fillna(0.0)
        hi = (m["pct_ci_high"] - m["pct"]).fillna(0.0)
        err = np.vstack([lo.to_numpy(), hi.to_numpy()]) if (m["n"] > 1).any() else None
        bx.bar(
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
    ax.set_xlabel(f"staleness (server steps; {top} = {top} or more)")
    ax.set_ylabel("applied updates (%)")
    ax.grid(alpha=0.3)
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
    for ax, (col, ylabel, _) in zip(axes, panels, strict=True):
        ax.set_ylabel(ylabel)
        peaks = [
            _point_errorbars(
                ax, s.rows, "energy_budget_mean_j", col, s.label, _style(ranks[s.rest], s.scheme)
            )
            for s in series
        ]
        _symlog_if_dwarfed([ax], peaks)
    budgets = data["energy_budget_mean_j"]
    return _finish_budget_figure(fig, axes, panels, budgets, "energy budget E_bar (J per slot)")


def _finish_budget_figure(
    fig: Figure,
    axes: list[Axes],
    panels: list[tuple[str, str, str]],
    budgets: pd.Series,
    xlabel: str,
    energy_axes: Sequence[Axes] | None = None,
) -> Figure:
    """The E_av = E_bar reference line over the budgets' range, axis labels, grid and legend."""
    lo, hi = float(budgets.min()), float(budgets.max())
    for ax in energy_axes or axes[:1]:
        ax.plot([lo, hi], [lo, hi], "k--", linewidth=1, label="E_av = E_bar")
    for ax, (_, ylabel, sub) in zip(axes, panels, strict=True):
        ax.set_xlabel(xlabel)
        if not ax.get_ylabel():
            ax.set_ylabel(ylabel)
        ax.set_title(sub, fontsize="medium")
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    return _no_offset(fig)


def energy_budget_per_device(per_device: pd.DataFrame, title: str | None = None) -> Figure:
    """Each device's average energy per slot and average queue length against its own budget
    E_bar_n (``analysis.stats.energy_per_device``: one point per device and run): one column of
    panels per scheme (so that no scheme hides another), the other series columns as markers;
    the dashed line in the energy panels is E_av = E_bar. This is the impact of the energy
    budget inside one configuration whose devices have different budgets (the paper's budgets
    are drawn per device from a range)."""
    cols = ["energy_budget_j", "mean_energy_j", "mean_queue_j"]
    _need(per_device, cols, "energy against each device's budget")
    data = _one_v(per_device.dropna(subset=["energy_budget_j"]))
    if data["energy_budget_j"].nunique() < 2:
        raise InsufficientData(
            "energy against each device's budget: every device has the same budget"
        )
    series = _series(data, exclude=["energy_budget", "energy_budget_mean_j"])
    schemes = list(dict.fromkeys(s.scheme for s in series))
    ranks = _ranks(series)
    n = len(schemes)
    fig = Figure(figsize=(3.4 * n + 0.8, 5.6), layout="constrained")
    grid = fig.subplots(2, n, squeeze=False, sharex=True)
    fig.suptitle(title or "Energy and queue against each device's budget E_bar_n")
    panels = [
        ("mean_energy_j", "average energy E_av,n (J per slot)", "Energy"),
        ("mean_queue_j", "average queue length Q_av,n (J)", "Queue length"),
    ]
    lo, hi = float(data["energy_budget_j"].min()), float(data["energy_budget_j"].max())
    for j, scheme in enumerate(schemes):
        for i, (col, ylabel, _sub) in enumerate(panels):
            ax = grid[i][j]
            for s in series:
                if s.scheme != scheme:
                    continue
                style = _style(ranks[s.rest], s.scheme)
                style.pop("markevery")
                style.pop("linestyle")
                ax.plot(
                    s.rows["energy_budget_j"],
                    s.rows[col],
                    linestyle="none",
                    alpha=0.55,
                    label=s.label,
                    **style,
                )
            if i == 0:
                ax.plot([lo, hi], [lo, hi], "k--", linewidth=1, label="E_av = E_bar")
                ax.set_title(SCHEME_LABELS.get(scheme, scheme or "all runs"), fontsize="medium")
            else:
                ax.set_xlabel("device's budget E_bar_n (J per slot)")
            if j == 0:
                ax.set_ylabel(ylabel)
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
    per series (mean over seeds, 95 % band; facets by ``V``). An outage panel with no outage in
    any run says so instead of drawing zeros."""
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
            "no outages: every upload met the deadline\n(or the server waited for it)",
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
