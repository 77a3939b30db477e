"""The SimPy engine: the run's clock and its server process. It orchestrates; it decides
nothing itself.

Per frame: mobility gives positions, the channel the large-scale gains, the scheme its frame plan
(``gamma``, cost model, update-rule inputs), the learner opens the frame. Per slot
(DESIGN.md, "One slot, as data flows through it"):

1. the channel gives the slot's gains (what the world applies and what the scheme sees);
   :func:`sim.slot.min_tx_power_w` gives ``p_min`` on the gain the scheme sees (and the band it
   plans on, ``[uplink] planned_concurrent_uploads``); the scheme plans participation and power;
   :func:`sim.slot.slot_uploads` turns plan and true gains into who uploads what at which power;
   the learner computes the participating devices' uploads in one batched call (virtual time
   does not advance);
2. the slot kernel (:mod:`sim.kernels`, the scenario's ``[run] kernel``) plays the participating
   devices' compute (``tau_cmp``) and upload out in virtual time: in closed form when devices do
   not interact, or as one SimPy process per device (with a shared uplink, :mod:`sim.world.uplink`,
   the uploads' times come from its events); it reports per device the time transmitted and
   whether the upload arrived in time;
3. the server closes the slot at the deadline ``tau_0`` or, if later, when the last upload
   arrives (schemes that promise no outage); :func:`sim.slot.settle_slot` turns the kernel's
   report into the outcome (success, energies, queues); the learner aggregates the uploads that
   arrived in time; the scheme hears the outcome; the trace gets the slot's rows.

The frame boundary is the cut for checkpoints: :meth:`Engine.state_dict` after frame ``k`` and
:meth:`Engine.load_state_dict` into an engine built from the same scenario continue the run
exactly (with the scheme's, channel's, mobility's and learner's own states: :mod:`sim.state`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import pyarrow as pa
import simpy

from . import slot as slots
from .clock import Clock
from .errors import RunDiverged
from .kernels import (
    C_END,
    DROPPED,
    U_END,
    U_START,
    KernelName,
    SlotActivity,
    SlotResult,
    make_kernel,
)
from .learner import Learner
from .schemes.base import FrameContext, FramePlan, Scheme, SlotContext, SlotPlan
from .slot import FrameCosts, SlotOutcome, SlotRules, SlotUploads
from .trace import SCHEMA, TraceBuffer, TraceLevel, event_code
from .world.availability import Availability, Changes
from .world.channel import Channel, LargeScale, SlotChannel
from .world.compute import ComputeJitter
from .world.mobility import Mobility
from .world.system import SystemConstants
from .world.uplink import UplinkSpec


@dataclass(frozen=True)
class EngineConfig:
    """The run's timing and logging settings (from the scenario's ``[run]``, ``[mobility]``,
    ``[learning]`` and ``[trace]`` tables).

    The deadline ``tau_0`` is not here: it has one source, ``SystemConstants.deadline_s``, read
    both by the server's SimPy timeout and by the slot's success test."""

    frames: int  #: ``K``
    slots_per_frame: int  #: ``T``
    #: positions at frame ``k`` are read at ``k T tau_0`` ("nominal") or at the frame's actual
    #: start ("simulated")
    mobility_clock: Literal["nominal", "simulated"] = "nominal"
    eval_every_slots: int = 20
    evaluate: bool = True
    late_upload_energy: Literal["until_deadline", "full"] = "until_deadline"
    #: the slot kernel that plays each slot's device activity out (:mod:`sim.kernels`)
    kernel: KernelName = "closed_form"
    #: ``events``: every event; ``device_slots``: one ``device_slot`` row per device per slot in
    #: place of its decision, compute, upload and energy rows (:mod:`sim.trace`)
    trace_level: TraceLevel = "events"
    #: how uploads share the band and what the scheme plans on (:mod:`sim.world.uplink`)
    uplink: UplinkSpec = field(default_factory=UplinkSpec)


@dataclass
class RunStats:
    """Running totals of a simulation (what the CLI's summary prints)."""

    slots: int = 0
    device_slots: int = 0
    participations: int = 0
    successes: int = 0
    energy_j: float = 0.0
    wasted_energy_j: float = 0.0
    last_loss: float = float("nan")
    last_accuracy: float = float("nan")
    first_accuracy: float = float("nan")
    simulated_time_s: float = 0.0
    #: device-slots in which the device was online at the slot's start (all without
    #: ``[availability]``)
    available_device_slots: int = 0
    drops: int = 0  #: participations lost because the device went offline
    wall_time_s: float = 0.0
    rows: int = 0
    energy_per_device_j: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: ``{"frame", "reason"}`` of a run ended before its last frame (:meth:`Engine.request_stop`)
    stopped_early: dict[str, Any] | None = None

    @property
    def outage_rate(self) -> float:
        """Uploads that missed the deadline, per participation (participations lost because
        the device went offline are :attr:`drops`, not outages)."""
        return (
            (self.participations - self.successes - self.drops) / self.participations
            if self.participations
            else 0.0
        )

    @property
    def dropout_rate(self) -> float:
        """Device-slots in which the device did not participate, per device-slot."""
        return 1.0 - self.participations / self.device_slots if self.device_slots else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The summary written to ``manifest.json``."""
        return {
            "slots": self.slots,
            "final_accuracy": self.last_accuracy,
            "initial_accuracy": self.first_accuracy,
            "final_loss": self.last_loss,
            "total_energy_j": self.energy_j,
            "wasted_energy_j": self.wasted_energy_j,
            "mean_energy_per_device_slot_j": self.energy_j / self.device_slots
            if self.device_slots
            else 0.0,
            "outage_rate": self.outage_rate,
            "dropout_rate": self.dropout_rate,
            "available_fraction": self.available_device_slots / self.device_slots
            if self.device_slots
            else 1.0,
            "drops": self.drops,
            "simulated_time_s": self.simulated_time_s,
            "wall_time_s": self.wall_time_s,
            "trace_rows": self.rows,
        } | ({} if self.stopped_early is None else {"stopped_early": dict(self.stopped_early)})

    def state_dict(self) -> dict[str, Any]:
        """Every field (for checkpoints)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["energy_per_device_j"] = self.energy_per_device_j.copy()
        if self.stopped_early is None:
            del out["stopped_early"]  # the checkpoints of every run that is not stopped early
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        for k in self.__dataclass_fields__:
            if k == "stopped_early":
                self.stopped_early = state.get(k)
                continue
            v = state.get(k, 0) if k in ("available_device_slots", "drops") else state[k]
            setattr(self, k, np.array(v, dtype=np.float64) if k == "energy_per_device_j" else v)


ProgressFn = Callable[[int, RunStats], None]


@dataclass(frozen=True)
class Hooks:
    """Callbacks the engine calls as a run goes, for a researcher's own logging, checks or
    interventions (each optional). They run on the simulation's thread, in virtual time (the
    clock does not move while they run); an exception they raise ends the run as a component's
    would (a run folder is then ``failed`` with its completed frames kept, and resumable).

    * ``frame_start(engine, frame)``: frame ``frame`` is about to start (before mobility, the
      channel and the scheme's frame plan; ``engine.now_s``, ``engine.queue_j`` are its start's);
    * ``slot_end(engine, slot, outcome)``: slot ``slot`` is resolved and closed
      (:class:`sim.slot.SlotOutcome`: who participated, succeeded, their energies and queues);
    * ``frame_end(engine, frame)``: frame ``frame`` is complete, its rows about to be handed
      to the trace (``engine.state_dict()`` would be the checkpoint after it).
    """

    frame_start: Callable[[Engine, int], None] | None = None
    slot_end: Callable[[Engine, int, SlotOutcome], None] | None = None
    frame_end: Callable[[Engine, int], None] | None = None


class FrameSink(Protocol):
    """Where a run's trace goes, slot by slot and frame by frame
    (:class:`wflsim.app.recorder.RunRecorder`)."""

    def slot_done(self, engine: Engine, frame: int, buffer: TraceBuffer) -> None:
        """A slot of frame ``frame`` is complete; ``buffer`` holds the rows since the last call
        (the sink empties it). The frame is not complete: its part must not become visible."""
        ...

    def frame_done(self, engine: Engine, frame: int, buffer: TraceBuffer) -> None:
        """Frame ``frame`` is complete; ``engine`` is at the boundary after it (its state can be
        saved); ``buffer`` holds the frame's rows (the sink empties it)."""
        ...


@dataclass(frozen=True)
class FrameState:
    """The frame in progress."""

    frame: int
    large: LargeScale  #: positions' distances and large-scale gains
    queue_j: np.ndarray  #: queues at the frame start (the frame's price), J
    plan: FramePlan  #: the scheme's frame decision
    costs: FrameCosts  #: its cost plan in seconds and joules


@dataclass(frozen=True)
class SlotState:
    """The slot in progress."""

    slot: int
    start_s: float
    uploads: SlotUploads  #: who uploads what, before the kernel plays the slot
    costs: FrameCosts  #: what the slot actually costs (the frame's; under jitter, slowed)
    who: np.ndarray  #: the participating devices, ascending
    #: when each device goes offline (absolute, s; ``inf`` if offline now; None: always online)
    online_until_s: np.ndarray | None = None
    available: np.ndarray | None = None  #: online at the slot's start (None: always online)
    #: the decision columns, written at the slot's end with the outcome (``device_slots``)
    decision: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SlotPlanning:
    """What a slot's start decides before anything plays out (:meth:`Engine._plan_slot`)."""

    gains: SlotChannel  #: the slot's channel draw
    costs: FrameCosts  #: what the slot actually costs (the frame's; slowed under jitter)
    planned: FrameCosts  #: what the scheme planned on
    p_min: np.ndarray  #: ``p_min`` on the gain the scheme sees, W, ``(N,)``
    available: np.ndarray | None  #: online at the slot's start (None: always online)
    online_until_s: np.ndarray | None  #: each device's next change if online now (None: always)
    plan: SlotPlan  #: the scheme's slot decision


_ONLINE, _OFFLINE = event_code("online"), event_code("offline")


class Engine:
    """One simulation run. Build it with every part resolved, then call :meth:`run`.

    With a writer, the trace leaves memory at the end of the first slot after which the
    buffer holds at least :attr:`row_group_rows` rows (one row group of the frame's part), and
    at the end of every frame: memory holds about that many rows, however many devices run.

    Args:
        config: timing and logging settings.
        system: devices and radio constants.
        mobility, channel, scheme, learner: the run's components.
        writer: where the trace goes frame by frame (None: kept in memory, :meth:`table`).
            It is called at each frame boundary, with the engine's state saveable.
        progress: called after every slot with ``(slot, stats)``.
        hooks: the researcher's callbacks (:class:`Hooks`).
        jitter: the slowdown of local computation (``[compute] jitter``; None: none). The slot
            is resolved on its actual costs (:func:`sim.slot.slot_costs`); the scheme plans on
            the nominal ones unless the slowdown is ``known``. Decision rows log the planned
            ``compute_s``, ``compute_end`` (and ``device_slot``) rows the time actually spent.
        availability: when devices are online (``[availability]``; None: always). Only online
            devices take part in a slot; the kernel drops a participant that goes offline
            before its work ends; every change of state is an ``online`` / ``offline`` row.
    """

    #: rows buffered before they are handed to the writer within a frame (a row group: about
    #: 100 MB of Arrow arrays); a slot with more rows than this is handed over on its own
    row_group_rows: int = 250_000

    def __init__(
        self,
        config: EngineConfig,
        system: SystemConstants,
        mobility: Mobility,
        channel: Channel,
        scheme: Scheme,
        learner: Learner,
        *,
        writer: FrameSink | None = None,
        progress: ProgressFn | None = None,
        hooks: Hooks | None = None,
        jitter: ComputeJitter | None = None,
        availability: Availability | None = None,
    ) -> None:
        self.config = config
        self.system = system
        self.mobility = mobility
        self.channel = channel
        self.scheme = scheme
        self.learner = learner
        self.writer = writer
        self.progress = progress
        self.hooks = hooks if hooks is not None else Hooks()
        self.jitter = jitter
        self.availability = availability
        learner.set_update_rule(scheme.update_rule)
        self.rules = SlotRules(scheme.closes_at, config.late_upload_energy)

        n = system.num_devices
        self.num_devices = n
        self._ids = np.arange(n, dtype=np.int32)
        self.buffer = TraceBuffer()
        self._tables: list[pa.Table] = []
        # state at frame boundaries (state_dict)
        self.next_frame = 0
        self.now_s = 0.0
        self.queue_j = np.zeros(n)
        self.stats = RunStats(energy_per_device_j=np.zeros(n))
        # the frame and slot in progress, and what the device processes read
        self._frame: FrameState | None = None
        self._slot: SlotState | None = None
        self._env: simpy.Environment = Clock()
        self.kernel = make_kernel(config.kernel, config.uplink, system)
        #: the constants the scheme plans on (``p_min``): the band it expects (``[uplink]``)
        self.planned_system = config.uplink.planned_system(system)
        self._events = config.trace_level == "events"  # else device_slots
        self._wall_start = 0.0  # perf_counter at the start of run(), and the wall time before it
        self._wall_before = 0.0
        #: why the run stops before its last frame (:meth:`request_stop`); None: it does not
        self.stop_reason: str | None = None

    # ------------------------------------------------------------------ processes

    def _server(self, stop_frame: int) -> Any:
        env = self._env
        cfg = self.config
        if self.next_frame == 0:
            self._log_device_config()
            if self.availability is not None:
                self._log_changes(self.availability.reset(), 0, -1)
            if cfg.evaluate:
                self._eval(frame=0, slot=-1)
        self._resume_in_flight()
        hooks = self.hooks
        for k in range(self.next_frame, stop_frame):
            if hooks.frame_start is not None:
                hooks.frame_start(self, k)
            self._frame_start(k)
            for j in range(cfg.slots_per_frame):
                t = k * cfg.slots_per_frame + j
                yield from self._play_slot(k, t)
                if self.writer is not None and self.buffer.num_rows >= self.row_group_rows:
                    self.stats.rows += self.buffer.num_rows  # the rows leave memory
                    self.writer.slot_done(self, k, self.buffer)
            self._frame_end(k)
            # the boundary after frame k: the state is saveable, the frame's rows are complete
            self.next_frame = k + 1
            self.now_s = float(env.now)
            self.stats.wall_time_s = self._wall_before + time.perf_counter() - self._wall_start
            if hooks.frame_end is not None:
                hooks.frame_end(self, k)
            if self.stop_reason is not None and k + 1 < cfg.frames:
                self._stop_after(k)
            self._flush(k)
            if self.stats.stopped_early is not None:
                break

    def _resume_in_flight(self) -> None:
        """Put back on the clock what was in flight at the boundary the run continues from
        (nothing: a synchronous slot ends before its frame does)."""

    def _play_slot(self, k: int, t: int) -> Any:
        """Slot ``t`` of frame ``k`` from its start to its end (a SimPy process body): the slot's
        plan, the kernel playing it out, its outcome."""
        self._slot_start(k, t)
        sl = self._slot
        assert sl is not None
        result = yield from self.kernel.play_slot(
            self._env,
            sl.uploads,
            self.system.deadline_s,
            self.rules.closes_at,
            record=self._events,
            online_until_s=sl.online_until_s,
        )
        self._slot_end(k, t, result)

    # ------------------------------------------------------------------ frame

    def _frame_start(self, k: int) -> None:
        now = self._env.now
        b, cfg, ids = self.buffer, self.config, self._ids
        t0 = k * cfg.slots_per_frame
        b.add("frame_start", now, k, t0)
        when = t0 * self.system.deadline_s if cfg.mobility_clock == "nominal" else now
        motion = self.mobility.kinematics(when)
        large = self.channel.large_scale(k, motion)
        pos = np.asarray(motion.positions_m, dtype=np.float64)
        b.add(
            "position",
            now,
            k,
            t0,
            ids,
            x_m=pos[:, 0],
            y_m=pos[:, 1],
            distance_m=large.distance_m,
            large_scale_gain=large.gain,
            shadowing_db=large.shadowing_db,
            los=large.los,
        )
        queue = self.queue_j.copy()
        plan = self.scheme.plan_frame(
            FrameContext(frame=k, large_scale_gain=large.gain, queue_j=queue)
        )
        self.scheme.update_rule.check_inputs(plan.update)
        self.learner.begin_frame(k, plan.update)
        b.add("freeze", now, k, t0, ids, gamma=plan.gamma, queue_j=queue, **plan.columns)
        costs = slots.frame_costs(plan.cost.payload_bits, plan.cost.compute_fraction, self.system)
        self._frame = FrameState(frame=k, large=large, queue_j=queue, plan=plan, costs=costs)

    def _frame_end(self, k: int) -> None:
        self.learner.end_frame(k)
        self.buffer.add("frame_end", self._env.now, k, (k + 1) * self.config.slots_per_frame - 1)
        self._frame = None

    # ------------------------------------------------------------------ slot

    def _plan_slot(self, k: int, t: int, slot_jitter: bool = True) -> SlotPlanning:
        """A slot's start, up to the scheme's plan: the channel draw, the slot's costs (slowed by
        the slot's jitter when ``slot_jitter``; the scheme plans on the nominal unless the
        slowdown is known), ``p_min``, the availability at the slot's start (its changes up to
        now logged), the scheme's slot plan."""
        now = self._env.now
        fr = self._frame
        assert fr is not None
        gains = self.channel.slot(t, fr.large)
        costs = planned = fr.costs
        if self.jitter is not None and slot_jitter:  # the slot's actual costs
            costs = slots.slot_costs(fr.costs, self.jitter.slowdown(t), self.jitter.scales_clock)
            if self.jitter.known:
                planned = costs
        p_min = slots.min_tx_power_w(planned, gains.seen_gain, self.planned_system)
        avail = self.availability
        available = online_until = None
        if avail is not None:
            self._log_changes(avail.advance(now), k, t)  # changes at the slot's start
            available, online_until = avail.online.copy(), avail.online_until_s()
        plan = self.scheme.plan_slot(
            SlotContext(
                slot=t,
                frame=k,
                channel_gain=gains.seen_gain,
                large_scale_gain=fr.large.gain,
                gamma=fr.plan.gamma,
                queue_j=fr.queue_j,
                compute_s=planned.compute_s,
                payload_bits=fr.costs.payload_bits,
                min_tx_power_w=p_min,
                csi_posterior=gains.posterior,
                available=available,
            )
        )
        return SlotPlanning(gains, costs, planned, p_min, available, online_until, plan)

    def _slot_start(self, k: int, t: int) -> None:
        now = self._env.now
        fr = self._frame
        assert fr is not None
        sp = self._plan_slot(k, t)
        gains, costs, planned, p_min = sp.gains, sp.costs, sp.planned, sp.p_min
        available, online_until, plan = sp.available, sp.online_until_s, sp.plan
        participate = plan.participate if available is None else plan.participate & available
        up = slots.slot_uploads(
            participate, plan.tx_power_w, costs, gains.gain, self.system, self.rules.closes_at
        )
        who = np.flatnonzero(up.participating)
        decision = {
            "distance_m": fr.large.distance_m,
            "large_scale_gain": fr.large.gain,
            "channel_gain": gains.gain,
            "seen_channel_gain": gains.seen_gain,
            "gamma": fr.plan.gamma,
            "payload_bits": fr.costs.payload_bits,
            "min_tx_power_w": p_min,
            "tx_power_w": up.tx_power_w,
            "participating": up.participating,
            "available": available,
            "compute_s": up.compute_s
            if self.jitter is None
            else np.where(up.participating, planned.compute_s, 0.0),
            "upload_s": up.upload_full_s,
            **plan.columns,
        }
        self.buffer.add("slot_start", now, k, t)
        if self._events:
            self.buffer.add("decision", now, k, t, self._ids, **decision)
            decision = {}
        self._slot = SlotState(
            slot=t,
            start_s=now,
            uploads=up,
            costs=costs,
            who=who,
            decision=decision,
            online_until_s=online_until,
            available=available,
        )
        self.learner.compute(t, who)

    def _slot_end(self, k: int, t: int, result: SlotResult) -> None:
        now = self._env.now
        b, fr, sl = self.buffer, self._frame, self._slot
        assert fr is not None and sl is not None
        out = slots.settle_slot(
            sl.uploads,
            result.transmitted_s,
            result.arrived,
            sl.costs,
            self.queue_j,
            self.system,
            self.rules,
            computed_s=result.computed_s,
            dropped=result.dropped,
        )
        activity = result.activity
        changes = Changes.empty()
        if self.availability is not None:  # the changes during the slot, up to its end
            changes = self.availability.advance(now)
        cols: dict[str, Any] = {}
        weights = self.scheme.cost_weights()
        if weights is not None:
            x, z = slots.drift_plus_penalty(
                out.success,
                fr.plan.gamma,
                self.system.devices.batch_size,
                out.energy_j,
                fr.queue_j,
                *weights,
            )
            cols = {"conv_error": x, "cost": z}
        outcome = {**self._outcome_columns(out), **cols}
        if self._events:
            self._log_activity(k, t, out, activity, changes)
        else:  # the decision and the outcome in one row, at the slot's start
            # participating and tx_power_w are the decision's; upload_s and compute_s become the
            # outcome's (the time actually transmitted and computed)
            row = {
                **sl.decision,
                "upload_planned_s": sl.decision["upload_s"],
                "compute_s": out.compute_s,
                **outcome,
            }
            b.add("device_slot", sl.start_s, k, t, self._ids, **row)
            self._log_changes(changes, k, t)
        if self.rules.closes_at == "deadline":
            b.add("deadline", sl.start_s + self.system.deadline_s, k, t)
        ok = np.flatnonzero(out.success)
        self.learner.apply(t, ok)
        if not self.learner.is_finite():
            raise RunDiverged.at(t, "the global model has non-finite weights")
        n_part = int(out.participating.sum())
        stable = float(self.learner.stable_fraction)
        b.add(
            "aggregate",
            now,
            k,
            t,
            n_participants=n_part,
            n_success=len(ok),
            slot_duration_s=now - sl.start_s,
            stable_fraction=None if np.isnan(stable) else stable,
        )
        self.queue_j = out.queue_j
        if self._events:
            b.add("energy", now, k, t, self._ids, **outcome)
        self.scheme.observe(out)
        self._slot = None

        st = self.stats
        st.slots += 1
        st.device_slots += self.num_devices
        st.participations += n_part
        st.available_device_slots += (
            self.num_devices if sl.available is None else int(sl.available.sum())
        )
        st.drops += int(out.dropped.sum())
        st.successes += len(ok)
        st.energy_j += float(out.energy_j.sum())
        st.wasted_energy_j += float(out.wasted_energy_j.sum())
        st.energy_per_device_j += out.energy_j
        st.simulated_time_s = now
        cfg = self.config
        last = t == cfg.frames * cfg.slots_per_frame - 1
        if cfg.evaluate and ((t + 1) % cfg.eval_every_slots == 0 or last):
            self._eval(k, t)
        if self.hooks.slot_end is not None:
            self.hooks.slot_end(self, t, out)
        if self.progress is not None:
            self.progress(t, st)

    def _outcome_columns(self, out: SlotOutcome) -> dict[str, Any]:
        """A slot's outcome as the per-device columns of its ``energy`` rows (``dropped`` only
        where devices come and go)."""
        return {
            "participating": out.participating,
            "success": out.success,
            "tx_power_w": out.tx_power_w,
            "upload_s": out.upload_s,
            "energy_compute_j": out.energy_compute_j,
            "energy_upload_j": out.energy_upload_j,
            "energy_j": out.energy_j,
            "wasted_energy_j": out.wasted_energy_j,
            "queue_j": out.queue_j,
            "dropped": out.dropped if self.availability is not None else None,
        }

    def _log_activity(
        self, k: int, t: int, out: SlotOutcome, activity: SlotActivity, changes: Changes
    ) -> None:
        """The slot's device rows, in the kernel's event order, with the availability changes
        during the slot merged in by time (before the device events at the same instant);
        unless the kernel logged the ``upload_start`` events (a shared uplink), every
        ``compute_end`` is followed, at the same instant, by the device's ``upload_start``."""
        if not len(activity):
            self._log_changes(changes, k, t)
            return
        if activity.has_upload_start:
            times, devs, codes = activity.time_s, activity.device, activity.code
        else:
            twice = np.where(activity.code == C_END, 2, 1)
            times = np.repeat(activity.time_s, twice)
            devs = np.repeat(activity.device, twice)
            codes = np.repeat(activity.code, twice)
            codes[np.flatnonzero(codes == C_END)[1::2]] = U_START
        if len(changes):
            at = np.searchsorted(times, changes.time_s, side="left")
            times = np.insert(times, at, changes.time_s)
            devs = np.insert(devs, at, changes.device)
            codes = np.insert(codes, at, np.where(changes.online, _ONLINE, _OFFLINE))
        is_ce, is_us, is_ue = codes == C_END, codes == U_START, codes == U_END
        is_drop = codes == DROPPED

        def masked(values: np.ndarray, keep: np.ndarray) -> np.ma.MaskedArray:
            return np.ma.MaskedArray(values[devs], mask=~keep)

        self.buffer.add(
            codes,
            times,
            k,
            t,
            devs.astype(np.int32),
            compute_s=masked(out.compute_s, is_ce | is_drop),
            tx_power_w=masked(out.tx_power_w, is_us | is_ue | is_drop),
            upload_s=masked(out.upload_s, is_ue | is_drop),
            success=masked(out.success, is_ue),
            energy_upload_j=masked(out.energy_upload_j, is_ue),
        )

    def _log_changes(self, changes: Changes, k: int, t: int) -> None:
        """Availability changes as ``online`` / ``offline`` rows, at their times."""
        if not len(changes):
            return
        codes = np.where(changes.online, _ONLINE, _OFFLINE).astype(np.int8)
        self.buffer.add(codes, changes.time_s, k, t, changes.device.astype(np.int32))

    # ------------------------------------------------------------------ logging helpers

    def _log_device_config(self) -> None:
        dev = self.system.devices
        num_samples = self.learner.num_samples
        self.buffer.add(
            "device_config",
            0.0,
            0,
            -1,
            self._ids,
            cpu_hz=dev.cpu_hz,
            cycles_per_sample=dev.cycles_per_sample,
            capacitance=dev.capacitance,
            batch_size=dev.batch_size,
            peak_power_w=dev.peak_power_w,
            energy_budget_j=dev.energy_budget_j,
            num_samples=None if num_samples is None else np.asarray(num_samples, dtype=np.int64),
        )

    def _eval(self, frame: int, slot: int) -> None:
        loss, acc = self.learner.evaluate()
        if self.config.evaluate and not np.isfinite(loss):
            raise RunDiverged.at(slot, "the test loss is not finite")
        self.buffer.add("eval", self._env.now, frame, slot, loss=float(loss), accuracy=float(acc))
        st = self.stats
        if np.isnan(st.first_accuracy):
            st.first_accuracy = float(acc)
        st.last_loss, st.last_accuracy = float(loss), float(acc)

    def _flush(self, k: int) -> None:
        self.stats.rows += self.buffer.num_rows
        if self.writer is not None:
            self.writer.frame_done(self, k, self.buffer)
        else:
            self._tables.append(self.buffer.to_table())

    # ------------------------------------------------------------------ run

    def run(self, stop_frame: int | None = None) -> RunStats:
        """Run frames ``next_frame .. stop_frame - 1`` (default: to the end); returns the totals.

        The trace goes to the writer (or :meth:`table`). Can be called again to go on.
        """
        stop = self.config.frames if stop_frame is None else int(stop_frame)
        if self.stats.stopped_early is not None:  # a run stopped early runs no further frames
            stop = self.next_frame
        if not self.next_frame <= stop <= self.config.frames:
            raise ValueError(f"stop_frame {stop} outside [{self.next_frame}, {self.config.frames}]")
        self._wall_before = self.stats.wall_time_s
        self._wall_start = time.perf_counter()
        self._env = env = Clock(initial_time=self.now_s)
        self.kernel.start_run(env, self.num_devices)
        server = env.process(self._server(stop))
        try:
            # until the server is done: a shared uplink may leave completion events it made
            # stale (cut at a deadline) scheduled after the last slot's end
            env.run(until=server)
        finally:
            self.stats.wall_time_s = self._wall_before + time.perf_counter() - self._wall_start
        self.now_s = float(env.now)
        if self.stats.stopped_early is None:
            self.next_frame = stop
        return self.stats

    def request_stop(self, reason: str) -> None:
        """End the run early, after the frame in progress (at a frame boundary, where a run
        folder also takes a checkpoint): e.g. a target accuracy reached. The final model is
        evaluated and the run's summary says so (``stopped_early``); a request in the last frame
        changes nothing."""
        self.stop_reason = str(reason) or "stopped"

    @property
    def clock_s(self) -> float:
        """Simulated time now, s (inside a run: the event clock's; between runs:
        :attr:`now_s`)."""
        return float(self._env.now)

    @property
    def finished(self) -> bool:
        """Whether every frame has run (or the run was stopped early)."""
        return self.next_frame >= self.config.frames or self.stats.stopped_early is not None

    def _stop_after(self, k: int) -> None:
        """End the run with frame ``k`` (:meth:`request_stop`): the model of its last slot is
        evaluated (unless the evaluation cadence just did), so the summary's final accuracy is
        the final model's."""
        cfg = self.config
        t_last = (k + 1) * cfg.slots_per_frame - 1
        if cfg.evaluate and (t_last + 1) % cfg.eval_every_slots != 0:
            self._eval(k, t_last)
        self.stats.stopped_early = {"frame": k, "reason": self.stop_reason}

    def table(self) -> pa.Table:
        """The trace so far as one Arrow table (runs without a writer only)."""
        return pa.concat_tables(self._tables) if self._tables else SCHEMA.empty_table()

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """The engine's own state at a frame boundary: clock, next frame, queues, totals."""
        if self._frame is not None or self._slot is not None:
            raise RuntimeError("the engine's state can only be saved at a frame boundary")
        return {
            "next_frame": self.next_frame,
            "now_s": self.now_s,
            "queue_j": self.queue_j.copy(),
            "stats": self.stats.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` (an engine built from the same scenario)."""
        queue = np.array(state["queue_j"], dtype=np.float64)
        if queue.shape != (self.num_devices,):
            raise ValueError(
                f"engine state is for {queue.shape[0]} devices, this run has {self.num_devices}"
            )
        self.next_frame = int(state["next_frame"])
        self.now_s = float(state["now_s"])
        self.queue_j = queue
        self.stats.load_state_dict(state["stats"])
