"""Client-side strategies (``[strategy]``, ``models/learner/strategies_client.py``): FedProx's
local steps against a float64 reference, FedProx = FedAvg with one local step, every server mode,
and what a strategy costs a device, charged by the network side against a hand computation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

import wflsim
from conftest import REPO, base_scenario, tiny_learning_scenario
from wflsim.app import extensions
from wflsim.app.scenario import validate_scenario
from wflsim.models.learner.local import local_updates
from wflsim.models.learner.strategies import StrategySettings
from wflsim.models.learner.strategies_client import CLIENT_BUILT_IN
from wflsim.models.registry import build_strategy
from wflsim.sim.errors import ScenarioError
from wflsim.sim.registry import STRATEGIES, build_scheme
from wflsim.sim.schemes.base import FrameContext
from wflsim.sim.strategies import StrategyCosts, StrategySpec

pytestmark = pytest.mark.usefixtures("forget_registrations")

#: 3 devices learning the digits MLP, 2 frames of 3 slots.
LEARN = tiny_learning_scenario()
MODES = ("sync", "semi_sync", "async")
#: the network-only scenario's D
NUM_PARAMS = 100_000


def with_steps(data: dict[str, Any], steps: int) -> dict[str, Any]:
    """``data`` with ``learning.local_steps = steps``."""
    return {**data, "learning": {**data["learning"], "local_steps": steps}}


def final_model(data: dict[str, Any]) -> tuple[np.ndarray, pd.DataFrame]:
    """The model at the end of the run of ``data`` and its evaluation rows."""
    out: dict[str, np.ndarray] = {}
    cb = wflsim.Callbacks(on_frame_end=lambda v: out.__setitem__("w", v.params()))
    events = wflsim.run(data, callbacks=cb, progress=False).events
    evals = events[events.event == "eval"][["slot", "loss", "accuracy"]].reset_index(drop=True)
    return out["w"], evals


# ---------------------------------------------------------------------------- FedProx's steps


class LeastSquares:
    """A tiny model for :func:`local_updates`: device ``n``'s loss on batch ``e`` is
    ``0.5 mean_b (x_b . w - y_b)^2``, its gradient ``X^T (X w - y) / B`` in float64 (a batch is
    ``(X, y)`` of the devices that still step: ``(n_e, B, D)``, ``(n_e, B)``)."""

    @staticmethod
    def grads(w: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]) -> Any:
        x, y = batch
        r = torch.einsum("nbd,nd->nb", x, w) - y
        g = torch.einsum("nbd,nb->nd", x, r) / x.shape[1]
        return g, 0.5 * (r * r).mean(dim=1), {}

    def compute(self, params, batch, buffers, device_buffers):
        w = params.expand(batch[0].shape[0], -1) if params.dim() == 1 else params
        return self.grads(w, batch)

    def compute_diverged(self, w, batch, buffers, bufs):
        return self.grads(w, batch)


def proximal_reference(w0, xs, ys, steps, lr, mu, trained):
    """FedProx's local steps written from the equations in float64: the pseudo-gradients
    ``(w_0 - w_E) / lr`` of each device."""
    out = []
    for n in range(w0.shape[0]):
        w = w0[n].copy()
        for e in range(steps[n]):
            x, y = xs[e][n], ys[e][n]
            grad = x.T @ (x @ w - y) / x.shape[0]
            w = w - lr[n] * trained[n] * (grad + mu * (w - w0[n]))
        out.append((w0[n] - w) / lr[n])
    return np.array(out)


@pytest.mark.parametrize("steps", [[3, 3, 3], [3, 2, 1]])
def test_fedprox_local_steps_follow_the_proximal_gradient(steps):
    """3 local steps of fedprox (equal and unequal E_n, a frozen mask) equal a float64
    reference of w <- w - lr m (grad F_n(w) + mu (w - w_0)) to 1e-12."""
    rng = np.random.default_rng(7)
    n, b, d, mu = 3, 5, 4, 0.7
    steps_a = np.array(steps)
    w0 = rng.normal(size=(n, d))
    xs = [rng.normal(size=(n, b, d)) for _ in range(3)]
    ys = [rng.normal(size=(n, b)) for _ in range(3)]
    lr = np.array([0.1, 0.2, 0.05])
    trained = np.ones((n, d), dtype=bool)
    trained[1, 2] = False
    # element e holds the devices with more than e steps
    batches = [
        (torch.as_tensor(xs[e][steps_a > e]), torch.as_tensor(ys[e][steps_a > e])) for e in range(3)
    ]
    prox = build_strategy(
        StrategySpec("fedprox", {"mu": mu}), StrategySettings(d, torch.device("cpu"))
    )
    got, _, _ = local_updates(
        LeastSquares(),  # type: ignore[arg-type]
        torch.as_tensor(w0),
        batches,  # type: ignore[arg-type]
        steps_a,
        lr,
        torch.as_tensor(trained),
        {},
        None,
        prox.local_correction,
    )
    want = proximal_reference(w0, xs, ys, steps_a, lr, mu, trained)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_fedprox_with_mu_zero_adds_nothing():
    """mu = 0: local_correction returns None (the plain gradient, FedAvg's steps)."""
    prox = build_strategy(
        StrategySpec("fedprox", {"mu": 0.0}), StrategySettings(4, torch.device("cpu"))
    )
    assert prox.local_correction(torch.ones(2, 4), torch.zeros(4)) is None


def test_fedprox_with_one_local_step_trains_as_fedavg():
    """E_n = 1: fedprox (mu = 0.5) ends with fedavg's model and evaluations, bit for bit."""
    w_avg, ev_avg = final_model(LEARN)
    w_prox, ev_prox = final_model({**LEARN, "strategy": {"name": "fedprox", "mu": 0.5}})
    np.testing.assert_array_equal(w_prox, w_avg)
    pd.testing.assert_frame_equal(ev_prox, ev_avg)


@pytest.mark.parametrize("mode", MODES)
def test_fedprox_with_local_steps_trains_another_model(mode):
    """E_n = 3: fedprox's final model differs from fedavg's in each server mode (the sync and
    the stale learner both apply the proximal term)."""
    base = with_steps({**LEARN, "server": {"mode": mode}}, 3)
    w_avg, _ = final_model(base)
    w_prox, _ = final_model({**base, "strategy": {"name": "fedprox", "mu": 1.0}})
    assert np.isfinite(w_prox).all()
    assert not np.array_equal(w_prox, w_avg)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(CLIENT_BUILT_IN))
def test_every_client_strategy_runs_in_every_server_mode(name, mode):
    """A tiny digits run with 2 local steps completes with each client strategy in each mode."""
    data = with_steps({**LEARN, "strategy": {"name": name}, "server": {"mode": mode}}, 2)
    res = wflsim.run(data, progress=False)
    assert res.summary["slots"] == 6
    assert np.isfinite(res.summary["final_accuracy"])


# ---------------------------------------------------------------------------- costs


def network_run(strategy: dict[str, Any], mode: str = "sync", steps: int = 3) -> pd.DataFrame:
    """The events of the network-only base scenario (D = 1e5, E = ``steps``)."""
    data = base_scenario(
        server={"mode": mode},
        learning={"enabled": False, "num_params": NUM_PARAMS, "local_steps": steps},
        strategy=strategy,
    )
    return wflsim.run(data, progress=False).events


def hand_costs(events: pd.DataFrame, extra_cycles: float, steps: int) -> pd.DataFrame:
    """Per device, from its device_config row: compute time u (c + X / B) B E / f and energy
    (alpha / 2) u (c + X / B) B E f^2 at u = 1 (fixed_power computes the full gradient)."""
    cfg = events[events.event == "device_config"].set_index("device")
    c, b = cfg.cycles_per_sample.astype(float), cfg.batch_size.astype(float)
    f, alpha = cfg.cpu_hz.astype(float), cfg.capacitance.astype(float)
    cycles = (c * b + extra_cycles) * steps
    return pd.DataFrame({"compute_s": cycles / f, "energy_j": 0.5 * alpha * cycles * f * f})


@pytest.mark.parametrize("mode", MODES)
def test_fedprox_charges_its_extra_cycles_in_a_network_only_run(mode):
    """Network only, E = 3: every compute_s equals the hand computation with 2 D extra cycles
    per step, every energy row's compute energy whole updates' hand-computed energy; the
    payload stays 32 D bits."""
    events = network_run({"name": "fedprox"}, mode)
    want = hand_costs(events, 2.0 * NUM_PARAMS, 3)
    dec = events[events.compute_s.notna()]  # decision and compute_end rows of computing devices
    assert len(dec)
    np.testing.assert_allclose(
        dec.compute_s.astype(float), want.compute_s.loc[dec.device].to_numpy(), rtol=1e-12
    )
    bits = events.payload_bits.dropna()
    assert len(bits)
    np.testing.assert_array_equal(bits.astype(float), 32.0 * NUM_PARAMS)
    energy = events[(events.event == "energy") & (events.energy_compute_j > 0)]
    assert len(energy)
    # a slot's compute energy is that of the updates whose compute it charges (async: several)
    updates = energy.energy_compute_j.to_numpy(float) / want.energy_j.loc[energy.device].to_numpy()
    np.testing.assert_allclose(updates, np.maximum(np.rint(updates), 1.0), rtol=1e-12)


def test_a_strategy_with_an_upload_factor_pays_its_payload_and_cycles():
    """A registered strategy with 5 cycles per parameter and upload factor 2: decisions carry
    64 D bits and (c B + 5 D) E / f seconds, and a longer upload than fedavg's."""
    wflsim.register_strategy(
        "twice", wflsim.Strategy, costs=StrategyCosts(cycles_per_param=5.0, upload_factor=2.0)
    )
    events = network_run({"name": "twice"}, steps=2)
    dec = events[events.event == "decision"]
    np.testing.assert_array_equal(dec.payload_bits.astype(float), 64.0 * NUM_PARAMS)
    want = hand_costs(events, 5.0 * NUM_PARAMS, 2)
    np.testing.assert_allclose(
        dec.compute_s.astype(float), want.compute_s.loc[dec.device].to_numpy(), rtol=1e-12
    )
    plain = network_run({"name": "fedavg"}, steps=2)
    plain_dec = plain[plain.event == "decision"]
    assert (dec.upload_s.to_numpy() > plain_dec.upload_s.to_numpy()).all()


def test_the_controller_plans_with_the_strategy_costs():
    """two_timescale's frame controller sees S = 2 x 32 D bits and (c + X / B) E cycles per
    sample for a strategy with upload factor 2 and X = 5 D."""
    wflsim.register_strategy(
        "twice", wflsim.Strategy, costs=StrategyCosts(cycles_per_param=5.0, upload_factor=2.0)
    )
    data = base_scenario(
        scheme={"name": "two_timescale"},
        learning={"enabled": False, "num_params": NUM_PARAMS, "local_steps": 2},
        strategy={"name": "twice"},
    )
    system = wflsim.prepare(data).system
    scheme = build_scheme("two_timescale", {}, system)
    n = system.num_devices
    params = scheme.controller.params(FrameContext(0, np.full(n, 1e-9), np.zeros(n)))
    np.testing.assert_array_equal(params.model_bits, 64.0 * NUM_PARAMS)
    d = system.devices
    want = (d.cycles_per_sample + 5.0 * NUM_PARAMS / d.batch_size) * 2
    np.testing.assert_allclose(params.cycles_per_sample, want, rtol=1e-15)


def test_server_side_strategies_cost_nothing():
    """fedavg and the server optimisers: no extra cycles, upload factor 1 (today's numbers)."""
    for name in ("fedavg", "fedavgm", "fedadagrad", "fedadam", "fedyogi"):
        assert STRATEGIES[name].costs == StrategyCosts(), name
    system = wflsim.prepare(base_scenario(strategy={"name": "fedadam"})).system
    assert system.upload_factor == 1.0
    assert not system.devices.extra_cycles_per_step.any()
    np.testing.assert_array_equal(
        system.devices.step_cycles_per_sample, system.devices.cycles_per_sample
    )


@pytest.mark.parametrize(
    "kwargs", [{"cycles_per_param": -1.0}, {"upload_factor": 0.5}, {"upload_factor": np.inf}]
)
def test_bad_strategy_costs_are_refused(kwargs):
    """Negative cycles, an upload factor below 1 or infinite: ValueError."""
    with pytest.raises(ValueError):
        StrategyCosts(**kwargs)


def test_register_strategy_refuses_costs_of_another_type():
    """costs={"upload_factor": 2}: ValueError naming StrategyCosts."""
    with pytest.raises(ValueError, match="StrategyCosts"):
        wflsim.register_strategy("bad", wflsim.Strategy, costs={"upload_factor": 2})


def test_registered_costs_travel_to_sweep_workers():
    """The registration a worker replays carries the strategy's costs."""
    costs = StrategyCosts(cycles_per_param=1.0, upload_factor=2.0)
    wflsim.register_strategy("twice", wflsim.Strategy, costs=costs)
    ((_, (_, kwargs)),) = extensions.records()
    assert kwargs["costs"] == costs


# ---------------------------------------------------------------------------- validation, docs


@pytest.mark.parametrize("mu", [-0.1, float("nan"), float("inf"), "0.1"])
def test_a_bad_mu_is_refused_by_field(mu):
    """mu negative, NaN, infinite or a string: ScenarioError on strategy.mu."""
    with pytest.raises(ScenarioError) as err:
        validate_scenario(base_scenario(strategy={"name": "fedprox", "mu": mu}))
    assert err.value.field == "strategy.mu"


def test_every_client_strategy_is_documented():
    """Each client strategy and each of its parameters appears in docs/scenario.md, and in
    docs/api.md's strategy table."""
    scenario = (REPO / "docs" / "scenario.md").read_text()
    api = (REPO / "docs" / "api.md").read_text()
    for name in CLIENT_BUILT_IN:
        assert f"`{name}`" in scenario, name
        assert f"| `{name}` |" in api, name
        for field in STRATEGIES[name].params.model_fields:
            assert f"| `{field}` |" in scenario, (name, field)
