"""The engine's view of the learning side: the :class:`Learner` protocol and a network-only learner.

The real learner (:class:`wflsim.models.learner.TorchLearner`) lives in :mod:`wflsim.models`; the application
builds it (:func:`wflsim.app.run.make_learner`, which imports torch only when learning is enabled)
and hands it to the :class:`~wflsim.sim.engine.Engine`, so ``sim`` never imports torch or
:mod:`wflsim.models`, and a network-only run does not need them.

Call order within a run (device indices are 0-based ``int64`` numpy arrays):

* ``set_update_rule(spec)`` once, before the first frame: the scheme's learner-side update rule
  (:class:`UpdateRuleSpec`, e.g. ``freezing``) with its parameters.
* ``set_strategy(spec)`` once, before the first frame, if the learner has it: the server
  strategy (:class:`~wflsim.sim.strategies.StrategySpec`, ``[strategy]``): how a server step
  turns the aggregated uploads into the next model. A learner without it steps as FedAvg does and
  takes only ``fedavg`` (the engine refuses another strategy).
* ``begin_frame(frame, update)`` at every frame start; ``update`` is the rule's frame inputs,
  decided by the scheme: its typed record of :mod:`wflsim.sim.updates` (for ``freezing``:
  :class:`~wflsim.sim.updates.FreezingInputs`, the number of parameters each device freezes).
* ``compute(slot, device_ids)`` once per slot with the devices that train in this slot (may be
  empty). All their uploads are computed in one batched call; virtual time does not advance.
* ``apply(slot, success_ids)`` at the end of the slot with the subset whose uploads arrived in
  time: the rule aggregates them (paper eq. 3, weights ``B_n``), one SGD step, broadcast. With an
  empty ``success_ids`` the global model does not move (but the slot still counts).
* ``evaluate()`` whenever the engine logs an evaluation: ``(loss, accuracy)`` on the test split.
* ``is_finite()`` after every ``apply``: False once a parameter or buffer of the global model is
  NaN or infinite (the engine then stops the run: training diverged).
* ``probe_losses(slot, device_ids)`` under ``[strategy.selection] rule = "power_of_choice"``
  only, at a slot's start before the selection (:class:`ProbingLearner`; a learner without it,
  e.g. :class:`NullLearner`, cannot run that rule): ``(n,)`` float64, each device's mean
  cross-entropy on the current global model (the version it would download; under stale updates
  the materialised one) over a minibatch of its own ``B_n`` samples keyed by ``(slot, device)``
  apart from its training minibatches (a forward pass: nothing is trained, the model, its
  buffers and the training batches do not change).
* ``receive_over_the_air(air)`` under ``[uplink] mode = "aircomp"`` only, just before ``apply``
  (:class:`AirCompLearner`): the slot's over-the-air sum (:class:`OverTheAir`): ``apply`` then
  aggregates what the server received, each upload weighted by its realised coefficient plus
  the receiver's noise, in place of the uploads' exact weighted mean; afterwards the learner's
  ``last_aggregation_mse`` is the mean squared error per entry between the received and the
  exact aggregate (None when nothing was aggregated).
* ``end_frame(frame)`` after the last slot of a frame.
* ``state_dict()`` / ``load_state_dict(state)`` at frame boundaries (checkpoint and resume): a
  nested dict of numpy arrays and plain numbers, no torch objects.
* attribute ``stable_fraction``: the fraction of the global model's parameters stable by the
  paper's Fig. 1 rule after the last ``apply`` (NaN when unknown); ``num_samples``: each device's
  local data size (None without data).

Under stale updates (``[server] mode = "semi_sync" | "async"``, :mod:`wflsim.sim.servers.stale`) the
engine calls, in place of ``compute`` and ``apply`` (:class:`VersionedLearner`):

* ``start_update(key, device, sample_key, slot)`` when ``device`` downloads the model in slot
  ``slot``: the learner keeps what the update will be computed on (the current model version,
  its buffers and the update rule's frame state, e.g. the freezing mask) under the handle
  ``key``; nothing is computed; ``sample_key`` keys the device's minibatches (the slot, or its
  cycle index); local steps take the learning rate of ``slot``;
* ``drop_update(key)``: the update will never be applied (dropped, too stale); its references
  are released, its gradient never computed;
* ``apply_updates(slot, keys, weights, server_lr)``: the server's step with the updates
  ``keys`` (possibly none): their gradients, computed now in one batched call at the versions
  they started from, aggregated with ``weights[i] B_i / sum B`` (the staleness weights),
  ``w <- w - lr_t server_lr g``; the model becomes a new version;
* ``materialise()`` at every slot's end: take the steps announced so far (their gradients
  batched across versions); the engine then checks ``is_finite`` (taking steps at fixed points
  keeps the batches, and so the results, independent of when a hook or evaluation reads the
  model);
* ``versions_kept``: model copies held now (the current one and those updates still reference).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from .strategies import StrategySpec
from .updates import OverTheAir, UpdateInputs, UpdateRuleSpec

__all__ = [
    "AirCompLearner",
    "Learner",
    "NullLearner",
    "OverTheAir",
    "ProbingLearner",
    "UpdateRuleSpec",
    "VersionedLearner",
]


@runtime_checkable
class Learner(Protocol):
    """What the engine needs from a learner (see the module docstring)."""

    #: ``D``: parameters counted in the payload ``S = bits_per_param * D`` (BatchNorm statistics
    #: are not counted).
    num_params: int
    num_samples: np.ndarray | None

    @property
    def stable_fraction(self) -> float:
        """Read by the engine after every ``apply`` (a property or a plain attribute)."""
        ...

    def set_update_rule(self, rule: UpdateRuleSpec) -> None: ...

    def begin_frame(self, frame: int, update: UpdateInputs) -> None: ...

    def compute(self, slot: int, device_ids: np.ndarray) -> None: ...

    def apply(self, slot: int, success_ids: np.ndarray) -> None: ...

    def evaluate(self) -> tuple[float, float]: ...

    def is_finite(self) -> bool: ...

    def end_frame(self, frame: int) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class VersionedLearner(Protocol):
    """What the engine needs from a learner under stale updates (see the module docstring)."""

    @property
    def versions_kept(self) -> int:
        """Model copies held now."""
        ...

    def start_update(self, key: int, device: int, sample_key: int, slot: int = 0) -> None: ...

    def drop_update(self, key: int) -> None: ...

    def apply_updates(
        self, slot: int, keys: np.ndarray, weights: np.ndarray, server_lr: float
    ) -> None: ...

    def materialise(self) -> None: ...


@runtime_checkable
class ProbingLearner(Protocol):
    """A learner that can run ``power_of_choice``'s loss probes (see the module docstring)."""

    def probe_losses(self, slot: int, device_ids: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class AirCompLearner(Protocol):
    """A learner that can apply an over-the-air sum (see the module docstring)."""

    #: the last apply's error (one value, or one per sum's aggregate; None: not over the air)
    last_aggregation_mse: float | np.ndarray | None

    def receive_over_the_air(self, air: OverTheAir) -> None: ...


class NullLearner:
    """A learner that trains nothing: the network-only mode (channels, controller, energy).

    The scheme decides what each device freezes (or sends) and the engine charges it, so a
    network-only run accounts payloads and energy exactly as the same run with training.
    """

    stable_fraction: float = float("nan")
    num_samples: np.ndarray | None = None
    #: nothing is aggregated, so no error is measured (:class:`AirCompLearner`)
    last_aggregation_mse: float | None = None

    def __init__(self, num_params: int) -> None:
        if num_params <= 0:
            raise ValueError("num_params must be > 0")
        self.num_params = int(num_params)
        self.rule: UpdateRuleSpec | None = None
        self.strategy: StrategySpec | None = None

    def set_update_rule(self, rule: UpdateRuleSpec) -> None:
        """Remember the rule (nothing is trained)."""
        self.rule = rule

    def set_strategy(self, strategy: StrategySpec) -> None:
        """Remember the strategy (nothing is trained: any strategy leaves the network side as
        it is)."""
        self.strategy = strategy

    def begin_frame(self, frame: int, update: UpdateInputs) -> None:
        """Nothing to do."""

    def compute(self, slot: int, device_ids: np.ndarray) -> None:
        """Nothing to do."""

    def apply(self, slot: int, success_ids: np.ndarray) -> None:
        """Nothing to do."""

    def receive_over_the_air(self, air: OverTheAir) -> None:
        """Nothing to aggregate."""

    def start_update(self, key: int, device: int, sample_key: int, slot: int = 0) -> None:
        """Nothing to keep."""

    def drop_update(self, key: int) -> None:
        """Nothing to release."""

    def apply_updates(
        self, slot: int, keys: np.ndarray, weights: np.ndarray, server_lr: float
    ) -> None:
        """Nothing to do."""

    def materialise(self) -> None:
        """Nothing to do."""

    @property
    def versions_kept(self) -> int:
        """0: there is no model."""
        return 0

    def evaluate(self) -> tuple[float, float]:
        """``(nan, nan)``: there is no model."""
        return (float("nan"), float("nan"))

    def is_finite(self) -> bool:
        """True: there is no model to diverge."""
        return True

    def end_frame(self, frame: int) -> None:
        """Nothing to do."""

    def state_dict(self) -> dict[str, Any]:
        """No state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""
