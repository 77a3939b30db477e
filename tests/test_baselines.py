"""The state-of-the-art baselines: Top-K with error accumulation, importance pruning, FedHQ-like
quantisation (their update rules against independent references, their cost models in the trace)."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_learner import tiny_learner

from conftest import base_scenario, events, run_in_memory, write_fake_cifar
from wflsim.models.learner import TorchLearner
from wflsim.models.learner.rules import (
    ImportancePruning,
    OrderedDropout,
    StochasticQuantisation,
    TopKResidual,
)
from wflsim.models.learner.rules.pruning import importance_ranks
from wflsim.models.learner.rules.quantisation import quantise
from wflsim.models.learner.rules.topk import top_k_mask
from wflsim.models.submodels import flat_width_mask
from wflsim.sim.config.architectures import kept, layers, width_costs
from wflsim.sim.errors import ScenarioError
from wflsim.sim.learner import UpdateRuleSpec
from wflsim.sim.rng import Streams
from wflsim.sim.updates import OrderedDropoutInputs, PruningInputs, QuantisationInputs, TopKInputs

BASELINES = ("topk_ef", "pruning", "fedhq", "fjord")


def full_grads(learner, params: torch.Tensor) -> torch.Tensor:
    """Per-device gradients of the last compute at flat ``params`` ``(D,)``: a loop over model
    copies with plain autograd (the independent reference)."""
    out = []
    for batch in learner.last_batches:
        net = copy.deepcopy(learner.model).train()
        torch.nn.utils.vector_to_parameters(params.clone(), net.parameters())
        b = torch.as_tensor(batch)
        loss = F.cross_entropy(net(learner.data.x_train[b]), learner.data.y_train[b])
        grads = torch.autograd.grad(loss, list(net.parameters()))
        out.append(torch.cat([x.reshape(-1) for x in grads]))
    return torch.stack(out)


def _with_rule(batch_sizes, spec: UpdateRuleSpec, **kw):
    learner = tiny_learner(batch_sizes, sampling_streams=Streams(7), **kw)
    learner.set_update_rule(spec)
    return learner


# ----------------------------------------------------------------------------- Top-K


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(-4, 4), min_size=1, max_size=40),
    k=st.integers(0, 45),
)
def test_top_k_mask_keeps_the_k_largest_magnitudes(values, k):
    """Exactly min(K, D) entries, all at least as large in magnitude as every entry left out,
    ties broken towards the lower index (many ties: small integers)."""
    v = torch.tensor(values, dtype=torch.float32)
    mask = top_k_mask(v, k)
    d = v.shape[0]
    assert int(mask.sum()) == min(k, d)
    if 0 < k < d:
        kept, left = v[mask].abs(), v[~mask].abs()
        assert kept.min() >= left.max()
        boundary = kept.min()
        tied = torch.nonzero(v.abs() == boundary).flatten()
        chosen = tied[mask[tied]]
        assert torch.equal(chosen, tied[: chosen.shape[0]])  # the lowest indices among ties


def test_topk_conserves_mass_through_outages():
    """Sum of the uploads that arrived + all residuals = sum of every gradient computed, over
    slots with random participation, random outages and changing K."""
    learner = _with_rule([5, 7, 4, 6, 5], UpdateRuleSpec("topk_ef"), hidden=None, lr=0.2)
    rule = learner.rule
    assert isinstance(rule, TopKResidual)
    d = learner.num_params
    computed, arrived = torch.zeros(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)
    original = rule.uploads

    def spy(grads, ids, slot):
        computed.add_(grads.sum(dim=0).to(torch.float64))
        return original(grads, ids, slot)

    rule.uploads = spy  # record the raw gradients the rule receives
    rng = np.random.default_rng(3)
    outages = 0
    for frame in range(4):
        learner.begin_frame(frame, TopKInputs(k=rng.integers(0, d + 1, 5)))
        for t in range(5):
            slot = frame * 5 + t
            ids = np.flatnonzero(rng.random(5) < 0.8)
            learner.compute(slot, ids)
            sent = learner.gradients.clone()
            ok = ids[rng.random(ids.size) < 0.6]
            outages += ids.size - ok.size
            pos = {int(n): r for r, n in enumerate(ids)}
            for n in ok:
                arrived.add_(sent[pos[int(n)]].to(torch.float64))
            learner.apply(slot, ok)
    assert outages > 5
    total = arrived + rule.residual.sum(dim=0).to(torch.float64)
    torch.testing.assert_close(total, computed, rtol=1e-5, atol=1e-5)


def test_topk_uploads_are_the_top_k_of_residual_plus_gradient():
    """Each upload has K_n nonzeros: the K_n largest |r + g| (r the residual before the slot),
    and the gradients are full (no frozen coordinates)."""
    learner = _with_rule([6, 6, 6], UpdateRuleSpec("topk_ef"))
    rule = learner.rule
    assert isinstance(rule, TopKResidual)
    learner.begin_frame(0, TopKInputs(k=np.array([10, 20, 43], dtype=np.int64)))
    learner.compute(0, np.arange(3))
    learner.apply(0, np.array([0]))  # devices 1 and 2 fail: their uploads go back
    r = rule.residual.clone()
    learner.compute(1, np.arange(3))
    g = full_grads(learner, learner.global_params())  # full gradients at the global model
    acc = r + g
    for n, k in enumerate([10, 20, 43]):
        up = learner.gradients[n]
        assert int((up != 0).sum()) <= k
        order = acc[n].abs().argsort(descending=True, stable=True)[:k]
        torch.testing.assert_close(up[order], acc[n][order], rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- pruning


def test_importance_ranks_match_a_brute_force_sort():
    """Rank 0 = largest (g w)^2, ties by the lower index; w^2 without a global gradient."""
    w = torch.tensor([1.0, -2.0, 0.5, 3.0, -1.0])
    g = torch.tensor([2.0, 1.0, 4.0, 0.0, -2.0])
    imp = (g * w) ** 2  # [4, 4, 4, 0, 4]
    assert importance_ranks(w, g).tolist() == [0, 1, 2, 4, 3]
    assert imp[3] == 0
    assert importance_ranks(w, None).tolist() == [2, 1, 4, 0, 3]  # w^2 = [1, 4, .25, 9, 1]


def test_pruning_keeps_exactly_the_most_important_and_trains_the_pruned_model():
    """Each device keeps exactly kept_n = (1 - gamma) D parameters, the most important by
    (g_prev w)^2, and uploads the gradient of its loss at the pruned model w * m_n (reference:
    a loop over model copies with the pruned weights set to 0), zero elsewhere."""
    learner = _with_rule([6, 5, 7], UpdateRuleSpec("pruning"))
    rule = learner.rule
    assert isinstance(rule, ImportancePruning)
    d = learner.num_params
    learner.begin_frame(0, PruningInputs(kept=np.full(3, d, dtype=np.int64)))
    learner.compute(0, np.arange(3))
    learner.apply(0, np.arange(3))
    g_prev, w = rule.g_prev.clone(), learner.global_params()
    kept = np.array([d, 30, 12], dtype=np.int64)
    learner.begin_frame(1, PruningInputs(kept=kept))
    learner.compute(1, np.arange(3))
    imp = (g_prev * w) ** 2
    for n, k in enumerate(kept):
        up = learner.gradients[n]
        top = imp.argsort(descending=True, stable=True)[:k]
        mask = torch.zeros(d, dtype=torch.bool)
        mask[top] = True
        assert int(mask.sum()) == k and not up[~mask].any()
        net = copy.deepcopy(learner.model).train()
        torch.nn.utils.vector_to_parameters(w * mask, net.parameters())
        batch = torch.as_tensor(learner.last_batches[n])
        loss = F.cross_entropy(net(learner.data.x_train[batch]), learner.data.y_train[batch])
        grads = torch.autograd.grad(loss, list(net.parameters()))
        ref = torch.cat([x.reshape(-1) for x in grads]).masked_fill(~mask, 0.0)
        torch.testing.assert_close(up, ref, rtol=1e-5, atol=1e-6)


def test_pruning_per_coordinate_aggregation_divides_by_keepers():
    """aggregation='per_coordinate': each coordinate's weighted sum over the devices that kept it."""
    learner = _with_rule(
        [4, 6, 5], UpdateRuleSpec("pruning", {"aggregation": "per_coordinate"}), lr=0.3
    )
    d = learner.num_params
    counts = torch.tensor([d, 20, 9]).view(-1, 1)
    learner.begin_frame(0, PruningInputs(kept=counts.flatten().numpy()))
    w0 = learner.global_params()
    learner.compute(0, np.arange(3))
    up = learner.gradients.clone()
    kept = importance_ranks(w0, None).view(1, -1) < counts  # no global gradient yet: |w|
    learner.apply(0, np.array([1, 2]))
    bw = torch.tensor([6.0, 5.0])
    denom = bw @ kept[[1, 2]].float()
    g = torch.where(denom > 0, (bw @ up[[1, 2]]) / denom.clamp_min(1e-30), 0.0)
    assert (denom == 6).any() and (denom == 11).any() and (denom == 0).any()
    torch.testing.assert_close(learner.global_params(), w0 - 0.3 * g, rtol=1e-6, atol=1e-7)


# ----------------------------------------------------------------------------- quantisation


@pytest.mark.parametrize("bits", [2, 3, 5])
def test_quantiser_is_unbiased_and_within_qsgd_variance(bits):
    """Over 4,000 draws: the mean of Q(v) is v within 4.5 standard errors per coordinate, and
    E||Q(v) - v||^2 <= min(D/s^2, sqrt(D)/s) ||v||^2 (QSGD, Lemma 3.1) within 5 %."""
    gen = torch.Generator().manual_seed(bits)
    d, reps = 50, 4000
    v = torch.randn(d, generator=gen, dtype=torch.float64)
    u = torch.rand(reps, d, generator=gen, dtype=torch.float64)
    q = torch.stack([quantise(v, bits, u[i]) for i in range(reps)])
    mean, sd = q.mean(dim=0), q.std(dim=0)
    assert torch.all((mean - v).abs() <= 4.5 * sd / math.sqrt(reps) + 1e-12)
    s = 2 ** (bits - 1) - 1
    bound = min(d / s**2, math.sqrt(d) / s) * float(v.pow(2).sum())
    assert float((q - v).pow(2).sum(dim=1).mean()) <= 1.05 * bound
    norm = float(v.norm())
    levels = q.abs() * s / norm
    torch.testing.assert_close(levels, levels.round(), rtol=0, atol=1e-9)  # s + 1 levels


def test_quantised_uploads_are_weighted_by_their_error():
    """The server averages the arrived uploads with weights B_n / (1 + e_n), e_n the relative
    quantisation error of each upload; fewer bits, larger error."""
    learner = _with_rule([6, 6, 6], UpdateRuleSpec("quantisation"), lr=0.4)
    rule = learner.rule
    assert isinstance(rule, StochasticQuantisation)
    learner.begin_frame(0, QuantisationInputs(bits=np.array([2, 4, 16], dtype=np.int64)))
    w0 = learner.global_params()
    learner.compute(0, np.arange(3))
    raw = full_grads(learner, w0)
    up = learner.gradients.clone()
    e = ((up - raw).pow(2).sum(dim=1) / raw.pow(2).sum(dim=1)).double()
    # (the 16-bit error, ~1e-8, is at the float32 rounding level of the two gradient paths)
    assert [rule.errors[n] for n in range(3)] == pytest.approx(e.tolist(), rel=1e-2, abs=1e-9)
    assert e[0] > e[1] > e[2]
    learner.apply(0, np.array([0, 2]))
    wts = torch.tensor([6.0, 6.0], dtype=torch.float64) / (1.0 + e[[0, 2]])
    g = (wts @ up[[0, 2]].double()) / wts.sum()
    torch.testing.assert_close(learner.global_params(), w0 - 0.4 * g.float(), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- FjORD


def _catalogue_learner(n: int, **kw) -> TorchLearner:
    """A digits MLP learner built as a run builds it (so it knows its architecture)."""
    return TorchLearner.from_config(
        dataset="digits",
        data_dir=None,
        model="mlp",
        partition="iid",
        dirichlet_alpha=None,
        batch_sizes=np.full(n, 8),
        lr=0.4,
        total_slots=20,
        streams=Streams(9),
        **kw,
    )


def test_fjord_trains_and_uploads_the_width_p_submodels():
    """Device n trains the full model with the dropped parameters at 0 and uploads its gradient
    on the sub-model's coordinates only (reference: model copies at w * m_n, then masked)."""
    learner = _catalogue_learner(3)
    learner.set_update_rule(UpdateRuleSpec("ordered_dropout"))
    learner.begin_frame(0, OrderedDropoutInputs(width=np.ones(3)))
    widths = np.array([1.0, 0.6, 0.3])
    learner.begin_frame(1, OrderedDropoutInputs(width=widths))
    w = learner.global_params()
    learner.compute(0, np.arange(3))
    for n, p in enumerate(widths):
        mask = flat_width_mask(learner.model, layers("mlp", "digits"), float(p))
        assert int(mask.sum()) == width_costs("mlp", "digits", np.array([p]))[0][0]
        ref = full_grads(learner, w * mask)[n].masked_fill(~mask, 0.0)
        torch.testing.assert_close(learner.gradients[n], ref, rtol=1e-5, atol=1e-6)
        assert not learner.gradients[n][~mask].any()


def test_fjord_aggregation_averages_each_coordinate_over_its_holders():
    """Nested aggregation: each coordinate is the B-weighted mean over exactly the successful
    devices whose sub-model holds it; coordinates none holds keep their value."""
    learner = _catalogue_learner(3)
    learner.set_update_rule(UpdateRuleSpec("ordered_dropout"))
    widths = np.array([0.8, 0.5, 0.2])
    learner.begin_frame(0, OrderedDropoutInputs(width=widths))
    w0 = learner.global_params()
    learner.compute(0, np.arange(3))
    up = learner.gradients.clone()
    learner.apply(0, np.array([1, 2]))
    masks = torch.stack(
        [flat_width_mask(learner.model, layers("mlp", "digits"), float(p)) for p in widths]
    )
    bw = torch.tensor([8.0, 8.0])
    denom = bw @ masks[[1, 2]].float()
    g = torch.where(denom > 0, (bw @ up[[1, 2]]) / denom.clamp_min(1e-30), 0.0)
    assert (denom == 16).any() and (denom == 8).any() and (denom == 0).any()
    torch.testing.assert_close(learner.global_params(), w0 - 0.4 * g, rtol=1e-6, atol=1e-7)
    untouched = denom == 0
    assert torch.equal(learner.global_params()[untouched], w0[untouched])


def test_fjord_keeps_batchnorm_statistics_per_width_tier(tmp_path):
    """ResNet-20: each tier's running statistics become the channel-wise mean over the tier's
    devices that kept the channel; the global (evaluation) statistics are the full width's."""
    write_fake_cifar(tmp_path, 12, np.random.default_rng(0))
    learner = TorchLearner.from_config(
        dataset="cifar10",
        data_dir=tmp_path,
        model="resnet20",
        partition="iid",
        dirichlet_alpha=None,
        batch_sizes=np.full(4, 4),
        lr=0.05,
        total_slots=4,
        streams=Streams(2),
    )
    learner.set_update_rule(UpdateRuleSpec("ordered_dropout", {"bn_tiers": 10}))
    rule = learner.rule
    assert isinstance(rule, OrderedDropout)
    widths = np.array([1.0, 0.5, 0.45, 0.55])  # tiers 10, 5, 5, 6
    learner.begin_frame(0, OrderedDropoutInputs(width=widths))
    before = {k: v.clone() for k, v in learner.buffers.items()}
    learner.compute(0, np.arange(4))
    dev = {k: v.clone() for k, v in learner.device_buffers.items()}
    learner.apply(0, np.arange(4))
    key, channels = "bn.running_mean", 16
    tier5 = rule.tiers[5][key]
    k1, k2 = kept(channels, 0.5), kept(channels, 0.45)  # 8, 8
    torch.testing.assert_close(tier5[:k2], (dev[key][1][:k2] + dev[key][2][:k2]) / 2)
    torch.testing.assert_close(tier5[k1:], before[key][k1:])  # no tier-5 device kept them
    torch.testing.assert_close(rule.tiers[6][key][: kept(channels, 0.55)], dev[key][3][:9])
    torch.testing.assert_close(learner.buffers[key], dev[key][0])  # full width = device 0
    assert set(rule.tiers) == {5, 6, 10}


# ----------------------------------------------------------------------------- schemes in runs


def _network(scheme: str, **params):
    return base_scenario(
        run={"frames": 4, "slots_per_frame": 5, "deadline_s": 0.8},
        network={"num_devices": 12, "cell_radius_m": 800.0},
        devices={
            "batch_size": 512,
            "energy_budget_j": {"dist": "uniform", "low": 0.3, "high": 0.45},
        },
        learning={"enabled": False, "num_params": 440_812},
        scheme={"name": scheme, "V": 100.0, **params},
    )


@pytest.mark.parametrize(
    ("scheme", "params"),
    [
        ("topk_ef", {}),
        ("topk_ef", {"index_bits": 32}),
        ("topk_ef", {"index_bits": "log2"}),
        ("pruning", {}),
        ("fedhq", {}),
        ("fjord", {}),
        ("fjord", {"width_rule": "linear"}),
    ],
)
def test_trace_payload_and_compute_equal_the_cost_model(scheme, params):
    """Network only: every decision row's payload and compute time equal the baseline's cost
    model at the logged gamma (computed here from the formulas), and the controller froze."""
    data = _network(scheme, **params)
    if scheme == "fjord":  # FjORD needs the model's architecture, not a bare D
        data["learning"] = {
            "enabled": False,
            "num_params": None,
            "model": "cnn_mnist",
            "dataset": "mnist",
        }
    table, _ = run_in_memory(data)
    fr, dec = events(table, "freeze"), events(table, "decision")
    assert (fr["gamma"] > 0.05).any()
    d, b = 440_812, 32
    g = fr.set_index(["frame", "device"])["gamma"]
    gamma = g.loc[list(zip(dec["frame"], dec["device"], strict=True))].to_numpy()
    u = 1.0 - gamma
    if scheme == "topk_ef":
        ib = {0: 0, 32: 32, "log2": math.ceil(math.log2(d))}[params.get("index_bits", 0)]
        k = np.clip(np.rint(u * b * d / (b + ib)), 0, d)
        payload, comp = k * (b + ib), np.ones_like(u)
    elif scheme == "pruning":
        kept_n = np.rint(u * d)
        payload, comp = kept_n * b, kept_n / d
    elif scheme == "fjord":
        p = np.sqrt(u) if params.get("width_rule", "sqrt") == "sqrt" else u
        full_macs = 20 * 25 * 24 * 24 + 50 * 20 * 25 * 8 * 8 + 512 * 800 + 10 * 512
        sub_params, sub_macs = [], []
        for x in p:  # cnn_mnist by hand: conv5x5 20, conv5x5 50, FC 512, FC 10
            c1, c2, h = kept(20, x), kept(50, x), kept(512, x)
            sub_params.append(
                (c1 * 25 + c1) + (c2 * c1 * 25 + c2) + (h * c2 * 16 + h) + (10 * h + 10)
            )
            sub_macs.append(c1 * 25 * 576 + c2 * c1 * 25 * 64 + h * c2 * 16 + 10 * h)
        payload = np.array(sub_params) * b
        comp = np.array(sub_macs) / full_macs
    else:
        bits = np.floor(b * u + 1e-9)
        bits = np.where(bits >= 2, bits, 0)
        payload, comp = np.where(bits > 0, d * bits + 64, 0.0), np.ones_like(u)
    np.testing.assert_allclose(dec["payload_bits"], payload, rtol=1e-12)
    part = dec["participating"].astype(bool).to_numpy()
    full_s = 2e6 * 512 / 2e9
    np.testing.assert_allclose(dec["compute_s"][part], (comp * full_s)[part], rtol=1e-12)


@pytest.mark.parametrize("scheme", BASELINES)
def test_baseline_slot_physics_is_the_shared_code(scheme):
    """Energy = compute + p x time transmitted; an upload succeeds iff it arrives by the
    deadline; queues follow max(Q + E - E_bar, 0): the same checks as every other scheme."""
    data = _network(scheme)
    if scheme == "fjord":
        data["learning"] = {
            "enabled": False,
            "num_params": None,
            "model": "cnn_mnist",
            "dataset": "mnist",
        }
    table, _ = run_in_memory(data)
    e, dec = events(table, "energy"), events(table, "decision")
    np.testing.assert_allclose(e["energy_j"], e["energy_compute_j"] + e["energy_upload_j"])
    np.testing.assert_allclose(e["energy_upload_j"], e["tx_power_w"] * e["upload_s"], rtol=1e-12)
    arrive = dec["compute_s"] + dec["upload_s"]
    ok = e["success"].astype(bool)
    assert (arrive[ok] <= 0.8 * (1 + 1e-9)).all() and (arrive[~ok & e["participating"]] > 0.8).all()
    budget = events(table, "device_config").set_index("device")["energy_budget_j"]
    for dev, rows in e.groupby("device"):
        q = 0.0
        for energy, logged in zip(rows["energy_j"], rows["queue_j"], strict=True):
            q = max(q + energy - budget[dev], 0.0)
            assert logged == pytest.approx(q, rel=1e-12, abs=1e-15)


def test_fedhq_below_two_bits_does_not_upload():
    """gamma > 15/16 leaves fewer than 2 bits per coordinate: payload 0, no participation."""
    from wflsim.sim.schemes.fedhq import fedhq_costs
    from wflsim.sim.world.system import DeviceArrays, SystemConstants

    dev = DeviceArrays(*(np.ones(3) for _ in range(6)))
    system = SystemConstants(dev, 1e6, 1e-13, 0.8, 1000, 32)
    comp = fedhq_costs(np.array([0.0, 0.95, 0.5]), system)
    assert comp.update.bits.tolist() == [32, 0, 16]
    assert comp.cost.payload_bits.tolist() == [32 * 1000 + 64, 0.0, 16 * 1000 + 64]


@pytest.mark.parametrize("scheme", BASELINES)
def test_baselines_learn_digits(scheme):
    """With training on digits every baseline runs end to end and learns (accuracy > 0.7 after
    3 frames of 10 slots, from 0.05)."""
    table, stats = run_in_memory(
        base_scenario(
            run={"frames": 3, "slots_per_frame": 10, "deadline_s": 0.1},
            network={"num_devices": 30, "cell_radius_m": 1000.0, "bandwidth_hz": 1e6},
            devices={
                "batch_size": 32,
                "energy_budget_j": {"dist": "uniform", "low": 0.01, "high": 0.02},
            },
            learning={"enabled": True, "num_params": None, "dataset": "digits", "lr": 0.5},
            scheme={"name": scheme, "V": 100.0},
        )
    )
    print(f"{scheme}: accuracy {stats.last_accuracy:.3f}")
    assert stats.last_accuracy > 0.7
    assert (events(table, "freeze")["gamma"] > 0.1).any()


def test_fjord_refuses_a_bare_parameter_count():
    """fjord with learning.num_params (no architecture) is a ScenarioError naming the field."""
    with pytest.raises(ScenarioError, match="architecture") as info:
        run_in_memory(_network("fjord"))
    assert info.value.field == "learning.num_params"
