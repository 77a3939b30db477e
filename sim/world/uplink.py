"""The uplink: how the uploads of a slot share the server's band (the scenario's ``[uplink]``).

* ``dedicated`` (the paper's model): every device has its own band ``W`` with noise power ``N0``
  over it; uploads do not interact, and the closed-form kernel plays them.
* ``ofdma``: one band ``W`` shared by processor sharing. With ``k`` uploads in flight each gets
  ``b = W / k``; its noise power is ``N0' b`` (``N0' = N0 / W``, the noise power spectral
  density), so its rate is ``r = b log2(1 + p h / (N0' b))`` (:func:`shared_rate_bps`). Whenever
  an upload starts or ends, every other upload's remaining bits are advanced at its old rate and
  its rate is recomputed; one completion event is pending at any time (:class:`ProcessorSharing`).
* ``tdma``: one upload at a time on the whole band, at ``r = W log2(1 + p h / N0)``; the others
  wait in a queue (``fcfs``: by ready time = compute end, ties by device; ``edf``: by deadline,
  then as ``fcfs``) and waiting counts against the deadline (:class:`TdmaUplink`).

A shared uplink is a SimPy component, used in one of two modes:

* **per slot** (:meth:`SharedUplink.open_slot`, the synchronous server's event kernel,
  :class:`wflsim.sim.kernels.EventKernel`): the slot's outcome (the time each upload actually
  transmitted, whether it arrived in time) comes from its events. Under a scheme that closes the
  slot at the deadline, uploads still in flight or still waiting are cut there; under one that
  waits for the last upload nothing is cut (an upload that can never finish, at zero power or
  gain, transmits until the deadline and fails, as on a dedicated band). State: none across
  slots; every upload ends or is cut by its slot's end.
* **continuous** (:meth:`SharedUplink.open_run`, the stale-update server,
  :class:`wflsim.sim.servers.stale.StaleServer`): one uplink for the whole run; a device's upload
  joins it with its own power, gain and payload (:meth:`SharedUplink.upload`; at most one upload
  per device at a time) and keeps its share across slot boundaries: rates are recomputed at
  every start, end and withdrawal, as in a slot. No deadline and no cut: every upload arrives
  unless its device withdraws it (goes offline); an upload that can never finish is refused.
  TDMA picks the next upload without a zero-delay SimPy event: when a completion or the slot
  boundary frees the band (every upload of the instant has joined), or, when an upload joins or
  leaves, through the caller's ``later`` (after the clock's device events of the instant). So
  no SimPy event of the uplink's is ever due at a slot boundary. At a checkpoint uploads
  are in flight: :meth:`SharedUplink.state_dict` holds them and
  :meth:`SharedUplink.load_state_dict` puts the pending completion back at its absolute time.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal

import numpy as np
import simpy
from numpy.typing import ArrayLike, NDArray

from ..slot import DEADLINE_REL_TOL
from .system import SystemConstants

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
B8 = NDArray[np.bool_]

UplinkMode = Literal["dedicated", "ofdma", "tdma"]
UploadOrder = Literal["fcfs", "edf"]

#: What Proposition 1 and Theorem 2 assume of the uplink (the run manifest's ``uplink``).
CONTROLLER_ASSUMPTION = (
    "a dedicated band per device: each upload alone on W with noise power N0 over W "
    "(Proposition 1's p_min, Theorem 2's costs)"
)

#: An upload in processor sharing is complete when less than this share of its bits is left.
DONE_REL_TOL = 1e-9


def noise_psd_w_per_hz(noise_w: ArrayLike, bandwidth_hz: ArrayLike) -> F64:
    """Noise power spectral density ``N0' = N0 / W``, W/Hz, from the noise power ``N0`` (W) over
    the band ``W`` (Hz): -104 dBm over 10 MHz is -174 dBm/Hz."""
    return np.asarray(noise_w, dtype=np.float64) / np.asarray(bandwidth_hz, dtype=np.float64)


def shared_rate_bps(
    tx_power_w: ArrayLike,
    channel_gain: ArrayLike,
    band_hz: ArrayLike,
    noise_psd_w_per_hz: ArrayLike,
) -> F64:
    """Shannon rate on an allocated band, ``r = b log2(1 + p h / (N0' b))`` (eq. 9 with the noise
    power of the band ``b`` it uses).

    Args:
        tx_power_w: transmit power ``p``, W, broadcast (typically ``(k,)``).
        channel_gain: ``h``, linear.
        band_hz: allocated band ``b``, Hz (``W / k`` under OFDMA with ``k`` uploads in flight).
        noise_psd_w_per_hz: ``N0'``, W/Hz.

    Returns:
        rate, bit/s (0 where ``b = 0`` or ``p h = 0``).
    """
    b = np.asarray(band_hz, dtype=np.float64)
    signal = np.asarray(tx_power_w, dtype=np.float64) * np.asarray(channel_gain, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        snr = signal / (np.asarray(noise_psd_w_per_hz, dtype=np.float64) * b)
        rate = b * np.log1p(snr) / np.log(2.0)
    return np.where((b > 0.0) & (signal > 0.0), rate, 0.0)


def equal_share_hz(total_hz: float, in_flight: int) -> float:
    """Processor sharing's band per upload, ``W / k`` (Hz) for ``k >= 1`` uploads in flight."""
    return total_hz / in_flight


@dataclass(frozen=True)
class UplinkSpec:
    """The resolved ``[uplink]`` table: how uploads share the band and what the scheme plans on.

    ``planned_concurrent_uploads`` ``k``: the scheme computes ``p_min`` (and the controller its
    costs) for a band ``W / k`` with the noise power ``N0 / k`` over it, in every server mode;
    ``1`` is the paper's controller unchanged (each upload alone on ``W``). Under stale updates
    the share an upload actually gets changes as uploads started in other slots join and leave.
    """

    mode: UplinkMode = "dedicated"
    order: UploadOrder = "fcfs"
    planned_concurrent_uploads: int = 1

    @property
    def shared(self) -> bool:
        """Whether uploads interact (the event kernel plays them)."""
        return self.mode != "dedicated"

    def planned_system(self, system: SystemConstants) -> SystemConstants:
        """The constants the scheme plans on: the band ``W / k`` and its noise ``N0 / k``
        (``system`` itself for ``k = 1``)."""
        k = self.planned_concurrent_uploads
        if k == 1:
            return system
        return replace(system, bandwidth_hz=system.bandwidth_hz / k, noise_w=system.noise_w / k)

    def describe(self, system: SystemConstants, server_mode: str = "sync") -> dict[str, Any]:
        """The uplink, what the scheme plans on and what the controller assumes of it (for the
        run's manifest); ``server_mode``: the ``[server] mode`` it runs under."""
        psd = float(noise_psd_w_per_hz(system.noise_w, system.bandwidth_hz))
        k = self.planned_concurrent_uploads
        differences: list[str] = []
        notes: list[str] = []
        if self.mode == "ofdma":
            differences.append(
                "OFDMA: the band W is shared equally by the uploads in flight; an upload's rate "
                "changes whenever another starts or ends, so the time p_min was computed for is "
                "not the time the upload takes"
            )
        elif self.mode == "tdma":
            differences.append(
                "TDMA: one upload at a time on the band W; an upload waits for the ones before "
                f"it ({self.order}), and the wait counts against the deadline p_min ignores"
            )
        if self.shared and server_mode != "sync":
            differences.append(
                f"stale updates ({server_mode}): uploads keep their share across slot "
                "boundaries, so uploads started in different slots overlap and an upload's "
                "share changes as they join and leave; no deadline cuts an upload"
            )
        if k > 1:
            differences.append(
                f"the scheme plans on a band W / {k} with noise N0 / {k} (p_min for {k} "
                "concurrent uploads), not on W"
            )
            if self.mode == "dedicated":
                notes.append("on a dedicated band W this over-provisions power")
        return {
            "mode": self.mode,
            "bandwidth_hz": system.bandwidth_hz,
            "noise_psd_dbm_hz": float(10.0 * np.log10(psd) + 30.0),
            "order": self.order if self.mode == "tdma" else None,
            "planned_concurrent_uploads": k,
            "plans_on": (
                f"p_min (Proposition 1) and the controller's costs for one upload on a band "
                f"W / {k} = {system.bandwidth_hz / k:.6g} Hz with noise power N0 / {k} over it, "
                f"whatever the uplink and the server mode"
            ),
            "controller_assumption": {
                "assumption": CONTROLLER_ASSUMPTION,
                "matches": not differences,
                "differences": differences,
                "notes": notes,
            },
        }


# ---------------------------------------------------------------------- processor sharing

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


# ---------------------------------------------------------------------- the slot's uplink

#: The kernel's event log: ``(time_s, device, event code)``.
LogFn = Callable[[tuple[float, int, int]], None]


class SharedUplink(ABC):
    """A shared uplink, per slot (:meth:`open_slot`) or for a whole run (:meth:`open_run`; the
    module docstring): devices submit their upload when their compute ends; the uplink logs
    ``upload_start`` and ``upload_end`` and records per device the time actually transmitted
    and whether the upload arrived (in time).

    Args:
        bandwidth_hz: the band ``W`` all uploads share, Hz.
        noise_w: the noise power over ``W``, W.
        upload_start, upload_end: the trace's event codes the log uses.
    """

    def __init__(
        self, bandwidth_hz: float, noise_w: float, upload_start: int, upload_end: int
    ) -> None:
        self.bandwidth_hz = float(bandwidth_hz)
        self.noise_w = float(noise_w)
        self._codes = (upload_start, upload_end)
        self.env: simpy.Environment | None = None
        self.transmitted_s = np.zeros(0)
        self.arrived = np.zeros(0, dtype=bool)
        #: open for a whole run (:meth:`open_run`) rather than one slot
        self.continuous = False
        self._target_s = np.zeros(0)
        self._later: Callable[[Callable[[], None]], None] | None = None

    def open_slot(
        self,
        env: simpy.Environment,
        *,
        deadline_s: float,
        closes_at: Literal["deadline", "last_upload"],
        tx_power_w: F64,
        channel_gain: F64,
        payload_bits: F64,
        upload_full_s: F64,
        log: LogFn,
        on_end: Callable[[int], None],
    ) -> None:
        """A slot starts now (``(N,)`` arrays; ``upload_full_s``: the time on the whole band;
        ``on_end(device)``: called when an upload ends, arrived or not)."""
        n = tx_power_w.shape[0]
        self.env = env
        self.continuous = False
        self._later = None
        self._start_s = float(env.now)
        self._deadline_s = float(deadline_s)
        self._closes_at = closes_at
        self._p, self._h, self._bits, self._full_s = (
            tx_power_w,
            channel_gain,
            payload_bits,
            upload_full_s,
        )
        self._log, self._on_end = log, on_end
        self._began = np.full(n, np.nan)
        self._held: list[int] = []
        self._closed = False
        self._past_deadline = False
        self.transmitted_s = np.zeros(n)
        self.arrived = np.zeros(n, dtype=bool)
        self._open()

    def open_run(
        self,
        env: simpy.Environment,
        *,
        num_devices: int,
        log: LogFn,
        on_end: Callable[[int], None],
        later: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        """Open the uplink for a whole run from now (the module docstring, continuous mode):
        no deadline, no cut; each upload brings its own power, gain and payload
        (:meth:`upload`). ``log`` receives ``(time, device, code)`` as in a slot; ``on_end``
        is called when an upload arrives (a withdrawn upload does not end). ``later(f)`` calls
        ``f`` at this instant after every event of it that can bring an upload (the stale
        server: after the clock's device events), so that a TDMA band freed or found free by
        an upload joining or leaving goes to the first of the queue in its order once every
        upload of the instant has joined (None: at once, in the order they join)."""
        n = int(num_devices)
        self.env = env
        self.continuous = True
        self._later = later
        self._start_s = float(env.now)
        self._deadline_s = float("inf")
        self._closes_at = "last_upload"  # every upload that ends has arrived
        self._p, self._h, self._bits = np.zeros(n), np.zeros(n), np.zeros(n)
        self._full_s = np.full(n, np.inf)
        self._target_s = np.full(n, np.inf)
        self._log, self._on_end = log, on_end
        self._began = np.full(n, np.nan)
        self._held = []
        self._closed = False
        self._past_deadline = False
        self.transmitted_s = np.zeros(n)
        self.arrived = np.zeros(n, dtype=bool)
        self._open()

    def upload(
        self,
        device: int,
        *,
        tx_power_w: float,
        channel_gain: float,
        payload_bits: float,
        upload_full_s: float,
        target_s: float = float("inf"),
    ) -> None:
        """Continuous mode: ``device``'s upload joins the uplink now, at power ``tx_power_w``
        (W) on the gain ``channel_gain`` with ``payload_bits`` to send (``upload_full_s``: its
        time alone on the whole band, s; finite); ``target_s``: its latency target (absolute,
        s), the key of ``edf``. The device has no other upload in the uplink.

        Raises:
            RuntimeError: the uplink is not open for a run, or ``device`` has an upload in it.
            ValueError: an upload that can never finish (zero power or gain).
        """
        if not self.continuous:
            raise RuntimeError("SharedUplink.upload needs an uplink opened with open_run")
        if device in self._inside().tolist():
            raise RuntimeError(f"device {device} already has an upload in the uplink")
        if not (tx_power_w * channel_gain > 0.0 and np.isfinite(upload_full_s)):
            raise ValueError(
                f"device {device}'s upload can never finish (power {tx_power_w} W, gain "
                f"{channel_gain}); a continuous uplink takes only uploads that can"
            )
        self._p[device], self._h[device] = tx_power_w, channel_gain
        self._bits[device], self._full_s[device] = payload_bits, upload_full_s
        self._target_s[device] = target_s
        self._began[device] = np.nan
        self.transmitted_s[device] = 0.0
        self.arrived[device] = False
        self.submit(device)

    def settle(self, until_s: float) -> None:
        """Continuous mode: end now, as arrived, every upload in flight whose end at its
        current rate is at most ``until_s`` (absolute, s): the stale server's slot boundary
        takes an arrival within the timing rule's tolerance after it at the boundary."""
        if self.continuous:
            self._settle(until_s)

    def state_dict(self) -> dict[str, Any]:
        """Continuous mode: the uploads in the uplink (``device``, ascending, with their power,
        gain, payload, time on the whole band, latency target and start, NaN while waiting)
        and the discipline's own state (OFDMA: the processor sharing; TDMA: the upload on the
        band, when it ends, and the queue)."""
        if self.env is None:
            return {"device": np.zeros(0, dtype=np.int64), **self._idle_state()}
        if not self.continuous:
            raise RuntimeError("a per-slot uplink keeps no state across slots")
        inside = self._inside()
        return {
            "device": inside,
            "tx_power_w": self._p[inside],
            "channel_gain": self._h[inside],
            "payload_bits": self._bits[inside],
            "upload_full_s": self._full_s[inside],
            "target_s": self._target_s[inside],
            "began_s": self._began[inside],
            **self._state(),
        }

    def load_state_dict(
        self, state: dict[str, Any], schedule_at: Callable[[float], simpy.Event]
    ) -> None:
        """Continue from :meth:`state_dict` in an uplink opened with :meth:`open_run` at the
        boundary the state was saved at; ``schedule_at(time_s)`` makes an event at an absolute
        time among SimPy's own (:meth:`wflsim.sim.clock.Clock.timeout_at`), so the pending
        completion fires when and in the order it did in the uninterrupted run."""
        if not self.continuous:
            raise RuntimeError("load_state_dict needs an uplink opened with open_run")
        inside = np.array(state["device"], dtype=np.int64)
        n = self._p.shape[0]
        if inside.shape[0] and not (0 <= inside.min() and inside.max() < n):
            raise ValueError("uplink state is for another number of devices")
        if inside.shape[0]:
            self._p[inside] = np.asarray(state["tx_power_w"], dtype=np.float64)
            self._h[inside] = np.asarray(state["channel_gain"], dtype=np.float64)
            self._bits[inside] = np.asarray(state["payload_bits"], dtype=np.float64)
            self._full_s[inside] = np.asarray(state["upload_full_s"], dtype=np.float64)
            self._target_s[inside] = np.asarray(state["target_s"], dtype=np.float64)
            self._began[inside] = np.asarray(state["began_s"], dtype=np.float64)
        self._load(state, schedule_at)

    def submit(self, device: int) -> None:
        """``device``'s compute has ended now: its upload joins the uplink."""
        can_finish = self._p[device] * self._h[device] > 0.0 and np.isfinite(self._full_s[device])
        if self._closed or (not can_finish and self._past_deadline):
            # after the cut, or never finishing once the deadline has passed: nothing is sent
            self._begin(device)
            self._end(device, False)
        elif not can_finish:
            self._begin(device)  # it can never finish: it transmits until the deadline, fails
            self._held.append(device)
        else:
            self._enter(device)

    def close(self, everything: bool) -> None:
        """At the deadline: end the uploads that can never finish and, if ``everything`` (the
        slot closes at the deadline), cut every upload still in flight or waiting."""
        self._past_deadline = True
        for d in sorted(self._held):
            self._end(d, False)
        self._held = []
        if everything:
            self._closed = True
            self._cut()

    def in_time(self, end_s: float) -> bool:
        """Whether an upload ending at ``end_s`` arrives in time (the timing rule of
        :mod:`wflsim.sim.slot`: relative tolerance :data:`DEADLINE_REL_TOL`)."""
        if self._closes_at == "last_upload":
            return True
        return end_s - self._start_s <= self._deadline_s * (1.0 + DEADLINE_REL_TOL)

    def _now(self) -> float:
        assert self.env is not None
        return float(self.env.now)

    def _begin(self, device: int) -> None:
        now = self._now()
        self._began[device] = now
        self._log((now, device, self._codes[0]))

    def _end(self, device: int, arrived: bool) -> None:
        now = self._now()
        self.transmitted_s[device] = now - self._began[device]
        self.arrived[device] = arrived
        self._log((now, device, self._codes[1]))
        self._on_end(device)

    def withdraw(self, device: int, at_s: float) -> bool:
        """``device`` went offline at ``at_s`` (now): its upload leaves the uplink, waiting or
        in flight, and ``transmitted_s`` records what it sent until then; neither
        ``upload_end`` is logged nor ``on_end`` called (the kernel logs the drop). False if
        its upload had already ended, or completes now (within :data:`DONE_REL_TOL` of its
        bits: arriving exactly when the device goes offline counts as arrived)."""
        if device in self._held:
            self._held.remove(device)
        elif not self._leave(device):
            return False
        began = self._began[device]
        self.transmitted_s[device] = 0.0 if np.isnan(began) else max(at_s - began, 0.0)
        self.arrived[device] = False
        return True

    @abstractmethod
    def _open(self) -> None:
        """Reset the discipline's own bookkeeping for a new slot."""

    @abstractmethod
    def _enter(self, device: int) -> None:
        """``device``'s upload (one that can finish) joins the discipline now."""

    @abstractmethod
    def _cut(self) -> None:
        """End every upload in flight or waiting now (:meth:`_end`)."""

    @abstractmethod
    def _leave(self, device: int) -> bool:
        """Take ``device``'s upload out of the discipline now, waiting or in flight (True), or
        report that it is not there (False; it completes now if it has nothing left)."""

    @abstractmethod
    def _inside(self) -> I64:
        """The devices whose upload waits or is in flight, ascending."""

    @abstractmethod
    def _settle(self, until_s: float) -> None:
        """End now, as arrived, the uploads in flight that end by ``until_s`` at their rate."""

    @abstractmethod
    def _state(self) -> dict[str, Any]:
        """The discipline's state (:meth:`state_dict`)."""

    @abstractmethod
    def _idle_state(self) -> dict[str, Any]:
        """The discipline's state with nothing in it (an uplink not opened yet)."""

    @abstractmethod
    def _load(self, state: dict[str, Any], schedule_at: Callable[[float], simpy.Event]) -> None:
        """Restore :meth:`_state` and put its pending completion back on the clock."""


class OfdmaUplink(SharedUplink):
    """Processor sharing of the band: ``k`` uploads in flight get ``W / k`` each."""

    def _open(self) -> None:
        assert self.env is not None
        self._psd = float(noise_psd_w_per_hz(self.noise_w, self.bandwidth_hz))
        self.sharing = ProcessorSharing(self.env, self._rates, self._complete)

    def _rates(self, jobs: I64) -> F64:
        band = equal_share_hz(self.bandwidth_hz, int(jobs.shape[0]))
        return shared_rate_bps(self._p[jobs], self._h[jobs], band, self._psd)

    def _enter(self, device: int) -> None:
        self._begin(device)
        self.sharing.add(device, float(self._bits[device]))

    def _complete(self, device: int) -> None:
        self._end(device, True)

    def _leave(self, device: int) -> bool:
        return self.sharing.remove(device)

    def _cut(self) -> None:
        jobs, ends = self.sharing.cut()
        for d, end in zip(jobs.tolist(), ends.tolist(), strict=True):
            self._end(d, self.in_time(end))

    def _inside(self) -> I64:
        return self.sharing.in_flight

    def _settle(self, until_s: float) -> None:
        self.sharing.settle(until_s)

    def _state(self) -> dict[str, Any]:
        return {"sharing": self.sharing.state_dict()}

    def _idle_state(self) -> dict[str, Any]:
        nothing = np.zeros(0)
        return {
            "sharing": {
                "jobs": np.zeros(0, dtype=np.int64),
                "size": nothing,
                "left": nothing,
                "rate": nothing,
                "since": 0.0,
                "next": -1,
                "due": float("nan"),
            }
        }

    def _load(self, state: dict[str, Any], schedule_at: Callable[[float], simpy.Event]) -> None:
        sharing = state["sharing"]
        if not np.array_equal(np.asarray(sharing["jobs"]), np.asarray(state["device"])):
            raise ValueError("uplink state: the jobs in flight are not its uploads")
        self.sharing.load_state_dict(sharing, schedule_at)


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


def build_uplink(
    spec: UplinkSpec, system: SystemConstants, upload_start: int, upload_end: int
) -> SharedUplink | None:
    """The shared uplink of ``spec`` (None: dedicated bands)."""
    if spec.mode == "ofdma":
        return OfdmaUplink(system.bandwidth_hz, system.noise_w, upload_start, upload_end)
    if spec.mode == "tdma":
        return TdmaUplink(
            system.bandwidth_hz, system.noise_w, upload_start, upload_end, order=spec.order
        )
    return None
