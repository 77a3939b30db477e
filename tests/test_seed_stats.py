"""Seeds as an axis: mean, standard error and Student-t 95 % intervals per configuration."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_h
from scipy import stats as st

from wflsim.analysis.stats import (
    OUTLIER_MIN_SEEDS,
    measure_range,
    outlier_mask,
    over_seeds,
    seed_interval,
    seed_intervals,
    seeds_needed,
    t_interval,
    within,
)


def _table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "scheme": ["two_timescale"] * 3 + ["ideal"] * 2 + ["only_pc"],
            "V": [10.0] * 3 + [100.0] * 2 + [10.0],
            "seed": [0, 1, 2, 0, 1, 0],
            "energy": [1.0, 2.0, 4.0, 3.0, 5.0, 7.0],
        }
    )


def test_over_seeds_matches_closed_form():
    """Mean, se and the 95 % interval equal mean -+ t_{0.975, n-1} s / sqrt(n) by hand."""
    out = over_seeds(_table(), by=["scheme", "V"], value_cols=["energy"]).set_index("scheme")
    row = out.loc["two_timescale"]
    x = np.array([1.0, 2.0, 4.0])
    se = x.std(ddof=1) / np.sqrt(3)
    half = st.t.ppf(0.975, 2) * se
    assert row["n"] == 3
    assert row["energy"] == pytest.approx(7.0 / 3.0)
    assert row["energy_se"] == pytest.approx(se)
    assert (row["energy_ci_low"], row["energy_ci_high"]) == pytest.approx(
        (7.0 / 3.0 - half, 7.0 / 3.0 + half)
    )


def test_over_seeds_single_run_has_no_interval():
    """A configuration with one run keeps its value as the mean and NaN for the spread."""
    out = over_seeds(_table(), by=["scheme", "V"], value_cols=["energy"]).set_index("scheme")
    row = out.loc["only_pc"]
    assert row["n"] == 1 and row["energy"] == 7.0
    assert np.isnan(row["energy_se"]) and np.isnan(row["energy_ci_low"])


def test_t_interval_equals_over_seeds():
    """The one-sample helper gives the same interval as the grouped table."""
    mean, se, lo, hi, n = t_interval([3.0, 5.0])
    row = over_seeds(_table(), by=["scheme"], value_cols=["energy"]).set_index("scheme")
    assert (mean, se, lo, hi, n) == pytest.approx(
        tuple(row.loc["ideal", ["energy", "energy_se", "energy_ci_low", "energy_ci_high", "n"]])
    )


def test_interval_coverage_is_about_95_percent():
    """Of 400 intervals from 5 normal samples each (fixed seed), 95 % +- 3.3 % (3 sd of a
    binomial proportion) cover the true mean."""
    rng = np.random.default_rng(12345)
    n_rep, n = 400, 5
    df = pd.DataFrame(
        {"config": np.repeat(np.arange(n_rep), n), "x": rng.normal(2.0, 3.0, n_rep * n)}
    )
    out = over_seeds(df, by=["config"], value_cols=["x"])
    covered = ((out["x_ci_low"] <= 2.0) & (2.0 <= out["x_ci_high"])).mean()
    tol = 3 * np.sqrt(0.95 * 0.05 / n_rep)
    assert abs(covered - 0.95) <= tol


# --------------------------------------------------------------- intervals where they are drawn


def _per_run(values: dict[int, list[float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(x, f"seed{i}", v) for x, vs in values.items() for i, v in enumerate(vs)],
        columns=["slot", "run", "q"],
    )


def test_seed_interval_is_cut_to_the_seeds_range():
    """Three seeds 1, 2, 9: the t interval (t = 4.30) reaches below 0 and above 16; the band
    is the seeds' range [1, 9] around the arithmetic mean 4."""
    out = seed_intervals(_per_run({0: [1.0, 2.0, 9.0]}), ["slot"], "q").iloc[0]
    half = st.t.ppf(0.975, 2) * np.std([1.0, 2.0, 9.0], ddof=1) / np.sqrt(3)
    assert 4.0 - half < 1.0 and 4.0 + half > 9.0  # the uncut interval would leave the range
    assert (out["q"], out["q_ci_low"], out["q_ci_high"]) == pytest.approx((4.0, 1.0, 9.0))
    assert (out["q_min"], out["q_max"], out["n"]) == (1.0, 9.0, 3)


def test_seed_interval_within_the_range_is_the_t_interval():
    """Ten seeds 0..9: the t interval (4.5 -+ 2.17) lies inside [0, 9] and is kept as is."""
    x = np.arange(10.0)
    out = seed_intervals(_per_run({0: list(x)}), ["slot"], "q").iloc[0]
    half = st.t.ppf(0.975, 9) * x.std(ddof=1) / np.sqrt(10)
    assert (out["q_ci_low"], out["q_ci_high"]) == pytest.approx((4.5 - half, 4.5 + half))


def test_seed_interval_on_a_log_axis_is_geometric():
    """On a log axis: the centre is the geometric mean and the interval the t interval of the
    log10 values, mapped back (values 1, 10, 100, 1000: centre 10^1.5, 10^(1.5 -+ 2.05))."""
    values = [1.0, 10.0, 100.0, 1000.0]
    out = seed_intervals(_per_run({0: values}), ["slot"], "q", (np.log10, lambda t: 10.0**t)).iloc[
        0
    ]
    logs = np.log10(values)
    half = st.t.ppf(0.975, 3) * logs.std(ddof=1) / np.sqrt(4)
    assert out["q"] == pytest.approx(10**1.5)
    assert (out["q_ci_low"], out["q_ci_high"]) == pytest.approx(
        (max(1.0, 10 ** (1.5 - half)), min(1000.0, 10 ** (1.5 + half)))
    )


def test_seed_interval_of_one_seed_has_no_band():
    """One seed at a slot: its value as the centre, no interval; NaN values are left out."""
    out = seed_intervals(_per_run({0: [2.0, float("nan")], 1: [3.0, 5.0]}), ["slot"], "q")
    assert list(out["n"]) == [1, 2]
    assert out["q"].iloc[0] == 2.0 and np.isnan(out["q_ci_low"].iloc[0])


@settings(max_examples=60, deadline=None)
@given(
    st_h.lists(
        st_h.floats(1e-3, 1e6, allow_nan=False, allow_infinity=False), min_size=1, max_size=12
    ),
    st_h.sampled_from(["linear", "log"]),
)
def test_seed_interval_never_leaves_the_seeds_range(values, scale):
    """Whatever the seeds' values and the axis: min <= low <= centre <= high <= max."""
    transform = None if scale == "linear" else (np.log10, lambda t: 10.0**t)
    out = seed_intervals(_per_run({0: values}), ["slot"], "q", transform).iloc[0]
    lo, hi = min(values), max(values)
    eps = 1e-9 * max(abs(hi), 1.0)
    assert lo - eps <= out["q"] <= hi + eps
    if len(values) > 1:
        assert lo - eps <= out["q_ci_low"] <= out["q"] + eps
        assert out["q"] - eps <= out["q_ci_high"] <= hi + eps


# ------------------------------------------------------------------------------ outlier seeds


def _spread_ratio(x: np.ndarray, i: int) -> float:
    """The standard deviation of ``x`` without value ``i`` over that of all of ``x``."""
    return float(np.delete(x, i).std(ddof=1) / x.std(ddof=1))


def test_outlier_is_the_seed_that_makes_most_of_the_spread():
    """Energies 2.17, 5.07, 1.40, 1.9, 1.6 J: without 5.07 the spread falls to 23 % of all
    (under a third), so it is the outlier; 1, 2, 3, 4, 5 has none (the smallest share is 82 %)."""
    ideal = np.array([2.173, 5.066, 1.399, 1.9, 1.6])
    assert _spread_ratio(ideal, 1) == pytest.approx(0.2258, abs=1e-3)
    assert outlier_mask(ideal).tolist() == [False, True, False, False, False]
    steady = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert min(_spread_ratio(steady, i) for i in range(5)) == pytest.approx(np.sqrt(2 / 3))
    assert not outlier_mask(steady).any()


def test_outlier_rule_needs_five_finite_values():
    """Four seeds, or five with one NaN, have no outlier however far one lies (the rule's
    minimum, OUTLIER_MIN_SEEDS); NaN itself never is one."""
    assert OUTLIER_MIN_SEEDS == 5
    assert not outlier_mask([1.0, 100.0]).any()
    assert not outlier_mask([1.0, 1.01, 100.0]).any()
    assert not outlier_mask([1.0, 1.01, 0.99, 100.0]).any()
    assert not outlier_mask([1.0, 1.01, np.nan, 0.99, 100.0]).any()
    five = [1.0, 1.01, np.nan, 0.99, 1.02, 100.0]
    assert outlier_mask(five).tolist() == [False, False, False, False, False, True]
    assert not outlier_mask([2.0] * 5).any()


@settings(max_examples=200, deadline=None)
@given(st_h.lists(st_h.floats(-1e6, 1e6, allow_nan=False), min_size=5, max_size=12))
def test_outlier_rule_agrees_with_leaving_each_seed_out(values):
    """The rule equals its definition computed by leaving each value out in turn, and names
    one value at most."""
    x = np.asarray(values)
    if x.std(ddof=1) < 1e-6 * max(1.0, float(np.abs(x).max())):
        return  # (nearly) equal values: the ratio is rounding noise
    mask = outlier_mask(x)
    by_hand = np.array([_spread_ratio(x, i) < 1.0 / 3.0 for i in range(len(x))])
    near = np.array([abs(_spread_ratio(x, i) - 1.0 / 3.0) < 1e-9 for i in range(len(x))])
    assert (mask == by_hand)[~near].all()
    assert mask.sum() <= 1


def test_seeds_needed_is_the_smallest_n_whose_interval_excludes_zero():
    """Mean 1, standard deviation 2: the first n with t_{0.975, n-1} 2 / sqrt(n) < 1, found by
    counting up; a zero spread needs 2; a zero mean, none."""
    n = 2
    while st.t.ppf(0.975, n - 1) * 2.0 / np.sqrt(n) >= 1.0:
        n += 1
    assert seeds_needed(1.0, 2.0) == n == 18
    assert seeds_needed(-1.0, 2.0) == n
    assert seeds_needed(0.5, 0.0) == 2
    assert seeds_needed(0.0, 1.0) is None


def test_seeds_needed_beyond_the_cap_is_none():
    """A mean a billionth of its spread would need more seeds than counted: None."""
    assert seeds_needed(1e-9, 1.0) is None


def test_first_reach_takes_the_first_evaluation_at_the_target():
    """first_reach: the column at the first evaluation whose accuracy reaches the target, NaN if
    none does (a later, higher one does not count)."""
    import pandas as pd

    from wflsim.analysis.stats import first_reach

    ev = pd.DataFrame({"accuracy": [0.2, 0.81, 0.79, 0.9], "time_s": [1.0, 2.0, 3.0, 4.0]})
    assert first_reach(ev, 0.8, "time_s") == 2.0
    assert first_reach(ev, 0.9, "time_s") == 4.0
    assert np.isnan(first_reach(ev, 0.95, "time_s"))


# ------------------------------------------- intervals within a measure's range (issue 47)


def _t_two_dof(level: float) -> float:
    """Student's t quantile with 2 degrees of freedom in closed form: F(t) = 1/2 +
    t / (2 sqrt(2 + t^2)), so t = a sqrt(2 / (1 - a^2)) with a = level."""
    return level * np.sqrt(2.0 / (1.0 - level**2))


def test_a_count_interval_is_cut_at_zero_by_hand():
    """Handovers 0, 0 and 41 over three seeds: mean 41/3, interval [0, 41/3 + t s / sqrt 3]
    (its lower end, 41/3 - 58.8 by hand, is below any count), said to be cut."""
    got = seed_interval([0, 0, 41], 0.95, measure_range("handovers"))
    mean = 41 / 3
    s = np.sqrt(((0 - mean) ** 2 * 2 + (41 - mean) ** 2) / 2)
    half = _t_two_dof(0.95) * s / np.sqrt(3)
    assert mean - half < -45  # what the uncut interval said
    assert got["n"] == 3 and got["mean"] == pytest.approx(mean)
    assert got["ci_low"] == 0.0 and got["ci_high"] == pytest.approx(mean + half, rel=1e-12)
    assert got["ci_clipped"] is True


def test_an_interval_inside_the_range_is_not_cut():
    """Energies 10, 11 and 12 J: the Student-t interval as it is, not said to be cut."""
    got = seed_interval([10.0, 11.0, 12.0], 0.95, measure_range("total_energy_j"))
    mean, _, lo, hi, _ = t_interval([10.0, 11.0, 12.0])
    assert (got["ci_low"], got["ci_high"], got["ci_clipped"]) == (lo, hi, False)
    assert lo > 0


def test_a_rate_interval_is_cut_at_one():
    """Outage rates 1, 1 and 0.8: the interval's upper end is 1, its lower end Student-t's."""
    x = np.array([1.0, 1.0, 0.8])
    half = _t_two_dof(0.95) * x.std(ddof=1) / np.sqrt(3)
    lo, hi, cut = within(x.mean() - half, x.mean() + half, measure_range("outage_rate"))
    assert (hi, cut) == (1.0, True) and lo == pytest.approx(x.mean() - half)


@pytest.mark.parametrize(
    ("name", "bounds"),
    [
        ("handovers", (0.0, np.inf)),
        ("drops", (0.0, np.inf)),
        ("total_energy_j", (0.0, np.inf)),
        ("simulated_time_s", (0.0, np.inf)),
        ("outage_rate", (0.0, 1.0)),
        ("final_accuracy", (0.0, 1.0)),
        ("available_fraction", (0.0, 1.0)),
        ("participation", (0.0, 1.0)),
        ("mean_conv_error", (-np.inf, np.inf)),  # X = lam B (gamma - 1) <= 0
        ("mean_cost", (-np.inf, np.inf)),
        ("some_new_measure", (-np.inf, np.inf)),
    ],
)
def test_measure_ranges(name, bounds):
    """Counts, energies and times are >= 0, rates and accuracies in [0, 1], others free."""
    assert measure_range(name) == bounds


def test_over_seeds_cuts_counts_and_rates_to_their_range():
    """over_seeds: a count's interval stops at 0, a rate's at 1, a free measure's is Student-t's
    (all three by hand with the closed-form t of 2 degrees of freedom)."""
    table = pd.DataFrame(
        {
            "scheme": ["a"] * 3,
            "seed": [0, 1, 2],
            "handovers": [0.0, 0.0, 41.0],
            "outage_rate": [1.0, 1.0, 0.1],
            "mean_cost": [-5.0, -1.0, -30.0],
        }
    )
    out = over_seeds(table, by=["scheme"]).iloc[0]
    t = _t_two_dof(0.95)
    for col in ("handovers", "outage_rate", "mean_cost"):
        x = table[col].to_numpy()
        half = t * x.std(ddof=1) / np.sqrt(3)
        lo, hi = measure_range(col)
        assert out[col + "_ci_low"] == pytest.approx(max(x.mean() - half, lo), rel=1e-12)
        assert out[col + "_ci_high"] == pytest.approx(min(x.mean() + half, hi), rel=1e-12)
    assert out["handovers_ci_low"] == 0.0 and out["outage_rate_ci_high"] == 1.0
    assert out["mean_cost_ci_low"] < -30.0  # not cut


@settings(max_examples=60, deadline=None)
@given(
    st_h.lists(st_h.integers(min_value=0, max_value=1000), min_size=2, max_size=8),
    st_h.floats(min_value=0.5, max_value=0.99),
)
def test_a_count_interval_never_leaves_its_range_nor_loses_the_mean(values, level):
    """Any counts: the interval is within [0, inf) and holds the mean."""
    got = seed_interval(values, level, measure_range("handovers"))
    assert got["ci_low"] >= 0.0 or np.isnan(got["ci_low"])
    if np.isfinite(got["ci_low"]):
        assert got["ci_low"] <= got["mean"] <= got["ci_high"]
