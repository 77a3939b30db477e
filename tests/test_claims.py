"""The paper's claims checked on runs: paired seed statistics, trends, accuracy at equal energy."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sst

from wflsim.analysis import claims
from wflsim.analysis.claims import FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURABLE, Evidence


def summary_rows(values: dict[tuple[str, float, int], dict[str, float]]) -> pd.DataFrame:
    """A summary-like table from ``{(scheme, V, seed): {metric: value}}`` (one configuration)."""
    rows = []
    for (scheme, v, seed), metrics in values.items():
        rows.append(
            {
                "run": f"{scheme}_{v}_{seed}",
                "scheme": scheme,
                "V": v,
                "seed": seed,
                "dataset": "mnist",
                "partition": "iid",
                "energy_budget": "0.4",
                "energy_budget_mean_j": 0.4,
                "variant": "",
                **metrics,
            }
        )
    return pd.DataFrame(rows)


def two_schemes(offset: float, noise: float = 0.01, seeds: int = 5) -> pd.DataFrame:
    """Proposed and Only-PC with ``cost`` = base + offset for the proposed scheme, per seed."""
    rng = np.random.default_rng(0)
    base = rng.normal(0, 1, seeds)
    values = {}
    for s in range(seeds):
        values[("only_pc", 100.0, s)] = {"mean_cost": base[s]}
        values[("two_timescale", 100.0, s)] = {"mean_cost": base[s] + offset + noise * rng.normal()}
    return summary_rows(values)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=2, max_size=12),
    st.floats(-2, 2, allow_nan=False),
)
def test_paired_interval_agrees_with_the_paired_t_test(noise, shift):
    """The 95 % interval excludes zero exactly when scipy's paired t-test gives p < 0.05."""
    d = np.asarray(noise) * 0.3 + shift
    if np.ptp(d) < 1e-9:
        return  # a constant difference: the t statistic is undefined
    p = claims.paired(d)
    pvalue = sst.ttest_1samp(d, 0.0).pvalue
    if abs(pvalue - 0.05) > 1e-6:
        assert (p.side() != 0) == (pvalue < 0.05)


def test_compare_holds_when_the_proposed_scheme_is_lower_on_every_seed():
    """A cost lower by 0.5 on every seed (noise 0.01) holds, with the difference near -0.5."""
    v = claims.compare(two_schemes(-0.5), "mean_cost", "two_timescale", ["only_pc"], lower=True)
    assert v.status == HOLDS
    assert "-0.5" in v.evidence and "5 seeds" in v.evidence


def test_compare_within_the_noise_is_inconclusive():
    """A difference far inside the seed noise straddles zero: inconclusive, saying so."""
    v = claims.compare(
        two_schemes(0.0, noise=1.0), "mean_cost", "two_timescale", ["only_pc"], lower=True
    )
    assert v.status == INCONCLUSIVE
    assert "inconclusive, the interval straddles zero" in v.evidence


def ideal_against_proposed(diffs: list[float], base: float = 0.3) -> pd.DataFrame:
    """Ideal FL's energy = the proposed scheme's (``base``) + ``diffs[k]`` on seed k."""
    values = {}
    for k, d in enumerate(diffs):
        values[("two_timescale", 100.0, k)] = {"energy_per_device_slot_j": base}
        values[("ideal", 100.0, k)] = {"energy_per_device_slot_j": base + d}
    return summary_rows(values)


def seeds_needed_by_search(d: np.ndarray) -> int:
    """The smallest n >= 2 with t_{0.975, n-1} s / sqrt(n) < |mean|, by counting up."""
    n = 2
    while sst.t.ppf(0.975, n - 1) * d.std(ddof=1) / np.sqrt(n) >= abs(d.mean()):
        n += 1
    return n


def test_all_seeds_on_the_claimed_side_with_a_wide_interval_is_inconclusive():
    """Ideal FL above on all 3 seeds, one of them far above (1, 1.2, 10 J): the interval
    straddles zero, so inconclusive, with the seeds on each side and the seeds needed."""
    diffs = np.array([1.0, 1.2, 10.0])
    lo = diffs.mean() - sst.t.ppf(0.975, 2) * diffs.std(ddof=1) / np.sqrt(3)
    assert lo < 0 < diffs.min()  # the construction: a wide interval, every seed above
    v = claims.highest(ideal_against_proposed(list(diffs)), "energy_per_device_slot_j", "ideal")
    assert v.status == INCONCLUSIVE
    assert "3 seeds (3 positive, 0 negative)" in v.evidence
    assert "3 of 3 seeds point the claimed way" in v.evidence
    need = seeds_needed_by_search(diffs)
    assert need == 9
    assert f"{need} seeds with this mean and spread would exclude zero" in v.evidence


def test_outlier_seed_is_named_next_to_the_verdict_from_five_seeds():
    """Ideal FL above by 1, 1.2, 1.1, 0.9 and 10 J: seed 4 alone makes most of the spread, and
    the evidence names it with its value."""
    v = claims.highest(
        ideal_against_proposed([1.0, 1.2, 1.1, 0.9, 10.0]), "energy_per_device_slot_j", "ideal"
    )
    assert "outlier: seed 4 (10;" in v.evidence
    assert v.outliers == ("seed 4",)


def test_no_outlier_seed_is_named_below_five_seeds():
    """Ideal FL above by 1, 1.2 and 10 J: with three seeds the rule names no seed (a name would
    come from normal noise in about 45 % of samples)."""
    v = claims.highest(
        ideal_against_proposed([1.0, 1.2, 10.0]), "energy_per_device_slot_j", "ideal"
    )
    assert v.outliers == ()
    assert "outlier" not in v.evidence


def test_tight_interval_on_the_other_side_does_not_hold():
    """Ideal FL below the proposed scheme on every seed, with little spread: does not hold."""
    v = claims.highest(
        ideal_against_proposed([-0.10, -0.11, -0.12]), "energy_per_device_slot_j", "ideal"
    )
    assert v.status == FAILS
    assert "the opposite direction" in v.evidence
    assert v.outliers == ()


def test_tight_interval_on_the_claimed_side_holds():
    """Ideal FL above the proposed scheme on every seed, with little spread: holds, and the
    evidence gives no reason why not."""
    v = claims.highest(
        ideal_against_proposed([1.0, 1.1, 1.2, 1.05]), "energy_per_device_slot_j", "ideal"
    )
    assert v.status == HOLDS
    assert "inconclusive" not in v.evidence and "opposite" not in v.evidence


def test_a_zero_mean_difference_needs_no_number_of_seeds():
    """Differences of -1 and +1 average to 0: inconclusive, and no number of seeds would do."""
    v = claims.highest(ideal_against_proposed([-1.0, 1.0]), "energy_per_device_slot_j", "ideal")
    assert v.status == INCONCLUSIVE
    assert "1 of 2 seeds point the claimed way" in v.evidence
    assert "no number of seeds would exclude zero: the mean difference is 0" in v.evidence


def test_one_failing_comparison_decides_over_an_inconclusive_one():
    """Against two benchmarks: inconclusive against one and the opposite against the other
    is "does not hold"; inconclusive and holds is "inconclusive"."""
    assert claims.conjunction([HOLDS, INCONCLUSIVE, FAILS]) == FAILS
    assert claims.conjunction([HOLDS, INCONCLUSIVE]) == INCONCLUSIVE
    assert claims.conjunction([HOLDS, NOT_MEASURABLE, HOLDS]) == HOLDS
    assert claims.conjunction([NOT_MEASURABLE]) == NOT_MEASURABLE


def test_compare_in_the_opposite_direction_does_not_hold():
    """A cost higher on every seed does not hold and is called the opposite direction."""
    v = claims.compare(two_schemes(0.5), "mean_cost", "two_timescale", ["only_pc"], lower=True)
    assert v.status == FAILS
    assert "opposite" in v.evidence


def test_compare_without_the_other_scheme_is_not_measurable():
    """No run of any compared scheme: not measurable, naming what is missing."""
    s = two_schemes(-0.5)
    v = claims.compare(
        s[s["scheme"] == "two_timescale"], "mean_cost", "two_timescale", ["ideal"], True
    )
    assert v.status == NOT_MEASURABLE
    assert "Ideal FL" in v.evidence


def test_compare_pairs_runs_by_seed():
    """Seeds where one scheme is missing are left out of the pairing (4 of 5 paired)."""
    s = two_schemes(-0.5)
    s = s[~((s["scheme"] == "only_pc") & (s["seed"] == 4))]
    v = claims.compare(s, "mean_cost", "two_timescale", ["only_pc"], lower=True)
    assert "4 seeds" in v.evidence


def test_one_seed_decides_by_direction_and_says_so():
    """With a single seed the direction decides; the evidence says there is no interval and
    the verdict carries the one-seed warning."""
    v = claims.compare(
        two_schemes(-0.5, seeds=1), "mean_cost", "two_timescale", ["only_pc"], lower=True
    )
    assert v.status == HOLDS
    assert "1 seed (no interval)" in v.evidence
    assert v.warning == claims.ONE_SEED_WARNING


def v_sweep(queue_by_v: dict[float, float], seeds: int = 3) -> pd.DataFrame:
    """The proposed scheme at several V: queue = the given mean plus small per-seed noise."""
    rng = np.random.default_rng(1)
    return summary_rows(
        {
            ("two_timescale", v, s): {"mean_queue_j": q + 0.01 * rng.normal()}
            for v, q in queue_by_v.items()
            for s in range(seeds)
        }
    )


def queue_trend(queue_by_v: dict[float, float], rate: bool = False) -> claims.Verdict:
    """The verdict on "the proposed scheme's queue rises with V" for these means."""
    return claims.trend(
        v_sweep(queue_by_v), "two_timescale", "mean_queue_j", "V", increasing=True, rate=rate
    )


def test_trend_monotone_and_significant_holds_with_its_rate():
    """Q = 1, 10, 100 at V = 10, 100, 1000 rises x10 per decade: holds, the rate is given."""
    v = queue_trend({10.0: 1.0, 100.0: 10.0, 1000.0: 100.0}, rate=True)
    assert v.status == HOLDS
    rate = float(re.search(r"x(\S+) per decade", v.evidence).group(1))
    assert rate == pytest.approx(10.0, rel=0.01)


def test_trend_that_is_not_monotone_does_not_hold():
    """Rising end to end but falling significantly in between: does not hold, saying which."""
    v = queue_trend({10.0: 1.0, 100.0: 5.0, 1000.0: 3.0})
    assert v.status == FAILS
    assert "significantly the other way" in v.evidence


def test_trend_within_the_noise_is_inconclusive():
    """The same queue at every V (seed noise only): the change straddles zero, inconclusive."""
    v = queue_trend({10.0: 1.0, 100.0: 1.0, 1000.0: 1.0})
    assert v.status == INCONCLUSIVE
    assert "inconclusive, the interval straddles zero" in v.evidence


def test_trend_the_other_way_does_not_hold():
    """Q = 3, 2, 1 at V = 10, 100, 1000, claimed to rise: does not hold."""
    v = queue_trend({10.0: 3.0, 100.0: 2.0, 1000.0: 1.0})
    assert v.status == FAILS


def test_trend_with_a_plateau_holds():
    """Rising, then flat within the noise (saturation): the trend still holds."""
    v = queue_trend({10.0: 1.0, 100.0: 5.0, 1000.0: 5.0})
    assert v.status == HOLDS


def test_trend_at_one_value_is_not_measurable():
    """The proposed scheme at one V only: the V claims are not measurable."""
    v = claims.trend(v_sweep({100.0: 1.0}), "two_timescale", "mean_queue_j", "V", True)
    assert v.status == NOT_MEASURABLE
    assert "one V" in v.evidence


def test_accuracy_at_interpolates_between_evaluations():
    """Accuracy 0.5 at 0 J and 0.9 at 10 J reads 0.7 at 5 J; beyond 10 J it is NaN."""
    ev = pd.DataFrame(
        {"slot": [-1, 9], "time_s": [0.0, 1.0], "cum_energy_j": [0.0, 10.0], "accuracy": [0.5, 0.9]}
    )
    assert claims.accuracy_at(ev, "cum_energy_j", 5.0) == pytest.approx(0.7)
    assert np.isnan(claims.accuracy_at(ev, "cum_energy_j", 10.5))


def accuracy_runs(slope: dict[str, float], reach: dict[str, float], seeds: int = 3) -> Evidence:
    """Runs whose accuracy grows linearly with energy (``slope`` per J) up to ``reach`` J."""
    summary = summary_rows({(s, 100.0, k): {} for s in slope for k in range(seeds)})
    rows = []
    rng = np.random.default_rng(2)
    for run, scheme in zip(summary["run"], summary["scheme"], strict=True):
        e = np.linspace(0.0, reach[scheme], 6)
        acc = 0.1 + slope[scheme] * e + 0.001 * rng.normal(size=6)
        rows += [
            {"run": run, "slot": i, "time_s": float(i), "cum_energy_j": x, "accuracy": a}
            for i, (x, a) in enumerate(zip(e, acc, strict=True))
        ]
    return Evidence(summary, pd.DataFrame({"run": [], "slot": []}), pd.DataFrame(rows))


def test_accuracy_is_compared_at_the_energy_both_reached():
    """The proposed scheme learns faster per joule but stops at 5 J while Top-K goes on to
    50 J: at 5 J (the level both reached) the proposed scheme is ahead, so the claim holds."""
    ev = accuracy_runs({"two_timescale": 0.1, "topk_ef": 0.05}, {"two_timescale": 5, "topk_ef": 50})
    table = claims.accuracy_at_same(ev, "cum_energy_j", ["topk_ef"])
    assert table["level"].unique().tolist() == [5.0]
    v = claims.accuracy_claim("cum_energy_j", claims.SOTA)(ev)
    assert v.status == HOLDS
    assert "accuracy at 5-5 J:" in v.evidence


def test_each_scheme_is_compared_at_the_level_it_reached_with_the_proposed_one():
    """FedHQ-like stops at 5 J: Top-K is still compared with the proposed scheme at the 50 J
    both reached, and FedHQ-like at 5 J."""
    slope = {"two_timescale": 0.01, "topk_ef": 0.01, "fedhq": 0.01}
    ev = accuracy_runs(slope, {"two_timescale": 50, "topk_ef": 50, "fedhq": 5})
    v = claims.accuracy_claim("cum_energy_j", claims.SOTA)(ev)
    topk, fedhq = v.evidence.split("accuracy at ")[1:]
    assert topk.startswith("50-50 J:") and "Top-K" in topk
    assert fedhq.startswith("5-5 J:") and "FedHQ" in fedhq


def test_accuracy_claims_of_network_only_runs_are_not_measurable():
    """No evaluations (network-only runs): every accuracy claim says so."""
    s = two_schemes(-0.5)
    verdicts = dict(
        (c.key, v) for c, v in claims.check_all(s, pd.DataFrame({"run": []}), pd.DataFrame())
    )
    for key in ("acc_energy", "acc_latency", "sota_energy", "sota_latency"):
        assert verdicts[key].status == NOT_MEASURABLE
        assert "network-only" in verdicts[key].evidence


def test_stable_fraction_that_rises_holds():
    """Stable fraction rising from 0 to 0.3 in three runs: the Fig. 1 claim holds."""
    rows = [
        {"run": f"r{k}", "slot": t, "stable_fraction": 0.3 * t / 39 + 0.01 * k}
        for k in range(3)
        for t in range(40)
    ]
    v = claims.stable_fraction_grows(Evidence(pd.DataFrame(), pd.DataFrame(rows), pd.DataFrame()))
    assert v.status == HOLDS
    assert "3 runs" in v.evidence


def test_every_claim_has_a_verdict_even_on_odd_data():
    """check_all never raises: a table missing the metric columns gives not-measurable verdicts."""
    s = summary_rows({("two_timescale", 100.0, 0): {}})
    out = claims.check_all(s, pd.DataFrame({"run": []}), pd.DataFrame())
    assert len(out) == len(claims.CLAIMS)
    assert {v.status for _, v in out} <= set(claims.VERDICTS)


# ------------------------------------------------------------------- runs shorter than the paper's


def _verdicts(summary: pd.DataFrame) -> dict[str, claims.Verdict]:
    return {
        c.key: v for c, v in claims.check_all(summary, pd.DataFrame({"run": []}), pd.DataFrame())
    }


def test_verdict_from_short_runs_warns_with_both_lengths():
    """Runs of 60 slots: the cost verdict says it is drawn from 60-slot runs, the paper's 400."""
    v = _verdicts(two_schemes(-0.5).assign(slots=60))["time_cost"]
    assert v.status == HOLDS
    assert v.warning == (
        "drawn from 60-slot runs; the paper's are 400 slots (20 frames x 20 slots)"
    )
    assert claims.PAPER_SLOTS == 400


def test_verdict_from_runs_as_long_as_the_paper_has_no_warning():
    """Runs of 400 slots: no warning; a not-measurable verdict has none either."""
    v = _verdicts(two_schemes(-0.5).assign(slots=400))
    assert v["time_cost"].warning == ""
    assert v["v_queue"].status == NOT_MEASURABLE and v["v_queue"].warning == ""


def test_warning_names_only_the_runs_the_verdict_is_drawn_from():
    """A short Ideal FL run does not mark the Proposed-vs-Only-PC verdict, but marks the verdicts
    that compare with Ideal FL, with the range of lengths."""
    s = two_schemes(-0.5).assign(slots=400)
    ideal = s[s["scheme"] == "only_pc"].assign(
        scheme="ideal", run=lambda d: "ideal_" + d["run"], slots=100
    )
    v = _verdicts(pd.concat([s, ideal], ignore_index=True))
    assert set(v["time_cost"].runs) >= set(ideal["run"])  # Ideal FL is a benchmark of it
    assert "runs of 100 to 400 slots" in v["time_cost"].warning
    only = claims.compare(s, "mean_cost", "two_timescale", ["only_pc"], lower=True)
    assert set(only.runs) == set(s["run"])
    assert claims.length_warning(only, pd.concat([s, ideal])) == ""
