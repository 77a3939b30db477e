"""The run's clock: a :class:`simpy.Environment` that also schedules events at absolute times.

SimPy schedules an event ``delay`` seconds after ``now`` and orders simultaneous events by a
priority (``URGENT = 0``, ``NORMAL = 1``) and then by the order they were scheduled. A
discrete-event co-simulator needs two more things, which :class:`Clock` adds, as SimPy's own
:class:`simpy.RealtimeEnvironment` extends :class:`simpy.Environment`:

* **absolute times**: an event computed to happen at ``t`` happens at ``t``, not at
  ``now + (t - now)``, which rounds differently in float64 (a slot boundary ``(t + 1) tau_0`` and
  an arrival computed from a cycle's start must compare exactly);
* **an explicit order of simultaneous events** (:class:`Order`): at one instant, the events the
  clock schedules go first, in the order availability changes, device events (by device),
  the server, devices starting again (by device); then SimPy's own events (process steps,
  timeouts: those of the slot kernels and of a shared uplink) in their order.

A shared uplink under stale updates schedules its completions as SimPy timeouts; a resumed run
puts the one pending at the checkpoint back at its absolute time among SimPy's own events
(:meth:`Clock.timeout_at`), so it fires when and in the order the uninterrupted run's did.

This module is the only code that touches SimPy's event queue; ``tests/test_clock.py`` pins
what it relies on: the queue is a heap of ``(time, priority, id, event)`` entries (ids from the
counter ``_eid``), and an event is triggered by setting ``_ok`` and ``_value`` (as
:class:`simpy.Timeout` does).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from enum import IntEnum
from typing import Any

import simpy

#: the device ranks an order reserves: more than any run's devices (``MAX_DEVICES``)
_RANKS = 1 << 32
#: the last rank of an order: after every device's event of that order at one instant
LAST_RANK = _RANKS - 1


class Order(IntEnum):
    """The order of events the clock schedules at one instant (then by rank, e.g. the device).

    All of them go before SimPy's own events at the same instant."""

    AVAILABILITY = 0  #: a device comes online or goes offline
    DEVICE = 1  #: a device's compute ends, its upload ends, it is dropped
    SERVER = 2  #: the server's slot boundary
    RESTART = 3  #: a device whose upload ended starts its next cycle


#: each order's first priority (negative: before SimPy's own events at one instant)
_BASE = {order: (int(order) - len(Order)) * _RANKS for order in Order}


def priority(order: Order, rank: int = 0) -> int:
    """The SimPy priority of an event of ``order`` and ``rank`` (``0 <= rank < 2**32``): negative,
    so before SimPy's ``URGENT`` (0) and ``NORMAL`` (1) at the same instant."""
    if not 0 <= rank < _RANKS:
        raise ValueError(f"rank {rank} outside [0, 2**32)")
    return _BASE[order] + rank


class Clock(simpy.Environment):
    """A :class:`simpy.Environment` with events at absolute times in an explicit order (the
    module docstring)."""

    def at(
        self,
        time_s: float,
        order: Order,
        rank: int = 0,
        callback: Callable[[simpy.Event], None] | None = None,
    ) -> simpy.Event:
        """A triggered event processed at the absolute time ``time_s`` (s, ``>= now``), in
        ``order`` and then ``rank`` among the clock's events at that instant; ``callback`` runs
        when it is processed. A process may ``yield`` it.

        Raises:
            RuntimeError: ``time_s`` is in the past.
        """
        return self._push(time_s, priority(order, rank), callback)

    def timeout_at(
        self, time_s: float, callback: Callable[[simpy.Event], None] | None = None
    ) -> simpy.Event:
        """A triggered event processed at the absolute time ``time_s`` (s, ``>= now``) among
        SimPy's own events at that instant (priority ``NORMAL``, in the order of scheduling):
        the heap entry ``env.timeout(delay)`` made when ``now + delay`` was ``time_s``, without
        the rounding of ``now + (time_s - now)``. ``callback`` runs when it is processed.

        Raises:
            RuntimeError: ``time_s`` is in the past.
        """
        return self._push(time_s, simpy.events.NORMAL, callback)

    def _push(
        self, time_s: float, prio: int, callback: Callable[[simpy.Event], None] | None
    ) -> simpy.Event:
        """A triggered event on SimPy's queue at ``time_s`` with priority ``prio``."""
        if time_s < self._now:
            raise RuntimeError(f"event at {time_s} s scheduled at {self._now} s")
        ev = simpy.Event(self)
        ev._ok = True  # a triggered event, as simpy.Timeout makes it
        ev._value = None
        if callback is not None:
            ev.callbacks.append(callback)
        queue: list[Any] = self._queue
        heapq.heappush(queue, (time_s, prio, next(self._eid), ev))
        return ev
