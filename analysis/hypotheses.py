"""A study's own claims (``[[claims]]``, :class:`wflsim.sim.config.claims.ClaimConfig`), each
checked against a set of runs with the paper's three-valued verdict.

A claim says that the runs selected by ``a`` have a higher (or lower) ``metric`` than those
selected by ``b``. It is measured as the paper's claims are (:mod:`wflsim.analysis.claims`,
``docs/decisions.md``, "Verdicts and outlier seeds"): per seed, the difference ``a - b`` (runs
of one seed see the same channels, positions and data: common random numbers), and the 95 %
Student-t interval of its mean over the seeds:

* ``holds``: the interval lies on the claimed side of ``margin`` (of zero by default);
* ``does not hold``: it lies on the other side;
* ``inconclusive``: it contains the margin; the evidence says how many seeds point each way and
  how many seeds the observed spread would need;
* ``not measurable here``: no run matches a side, the runs lack the metric (network-only runs
  have no accuracy), or the two sides share no seed.

**Contexts.** The runs of a side may differ in more than its selector: the study swept other
fields too (a noise level, a deadline). A field that varies within both sides splits the
comparison into contexts that agree on it (fedadam at -104 dBm against fedavg at -104 dBm, and
at -94 dBm against -94 dBm); a field that varies within one side only (a parameter only that
side has, such as AirComp's power rule) splits that side, and each part is compared with the
whole other side. The claim holds when it holds in every context, does not hold when it fails
in one, and is inconclusive otherwise (:func:`wflsim.analysis.claims.conjunction`). Fields in
which the two sides differ beyond their selectors are named in the evidence.

**Targets.** ``time_to_accuracy`` and ``energy_to_accuracy`` take the total latency (energy) at
the first evaluation whose accuracy reaches ``target``. A run that never reaches it gives its
end value, a lower bound of the true one (censored): a seed where both runs are censored is left
out; where the side the claim needs to be the smaller one is censored, the difference is biased
toward the claim, so the verdict cannot be ``holds`` (it is ``inconclusive`` at best, and says
so).

:func:`check_claims` returns ``(Claim, Verdict)`` pairs as :func:`wflsim.analysis.claims.check_all`
does, so the report lays both out alike.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wflsim.sim.config.claims import (
    CLAIM_METRICS,
    PRIVACY_METRICS,
    TARGET_METRICS,
    VARIANT_KEY,
    ClaimConfig,
    claim_label,
    claim_text,
)
from wflsim.sim.errors import ScenarioError
from wflsim.sim.files import read_capped, utf8_text
from wflsim.sim.rundir import read_json, read_manifest

from . import claims as C
from .stats import first_reach
from .tidy.runs import NOT_CONFIG_FIELDS, RunsArg

#: The report section of a study's claims.
SECTION = "The study's claims"
#: The figure the study's claims are drawn in (:func:`wflsim.analysis.figures.claims_figure`).
FIGURE = "study_claims"
#: Tables of scenario fields that never tell configurations apart (beside
#: :data:`wflsim.analysis.tidy.runs.NOT_CONFIG_FIELDS`).
_NOT_CONFIG_PREFIXES = ("sweep.", "claims.", "trace.")
#: The columns of a run's evaluations that ``accuracy_at_same_*`` and ``*_to_accuracy`` read.
_X_OF = {
    "accuracy_at_same_energy": "cum_energy_j",
    "accuracy_at_same_time": "cum_latency_s",
    "time_to_accuracy": "cum_latency_s",
    "energy_to_accuracy": "cum_energy_j",
}


@dataclass(frozen=True)
class Measured:
    """What a claim's verdict is drawn from, for tables and figures: per context, the mean
    paired difference ``a - b`` with its 95 % interval, the number of seeds and the status."""

    claim: str
    context: str
    metric: str
    mean: float
    low: float
    high: float
    n: int
    status: str
    margin: float
    better: str
    a: str = "a"
    b: str = "b"


def claims_from_text(text: str) -> list[ClaimConfig]:
    """The ``[[claims]]`` of a scenario or claims file's TOML text, validated.

    Raises:
        ScenarioError: naming the claim and field (``claims[0].metric``), or a TOML error.
    """
    from wflsim.sim.config.claims import parse_claims

    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError("claims", f"not valid TOML ({err})", "fix the file's syntax") from None
    return parse_claims(table)


#: What ``write_report(claims=...)`` takes: a claims or scenario file, or the claims themselves.
ClaimsArg = str | os.PathLike[str] | Sequence[ClaimConfig | Mapping[str, Any]] | None


#: The largest claims (or scenario) file the report reads, bytes.
MAX_CLAIMS_FILE_BYTES = 1_000_000


def _from_file(path: str | os.PathLike[str]) -> list[ClaimConfig]:
    raw = read_capped(path, "--claims", MAX_CLAIMS_FILE_BYTES, "claims", name=True)
    found = claims_from_text(utf8_text(raw, "--claims", "claims"))
    if not found:
        raise ScenarioError(
            "--claims", f"{path} states no [[claims]]", "add [[claims]] tables (docs/scenario.md)"
        )
    return found


def _from_text(text: object) -> list[ClaimConfig]:
    if not isinstance(text, str):
        return []
    return claims_from_text(text)


def study_claims_of(source: Path, dirs: Sequence[Path], given: ClaimsArg) -> list[ClaimConfig]:
    """The study's claims: ``given`` (a file holding ``[[claims]]``, or claims as tables or
    :class:`ClaimConfig`), else those of the sweep's scenario (``sweep.json``'s
    ``scenario_text``), else those the runs' scenarios state (the same claims once).

    Raises:
        ScenarioError: a bad claim (naming it and its field), a claims file without claims, or
            runs whose scenarios state different claims under one name.
    """
    from wflsim.sim.config.claims import parse_claims

    if isinstance(given, str | os.PathLike):
        return _from_file(given)
    if given is not None:
        tables = [c.model_dump() if isinstance(c, ClaimConfig) else dict(c) for c in given]
        return parse_claims({"claims": tables})
    sweep = read_json(source / "sweep.json") if source.is_dir() else None
    if isinstance(sweep, dict) and "scenario_text" in sweep:
        return _from_text(sweep.get("scenario_text"))
    seen: dict[str, ClaimConfig] = {}
    for d in dirs:
        for c in _from_text((read_manifest(d) or {}).get("scenario_text")):
            if c.name in seen and seen[c.name] != c:
                raise ScenarioError(
                    "claims",
                    f"the runs state different claims named {c.name!r}",
                    "give the study's claims with wflsim report --claims FILE",
                )
            seen.setdefault(c.name, c)
    return list(seen.values())


def check_runs(
    runs: RunsArg, claims: ClaimsArg = None, fields: Mapping[str, Mapping[str, Any]] | None = None
) -> pd.DataFrame:
    """The verdicts of a study's claims on its runs, as ``claims.csv`` gives them
    (:func:`claims_table`): ``claims`` as :func:`study_claims_of` takes them (by default those
    of the sweep's or the runs' scenario file); ``fields``: the runs' fields
    (:func:`wflsim.analysis.tidy.run_fields`; e.g. with ``variant`` set), read by default.

    Raises:
        FileNotFoundError: no run under ``runs``.
        ScenarioError: a bad claim (naming it and its field).
    """
    from . import stats, tidy

    dirs = tidy.find_runs(runs)
    if not dirs:
        raise FileNotFoundError(f"no runs under {runs}")
    source = Path(os.fspath(runs)) if isinstance(runs, str | os.PathLike) else dirs[0].parent
    stated = study_claims_of(source, dirs, claims)
    if not stated:
        return claims_table([])
    data = tidy.load(dirs)
    summary = stats.summary(
        data.device_slots, data.slots, data.evaluations, runs=data.runs, privacy=data.privacy
    )
    fields = tidy.run_fields(dirs) if fields is None else fields
    return claims_table(check_claims(stated, summary, data.evaluations, fields)[0])


def _is_config(key: str) -> bool:
    return key not in NOT_CONFIG_FIELDS and not key.startswith(_NOT_CONFIG_PREFIXES)


def _same(have: Any, want: Any) -> bool:
    """Whether a run's field value ``have`` is the selector's ``want`` (numbers to 1e-9
    relative; true/false only as true/false; text as text)."""
    if isinstance(want, bool) or isinstance(have, bool):
        return isinstance(want, bool) and isinstance(have, bool) and want == have
    if isinstance(want, int | float) and isinstance(have, int | float):
        return math.isclose(float(have), float(want), rel_tol=1e-9, abs_tol=0.0)
    return isinstance(have, str) and isinstance(want, str) and have == want


def _matches(fields: Mapping[str, Any], selector: Mapping[str, Any]) -> bool:
    return all(k in fields and _same(fields[k], v) for k, v in selector.items())


def _plain(v: Any) -> Any:
    """A value as compared: numbers as floats (``-104`` as a sweep's grid records it and
    ``-104.0`` as the resolved scenario does are one value), true/false as they are."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def value_key(v: Any) -> str:
    """A text that two field values share exactly when they are the same value
    (:func:`_plain`)."""
    return json.dumps(_plain(v), sort_keys=True, default=str)


def varying_fields(
    runs: Sequence[str], fields: Mapping[str, Mapping[str, Any]], skip: Iterable[str] = ()
) -> list[str]:
    """The configuration fields (not the seed, the name, the data folder, ...) whose values
    differ between ``runs`` (labels of ``fields``, :func:`wflsim.analysis.tidy.run_fields`),
    sorted; a field a run lacks counts as its own value."""
    skip = set(skip)
    keys = sorted({k for r in runs for k in fields[r] if _is_config(k) and k not in skip})
    return [k for k in keys if len({value_key(fields[r].get(k)) for r in runs}) > 1]


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True)
    return str(v)


def _effective(claim: ClaimConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sides' selectors, each completed with the fields only the other names: a field one
    side names holds for the other too (``a = {strategy = fedadam, deadline = 1}`` against
    ``b = {strategy = fedavg}`` compares with fedavg at deadline 1)."""
    a = {**{k: v for k, v in claim.b.items() if k not in claim.a}, **claim.a}
    b = {**{k: v for k, v in claim.a.items() if k not in claim.b}, **claim.b}
    return a, b


@dataclass(frozen=True)
class _Contexts:
    """The contexts of a claim (label, a's runs, b's runs), the runs with no counterpart on
    the other side (label of their part, side, runs) and the fields in which the sides differ
    beyond their selectors."""

    pairs: list[tuple[str, list[str], list[str]]]
    unmatched: list[tuple[str, str, list[str]]]
    differ: list[str]


def _contexts(
    claim: ClaimConfig,
    a_runs: list[str],
    b_runs: list[str],
    fields: Mapping[str, Mapping[str, Any]],
) -> _Contexts:
    """A field both sides vary, or one side varies and the other holds at one value, must agree
    within a context; a field one side varies and the other lacks (a parameter of that side's
    mode only) splits that side, each part against the whole other side."""
    skip = set(claim.a) | set(claim.b) | set(claim.where) | {VARIANT_KEY}
    va, vb = varying_fields(a_runs, fields, skip), varying_fields(b_runs, fields, skip)

    def lacks(runs: list[str], k: str) -> bool:
        return all(fields[r].get(k) is None for r in runs)

    # fields a context must agree on; a side's other varied fields only split it
    agree = sorted(
        {k for k in va if k in vb or not lacks(b_runs, k)} | {k for k in vb if not lacks(a_runs, k)}
    )

    def groups(runs: list[str], keys: list[str]) -> dict[str, tuple[dict[str, Any], list[str]]]:
        out: dict[str, tuple[dict[str, Any], list[str]]] = {}
        for r in runs:
            values = {k: fields[r].get(k) for k in keys}
            out.setdefault(value_key(values), (values, []))[1].append(r)
        return out

    def label(values: Mapping[str, Any]) -> str:
        return ", ".join(f"{k}={_short(values[k])}" for k in sorted(values))

    keys_a = sorted(set(agree) | set(va))
    keys_b = sorted(set(agree) | set(vb))
    pairs, matched_a, matched_b = [], set(), set()
    for ka, (values_a, runs_a) in groups(a_runs, keys_a).items():
        for kb, (values_b, runs_b) in groups(b_runs, keys_b).items():
            if any(value_key(values_a[k]) != value_key(values_b[k]) for k in agree):
                continue
            pairs.append((label({**values_b, **values_a}), runs_a, runs_b))
            matched_a.add(ka)
            matched_b.add(kb)
    unmatched = [
        (label(values), side, runs)
        for side, keys, seen, side_runs in (
            ("a", keys_a, matched_a, a_runs),
            ("b", keys_b, matched_b, b_runs),
        )
        for k, (values, runs) in groups(side_runs, keys).items()
        if k not in seen
    ]
    const = [
        k
        for k in sorted({k for r in a_runs + b_runs for k in fields[r]})
        if _is_config(k) and k not in skip and k not in va and k not in vb
    ]
    differ = [
        k
        for k in const
        if value_key(fields[a_runs[0]].get(k)) != value_key(fields[b_runs[0]].get(k))
    ]
    return _Contexts(pairs, unmatched, differ)


def _per_seed_summary(summary: pd.DataFrame, runs: list[str], metric: str) -> pd.Series:
    rows = summary[summary["run"].isin(runs)].drop_duplicates("run")
    return rows.groupby("seed")[metric].mean().dropna()


def _reach(ev: pd.DataFrame, x: str) -> float:
    values = ev[x].dropna()
    return float(values.max()) if len(values) else float("nan")


def _sorted_ev(evaluations: pd.DataFrame, run: str) -> pd.DataFrame:
    ev = evaluations[evaluations["run"] == run]
    return ev.sort_values(["slot", "time_s"], kind="stable").dropna(subset=["accuracy"])


@dataclass(frozen=True)
class _Pairs:
    """Per seed: a's value, b's value and whether each is censored (a bound)."""

    seeds: list[Any]
    a: list[float]
    b: list[float]
    a_censored: list[bool]
    b_censored: list[bool]
    #: seeds left out: neither run reached the target
    neither: list[Any] = field(default_factory=list)


def _pairs(
    claim: ClaimConfig,
    summary: pd.DataFrame,
    evaluations: pd.DataFrame,
    runs_a: list[str],
    runs_b: list[str],
) -> _Pairs:
    metric = claim.metric
    if metric not in _X_OF:
        mine = _per_seed_summary(summary, runs_a, metric)
        theirs = _per_seed_summary(summary, runs_b, metric)
        common = sorted(mine.index.intersection(theirs.index))
        n = len(common)
        return _Pairs(
            common, [float(mine[s]) for s in common], [float(theirs[s]) for s in common],
            [False] * n, [False] * n,
        )  # fmt: skip
    seed_of = summary.drop_duplicates("run").set_index("run")["seed"]
    by_seed_a: dict[Any, list[str]] = {}
    by_seed_b: dict[Any, list[str]] = {}
    for r in runs_a:
        by_seed_a.setdefault(seed_of[r], []).append(r)
    for r in runs_b:
        by_seed_b.setdefault(seed_of[r], []).append(r)
    x = _X_OF[metric]
    out = _Pairs([], [], [], [], [])
    for seed in sorted(set(by_seed_a) & set(by_seed_b)):
        evs_a = [_sorted_ev(evaluations, r) for r in by_seed_a[seed]]
        evs_b = [_sorted_ev(evaluations, r) for r in by_seed_b[seed]]
        if not all(len(e) for e in evs_a + evs_b):
            continue
        if metric.startswith("accuracy_at_same"):
            level = min(_reach(e, x) for e in evs_a + evs_b)
            if not np.isfinite(level):
                continue
            va = float(np.mean([C.accuracy_at(e, x, level) for e in evs_a]))
            vb = float(np.mean([C.accuracy_at(e, x, level) for e in evs_b]))
            ca = cb = False
        else:
            assert claim.target is not None
            ra = [first_reach(e, claim.target, x) for e in evs_a]
            rb = [first_reach(e, claim.target, x) for e in evs_b]
            ca, cb = not all(np.isfinite(ra)), not all(np.isfinite(rb))
            va = _censored_mean(ra, evs_a, x)
            vb = _censored_mean(rb, evs_b, x)
            if ca and cb:
                out.neither.append(seed)
                continue
        if np.isfinite(va) and np.isfinite(vb):
            out.seeds.append(seed)
            out.a.append(va)
            out.b.append(vb)
            out.a_censored.append(ca)
            out.b_censored.append(cb)
    return out


def _censored_mean(reached: list[float], evs: list[pd.DataFrame], x: str) -> float:
    """The mean over runs of the ``x`` at which each reached the target, or, where it never
    did, its last ``x`` (a lower bound)."""
    values = [v if np.isfinite(v) else _reach(e, x) for v, e in zip(reached, evs, strict=True)]
    return float(np.mean(values))


def _runs_per_seed(summary: pd.DataFrame, runs_a: list[str], runs_b: list[str]) -> str:
    """ "" when each side has one run per seed, else how many (they are averaged)."""
    rows = summary.drop_duplicates("run")
    counts = [
        int(rows[rows["run"].isin(runs)].groupby("seed").size().max()) for runs in (runs_a, runs_b)
    ]
    if max(counts) <= 1:
        return ""
    return f"up to {counts[0]} and {counts[1]} runs per seed, averaged per side"


def _num(v: float) -> str:
    return f"{v:.4g}"


def _measure(
    claim: ClaimConfig,
    label: str,
    summary: pd.DataFrame,
    evaluations: pd.DataFrame,
    runs_a: list[str],
    runs_b: list[str],
) -> tuple[C._Result, Measured | None]:
    la, lb = claim_label(claim.a), claim_label(claim.b)
    metric = claim.metric
    if metric in _X_OF and evaluations.empty:
        return C._Result(label, C.NOT_MEASURABLE, "no evaluations (network-only runs)"), None
    p = _pairs(claim, summary, evaluations, runs_a, runs_b)
    if not p.seeds:
        has = summary[summary["run"].isin(runs_a + runs_b)][metric] if metric in summary else None
        if p.neither:
            why = f"neither {la} nor {lb} reached {claim.target:g} in any seed they share"
        elif has is not None and has.notna().sum() == 0 and metric in PRIVACY_METRICS:
            why = f"no run of these has [privacy], so none has {metric}"
        elif has is not None and has.notna().sum() == 0:
            why = f"no run of these has {metric}"
        else:
            why = f"{la} and {lb} share no seed with a value of {metric}"
        return C._Result(label, C.NOT_MEASURABLE, why), None
    want = 1 if claim.better == "higher" else -1
    shift = claim.margin * want
    diffs = np.asarray(p.a) - np.asarray(p.b) - shift
    d = C.paired(diffs, labels=p.seeds)
    status = d.verdict(want)
    zero = f"the margin ({_num(claim.margin)})" if shift else "zero"
    name = metric if claim.target is None else f"{metric} ({claim.target:g})"
    ev = (
        f"{name}: {la} {_num(float(np.mean(p.a)))}; {lb} {_num(float(np.mean(p.b)))} "
        f"({la} - {lb}: {d.describe(want, zero)})"
    )
    per_seed = _runs_per_seed(summary, runs_a, runs_b)
    if per_seed:
        ev += f"; {per_seed}"
    censored = [
        f"seed {s}: {who} never reached {claim.target:g} (its end value, a lower bound)"
        for s, ca, cb in zip(p.seeds, p.a_censored, p.b_censored, strict=True)
        for who, c in ((la, ca), (lb, cb))
        if c
    ]
    censored += [f"seed {s}: neither reached {claim.target:g} (left out)" for s in p.neither]
    if censored:
        ev += "; " + "; ".join(censored)
    # a censored value is a lower bound: on the side the claim needs smaller (a for "lower", b
    # for "higher") it biases the difference toward the claim, on the other side against it
    toward = any(ca if want < 0 else cb for ca, cb in zip(p.a_censored, p.b_censored, strict=True))
    against = any(cb if want < 0 else ca for ca, cb in zip(p.a_censored, p.b_censored, strict=True))
    if toward and status == C.HOLDS:
        status = C.INCONCLUSIVE
        ev += (
            "; inconclusive: where the side claimed smaller never reached the target its value "
            "is only a lower bound, so the difference is biased toward the claim"
        )
    elif against and status == C.FAILS:
        status = C.INCONCLUSIVE
        ev += (
            "; inconclusive: where the side claimed larger never reached the target its value "
            "is only a lower bound, so the difference is biased against the claim"
        )
    outliers = tuple(name for name, _ in d.outliers)
    result = C._Result(label, status, ev + ".", tuple(runs_a + runs_b), outliers, d.n == 1)
    mean_shifted = d.mean + shift
    measured = Measured(
        claim.name, label, metric, mean_shifted, d.low + shift, d.high + shift, d.n, status,
        claim.margin, claim.better, la, lb,
    )  # fmt: skip
    return result, measured


def check_claim(
    claim: ClaimConfig,
    summary: pd.DataFrame,
    evaluations: pd.DataFrame,
    fields: Mapping[str, Mapping[str, Any]],
) -> tuple[C.Verdict, list[Measured]]:
    """One claim's verdict on the runs of ``summary`` (:func:`wflsim.analysis.stats.summary`),
    with their ``evaluations`` and their scenario ``fields``
    (:func:`wflsim.analysis.tidy.run_fields`); and what it was measured from, per context."""
    runs = [r for r in summary["run"].astype(str) if r in fields]
    pool = [r for r in runs if _matches(fields[r], claim.where)]
    unknown = sorted(
        k for k in [*claim.a, *claim.b, *claim.where] if not any(k in fields[r] for r in runs)
    )
    if unknown:
        return (
            C.Verdict(
                C.NOT_MEASURABLE,
                f"no run has the field {unknown[0]} (claims select runs by dotted scenario "
                "fields, e.g. strategy.name, or a compare() variant)",
            ),
            [],
        )
    sel_a, sel_b = _effective(claim)
    a_runs = [r for r in pool if _matches(fields[r], sel_a)]
    b_runs = [r for r in pool if _matches(fields[r], sel_b)]
    la, lb = claim_label(claim.a), claim_label(claim.b)
    both = sorted(set(a_runs) & set(b_runs))
    if both:
        return C.Verdict(C.NOT_MEASURABLE, f"run {both[0]} matches both {la} and {lb}"), []
    missing = [claim_label(sel) for sel, side in ((sel_a, a_runs), (sel_b, b_runs)) if not side]
    if missing:
        where = f" where {claim_label(claim.where)}" if claim.where else ""
        return C.Verdict(C.NOT_MEASURABLE, f"no run of {' or '.join(missing)}{where}"), []
    ctx = _contexts(claim, a_runs, b_runs, fields)
    if not ctx.pairs:
        return (
            C.Verdict(C.NOT_MEASURABLE, f"no configuration of {la} matches one of {lb}"),
            [],
        )
    results, measured = [], []
    for label, runs_a, runs_b in ctx.pairs:
        result, m = _measure(claim, label, summary, evaluations, runs_a, runs_b)
        results.append(result)
        if m is not None:
            measured.append(m)
    verdict = C._combine(results)
    if verdict.status == C.NOT_MEASURABLE:
        return verdict, measured
    notes = []
    lost = [r for r in results if r.status == C.NOT_MEASURABLE]
    if lost:
        notes.append(
            "Not measured: "
            + "; ".join(f"{r.label or 'all runs'}: {r.evidence}" for r in lost)
            + "."
        )
        if verdict.status == C.HOLDS:
            verdict = replace(verdict, status=C.INCONCLUSIVE)
            notes.append("Inconclusive: the claim is not measured in every context.")
    if ctx.unmatched:
        parts = [
            f"{la if side == 'a' else lb} at {label or 'its other settings'}"
            for label, side, _ in ctx.unmatched
        ]
        notes.append(f"Not compared (no counterpart on the other side): {'; '.join(parts)}.")
    if ctx.differ:
        shown = ", ".join(ctx.differ[:3]) + (
            f" and {len(ctx.differ) - 3} more" if len(ctx.differ) > 3 else ""
        )
        notes.append(f"The sides also differ in: {shown}.")
    if notes:
        verdict = replace(verdict, evidence=" ".join([verdict.evidence, *notes]))
    return verdict, measured


def check_claims(
    claims: Sequence[ClaimConfig],
    summary: pd.DataFrame,
    evaluations: pd.DataFrame,
    fields: Mapping[str, Mapping[str, Any]],
) -> tuple[list[tuple[C.Claim, C.Verdict]], list[Measured]]:
    """Every claim with its verdict (a claim that cannot be checked on unexpected data gives
    ``not measurable here`` with the error, never an exception), and what the verdicts were
    measured from (:class:`Measured`, per claim and context)."""
    out, measured = [], []
    for claim in claims:
        try:
            verdict, m = check_claim(claim, summary, evaluations, fields)
        except Exception as err:  # a report never dies on one claim
            verdict, m = (
                C.Verdict(C.NOT_MEASURABLE, f"could not be checked ({type(err).__name__}: {err})"),
                [],
            )
        out.append((as_claim(claim), verdict))
        measured += m
    return out, measured


def as_claim(claim: ClaimConfig) -> C.Claim:
    """A study's claim in the form the report lays out (:class:`wflsim.analysis.claims.Claim`).
    Its ``check`` cannot measure it from the paper's evidence alone (a study's claim selects
    runs by their scenario fields): it says so; :func:`check_claim` measures it."""

    def check(_: C.Evidence) -> C.Verdict:
        return C.Verdict(
            C.NOT_MEASURABLE, "a study's claim needs the runs' fields: use check_claim"
        )

    return C.Claim(claim.name, SECTION, FIGURE, claim_text(claim), check)


def claims_table(verdicts: Sequence[tuple[C.Claim, C.Verdict]]) -> pd.DataFrame:
    """``claims.csv``'s rows of these claims: ``source`` (``study`` or ``paper``), ``key``,
    ``section``, ``claim``, ``verdict``, ``outliers``, ``warning``, ``evidence``."""
    return pd.DataFrame(
        [
            {
                "source": "study" if c.section == SECTION else "paper",
                "key": c.key,
                "section": c.section,
                "claim": c.text,
                "verdict": v.status,
                "outliers": ", ".join(v.outliers),
                "warning": v.warning,
                "evidence": v.evidence,
            }
            for c, v in verdicts
        ],
        columns=["source", "key", "section", "claim", "verdict", "outliers", "warning", "evidence"],
    )


def metric_unit(metric: str) -> str:
    """The unit of a claim metric as its description gives it ("J", "s", "fraction", "")."""
    text = CLAIM_METRICS.get(metric, "")
    for unit in ("(J)", "(s)", "(fraction)", "(ratio)"):
        if text.endswith(unit):
            return unit[1:-1]
    return ""


__all__ = [
    "VARIANT_KEY",
    "value_key",
    "ClaimsArg",
    "check_runs",
    "study_claims_of",
    "FIGURE",
    "SECTION",
    "TARGET_METRICS",
    "Measured",
    "as_claim",
    "check_claim",
    "check_claims",
    "claims_from_text",
    "claims_table",
    "metric_unit",
    "varying_fields",
]
