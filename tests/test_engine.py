"""The SimPy engine, checked through invariants of its trace and against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import base_scenario, events, run_in_memory
from wflsim.sim.learner import NullLearner
from wflsim.sim.slot import DEADLINE_REL_TOL
from wflsim.sim.world import physics


class RecordingLearner(NullLearner):
    """A learner that trains nothing and records what the engine asks of it."""

    def __init__(self, num_params: int) -> None:
        super().__init__(num_params)
        self.computed: dict[int, np.ndarray] = {}
        self.applied: dict[int, np.ndarray] = {}

    def compute(self, slot, device_ids):
        self.computed[slot] = np.array(device_ids)

    def apply(self, slot, success_ids):
        self.applied[slot] = np.array(success_ids)


def _outage_scenario(frames: int = 100) -> dict:
    return base_scenario(
        run={"frames": frames, "slots_per_frame": 20, "deadline_s": 0.8},
        network={"num_devices": 30, "cell_radius_m": 1000.0},
        devices={"batch_size": 512},
        learning={"enabled": False, "num_params": 300_000},
        scheme={"name": "fixed_power"},
    )


def test_fixed_power_outage_frequency_matches_closed_form():
    """Per device, the outage frequency of fixed_power is 1 - exp(-h_min/H) within 4.5 binomial standard errors."""
    table, _ = run_in_memory(_outage_scenario())
    pos = events(table, "position").groupby("device").first()
    dec = events(table, "decision")
    n0 = 10 ** ((-104 - 30) / 10)
    s_bits, w, slack = 32 * 300_000, 10e6, 0.8 - 2e6 * 512 / 2e9
    h_min = n0 * (2 ** (s_bits / (w * slack)) - 1) / 1.0  # P_bar = 1 W
    fail = (~events(table, "energy")["success"].astype(bool)).groupby(dec["device"]).mean()
    n_slots = dec.groupby("device").size()
    for d in range(30):
        q = 1 - math.exp(-h_min / pos.loc[d, "large_scale_gain"])
        se = math.sqrt(max(q * (1 - q), 1e-4) / n_slots[d])
        assert abs(fail[d] - q) < 4.5 * se, (d, fail[d], q)


def test_energy_is_compute_plus_upload():
    """On every energy row, energy_j = energy_compute_j + energy_upload_j, and upload energy = p * time transmitted."""
    table, _ = run_in_memory(_outage_scenario(frames=3))
    e = events(table, "energy")
    np.testing.assert_allclose(
        e["energy_j"], e["energy_compute_j"] + e["energy_upload_j"], rtol=1e-12
    )
    np.testing.assert_allclose(e["energy_upload_j"], e["tx_power_w"] * e["upload_s"], rtol=1e-12)


def test_compute_energy_is_the_papers_formula():
    """Participating devices spend (alpha/2) c B f^2 on computing (gamma = 0)."""
    table, _ = run_in_memory(_outage_scenario(frames=1))
    e = events(table, "energy")
    assert e["participating"].all()
    np.testing.assert_allclose(
        e["energy_compute_j"], 0.5 * 2e-28 * 2e6 * 512 * (2e9) ** 2, rtol=1e-12
    )


def test_no_late_upload_is_aggregated():
    """The learner aggregates exactly the uploads whose compute + full upload time fits the deadline."""
    data = _outage_scenario(frames=5)
    learner = RecordingLearner(300_000)
    table, _ = run_in_memory(data, learner=learner)
    dec = events(table, "decision")
    assert dec["participating"].all()
    for slot, rows in dec.groupby("slot"):
        late = rows["compute_s"] + rows["upload_s"] > 0.8 * (1 + DEADLINE_REL_TOL)
        expected = np.sort(rows.loc[~late, "device"].to_numpy())
        np.testing.assert_array_equal(np.sort(learner.applied[slot]), expected)
    assert sum(len(v) for v in learner.applied.values()) < len(dec)  # some outages happened


def test_engine_has_one_deadline():
    """An engine built from parts takes tau_0 from SystemConstants alone: its config has no second copy."""
    import dataclasses

    from wflsim.sim.engine import EngineConfig

    assert "deadline_s" not in {f.name for f in dataclasses.fields(EngineConfig)}
    with pytest.raises(TypeError):
        EngineConfig(frames=1, slots_per_frame=1, deadline_s=0.8)  # type: ignore[call-arg]


def test_engine_built_from_parts_closes_slots_at_the_systems_deadline():
    """With a system deadline (0.6 s) unlike the scenario's (0.8 s), the server's timeout, the logged deadline and the success test all use 0.6 s."""
    import dataclasses

    import wflsim
    from wflsim.app.run import engine_config
    from wflsim.sim.engine import Engine
    from wflsim.sim.registry import build_scheme

    prep = wflsim.prepare(_outage_scenario(frames=2))
    system = dataclasses.replace(prep.system, deadline_s=0.6)
    sc = prep.scenario
    learner = RecordingLearner(300_000)
    scheme = build_scheme(sc.scheme.name, sc.scheme.params, system)
    engine = Engine(engine_config(sc), system, prep.mobility, prep.channel, scheme, learner)
    engine.run()
    df = engine.table().to_pandas()
    starts = df[df.event == "slot_start"].set_index("slot")["time_s"]
    deadline = df[df.event == "deadline"].set_index("slot")["time_s"]
    np.testing.assert_allclose(deadline - starts.loc[deadline.index], 0.6, rtol=1e-12)
    ue = df[df.event == "upload_end"]
    ends = ue["time_s"].to_numpy() - starts.loc[ue["slot"]].to_numpy()
    assert (ends <= 0.6 * (1 + DEADLINE_REL_TOL) + 1e-12).all()
    ok = ue[ue["success"].astype(bool)]
    applied = sum(len(v) for v in learner.applied.values())
    assert applied == len(ok) and len(ue) > len(ok)  # the 0.6 s deadline caused outages


def test_late_uploads_are_cut_at_the_deadline():
    """Every upload_end lies at or before its slot's deadline; late ones transmit for tau_0 - tau_cmp."""
    table, _ = run_in_memory(_outage_scenario(frames=3))
    df = table.to_pandas()
    starts = df[df.event == "slot_start"].set_index("slot")["time_s"]
    ue = df[df.event == "upload_end"]
    assert (ue["time_s"].to_numpy() <= starts.loc[ue["slot"]].to_numpy() + 0.8 + 1e-9).all()
    late = ue[~ue["success"].astype(bool)]
    assert len(late) > 0
    np.testing.assert_allclose(late["upload_s"], 0.8 - 0.512, rtol=1e-9)


def test_full_late_energy_charges_the_whole_payload():
    """With trace.late_upload_energy = 'full', a late upload costs p * tau_com of the whole payload (eq. 11)."""
    data = _outage_scenario(frames=2)
    data["trace"] = {"late_upload_energy": "full"}
    table, _ = run_in_memory(data)
    dec, e = events(table, "decision"), events(table, "energy")
    late = ~e["success"].astype(bool)
    np.testing.assert_allclose(
        e.loc[late, "energy_upload_j"],
        dec.loc[late, "tx_power_w"] * dec.loc[late, "upload_s"],
        rtol=1e-12,
    )


def test_queue_follows_the_recursion():
    """Q_n^{t+1} = max(Q_n^t + E_n^t - E_bar_n, 0), recomputed from the trace's energy rows."""
    table, _ = run_in_memory(_outage_scenario(frames=4))
    budget = events(table, "device_config").set_index("device")["energy_budget_j"]
    e = events(table, "energy")
    for d, rows in e.groupby("device"):
        q = 0.0
        for energy, logged in zip(rows["energy_j"], rows["queue_j"], strict=True):
            q = max(q + energy - budget[d], 0.0)
            assert logged == pytest.approx(q, rel=1e-12, abs=1e-15)


def test_ideal_waits_for_the_last_upload():
    """Under 'ideal' every upload succeeds and the slot lasts until the last one arrives (at least tau_0)."""
    data = _outage_scenario(frames=2)
    data["scheme"] = {"name": "ideal"}
    table, _ = run_in_memory(data)
    dec, agg = events(table, "decision"), events(table, "aggregate")
    assert events(table, "energy")["success"].all()
    last = (dec["compute_s"] + dec["upload_s"]).groupby(dec["slot"]).max()
    np.testing.assert_allclose(
        agg.set_index("slot")["slot_duration_s"], np.maximum(last, 0.8), rtol=1e-9
    )
    assert len(events(table, "deadline")) == 0


def test_ideal_transmits_at_min_power_capped_by_peak():
    """Under 'ideal' each device transmits at min(p_min, P_bar)."""
    data = _outage_scenario(frames=1)
    data["scheme"] = {"name": "ideal"}
    dec = events(run_in_memory(data)[0], "decision")
    np.testing.assert_allclose(
        dec["tx_power_w"], np.minimum(dec["min_tx_power_w"], 1.0), rtol=1e-12
    )


def test_event_times_never_decrease():
    """Rows are written in simulated-time order."""
    table, _ = run_in_memory(_outage_scenario(frames=3))
    t = table.column("time_s").to_numpy()
    assert (np.diff(t) >= -1e-9).all()


def test_same_seed_gives_identical_trace():
    """Two runs of the same scenario and seed produce equal tables."""
    a, _ = run_in_memory(_outage_scenario(frames=2))
    b, _ = run_in_memory(_outage_scenario(frames=2))
    assert a.equals(b)


def test_different_seed_gives_different_trace():
    """Another seed draws other positions and channels."""
    a, _ = run_in_memory(_outage_scenario(frames=2))
    data = _outage_scenario(frames=2)
    data["seed"] = 2
    b, _ = run_in_memory(data)
    assert not a.equals(b)


def test_adding_a_device_leaves_the_others_draws_unchanged():
    """Per-device streams: devices 0..4 see the same positions and channels with 5 or 6 devices."""
    small = base_scenario(network={"num_devices": 5})
    big = base_scenario(network={"num_devices": 6})
    ds, db = events(run_in_memory(small)[0], "decision"), events(run_in_memory(big)[0], "decision")
    db = db[db["device"] < 5].reset_index(drop=True)
    np.testing.assert_array_equal(ds["channel_gain"], db["channel_gain"])
    np.testing.assert_array_equal(ds["distance_m"], db["distance_m"])


def test_schemes_see_the_same_channels_for_the_same_seed():
    """Common random numbers: positions and fading draws do not depend on the scheme."""
    a = events(run_in_memory(base_scenario(scheme={"name": "ideal"}))[0], "decision")
    b = events(run_in_memory(base_scenario(scheme={"name": "fixed_power"}))[0], "decision")
    np.testing.assert_array_equal(a["channel_gain"], b["channel_gain"])


def test_random_waypoint_moves_devices_between_frames():
    """With random-waypoint mobility, distances change from one frame to the next."""
    data = base_scenario(
        mobility={"model": "random_waypoint", "speed_mps": [5.0, 10.0]},
        run={"frames": 3, "slots_per_frame": 5, "deadline_s": 0.8},
    )
    pos = events(run_in_memory(data)[0], "position")
    d0 = pos[pos.frame == 0]["distance_m"].to_numpy()
    d2 = pos[pos.frame == 2]["distance_m"].to_numpy()
    assert not np.allclose(d0, d2)


def test_large_scale_gain_follows_the_path_loss_model():
    """Logged H equals 10^(-PL/10) of the logged distance (km in the formula)."""
    pos = events(run_in_memory(base_scenario())[0], "position")
    expect = 10 ** (-(128.1 + 37.6 * np.log10(np.maximum(pos["distance_m"], 10.0) / 1000)) / 10)
    np.testing.assert_allclose(pos["large_scale_gain"], expect, rtol=1e-12)


def test_process_events_come_in_order_per_device():
    """Each participating device logs compute_start <= compute_end <= upload_start <= upload_end in a slot."""
    df = run_in_memory(_outage_scenario(frames=1))[0].to_pandas()
    proc = df[df.event.isin(["compute_start", "compute_end", "upload_start", "upload_end"])]
    for (_, _), rows in proc.groupby(["slot", "device"]):
        assert list(rows["event"]) == ["compute_start", "compute_end", "upload_start", "upload_end"]
        assert (np.diff(rows["time_s"].to_numpy()) >= 0).all()


def test_zero_payload_never_misses_the_deadline():
    """physics sanity inside the engine: a tiny payload always fits, so fixed_power has no outage."""
    data = base_scenario(learning={"enabled": False, "num_params": 1})
    e = events(run_in_memory(data)[0], "energy")
    assert e["success"].all()
    assert physics.payload_bits(1, 0.0) == 32


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scheme=st.sampled_from(["ideal", "fixed_power", "two_timescale", "only_pc", "only_pf"]),
    num_devices=st.integers(1, 8),
    deadline_s=st.floats(0.3, 2.0),
    num_params=st.integers(1, 2_000_000),
    radius_m=st.floats(50.0, 2000.0),
    seed=st.integers(0, 2**16),
)
def test_trace_invariants_hold_for_random_scenarios(
    scheme, num_devices, deadline_s, num_params, radius_m, seed
):
    """For any scheme and setting: E = E_cmp + E_com, Q follows its recursion, no late upload is aggregated."""
    data = base_scenario(
        seed=seed,
        run={"frames": 3, "slots_per_frame": 3, "deadline_s": deadline_s},
        network={"num_devices": num_devices, "cell_radius_m": radius_m},
        devices={"batch_size": 128},
        learning={"enabled": False, "num_params": num_params},
        scheme={"name": scheme},
    )
    learner = RecordingLearner(num_params)
    table, _ = run_in_memory(data, learner=learner)
    e, dec = events(table, "energy"), events(table, "decision")
    budget = events(table, "device_config").set_index("device")["energy_budget_j"]
    np.testing.assert_allclose(
        e["energy_j"], e["energy_compute_j"] + e["energy_upload_j"], rtol=1e-12
    )
    q = np.zeros(num_devices)
    for _, rows in e.groupby("slot"):
        q = np.maximum(q + rows["energy_j"].to_numpy() - budget.to_numpy(), 0.0)
        np.testing.assert_allclose(rows["queue_j"], q, rtol=1e-12, atol=1e-15)
    wait_all = scheme in ("ideal", "only_pf")
    for slot, rows in dec.groupby("slot"):
        arrived = rows["participating"].astype(bool)
        if not wait_all:
            arrived &= rows["compute_s"] + rows["upload_s"] <= deadline_s * (1 + DEADLINE_REL_TOL)
        np.testing.assert_array_equal(
            np.sort(learner.applied[slot]), np.sort(rows.loc[arrived, "device"].to_numpy())
        )
    assert (e.loc[~e["participating"].astype(bool), "energy_j"] == 0).all()


def _moving(scheme: str, clock: str) -> dict:
    return base_scenario(
        run={"frames": 3, "slots_per_frame": 5, "deadline_s": 0.8},
        network={"num_devices": 8, "cell_radius_m": 1000.0},
        mobility={"model": "random_waypoint", "speed_mps": [5.0, 10.0], "clock": clock},
        devices={"batch_size": 512},
        learning={"enabled": False, "num_params": 440_812},
        scheme={"name": scheme},
    )


def test_nominal_clock_gives_every_scheme_the_same_positions():
    """With mobility.clock = nominal, a slot-stretching scheme (ideal) sees the same positions as only_pc."""
    a = events(run_in_memory(_moving("ideal", "nominal"))[0], "position")
    b = events(run_in_memory(_moving("only_pc", "nominal"))[0], "position")
    np.testing.assert_array_equal(a["distance_m"], b["distance_m"])


def test_simulated_clock_moves_devices_during_long_slots():
    """With mobility.clock = simulated, positions follow each scheme's own (different) frame start times."""
    a = events(run_in_memory(_moving("ideal", "simulated"))[0], "position")
    b = events(run_in_memory(_moving("only_pc", "simulated"))[0], "position")
    assert not np.allclose(a.loc[a.frame == 2, "distance_m"], b.loc[b.frame == 2, "distance_m"])


def test_hooks_are_called_at_every_frame_start_slot_end_and_frame_end():
    """Hooks see frame starts, slot ends (with the slot's outcome) and frame ends in run order."""
    import wflsim

    calls = []
    hooks = wflsim.Hooks(
        frame_start=lambda e, k: calls.append(("start", k, e.next_frame)),
        slot_end=lambda e, t, out: calls.append(("slot", t, int(out.participating.sum()))),
        frame_end=lambda e, k: calls.append(("end", k, e.next_frame)),
    )
    data = base_scenario(run={"frames": 2, "slots_per_frame": 3})
    res = wflsim.run(data, hooks=hooks)
    ev = res.events
    parts = ev[ev["event"] == "aggregate"]["n_participants"].tolist()
    want = [("start", 0, 0), *[("slot", t, parts[t]) for t in range(3)], ("end", 0, 1),
            ("start", 1, 1), *[("slot", t, parts[t]) for t in range(3, 6)], ("end", 1, 2)]  # fmt: skip
    assert calls == want


def test_hooks_leave_the_trace_unchanged():
    """A run with hooks that only observe has the events of the run without them."""
    import pandas as pd

    import wflsim

    data = base_scenario(scheme={"name": "two_timescale"})
    seen = []
    hooks = wflsim.Hooks(slot_end=lambda e, t, out: seen.append(out.energy_j.sum()))
    pd.testing.assert_frame_equal(wflsim.run(data, hooks=hooks).events, wflsim.run(data).events)
    assert len(seen) == 10


def test_a_sweep_in_worker_processes_refuses_hooks(tmp_path):
    """Hooks run in the sweep's own process: a sweep with workers > 1 and hooks is refused,
    naming 'hooks', before anything is written."""
    import wflsim
    from wflsim.sim.errors import ScenarioError

    path = tmp_path / "s.toml"
    path.write_text(
        'name = "h"\n[run]\nframes = 1\nslots_per_frame = 2\n[network]\nnum_devices = 3\n'
        "[learning]\nenabled = false\nnum_params = 1000\n"
    )
    hooks = wflsim.Hooks(frame_start=lambda e, k: None)
    with pytest.raises(ScenarioError, match="hooks"):
        wflsim.sweep(path, ["seed=0,1"], out=tmp_path / "sw", workers=2, hooks=hooks)
    assert not (tmp_path / "sw").exists()
