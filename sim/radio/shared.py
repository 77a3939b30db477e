"""The shared uplink's common part: :class:`SharedUplink`, a SimPy component through which the
uploads of a slot (:meth:`SharedUplink.open_slot`) or of a whole run
(:meth:`SharedUplink.open_run`) share one band, logging their starts and ends and recording the
time each transmitted and whether it arrived; how the band is shared (the discipline) is left to
its subclasses in :mod:`wflsim.sim.radio.tdma`, and both modes are described in
:mod:`wflsim.sim.radio`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import numpy as np
import simpy
from numpy.typing import NDArray

from ..slot import DEADLINE_REL_TOL
from .rates import SHANNON, RateModel

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: The kernel's event log: ``(time_s, device, event code)``.
LogFn = Callable[[tuple[float, int, int]], None]


class SharedUplink(ABC):
    """A shared uplink, per slot (:meth:`open_slot`) or for a whole run (:meth:`open_run`; the
    docstring of :mod:`wflsim.sim.radio`): devices submit their upload when their
    compute ends; the uplink logs ``upload_start`` and ``upload_end`` and records per device the
    time actually transmitted and whether the upload arrived (in time).

    Args:
        bandwidth_hz: the band ``W`` all uploads share, Hz.
        noise_w: the noise power over ``W``, W.
        upload_start, upload_end: the trace's event codes the log uses.
    """

    #: whether an upload's time is bounded by its closed form on its share of the band (the
    #: event kernel's drops under a scheme that waits for the last upload); False where
    #: interference or a packet-level network can slow any upload without a bound
    bounded: ClassVar[bool] = True

    def __init__(
        self, bandwidth_hz: float, noise_w: float, upload_start: int, upload_end: int
    ) -> None:
        self.bandwidth_hz = float(bandwidth_hz)
        self.noise_w = float(noise_w)
        #: how an SNR becomes a rate (``[channel] rate_model``; Shannon's by default)
        self.rate_model: RateModel = SHANNON
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
        """Open the uplink for a whole run from now (continuous mode,
        :mod:`wflsim.sim.radio`): no deadline, no cut; each upload brings its own power,
        gain and payload (:meth:`upload`). ``log`` receives ``(time, device, code)`` as in a
        slot; ``on_end`` is called when an upload arrives (a withdrawn upload does not end).
        ``later(f)`` calls ``f`` at this instant after every event of it that can bring an
        upload (the stale server: after the clock's device events), so that a TDMA band freed
        or found free by an upload joining or leaving goes to the first of the queue in its
        order once every upload of the instant has joined (None: at once, in the order they
        join)."""
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
        if not self._can_finish(tx_power_w * channel_gain, upload_full_s):
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

    def new_slot(self, frame: int, slot: int, now_s: float, gain: F64) -> None:  # noqa: B027
        """Slot ``slot`` of frame ``frame`` starts now (``now_s``, absolute s), with the
        channel's gains of every device (``(N,)``, linear); the servers call it at every slot's
        start, before the slot's uploads. Nothing by default (a mode that keeps state per frame
        or applies the channel itself acts on it)."""

    def release(self) -> None:  # noqa: B027
        """The run ends, or pauses at a frame boundary (the engine's ``run`` returns): release
        what the uplink holds outside Python. Nothing by default."""

    def trace_columns(self) -> dict[str, np.ma.MaskedArray]:
        """Columns of the mode's own that the slot's upload rows carry, ``(N,)`` each (masked
        where a device has none); none by default."""
        return {}

    def upload_columns(self, device: int) -> dict[str, Any]:
        """The same for ``device``'s latest upload, as scalars (stale servers); none by
        default."""
        return {}

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
        can_finish = self._can_finish(self._p[device] * self._h[device], self._full_s[device])
        if self._closed or (not can_finish and self._past_deadline):
            # after the cut, or never finishing once the deadline has passed: nothing is sent
            self._begin(device)
            self._end(device, False)
        elif not can_finish:
            self._begin(device)  # it can never finish: it transmits until the deadline, fails
            self._held.append(device)
        else:
            self._enter(device)

    #: whether the discipline gives an upload a share of the band smaller than the whole (where
    #: the noise is that of the share: a truncated rate model may carry on a share what it
    #: cannot on the whole band)
    shares_band: ClassVar[bool] = False

    def _can_finish(self, received_w: float, upload_full_s: float) -> bool:
        """Whether an upload with ``p h = received_w`` and the time ``upload_full_s`` alone on
        the whole band can ever end: a positive signal and, unless the discipline shares the band
        under a rate model with a lowest usable SNR, a finite time on the whole band."""
        if not received_w > 0.0:
            return False
        if self.shares_band and not self.rate_model.is_shannon:
            return True  # a share's SNR is higher than the whole band's
        return bool(np.isfinite(upload_full_s))

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
        its upload had already ended, or completes now (within
        :data:`~wflsim.sim.radio.sharing.DONE_REL_TOL` of its bits: arriving exactly when the
        device goes offline counts as arrived)."""
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
