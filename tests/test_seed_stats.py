"""Seeds as an axis: mean, standard error and Student-t 95 % intervals per configuration."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from wflsim.analysis.stats import over_seeds, t_interval


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
