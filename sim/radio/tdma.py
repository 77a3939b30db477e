"""TDMA: one upload at a time on the whole band ``W``, the others in a queue ordered ``fcfs`` (by
ready time) or ``edf`` (by deadline) (:class:`TdmaUplink`, a
:class:`~wflsim.sim.radio.shared.SharedUplink`); waiting counts against the deadline.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

import numpy as np
import simpy
from numpy.typing import NDArray

from ..world.system import SystemConstants
from .base import UplinkMode
from .cells.component import Cells
from .cells.uplink import cellular_uplink
from .ofdma import stale_difference
from .shared import SharedUplink
from .spec import UplinkSpec, UploadOrder

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


class TdmaUplink(SharedUplink):
    """One upload at a time on the whole band, the others in a queue (``order``)."""

    def __init__(
        self,
        bandwidth_hz: float,
        noise_w: float,
        upload_start: int,
        upload_end: int,
        order: UploadOrder = "fcfs",
    ) -> None:
        super().__init__(bandwidth_hz, noise_w, upload_start, upload_end)
        self.order = order
        # never reset: a completion cut in one slot may still fire in a later one
        self._generation = 0

    def _open(self) -> None:
        self._queue: list[tuple[float, float, int]] = []
        self._active = -1
        self._active_due = float("nan")  # when the upload on the band ends (absolute, s)
        self._pick_pending = False

    def _enter(self, device: int) -> None:
        # every upload of a synchronous slot has the slot's deadline: EDF's first key ties, and
        # the order is FCFS; in a continuous uplink each upload has its own latency target
        if self.order != "edf":
            due = 0.0
        elif self.continuous:
            due = float(self._target_s[device])
        else:
            due = self._start_s + self._deadline_s
        heapq.heappush(self._queue, (due, self._now(), device))
        self._want_pick()

    def _want_pick(self, at_once: bool = False) -> None:
        """Pick the next upload once every event already due now has run (a zero timeout goes
        after them), so that uploads ready at the same instant are ordered by device. In a
        continuous uplink no SimPy event is left pending: ``at_once`` when the band frees
        after every event of the instant that can bring an upload (a completion, the slot
        boundary's settling), else through ``later`` (:meth:`open_run`)."""
        if self._active < 0 and not self._pick_pending and self._queue:
            if self.continuous:
                if at_once or self._later is None:
                    self._serve_next()
                else:
                    self._pick_pending = True
                    self._later(self._pick_later)
                return
            assert self.env is not None
            self._pick_pending = True
            self.env.timeout(0.0).callbacks.append(self._pick)

    def _pick(self, _event: simpy.Event) -> None:
        self._pick_pending = False
        if self._closed or self._active >= 0 or not self._queue:
            return
        self._serve_next()

    def _pick_later(self) -> None:
        self._pick_pending = False
        if self._active < 0 and self._queue:
            self._serve_next()

    def _serve_next(self) -> None:
        """The queue's first upload takes the band now."""
        _, _, device = heapq.heappop(self._queue)
        self._begin(device)
        self._active = device
        self._generation += 1
        assert self.env is not None
        delay = float(self._full_s[device])
        self._active_due = self._now() + delay  # where SimPy puts the timeout: now + delay
        timer = self.env.timeout(delay)
        timer.callbacks.append(partial(self._complete, self._generation))

    def _complete(self, generation: int, _event: simpy.Event) -> None:
        if generation != self._generation:
            return  # cut before it fired
        device, self._active = self._active, -1
        self._end(device, True)
        self._want_pick(at_once=True)

    def _leave(self, device: int) -> bool:
        if self._active == device:
            end = float(self._began[device] + self._full_s[device])
            if end <= self._now():  # its completion is due now: it arrives
                return False
            self._generation += 1  # its completion is stale
            self._active = -1
            self._want_pick()
            return True
        for i, entry in enumerate(self._queue):
            if entry[2] == device:
                self._queue.pop(i)
                heapq.heapify(self._queue)
                return True
        return False

    def _cut(self) -> None:
        self._generation += 1
        if self._active >= 0:
            device, self._active = self._active, -1
            end = float(self._began[device] + self._full_s[device])
            self._end(device, self.in_time(end))
        while self._queue:
            _, _, device = heapq.heappop(self._queue)
            self._begin(device)
            self._end(device, False)

    def _inside(self) -> I64:
        devices = [entry[2] for entry in self._queue]
        if self._active >= 0:
            devices.append(self._active)
        return np.array(sorted(devices), dtype=np.int64)

    def _settle(self, until_s: float) -> None:
        if self._active >= 0 and self._active_due <= until_s:
            self._generation += 1  # its completion is stale: it ends now
            device, self._active = self._active, -1
            self._end(device, True)
            self._want_pick(at_once=True)

    def _state(self) -> dict[str, Any]:
        if self._pick_pending:
            raise RuntimeError("a TDMA turn is being decided at this instant: no state now")
        queue = sorted(self._queue)
        return {
            "active": self._active,
            "active_due": self._active_due if self._active >= 0 else float("nan"),
            "queue_key": np.array([e[0] for e in queue], dtype=np.float64),
            "queue_ready_s": np.array([e[1] for e in queue], dtype=np.float64),
            "queue_device": np.array([e[2] for e in queue], dtype=np.int64),
        }

    def _idle_state(self) -> dict[str, Any]:
        return {
            "active": -1,
            "active_due": float("nan"),
            "queue_key": np.zeros(0),
            "queue_ready_s": np.zeros(0),
            "queue_device": np.zeros(0, dtype=np.int64),
        }

    def _load(self, state: dict[str, Any], schedule_at: Callable[[float], simpy.Event]) -> None:
        keys = np.asarray(state["queue_key"], dtype=np.float64).tolist()
        ready = np.asarray(state["queue_ready_s"], dtype=np.float64).tolist()
        devices = np.asarray(state["queue_device"], dtype=np.int64).tolist()
        if not len(keys) == len(ready) == len(devices):
            raise ValueError("uplink state: the queue's columns differ in length")
        self._queue = [(k, r, d) for k, r, d in zip(keys, ready, devices, strict=True)]
        heapq.heapify(self._queue)
        self._active = int(state["active"])
        self._active_due = float(state["active_due"])
        self._pick_pending = False
        if not np.array_equal(self._inside(), np.asarray(state["device"], dtype=np.int64)):
            raise ValueError("uplink state: the queue and the band are not its uploads")
        self._generation += 1
        if self._active >= 0:
            timer = schedule_at(self._active_due)
            timer.callbacks.append(partial(self._complete, self._generation))


class Tdma(UplinkMode):
    """``[uplink] mode = "tdma"`` (the module docstring)."""

    name: ClassVar[str] = "tdma"
    interacting: ClassVar[bool] = True
    summary: ClassVar[str] = "one upload at a time on W, the others in a queue"

    def differences(self, spec: UplinkSpec, server_mode: str) -> list[str]:
        """An upload waits for the ones before it; under stale updates across slots."""
        out = [
            "TDMA: one upload at a time on the band W; an upload waits for the ones before "
            f"it ({spec.order}), and the wait counts against the deadline p_min ignores"
        ]
        return out + stale_difference(server_mode)

    def details(self, spec: UplinkSpec) -> dict[str, Any]:
        """The queue's order."""
        return {"order": spec.order}

    def build(
        self,
        spec: UplinkSpec,
        system: SystemConstants,
        upload_start: int,
        upload_end: int,
        cells: Cells | None = None,
    ) -> SharedUplink | None:
        """:class:`TdmaUplink` on the band ``W``, or the cells' uplink."""
        if cells is not None:
            return cellular_uplink(spec, system, upload_start, upload_end, cells)
        return TdmaUplink(
            system.bandwidth_hz, system.noise_w, upload_start, upload_end, order=spec.order
        )
