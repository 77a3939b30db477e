"""The federated learner (models.learner.TorchLearner): FedSGD, aggregation, freezing."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

import wflsim
from conftest import network_only
from wflsim.models.data import partition
from wflsim.models.learner import Freezing, TorchLearner, freeze_masks, stability_scores
from wflsim.models.learner.gradients import GradientPaths
from wflsim.sim.learner import Learner, NullLearner, UpdateRuleSpec
from wflsim.sim.registry import SCHEMES
from wflsim.sim.rng import Streams
from wflsim.sim.schemes.base import FrameContext
from wflsim.sim.updates import FreezingInputs

# ----------------------------------------------------------------------------- helpers


def tiny_learner(
    batch_sizes: list[int] | np.ndarray,
    *,
    seed: int = 0,
    hidden: int | None = 5,
    batchnorm: bool = False,
    n_samples: int = 120,
    lr: float = 0.3,
    sampling_streams: Streams | None = None,
    **kwargs,
) -> TorchLearner:
    """A learner on random 1x2x2 'images' with 3 classes and a tiny model (D = 43 or 15); batches
    from per-device generators, or from ``sampling_streams`` when given."""
    b = np.asarray(batch_sizes, dtype=np.int64)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_samples, 1, 2, 2, generator=g)
    y = torch.randint(0, 3, (n_samples,), generator=g)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if batchnorm:
            model = nn.Sequential(
                nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3)
            )
        elif hidden is None:
            model = nn.Sequential(nn.Flatten(), nn.Linear(4, 3))
        else:
            model = nn.Sequential(
                nn.Flatten(), nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 3)
            )
    parts = partition(y.numpy(), b.size, "iid", 1.0, np.random.default_rng(seed))
    return TorchLearner(
        model=model,
        x_train=x,
        y_train=y,
        x_test=x[:50],
        y_test=y[:50],
        parts=parts,
        batch_sizes=b,
        lr=lr,
        sampling_rngs=None
        if sampling_streams is not None
        else [np.random.default_rng([seed, n]) for n in range(b.size)],
        sampling_streams=sampling_streams,
        **kwargs,
    )


def rule(learner: TorchLearner) -> Freezing:
    """The learner's freezing rule (its default update rule)."""
    assert isinstance(learner.rule, Freezing)
    return learner.rule


def freeze(learner: TorchLearner, gamma) -> FreezingInputs:
    """The freezing rule's frame input: rint(gamma_n D) parameters per device."""
    counts = np.rint(np.asarray(gamma, dtype=np.float64) * learner.num_params)
    return FreezingInputs(frozen_count=counts.astype(np.int64))


def reference_grads(learner: TorchLearner) -> torch.Tensor:
    """Per-device loop with plain autograd on a copy of the model: the uploads of the last compute."""
    ids = learner.computed_ids
    local = learner.local_params(ids)
    masks = rule(learner).masks().to(local.device)[torch.as_tensor(ids)]
    out = []
    for row in range(ids.size):
        net = copy.deepcopy(learner.model).train()
        vector_to_parameters(local[row].clone(), net.parameters())
        batch = torch.as_tensor(learner.last_batches[row])
        loss = F.cross_entropy(net(learner.data.x_train[batch]), learner.data.y_train[batch])
        grads = torch.autograd.grad(loss, list(net.parameters()))
        flat = torch.cat([gr.reshape(-1) for gr in grads])
        out.append(flat.masked_fill(masks[row], 0.0))
    return torch.stack(out)


def run_frame(learner: TorchLearner, frame: int, gamma: np.ndarray, slots: int) -> None:
    """One frame in which every device computes and succeeds every slot."""
    ids = np.arange(learner.num_devices)
    learner.begin_frame(frame, freeze(learner, gamma))
    for t in range(slots):
        learner.compute(frame * slots + t, ids)
        learner.apply(frame * slots + t, ids)
    learner.end_frame(frame)


def with_freezing(learner: TorchLearner, gamma: np.ndarray, slots: int = 3) -> TorchLearner:
    """Run frame 0 (no freezing) and open frame 1 with ``gamma``."""
    run_frame(learner, 0, np.zeros(learner.num_devices), slots)
    learner.begin_frame(1, freeze(learner, gamma))
    return learner


# ----------------------------------------------------------------------------- gradients

#: The learner's two gradient paths: one vmap over all devices (no chunk bound), and plain
#: autograd per device (a chunk of one device's batch: fewer than two devices fit it).
PATHS = ["vmap", "per_device"]


def path_kwargs(path: str, batch_sizes: list[int]) -> dict:
    """``vmap_chunk_samples`` that sends ``compute`` down ``path``."""
    return {"vmap_chunk_samples": None if path == "vmap" else max(batch_sizes)}


@pytest.mark.parametrize("path", PATHS)
def test_batched_gradients_match_loop_equal_batches(path: str) -> None:
    """The uploads equal a per-device autograd loop on model copies (equal B_n, no freezing)."""
    learner = tiny_learner([8, 8, 8, 8], **path_kwargs(path, [8]))
    learner.compute(0, np.array([3, 0, 2]))
    torch.testing.assert_close(learner.gradients, reference_grads(learner), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", PATHS)
def test_batched_gradients_match_loop_unequal_batches(path: str) -> None:
    """Unequal B_n (padded with zero weights in the vmap) give each device its own mean gradient."""
    learner = tiny_learner([2, 9, 5, 1, 30], **path_kwargs(path, [30]))
    learner.compute(0, np.arange(5))
    assert [b.size for b in learner.last_batches] == [2, 9, 5, 1, 30]
    torch.testing.assert_close(learner.gradients, reference_grads(learner), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", PATHS)
def test_batched_gradients_match_loop_with_freezing(path: str) -> None:
    """With per-device frozen parameters (and unequal B_n) the uploads still equal the loop."""
    learner = with_freezing(
        tiny_learner([3, 7, 4, 6], **path_kwargs(path, [7])), np.array([0.0, 0.3, 0.6, 0.9])
    )
    learner.compute(9, np.array([1, 2, 0, 3]))
    assert rule(learner).masks().any()
    torch.testing.assert_close(learner.gradients, reference_grads(learner), rtol=1e-5, atol=1e-6)


def test_vmap_chunking_gives_the_same_gradients() -> None:
    """Bounding the samples per vmap chunk does not change the uploads."""
    a = tiny_learner([6, 6, 6, 6, 6], vmap_chunk_samples=None)
    b = tiny_learner([6, 6, 6, 6, 6], vmap_chunk_samples=12)
    for learner in (a, b):
        learner.compute(0, np.arange(5))
    torch.testing.assert_close(a.gradients, b.gradients, rtol=1e-6, atol=1e-7)


def test_micro_batches_give_the_same_gradients_and_losses() -> None:
    """A chunk smaller than one device's batch (micro-batches, summed) changes no upload or loss."""
    a = tiny_learner([9, 4, 7], vmap_chunk_samples=None)
    b = tiny_learner([9, 4, 7], vmap_chunk_samples=2)
    for learner in (a, b):
        learner.compute(0, np.arange(3))
    torch.testing.assert_close(a.gradients, b.gradients, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(a.last_train_loss, b.last_train_loss, rtol=1e-6)


def test_micro_batches_with_frozen_parameters_match_the_loop() -> None:
    """Micro-batching with per-device frozen parameters equals the per-device autograd loop."""
    learner = with_freezing(
        tiny_learner([8, 8, 8], vmap_chunk_samples=3), np.array([0.2, 0.5, 0.7])
    )
    learner.compute(3, np.arange(3))
    assert rule(learner).masks().any()
    torch.testing.assert_close(learner.gradients, reference_grads(learner), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batchnorm", [False, True])
def test_vmap_and_per_device_paths_agree(batchnorm: bool) -> None:
    """The vmap path and the per-device autograd path give the same uploads, losses and buffers."""
    sizes = [5, 5, 5]
    a = tiny_learner(sizes, batchnorm=batchnorm, vmap_chunk_samples=None)
    b = tiny_learner(sizes, batchnorm=batchnorm, vmap_chunk_samples=5)
    for learner in (a, b):
        learner.compute(0, np.arange(3))
    # atol 1e-5: the conv bias feeding BatchNorm has a true gradient of 0 (rounding noise only)
    torch.testing.assert_close(a.gradients, b.gradients, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a.last_train_loss, b.last_train_loss, rtol=1e-6)
    for k, v in a.device_buffers.items():
        torch.testing.assert_close(v, b.device_buffers[k])


def test_per_device_path_taken_only_when_one_device_fills_a_chunk(monkeypatch) -> None:
    """compute() uses plain autograd per device iff vmap_chunk_samples < 2 x the largest batch."""
    calls: list[str] = []
    for name in ("vmap_grads", "per_device_grads"):
        orig = getattr(GradientPaths, name)

        def spy(self, *a, _name=name, _orig=orig):
            calls.append(_name)
            return _orig(self, *a)

        monkeypatch.setattr(GradientPaths, name, spy)
    for chunk in (12, 11, None):
        tiny_learner([6, 6, 3], vmap_chunk_samples=chunk).compute(0, np.arange(3))
    assert calls == ["vmap_grads", "per_device_grads", "vmap_grads"]


@pytest.mark.parametrize("path", PATHS)
def test_compact_images_give_the_same_uploads(path: str) -> None:
    """A learner on uint8 CompactImages computes exactly the uploads of one on the float set."""
    from wflsim.models.data import CompactImages

    g = torch.Generator().manual_seed(3)
    raw = torch.randint(0, 256, (120, 1, 2, 2), dtype=torch.uint8, generator=g)
    compact = CompactImages(raw, 0.3, 0.2)
    ref = tiny_learner([6, 6, 6], **path_kwargs(path, [6]))
    learners = []
    for x in (compact, compact.materialise()):
        lr = TorchLearner(
            model=copy.deepcopy(ref.model),
            x_train=x,
            y_train=ref.data.y_train,
            x_test=x[:50],
            y_test=ref.data.y_train[:50],
            parts=ref.parts,
            batch_sizes=ref.batch_sizes,
            lr=0.3,
            sampling_rngs=[np.random.default_rng([0, n]) for n in range(3)],
            **path_kwargs(path, [6]),
        )
        lr.compute(0, np.arange(3))
        learners.append(lr)
    assert isinstance(learners[0].data.x_train, CompactImages)
    assert torch.equal(learners[0].gradients, learners[1].gradients)
    assert learners[0].evaluate() == learners[1].evaluate()


def test_vmap_chunk_auto_resolves_per_device_type() -> None:
    """vmap_chunk_samples='auto' takes the CPU value of AUTO_CHUNK_SAMPLES; a bad value is refused."""
    from wflsim.models.learner import AUTO_CHUNK_SAMPLES

    assert tiny_learner([4, 4]).vmap_chunk_samples == AUTO_CHUNK_SAMPLES["cpu"]
    with pytest.raises(ValueError, match="vmap_chunk_samples"):
        tiny_learner([4, 4], vmap_chunk_samples="big")


def test_sampling_with_and_without_replacement() -> None:
    """A device draws B_n distinct local samples if it holds >= B_n, else B_n with replacement."""
    learner = tiny_learner([10, 40], n_samples=26)  # 13 samples each
    learner.compute(0, np.array([0, 1]))
    few, many = learner.last_batches
    assert few.size == 10 and np.unique(few).size == 10
    assert many.size == 40 and np.unique(many).size <= 13
    assert set(few) <= set(learner.parts[0]) and set(many) <= set(learner.parts[1])


# ----------------------------------------------------------------------------- aggregation


def test_fedsgd_step_equals_sgd_on_the_union_batch() -> None:
    """Equal B_n, all successful: one FedSGD step = one SGD step on the concatenated batches."""
    learner = tiny_learner([8, 8, 8], lr=0.7)
    w0 = learner.global_params()
    learner.compute(0, np.arange(3))
    union = torch.as_tensor(np.concatenate(learner.last_batches))
    learner.apply(0, np.arange(3))

    net = copy.deepcopy(learner.model)
    vector_to_parameters(w0.clone(), net.parameters())
    loss = F.cross_entropy(net(learner.data.x_train[union]), learner.data.y_train[union])
    loss.backward()
    expected = w0 - 0.7 * torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    torch.testing.assert_close(learner.global_params(), expected, rtol=1e-5, atol=1e-6)


def test_aggregation_weights_uploads_by_batch_size() -> None:
    """Eq. 3: g = sum_n B_n g_n / sum_n B_n over the successful devices."""
    learner = tiny_learner([2, 9, 5, 4], lr=0.5)
    w0 = learner.global_params()
    learner.compute(0, np.arange(4))
    grads = learner.gradients.clone()
    learner.apply(0, np.array([1, 3, 0]))
    g = (9 * grads[1] + 4 * grads[3] + 2 * grads[0]) / 15
    torch.testing.assert_close(learner.global_params(), w0 - 0.5 * g, rtol=1e-6, atol=1e-7)


def test_failed_devices_do_not_influence_the_step() -> None:
    """Computing extra devices that then fail gives the same step as not computing them."""
    a, b = tiny_learner([4, 6, 5, 7, 3]), tiny_learner([4, 6, 5, 7, 3])
    ok = np.array([1, 4])
    a.compute(0, np.arange(5))
    a.apply(0, ok)
    b.compute(0, ok)
    b.apply(0, ok)
    torch.testing.assert_close(a.global_params(), b.global_params(), rtol=1e-6, atol=1e-7)
    assert not torch.equal(a.global_params(), tiny_learner([4, 6, 5, 7, 3]).global_params())


def test_empty_success_leaves_the_model_unchanged() -> None:
    """No successful upload => no step."""
    learner = tiny_learner([4, 4, 4])
    w0 = learner.global_params()
    learner.compute(0, np.arange(3))
    learner.apply(0, np.array([], dtype=np.int64))
    assert torch.equal(learner.global_params(), w0)
    learner.compute(1, np.array([], dtype=np.int64))
    learner.apply(1, np.array([], dtype=np.int64))
    assert torch.equal(learner.global_params(), w0)


def test_success_without_compute_is_an_error() -> None:
    """A device reported successful that computed nothing this slot is a ValueError."""
    learner = tiny_learner([4, 4, 4])
    learner.compute(0, np.array([0, 1]))
    with pytest.raises(ValueError, match="computed nothing"):
        learner.apply(0, np.array([2]))


def test_per_coordinate_aggregation_divides_by_uploaders() -> None:
    """per_coordinate: each coordinate's sum is divided by the B weight of those who uploaded it."""
    learner = with_freezing(
        tiny_learner([3, 5, 2], aggregation="per_coordinate", lr=0.2), np.array([0.5, 0.0, 0.8])
    )
    w0 = learner.global_params()
    learner.compute(3, np.arange(3))
    grads, masks = learner.gradients.clone(), rule(learner).masks()
    learner.apply(3, np.array([0, 2]))
    active = (~masks[[0, 2]]).float()
    bw = torch.tensor([3.0, 2.0])
    denom = bw @ active
    g = torch.where(denom > 0, (bw @ grads[[0, 2]]) / denom.clamp_min(1e-30), 0.0)
    assert (denom == 0).any() and (denom == 3).any()  # both cases are exercised
    torch.testing.assert_close(learner.global_params(), w0 - 0.2 * g, rtol=1e-6, atol=1e-7)


def test_half_life_learning_rate() -> None:
    """lr_schedule='half_life': lr_t = lr * 0.5 ** (t / total_slots); 'constant' stays lr."""
    learner = tiny_learner([4], lr=0.05, lr_schedule="half_life", total_slots=200)
    assert learner.lr_at(0) == 0.05
    assert learner.lr_at(200) == pytest.approx(0.025)
    assert learner.lr_at(100) == pytest.approx(0.05 / np.sqrt(2))
    assert tiny_learner([4], lr=0.05).lr_at(1000) == 0.05


# ----------------------------------------------------------------------------- freezing


def test_stability_scores_by_hand() -> None:
    """s = |sum u| / sum |u|: updates (+1, -1, +2) -> 0.5; (+1, +1) -> 1; never moved -> default."""
    updates = torch.tensor([[1.0, 1.0, 0.0], [-1.0, 1.0, 0.0], [2.0, 0.0, 0.0]])
    s = stability_scores(updates.sum(0), updates.abs().sum(0), unmoved_stability=0.7)
    assert s.tolist() == pytest.approx([0.5, 1.0, 0.7])


def test_freeze_masks_pick_the_smallest_scores() -> None:
    """freeze_masks freezes the k_n smallest scores per device, ties by lower index."""
    scores = torch.tensor([[0.9, 0.1, 0.5, 0.1], [0.2, 0.3, 0.0, 1.0]])
    masks = freeze_masks(scores, np.array([2, 3]))
    assert masks.tolist() == [[False, True, False, True], [True, True, True, False]]
    shared = freeze_masks(scores[:1], np.array([0, 1, 4]))
    assert shared.tolist() == [[False] * 4, [False, True, False, False], [True] * 4]


def test_freezing_by_stability_without_scores_is_refused() -> None:
    """Before a frame has ended there are no scores: asking to freeze is a ValueError, not a
    silent no-op (the schemes' cost model freezes nothing in frame 0)."""
    learner = tiny_learner([4, 4])
    with pytest.raises(ValueError, match="scores"):
        learner.begin_frame(0, freeze(learner, [0.5, 1.0]))
    learner.begin_frame(0, freeze(learner, [0.0, 0.0]))
    assert not rule(learner).masks().any()
    assert rule(learner).frozen_fraction().tolist() == [0.0, 0.0]


def test_freezing_counts_follow_gamma_and_scores() -> None:
    """Device n freezes rint(gamma_n D) parameters, those with the smallest previous scores."""
    learner = tiny_learner([4, 4, 4])
    gamma = np.array([0.0, 0.25, 0.6])
    with_freezing(learner, gamma)
    d = learner.num_params
    masks, scores = rule(learner).masks().numpy(), rule(learner).score_array()
    assert masks.sum(axis=1).tolist() == np.rint(gamma * d).astype(int).tolist()
    assert rule(learner).frozen_fraction() == pytest.approx(np.rint(gamma * d) / d)
    for n in (1, 2):
        assert scores[n][masks[n]].max() <= scores[n][~masks[n]].min()


def test_frozen_entries_hold_frame_start_values_and_are_not_uploaded() -> None:
    """Within a frame frozen entries keep their frame-start value, upload 0; active ones follow w."""
    learner = with_freezing(tiny_learner([4, 6, 5]), np.array([0.4, 0.0, 0.7]))
    w_frame, masks = learner.global_params(), rule(learner).masks()
    ids = np.arange(3)
    for t in range(3, 7):
        learner.compute(t, ids)
        assert torch.all(learner.gradients[masks] == 0)
        learner.apply(t, ids)
        local, w = learner.local_params(ids), learner.global_params()
        assert torch.equal(local[masks], w_frame.expand(3, -1)[masks])
        assert torch.equal(local[~masks], w.expand(3, -1)[~masks])
    assert not torch.equal(learner.global_params(), w_frame)


def test_stability_recursion_matches_hand_computation() -> None:
    """dU, dU_abs and s of every device (participating or not) follow eqs. 5-6 over two frames."""
    learner = tiny_learner([3, 5, 4, 2], hidden=None, lr=0.5)  # D = 15
    n_dev, slots = 4, 4
    participating = [np.array([0, 1, 2, 3]), np.array([1, 3]), np.array([0, 2]), np.array([2])]
    succeeding = [np.array([0, 2, 3]), np.array([1]), np.array([], dtype=np.int64), np.array([2])]
    gammas = [np.full(n_dev, 0.5), np.array([0.0, 0.2, 0.5, 1.0])]
    for frame, gamma in enumerate(gammas):
        learner.begin_frame(frame, freeze(learner, gamma if frame else np.zeros(n_dev)))
        du = np.zeros((n_dev, learner.num_params))
        du_abs = np.zeros_like(du)
        for t in range(slots):
            learner.compute(t, participating[t])
            w_tilde = learner.local_params(np.arange(n_dev)).numpy().astype(np.float64)
            learner.apply(t, succeeding[t])
            diff = w_tilde - learner.global_params().numpy().astype(np.float64)
            du += diff
            du_abs += np.abs(diff)
        got_du, got_abs = rule(learner).accumulators()
        np.testing.assert_allclose(got_du, du, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_abs, du_abs, rtol=1e-5, atol=1e-6)
        learner.end_frame(frame)
        expected = np.where(du_abs > 0, np.abs(du) / np.where(du_abs > 0, du_abs, 1.0), 1.0)
        scores = rule(learner).score_array()
        np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-6)
        if frame == 0:
            assert np.allclose(scores, scores[0])  # nothing frozen in frame 0
    assert rule(learner).masks()[3].all()  # gamma = 1: everything frozen, still accumulated


def test_unmoved_parameters_get_the_configured_score() -> None:
    """A frame without any step gives every parameter s = unmoved_stability (0/0)."""
    learner = tiny_learner([4, 4], unmoved_stability=0.25)
    learner.begin_frame(0, freeze(learner, np.zeros(2)))
    learner.compute(0, np.arange(2))
    learner.apply(0, np.array([], dtype=np.int64))
    learner.end_frame(0)
    assert np.all(rule(learner).score_array() == 0.25)


@pytest.mark.parametrize("path", PATHS)
def test_batchnorm_model_grads_and_buffer_averaging(path: str) -> None:
    """BatchNorm: per-device grads equal the loop; running stats average over successful devices."""
    learner = tiny_learner([3, 6, 4], batchnorm=True, **path_kwargs(path, [6]))
    learner.compute(0, np.arange(3))
    # the conv bias feeding BatchNorm has a true gradient of 0: compare at rounding-noise level
    torch.testing.assert_close(learner.gradients, reference_grads(learner), rtol=1e-5, atol=1e-5)
    stats = []
    for row in (0, 2):
        net = copy.deepcopy(learner.model).train()
        batch = torch.as_tensor(learner.last_batches[row])
        net(learner.data.x_train[batch])
        stats.append(net[1].running_mean.clone())
    learner.apply(0, np.array([0, 2]))
    assert learner.num_params == sum(p.numel() for p in learner.model.parameters())
    torch.testing.assert_close(learner.buffers["1.running_mean"], (stats[0] + stats[1]) / 2)


# ----------------------------------------------------------------------------- whole learner


def digits_learner(seed: int, **kwargs) -> TorchLearner:
    config = dict(
        dataset="digits",
        data_dir=None,
        model="mlp",
        partition="iid",
        dirichlet_alpha=None,
        batch_sizes=np.full(30, 32),
        lr=0.5,
        total_slots=150,
        streams=Streams(seed),
    )
    config.update(kwargs)
    return TorchLearner.from_config(**config)


def test_the_application_builds_a_torch_learner_that_implements_the_protocol() -> None:
    """wflsim.app.run.make_learner of a learning scenario returns a TorchLearner that
    satisfies the Learner protocol."""
    import wflsim
    from golden_runs import digits
    from wflsim.app.run import make_learner

    learner = make_learner(wflsim.prepare(digits("two_timescale", 0)))
    assert isinstance(learner, TorchLearner) and isinstance(learner, Learner)
    assert learner.num_params == 9610


def test_the_application_builds_a_null_learner_without_learning() -> None:
    """wflsim.app.run.make_learner of a network-only scenario returns a NullLearner with the
    scenario's D."""
    import wflsim
    from conftest import base_scenario
    from wflsim.app.run import make_learner

    learner = make_learner(wflsim.prepare(base_scenario()))
    assert isinstance(learner, NullLearner) and learner.num_params == 100_000


def test_init_does_not_touch_the_global_torch_rng() -> None:
    """from_config seeds its own init and leaves the global torch RNG state as it was."""
    state = torch.get_rng_state()
    digits_learner(0)
    assert torch.equal(state, torch.get_rng_state())


def test_same_seed_same_parameters_different_seed_different() -> None:
    """Same seed => bit-identical parameters after a few freezing steps; another seed differs."""

    def run(seed: int) -> torch.Tensor:
        learner = digits_learner(seed, batch_sizes=np.array([8, 16, 4, 12, 8, 8]))
        rng = np.random.default_rng(0)
        for frame in range(3):
            learner.begin_frame(frame, freeze(learner, np.full(6, 0.3 if frame else 0.0)))
            for t in range(2):
                ids = np.flatnonzero(rng.random(6) < 0.7)
                learner.compute(2 * frame + t, ids)
                learner.apply(2 * frame + t, ids[: max(ids.size - 1, 0)])
            learner.end_frame(frame)
        return learner.global_params()

    a, b, c = run(0), run(0), run(1)
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)


def test_evaluate_matches_a_manual_pass_and_caps_samples() -> None:
    """evaluate() = (mean CE, accuracy) on the test split; eval_max_samples uses the first k."""
    learner = tiny_learner([4, 4], eval_max_samples=20, eval_batch_size=7)
    learner.compute(0, np.arange(2))
    learner.apply(0, np.arange(2))
    net = copy.deepcopy(learner.model)
    vector_to_parameters(learner.global_params(), net.parameters())
    with torch.no_grad():
        logits = net(learner.x_test[:20])
    loss, acc = learner.evaluate()
    assert loss == pytest.approx(float(F.cross_entropy(logits, learner.y_test[:20])), rel=1e-5)
    assert acc == pytest.approx(float((logits.argmax(1) == learner.y_test[:20]).float().mean()))


def test_sync_model_copies_the_global_parameters() -> None:
    """sync_model() writes the global model into learner.model."""
    learner = tiny_learner([4, 4])
    learner.compute(0, np.arange(2))
    learner.apply(0, np.arange(2))
    synced = parameters_to_vector(learner.sync_model().parameters())
    assert torch.equal(synced, learner.global_params())


@pytest.mark.slow
def test_digits_fedsgd_reaches_85_percent() -> None:
    """Digits, 30 IID devices, B=32, lr=0.5, 150 FedSGD steps: test accuracy > 0.85 (measured ~0.96)."""
    learner = digits_learner(0)
    ids = np.arange(30)
    learner.begin_frame(0, freeze(learner, np.zeros(30)))
    for t in range(150):
        learner.compute(t, ids)
        learner.apply(t, ids)
    learner.end_frame(0)
    loss, acc = learner.evaluate()
    assert acc > 0.85, (loss, acc)


def test_sampling_streams_make_batches_independent_of_history():
    """With sampling_streams, a device's batch in slot t does not depend on its earlier participation."""
    a = tiny_learner([8, 8], sampling_streams=Streams(4))
    b = tiny_learner([8, 8], sampling_streams=Streams(4))
    a.begin_frame(0, freeze(a, np.zeros(2)))
    b.begin_frame(0, freeze(b, np.zeros(2)))
    a.compute(0, np.array([0, 1]))  # device 0 takes part in slot 0 in a only
    a.apply(0, np.array([0, 1]))
    b.compute(0, np.array([1]))
    b.apply(0, np.array([1]))
    a.compute(1, np.array([0]))
    b.compute(1, np.array([0]))
    np.testing.assert_array_equal(a.last_batches[0], b.last_batches[0])


def test_stable_fraction_follows_the_papers_rule():
    """stable_fraction = share of parameters whose |update| over the last 10 slots < 0.5 % of the total."""
    learner = tiny_learner([8, 8, 8], lr=0.5)
    learner.begin_frame(0, freeze(learner, np.zeros(3)))
    weights = [learner.global_params().clone()]
    for t in range(22):
        if t == 12:
            learner.lr = 1e-6  # updates become tiny: moved parameters turn stable
        learner.compute(t, np.arange(3))
        learner.apply(t, np.arange(3))
        weights.append(learner.global_params().clone())
        if t < 9:
            assert np.isnan(learner.stable_fraction)
    w = torch.stack(weights).double()
    steps = (w[1:] - w[:-1]).abs()
    recent, total = steps[-10:].sum(0), steps.sum(0)
    expected = float(((total > 0) & (recent < 0.005 * total)).double().mean())
    assert expected > 0.5  # the scenario exercises the rule
    assert learner.stable_fraction == pytest.approx(expected)


def test_num_samples_are_the_partition_sizes():
    """num_samples[n] is the size of device n's local data (the trace's device_config column)."""
    learner = tiny_learner([4, 4, 4], n_samples=100)
    assert learner.num_samples.tolist() == [p.size for p in learner.parts]
    assert learner.num_samples.sum() == 100


def test_random_selection_freezes_exact_counts_reproducibly():
    """selection='random': rint(gamma D) parameters per device, the same for the same seed and
    frame, another draw in another frame, and no scores needed."""
    masks = []
    for _ in range(2):
        learner = tiny_learner([4, 4, 4], sampling_streams=Streams(5))
        learner.set_update_rule(UpdateRuleSpec("freezing", {"selection": "random"}))
        learner.begin_frame(1, freeze(learner, [0.0, 0.3, 0.7]))
        masks.append(rule(learner).masks().numpy())
    d = masks[0].shape[1]
    assert masks[0].sum(axis=1).tolist() == np.rint(np.array([0.0, 0.3, 0.7]) * d).tolist()
    np.testing.assert_array_equal(masks[0], masks[1])
    learner.begin_frame(2, freeze(learner, [0.0, 0.3, 0.7]))
    assert not np.array_equal(rule(learner).masks().numpy(), masks[0])


def test_random_selection_ignores_the_scores():
    """Random masks are independent of stability: over many draws each parameter is frozen with
    probability gamma whatever its score (chi-square on frozen counts per parameter, p > 0.001)."""
    from scipy import stats

    learner = tiny_learner([4] * 40, sampling_streams=Streams(6), hidden=None)  # D = 15
    learner.set_update_rule(UpdateRuleSpec("freezing", {"selection": "random"}))
    d, gamma = learner.num_params, 0.4
    counts = np.zeros(d)
    for frame in range(25):
        learner.begin_frame(frame, freeze(learner, np.full(40, gamma)))
        counts += rule(learner).masks().numpy().sum(axis=0)
    expected = np.full(d, counts.sum() / d)
    assert stats.chisquare(counts, expected).pvalue > 1e-3


def test_update_rule_cannot_change_after_the_first_frame():
    """The rule owns per-device state: set_update_rule after begin_frame is a RuntimeError."""
    learner = tiny_learner([4, 4])
    learner.begin_frame(0, freeze(learner, [0.0, 0.0]))
    with pytest.raises(RuntimeError, match="before the first frame"):
        learner.set_update_rule(UpdateRuleSpec("freezing", {"selection": "random"}))


@pytest.mark.parametrize("path", PATHS)
def test_per_device_starting_buffers_update_each_devices_statistics(path: str) -> None:
    """Given per-device BatchNorm statistics, each device's new running statistics are its own
    start moved by its batch (reference: a model copy per device with those statistics)."""
    from wflsim.models.learner.sampling import Batch

    learner = tiny_learner([4, 6, 5], batchnorm=True, **path_kwargs(path, [6]))
    learner.compute(0, np.arange(3))  # draws the batches used below
    batches = learner.last_batches
    starts = {
        k: torch.stack([v + float(n) for n in range(3)])
        if v.is_floating_point()
        else torch.stack([v + n for n in range(3)])
        for k, v in learner.buffers.items()
    }
    b = np.array([4, 6, 5])
    idx = np.zeros((3, 6), dtype=np.int64)
    wts = np.zeros((3, 6), dtype=np.float32)
    for row, s in enumerate(batches):
        idx[row, : s.size], idx[row, s.size :], wts[row, : s.size] = s, s[0], 1.0 / s.size
    batch = Batch(ids=np.arange(3), sizes=b, idx=idx, weights=wts, samples=batches)
    _, _, new = learner.paths.compute(learner.global_params(), batch, learner.buffers, starts)
    for row in range(3):
        net = copy.deepcopy(learner.model).train()
        vector_to_parameters(learner.global_params(), net.parameters())
        net[1].running_mean.copy_(starts["1.running_mean"][row])
        net[1].running_var.copy_(starts["1.running_var"][row])
        net(learner.data.x_train[torch.as_tensor(batches[row])])
        torch.testing.assert_close(new["1.running_mean"][row], net[1].running_mean)
        torch.testing.assert_close(new["1.running_var"][row], net[1].running_var)


def test_the_learner_implements_every_registered_update_rule_and_no_other():
    """models' rule builders and sim's update-rule registry name the same rules."""
    from wflsim.models.registry import RULE_BUILDERS
    from wflsim.sim.registry import UPDATE_RULES

    assert set(RULE_BUILDERS) == set(UPDATE_RULES)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_every_scheme_plans_its_rules_typed_inputs(scheme):
    """Every scheme's frame plan carries its update rule's own input record."""
    from wflsim.app.run import build_engine, make_learner
    from wflsim.sim.registry import UPDATE_RULES

    prep = wflsim.prepare(network_only(scheme={"name": scheme}))
    engine = build_engine(prep, make_learner(prep))
    ctx = FrameContext(frame=1, large_scale_gain=np.full(6, 1e-9), queue_j=np.zeros(6))
    plan = engine.scheme.plan_frame(ctx)
    assert type(plan.update) is UPDATE_RULES[engine.scheme.update_rule.name].inputs


def test_inputs_of_another_rule_are_refused():
    """A frame plan whose inputs belong to another rule is refused with both names."""
    from wflsim.sim.registry import UPDATE_RULES
    from wflsim.sim.updates import TopKInputs, UpdateRuleSpec

    inputs = TopKInputs(k=np.zeros(3, dtype=np.int64))
    with pytest.raises(TypeError, match="FreezingInputs.*TopKInputs"):
        UpdateRuleSpec("freezing").check_inputs(inputs, UPDATE_RULES)
