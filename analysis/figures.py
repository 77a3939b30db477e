"""Figures of the paper's experimental section (and a few more), from the tidy tables.

Every function takes DataFrames (from :mod:`analysis.tidy` / :mod:`analysis.stats`, never paths)
and returns a :class:`matplotlib.figure.Figure` built without pyplot (no global state, no
backend needed: ``fig.savefig("x.png")`` renders with Agg). Lines are *series*: runs with the same scheme and, where they
differ between the runs given, the same ``V``, dataset, partition, energy budget and
``variant``; runs of one series that differ only in their seed are averaged.

A function raises :class:`InsufficientData` when the tables cannot make its figure (e.g. a single
``V`` for the impact of ``V``); :func:`analysis.report.write_report` turns that into a note.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import matplotlib as mpl
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from analysis.tidy import SCHEME_LABELS


class InsufficientData(ValueError):
    """The tables given lack what the figure needs (the message says what)."""


#: Columns that split runs into series (in label order); ``seed`` never does.
SERIES_COLUMNS: list[str] = ["scheme", "V", "dataset", "partition", "energy_budget", "variant"]
_SCHEME_ORDER = {s: i for i, s in enumerate(SCHEME_LABELS)}
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]
_DATASETS = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "digits": "digits",
}
_PANEL = 4.2  # inches per panel (width)


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


def series_columns(df: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """The columns of :data:`SERIES_COLUMNS` that split ``df`` into series: ``scheme`` always
    (when present), the others where they take more than one value."""
    cols = []
    for c in SERIES_COLUMNS:
        if c not in df.columns or c in exclude:
            continue
        if c == "scheme" or df[c].nunique(dropna=False) > 1:
            cols.append(c)
    return cols


def _sort_key(cols: list[str], key: tuple) -> tuple:
    out = []
    for c, v in zip(cols, key, strict=True):
        out.append((_SCHEME_ORDER.get(v, len(_SCHEME_ORDER)), str(v)) if c == "scheme" else (0, v))
    return tuple(out)


def iter_series(
    df: pd.DataFrame, exclude: Sequence[str] = ()
) -> Iterator[tuple[str, pd.DataFrame]]:
    """``(label, rows)`` per series of ``df``, the paper's schemes first (Proposed, Only-PF, ...)."""
    cols = series_columns(df, exclude)
    if not cols:
        if len(df):
            yield "all runs", df
        return
    groups = list(df.groupby(cols, sort=False, dropna=False))
    keys = [k if isinstance(k, tuple) else (k,) for k, _ in groups]
    order = sorted(range(len(groups)), key=lambda i: _sort_key(cols, keys[i]))
    for i in order:
        label = ", ".join(_fmt(c, v) for c, v in zip(cols, keys[i], strict=True) if str(v) != "")
        yield label or "all runs", groups[i][1]


def _style(i: int, n_points: int) -> dict:
    cmap = mpl.colormaps["tab10"]
    return {
        "color": cmap(i % 10),
        "marker": _MARKERS[i % len(_MARKERS)],
        "markevery": max(1, n_points // 10),
        "markersize": 5,
        "linewidth": 1.6,
    }


def _figure(n_panels: int, title: str, height: float = 3.4) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(_PANEL * n_panels, height), layout="constrained")
    axes = fig.subplots(1, n_panels, squeeze=False)[0]
    fig.suptitle(title)
    return fig, list(axes)


def _legend(fig: Figure, axes: Sequence[Axes], order: Sequence[str] = ()) -> None:
    """One legend for the figure (labels of all panels, once each, those in ``order`` first and
    in that order): inside a single panel when there are few lines, else outside, to the right
    (or below, when there are many)."""
    seen: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(lab, h)
    if not seen:
        return
    rank = {lab: i for i, lab in enumerate(order)}
    labels = sorted(seen, key=lambda lab: rank.get(lab, len(rank)))
    handles = [seen[lab] for lab in labels]
    w, h = fig.get_size_inches()
    if len(axes) == 1 and len(labels) <= 5:
        axes[0].legend(handles, labels, fontsize="small")
    elif len(labels) <= 8:
        longest = max(len(lab) for lab in labels)
        fig.set_size_inches(w + min(0.5 + 0.065 * longest, 4.5), h)
        fig.legend(handles, labels, loc="outside right upper", fontsize="small")
    else:
        ncol = min(4, (len(labels) + 5) // 6)
        fig.set_size_inches(w, h + 0.22 * -(-len(labels) // ncol))
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


# --------------------------------------------------------------------------- figures


def stable_parameters(slots: pd.DataFrame, title: str | None = None) -> Figure:
    """Percentage of stable parameters of the global model against the round (paper Fig. 1),
    from ``slots.stable_fraction``; one line per series."""
    _need(slots, ["slot", "stable_fraction"], "stable parameters")
    data = slots.dropna(subset=["stable_fraction"])
    if data.empty:
        raise InsufficientData(
            "stable parameters: no stable_fraction values (network-only runs, or under 10 slots)"
        )
    fig, (ax,) = _figure(1, title or "Percentage of stable parameters", height=3.6)
    fig.set_size_inches(6.0, 3.8)
    for i, (label, rows) in enumerate(iter_series(data)):
        m = _mean_by(rows.assign(round=rows["slot"] + 1), "round", ["stable_fraction"])
        ax.plot(m["round"], 100.0 * m["stable_fraction"], label=label, **_style(i, len(m)))
    ax.set_xlabel("training round t")
    ax.set_ylabel("stable parameters (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    _legend(fig, [ax])
    return fig


def impact_of_v(
    summary: pd.DataFrame, schemes: Sequence[str] | None = None, title: str | None = None
) -> Figure:
    """Average convergence error X, energy per device-slot and queue length against ``V``
    (paper, "Impact of V"): three panels, one line per series that has at least two ``V``
    values (mean over seeds, bars: one standard deviation when there are several).

    Args:
        summary: :func:`analysis.stats.summary` (one row per run).
        schemes: keep only these schemes (``None``: all).
    """
    cols = ["V", "mean_conv_error", "energy_per_device_slot_j", "mean_queue_j"]
    _need(summary, cols, "impact of V")
    data = summary if schemes is None else summary[summary["scheme"].isin(schemes)]
    series = [(lab, r) for lab, r in iter_series(data, exclude=["V"]) if r["V"].nunique() >= 2]
    if not series:
        found = sorted(data["V"].dropna().unique().tolist())
        raise InsufficientData(
            f"impact of V: needs two V values or more in one series (found V = {found})"
        )
    panels = [
        ("mean_conv_error", "average convergence error X_av", "Convergence error"),
        ("energy_per_device_slot_j", "average energy E_av (J per device-slot)", "Energy"),
        ("mean_queue_j", "average queue length Q_av (J)", "Queue length"),
    ]
    fig, axes = _figure(3, title or "Impact of the control parameter V")
    all_v = pd.concat([r["V"] for _, r in series])
    log_x = all_v.min() > 0 and all_v.max() / all_v.min() >= 10
    for i, (label, rows) in enumerate(series):
        g = rows.groupby("V")
        for ax, (col, _, _) in zip(axes, panels, strict=True):
            mean, std, n = g[col].mean(), g[col].std(), g[col].count()
            err = std.where(n > 1) if (n > 1).any() else None
            ax.errorbar(mean.index, mean.values, yerr=err, label=label, capsize=3, **_style(i, 1))
    for ax, (_, ylabel, sub) in zip(axes, panels, strict=True):
        ax.set_xlabel("control parameter V")
        ax.set_ylabel(ylabel)
        ax.set_title(sub, fontsize="medium")
        if log_x:
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    return fig


def time_evolution(slots: pd.DataFrame, title: str | None = None) -> Figure:
    """Running time-average of the energy per device-slot and of the cost z against the slot,
    one line per series (paper Figs. 3-4: E_av and z_av over the frames)."""
    _need(slots, ["run", "slot", "mean_energy_j", "mean_cost"], "time evolution")
    data = slots.sort_values(["run", "slot"], kind="stable").copy()
    grp = data.groupby("run")
    data["avg_energy_j"] = grp["mean_energy_j"].transform(lambda s: s.expanding().mean())
    data["avg_cost"] = grp["mean_cost"].transform(lambda s: s.expanding().mean())
    fig, axes = _figure(2, title or "Time evolution of the average energy and cost")
    for i, (label, rows) in enumerate(iter_series(data)):
        m = _mean_by(rows, "slot", ["avg_energy_j", "avg_cost"])
        axes[0].plot(m["slot"], m["avg_energy_j"], label=label, **_style(i, len(m)))
        if m["avg_cost"].notna().any():
            axes[1].plot(m["slot"], m["avg_cost"], label=label, **_style(i, len(m)))
    axes[0].set_ylabel("average energy E_av (J per device-slot)")
    axes[0].set_title("Average energy consumption", fontsize="medium")
    axes[1].set_ylabel("average cost z_av = avg(V X + Q E)")
    axes[1].set_title("Average cost", fontsize="medium")
    for ax in axes:
        ax.set_xlabel("slot t (communication round)")
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    return fig


def _panel_keys(df: pd.DataFrame) -> list[tuple[str, str]]:
    keys = df[["dataset", "partition"]].drop_duplicates().itertuples(index=False, name=None)
    # The paper's order: non-IID before IID, datasets alphabetically.
    return sorted(keys, key=lambda k: (str(k[0]), not str(k[1]).startswith("non-IID"), str(k[1])))


def _accuracy_vs(evaluations: pd.DataFrame, x: str, xlabel: str, what: str, title: str) -> Figure:
    if evaluations.empty:
        raise InsufficientData(f"{what}: no evaluations (network-only runs have none)")
    _need(evaluations, ["run", "slot", "accuracy", x, "dataset", "partition"], what)
    data = evaluations.dropna(subset=["accuracy", x])
    per_run = data.groupby("run")["slot"].count()
    if data.empty or per_run.max() < 2:
        raise InsufficientData(f"{what}: needs runs with two evaluations or more (learning runs)")
    panels = _panel_keys(data)
    # Series over all panels, so that a scheme keeps its label and colour from panel to panel.
    series = list(iter_series(data, exclude=["dataset", "partition"]))
    fig, axes = _figure(len(panels), title, height=3.6)
    for ax, (dataset, partition) in zip(axes, panels, strict=True):
        for i, (label, rows) in enumerate(series):
            sub = rows[(rows["dataset"] == dataset) & (rows["partition"] == partition)]
            if sub.empty:
                continue
            m = _mean_by(sub, "slot", [x, "accuracy"])
            ax.plot(m[x], 100.0 * m["accuracy"], label=label, **_style(i, len(m)))
        ax.set_title(f"{_DATASETS.get(str(dataset), dataset)} ({partition})", fontsize="medium")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy (%)")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # large totals: no overlapping labels
        ax.grid(alpha=0.3)
    _legend(fig, axes, order=[label for label, _ in series])
    return fig


def accuracy_vs_energy(evaluations: pd.DataFrame, title: str | None = None) -> Figure:
    """Test accuracy against the total energy of all devices, one panel per dataset and
    partition (IID / non-IID), one line per series (paper, "Test accuracy vs total energy")."""
    return _accuracy_vs(
        evaluations,
        "cum_energy_j",
        "total energy consumption (J, all devices)",
        "accuracy vs energy",
        title or "Test accuracy vs total energy consumption",
    )


def accuracy_vs_latency(evaluations: pd.DataFrame, title: str | None = None) -> Figure:
    """Test accuracy against the total latency (simulated time, the sum of the slot durations),
    one panel per dataset and partition (paper, "Test accuracy vs total latency")."""
    return _accuracy_vs(
        evaluations,
        "cum_latency_s",
        "total latency (s)",
        "accuracy vs latency",
        title or "Test accuracy vs total latency",
    )


def impact_of_energy_budget(summary: pd.DataFrame, title: str | None = None) -> Figure:
    """Average energy per device-slot and average queue length against the energy budget E_bar
    (``energy_budget_mean_j``: the budget specification's mean over devices), one line per series with two budgets or more (paper, "Impact of
    E_n"); the dashed line in the energy panel is E_av = E_bar."""
    cols = ["energy_budget_mean_j", "energy_per_device_slot_j", "mean_queue_j"]
    _need(summary, cols, "impact of the energy budget")
    data = summary.dropna(subset=["energy_budget_mean_j"])
    series = [
        (lab, r)
        for lab, r in iter_series(data, exclude=["energy_budget", "energy_budget_mean_j"])
        if r["energy_budget_mean_j"].nunique() >= 2
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
    for i, (label, rows) in enumerate(series):
        g = rows.groupby("energy_budget_mean_j")
        for ax, (col, _, _) in zip(axes, panels, strict=True):
            mean, std, n = g[col].mean(), g[col].std(), g[col].count()
            err = std.where(n > 1) if (n > 1).any() else None
            ax.errorbar(mean.index, mean.values, yerr=err, label=label, capsize=3, **_style(i, 1))
    budgets = data["energy_budget_mean_j"]
    return _finish_budget_figure(fig, axes, panels, budgets, "energy budget E_bar (J per slot)")


def _finish_budget_figure(
    fig: Figure,
    axes: list[Axes],
    panels: list[tuple[str, str, str]],
    budgets: pd.Series,
    xlabel: str,
) -> Figure:
    """The E_av = E_bar reference line over the budgets' range, axis labels, grid and legend."""
    lo, hi = float(budgets.min()), float(budgets.max())
    axes[0].plot([lo, hi], [lo, hi], "k--", linewidth=1, label="E_av = E_bar")
    for ax, (_, ylabel, sub) in zip(axes, panels, strict=True):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(sub, fontsize="medium")
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    return fig


def energy_budget_per_device(per_device: pd.DataFrame, title: str | None = None) -> Figure:
    """Each device's average energy per slot and average queue length against its own budget
    E_bar_n (``analysis.stats.energy_per_device``: one point per device and run), one marker
    series per configuration; the dashed line in the energy panel is E_av = E_bar. This is the
    impact of the energy budget inside one configuration whose devices have different budgets
    (the paper's budgets are drawn per device from a range)."""
    cols = ["energy_budget_j", "mean_energy_j", "mean_queue_j"]
    _need(per_device, cols, "energy against each device's budget")
    data = per_device.dropna(subset=["energy_budget_j"])
    if data["energy_budget_j"].nunique() < 2:
        raise InsufficientData(
            "energy against each device's budget: every device has the same budget"
        )
    fig, axes = _figure(2, title or "Energy and queue against each device's budget E_bar_n")
    panels = [
        ("mean_energy_j", "average energy E_av,n (J per slot)", "Energy"),
        ("mean_queue_j", "average queue length Q_av,n (J)", "Queue length"),
    ]
    exclude = ["energy_budget", "energy_budget_mean_j"]
    for i, (label, rows) in enumerate(iter_series(data, exclude=exclude)):
        style = _style(i, 1)
        style.pop("markevery")
        for ax, (col, _, _) in zip(axes, panels, strict=True):
            ax.plot(
                rows["energy_budget_j"],
                rows[col],
                linestyle="none",
                alpha=0.7,
                label=label,
                **style,
            )
    xlabel = "device's energy budget E_bar_n (J per slot)"
    return _finish_budget_figure(fig, axes, panels, data["energy_budget_j"], xlabel)


def gamma_evolution(frames: pd.DataFrame, title: str | None = None) -> Figure:
    """Mean freezing fraction gamma over devices against the frame, one line per series that
    freezes anything."""
    _need(frames, ["run", "frame", "gamma"], "gamma evolution")
    data = frames.dropna(subset=["gamma"])
    series = [(lab, r) for lab, r in iter_series(data) if (r["gamma"] > 0).any()]
    if not series:
        raise InsufficientData("gamma evolution: no run freezes any parameter")
    return _line_figure(
        series,
        "frame",
        "gamma",
        100.0,
        "frame k",
        "mean freezing fraction gamma (%)",
        title or "Freezing fraction over frames",
    )


def queue_evolution(slots: pd.DataFrame, title: str | None = None) -> Figure:
    """Mean energy-deficit queue Q over devices against the slot, one line per series."""
    _need(slots, ["run", "slot", "mean_queue_j"], "queue evolution")
    return _line_figure(
        list(iter_series(slots)),
        "slot",
        "mean_queue_j",
        1.0,
        "slot t (communication round)",
        "mean queue length Q (J)",
        title or "Energy-deficit queue over time",
    )


def _line_figure(
    series: list[tuple[str, pd.DataFrame]],
    x: str,
    y: str,
    scale: float,
    xlabel: str,
    ylabel: str,
    title: str,
) -> Figure:
    """One axis, one line per series: ``scale * y`` averaged over the series' runs against ``x``."""
    fig, (ax,) = _figure(1, title)
    fig.set_size_inches(6.0, 3.8)
    for i, (label, rows) in enumerate(series):
        m = _mean_by(rows, x, [y])
        ax.plot(m[x], scale * m[y], label=label, **_style(i, len(m)))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    _legend(fig, [ax])
    return fig


def participation_and_latency(slots: pd.DataFrame, title: str | None = None) -> Figure:
    """Per frame (mean over its slots): slot latency, participation and outage rate, one line
    per series."""
    cols = ["run", "frame", "slot_duration_s", "participation", "outage_rate"]
    _need(slots, cols, "participation and latency")
    fig, axes = _figure(3, title or "Latency, participation and outages per frame")
    panels = [
        ("slot_duration_s", 1.0, "mean slot latency (s)", "Round latency"),
        ("participation", 100.0, "participating devices (%)", "Participation"),
        ("outage_rate", 100.0, "outages (% of participants)", "Outage rate"),
    ]
    for i, (label, rows) in enumerate(iter_series(slots)):
        m = _mean_by(rows, "frame", [c for c, _, _, _ in panels])
        for ax, (col, scale, _, _) in zip(axes, panels, strict=True):
            ax.plot(m["frame"], scale * m[col], label=label, **_style(i, len(m)))
    for ax, (_, scale, ylabel, sub) in zip(axes, panels, strict=True):
        if scale == 100.0:
            ax.set_ylim(bottom=0)
        ax.set_xlabel("frame k")
        ax.set_ylabel(ylabel)
        ax.set_title(sub, fontsize="medium")
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    return fig
