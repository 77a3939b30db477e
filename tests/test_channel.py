"""The channel models against closed forms: TR 38.901 path loss by hand, shadowing and its
Gudmundson correlation, Rician / Nakagami marginals, Gauss-Markov correlation, imperfect CSI.

Statistical tests use fixed seeds and state their tolerance (a number of standard errors, or a
KS p-value above 1 %)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from conftest import base_scenario, events, run_in_memory
from wflsim.sim.errors import ScenarioError
from wflsim.sim.rng import Streams
from wflsim.sim.world.channel import ChannelConfig, Fading, build_channel
from wflsim.sim.world.channel import pathloss as pl
from wflsim.sim.world.channel.fading import SPEED_OF_LIGHT_MPS, RayleighFamily
from wflsim.sim.world.mobility.base import Kinematics

SLOT_S = 0.8


def channel(n: int, seed: int = 0, cell_radius_m: float = 1000.0, **cfg: Any):
    """A channel of ``n`` devices built from a ``[channel]`` table."""
    return build_channel(
        ChannelConfig.model_validate(cfg),
        num_devices=n,
        min_distance_m=10.0,
        cell_radius_m=cell_radius_m,
        slot_s=SLOT_S,
        frames=1,
        slots_per_frame=1,
        streams=Streams(seed),
    )


def motion(n: int, distance_m: float = 200.0, speed_mps: float = 0.0, odometer_m: float = 0.0):
    """Every device at ``distance_m`` on the x axis with one speed and odometer reading."""
    pos = np.column_stack((np.full(n, distance_m), np.zeros(n)))
    return Kinematics(pos, np.full(n, speed_mps), np.full(n, odometer_m))


def slots(ch, n_slots: int, n: int, **kw: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(H, gain, seen_gain)`` of ``n_slots`` slots of one frame: ``(N,)``, ``(S, N)``, ``(S, N)``."""
    large = ch.large_scale(0, motion(n, **kw))
    out = [ch.slot(t, large) for t in range(n_slots)]
    return large.gain, np.stack([o.gain for o in out]), np.stack([o.seen_gain for o in out])


def speed_for_rho(rho: float, carrier_ghz: float) -> float:
    """The speed (m/s) at which J0(2 pi v f_c / c tau_0) = rho (rho in (0.4, 1))."""
    from scipy.optimize import brentq

    x = brentq(lambda x: special.j0(x) - rho, 0.0, 2.404)
    return x / (2 * math.pi * SLOT_S) * SPEED_OF_LIGHT_MPS / (carrier_ghz * 1e9)


def corr_se(rho: float, n: int) -> float:
    """Normal-theory standard error of a sample correlation near rho (n pairs)."""
    return (1.0 - rho * rho) / math.sqrt(n) + 1.0 / n


def power_corr_se(rho: float, n: int) -> float:
    """Standard error of the sample correlation of fading powers (exponential-like, heavy
    tailed): twice the normal-theory value (bootstrap at n = 5000, rho = 0.41: 0.012-0.020
    against 0.012)."""
    return 2.0 * corr_se(rho, n)


# ------------------------------------------------------------------------ TR 38.901 path loss

# Reference values computed by hand from TR 38.901 Table 7.4.1-1 (f_c = 3.5 GHz, h_UT = 1.5 m;
# UMa h_BS = 25 m: d'_BP = 4 * 24 * 0.5 * 3.5e9 / 3e8 = 560 m; UMi h_BS = 10 m: d'_BP = 210 m):
#   UMa LOS  d = 100 m: d3D = sqrt(100^2 + 23.5^2) = 102.724; 28 + 22 log10(102.724)
#            + 20 log10(3.5) = 83.13816 dB (PL1, below the breakpoint)
#   UMa LOS  d = 1000 m: d3D = 1000.276; 28 + 40 log10(1000.276) + 20 log10(3.5)
#            - 9 log10(560^2 + 23.5^2) = 109.41189 dB (PL2)
#   UMa NLOS d = 1000 m: 13.54 + 39.08 log10(1000.276) + 20 log10(3.5) = 141.66605 dB (> LOS)
#   UMi LOS  d = 100 m: d3D = 100.361; 32.4 + 21 log10(100.361) + 20 log10(3.5) = 85.31419 dB
#   UMi LOS  d = 500 m: 32.4 + 40 log10(500.072) + 20 log10(3.5) - 9.5 log10(210^2 + 8.5^2)
#            = 107.11375 dB
#   UMi NLOS d = 500 m: 35.3 log10(500.072) + 22.4 + 21.3 log10(3.5) = 129.26451 dB
#   UMi NLOS d = 200 m, f_c = 28 GHz, h_UT = 5 m: 35.3 log10(200.0625) + 22.4 + 21.3 log10(28)
#            - 0.3 * 3.5 = 133.40561 dB
#   UMa LOS  d = 300 m, f_c = 28 GHz, h_UT = 10 m (d'_BP = 80.6 km): 28 + 22 log10(300.375)
#            + 20 log10(28) = 111.45176 dB
HAND = [
    (pl.uma_los_db, 100.0, 3.5, 1.5, 83.13816),
    (pl.uma_los_db, 1000.0, 3.5, 1.5, 109.41189),
    (pl.uma_nlos_db, 1000.0, 3.5, 1.5, 141.66605),
    (pl.umi_los_db, 100.0, 3.5, 1.5, 85.31419),
    (pl.umi_los_db, 500.0, 3.5, 1.5, 107.11375),
    (pl.umi_nlos_db, 500.0, 3.5, 1.5, 129.26451),
    (pl.umi_nlos_db, 200.0, 28.0, 5.0, 133.40561),
    (pl.uma_los_db, 300.0, 28.0, 10.0, 111.45176),
]


@pytest.mark.parametrize(("fn", "d", "fc", "h_ut", "expected"), HAND)
def test_3gpp_path_loss_at_hand_computed_points(fn, d, fc, h_ut, expected):
    """UMa / UMi LOS and NLOS path loss equal values computed by hand from TR 38.901 (1e-4 dB)."""
    assert float(fn(np.array([d]), fc, h_ut)[0]) == pytest.approx(expected, abs=1e-4)


def test_3gpp_nlos_is_never_below_los():
    """NLOS path loss is max(LOS, PL'): never below LOS, equal to it where PL' is smaller."""
    d = np.geomspace(10.0, 5000.0, 200)
    for los, nlos in ((pl.uma_los_db, pl.uma_nlos_db), (pl.umi_los_db, pl.umi_nlos_db)):
        assert np.all(nlos(d, 3.5) >= los(d, 3.5))
    # UMa at 20 m: PL' = 82.626 dB > LOS 71.648 dB (hand computation), so NLOS is PL'
    assert float(pl.uma_nlos_db(np.array([20.0]), 3.5)[0]) == pytest.approx(82.62616, abs=1e-4)


def test_3gpp_los_probability_at_hand_computed_points():
    """Table 7.4.2-1: 1 up to 18 m; at 100 m UMi 18/100 + e^(-100/36) 0.82 = 0.230985, UMa
    18/100 + e^(-100/63) 0.82 = 0.347671."""
    assert pl.umi_los_probability(np.array([5.0, 18.0]))[1] == 1.0
    assert pl.uma_los_probability(np.array([18.0]))[0] == 1.0
    assert float(pl.umi_los_probability(np.array([100.0]))[0]) == pytest.approx(0.230985, abs=1e-6)
    assert float(pl.uma_los_probability(np.array([100.0]))[0]) == pytest.approx(0.347671, abs=1e-6)


def test_3gpp_distances_below_ten_metres_are_clipped():
    """TR 38.901 holds from 10 m: a device at 3 m has the path loss of one at 10 m."""
    ch = channel(2, pathloss={"model": "umi", "los": "los"})
    pos = np.array([[3.0, 0.0], [10.0, 0.0]])
    large = ch.large_scale(0, Kinematics(pos, np.zeros(2), np.zeros(2)))
    assert large.path_loss_db[0] == large.path_loss_db[1]
    np.testing.assert_array_equal(large.distance_m, [3.0, 10.0])  # logged unclipped


def test_3gpp_path_loss_refuses_a_cell_beyond_five_kilometres():
    """UMa in a 6 km cell is a ScenarioError naming channel.pathloss and the fix."""
    with pytest.raises(ScenarioError, match="5000") as info:
        channel(2, cell_radius_m=6000.0, pathloss="uma")
    assert info.value.field == "channel.pathloss"


def test_probabilistic_los_frequency_matches_the_table():
    """4000 static devices at 100 m: the LOS fraction is UMi's 0.230985 within 4 standard errors."""
    n = 4000
    large = channel(n, seed=3, pathloss={"model": "umi"}).large_scale(0, motion(n, 100.0))
    p, frac = 0.230985, large.los.mean()
    assert abs(frac - p) < 4 * math.sqrt(p * (1 - p) / n)
    los_pl = pl.umi_los_db(np.array([100.0]), 3.5)[0]
    np.testing.assert_array_equal(large.path_loss_db[large.los], los_pl)


def test_los_state_of_a_static_device_never_changes():
    """A device that does not move keeps its LOS state frame after frame."""
    n = 500
    ch = channel(n, seed=4, pathloss={"model": "uma"})
    first = ch.large_scale(0, motion(n, 150.0)).los
    for k in range(1, 6):
        np.testing.assert_array_equal(ch.large_scale(k, motion(n, 150.0)).los, first)


def test_los_state_decorrelates_as_devices_walk():
    """After 1 km of walking at a fixed distance a device's LOS state is independent of its first."""
    n = 4000
    ch = channel(n, seed=5, pathloss={"model": "umi"})
    a = ch.large_scale(0, motion(n, 60.0)).los
    b = ch.large_scale(1, motion(n, 60.0, odometer_m=1000.0)).los
    assert abs(np.corrcoef(a, b)[0, 1]) < 4 / math.sqrt(n)


# ------------------------------------------------------------------------ shadowing


def test_shadowing_mean_and_variance():
    """20,000 devices: shadowing is N(0, sigma^2): mean within 4 SE of 0, variance within 4 SE of sigma^2."""
    n, sigma = 20_000, 8.0
    s = channel(n, seed=6, shadowing={"sigma_db": sigma}).large_scale(0, motion(n)).shadowing_db
    assert abs(s.mean()) < 4 * sigma / math.sqrt(n)
    assert abs(s.var() / sigma**2 - 1.0) < 4 * math.sqrt(2.0 / n)
    assert stats.kstest(s / sigma, "norm").pvalue > 0.01


def test_shadowing_autocorrelation_is_gudmundsons():
    """Walking 10 m per frame with d_corr = 50 m, shadowing j frames apart has correlation
    exp(-10 j / 50) within 4 SE (20,000 devices)."""
    n, step, dcorr = 20_000, 10.0, 50.0
    ch = channel(n, seed=7, shadowing={"sigma_db": 6.0, "decorrelation_m": dcorr})
    s = np.stack([ch.large_scale(k, motion(n, odometer_m=step * k)).shadowing_db for k in range(6)])
    for j in (1, 2, 5):
        rho = math.exp(-step * j / dcorr)
        got = np.corrcoef(s[0], s[j])[0, 1]
        assert abs(got - rho) < 4 * corr_se(rho, n), (j, got, rho)
    assert abs(s[5].std() / 6.0 - 1.0) < 4 * math.sqrt(0.5 / n)  # stays stationary


def test_shadowing_of_a_static_device_is_constant():
    """Without motion the shadowing stays what it was at the first frame."""
    ch = channel(50, seed=8, shadowing={"sigma_db": 5.0})
    first = ch.large_scale(0, motion(50)).shadowing_db
    np.testing.assert_array_equal(ch.large_scale(1, motion(50)).shadowing_db, first)


def test_shadowing_enters_the_large_scale_gain():
    """H = 10^(-(PL + S)/10) with the path loss of the distance."""
    large = channel(30, seed=9, shadowing={"sigma_db": 8.0}).large_scale(0, motion(30, 300.0))
    ref = 128.1 + 37.6 * math.log10(0.3)
    np.testing.assert_allclose(large.path_loss_db, ref)
    np.testing.assert_allclose(large.gain, 10 ** (-(ref + large.shadowing_db) / 10), rtol=1e-12)


@pytest.mark.parametrize(("los", "sigma"), [("los", 4.0), ("nlos", 6.0)])
def test_3gpp_shadowing_uses_the_sigma_of_the_los_state(los, sigma):
    """UMa with sigma_db = "3gpp": standard deviation 4 dB in LOS, 6 dB in NLOS (Table 7.4.1-1),
    within 4 SE (20,000 devices)."""
    n = 20_000
    ch = channel(n, seed=10, pathloss={"model": "uma", "los": los}, shadowing={"sigma_db": "3gpp"})
    s = ch.large_scale(0, motion(n)).shadowing_db
    assert abs(s.std() / sigma - 1.0) < 4 * math.sqrt(0.5 / n)


# ------------------------------------------------------------------------ fading marginals


def _powers(n: int, n_slots: int, seed: int, **fading: Any) -> np.ndarray:
    """Small-scale powers g = h / H of n devices over n_slots slots (speed 30 m/s), flattened."""
    big_h, gain, _ = slots(channel(n, seed=seed, fading=fading), n_slots, n, speed_mps=30.0)
    return (gain / big_h).ravel()


@pytest.mark.parametrize("correlation", ["iid", {"model": "gauss_markov", "carrier_ghz": 2.0}])
def test_rician_envelope_matches_scipy_rice(correlation):
    """|c| = sqrt(g) is Rice(nu = sqrt(K/(K+1)), sigma^2 = 1/(2(K+1))): KS p > 1 % against
    scipy.stats.rice; mean power 1 within 4 SE (K = 6 dB)."""
    k = 10**0.6
    g = _powers(400, 100, 11, model="rician", k_db=6.0, correlation=correlation)
    sigma = math.sqrt(1 / (2 * (k + 1)))
    nu = math.sqrt(k / (k + 1))
    sub = np.sqrt(g.reshape(100, 400)[::10].ravel())  # every 10th slot: near-independent samples
    assert stats.kstest(sub, stats.rice(nu / sigma, scale=sigma).cdf).pvalue > 0.01
    assert abs(g.mean() - 1.0) < 4 * g.std() / math.sqrt(g.size / 10)


def test_rician_outage_probability_matches_marcum_q():
    """Pr{g < x} equals the Marcum-Q form 1 - Q1(sqrt(2K), sqrt(2(K+1)x)) (scipy.stats.rice's CDF)
    at four thresholds within 4 binomial SE (K = 3 dB, 60,000 i.i.d. draws)."""
    k = 10**0.3
    g = _powers(300, 200, 12, model="rician", k_db=3.0)
    sigma, nu = math.sqrt(1 / (2 * (k + 1))), math.sqrt(k / (k + 1))
    for x in (0.05, 0.2, 0.5, 1.5):
        q = stats.rice.cdf(math.sqrt(x), nu / sigma, scale=sigma)
        assert abs(np.mean(g < x) - q) < 4 * math.sqrt(q * (1 - q) / g.size), x


def test_fixed_power_outage_under_rician_fading_matches_marcum_q():
    """End to end: per device, the outage frequency of fixed_power under Rician fading (K = 6 dB)
    is the Rice CDF at sqrt(h_min / H), within 4.5 binomial SE."""
    data = base_scenario(
        run={"frames": 60, "slots_per_frame": 20, "deadline_s": 0.8},
        network={"num_devices": 20, "cell_radius_m": 1000.0},
        devices={"batch_size": 512},
        learning={"enabled": False, "num_params": 300_000},
        channel={"fading": {"model": "rician", "k_db": 6.0}},
        scheme={"name": "fixed_power"},
        seed=2,
    )
    table, _ = run_in_memory(data)
    big_h = events(table, "position").groupby("device")["large_scale_gain"].first()
    dec = events(table, "decision")
    fail = (~events(table, "energy")["success"].astype(bool)).groupby(dec["device"]).mean()
    n0 = 10 ** ((-104 - 30) / 10)
    h_min = n0 * (2 ** (32 * 300_000 / (10e6 * (0.8 - 2e6 * 512 / 2e9))) - 1)
    k = 10**0.6
    sigma, nu = math.sqrt(1 / (2 * (k + 1))), math.sqrt(k / (k + 1))
    n_slots = 60 * 20
    for d in range(20):
        q = stats.rice.cdf(math.sqrt(h_min / big_h[d]), nu / sigma, scale=sigma)
        se = math.sqrt(max(q * (1 - q), 1e-4) / n_slots)
        assert abs(fail[d] - q) < 4.5 * se, (d, fail[d], q)


@pytest.mark.parametrize("m", [0.5, 2.5])
@pytest.mark.parametrize("correlation", ["iid", {"model": "gauss_markov", "carrier_ghz": 2.0}])
def test_nakagami_power_is_gamma(m, correlation):
    """Nakagami-m power is Gamma(m, 1/m): KS p > 1 % against scipy.stats.gamma, mean 1 within 4 SE."""
    g = _powers(400, 100, 13, model="nakagami", m=m, correlation=correlation)
    sub = g.reshape(100, 400)[::10].ravel()
    assert stats.kstest(sub, stats.gamma(m, scale=1 / m).cdf).pvalue > 0.01
    assert abs(g.mean() - 1.0) < 4 * math.sqrt(1 / m / (g.size / 10))


def test_iid_nakagami_is_the_keyed_gamma_draw_over_m():
    """i.i.d. Nakagami's g is exactly KeyedStream.gamma(m) / m of the "fading" stream."""
    big_h, gain, _ = slots(channel(16, seed=14, fading={"model": "nakagami", "m": 3.0}), 3, 16)
    ref = np.stack(
        [Streams(14).keyed("fading").gamma(np.arange(16), t, 3.0) / 3.0 for t in range(3)]
    )
    np.testing.assert_array_equal(gain, big_h * ref)


def test_nakagami_with_m_one_is_rayleigh():
    """Nakagami-1 gives the Rayleigh gains of the same seed (rtol 1e-12), i.i.d. and correlated."""
    for corr in ("iid", {"model": "gauss_markov", "carrier_ghz": 2.0}):
        _, a, _ = slots(
            channel(20, 15, fading={"model": "nakagami", "m": 1.0, "correlation": corr}),
            5,
            20,
            speed_mps=3.0,
        )
        _, b, _ = slots(
            channel(20, 15, fading={"model": "rayleigh", "correlation": corr}), 5, 20, speed_mps=3.0
        )
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_default_channel_is_the_papers_keyed_exponential():
    """The default channel's gain is H times the keyed Exp(1) draw, bit for bit (the paper's)."""
    big_h, gain, seen = slots(channel(10, seed=16), 4, 10)
    ref = np.stack(
        [Streams(16).keyed("fading").standard_exponential(np.arange(10), t) for t in range(4)]
    )
    np.testing.assert_array_equal(gain, big_h * ref)
    np.testing.assert_array_equal(seen, gain)


# ------------------------------------------------------------------------ Gauss-Markov


@pytest.mark.parametrize("rho", [0.95, 0.6])
def test_gauss_markov_autocorrelation_is_jakes(rho):
    """Complex fading one slot apart has correlation J0(2 pi f_d tau_0) and rho^2 two slots apart;
    Rayleigh power one slot apart has correlation J0^2 (4 SE; 5000 devices x 4 slots)."""
    n, fc = 5000, 2.0
    v = speed_for_rho(rho, fc)
    fad = Fading(
        RayleighFamily(),
        Streams(17).keyed("fading"),
        n,
        carrier_ghz=fc,
        slot_s=SLOT_S,
    )
    speed = np.full(n, v)
    assert fad.correlation(speed)[0] == pytest.approx(rho, abs=1e-9)
    c = np.stack([fad.draw(t, speed, coefficient=True).coefficient for t in range(3)])

    def ccorr(a, b):
        num = np.real(np.sum(a * np.conj(b)))
        return float(num / np.sqrt(np.sum(np.abs(a) ** 2) * np.sum(np.abs(b) ** 2)))

    assert abs(ccorr(c[1], c[0]) - rho) < 4 * corr_se(rho, n)
    assert abs(ccorr(c[2], c[0]) - rho**2) < 4 * corr_se(rho**2, n)
    p = np.abs(c) ** 2
    assert abs(np.corrcoef(p[1], p[0])[0, 1] - rho**2) < 4 * power_corr_se(rho**2, n)


def test_gauss_markov_rayleigh_keeps_an_exponential_marginal():
    """Correlated Rayleigh fading stays Exp(1) in every slot (KS p > 1 % on slot 7 of 3000 devices)."""
    g = _powers(
        3000, 8, 18, model="rayleigh", correlation={"model": "gauss_markov", "carrier_ghz": 3.5}
    )
    assert stats.kstest(g.reshape(8, 3000)[7], "expon").pvalue > 0.01


def test_static_devices_have_a_constant_gauss_markov_channel():
    """f_d = 0 for a device that does not move: rho = 1, its gain is the same in every slot."""
    _, gain, _ = slots(
        channel(
            6,
            seed=19,
            fading={
                "model": "rician",
                "k_db": 3.0,
                "correlation": {"model": "gauss_markov", "carrier_ghz": 2.0},
            },
        ),
        5,
        6,
        speed_mps=0.0,
    )
    np.testing.assert_array_equal(gain, np.broadcast_to(gain[0], gain.shape))


def test_gauss_markov_is_drawn_slot_after_slot():
    """Skipping a slot of a correlated model is an error, not a silent restart."""
    ch = channel(
        3,
        fading={"model": "rayleigh", "correlation": {"model": "gauss_markov", "carrier_ghz": 2.0}},
    )
    large = ch.large_scale(0, motion(3))
    ch.slot(0, large)
    with pytest.raises(RuntimeError, match="slot after slot"):
        ch.slot(2, large)


# ------------------------------------------------------------------------ imperfect CSI


def test_csi_error_power_correlation_is_one_minus_e2():
    """Rayleigh, estimation error e2 = 0.3, no delay: corr(g, g_hat) = 1 - e2 and E[g_hat] = 1
    (4 SE, 400 devices x 100 slots)."""
    e2 = 0.3
    big_h, gain, seen = slots(channel(400, 20, csi={"error_variance": e2}), 100, 400)
    g, gh = (gain / big_h).ravel(), (seen / big_h).ravel()
    assert abs(np.corrcoef(g, gh)[0, 1] - (1 - e2)) < 4 * power_corr_se(1 - e2, g.size)
    assert abs(gh.mean() - 1.0) < 4 / math.sqrt(g.size)


def test_outdated_csi_with_iid_fading_sees_an_independent_draw():
    """i.i.d. fading, delay 2: the scheme sees exactly the gain of two slots before (same H), which
    is uncorrelated with the current one (4 SE)."""
    big_h, gain, seen = slots(channel(400, 21, csi={"delay_slots": 2}), 60, 400)
    np.testing.assert_allclose(seen[2:], gain[:-2], rtol=1e-12)
    assert abs(np.corrcoef(gain[2:].ravel(), seen[2:].ravel())[0, 1]) < 4 / math.sqrt(400 * 58)


def test_outdated_csi_with_gauss_markov_fading_has_correlation_rho_to_the_d():
    """Gauss-Markov Rayleigh, rho = 0.8, delay 2: power correlation between g and the seen g is
    rho^(2 D) = 0.4096 (4 SE), also in the first two slots (the pre-run history)."""
    n, rho, d = 20_000, 0.8, 2
    v = speed_for_rho(rho, 2.0)
    ch = channel(
        n,
        22,
        fading={"model": "rayleigh", "correlation": {"model": "gauss_markov", "carrier_ghz": 2.0}},
        csi={"delay_slots": d},
    )
    big_h, gain, seen = slots(ch, 4, n, speed_mps=v)
    target = rho ** (2 * d)
    for t in range(4):
        got = np.corrcoef(gain[t], seen[t])[0, 1]
        assert abs(got - target) < 4 * power_corr_se(target, n), (t, got)


@settings(max_examples=20, deadline=None)
@given(
    e2=st.floats(0.0, 1.0),
    delay=st.integers(0, 4),
    family=st.sampled_from(
        [
            {"model": "rayleigh"},
            {"model": "rician", "k_db": 5.0},
            {"model": "nakagami", "m": 0.7},
            "none",
        ]
    ),
    seed=st.integers(0, 2**20),
)
def test_seen_gains_are_finite_positive_and_exact_without_error(e2, delay, family, seed):
    """Any CSI model: seen gains are finite and >= 0; with e2 = 0 and no delay they equal the gains."""
    ch = channel(5, seed, fading=family, csi={"error_variance": e2, "delay_slots": delay})
    _, gain, seen = slots(ch, 6, 5, speed_mps=2.0)
    assert np.all(np.isfinite(seen)) and np.all(seen >= 0) and np.all(gain >= 0)
    if e2 == 0.0 and delay == 0:
        np.testing.assert_array_equal(seen, gain)


def test_two_timescale_has_outages_under_csi_error_and_none_with_perfect_csi():
    """Perfect CSI: no outage. With e2 = 0.2 uploads fail exactly when the true gain is below the
    one the scheme saw, and the wasted energy is the energy of those participations."""
    common = dict(
        run={"frames": 4, "slots_per_frame": 10, "deadline_s": 0.8},
        network={"num_devices": 20, "cell_radius_m": 800.0},
        scheme={"name": "two_timescale", "V": 10.0},
        seed=5,
    )
    table, stats_ = run_in_memory(base_scenario(**common))
    assert stats_.outage_rate == 0.0 and stats_.wasted_energy_j == 0.0
    table, stats_ = run_in_memory(base_scenario(**common, channel={"csi": {"error_variance": 0.2}}))
    dec, en = events(table, "decision"), events(table, "energy")
    part = en["participating"].astype(bool).to_numpy()
    ok = en["success"].astype(bool).to_numpy()
    h, seen = dec["channel_gain"].to_numpy(), dec["seen_channel_gain"].to_numpy()
    assert stats_.outage_rate > 0.05
    assert np.all(h[part & ~ok] < seen[part & ~ok])
    assert np.all(h[part & ok] >= seen[part & ok] * (1 - 1e-6))
    wasted = np.where(part & ~ok, en["energy_j"], 0.0)
    np.testing.assert_array_equal(en["wasted_energy_j"].to_numpy(), wasted)
    assert stats_.wasted_energy_j == pytest.approx(wasted.sum())


# ------------------------------------------------------------------------ controller assumption


@pytest.mark.parametrize(
    ("cfg", "matches"),
    [
        ({}, True),
        (
            {
                "fading": {
                    "model": "rayleigh",
                    "correlation": {"model": "gauss_markov", "carrier_ghz": 2.0},
                }
            },
            True,
        ),
        ({"fading": {"model": "nakagami", "m": 1.0}}, True),
        ({"shadowing": {"sigma_db": 8.0}, "pathloss": "umi"}, True),
        ({"fading": {"model": "nakagami", "m": 2.0}}, False),
        ({"fading": {"model": "rician", "k_db": 3.0}}, False),
        ({"fading": "none"}, False),
        ({"csi": {"error_variance": 0.1}}, False),
        ({"csi": {"delay_slots": 1}}, False),
    ],
)
def test_controller_assumption_is_stated_for_every_model(cfg, matches):
    """describe() says whether the channel matches Theorem 2's assumption and lists each difference."""
    ca = channel(3, **cfg).describe()["controller_assumption"]
    assert ca["matches"] is matches
    assert bool(ca["differences"]) is (not matches)
    assert "Theorem 2" in ca["assumption"]


# ------------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    ("channel_table", "field", "text"),
    [
        ({"fading": "rician"}, "channel.fading.rician.k_db", "required"),
        ({"fading": {"model": "nakagami", "m": 0.3}}, "channel.fading.nakagami.m", "0.5"),
        ({"fading": "weibull"}, "channel.fading", "weibull"),
        (
            {"pathloss": {"model": "uma", "carrier_ghz": 200}},
            "channel.pathloss.uma.carrier_ghz",
            "100",
        ),
        (
            {"pathloss": {"model": "uma", "ut_height_m": 20}},
            "channel.pathloss.uma.ut_height_m",
            "13",
        ),
        ({"pathloss": {"model": "umi", "los": "sometimes"}}, "channel.pathloss.umi.los", "los"),
        ({"shadowing": {"sigma_db": "3gpp"}}, "channel", "uma"),
        ({"shadowing": {"sigma_db": -1}}, "channel.shadowing", "sigma_db"),
        ({"shadowing": {"decorrelation_m": 0}}, "channel.shadowing", "decorrelation_m"),
        (
            {"fading": {"model": "rayleigh", "correlation": "gauss_markov"}},
            "channel",
            "carrier_ghz",
        ),
        (
            {
                "pathloss": "umi",
                "fading": {
                    "model": "rayleigh",
                    "correlation": {"model": "gauss_markov", "carrier_ghz": 2.0},
                },
            },
            "channel",
            "differs",
        ),
        ({"csi": {"error_variance": 1.5}}, "channel.csi.error_variance", "1"),
        ({"csi": {"delay_slots": -1}}, "channel.csi.delay_slots", "0"),
        ({"replay": " "}, "channel", "replay"),
    ],
)
def test_bad_channel_tables_name_the_field(channel_table, field, text):
    """Each bad [channel] value is a one-line ScenarioError naming the field and what is allowed."""
    from wflsim.sim.config.loading import validate_scenario

    with pytest.raises(ScenarioError) as info:
        validate_scenario(base_scenario(channel=channel_table))
    err = info.value
    assert err.field.startswith(field), err.field
    assert text in err.one_line() and "\n" not in err.one_line()
