"""``[uplink] mode = "aircomp"`` wired into runs: the slot, the power rules, the learner's noisy
sum, the trace, the refusals (the physics alone: tests/test_aircomp.py)."""

from __future__ import annotations

import copy
import math
import tomllib

import numpy as np
import pytest
import torch
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from test_learner import rule, tiny_learner, with_freezing

import wflsim
from conftest import REPO, run_in_memory
from golden_runs import column_hashes
from wflsim.sim.errors import ScenarioError
from wflsim.sim.learner import OverTheAir
from wflsim.sim.radio.aircomp import expected_aligned, plan_aircomp
from wflsim.sim.radio.rates import aircomp_latency_s

QUICK = tomllib.loads((REPO / "scenarios" / "quickstart.toml").read_text())


def quick(frames: int = 2, **uplink: object) -> dict:
    """The quick start (digits MLP, ideal scheme) over an AirComp uplink."""
    data = copy.deepcopy(QUICK)
    data["run"]["frames"] = frames
    data["uplink"] = {"mode": "aircomp", **uplink}
    return data


def network(frames: int = 4, **uplink: object) -> dict:
    """The quick start, network only (D = 9,610), static devices, over an AirComp uplink."""
    data = quick(frames, **uplink)
    data["learning"] = {"enabled": False, "num_params": 9610}
    data["mobility"] = {"model": "static"}
    return data


def rows(table, event: str):
    """The rows of one event as a DataFrame."""
    df = table.to_pandas()
    return df[df.event == event]


def test_perfect_alignment_without_noise_is_the_digital_aggregate() -> None:
    """ratio 1 and no noise: the model after apply equals the digital FedSGD step bit for bit."""
    digital = tiny_learner([4, 6, 5])
    air = tiny_learner([4, 6, 5])
    for lr in (digital, air):
        lr.compute(0, np.arange(3))
    air.receive_over_the_air(OverTheAir(slot=0, ratio=np.ones(3), noise_std=0.0))
    digital.apply(0, np.arange(3))
    air.apply(0, np.arange(3))
    assert torch.equal(digital._w, air._w)
    assert air.last_aggregation_mse == 0.0 and digital.last_aggregation_mse is None


def test_misalignment_scales_each_update_around_its_mean() -> None:
    """ratio_n != 1 without noise: the aggregate is the weighted mean of mu_n + ratio_n (u_n -
    mu_n), computed here by hand from the uploads, and the measured MSE is its error."""
    learner = tiny_learner([4, 4], hidden=None, lr=1.0)
    learner.compute(0, np.arange(2))
    u = learner.gradients.clone()
    w0 = learner._w.clone()
    ratio = np.array([0.5, 1.5])
    learner.receive_over_the_air(OverTheAir(slot=0, ratio=ratio, noise_std=0.0))
    learner.apply(0, np.arange(2))
    mu = u.mean(1, keepdim=True)  # nothing frozen: every entry is sent
    shaped = u + (torch.tensor(ratio, dtype=u.dtype)[:, None] - 1) * (u - mu)
    want = shaped.mean(0)
    torch.testing.assert_close(w0 - learner._w, want, rtol=1e-6, atol=1e-7)
    exact = u.mean(0)
    assert learner.last_aggregation_mse == pytest.approx(float(((want - exact) ** 2).mean()))


def test_noise_enters_the_model_with_the_stated_variance() -> None:
    """Noise only: the measured MSE per entry over 200 slots is (sigma_bar noise_std)^2 within
    10 % (200 x 43 entries: the mean of chi-square draws has a relative std of about 1.4 %)."""
    ratios = []
    for slot in range(200):
        learner = tiny_learner([5, 5, 5], seed=slot % 7)
        learner.compute(slot, np.arange(3))
        u = learner.gradients
        sigma = u.std(dim=1, unbiased=False).max()  # nothing frozen: every entry is sent
        learner.receive_over_the_air(OverTheAir(slot=slot, ratio=np.ones(3), noise_std=0.01))
        learner.apply(slot, np.arange(3))
        ratios.append(learner.last_aggregation_mse / (float(sigma) * 0.01) ** 2)
    assert np.mean(ratios) == pytest.approx(1.0, rel=0.1)


def test_a_per_coordinate_mean_divides_each_entrys_noise_by_its_senders_weight() -> None:
    """aggregation = "per_coordinate" under freezing: the receiver divides an entry's sum, and its
    noise, by the weight share A_j of the devices that sent it, so the measured MSE over 200
    slots is (sigma_bar noise_std)^2 mean_j(1 / A_j^2) within 10 % (0 where nobody sent j)."""
    ratios = []
    for slot in range(200):
        learner = with_freezing(
            tiny_learner([3, 5, 2], seed=slot % 7, aggregation="per_coordinate"),
            np.array([0.5, 0.0, 0.8]),
        )
        learner.compute(slot, np.arange(3))
        u = learner.gradients.double()
        sent = ~rule(learner).masks()
        count = sent.sum(dim=1, keepdim=True)
        centred = torch.where(sent, u - u.sum(dim=1, keepdim=True) / count, 0.0)
        sigma = float(torch.sqrt((centred**2).sum(dim=1) / count.squeeze(1)).max())
        share = (torch.tensor([3.0, 5.0, 2.0], dtype=torch.float64) @ sent.double()) / 10.0
        gain_sq = torch.where(share > 0, 1.0 / share.clamp_min(1e-30) ** 2, 0.0)
        assert (share == 0.5).any()  # an entry only device 1 sent: its noise is doubled
        learner.receive_over_the_air(OverTheAir(slot=slot, ratio=np.ones(3), noise_std=0.01))
        learner.apply(slot, np.arange(3))
        want = (sigma * 0.01) ** 2 * float(gain_sq.mean())
        ratios.append(learner.last_aggregation_mse / want)
    assert np.mean(ratios) == pytest.approx(1.0, rel=0.1)


def _pruned_over_the_air(ratio: np.ndarray, noise_std: float):
    """A tiny learner under pruning (devices keep 30, 30 and 12 of 43 entries: 13 kept by
    nobody) after one over-the-air slot: (model before, after, uploads, kept masks, lr)."""
    from wflsim.sim.learner import UpdateRuleSpec
    from wflsim.sim.rng import Streams
    from wflsim.sim.updates import PruningInputs

    learner = tiny_learner([6, 5, 7], sampling_streams=Streams(7))
    learner.set_update_rule(UpdateRuleSpec("pruning"))
    d = learner.num_params
    learner.begin_frame(0, PruningInputs(kept=np.full(3, d, dtype=np.int64)))
    learner.compute(0, np.arange(3))
    learner.apply(0, np.arange(3))  # a global gradient for the importance ranks
    learner.begin_frame(1, PruningInputs(kept=np.array([30, 30, 12], dtype=np.int64)))
    learner.compute(1, np.arange(3))
    u, kept = learner.gradients.clone(), learner.rule.trained(np.arange(3)).clone()
    w0 = learner.global_params()
    learner.receive_over_the_air(OverTheAir(slot=1, ratio=ratio, noise_std=noise_std))
    learner.apply(1, np.arange(3))
    return w0, learner.global_params(), u, kept, learner.lr_at(1)


def test_a_pruned_device_is_misaligned_only_on_the_entries_it_kept() -> None:
    """pruning over the air without noise: each device's mean is over its kept entries and its
    misalignment ratio_n (u_n - mu_n) reaches only those; the step against one computed here."""
    ratio = np.array([1.0, 0.5, 1.5])
    w0, w1, u, kept, lr = _pruned_over_the_air(ratio, 0.0)
    mu = u.sum(dim=1, keepdim=True) / kept.sum(dim=1, keepdim=True)  # u is 0 where not kept
    shaped = u + (torch.tensor(ratio, dtype=u.dtype)[:, None] - 1) * torch.where(kept, u - mu, 0.0)
    bw = torch.tensor([6.0, 5.0, 7.0])
    assert (~kept.any(dim=0)).sum() == 13
    torch.testing.assert_close(w1, w0 - lr * (bw @ shaped) / bw.sum(), rtol=1e-6, atol=1e-7)


def test_an_entry_no_device_kept_hears_no_noise() -> None:
    """pruning over the air with the receiver's noise: the 13 entries no device kept stay where
    they were; the others move."""
    w0, w1, _, kept, _ = _pruned_over_the_air(np.ones(3), 0.01)
    nobody = ~kept.any(dim=0)
    assert nobody.sum() == 13 and torch.equal(w1[nobody], w0[nobody])
    assert (w1[~nobody] != w0[~nobody]).all()


def test_plan_mse_matches_the_received_sum_with_imperfect_csi() -> None:
    """The plan's closed-form MSE (misaligned by CSI error, plus noise) against the error of
    400,000 received entries of unit-variance updates: within 4 standard errors."""
    rng = np.random.default_rng(3)
    n = 6
    true = rng.exponential(1e-10, n)
    seen = true * rng.uniform(0.7, 1.3, n)
    plan = plan_aircomp(
        np.ones(n, bool), np.arange(1, n + 1), seen, true, 1.0, 1e-12, "optimal", 0.0, 1.0
    )
    x = rng.standard_normal((n, 400_000))
    eta = float(plan.eta[0])
    amp = np.sqrt(plan.tx_power_w * true / eta)
    got = amp @ x + rng.normal(0.0, math.sqrt(1e-12 / eta), x.shape[1])
    err = (got - plan.weights @ x) ** 2
    assert abs(err.mean() - plan.mse()[0]) < 4 * err.std() / math.sqrt(err.size)


def test_expected_aligned_devices_under_a_threshold() -> None:
    """Truncated inversion under Rayleigh fading: the mean number aligned per slot over 80
    slots against sum_n exp(-g_th / H_n), within 5 standard errors of the Bernoulli sum."""
    data = network(frames=4, threshold_gain_db=-112.0)
    table, _ = run_in_memory(data)
    air = rows(table, "aircomp")
    h = rows(table, "position").groupby("device")["large_scale_gain"].first().to_numpy()
    prob = expected_aligned(h, 10 ** (-112.0 / 10))
    assert 0.1 < prob.mean() < 0.9  # a threshold that truncates some devices and keeps others
    want = prob.sum()
    se = math.sqrt((prob * (1 - prob)).sum() / len(air))
    assert abs(air["n_aligned"].mean() - want) < 5 * se
    assert (air["n_aligned"] + air["n_truncated"] == 30).all()  # ideal: everyone asked


def test_energy_is_power_times_the_transmission() -> None:
    """Without freezing every aligned device transmits for T = ceil(D / v) / W at its power:
    energy_upload_j = tx_power_w x T, and T does not grow with the number of devices."""
    table, _ = run_in_memory(network(frames=2, values_per_symbol=2))
    up = rows(table, "upload_end")
    t_s = aircomp_latency_s(9610, QUICK["network"]["bandwidth_hz"], 2)
    np.testing.assert_allclose(up["upload_s"], t_s)
    np.testing.assert_allclose(up["energy_upload_j"], up["tx_power_w"] * t_s, rtol=1e-12)


def test_slot_length_does_not_grow_with_the_devices() -> None:
    """ideal (waits for the last upload): every slot lasts the last compute plus T, for 30
    devices as for 300 (the same hardware: the same compute time)."""
    lengths = []
    for n in (30, 300):
        data = network(frames=1)
        data["network"]["num_devices"] = n
        data["run"]["deadline_s"] = 0.0325  # below compute + T: the slot is the work's length
        table, _ = run_in_memory(data)
        lengths.append(rows(table, "aggregate")["slot_duration_s"].to_numpy())
    t_s = aircomp_latency_s(9610, QUICK["network"]["bandwidth_hz"], 1)
    compute_s = QUICK["devices"]["batch_size"] * 2e6 / 2e9
    for got in lengths:
        np.testing.assert_allclose(got, compute_s + t_s, rtol=1e-9)


def test_learning_run_records_the_sum_and_trains() -> None:
    """A learning run: one aircomp row per slot before its aggregate, the measured MSE positive
    and finite, and the model learns (final accuracy above 0.5)."""
    table, stats = run_in_memory(quick(frames=2))
    air = rows(table, "aircomp")
    assert len(air) == 40
    assert (air["aggregation_mse"] > 0).all() and np.isfinite(air["aggregation_mse"]).all()
    assert (air["eta_w"] > 0).all()
    acc = rows(table, "eval")["accuracy"].to_numpy()
    assert acc[-1] > 0.5


def test_device_slots_level_keeps_the_aircomp_rows() -> None:
    """[trace] level = "device_slots": the same aircomp rows as the full trace."""
    full, _ = run_in_memory(network(frames=2))
    data = network(frames=2)
    data["trace"] = {"level": "device_slots"}
    folded, _ = run_in_memory(data)
    cols = ["slot", "eta_w", "n_aligned", "n_truncated", "aircomp_mse"]
    a = rows(full, "aircomp")[cols].reset_index(drop=True)
    b = rows(folded, "aircomp")[cols].reset_index(drop=True)
    assert a.equals(b)


def test_same_seed_gives_the_same_trace() -> None:
    """Same scenario and seed: network columns bit-identical between two runs."""
    a, _ = run_in_memory(network(frames=2, threshold_gain_db=-115.0))
    b, _ = run_in_memory(network(frames=2, threshold_gain_db=-115.0))
    assert column_hashes(a) == column_hashes(b)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"server": {"mode": "semi_sync"}}, "server.mode"),
        ({"strategy": {"name": "fedmedian"}}, "strategy.name"),
        ({"scheme": {"name": "fedhq"}}, "scheme.name"),
        (
            {"strategy": {"name": "fedavg", "selection": {"rule": "rate_per_joule", "k": 5}}},
            "strategy.selection.rule",
        ),
    ],
)
def test_what_an_air_sum_cannot_be_is_refused(extra: dict, field: str) -> None:
    """Stale updates, order-statistic strategies, quantised updates and a selection by digital
    rate are refused, naming the field."""
    data = {**quick(), **extra}
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(data)
    assert err.value.field == field


def test_aircomp_fields_need_the_aircomp_mode() -> None:
    """power_control under another uplink mode is a one-line error naming the field."""
    data = copy.deepcopy(QUICK)
    data["uplink"] = {"mode": "ofdma", "power_control": "optimal"}
    with pytest.raises(ScenarioError, match="aircomp"):
        wflsim.prepare(data)


def cells(bands: list[int], learning: bool = False, hierarchy: bool = False) -> dict:
    """Two cells 600 m apart, 30 devices, over AirComp (network only unless ``learning``)."""
    data = quick(frames=2) if learning else network(frames=2)
    data["mobility"] = {"model": "static"}
    data["cells"] = {"sites_m": [[-300.0, 0.0], [300.0, 0.0]], "bands": bands}
    data["network"]["cell_radius_m"] = 400.0
    if hierarchy:
        data["server"] = {"hierarchy": {"cloud_every_slots": 2, "backhaul_rate_bps": 1e12}}
    return data


def test_each_cell_is_its_own_sum() -> None:
    """With two cells every slot has one aircomp row per cell, and each cell aligns the devices
    it serves (ideal, no threshold: all of them)."""
    table, _ = run_in_memory(cells([0, 1]))
    air = rows(table, "aircomp")
    assert len(air) == 2 * 40 and set(air["cell"]) == {0, 1}
    pos = rows(table, "position")
    served = pos[pos.frame == 0].groupby("cell")["device"].count()  # static: the same each frame
    per_cell = air.groupby("cell")["n_aligned"].max()
    assert per_cell.to_dict() == served.to_dict()


def test_co_band_cells_interfere_with_each_others_sums() -> None:
    """On one band each sum hears the other cell's transmissions: the closed-form MSE is
    never lower than on separate bands (the same powers: truncated inversion ignores noise)
    and higher in some slot."""
    apart, _ = run_in_memory(cells([0, 1]))
    shared, _ = run_in_memory(cells([0, 0]))
    a = rows(apart, "aircomp")["aircomp_mse"].to_numpy()
    b = rows(shared, "aircomp")["aircomp_mse"].to_numpy()
    np.testing.assert_array_equal(rows(apart, "aircomp")["eta_w"], rows(shared, "aircomp")["eta_w"])
    assert (b >= a).all() and (b > a * 1.01).any()


def test_interference_matches_a_loop_over_devices() -> None:
    """interference_w against a direct double loop over devices and cells, with windows that
    half overlap."""
    from wflsim.sim.radio.aircomp import interference_w

    rng = np.random.default_rng(5)
    n, g = 9, 3
    group = rng.integers(0, g, n)
    plan = plan_aircomp(
        np.ones(n, bool),
        np.ones(n),
        rng.exponential(1e-9, n),
        rng.exponential(1e-9, n),
        1.0,
        1e-13,
        "optimal",
        0.0,
        0.2,
        group,
    )
    sent = rng.random(n) < 0.8
    start = np.array([0.0, 0.1, 0.0])[group]
    gains = rng.exponential(1e-10, (n, g))
    co = ~np.eye(g, dtype=bool)
    co[0, 2] = co[2, 0] = False
    want = np.zeros(g)
    for v in range(g):
        for m in range(n):
            a = group[m]
            if sent[m] and co[a, v]:
                lo, hi = max(start[m], [0.0, 0.1, 0.0][v]), min(start[m], [0.0, 0.1, 0.0][v]) + 0.2
                want[v] += plan.tx_power_w[m] * gains[m, v] * max(0.0, hi - lo) / 0.2
    np.testing.assert_allclose(interference_w(plan, sent, start, gains, co), want, rtol=1e-12)


def test_hierarchy_edges_apply_their_cells_sums() -> None:
    """[server.hierarchy] over AirComp: each edge applies its cell's sum (a measured error per
    cell row), the cloud averages them, and the model learns."""
    table, _ = run_in_memory(cells([0, 1], learning=True, hierarchy=True))
    air = rows(table, "aircomp")
    assert len(air) == 80 and (air["aggregation_mse"].dropna() > 0).all()
    assert air.groupby("cell")["aggregation_mse"].count().min() > 30
    assert len(rows(table, "cloud_round")) == 20
    assert rows(table, "eval")["accuracy"].to_numpy()[-1] > 0.5


def test_a_learning_run_resumes_to_the_uninterrupted_run(tmp_path) -> None:
    """Failed as frame 2 starts and resumed: events and final model equal the uninterrupted
    run's (the receiver's noise is keyed by slot, so it is drawn again identically)."""
    from conftest import assert_resume_equals_whole

    data = quick(frames=3, threshold_gain_db=-115.0)
    data["scheme"] = {"name": "two_timescale", "V": 100.0}
    assert_resume_equals_whole(data, tmp_path / "run")


def test_devices_going_offline_leave_the_sum() -> None:
    """[availability]: a device that goes offline before its sum ends is dropped, not in the
    sum (success false), and charged only what it transmitted before it left."""
    data = network(frames=4)
    data["learning"]["num_params"] = 2_000_000  # a 0.2 s window: drops within it too
    data["run"]["deadline_s"] = 0.05
    data["availability"] = {"model": "markov", "online_s": 0.5, "offline_s": 0.2}
    table, _ = run_in_memory(data)
    drops = rows(table, "dropped")
    assert len(drops) > 0
    energy = rows(table, "energy").set_index(["slot", "device"])
    lost = energy.loc[list(zip(drops["slot"], drops["device"], strict=True))]
    assert not lost["success"].any()
    t_s = aircomp_latency_s(2_000_000, QUICK["network"]["bandwidth_hz"], 1)
    window = rows(table, "upload_start").groupby("slot")["time_s"].min()  # one sum: one start
    checked = 0
    for (slot, device), row in lost.iterrows():
        drop_s = float(drops[(drops.slot == slot) & (drops.device == device)]["time_s"].iloc[0])
        if slot not in window.index or drop_s <= window[slot]:
            assert row["energy_upload_j"] == 0.0  # gone before the window: nothing sent
            continue
        sent_s = min(drop_s - window[slot], t_s)
        assert row["energy_upload_j"] == pytest.approx(row["tx_power_w"] * sent_s, rel=1e-9)
        checked += 1
    assert checked > 0


def test_summary_totals_match_the_aircomp_rows() -> None:
    """The run summary's aligned share and mean aggregation error are the aircomp rows' totals;
    a digital run's summary has neither."""
    table, stats = run_in_memory(quick(frames=1, threshold_gain_db=-115.0))
    air = rows(table, "aircomp")
    summary = stats.as_dict()
    share = air["n_aligned"].sum() / (air["n_aligned"] + air["n_truncated"]).sum()
    assert summary["aircomp_aligned_share"] == pytest.approx(share, rel=1e-12)
    mse = air["aggregation_mse"].dropna()
    assert summary["aircomp_mean_aggregation_mse"] == pytest.approx(mse.mean(), rel=1e-9)
    digital = copy.deepcopy(QUICK)
    digital["run"]["frames"] = 1
    _, plain = run_in_memory(digital)
    assert "aircomp_aligned_share" not in plain.as_dict()


def test_both_kernels_give_the_same_trace() -> None:
    """The closed-form and the event kernel play an over-the-air slot identically."""
    from conftest import on_both_kernels

    closed, event = on_both_kernels(network(frames=2, threshold_gain_db=-115.0))
    assert column_hashes(closed) == column_hashes(event)


def test_a_frozen_device_transmits_only_its_own_symbols() -> None:
    """A device that sends fewer coordinates transmits only their symbols: the kernel reports
    its own time ``upload_full_s`` (not the whole window) and its upload ends after it."""
    import simpy

    from wflsim.sim.kernels import ClosedFormKernel, SlotResult
    from wflsim.sim.slot import SlotUploads
    from wflsim.sim.trace import event_code

    t_s = 0.01
    own = np.array([t_s, t_s / 2, t_s / 4])
    up = SlotUploads(
        participating=np.ones(3, bool),
        tx_power_w=np.full(3, 0.5),
        channel_gain=np.ones(3),
        payload_bits=own * 1e6,
        compute_s=np.array([0.01, 0.02, 0.03]),
        compute_needed_s=np.array([0.01, 0.02, 0.03]),
        upload_full_s=own,
    )
    env = simpy.Environment(initial_time=5.0)
    got: list[SlotResult] = []

    def server():
        got.append((yield from ClosedFormKernel().play_aircomp(env, up, t_s, 0.1, "last_upload")))

    env.process(server())
    env.run()
    res = got[0]
    np.testing.assert_array_equal(res.transmitted_s, own)
    assert res.arrived.all() and env.now == pytest.approx(5.1)
    ends = res.activity.time_s[res.activity.code == event_code("upload_end")]
    np.testing.assert_allclose(np.sort(ends), np.sort(5.0 + 0.03 + own), rtol=1e-12)


def test_a_cell_that_serves_nobody_is_an_empty_sum() -> None:
    """Three sites, the last serving no device: its sum has eta 0 and no MSE, the others run."""
    data = network(frames=1)
    data["network"]["num_devices"] = 4
    data["mobility"] = {
        "model": "static",
        "placement": "explicit",
        "positions_m": [[-300.0, 10.0], [-310.0, 0.0], [300.0, 5.0], [290.0, 0.0]],
    }
    data["cells"] = {"sites_m": [[-300.0, 0.0], [300.0, 0.0], [0.0, 3000.0]], "bands": [0, 0, 0]}
    data["network"]["cell_radius_m"] = 400.0
    table, _ = run_in_memory(data)
    air = rows(table, "aircomp")
    last = air[air["cell"] == 2]
    assert len(last) == 20 and (last["eta_w"] == 0).all() and last["aircomp_mse"].isna().all()
    assert (air[air["cell"] < 2]["n_aligned"] == 2).all()


def test_flat_server_over_several_cells_learns() -> None:
    """[cells] without a hierarchy: one server combines the cells' sums (each with its own
    noise); every cell's row carries the one aggregate's measured error, and the model learns."""
    table, _ = run_in_memory(cells([0, 0], learning=True))
    air = rows(table, "aircomp")
    per_slot = air.groupby("slot")["aggregation_mse"].nunique()
    assert (per_slot == 1).all() and (air["aggregation_mse"] > 0).all()
    assert rows(table, "eval")["accuracy"].to_numpy()[-1] > 0.5


def test_a_device_still_computing_when_the_window_opens_is_an_outage() -> None:
    """Under a scheme that closes at the deadline the window is the slot's last T: a device
    whose compute ends after tau_0 - T is an outage (computed, never in the sum)."""
    data = network(frames=1)
    data["network"]["num_devices"] = 5
    data["devices"] = {**data.get("devices", {}), "cpu_hz": [2e9, 2e9, 1e9, 1e9, 6.432e8]}
    data["run"]["deadline_s"] = 0.1  # compute 0.032, 0.064, 0.0995 s; tau_0 - T = 0.09904 s
    data["scheme"] = {"name": "fixed_power"}
    table, _ = run_in_memory(data)
    energy = rows(table, "energy")
    t_s = aircomp_latency_s(9610, QUICK["network"]["bandwidth_hz"], 1)
    dec = rows(table, "decision").set_index(["slot", "device"])
    need = dec.loc[list(zip(energy["slot"], energy["device"], strict=True))]["compute_s"]
    late = need.to_numpy() > 0.1 - t_s
    part = energy["participating"].to_numpy(dtype=bool)
    assert late.any() and (part & late).any()
    assert not energy["success"].to_numpy(dtype=bool)[part & late].any()
    assert energy["success"].to_numpy(dtype=bool)[part & ~late].all()


def test_the_aircomp_row_comes_before_the_aggregate() -> None:
    """Each slot's aircomp row precedes its aggregate row (what the aggregate applied)."""
    table, _ = run_in_memory(network(frames=1))
    ev = table.to_pandas()
    for _, slot in ev[ev.event.isin(["aircomp", "aggregate"])].groupby("slot"):
        assert list(slot["event"]) == ["aircomp", "aggregate"]


# ---------------------------------------------------------------- the paper's controller, adapted


def test_controller_slope_matches_monte_carlo() -> None:
    """K, the expected drift-plus-penalty per unit of u, against 2,000,000 Rayleigh draws of the
    gain: E[(-I + Q eta a^2 T / h) 1{eta a^2 / h <= p_max}], within 4 standard errors."""
    from wflsim.sim.radio.aircomp import controller_frame

    i_val, q, h_mean, eta, a, t_full, peak = 2.0, 300.0, 1e-10, 1e-8, 0.1, 0.01, 1.0
    _, p_max, _, k = controller_frame(
        [i_val], [q], [0.01], 0.1, 0.01, t_full, [peak], [h_mean], eta, [a]
    )
    h = np.random.default_rng(11).exponential(h_mean, 2_000_000)
    z = np.where(eta * a * a / h <= p_max[0], -i_val + q * eta * a * a * t_full / h, 0.0)
    assert p_max[0] == pytest.approx(i_val / (q * t_full))  # the energy price binds, below P
    assert abs(z.mean() - k[0]) < 4 * z.std() / math.sqrt(z.size)


def test_controller_gamma_is_the_brute_force_minimum() -> None:
    """gamma from the closed form against a grid of u in [0, u_max] with the expected cost
    integrated numerically over the Rayleigh gain (threshold p_max = min(P, I / (Q T)) computed
    here), for a device whose price binds, one whose energy is free, one that sits out (I < 0)
    and one that must freeze to fit its computation before the window."""
    from scipy import integrate

    from wflsim.sim.radio.aircomp import controller_frame

    i_val = np.array([2.0, 2.0, -1.0, 2.0])
    q = np.array([300.0, 0.0, 30.0, 300.0])
    theta = np.array([0.05, 0.05, 0.05, 0.2])  # device 3: only u <= 0.45 fits
    tau0, window, t_full, eta, a, h_mean = 0.1, 0.01, 0.01, 1e-8, 0.1, 1e-10
    gamma, _, _, _ = controller_frame(
        i_val, q, theta, tau0, window, t_full, np.ones(4), np.full(4, h_mean), eta, np.full(4, a)
    )
    for n in range(4):
        u_max = min(1.0, (tau0 - window) / theta[n])
        p_max = min(1.0, i_val[n] / (q[n] * t_full)) if q[n] > 0 else 1.0

        def cost(u: float, n: int = n, p_max: float = p_max) -> float:
            if u == 0:
                return 0.0
            if i_val[n] <= 0:  # no value, and energy to pay: any u > 0 costs more than none
                return abs(i_val[n]) * u + 1e-12

            def density(h: float) -> float:
                value = -i_val[n] * u + q[n] * eta * a * a * u * t_full / h
                return value * math.exp(-h / h_mean) / h_mean

            return integrate.quad(density, eta * a * a / p_max, 60 * h_mean, limit=200)[0]

        grid = np.linspace(0.0, u_max, 41)
        best = grid[int(np.argmin([cost(u) for u in grid]))]
        assert 1.0 - gamma[n] == pytest.approx(best, abs=1e-9), n


@settings(max_examples=60, deadline=None)
@given(
    i_val=st.floats(1e-6, 1e3),
    q=st.floats(0.0, 1e4),
    x_scale=st.floats(1e-3, 500.0),
    t_full=st.floats(1e-4, 1.0),
)
@example(i_val=1.0, q=5e-324, x_scale=1.0, t_full=0.5)  # Q T underflows to 0: the peak holds
def test_controller_takes_part_whenever_the_update_is_worth_something(
    i_val: float, q: float, x_scale: float, t_full: float
) -> None:
    """For any I > 0 the frame's slope K is negative (K = -I Psi(x) or below, Psi > 0): over the
    air the controller never freezes beyond what the deadline needs."""
    from wflsim.sim.radio.aircomp import controller_frame

    h_mean, a = 1e-10, 0.1
    eta = x_scale * h_mean / (a * a)
    q_t = q * t_full
    threshold = min(1.0, i_val / q_t) if q_t > 0 else 1.0
    assume(x_scale / threshold < 700.0)  # beyond: a chance below e^-700, counted as none
    gamma, p_max, _, k = controller_frame(
        [i_val], [q], [0.01], 0.1, 0.01, t_full, [1.0], [h_mean], eta, [a]
    )
    assert k[0] <= 0.0 and gamma[0] == 0.0 and p_max[0] > 0.0


def test_controller_rule_inverts_within_the_frames_threshold() -> None:
    """power_control = "controller" under the paper's scheme: every participant inverts its
    seen gain at the frame's eta (p = eta a^2 / h), never above the frame's threshold, and every
    device that stays out had p above it."""
    from wflsim.sim.radio.aircomp import planned_eta

    data = network(frames=2, power_control="controller")
    data["scheme"] = {"name": "two_timescale", "V": 10.0}
    table, _ = run_in_memory(data)
    dec = rows(table, "decision")
    pos = rows(table, "position")
    b = np.full(30, 32.0)
    for frame, d in dec.groupby("frame"):
        h_large = pos[pos.frame == frame].sort_values("device")["large_scale_gain"].to_numpy()
        eta = planned_eta(np.ones(30), h_large, b)
        p = eta * (1 / 30) ** 2 / d["seen_channel_gain"].to_numpy(dtype=float)
        part = d["participating"].to_numpy(dtype=bool)
        p_max = d["max_tx_power_w"].to_numpy(dtype=float)
        assert part.any() and (~part).any()
        np.testing.assert_allclose(d["tx_power_w"].to_numpy(dtype=float)[part], p[part], rtol=1e-9)
        assert (p[part] <= p_max[part] * (1 + 1e-12)).all()
        assert (p[~part] > p_max[~part]).all()


def test_controller_needs_a_scheme_with_the_threshold() -> None:
    """power_control = "controller" with a scheme that has no Proposition-1 threshold is refused
    naming uplink.power_control."""
    data = quick(power_control="controller")  # ideal: no threshold
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(data)
    assert err.value.field == "uplink.power_control"


# ------------------------------------------------ normalisation and noise in the trace


def test_upload_moments_are_each_devices_mean_and_deviation() -> None:
    """upload_moments gives each device's mean and (population) standard deviation of its sent entries, computed here from the uploads."""
    learner = tiny_learner([4, 6, 5])
    learner.compute(0, np.arange(3))
    u = learner.gradients.double()
    mu, sigma = learner.upload_moments(np.array([0, 2]))
    np.testing.assert_allclose(mu, u[[0, 2]].mean(1).numpy(), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(sigma, u[[0, 2]].std(1, unbiased=False).numpy(), rtol=1e-5)


def test_the_noise_statistics_are_those_of_the_noise_the_aggregate_received() -> None:
    """Aligned devices and noise: the scale is the largest deviation, the drawn std is it times noise_std, and the noise's mean and rms are those of the aggregate's error, by hand from the uploads."""
    learner = tiny_learner([4, 4], hidden=None, lr=1.0)
    learner.compute(0, np.arange(2))
    u = learner.gradients.double()
    w0 = learner._w.clone()
    learner.receive_over_the_air(OverTheAir(slot=0, ratio=np.ones(2), noise_std=0.05))
    learner.apply(0, np.arange(2))
    nz = learner.last_air_noise
    sigma_bar = float(u.std(1, unbiased=False).max())
    assert nz.scale == pytest.approx(sigma_bar, rel=1e-5)
    assert nz.noise_std == pytest.approx(sigma_bar * 0.05, rel=1e-5)
    error = (w0 - learner._w).double() - u.mean(0)  # lr 1: the step is the aggregate
    assert nz.noise_mean == pytest.approx(float(error.mean()), rel=1e-3, abs=1e-9)
    assert nz.noise_rms == pytest.approx(float(error.pow(2).mean().sqrt()), rel=1e-3)


@pytest.mark.parametrize("level", ["events", "device_slots"])
def test_aircomp_rows_carry_the_scale_the_sums_devices_normalised_by(level) -> None:
    """A learning run: every aircomp row's aircomp_scale is the largest update_std of the slot's devices in the sum (their upload rows), its noise statistics are finite, and they are null network-only."""
    data = quick(frames=1)
    data["trace"] = {"level": level}
    table, _ = run_in_memory(data)
    df = table.to_pandas()
    row = "upload_end" if level == "events" else "device_slot"
    ups = df[(df.event == row) & df["success"].astype("boolean").fillna(False)]
    assert ups["update_std"].notna().all() and ups["update_mean"].notna().all()
    air = rows(table, "aircomp")
    want = ups.groupby("slot")["update_std"].max()
    got = air.set_index("slot")["aircomp_scale"]
    assert len(want) > 0 and (got.loc[want.index] == want).all()
    for col in ("aircomp_noise_std", "aircomp_noise_mean", "aircomp_noise_rms"):
        assert np.isfinite(air[col]).all()
    assert (air["aircomp_noise_rms"] > 0).all()
    others = ~df.event.isin([row, "dropped"])
    assert df.loc[others, "update_std"].isna().all()
    net, _ = run_in_memory(network(frames=1))
    for col in ("aircomp_scale", "aircomp_noise_rms", "update_mean", "update_std"):
        assert net.column(col).null_count == net.num_rows


def test_each_edge_reports_its_own_scale_under_a_hierarchy() -> None:
    """[server.hierarchy] over AirComp: each cell's aircomp row has the largest update_std of that cell's devices in its sum."""
    table, _ = run_in_memory(cells([0, 1], learning=True, hierarchy=True))
    df = table.to_pandas()
    ups = df[(df.event == "upload_end") & df["success"].astype("boolean").fillna(False)]
    want = ups.groupby(["slot", "edge"])["update_std"].max()
    air = rows(table, "aircomp").dropna(subset=["aircomp_scale"])
    got = air.set_index(["slot", "cell"])["aircomp_scale"]
    assert len(got) > 30
    assert (got == want.loc[got.index].to_numpy()).all()
