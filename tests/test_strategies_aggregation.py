"""Aggregating server strategies (``Strategy.aggregate``): the coordinate-wise median and trimmed
mean against NumPy, Krum and Multi-Krum against a brute-force score loop, FedNova against its
equation, an outlier that the robust aggregates ignore, the learner's masks and calls in every
server mode, and the validation of their parameters."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

import wflsim
from conftest import assert_same_but_strategy_rows, base_scenario, tiny_learning_scenario
from wflsim.app.scenario import validate_scenario
from wflsim.models.learner import aggregate
from wflsim.models.learner.strategies import StrategySettings, rule_mean_over
from wflsim.models.learner.strategies_aggregation import AGGREGATING
from wflsim.models.registry import build_strategy
from wflsim.sim.errors import ScenarioError
from wflsim.sim.strategies import StrategySpec

pytestmark = pytest.mark.usefixtures("forget_registrations")

#: 3 devices learning the digits MLP, 2 frames of 3 slots.
LEARN = tiny_learning_scenario()
D = 50
#: float32 aggregates against a float64 reference
RTOL, ATOL = 1e-5, 1e-6


def strategy(name: str, **params: Any):
    """The built-in strategy ``name`` for ``D`` parameters on the CPU."""
    return build_strategy(StrategySpec(name, params), StrategySettings(D, torch.device("cpu")))


class Recorder:
    """A rule_mean over eq. 3's weighted mean that records the rows it is asked for."""

    def __init__(self, uploads: torch.Tensor, weights: torch.Tensor) -> None:
        self.rows: list[np.ndarray] = []

        def call(index, values):
            w = weights if index is None else weights[torch.as_tensor(index)]
            self.rows.append(np.arange(len(weights)) if index is None else index)
            return aggregate.weighted_mean(values, w)

        self.mean = rule_mean_over(uploads, call)


def random_step(seed: int, k: int, masked: bool = False):
    """``k`` float32 uploads ``(k, D)``, weights, steps, and a mask with one coordinate nobody
    sent and one that one device sent (None unless ``masked``)."""
    rng = np.random.default_rng(seed)
    uploads = torch.as_tensor(rng.normal(size=(k, D)).astype(np.float32))
    weights = torch.as_tensor(rng.integers(8, 64, size=k).astype(np.float32))
    steps = rng.integers(1, 6, size=k).astype(np.int64)
    mask = None
    if masked:
        m = rng.random((k, D)) < 0.7
        m[:, 0] = False
        m[:, 1] = False
        m[0, 1] = True
        mask = torch.as_tensor(m)
        uploads = uploads.masked_fill(~mask, 0.0)
    return uploads, weights, steps, mask


def per_coordinate(uploads, mask, reduce) -> np.ndarray:
    """``reduce`` of each coordinate's sent values in float64 (0 where none was sent)."""
    u = uploads.numpy().astype(np.float64)
    m = np.ones(u.shape, bool) if mask is None else mask.numpy()
    return np.array([reduce(u[m[:, j], j]) if m[:, j].any() else 0.0 for j in range(D)])


def run_aggregate(name: str, uploads, weights, steps, mask, **params) -> torch.Tensor:
    """``name``'s aggregate of one step (rule_mean: eq. 3)."""
    rec = Recorder(uploads, weights)
    return strategy(name, **params).aggregate(uploads, weights, steps, mask, rec.mean)


# ---------------------------------------------------------------------------- the aggregates


@pytest.mark.parametrize("k", [5, 6])
@pytest.mark.parametrize("masked", [False, True])
def test_median_equals_numpys_median_per_coordinate(k, masked):
    """fedmedian equals np.median over each coordinate's sent values (odd and even k; rtol 1e-5)."""
    uploads, weights, steps, mask = random_step(k + 10 * masked, k, masked)
    got = run_aggregate("fedmedian", uploads, weights, steps, mask)
    want = per_coordinate(uploads, mask, np.median)
    np.testing.assert_allclose(got.numpy(), want, rtol=RTOL, atol=ATOL)


def test_median_of_an_even_count_is_the_mean_of_the_two_middle_values():
    """Of 1, 2, 10, 20 the median is 6 (numpy's convention; torch.median would give 2)."""
    uploads = torch.tensor([[1.0], [20.0], [2.0], [10.0]]).expand(4, D).contiguous()
    got = run_aggregate("fedmedian", uploads, torch.ones(4), np.ones(4, np.int64), None)
    assert torch.all(got == 6.0)


@pytest.mark.parametrize("k", [7, 10])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("beta", [0.0, 0.1, 0.25, 0.49])
def test_trimmed_mean_equals_a_numpy_reference(k, masked, beta):
    """fedtrimmedavg drops floor(beta c) values at each end of each coordinate's c sent values
    and averages the rest, as a float64 NumPy reference (rtol 1e-5)."""
    uploads, weights, steps, mask = random_step(k + 10 * masked, k, masked)

    def trimmed(x: np.ndarray) -> float:
        t = math.floor(beta * x.size)
        return float(np.sort(x)[t : x.size - t].mean())

    got = run_aggregate("fedtrimmedavg", uploads, weights, steps, mask, beta=beta)
    want = per_coordinate(uploads, mask, trimmed)
    np.testing.assert_allclose(got.numpy(), want, rtol=RTOL, atol=ATOL)


def test_a_coordinate_nobody_sent_aggregates_to_zero():
    """Under masks, a coordinate no device sent is 0 for fedmedian and fedtrimmedavg."""
    uploads, weights, steps, mask = random_step(3, 6, masked=True)
    for name in ("fedmedian", "fedtrimmedavg"):
        assert run_aggregate(name, uploads, weights, steps, mask)[0] == 0.0, name


@pytest.mark.parametrize(
    ("name", "params"),
    [("fedmedian", {}), ("fedtrimmedavg", {"beta": 0.2}), ("krum", {"f": 1})],
)
def test_one_outlier_upload_is_ignored_by_robust_aggregates_and_moves_fedavg(name, params):
    """Four honest uploads near 1 and one at 1e3: the robust aggregate stays within the honest
    values; fedavg's moves by about 200."""
    rng = np.random.default_rng(0)
    honest = 1.0 + 0.01 * rng.normal(size=(4, D))
    uploads = torch.as_tensor(np.vstack([honest, np.full((1, D), 1e3)]).astype(np.float32))
    weights, steps = torch.full((5,), 16.0), np.ones(5, np.int64)
    got = run_aggregate(name, uploads, weights, steps, None, **params).numpy()
    assert np.all(got >= honest.min(0) - 1e-6) and np.all(got <= honest.max(0) + 1e-6)
    mean = run_aggregate("fedavg", uploads, weights, steps, None).numpy()
    assert np.all(mean > 150.0)


def brute_force_krum(uploads: torch.Tensor, f: int, m: int) -> list[int]:
    """The rows Krum keeps, from the definition by loops in float64."""
    u = uploads.numpy().astype(np.float64)
    k = len(u)
    scores = []
    for i in range(k):
        dists = sorted(float(((u[i] - u[j]) ** 2).sum()) for j in range(k) if j != i)
        scores.append(sum(dists[: k - f - 2]))
    order = sorted(range(k), key=lambda i: (scores[i], i))
    return sorted(order[:m])


@pytest.mark.parametrize(("k", "f", "m"), [(5, 0, 1), (5, 1, 1), (9, 2, 1), (9, 2, 4), (7, 1, 7)])
def test_krum_keeps_the_rows_of_a_brute_force_score_loop(k, f, m):
    """Krum (m = 1) and Multi-Krum (m > 1) hand rule_mean the rows a brute-force loop keeps, and
    return its aggregate of them."""
    uploads, weights, steps, _ = random_step(k * 100 + f * 10 + m, k)
    rec = Recorder(uploads, weights)
    got = strategy("krum", f=f, m=m).aggregate(uploads, weights, steps, None, rec.mean)
    want = brute_force_krum(uploads, f, m)
    assert [list(r) for r in rec.rows] == [want]
    assert torch.equal(got, rec.mean(want))


def test_krum_breaks_ties_by_the_lower_row():
    """Two identical pairs of uploads: Krum keeps the lower row of the tied scores."""
    a, b = torch.zeros(D), torch.ones(D)
    uploads = torch.stack([b, a, b, a, 3 * b])
    rec = Recorder(uploads, torch.ones(5))
    strategy("krum", f=0).aggregate(uploads, torch.ones(5), np.ones(5, np.int64), None, rec.mean)
    assert [list(r) for r in rec.rows] == [[0]]


@pytest.mark.parametrize(("k", "f"), [(1, 0), (2, 0), (4, 1), (6, 2)])
def test_krum_with_fewer_than_2f_plus_3_uploads_takes_every_row(k, f):
    """k < 2 f + 3: the score is undefined and g is the rule's aggregate of every upload."""
    uploads, weights, steps, _ = random_step(k, k)
    rec = Recorder(uploads, weights)
    got = strategy("krum", f=f, m=1).aggregate(uploads, weights, steps, None, rec.mean)
    assert [list(r) for r in rec.rows] == [list(range(k))]
    assert torch.equal(got, aggregate.weighted_mean(uploads, weights))


def test_fednova_normalises_by_local_steps_and_scales_by_tau_eff():
    """fednova's g is sum_i p_i E_i * sum_i p_i upload_i / E_i with p_i = B_i / sum B (float64
    reference, rtol 1e-5)."""
    uploads, weights, steps, _ = random_step(7, 6)
    got = run_aggregate("fednova", uploads, weights, steps, None)
    p = weights.numpy().astype(np.float64) / weights.numpy().astype(np.float64).sum()
    u = uploads.numpy().astype(np.float64)
    want = (p * steps).sum() * (p @ (u / steps[:, None]))
    np.testing.assert_allclose(got.numpy(), want, rtol=RTOL, atol=ATOL)


def test_rule_mean_of_every_row_is_the_rules_own_call():
    """The default hook passes the step's own tensors to the rule (index None: today's call)."""
    uploads, weights, steps, _ = random_step(1, 4)
    seen = []
    mean = rule_mean_over(uploads, lambda index, values: seen.append((index, values)) or values[0])
    strategy("fedavg").aggregate(uploads, weights, steps, None, mean)
    assert seen[0][0] is None and seen[0][1] is uploads


# ---------------------------------------------------------------------------- the learner


@pytest.mark.parametrize("mode", ["sync", "semi_sync", "async"])
@pytest.mark.parametrize("name", list(AGGREGATING))
def test_every_aggregating_strategy_runs_in_every_server_mode(name, mode):
    """A tiny digits run completes with each aggregating strategy under each server mode."""
    data = {**LEARN, "strategy": {"name": name}, "server": {"mode": mode}}
    res = wflsim.run(data, progress=False)
    assert res.summary["slots"] == 6
    assert np.isfinite(res.summary["final_accuracy"])


def test_fednova_with_equal_local_steps_is_fedavg_bit_for_bit():
    """Every E_n = 2: fednova writes fedavg's events exactly (u / 2 and x 2 are exact), and
    its strategy rows."""
    data = {**LEARN, "learning": {**LEARN["learning"], "local_steps": 2}}
    plain = wflsim.run(data, progress=False).events
    nova = wflsim.run({**data, "strategy": {"name": "fednova"}}, progress=False).events
    assert_same_but_strategy_rows(nova, plain)


def test_fednova_differs_from_fedavg_with_unequal_local_epochs():
    """local_epochs = 1 on a Dirichlet partition (unequal E_n): fednova's model is not fedavg's."""
    from wflsim.app.run import make_learner

    data = {
        **LEARN,
        "learning": {
            **LEARN["learning"],
            "partition": "dirichlet",
            "dirichlet_alpha": 0.3,
            "local_epochs": 1,
        },
    }
    assert len(set(make_learner(wflsim.prepare(data)).local_steps.tolist())) > 1
    final: dict[str, np.ndarray] = {}

    def keep(name):
        return wflsim.Callbacks(on_frame_end=lambda v: final.__setitem__(name, v.params()))

    wflsim.run(data, callbacks=keep("fedavg"), progress=False)
    wflsim.run({**data, "strategy": {"name": "fednova"}}, callbacks=keep("fednova"), progress=False)
    assert not np.array_equal(final["fedavg"], final["fednova"])


def masks_seen(scheme: dict[str, Any], mode: str) -> list[Any]:
    """The ``uploaded`` arguments a mask-asking median strategy gets in a run of ``scheme``."""
    seen: list[Any] = []

    class Spy(AGGREGATING["fedmedian"]):  # type: ignore[misc, valid-type]
        """fedmedian, recording its masks."""

        def aggregate(self, uploads, weights, steps, uploaded, rule_mean):
            seen.append(None if uploaded is None else uploaded.clone())
            return super().aggregate(uploads, weights, steps, uploaded, rule_mean)

    wflsim.register_strategy("spy", Spy)
    data = {**LEARN, "scheme": scheme, "strategy": {"name": "spy"}, "server": {"mode": mode}}
    # far devices and a short deadline: the controller prunes (gamma > 0)
    data["network"] = {**LEARN["network"], "num_devices": 4, "cell_radius_m": 3000.0}
    data["run"] = {**LEARN["run"], "deadline_s": 0.1}
    wflsim.run(data, progress=False)
    return seen


@pytest.mark.parametrize("mode", ["sync", "semi_sync"])
def test_per_coordinate_pruning_hands_the_median_its_kept_masks(mode):
    """Pruning with aggregation = "per_coordinate": the median gets (k, D) masks, not all True."""
    seen = masks_seen({"name": "pruning", "aggregation": "per_coordinate"}, mode)
    masks = [m for m in seen if m is not None]
    assert masks and any(not bool(m.all()) for m in masks)


@pytest.mark.parametrize("mode", ["sync", "semi_sync"])
def test_zeros_pruning_hands_the_median_no_masks(mode):
    """Pruning with aggregation = "zeros" (eq. 3): every row counts everywhere, uploaded is None."""
    seen = masks_seen({"name": "pruning", "aggregation": "zeros"}, mode)
    assert seen and all(m is None for m in seen)


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"name": "fedtrimmedavg", "beta": 0.5}, "strategy.beta"),
        ({"name": "fedtrimmedavg", "beta": -0.1}, "strategy.beta"),
        ({"name": "fedtrimmedavg", "beta": float("nan")}, "strategy.beta"),
        ({"name": "krum", "f": -1}, "strategy.f"),
        ({"name": "krum", "f": 1.5}, "strategy.f"),
        ({"name": "krum", "f": True}, "strategy.f"),
        ({"name": "krum", "m": 0}, "strategy.m"),
        ({"name": "krum", "m": "2"}, "strategy.m"),
        ({"name": "fedmedian", "beta": 0.1}, "strategy.beta"),
        ({"name": "fednova", "eta": 1.0}, "strategy.eta"),
    ],
)
def test_a_bad_parameter_is_refused_naming_its_field(table, field):
    """Out-of-range, wrong-typed or untaken parameters raise ScenarioError on their field."""
    with pytest.raises(ScenarioError) as err:
        validate_scenario(base_scenario(strategy=table))
    assert err.value.field == field


def test_every_aggregating_strategy_is_documented():
    """Every aggregating strategy and each parameter appears in docs/scenario.md and docs/api.md."""
    from conftest import REPO

    scenario = (REPO / "docs" / "scenario.md").read_text()
    api = (REPO / "docs" / "api.md").read_text()
    from wflsim.sim.registry import STRATEGIES

    for name in AGGREGATING:
        assert f"`{name}`" in scenario and f"| `{name}` |" in api, name
        for field in STRATEGIES[name].params.model_fields:
            assert f"| `{field}` |" in scenario, (name, field)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "scheme",
    [
        {"name": "random_freezing"},
        {"name": "topk_ef"},
        {"name": "pruning", "aggregation": "per_coordinate"},
        {"name": "fedhq"},
        {"name": "fjord"},
    ],
    ids=lambda s: s["name"],
)
@pytest.mark.parametrize("name", list(AGGREGATING))
def test_every_aggregating_strategy_runs_with_every_update_rule(name, scheme, mode):
    """Each aggregating strategy completes a far, short-deadline run (compression active) with
    each update rule's scheme, per-coordinate aggregation where the rule has it."""
    data = {**LEARN, "scheme": scheme, "strategy": {"name": name}, "server": {"mode": mode}}
    data["network"] = {**LEARN["network"], "num_devices": 4, "cell_radius_m": 3000.0}
    data["run"] = {**LEARN["run"], "deadline_s": 0.1}
    data["learning"] = {**LEARN["learning"], "aggregation": "per_coordinate"}
    res = wflsim.run(data, progress=False)
    assert res.summary["slots"] == 6


@pytest.mark.parametrize("stale", [False, True])
def test_pruning_ranks_by_the_aggregate_the_server_stepped_with(stale):
    """Under fedmedian, pruning's importance g is the median the server stepped with (the rule's
    own aggregate is never computed), in a synchronous slot and a stale server step."""
    from wflsim.app.run import make_learner
    from wflsim.sim.strategies import StrategySpec
    from wflsim.sim.updates import PruningInputs, UpdateRuleSpec

    learner = make_learner(wflsim.prepare(LEARN))
    learner.set_update_rule(UpdateRuleSpec("pruning", {"aggregation": "zeros"}))
    learner.set_strategy(StrategySpec("fedmedian", {}))
    n = learner.num_devices
    learner.begin_frame(0, PruningInputs(np.full(n, learner.num_params, dtype=np.int64)))
    ids = np.arange(n, dtype=np.int64)
    w0 = learner.global_params()
    if stale:
        for k in range(n):
            learner.start_update(k, k, 0, 0)
        learner.apply_updates(0, ids, np.ones(n), 1.0)
        learner.materialise()
    else:
        learner.compute(0, ids)
        learner.apply(0, ids)
    g = (w0 - learner.global_params()) / learner.lr_at(0)
    torch.testing.assert_close(learner.rule.g_prev, g, rtol=1e-4, atol=1e-6)
