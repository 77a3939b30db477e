"""The per-device privacy accountants and the noise multiplier's calibration
(sim/privacy/accounting.py, sim/privacy/calibrate.py) against independent references: the
analytic Gaussian mechanism (Balle and Wang 2018), the RDP closed forms (Mironov 2017) and a
published DP-SGD value (TF Privacy's MNIST tutorial)."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from wflsim.sim.privacy.accounting import RDP_ORDERS, DeviceAccountant
from wflsim.sim.privacy.calibrate import (
    MIN_NOISE_MULTIPLIER,
    calibrate_noise_multiplier,
    run_epsilon,
)
from wflsim.sim.privacy.config import MAX_NOISE_MULTIPLIER

DELTA = 1e-5


def analytic_gaussian_epsilon(z: float, delta: float) -> float:
    """Balle and Wang (ICML 2018), Theorem 8: the Gaussian mechanism of multiplier ``z`` is
    (eps, delta)-DP exactly for delta(eps) = Phi(1/(2z) - eps z) - e^eps Phi(-1/(2z) - eps z);
    solved for eps."""

    def excess(eps: float) -> float:
        a = stats.norm.cdf(1.0 / (2.0 * z) - eps * z)
        b = math.exp(eps + stats.norm.logcdf(-1.0 / (2.0 * z) - eps * z))
        return a - b - delta

    if excess(0.0) <= 0.0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0.0:
        hi *= 2.0
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12))


def classic_rdp_bound(z: float, steps: int, delta: float) -> float:
    """Mironov 2017, Prop. 3, over all orders alpha > 1: min alpha T / (2 z^2) + log(1/delta) /
    (alpha - 1), minimised in closed form at alpha = 1 + z sqrt(2 log(1/delta) / T)."""
    log_inv = math.log(1.0 / delta)
    return steps / (2.0 * z * z) + math.sqrt(2.0 * steps * log_inv) / z


def one_device(kind: str, multipliers: list[float], q: float | None = None) -> float:
    """Epsilon of a single device after ``multipliers`` composed in order."""
    acc = DeviceAccountant(1, DELTA, kind)  # type: ignore[arg-type]
    for z in multipliers:
        acc.compose([0], [z], sampling_probability=q)
    return float(acc.epsilon()[0])


# -- one step and T steps of the Gaussian mechanism -------------------------------------------


@pytest.mark.parametrize("z", [0.5, 1.0, 2.0, 5.0, 20.0])
def test_pld_one_step_matches_the_analytic_gaussian(z: float) -> None:
    """PLD: one Gaussian event's epsilon is within 1 % of Balle and Wang's exact curve."""
    assert one_device("pld", [z]) == pytest.approx(analytic_gaussian_epsilon(z, DELTA), rel=0.01)


@pytest.mark.parametrize("z", [0.5, 1.0, 2.0, 5.0, 20.0])
def test_rdp_one_step_is_between_the_exact_curve_and_the_classic_bound(z: float) -> None:
    """RDP: one Gaussian event's epsilon is above the exact one and below Mironov's bound."""
    eps = one_device("rdp", [z])
    assert analytic_gaussian_epsilon(z, DELTA) <= eps <= classic_rdp_bound(z, 1, DELTA)


def test_rdp_of_t_gaussians_is_the_closed_form() -> None:
    """RDP of T Gaussian events of z at every order is alpha T / (2 z^2)."""
    acc = DeviceAccountant(2, DELTA, "rdp")
    for _ in range(37):
        acc.compose([1], [1.7])
    rdp = acc.state_dict()["rdp"]
    np.testing.assert_allclose(rdp[1], RDP_ORDERS * 37 / (2 * 1.7**2), rtol=1e-12)
    assert not rdp[0].any()


@pytest.mark.parametrize("steps,z", [(10, 3.0), (100, 8.0), (1000, 20.0)])
def test_pld_of_t_gaussians_is_one_gaussian_of_z_over_sqrt_t(steps: int, z: float) -> None:
    """PLD: T Gaussians of z within 1 % of the exact one Gaussian of z / sqrt(T)."""
    exact = analytic_gaussian_epsilon(z / math.sqrt(steps), DELTA)
    assert one_device("pld", [z] * steps) == pytest.approx(exact, rel=0.01)


@pytest.mark.parametrize("steps,z", [(10, 3.0), (100, 8.0)])
def test_rdp_of_t_gaussians_bounds_the_exact_epsilon(steps: int, z: float) -> None:
    """RDP: T Gaussians of z lie between the exact epsilon and Mironov's bound."""
    eps = one_device("rdp", [z] * steps)
    exact = analytic_gaussian_epsilon(z / math.sqrt(steps), DELTA)
    assert exact <= eps <= classic_rdp_bound(z, steps, DELTA)


@settings(max_examples=20, deadline=None)
@given(zs=st.lists(st.floats(0.5, 30.0), min_size=1, max_size=40))
def test_heterogeneous_gaussians_are_one_gaussian_of_the_combined_multiplier(
    zs: list[float],
) -> None:
    """Gaussians of different z: PLD within 1 % of the exact Gaussian of (sum z^-2)^-1/2."""
    z_eff = sum(z**-2 for z in zs) ** -0.5
    exact = analytic_gaussian_epsilon(z_eff, DELTA)
    assert one_device("pld", zs) == pytest.approx(exact, rel=0.01, abs=1e-6)


@settings(max_examples=20, deadline=None)
@given(zs=st.lists(st.floats(0.5, 30.0), min_size=1, max_size=40))
def test_heterogeneous_rdp_is_the_sum_of_closed_forms(zs: list[float]) -> None:
    """Gaussians of different z: RDP is sum_i alpha / (2 z_i^2), epsilon above the exact one."""
    acc = DeviceAccountant(1, DELTA, "rdp")
    for z in zs:
        acc.compose([0], [z])
    expected = RDP_ORDERS * sum(1.0 / (2.0 * z * z) for z in zs)
    np.testing.assert_allclose(acc.state_dict()["rdp"][0], expected, rtol=1e-12)
    exact = analytic_gaussian_epsilon(sum(z**-2 for z in zs) ** -0.5, DELTA)
    assert acc.epsilon()[0] >= exact * (1.0 - 1e-9)


def test_rdp_epsilon_equals_dp_accountings_rdp_accountant() -> None:
    """RDP: epsilon equals dp-accounting's RdpAccountant on the same mixed composition."""
    events: list[tuple[float, float | None]] = [(1.3, None), (0.8, 0.1), (2.5, None), (1.1, 0.02)]
    acc = DeviceAccountant(3, DELTA, "rdp")
    ref = dp_accounting.rdp.RdpAccountant()
    for z, q in events:
        acc.compose([1], [z], sampling_probability=q)
        gauss = dp_accounting.GaussianDpEvent(z)
        ref.compose(gauss if q is None else dp_accounting.PoissonSampledDpEvent(q, gauss))
    assert acc.epsilon()[1] == ref.get_epsilon(DELTA)


def test_pld_subsampled_equals_dp_accountings_pld_accountant() -> None:
    """PLD: sampled events equal dp-accounting's PLDAccountant at the same discretisation."""
    from wflsim.sim.privacy.accounting import PLD_VALUE_DISCRETIZATION

    ref = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_VALUE_DISCRETIZATION)
    event = dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(1.0))
    ref.compose(dp_accounting.SelfComposedDpEvent(event, 20))
    assert one_device("pld", [1.0] * 20, q=0.05) == pytest.approx(ref.get_epsilon(DELTA), rel=1e-9)


def test_dp_sgd_mnist_tutorial_value() -> None:
    """TF Privacy's MNIST tutorial (tutorials/README.md: q = 256/60000, z = 1.12, 60 epochs,
    delta 1e-5 -> epsilon 2.92, Mironov's conversion): our RDP gives it, the tighter
    conversion and PLD less."""
    steps = 60 * 60000 // 256
    q = 256 / 60000
    acc = DeviceAccountant(1, DELTA, "rdp")
    for _ in range(steps):
        acc.compose([0], [1.12], sampling_probability=q)
    rdp = acc.state_dict()["rdp"][0]
    tutorial = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))
    mask = np.isin(RDP_ORDERS, tutorial)
    classic = np.min(rdp[mask] + math.log(1.0 / DELTA) / (RDP_ORDERS[mask] - 1.0))
    assert classic == pytest.approx(2.92, abs=0.005)
    eps_rdp = float(acc.epsilon()[0])
    assert 2.3 < eps_rdp <= 2.92
    eps_pld = run_epsilon(1.12, DELTA, steps, "pld", q)
    assert 2.0 < eps_pld <= eps_rdp


# -- heterogeneous devices, order, state ------------------------------------------------------

_multipliers = st.lists(st.floats(0.3, 50.0), min_size=1, max_size=12)


@pytest.mark.parametrize("kind", ["rdp", "pld"])
@settings(max_examples=25, deadline=None)
@given(mine=_multipliers, others=_multipliers)
def test_a_devices_epsilon_depends_only_on_its_own_events(
    kind: str, mine: list[float], others: list[float]
) -> None:
    """A device's epsilon is the same whatever the other devices composed."""
    acc = DeviceAccountant(3, DELTA, kind)  # type: ignore[arg-type]
    for i in range(max(len(mine), len(others))):
        ids = ([0] if i < len(mine) else []) + ([1, 2] if i < len(others) else [])
        zs = ([mine[i]] if i < len(mine) else []) + ([others[i]] * 2 if i < len(others) else [])
        acc.compose(ids, zs)
    assert acc.epsilon()[0] == one_device(kind, mine)


@pytest.mark.parametrize("kind", ["rdp", "pld"])
@settings(max_examples=25, deadline=None)
@given(zs=_multipliers, data=st.data())
def test_order_of_composition_does_not_matter(
    kind: str, zs: list[float], data: st.DataObject
) -> None:
    """A device's epsilon is the same for its events in any order."""
    shuffled = data.draw(st.permutations(zs))
    assert one_device(kind, shuffled) == pytest.approx(one_device(kind, zs), rel=1e-12)


def _compose_steps(acc: DeviceAccountant, seed: int, steps: int, q: float | None) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        ids = np.flatnonzero(rng.random(acc.num_devices) < 0.6)
        acc.compose(ids, rng.choice([0.9, 1.4, 3.0], size=ids.size), sampling_probability=q)


@pytest.mark.parametrize("kind,q", [("rdp", None), ("pld", None), ("rdp", 0.2), ("pld", 0.2)])
def test_state_round_trip_is_bit_for_bit(kind: str, q: float | None) -> None:
    """Compose, save, load into a fresh accountant, compose more == uninterrupted, bit for bit."""
    whole = DeviceAccountant(4, DELTA, kind)  # type: ignore[arg-type]
    _compose_steps(whole, 1, 6, q)
    state = whole.state_dict()
    for value in state.values():
        assert isinstance(value, int | float | str | np.ndarray)
    resumed = DeviceAccountant(4, DELTA, kind)  # type: ignore[arg-type]
    resumed.load_state_dict(state)
    _compose_steps(whole, 2, 5, q)
    _compose_steps(resumed, 2, 5, q)
    assert whole.epsilon().tobytes() == resumed.epsilon().tobytes()


@pytest.mark.parametrize(
    "other", [dict(num_devices=5), dict(delta=1e-6), dict(kind="pld")], ids=str
)
def test_load_into_another_accountant_is_refused(other: dict) -> None:
    """A state loads only into an accountant of the same N, delta and kind."""
    acc = DeviceAccountant(4, DELTA, "rdp")
    acc.compose([0, 1], [1.0, 2.0])
    target = DeviceAccountant(**{**dict(num_devices=4, delta=DELTA, kind="rdp"), **other})
    name = next(iter(other))
    with pytest.raises(ValueError, match=name):
        target.load_state_dict(acc.state_dict())
    assert not target.epsilon().any()


@pytest.mark.parametrize("kind", ["rdp", "pld"])
def test_epsilon_zero_unless_composed_and_inf_without_noise(kind: str) -> None:
    """Epsilon is 0 for a device never composed and inf after an event without noise."""
    acc = DeviceAccountant(3, DELTA, kind)  # type: ignore[arg-type]
    acc.compose([1, 2], [0.0, 2.0])
    eps = acc.epsilon()
    assert eps[0] == 0.0 and math.isinf(eps[1]) and 0.0 < eps[2] < math.inf


@pytest.mark.parametrize("kind,q", [("rdp", None), ("pld", None), ("rdp", 0.1), ("pld", 0.1)])
def test_epsilon_if_is_one_more_event_and_leaves_the_state(kind: str, q: float | None) -> None:
    """epsilon_if gives the epsilon after one more event and changes nothing."""
    acc = DeviceAccountant(3, DELTA, kind)  # type: ignore[arg-type]
    acc.compose([0, 1], [1.5, 2.5], sampling_probability=q)
    before = acc.epsilon()
    ahead = acc.epsilon_if([0, 2], 1.2, sampling_probability=q)
    assert acc.epsilon().tobytes() == before.tobytes()
    acc.compose([0, 2], [1.2, 1.2], sampling_probability=q)
    np.testing.assert_array_equal(ahead, acc.epsilon()[[0, 2]])


@pytest.mark.parametrize(
    "ids,zs,q,match",
    [
        ([0], [-1.0], None, "multipliers"),
        ([0], [float("nan")], None, "multipliers"),
        ([0, 0], [1.0, 1.0], None, "repeat"),
        ([3], [1.0], None, "device_ids"),
        ([0], [1.0], 0.0, "sampling_probability"),
        ([0], [1.0], 1.5, "sampling_probability"),
        ([0, 1], [1.0, 1.0, 1.0], None, "multipliers"),
    ],
)
def test_bad_events_are_refused(ids: list, zs: list, q: float | None, match: str) -> None:
    """A negative or NaN multiplier, a repeated or unknown device, a bad q are refused."""
    acc = DeviceAccountant(3, DELTA, "rdp")
    with pytest.raises(ValueError, match=match):
        acc.compose(ids, zs, sampling_probability=q)
    assert not acc.epsilon().any()


# -- calibration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind,steps,q,count_std",
    [
        ("rdp", 100, None, None),
        ("pld", 100, None, None),
        ("rdp", 500, 0.1, None),
        ("rdp", 100, None, 40.0),
        ("pld", 50, 0.2, None),
    ],
)
def test_calibrated_multiplier_meets_the_target_and_one_percent_less_does_not(
    kind: str, steps: int, q: float | None, count_std: float | None
) -> None:
    """The calibrated z meets the target epsilon; 0.99 z does not."""
    z = calibrate_noise_multiplier(2.0, DELTA, steps, kind, q, count_std)  # type: ignore[arg-type]
    assert run_epsilon(z, DELTA, steps, kind, q, count_std) <= 2.0  # type: ignore[arg-type]
    assert run_epsilon(0.99 * z, DELTA, steps, kind, q, count_std) > 2.0  # type: ignore[arg-type]


def test_calibration_agrees_with_the_analytic_gaussian() -> None:
    """PLD calibration of T steps is the exact Gaussian's z for the target, times sqrt(T)."""
    z = calibrate_noise_multiplier(1.0, DELTA, 64, "pld")
    z_exact = optimize.brentq(lambda s: analytic_gaussian_epsilon(s, DELTA) - 1.0, 0.5, 50.0)
    assert z / 8.0 == pytest.approx(z_exact, rel=2e-3)


@pytest.mark.parametrize("kind", ["rdp", "pld"])
def test_calibrated_multiplier_grows_with_the_steps(kind: str) -> None:
    """More updates need more noise for the same target."""
    steps = (1, 10, 100, 1000)
    zs = [calibrate_noise_multiplier(3.0, DELTA, s, kind) for s in steps]  # type: ignore[arg-type]
    assert zs == sorted(zs) and len(set(zs)) == 4


@pytest.mark.parametrize(
    "steps,count_std", [(10**9, None), (100, 1.0)], ids=["max multiplier", "clipped count"]
)
def test_unreachable_target_names_the_field_and_the_fix(
    steps: int, count_std: float | None
) -> None:
    """A target no z in the bracket meets is refused naming privacy.target_epsilon."""
    with pytest.raises(ValueError, match=r"^privacy\.target_epsilon: ") as err:
        calibrate_noise_multiplier(1e-3, DELTA, steps, "rdp", None, count_std)
    message = str(err.value)
    assert str(steps) in message and "raise target_epsilon" in message and "delta" in message
    assert "\n" not in message


def test_target_met_at_the_smallest_multiplier_returns_it() -> None:
    """A target the bracket's smallest z already meets returns that z."""
    assert run_epsilon(MIN_NOISE_MULTIPLIER, DELTA, 1, "rdp") < 1e6
    assert calibrate_noise_multiplier(1e6, DELTA, 1, "rdp") == MIN_NOISE_MULTIPLIER
    assert MAX_NOISE_MULTIPLIER > MIN_NOISE_MULTIPLIER
