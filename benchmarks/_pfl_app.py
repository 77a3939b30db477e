"""The pfl side of ``pfl_compare.py`` (imported only by the interpreter that has pfl 0.6.0).

FedAvg the way pfl runs it in its own benchmarks (``benchmarks/image_classification`` of
apple/pfl-research): a :class:`pfl.data.federated_dataset.FederatedDataset` of per-user datasets,
a :class:`pfl.model.pytorch.PyTorchModel` with ``torch.optim.SGD`` as the local optimizer and a
central ``torch.optim.SGD`` at learning rate 1, a :class:`pfl.aggregate.simulate.SimulatedBackend`
with :class:`pfl.aggregate.weighting.WeightByDatapoints`, ``FederatedAveraging.run`` with
:class:`pfl.hyperparam.NNTrainHyperParams` and a :class:`pfl.callback.CentralEvaluationCallback`.

What is made equal to wflsim's work (docs/performance/peers.md lists it):

* the cohorts and the data: ``pfl_compare.py`` draws, with wflsim's own random streams and rules,
  each round's cohort (``uniform`` selection: ``cohort`` distinct users) and each cohort user's
  ``local_steps`` minibatches of ``batch`` samples of its part of the IID partition, and the wflsim
  child checks that its run trained on exactly those. Here pfl's user sampler hands out those
  cohorts and each user's ``Dataset`` is its minibatches, which pfl's local training iterates in
  order, one SGD step each: both sides do the same arithmetic, so their accuracies agree up to
  float rounding;
* no client-side evaluation: pfl's FedAvg evaluates every cohort user's data before and after its
  local training in rounds where ``iteration % evaluation_frequency == 0``, which includes the
  first round; wflsim does not, so :class:`FedAvgNoLocalEval` turns it off;
* the central evaluation on the 10,000 test images before the first round (pfl's callback does
  that) and after the last one (wflsim evaluates at the start of the run and at the end).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from pfl.aggregate.simulate import SimulatedBackend
from pfl.aggregate.weighting import WeightByDatapoints
from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
from pfl.callback.central_evaluation import CentralEvaluationCallback
from pfl.data.dataset import Dataset
from pfl.data.federated_dataset import FederatedDataset
from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
from pfl.metrics import Metrics, Weighted
from pfl.model.pytorch import PyTorchModel
from torch import nn


class PflNet(nn.Module):
    """The benchmark's network with the ``loss`` and ``metrics`` methods pfl's PyTorchModel
    calls (mean cross-entropy; summed loss and correct predictions weighted by the samples)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.train()
        return F.cross_entropy(self(x), y)

    @torch.no_grad()
    def metrics(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, Weighted]:
        self.eval()
        logits = self(x)
        n = int(y.shape[0])
        loss = float(F.cross_entropy(logits, y, reduction="sum"))
        correct = int((logits.argmax(1) == y).sum())
        return {"loss": Weighted(loss, n), "accuracy": Weighted(correct, n)}


class ScheduledUsers:
    """pfl's user sampler (``callable() -> user id``) and ``make_dataset_fn`` (``user id ->
    Dataset``) over a given schedule: round ``r``'s cohort is ``cohorts[r]`` and user ``u``'s
    dataset in it the samples ``batches[r][i]`` (``(steps * batch,)`` indices, its ``steps``
    minibatches one after the other) for ``u = cohorts[r][i]``. The ids handed out are
    ``(round, user)`` pairs, so each dataset is the one of its round."""

    def __init__(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        cohorts: Sequence[np.ndarray],
        batches: Sequence[np.ndarray],
    ) -> None:
        self.x, self.y = x, y
        self.cohorts, self.batches = cohorts, batches
        self._next = ((r, i) for r, c in enumerate(cohorts) for i in range(len(c)))

    def sample(self) -> tuple[int, int]:
        return next(self._next)

    def dataset(self, key: tuple[int, int]) -> Dataset:
        r, i = key
        idx = torch.from_numpy(self.batches[r][i])
        return Dataset((self.x[idx], self.y[idx]), user_id=str(int(self.cohorts[r][i])))


class FedAvgNoLocalEval(FederatedAveraging):
    """pfl's FedAvg without the evaluation of each cohort user's data before and after its
    local training (pfl does it in the rounds where ``do_evaluation`` is set, the first
    included); wflsim has no such evaluation."""

    def get_next_central_contexts(self, *args: Any, **kwargs: Any) -> Any:
        contexts, model, metrics = super().get_next_central_contexts(*args, **kwargs)
        if contexts is not None:
            contexts = tuple(dataclasses.replace(c, do_evaluation=False) for c in contexts)
        return contexts, model, metrics


class StartEndEvaluation(CentralEvaluationCallback):
    """pfl's central evaluation before training (the callback's own ``on_train_begin``) and at
    the end of training (``on_train_end``, inside ``run``; pfl's cadence
    ``central_iteration % frequency`` would skip the last round), and none in between; the
    time spent in it and the last metrics are kept."""

    def __init__(self, dataset: Dataset, eval_params: NNEvalHyperParams) -> None:
        super().__init__(dataset, model_eval_params=eval_params)
        self.seconds = 0.0
        self.last: dict[str, float] = {}

    def _eval(self, model: Any) -> tuple[bool, Metrics]:
        t0 = time.perf_counter()
        stop, metrics = super()._eval(model)
        self.seconds += time.perf_counter() - t0
        self.last = {str(name): float(getattr(v, "overall_value", v)) for name, v in metrics}
        return stop, metrics

    def after_central_iteration(
        self, aggregate_metrics: Metrics, model: Any, *, central_iteration: int
    ) -> tuple[bool, Metrics]:
        return False, Metrics()

    def on_train_end(self, *, model: Any) -> None:
        self._eval(model)


def run_fedavg(
    *,
    net: nn.Module,
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_test: torch.Tensor,
    y_test: torch.Tensor,
    cohorts: Sequence[np.ndarray],
    batches: Sequence[np.ndarray],
    batch: int,
    steps: int,
    lr: float,
) -> dict[str, float]:
    """FedAvg in pfl, one round per cohort of ``cohorts`` (all of one size), user ``cohorts[r][i]``
    training on the ``steps`` minibatches of ``batch`` samples ``batches[r][i]``; the training loop's seconds (``run_s``:
    ``FederatedAveraging.run``, both central evaluations included), the central evaluations'
    (``eval_s``), the local training's (``train_s``: ``train_one_user``) and the final test
    loss and accuracy."""
    rounds, cohort = len(cohorts), len(cohorts[0])
    users = ScheduledUsers(x_train, y_train, cohorts, batches)
    fed = FederatedDataset(users.dataset, users.sample)
    model_net = PflNet(net)
    params = [p for p in model_net.parameters() if p.requires_grad]
    model = PyTorchModel(
        model=model_net,
        local_optimizer_create=torch.optim.SGD,
        central_optimizer=torch.optim.SGD(params, lr=1.0),
    )
    backend = SimulatedBackend(
        training_data=fed, val_data=fed, postprocessors=[WeightByDatapoints()]
    )
    algorithm = FedAvgNoLocalEval()
    train_s = [0.0]
    inner = algorithm.train_one_user

    def timed_train(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            train_s[0] += time.perf_counter() - t0

    algorithm.train_one_user = timed_train  # type: ignore[method-assign]
    eval_params = NNEvalHyperParams(local_batch_size=2048)
    evaluation = StartEndEvaluation(Dataset((x_test, y_test)), eval_params)
    t0 = time.perf_counter()
    algorithm.run(
        algorithm_params=NNAlgorithmParams(
            central_num_iterations=rounds,
            evaluation_frequency=rounds,
            train_cohort_size=cohort,
            val_cohort_size=0,
        ),
        backend=backend,
        model=model,
        model_train_params=NNTrainHyperParams(
            local_learning_rate=lr,
            local_num_epochs=None,
            local_batch_size=batch,
            local_num_steps=steps,
        ),
        model_eval_params=eval_params,
        callbacks=[evaluation],
    )
    run_s = time.perf_counter() - t0
    last = evaluation.last
    return {
        "run_s": run_s,
        "eval_s": evaluation.seconds,
        "train_s": train_s[0],
        "final_loss": last.get("Central val | loss", float("nan")),
        "final_accuracy": last.get("Central val | accuracy", float("nan")),
    }
