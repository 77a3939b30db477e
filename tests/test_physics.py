"""Physical models against closed forms and hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from wflsim.sim.radio import rates
from wflsim.sim.world import physics


def test_path_loss_at_one_kilometre_is_the_intercept():
    """At d = 1 km, log10(d[km]) = 0 so PL = 128.1 dB."""
    assert physics.path_loss_db(1000.0) == pytest.approx(128.1)


def test_path_loss_at_hundred_metres():
    """At d = 100 m = 0.1 km, PL = 128.1 - 37.6 = 90.5 dB (distance in km, not m)."""
    assert physics.path_loss_db(100.0) == pytest.approx(90.5)


def test_path_loss_clips_at_min_distance():
    """Below the minimum distance (10 m) the loss is that of 10 m: 128.1 - 2 * 37.6 dB."""
    assert physics.path_loss_db(np.array([0.0, 3.0, 10.0])) == pytest.approx([52.9, 52.9, 52.9])


def test_noise_power_conversion():
    """-104 dBm is 10^-13.4 W = 3.98e-14 W."""
    assert physics.dbm_to_w(-104.0) == pytest.approx(10 ** (-13.4), rel=1e-12)


def test_fading_mean_matches_large_scale_gain():
    """Rayleigh block fading h = g H with g ~ Exp(1) has mean H (200k draws, 4 standard errors)."""
    rng = np.random.default_rng(7)
    big_h = 2.5e-12
    h = physics.rayleigh_channel_gain(big_h, rng.standard_exponential(200_000))
    # Exp(1) has std 1, so the sample mean of g has standard error 1/sqrt(n).
    assert abs(h.mean() / big_h - 1.0) < 4.0 / math.sqrt(200_000)


def test_rate_is_shannon():
    """r = W log2(1 + p h / N0), checked by hand at SNR = 3 (r = 2 W)."""
    assert rates.rate_bps(1.0, 3e-14, 10e6, 1e-14) == pytest.approx(20e6)


def test_upload_time_and_energy():
    """tau_com = bits / r and E_com = p tau_com; an empty payload takes no time."""
    t = rates.upload_time_s(np.array([1e6, 0.0]), np.array([2e6, 0.0]))
    assert t == pytest.approx([0.5, 0.0])
    assert rates.upload_energy_j(0.2, 0.5) == pytest.approx(0.1)


def test_compute_time_and_energy_by_hand():
    """tau_cmp = u c B / f and E_cmp = alpha/2 u c B f^2 for the paper's MNIST numbers."""
    assert physics.compute_time_s(1.0, 2e6, 512, 2e9) == pytest.approx(0.512)
    assert physics.compute_energy_j(1.0, 2e6, 512, 2e9, 2e-28) == pytest.approx(0.4096)
    assert physics.compute_energy_j(0.5, 2e6, 512, 2e9, 2e-28) == pytest.approx(0.2048)


@given(
    bits=st.floats(1e3, 1e8),
    gain=st.floats(1e-15, 1e-9),
    slack=st.floats(0.01, 2.0),
)
def test_min_power_lands_exactly_on_the_deadline(bits, gain, slack):
    """Uploading at p_min takes exactly the time left after computing (when p_min is finite)."""
    w, n0, tcmp = 10e6, 3.98e-14, 0.3
    p = rates.min_tx_power_w(bits, gain, w, n0, tcmp + slack, tcmp)
    assume(np.isfinite(p) and p > 0)
    t = rates.upload_time_s(bits, rates.rate_bps(p, gain, w, n0))
    assert t == pytest.approx(slack, rel=1e-9)


def test_min_power_infinite_when_compute_exceeds_deadline():
    """No power meets the deadline when computing alone takes longer than tau_0."""
    assert np.isinf(rates.min_tx_power_w(1e6, 1e-12, 10e6, 1e-14, 0.5, 0.6))


def test_min_power_zero_for_empty_payload():
    """Nothing to send needs no power."""
    assert rates.min_tx_power_w(0.0, 1e-12, 10e6, 1e-14, 0.5, 0.6) == 0.0


def test_outage_probability_matches_monte_carlo():
    """Pr{g H < h_min} for g ~ Exp(1) equals 1 - exp(-h_min/H) (400k draws, 4 standard errors)."""
    rng = np.random.default_rng(11)
    big_h, h_min = 1e-12, 0.7e-12
    q = float(rates.outage_probability(h_min, big_h))
    assert q == pytest.approx(1 - math.exp(-0.7))
    n = 400_000
    freq = float(np.mean(big_h * rng.standard_exponential(n) < h_min))
    assert abs(freq - q) < 4 * math.sqrt(q * (1 - q) / n)
