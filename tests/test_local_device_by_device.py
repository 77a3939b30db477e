"""The learning loop's lean paths (issue 49): local steps device by device, uploads not copied,
evaluation in cache-sized batches.

The device-by-device local steps must give the uploads, losses and BatchNorm statistics of the
batched form (every device's step ``e`` in one ``(n, D)`` call) bit for bit: the same operations
on the same values, one row at a time. The batched form's first step is the per-device path here
(a vmap chunk of one device's batch), which the device-by-device steps take for every step."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
from test_learner import tiny_learner, with_freezing

from wflsim.models.learner.aggregate import computed_rows
from wflsim.models.learner.evaluation import AUTO_EVAL_BATCH
from wflsim.models.learner.gradients import GradientPaths, Grads
from wflsim.models.learner.local import local_updates
from wflsim.models.learner.strategies import StrategySettings
from wflsim.models.registry import build_strategy
from wflsim.sim.strategies import StrategySpec


class BatchedPaths(GradientPaths):
    """The learner's paths with the later local steps in the batched ``(n, D)`` form."""

    steps_per_device = False  # type: ignore[assignment]


def both_forms(learner: Any, ids: np.ndarray, steps: list[int], **kw: Any) -> tuple[Grads, Grads]:
    """:func:`local_updates` of ``ids`` with ``steps`` local steps, device by device and batched."""
    steps_a = np.asarray(steps, dtype=np.int64)
    batches = learner.data.draw_steps(4, ids, steps_a)
    params = learner.rule.local_params(learner.global_params(), ids)
    trained = learner.rule.trained(ids)
    lr = np.linspace(0.1, 0.3, ids.size)
    batched = copy.copy(learner.paths)
    batched.__class__ = BatchedPaths
    a, b = (
        local_updates(paths, params, batches, steps_a, lr, trained, learner.buffers, **kw)
        for paths in (learner.paths, batched)
    )
    return a, b


def assert_identical(a: Grads, b: Grads) -> None:
    """Uploads, losses and every buffer equal bit for bit."""
    assert torch.equal(a[0], b[0])
    assert torch.equal(a[1], b[1])
    assert a[2].keys() == b[2].keys()
    for k in a[2]:
        assert torch.equal(a[2][k], b[2][k])


@pytest.mark.parametrize("batchnorm", [False, True])
@pytest.mark.parametrize("steps", [[3, 3, 3, 3], [4, 1, 2, 3]])
def test_device_by_device_steps_equal_the_batched_form(batchnorm: bool, steps: list[int]) -> None:
    """Equal and unequal E_n, with and without BatchNorm: uploads, losses, buffers bit for bit."""
    learner = tiny_learner([5, 3, 6, 4], batchnorm=batchnorm, vmap_chunk_samples=6)
    a, b = both_forms(learner, np.array([2, 0, 3, 1]), steps)
    assert not torch.equal(a[0], torch.zeros_like(a[0]))
    assert_identical(a, b)


def test_device_by_device_steps_keep_the_frozen_coordinates() -> None:
    """Per-device frozen parameters ((n, D) local models, masks): the same uploads as batched."""
    learner = with_freezing(
        tiny_learner([5, 5, 5], vmap_chunk_samples=5), np.array([0.3, 0.0, 0.7])
    )
    a, b = both_forms(learner, np.arange(3), [3, 2, 4])
    assert_identical(a, b)


def test_device_by_device_steps_add_the_proximal_term_and_the_drift() -> None:
    """FedProx's correction mu (w_e - w_0) and a constant drift per device: as batched."""
    learner = tiny_learner([4, 6, 5], hidden=7, vmap_chunk_samples=6)
    prox = build_strategy(
        StrategySpec("fedprox", {"mu": 0.5}), StrategySettings(learner.num_params, learner.device)
    )
    drift = torch.linspace(-0.1, 0.1, 3 * learner.num_params).view(3, -1)
    a, b = both_forms(
        learner, np.arange(3), [3, 1, 4], correction=prox.local_correction, drift=drift
    )
    assert_identical(a, b)


def test_a_slot_where_every_device_arrives_aggregates_the_uploads_themselves() -> None:
    """Every computed device made the deadline: apply reads the slot's uploads (no (n, D) copy);
    a subset gets its rows gathered."""
    learner = tiny_learner([4, 4, 4])
    ids = np.array([2, 0, 1])
    learner.compute(0, ids)
    rows = torch.arange(3)
    every, _ = computed_rows(learner._ids, learner._uploads, learner._trained, ids, rows)
    assert every is learner.gradients
    some, _ = computed_rows(
        learner._ids, learner._uploads, None, np.array([0, 1]), torch.tensor([1, 2])
    )
    assert torch.equal(some, learner.gradients[1:])


def test_eval_batch_size_auto_takes_the_device_types_value() -> None:
    """eval_batch_size='auto' (the default) is AUTO_EVAL_BATCH['cpu'] on a CPU."""
    assert tiny_learner([4, 4]).eval_batch_size == AUTO_EVAL_BATCH["cpu"] == 512


@pytest.mark.parametrize("bad", [0, -3, "big", True])
def test_a_bad_eval_batch_size_is_refused(bad: Any) -> None:
    """0, negative, a string other than 'auto', a bool: ValueError naming eval_batch_size."""
    with pytest.raises(ValueError, match="eval_batch_size"):
        tiny_learner([4, 4], eval_batch_size=bad)


def test_evaluation_does_not_depend_on_the_batch_size() -> None:
    """The test split in batches of 7 or of 512: the same accuracy, the loss to float rounding."""
    small = tiny_learner([4, 4], eval_batch_size=7).evaluate()
    large = tiny_learner([4, 4]).evaluate()
    assert small[1] == large[1]
    assert small[0] == pytest.approx(large[0], rel=1e-6)


@pytest.mark.parametrize(("steps", "path"), [(1, "vmap_grads"), (3, "per_device_grads")])
def test_the_first_local_step_takes_the_per_device_pass_with_more_steps(
    monkeypatch: pytest.MonkeyPatch, steps: int, path: str
) -> None:
    """On a CPU with E > 1 every step, the first too, is one autograd pass per device (no vmap
    over chunks of devices); FedSGD (E = 1) keeps the vmap."""
    calls: list[str] = []
    for name in ("vmap_grads", "per_device_grads"):
        orig = getattr(GradientPaths, name)

        def spy(self: Any, *a: Any, _name: str = name, _orig: Any = orig) -> Any:
            calls.append(_name)
            return _orig(self, *a)

        monkeypatch.setattr(GradientPaths, name, spy)
    tiny_learner([4, 4, 4], vmap_chunk_samples=None, local_steps=steps).compute(0, np.arange(3))
    assert calls == [path]
