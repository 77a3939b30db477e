"""Slot kernels: how one slot's device activity plays out on the run's SimPy clock.

The engine decides what each device does in a slot (:func:`wflsim.sim.slot.resolve_slot`: who
participates, compute time ``tau_cmp``, upload time ``tau_com`` cut at the deadline, energies).
A kernel plays that activity out in virtual time and closes the slot: the server waits until the
deadline ``tau_0`` or, if later, until the last upload has arrived. It returns the slot's device
events (``compute_start``, ``compute_end``, ``upload_end``) in the order they happened, which the
engine writes to the trace (each ``compute_end`` followed at the same instant by the device's
``upload_start``).

Two kernels, one result (``tests/test_kernels.py`` compares whole traces):

* :class:`ClosedFormKernel` (``closed_form``): the devices of a slot do not interact (the paper's
  model), so every event time is a closed form: ``S``, ``S + tau_cmp`` and ``S + tau_cmp +
  tau_com`` for a slot starting at ``S``, computed for all participants at once. Their order is
  the order SimPy would process them in (time, then the order their timeouts were scheduled), and
  the server waits with one timeout (the deadline) or two (the last upload's compute and upload
  times, so that the clock lands on the same float). No per-device process exists.
* :class:`EventKernel` (``event``): one SimPy process per device that wakes when it participates,
  computes, uploads and reports; the server waits for the deadline and the last report. This is
  where devices that share resources or can be interrupted live (the interaction models build on
  it); on the paper's model it gives the closed form's trace, event for event.

Each kernel also reports what it decided per device (:meth:`SlotKernel.play_slot`, a
:class:`SlotResult`): the time each upload actually transmitted and whether it arrived in time,
from which :func:`wflsim.sim.slot.settle_slot` settles the slot. On dedicated bands both kernels decide
in closed form (:func:`wflsim.sim.slot.dedicated_transmission`); with a shared uplink
(:mod:`wflsim.sim.radio`, ``ofdma`` or ``tdma``) the event kernel's uplink component decides
from its events, and its log holds the real ``upload_start`` times (with TDMA an upload may start
after its ``compute_end``).

The kernel is chosen by the scenario's ``[run] kernel`` (``auto``: the closed form unless a
component needs events: a shared uplink) and recorded in the run's manifest.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import simpy

from .radio.aircomp import aircomp_transmission
from .radio.cells.component import Cells
from .radio.modes import build_uplink, uplink_mode
from .radio.shared import SharedUplink
from .radio.spec import UplinkSpec
from .radio.tdma import TdmaUplink
from .slot import SlotUploads, dedicated_transmission
from .trace import event_code
from .world.system import SystemConstants

KernelName = Literal["closed_form", "event"]
#: Every kernel name a scenario may give (``auto`` resolves to one of the others).
KERNEL_CHOICES = ("auto", "closed_form", "event")

C_START, C_END, U_START, U_END, DROPPED = (
    event_code("compute_start"),
    event_code("compute_end"),
    event_code("upload_start"),
    event_code("upload_end"),
    event_code("dropped"),
)


@dataclass(frozen=True)
class SlotActivity:
    """A slot's device events in the order they happened, ``(M,)`` arrays."""

    time_s: npt.NDArray[np.float64]  #: the event's virtual time, s
    device: npt.NDArray[np.int64]  #: the device
    code: npt.NDArray[np.int8]  #: :func:`sim.trace.event_code` of the event
    #: whether the events include ``upload_start`` (else each ``compute_end`` stands for the
    #: device's ``upload_start`` at the same instant)
    has_upload_start: bool = False

    @classmethod
    def empty(cls) -> SlotActivity:
        """No device took part."""
        return cls(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8))

    def __len__(self) -> int:
        return int(self.time_s.shape[0])


#: What :meth:`SlotKernel.play` is: a SimPy process body that returns the slot's activity.
SlotPlay = Generator[simpy.Event, Any, SlotActivity]


@dataclass(frozen=True)
class SlotResult:
    """What a kernel decided in a slot: its device events and, per device (``(N,)`` each), the
    time its upload actually transmitted and whether it arrived in time; where devices can go
    offline, the time each computed and whether it was dropped."""

    activity: SlotActivity
    transmitted_s: npt.NDArray[np.float64]  #: s (0 for devices that do not participate)
    arrived: npt.NDArray[np.bool_]  #: the upload arrived in time (is aggregated)
    #: time actually computed, s (None: the uploads' ``compute_s``, nobody was dropped)
    computed_s: npt.NDArray[np.float64] | None = None
    #: the device went offline during its compute or upload (None: nobody did)
    dropped: npt.NDArray[np.bool_] | None = None
    #: the uplink's own columns of the slot's uploads (:meth:`SharedUplink.trace_columns`)
    columns: dict[str, np.ma.MaskedArray] | None = None


#: What :meth:`SlotKernel.play_slot` is: a SimPy process body that returns the slot's result.
SlotResultPlay = Generator[simpy.Event, Any, SlotResult]


class SlotKernel(ABC):
    """Plays a slot's device activity out on the run's SimPy clock (the module's docstring)."""

    name: ClassVar[KernelName]

    def start_run(self, env: simpy.Environment, num_devices: int) -> None:  # noqa: B027
        """Called once per :meth:`wflsim.sim.engine.Engine.run` with its fresh environment, before the server
        process starts (a kernel with per-device processes starts them here)."""

    def new_slot(  # noqa: B027
        self, frame: int, slot: int, now_s: float, gain: npt.NDArray[np.float64]
    ) -> None:
        """Slot ``slot`` of frame ``frame`` starts at ``now_s`` with the channel's gains
        ``gain`` (``(N,)``), before the slot is played (a kernel's uplink hears it,
        :meth:`wflsim.sim.radio.shared.SharedUplink.new_slot`)."""

    def close(self) -> None:  # noqa: B027
        """The engine's ``run`` returns (a kernel's uplink releases what it holds)."""

    @abstractmethod
    def play(
        self,
        env: simpy.Environment,
        who: npt.NDArray[np.int64],
        compute_s: npt.NDArray[np.float64],
        upload_s: npt.NDArray[np.float64],
        deadline_s: float,
        record: bool = True,
    ) -> SlotPlay:
        """The server's wait for one slot, as a SimPy process body (``yield from``).

        Args:
            env: the run's environment; ``env.now`` is the slot's start ``S``.
            who: the participating devices, ascending, ``(M,)``.
            compute_s: every device's compute time ``tau_cmp`` this slot, ``(N,)``, s.
            upload_s: every device's upload time (cut at the deadline if late), ``(N,)``, s.
            deadline_s: ``tau_0``, s.
            record: False when the caller writes no device events (``[trace] level =
                "device_slots"``): a kernel may then return an empty activity.

        Returns (as the generator's value), once ``env.now`` is the slot's end, i.e.
        ``max(S + tau_0, last upload's end)``: the slot's device events.
        """

    def play_slot(
        self,
        env: simpy.Environment,
        uploads: SlotUploads,
        deadline_s: float,
        closes_at: Literal["deadline", "last_upload"],
        record: bool = True,
        online_until_s: npt.NDArray[np.float64] | None = None,
    ) -> SlotResultPlay:
        """The server's wait for one slot from its uploads (``yield from``); returns the
        :class:`SlotResult`. On dedicated bands the time transmitted and the arrivals are closed
        forms (:func:`wflsim.sim.slot.dedicated_transmission`) and :meth:`play` plays them.

        ``online_until_s``: when each device goes offline (absolute time, s, ``(N,)``; ``inf``:
        not before the slot ends), for a model of availability; only the event kernel plays
        devices that go offline (None: every device stays online)."""
        if online_until_s is not None:
            raise ValueError(
                f"the {self.name} kernel cannot play devices that go offline "
                "([availability]): use the event kernel"
            )
        transmitted_s, arrived = dedicated_transmission(uploads, deadline_s, closes_at)
        who = np.flatnonzero(uploads.participating)
        activity = yield from self.play(
            env, who, uploads.compute_s, transmitted_s, deadline_s, record=record
        )
        return SlotResult(activity, transmitted_s, arrived)

    def play_aircomp(
        self,
        env: simpy.Environment,
        uploads: SlotUploads,
        latency_s: float,
        deadline_s: float,
        closes_at: Literal["deadline", "last_upload"],
        record: bool = True,
        online_until_s: npt.NDArray[np.float64] | None = None,
        group: npt.NDArray[np.int64] | None = None,
        num_groups: int | None = None,
    ) -> SlotResultPlay:
        """An over-the-air slot (``[uplink] mode = "aircomp"``), the same closed form on every
        kernel: the participants (``uploads.participating``: the aligned devices) compute, then
        each sum (``group``: the devices' cells, ``num_groups`` of them; None: one sum) transmits
        for ``latency_s`` (:func:`wflsim.sim.radio.aircomp.aircomp_transmission`); each device
        transmits ``uploads.upload_full_s`` of it (its own coordinates' symbols), from the
        window's start (its ``upload_end`` then). Nothing interacts but the
        common transmissions, so no per-device process plays them. A device that goes offline
        (``online_until_s``) before its work ends is dropped there.

        The server waits until ``tau_0`` (``deadline``) or the last sum's end, whichever is
        later."""
        start = float(env.now)
        part = uploads.participating
        tx_start_s, _, arrived = aircomp_transmission(
            uploads.compute_s, part, latency_s, deadline_s, closes_at, group, num_groups
        )
        # each device transmits on its own coordinates' symbols of the window
        own_s = np.minimum(uploads.upload_full_s, latency_s)
        transmitted_s = np.where(arrived, own_s, 0.0)
        computed_s: npt.NDArray[np.float64] | None = None
        dropped: npt.NDArray[np.bool_] | None = None
        drop_at = np.full(part.shape, np.inf)
        if online_until_s is not None:
            work_end = np.where(arrived, tx_start_s + own_s, uploads.compute_s)
            left = np.asarray(online_until_s, dtype=np.float64) - start
            dropped = part & (left < work_end)
            drop_at = np.where(dropped, left, np.inf)
            computed_s = np.where(dropped, np.minimum(uploads.compute_s, left), uploads.compute_s)
            transmitted_s = np.where(
                dropped & arrived, np.clip(left - tx_start_s, 0.0, transmitted_s), transmitted_s
            )
            arrived = arrived & ~dropped
        wait_s = deadline_s
        if closes_at == "last_upload" and part.any():
            wait_s = max(deadline_s, float((tx_start_s + latency_s)[part].max()))
        yield env.timeout(wait_s)
        if not record or not part.any():
            return SlotResult(SlotActivity.empty(), transmitted_s, arrived, computed_s, dropped)
        who = np.flatnonzero(part)
        c, t0, d_at = uploads.compute_s[who], tx_start_s[who], drop_at[who]
        c_end_seen = c <= d_at
        sends = ((transmitted_s[who] > 0.0) | arrived[who]) & (t0 <= d_at)
        done = arrived[who]
        gone = np.isfinite(d_at)
        t_all = np.concatenate(
            [np.full(who.size, start), start + c[c_end_seen], start + t0[sends]]
            + [start + t0[done] + transmitted_s[who][done], start + d_at[gone]]
        )
        d_all = np.concatenate([who, who[c_end_seen], who[sends], who[done], who[gone]])
        k_all = np.concatenate(
            [
                np.full(who.size, C_START, np.int8),
                np.full(int(c_end_seen.sum()), C_END, np.int8),
                np.full(int(sends.sum()), U_START, np.int8),
                np.full(int(done.sum()), U_END, np.int8),
                np.full(int(gone.sum()), DROPPED, np.int8),
            ]
        )
        order = np.argsort(t_all, kind="stable")
        activity = SlotActivity(t_all[order], d_all[order], k_all[order], has_upload_start=True)
        return SlotResult(activity, transmitted_s, arrived, computed_s, dropped)


class ClosedFormKernel(SlotKernel):
    """Every device event of a slot as a closed form, vectorised; no per-device process."""

    name = "closed_form"

    def play(
        self,
        env: simpy.Environment,
        who: npt.NDArray[np.int64],
        compute_s: npt.NDArray[np.float64],
        upload_s: npt.NDArray[np.float64],
        deadline_s: float,
        record: bool = True,
    ) -> SlotPlay:
        start = float(env.now)
        m = int(who.shape[0])
        if m == 0:
            yield env.timeout(deadline_s)
            return SlotActivity.empty()
        c, u = compute_s[who], upload_s[who]
        check_times(c, u)
        c_end = start + c  # what SimPy's clock gives: now + delay, in float64
        u_end = c_end + u
        last = int(np.argmax(u_end))
        if u_end[last] > start + deadline_s:  # the last upload closes the slot
            yield env.timeout(float(c[last]))
            yield env.timeout(float(u[last]))
        else:
            yield env.timeout(deadline_s)
        return _event_order(start, who, c_end, u_end) if record else SlotActivity.empty()


def check_times(compute_s: npt.NDArray[np.float64], upload_s: npt.NDArray[np.float64]) -> None:
    """Refuse a participant's compute or upload time that is negative or NaN (a scheme's bad
    power, say): SimPy cannot order such events, and no kernel can close the slot after them."""
    bad = ~((compute_s >= 0.0) & (upload_s >= 0.0))  # NaN compares False
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"a participating device has compute time {compute_s[i]!r} s and upload time "
            f"{upload_s[i]!r} s; slot times must be >= 0 and not NaN (check the scheme's power)"
        )


def _event_order(
    start_s: float,
    who: npt.NDArray[np.int64],
    compute_end_s: npt.NDArray[np.float64],
    upload_end_s: npt.NDArray[np.float64],
) -> SlotActivity:
    """The order SimPy processes a slot's device events in: all ``compute_start`` at ``S`` (in
    ``who`` order, the order the devices were woken), then ``compute_end`` and ``upload_end``
    by time; at equal times by the order their timeouts were scheduled. The compute timeouts
    were all scheduled at ``S`` in ``who`` order, before any upload timeout; each upload timeout
    was scheduled when its device's ``compute_end`` was processed."""
    m = who.shape[0]
    devices = np.asarray(who, dtype=np.int64)
    # two stable sorts (ties keep their position): the compute timeouts by time, in ``who``
    # order at equal times; then every timeout by time, the compute ones listed first in
    # ``who`` order and the upload ones in the order they were scheduled (``compute_order``)
    compute_order = np.argsort(compute_end_s, kind="stable")
    times = np.concatenate([compute_end_s, upload_end_s[compute_order]])
    order = np.argsort(times, kind="stable")
    listed = np.concatenate([devices, devices[compute_order]])
    codes = np.concatenate([np.full(m, C_END, np.int8), np.full(m, U_END, np.int8)])
    return SlotActivity(
        np.concatenate([np.full(m, start_s), times[order]]),
        np.concatenate([devices, listed[order]]),
        np.concatenate([np.full(m, C_START, np.int8), codes[order]]),
    )


#: A device process's phase in its slot (the event kernel's drops read it).
_IDLE, _COMPUTING, _UPLOADING, _IN_UPLINK = 0, 1, 2, 3


class EventKernel(SlotKernel):
    """One SimPy process per device: it wakes when it participates, computes, uploads and
    reports; the server waits for the deadline and the last report.

    With a shared uplink (``uplink``, :mod:`wflsim.sim.radio`) a device hands its upload to the
    uplink when its compute ends; the uplink decides when it transmits, for how long and whether
    it arrives, and reports its end; at the deadline it cuts what is still in flight or waiting
    (schemes that close the slot at the deadline).

    Devices that go offline (``online_until_s`` of :meth:`play_slot`, ``[availability]``): a
    participant whose device goes offline at ``b`` before its work would end is *dropped* at
    ``b`` by a timed event: a SimPy interrupt of its process while it computes or uploads on its
    own band, a withdrawal from the shared uplink while its upload waits or is in flight there
    (the other uploads' shares change with it). It logs a ``dropped`` event, its work is lost,
    and the kernel reports the time it computed and transmitted until ``b``.
    """

    name = "event"

    def __init__(self, uplink: SharedUplink | None = None) -> None:
        self.uplink = uplink
        self._env: simpy.Environment | None = None
        self._wake: list[simpy.Event | None] = []
        self._procs: list[simpy.Process] = []
        self._phase: list[int] = []
        self._log: list[tuple[float, int, int]] = []
        self._compute_s: list[float] = []  # Python floats: SimPy's heap compares them faster
        self._upload_s: list[float] = []
        self._remaining = 0
        self._all_done: simpy.Event | None = None
        # the slot being played with devices that can go offline
        self._slot_id = 0
        self._start_s = 0.0
        self._began_s: list[float] = []
        self._computed = np.zeros(0)
        self._transmitted = np.zeros(0)
        self._arrived = np.zeros(0, dtype=bool)
        self._dropped = np.zeros(0, dtype=bool)
        self._drops: list[tuple[float, int]] = []  # (time, device), the latest first

    def new_slot(self, frame: int, slot: int, now_s: float, gain: npt.NDArray[np.float64]) -> None:
        if self.uplink is not None:
            self.uplink.new_slot(frame, slot, now_s, gain)

    def close(self) -> None:
        if self.uplink is not None:
            self.uplink.release()

    def start_run(self, env: simpy.Environment, num_devices: int) -> None:
        self._env = env
        self._wake = [None] * num_devices
        self._phase = [_IDLE] * num_devices
        self._began_s = [0.0] * num_devices
        self._procs = [env.process(self._device(d)) for d in range(num_devices)]

    def _device(self, d: int) -> Generator[simpy.Event, Any, None]:
        """A device: wakes when it participates in a slot, computes, uploads, reports; an
        interrupt (its device went offline) ends its work in the slot."""
        env = self._env
        assert env is not None
        log = self._log
        phase = self._phase
        while True:
            wake = env.event()
            self._wake[d] = wake
            yield wake
            log.append((env.now, d, C_START))
            phase[d] = _COMPUTING
            try:
                yield env.timeout(self._compute_s[d])
            except simpy.Interrupt as stop:
                at_s = _drop_time(stop)
                self._lose(d, at_s, computed_s=at_s - self._start_s)
                continue
            log.append((env.now, d, C_END))
            if self.uplink is not None:
                phase[d] = _IN_UPLINK
                self.uplink.submit(d)  # the uplink carries the upload and reports its end
                continue
            phase[d] = _UPLOADING
            self._began_s[d] = env.now
            try:
                yield env.timeout(self._upload_s[d])
            except simpy.Interrupt as stop:
                at_s = _drop_time(stop)
                self._transmitted[d] = max(at_s - self._began_s[d], 0.0)
                self._lose(d, at_s)
                continue
            phase[d] = _IDLE
            log.append((env.now, d, U_END))
            self._one_done()

    def _one_done(self) -> None:
        """A participant's upload has ended (arrived or not)."""
        self._remaining -= 1
        if self._remaining == 0:
            assert self._all_done is not None
            self._all_done.succeed()

    def _upload_ended(self, d: int) -> None:
        """The shared uplink has ended ``d``'s upload."""
        self._phase[d] = _IDLE
        self._one_done()

    def _lose(self, d: int, at_s: float, computed_s: float | None = None) -> None:
        """``d`` went offline at ``at_s`` during its work: it is dropped."""
        if computed_s is not None:
            self._computed[d] = min(max(computed_s, 0.0), self._compute_s[d])
            self._transmitted[d] = 0.0
        self._arrived[d] = False
        self._dropped[d] = True
        self._phase[d] = _IDLE
        self._log.append((at_s, d, DROPPED))
        self._one_done()

    def _next_drop(self, env: simpy.Environment) -> None:
        """Schedule the earliest drop still pending in the slot (if any)."""
        if self._drops:
            at_s, d = self._drops.pop()
            timer = env.timeout(max(at_s - float(env.now), 0.0))
            timer.callbacks.append(partial(self._drop, self._slot_id, d, at_s))

    def _drop(self, slot_id: int, d: int, at_s: float, _event: simpy.Event) -> None:
        """``d``'s device goes offline now (``at_s``): stop what it is doing in its slot."""
        if slot_id != self._slot_id:
            return  # a timer of an earlier slot
        assert self._env is not None
        self._next_drop(self._env)
        phase = self._phase[d]
        if phase in (_COMPUTING, _UPLOADING):
            self._procs[d].interrupt(at_s)
        elif phase == _IN_UPLINK:
            assert self.uplink is not None
            if self.uplink.withdraw(d, at_s):
                self._lose(d, at_s)

    def play(
        self,
        env: simpy.Environment,
        who: npt.NDArray[np.int64],
        compute_s: npt.NDArray[np.float64],
        upload_s: npt.NDArray[np.float64],
        deadline_s: float,
        record: bool = True,
    ) -> SlotPlay:
        if env is not self._env:
            raise RuntimeError("EventKernel.start_run was not called with this environment")
        check_times(compute_s[who], upload_s[who])
        self._open(env, who, compute_s)
        self._upload_s = upload_s.tolist()
        yield from self._wake_and_wait(env, who, deadline_s)
        return self._activity()

    def _open(
        self, env: simpy.Environment, who: npt.NDArray[np.int64], compute_s: npt.NDArray[np.float64]
    ) -> None:
        """A slot starts: an empty log, the compute times, ``len(who)`` uploads to wait for."""
        self._log.clear()
        self._compute_s = compute_s.tolist()
        self._remaining = int(who.shape[0])
        self._all_done = env.event()

    def _wake_and_wait(
        self,
        env: simpy.Environment,
        who: npt.NDArray[np.int64],
        deadline_s: float,
        at_deadline: Callable[[simpy.Event], None] | None = None,
    ) -> Generator[simpy.Event, Any, None]:
        """Wake the participants, then wait for the deadline and the last report (``yield
        from``); ``at_deadline`` runs when the deadline fires, before the server looks."""
        for d in who.tolist():
            wake = self._wake[d]
            assert wake is not None
            wake.succeed()
        deadline = env.timeout(deadline_s)
        if at_deadline is not None:
            deadline.callbacks.append(at_deadline)
        if self._remaining > 0:
            assert self._all_done is not None
            yield env.all_of([deadline, self._all_done])
        else:
            yield deadline

    def _activity(self) -> SlotActivity:
        """The slot's log as a :class:`SlotActivity`."""
        if not self._log:
            return SlotActivity.empty()
        arr = np.array(self._log, dtype=np.float64)
        return SlotActivity(
            arr[:, 0],
            arr[:, 1].astype(np.int64),
            arr[:, 2].astype(np.int8),
            has_upload_start=self.uplink is not None,
        )

    def play_slot(
        self,
        env: simpy.Environment,
        uploads: SlotUploads,
        deadline_s: float,
        closes_at: Literal["deadline", "last_upload"],
        record: bool = True,
        online_until_s: npt.NDArray[np.float64] | None = None,
    ) -> SlotResultPlay:
        link = self.uplink
        if link is None and online_until_s is None:
            return (yield from super().play_slot(env, uploads, deadline_s, closes_at, record))
        if env is not self._env:
            raise RuntimeError("EventKernel.start_run was not called with this environment")
        who = np.flatnonzero(uploads.participating)
        start = float(env.now)
        n = uploads.participating.shape[0]
        self._slot_id += 1
        self._start_s = start
        self._open(env, who, uploads.compute_s)
        self._computed = uploads.compute_s.copy()
        self._dropped = np.zeros(n, dtype=bool)
        if link is None:  # dedicated bands: the closed form, unless a device goes offline
            self._transmitted, self._arrived = dedicated_transmission(
                uploads, deadline_s, closes_at
            )
            check_times(uploads.compute_s[who], self._transmitted[who])
            self._upload_s = self._transmitted.tolist()
            # when each participant's work ends (its upload's end, as SimPy adds the times)
            work_end_s = (start + uploads.compute_s) + self._transmitted
        else:
            self._transmitted, self._arrived = np.zeros(n), np.zeros(n, dtype=bool)
            check_times(uploads.compute_s[who], uploads.upload_full_s[who])
            link.open_slot(
                env,
                deadline_s=deadline_s,
                closes_at=closes_at,
                tx_power_w=uploads.tx_power_w,
                channel_gain=uploads.channel_gain,
                payload_bits=uploads.payload_bits,
                upload_full_s=uploads.upload_full_s,
                log=self._log.append,
                on_end=self._upload_ended,
            )
            bound_s = _work_bound_s(
                uploads, who, deadline_s, closes_at, one_at_a_time=isinstance(link, TdmaUplink)
            )
            if not link.bounded and closes_at != "deadline":
                bound_s = float("inf")  # interference or a network: no bound but its end
            work_end_s = np.full(n, start + bound_s)
        self._drops = []
        if online_until_s is not None and who.shape[0]:
            at_s = online_until_s[who]
            lost = at_s < work_end_s[who]
            # one timer pending at a time, the earliest drop (ties: by device); each schedules
            # the next, so a slot leaves at most one stale timer behind
            order = np.lexsort((who[lost], at_s[lost]))[::-1]
            self._drops = list(
                zip(at_s[lost][order].tolist(), who[lost][order].tolist(), strict=True)
            )
            self._next_drop(env)
        # at the deadline, before the server looks: a shared uplink cuts what the rules cut
        cut = None if link is None else lambda _e: link.close(everything=closes_at == "deadline")
        yield from self._wake_and_wait(env, who, deadline_s, cut)
        columns = None
        if link is not None:
            transmitted, arrived = link.transmitted_s.copy(), link.arrived.copy()
            columns = link.trace_columns() or None
        else:
            transmitted, arrived = self._transmitted, self._arrived
        if online_until_s is None:
            return SlotResult(self._activity(), transmitted, arrived, columns=columns)
        return SlotResult(
            self._activity(), transmitted, arrived, self._computed, self._dropped, columns
        )


def _drop_time(stop: simpy.Interrupt) -> float:
    """The time a drop's interrupt carries (its device went offline then), s."""
    assert isinstance(stop.cause, float)
    return stop.cause


def _work_bound_s(
    uploads: SlotUploads,
    who: npt.NDArray[np.int64],
    deadline_s: float,
    closes_at: Literal["deadline", "last_upload"],
    one_at_a_time: bool,
) -> float:
    """A time after a slot's start by which every participant's work on a shared uplink has
    ended, s: the deadline if the slot closes there. Else the later of the deadline (uploads
    that can never finish end there, or when submitted after it) and the last compute end plus:
    under TDMA (``one_at_a_time``) every upload's time, one after another; under OFDMA ``k``
    times the longest (with at most ``k`` uploads in flight none gets less than ``W / k``, and
    ``(W/k) log2(1 + k x) >= (W log2(1 + x)) / k``)."""
    if closes_at == "deadline" or who.shape[0] == 0:
        return deadline_s
    full = uploads.upload_full_s[who]
    finite = full[np.isfinite(full)]
    if finite.shape[0] == 0:
        return float(max(uploads.compute_s[who].max(), deadline_s))
    k = int(who.shape[0])
    send_s = finite.sum() if one_at_a_time else k * finite.max()
    return float(max(uploads.compute_s[who].max() + send_s, deadline_s))


KERNELS: dict[str, type[SlotKernel]] = {k.name: k for k in (ClosedFormKernel, EventKernel)}


def make_kernel(
    name: str,
    uplink: UplinkSpec | None = None,
    system: SystemConstants | None = None,
    cells: Cells | None = None,
) -> SlotKernel:
    """The kernel called ``name`` (``closed_form`` or ``event``), with the uplink ``uplink``
    (default dedicated bands; a shared one needs ``system`` and the event kernel); with
    several cells (``cells``) the cells' uplinks, which need the event kernel where uploads
    interact (a cell shares its band, or two cells share one: interference)."""
    if name not in KERNELS:
        raise ValueError(f"unknown slot kernel {name!r}; known: {', '.join(KERNELS)}")
    spec = uplink or UplinkSpec()
    mode = uplink_mode(spec)
    if mode.over_the_air:  # one common transmission: SlotKernel.play_aircomp
        return KERNELS[name]()
    celled = cells is not None and cells.layout.interacts
    if not (mode.interacting or celled):
        return KERNELS[name]()
    if name != "event":
        raise ValueError(
            f"the {name} kernel cannot play cells whose uploads interact (a shared band or "
            "inter-cell interference): use the event kernel"
            if cells is not None
            else f"the {name} kernel cannot play a shared uplink ({spec.mode}): use the event "
            "kernel"
        )
    assert system is not None, "an uplink whose uploads interact needs the system's constants"
    return EventKernel(build_uplink(spec, system, U_START, U_END, cells))
