"""The federated learner (PyTorch), split along its concerns.

* :mod:`wflsim.models.learner.core` -- :class:`TorchLearner`, which composes the parts below and
  implements :class:`wflsim.sim.learner.Learner`.
* :mod:`wflsim.models.learner.sampling` -- local data on the torch device, per-slot minibatches.
* :mod:`wflsim.models.learner.flat` -- a network seen as one flat parameter vector.
* :mod:`wflsim.models.learner.gradients` -- the vmap and per-device gradient paths.
* :mod:`wflsim.models.learner.rules` -- update rules with per-device state (freezing).
* :mod:`wflsim.models.learner.aggregate` -- aggregation as pure functions.
* :mod:`wflsim.models.learner.evaluation`, :mod:`wflsim.models.learner.stable_fraction` -- test
  accuracy and the paper's Fig. 1 metric.
"""

from .core import (
    AUTO_CHUNK_SAMPLES,
    LR_SCHEDULES,
    TorchLearner,
    resolve_device,
)
from .rules import Freezing, UpdateRule, freeze_masks, stability_scores

__all__ = [
    "AUTO_CHUNK_SAMPLES",
    "LR_SCHEDULES",
    "Freezing",
    "TorchLearner",
    "UpdateRule",
    "freeze_masks",
    "resolve_device",
    "stability_scores",
]
