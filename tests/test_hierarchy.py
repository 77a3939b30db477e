"""Hierarchical aggregation ([server.hierarchy]): edge servers at the cells' base stations, a
cloud every k2 slots over a backhaul; against flat FedSGD, a loop over model copies, the backhaul's
timing and energy, the server modes, resume."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import wflsim
from conftest import events, run_in_memory, saved_and_continued
from wflsim.app.run import build_engine, make_learner
from wflsim.models.learner.sampling import per_device_samples
from wflsim.sim.errors import ScenarioError
from wflsim.sim.servers.hierarchy import round_energy_j, round_trip_s

SITES = [[-300.0, 0.0], [300.0, 0.0]]


def scenario(k2=1, slots=3, local_steps=1, scheme="ideal", **hierarchy):
    """Six devices with unequal batches in two cells on their own bands, digits MLP."""
    data = {
        "name": "hier",
        "seed": 3,
        "run": {"frames": 1, "slots_per_frame": slots, "deadline_s": 0.8},
        "network": {"num_devices": 6, "cell_radius_m": 400.0},
        "mobility": {"model": "static"},
        "devices": {"batch_size": [8, 8, 16, 16, 24, 24]},
        "learning": {
            "dataset": "digits",
            "model": "mlp",
            "lr": 0.3,
            "local_steps": local_steps,
            "eval_every_slots": slots,
        },
        "scheme": {"name": scheme},
        "cells": {"sites_m": SITES, "bands": [0, 1]},
    }
    if k2 is not None:
        data["server"] = {
            "hierarchy": {"cloud_every_slots": k2, "backhaul_rate_bps": 1e15, **hierarchy}
        }
    return data


def run_engine(data):
    prep = wflsim.prepare(data)
    engine = build_engine(prep, make_learner(prep))
    engine.run()
    return engine


def test_k2_one_equals_flat_fedsgd_over_the_union_of_the_cells():
    """With k2 = 1 the cloud model after every slot is flat FedSGD's over every cell's uploads (to float rounding)."""
    flat = run_engine(scenario(k2=None, slots=4))
    hier = run_engine(scenario(k2=1, slots=4))
    w_flat = flat.learner.global_params()
    w_hier = hier.learner.global_params()
    assert not torch.equal(w_flat, flat.learner.net.initial_params())  # the model moved
    torch.testing.assert_close(w_hier, w_flat, rtol=1e-5, atol=1e-6)
    acc_f = events(flat.table(), "eval")["accuracy"].to_numpy()
    acc_h = events(hier.table(), "eval")["accuracy"].to_numpy()
    np.testing.assert_allclose(acc_h, acc_f, atol=2e-3)


def device_step(learner, w0, samples, lr):
    """k1 plain SGD steps of one device from w0 on its minibatches: a model copy and autograd."""
    model = copy.deepcopy(learner.model)
    names = list(learner.param_dict(w0).keys())
    with torch.no_grad():
        for name, v in learner.param_dict(w0.clone()).items():
            model.get_parameter(name).copy_(v)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for idx in samples:
        x = learner.data.x_train[torch.as_tensor(idx)]
        y = learner.data.y_train[torch.as_tensor(idx)]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return torch.cat([model.get_parameter(n).detach().reshape(-1) for n in names])


@pytest.mark.parametrize(("k1", "k2"), [(1, 1), (2, 3)])
def test_hierfavg_after_k1_times_k2_steps_matches_a_loop_over_model_copies(k1, k2):
    """Two edges, k1 local steps, k2 slots: the cloud model is the data-weighted average of the edges' models, each the weighted average of its devices' SGD (k1 = k2 = 1: flat FedSGD over both cells)."""
    engine = run_engine(scenario(k2=k2, slots=k2, local_steps=k1))
    hl = engine.learner
    base = hl.base
    cell = events(engine.table(), "position")["cell"].to_numpy().astype(int)
    b = base.batch_sizes.astype(np.float64)
    w0 = base.net.initial_params()
    edge_w = {c: w0.clone() for c in (0, 1)}
    for slot in range(k2):
        for c in (0, 1):
            ids = np.flatnonzero(cell == c)
            steps = np.full(ids.size, k1)
            samples = per_device_samples(base.data.draw_steps(slot, ids, steps), steps)
            finals = [device_step(base, edge_w[c], s, base.lr) for s in samples]
            weights = torch.as_tensor(b[ids] / b[ids].sum(), dtype=torch.float32)
            edge_w[c] = sum(wt * f for wt, f in zip(weights, finals, strict=True))
    a = np.array([b[cell == c].sum() for c in (0, 1)]) * k2
    cloud = sum(float(a[c] / a.sum()) * edge_w[c] for c in (0, 1))
    torch.testing.assert_close(hl.global_params(), cloud, rtol=1e-4, atol=1e-5)


def test_sync_slots_wait_for_the_cloud_round_and_pay_its_energy():
    """Under sync the slot after a cloud round starts one round trip later, and the round's row has the backhaul's time and energy."""
    data = scenario(
        k2=2,
        slots=4,
        backhaul_latency_s=0.05,
        backhaul_rate_bps=1e8,
        backhaul_energy_j_per_bit=1e-8,
    )
    engine = run_engine(data)
    table = engine.table()
    rounds = events(table, "cloud_round")
    bits = engine.system.full_payload_bits
    trip = round_trip_s(np.full(2, 0.05), np.full(2, 0.05), bits, 1e8)
    assert trip == pytest.approx(2 * (0.05 + bits / 1e8))
    np.testing.assert_allclose(rounds["backhaul_s"], trip)
    np.testing.assert_allclose(rounds["backhaul_energy_j"], round_energy_j(2, bits, 1e-8))
    assert rounds["backhaul_energy_j"].iloc[0] == pytest.approx(4 * bits * 1e-8)
    starts = events(table, "slot_start").set_index("slot")["time_s"]
    ends = events(table, "aggregate").set_index("slot")["time_s"]
    assert starts[2] == pytest.approx(ends[1] + trip, rel=1e-12)
    assert starts[1] == pytest.approx(ends[0], rel=1e-12)
    assert engine.stats.backhaul_energy_j == pytest.approx(rounds["backhaul_energy_j"].sum())


@pytest.mark.parametrize("mode", ["semi_sync", "async"])
def test_stale_modes_keep_the_grid_and_resume_with_a_round_in_flight(tmp_path, mode):
    """Under stale updates the edges keep serving while a round travels (one crosses the frame boundary); kill-and-resume there equals the uninterrupted run."""
    data = scenario(k2=2, slots=4, scheme="two_timescale", backhaul_latency_s=0.3)
    data["run"]["frames"] = 2
    data["server"]["mode"] = mode
    if mode == "async":
        data["server"]["buffer_size"] = 2
    full, _ = run_in_memory(copy.deepcopy(data))
    starts = events(full, "slot_start")["time_s"].to_numpy()
    np.testing.assert_allclose(np.diff(starts), 0.8, rtol=1e-12)
    resumed = saved_and_continued(data, 1, tmp_path / "state.npz")
    assert resumed.equals(full)


def test_sync_hierarchy_resumes_to_the_uninterrupted_trace(tmp_path):
    """A synchronous hierarchical run with training resumes at a frame boundary to the same trace."""
    data = scenario(k2=3, slots=4, scheme="two_timescale", backhaul_latency_s=0.02)
    data["run"]["frames"] = 3
    full, _ = run_in_memory(copy.deepcopy(data))
    assert saved_and_continued(data, 1, tmp_path / "state.npz").equals(full)


def test_hierarchy_without_cells_is_refused():
    """[server.hierarchy] without [cells] is refused naming the field: the edges are the base stations."""
    data = scenario(k2=2)
    del data["cells"]
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(data)
    assert err.value.field == "server.hierarchy"


def test_a_round_longer_than_its_period_is_refused_under_stale_updates():
    """Under async a round trip that can outlast k2 tau_0 is refused, naming cloud_every_slots."""
    data = scenario(k2=1, backhaul_latency_s=0.5)
    data["server"]["mode"] = "async"
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(data)
    assert err.value.field == "server.hierarchy.cloud_every_slots"


def test_network_only_hierarchy_logs_rounds_without_a_learner():
    """A network-only run with a hierarchy times and logs its cloud rounds (no model to move)."""
    data = scenario(
        k2=2, slots=4, backhaul_latency_s={"dist": "uniform", "low": 0.01, "high": 0.02}
    )
    data["learning"] = {"enabled": False, "num_params": 10_000}
    table, stats = run_in_memory(data)
    rounds = events(table, "cloud_round")
    assert len(rounds) == 2 and stats.cloud_rounds == 2
    bits = 10_000 * 32
    lo, hi = 2 * (0.01 + bits / 1e15), 2 * (0.02 + bits / 1e15)
    assert ((rounds["backhaul_s"] >= lo) & (rounds["backhaul_s"] <= hi)).all()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "strategy",
    ["fedavgm", "fedadam", "fedmedian", "krum", "fednova", "fedprox", "scaffold"],
)
def test_every_strategy_runs_per_edge_and_leaves_finite_models(strategy, mode):
    """Each strategy runs on every edge (its own state per edge) under sync and async, and the cloud model stays finite."""
    data = scenario(k2=2, slots=4, local_steps=2, scheme="two_timescale", backhaul_latency_s=0.01)
    data["strategy"] = {"name": strategy}
    if mode == "async":
        data["server"].update(mode="async", buffer_size=2)
    engine = run_engine(data)
    assert engine.learner.is_finite()
    assert engine.stats.cloud_rounds == 2
    table = engine.table()
    assert len(events(table, "strategy")) > 0  # every edge step left its rows


# ------------------------------------------------------------- what the edges did (trace, API)

B = np.array([8, 8, 16, 16, 24, 24])


def test_edge_model_rows_carry_each_edges_data_weight_and_cloud_weight_by_hand():
    """Each cloud round's edge_model rows: edge_data_weight is the sum of B_n over the uploads of that edge aggregated since the last round (read off the upload_end rows), cloud_weight its share."""
    data = scenario(k2=2, slots=4, scheme="two_timescale", backhaul_latency_s=0.01)
    table, _ = run_in_memory(data)
    df = table.to_pandas()
    ups = df[(df["event"] == "upload_end") & df["success"].astype(bool)]
    rows = events(table, "edge_model")
    assert len(rows) == 2 * 2  # two rounds, two edges
    for r, (lo, hi) in enumerate([(0, 1), (2, 3)]):
        got = rows[rows["slot"] == hi].sort_values("edge")
        assert got["edge"].tolist() == [0, 1]
        mine = ups[(ups["slot"] >= lo) & (ups["slot"] <= hi)]
        for c in (0, 1):
            sent = mine[mine["edge"] == c]
            want = float(B[sent["device"].to_numpy(dtype=int)].sum())
            assert got["edge_data_weight"].iloc[c] == want, (r, c)
            assert got["n_success"].iloc[c] == len(sent)
        total = got["edge_data_weight"].sum()
        np.testing.assert_allclose(got["cloud_weight"], got["edge_data_weight"] / total)


def test_edge_model_rows_carry_the_latencies_drawn_for_each_edge():
    """With drawn latencies each edge_model row holds its own up and down draws, and the round's backhaul_s is max(up) + S/R + max(down) + S/R of them."""
    data = scenario(
        k2=2, slots=4, backhaul_latency_s={"dist": "uniform", "low": 0.01, "high": 0.02}
    )
    data["learning"] = {"enabled": False, "num_params": 10_000}
    table, _ = run_in_memory(data)
    rounds, rows = events(table, "cloud_round"), events(table, "edge_model")
    transfer = 10_000 * 32 / 1e15
    for _, rnd in rounds.iterrows():
        mine = rows[rows["slot"] == rnd["slot"]]
        assert len(mine) == 2 and (mine["time_s"] == rnd["time_s"]).all()
        for col in ("backhaul_up_s", "backhaul_down_s"):
            assert mine[col].between(0.01, 0.02).all()
        assert mine["backhaul_up_s"].nunique() == 2  # drawn per edge
        want = mine["backhaul_up_s"].max() + mine["backhaul_down_s"].max() + 2 * transfer
        assert rnd["backhaul_s"] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("mode", ["sync", "semi_sync", "async"])
@pytest.mark.parametrize("level", ["events", "device_slots"])
def test_uploads_name_their_edge_and_rounds_list_the_edges_in_every_server_mode(mode, level):
    """Under every server mode and trace level each upload row names its edge (its device's cell), and every cloud round has one edge_model row per edge whose weights sum to 1."""
    data = scenario(k2=2, slots=4, scheme="two_timescale", backhaul_latency_s=0.01)
    data["learning"] = {"enabled": False, "num_params": 10_000}
    data["trace"] = {"level": level}
    if mode != "sync":
        data["server"].update(mode=mode, **({"buffer_size": 2} if mode == "async" else {}))
    table, _ = run_in_memory(data)
    df = table.to_pandas()
    cell = events(table, "position").groupby("device")["cell"].first()
    row = "upload_end" if level == "events" else "device_slot"
    up = df[(df["event"] == row) & df["edge"].notna()]
    assert len(up) > 0
    assert (up["edge"].to_numpy() == cell[up["device"]].to_numpy()).all()
    rows = events(table, "edge_model")
    assert len(rows) == 2 * len(events(table, "cloud_round")) > 0
    sums = rows.groupby("slot")["cloud_weight"].sum()
    np.testing.assert_allclose(sums, 1.0)


def test_edge_data_weights_are_what_the_edges_learned_from():
    """Without a cloud round yet, the data weight the network side counted per edge equals what the learner's edges aggregated."""
    engine = run_engine(scenario(k2=100, slots=3, scheme="two_timescale"))
    np.testing.assert_array_equal(engine.hierarchy.data_weight, engine.learner.weights)


def test_the_api_reaches_every_edge_model():
    """A view's edge_params gives each edge's model: all equal to the cloud's right after a round (k2 = 1), apart from it and from each other without one; None for a flat run."""
    seen = {}

    def keep(view):
        seen["edges"], seen["cloud"] = view.edge_params(), view.params()
        seen["modules"] = view.edge_models()

    for name, k2 in (("round", 1), ("none", 100), ("flat", None)):
        seen.clear()
        wflsim.run(scenario(k2=k2, slots=3), callbacks=wflsim.Callbacks(on_run_end=keep))
        if name == "flat":
            assert seen["edges"] is None and seen["modules"] is None
            continue
        edges, cloud = seen["edges"], seen["cloud"]
        assert len(edges) == 2 and all(e.shape == cloud.shape for e in edges)
        assert len(seen["modules"]) == 2
        if name == "round":
            for e in edges:
                np.testing.assert_array_equal(e, cloud)
        else:
            assert not np.array_equal(edges[0], edges[1])
            assert not np.array_equal(edges[0], cloud)
            flat = np.concatenate(
                [p.detach().numpy().ravel() for p in seen["modules"][1].parameters()]
            )
            assert sorted(flat) == sorted(edges[1])
