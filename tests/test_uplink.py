"""The shared uplink: OFDMA processor sharing and TDMA on the event kernel, checked against
closed forms, queueing theory and the trace's own events."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math

import numpy as np
import pyarrow as pa
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import base_scenario, events, network_only, run_in_memory, saved_and_continued
from wflsim.app.cli import main
from wflsim.app.run import build_engine, kernel_of, make_learner, prepare_scenario
from wflsim.sim.config.loading import validate_scenario
from wflsim.sim.kernels import C_END, U_END, U_START, EventKernel, SlotResult
from wflsim.sim.radio import rates
from wflsim.sim.radio.modes import describe_uplink
from wflsim.sim.radio.ofdma import OfdmaUplink
from wflsim.sim.radio.rates import shared_rate_bps
from wflsim.sim.radio.shared import SharedUplink
from wflsim.sim.radio.sharing import ProcessorSharing
from wflsim.sim.radio.tdma import TdmaUplink
from wflsim.sim.slot import SlotUploads
from wflsim.sim.world import physics

W_HZ = 10e6
N0_W = float(physics.dbm_to_w(-104.0))


def _uplink(mode: str, order: str = "fcfs") -> SharedUplink:
    if mode == "ofdma":
        return OfdmaUplink(W_HZ, N0_W, U_START, U_END)
    return TdmaUplink(W_HZ, N0_W, U_START, U_END, order=order)  # type: ignore[arg-type]


def _full_band_s(bits, power_w, gain) -> np.ndarray:
    """Time of each payload alone on the whole band, ``S / (W log2(1 + p h / N0))``."""
    snr = np.asarray(power_w) * np.asarray(gain) / N0_W
    with np.errstate(divide="ignore"):  # 0 W: never
        return np.asarray(bits) / (W_HZ * np.log2(1.0 + snr))


def _one_slot(
    mode: str,
    compute_s,
    bits,
    power_w,
    gain,
    deadline_s: float = 1.0,
    closes_at: str = "deadline",
    start_s: float = 0.0,
    online_until_s=None,
) -> tuple[SlotResult, float]:
    """One slot on the event kernel with a shared uplink, every device participating (and
    going offline at ``online_until_s``, absolute s, if given): (the kernel's result, the clock
    at the slot's end)."""
    n = len(compute_s)
    arr = [
        np.broadcast_to(np.asarray(x, dtype=np.float64), (n,)).copy() for x in (bits, power_w, gain)
    ]
    uploads = SlotUploads(
        participating=np.ones(n, dtype=bool),
        tx_power_w=arr[1],
        channel_gain=arr[2],
        payload_bits=arr[0],
        compute_s=np.asarray(compute_s, dtype=np.float64),
        compute_needed_s=np.asarray(compute_s, dtype=np.float64),
        upload_full_s=_full_band_s(*arr),
    )
    kernel = EventKernel(_uplink(mode))
    env = simpy.Environment(initial_time=start_s)
    kernel.start_run(env, n)
    out: dict[str, SlotResult] = {}

    def server():
        until = None if online_until_s is None else np.asarray(online_until_s, dtype=np.float64)
        out["r"] = yield from kernel.play_slot(
            env,
            uploads,
            deadline_s,
            closes_at,  # type: ignore[arg-type]
            online_until_s=until,
        )
        out["end"] = env.now

    env.run(until=env.process(server()))
    return out["r"], out["end"]


def _times(result: SlotResult, code: int) -> dict[int, float]:
    """Device -> time of its event ``code`` in the kernel's log."""
    a = result.activity
    return {
        int(d): float(t) for t, d, c in zip(a.time_s, a.device, a.code, strict=True) if c == code
    }


def test_shared_rate_on_the_whole_band_is_the_dedicated_rate():
    """b = W with density N0 / W gives eq. 9's W log2(1 + p h / N0); b = 0 or p = 0 gives 0."""
    p, h = np.array([0.1, 1.0, 0.0]), np.array([1e-12, 3e-10, 1e-11])
    np.testing.assert_allclose(
        shared_rate_bps(p, h, W_HZ, N0_W / W_HZ), W_HZ * np.log2(1.0 + p * h / N0_W), rtol=1e-14
    )
    assert shared_rate_bps(1.0, 1e-11, 0.0, N0_W / W_HZ) == 0.0


@pytest.mark.parametrize("k", [1, 2, 5, 12])
def test_k_equal_ofdma_uploads_started_together_finish_together_at_the_closed_form_time(k):
    """k equal uploads ready at once end together at S / ((W/k) log2(1 + p h k / (N0 W)))."""
    bits, p, h, c = 4e6, 0.2, 2e-11, 0.05
    result, _ = _one_slot("ofdma", [c] * k, bits, p, h, deadline_s=100.0)
    expected = c + bits / ((W_HZ / k) * math.log2(1.0 + p * h * k / N0_W))
    ends = np.array(list(_times(result, U_END).values()))
    assert len(ends) == k and np.all(ends == ends[0])
    np.testing.assert_allclose(ends, expected, rtol=1e-12)
    np.testing.assert_allclose(result.transmitted_s, expected - c, rtol=1e-12)
    assert result.arrived.all()


def test_tdma_completion_times_are_cumulative_sums_in_fcfs_order():
    """Devices ready together transmit one at a time in device order: ends are cumulative sums."""
    rng = np.random.default_rng(3)
    n = 7
    bits, p, h = rng.uniform(1e6, 5e6, n), rng.uniform(0.05, 1.0, n), rng.uniform(1e-12, 1e-10, n)
    result, _ = _one_slot("tdma", [0.1] * n, bits, p, h, deadline_s=100.0)
    full = bits / (W_HZ * np.log2(1.0 + p * h / N0_W))
    ends = _times(result, U_END)
    np.testing.assert_allclose([ends[d] for d in range(n)], 0.1 + np.cumsum(full), rtol=1e-12)
    np.testing.assert_allclose(result.transmitted_s, full, rtol=1e-12)


def test_tdma_serves_by_ready_time_and_waiting_delays_the_start():
    """Staggered ready times: start = max(ready, previous end), in ready-time order."""
    compute = np.array([0.30, 0.10, 0.20, 0.10])
    bits, p, h = 3e6, 0.5, 5e-12
    result, _ = _one_slot("tdma", compute, bits, p, h, deadline_s=100.0)
    full = float(_full_band_s(bits, p, h))
    order = [1, 3, 2, 0]  # by ready time, ties by device
    end = 0.0
    starts, ends = _times(result, U_START), _times(result, U_END)
    for d in order:
        start = max(compute[d], end)
        end = start + full
        assert starts[d] == pytest.approx(start, rel=1e-12)
        assert ends[d] == pytest.approx(end, rel=1e-12)
    assert starts[3] > compute[3]  # device 3 waited for device 1


def test_ofdma_bits_sent_under_changing_rates_equal_each_payload():
    """Integrating each upload's rate over the log's intervals (k from the log, rate
    (W/k) log2(1 + p h k / (N0 W))) gives back its payload, for staggered starts."""
    rng = np.random.default_rng(11)
    n = 6
    compute = rng.uniform(0.0, 0.3, n)
    bits, p, h = rng.uniform(1e6, 4e6, n), rng.uniform(0.05, 1.0, n), rng.uniform(1e-12, 1e-10, n)
    result, _ = _one_slot("ofdma", compute, bits, p, h, deadline_s=100.0)
    starts, ends = _times(result, U_START), _times(result, U_END)
    instants = sorted(set(starts.values()) | set(ends.values()))
    sent = np.zeros(n)
    for a, b in zip(instants[:-1], instants[1:], strict=True):
        active = [d for d in range(n) if starts[d] <= a and ends[d] >= b]
        k = len(active)
        for d in active:
            sent[d] += (b - a) * (W_HZ / k) * math.log2(1.0 + p[d] * h[d] * k / N0_W)
    np.testing.assert_allclose(sent, bits, rtol=1e-8)
    np.testing.assert_allclose(
        result.transmitted_s, [ends[d] - starts[d] for d in range(n)], rtol=0, atol=0
    )


def test_one_completion_event_is_scheduled_per_change():
    """Processor sharing schedules at most one completion per start or end, not one per job."""
    env = simpy.Environment()
    ps = ProcessorSharing(
        env, lambda jobs: np.full(jobs.shape[0], 1e6 / jobs.shape[0]), lambda j: None
    )
    n = 50

    def source():
        for j in range(n):
            ps.add(j, 1e5 * (1 + j % 7))
            yield env.timeout(0.01)

    env.process(source())
    env.run()
    assert ps.scheduled <= 2 * n and ps.in_flight.shape[0] == 0


@pytest.mark.parametrize(("seed", "sizes"), [(1, "exponential"), (2, "uniform")])
def test_processor_sharing_matches_the_mg1_ps_mean_sojourn_time(seed, sizes):
    """Poisson arrivals (rho = 0.6) into a constant-capacity PS server: the mean sojourn time of
    20,000 jobs is E[S] / (C (1 - rho)) within 5 % (M/G/1-PS; fixed seeds)."""
    rng = np.random.default_rng(seed)
    capacity_bps, mean_bits, rho, n = 1e6, 1e5, 0.6, 20_000
    lam = rho * capacity_bps / mean_bits
    if sizes == "exponential":
        size = rng.exponential(mean_bits, n)
    else:
        size = rng.uniform(0.0, 2.0 * mean_bits, n)
    gaps = rng.exponential(1.0 / lam, n)
    env = simpy.Environment()
    arrived: dict[int, float] = {}
    sojourn = np.zeros(n)

    def end(j: int) -> None:
        sojourn[j] = env.now - arrived[j]

    ps = ProcessorSharing(
        env, lambda jobs: np.full(jobs.shape[0], capacity_bps / jobs.shape[0]), end
    )

    def source():
        for j in range(n):
            yield env.timeout(gaps[j])
            arrived[j] = env.now
            ps.add(j, float(size[j]))

    env.process(source())
    env.run()
    expected = mean_bits / capacity_bps / (1.0 - rho)
    assert sojourn[1000:].mean() == pytest.approx(expected, rel=0.05)


_GRID = [0.0, 0.05, 0.1, 0.2, 0.3]


@settings(max_examples=60, deadline=None)
@given(
    mode=st.sampled_from(["ofdma", "tdma"]),
    closes_at=st.sampled_from(["deadline", "last_upload"]),
    n=st.integers(1, 8),
    data=st.data(),
    deadline_s=st.sampled_from([0.3, 0.5, 1.0]),
    start_s=st.sampled_from([0.0, 12.8]),
)
def test_invariants_of_a_shared_slot(mode, closes_at, n, data, deadline_s, start_s):
    """Every upload starts and ends once, transmits no longer than it is in flight, and never
    after the deadline when the slot closes there; TDMA never transmits two at once; waiting
    for the last upload, every upload arrives."""
    compute = np.array(data.draw(st.lists(st.sampled_from(_GRID), min_size=n, max_size=n)))
    bits = np.array(data.draw(st.lists(st.sampled_from([1e5, 1e6, 5e6]), min_size=n, max_size=n)))
    p = np.array(data.draw(st.lists(st.sampled_from([0.01, 0.1, 1.0]), min_size=n, max_size=n)))
    h = np.array(
        data.draw(st.lists(st.sampled_from([1e-12, 1e-11, 1e-10]), min_size=n, max_size=n))
    )
    result, end = _one_slot(mode, compute, bits, p, h, deadline_s, closes_at, start_s)
    a = result.activity
    for code in (C_END, U_START, U_END):
        assert sorted(a.device[a.code == code].tolist()) == list(range(n))
    ready, starts, ends = _times(result, C_END), _times(result, U_START), _times(result, U_END)
    for d in range(n):
        assert ready[d] <= starts[d] <= ends[d]
        assert 0.0 <= result.transmitted_s[d] <= ends[d] - ready[d] + 1e-12
    if closes_at == "deadline":
        assert max(ends.values()) <= start_s + deadline_s
        assert end == start_s + deadline_s
    else:
        assert result.arrived.all()
        assert end == max(start_s + deadline_s, max(ends.values()))
    if mode == "tdma":
        spans = sorted((starts[d], ends[d]) for d in range(n))
        assert all(b[0] >= a_[1] for a_, b in zip(spans[:-1], spans[1:], strict=True))
    assert np.sum(result.transmitted_s) <= (end - start_s) * (n if mode == "ofdma" else 1) + 1e-9


# ---------------------------------------------------------------------- whole runs


def _shared(mode: str, **sections) -> dict:
    """A network-only scenario on a shared uplink ``mode``."""
    data = network_only(
        run={"frames": 2, "slots_per_frame": 4, "deadline_s": 0.8},
        network={"num_devices": 8, "cell_radius_m": 500.0},
        scheme={"name": "two_timescale", "V": 10.0},
        uplink={"mode": mode},
    )
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return data


def _uploads(table: pa.Table):
    """Per (slot, device) of the trace: its upload's start and end times and its energy row."""
    start = events(table, "upload_start").set_index(["slot", "device"])["time_s"]
    end = events(table, "upload_end").set_index(["slot", "device"])
    energy = events(table, "energy").set_index(["slot", "device"])
    return start, end, energy


@pytest.mark.parametrize("mode", ["ofdma", "tdma"])
def test_upload_energy_is_power_times_the_time_transmitted_in_the_trace(mode):
    """On every energy row: upload energy = power x (upload_end - upload_start) of the trace's
    own rows, and compute + upload = total."""
    table, _ = run_in_memory(_shared(mode))
    start, end, energy = _uploads(table)
    part = energy[energy["participating"]]
    assert len(part) > 0
    span = end.loc[part.index, "time_s"] - start.loc[part.index]
    np.testing.assert_allclose(part["upload_s"], span, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(part["energy_upload_j"], part["tx_power_w"] * span, rtol=1e-12)
    np.testing.assert_allclose(
        energy["energy_j"], energy["energy_compute_j"] + energy["energy_upload_j"], rtol=1e-15
    )


@pytest.mark.parametrize("mode", ["ofdma", "tdma"])
def test_no_upload_transmits_after_the_deadline_under_a_deadline_scheme(mode):
    """two_timescale closes at tau_0: every upload_end lies within its slot's deadline."""
    table, _ = run_in_memory(_shared(mode))
    slot_start = events(table, "slot_start").set_index("slot")["time_s"]
    end = events(table, "upload_end")
    limit = slot_start.loc[end["slot"]].to_numpy() + 0.8
    assert len(end) > 0 and np.all(end["time_s"].to_numpy() <= limit)
    np.testing.assert_allclose(events(table, "aggregate")["slot_duration_s"], 0.8, rtol=1e-9)


@pytest.mark.parametrize("mode", ["ofdma", "tdma"])
def test_a_scheme_that_waits_for_the_last_upload_cuts_nothing(mode):
    """ideal (no outage): every participant's upload arrives, and slots outlast tau_0."""
    table, stats = run_in_memory(_shared(mode, scheme={"name": "ideal"}))
    energy = events(table, "energy")
    assert (energy["success"] == energy["participating"]).all()
    assert stats.successes == stats.participations > 0
    assert events(table, "aggregate")["slot_duration_s"].max() > 0.8


def test_tdma_uploads_wait_after_their_compute_ends():
    """Under TDMA some upload_start rows are later than the device's compute_end."""
    table, _ = run_in_memory(_shared("tdma", scheme={"name": "ideal"}))
    ce = events(table, "compute_end").set_index(["slot", "device"])["time_s"]
    us = events(table, "upload_start").set_index(["slot", "device"])["time_s"]
    assert (us.loc[ce.index] > ce).any() and (us.loc[ce.index] >= ce).all()


def test_a_shared_uplink_costs_outages_the_dedicated_band_does_not_have():
    """With the paper's planning (k = 1), OFDMA and TDMA miss deadlines that dedicated bands meet."""
    dedicated, d_stats = run_in_memory(_shared("dedicated"))
    for mode in ("ofdma", "tdma"):
        _, stats = run_in_memory(_shared(mode))
        assert stats.outage_rate > d_stats.outage_rate


def test_planning_on_w_over_k_gives_p_min_of_that_band():
    """planned_concurrent_uploads = k: the decision's p_min is Proposition 1's on W/k, N0/k."""
    k = 4
    table, _ = run_in_memory(_shared("ofdma", uplink={"planned_concurrent_uploads": k}))
    dec = events(table, "decision")
    expected = rates.min_tx_power_w(
        dec["payload_bits"], dec["seen_channel_gain"], W_HZ / k, N0_W / k, 0.8, dec["compute_s"]
    )
    part = dec["participating"].to_numpy(dtype=bool)
    np.testing.assert_allclose(dec["min_tx_power_w"][part], expected[part], rtol=1e-12)


def test_noise_given_as_a_density_equals_the_same_noise_given_as_a_power():
    """-174 dBm/Hz over 10 MHz is the default -104 dBm: the identical trace."""
    base = _shared("dedicated")
    psd = copy.deepcopy(base)
    psd["uplink"]["noise_psd_dbm_hz"] = -174.0
    assert run_in_memory(base)[0].equals(run_in_memory(psd)[0])


@pytest.mark.parametrize("kernel", ["closed_form", "event"])
def test_dedicated_mode_given_explicitly_is_the_default_run_on_both_kernels(kernel):
    """uplink.mode = "dedicated" on either kernel gives the events of a scenario without [uplink]."""
    data = network_only(
        run={"frames": 2, "slots_per_frame": 4, "deadline_s": 0.5, "kernel": kernel},
        network={"num_devices": 8, "bandwidth_hz": 2e6},
        scheme={"name": "two_timescale", "V": 50.0},
    )
    plain = run_in_memory(data)[0]
    data["uplink"] = {"mode": "dedicated"}
    assert run_in_memory(data)[0].equals(plain)


@pytest.mark.parametrize("mode", ["ofdma", "tdma"])
def test_same_scenario_and_seed_give_the_identical_trace(mode):
    """Two runs of one shared-uplink scenario and seed have equal events tables."""
    assert run_in_memory(_shared(mode))[0].equals(run_in_memory(_shared(mode))[0])


@pytest.mark.parametrize("mode", ["ofdma", "tdma"])
def test_save_and_continue_with_a_shared_uplink_equals_the_uninterrupted_run(mode, tmp_path):
    """A shared-uplink run saved after frame 2 and continued in fresh objects has the events of
    the uninterrupted run (the uplink holds no state across slots)."""
    data = base_scenario(
        run={"frames": 4, "slots_per_frame": 5, "deadline_s": 0.8},
        network={"num_devices": 9, "cell_radius_m": 300.0},
        mobility={"model": "random_waypoint", "speed_mps": [40.0, 80.0], "pause_s": 0.5},
        scheme={"name": "two_timescale", "V": 10.0},
        uplink={"mode": mode},
    )
    whole, _ = run_in_memory(data)
    assert saved_and_continued(data, 2, tmp_path / "checkpoint.npz").equals(whole)


def test_auto_picks_the_event_kernel_and_the_manifest_states_the_assumption(tmp_path):
    """kernel = auto runs a shared uplink on the event kernel; the manifest records the uplink
    and that it is not what Proposition 1 assumes."""
    import wflsim

    data = _shared("ofdma", uplink={"planned_concurrent_uploads": 3})
    assert kernel_of(validate_scenario(data)) == "event"
    wflsim.run(data, out=tmp_path / "r")
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["kernel"] == "event"
    up = manifest["uplink"]
    assert up["mode"] == "ofdma" and up["planned_concurrent_uploads"] == 3
    assert up["noise_psd_dbm_hz"] == pytest.approx(-174.0)
    assert up["controller_assumption"]["matches"] is False
    assert len(up["controller_assumption"]["differences"]) == 2


def test_the_default_uplink_matches_the_controller_assumption():
    """The dedicated default states that it is Proposition 1's model."""
    from wflsim.app.run import uplink_of

    prep = prepare_scenario(validate_scenario(base_scenario()))
    described = describe_uplink(uplink_of(prep.scenario), prep.system)
    assert described["mode"] == "dedicated"
    assert described["controller_assumption"]["matches"] is True


def _refused(sets: list[str], field: str) -> None:
    """``wflsim validate`` of a small scenario with ``sets`` exits 2 with one line naming ``field``."""
    from conftest import REPO

    args = ["validate", str(REPO / "scenarios" / "paper" / "mnist_iid.toml")]
    for s in ["learning.enabled=false", "learning.num_params=440812", *sets]:
        args += ["--set", s]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    text = err.getvalue().strip()
    assert code == 2 and len(text.splitlines()) == 1 and f"error: {field}" in text, text


@pytest.mark.parametrize(
    ("sets", "field"),
    [
        (['uplink.mode="ofdma"', 'run.kernel="closed_form"'], "run.kernel"),
        (['uplink.mode="tdma"', 'trace.late_upload_energy="full"'], "trace.late_upload_energy"),
        (['uplink.mode="fdma"'], "uplink.mode"),
        (['uplink.order="lifo"'], "uplink.order"),
        (["uplink.planned_concurrent_uploads=0"], "uplink.planned_concurrent_uploads"),
        (["uplink.planned_concurrent_uploads=2.0"], "uplink.planned_concurrent_uploads"),
        (["uplink.noise_psd_dbm_hz=10.0"], "uplink.noise_psd_dbm_hz"),
        (["uplink.bandwidth_hz=1e6"], "uplink.bandwidth_hz"),
    ],
)
def test_bad_uplink_settings_are_refused_naming_the_field(sets, field):
    """Bad [uplink] values and combinations exit 2 with one line naming the field."""
    _refused(sets, field)


@pytest.mark.parametrize("mode", ["ofdma", "tdma"])
@pytest.mark.parametrize("closes_at", ["deadline", "last_upload"])
def test_an_upload_at_zero_power_transmits_until_the_deadline_and_fails(mode, closes_at):
    """A device at 0 W takes no share or turn: it ends at the deadline, not arrived; the others
    are served as if it were absent."""
    compute, bits, h = [0.1, 0.1, 0.2], 2e6, 1e-11
    result, end = _one_slot(mode, compute, bits, [0.5, 0.0, 0.5], h, 1.0, closes_at)
    alone, _ = _one_slot(mode, [0.1, 0.2], bits, 0.5, h, 1.0, closes_at)
    assert not result.arrived[1] and result.transmitted_s[1] == pytest.approx(0.9)
    assert _times(result, U_END)[1] == pytest.approx(1.0)
    assert result.arrived[[0, 2]].all()
    np.testing.assert_allclose(result.transmitted_s[[0, 2]], alone.transmitted_s, rtol=1e-12)


def test_edf_orders_a_synchronous_slot_as_fcfs():
    """Every upload of a slot has the slot's deadline: order = "edf" gives the fcfs trace."""
    fcfs = run_in_memory(_shared("tdma", scheme={"name": "ideal"}))[0]
    edf = run_in_memory(_shared("tdma", scheme={"name": "ideal"}, uplink={"order": "edf"}))[0]
    assert fcfs.equals(edf)


@pytest.mark.parametrize("mode", ["ofdma", "tdma"])
def test_device_slot_rows_hold_the_events_outcome(mode):
    """trace.level = "device_slots" records the outcome of the events level, device-slot for
    device-slot."""
    ev, _ = run_in_memory(_shared(mode))
    ds, _ = run_in_memory(_shared(mode, trace={"level": "device_slots"}))
    energy = events(ev, "energy").set_index(["slot", "device"]).sort_index()
    rows = events(ds, "device_slot").set_index(["slot", "device"]).sort_index()
    for col in ("success", "upload_s", "energy_j", "queue_j"):
        np.testing.assert_array_equal(rows[col].to_numpy(), energy[col].to_numpy())


@pytest.mark.parametrize("mode", ["ofdma", "tdma"])
def test_the_clock_stops_at_the_last_slots_end(mode):
    """A completion cut at the last deadline does not move the run's clock past the slot's end."""
    data = _shared(mode)
    prep = prepare_scenario(validate_scenario(data))
    engine = build_engine(prep, make_learner(prep))
    stats = engine.run()
    assert engine.now_s == stats.simulated_time_s == pytest.approx(8 * 0.8)


def test_the_schema_names_every_registered_uplink_mode():
    """[uplink] mode accepts exactly the modes the registry holds, and each module's mode says
    its own name."""
    import typing

    from wflsim.sim.config.schema import UplinkConfig
    from wflsim.sim.radio.modes import MODES

    annotation = UplinkConfig.model_fields["mode"].annotation
    assert set(typing.get_args(annotation)) == set(MODES)
    assert all(name == mode.name for name, mode in MODES.items())


def test_an_unknown_uplink_mode_is_named_with_the_known_ones():
    """The registry refuses a mode it does not hold, naming the ones it does."""
    from wflsim.sim.radio.modes import uplink_mode

    with pytest.raises(ValueError, match="unknown uplink mode 'lora'.*dedicated, ofdma"):
        uplink_mode("lora")
