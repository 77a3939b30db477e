"""Callbacks: a researcher's code at the end of every slot, frame and run, with read-only views.

:class:`Callbacks` is the API's layer over the engine's :class:`~wflsim.sim.engine.Hooks`: each
callback gets a view (:class:`SlotView`, :class:`FrameView`, :class:`RunView`) holding copies of
what it may read (arrays marked read-only, the model as a detached copy), so that what a callback
does cannot change the run; a callback that only reads leaves the trace unchanged. A view's
:meth:`~FrameView.stop` ends the run after the frame in progress (early stopping): the run is
then complete, its summary says ``stopped_early``, and resuming it returns it as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from wflsim.sim.engine import Engine, Hooks
from wflsim.sim.slot import SlotOutcome

if TYPE_CHECKING:
    from torch import nn


def _frozen(a: Any) -> Any:
    """A read-only copy of an array (other values as they are)."""
    if isinstance(a, np.ndarray):
        out = a.copy()
        out.setflags(write=False)
        return out
    return a


class _View:
    """What every view has: the run's clock, totals, model and a way to stop."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def time_s(self) -> float:
        """Simulated time now, s."""
        return self._engine.clock_s

    @property
    def summary(self) -> dict[str, Any]:
        """The run's totals so far (a copy; the keys of ``RunResult.summary``)."""
        return self._engine.stats.as_dict()

    @property
    def accuracy(self) -> float:
        """Test accuracy of the last evaluation of the global model (NaN before the first and
        in network-only runs), in [0, 1]."""
        return float(self._engine.stats.last_accuracy)

    @property
    def loss(self) -> float:
        """Test loss of the last evaluation (NaN when none)."""
        return float(self._engine.stats.last_loss)

    def params(self) -> np.ndarray | None:
        """The global model as a flat read-only ``float32`` array ``(D,)`` (a copy; None in a
        network-only run)."""
        get = getattr(self._engine.learner, "global_params", None)
        if get is None:
            return None
        return _frozen(get().detach().cpu().numpy())

    def model(self) -> nn.Module | None:
        """A copy of the global model as a ``torch.nn.Module`` (parameters and buffers of now;
        changing it changes nothing in the run; None in a network-only run)."""
        sync = getattr(self._engine.learner, "sync_model", None)
        return None if sync is None else copy.deepcopy(sync())

    def edge_params(self) -> list[np.ndarray] | None:
        """``[server.hierarchy]``: every edge server's model as a flat read-only ``float32``
        array ``(D,)`` (copies), in the cells' order (None without a hierarchy or training).
        :meth:`params` is the cloud's."""
        get = getattr(self._engine.learner, "edge_params", None)
        if get is None:
            return None
        return [_frozen(w.detach().cpu().numpy()) for w in get()]

    def edge_models(self) -> list[nn.Module] | None:
        """``[server.hierarchy]``: a copy of every edge server's model as a
        ``torch.nn.Module``, in the cells' order (None without a hierarchy or training).
        :meth:`model` is the cloud's."""
        learner = self._engine.learner
        sync = getattr(learner, "sync_edge_model", None)
        if sync is None:
            return None
        return [copy.deepcopy(sync(c)) for c in range(len(getattr(learner, "edges", ())))]

    def stop(self, reason: str = "stopped by a callback") -> None:
        """End the run after the frame in progress (its trace and checkpoint complete)."""
        self._engine.request_stop(reason)


class SlotView(_View):
    """A slot that has just ended."""

    def __init__(self, engine: Engine, slot: int, outcome: SlotOutcome) -> None:
        super().__init__(engine)
        self.slot = slot  #: the global slot index
        self.frame = slot // engine.config.slots_per_frame  #: its frame
        #: the slot's outcome (:class:`wflsim.sim.slot.SlotOutcome`, ``(N,)`` arrays), a
        #: read-only copy
        self.outcome = SlotOutcome(
            **{f.name: _frozen(getattr(outcome, f.name)) for f in fields(outcome)}
        )


class FrameView(_View):
    """A frame that has just ended."""

    def __init__(self, engine: Engine, frame: int) -> None:
        super().__init__(engine)
        self.frame = frame  #: its index
        #: the energy-deficit queues at the end of the frame, J ``(N,)`` (read-only copy)
        self.queue_j = _frozen(np.asarray(engine.queue_j, dtype=np.float64))


class RunView(_View):
    """A run that has ended (all its frames, or stopped early)."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        #: ``{"frame", "reason"}`` when a callback stopped the run, else None
        self.stopped_early = engine.stats.stopped_early


@dataclass
class Callbacks:
    """Functions called as a run goes (each optional), on the simulation's thread and in
    virtual time: ``on_slot_end(SlotView)``, ``on_frame_end(FrameView)``,
    ``on_run_end(RunView)`` (once, after the last frame or an early stop; not for a run that
    fails). An exception a callback raises ends the run as a failure (a run folder keeps its
    completed frames and can be resumed)."""

    on_slot_end: Callable[[SlotView], Any] | None = None
    on_frame_end: Callable[[FrameView], Any] | None = None
    on_run_end: Callable[[RunView], Any] | None = None
    _engine: Engine | None = field(default=None, init=False, repr=False)

    def hooks(self, also: Hooks | None = None) -> Hooks:
        """The engine's hooks that call these callbacks (after those of ``also``)."""
        base = also or Hooks()
        self._engine = None  # a new run (these callbacks may serve several, one at a time)

        def slot_end(engine: Engine, slot: int, outcome: SlotOutcome) -> None:
            if base.slot_end is not None:
                base.slot_end(engine, slot, outcome)
            self._engine = engine
            if self.on_slot_end is not None:
                self.on_slot_end(SlotView(engine, slot, outcome))

        def frame_end(engine: Engine, frame: int) -> None:
            if base.frame_end is not None:
                base.frame_end(engine, frame)
            self._engine = engine
            if self.on_frame_end is not None:
                self.on_frame_end(FrameView(engine, frame))

        def frame_start(engine: Engine, frame: int) -> None:
            self._engine = engine
            if base.frame_start is not None:
                base.frame_start(engine, frame)

        return Hooks(frame_start=frame_start, slot_end=slot_end, frame_end=frame_end)

    def run_ended(self) -> None:
        """Call ``on_run_end`` (the API calls it once the run is complete)."""
        if self.on_run_end is not None and self._engine is not None:
            self.on_run_end(RunView(self._engine))
