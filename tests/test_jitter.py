"""Compute jitter: per-device, per-slot slowdowns of local computation (``[compute] jitter``)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from conftest import (
    base_scenario,
    events,
    network_only,
    on_both_kernels,
    run_in_memory,
    saved_and_continued,
    with_kernel,
)
from wflsim.sim.config.loading import validate_scenario
from wflsim.sim.errors import ScenarioError
from wflsim.sim.registry import SCHEMES
from wflsim.sim.rng import Streams
from wflsim.sim.slot import FrameCosts, SlotRules, resolve_slot, slot_costs
from wflsim.sim.world.compute import ComputeConfig, build_jitter
from wflsim.sim.world.system import DeviceArrays, SystemConstants

#: Nominal full compute time of the test devices: c B / f = 2e6 x 512 / 2e9 s.
NOMINAL_S = 2e6 * 512 / 2e9
DEADLINE_S = 0.8


def _jitter(model: dict, num_devices: int, seed: int = 0):
    return build_jitter(ComputeConfig.model_validate({"jitter": model}), num_devices, Streams(seed))


def _perfect_channel(jitter: dict, scheme: str = "fixed_power", **sections) -> dict:
    """Devices 50 to 400 m away on a 1 THz band with noise at -250 dBm and no fading: every
    upload takes nanoseconds, so only the computation can miss the deadline."""
    return base_scenario(
        run={"frames": 3, "slots_per_frame": 10, "deadline_s": DEADLINE_S},
        network={
            "num_devices": 12,
            "cell_radius_m": 400.0,
            "min_distance_m": 50.0,
            "bandwidth_hz": 1e12,
            "noise_dbm": -250.0,
        },
        devices={"batch_size": 512, "cpu_hz": 2e9, "cycles_per_sample": 2e6},
        channel={"fading": "none"},
        compute={"jitter": jitter},
        scheme={"name": scheme},
        **sections,
    )


def _reference_throttling(seed: int, sigma: float, index) -> np.ndarray:
    """s = exp(sigma |Z|) of each (slot, device) of ``index`` from the keyed uniform by scipy's
    half-normal quantile."""
    keyed = Streams(seed).keyed("compute_jitter")
    u = [keyed.uniform(np.array([int(n)]), int(t), draw=0, sub=0)[0] for t, n in index]
    return np.exp(sigma * stats.halfnorm.ppf(np.array(u)))


def _device_slot_frame(table: pa.Table) -> tuple:
    """(decision, compute_end, energy) rows indexed by (slot, device)."""
    key = ["slot", "device"]
    return tuple(events(table, e).set_index(key) for e in ("decision", "compute_end", "energy"))


# ------------------------------------------------------------------ the laws of the slowdowns


def test_throttling_slowdown_is_log_half_normal():
    """ln(s) / sigma over 200 devices x 100 slots passes a KS test against the half-normal (p > 1 %)."""
    jit = _jitter({"model": "throttling", "sigma": 0.3}, 200, seed=4)
    s = np.concatenate([jit.slowdown(t) for t in range(100)])
    assert s.min() >= 1.0
    assert stats.kstest(np.log(s) / 0.3, stats.halfnorm.cdf).pvalue > 0.01


def test_throttling_mean_matches_the_closed_form():
    """The mean of s is 2 exp(sigma^2 / 2) Phi(sigma) within 4 standard errors (20,000 draws)."""
    sigma = 0.5
    jit = _jitter({"model": "throttling", "sigma": sigma}, 200, seed=9)
    s = np.concatenate([jit.slowdown(t) for t in range(100)])
    mean = 2.0 * np.exp(sigma**2 / 2.0) * stats.norm.cdf(sigma)
    assert abs(s.mean() - mean) < 4.0 * s.std() / np.sqrt(s.size)


def test_background_load_is_a_loaded_share_with_exponential_extra_time():
    """The loaded share is within 4 binomial standard errors of p; s - 1 of the loaded passes a
    KS test against Exp(mean mean_extra) (p > 1 %); the unloaded have s = 1 exactly."""
    p, m = 0.3, 0.7
    jit = _jitter({"model": "background_load", "probability": p, "mean_extra": m}, 200, seed=2)
    s = np.concatenate([jit.slowdown(t) for t in range(100)])
    loaded = s > 1.0
    assert abs(loaded.mean() - p) < 4.0 * np.sqrt(p * (1 - p) / s.size)
    assert stats.kstest(s[loaded] - 1.0, stats.expon(scale=m).cdf).pvalue > 0.01


def test_slowdowns_do_not_change_when_a_device_is_added():
    """Devices 0-6 draw the same slowdowns in a 7- and a 19-device run, slot by slot."""
    for model in (
        {"model": "throttling", "sigma": 0.4},
        {"model": "background_load", "probability": 0.5, "mean_extra": 1.0},
    ):
        small, large = _jitter(model, 7, seed=3), _jitter(model, 19, seed=3)
        for t in (0, 1, 57, 10_000):
            np.testing.assert_array_equal(small.slowdown(t), large.slowdown(t)[:7])


def test_added_device_leaves_the_others_compute_times_unchanged():
    """In whole runs, devices 0-4 have the same compute_end times with 5 and with 8 devices."""

    def compute_end(n):
        data = _perfect_channel({"model": "throttling", "sigma": 0.4})
        data["network"]["num_devices"] = n
        ce = events(run_in_memory(data)[0], "compute_end")
        return ce[ce.device < 5].set_index(["slot", "device"])["compute_s"].sort_index()

    small, large = compute_end(5), compute_end(8)
    assert len(small) == 5 * 30
    np.testing.assert_array_equal(small.to_numpy(), large.to_numpy())


# ------------------------------------------------------------------ the slot


def test_stragglers_miss_exactly_when_slowed_compute_exceeds_the_deadline():
    """With uploads of nanoseconds, a participant succeeds iff its nominal compute time x s (s from
    an independent reference of the keyed draw) is within the deadline, and its compute_end
    logs min(nominal x s, tau_0)."""
    sigma, seed = 0.5, 1
    data = _perfect_channel({"model": "throttling", "sigma": sigma}) | {"seed": seed}
    table, _ = run_in_memory(data)
    decision, compute_end, energy = _device_slot_frame(table)
    ue = events(table, "upload_end").set_index(["slot", "device"])
    need = NOMINAL_S * _reference_throttling(seed, sigma, ue.index)
    assert np.abs(need - DEADLINE_S).min() > 1e-6  # no draw is within an upload of the deadline
    np.testing.assert_array_equal(ue["success"].to_numpy(), need <= DEADLINE_S)
    assert 0 < (need > DEADLINE_S).sum() < len(need)  # some stragglers, not all
    np.testing.assert_allclose(
        compute_end.loc[ue.index, "compute_s"].to_numpy(), np.minimum(need, DEADLINE_S), rtol=1e-12
    )
    np.testing.assert_allclose(decision.loc[ue.index, "compute_s"], NOMINAL_S, rtol=1e-12)


def test_throttled_energy_is_the_lower_clock_computation_plus_the_upload():
    """Energy per device-slot = (alpha/2) c B (f/s)^2 (times the share computed by the deadline)
    + power x time transmitted, recomputed from the trace's columns and the reference s."""
    sigma, seed, alpha, f = 0.5, 1, 2e-28, 2e9
    data = _perfect_channel({"model": "throttling", "sigma": sigma}) | {"seed": seed}
    decision, compute_end, energy = _device_slot_frame(run_in_memory(data)[0])
    part = energy[energy.participating.astype(bool)]
    s = _reference_throttling(seed, sigma, part.index)
    spent = compute_end.loc[part.index, "compute_s"].to_numpy()
    cycles = 2e6 * 512
    e_cmp = 0.5 * alpha * cycles * (f / s) ** 2 * spent / (NOMINAL_S * s)
    np.testing.assert_allclose(part["energy_compute_j"], e_cmp, rtol=1e-12)
    e_up = part["tx_power_w"] * part["upload_s"]
    np.testing.assert_allclose(part["energy_upload_j"], e_up, rtol=1e-12)
    np.testing.assert_allclose(part["energy_j"], e_cmp + e_up, rtol=1e-12)


def test_background_load_spends_the_nominal_compute_energy_over_a_longer_time():
    """Under background load a device that finishes spends the nominal (alpha/2) c B f^2 over
    compute_end.compute_s >= the nominal time; a loaded device's time is the nominal x s."""
    model = {"model": "background_load", "probability": 0.4, "mean_extra": 0.3}
    decision, compute_end, energy = _device_slot_frame(run_in_memory(_perfect_channel(model))[0])
    done = energy[energy.success.astype(bool)]
    nominal_j = 0.5 * 2e-28 * 2e6 * 512 * 2e9**2
    np.testing.assert_allclose(done["energy_compute_j"], nominal_j, rtol=1e-12)
    spent = compute_end.loc[done.index, "compute_s"].to_numpy()
    assert spent.min() >= NOMINAL_S and (spent > NOMINAL_S).any()


def test_a_computation_still_running_at_the_deadline_stops_there():
    """resolve_slot: a 1.0 s computation under a 0.8 s deadline is cut at 0.8 s, never uploads and
    is charged 0.8 of its energy ("until_deadline") or all of it plus the whole upload ("full")."""
    dev = DeviceArrays(*(np.ones(2) for _ in range(6)))
    system = SystemConstants(dev, 1e6, 1e-9, DEADLINE_S, 1000, 32)
    costs = FrameCosts(np.full(2, 3.2e4), np.array([1.0, 0.5]), np.array([2.0, 2.0]))
    gain = np.full(2, 1.0)
    for late, share in (("until_deadline", 0.8), ("full", 1.0)):
        out = resolve_slot(
            [True, True], [1.0, 1.0], costs, gain, np.zeros(2), system, SlotRules("deadline", late)
        )
        assert list(out.success) == [False, True]
        assert out.compute_s[0] == DEADLINE_S and out.upload_s[0] == 0.0
        assert out.energy_compute_j[0] == pytest.approx(2.0 * share, rel=1e-15)
        full_upload_j = 1.0 * out.upload_full_s[0]
        assert out.energy_upload_j[0] == (0.0 if late == "until_deadline" else full_upload_j)


def test_slot_costs_scale_time_and_energy_by_the_model():
    """slot_costs: time x s under both models; energy / s^2 when the clock drops, unchanged when
    the CPU is shared; s = 1 gives the nominal costs to the bit."""
    costs = FrameCosts(np.array([1.0, 2.0]), np.array([0.3, 0.5]), np.array([0.2, 0.1]))
    s = np.array([2.0, 1.0])
    clock, share = slot_costs(costs, s, True), slot_costs(costs, s, False)
    np.testing.assert_array_equal(clock.compute_s, [0.6, 0.5])
    np.testing.assert_array_equal(clock.compute_energy_j, [0.05, 0.1])
    np.testing.assert_array_equal(share.compute_s, [0.6, 0.5])
    np.testing.assert_array_equal(share.compute_energy_j, [0.2, 0.1])
    np.testing.assert_array_equal(clock.payload_bits, costs.payload_bits)


def test_ideal_waits_for_stragglers():
    """ideal (the server waits for the last upload) loses no straggler: every participant
    succeeds and a slot lasts at least its slowest participant's compute time."""
    data = _perfect_channel({"model": "throttling", "sigma": 0.5}, scheme="ideal")
    table, stats_ = run_in_memory(data)
    assert stats_.outage_rate == 0.0
    ce = events(table, "compute_end")
    agg = events(table, "aggregate").set_index("slot")
    slowest = ce.groupby("slot")["compute_s"].max()
    assert (agg.loc[slowest.index, "slot_duration_s"] >= slowest).all()
    assert (slowest > DEADLINE_S).any()


def test_a_known_slowdown_is_planned_on():
    """known = true: the decision logs the slowed compute time the scheme planned on, and
    two_timescale, sending at p_min of it, loses no upload to the deadline."""
    model = {"model": "throttling", "sigma": 0.3, "known": True}
    data = base_scenario(
        run={"frames": 2, "slots_per_frame": 10, "deadline_s": DEADLINE_S},
        devices={"batch_size": 512},
        compute={"jitter": model},
        scheme={"name": "two_timescale"},
    )
    table, stats_ = run_in_memory(data)
    decision, compute_end, _ = _device_slot_frame(table)
    np.testing.assert_array_equal(
        decision.loc[compute_end.index, "compute_s"], compute_end["compute_s"]
    )
    assert stats_.participations > 0 and stats_.outage_rate == 0.0


# ------------------------------------------------------------------ traces


def test_jitter_off_is_todays_trace():
    """No [compute] table, jitter = "none" and throttling with sigma = 0 give the identical trace."""
    data = base_scenario(scheme={"name": "two_timescale"})
    today, _ = run_in_memory(data)
    for jitter in ("none", {"model": "throttling", "sigma": 0.0}):
        assert run_in_memory({**data, "compute": {"jitter": jitter}})[0].equals(today)


_JITTERS = [
    {"model": "throttling", "sigma": 0.4},
    {"model": "background_load", "probability": 0.3, "mean_extra": 1.0, "known": True},
]


@pytest.mark.parametrize("jitter", _JITTERS, ids=["throttling", "background_load"])
@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_both_kernels_give_the_identical_trace_with_jitter(scheme, jitter):
    """Each scheme, network only with stragglers, outages and moving devices: identical events
    tables on the closed-form and the event kernel."""
    data = network_only(
        run={"frames": 3, "slots_per_frame": 4, "deadline_s": 0.5},
        network={"num_devices": 10, "cell_radius_m": 800.0, "bandwidth_hz": 2e6},
        mobility={"model": "random_waypoint", "speed_mps": [1.0, 5.0]},
        compute={"jitter": jitter},
        scheme={"name": scheme, "V": 50.0},
    )
    closed, event = on_both_kernels(data)
    assert closed.equals(event)


@pytest.mark.parametrize("kernel", ["closed_form", "event"])
def test_save_and_continue_with_jitter_equals_the_uninterrupted_run(kernel, tmp_path):
    """A run with stragglers saved after frame 2 and continued in fresh objects, on either kernel,
    has the events of the uninterrupted closed-form run."""
    data = base_scenario(
        run={"frames": 4, "slots_per_frame": 5, "deadline_s": 0.8},
        network={"num_devices": 9, "cell_radius_m": 300.0},
        devices={"batch_size": 512},
        compute={"jitter": {"model": "throttling", "sigma": 0.3}},
        scheme={"name": "two_timescale", "V": 10.0},
    )
    whole, _ = run_in_memory(with_kernel(data, "closed_form"))
    continued = saved_and_continued(with_kernel(data, kernel), 2, tmp_path / "checkpoint.npz")
    assert continued.equals(whole)


def test_device_slot_rows_hold_the_time_actually_spent():
    """At trace level device_slots, compute_s is the compute_end's time of the events level."""
    data = _perfect_channel({"model": "throttling", "sigma": 0.5})
    _, compute_end, _ = _device_slot_frame(run_in_memory(data)[0])
    folded = events(run_in_memory(data | {"trace": {"level": "device_slots"}})[0], "device_slot")
    folded = folded.set_index(["slot", "device"]).loc[compute_end.index]
    np.testing.assert_array_equal(folded["compute_s"], compute_end["compute_s"])


# ------------------------------------------------------------------ bad values

_BAD = [
    ({"model": "throttling", "sigma": -0.1}, "compute.jitter.throttling.sigma"),
    ({"model": "throttling", "sigma": 5.5}, "compute.jitter.throttling.sigma"),
    ({"model": "throttling", "sigma": float("nan")}, "compute.jitter.throttling.sigma"),
    ({"model": "throttling", "sigma": True}, "compute.jitter.throttling.sigma"),
    ({"model": "throttling", "sigma": "0.3"}, "compute.jitter.throttling.sigma"),
    ({"model": "throttling"}, "compute.jitter.throttling.sigma"),
    ({"model": "throttling", "sigma": 0.3, "known": 1}, "compute.jitter.throttling.known"),
    ({"model": "throttling", "sigma": 0.3, "mean_extra": 1.0}, "compute.jitter.throttling"),
    (
        {"model": "background_load", "probability": 1.5, "mean_extra": 1.0},
        "compute.jitter.background_load.probability",
    ),
    (
        {"model": "background_load", "probability": 0.5, "mean_extra": -1.0},
        "compute.jitter.background_load.mean_extra",
    ),
    ({"model": "lognormal", "sigma": 0.3}, "compute.jitter"),
    ("weibull", "compute.jitter"),
    (3, "compute.jitter"),
]


@pytest.mark.parametrize(("jitter", "field"), _BAD)
def test_bad_jitter_values_name_the_field(jitter, field):
    """A bad jitter value, type, model or field is refused naming the field."""
    with pytest.raises(ScenarioError) as info:
        validate_scenario(base_scenario(compute={"jitter": jitter}))
    assert info.value.field.startswith(field), info.value.field


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sigma=st.one_of(
        st.floats(max_value=-1e-12),
        st.floats(min_value=5.000001),
        st.just(float("nan")),
        st.text(max_size=5),
        st.booleans(),
    )
)
def test_any_sigma_out_of_range_or_not_a_number_is_refused(sigma):
    """Any sigma below 0, above 5, NaN, infinite, text or a bool is refused naming the field."""
    with pytest.raises(ScenarioError) as info:
        validate_scenario(
            base_scenario(compute={"jitter": {"model": "throttling", "sigma": sigma}})
        )
    assert info.value.field.startswith("compute.jitter.throttling.sigma")


def test_bad_jitter_exits_2_naming_the_field(tmp_path):
    """`wflsim validate --set compute.jitter.probability=2` exits 2 with one line naming it."""
    from wflsim.app.cli import main

    path = tmp_path / "s.toml"
    path.write_text(
        'name = "t"\n[learning]\nenabled = false\nnum_params = 1000\n'
        '[compute]\njitter = { model = "background_load", probability = 0.5, mean_extra = 1.0 }\n'
    )
    err_io = io.StringIO()
    with contextlib.redirect_stderr(err_io), contextlib.redirect_stdout(io.StringIO()):
        code = main(["validate", str(path), "--set", "compute.jitter.probability=2.0"])
    err = err_io.getvalue().strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "compute.jitter.background_load.probability" in err
