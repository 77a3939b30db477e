"""Stale updates: the semi_sync and async server modes, their learner side and their clock."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import LOCKSTEP, base_scenario, events, run_in_memory, saved_and_continued
from golden_runs import column_hashes
from wflsim.sim.errors import ScenarioError
from wflsim.sim.servers import staleness_weight


def with_server(data: dict[str, Any], **server: Any) -> dict[str, Any]:
    """A copy of a scenario table with a ``[server]`` table."""
    out = copy.deepcopy(data)
    out["server"] = server
    return out


def learner_and_table(data: dict[str, Any], hooks: Any = None) -> tuple[Any, Any, Any]:
    """Run a scenario in memory: (engine, trace, stats)."""
    import wflsim
    from wflsim.app.run import build_engine, make_learner

    prep = wflsim.prepare(data)
    engine = build_engine(prep, make_learner(prep), hooks=hooks)
    stats = engine.run()
    return engine, engine.table(), stats


# ---------------------------------------------------------------------------- staleness weights


def test_staleness_weights_match_their_closed_forms():
    """constant is 1, polynomial (1 + s)^-a, hinge 1 up to b then 1 / (a (s - b) + 1)."""
    s = np.array([0, 1, 3, 4, 5, 9])
    assert np.array_equal(staleness_weight(s, "constant"), np.ones(6))
    assert np.allclose(
        staleness_weight(s, "polynomial", a=0.5), [1, 2**-0.5, 0.5, 5**-0.5, 6**-0.5, 10**-0.5]
    )
    assert np.allclose(staleness_weight(s, "hinge", a=2.0, b=4), [1, 1, 1, 1, 1 / 3, 1 / 11])


def test_staleness_weights_refuse_negative_staleness():
    """A negative staleness is a ValueError."""
    with pytest.raises(ValueError, match="staleness"):
        staleness_weight([-1], "polynomial")


def test_server_step_matches_a_hand_computation_on_three_devices():
    """Three devices, two steps, polynomial weights: the learner's model is the hand formula."""
    from wflsim.models.learner import TorchLearner

    def learner() -> TorchLearner:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 3))
        gen = np.random.default_rng(0)
        x = torch.as_tensor(gen.normal(size=(30, 4)), dtype=torch.float32)
        y = torch.as_tensor(gen.integers(0, 3, 30))
        parts = [np.arange(0, 10), np.arange(10, 20), np.arange(20, 30)]
        return TorchLearner(
            model=model,
            x_train=x,
            y_train=y,
            x_test=x,
            y_test=y,
            parts=parts,
            batch_sizes=[2, 3, 5],
            lr=0.1,
            sampling_streams=_Streams(),
        )

    from wflsim.sim.updates import FreezingInputs

    nothing = FreezingInputs(frozen_count=np.zeros(3, dtype=np.int64))
    a = learner()
    a.begin_frame(0, nothing)
    w0 = a.global_params()
    a.start_update(0, device=0, sample_key=0)  # version 0
    a.start_update(1, device=1, sample_key=0)  # version 0
    a.apply_updates(0, np.array([0]), staleness_weight([0], "polynomial"), server_lr=2.0)
    a.start_update(2, device=2, sample_key=1)  # version 1
    w_s = staleness_weight([1, 0], "polynomial")  # device 1 missed one step
    a.apply_updates(1, np.array([1, 2]), w_s, server_lr=2.0)
    got = a.global_params()

    # by hand: each device's gradient at the model it downloaded, with the same minibatch
    b = learner()
    b.begin_frame(0, nothing)

    def grad(w: torch.Tensor, device: int, key: int) -> torch.Tensor:
        b.set_global_params(w)
        b.compute(key, np.array([device]))
        return b.gradients[0].clone()

    g0, g1 = grad(w0, 0, 0), grad(w0, 1, 0)
    w1 = w0 - 0.1 * 2.0 * (2 * g0) / 2
    g2 = grad(w1, 2, 1)
    w2 = w1 - 0.1 * 2.0 * (3 * 2**-0.5 * g1 + 5 * 1.0 * g2) / (3 + 5)
    assert torch.allclose(got, w2, atol=1e-6)
    assert a.stale.computed == 3


class _Streams:
    """Streams for a hand-built learner: device n's batch of key t from one seeded generator."""

    def device(self, name: str, n: int, t: int) -> np.random.Generator:
        return np.random.default_rng([n, t])

    def global_(self, name: str) -> np.random.Generator:
        return np.random.default_rng(0)

    def int_seed(self, name: str) -> int:
        return 0


# ---------------------------------------------------------------------------- equivalences


def models_after_each_slot() -> tuple[Any, list[torch.Tensor]]:
    """Engine hooks that keep the global model after every slot, and the list they fill."""
    from wflsim import Hooks

    kept: list[torch.Tensor] = []
    return Hooks(slot_end=lambda e, t, out: kept.append(e.learner.global_params())), kept


def test_semi_sync_without_late_uploads_is_the_synchronous_run():
    """Same model after every slot, same energies and queues, when no upload is late."""
    hooks_a, sync_models = models_after_each_slot()
    hooks_b, semi_models = models_after_each_slot()
    sync_engine, sync, _ = learner_and_table(LOCKSTEP, hooks_a)
    semi_engine, semi, stats = learner_and_table(with_server(LOCKSTEP, mode="semi_sync"), hooks_b)
    assert stats.updates_applied > 0
    assert (events(semi, "upload_end")["staleness"] == 0).all()  # nothing was late
    assert len(sync_models) == len(semi_models) == 12
    assert all(torch.equal(a, b) for a, b in zip(sync_models, semi_models, strict=True))
    a, b = events(sync, "energy"), events(semi, "energy")
    for col in ("energy_j", "queue_j", "success"):
        assert np.array_equal(a[col].to_numpy(), b[col].to_numpy()), col
    assert np.array_equal(events(sync, "eval")["loss"], events(semi, "eval")["loss"])


def test_semi_sync_equals_sync_with_freezing_active():
    """The golden digits run of the proposed scheme (frames 1-2 freeze parameters): semi_sync
    without late uploads gives the synchronous model and energies to the bit."""
    from golden_runs import digits

    data = digits("two_timescale", 0)
    sync_engine, sync, _ = learner_and_table(data)
    semi_engine, semi, _ = learner_and_table(with_server(data, mode="semi_sync"))
    assert (events(sync, "freeze")["gamma"] > 0).any()  # freezing is active
    assert (events(semi, "upload_end")["staleness"] == 0).all()
    assert torch.equal(sync_engine.learner.global_params(), semi_engine.learner.global_params())
    a, b = events(sync, "energy"), events(semi, "energy")
    assert np.array_equal(a["queue_j"].to_numpy(), b["queue_j"].to_numpy())


def test_frame_states_are_released_when_no_update_holds_them():
    """After 8 semi_sync frames only the current frame's freezing state is kept."""
    data = with_server(LOCKSTEP, mode="semi_sync")
    data["run"] = {**data["run"], "frames": 8}
    engine, _, _ = learner_and_table(data)
    assert engine.learner.stale.views_kept <= 2


def test_async_with_a_buffer_of_every_device_is_the_synchronous_run():
    """buffer_size = N with devices in lockstep: FedSGD step for step (model, energies)."""
    sync_engine, sync, _ = learner_and_table(LOCKSTEP)
    asy_engine, asy, stats = learner_and_table(with_server(LOCKSTEP, mode="async", buffer_size=5))
    assert stats.server_steps == len(events(sync, "aggregate"))
    assert torch.equal(sync_engine.learner.global_params(), asy_engine.learner.global_params())
    a, b = events(sync, "energy"), events(asy, "energy")
    assert np.array_equal(a["queue_j"].to_numpy(), b["queue_j"].to_numpy())


def _unequal_lockstep() -> dict[str, Any]:
    """LOCKSTEP with unequal batch sizes: unequal compute times, each upload at its p_min, so
    every arrival lands on the deadline in exact arithmetic and a rounding step either side."""
    data = copy.deepcopy(LOCKSTEP)
    data["devices"] = {**data["devices"], "batch_size": [8, 12, 16, 24, 32]}
    return data


def test_unequal_lockstep_arrivals_straddle_the_deadline_by_rounding():
    """The scenario of the next two tests: synchronous arrivals within 1e-9 tau_0 of the deadline on both sides."""
    _, sync, _ = learner_and_table(_unequal_lockstep())
    tau0 = LOCKSTEP["run"]["deadline_s"]
    ends = events(sync, "upload_end")
    starts = events(sync, "slot_start").set_index("slot")["time_s"]
    offset = ends["time_s"].to_numpy() - (starts.loc[ends["slot"]].to_numpy() + tau0)
    assert np.all(np.abs(offset) <= 1e-9 * tau0)
    assert (offset < 0).any() and (offset > 0).any()


def test_async_lockstep_with_unequal_compute_times_is_the_synchronous_run():
    """buffer_size = N, unequal compute times (arrivals a rounding step either side of the deadline): FedSGD step for step."""
    data = _unequal_lockstep()
    sync_engine, sync, _ = learner_and_table(data)
    asy_engine, asy, stats = learner_and_table(with_server(data, mode="async", buffer_size=5))
    assert stats.server_steps == len(events(sync, "aggregate"))
    assert (events(asy, "upload_end")["staleness"] == 0).all()
    assert torch.equal(sync_engine.learner.global_params(), asy_engine.learner.global_params())
    a, b = events(sync, "energy"), events(asy, "energy")
    assert np.array_equal(a["queue_j"].to_numpy(), b["queue_j"].to_numpy())


def test_semi_sync_lockstep_with_unequal_compute_times_is_the_synchronous_run():
    """semi_sync, unequal compute times: every update fresh, the synchronous model to the bit."""
    data = _unequal_lockstep()
    sync_engine, _, _ = learner_and_table(data)
    semi_engine, semi, _ = learner_and_table(with_server(data, mode="semi_sync"))
    assert (events(semi, "upload_end")["staleness"] == 0).all()
    assert torch.equal(sync_engine.learner.global_params(), semi_engine.learner.global_params())


@given(
    time_s=st.floats(0.0, 50.0, allow_nan=False),
    deadline_s=st.floats(1e-3, 2.0, allow_nan=False),
)
def test_arrivals_within_the_tolerance_of_a_slot_end_land_on_it(time_s, deadline_s):
    """on_boundary_s: within 1e-9 tau_0 of j tau_0 (either side, after the start) -> j tau_0; else unchanged."""
    from wflsim.sim.servers.cycles import on_boundary_s
    from wflsim.sim.slot import DEADLINE_REL_TOL

    got = on_boundary_s(time_s, deadline_s, 0.0)
    j = round(time_s / deadline_s)
    near = j >= 1 and abs(time_s - j * deadline_s) <= DEADLINE_REL_TOL * deadline_s
    assert got == (j * deadline_s if near else time_s)
    for step in (-1, 1):  # a rounding step either side of a boundary lands on it
        b = 3 * deadline_s
        assert on_boundary_s(float(np.nextafter(b, b + step)), deadline_s, 0.0) == b


def test_semi_sync_applies_late_uploads_in_a_later_slot():
    """Under compute jitter a late upload arrives stale (staleness >= 1) and is applied."""
    data = with_server(LOCKSTEP, mode="semi_sync")
    data["compute"] = {
        "jitter": {"model": "background_load", "probability": 0.3, "mean_extra": 1.0}
    }
    _, table, stats = learner_and_table(data)
    ends = events(table, "upload_end")
    late = ends[ends["staleness"] >= 1]
    assert len(late) > 0 and late["success"].all()
    flushed = events(table, "flush")["n_success"].sum()
    assert flushed == stats.updates_applied == ends["success"].sum() - _unflushed(table)
    assert events(table, "energy")["wasted_energy_j"].sum() == 0.0


def _unflushed(table: Any) -> int:
    """Uploads that arrived after the last flush (none in semi_sync: the last slot's end flushes)."""
    ends, flushes = events(table, "upload_end"), events(table, "flush")
    return int((ends["time_s"] > flushes["time_s"].max()).sum())


# ---------------------------------------------------------------------------- the event clock


@pytest.mark.slow  # a long statistical run; CI runs it (pytest -m slow)
def test_fedasync_staleness_is_geometric_with_mean_n_minus_one():
    """N always-online devices, i.i.d. exponential cycles, buffer 1: s ~ Geometric(1/N), mean N - 1.

    A cycle is c (1 + X), X ~ Exp(mean 1000), on a nominal compute c = 1e-5 s: 1e-5 s + Exp(mean
    1e-2 s) (the shift and the upload, about 1e-6 s, are 1e-3 of the mean). About 20,000 updates:
    the mean's standard error is about 0.07 (samples are correlated: tolerance 0.5); the pmf at
    0 and 1 within 0.015 (standard errors about 0.002)."""
    n = 10
    data = base_scenario(
        run={"frames": 1, "slots_per_frame": 2, "deadline_s": 10.0},
        network={"num_devices": n, "cell_radius_m": 100.0, "bandwidth_hz": 1e9},
        channel={"fading": "none"},
        devices={"cpu_hz": 1e9, "cycles_per_sample": 10.0, "batch_size": 1000},
        compute={"jitter": {"model": "background_load", "probability": 1.0, "mean_extra": 1000.0}},
        learning={"enabled": False, "num_params": 1000},
        server={"mode": "async", "buffer_size": 1},
    )
    table, stats = run_in_memory(data)
    s = events(table, "upload_end")["staleness"].to_numpy()
    assert s.size > 18_000
    assert abs(s.mean() - (n - 1)) < 0.5
    assert abs((s == 0).mean() - 1 / n) < 0.015
    assert abs((s == 1).mean() - (1 / n) * (1 - 1 / n)) < 0.015


@pytest.mark.parametrize("uplink", ["dedicated", "ofdma", "tdma"])
@pytest.mark.parametrize("mode", ["semi_sync", "async"])
def test_async_events_never_go_back_in_time(mode, uplink):
    """With churn and jitter, on every uplink (a shared band's completions are SimPy events, after the clock's at one instant), rows are in time order."""
    data = with_server(_churn(), mode=mode, **({"buffer_size": 3} if mode == "async" else {}))
    data["uplink"] = {"mode": uplink}
    table, _ = run_in_memory(data)
    t = table.column("time_s").to_numpy()
    assert np.all(np.diff(t) >= 0)


def _churn(devices: int = 12) -> dict[str, Any]:
    """LOCKSTEP with Rayleigh fading, random placement, churn and jitter, more devices."""
    data = copy.deepcopy(LOCKSTEP)
    data["network"] = {"num_devices": devices, "cell_radius_m": 500.0}
    data["channel"] = {"fading": "rayleigh"}
    data["mobility"] = {"model": "static"}
    data["scheme"] = {"name": "ideal"}
    data["availability"] = {
        "model": "markov",
        "online_s": {"dist": "exponential", "mean": 0.6},
        "offline_s": {"dist": "exponential", "mean": 0.3},
    }
    data["compute"] = {
        "jitter": {"model": "background_load", "probability": 0.3, "mean_extra": 2.0}
    }
    return data


# ---------------------------------------------------------------------------- resume and memory


def test_async_resume_replays_the_uninterrupted_run(tmp_path: Path):
    """Stopped after frame 1 with updates in flight, saved and continued: same events, same model."""
    data = with_server(_churn(), mode="async", buffer_size=2, staleness={"function": "polynomial"})
    whole, _ = run_in_memory(data)
    resumed = saved_and_continued(data, 1, tmp_path / "state.npz")
    assert column_hashes(resumed) == column_hashes(whole)


def test_async_run_folder_failed_mid_run_resumes_to_the_uninterrupted_events(tmp_path: Path):
    """A run folder whose run failed at frame 2 (checkpoints after frames 0 and 1), resumed with
    wflsim.resume: the events and the final accuracy of the run in one go."""
    import wflsim
    from conftest import failing_at_frame

    data = with_server(_churn(), mode="async", buffer_size=2, staleness={"function": "hinge"})
    whole = wflsim.run(data)
    with pytest.raises(RuntimeError, match="injected"):
        wflsim.run(data, out=tmp_path / "run", hooks=failing_at_frame(2))
    again = wflsim.resume(tmp_path / "run")
    assert again.status == "completed"
    a = whole.events.drop(columns=["loss", "accuracy"])
    b = again.events.drop(columns=["loss", "accuracy"])
    assert a.equals(b)
    assert np.allclose(whole.evaluations["accuracy"], again.evaluations["accuracy"], atol=1e-6)


def test_resume_keeps_updates_in_flight_across_the_cut(tmp_path: Path):
    """The checkpoint holds cycles in flight and the model versions they started on."""
    from wflsim.app.run import build_engine, make_learner, prepare_scenario
    from wflsim.sim import state
    from wflsim.sim.config.loading import validate_scenario

    data = with_server(_churn(), mode="async", buffer_size=2)
    prep = prepare_scenario(validate_scenario(data))
    engine = build_engine(prep, make_learner(prep))
    engine.run(stop_frame=1)
    saved = state.run_state(engine)
    assert len(saved["engine"]["server"]["cycles"]["device"]) > 0
    assert len(saved["learner"]["stale"]["keys"]) > 0


def test_versions_kept_are_bounded_and_unapplied_updates_cost_no_gradient():
    """200 devices, churn, max_staleness 3: at most 3 + 2 model copies; gradients = updates applied."""
    data = with_server(_churn(200), mode="async", buffer_size=10, max_staleness=3)
    data["run"] = {"frames": 2, "slots_per_frame": 4, "deadline_s": 0.1}
    engine, _, stats = learner_and_table(data)
    assert stats.drops > 0 and stats.stale_discarded > 0
    assert stats.max_versions_kept <= 3 + 2
    assert engine.learner.stale.computed == stats.updates_applied
    assert engine.learner.stale.calls < stats.server_steps  # batched across versions


# ---------------------------------------------------------------------------- known jitter


def _cycle_durations(data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(duration, power) of every cycle that arrived: decision row (its start) to upload_end."""
    _, table, _ = learner_and_table(data)
    df = table.to_pandas()
    rows = df[(df.event == "decision") & (df.participating == True)]  # noqa: E712
    ends = df[df.event == "upload_end"]
    out, power = [], []
    for dev, starts in rows.groupby("device"):
        arrive = ends[ends.device == dev].time_s.to_numpy()
        begin = starts.time_s.to_numpy()[: len(arrive)]
        # a device's cycles are sequential: its i-th start goes with its i-th arrival
        out.append(arrive - begin)
        power.append(starts.tx_power_w.to_numpy()[: len(arrive)])
    return np.concatenate(out), np.concatenate(power)


def _known_jitter(known: bool) -> dict[str, Any]:
    """FedAsync without churn, throttling jitter known or not, Ideal FL (p = min(p_min, P))."""
    data = with_server(_churn(), mode="async", buffer_size=2)
    del data["availability"]
    data["compute"] = {"jitter": {"model": "throttling", "sigma": 0.4, "known": known}}
    return data


def test_async_with_known_jitter_plans_each_cycle_on_its_own_slowdown():
    """Known slowdown: every cycle at p_min (below the peak) takes exactly tau_0 (Proposition 1 on its own slowed compute)."""
    tau0 = LOCKSTEP["run"]["deadline_s"]
    duration, power = _cycle_durations(_known_jitter(True))
    at_p_min = power < 1.0 - 1e-12  # below the peak power: p = p_min
    assert at_p_min.sum() > 20
    assert np.allclose(duration[at_p_min], tau0, rtol=1e-9, atol=0.0)


def test_async_with_unknown_jitter_misses_the_target_when_slowed():
    """The same run with known = false: slowed cycles at p_min take longer than tau_0 (the check above can fail)."""
    tau0 = LOCKSTEP["run"]["deadline_s"]
    duration, power = _cycle_durations(_known_jitter(False))
    assert (duration[power < 1.0 - 1e-12] > tau0 * (1 + 1e-6)).sum() > 5


def test_async_with_known_jitter_resumes_to_the_uninterrupted_run(tmp_path: Path):
    """Known async jitter: a run saved at a frame boundary continues to the uninterrupted trace."""
    data = _known_jitter(True)
    full, _ = run_in_memory(data)
    assert saved_and_continued(data, 1, tmp_path / "ckpt.npz").equals(full)


# ---------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "change, field",
    [
        ({"server": {"buffer_size": 4}}, "server"),
        ({"server": {"server_lr": 0.5}}, "server"),
    ],
)
def test_impossible_server_settings_are_refused(change: dict[str, Any], field: str):
    """Each impossible combination is a ScenarioError naming its field."""
    from wflsim.sim.config.loading import validate_scenario

    with pytest.raises(ScenarioError) as err:
        validate_scenario(base_scenario(**change))
    assert err.value.field.startswith(field)


@pytest.mark.parametrize("uplink", ["ofdma", "tdma"])
@pytest.mark.parametrize("mode", ["semi_sync", "async"])
def test_a_shared_uplink_runs_under_stale_updates(mode, uplink):
    """A shared band under semi_sync / async validates and binds (no refusal any more)."""
    from wflsim.sim.config.loading import validate_scenario

    data = base_scenario(server={"mode": mode}, uplink={"mode": uplink})
    assert validate_scenario(data).uplink.mode == uplink
    _, stats = run_in_memory(data)
    assert stats.cycles_ended > 0


@pytest.fixture
def rule_that_cannot_be_stale():
    """A scheme ``ideal_stuck`` (Ideal FL) whose update rule ``stuck``, registered from Python,
    says why it cannot compute stale updates; both forgotten after the test."""
    import wflsim
    from wflsim.app import extensions
    from wflsim.models.learner.rules import Freezing
    from wflsim.sim.schemes.common import CostParams, FreezingScheme
    from wflsim.sim.updates import FreezingInputs, UpdateRuleSpec

    class Stuck(FreezingScheme):
        name = "ideal_stuck"
        Params = CostParams

        def __init__(self, params: CostParams, system: Any) -> None:
            stuck = UpdateRuleSpec("stuck")
            super().__init__(params, system, freezing="none", power="no_outage", update_rule=stuck)

    wflsim.register_update_rule(
        "stuck",
        lambda params, s: Freezing(s.num_devices, s.num_params, s.device),
        inputs=FreezingInputs,
        no_stale_updates="its state is kept per slot",
    )
    wflsim.register_scheme(Stuck)
    yield "ideal_stuck"
    extensions.unregister("scheme", "ideal_stuck")
    extensions.unregister("update_rule", "stuck")


def test_a_rule_that_cannot_be_stale_is_refused_with_training(rule_that_cannot_be_stale):
    """A registered rule that says it cannot compute stale updates, under async with training:
    ScenarioError on server.mode naming the rule and its reason."""
    data = with_server(LOCKSTEP, mode="async")
    data["scheme"] = {"name": rule_that_cannot_be_stale}
    with pytest.raises(ScenarioError) as err:
        learner_and_table(data)
    assert err.value.field == "server.mode" and "stuck" in str(err.value)
    assert "its state is kept per slot" in str(err.value)


def test_every_built_in_rule_computes_stale_updates():
    """No built-in rule refuses stale updates, and each has the learner side they need."""
    from wflsim.models.learner.rules import RuleSettings, builtin_rules
    from wflsim.models.nets import build_model
    from wflsim.models.registry import RULE_BUILDERS
    from wflsim.sim.registry import UPDATE_RULES

    net = build_model("mlp", "digits")
    d = sum(p.numel() for p in net.parameters())
    settings = RuleSettings(
        3, d, torch.device("cpu"), "weighted", 1.0, _Streams(), net, ("mlp", "digits")
    )
    for name in builtin_rules():
        assert UPDATE_RULES[name].no_stale_updates is None, name
        assert hasattr(RULE_BUILDERS[name]({}, settings), "frame_view"), name


# ---------------------------------------------------------------------------- analysis


def test_tidy_tables_of_an_async_run_count_its_updates(tmp_path: Path):
    """slots() and updates() of an async run agree with the run's totals."""
    import wflsim
    from wflsim.analysis import tidy

    data = with_server(_churn(), mode="async", buffer_size=3, max_staleness=4)
    res = wflsim.run(data, out=tmp_path / "run")
    up = tidy.updates(tmp_path / "run")
    s = res.summary
    assert (up["outcome"] == "applied").sum() >= s["updates_applied"]  # the buffer at the end
    assert (up["outcome"] == "stale").sum() == s["stale_discarded"]
    assert (up["outcome"] == "dropped").sum() == s["drops"]
    sl = tidy.slots(tmp_path / "run")
    assert sl["n_success"].sum() == s["updates_applied"]
    assert np.allclose(sl["slot_duration_s"], LOCKSTEP["run"]["deadline_s"])


def test_report_of_a_stale_sweep_draws_the_staleness_figure(tmp_path: Path):
    """A report over sync, semi_sync and async runs has the staleness figure, nothing skipped
    for lack of data it should have."""
    import wflsim
    from wflsim.analysis.report import write_report

    for mode in ("sync", "semi_sync", "async"):
        server = {"mode": mode} if mode != "async" else {"mode": mode, "buffer_size": 4}
        wflsim.run(with_server(_churn(), **server), out=tmp_path / "runs" / mode)
    page = write_report(tmp_path / "runs", tmp_path / "report")
    assert (tmp_path / "report" / "figures" / "staleness.png").is_file()
    assert "Staleness of the updates: skipped" not in page.read_text(encoding="utf-8")


def test_server_labels_name_the_modes_as_the_literature_does():
    """sync, semi_sync, FedAsync, FedBuff-K, with non-default parameters in brackets."""
    from wflsim.analysis.tidy import server_label

    assert server_label({}) == "sync"
    assert server_label({"mode": "semi_sync"}) == "semi_sync"
    assert server_label({"mode": "async", "buffer_size": 1}) == "FedAsync"
    label = server_label(
        {
            "mode": "async",
            "buffer_size": 10,
            "server_lr": 0.5,
            "staleness": {"function": "polynomial", "a": 1.0},
        }
    )
    assert label == "FedBuff-10 (eta_g 0.5; polynomial a=1)"


# ---------------------------------------------------------------------------- properties


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    devices=st.integers(2, 8),
    mode=st.sampled_from(["semi_sync", "async"]),
    buffer=st.integers(1, 6),
    function=st.sampled_from(["constant", "polynomial", "hinge"]),
    limit=st.one_of(st.none(), st.integers(0, 5)),
    churn=st.booleans(),
    jitter=st.booleans(),
    scheme=st.sampled_from(["two_timescale", "ideal", "fixed_power"]),
    uplink=st.sampled_from(["dedicated", "ofdma", "tdma"]),
    seed=st.integers(0, 2**16),
)
def test_stale_update_traces_keep_their_invariants(
    devices, mode, buffer, function, limit, churn, jitter, scheme, uplink, seed
):
    """Any small network-only run with stale updates, on any uplink: rows in time order, every
    kept arrival weighted by w(staleness), steps apply what arrived, energies add up to the
    total, each upload's energy is its power times the time it transmitted."""
    server: dict[str, Any] = {"mode": mode, "staleness": {"function": function}}
    if mode == "async":
        server["buffer_size"] = buffer
    if limit is not None:
        server["max_staleness"] = limit
    data = base_scenario(
        seed=seed,
        run={"frames": 2, "slots_per_frame": 4, "deadline_s": 0.8},
        network={"num_devices": devices, "cell_radius_m": 500.0},
        scheme={"name": scheme},
        server=server,
        uplink={"mode": uplink},
    )
    if churn:
        data["availability"] = {
            "model": "markov",
            "online_s": {"dist": "exponential", "mean": 2.0},
            "offline_s": {"dist": "exponential", "mean": 1.0},
        }
    if jitter:
        data["compute"] = {
            "jitter": {"model": "background_load", "probability": 0.4, "mean_extra": 1.5}
        }
    table, stats = run_in_memory(data)
    assert np.all(np.diff(table.column("time_s").to_numpy()) >= 0)
    ends = events(table, "upload_end")
    kept = ends[ends["success"].astype(bool)]
    assert (ends["staleness"] >= 0).all()
    assert np.array_equal(ends["energy_upload_j"], ends["tx_power_w"] * ends["upload_s"])
    assert np.allclose(
        kept["staleness_weight"], staleness_weight(kept["staleness"].to_numpy(), function)
    )
    if limit is not None:
        assert (kept["staleness"] <= limit).all()
        assert (ends[~ends["success"].astype(bool)]["staleness"] > limit).all()
    flushed = int(events(table, "flush")["n_success"].sum())
    assert flushed == stats.updates_applied <= len(kept)
    assert len(kept) - flushed < max(buffer, 1) if mode == "async" else len(kept) == flushed
    energy = events(table, "energy")["energy_j"].sum()
    assert np.isclose(energy, stats.energy_j)
    assert stats.drops == len(events(table, "dropped"))
    assert 0.0 <= stats.outage_rate <= 1.0 and 0.0 <= stats.dropout_rate <= 1.0
    assert stats.cycles_ended == len(ends) + stats.drops
    assert events(table, "flush")["stable_fraction"].isna().all()


@settings(max_examples=30, deadline=None)
@given(
    field=st.sampled_from(["mode", "buffer_size", "server_lr", "max_staleness", "staleness"]),
    value=st.one_of(
        st.integers(-5, 5),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
        st.none(),
        st.just({"function": "cubic"}),
        st.just({"function": "hinge", "a": -1.0}),
    ),
)
def test_bad_server_values_are_refused_with_their_field(field, value):
    """A wrong [server] value is a ScenarioError naming server.<field> (or accepted if valid)."""
    from wflsim.sim.config.loading import validate_scenario

    data = base_scenario(
        server={"mode": "async", field: value} if field != "mode" else {field: value}
    )
    if value is None:
        data["server"].pop(field)
    valid = {
        "mode": lambda v: v in ("sync", "semi_sync", "async"),
        "buffer_size": lambda v: type(v) is int and v >= 1,
        "server_lr": lambda v: type(v) in (int, float) and 0 < v <= 1e6,
        "max_staleness": lambda v: type(v) is int and v >= 0,
        "staleness": lambda v: False,  # the dicts drawn are all wrong
    }[field]
    if value is None:
        validate_scenario(data)  # the field left out: its default
        return
    if valid(value):
        validate_scenario(data)
        return
    with pytest.raises(ScenarioError) as err:
        validate_scenario(data)
    assert err.value.field.startswith("server")


def test_cli_refuses_a_rule_that_cannot_be_stale_in_one_line_and_writes_nothing(
    tmp_path, capsys, rule_that_cannot_be_stale
):
    """`wflsim run` with a rule that cannot be stale under async: exit 2, one line naming
    server.mode, no folder."""
    from wflsim.app.cli import main

    out = tmp_path / "run"
    rc = main(
        [
            "run",
            str(Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.toml"),
            "--out",
            str(out),
            "--quiet",
            "--set",
            'server.mode="async"',
            "--set",
            f'scheme.name="{rule_that_cannot_be_stale}"',
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and not out.exists()
    assert len(err) == 1 and err[0].startswith("wflsim: error: server.mode:")


@given(
    s=st.integers(0, 10_000),
    function=st.sampled_from(["constant", "polynomial", "hinge"]),
    a=st.floats(0.0, 1e3, allow_nan=False),
    b=st.integers(0, 50),
)
def test_one_updates_weight_is_the_vectorised_weight_to_the_bit(s, function, a, b):
    """ServerConfig.weight_of (one arrival, Python floats) equals staleness_weight bit for bit."""
    from wflsim.sim.servers import ServerConfig

    cfg = ServerConfig(mode="async", staleness={"function": function, "a": a, "b": b})
    assert cfg.weight_of(s) == float(cfg.weight(s))
