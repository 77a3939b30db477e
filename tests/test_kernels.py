"""Slot kernels: the closed form and the per-device SimPy processes give the identical trace."""

from __future__ import annotations

import json

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import (
    HAS_MNIST,
    base_scenario,
    network_only,
    on_both_kernels,
    run_in_memory,
    saved_and_continued,
    with_kernel,
)
from golden_runs import golden_runs
from wflsim.app.run import kernel_of
from wflsim.sim.config.loading import validate_scenario
from wflsim.sim.kernels import ClosedFormKernel, EventKernel, SlotActivity, make_kernel
from wflsim.sim.registry import SCHEMES


def _play(kernel, who, compute_s, upload_s, deadline_s=1.0, start_s=0.0):
    """Run one slot of ``kernel`` alone on a fresh clock: (activity, the clock at the end)."""
    env = simpy.Environment(initial_time=start_s)
    kernel.start_run(env, len(compute_s))
    result: dict[str, SlotActivity] = {}

    def server():
        result["a"] = yield from kernel.play(
            env, np.asarray(who, dtype=np.int64), compute_s, upload_s, deadline_s
        )

    env.process(server())
    env.run()
    return result["a"], env.now


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 12),
    data=st.data(),
    start_s=st.sampled_from([0.0, 0.1, 7.3, 1e6 + 0.3]),
    deadline_s=st.sampled_from([0.25, 0.5, 0.8, 1.0]),
)
def test_closed_form_orders_events_as_simpy_does(n, data, start_s, deadline_s):
    """On coarse times with many ties (and zeros), the closed form's events, their order and the
    slot's end equal those of per-device SimPy processes."""
    grid = st.sampled_from([0.0, 0.125, 0.25, 0.5, 0.75, 1.0])
    compute_s = np.array(data.draw(st.lists(grid, min_size=n, max_size=n)))
    upload_s = np.array(data.draw(st.lists(grid, min_size=n, max_size=n)))
    who = np.flatnonzero(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    closed, end_closed = _play(ClosedFormKernel(), who, compute_s, upload_s, deadline_s, start_s)
    event, end_event = _play(EventKernel(), who, compute_s, upload_s, deadline_s, start_s)
    assert end_closed == end_event
    np.testing.assert_array_equal(closed.time_s, event.time_s)
    np.testing.assert_array_equal(closed.device, event.device)
    np.testing.assert_array_equal(closed.code, event.code)


def test_slot_ends_at_the_later_of_deadline_and_last_upload():
    """The slot closes at max(S + tau_0, last upload end), on both kernels, to the bit."""
    c, u = np.array([0.3, 0.1]), np.array([0.9, 0.2])
    for kernel in (ClosedFormKernel(), EventKernel()):
        _, end = _play(kernel, [0, 1], c, u, deadline_s=0.8, start_s=2.1)
        assert end == (2.1 + 0.3) + 0.9
        _, end = _play(kernel, [1], c, u, deadline_s=0.8, start_s=2.1)
        assert end == 2.1 + 0.8


def test_no_participant_waits_for_the_deadline():
    """A slot nobody takes part in lasts tau_0 and has no device events."""
    for kernel in (ClosedFormKernel(), EventKernel()):
        activity, end = _play(kernel, [], np.ones(3), np.ones(3), deadline_s=0.8, start_s=1.0)
        assert len(activity) == 0 and end == 1.0 + 0.8


#: The golden runs compared here: every network-only and digits run, and one MNIST run (its
#: network side is that of the network-only runs; its training is what costs time). The composed
#: runs are left out: churn and a shared uplink need the event kernel, stale servers use none.
_GOLDEN = sorted(n for n in golden_runs() if not n.startswith(("mnist", "composed"))) + [
    pytest.param("mnist-two_timescale-s0", marks=pytest.mark.slow)  # 27 s of training
]


@pytest.mark.parametrize("name", _GOLDEN)
def test_golden_runs_are_identical_on_both_kernels(name):
    """Every golden run (every scheme; network only, digits with training, one MNIST run) has the identical events table on both kernels."""
    scenario, needs_mnist = golden_runs()[name]
    if needs_mnist and not HAS_MNIST:
        pytest.skip("needs MNIST (set WFLSIM_DATA_DIR)")
    closed, event = on_both_kernels(scenario)
    assert closed.equals(event)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_every_scheme_is_identical_on_both_kernels(scheme):
    """Each scheme, network only with outages and moving devices: identical events tables."""
    data = network_only(
        run={"frames": 3, "slots_per_frame": 4, "deadline_s": 0.5},
        network={"num_devices": 10, "cell_radius_m": 800.0, "bandwidth_hz": 2e6},
        mobility={"model": "random_waypoint", "speed_mps": [1.0, 5.0]},
        scheme={"name": scheme, "V": 50.0},
    )
    closed, event = on_both_kernels(data)
    assert closed.equals(event)


_CHANNELS = [
    {},
    {
        "fading": {
            "model": "rician",
            "k_db": 3.0,
            "correlation": {"model": "gauss_markov", "carrier_ghz": 2.0},
        }
    },
    {"pathloss": {"model": "umi", "carrier_ghz": 3.5}, "csi": {"error_variance": 0.2}},
    {"fading": {"model": "nakagami", "m": 0.7}, "csi": {"delay_slots": 2}},
]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    scheme=st.sampled_from(sorted(SCHEMES)),
    n=st.integers(1, 8),
    frames=st.integers(1, 3),
    slots=st.integers(1, 4),
    deadline_s=st.sampled_from([0.2, 0.5, 0.8, 1.5]),
    bandwidth_hz=st.sampled_from([0.5e6, 2e6, 10e6]),
    channel=st.sampled_from(_CHANNELS),
    late=st.sampled_from(["until_deadline", "full"]),
    seed=st.integers(0, 1000),
)
def test_random_scenarios_are_identical_on_both_kernels(
    scheme, n, frames, slots, deadline_s, bandwidth_hz, channel, late, seed
):
    """Random small network-only scenarios (scheme, size, deadline, band, channel, late-upload
    energy, seed): the two kernels' whole events tables are equal."""
    data = network_only(
        seed=seed,
        run={"frames": frames, "slots_per_frame": slots, "deadline_s": deadline_s},
        network={"num_devices": n, "cell_radius_m": 600.0, "bandwidth_hz": bandwidth_hz},
        devices={"batch_size": 64},
        channel=channel,
        scheme={"name": scheme, "V": 100.0},
        trace={"late_upload_energy": late},
    )
    closed, event = on_both_kernels(data)
    assert closed.equals(event)


@pytest.mark.parametrize("kernel", ["closed_form", "event"])
def test_save_and_continue_on_each_kernel_equals_the_uninterrupted_run(kernel, tmp_path):
    """A run saved after frame 2 and continued in fresh objects, on either kernel, has the
    events of the uninterrupted closed-form run."""
    data = base_scenario(
        run={"frames": 4, "slots_per_frame": 5, "deadline_s": 0.8},
        network={"num_devices": 9, "cell_radius_m": 300.0},
        mobility={"model": "random_waypoint", "speed_mps": [40.0, 80.0], "pause_s": 0.5},
        scheme={"name": "two_timescale", "V": 10.0},
    )
    whole, _ = run_in_memory(with_kernel(data, "closed_form"))
    continued = saved_and_continued(with_kernel(data, kernel), 2, tmp_path / "checkpoint.npz")
    assert continued.equals(whole)


def test_auto_is_the_closed_form_and_the_manifest_records_the_kernel(tmp_path):
    """kernel = auto runs the closed form; the run folder's manifest names the kernel that ran."""
    import wflsim

    assert kernel_of(validate_scenario(base_scenario())) == "closed_form"
    for kernel in ("auto", "event"):
        out = tmp_path / kernel
        wflsim.run(with_kernel(base_scenario(), kernel), out=out)
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["kernel"] == ("closed_form" if kernel == "auto" else "event")


def test_unknown_kernel_is_refused():
    """A kernel name that is not a kernel is refused by the scenario and by make_kernel."""
    from wflsim.sim.errors import ScenarioError

    with pytest.raises(ScenarioError, match="run.kernel"):
        validate_scenario(with_kernel(base_scenario(), "fast"))
    with pytest.raises(ValueError, match="unknown slot kernel"):
        make_kernel("fast")


@pytest.mark.parametrize("kernel", [ClosedFormKernel, EventKernel])
def test_nan_or_negative_slot_times_are_refused(kernel):
    """A participant's NaN or negative upload time is refused by both kernels (no event order exists)."""
    for bad in (float("nan"), -1.0):
        with pytest.raises(ValueError, match="slot times must be"):
            _play(kernel(), [0, 1], np.array([0.1, 0.2]), np.array([bad, 2.0]))
