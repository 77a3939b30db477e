"""The paper's claims (Section VI), each checked against a set of runs.

A :class:`Claim` names the figure it is read from, says in one line what the paper claims, and
measures a :class:`Verdict` on the runs given. The verdicts and their rule are stated once, in
``docs/decisions.md`` ("Verdicts and outlier seeds"); in short, with the 95 % Student-t interval
of the paired difference over seeds (the schemes of one seed see the same channels and data, so
runs are paired by seed):

* ``holds``: the interval lies on the claimed side of zero;
* ``does not hold``: the interval lies on the other side, or a trend has a step between
  neighbouring values that goes significantly the other way (a plateau is allowed);
* ``inconclusive``: the interval straddles zero; the evidence says how many seeds point each
  way and how many seeds the observed spread would need for the interval to exclude zero
  (:meth:`Paired.seeds_needed`);
* ``not measurable here``: the runs do not carry what the claim needs (a scheme, two values of
  V, evaluations, ...), with the reason.

With one seed there is no interval: the direction alone decides (``holds`` or ``does not
hold``), the evidence says "1 seed (no interval)" and the verdict carries a
:attr:`Verdict.warning`. A claim made of several comparisons (against each benchmark, in each
context) does not hold when one of them does not, is inconclusive when none fails and one is
inconclusive, and holds when all hold. Outlier seeds
(:func:`wflsim.analysis.stats.outlier_mask`) are named in the evidence and in
:attr:`Verdict.outliers`, never left out. A verdict drawn from runs shorter than the paper's
(:data:`PAPER_SLOTS`) carries a warning that says so (:func:`length_warning`). Accuracy is
compared "at the same total energy" (or latency) as the paper does: per seed, each run's
accuracy is interpolated at the largest total energy that every compared run reached.

``check_all(summary, slots, evaluations)`` returns every claim with its verdict;
:mod:`wflsim.analysis.report` lays them out section by section.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .stats import CONFIG_COLUMNS, SEEDS_NEEDED_CAP, outlier_mask, seeds_needed, t_interval
from .tidy import SCHEME_LABELS

HOLDS = "holds"
FAILS = "does not hold"
INCONCLUSIVE = "inconclusive"
NOT_MEASURABLE = "not measurable here"
#: Every verdict, in the order the report counts them.
VERDICTS: tuple[str, ...] = (HOLDS, INCONCLUSIVE, FAILS, NOT_MEASURABLE)
#: The warning of a verdict drawn from one seed (no interval: the direction alone decides).
ONE_SEED_WARNING = "drawn from 1 seed: the direction alone decides (no interval)"

PROPOSED = "two_timescale"
HEURISTIC = ("only_pc", "only_pf", "ideal")
SOTA = ("topk_ef", "pruning", "fedhq", "fjord")
#: The columns of the energy-budget axis (the description and its nominal mean).
_BUDGET = ("energy_budget", "energy_budget_mean_j")

#: The length of the paper's runs (Section VI: "every consecutive 20 time slots as a frame", and
#: its time-evolution figures run "over 20 frames" on MNIST and CIFAR-10, as
#: ``scenarios/paper/*.toml`` do): 20 frames of 20 slots.
PAPER_FRAMES = 20
PAPER_SLOTS_PER_FRAME = 20
PAPER_SLOTS = PAPER_FRAMES * PAPER_SLOTS_PER_FRAME


@dataclass(frozen=True)
class Verdict:
    """A claim's measured outcome: ``status`` (:data:`HOLDS`, :data:`FAILS`,
    :data:`INCONCLUSIVE` or :data:`NOT_MEASURABLE`), the numbers behind it in one or a few
    sentences, the ``runs`` it is drawn from, a ``warning`` (one seed, runs shorter than the
    paper's; "" for none) and the ``outliers`` the evidence names ("seed 1", ...)."""

    status: str
    evidence: str
    runs: tuple[str, ...] = ()
    warning: str = ""
    outliers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Evidence:
    """The tables a claim reads: :func:`wflsim.analysis.stats.summary` (one row per run) and the
    tidy ``slots`` and ``evaluations`` tables of the same runs."""

    summary: pd.DataFrame
    slots: pd.DataFrame
    evaluations: pd.DataFrame


@dataclass(frozen=True)
class Claim:
    """One claim of the paper: the report ``section`` and ``figure`` (slug) it belongs to, the
    paper's words in one line, and the function that measures it."""

    key: str
    section: str
    figure: str
    text: str
    check: Callable[[Evidence], Verdict]


def _label(scheme: str) -> str:
    return SCHEME_LABELS.get(scheme, scheme)


#: How the evidence names a metric.
METRIC_NAMES: dict[str, str] = {
    "mean_cost": "z_av",
    "energy_per_device_slot_j": "E_av (J per device-slot)",
    "mean_queue_j": "Q_av (J)",
    "mean_conv_error": "X_av",
    "accuracy_at_same": "accuracy",
}


def _num(v: float) -> str:
    return f"{v:.3g}"


def _interval(lo: float, hi: float) -> str:
    return f"[{_num(lo)}, {_num(hi)}]"


@dataclass(frozen=True)
class Paired:
    """A paired difference over seeds: ``mean`` (of ``a - b``), its 95 % interval, ``n``, the
    seeds on each side of zero, the standard deviation ``sd`` and the outlier seeds
    (:func:`wflsim.analysis.stats.outlier_mask`) as ``(name, value)``; ``unit`` names what
    is paired ("seed", or "run")."""

    mean: float
    low: float
    high: float
    n: int
    positive: int = 0
    negative: int = 0
    sd: float = float("nan")
    outliers: tuple[tuple[str, float], ...] = ()
    sd_without: float = float("nan")
    unit: str = "seed"

    def side(self) -> int:
        """+1 / -1 when the difference is positive / negative (significantly, for ``n >= 2``),
        0 when the interval contains zero (or nothing is measured)."""
        if self.n >= 2:
            return 1 if self.low > 0 else (-1 if self.high < 0 else 0)
        if self.n == 0 or not np.isfinite(self.mean):
            return 0
        return int(np.sign(self.mean))

    def verdict(self, want: int) -> str:
        """:data:`HOLDS` when the interval lies on the side ``want`` (+1 or -1) of zero,
        :data:`FAILS` on the other side, :data:`INCONCLUSIVE` when it straddles zero (with one
        seed: its sign decides)."""
        side = self.side()
        return HOLDS if side == want else (FAILS if side == -want else INCONCLUSIVE)

    def seeds_needed(self) -> int | None:
        """The smallest number of seeds whose interval would exclude zero with this mean and
        standard deviation (:func:`wflsim.analysis.stats.seeds_needed`; ``None``: none)."""
        return seeds_needed(self.mean, self.sd)

    def text(self) -> str:
        """The mean, its interval, and on how many seeds the difference is positive."""
        if self.n >= 2:
            return (
                f"{_num(self.mean)} {_interval(self.low, self.high)}, {self.n} {self.unit}s "
                f"({self.positive} positive, {self.negative} negative)"
            )
        return f"{_num(self.mean)}, 1 {self.unit} (no interval)"

    def outlier_text(self) -> str:
        """The outlier seeds with their difference and the spread with and without them
        ("" for none)."""
        return "".join(
            f"; outlier: {name} ({_num(value)}; standard deviation {_num(self.sd)}, "
            f"{_num(self.sd_without)} without it)"
            for name, value in self.outliers
        )

    def describe(self, want: int, zero: str = "zero") -> str:
        """:meth:`text`, :meth:`why` the verdict on the side ``want`` is not :data:`HOLDS`
        and :meth:`outlier_text`; ``zero`` names what the differences are compared with (a
        study's claim with a margin: "the margin")."""
        return self.text() + self.why(want, zero) + self.outlier_text()

    def why(self, want: int, zero: str = "zero") -> str:
        """Why the verdict on the side ``want`` is not :data:`HOLDS` ("" when it is): the
        opposite direction (the other side of ``zero``), or an interval that straddles
        ``zero`` with the seeds on each side and the seeds this spread would need."""
        status = self.verdict(want)
        if status == HOLDS:
            return ""
        if status == FAILS:
            return ": the opposite direction" if zero == "zero" else f": the other side of {zero}"
        units = f"{self.unit}s"
        if self.n < 2:
            return f": no difference (1 {self.unit})"
        claimed = self.positive if want > 0 else self.negative
        need = self.seeds_needed()
        if need is None and (self.mean == 0 or not np.isfinite(self.mean)):
            more = f"no number of {units} would exclude {zero}: the mean difference is {zero}"
            more = more.replace("difference is zero", "difference is 0")
        elif need is None:
            more = f"more than {SEEDS_NEEDED_CAP:,} {units} would be needed to exclude {zero}"
        else:
            more = f"{need} {units} with this mean and spread would exclude {zero}"
        return (
            f": inconclusive, the interval straddles {zero}, {claimed} of {self.n} {units} point "
            f"the claimed way; {more}"
        )


def paired(
    diffs: Sequence[float] | np.ndarray,
    labels: Sequence[object] | None = None,
    unit: str = "seed",
) -> Paired:
    """The mean of per-seed differences with its 95 % Student-t interval (:func:`t_interval`);
    ``labels`` name the seeds (their ``seed`` values; by default their positions), so that an
    outlier (:func:`wflsim.analysis.stats.outlier_mask`) is named ("seed 1")."""
    mean, _, low, high, n = t_interval(diffs)
    d = np.asarray(diffs, dtype=float)
    names = [str(x) for x in (labels if labels is not None else range(len(d)))]
    ok = np.isfinite(d)
    names = [name for name, good in zip(names, ok, strict=True) if good]
    d = d[ok]
    sd = float(d.std(ddof=1)) if len(d) >= 2 else float("nan")
    mask = outlier_mask(d)
    outliers = tuple(
        (f"{unit} {name}", float(v)) for name, v, m in zip(names, d, mask, strict=True) if m
    )
    sd_without = float(np.delete(d, np.flatnonzero(mask)).std(ddof=1)) if mask.any() else sd
    return Paired(
        float(mean),
        float(low),
        float(high),
        int(n),
        int((d > 0).sum()),
        int((d < 0).sum()),
        sd,
        outliers,
        sd_without,
        unit,
    )


def conjunction(statuses: Iterable[str]) -> str:
    """The verdict on a claim made of several comparisons, from theirs (those not measurable
    left out): :data:`FAILS` when one does not hold, else :data:`INCONCLUSIVE` when one is
    inconclusive, else :data:`HOLDS` (:data:`NOT_MEASURABLE` when none is measured)."""
    measured = [s for s in statuses if s != NOT_MEASURABLE]
    if not measured:
        return NOT_MEASURABLE
    for status in (FAILS, INCONCLUSIVE):
        if status in measured:
            return status
    return HOLDS


def _context_columns(summary: pd.DataFrame, free: Sequence[str]) -> list[str]:
    """The configuration columns that must agree between compared runs (all but ``free``)."""
    return [c for c in CONFIG_COLUMNS if c in summary.columns and c not in free]


def _contexts(summary: pd.DataFrame, free: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    """The groups of runs that differ only in the ``free`` columns and the seed, each with a
    label naming the columns that tell the groups apart ("" when there is one group)."""
    cols = _context_columns(summary, free)
    if not cols:
        return [("", summary)]
    groups = list(summary.groupby(cols, dropna=False, sort=True))
    varying = [c for c in cols if summary[c].astype(str).nunique() > 1]
    if "energy_budget" in varying:  # its nominal mean says the same again
        varying = [c for c in varying if c != "energy_budget_mean_j"]
    out = []
    for key, df in groups:
        values = dict(zip(cols, key if isinstance(key, tuple) else (key,), strict=True))
        out.append((", ".join(f"{c}={values[c]}" for c in varying), df))
    return out


def _prefix(label: str) -> str:
    return f"{label}: " if label else ""


@dataclass(frozen=True)
class _Result:
    """A context's result: its label, status and evidence, the runs it is drawn from, the
    outlier seeds it names and whether a comparison in it had one seed only."""

    label: str
    status: str
    evidence: str
    runs: Sequence[str] = ()
    outliers: tuple[str, ...] = ()
    one_seed: bool = False


def _runs(*tables: pd.DataFrame) -> tuple[str, ...]:
    """The runs of ``tables`` (their ``run`` column), sorted, once each."""
    return _sorted_runs(r for t in tables if "run" in t.columns for r in t["run"])


def _sorted_runs(runs: Iterable[object]) -> tuple[str, ...]:
    return tuple(sorted({str(r) for r in runs}))


def _combine(results: list[_Result]) -> Verdict:
    """One verdict from per-context results (:func:`conjunction` of the measurable contexts);
    it is drawn from the runs of the measured contexts and names their outliers."""
    measured = [r for r in results if r.status != NOT_MEASURABLE]
    if not measured:
        reasons = sorted({r.evidence for r in results})
        return Verdict(NOT_MEASURABLE, "; ".join(reasons))
    return Verdict(
        conjunction(r.status for r in measured),
        " ".join(f"{_prefix(r.label)}{r.evidence}" for r in measured),
        _sorted_runs(run for r in measured for run in r.runs),
        ONE_SEED_WARNING if any(r.one_seed for r in measured) else "",
        _names(name for r in measured for name in r.outliers),
    )


def _names(names: Iterable[str]) -> tuple[str, ...]:
    """Outlier names once each, in natural order ("seed 2" before "seed 10")."""

    def key(name: str) -> tuple:
        unit, _, label = name.partition(" ")
        return (unit, 0, int(label), "") if label.isdigit() else (unit, 1, 0, label)

    return tuple(sorted(set(names), key=key))


# ----------------------------------------------------------------------------- scheme vs scheme


def _by_seed(df: pd.DataFrame, scheme: str, metric: str) -> pd.Series:
    rows = df[df["scheme"] == scheme]
    return rows.groupby("seed")[metric].mean().dropna()


def compare(
    summary: pd.DataFrame, metric: str, better: str, others: Sequence[str], lower: bool
) -> Verdict:
    """Whether ``better`` has a lower (``lower``) or higher ``metric`` than each of ``others``,
    paired by seed within each context (runs that differ only in the scheme)."""
    results: list[_Result] = []
    for label, df in _contexts(summary, ["scheme", "V"] if _ignores_v(summary) else ["scheme"]):
        present = [s for s in others if (df["scheme"] == s).any()]
        mine = _by_seed(df, better, metric)
        if mine.empty or not present:
            missing = [_label(s) for s in [better, *others] if not (df["scheme"] == s).any()]
            results.append(_Result(label, NOT_MEASURABLE, f"no run of {', '.join(missing)}"))
            continue
        parts, statuses, outliers, one_seed = [], [], [], False
        want = -1 if lower else 1
        for other in present:
            theirs = _by_seed(df, other, metric)
            common = mine.index.intersection(theirs.index)
            if common.empty:
                statuses.append(NOT_MEASURABLE)
                parts.append(f"{_label(other)}: no common seed")
                continue
            d = paired((mine[common] - theirs[common]).to_numpy(), labels=list(common))
            statuses.append(d.verdict(want))
            outliers += [name for name, _ in d.outliers]
            one_seed |= d.n == 1
            parts.append(
                f"{_label(other)} {_num(float(theirs[common].mean()))} "
                f"({_label(better)} - {_label(other)}: {d.describe(want)})"
            )
        name = METRIC_NAMES.get(metric, metric)
        ev = f"{name}: {_label(better)} {_num(float(mine.mean()))}; " + "; ".join(parts) + "."
        used = df[df["scheme"].isin([better, *present])]
        status = conjunction(statuses)
        if status == NOT_MEASURABLE:
            ev = f"no seed common to {_label(better)} and " + ", ".join(map(_label, present))
        results.append(_Result(label, status, ev, _runs(used), tuple(outliers), one_seed))
    return _combine(results)


def _ignores_v(summary: pd.DataFrame) -> bool:
    """Whether runs of different V must still be compared (one V per scheme: Ideal FL runs
    carry their scenario's V but ignore it)."""
    return bool(summary.groupby("scheme")["V"].nunique().max() <= 1)


def highest(summary: pd.DataFrame, metric: str, scheme: str) -> Verdict:
    """Whether ``scheme`` has the highest ``metric`` of all schemes present (each paired by
    seed against the runner-up)."""
    others = [s for s in summary["scheme"].unique() if s != scheme]
    if not others:
        return Verdict(NOT_MEASURABLE, f"no scheme besides {_label(scheme)}")
    return compare(summary, metric, scheme, others, lower=False)


# ------------------------------------------------------------------------------------- trends


def trend(
    summary: pd.DataFrame, scheme: str, metric: str, axis: str, increasing: bool, rate: bool = False
) -> Verdict:
    """Whether ``metric`` of ``scheme`` rises (``increasing``) or falls along ``axis``: the
    difference between the largest and the smallest axis value, paired by seed, is significant,
    and no step between neighbouring values goes significantly the other way. ``rate`` adds the ratio per decade of the axis."""
    free = [axis] if axis != "energy_budget_mean_j" else list(_BUDGET)
    runs = summary[summary["scheme"] == scheme]
    if runs.empty:
        return Verdict(NOT_MEASURABLE, f"no run of {_label(scheme)}")
    results: list[_Result] = []
    for label, df in _contexts(runs, free):
        means = df.groupby(axis)[metric].mean().dropna().sort_index()
        if len(means) < 2:
            results.append(
                _Result(
                    label,
                    NOT_MEASURABLE,
                    f"{_label(scheme)} was run at one {_axis_name(axis)} only",
                )
            )
            continue
        lo_x, hi_x = means.index[0], means.index[-1]
        at = df.pivot_table(index="seed", columns=axis, values=metric, aggfunc="mean")
        pairs = at[[lo_x, hi_x]].dropna()
        d = paired((pairs[hi_x] - pairs[lo_x]).to_numpy(), labels=list(pairs.index))
        want = 1 if increasing else -1
        # monotone: no step between neighbouring values goes significantly the other way (a
        # plateau is allowed: the paper's trends saturate)
        xs = list(means.index)
        monotone = all(
            paired((at[b] - at[a]).dropna().to_numpy()).side() != -want
            for a, b in zip(xs[:-1], xs[1:], strict=True)
        )
        status = d.verdict(want) if monotone else FAILS
        series = ", ".join(f"{float(x):g}: {_num(float(v))}" for x, v in means.items())
        ev = (
            f"{_label(scheme)} {METRIC_NAMES.get(metric, metric)} by {_axis_name(axis)} "
            f"({series}); change from the smallest to the largest: {d.text()}"
        )
        if rate and lo_x > 0 and means.iloc[0] != 0:
            per_decade = (means.iloc[-1] / means.iloc[0]) ** (1.0 / np.log10(hi_x / lo_x))
            ev += f"; x{_num(float(per_decade))} per decade"
        if not monotone:
            ev += "; a step between neighbouring values goes significantly the other way"
        else:
            ev += d.why(want)
        ev += d.outlier_text()
        outliers = tuple(name for name, _ in d.outliers)
        results.append(_Result(label, status, ev + ".", _runs(df), outliers, d.n == 1))
    return _combine(results)


def _axis_name(axis: str) -> str:
    return {"V": "V", "energy_budget_mean_j": "energy budget (J)"}.get(axis, axis)


def trends(
    summary: pd.DataFrame, schemes: Sequence[str], metric: str, axis: str, increasing: bool
) -> Verdict:
    """:func:`trend` for each of ``schemes`` present (it holds when it holds for every one)."""
    present = [s for s in schemes if (summary["scheme"] == s).any()]
    if not present:
        return Verdict(NOT_MEASURABLE, "no run of " + ", ".join(_label(s) for s in schemes))
    verdicts = [trend(summary, s, metric, axis, increasing) for s in present]
    measured = [v for v in verdicts if v.status != NOT_MEASURABLE]
    if not measured:
        return Verdict(NOT_MEASURABLE, verdicts[0].evidence)
    return _combine([_from_verdict(v) for v in measured])


def _from_verdict(v: Verdict, label: str = "") -> _Result:
    """A verdict as one context's result of a larger claim."""
    return _Result(label, v.status, v.evidence, v.runs, v.outliers, v.warning == ONE_SEED_WARNING)


# ----------------------------------------------------------------------------------- accuracy


def accuracy_at(evaluations: pd.DataFrame, x: str, level: float) -> float:
    """A run's test accuracy at ``x`` (``cum_energy_j`` or ``cum_latency_s``) = ``level``,
    linearly interpolated between its evaluations (NaN beyond its last one)."""
    ev = evaluations.sort_values(["slot", "time_s"], kind="stable").dropna(subset=[x, "accuracy"])
    if ev.empty or level > ev[x].max():
        return float("nan")
    return float(np.interp(level, ev[x].to_numpy(), ev["accuracy"].to_numpy()))


def accuracy_at_same(ev: Evidence, x: str, schemes: Sequence[str]) -> pd.DataFrame:
    """Per run of ``schemes`` (and the proposed scheme): its accuracy at the largest ``x`` that
    every compared run of its context and seed reached; a summary-like table with column
    ``accuracy_at_same``."""
    s = ev.summary[ev.summary["scheme"].isin([PROPOSED, *schemes])].copy()
    if s.empty or ev.evaluations.empty:
        return s.assign(accuracy_at_same=np.nan)
    reach = ev.evaluations.groupby("run")[x].max()
    s["reach"] = s["run"].map(reach)
    cols = _context_columns(s, ["scheme", "V"] if _ignores_v(s) else ["scheme"]) + ["seed"]
    s["level"] = s.groupby(cols, dropna=False)["reach"].transform("min")
    by_run = dict(tuple(ev.evaluations.groupby("run")))
    s["accuracy_at_same"] = [
        accuracy_at(by_run[r], x, lv) if r in by_run and np.isfinite(lv) else np.nan
        for r, lv in zip(s["run"], s["level"], strict=True)
    ]
    return s


def accuracy_claim(x: str, schemes: Sequence[str]) -> Callable[[Evidence], Verdict]:
    """A check: the proposed scheme's accuracy beats each of ``schemes`` present at the same
    total ``x``, compared pair by pair: against each scheme at the largest ``x`` that both its
    run and the proposed scheme's run of a seed reached (a scheme that spends less, or a run
    still in progress, moves only its own comparison)."""

    def check(ev: Evidence) -> Verdict:
        if ev.evaluations.empty:
            return Verdict(NOT_MEASURABLE, "no evaluations (network-only runs)")
        present = [s for s in schemes if (ev.summary["scheme"] == s).any()]
        if not present:
            return Verdict(NOT_MEASURABLE, "no run of " + ", ".join(_label(s) for s in schemes))
        unit = "J" if x == "cum_energy_j" else "s"
        results: list[_Result] = []
        for scheme in present:
            table = accuracy_at_same(ev, x, [scheme])
            v = compare(table, "accuracy_at_same", PROPOSED, [scheme], lower=False)
            levels = table["level"].dropna()
            if v.status != NOT_MEASURABLE and not levels.empty:
                lo, hi = _num(float(levels.min())), _num(float(levels.max()))
                name = f"{METRIC_NAMES['accuracy_at_same']}: "
                v = replace(v, evidence=v.evidence.replace(name, f"accuracy at {lo}-{hi} {unit}: "))
            results.append(_from_verdict(v))
        return _combine(results)

    return check


def stable_fraction_grows(ev: Evidence) -> Verdict:
    """Per run logging ``stable_fraction``: its mean over the last quarter of the logged slots
    minus its mean over the first quarter; significant over runs."""
    sl = ev.slots.dropna(subset=["stable_fraction"]) if "stable_fraction" in ev.slots else None
    if sl is None or sl.empty:
        return Verdict(NOT_MEASURABLE, "no run logged stable_fraction (it needs training runs)")
    diffs, first, last, names = [], [], [], []
    for run, r in sl.sort_values(["run", "slot"]).groupby("run"):
        names.append(run)
        q = max(1, len(r) // 4)
        a, b = (
            float(r["stable_fraction"].iloc[:q].mean()),
            float(r["stable_fraction"].iloc[-q:].mean()),
        )
        first.append(a)
        last.append(b)
        diffs.append(b - a)
    d = paired(diffs, labels=names, unit="run")
    ev_text = (
        f"stable fraction {_num(float(np.mean(first)))} in the first quarter of the slots, "
        f"{_num(float(np.mean(last)))} in the last (mean of {len(diffs)} runs; change "
        f"{d.describe(1)})."
    )
    outliers = tuple(name for name, _ in d.outliers)
    warning = "drawn from 1 run: the direction alone decides (no interval)" if d.n == 1 else ""
    return Verdict(d.verdict(1), ev_text, _runs(sl), warning, outliers)


# ------------------------------------------------------------------------------------- claims

_V = "Fig. 2: impact of V"
_TIME = "Figs. 3-4: time evolution of energy and cost"
_ACC_E = "Fig. 5: test accuracy vs total energy"
_ACC_L = "Fig. 6: test accuracy vs total latency"
_BUDGET_SEC = "Figs. 7-8: impact of the energy budget"
_SOTA_E = "Fig. 9: state of the art, accuracy vs total energy"
_SOTA_L = "Fig. 10: state of the art, accuracy vs total latency"

#: Every claim of the paper's Section VI that a trace can test, in the paper's order.
CLAIMS: list[Claim] = [
    Claim(
        "stable_parameters",
        "Fig. 1: percentage of stable parameters",
        "stable_parameters",
        "The percentage of stable parameters grows over the training rounds.",
        stable_fraction_grows,
    ),
    Claim(
        "v_conv_error",
        _V,
        "impact_of_v",
        "The average convergence error X_av of the proposed scheme decreases (as 1/V) with V.",
        lambda e: trend(e.summary, PROPOSED, "mean_conv_error", "V", increasing=False),
    ),
    Claim(
        "v_energy",
        _V,
        "impact_of_v",
        "The average energy consumption E_av of the proposed scheme increases with V.",
        lambda e: trend(e.summary, PROPOSED, "energy_per_device_slot_j", "V", increasing=True),
    ),
    Claim(
        "v_queue",
        _V,
        "impact_of_v",
        "The average virtual queue length Q_av of the proposed scheme increases (linearly) with V.",
        lambda e: trend(e.summary, PROPOSED, "mean_queue_j", "V", increasing=True, rate=True),
    ),
    Claim(
        "time_cost",
        _TIME,
        "time_evolution",
        "The proposed scheme achieves the minimum average cost z_av.",
        lambda e: compare(e.summary, "mean_cost", PROPOSED, HEURISTIC, lower=True),
    ),
    Claim(
        "time_energy",
        _TIME,
        "time_evolution",
        "The proposed scheme consumes less energy E_av than the three benchmarks.",
        lambda e: compare(e.summary, "energy_per_device_slot_j", PROPOSED, HEURISTIC, lower=True),
    ),
    Claim(
        "time_ideal",
        _TIME,
        "time_evolution",
        "Ideal FL incurs the highest energy consumption E_av.",
        lambda e: highest(e.summary, "energy_per_device_slot_j", "ideal"),
    ),
    Claim(
        "time_ideal_cost",
        _TIME,
        "time_evolution",
        "Ideal FL incurs the maximum average cost z_av.",
        lambda e: highest(e.summary, "mean_cost", "ideal"),
    ),
    Claim(
        "acc_energy",
        _ACC_E,
        "accuracy_vs_energy",
        "The proposed scheme reaches a higher accuracy than the three benchmarks at the same "
        "total energy.",
        accuracy_claim("cum_energy_j", HEURISTIC),
    ),
    Claim(
        "acc_latency",
        _ACC_L,
        "accuracy_vs_latency",
        "The proposed scheme outperforms Ideal FL and Only-PF at the same total latency.",
        accuracy_claim("cum_latency_s", ("ideal", "only_pf")),
    ),
    Claim(
        "budget_energy",
        _BUDGET_SEC,
        "impact_of_energy_budget",
        "E_av increases with the energy budget for the proposed scheme, Only-PC and Only-PF.",
        lambda e: trends(
            e.summary,
            (PROPOSED, "only_pc", "only_pf"),
            "energy_per_device_slot_j",
            "energy_budget_mean_j",
            increasing=True,
        ),
    ),
    Claim(
        "budget_queue",
        _BUDGET_SEC,
        "impact_of_energy_budget",
        "The virtual queue length Q_av of every scheme decreases with the energy budget.",
        lambda e: trends(
            e.summary,
            (PROPOSED, *HEURISTIC),
            "mean_queue_j",
            "energy_budget_mean_j",
            increasing=False,
        ),
    ),
    Claim(
        "budget_smallest_queue",
        _BUDGET_SEC,
        "impact_of_energy_budget",
        "The proposed scheme has the smallest queue length Q_av of all schemes.",
        lambda e: compare(e.summary, "mean_queue_j", PROPOSED, HEURISTIC, lower=True),
    ),
    Claim(
        "sota_energy",
        _SOTA_E,
        "accuracy_late",
        "The proposed scheme reaches a higher accuracy than Top-K, pruning, FedHQ and FjORD at "
        "the same total energy.",
        accuracy_claim("cum_energy_j", SOTA),
    ),
    Claim(
        "sota_latency",
        _SOTA_L,
        "accuracy_late",
        "The proposed scheme outperforms Top-K, FedHQ (and pruning, FjORD) at the same total "
        "latency.",
        accuracy_claim("cum_latency_s", SOTA),
    ),
]


def check_all(
    summary: pd.DataFrame, slots: pd.DataFrame, evaluations: pd.DataFrame
) -> list[tuple[Claim, Verdict]]:
    """Every claim of :data:`CLAIMS` with its verdict on these runs (a check that fails on
    unexpected data gives ``not measurable here`` with the error, never an exception)."""
    ev = Evidence(summary, slots, evaluations)
    out = []
    for claim in CLAIMS:
        try:
            verdict = claim.check(ev)
            warnings = [w for w in (verdict.warning, length_warning(verdict, summary)) if w]
            verdict = replace(verdict, warning="; ".join(warnings))
        except Exception as err:  # a report never dies on one claim
            verdict = Verdict(NOT_MEASURABLE, f"could not be checked ({type(err).__name__}: {err})")
        out.append((claim, verdict))
    return out


def length_warning(verdict: Verdict, summary: pd.DataFrame) -> str:
    """A warning when ``verdict`` is drawn from runs shorter than the paper's
    (:data:`PAPER_SLOTS` slots; ``summary["slots"]`` per run), e.g. "drawn from 60-slot runs;
    the paper's are 400 slots (20 frames x 20 slots)"; "" for runs as long as the paper's or
    longer, and for a verdict drawn from no run (not measurable)."""
    if verdict.status == NOT_MEASURABLE or not verdict.runs or "slots" not in summary:
        return ""
    slots = summary.loc[summary["run"].astype(str).isin(verdict.runs), "slots"].dropna()
    if slots.empty or slots.min() >= PAPER_SLOTS:
        return ""
    lo, hi = int(slots.min()), int(slots.max())
    runs = f"{lo}-slot runs" if lo == hi else f"runs of {lo} to {hi} slots"
    return (
        f"drawn from {runs}; the paper's are {PAPER_SLOTS} slots "
        f"({PAPER_FRAMES} frames x {PAPER_SLOTS_PER_FRAME} slots)"
    )
