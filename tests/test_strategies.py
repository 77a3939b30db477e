"""Server strategies (``[strategy]``): the server optimisers' steps against the equations of
Reddi et al. (ICLR 2021, Algorithm 2), FedAvg bit for bit, the learner's use of them in every
server mode, checkpoints, registration from Python and the validation of the table."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

import wflsim
from conftest import (
    assert_resume_equals_whole,
    assert_same_but_strategy_rows,
    base_scenario,
    tiny_learning_scenario,
)
from wflsim.app.scenario import validate_scenario
from wflsim.models.learner.strategies import BUILT_IN, StrategySettings
from wflsim.models.registry import build_strategy
from wflsim.sim.errors import ScenarioError
from wflsim.sim.registry import STRATEGIES
from wflsim.sim.strategies import StrategySpec
from wflsim.sim.updates import FreezingInputs

pytestmark = pytest.mark.usefixtures("forget_registrations")

#: 3 devices learning the digits MLP, 2 frames of 3 slots.
LEARN = tiny_learning_scenario()
OPTIMISERS = ("fedavgm", "fedadagrad", "fedadam", "fedyogi")
D = 40
#: float32 steps against a float64 reference
RTOL, ATOL = 1e-5, 1e-7


def strategy(name: str, **params: Any):
    """The built-in strategy ``name`` for ``D`` parameters on the CPU."""
    return build_strategy(StrategySpec(name, params), StrategySettings(D, torch.device("cpu")))


def reference(name: str, w: np.ndarray, gs: list[np.ndarray], lrs: list[float], **p: Any):
    """The paper's Algorithm 2 in float64, written from the equations: the model after each step."""
    full = STRATEGIES[name].params(**p)
    eta = full.eta
    b1 = getattr(full, "b1", 0.0)
    b2 = getattr(full, "b2", 0.0)
    tau = getattr(full, "tau", 0.0)
    m = np.zeros_like(w)
    v = np.full_like(w, tau**2)
    out = []
    for g, lr in zip(gs, lrs, strict=True):
        delta = -lr * g
        if name == "fedavgm":
            m = full.beta * m + delta
            w = w + eta * m
        else:
            m = b1 * m + (1 - b1) * delta
            if name == "fedadagrad":
                v = v + delta**2
            elif name == "fedadam":
                v = b2 * v + (1 - b2) * delta**2
            else:
                v = v - (1 - b2) * delta**2 * np.sign(v - delta**2)
            w = w + eta * m / (np.sqrt(v) + tau)
        out.append(w)
    return out


def random_steps(seed: int, steps: int = 5):
    """A model, ``steps`` pseudo-gradients and rates."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=D).astype(np.float32)
    gs = [rng.normal(scale=2.0, size=D).astype(np.float32) for _ in range(steps)]
    lrs = list(rng.uniform(0.01, 0.5, size=steps))
    return w, gs, lrs


@pytest.mark.parametrize("name", OPTIMISERS)
@pytest.mark.parametrize("params", [{}, {"eta": 0.3}])
def test_server_optimiser_follows_its_equations(name, params):
    """Five steps of each server optimiser on random g equal a float64 reference (rtol 1e-5)."""
    w, gs, lrs = random_steps(seed=len(name))
    s = strategy(name, **params)
    want = reference(name, w.astype(np.float64), [g.astype(np.float64) for g in gs], lrs, **params)
    wt = torch.as_tensor(w)
    for g, lr, expected in zip(gs, lrs, want, strict=True):
        wt = s.server_step(wt, torch.as_tensor(g), lr)
        assert wt.dtype == torch.float32
        np.testing.assert_allclose(wt.numpy(), expected, rtol=RTOL, atol=ATOL)


def test_fedavg_step_is_w_minus_lr_g_bit_for_bit():
    """fedavg's server_step is exactly the learner's former w - lr * g."""
    w, gs, lrs = random_steps(seed=1)
    wt, g = torch.as_tensor(w), torch.as_tensor(gs[0])
    assert torch.equal(strategy("fedavg").server_step(wt, g, lrs[0]), wt - lrs[0] * g)


def test_strategy_state_round_trips_through_state_dict():
    """A strategy restored from state_dict() after 3 steps continues exactly as the original."""
    w, gs, lrs = random_steps(seed=2)
    for name in OPTIMISERS:
        a = strategy(name)
        wa = torch.as_tensor(w)
        for g, lr in zip(gs[:3], lrs[:3], strict=True):
            wa = a.server_step(wa, torch.as_tensor(g), lr)
        b = strategy(name)
        b.load_state_dict(copy.deepcopy(a.state_dict()))
        wb = wa.clone()
        for g, lr in zip(gs[3:], lrs[3:], strict=True):
            wa = a.server_step(wa, torch.as_tensor(g), lr)
            wb = b.server_step(wb, torch.as_tensor(g), lr)
        assert torch.equal(wa, wb), name


def test_a_saved_state_of_the_wrong_size_is_refused():
    """Loading moments of another D raises ValueError naming the entry."""
    with pytest.raises(ValueError, match="'m'"):
        strategy("fedadam").load_state_dict({"m": np.zeros(3), "v": np.zeros(3)})


# ---------------------------------------------------------------------------- the learner


def learner_with(name: str, **server: Any):
    """A prepared learner of LEARN with the strategy ``name``, its engine built."""
    from wflsim.app.run import build_engine, make_learner

    data = {**LEARN, "strategy": {"name": name}, "server": {"mode": "sync", **server}}
    prep = wflsim.prepare(data)
    learner = make_learner(prep)
    build_engine(prep, learner)
    return learner


def test_an_empty_synchronous_step_leaves_model_and_state_unchanged():
    """apply() with no arrival after a real step: the model and fedadam's moments stay."""
    learner = learner_with("fedadam")
    learner.begin_frame(0, FreezingInputs(np.zeros(3, dtype=np.int64)))
    ids = np.arange(3)
    learner.compute(0, ids)
    learner.apply(0, ids)
    before = (learner.global_params(), copy.deepcopy(learner.strategy.state_dict()))
    learner.compute(1, ids)
    learner.apply(1, np.empty(0, dtype=np.int64))
    assert torch.equal(learner.global_params(), before[0])
    for key, value in learner.strategy.state_dict().items():
        np.testing.assert_array_equal(value, before[1][key])


def test_an_empty_stale_step_leaves_model_and_state_unchanged():
    """A semi_sync/async server step with no update: the model and fedyogi's moments stay."""
    learner = learner_with("fedyogi")
    learner.begin_frame(0, FreezingInputs(np.zeros(3, dtype=np.int64)))
    learner.start_update(0, 1, 0, 0)
    learner.apply_updates(0, np.array([0]), np.array([1.0]), 0.5)
    learner.materialise()
    before = (learner.global_params(), copy.deepcopy(learner.strategy.state_dict()))
    assert learner.strategy.state_dict()["m"].any()  # the first step moved the momentum
    learner.apply_updates(1, np.empty(0, dtype=np.int64), np.empty(0), 0.5)
    learner.materialise()
    assert learner.version == 2
    assert torch.equal(learner.global_params(), before[0])
    for key, value in learner.strategy.state_dict().items():
        np.testing.assert_array_equal(value, before[1][key])


def test_the_learner_checkpoint_holds_the_strategy_and_an_old_one_loads_fresh():
    """state_dict() has "strategy"; a checkpoint without it leaves the strategy as built."""
    learner = learner_with("fedavgm")
    learner.begin_frame(0, FreezingInputs(np.zeros(3, dtype=np.int64)))
    learner.compute(0, np.arange(3))
    learner.apply(0, np.arange(3))
    learner.end_frame(0)
    state = learner.state_dict()
    assert state["strategy"]["m"].any()
    fresh = learner_with("fedavgm")
    fresh.load_state_dict({k: v for k, v in state.items() if k != "strategy"})
    assert not fresh.strategy.state_dict()["m"].any()
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh.strategy.state_dict()["m"], state["strategy"]["m"])


# ---------------------------------------------------------------------------- runs


@pytest.mark.parametrize("mode", ["sync", "semi_sync", "async"])
@pytest.mark.parametrize("name", list(BUILT_IN))
def test_every_strategy_runs_in_every_server_mode(name, mode):
    """A tiny digits run completes with each built-in strategy under each server mode."""
    data = {**LEARN, "strategy": {"name": name}, "server": {"mode": mode}}
    res = wflsim.run(data, progress=False)
    assert res.summary["slots"] == 6
    assert np.isfinite(res.summary["final_accuracy"])


def test_momentum_without_momentum_is_fedavg_bit_for_bit():
    """fedavgm with beta = 0 and eta = 1 writes fedavg's events exactly (the learner calls it),
    plus its strategy rows (one per applied upload; fedavg writes none)."""
    plain = wflsim.run(LEARN, progress=False).events
    same = {**LEARN, "strategy": {"name": "fedavgm", "beta": 0.0, "eta": 1.0}}
    events = wflsim.run(same, progress=False).events
    assert (events.event == "strategy").sum() == (plain.event == "upload_end").sum()
    assert_same_but_strategy_rows(events, plain)


def test_a_server_optimiser_changes_the_model():
    """fedadam's run ends with another model than fedavg's (the strategy is used)."""
    final: dict[str, np.ndarray] = {}

    def keep(name):
        return wflsim.Callbacks(on_frame_end=lambda v: final.__setitem__(name, v.params()))

    wflsim.run(LEARN, callbacks=keep("fedavg"), progress=False)
    adam = {**LEARN, "strategy": {"name": "fedadam"}}
    wflsim.run(adam, callbacks=keep("fedadam"), progress=False)
    assert not np.array_equal(final["fedavg"], final["fedadam"])


def test_network_only_runs_accept_any_strategy_and_are_unchanged():
    """Without learning, fedyogi leaves the trace of fedavg (a network-only run has no model)."""
    net = base_scenario()
    plain = wflsim.run(net, progress=False).events
    yogi = wflsim.run({**net, "strategy": {"name": "fedyogi"}}, progress=False).events
    pd.testing.assert_frame_equal(yogi, plain)


def test_a_learner_without_set_strategy_takes_only_fedavg():
    """A learner of one's own without set_strategy: fedavg runs, fedadam is refused by name."""
    from wflsim.app.run import build_engine
    from wflsim.sim.learner import NullLearner

    class Mine(NullLearner):
        set_strategy = None  # a learner that has no such method

    net = base_scenario()
    build_engine(wflsim.prepare(net), Mine(100_000))
    prep = wflsim.prepare({**net, "strategy": {"name": "fedadam"}})
    with pytest.raises(ValueError, match="fedadam.*set_strategy"):
        build_engine(prep, Mine(100_000))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_resumed_fedadam_run_equals_the_uninterrupted_run(tmp_path, mode):
    """fedadam failed in frame 2 and resumed from its checkpoint: the events (network side and
    evaluations) and the final model equal the uninterrupted run's."""
    data = {
        **LEARN,
        "run": {**LEARN["run"], "frames": 3},
        "strategy": {"name": "fedadam", "eta": 0.05},
        "server": {"mode": mode},
    }
    assert_resume_equals_whole(data, tmp_path / "run")


@pytest.mark.slow
def test_a_strategy_registered_from_python_runs_in_a_two_worker_sweep(tmp_path):
    """A user strategy (clipped server step, its own parameter) runs in a sweep of 2 worker
    processes over its parameter, each point as the same run in this process."""

    class ClipParams(BaseModel):
        """The clipping threshold."""

        model_config = ConfigDict(extra="forbid")
        clip: float = Field(1.0, gt=0)

    class Clipped(wflsim.Strategy):
        """FedAvg with the server's move clipped to norm ``clip``."""

        def server_step(self, w, g, lr):
            move = lr * g
            norm = float(torch.linalg.vector_norm(move))
            return w - move * min(1.0, self.params.clip / max(norm, 1e-12))

    wflsim.register_strategy("clipped", Clipped, params=ClipParams)
    assert STRATEGIES["clipped"].description.startswith("FedAvg with the server's move")
    data = {**LEARN, "strategy": {"name": "clipped"}}
    res = wflsim.sweep(data, {"strategy.clip": [0.01, 10.0]}, out=tmp_path / "sw", workers=2)
    assert len(res.points) == 2
    runs = {}
    for name, point in res.points.items():
        assert point["status"] == "completed", point
        runs[name] = res.run(name)
    for clip in (0.01, 10.0):
        (name,) = (n for n, r in runs.items() if r.scenario["strategy"]["clip"] == clip)
        here = wflsim.run({**data, "strategy": {"name": "clipped", "clip": clip}}, progress=False)
        pd.testing.assert_frame_equal(runs[name].events, here.events)


def test_a_strategy_registered_without_params_refuses_every_parameter():
    """params=None: [strategy] of that name takes no field (strategy.<field> named)."""
    wflsim.register_strategy("plain", wflsim.Strategy)
    validate_scenario(base_scenario(strategy={"name": "plain"}))
    with pytest.raises(ScenarioError) as err:
        validate_scenario(base_scenario(strategy={"name": "plain", "eta": 1.0}))
    assert err.value.field == "strategy.eta"


# ---------------------------------------------------------------------------- validation


def strategy_error(table: dict[str, Any]) -> ScenarioError:
    """The ScenarioError of a scenario with ``[strategy]`` = ``table``."""
    with pytest.raises(ScenarioError) as err:
        validate_scenario(base_scenario(strategy=table))
    return err.value


def test_an_unknown_strategy_is_refused_listing_the_known_ones():
    """strategy.name = "fedsgd": ScenarioError on strategy.name listing every built-in."""
    err = strategy_error({"name": "fedsgd"})
    assert err.field == "strategy.name"
    assert all(name in err.problem for name in BUILT_IN)


@given(st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True))
@settings(max_examples=25, deadline=None)
def test_an_unknown_parameter_is_refused_by_name(param):
    """A parameter fedadam does not take: ScenarioError on strategy.<param>."""
    if param in STRATEGIES["fedadam"].params.model_fields or param == "name":
        return
    assert strategy_error({"name": "fedadam", param: 0.5}).field == f"strategy.{param}"


@given(
    st.sampled_from(["b1", "b2"]),
    st.one_of(st.floats(max_value=-1e-9), st.floats(min_value=1.0), st.just(float("nan"))),
)
@settings(max_examples=40, deadline=None)
def test_a_decay_outside_zero_one_is_refused(field, value):
    """b1 or b2 outside [0, 1) (or NaN, inf): ScenarioError on strategy.<field>."""
    assert strategy_error({"name": "fedyogi", field: value}).field == f"strategy.{field}"


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"name": "fedadam", "eta": "0.1"}, "strategy.eta"),
        ({"name": "fedadam", "tau": True}, "strategy.tau"),
        ({"name": "fedavgm", "beta": [0.9]}, "strategy.beta"),
        ({"name": "fedadam", "tau": 0.0}, "strategy.tau"),
        ({"name": "fedavg", "eta": 1.0}, "strategy.eta"),
        ({"name": 3}, "strategy.name"),
    ],
)
def test_a_wrong_type_or_value_is_refused_by_field(table, field):
    """Wrong types, zero tau and a parameter fedavg does not take name their field."""
    assert strategy_error(table).field == field


def test_the_cli_exits_2_on_a_bad_strategy(tmp_path, capsys):
    """wflsim validate --set strategy.b2=2: exit 2, one line naming strategy.b2."""
    from wflsim.app.cli import main

    path = tmp_path / "s.toml"
    path.write_text(
        '[learning]\nenabled = false\nnum_params = 1000\n[strategy]\nname = "fedadam"\n'
    )
    assert main(["validate", str(path), "--set", "strategy.b2=2.0"]) == 2
    assert "strategy.b2" in capsys.readouterr().err


def test_every_strategy_is_documented():
    """Every built-in strategy and each of its parameters appears in docs/scenario.md."""
    from conftest import REPO

    doc = (REPO / "docs" / "scenario.md").read_text()
    for name in BUILT_IN:
        assert f"`{name}`" in doc, name
        for field in STRATEGIES[name].params.model_fields:
            assert f"| `{field}` |" in doc, (name, field)
