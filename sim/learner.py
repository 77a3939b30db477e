"""The engine's view of the learning side, and the learner that trains nothing.

The engine only talks to a learner through :class:`Learner`. The PyTorch implementation lives in
:mod:`models.learner` and is imported lazily by :func:`build_learner`, so ``sim`` never imports
torch and a network-only run does not need it.

Call order within a run (all device indices are 0-based ``int64`` numpy arrays):

* ``begin_frame(frame, gamma)`` at every frame start, ``gamma`` of shape ``(N,)`` in ``[0, 1]``:
  the fraction of parameters each device freezes for the frame (frame 0: all zeros).
* ``compute(slot, device_ids)`` once per slot with the devices that train in this slot (may be
  empty). All their gradients are computed in one batched call; virtual time does not advance.
* ``apply(slot, success_ids)`` at the end of the slot with the subset whose uploads arrived in
  time: aggregate (paper eq. 3, weights ``B_n``), take one SGD step, broadcast. With an empty
  ``success_ids`` the global model does not move (but the slot still counts, e.g. for the
  stability accumulators and learning-rate schedules).
* ``evaluate()`` whenever the engine logs an evaluation; returns ``(loss, accuracy)`` of the
  global model on the test split.
* ``end_frame(frame)`` after the last slot of a frame.
* ``frozen_fraction()`` after ``begin_frame``: the fraction ``(N,)`` each device actually froze
  (``round(gamma D) / D``; zeros in frame 0, which has no stability scores). The engine charges
  payload, compute time and energy with it, so accounting and learning never disagree.
* optional attribute ``stable_fraction``: the fraction of the global model's parameters that are
  stable by the paper's Fig. 1 rule after the last ``apply`` (NaN when unknown).
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Learner(Protocol):
    """What the engine needs from a learner."""

    #: Number of parameters counted in the upload payload ``S = bits_per_param * num_params``
    #: (BatchNorm running statistics are not counted).
    num_params: int

    def begin_frame(self, frame: int, gamma: np.ndarray) -> None: ...

    def compute(self, slot: int, device_ids: np.ndarray) -> None: ...

    def apply(self, slot: int, success_ids: np.ndarray) -> None: ...

    def evaluate(self) -> tuple[float, float]: ...

    def end_frame(self, frame: int) -> None: ...

    def frozen_fraction(self) -> np.ndarray: ...


class NullLearner:
    """A learner that trains nothing: the network-only mode (channels, controller, energy).

    It freezes exactly what :class:`models.learner.TorchLearner` would (``round(gamma D)``
    parameters, nothing in frame 0), so a network-only run accounts payloads and energy exactly as
    the same run with training.
    """

    stable_fraction = float("nan")

    def __init__(self, num_params: int) -> None:
        if num_params <= 0:
            raise ValueError("num_params must be > 0")
        self.num_params = int(num_params)
        self._frozen = np.zeros(0)

    def begin_frame(self, frame: int, gamma: np.ndarray) -> None:
        gamma = np.asarray(gamma, dtype=np.float64)
        counts = np.rint(gamma * self.num_params)
        self._frozen = np.zeros_like(gamma) if frame == 0 else counts / self.num_params

    def frozen_fraction(self) -> np.ndarray:
        return self._frozen.copy()

    def compute(self, slot: int, device_ids: np.ndarray) -> None:
        return None

    def apply(self, slot: int, success_ids: np.ndarray) -> None:
        return None

    def evaluate(self) -> tuple[float, float]:
        return (float("nan"), float("nan"))

    def end_frame(self, frame: int) -> None:
        return None


def build_learner(**kwargs: Any) -> Learner:
    """Build the PyTorch learner (imports :mod:`models` lazily; see ``models.learner``)."""
    module = importlib.import_module("models.learner")
    return module.TorchLearner.from_config(**kwargs)
