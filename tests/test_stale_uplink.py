"""A shared uplink (OFDMA, TDMA) under stale updates (semi_sync, async): uploads keep their share
of the band across slot boundaries; checked against closed forms, the synchronous run, and a run
saved and continued."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import simpy
import torch
from test_asynchronous import _churn, learner_and_table, models_after_each_slot, with_server

from conftest import (
    LOCKSTEP,
    base_scenario,
    events,
    failing_at_frame,
    run_in_memory,
    saved_and_continued,
)
from golden_runs import column_hashes
from wflsim.sim.clock import Clock
from wflsim.sim.kernels import U_END, U_START
from wflsim.sim.radio.modes import describe_uplink
from wflsim.sim.radio.ofdma import OfdmaUplink
from wflsim.sim.radio.shared import SharedUplink
from wflsim.sim.radio.sharing import ProcessorSharing
from wflsim.sim.radio.tdma import TdmaUplink

SERVERS = ("semi_sync", "async")
MODES = ("ofdma", "tdma")
K = 4  #: equal devices in the closed-form scenarios
TAU0 = 0.1  #: their slot, s: shorter than one cycle (compute 0.016 s, upload about 0.1 s)


def _server(mode: str) -> dict[str, Any]:
    return {"mode": mode, "buffer_size": 2} if mode == "async" else {"mode": mode}


def _equal_devices(uplink: str, server: str, **sections: Any) -> dict[str, Any]:
    """K devices at 200 m, no fading, equal hardware, everyone at peak power (fixed_power): every
    cycle's upload has the same payload S, power p and gain h; network only."""
    pos = [
        [200.0 * math.cos(2 * math.pi * i / K), 200.0 * math.sin(2 * math.pi * i / K)]
        for i in range(K)
    ]
    data = base_scenario(
        run={"frames": 1, "slots_per_frame": 4, "deadline_s": TAU0},
        network={"num_devices": K, "cell_radius_m": 500.0},
        channel={"fading": "none"},
        mobility={"model": "static", "placement": "explicit", "positions_m": pos},
        devices={"batch_size": 16, "cpu_hz": 2e9, "cycles_per_sample": 2e6},
        uplink={"mode": uplink},
        server=_server(server),
    )
    data.update(sections)
    return data


def _constants(data: dict[str, Any]) -> tuple[float, float]:
    """(W, N0) of a scenario: the band, Hz, and the noise power over it, W."""
    import wflsim

    system = wflsim.prepare(data).system
    return float(system.bandwidth_hz), float(system.noise_w)


def _first_cycle(table: Any) -> tuple[Any, dict[int, float], dict[int, float]]:
    """(the first decision row of device 0, device -> its first upload_start, -> first upload_end)."""
    dec = events(table, "decision")
    starts = events(table, "upload_start").groupby("device")["time_s"].first()
    ends = events(table, "upload_end").groupby("device")["time_s"].first()
    return dec.iloc[0], starts.to_dict(), ends.to_dict()


# ---------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("server", SERVERS)
def test_k_equal_ofdma_uploads_started_together_end_together_across_a_slot_end(server):
    """K uploads of S bits, equal p h, joining at c: all end at c + S / r_K, r_K = (W/K) log2(1 + K p h / N0), past tau_0."""
    data = _equal_devices("ofdma", server)
    w_hz, n0_w = _constants(data)
    table, _ = run_in_memory(data)
    d, starts, ends = _first_cycle(table)
    c, s, p, h = d["compute_s"], d["payload_bits"], d["tx_power_w"], d["channel_gain"]
    r_k = (w_hz / K) * math.log2(1.0 + K * p * h / n0_w)
    assert all(starts[n] == c for n in range(K))
    np.testing.assert_allclose([ends[n] for n in range(K)], c + s / r_k, rtol=1e-12)
    assert len(set(ends.values())) == 1 and ends[0] > TAU0  # together, after the slot's end
    # every later cycle starts together too (the next slot start, or at once in async)
    up = events(table, "upload_end")
    np.testing.assert_allclose(up["upload_s"], s / r_k, rtol=1e-9)


@pytest.mark.parametrize("server", SERVERS)
def test_k_equal_tdma_uploads_end_at_multiples_of_the_whole_band_time(server):
    """K uploads ready together at c: device j transmits from c + j u_1 to c + (j + 1) u_1, u_1 = S / (W log2(1 + p h / N0))."""
    data = _equal_devices("tdma", server)
    w_hz, n0_w = _constants(data)
    table, _ = run_in_memory(data)
    d, starts, ends = _first_cycle(table)
    c, s, p, h = d["compute_s"], d["payload_bits"], d["tx_power_w"], d["channel_gain"]
    u_1 = s / (w_hz * math.log2(1.0 + p * h / n0_w))
    np.testing.assert_allclose([starts[n] for n in range(K)], c + np.arange(K) * u_1, rtol=1e-12)
    np.testing.assert_allclose(
        [ends[n] for n in range(K)], c + np.arange(1, K + 1) * u_1, rtol=1e-12
    )
    assert ends[K - 1] > TAU0  # the queue crosses a slot end


def _trace_file(tmp_path: Path, offline_at_s: float) -> str:
    """An availability file: device 0 online until ``offline_at_s``, the others always."""
    rows = ["device,start_s,end_s", f"0,0.0,{offline_at_s!r}"]
    rows += [f"{n},0.0,inf" for n in range(1, K)]
    path = tmp_path / "online.csv"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


@pytest.mark.parametrize("server", SERVERS)
def test_a_drop_mid_upload_speeds_the_other_ofdma_uploads_up(server, tmp_path):
    """Device 0 leaves at b mid-upload: the others, S - r_K (b - c) bits left, end at b + (S - r_K (b - c)) / r_(K-1); device 0 is charged p (b - c)."""
    b = 0.07
    data = _equal_devices(
        "ofdma", server, availability={"model": "trace", "file": _trace_file(tmp_path, b)}
    )
    w_hz, n0_w = _constants(data)
    table, _ = run_in_memory(data)
    d, starts, ends = _first_cycle(table)
    c, s, p, h = d["compute_s"], d["payload_bits"], d["tx_power_w"], d["channel_gain"]

    def rate(k: int) -> float:
        return (w_hz / k) * math.log2(1.0 + k * p * h / n0_w)

    left = s - rate(K) * (b - c)
    assert 0 < left < s
    np.testing.assert_allclose([ends[n] for n in range(1, K)], b + left / rate(K - 1), rtol=1e-12)
    drop = events(table, "dropped")
    assert drop["device"].tolist() == [0] and drop["time_s"].tolist() == [b]
    assert np.isclose(drop["upload_s"].iloc[0], b - c, rtol=1e-12)
    energy = events(table, "energy")
    row = energy[(energy["device"] == 0) & energy["dropped"].astype(bool)]
    assert np.isclose(row["energy_upload_j"].iloc[0], p * (b - c), rtol=1e-12)


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("mode", MODES)
def test_upload_energy_is_power_times_the_time_transmitted(mode, server):
    """Churn, jitter, fading: each upload_end's energy is p x upload_s, upload_s its time on the band; each slot's energy rows sum its cycles'."""
    data = with_server(_churn(), **_server(server))
    data["uplink"] = {"mode": mode}
    table, _ = run_in_memory(data)
    ends = events(table, "upload_end")
    assert np.array_equal(ends["energy_upload_j"], ends["tx_power_w"] * ends["upload_s"])
    rows = table.to_pandas()
    rows = rows[rows["event"].isin(["upload_start", "upload_end", "dropped"])]
    checked = 0
    for _, mine in rows.groupby("device"):  # a device's cycles are sequential
        began = math.nan
        cols = zip(mine["event"], mine["time_s"], mine["upload_s"], strict=True)
        for event, time_s, upload_s in cols:
            if event == "upload_start":
                began = time_s
            elif event == "upload_end":
                assert upload_s == time_s - began
                checked += 1
    assert checked == len(ends)
    done = ends.groupby(["device", "slot"])["energy_upload_j"].sum()
    drop = events(table, "dropped")
    dropped = (drop["tx_power_w"] * drop["upload_s"]).groupby([drop["device"], drop["slot"]]).sum()
    per_slot = done.add(dropped, fill_value=0.0)
    energy = events(table, "energy").set_index(["device", "slot"])["energy_upload_j"]
    np.testing.assert_allclose(
        energy.loc[per_slot.index].to_numpy(), per_slot.to_numpy(), rtol=1e-12
    )
    assert np.isclose(energy.sum(), per_slot.sum(), rtol=1e-12)


@pytest.mark.parametrize("server", SERVERS)
def test_tdma_waiting_costs_no_energy(server):
    """Under TDMA an upload waits after its compute ends; it is charged only from its upload_start."""
    data = _equal_devices("tdma", server)
    table, _ = run_in_memory(data)
    computed = events(table, "compute_end").groupby("device")["time_s"].first()
    ends = events(table, "upload_end").groupby("device").first()
    waited = ends["time_s"] - computed - ends["upload_s"]
    assert (waited > 0).sum() == K - 1  # all but device 0 waited
    assert np.array_equal(ends["energy_upload_j"], ends["tx_power_w"] * ends["upload_s"])


@pytest.mark.parametrize("server", SERVERS)
def test_tdma_uploads_transmit_on_the_gain_of_their_cycles_start_slot(server):
    """Rayleigh fading: each upload's time on the band is its decision's S / (W log2(1 + p h / N0)), h of the slot the cycle started in."""
    data = with_server(_churn(), **_server(server))
    del data["availability"]
    data["uplink"] = {"mode": "tdma"}
    table, _ = run_in_memory(data)
    dec = events(table, "decision")
    dec = dec[dec["participating"].astype(bool)]
    ends = events(table, "upload_end")
    crossed = 0
    for n, mine in ends.groupby("device"):
        planned = dec[dec["device"] == n].iloc[: len(mine)]
        np.testing.assert_allclose(mine["upload_s"], planned["upload_s"], rtol=1e-9)
        crossed += int((mine["slot"].to_numpy() > planned["slot"].to_numpy()).sum())
    assert crossed > 0  # some uploads end in a later slot than their cycle's start


# ---------------------------------------------------------------------------- the synchronous run


def _lockstep_ofdma() -> dict[str, Any]:
    """LOCKSTEP on one OFDMA band, planned for its 5 concurrent uploads: p_min lands every upload
    on the deadline (in exact arithmetic; rounding puts some a step either side)."""
    data = copy.deepcopy(LOCKSTEP)
    data["uplink"] = {"mode": "ofdma", "planned_concurrent_uploads": 5}
    return data


def test_arrivals_at_a_slot_end_on_a_shared_uplink_are_taken_at_it():
    """semi_sync, lockstep OFDMA: every upload ends exactly on its slot's end and is fresh."""
    _, table, _ = learner_and_table(with_server(_lockstep_ofdma(), mode="semi_sync"))
    ends = events(table, "upload_end")
    tau0 = LOCKSTEP["run"]["deadline_s"]
    assert np.array_equal(ends["time_s"].to_numpy(), (ends["slot"].to_numpy() + 1) * tau0)
    assert (ends["staleness"] == 0).all() and len(ends) == 5 * 12


@pytest.mark.parametrize("server", [{"mode": "semi_sync"}, {"mode": "async", "buffer_size": 5}])
def test_stale_updates_on_a_lockstep_ofdma_band_are_the_synchronous_ofdma_run(server):
    """Lockstep OFDMA, no late upload: semi_sync and async (buffer = N) give the synchronous model after every slot, its energies and queues."""
    hooks_a, sync_models = models_after_each_slot()
    hooks_b, stale_models = models_after_each_slot()
    _, sync, _ = learner_and_table(_lockstep_ofdma(), hooks_a)
    _, stale, stats = learner_and_table(with_server(_lockstep_ofdma(), **server), hooks_b)
    assert stats.updates_applied == 5 * 12
    assert len(sync_models) == len(stale_models) == 12
    assert all(torch.equal(a, b) for a, b in zip(sync_models, stale_models, strict=True))
    a, b = events(sync, "energy"), events(stale, "energy")
    for col in ("energy_j", "queue_j", "success"):
        assert np.array_equal(a[col].to_numpy(), b[col].to_numpy()), col


# ---------------------------------------------------------------------------- checkpoints


def _shared_churn(mode: str, server: str) -> dict[str, Any]:
    """Churn, jitter, Rayleigh fading, training, 12 devices on a shared band planned as W."""
    data = with_server(_churn(), **_server(server))
    data["uplink"] = {"mode": mode}
    return data


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("mode", MODES)
def test_saved_and_continued_with_uploads_in_flight_equals_the_uninterrupted_run(
    mode, server, tmp_path
):
    """Saved after frame 1 with uploads in the uplink (waiting and in flight), continued in fresh objects: the same events, bit for bit."""
    from wflsim.sim import state

    data = _shared_churn(mode, server)
    whole, _ = run_in_memory(data)
    resumed = saved_and_continued(data, 1, tmp_path / "state.npz")
    held = state.load(tmp_path / "state.npz")["engine"]["server"]["uplink"]
    assert len(held["device"]) > 0
    assert column_hashes(resumed) == column_hashes(whole)


@pytest.mark.parametrize("mode", MODES)
def test_a_run_continued_in_the_same_objects_equals_the_uninterrupted_run(mode):
    """engine.run(stop_frame=1) then engine.run(): the uplink's uploads go on the new clock."""
    from wflsim.app.run import build_engine, make_learner, prepare_scenario
    from wflsim.sim.config.loading import validate_scenario

    data = _shared_churn(mode, "async")
    whole, _ = run_in_memory(data)
    prep = prepare_scenario(validate_scenario(data))
    engine = build_engine(prep, make_learner(prep))
    engine.run(stop_frame=1)
    engine.run()
    assert column_hashes(engine.table()) == column_hashes(whole)


@pytest.mark.parametrize(("mode", "server"), [("ofdma", "async"), ("tdma", "semi_sync")])
def test_run_folder_failed_mid_run_resumes_to_the_uninterrupted_events(mode, server, tmp_path):
    """A run folder that failed at frame 2 (checkpoints after frames 0 and 1), resumed: the events and accuracy of the run in one go."""
    import wflsim

    data = _shared_churn(mode, server)
    whole = wflsim.run(data)
    with pytest.raises(RuntimeError, match="injected"):
        wflsim.run(data, out=tmp_path / "run", hooks=failing_at_frame(2))
    again = wflsim.resume(tmp_path / "run")
    assert again.status == "completed"
    a = whole.events.drop(columns=["loss", "accuracy"])
    b = again.events.drop(columns=["loss", "accuracy"])
    assert a.equals(b)
    assert np.allclose(whole.evaluations["accuracy"], again.evaluations["accuracy"], atol=1e-6)


def test_a_checkpoint_of_a_shared_uplink_does_not_load_into_a_dedicated_run():
    """The server's state names the uplink: a dedicated run refuses it."""
    from wflsim.app.run import build_engine, make_learner, prepare_scenario
    from wflsim.sim.config.loading import validate_scenario

    def engine(data):
        prep = prepare_scenario(validate_scenario(data))
        return build_engine(prep, make_learner(prep))

    shared = engine(_shared_churn("ofdma", "async"))
    shared.run(stop_frame=1)
    dedicated = engine(with_server(_churn(), **_server("async")))
    with pytest.raises(ValueError, match=r"\[uplink\]"):
        dedicated.load_state_dict(shared.state_dict())


# ---------------------------------------------------------------------------- the uplink alone

W_HZ, N0_W = 10e6, 4e-14


def _continuous(
    mode: str, env: simpy.Environment, ended: list, order: str = "fcfs"
) -> SharedUplink:
    link: SharedUplink = (
        OfdmaUplink(W_HZ, N0_W, U_START, U_END)
        if mode == "ofdma"
        else TdmaUplink(W_HZ, N0_W, U_START, U_END, order=order)  # type: ignore[arg-type]
    )
    link.open_run(
        env, num_devices=4, log=lambda _e: None, on_end=lambda d: ended.append((env.now, d))
    )
    return link


def _send(
    link: SharedUplink, device: int, bits: float, gain: float, target_s: float = math.inf
) -> None:
    p = 0.5
    full = bits / (W_HZ * math.log2(1.0 + p * gain / N0_W))
    link.upload(
        device,
        tx_power_w=p,
        channel_gain=gain,
        payload_bits=bits,
        upload_full_s=full,
        target_s=target_s,
    )


def _joins(clock: Clock, link: SharedUplink, joins: list[tuple[float, int, float, float]]) -> None:
    """Each upload ``(time, device, bits, gain)`` joins at its absolute time."""
    for at, d, bits, gain in joins:
        clock.timeout_at(at, lambda _e, d=d, bits=bits, gain=gain: _send(link, d, bits, gain))


@pytest.mark.parametrize("mode", MODES)
def test_a_continuous_uplink_saved_mid_flight_and_loaded_ends_its_uploads_at_the_same_times(mode):
    """Four uploads joining at different times; the state at t = 0.3 loaded into a fresh uplink on a fresh clock: the same ends, bit for bit."""
    joins = [(0.0, 0, 4e6, 1e-13), (0.1, 2, 2e6, 3e-14), (0.2, 1, 5e6, 2e-13), (0.5, 3, 1e6, 1e-13)]
    cut = 0.3
    ended: list = []
    clock = Clock()
    link = _continuous(mode, clock, ended)
    _joins(clock, link, joins)
    clock.run()
    whole = list(ended)

    ended_a: list = []
    first = Clock()
    link_a = _continuous(mode, first, ended_a)
    _joins(first, link_a, joins)
    first.run(until=cut)
    saved = link_a.state_dict()
    assert len(saved["device"]) == 3
    ended_b: list = []
    second = Clock(initial_time=cut)
    link_b = _continuous(mode, second, ended_b)
    link_b.load_state_dict(saved, second.timeout_at)
    _joins(second, link_b, [j for j in joins if j[0] >= cut])
    second.run()
    assert ended_a + ended_b == whole


def test_a_continuous_tdma_uplink_serves_edf_by_each_uploads_own_target():
    """EDF in a continuous uplink: the waiting upload with the earliest target goes next, ready later or not."""
    ended: list = []
    env = simpy.Environment()
    link = _continuous("tdma", env, ended, order="edf")
    _send(link, 0, 4e6, 1e-10, target_s=9.0)  # takes the band at once
    _send(link, 1, 1e6, 1e-10, target_s=5.0)
    env.timeout(0.01).callbacks.append(lambda _e: _send(link, 2, 1e6, 1e-10, target_s=1.0))
    env.run()
    assert [d for _, d in ended] == [0, 2, 1]


@pytest.mark.parametrize("mode", MODES)
def test_a_continuous_uplink_refuses_an_upload_that_can_never_finish(mode):
    """Zero power x gain: ValueError (the stale server starts no such cycle)."""
    link = _continuous(mode, simpy.Environment(), [])
    with pytest.raises(ValueError, match="never finish"):
        link.upload(0, tx_power_w=0.0, channel_gain=1e-10, payload_bits=1e6, upload_full_s=math.inf)


def test_settling_ends_exactly_the_jobs_due_by_the_limit():
    """ProcessorSharing.settle(u) ends now the jobs whose end at their rate is <= u, the others go on at the new rates."""
    env = simpy.Environment()
    ended: list = []
    ps = ProcessorSharing(env, lambda jobs: np.full(len(jobs), 1.0 / len(jobs)), ended.append)
    ps.add(0, 1.0)
    ps.add(1, 1.0 + 1e-12)
    ps.add(2, 3.0)
    env.run(until=2.99)  # jobs 0 and 1 projected to end at 3.0 and 3.0 + 3e-12
    ps.settle(3.0 + 1e-11)
    assert ended == [0, 1]
    env.run()
    assert ended == [0, 1, 2] and math.isclose(env.now, 2.99 + (3.0 - 2.99 / 3) / 1.0)


@pytest.mark.parametrize("server", ["sync", *SERVERS])
def test_the_manifest_states_what_the_scheme_plans_on_in_every_server_mode(server):
    """uplink.plans_on names the band W / k; under stale updates one more difference says the share changes as uploads of different slots overlap."""
    import wflsim
    from wflsim.app.run import uplink_of

    data = base_scenario(
        uplink={"mode": "ofdma", "planned_concurrent_uploads": 3}, server={"mode": server}
    )
    prep = wflsim.prepare(data)
    described = describe_uplink(uplink_of(prep.scenario), prep.system, server)
    assert "W / 3" in described["plans_on"] and "server mode" in described["plans_on"]
    differences = described["controller_assumption"]["differences"]
    assert sum("overlap" in d for d in differences) == (server != "sync")


def test_a_continuous_tdma_uplink_decides_a_free_band_after_the_instants_device_events():
    """Two uploads join a free band at one instant (device order 1, 3): EDF gives it to device 3, whose target is earlier."""
    from wflsim.sim.clock import LAST_RANK, Order

    clock = Clock()
    ended: list = []
    link = TdmaUplink(W_HZ, N0_W, U_START, U_END, order="edf")
    link.open_run(
        clock,
        num_devices=4,
        log=lambda _e: None,
        on_end=lambda d: ended.append(d),
        later=lambda f: clock.at(clock.now, Order.DEVICE, LAST_RANK, lambda _e: f()),
    )
    clock.at(0.5, Order.DEVICE, 1, lambda _e: _send(link, 1, 1e6, 1e-10, target_s=9.0))
    clock.at(0.5, Order.DEVICE, 3, lambda _e: _send(link, 3, 1e6, 1e-10, target_s=2.0))
    clock.run()
    assert ended == [3, 1]
