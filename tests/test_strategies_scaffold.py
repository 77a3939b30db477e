"""SCAFFOLD (``[strategy] name = "scaffold"``, ``models/learner/strategies_client.py``): its
local steps and control-variate updates against a float64 reference written from Karimireddy et
al.'s Algorithm 1 (option II), its masks, its invariant c = mean(c_i) in runs of every server
mode, lost uploads, resumes, and its payload and cycles charged by the network side."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch

import wflsim
from conftest import (
    assert_resume_equals_whole,
    base_scenario,
    tiny_learning_scenario,
)
from wflsim.models.learner.local import local_updates
from wflsim.models.learner.strategies import StrategySettings
from wflsim.models.learner.strategies_client import Scaffold
from wflsim.models.registry import build_strategy
from wflsim.sim.registry import STRATEGIES
from wflsim.sim.strategies import StrategySpec
from wflsim.sim.updates import FreezingInputs

#: 3 devices learning the digits MLP, 2 frames of 3 slots.
LEARN = tiny_learning_scenario()
MODES = ("sync", "semi_sync", "async")
#: the network-only scenario's D
NUM_PARAMS = 100_000


class LeastSquares:
    """Device ``n``'s loss on batch ``e``: ``0.5 mean_b (x_b . w - y_b)^2`` (a batch is ``(X, y)``
    of the devices that still step: ``(n_e, B, D)``, ``(n_e, B)``)."""

    @staticmethod
    def grads(w: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]) -> Any:
        x, y = batch
        r = torch.einsum("nbd,nd->nb", x, w) - y
        return torch.einsum("nbd,nb->nd", x, r) / x.shape[1], 0.5 * (r * r).mean(dim=1), {}

    def compute(self, params, batch, buffers, device_buffers):
        w = params.expand(batch[0].shape[0], -1) if params.dim() == 1 else params
        return self.grads(w, batch)

    def compute_diverged(self, w, batch, buffers, bufs):
        return self.grads(w, batch)


def scaffold(num_params: int, num_devices: int) -> Scaffold:
    """A SCAFFOLD strategy for ``D = num_params`` and ``N = num_devices`` on the CPU."""
    built = build_strategy(
        StrategySpec("scaffold"), StrategySettings(num_params, torch.device("cpu"), num_devices)
    )
    assert isinstance(built, Scaffold)
    return built


def reference_rounds(x, data, steps, lr, arrivals, trained):
    """Algorithm 1 of Karimireddy et al. (option II) in float64: each round every device takes
    ``E_i`` steps ``y <- y - lr (grad F_i(y) + c - c_i)`` on its trained coordinates from the
    server's ``x``; of the devices that arrive, ``c_i+ = c_i - c + (x - y_i) / (E_i lr)`` (0
    where not trained), ``x <- x - lr mean_i (x - y_i) / lr`` and ``c <- c + sum (c_i+ - c_i) /
    N``. Returns the models and the control variates after each round."""
    n, d = len(steps), x.size
    c, ci = np.zeros(d), np.zeros((n, d))
    out = []
    for r, arrived in enumerate(arrivals):
        uploads = np.zeros((n, d))
        for i in range(n):
            y = x.copy()
            for e in range(steps[i]):
                xb, yb = data[r][e][i]
                grad = xb.T @ (xb @ y - yb) / xb.shape[0]
                y = y - lr * trained[i] * (grad + c - ci[i])
            uploads[i] = (x - y) / lr
        dc = trained * (uploads / np.asarray(steps)[:, None] - c)
        x = x - lr * uploads[arrived].mean(axis=0)
        ci[arrived] += dc[arrived]
        c = c + dc[arrived].sum(axis=0) / n
        out.append((x.copy(), c.copy(), ci.copy()))
    return out


def learner_rounds(x, data, steps, lr, arrivals, trained):
    """The same rounds through :func:`local_updates` (float32, batched) and :class:`Scaffold`'s
    ``local_drift`` and ``arrived``."""
    n, d = len(steps), x.size
    strat = scaffold(d, n)
    ids = np.arange(n)
    w = torch.as_tensor(x, dtype=torch.float32)
    mask = torch.as_tensor(trained, dtype=torch.bool)
    out = []
    for r, arrived in enumerate(arrivals):
        at = [strat.version_state()] * n
        drift = strat.local_drift(ids, at, None)
        batches = []
        for e in range(max(steps)):
            active = [i for i in ids if steps[i] > e]
            xs = torch.as_tensor(np.stack([data[r][e][i][0] for i in active]), dtype=torch.float32)
            ys = torch.as_tensor(np.stack([data[r][e][i][1] for i in active]), dtype=torch.float32)
            batches.append((xs, ys))
        grads, _, _ = local_updates(
            LeastSquares(),  # type: ignore[arg-type]
            w,
            batches,
            np.asarray(steps),
            np.full(n, lr),
            mask,
            {},
            None,
            None,
            drift,
        )
        uploads = grads.masked_fill(~mask, 0.0)  # the rule's upload: 0 where not trained
        ok = np.flatnonzero(arrived)
        w = w - lr * uploads[ok].mean(dim=0)
        strat.arrived(ok, uploads[ok], np.asarray(steps)[ok], mask[ok], [at[0]] * ok.size)
        out.append((w.numpy().copy(), strat.c.numpy().copy(), strat.c_dev.numpy().copy()))
    return out


def least_squares_data(rng, rounds, steps, d, batch=8):
    """``data[r][e][i] = (X, y)``: device ``i``'s minibatch of step ``e`` in round ``r`` (each
    device its own linear target, so the devices drift apart)."""
    n = len(steps)
    targets = rng.normal(size=(n, d)) * 2.0
    return [
        [
            [
                (xb := rng.normal(size=(batch, d)), xb @ targets[i] + 0.1 * rng.normal(size=batch))
                for i in range(n)
            ]
            for _ in range(max(steps))
        ]
        for _ in range(rounds)
    ]


@pytest.mark.parametrize("masked", [False, True])
def test_scaffold_follows_algorithm_1_option_ii(masked):
    """4 rounds, 3 devices with E = 3, 2, 1 steps, device 1's upload lost in round 2: the model,
    c and every c_i equal the float64 reference within 1e-4 relative."""
    rng = np.random.default_rng(3)
    steps, d, lr = [3, 2, 1], 6, 0.05
    trained = np.ones((3, d))
    if masked:  # device 0 does not train coordinates 0-1, device 2 coordinate 5
        trained[0, :2] = 0.0
        trained[2, 5] = 0.0
    arrivals = [np.array([True, True, True]), np.array([True, False, True])] * 2
    x0 = rng.normal(size=d)
    data = least_squares_data(rng, len(arrivals), steps, d)
    want = reference_rounds(x0, data, steps, lr, arrivals, trained)
    got = learner_rounds(x0, data, steps, lr, arrivals, trained.astype(bool))
    for (wx, wc, wci), (gx, gc, gci) in zip(want, got, strict=True):
        np.testing.assert_allclose(gx, wx, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gc, wc, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gci, wci, rtol=1e-4, atol=1e-5)
    assert np.abs(want[-1][1]).max() > 0.1  # the control variates did move


def test_scaffold_adds_no_drift_before_any_upload_arrived():
    """A fresh SCAFFOLD: local_drift is None (its first steps are FedAvg's, float for float)."""
    strat = scaffold(5, 3)
    assert strat.local_drift(np.arange(3), [strat.version_state()] * 3, None) is None


def test_scaffold_keeps_c_the_mean_of_the_device_variates():
    """After arrivals of devices 0 and 2 then 2 again: c equals the mean of the c_i (N = 4)."""
    strat = scaffold(5, 4)
    gen = torch.Generator().manual_seed(0)
    for ids in ([0, 2], [2]):
        u = torch.randn(len(ids), 5, generator=gen)
        at = [strat.version_state()] * len(ids)
        strat.arrived(np.array(ids), u, np.array([2] * len(ids)), None, at)
    np.testing.assert_allclose(strat.c.numpy(), strat.c_dev.numpy().mean(axis=0), atol=1e-7)
    assert strat.touched.tolist() == [True, False, True, False]


def test_scaffold_state_round_trips_through_state_dict():
    """c and the changed rows of c_i saved and loaded into a fresh strategy: equal tensors."""
    strat = scaffold(5, 4)
    u = torch.arange(10, dtype=torch.float32).view(2, 5)
    strat.arrived(np.array([1, 3]), u, np.array([1, 2]), None, [strat.c, strat.c])
    fresh = scaffold(5, 4)
    fresh.load_state_dict(strat.state_dict())
    torch.testing.assert_close(fresh.c, strat.c, rtol=0, atol=0)
    torch.testing.assert_close(fresh.c_dev, strat.c_dev, rtol=0, atol=0)
    assert fresh.touched.tolist() == strat.touched.tolist()


def test_scaffold_refuses_a_saved_state_of_another_shape():
    """c_dev rows of the wrong width: ValueError naming c_dev."""
    strat = scaffold(5, 4)
    state = {"c": np.zeros(5), "devices": np.array([0]), "c_dev": np.zeros((1, 4))}
    with pytest.raises(ValueError, match="c_dev"):
        strat.load_state_dict(state)


def test_scaffold_needs_the_number_of_devices():
    """Built without N (StrategySettings.num_devices None): ValueError naming num_devices."""
    with pytest.raises(ValueError, match="num_devices"):
        build_strategy(StrategySpec("scaffold"), StrategySettings(5, torch.device("cpu")))


# ---------------------------------------------------------------------------- runs


def run_keeping_state(data: dict[str, Any]) -> tuple[wflsim.RunResult, list[dict[str, Any]]]:
    """A run of ``data`` and SCAFFOLD's c, c_i and changed rows at each frame end."""
    seen: list[dict[str, Any]] = []

    def keep(view: Any) -> None:
        strat = view._engine.learner.strategy
        seen.append(
            {
                "c": strat.c.numpy().copy(),
                "c_dev": strat.c_dev.numpy().copy(),
                "touched": strat.touched.copy(),
            }
        )

    res = wflsim.run(data, callbacks=wflsim.Callbacks(on_frame_end=keep), progress=False)
    return res, seen


def scaffold_run(mode: str, **server: Any) -> dict[str, Any]:
    """The tiny digits run with SCAFFOLD, 2 local steps, in ``mode``."""
    return {
        **LEARN,
        "learning": {**LEARN["learning"], "local_steps": 2},
        "strategy": {"name": "scaffold"},
        "server": {"mode": mode, **server},
    }


@pytest.mark.parametrize("mode", MODES)
def test_c_stays_the_mean_of_the_device_variates_in_every_server_mode(mode):
    """At every frame end of a digits run with SCAFFOLD: c = mean_i c_i (within 1e-6) and some
    c_i moved."""
    res, seen = run_keeping_state(scaffold_run(mode))
    assert res.summary["slots"] == 6
    assert seen and seen[-1]["touched"].any()
    for s in seen:
        np.testing.assert_allclose(s["c"], s["c_dev"].mean(axis=0), atol=1e-6)


def test_scaffold_trains_another_model_than_fedavg():
    """Sync, 2 local steps: SCAFFOLD's final model differs from FedAvg's (the drift acts after
    the first arrivals)."""
    final: dict[str, np.ndarray] = {}

    def keep(name):
        return wflsim.Callbacks(on_frame_end=lambda v: final.__setitem__(name, v.params()))

    data = scaffold_run("sync")
    wflsim.run(data, callbacks=keep("scaffold"), progress=False)
    wflsim.run({**data, "strategy": {"name": "fedavg"}}, callbacks=keep("fedavg"), progress=False)
    assert np.isfinite(final["scaffold"]).all()
    assert not np.array_equal(final["scaffold"], final["fedavg"])


def test_a_device_whose_uploads_never_arrive_keeps_a_zero_variate():
    """A device 5 km out (its uploads miss every deadline): its c_i stays 0, and it is the only
    untouched one."""
    data = scaffold_run("sync")
    data["network"] = {**data["network"], "cell_radius_m": 6_000.0}
    data["scheme"] = {"name": "fixed_power"}  # the deadline holds (ideal has none)
    data["mobility"] = {
        "model": "static",
        "placement": "explicit",
        "positions_m": [[50.0, 0.0], [60.0, 0.0], [5_000.0, 0.0]],
    }
    res, seen = run_keeping_state(data)
    ends = res.events[(res.events.event == "upload_end")]
    assert (ends.device == 2).any() and ends[ends.device == 2].success.eq(False).all()
    assert seen[-1]["touched"].tolist() == [True, True, False]
    assert not seen[-1]["c_dev"][2].any()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_resumed_scaffold_run_equals_the_uninterrupted_run(tmp_path, mode):
    """SCAFFOLD failed in frame 2 and resumed from its checkpoint (async: a FedBuff buffer of
    2, so updates start before their device's last one is applied): events and final model
    equal the uninterrupted run's."""
    data = scaffold_run(mode, **({"buffer_size": 2} if mode == "async" else {}))
    data["run"] = {**data["run"], "frames": 3}
    assert_resume_equals_whole(data, tmp_path / "run")


# ---------------------------------------------------------------------------- costs


def test_scaffold_declares_its_costs():
    """Upload factor 2; D extra cycles per step plus 4 D per update."""
    costs = STRATEGIES["scaffold"].costs
    assert costs.upload_factor == 2.0
    assert costs.cycles_per_param == 1.0
    assert costs.cycles_per_param_per_update == 4.0
    np.testing.assert_allclose(
        costs.extra_cycles_per_step(10, np.array([1, 2, 4])), [50.0, 30.0, 20.0], rtol=1e-15
    )


@pytest.mark.parametrize("mode", MODES)
def test_scaffold_pays_twice_the_payload_and_its_cycles(mode):
    """Network only, E = 2: decisions carry 2 x 32 D bits and (c B + D + 4 D / 2) E / f
    seconds of compute."""
    data = base_scenario(
        server={"mode": mode},
        learning={"enabled": False, "num_params": NUM_PARAMS, "local_steps": 2},
        strategy={"name": "scaffold"},
    )
    events = wflsim.run(data, progress=False).events
    bits = events.payload_bits.dropna()
    assert len(bits)
    np.testing.assert_array_equal(bits.astype(float), 64.0 * NUM_PARAMS)
    cfg = events[events.event == "device_config"].set_index("device")
    c, b, f = (cfg[k].astype(float) for k in ("cycles_per_sample", "batch_size", "cpu_hz"))
    want = (c * b + NUM_PARAMS * (1.0 + 4.0 / 2)) * 2 / f
    dec = events[events.compute_s.notna()]
    assert len(dec)
    np.testing.assert_allclose(
        dec.compute_s.astype(float), want.loc[dec.device].to_numpy(), rtol=1e-12
    )


#: the digits MLP's D, by hand: 64 x 128 + 128 weights and biases, then 128 x 10 + 10
DIGITS_MLP_D = 64 * 128 + 128 + 128 * 10 + 10


def dirichlet_scaffold_run(**devices: float) -> dict[str, Any]:
    """The tiny digits run with SCAFFOLD, one local epoch on a Dirichlet(1.0) partition, seed 3."""
    data = tiny_learning_scenario()
    data["seed"] = 3
    data["run"] = {**data["run"], "frames": 1, "slots_per_frame": 1}
    data["devices"] = {**data["devices"], "batch_size": 64, **devices}
    data["learning"].update(partition="dirichlet", dirichlet_alpha=1.0, local_epochs=1)
    data["strategy"] = {"name": "scaffold"}
    return data


def test_scaffold_charges_d_e_plus_4d_on_a_dirichlet_partition():
    """One local epoch on a Dirichlet partition: each update is charged c B E_n + D E_n + 4 D
    cycles, E_n = ceil(D_n / B) from the partition's sizes (not 5 D E_n)."""
    from wflsim.app.run import make_learner

    data = dirichlet_scaffold_run()
    sizes = np.asarray(make_learner(wflsim.prepare(data)).num_samples)
    steps = -(-sizes // 64)
    assert steps.max() > 1  # the partition's E_n differ from prepare's lower bound of 1
    events = wflsim.run(data, progress=False).events
    cfg = events[events.event == "device_config"].set_index("device")
    c, f = (cfg[k].astype(float).to_numpy() for k in ("cycles_per_sample", "cpu_hz"))
    cycles = c * 64 * steps + DIGITS_MLP_D * steps + 4 * DIGITS_MLP_D
    dec = events[events.compute_s.notna()]
    assert len(dec)
    n = dec.device.to_numpy()
    np.testing.assert_allclose(dec.compute_s.astype(float), cycles[n] / f[n], rtol=1e-12)


def test_the_partition_deadline_check_charges_the_documented_scaffold_cycles():
    """A deadline above every device's documented c B E_n + D E_n + 4 D cycles is accepted once
    the Dirichlet partition is known (the stale 5 D E_n would exceed it)."""
    from wflsim.app.run import build_engine, make_learner

    cpu_hz, c = 1e6, 10.0
    data = dirichlet_scaffold_run(cpu_hz=cpu_hz, cycles_per_sample=c)
    prep = wflsim.prepare(data)
    learner = make_learner(prep)
    steps = -(-np.asarray(learner.num_samples) // 64)
    documented = (c * 64 * steps + DIGITS_MLP_D * steps + 4 * DIGITS_MLP_D) / cpu_hz
    stale = (c * 64 * steps + 5 * DIGITS_MLP_D * steps) / cpu_hz
    deadline_s = (documented.max() + stale.max()) / 2
    assert documented.max() < deadline_s < stale.max()
    data["run"]["deadline_s"] = deadline_s
    prep = wflsim.prepare(data)
    build_engine(prep, make_learner(prep))  # not refused


def test_prepare_refuses_a_deadline_that_only_scaffold_cycles_exceed():
    """Network only, E = 1: c B / f fits the deadline but (c B + D + 4 D) / f does not; the
    scenario is refused on run.deadline_s before it runs."""
    data = base_scenario(
        run={"deadline_s": 0.1},
        devices={"batch_size": 100, "cpu_hz": 1e6, "cycles_per_sample": 100.0},
        learning={"enabled": False, "num_params": NUM_PARAMS, "local_steps": 1},
        strategy={"name": "scaffold"},
    )
    # c B / f = 0.01 s, (c B + 5 D) / f = 0.51 s
    with pytest.raises(wflsim.ScenarioError, match="run.deadline_s"):
        wflsim.prepare(data)


# ---------------------------------------------------------------------------- stale updates


def stale_learner():
    """A prepared learner of the tiny digits run with SCAFFOLD and 2 local steps (async)."""
    from wflsim.app.run import build_engine, make_learner

    prep = wflsim.prepare(scaffold_run("async"))
    learner = make_learner(prep)
    build_engine(prep, learner)
    learner.begin_frame(0, FreezingInputs(np.zeros(3, dtype=np.int64)))
    return learner


def two_updates_of_device_0_in_flight(learner) -> torch.Tensor:
    """Devices 0 and 1 update (step 1); device 0 starts updates 2 and 3 on version 1, and step 2
    applies update 2 only. Returns device 0's c_i as updates 2 and 3 started."""
    learner.start_update(0, 0, 0, 0)
    learner.start_update(1, 1, 1, 0)
    learner.apply_updates(0, np.array([0, 1]), np.ones(2), 1.0)
    learner.materialise()
    started = learner.strategy.c_dev[0].clone()
    assert started.any()
    learner.start_update(2, 0, 2, 1)
    learner.start_update(3, 0, 3, 1)
    learner.apply_updates(1, np.array([2]), np.ones(1), 1.0)
    learner.materialise()
    return started


def test_a_stale_update_reads_its_device_variate_as_it_started():
    """Device 0's update 3 started before step 2 changed its c_i: its local steps read the c_i
    of its start, not the changed one."""
    learner = stale_learner()
    seen: list[torch.Tensor] = []
    drift = learner.strategy.local_drift

    def recording(devices, at, rows):
        seen.append(rows.clone())
        return drift(devices, at, rows)

    learner.strategy.local_drift = recording
    started = two_updates_of_device_0_in_flight(learner)
    assert not torch.equal(learner.strategy.c_dev[0], started)  # step 2 changed it
    learner.apply_updates(2, np.array([3]), np.ones(1), 1.0)
    learner.materialise()
    torch.testing.assert_close(seen[-1][0], started, rtol=0, atol=0)


def test_a_checkpoint_with_a_kept_variate_resumes_exactly():
    """Saved with update 3 in flight (its device's c_i kept), loaded into a fresh learner: step 3
    gives both learners the same model and control variates."""
    a = stale_learner()
    two_updates_of_device_0_in_flight(a)
    a.end_frame(0)  # checkpoints are taken at frame ends
    state = a.state_dict()
    assert len(state["stale"]["pinned_keys"]) == 1
    b = stale_learner()
    b.load_state_dict(copy.deepcopy(state))
    for learner in (a, b):
        learner.begin_frame(1, FreezingInputs(np.zeros(3, dtype=np.int64)))
        learner.apply_updates(2, np.array([3]), np.ones(1), 1.0)
        learner.materialise()
    torch.testing.assert_close(a.global_params(), b.global_params(), rtol=0, atol=0)
    torch.testing.assert_close(a.strategy.c, b.strategy.c, rtol=0, atol=0)
    torch.testing.assert_close(a.strategy.c_dev, b.strategy.c_dev, rtol=0, atol=0)


def test_a_later_update_replaces_the_variate_its_device_started_from():
    """Device 0's updates A and B both start from c_0 = r; A is applied, then B: c_0 = r + dc_B
    (B's c_0+ replaces A's, as the device computed it), and c stays the mean of the c_i."""
    strat = scaffold(4, 2)
    gen = torch.Generator().manual_seed(1)
    r = strat.device_rows(np.array([0]))
    assert r is not None
    c0 = strat.version_state()
    u_a, u_b = torch.randn(1, 4, generator=gen), torch.randn(1, 4, generator=gen)
    strat.arrived(np.array([0]), u_a, np.array([2]), None, [c0], r)
    strat.arrived(np.array([0]), u_b, np.array([2]), None, [c0], r)
    want = r[0] + (u_b[0] / 2 - c0)
    torch.testing.assert_close(strat.c_dev[0], want)
    torch.testing.assert_close(strat.c, strat.c_dev.mean(dim=0))


def test_two_updates_of_one_device_in_one_step_leave_the_later_variate():
    """Updates A then B of device 1 in one step, both from c_1 = 0: c_1 = dc_B, c = mean c_i."""
    strat = scaffold(3, 2)
    u = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    zero = torch.zeros(2, 3)
    strat.arrived(np.array([1, 1]), u, np.array([1, 1]), None, [strat.c, strat.c], zero)
    torch.testing.assert_close(strat.c_dev[1], u[1])
    torch.testing.assert_close(strat.c, strat.c_dev.mean(dim=0))


def test_a_stale_update_replaces_the_variate_it_started_from_in_a_run():
    """Device 0's update 3 started before step 2 applied its update 2: after step 3 its c_0 is
    the c_0 update 3 started from plus update 3's dc (not plus update 2's as well)."""
    learner = stale_learner()
    seen: list[tuple[Any, ...]] = []
    arrived = learner.strategy.arrived

    def recording(devices, uploads, steps, trained, at, rows=None):
        seen.append((uploads.clone(), steps.copy(), at[0]))
        return arrived(devices, uploads, steps, trained, at, rows)

    learner.strategy.arrived = recording
    started = two_updates_of_device_0_in_flight(learner)
    learner.apply_updates(2, np.array([3]), np.ones(1), 1.0)
    learner.materialise()
    uploads, steps, c_at = seen[-1]
    want = started + (uploads[0] / float(steps[0]) - c_at)
    torch.testing.assert_close(learner.strategy.c_dev[0], want)
