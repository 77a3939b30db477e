"""Processor sharing: jobs that share one server at the rates a rate model gives for the set in
flight, with one pending completion event at a time (the bookkeeping under the OFDMA uplink,
:class:`~wflsim.sim.radio.ofdma.OfdmaUplink`, where the jobs are uploads and the
rate model is :func:`~wflsim.sim.radio.rates.shared_rate_bps` on the band ``W / k``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import simpy
from numpy.typing import NDArray

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: An upload in processor sharing is complete when less than this share of its bits is left.
DONE_REL_TOL = 1e-9

#: A rate model: the uploads in flight (ascending ids, ``(k,)``) -> their rates, bit/s, ``(k,)``.
RateModel = Callable[[I64], F64]


class ProcessorSharing:
    """Jobs that share one server at the rates a rate model gives for the set in flight.

    Whenever a job starts or ends, every job's remaining bits are advanced at its old rate and
    the rates of the new set are computed; then ONE completion event is scheduled (the job that
    ends first). A change before it fires makes it stale: each scheduled completion carries the
    generation it was made in and is ignored unless that is still the current one. Jobs within
    :data:`DONE_REL_TOL` of their size when a completion fires end with it (equal jobs started
    together end together, whatever the rounding).

    Args:
        env: the SimPy environment.
        rate_bps: the rate model (:data:`RateModel`); with a constant capacity ``C`` shared
            equally it is ``lambda jobs: np.full(len(jobs), C / len(jobs))``.
        on_end: called with each job that completes, at its completion time.
    """

    def __init__(
        self, env: simpy.Environment, rate_bps: RateModel, on_end: Callable[[int], None]
    ) -> None:
        self.env = env
        self._rate_model = rate_bps
        self._on_end = on_end
        self._jobs: I64 = np.zeros(0, dtype=np.int64)
        self._size = np.zeros(0)
        self._left = np.zeros(0)
        self._rate = np.zeros(0)
        self._since = float(env.now)
        self._generation = 0
        self._next = -1
        self._due = float("nan")  # when the pending completion fires (absolute, s)
        #: completion events scheduled (a test of the one-event-per-change rule)
        self.scheduled = 0

    @property
    def in_flight(self) -> I64:
        """The jobs in flight, ascending."""
        return self._jobs.copy()

    def add(self, job: int, bits: float) -> None:
        """Job ``job`` starts now with ``bits`` to send (> 0); ``job`` is not in flight."""
        self._advance()
        i = int(np.searchsorted(self._jobs, job))
        self._jobs = np.insert(self._jobs, i, job)
        self._size = np.insert(self._size, i, bits)
        self._left = np.insert(self._left, i, bits)
        self._reschedule()

    def cut(self) -> tuple[I64, F64]:
        """End every job in flight now: ``(jobs, projected end times)``, the time each would have
        ended at its current rate (``inf`` at rate 0)."""
        self._advance()
        with np.errstate(divide="ignore", invalid="ignore"):
            ends = self._since + np.where(self._left > 0.0, self._left / self._rate, 0.0)
        jobs = self._jobs
        self._jobs = np.zeros(0, dtype=np.int64)
        self._size, self._left, self._rate = np.zeros(0), np.zeros(0), np.zeros(0)
        self._generation += 1
        self._due = float("nan")
        return jobs, np.where(np.isnan(ends), np.inf, ends)

    def settle(self, until_s: float) -> None:
        """End now, as completed, every job whose end at its current rate is at most ``until_s``
        (absolute, s; with those within :data:`DONE_REL_TOL` of their size), as if its
        completion fired now; the others' rates are recomputed."""
        if not self._jobs.shape[0]:
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            ends = self._since + np.where(self._left > 0.0, self._left / self._rate, 0.0)
        if not (ends <= until_s).any():
            return  # nothing changes (the state is not even advanced)
        self._advance()
        done = (self._left <= DONE_REL_TOL * self._size) | (ends <= until_s)
        ended = self._jobs[done]
        keep = ~done
        self._jobs, self._size, self._left = self._jobs[keep], self._size[keep], self._left[keep]
        self._reschedule()
        for job in ended.tolist():
            self._on_end(job)

    def remove(self, job: int) -> bool:
        """Job ``job`` leaves now, unfinished (True); False if it is not in flight, or has less
        than :data:`DONE_REL_TOL` of its bits left (it completes now instead)."""
        i = int(np.searchsorted(self._jobs, job))
        if i >= self._jobs.shape[0] or self._jobs[i] != job:
            return False
        self._advance()
        if self._left[i] <= DONE_REL_TOL * self._size[i]:
            self._next = job
            self._fire(self._generation, None)  # it ends now, with any other job that does
            return False
        keep = np.arange(self._jobs.shape[0]) != i
        self._jobs, self._size, self._left = self._jobs[keep], self._size[keep], self._left[keep]
        self._rate = self._rate[keep]
        self._reschedule()
        return True

    def _advance(self) -> None:
        now = float(self.env.now)
        if self._jobs.shape[0]:
            self._left = self._left - self._rate * (now - self._since)
        self._since = now

    def _reschedule(self) -> None:
        self._generation += 1
        self._due = float("nan")
        m = self._jobs.shape[0]
        if m == 0:
            self._rate = np.zeros(0)
            return
        self._rate = np.asarray(self._rate_model(self._jobs), dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            times = np.where(self._left > 0.0, self._left / self._rate, 0.0)
        times = np.where(np.isnan(times), np.inf, times)
        i = int(np.argmin(times))
        if not np.isfinite(times[i]):
            return  # nobody can finish: they wait for a cut
        self._next = int(self._jobs[i])
        self.scheduled += 1
        delay = float(times[i])
        # SimPy puts the timeout at now + delay; _since is now (every change advances first)
        self._due = self._since + delay
        timer = self.env.timeout(delay)
        timer.callbacks.append(partial(self._fire, self._generation))

    @staticmethod
    def idle_state() -> dict[str, Any]:
        """:meth:`state_dict` of a sharing with nothing in flight and no completion pending."""
        nothing = np.zeros(0)
        return {
            "jobs": np.zeros(0, dtype=np.int64),
            "size": nothing,
            "left": nothing,
            "rate": nothing,
            "since": 0.0,
            "next": -1,
            "due": float("nan"),
        }

    def state_dict(self) -> dict[str, Any]:
        """The jobs in flight (ascending), their sizes, bits left and rates as of the last
        change (``since``, absolute s), the job that ends first and when its completion fires
        (``due``, absolute s; NaN: none pending)."""
        return {
            "jobs": self._jobs.copy(),
            "size": self._size.copy(),
            "left": self._left.copy(),
            "rate": self._rate.copy(),
            "since": self._since,
            "next": self._next,
            "due": self._due,
        }

    def load_state_dict(
        self, state: dict[str, Any], schedule_at: Callable[[float], simpy.Event]
    ) -> None:
        """Continue from :meth:`state_dict`: nothing is advanced or recomputed (the bits left are
        those of ``since``), and the pending completion is put back at ``due`` with
        ``schedule_at`` (an event at an absolute time among SimPy's own, e.g.
        :meth:`wflsim.sim.clock.Clock.timeout_at`)."""
        self._jobs = np.array(state["jobs"], dtype=np.int64)
        self._size = np.array(state["size"], dtype=np.float64)
        self._left = np.array(state["left"], dtype=np.float64)
        self._rate = np.array(state["rate"], dtype=np.float64)
        if not self._jobs.shape == self._size.shape == self._left.shape == self._rate.shape:
            raise ValueError("processor-sharing state: jobs, sizes, bits left and rates differ")
        self._since = float(state["since"])
        self._next = int(state["next"])
        self._due = float(state["due"])
        self._generation += 1
        if np.isfinite(self._due):
            self.scheduled += 1
            timer = schedule_at(self._due)
            timer.callbacks.append(partial(self._fire, self._generation))

    def _fire(self, generation: int, _event: simpy.Event | None) -> None:
        if generation != self._generation:
            return  # the set in flight changed since: a stale completion
        self._advance()
        done = (self._left <= DONE_REL_TOL * self._size) | (self._jobs == self._next)
        ended = self._jobs[done]
        keep = ~done
        self._jobs, self._size, self._left = self._jobs[keep], self._size[keep], self._left[keep]
        self._reschedule()
        for job in ended.tolist():
            self._on_end(job)
