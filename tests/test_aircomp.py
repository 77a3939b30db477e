"""Over-the-air aggregation's physics (sim/radio/aircomp.py) against closed forms, Monte Carlo with
fixed seeds and stated tolerances, and a brute-force grid."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wflsim.sim.radio.aircomp import (
    aircomp_energy_j,
    aircomp_mse,
    expected_aligned,
    normalise,
    optimal_eta,
    optimal_powers,
    received_aggregate,
    truncated_inversion,
    truncation_mse,
)
from wflsim.sim.radio.rates import aircomp_latency_s


def test_latency_is_symbols_over_the_band():
    """D parameters at v values per symbol take ceil(D / v) / W seconds."""
    assert aircomp_latency_s(101_770, 10e6) == pytest.approx(101_770 / 10e6)
    assert aircomp_latency_s(101_771, 10e6, values_per_symbol=2) == pytest.approx(50_886 / 10e6)


def test_energy_is_power_times_transmission_time():
    """Each device's energy is its power times the transmission time."""
    np.testing.assert_allclose(aircomp_energy_j([0.1, 0.5, 0.0], 0.02), [0.002, 0.01, 0.0])


def test_perfect_alignment_without_noise_gives_the_weighted_sum():
    """With every device aligned and no noise the received aggregate is sum a_n x_n (to 1e-12)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 1000))
    gain = rng.exponential(1e-10, size=6)
    a = np.array([8, 8, 16, 16, 24, 24], dtype=float)
    a /= a.sum()
    p, aligned = truncated_inversion(gain, a, eta=1e-6, threshold_gain=0.0)
    assert aligned.all()
    got = received_aggregate(x, gain, p, 1e-6, 0.0, rng)
    np.testing.assert_allclose(got, a @ x, rtol=1e-12, atol=1e-12)


def test_truncated_inversion_mse_matches_monte_carlo():
    """The empirical MSE over 400,000 entries equals sum over the truncated a_n^2 + N0 / eta within 4 standard errors."""
    rng = np.random.default_rng(1)
    n, d = 10, 400_000
    gain = rng.exponential(1.0, size=n) * 1e-10
    a = np.full(n, 1.0 / n)
    eta, noise_w, g_th = 1e-8, 1e-13, 0.5e-10
    p, aligned = truncated_inversion(gain, a, eta, g_th)
    assert 0 < aligned.sum() < n  # some truncated, some aligned
    x = rng.normal(size=(n, d))
    err2 = (received_aggregate(x, gain, p, eta, noise_w, rng) - a @ x) ** 2
    expected = truncation_mse(a, aligned, eta, noise_w)
    assert expected == pytest.approx(aircomp_mse(gain, p, a, eta, noise_w), rel=1e-12)
    se = err2.std() / math.sqrt(d)
    assert abs(err2.mean() - expected) < 4 * se


def test_expected_aligned_devices_match_rayleigh_draws():
    """The share of 200,000 Rayleigh draws above the threshold equals exp(-g_th / H) within 4 standard errors."""
    rng = np.random.default_rng(2)
    h = np.array([1e-10, 3e-11, 5e-12])
    g_th = 2e-11
    draws = rng.exponential(1.0, size=(200_000, 3)) * h
    share = (draws >= g_th).mean(axis=0)
    prob = expected_aligned(h, g_th)
    np.testing.assert_allclose(prob, np.exp(-g_th / h))
    se = np.sqrt(prob * (1 - prob) / draws.shape[0])
    assert (np.abs(share - prob) < 4 * se).all()


def test_optimal_eta_beats_a_fine_grid():
    """Cao et al.'s optimum is no worse than any eta of a 20,000-point log grid, and within 1e-6 of the grid's best."""
    rng = np.random.default_rng(3)
    n = 8
    gain = rng.exponential(1.0, size=n) * 1e-10
    a = rng.uniform(0.5, 1.5, size=n)
    a /= a.sum()
    peak, noise_w = np.full(n, 0.2), 1e-13
    eta, p, mse = optimal_eta(gain, a, peak, noise_w)
    assert (p <= peak * (1 + 1e-12)).all()
    grid = np.logspace(-14, 2, 20_000)
    grid_mse = np.array(
        [aircomp_mse(gain, optimal_powers(gain, a, peak, e), a, e, noise_w) for e in grid]
    )
    assert mse <= grid_mse.min() * (1 + 1e-9)
    assert mse == pytest.approx(grid_mse.min(), rel=1e-6)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(1e-14, 1e-8), min_size=1, max_size=8),
    st.floats(1e-3, 2.0),
    st.floats(1e-16, 1e-10),
)
def test_optimal_powers_respect_the_peak_and_the_mse_is_positive(gains, peak, noise_w):
    """For any gains, the optimal powers stay within the peak and the optimal MSE is positive and at most the best of full power and inversion."""
    g = np.array(gains)
    a = np.full(g.shape, 1.0 / g.size)
    eta, p, mse = optimal_eta(g, a, peak, noise_w)
    assert eta > 0 and (p <= peak * (1 + 1e-12)).all() and mse > 0
    # two feasible alternatives: everyone inverts at the weakest's eta; everyone at full power
    q_min = float((peak * g / a**2).min())
    invert = aircomp_mse(g, optimal_powers(g, a, peak, q_min), a, q_min, noise_w)
    # the optimum is picked on a quadratic whose terms are of the order of sum a_n^2 (= 1 here):
    # its rounding, about 1e-16 of that, is the comparison's absolute slack
    slack = 1e-13 * float(np.sum(a**2))
    assert mse <= invert * (1 + 1e-9) + slack
    amp = np.sqrt(peak * g)  # everyone at full power, eta at its best for those powers
    t = float(np.sum(a * amp) / (np.sum(amp**2) + noise_w))
    full = aircomp_mse(g, np.full(g.shape, peak), a, 1.0 / t**2, noise_w)
    assert mse <= full * (1 + 1e-9) + slack


def test_normalise_gives_zero_mean_unit_variance_rows_and_their_side_information():
    """Normalised rows have mean 0 and variance 1, and mean + std x recovers the update."""
    rng = np.random.default_rng(4)
    u = rng.normal(3.0, 2.0, size=(4, 500))
    x, mean, std = normalise(u)
    np.testing.assert_allclose(x.mean(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(x.std(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(mean[:, None] + std[:, None] * x, u, rtol=1e-12)
