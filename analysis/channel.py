"""Channel studies: what imperfect CSI and non-Rayleigh fading do to each scheme, and paired
comparisons of schemes replayed on one recorded channel.

* :func:`outcomes` -- one row per run: the run's channel settings (CSI error and delay, fading
  family and parameters, time correlation, mobility speeds, replayed table), and its outcomes:
  participation, outage rate, energy and wasted energy per device-slot, the wasted share, mean
  slot length, the worst device's energy over its budget, mean ``gamma``, mean cost, final
  accuracy, and the controller's planning gap (realised mean per-slot cost of each device-frame
  minus the controller's expected cost ``Z(gamma)``: zero on average when the channel is what
  Theorem 2 assumes).
* :func:`over_seeds` -- mean over seeds of each configuration, with its standard error and 95 %
  Student-t interval (:func:`wflsim.analysis.stats.over_seeds`).
* :func:`paired_differences` -- for runs replayed on one channel table, per-slot differences of
  a metric between each scheme and a reference scheme: mean, paired standard error, and the
  standard error an unpaired comparison of the same runs would have.
* ``python -m wflsim.analysis.channel DIR [--by FIELD ...] [--paired REF] [--figures OUT]`` prints the
  tables as Markdown (each outcome as ``mean [ci_low, ci_high]``) and writes line figures of the
  outcomes against the first ``--by`` field.

The figures (:func:`outcomes_figure`, :func:`accuracy_vs_slot`) follow
:mod:`wflsim.analysis.figures` and reuse its helpers: one colour per scheme (``scheme_color``), the
mean over seeds with its 95 % Student-t interval cut to the seeds' range (none with one seed), axis
labels with units, no offset notation.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from . import figures, stats, tidy
from .figures import bands, common
from .tidy.runs import _flatten, _resolved_scenario

#: Channel and mobility settings of a run (flattened scenario fields) -> column name.
SETTINGS: dict[str, str] = {
    "channel.csi.error_variance": "csi_error_variance",
    "channel.csi.delay_slots": "csi_delay_slots",
    "channel.fading.model": "fading",
    "channel.fading.k_db": "k_db",
    "channel.fading.m": "m",
    "channel.fading.correlation.model": "correlation",
    "channel.pathloss.model": "pathloss",
    "channel.shadowing.sigma_db": "shadowing_sigma_db",
    "channel.replay": "replay",
    "scheme.csi_margin.target_outage": "csi_target_outage",
    "mobility.model": "mobility",
    "mobility.speed_mps": "speed_mps",
}

#: Axis labels (with units) of the settings; another column is labelled by its name.
SETTING_LABELS: dict[str, str] = {
    "csi_error_variance": "CSI error variance (normalised)",
    "csi_delay_slots": "CSI delay (slots)",
    "fading": "fading model",
    "k_db": "Rician K (dB)",
    "m": "Nakagami m (shape, dimensionless)",
    "correlation": "fading correlation model",
    "pathloss": "path-loss model",
    "shadowing_sigma_db": "shadowing sigma (dB)",
    "replay": "replayed channel table",
    "csi_target_outage": "CSI margin's target outage (probability; none: Proposition 1)",
    "mobility": "mobility model",
    "speed_mps": "speed (m/s)",
}

#: The outcome columns of :func:`outcomes`.
OUTCOMES: list[str] = [
    "participation",
    "outage_rate",
    "energy_per_device_slot_j",
    "wasted_energy_per_device_slot_j",
    "wasted_share",
    "mean_slot_s",
    "max_budget_ratio",
    "mean_gamma",
    "mean_cost",
    "planning_gap",
    "final_accuracy",
]

#: Axis labels (with units) of the outcomes.
OUTCOME_LABELS: dict[str, str] = {
    "participation": "participation (fraction of device-slots)",
    "outage_rate": "outage rate (fraction of uploads)",
    "energy_per_device_slot_j": "energy per device-slot (J)",
    "wasted_energy_per_device_slot_j": "wasted energy per device-slot (J)",
    "wasted_share": "wasted share of the energy (fraction)",
    "mean_slot_s": "mean slot length (s)",
    "max_budget_ratio": "worst device's energy / budget (ratio)",
    "mean_gamma": "mean freezing fraction gamma (fraction)",
    "mean_cost": "mean cost z (J^2)",
    "planning_gap": "planning gap z - Z(gamma) (J^2)",
    "final_accuracy": "final test accuracy (fraction)",
}

#: What a panel says when every run has 0 of its outcome (nothing to draw).
_NOTHING = {
    "outage_rate": "no outages: every upload met the deadline\n(or the server waited for it)",
    "wasted_share": "no energy wasted: no upload missed the deadline",
}


def setting_label(col: str) -> str:
    """The axis label of a setting column (:data:`SETTING_LABELS`; else the column's name)."""
    return SETTING_LABELS.get(col, col)


def _settings(run_dir: str) -> dict[str, Any]:
    flat = _flatten(_resolved_scenario(Path(run_dir)))
    out: dict[str, Any] = {}
    for key, col in SETTINGS.items():
        v = flat.get(key)
        if key == "channel.csi.error_variance" and v is None:
            v = 0.0  # perfect CSI
        if key == "channel.csi.delay_slots" and v is None:
            v = 0
        if key == "channel.fading.correlation.model" and v is None and flat.get(key[:-6]):
            v = flat.get(key[:-6])
        out[col] = json.dumps(v) if isinstance(v, list) else v
    if out["mobility"] == "static":
        out["speed_mps"] = "[0, 0]"
    return out


def planning_gap(device_slots: pd.DataFrame, frames: pd.DataFrame) -> pd.Series:
    """Per run: mean over device-frames of (realised mean per-slot cost z over the frame's slots
    minus the controller's expected per-slot cost Z(gamma) of the frame); NaN for schemes
    without the controller."""
    if "expected_cost" not in frames or frames["expected_cost"].isna().all():
        return pd.Series(dtype=float)
    real = (
        device_slots.groupby(["run", "frame", "device"], observed=True)["cost"]
        .mean()
        .rename("realised")
    )
    exp = frames.set_index(["run", "frame", "device"])["expected_cost"]
    both = pd.concat([real, exp], axis=1, join="inner").dropna()
    return (both["realised"] - both["expected_cost"]).groupby(level="run").mean()


def outcomes(runs: tidy.RunsArg) -> pd.DataFrame:
    """One row per run: ID columns, channel settings (:data:`SETTINGS`) and :data:`OUTCOMES`."""
    t = tidy.load(runs, ["device_slots", "slots", "frames", "evaluations"])
    ds = t.device_slots
    summ = stats.summary(ds, t.slots, t.evaluations, t.runs, privacy=t.privacy)
    en = stats.energy_totals(ds).set_index("run")
    summ = summ.set_index("run")
    summ["wasted_energy_per_device_slot_j"] = en["wasted_energy_j"] / ds.groupby("run").size()
    summ["wasted_share"] = en["wasted_energy_j"] / en["total_energy_j"].where(
        en["total_energy_j"] > 0
    )
    summ["planning_gap"] = planning_gap(ds, t.frames)
    summ = summ.reset_index()
    settings = pd.DataFrame([_settings(d) for d in t.runs["run_dir"]], index=t.runs["run"])
    out = summ.merge(settings, left_on="run", right_index=True, how="left")
    ids = [c for c in ("run", "scheme", "seed") if c in out]
    return out[ids + list(SETTINGS.values()) + OUTCOMES]


def over_seeds(
    table: pd.DataFrame, by: Sequence[str], values: Sequence[str] = tuple(OUTCOMES)
) -> pd.DataFrame:
    """Per configuration ``by``: ``n`` (its runs, the seeds) and, for each of ``values`` that
    has a value, the mean over seeds ``<col>``, its standard error ``<col>_se`` and 95 %
    Student-t interval ``<col>_ci_low``, ``<col>_ci_high`` (NaN with one seed):
    :func:`wflsim.analysis.stats.over_seeds`."""
    keep = [v for v in values if v in table and table[v].notna().any()]
    return stats.over_seeds(table, by=list(by), value_cols=keep)


def paired_differences(
    runs: tidy.RunsArg, reference: str, metric: str = "energy_j", per: str = "sum"
) -> pd.DataFrame:
    """Schemes against ``reference`` on the same channel, slot by slot.

    Runs are matched by seed (runs replayed on one recording per seed see bit-identical
    channels). For each slot the metric of every device is aggregated (``per``: ``"sum"`` or
    ``"mean"`` over devices; ``energy_j``, ``success``, ``participating``, ``wasted_energy_j``,
    ...), and the difference scheme - reference is taken per slot.

    Returns one row per (scheme, seed): ``slots``, ``mean_diff`` (the mean per-slot difference),
    ``paired_se`` (standard error of that mean from the paired differences) and ``unpaired_se``
    (the standard error if the two runs' slots were compared as independent samples), and their
    ratio ``se_ratio = unpaired_se / paired_se`` (how much pairing sharpens the comparison).
    """
    ds = tidy.device_slots(runs)
    agg = ds.groupby(["scheme", "seed", "slot"], observed=True)[metric].agg(per).astype(float)
    wide = agg.unstack("scheme")
    if reference not in wide:
        raise ValueError(f"no runs of the reference scheme {reference!r}")
    rows = []
    for scheme in wide.columns:
        if scheme == reference:
            continue
        for seed, part in wide[[scheme, reference]].groupby(level="seed"):
            a, b = part[scheme].to_numpy(), part[reference].to_numpy()
            ok = ~(np.isnan(a) | np.isnan(b))
            a, b = a[ok], b[ok]
            n = len(a)
            d = a - b
            paired = float(np.std(d, ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
            unpaired = (
                float(math.sqrt(np.var(a, ddof=1) / n + np.var(b, ddof=1) / n))
                if n > 1
                else float("nan")
            )
            rows.append(
                {
                    "scheme": scheme,
                    "reference": reference,
                    "seed": seed,
                    "metric": f"{per} {metric}",
                    "slots": n,
                    "mean_diff": float(d.mean()),
                    "paired_se": paired,
                    "unpaired_se": unpaired,
                    "se_ratio": unpaired / paired if paired > 0 else float("inf"),
                }
            )
    return pd.DataFrame(rows)


def _x_values(col: pd.Series) -> pd.Series:
    """A setting column as the x of a figure: numbers where every value is one, else categories."""
    xs = pd.to_numeric(col, errors="coerce")
    return xs if xs.notna().all() else col.astype(str)


def _value_text(v: object) -> str:
    return f"{v:g}" if isinstance(v, float | int | np.number) else str(v)


def outcomes_figure(
    table: pd.DataFrame,
    x: str,
    ys: Sequence[str],
    title: str = "",
    split: Sequence[str] = (),
) -> Figure:
    """The outcomes ``ys`` against the setting ``x``, one panel per outcome, one line per
    scheme in its colour (:func:`wflsim.analysis.figures.scheme_color`) and per value of the
    settings ``split`` (line style): the mean over seeds, with its 95 % Student-t interval as bars
    where there are several seeds, cut to the range of the seeds' values
    (:func:`wflsim.analysis.stats.seed_intervals`).

    ``table`` has one row per run (:func:`outcomes`). ``mean_slot_s`` is drawn on a log axis,
    another outcome where one line dwarfs another (10 times or more); an outage or wasted-share
    panel where every run has 0 says so in words."""
    data = table.assign(**{x: _x_values(table[x])})
    split = [c for c in split if c in data and c != x and data[c].nunique(dropna=False) > 1]
    series = [
        (scheme, key, rows)
        for (scheme, *key), rows in data.groupby(["scheme", *split], sort=False, dropna=False)
    ]
    rank = {s: i for i, s in enumerate(tidy.SCHEME_LABELS)}  # the paper's order of schemes
    series.sort(key=lambda s: (rank.get(str(s[0]), len(rank)), str(s[0]), str(s[1])))
    styles = {k: i for i, k in enumerate(sorted({str(key) for _, key, _ in series}))}
    fig, axes = common._figure(len(ys), title)
    labels = []
    for ax, y in zip(axes, ys, strict=True):
        ax.set_ylabel(OUTCOME_LABELS.get(y, y))
        peaks = []
        for scheme, key, rows in series:
            label = tidy.SCHEME_LABELS.get(str(scheme), str(scheme))
            label += "".join(f", {c} = {_value_text(v)}" for c, v in zip(split, key, strict=True))
            style = common._style(styles[str(key)], str(scheme))
            if y in rows and rows[y].notna().any():
                peaks.append(bands._point_errorbars(ax, rows, x, y, label, style))
                labels.append(label)
        ax.set_xlabel(setting_label(x))
        if pd.api.types.is_numeric_dtype(data[x]) and (data[x] % 1 == 0).all():
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # slots, dB steps
        ax.grid(alpha=0.3)
        values = pd.to_numeric(data[y], errors="coerce") if y in data else pd.Series([])
        if values.isna().all():
            figures.say_empty(ax, f"no {y} in these runs")
        elif y in _NOTHING and (values.fillna(0) == 0).all():
            figures.say_empty(ax, _NOTHING[y])
        else:
            _log_if_dwarfed(ax, peaks, always=y == "mean_slot_s")
    bands._legend(fig, axes, order=list(dict.fromkeys(labels)))
    return common._finish(fig)


def figure(
    table: pd.DataFrame,
    x: str,
    ys: Sequence[str],
    path: Path,
    title: str = "",
    split: Sequence[str] = (),
) -> Path:
    """:func:`outcomes_figure` written to ``path`` (PNG)."""
    return _save(outcomes_figure(table, x, ys, title, split), path)


def _log_if_dwarfed(ax: Axes, peaks: Sequence[float], always: bool = False) -> None:
    """A logarithmic y axis when ``always`` or when one line's peak is 10 times another's or
    more (:func:`wflsim.analysis.figures.common._symlog_if_dwarfed`), decided on the means, so
    that an interval reaching below 0 (two or three seeds) is cut at the panel's edge rather than
    turning the axis symmetric-log; symmetric-log where a mean is 0 or negative."""
    means = np.concatenate(
        [
            np.asarray(c.lines[0].get_ydata(), dtype=np.float64)
            for c in ax.containers
            if isinstance(c, ErrorbarContainer)  # the panels hold error bars only
        ]
    )
    means = means[np.isfinite(means)]
    p = np.array([v for v in peaks if np.isfinite(v) and v > 0])
    dwarfed = len(p) >= 2 and p.max() >= common._SYMLOG_RATIO * p.min()
    if len(means) and means.min() > 0 and (always or dwarfed):
        ax.set_yscale("log")
        ax.set_ylabel(ax.get_ylabel() + "\n(log scale)")
    elif dwarfed:
        common._symlog_if_dwarfed([ax], peaks)


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def accuracy_vs_slot(evaluations: pd.DataFrame, by: str) -> Figure:
    """Test accuracy (%) against the slot, one panel per scheme (titled with its label), one
    line per value of the setting column ``by`` of ``evaluations`` (a colour of a sequential
    colormap, a line style and a marker per value): the mean over seeds with its 95 %
    Student-t band where there are several seeds, cut to the range of the seeds' values."""
    from matplotlib import colormaps

    ev = evaluations.assign(slots_done=evaluations["slot"] + 1, **{by: _x_values(evaluations[by])})
    rank = {s: i for i, s in enumerate(tidy.SCHEME_LABELS)}
    schemes = sorted(ev["scheme"].unique(), key=lambda s: (rank.get(s, len(rank)), s))
    values = sorted(ev[by].unique())
    labels = [f"{setting_label(by)} = {_value_text(v)}" for v in values]
    cmap = colormaps["viridis"]
    fig, axes = common._figure(len(schemes), f"Test accuracy by {setting_label(by)}", sharey=True)
    for ax, scheme in zip(axes, schemes, strict=True):
        part = ev[ev["scheme"] == scheme]
        for i, (value, label) in enumerate(zip(values, labels, strict=True)):
            rows = part[part[by] == value]
            if rows.empty:
                continue
            colour = cmap(0.85 * i / max(1, len(values) - 1))  # no pale yellow on white
            # one panel per scheme: colour and marker tell the setting's values apart
            style = dict(
                common._style(i, str(scheme), len(rows)),
                color=colour,
                marker=common._MARKERS[i % len(common._MARKERS)],
            )
            bands._band_line(ax, rows, "slots_done", "accuracy", 100.0, label, style)
        ax.set_title(tidy.SCHEME_LABELS.get(scheme, scheme), fontsize="medium")
        ax.set_xlabel("slots done (communication rounds)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy (%)")
    common._fit_to_lines(axes)
    bands._legend(fig, axes, order=labels)
    return common._finish(fig)


def accuracy_figure(runs: tidy.RunsArg, by: str, path: Path) -> Path | None:
    """:func:`accuracy_vs_slot` of the runs' evaluations, written to ``path`` (PNG); None
    without evaluations."""
    ev = tidy.evaluations(runs)
    if not len(ev):
        return None
    info = tidy.runs_table(runs)
    setting = {r: _settings(d)[by] for r, d in zip(info["run"], info["run_dir"], strict=True)}
    return _save(accuracy_vs_slot(ev.assign(**{by: ev["run"].map(setting)}), by), path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="run or sweep directories")
    p.add_argument("--by", nargs="+", default=["csi_error_variance"], help="setting columns")
    p.add_argument("--paired", default=None, help="reference scheme of paired differences")
    p.add_argument("--metric", default="energy_j", help="device-slot metric of --paired")
    p.add_argument("--figures", default=None, help="folder for PNG figures")
    p.add_argument("--digits", type=int, default=4)
    args = p.parse_args(argv)
    table = outcomes(args.runs)
    by = ["scheme", *args.by]
    summary = over_seeds(table, by)
    print(stats.to_markdown(stats.format_over_seeds(summary, args.digits), args.digits))
    if args.figures:
        out = Path(args.figures)
        x = args.by[0]
        ys = ["outage_rate", "energy_per_device_slot_j", "wasted_share", "mean_slot_s"]
        png = figure(
            table,
            x,
            ys,
            out / f"outcomes_vs_{x}.png",
            title=f"Outcomes against the {setting_label(x)}",
            split=args.by[1:],
        )
        print(f"\nfigure: {png}")
        if "final_accuracy" in summary and summary["final_accuracy"].notna().any():
            acc = accuracy_figure(args.runs, x, out / f"accuracy_vs_slot_by_{x}.png")
            print(f"figure: {acc}")
    if args.paired:
        print()
        for metric, per in ((args.metric, "sum"), ("success", "sum")):
            pdiff = paired_differences(args.runs, args.paired, metric, per)
            print(stats.to_markdown(pdiff, args.digits))
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
