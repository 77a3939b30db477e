"""Metrics computed from the tidy tables of :mod:`wflsim.analysis.tidy` (one run or many).

``python -m wflsim.analysis.stats RUN_OR_SWEEP [...] [--columns a,b,...]`` prints :func:`summary` of the
runs as a Markdown table.

Every function takes DataFrames (not paths) and groups by ``run`` (or by the columns in ``by``);
run-level results keep the run's identifying columns (:data:`wflsim.analysis.tidy.ID_COLUMNS`).
Averages "per device-slot" weigh every device in every slot equally, as the paper's
``E_av``, ``Q_av``, ``X_av`` and ``z_av`` do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats as _st

from .tidy import ID_COLUMNS

if TYPE_CHECKING:
    from pandas.api.typing import DataFrameGroupBy

    from .tidy import PrivacyRows

#: The identifying columns that tell configurations apart (``run`` and ``seed`` excluded).
CONFIG_COLUMNS: list[str] = [c for c in ID_COLUMNS if c not in ("run", "seed")]


def _ids(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in ID_COLUMNS if c in df.columns]
    return df[cols].drop_duplicates("run").reset_index(drop=True)


def _with_ids(result: pd.DataFrame, df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Put the run's ID columns in front of a result grouped by ``run`` (and more)."""
    if "run" not in by or "run" not in df.columns:
        return result
    ids = _ids(df)
    extra = [c for c in ids.columns if c not in result.columns or c == "run"]
    return ids[extra].merge(result, on="run", how="right")


def _group(df: pd.DataFrame, by: Sequence[str]) -> DataFrameGroupBy:
    return df.groupby(list(by), sort=True, dropna=False, observed=True)


def rates(device_slots: pd.DataFrame, by: Sequence[str] = ("run",)) -> pd.DataFrame:
    """Participation, drop-out, outage and success rates.

    Columns: ``device_slots`` (count), ``participation`` (participating per device-slot),
    ``dropout_rate`` (``1 - participation``), ``outage_rate`` (late uploads per participation;
    0 when nobody participated), ``success_rate`` (aggregated uploads per device-slot),
    ``available_rate`` (device-slots online at the slot's start, ``[availability]``; 1 without
    it), ``drop_rate`` (participations lost because the device went offline, per
    participation).
    """
    g = _group(device_slots, by)
    out = pd.DataFrame(
        {
            "device_slots": g["participating"].count(),
            "participations": g["participating"].sum(),
            "outages": g["outage"].sum(),
            "successes": g["success"].sum(),
            "available": g["available"].sum(),
            "drops": g["dropped"].sum(),
        }
    )
    out["participation"] = out["participations"] / out["device_slots"]
    out["dropout_rate"] = 1.0 - out["participation"]
    out["outage_rate"] = (
        out["outages"] / out["participations"].where(out["participations"] > 0)
    ).fillna(0.0)
    out["success_rate"] = out["successes"] / out["device_slots"]
    out["available_rate"] = out["available"] / out["device_slots"]
    out["drop_rate"] = (
        out["drops"] / out["participations"].where(out["participations"] > 0)
    ).fillna(0.0)
    return _with_ids(out.reset_index(), device_slots, by)


def slot_latency(slots: pd.DataFrame, by: Sequence[str] = ("run",)) -> pd.DataFrame:
    """Latency per slot (communication round): ``slots``, ``mean_slot_s``, ``max_slot_s``,
    ``total_latency_s`` (s, the sum of the slots' durations)."""
    g = _group(slots, by)["slot_duration_s"]
    out = pd.DataFrame(
        {
            "slots": g.count(),
            "mean_slot_s": g.mean(),
            "max_slot_s": g.max(),
            "total_latency_s": g.sum(),
        }
    )
    return _with_ids(out.reset_index(), slots, by)


def energy_per_device(device_slots: pd.DataFrame) -> pd.DataFrame:
    """Per run and device: ``total_energy_j``, ``mean_energy_j`` (J per slot), ``energy_budget_j``
    (E_bar), ``budget_ratio`` (mean / budget), ``mean_queue_j`` and ``final_queue_j`` (J)."""
    ds = device_slots.sort_values(["run", "slot"], kind="stable")
    g = _group(ds, ["run", "device"])
    out = pd.DataFrame(
        {
            "slots": g["energy_j"].count(),
            "total_energy_j": g["energy_j"].sum(),
            "mean_energy_j": g["energy_j"].mean(),
            "energy_budget_j": g["energy_budget_j"].first(),
            "mean_queue_j": g["queue_j"].mean(),
            "final_queue_j": g["queue_j"].last(),
        }
    ).reset_index()
    out["budget_ratio"] = out["mean_energy_j"] / out["energy_budget_j"]
    return _with_ids(out, device_slots, ["run"])


def energy_totals(device_slots: pd.DataFrame, by: Sequence[str] = ("run",)) -> pd.DataFrame:
    """Energy of all devices: ``total_energy_j``, ``compute_energy_j``, ``upload_energy_j``,
    ``wasted_energy_j`` (the energy of outages) (J), ``energy_per_device_j`` (total / devices) and
    ``energy_per_device_slot_j`` (mean, J)."""
    g = _group(device_slots, by)
    out = pd.DataFrame(
        {
            "total_energy_j": g["energy_j"].sum(),
            "compute_energy_j": g["energy_compute_j"].sum(),
            "upload_energy_j": g["energy_upload_j"].sum(),
            "wasted_energy_j": g["wasted_energy_j"].sum(),
            "devices": g["device"].nunique(),
            "energy_per_device_slot_j": g["energy_j"].mean(),
        }
    )
    out["energy_per_device_j"] = out["total_energy_j"] / out["devices"]
    return _with_ids(out.reset_index(), device_slots, by)


def queue_trajectories(device_slots: pd.DataFrame) -> pd.DataFrame:
    """Per run and slot: ``mean_queue_j``, ``max_queue_j`` (J, over devices, after the slot)."""
    g = _group(device_slots, ["run", "slot"])["queue_j"]
    out = pd.DataFrame({"mean_queue_j": g.mean(), "max_queue_j": g.max()}).reset_index()
    return _with_ids(out, device_slots, ["run"])


def gamma_trajectories(frames: pd.DataFrame) -> pd.DataFrame:
    """Per run and frame: ``mean_gamma``, ``min_gamma``, ``max_gamma`` over devices."""
    g = _group(frames, ["run", "frame"])["gamma"]
    out = pd.DataFrame(
        {"mean_gamma": g.mean(), "min_gamma": g.min(), "max_gamma": g.max()}
    ).reset_index()
    return _with_ids(out, frames, ["run"])


def running_averages(device_slots: pd.DataFrame) -> pd.DataFrame:
    """Per run and slot: the device means ``energy_j``, ``conv_error`` (X), ``cost`` (z),
    ``queue_j``, and their running time-averages from slot 0 (``avg_energy_j``,
    ``avg_conv_error``, ``avg_cost``, ``avg_queue_j``): the paper's Figs. 3-4."""
    g = _group(device_slots, ["run", "slot"])
    out = pd.DataFrame(
        {
            "energy_j": g["energy_j"].mean(),
            "conv_error": g["conv_error"].mean(),
            "cost": g["cost"].mean(),
            "queue_j": g["queue_j"].mean(),
        }
    ).reset_index()
    for c in ("energy_j", "conv_error", "cost", "queue_j"):
        out["avg_" + c] = out.groupby("run")[c].transform(lambda s: s.expanding().mean())
    return _with_ids(out, device_slots, ["run"])


def accuracy_vs_energy(evaluations: pd.DataFrame) -> pd.DataFrame:
    """Per evaluation: ``run``, ``slot``, ``cum_energy_j`` (J, all devices) and ``accuracy``."""
    cols = [c for c in ID_COLUMNS if c in evaluations] + ["slot", "cum_energy_j", "accuracy"]
    return evaluations[cols].reset_index(drop=True)


def first_reach(evaluations: pd.DataFrame, target: float, column: str) -> float:
    """``column`` (e.g. ``time_s``, ``cum_energy_j``) at the first of one run's evaluations, in
    their order, whose accuracy is at least ``target`` (a fraction); NaN if none reaches it."""
    hit = evaluations[evaluations["accuracy"] >= target]
    return float(hit[column].iloc[0]) if len(hit) else float("nan")


def accuracy_vs_time(evaluations: pd.DataFrame) -> pd.DataFrame:
    """Per evaluation: ``run``, ``slot``, ``cum_latency_s`` (s, simulated) and ``accuracy``."""
    cols = [c for c in ID_COLUMNS if c in evaluations] + ["slot", "cum_latency_s", "accuracy"]
    return evaluations[cols].reset_index(drop=True)


def summary(
    device_slots: pd.DataFrame,
    slots: pd.DataFrame,
    evaluations: pd.DataFrame | None = None,
    runs: pd.DataFrame | None = None,
    privacy: PrivacyRows | None = None,
) -> pd.DataFrame:
    """One row per run: ID columns, then ``slots``, ``devices``, ``total_energy_j``,
    ``energy_per_device_slot_j`` (E_av), ``mean_queue_j`` (Q_av), ``final_queue_j`` (mean over
    devices after the last slot), ``mean_conv_error`` (X_av), ``mean_cost`` (z_av),
    ``max_budget_ratio`` (the worst device's mean energy per slot over its budget E_bar_n),
    ``mean_gamma``, ``participation``, ``dropout_rate``, ``outage_rate``, ``available_rate``,
    ``drop_rate`` (:func:`rates`), ``mean_slot_s``,
    ``total_latency_s``, ``final_stable_fraction``, ``final_accuracy``, ``best_accuracy``,
    and the privacy measures :data:`wflsim.analysis.privacy.SUMMARY_COLUMNS` (``epsilon_max``,
    ``epsilon_mean``, ``dp_clipped_fraction``, ``dp_noise_std``, ``dp_stopped_devices``: from
    ``privacy``, the runs' privacy rows (:attr:`wflsim.analysis.tidy.Tidy.privacy`), for the
    runs of ``runs`` with ``[privacy]``; NaN otherwise, and for every run without ``privacy``).

    ``runs`` (:func:`wflsim.analysis.tidy.runs_table`) lists every run, also those without a single
    slot (a run that failed at once: ``slots`` 0, the rest NaN); without it a run appears when
    ``device_slots`` has rows of it."""
    ds = device_slots
    g = _group(ds, ["run"])
    last_slot = g["slot"].transform("max")
    out = pd.DataFrame(
        {
            "mean_queue_j": g["queue_j"].mean(),
            "final_queue_j": _group(ds[ds["slot"] == last_slot], ["run"])["queue_j"].mean(),
            "mean_conv_error": g["conv_error"].mean(),
            "mean_cost": g["cost"].mean(),
            "mean_gamma": g["gamma"].mean(),
        }
    ).reset_index()
    en = energy_totals(ds)[["run", "devices", "total_energy_j", "energy_per_device_slot_j"]]
    worst = energy_per_device(ds).groupby("run")["budget_ratio"].max().rename("max_budget_ratio")
    en = en.merge(worst, left_on="run", right_index=True, how="left")
    rt = rates(ds)[
        ["run", "participation", "dropout_rate", "outage_rate", "available_rate", "drop_rate"]
    ]
    lat = slot_latency(slots)[["run", "slots", "mean_slot_s", "total_latency_s"]]
    out = en.merge(out, on="run").merge(rt, on="run").merge(lat, on="run", how="left")
    stab = slots.dropna(subset=["stable_fraction"]).sort_values(["run", "slot"])
    out = out.merge(
        stab.groupby("run")["stable_fraction"].last().rename("final_stable_fraction"),
        left_on="run",
        right_index=True,
        how="left",
    )
    if evaluations is not None and len(evaluations):
        ev = evaluations.sort_values(["run", "slot"], kind="stable").groupby("run")["accuracy"]
        acc = pd.DataFrame({"final_accuracy": ev.last(), "best_accuracy": ev.max()})
        out = out.merge(acc, left_on="run", right_index=True, how="left")
    else:
        out["final_accuracy"] = np.nan
        out["best_accuracy"] = np.nan
    order = [
        "run",
        "slots",
        "devices",
        "total_energy_j",
        "energy_per_device_slot_j",
        "mean_queue_j",
        "final_queue_j",
        "max_budget_ratio",
        "mean_conv_error",
        "mean_cost",
        "mean_gamma",
        "participation",
        "dropout_rate",
        "outage_rate",
        "available_rate",
        "drop_rate",
        "mean_slot_s",
        "total_latency_s",
        "final_stable_fraction",
        "final_accuracy",
        "best_accuracy",
    ]
    from .privacy import SUMMARY_COLUMNS, privacy_summary

    if runs is None:
        plain = _with_ids(out[order], ds, ["run"])
        return plain.assign(**{c: np.nan for c in SUMMARY_COLUMNS})
    ids = runs[[c for c in ID_COLUMNS if c in runs.columns]]
    full = ids.merge(out[order], on="run", how="left")
    full["slots"] = full["slots"].fillna(0).astype("int64")
    if privacy is None:  # the privacy rows not read: not measured here (NaN), not 0
        return full.assign(**{c: np.nan for c in SUMMARY_COLUMNS})
    dp = privacy_summary(privacy, runs)
    return full.merge(dp.drop_duplicates("run"), on="run", how="left")


def mean_over_seeds(
    table: pd.DataFrame, by: Sequence[str] | None = None, values: Sequence[str] | None = None
) -> pd.DataFrame:
    """Mean and standard deviation (``<col>_std``, next to it) of the numeric ``values`` over the
    runs of each configuration.

    ``by`` defaults to :data:`CONFIG_COLUMNS` present in ``table``; ``n_runs`` counts the runs
    (seeds) averaged. The standard deviation is NaN for a single run.
    """
    by = [c for c in (by or CONFIG_COLUMNS) if c in table.columns]
    skip = set(by) | {"run", "seed"}
    values = list(
        values
        or [c for c in table.columns if c not in skip and pd.api.types.is_numeric_dtype(table[c])]
    )
    g = _group(table, by)
    mean, std = g[values].mean(), g[values].std()
    cols = [g.size().rename("n_runs")]
    for c in values:
        cols += [mean[c], std[c].rename(c + "_std")]
    return pd.concat(cols, axis=1).reset_index()


def t_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, ...]:
    """``(mean, se, ci_low, ci_high, n)`` of the finite ``values``: the standard error
    ``s / sqrt(n)`` and the Student-t interval ``mean -+ t_{(1+level)/2, n-1} se`` (NaN for the
    spread when ``n < 2``)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return (np.nan, np.nan, np.nan, np.nan, 0)
    mean = float(x.mean())
    if n < 2:
        return (mean, np.nan, np.nan, np.nan, 1)
    se = float(x.std(ddof=1) / np.sqrt(n))
    half = float(_st.t.ppf(0.5 + level / 2.0, n - 1)) * se
    return (mean, se, mean - half, mean + half, n)


#: Run measures whose values lie in [0, 1] (shares of something), by name; so does a name ending
#: in one of :data:`_UNIT_SUFFIXES` (:func:`measure_range`).
_UNIT_NAMES = frozenset({"participation", "mean_gamma"})
_UNIT_SUFFIXES = ("_rate", "_fraction", "_share", "accuracy")
#: Run measures that are counts or otherwise never negative, by name; so does a name ending in
#: one of :data:`_NONNEGATIVE_SUFFIXES` (energies, times, errors, ratios of them).
_NONNEGATIVE_NAMES = frozenset(
    {
        "slots",
        "devices",
        "drops",
        "handovers",
        "cloud_rounds",
        "trace_rows",
        "final_loss",
        "epsilon_max",
        "epsilon_mean",
        "dp_stopped_devices",
        "dp_noise_std",
        "n_runs",
    }
)
_NONNEGATIVE_SUFFIXES = ("_j", "_s", "_mse", "_ratio", "_count", "_bits")


def measure_range(name: str) -> tuple[float, float]:
    """The values the run measure ``name`` can take: ``(0, 1)`` for a share (accuracy, a rate,
    a fraction: ``outage_rate``, ``final_accuracy``, ``participation``), ``(0, inf)`` for a count,
    an energy (J), a time (s), a loss, a squared error or a ratio of them (``handovers``,
    ``total_energy_j``, ``simulated_time_s``), ``(-inf, inf)`` for anything else (a measure this
    table does not know is never cut; ``mean_conv_error`` and ``mean_cost`` are negative:
    ``X = lam B (gamma - 1)``)."""
    if name in _UNIT_NAMES or name.endswith(_UNIT_SUFFIXES):
        return (0.0, 1.0)
    if name in _NONNEGATIVE_NAMES or name.endswith(_NONNEGATIVE_SUFFIXES):
        return (0.0, np.inf)
    return (-np.inf, np.inf)


def difference_range(name: str) -> tuple[float, float]:
    """The values a difference of two runs' measure ``name`` can take (:func:`measure_range`):
    ``(-1, 1)`` for a share, else unbounded."""
    lo, hi = measure_range(name)
    return (lo - hi, hi - lo)


def within(ci_low: float, ci_high: float, bounds: tuple[float, float]) -> tuple[float, float, bool]:
    """An interval cut to ``bounds`` (a measure's range, :func:`measure_range`) and whether it
    was cut. A Student-t interval of the mean of few seeds of a count or a rate can reach
    beyond the values the measure can take (three seeds of 0, 0 and 41 handovers: the mean
    13.7 and the interval [-45.1, 72.5]); the mean lies in the range, so cutting the interval
    there never leaves it out where the uncut interval held it (the coverage is unchanged), and
    the cut bound says "at least 0" rather than a count below zero (docs/decisions.md, "Sweeps
    and tables")."""
    lo, hi = bounds
    if not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return ci_low, ci_high, False
    cut_low, cut_high = max(ci_low, lo), min(ci_high, hi)
    return float(cut_low), float(cut_high), bool(cut_low != ci_low or cut_high != ci_high)


def seed_interval(
    values: Sequence[float] | np.ndarray,
    level: float = 0.95,
    bounds: tuple[float, float] = (-np.inf, np.inf),
) -> dict[str, float | int | bool]:
    """:func:`t_interval` of ``values`` (one per seed) cut to ``bounds`` (:func:`within`):
    ``n``, ``mean``, ``ci_low``, ``ci_high`` and ``ci_clipped`` (whether the interval was cut at
    a bound of the measure's range)."""
    mean, _, lo, hi, n = t_interval(values, level)
    lo, hi, cut = within(lo, hi, bounds)
    return {"n": n, "mean": mean, "ci_low": lo, "ci_high": hi, "ci_clipped": cut}


#: The outlier rule's threshold (docs/decisions.md, "Verdicts and outlier seeds"): a seed is an
#: outlier when, left out, the standard deviation of the other seeds falls below this share of
#: the standard deviation of all of them.
OUTLIER_SPREAD_SHARE = 1.0 / 3.0

#: The fewest finite values (seeds) the outlier rule names an outlier among (docs/decisions.md,
#: "Outlier seeds and readable figures"): with five seeds, one normal distribution's draws give
#: an outlier in about 5 % of samples; with three in about 45 % and with four in about 15 %,
#: so below five the name would say more about the rule than about the seed.
OUTLIER_MIN_SEEDS = 5


def outlier_mask(
    values: Sequence[float] | np.ndarray, share: float = OUTLIER_SPREAD_SHARE
) -> np.ndarray:
    """Which of ``values`` (one per seed) are outliers: with :data:`OUTLIER_MIN_SEEDS` (five)
    finite values or more, a value whose leaving out makes the sample standard deviation of the
    others smaller than ``share`` times that of all of them (it alone makes most of the spread).
    With ``share <= 1/2`` at most one value is an outlier; NaN and inf never are; fewer than
    five finite values, or all equal: none.

    Below five seeds the rule would name a seed in draws of one normal distribution too often
    to mean anything (about 45 % of samples with three seeds, 15 % with four; 5 % with five,
    0.2 % with eight); docs/decisions.md, "Verdicts and outlier seeds" and "Outlier seeds and
    readable figures"."""
    x = np.asarray(values, dtype=float)
    out = np.zeros(len(x), dtype=bool)
    ok = np.flatnonzero(np.isfinite(x))
    n = len(ok)
    if n < OUTLIER_MIN_SEEDS:
        return out
    v = x[ok]
    dev = v - v.mean()
    ss = float(np.sum(dev**2))
    if not ss > 0.0:
        return out
    # the sum of squares of the others about their own mean: ss - n/(n-1) dev_i^2
    ss_without = ss - n / (n - 1) * dev**2
    var_all, var_without = ss / (n - 1), np.maximum(ss_without, 0.0) / (n - 2)
    out[ok] = var_without < share**2 * var_all
    return out


#: The most seeds :func:`seeds_needed` counts up to (beyond it: "more than").
SEEDS_NEEDED_CAP = 1_000_000


def seeds_needed(mean: float, sd: float, level: float = 0.95) -> int | None:
    """The smallest number of seeds ``n >= 2`` whose ``level`` Student-t interval of the mean
    would exclude zero if the mean and the standard deviation stayed as measured: the smallest
    ``n`` with ``t_{(1+level)/2, n-1} sd / sqrt(n) < |mean|``. ``None`` when no number does (a
    mean of 0, or NaN) or more than :data:`SEEDS_NEEDED_CAP` would be needed; 2 when ``sd``
    is 0 and the mean is not."""
    if not (np.isfinite(mean) and np.isfinite(sd)) or mean == 0.0:
        return None
    if sd <= 0.0:
        return 2

    def excludes(n: int) -> bool:
        return bool(_st.t.ppf(0.5 + level / 2.0, n - 1) * sd / np.sqrt(n) < abs(mean))

    # t_{n-1} / sqrt(n) falls with n: double up to a bracket, then bisect
    hi = 2
    while not excludes(hi):
        if hi >= SEEDS_NEEDED_CAP:
            return None
        hi = min(2 * hi, SEEDS_NEEDED_CAP)
    lo = hi // 2  # excludes(lo) is false (or lo < 2)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if excludes(mid):
            hi = mid
        else:
            lo = mid
    return max(hi, 2)


def over_seeds(
    table: pd.DataFrame,
    by: Sequence[str] | None = None,
    value_cols: Sequence[str] | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """Mean, standard error and a ``level`` Student-t confidence interval of each of
    ``value_cols`` over the runs (seeds) of each configuration: one row per configuration.

    Columns: ``by``, ``n`` (the runs of the configuration), and per value column ``<col>`` (the
    mean over the runs where it is finite), ``<col>_se`` (``s / sqrt(n)``), ``<col>_ci_low`` and ``<col>_ci_high`` (``mean -+
    t_{(1+level)/2, n-1} se``, :data:`scipy.stats.t`, cut to the column's range where it
    reaches beyond it: a rate within [0, 1], a count, energy or time at 0; :func:`measure_range`,
    :func:`within`). The spread is NaN where ``n < 2``. Non-finite values (NaN, inf) are left
    out.

    ``by`` defaults to :data:`CONFIG_COLUMNS` present in ``table`` (every identifying column but
    ``run`` and ``seed``); ``value_cols`` to its numeric columns outside ``by``.
    """
    by = [c for c in (by if by is not None else CONFIG_COLUMNS) if c in table.columns]
    skip = set(by) | {"run", "seed"}
    values = list(
        value_cols
        or [c for c in table.columns if c not in skip and pd.api.types.is_numeric_dtype(table[c])]
    )
    data = table[by + values].copy()
    for c in values:
        data[c] = pd.to_numeric(data[c], errors="coerce").where(np.isfinite(data[c]))
    if by:
        g = _group(data, by)
    else:
        g = data.assign(_all=0).groupby("_all")
    mean, std, n = g[values].mean(), g[values].std(ddof=1), g[values].count()
    cols: list[pd.Series] = [g.size().rename("n")]
    for c in values:
        se = std[c] / np.sqrt(n[c])
        q = pd.Series(_st.t.ppf(0.5 + level / 2.0, (n[c] - 1).clip(lower=1)), index=n.index)
        half = (q * se).where(n[c] >= 2)
        lo, hi = measure_range(c)  # never beyond the measure's range (:func:`within`)
        cols += [
            mean[c],
            se.where(n[c] >= 2).rename(c + "_se"),
            (mean[c] - half).clip(lower=lo).rename(c + "_ci_low"),
            (mean[c] + half).clip(upper=hi).rename(c + "_ci_high"),
        ]
    out = pd.concat(cols, axis=1).reset_index()
    return out.drop(columns=["_all"], errors="ignore")


def seed_intervals(
    per_run: pd.DataFrame,
    by: Sequence[str],
    value: str,
    transform: tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]
    | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """The centre and a ``level`` interval over the runs (seeds) of ``value`` in each group of
    ``by`` (e.g. each slot), computed in the coordinates the values are drawn in and never
    wider than the values themselves.

    ``per_run`` holds one value per run and group (rows: runs; NaN and inf left out).
    ``transform`` is ``(forward, inverse)``, the axis' scale (e.g. ``log10`` and ``10**y`` on a
    log axis; ``None``: linear): the centre is ``inverse(mean(forward(v)))`` (the arithmetic
    mean on a linear axis, the geometric mean on a log axis) and the interval is
    ``inverse(mean -+ t_{(1+level)/2, n-1} s / sqrt(n))`` of the forward values (a Student-t
    interval of the mean, :func:`over_seeds`), cut to the group's ``[min, max]``: with two or
    three seeds ``t`` is 12.7 or 4.3 and the interval alone would reach far beyond every seed.

    Columns: ``by``, ``n`` (finite values), ``<value>`` (the centre), ``<value>_ci_low``,
    ``<value>_ci_high`` (NaN where ``n < 2``), ``<value>_min`` and ``<value>_max`` (the
    values' range), sorted by ``by``.
    """
    fwd, inv = transform if transform is not None else (_identity, _identity)
    v = pd.to_numeric(per_run[value], errors="coerce").to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.asarray(fwd(v), dtype=np.float64)
    ok = np.isfinite(v) & np.isfinite(t)
    data = per_run.loc[ok, list(by)]
    v, t = v[ok], t[ok]
    g = _group(data, by)
    codes = g.ngroup().to_numpy()  # groups numbered in the sorted order of ``by``
    k = int(codes.max()) + 1 if len(codes) else 0
    n = np.bincount(codes, minlength=k)
    mean = np.bincount(codes, t, minlength=k) / np.maximum(n, 1)
    ss = np.bincount(codes, (t - mean[codes]) ** 2, minlength=k)
    sd = np.sqrt(ss / np.maximum(n - 1, 1))
    lo, hi = np.full(k, np.inf), np.full(k, -np.inf)
    np.minimum.at(lo, codes, v)
    np.maximum.at(hi, codes, v)
    q = _st.t.ppf(0.5 + level / 2.0, np.maximum(n - 1, 1))
    half = np.where(n >= 2, q * sd / np.sqrt(np.maximum(n, 1)), np.nan)

    def back(x: np.ndarray) -> np.ndarray:
        # the inverse, then within the values (rounding in the transform)
        return np.clip(np.asarray(inv(x), dtype=np.float64), lo, hi)

    out = g.size().rename("n").reset_index()[[*by, "n"]]
    out[value] = back(mean)
    out[value + "_ci_low"] = back(mean - half)
    out[value + "_ci_high"] = back(mean + half)
    out[value + "_min"], out[value + "_max"] = lo, hi
    return out


def _identity(x: np.ndarray) -> np.ndarray:
    return x


def format_over_seeds(table: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """A readable copy of an :func:`over_seeds` table: each value column as one string
    ``"mean [ci_low, ci_high]"`` (``digits`` significant digits; the mean alone where the
    interval is NaN, one run), the ``_se`` / ``_ci_*`` columns dropped."""
    out = table.copy()
    for c in [c for c in table.columns if c + "_ci_low" in table.columns]:
        lo, hi = table[c + "_ci_low"], table[c + "_ci_high"]
        out[c] = [
            "nan"
            if pd.isna(m)
            else (
                f"{m:.{digits}g}"
                if pd.isna(a)
                else f"{m:.{digits}g} [{a:.{digits}g}, {b:.{digits}g}]"
            )
            for m, a, b in zip(table[c], lo, hi, strict=True)
        ]
        out = out.drop(columns=[c + "_se", c + "_ci_low", c + "_ci_high"])
    return out


def md_escape(text: object) -> str:
    """``text`` as Markdown shows it literally, on one line: ``&``, ``<`` and ``>`` as HTML
    entities (a run named ``<script>`` is text, not markup, where a renderer passes HTML
    through), ``|`` and backticks escaped (a table cell stays one cell, no code span opens), a
    link's ``](`` broken, line breaks as spaces."""
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("](", "]\\(")
    return " ".join(s.splitlines())


def to_markdown(df: pd.DataFrame, digits: int = 4) -> str:
    """``df`` as a Markdown table; floats to ``digits`` significant digits, NaN as ``nan``;
    every header and cell escaped (:func:`md_escape`)."""

    def fmt(v: object) -> str:
        if isinstance(v, float | np.floating):
            return f"{v:.{digits}g}"
        return md_escape(v)

    lines = ["| " + " | ".join(map(md_escape, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m wflsim.analysis.stats``: the summary table of runs or sweeps, in Markdown."""
    from .tidy import find_runs, load

    ap = argparse.ArgumentParser(
        prog="python -m wflsim.analysis.stats",
        description="Summary table (Markdown) of wflsim runs.",
    )
    ap.add_argument("runs", nargs="+", help="run directories, sweep directories or globs")
    ap.add_argument(
        "--columns",
        default=None,
        help="comma-separated columns to print (default: all of analysis.stats.summary)",
    )
    ap.add_argument(
        "--over-seeds",
        action="store_true",
        help="one row per configuration (the runs' scheme, V, dataset, partition, budget and "
        "grid values): each column as 'mean [low, high]', a Student-t interval over the seeds",
    )
    ap.add_argument(
        "--level",
        type=float,
        default=0.95,
        help="confidence level of --over-seeds' intervals (default 0.95)",
    )
    args = ap.parse_args(argv)
    if not 0.0 < args.level < 1.0:
        print(f"error: --level must be in (0, 1); got {args.level}", file=sys.stderr)
        return 2
    try:
        if not find_runs(args.runs):
            raise FileNotFoundError(
                f"no run (a trace in events/ or events.parquet) found under {args.runs}"
            )
        t = load(args.runs, tables=("device_slots", "slots", "evaluations"))
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    table = summary(t.device_slots, t.slots, t.evaluations, runs=t.runs, privacy=t.privacy)
    cols = [c.strip() for c in (args.columns or "").split(",") if c.strip()]
    unknown = [c for c in cols if c not in table.columns]
    if unknown:
        print(f"error: --columns: unknown {unknown}; known: {list(table.columns)}", file=sys.stderr)
        return 2
    if args.over_seeds:
        by = [
            c for c in CONFIG_COLUMNS if c in table.columns and table[c].nunique(dropna=False) > 1
        ]
        skip = {*CONFIG_COLUMNS, "run", "seed"}
        values = [c for c in cols if c not in skip] or [
            c for c in table.columns if c not in skip and pd.api.types.is_numeric_dtype(table[c])
        ]
        table = format_over_seeds(over_seeds(table, by=by, value_cols=values, level=args.level))
    elif cols:
        table = table[cols]
    print(to_markdown(table))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
