"""Channel studies: what imperfect CSI and non-Rayleigh fading do to each scheme, and paired
comparisons of schemes replayed on one recorded channel.

* :func:`outcomes` -- one row per run: the run's channel settings (CSI error and delay, fading
  family and parameters, time correlation, mobility speeds, replayed table), and its outcomes:
  participation, outage rate, energy and wasted energy per device-slot, the wasted share, mean
  slot length, the worst device's energy over its budget, mean ``gamma``, mean cost, final
  accuracy, and the controller's planning gap (realised mean per-slot cost of each device-frame
  minus the controller's expected cost ``Z(gamma)``: zero on average when the channel is what
  Theorem 2 assumes).
* :func:`over_seeds` -- mean and standard deviation over seeds of each configuration.
* :func:`paired_differences` -- for runs replayed on one channel table, per-slot differences of
  a metric between each scheme and a reference scheme: mean, paired standard error, and the
  standard error an unpaired comparison of the same runs would have.
* ``python -m analysis.channel DIR [--by FIELD ...] [--paired REF] [--figures OUT]`` prints the
  tables as Markdown (and writes line figures of the metrics against the first ``--by`` field).
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

from analysis import stats, tidy

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
    "mobility.model": "mobility",
    "mobility.speed_mps": "speed_mps",
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


def _settings(run_dir: str) -> dict[str, Any]:
    flat = tidy._flatten(tidy._resolved_scenario(Path(run_dir)))
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
    summ = stats.summary(ds, t.slots, t.evaluations, t.runs)
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
    """Mean and standard deviation (``<col>_std``) over seeds of every configuration ``by``
    (``n_runs`` counts the seeds)."""
    keep = [v for v in values if v in table and table[v].notna().any()]
    return stats.mean_over_seeds(table, by=list(by), values=keep)


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


def figure(table: pd.DataFrame, x: str, ys: Sequence[str], path: Path, title: str = "") -> Path:
    """Line figure of ``ys`` (means over seeds, standard deviations as bars) against ``x``, one
    line per scheme; written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ys), figsize=(4.2 * len(ys), 3.4), squeeze=False)
    order = list(tidy.SCHEME_LABELS)  # one colour per scheme in every figure
    for ax, y in zip(axes[0], ys, strict=True):
        for scheme, part in table.groupby("scheme"):
            part = part.sort_values(x)
            k = order.index(scheme) if scheme in order else len(order)
            xs = pd.to_numeric(part[x], errors="coerce")
            ax.errorbar(
                xs if xs.notna().all() else part[x].astype(str),  # numbers, else categories
                part[y],
                yerr=part.get(f"{y}_std"),
                marker="o",
                capsize=3,
                color=f"C{k % 10}",
                label=tidy.SCHEME_LABELS.get(str(scheme), str(scheme)),
            )
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        if y == "mean_slot_s":  # slots of waiting schemes have heavy tails
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def accuracy_figure(runs: tidy.RunsArg, by: str, path: Path) -> Path | None:
    """Test accuracy against the slot, one panel per scheme, one line per value of the setting
    ``by`` (means over seeds, standard deviations as bars); None without evaluations."""
    ev = tidy.evaluations(runs)
    if not len(ev):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    info = tidy.runs_table(runs)
    setting = {r: _settings(d)[by] for r, d in zip(info["run"], info["run_dir"], strict=True)}
    ev = ev.assign(**{by: ev["run"].map(setting)})
    schemes = sorted(ev["scheme"].unique())
    fig, axes = plt.subplots(
        1, len(schemes), figsize=(4.2 * len(schemes), 3.4), squeeze=False, sharey=True
    )
    for ax, scheme in zip(axes[0], schemes, strict=True):
        part = ev[ev["scheme"] == scheme]
        for value, p in part.groupby(by):
            m = p.groupby("slot")["accuracy"].agg(["mean", "std"])
            ax.errorbar(
                m.index + 1,
                m["mean"],
                yerr=m["std"],
                marker="o",
                capsize=3,
                label=f"{by} = {value}",
            )
        ax.set_title(tidy.SCHEME_LABELS.get(scheme, scheme))
        ax.set_xlabel("slots done")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
    print(stats.to_markdown(summary, args.digits))
    if args.figures:
        out = Path(args.figures)
        x = args.by[0]
        ys = ["outage_rate", "energy_per_device_slot_j", "wasted_share", "mean_slot_s"]
        print(f"\nfigure: {figure(summary, x, ys, out / f'outcomes_vs_{x}.png')}")
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
