"""Stale updates on the event clock: the ``semi_sync`` and ``async`` server modes
(:mod:`wflsim.sim.servers.config`).

:class:`StaleServer` plays each device's upload cycle on the clock in place of a slot kernel.
What stays of the engine's run: frames of ``T`` slots and slots of ``tau_0`` -- now fixed
intervals of virtual time, the controller's decision epochs:

* at a **frame start** (``k T tau_0``): mobility, the large-scale gains, the scheme's frame plan
  (``gamma``, the Proposition-1 threshold ``p_max``) and the learner's frame (freezing masks),
  as in a synchronous run;
* at a **slot start** (``t tau_0``): the availability changes, the slot's channel draw and the
  scheme's slot plan (Proposition 1: ``p_min`` lands a device's compute and upload exactly on
  the per-upload latency target ``tau_0``; it transmits at ``p_min`` iff ``p_min <= p_max``);
  every idle device that is online and that the plan lets take part starts an **upload
  cycle**: it downloads the current model version ``v``, computes for ``tau_cmp`` (slowed under
  ``[compute] jitter``) and uploads at the planned power on the slot's channel (block fading:
  the gain of the slot in which the cycle starts holds for the whole upload), on its own band
  or on a shared one (below);
* at a **slot end**: each device's energy-deficit queue takes the energy of the cycles that
  ended in the slot (``Q <- max(Q + E - E_bar, 0)``, the paper's per-slot update with the
  frame's prices), the ``energy`` rows, the scheme's ``observe``, an evaluation every
  ``eval_every_slots`` slots.

A cycle ends when its upload arrives or when the device goes offline first (``dropped``, its
work lost). An arrival of staleness ``s = V - v`` (``V``: the version now) enters the server's
buffer with the weight ``w(s)``, or is discarded when ``s > max_staleness`` (``stale``).

* ``semi_sync``: cycles start at slot starts only; the server applies its buffer at every slot
  end (the round's deadline), so an upload that misses it is applied a slot or more later. With
  no late upload this is the synchronous run, model step for model step (a test).
* ``async``: the server applies its buffer at every ``buffer_size``-th arrival; a device whose
  upload arrived starts its next cycle at once if the slot's plan lets it (on the slot's gain
  and threshold), else at the next slot start it may.

Times are exact: every event is scheduled at the absolute time computed when its cycle starts
(``t tau_0`` for slot boundaries), and events at the same instant go in a fixed order: device
events (by device), then the server's slot boundary, then devices that try to start again (by
device). An arrival within ``tau_0 * DEADLINE_REL_TOL`` of a slot's end, on either side (the
Proposition-1 power lands it on the deadline in exact arithmetic, and rounding puts it a step
before or after), is taken at the slot's end (:func:`on_boundary_s`), as in the synchronous
deadline test: in lockstep every device then waits for the server's step, whatever way its
arithmetic rounded. So a resumed run replays the uninterrupted one to the bit: the cycles in flight,
the buffer and the model versions they reference are part of the state (:meth:`state_dict`).

**A shared uplink** (``[uplink] mode = "ofdma" | "tdma"``, :mod:`wflsim.sim.radio`,
opened for the whole run: :meth:`SharedUplink.open_run`). A cycle's end is no longer known when
it starts: its compute end is scheduled as above; there its upload joins the uplink with the
power, gain, payload and whole-band time planned in the slot the cycle started in, and keeps its
share of the band (OFDMA: ``W / k`` with ``k`` uploads in flight; TDMA: its turn in the queue,
``edf`` keyed by the cycle's start plus ``tau_0``) across slot boundaries; rates are recomputed
at every start, end and withdrawal, as in a synchronous slot. No deadline cuts an upload. The
uplink reports the upload's end (:meth:`_arrived`), at which the cycle ends as on a dedicated
band. A device that goes offline at ``b`` is dropped by an event at ``b`` (one timer per device
and offline time): while computing as on a dedicated band, while its upload waits or is in
flight by withdrawing it from the uplink (the time it transmitted is charged; the others' rates
change with it). Upload energy is ``p`` times the time actually transmitted (a TDMA upload
waiting for its turn spends none). The uplink's state (the uploads in it, their bits left, the
pending completion) is part of :meth:`state_dict` and goes back on the clock in :meth:`resume`.

The order at one instant with a shared uplink: the uplink's completions are SimPy timeouts, so
they come **after** every event the clock schedules at that instant (availability changes,
device events -- compute ends, which join the uplink, drops, which withdraw from it -- the slot
boundary, restarts). So an upload that joins at ``t`` is in the band (TDMA: in the queue) when
another ends at ``t``; a device that goes offline at ``t`` when its upload ends at ``t`` has
arrived (the uplink finds its bits sent); in ``async`` a device whose upload ends at ``t``
starts again at ``t`` (a restart scheduled at ``now`` goes before SimPy's other events at
``t``). The tolerance rule holds as on a dedicated band, with one more step because the
boundary comes before the completions: an upload that ends within ``tau_0 * DEADLINE_REL_TOL``
before a slot's end lands on it (an event at the boundary, before the server's); one whose end
at its current rate is at or within the tolerance after the boundary is ended by the boundary
itself, before the slot closes (:meth:`SharedUplink.settle`). So no completion fires at a slot
boundary, and at a checkpoint the one SimPy event that matters is the uplink's next completion,
after the cut (:meth:`wflsim.sim.clock.Clock.timeout_at` puts it back at its absolute time).

The learner computes an update's gradient only when the server applies it, at the model version
and frame state the device downloaded (:class:`wflsim.sim.learner.VersionedLearner`); an update that is
never applied (dropped, too stale, in flight or in the buffer at the run's end) is never computed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import simpy

from .. import slot as slots
from ..clock import LAST_RANK, Order
from ..errors import RunDiverged
from ..learner import VersionedLearner
from ..radio import rates
from ..radio.modes import build_uplink
from ..radio.shared import SharedUplink
from ..slot import DEADLINE_REL_TOL, SlotOutcome, SlotUploads
from ..trace import event_code
from ..world import physics
from ..world.availability import Changes
from .base import (
    Host,
    Server,
    SlotEnd,
    SlotInProgress,
    SlotPlanning,
    SlotPlay,
    decision_columns,
    log_strategy_rows,
    select,
)
from .config import ServerConfig
from .cycles import (
    AsyncStats,
    Cycle,
    Tally,
    account_stale_step,
    cycle_records,
    cycles_from_records,
    on_boundary_s,
    one_change,
    stopped,
    within_budget,
)

_ONLINE, _OFFLINE = event_code("online"), event_code("offline")
_U_START, _U_END = event_code("upload_start"), event_code("upload_end")


def _array(v: Any) -> np.ndarray:
    """A decision column as an array (a masked one, the ``selected`` column, kept masked)."""
    return v if isinstance(v, np.ma.MaskedArray) else np.asarray(v)


class StaleServer(Server):
    """A server that applies stale updates (``[server] mode = "semi_sync"`` or ``"async"``; the
    module docstring). The engine's learner must be a
    :class:`~wflsim.sim.learner.VersionedLearner`.

    Args:
        config: the ``[server]`` table.

    Raises:
        ValueError: ``config.mode = "sync"`` (:class:`~wflsim.sim.servers.synchronous.SyncServer`
            runs it); when bound, a learner that keeps no model versions.
    """

    modes = ("semi_sync", "async")
    #: the server built on the ``closed_form`` kernel in place of this one (its subclass
    #: ``ClosedFormStaleServer``, set by :mod:`wflsim.sim.servers`: this module never imports it)
    closed_form: ClassVar[type[StaleServer] | None] = None

    @classmethod
    def build(cls, config: ServerConfig, kernel: Any) -> StaleServer:
        """A stale-update server (it plays device cycles itself): on the ``closed_form`` kernel,
        one that computes them in closed form where they do not interact (:attr:`closed_form`)."""
        closed = getattr(kernel, "name", None) == "closed_form" and cls is StaleServer
        return cls.closed_form(config) if closed and cls.closed_form else cls(config)

    fixed_slot_grid = True

    def __init__(self, config: ServerConfig) -> None:
        if config.mode not in ("semi_sync", "async"):
            raise ValueError(f"server.mode {config.mode!r} is not a stale-update mode")
        super().__init__()
        self.config = config
        self._async = config.mode == "async"
        # the server's state at frame boundaries (state_dict)
        self.version = 0  #: the global model's version (server steps so far)
        self._next_key = 0
        self._cycles_started = np.zeros(0, dtype=np.int64)
        self._cycles: dict[int, Cycle] = {}  # device -> its cycle in flight
        self._buffer: list[Cycle] = []  # arrived, not yet applied
        # within a slot
        self._tick: SlotInProgress | None = None
        #: known async jitter: the slot's planning and the slowdowns it was planned on
        self._planning: tuple[SlotPlanning, np.ndarray] | None = None
        #: device_slots level: where the slot's rows go and their decision columns
        self._fold: tuple[int, dict[str, Any]] | None = None
        self._tally = Tally(0)
        # a shared uplink (None: dedicated bands), its state to put back on the next run's
        # clock, and per device the time of its pending drop timer (NaN: none)
        self._uplink: SharedUplink | None = None
        self._uplink_state: dict[str, Any] | None = None
        self._drop_timer_s = np.zeros(0)

    def bind(self, engine: Host) -> None:
        """Check the engine's learner; size the per-device state; build the shared uplink of
        the engine's ``[uplink]`` (if not dedicated)."""
        mode = self.config.mode
        if not isinstance(engine.learner, VersionedLearner):
            raise ValueError(
                f"server.mode {mode!r} needs a learner that keeps model versions "
                "(start_update, drop_update, apply_updates, versions_kept)"
            )
        super().bind(engine)
        self._record = engine.record_events  # the trace level: fixed for the run
        self.versioned: VersionedLearner = engine.learner
        n = engine.num_devices
        self._cycles_started = np.zeros(n, dtype=np.int64)
        self._tally = Tally(n)
        self._uplink = build_uplink(
            engine.config.uplink, engine.system, _U_START, _U_END, engine.cells
        )
        self._drop_timer_s = np.full(n, np.nan)

    def new_stats(self, num_devices: int) -> AsyncStats:
        """:class:`AsyncStats`: the run's totals with the server's counts."""
        return AsyncStats(energy_per_device_j=np.zeros(num_devices))

    @property
    def stats(self) -> AsyncStats:
        """The engine's totals (:meth:`new_stats`)."""
        st = self.host.stats
        assert isinstance(st, AsyncStats)
        return st

    @property
    def in_slot(self) -> bool:
        """Whether a slot is in progress."""
        return self._tick is not None

    # ------------------------------------------------------------------ the clock

    def start_run(self, env: simpy.Environment) -> None:
        """A shared uplink opens on the run's fresh clock (its uploads in flight, from a
        checkpoint or from the run these objects played before, go back in :meth:`resume`)."""
        link = self._uplink
        if link is None:
            return
        if self._uplink_state is None and link.env is not None:
            self._uplink_state = link.state_dict()  # the same objects go on
        link.open_run(
            env,
            num_devices=self.host.num_devices,
            log=self._uplink_log,
            on_end=self._arrived,
            later=self._after_device_events,
        )

    def _after_device_events(self, f: Callable[[], None]) -> None:
        """Call ``f`` now, after the clock's device events of this instant (before the slot
        boundary): a TDMA band freed or found free at a compute end or a drop goes to the
        queue's first once every upload of the instant has joined."""
        self.host.clock.at(self.host.clock.now, Order.DEVICE, LAST_RANK, lambda _e: f())

    def close(self) -> None:
        """The shared uplink releases what it holds (an ns-3 process)."""
        if self._uplink is not None:
            self._uplink.release()

    def resume(self) -> None:
        """The cycles in flight at the boundary the run continues from, back on the clock (with
        a shared uplink: its uploads, bits left and pending completion too)."""
        link = self._uplink
        if link is not None:
            self._drop_timer_s[:] = np.nan
            if self._uplink_state is not None:
                link.load_state_dict(self._uplink_state, self.host.clock.timeout_at)
                self._uplink_state = None
        for c in sorted(self._cycles.values(), key=lambda c: c.device):
            self._schedule(c)

    def play_slot(self, k: int, t: int) -> SlotPlay:
        """Slot ``t``: its plan and the cycles it starts, then, at ``(t + 1) tau_0``, its end;
        the cycles play out on the clock meanwhile."""
        self._slot_open(k, t)
        tau_0 = self.host.system.deadline_s
        end_s = (t + 1) * tau_0
        yield self.host.clock.at(end_s, Order.SERVER)
        if self._uplink is not None:
            # uploads that end within the timing rule's tolerance after the boundary (or on it:
            # their completions would come after the clock's events) arrive at it
            self._uplink.settle(end_s + DEADLINE_REL_TOL * tau_0)
        return self._slot_close(k, t)

    # ------------------------------------------------------------------ slots

    def _slot_open(self, k: int, t: int) -> None:
        eng = self.host
        now = eng.clock.now
        fr = eng.frame
        assert fr is not None
        # semi_sync: the slot's slowdown, as a synchronous slot; async: each cycle draws its own,
        # which a known slowdown lets the scheme plan on (that of each device's next cycle)
        slowdown = self._next_slowdowns() if self._plans_cycles else None
        sp = eng.plan_slot(k, t, slot_jitter=not self._async, slowdown=slowdown)
        if self._uplink is not None:
            self._uplink.new_slot(k, t, now, sp.gains.gain)
        self._planning = None if slowdown is None else (sp, slowdown)
        costs, planned = sp.costs, sp.planned
        available, online_until = sp.available, sp.online_until_s
        end_s = (t + 1) * eng.system.deadline_s
        if eng.availability is not None:
            # the slot's changes, each logged at its time (the device state the slot's cycles
            # use is the one at its start, above)
            changes = eng.availability.advance(float(np.nextafter(end_s, -np.inf)))
            for i in range(len(changes)):
                self.host.clock.at(
                    float(changes.time_s[i]),
                    Order.AVAILABILITY,
                    callback=self._change_logger(one_change(changes, i), k, t),
                )
        up = self._uploads(sp)
        busy = self._busy()
        idle = np.setdiff1d(eng.ids, busy)
        selected: dict[str, Any] = {"selected": None}
        probe_phase_s = 0.0
        if eng.selection.active:  # the idle candidates the strategy asks ([strategy.selection])
            candidates = np.zeros(eng.num_devices, dtype=bool)
            candidates[idle] = up.participating[idle]
            size = eng.selection.k
            assert size is not None
            # semi_sync: k devices per round; async: k devices in cycles at once
            limit = size - len(busy) if self._async else size
            pick = select(eng, t, sp, up, candidates, limit)
            selected = pick.columns
            if pick.probe_energy_j is not None:  # the probes' energy, charged in this slot
                self._tally.energy_compute_j += pick.probe_energy_j
            probe_phase_s = pick.probe_phase_s
            up = self._uploads(sp, pick.chosen)
        starting = idle[up.participating[idle]]
        self._tick = SlotInProgress(
            slot=t,
            frame=k,
            start_s=now,
            deadline_s=end_s,
            uploads=up,
            costs=costs,
            who=starting,
            available=available,
            online_until_s=online_until,
        )
        decision = {
            **decision_columns(fr, sp, up, np.where(up.participating, planned.compute_s, 0.0)),
            "model_version": np.full(eng.num_devices, self.version, dtype=np.int64),
            **selected,
        }
        eng.buffer.add("slot_start", now, k, t)
        if eng.record_events:  # the idle devices' decisions
            eng.buffer.add(
                "decision",
                now,
                k,
                t,
                idle,
                **{name: None if v is None else _array(v)[idle] for name, v in decision.items()},
            )
        else:  # folded into the slot's device_slot rows, which go here at the slot's end
            busy = np.ones(eng.num_devices, dtype=bool)
            busy[idle] = False
            self._fold = (
                eng.buffer.position,
                {
                    name: None if v is None else np.ma.MaskedArray(_array(v), mask=busy)
                    for name, v in decision.items()
                },
            )
        # power_of_choice: the asked devices start once the server has the probes' losses (the
        # model version is the slot start's)
        self._start_all(starting, now + probe_phase_s)

    def _busy(self) -> np.ndarray:
        """The devices with a cycle in flight, int32."""
        return np.fromiter(self._cycles, np.int32, len(self._cycles))

    def _start_all(self, starting: np.ndarray, at_s: float) -> None:
        """The devices ``starting`` (ascending) start a cycle at ``at_s`` on the slot's plan."""
        for n in starting.tolist():
            self._start(n, at_s)

    def _uploads(self, sp: SlotPlanning, asked: np.ndarray | None = None) -> SlotUploads:
        """Who may start a cycle in the slot of ``sp``, at what power and upload time (a cycle
        that would never end does not start; with ``asked``, only the devices it holds)."""
        system = self.host.system
        plan, available = sp.plan, sp.available
        participate = plan.participate if available is None else plan.participate & available
        if asked is not None:
            participate = participate & asked
        for _ in range(2):  # again without the cycles that would never end, if any
            up = slots.slot_uploads(
                participate, plan.tx_power_w, sp.costs, sp.gains.gain, system, "last_upload"
            )
            never = up.participating & ~np.isfinite(up.upload_full_s)
            if not never.any():
                break
            participate = participate & ~never
        return up

    @property
    def _plans_cycles(self) -> bool:
        """Whether each async cycle is planned on its own known slowdown (``[compute] jitter``
        with ``known = true``)."""
        jitter = self.host.jitter
        return self._async and jitter is not None and jitter.known

    def _next_slowdowns(self) -> np.ndarray:
        """Each device's slowdown in its next cycle, ``(N,)`` (keyed by device and cycle)."""
        jitter = self.host.jitter
        assert jitter is not None
        started = self._cycles_started.tolist()
        return np.array([jitter.cycle_slowdown(n, c) for n, c in enumerate(started)])

    def _change_logger(self, change: Changes, k: int, t: int) -> Callable[[simpy.Event], None]:
        """A callback that logs an availability change (at its time, as an event)."""

        def log(_event: simpy.Event) -> None:
            self.host.log_changes(change, k, t)

        return log

    def _slot_close(self, k: int, t: int) -> SlotEnd:
        eng = self.host
        now = eng.clock.now
        sl = self._tick
        assert sl is not None
        if not self._async:  # the round's deadline: apply what arrived
            eng.buffer.add("deadline", now, k, t)
            self._apply(k, t)
        # the learner takes the slot's steps now, whatever reads the model later
        self.versioned.materialise()
        if not eng.learner.is_finite():
            raise RunDiverged.at(t, "the global model has non-finite weights")
        log_strategy_rows(eng, now, k, t)
        tally = self._tally
        energy = tally.energy_compute_j + tally.energy_upload_j
        queue = slots.queue_update_j(eng.queue_j, energy, eng.system.devices.energy_budget_j)
        out = SlotOutcome(
            participating=tally.ended.copy(),
            tx_power_w=tally.tx_power_w.copy(),
            success=tally.success.copy(),
            compute_s=tally.compute_s.copy(),
            upload_full_s=tally.upload_s.copy(),
            upload_s=tally.upload_s.copy(),
            energy_compute_j=tally.energy_compute_j.copy(),
            energy_upload_j=tally.energy_upload_j.copy(),
            energy_j=energy,
            wasted_energy_j=tally.wasted_energy_j.copy(),
            queue_j=queue,
            dropped=tally.dropped.copy(),
        )
        if self._fold is not None:  # device_slots: the slot's rows, one per device, at its start
            at, decision = self._fold
            row = {
                **decision,
                "upload_planned_s": decision["upload_s"],
                "compute_s": out.compute_s,
                **eng.outcome_columns(out),
            }
            if self._uplink is not None:  # its own columns of the last upload that ended
                for name, values in self._uplink.trace_columns().items():
                    row[name] = np.ma.MaskedArray(
                        values.data, mask=np.ma.getmaskarray(values) | ~tally.uploaded
                    )
            row["edge"] = np.ma.MaskedArray(tally.edge, mask=tally.edge < 0)  # its last cycle's
            eng.buffer.insert(at, "device_slot", sl.start_s, k, t, eng.ids, **row)
            self._fold = None
        st = self.stats
        st.cycles_ended += tally.cycles
        busy = np.zeros(eng.num_devices, dtype=bool)
        busy[self._busy()] = True
        st.active_device_slots += int((tally.ended | busy).sum())
        tally.reset()
        self._tick = None
        return SlotEnd(out, sl.available)

    # ------------------------------------------------------------------ cycles

    def _start(self, n: int, now: float, uploads: SlotUploads | None = None) -> None:
        """Device ``n`` downloads the current model and starts a cycle at ``now`` (at the power
        and upload time of ``uploads``; default: the slot's plan)."""
        eng = self.host
        sl, fr = self._tick, eng.frame
        assert sl is not None and fr is not None
        up = sl.uploads if uploads is None else uploads
        c_index = int(self._cycles_started[n])
        self._cycles_started[n] += 1
        if self._async:
            sample_key = c_index
            need_s = float(fr.costs.compute_s[n])
            energy_c = float(fr.costs.compute_energy_j[n])
            if eng.jitter is not None:
                s = eng.jitter.cycle_slowdown(n, c_index)
                need_s = float(physics.slowed_compute_time_s(need_s, s))
                if eng.jitter.scales_clock:
                    energy_c = float(physics.throttled_compute_energy_j(energy_c, s))
        else:
            sample_key = sl.slot
            need_s = float(sl.costs.compute_s[n])
            energy_c = float(sl.costs.compute_energy_j[n])
        upload_full = float(up.upload_full_s[n])
        p = float(up.tx_power_w[n])
        compute_end = now + need_s
        off = np.inf if sl.online_until_s is None else float(sl.online_until_s[n])
        if self._uplink is None:  # a dedicated band: the whole cycle is known now
            end = compute_end + upload_full
            end = on_boundary_s(end, eng.system.deadline_s, now)
            compute_end = min(compute_end, end)
            dropped = off < end
            computed, transmitted = need_s, upload_full
        else:  # a shared uplink reports the upload's end; only a drop while computing is known
            dropped = off <= compute_end
            end = off if dropped else np.inf
            computed, transmitted = need_s, 0.0
        if dropped:
            end = off
            computed = min(need_s, off - now)
            transmitted = max(off - now - need_s, 0.0) if self._uplink is None else 0.0
            compute_end = min(compute_end, end)
            if computed < need_s:
                energy_c = energy_c * (computed / need_s)
        cycle = Cycle(
            device=n,
            key=self._next_key,
            version=self.version,
            sample_key=sample_key,
            slot=sl.slot,
            start_s=now,
            compute_end_s=compute_end,
            end_s=end,
            dropped=bool(dropped),
            tx_power_w=p,
            compute_s=computed,
            upload_s=transmitted,
            energy_compute_j=energy_c,
            energy_upload_j=float(rates.upload_energy_j(p, transmitted)),
            channel_gain=float(up.channel_gain[n]),
            payload_bits=float(up.payload_bits[n]),
            upload_full_s=upload_full,
            offline_s=off,
            edge=-1 if eng.hierarchy is None or eng.cells is None else int(eng.cells.serving[n]),
        )
        self._next_key += 1
        if dropped:  # known now: it will never be applied, the learner need not keep anything
            cycle.discarded = True
        else:
            self.versioned.start_update(cycle.key, n, sample_key, sl.slot)
        self._cycles[n] = cycle
        st = self.stats
        st.max_versions_kept = max(st.max_versions_kept, int(self.versioned.versions_kept))
        self._schedule(cycle)

    def _schedule(self, c: Cycle) -> None:
        """The cycle's events: its compute's end (unless passed or dropped first), its end when
        known (a dedicated band; a drop while computing; an arrival landing on a slot's end),
        else (a shared uplink reports the end) the drop when its device goes offline."""
        n = c.device
        clock = self.host.clock
        if not c.uploading and c.compute_end_s < c.end_s:
            clock.at(c.compute_end_s, Order.DEVICE, n, lambda _e: self._computed(c))
        if math.isfinite(c.end_s):
            clock.at(c.end_s, Order.DEVICE, n, lambda _e: self._end_event(c))
        elif math.isfinite(c.offline_s) and self._drop_timer_s[n] != c.offline_s:
            # one timer per device and offline time: a later cycle in the same online period
            # uses the one pending
            self._drop_timer_s[n] = at = c.offline_s
            clock.at(at, Order.DEVICE, n, lambda _e: self._offline(n, at))

    def _end_event(self, c: Cycle) -> None:
        """The cycle's end event: it ends unless it has ended already (a drop came first)."""
        if self._cycles.get(c.device) is c:
            self._ended(c)

    def _frame_now(self) -> int:
        """The frame in progress (between frames: the next one)."""
        fr = self.host.frame
        return fr.frame if fr is not None else self.host.next_frame

    def _computed(self, c: Cycle) -> None:
        if self._cycles.get(c.device) is not c:
            return  # ended before (never on a dedicated band: its compute ends before its end)
        c.uploading = True
        link = self._uplink
        if link is not None:  # the upload joins the shared uplink, which logs its start
            self._log(
                "compute_end",
                c.compute_end_s,
                self._frame_now(),
                self._slot_index(c.compute_end_s),
                c.device,
                compute_s=c.compute_s,
                model_version=c.version,
            )
            link.upload(
                c.device,
                tx_power_w=c.tx_power_w,
                channel_gain=c.channel_gain,
                payload_bits=c.payload_bits,
                upload_full_s=c.upload_full_s,
                target_s=c.start_s + self.host.system.deadline_s,
            )
            return
        if not self.host.record_events:
            return
        self.host.buffer.add(
            np.array([event_code("compute_end"), event_code("upload_start")], np.int8),
            c.compute_end_s,
            self._frame_now(),
            self._slot_index(c.compute_end_s),
            c.device,
            compute_s=np.ma.MaskedArray([c.compute_s, 0.0], mask=[False, True]),
            tx_power_w=np.ma.MaskedArray([0.0, c.tx_power_w], mask=[True, False]),
            model_version=c.version,
        )

    # ------------------------------------------------------------------ a shared uplink

    def _uplink_log(self, entry: tuple[float, int, int]) -> None:
        """The shared uplink's log: an ``upload_start`` row when an upload takes its share of
        the band (under TDMA when its turn comes); its end is the cycle's (:meth:`_arrived`)."""
        time_s, n, code = entry
        if code != _U_START:
            return
        c = self._cycles[n]
        self._log(
            "upload_start",
            time_s,
            self._frame_now(),
            self._slot_index(time_s),
            n,
            tx_power_w=c.tx_power_w,
            model_version=c.version,
        )

    def _arrived(self, n: int) -> None:
        """The shared uplink has ended device ``n``'s upload now: the cycle ends, or, a
        rounding step before a slot's end, lands on it (:func:`on_boundary_s`)."""
        c = self._cycles[n]
        link = self._uplink
        assert link is not None
        now = float(self.host.clock.now)
        c.upload_s = float(link.transmitted_s[n])
        c.energy_upload_j = float(rates.upload_energy_j(c.tx_power_w, c.upload_s))
        end = on_boundary_s(now, self.host.system.deadline_s, c.start_s)
        if end > now:
            c.landing = True
            c.end_s = end
            self.host.clock.at(end, Order.DEVICE, n, lambda _e: self._end_event(c))
            return
        c.end_s = now
        self._ended(c)

    def _offline(self, n: int, at_s: float) -> None:
        """Device ``n`` goes offline now (``at_s``): the cycle it has in flight is dropped, the
        time computed and transmitted until now charged (an upload that ends now has arrived)."""
        if self._drop_timer_s[n] == at_s:
            self._drop_timer_s[n] = np.nan
        c = self._cycles.get(n)
        if c is None or c.dropped or not c.uploading or c.offline_s != at_s:
            # idle; or its drop is known (one while computing is known when the cycle starts:
            # its end event drops it); or a cycle of a later online period
            return
        link = self._uplink
        assert link is not None
        if c.landing:
            if not at_s < c.end_s:
                return  # it arrives at the slot's end, when its device goes offline
        elif link.withdraw(n, at_s):  # waiting or in flight: it leaves the band
            c.upload_s = float(link.transmitted_s[n])
            c.energy_upload_j = float(rates.upload_energy_j(c.tx_power_w, c.upload_s))
        else:
            return  # its upload ends now: it has arrived (or its completion is due now)
        c.dropped = True
        c.end_s = at_s
        self._ended(c)

    # ------------------------------------------------------------------ ends

    def _ended(self, c: Cycle) -> None:
        n = c.device
        del self._cycles[n]
        now = c.end_s
        buffer = self.host.buffer
        k = self._frame_now()
        t = self._slot_index(now)
        if c.dropped:
            if not c.discarded:
                self.versioned.drop_update(c.key)
            self._tally.add(c, False)
            self._log(
                "dropped",
                now,
                k,
                t,
                n,
                compute_s=c.compute_s,
                tx_power_w=c.tx_power_w,
                upload_s=c.upload_s,
                model_version=c.version,
                **self._link_columns(c),
            )
        else:
            staleness = self.version - c.version
            limit = self.config.max_staleness
            ok = not c.discarded and (limit is None or staleness <= limit)
            row: dict[str, Any] = {
                "tx_power_w": c.tx_power_w,
                "upload_s": c.upload_s,
                "success": ok,
                "energy_upload_j": c.energy_upload_j,
                "model_version": c.version,
                "staleness": staleness,
                **self._link_columns(c),
            }
            if ok:
                row["staleness_weight"] = self.config.weight_of(staleness)
                self._buffer.append(c)
            else:
                if not c.discarded:
                    self.versioned.drop_update(c.key)
                self.stats.stale_discarded += 1
            self._tally.add(c, ok)
            if self._record:
                buffer.add("upload_end", now, k, t, n, **row)
            if not ok:
                buffer.add("stale", now, k, t, n, model_version=c.version, staleness=staleness)
            if self._async and self._buffer_full():
                self._apply(k, t)
        if self._async:
            self.host.clock.at(now, Order.RESTART, n, lambda _e: self._restart(n))

    def _link_columns(self, c: Cycle) -> dict[str, Any]:
        """The shared uplink's own columns of the cycle's upload (ns-3's), and its edge."""
        cols = {} if c.edge < 0 else {"edge": c.edge}
        if self._uplink is not None and c.uploading:
            cols.update(self._uplink.upload_columns(c.device))
        return cols

    def _log(self, event: str, *args: Any, **cols: Any) -> None:
        """A device event's row (at trace level ``events``; ``device_slots`` folds it)."""
        if self._record:
            self.host.buffer.add(event, *args, **cols)

    def _buffer_full(self) -> bool:
        """Whether the server steps now (``async``: after an arrival entered the buffer): it
        holds ``buffer_size`` updates. A server that steps on another rule overrides this."""
        return len(self._buffer) >= self.config.buffer_size

    def _restart(self, n: int) -> None:
        """Device ``n``'s upload arrived (or it dropped): start again now if it is idle, online
        and the slot's plan lets it."""
        sl = self._tick
        if sl is None or n in self._cycles or not sl.uploads.participating[n]:
            return
        eng = self.host
        now = eng.clock.now
        if (sl.online_until_s is not None and not sl.online_until_s[n] > now) or stopped(eng, n):
            return  # gone offline (or its privacy budget spent) since the slot started
        fr = eng.frame
        assert fr is not None
        up = sl.uploads
        planned: dict[str, Any] = {}
        if self._planning is not None:  # the scheme plans this cycle on its known slowdown
            sp, slowdown = self._planning
            slowdown = slowdown.copy()
            slowdown[n] = self._next_slowdowns()[n]
            sp = eng.replan(sl.frame, sl.slot, sp.gains, sp.available, sp.online_until_s, slowdown)
            up = self._uploads(sp)
            if not up.participating[n]:
                return
            planned = {
                "compute_s": sp.planned.compute_s[n],
                "min_tx_power_w": sp.p_min[n],
            }
        self._log(
            "decision",
            now,
            sl.frame,
            sl.slot,
            n,
            tx_power_w=up.tx_power_w[n],
            participating=True,
            channel_gain=up.channel_gain[n],
            payload_bits=up.payload_bits[n],
            upload_s=up.upload_full_s[n],
            gamma=fr.plan.gamma[n],
            model_version=self.version,
            selected=True if eng.selection.active else None,  # asked at the slot's start
            **planned,
        )
        self._start(n, now, up)

    def _apply(self, k: int, t: int) -> None:
        """The server applies its buffer: one step, a new model version."""
        now = self.host.clock.now
        buf = sorted(self._buffer, key=lambda c: (c.device, c.key))
        self._buffer = []
        buf = within_budget(self.host, self.versioned, buf, self.version, self.config.weight)
        staleness = np.array([self.version - c.version for c in buf], dtype=np.int64)
        weights = self.config.weight(staleness)
        keys = np.array([c.key for c in buf], dtype=np.int64)
        self.versioned.apply_updates(t, keys, weights, self.config.server_lr)
        self.count_by_edge([c.device for c in buf], [c.edge for c in buf])
        self.version += 1
        st = self.stats
        st.server_steps += 1
        st.updates_applied += len(buf)
        st.successes += len(buf)
        st.staleness_sum += int(staleness.sum())
        # no stable fraction: the learner takes its steps at the slot's end
        self.host.buffer.add("flush", now, k, t, n_success=len(buf), model_version=self.version)
        account_stale_step(self.host, now, k, t, buf, weights)
        limit = self.config.max_staleness
        if limit is not None:  # updates in flight that can no longer be applied: release them
            for c in self._cycles.values():
                if not c.discarded and self.version - c.version > limit:
                    c.discarded = True
                    self.versioned.drop_update(c.key)

    def _slot_index(self, time_s: float) -> int:
        """The slot in progress (the last one begun at or before ``time_s``)."""
        if self._tick is not None:
            return self._tick.slot
        return int(time_s // self.host.system.deadline_s)

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """The server's version, buffer and the cycles in flight (at a frame boundary); with a
        shared uplink, the uploads in it (:meth:`SharedUplink.state_dict`)."""
        cycles = sorted(self._cycles.values(), key=lambda c: c.device)
        out = {
            "version": self.version,
            "next_key": self._next_key,
            "cycles_started": self._cycles_started.copy(),
            "cycles": cycle_records(cycles),
            "buffer": cycle_records(self._buffer),
        }
        link = self._uplink
        if link is not None:
            pending = self._uplink_state
            out["uplink"] = pending if pending is not None else link.state_dict()
        return out

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Continue from :meth:`state_dict` (a server of the same scenario)."""
        if state is None:
            raise ValueError("the checkpoint holds no server state (a synchronous run's?)")
        self.version = int(state["version"])
        self._next_key = int(state["next_key"])
        started = np.array(state["cycles_started"], dtype=np.int64)
        if started.shape != self._cycles_started.shape:
            raise ValueError("server state is for another number of devices")
        self._cycles_started = started
        self._cycles = {c.device: c for c in cycles_from_records(state["cycles"])}
        self._buffer = cycles_from_records(state["buffer"])
        uplink = state.get("uplink")
        if (uplink is None) != (self._uplink is None):
            raise ValueError("checkpoint and run differ in [uplink] (one shares the band)")
        self._uplink_state = uplink
