"""Client-level DP on the learning side (models.learner.privacy, docs/privacy.md "The learner"):
clipping, central and local Gaussian noise, adaptive clipping, stale steps, state and the
combinations refused. References are hand computations and closed forms; the noise is measured
from the model's steps with a fixed seed against a normal-approximation bound."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_learner import freeze, reference_grads, tiny_learner

import wflsim
from conftest import network_only
from wflsim.models.learner import TorchLearner
from wflsim.models.learner.hierarchy import HierarchicalLearner
from wflsim.models.learner.privacy import COUNT, SYNC_STEP, noise_seed
from wflsim.sim.errors import ScenarioError
from wflsim.sim.learner import UpdateRuleSpec
from wflsim.sim.privacy.compose import refusal
from wflsim.sim.privacy.config import PrivacyConfig
from wflsim.sim.privacy.mechanism import PrivacySpec
from wflsim.sim.rng import Streams
from wflsim.sim.strategies import StrategySpec

B = np.array([2, 3, 5])
#: hidden units of the wide model the noise is measured on (D = 4 h + h + 3 h + 3 = 8003)
WIDE = 1000


def spec(mechanism: str = "central", **fields) -> PrivacySpec:
    """A resolved ``[privacy]`` for the three devices of :data:`B`."""
    fields.setdefault("clip_norm", 0.5)
    if mechanism != "over_the_air" or "noise_multiplier" not in fields:
        fields.setdefault("noise_multiplier", 1.3)
    return PrivacySpec.from_config(PrivacyConfig(mechanism=mechanism, **fields), B.size)


def learner(privacy: PrivacySpec | None = None, hidden: int = 5, seed: int = 0) -> TorchLearner:
    """A tiny learner on the run streams of ``seed`` (frame 0 opened, nothing frozen)."""
    lr = tiny_learner(B, hidden=hidden, sampling_streams=Streams(seed), seed=seed)
    if privacy is not None:
        lr.set_privacy(privacy)
    lr.begin_frame(0, freeze(lr, np.zeros(B.size)))
    return lr


def assert_std(sample: torch.Tensor, sigma: float) -> None:
    """``sample`` (m values) is N(0, sigma^2): the sample variance within 5 standard errors
    (sqrt(2 / m), normal approximation of chi^2_m / m) and the mean within 5 sigma / sqrt(m)."""
    x = sample.double()
    m = x.numel()
    assert abs(float(x.mean())) <= 5 * sigma / math.sqrt(m)
    assert abs(float((x * x).mean()) / sigma**2 - 1.0) <= 5 * math.sqrt(2.0 / m)


# ----------------------------------------------------------------------------- clipping


@settings(max_examples=25, deadline=None)
@given(
    clip=st.floats(1e-6, 1e3),
    rate=st.floats(1e-3, 1e2),
    steps=st.sampled_from([1, 3]),
    seed=st.integers(0, 3),
)
def test_every_sent_update_is_within_the_clip(
    clip: float, rate: float, steps: int, seed: int
) -> None:
    """Whatever the update's scale (gradients, or pseudo-gradients of E = 3 local steps at
    learning rates over five decades) against the clip, every upload's L2 norm is <= C."""
    lr = tiny_learner(B, sampling_streams=Streams(seed), seed=seed, lr=rate, local_steps=steps)
    lr.set_privacy(spec(clip_norm=clip))
    lr.begin_frame(0, freeze(lr, np.zeros(B.size)))
    lr.compute(0, np.arange(B.size))
    norms = torch.linalg.vector_norm(lr.gradients.double(), dim=1)
    assert bool((norms <= clip).all())


def test_clipping_equals_a_loop_over_model_copies() -> None:
    """The uploads are plain autograd per device on a model copy, scaled by min(1, C / |g|)."""
    probe = learner()
    probe.compute(0, np.arange(B.size))
    ref = reference_grads(probe)
    norms = torch.linalg.vector_norm(ref.double(), dim=1)
    clip = float(norms.median())  # one device clipped, one exactly at C, one within
    lr = learner(spec(clip_norm=clip))
    lr.compute(0, np.arange(B.size))
    by_hand = torch.stack([g * min(1.0, clip / float(n)) for g, n in zip(ref, norms, strict=True)])
    torch.testing.assert_close(lr.gradients, by_hand, rtol=1e-5, atol=1e-7)


def test_frozen_entries_stay_unsent_under_local_noise() -> None:
    """Local noise goes on the entries a device sends only: frozen entries stay exactly 0."""
    lr = tiny_learner(B, sampling_streams=Streams(0))
    lr.set_update_rule(UpdateRuleSpec("freezing", {"selection": "random"}))
    lr.set_privacy(spec("local"))
    lr.begin_frame(0, freeze(lr, np.full(B.size, 0.5)))
    lr.compute(0, np.arange(B.size))
    frozen = lr.rule.masks()  # type: ignore[attr-defined]
    assert bool(frozen.any())
    assert bool((lr.gradients[frozen] == 0).all())
    assert bool((lr.gradients[~frozen] != 0).all())


# ----------------------------------------------------------------------------- noise


def test_central_noise_has_the_stated_std() -> None:
    """The server's noise, measured from the model's step against the clipped mean by hand,
    is N(0, (z C max B / sum B)^2) on every entry (z = 1.3, C = 0.5, B = 2, 3, 5)."""
    lr = learner(spec(clip_norm=0.5), hidden=WIDE)
    ids = np.arange(B.size)
    w_t = lr.global_params()
    lr.compute(0, ids)
    clipped = lr.gradients.double()
    plain = (torch.as_tensor(B, dtype=torch.float64) @ clipped) / B.sum()
    lr.apply(0, ids)
    noise = (w_t.double() - lr.global_params().double()) / lr.lr_at(0) - plain
    sigma = 1.3 * 0.5 * 5 / 10
    assert_std(noise, sigma)
    (row,) = lr.take_privacy_rows()
    np.testing.assert_allclose(row["dp_noise_std"], sigma, rtol=1e-12)


def test_central_noise_under_a_per_coordinate_mean_is_on_the_weighted_sum() -> None:
    """Under a per-coordinate mean the noise on entry j is sigma sum B / (B of its senders), and
    sigma where nobody sent it: the noise measured, divided by that gain by hand, is N(0, sigma^2)
    on both kinds of entries."""
    lr = tiny_learner(B, hidden=WIDE, sampling_streams=Streams(0), aggregation="per_coordinate")
    lr.set_update_rule(UpdateRuleSpec("freezing", {"selection": "random"}))
    lr.set_privacy(spec(clip_norm=0.5))
    lr.begin_frame(0, freeze(lr, np.full(B.size, 0.5)))
    ids = np.arange(B.size)
    w_t = lr.global_params()
    lr.compute(0, ids)
    sent = ~lr.rule.masks()  # type: ignore[attr-defined]
    b = torch.as_tensor(B, dtype=torch.float64)
    senders = b @ sent.double()
    plain = torch.where(senders > 0, (b @ lr.gradients.double()) / senders.clamp_min(1e-30), 0.0)
    lr.apply(0, ids)
    noise = (w_t.double() - lr.global_params().double()) / lr.lr_at(0) - plain
    gain = torch.where(senders > 0, B.sum() / senders.clamp_min(1e-30), 1.0)
    sigma = 1.3 * 0.5 * 5 / 10
    nobody = senders == 0
    assert int(nobody.sum()) > 500
    assert_std((noise / gain)[~nobody], sigma)
    assert_std(noise[nobody], sigma)


def test_local_noise_has_the_stated_std() -> None:
    """Each device's upload is its clipped update plus N(0, (z C)^2) per entry (z = 1.3,
    C = 0.5), against the same update clipped by hand."""
    plain = learner(hidden=WIDE)
    noisy = learner(spec("local", clip_norm=0.5), hidden=WIDE)
    ids = np.arange(B.size)
    plain.compute(0, ids)
    noisy.compute(0, ids)
    raw = plain.gradients.double()
    norms = torch.linalg.vector_norm(raw, dim=1, keepdim=True)
    clipped = raw * torch.clamp(0.5 / norms, max=1.0)
    for row in range(B.size):
        assert_std(noisy.gradients[row].double() - clipped[row], 1.3 * 0.5)
    noisy.apply(0, ids)
    (rows,) = noisy.take_privacy_rows()
    np.testing.assert_allclose(rows["dp_noise_std"], 1.3 * 0.5, rtol=1e-12)


#: the staleness weights of the async steps below
STALENESS = np.array([1.0, 0.5, 0.25])


def stale_noise(mechanism: str) -> tuple[torch.Tensor, list[dict[str, np.ndarray]]]:
    """One async step of the three devices' updates with :data:`STALENESS` under
    ``mechanism``: the noise its model received, against a twin that clips without noise
    (over the air: clipping only here), and its ``dp_clip`` rows."""
    models, rows = [], []
    for mech in (mechanism, "over_the_air"):
        lr = learner(spec(mech, clip_norm=0.5), hidden=WIDE)
        for n in range(B.size):
            lr.start_update(n, device=n, sample_key=0)
        lr.apply_updates(0, np.arange(B.size), STALENESS, server_lr=1.0)
        lr.materialise()
        models.append(lr.global_params().double())
        rows.append(lr.take_privacy_rows())
    return (models[1] - models[0]) / lr.lr_at(0), rows[0]


def test_stale_steps_noise_with_the_staleness_weights() -> None:
    """An async step with staleness weights s: the server's noise is z C max(B s) / sum B per
    entry (the step's aggregate is sum B s u / sum B)."""
    noise, (row,) = stale_noise("central")
    sigma = 1.3 * 0.5 * float((B * STALENESS).max()) / B.sum()
    assert_std(noise, sigma)
    np.testing.assert_allclose(row["dp_noise_std"], sigma, rtol=1e-12)


def test_stale_local_noise_reaches_the_step_with_the_staleness_weights() -> None:
    """Local noise in an async step: the aggregate carries z C sqrt(sum (B s)^2) / sum B per
    entry (each device's own N(0, (z C)^2), weighted B s / sum B)."""
    noise, (row,) = stale_noise("local")
    np.testing.assert_allclose(row["dp_noise_std"], 1.3 * 0.5, rtol=1e-12)
    bs = B * STALENESS
    assert_std(noise, 1.3 * 0.5 * math.sqrt(float(np.sum(bs * bs))) / B.sum())


def test_a_stale_update_keeps_its_versions_clip_across_a_checkpoint() -> None:
    """An update started on version 0 is clipped at version 0's clip when it is computed after
    adaptive steps moved the clip, also in a learner restored from a checkpoint taken between."""
    adaptive = spec(clip_norm=0.05, clipping="adaptive", clipped_count_std=1.0)
    clips = []
    for restore in (False, True):
        lr = learner(adaptive)
        lr.start_update(0, device=0, sample_key=0)  # version 0, clip 0.05
        for step in range(3):
            lr.start_update(1 + step, device=1, sample_key=step)
            lr.apply_updates(step, np.array([1 + step]), np.ones(1), server_lr=1.0)
        lr.end_frame(0)
        moved = lr.clip_norm
        assert moved != 0.05
        if restore:
            state = copy.deepcopy(lr.state_dict())
            lr = tiny_learner(B, sampling_streams=Streams(0))
            lr.set_privacy(adaptive)
            lr.load_state_dict(state)
            assert lr.clip_norm == moved
        lr.begin_frame(1, freeze(lr, np.zeros(B.size)))
        lr.take_privacy_rows()
        lr.apply_updates(3, np.array([0]), np.ones(1), server_lr=1.0)
        lr.materialise()
        (row,) = lr.take_privacy_rows()
        clips.append(float(row["dp_clip_norm"][0]))
    assert clips == [0.05, 0.05]


def test_noise_is_the_same_after_a_state_round_trip() -> None:
    """A learner restored from another's state (adaptive clip included) takes the same noised
    steps as the one it was saved from."""
    adaptive = spec(clip_norm=0.05, clipping="adaptive", clipped_count_std=1.0)
    a = learner(adaptive)
    ids = np.arange(B.size)
    for t in range(3):
        a.compute(t, ids)
        a.apply(t, ids)
    a.end_frame(0)
    state = a.state_dict()
    assert state["privacy"]["clip_norm"] != 0.05
    b = tiny_learner(B, sampling_streams=Streams(0))
    b.set_privacy(adaptive)
    b.load_state_dict(copy.deepcopy(state))
    assert b.clip_norm == a.clip_norm
    for lr in (a, b):
        lr.begin_frame(1, freeze(lr, np.zeros(B.size)))
        lr.compute(3, ids)
        lr.apply(3, ids)
    assert torch.equal(a.global_params(), b.global_params())
    assert a.clip_norm == b.clip_norm


def test_a_state_without_privacy_loads_as_before() -> None:
    """A state saved without [privacy] loads into a private learner; its clip stays the spec's."""
    plain = learner()
    plain.end_frame(0)
    state = plain.state_dict()
    assert "privacy" not in state
    lr = tiny_learner(B, sampling_streams=Streams(0))
    lr.set_privacy(spec(clip_norm=0.7))
    lr.load_state_dict(state)
    assert lr.clip_norm == 0.7


# ----------------------------------------------------------------------------- adaptive


def test_adaptive_clip_follows_the_closed_form() -> None:
    """Over four steps C_{t+1} = C_t exp(-eta ((unclipped + sigma_b N_t) / k - gamma)), N_t the
    count noise of the step's key on the run's privacy stream (Andrew et al. 2021)."""
    eta, gamma, sigma_b = 0.2, 0.5, 1.0
    lr = learner(
        spec(
            clip_norm=0.8,
            clipping="adaptive",
            clipped_count_std=sigma_b,
            clip_learning_rate=eta,
            target_quantile=gamma,
        )
    )
    ids = np.arange(B.size)
    expected = 0.8
    for t in range(4):
        lr.compute(t, ids)
        lr.apply(t, ids)
        (row,) = lr.take_privacy_rows()
        np.testing.assert_allclose(row["dp_clip_norm"], expected, rtol=1e-12)
        seed = noise_seed(Streams(0), COUNT, 0, SYNC_STEP, t)
        n_t = np.random.Generator(np.random.PCG64(seed)).normal(0.0, 1.0)
        unclipped = int(np.sum(row["dp_update_norm"] <= expected))
        assert list(row["dp_clipped"]) == list(row["dp_update_norm"] > expected)
        expected *= math.exp(-eta * ((unclipped + sigma_b * n_t) / B.size - gamma))
        assert lr.clip_norm == pytest.approx(expected, rel=1e-12)


# ----------------------------------------------------------------------------- composition


@pytest.mark.parametrize(
    ("mechanism", "kwargs", "field"),
    [
        ("local", {"rule": "topk_ef"}, "privacy.mechanism"),
        ("local", {"rule": "quantisation"}, "privacy.mechanism"),
        ("central", {"rule": "quantisation"}, "privacy.mechanism"),
        ("central", {"strategy": "krum"}, "privacy.mechanism"),
        ("central", {"strategy": "fedmedian"}, "privacy.mechanism"),
        ("central", {"strategy": "fednova"}, "privacy.mechanism"),
        ("over_the_air", {"strategy": "fedtrimmedavg"}, "privacy.mechanism"),
        ("local", {"strategy": "scaffold"}, "privacy.mechanism"),
        ("central", {"strategy": "scaffold"}, "privacy.mechanism"),
        ("local", {"adaptive": True}, "privacy.clipping"),
    ],
)
def test_what_does_not_compose_is_refused_with_its_field(
    mechanism: str, kwargs: dict, field: str
) -> None:
    """Rules whose message shows the raw update, aggregates of another sensitivity, SCAFFOLD's
    control variates and adaptive clipping under local noise are refused, naming the field."""
    found = refusal(mechanism, **kwargs)
    assert found is not None and found.field == field
    assert "\n" not in found.line()


@pytest.mark.parametrize(
    ("mechanism", "kwargs"),
    [
        ("local", {"strategy": "krum"}),
        ("local", {"strategy": "fednova"}),
        ("local", {"rule": "pruning"}),
        ("local", {"rule": "ordered_dropout"}),
        ("central", {"rule": "topk_ef", "strategy": "fedadam"}),
        ("central", {"rule": "freezing", "strategy": "fedprox", "adaptive": True}),
    ],
)
def test_what_composes_is_not_refused(mechanism: str, kwargs: dict) -> None:
    """Post-processing of noised updates, public masks and server optimisers compose."""
    assert refusal(mechanism, **kwargs) is None


def test_the_learner_refuses_a_rule_under_local_noise() -> None:
    """set_privacy after Top-K's rule under local noise is a one-line ValueError naming
    privacy.mechanism."""
    lr = tiny_learner(B, sampling_streams=Streams(0))
    lr.set_update_rule(UpdateRuleSpec("topk_ef"))
    with pytest.raises(ValueError, match=r"^privacy\.mechanism: .*topk_ef"):
        lr.set_privacy(spec("local"))


def test_the_learner_refuses_a_robust_strategy_under_central_noise() -> None:
    """A strategy set after central privacy is checked too (the median's sensitivity)."""
    lr = tiny_learner(B, sampling_streams=Streams(0))
    lr.set_privacy(spec("central"))
    with pytest.raises(ValueError, match=r"^privacy\.mechanism: .*fedmedian"):
        lr.set_strategy(StrategySpec("fedmedian"))


def test_a_scenario_that_does_not_compose_is_refused_at_resolution() -> None:
    """wflsim.prepare refuses local noise with scheme topk_ef on privacy.mechanism, before
    anything runs (network only: the accounting assumes the mechanism)."""
    data = network_only(
        scheme={"name": "topk_ef", "V": 50.0},
        privacy={"mechanism": "local", "clip_norm": 1.0, "noise_multiplier": 1.0},
    )
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(data)
    assert err.value.field == "privacy.mechanism"


def test_each_edge_server_gets_its_own_privacy() -> None:
    """Under a hierarchy every edge clips and noises with its own index in the keys; the
    learner's clip is the largest of the edges'."""
    base = tiny_learner(B, sampling_streams=Streams(0))
    h = HierarchicalLearner(base, 2)
    h.set_privacy(spec("central", clip_norm=0.3))
    privs = [e.privacy for e in h.edges]
    assert [p.edge for p in privs if p is not None] == [0, 1]
    assert privs[0] is not privs[1]
    assert h.clip_norm == 0.3
