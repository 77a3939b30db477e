"""The SimPy engine: the run's clock, its frame loop and its bookkeeping. It orchestrates; it
decides nothing itself.

Per frame: mobility gives positions, the channel the large-scale gains, the scheme its frame plan
(``gamma``, cost model, update-rule inputs), the learner opens the frame. Per slot
(DESIGN.md, "One slot, as data flows through it"), the **server** (:mod:`wflsim.sim.servers`, the
seam) plays the slot out from its start to its end on the clock: it asks the engine for the
slot's plan (:meth:`Engine.plan_slot`: the channel draw, ``p_min`` on the gain the scheme sees
and the band it plans on, ``[uplink] planned_concurrent_uploads``, the availability at the
slot's start, the scheme's slot plan), plays the devices' compute and uploads (a slot kernel,
:mod:`wflsim.sim.kernels`, or device cycles), moves the model, and hands back the slot's outcome
(:class:`~wflsim.sim.servers.base.SlotEnd`). The engine then closes the slot, the same way for
every server: the energy-deficit queues, the ``energy`` rows, the scheme's ``observe``, the run's
totals, the evaluation every ``eval_every_slots`` slots, the hooks and the progress callback.

The frame boundary is the cut for checkpoints: :meth:`Engine.state_dict` after frame ``k`` and
:meth:`Engine.load_state_dict` into an engine built from the same scenario continue the run
exactly (with the server's, scheme's, channel's, mobility's and learner's own states:
:mod:`wflsim.sim.state`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import pyarrow as pa

from . import slot as slots
from .clock import Clock
from .config.derived import longest_wait_s, wait_events_per_s
from .errors import RunDiverged
from .kernels import KernelName, make_kernel
from .learner import Learner, ProbingLearner
from .privacy.ledger import PrivacyLedger
from .privacy.mechanism import PrivacySpec
from .radio.cells.component import Cells
from .radio.modes import uplink_mode
from .radio.spec import UplinkSpec
from .registry import STRATEGIES, UPDATE_RULES
from .schemes.base import FrameContext, Scheme, SlotContext
from .selection import Selection
from .servers.base import FrameState, Server, SlotEnd, SlotPlanning
from .servers.hierarchy import CloudRounds
from .servers.synchronous import SyncServer
from .slot import SlotOutcome, SlotRules
from .stats import RunStats
from .strategies import DEFAULT as DEFAULT_STRATEGY
from .strategies import StrategySpec
from .trace import SCHEMA, TraceBuffer, TraceLevel, event_code
from .world.availability import Availability, Changes
from .world.channel import Channel, SlotChannel
from .world.compute import ComputeJitter
from .world.mobility import Mobility
from .world.system import SystemConstants


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
    #: the slot kernel that plays each slot's device activity out (:mod:`wflsim.sim.kernels`)
    kernel: KernelName = "closed_form"
    #: ``events``: every event; ``device_slots``: one ``device_slot`` row per device per slot in
    #: place of its decision, compute, upload and energy rows (:mod:`sim.trace`)
    trace_level: TraceLevel = "events"
    #: how uploads share the band and what the scheme plans on (:mod:`wflsim.sim.radio`)
    uplink: UplinkSpec = field(default_factory=UplinkSpec)


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
      (:class:`wflsim.sim.slot.SlotOutcome`: who participated, succeeded, their energies and queues);
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
        """A slot of frame ``frame`` is complete (the frame's slot ``engine.frame_slot``, from 0);
        ``buffer`` holds the rows since the last call (the sink empties it). The frame is not
        complete: its part must not become visible."""
        ...

    def frame_done(self, engine: Engine, frame: int, buffer: TraceBuffer) -> None:
        """Frame ``frame`` is complete; ``engine`` is at the boundary after it (its state can be
        saved); ``buffer`` holds the frame's rows (the sink empties it)."""
        ...


_ONLINE, _OFFLINE = event_code("online"), event_code("offline")


def set_learner_privacy(learner: Learner, spec: PrivacySpec) -> None:
    """Tell ``learner`` the run's privacy (its ``set_privacy``: it clips and adds the noise).
    A learner without ``set_privacy`` (the network-only :class:`~wflsim.sim.learner.NullLearner`, a learner of
    one's own) trains nothing private: the ledger still accounts the updates the network
    applies, at the multipliers the mechanism gives them."""
    set_privacy = getattr(learner, "set_privacy", None)
    if set_privacy is not None:
        set_privacy(spec)


def set_learner_strategy(learner: Learner, strategy: StrategySpec) -> None:
    """Tell ``learner`` the server strategy (its ``set_strategy``). A learner without
    ``set_strategy`` (a learner of one's own) steps as FedAvg does: it takes ``fedavg`` only.

    Raises:
        ValueError: another strategy for a learner without ``set_strategy``.
    """
    set_strategy = getattr(learner, "set_strategy", None)
    if set_strategy is not None:
        set_strategy(strategy)
    elif strategy.name != DEFAULT_STRATEGY:
        raise ValueError(
            f"strategy {strategy.name!r} needs a learner with set_strategy; "
            f"{type(learner).__name__} has none and steps as FedAvg does: use strategy.name = "
            f'"{DEFAULT_STRATEGY}", or give the learner set_strategy(spec)'
        )


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
            is resolved on its actual costs (:func:`wflsim.sim.slot.slot_costs`); the scheme plans on
            the nominal ones unless the slowdown is ``known``. Decision rows log the planned
            ``compute_s``, ``compute_end`` (and ``device_slot``) rows the time actually spent.
        availability: when devices are online (``[availability]``; None: always). Only online
            devices take part in a slot; the server drops a participant that goes offline
            before its work ends; every change of state is an ``online`` / ``offline`` row.
        server: plays the slots out (:mod:`wflsim.sim.servers`; None: the synchronous server on
            the slot kernel ``config.kernel``). The engine binds it (:meth:`Server.bind`),
            which refuses parts it cannot run.
        strategy: how the server turns a step's aggregated uploads into a new model
            (``[strategy]``, :mod:`wflsim.sim.strategies`; None: FedAvg), handed to the learner
            with :func:`set_learner_strategy`.
        selection: which of the devices a slot's plan lets take part the server asks
            (``[strategy.selection]``, :mod:`wflsim.sim.selection`; None: all of them).
        cells: several cells (``[cells]``, :mod:`wflsim.sim.radio.cells.component`; None: one cell, the
            paper's). At every frame start the devices associate (``handover`` rows where one
            changes cell), the channel sees each device's distance to its serving site, and
            the scheme plans on its gains times its cell's planning factor.
        hierarchy: edge servers at the cells' base stations and a cloud (``[server.hierarchy]``,
            :mod:`wflsim.sim.servers.hierarchy`; needs ``cells``; None: flat aggregation). The
            learner is told each device's edge at every frame start (``assign_edges``) and
            takes the cloud rounds (``cloud_send``, ``cloud_receive``) the engine times.
        privacy: the run's resolved ``[privacy]`` (:class:`~wflsim.sim.privacy.mechanism.PrivacySpec`,
            ``z`` calibrated; None: no privacy). The engine keeps the privacy spent in
            :attr:`privacy` (a :class:`~wflsim.sim.privacy.ledger.PrivacyLedger`, which the servers
            hand every applied step), takes stopped devices out of every slot's candidates and
            tells the learner (``set_privacy``, :func:`set_learner_privacy`).

    Raises:
        ValueError: the server refuses the engine's parts (a stale-update server with a
            learner that keeps no model versions, say), the learner cannot take the strategy, or
            the scheme's update rule or the strategy is not registered.
    """

    #: rows buffered before they are handed to the writer within a frame (a row group: about
    #: 40 MB of Arrow arrays, the size DuckDB reads in parallel); a slot with more rows than
    #: this is handed over on its own. Small enough that a slot of 100,000 devices is its own
    #: row group: the encoding of the rows left when the frame ends, which the simulation waits
    #: for, is one slot's
    row_group_rows: int = 100_000

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
        server: Server | None = None,
        strategy: StrategySpec | None = None,
        selection: Selection | None = None,
        cells: Cells | None = None,
        hierarchy: CloudRounds | None = None,
        privacy: PrivacySpec | None = None,
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
        #: the run's cells (``[cells]``; None: one cell)
        self.cells = cells
        if hierarchy is not None and cells is None:
            raise ValueError(
                "hierarchical aggregation needs cells: their base stations are the edges"
            )
        #: the cloud tier (``[server.hierarchy]``; None: flat aggregation)
        self.hierarchy = hierarchy
        scheme.update_rule.entry(UPDATE_RULES)
        learner.set_update_rule(scheme.update_rule)
        #: the server strategy the learner steps with
        self.strategy = strategy if strategy is not None else StrategySpec()
        self.strategy.entry(STRATEGIES)
        set_learner_strategy(learner, self.strategy)
        #: which candidates of a slot the server asks (``[strategy.selection]``)
        self.selection = selection if selection is not None else Selection()
        if self.selection.probes and not isinstance(learner, ProbingLearner):
            raise ValueError(
                "power_of_choice ranks devices by their local loss, which this learner does not "
                f"compute ({type(learner).__name__}: a network-only run)"
            )
        self.rules = SlotRules(scheme.closes_at, config.late_upload_energy)
        #: the longest a slot may wait for its last upload, s: the cap, or less where a wait
        #: costs many events (availability changes, legs walked; the scenario's check before
        #: the run takes the same bound: :func:`~wflsim.sim.config.derived.longest_wait_s`)
        self.max_wait_s, _ = longest_wait_s(
            wait_events_per_s(
                mobility, availability, simulated_clock=config.mobility_clock == "simulated"
            )
        )

        n = system.num_devices
        self.num_devices = n
        self._ids = np.arange(n, dtype=np.int32)
        self.buffer = TraceBuffer()
        self._tables: list[pa.Table] = []
        # state at frame boundaries (state_dict)
        self.next_frame = 0
        self.now_s = 0.0
        #: the slot of its frame last played (0 .. T-1), what a sink's ``slot_done`` is told
        self.frame_slot = 0
        self.queue_j = np.zeros(n)
        self.stats = RunStats(energy_per_device_j=np.zeros(n))
        # the frame and slot in progress, and what the device processes read
        self._frame: FrameState | None = None
        self._env = Clock()
        #: plays each slot out between the scheme's plan and the model's step
        #: (:mod:`wflsim.sim.servers`; default: the synchronous server on ``config.kernel``)
        self.server: Server = (
            server
            if server is not None
            else SyncServer(make_kernel(config.kernel, config.uplink, system, cells))
        )
        #: the constants the scheme plans on (``p_min``): the band it expects (``[uplink]``)
        self.planned_system = config.uplink.planned_system(system)
        self._events = config.trace_level == "events"  # else device_slots
        self._wall_start = 0.0  # perf_counter at the start of run(), and the wall time before it
        self._wall_before = 0.0
        #: why the run stops before its last frame (:meth:`request_stop`); None: it does not
        self.stop_reason: str | None = None
        #: the privacy spent per device (``[privacy]``; None: no privacy)
        self.privacy: PrivacyLedger | None = None
        if privacy is not None:
            set_learner_privacy(learner, privacy)
            q = None
            if privacy.amplification == "uniform_selection":
                assert self.selection.k is not None, "checked when the scenario was resolved"
                q = min(1.0, self.selection.k / n)
            self.privacy = PrivacyLedger(privacy, n, self.buffer, sampling_probability=q)
        self.server.bind(self)
        self.stats = self.server.new_stats(n)
        if cells is not None:
            self.stats.handovers = 0
        if hierarchy is not None:
            self.stats.cloud_rounds, self.stats.backhaul_energy_j = 0, 0.0
        if self.privacy is not None:  # zeros before the first step
            self._privacy_totals()
        if uplink_mode(config.uplink).over_the_air:
            st = self.stats
            st.air_aligned, st.air_asked, st.air_mse_total, st.air_mse_count = 0, 0, 0.0, 0

    # ------------------------------------------------------------------ processes

    def _server(self, stop_frame: int) -> Any:
        env = self._env
        cfg = self.config
        if self.next_frame == 0:
            self._log_device_config()
            if self.availability is not None:
                self.log_changes(self.availability.reset(), 0, -1)
            if cfg.evaluate:
                self._eval(frame=0, slot=-1)
            if self.privacy is not None:  # devices whose first update would pass the budget
                self.privacy.start(0.0)
        self.server.resume()
        rounds = self.hierarchy
        if rounds is not None and rounds.due_s is not None:  # a cloud round in flight
            self._env.timeout_at(rounds.due_s, self._cloud_arrives)
        hooks = self.hooks
        for k in range(self.next_frame, stop_frame):
            if hooks.frame_start is not None:
                hooks.frame_start(self, k)
            self._frame_start(k)
            for j in range(cfg.slots_per_frame):
                t = k * cfg.slots_per_frame + j
                yield from self._play_slot(k, t)
                self.frame_slot = j
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
            if self.privacy is not None:  # the privacy spent at the boundary
                self._privacy_totals()
            self._flush(k)
            if self.stats.stopped_early is not None:
                break

    def _play_slot(self, k: int, t: int) -> Any:
        """Slot ``t`` of frame ``k`` from its start to its end (a SimPy process body): the
        server plays it out, the engine closes it."""
        end = yield from self.server.play_slot(k, t)
        self._close_slot(k, t, end)
        rounds = self.hierarchy
        if rounds is not None and rounds.due(t):
            yield from self._cloud_round(k, t)
        self._finish_slot(k, t, end.outcome)

    def _cloud_round(self, k: int, t: int) -> Any:
        """A cloud round after slot ``t`` (:mod:`wflsim.sim.servers.hierarchy`): the edges send
        their models now; under ``sync`` the next slot waits for the cloud model to reach every
        edge, under stale updates the edges keep serving and adopt it on arrival."""
        rounds = self.hierarchy
        assert rounds is not None
        duration_s, energy_j = rounds.next_round()
        now = self._env.now
        self.buffer.add("cloud_round", now, k, t, backhaul_s=duration_s, backhaul_energy_j=energy_j)
        weight, applied = rounds.take_weights()
        total = float(weight.sum())
        edges = np.arange(rounds.num_edges)
        self.buffer.add(
            "edge_model",
            now,
            k,
            t,
            edge=edges.astype(np.int32),
            edge_data_weight=weight,
            cloud_weight=np.ma.MaskedArray(weight / total if total > 0.0 else weight, total <= 0.0),
            n_success=applied.astype(np.int32),
            backhaul_up_s=rounds.up_latency_s,
            backhaul_down_s=rounds.down_latency_s,
        )
        st = self.stats
        assert st.cloud_rounds is not None and st.backhaul_energy_j is not None
        st.cloud_rounds += 1
        st.backhaul_energy_j += energy_j
        send = getattr(self.learner, "cloud_send", None)
        if send is not None:
            send()
        if self.server.fixed_slot_grid:
            if rounds.due_s is not None:
                raise RuntimeError("a cloud round started before the previous one ended")
            rounds.due_s = now + duration_s
            self._env.timeout_at(rounds.due_s, self._cloud_arrives)
            return
        yield self._env.timeout(duration_s)
        receive = getattr(self.learner, "cloud_receive", None)
        if receive is not None:
            receive()

    def _cloud_arrives(self, _event: Any = None) -> None:
        """The cloud model of the round in flight reaches the edges (stale updates)."""
        rounds = self.hierarchy
        assert rounds is not None
        rounds.due_s = None
        receive = getattr(self.learner, "cloud_receive", None)
        if receive is not None:
            receive()

    # ------------------------------------------------------------------ frame

    def _frame_start(self, k: int) -> None:
        now = self._env.now
        b, cfg, ids = self.buffer, self.config, self._ids
        t0 = k * cfg.slots_per_frame
        b.add("frame_start", now, k, t0)
        when = t0 * self.system.deadline_s if cfg.mobility_clock == "nominal" else now
        motion = self.mobility.kinematics(when)
        pos = np.asarray(motion.positions_m, dtype=np.float64)
        cells = self.cells
        if cells is None:
            large = self.channel.large_scale(k, motion)
            planned_large = large.gain
        else:
            assoc = cells.associate(pos)
            assign = getattr(self.learner, "assign_edges", None)
            if self.hierarchy is not None and assign is not None:
                assign(assoc.serving)  # a device trains on its cell's edge model
            large = self.channel.large_scale(k, cells.relative(motion))
            if cells.layout.interacts:  # the gains to every site: the cells' uplink reads them
                cells.frame_gains(assoc, large.gain, large.shadowing_db)
            planned_large = large.gain * cells.device_plan_factor
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
            cell=None if cells is None else assoc.serving.astype(np.int32),
        )
        if cells is not None:
            moved = np.flatnonzero(assoc.handover)
            if moved.shape[0]:
                b.add(
                    "handover",
                    now,
                    k,
                    t0,
                    moved.astype(np.int32),
                    cell=assoc.serving[moved].astype(np.int32),
                    previous_cell=assoc.previous[moved].astype(np.int32),
                )
            assert self.stats.handovers is not None
            self.stats.handovers += int(moved.shape[0])
        queue = self.queue_j.copy()
        plan = self.scheme.plan_frame(
            FrameContext(frame=k, large_scale_gain=planned_large, queue_j=queue)
        )
        self.scheme.update_rule.check_inputs(plan.update, UPDATE_RULES)
        self.learner.begin_frame(k, plan.update)
        b.add("freeze", now, k, t0, ids, gamma=plan.gamma, queue_j=queue, **plan.columns)
        costs = slots.frame_costs(plan.cost.payload_bits, plan.cost.compute_fraction, self.system)
        self._frame = FrameState(
            frame=k, large=large, queue_j=queue, plan=plan, costs=costs, planned_gain=planned_large
        )

    def _frame_end(self, k: int) -> None:
        self.learner.end_frame(k)
        self.buffer.add("frame_end", self._env.now, k, (k + 1) * self.config.slots_per_frame - 1)
        self._frame = None

    # ------------------------------------------------------------------ slot

    def plan_slot(
        self, k: int, t: int, slot_jitter: bool = True, slowdown: np.ndarray | None = None
    ) -> SlotPlanning:
        """A slot's start, up to the scheme's plan: the channel draw, the slot's costs (slowed by
        the slot's jitter when ``slot_jitter``, or by ``slowdown``, ``(N,)``, when given; the
        scheme plans on the nominal unless the slowdown is known), ``p_min``, the availability
        at the slot's start (its changes up to now logged), the scheme's slot plan."""
        now = self._env.now
        fr = self._frame
        assert fr is not None
        gains = self.channel.slot(t, fr.large)
        if self.cells is not None and self.cells.layout.interacts:  # the cells' uplink reads them
            self.cells.slot_gains(t, gains.gain, fr.large.speed_mps)
        avail = self.availability
        available = online_until = None
        if avail is not None:
            self.log_changes(avail.advance(now), k, t)  # changes at the slot's start
            available, online_until = avail.online.copy(), avail.online_until_s()
        if self.privacy is not None and self.privacy.any_blocked:  # their budget spent
            stopped = self.privacy.blocked()
            available = ~stopped if available is None else available & ~stopped
        if slowdown is None and self.jitter is not None and slot_jitter:
            slowdown = self.jitter.slowdown(t)  # the slot's actual costs
        return self.replan(k, t, gains, available, online_until, slowdown)

    def replan(
        self,
        k: int,
        t: int,
        gains: SlotChannel,
        available: np.ndarray | None,
        online_until_s: np.ndarray | None,
        slowdown: np.ndarray | None,
    ) -> SlotPlanning:
        """The costs, ``p_min`` and the scheme's plan of slot ``t`` on a channel draw already
        made (:meth:`plan_slot`), with the compute slowed by ``slowdown`` (``(N,)``; None: the
        nominal costs). The scheme plans on the slowed costs iff the jitter is ``known``. Draws
        nothing and logs nothing: a server may call it again within the slot (a cycle that
        starts with its own slowdown)."""
        fr = self._frame
        assert fr is not None
        costs = planned = fr.costs
        if slowdown is not None:
            assert self.jitter is not None
            costs = slots.slot_costs(fr.costs, slowdown, self.jitter.scales_clock)
            if self.jitter.known:
                planned = costs
        seen, large = gains.seen_gain, fr.large.gain
        if self.cells is not None:  # the scheme plans on its cell's margin
            factor = self.cells.device_plan_factor
            seen, large = seen * factor, large * factor
        p_min = slots.min_tx_power_w(planned, seen, self.planned_system)
        plan = self.scheme.plan_slot(
            SlotContext(
                slot=t,
                frame=k,
                channel_gain=seen,
                large_scale_gain=large,
                gamma=fr.plan.gamma,
                queue_j=fr.queue_j,
                compute_s=planned.compute_s,
                payload_bits=fr.costs.payload_bits,
                min_tx_power_w=p_min,
                csi_posterior=gains.posterior,
                available=available,
            )
        )
        return SlotPlanning(gains, costs, planned, p_min, available, online_until_s, plan)

    def _close_slot(self, k: int, t: int, end: SlotEnd) -> None:
        """The end of slot ``t``, the same for every server: the queues after the slot's energy,
        the ``energy`` rows (trace level ``events``), the scheme's ``observe``, the run's totals
        (then :meth:`_finish_slot`)."""
        now = self._env.now
        out = end.outcome
        self.queue_j = out.queue_j
        if self._events:
            self.buffer.add(
                "energy", now, k, t, self._ids, **self.outcome_columns(out), **end.columns
            )
        self.scheme.observe(out)
        st = self.stats
        st.slots += 1
        st.device_slots += self.num_devices
        st.participations += int(out.participating.sum())
        st.available_device_slots += (
            self.num_devices if end.available is None else int(end.available.sum())
        )
        st.drops += int(out.dropped.sum())
        st.energy_j += float(out.energy_j.sum())
        st.wasted_energy_j += float(out.wasted_energy_j.sum())
        st.energy_per_device_j += out.energy_j
        st.simulated_time_s = now

    def _finish_slot(self, k: int, t: int, out: SlotOutcome) -> None:
        """After slot ``t`` is closed (and a cloud round that follows it has been taken): the
        evaluation every ``eval_every_slots`` slots, the hooks, the progress."""
        st = self.stats
        st.simulated_time_s = self._env.now
        cfg = self.config
        last = t == cfg.frames * cfg.slots_per_frame - 1
        if cfg.evaluate and ((t + 1) % cfg.eval_every_slots == 0 or last):
            self._eval(k, t)
        if self.hooks.slot_end is not None:
            self.hooks.slot_end(self, t, out)
        if self.progress is not None:
            self.progress(t, st)

    def cost_columns(self, out: SlotOutcome) -> dict[str, Any]:
        """The slot's drift-plus-penalty columns (``conv_error``, ``cost``) for schemes that
        declare cost weights (:meth:`Scheme.cost_weights`; else none)."""
        weights = self.scheme.cost_weights()
        fr = self._frame
        if weights is None or fr is None:
            return {}
        x, z = slots.drift_plus_penalty(
            out.success,
            fr.plan.gamma,
            self.system.devices.batch_size,
            out.energy_j,
            fr.queue_j,
            *weights,
        )
        return {"conv_error": x, "cost": z}

    def outcome_columns(self, out: SlotOutcome) -> dict[str, Any]:
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

    def log_changes(self, changes: Changes, k: int, t: int) -> None:
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

    def _privacy_totals(self) -> None:
        """The run's privacy totals (:meth:`PrivacyLedger.summary`) into its stats."""
        assert self.privacy is not None
        st, summary = self.stats, self.privacy.summary()
        st.epsilon_max, st.epsilon_mean = summary["epsilon_max"], summary["epsilon_mean"]
        st.dp_noise_multiplier = summary["dp_noise_multiplier"]
        st.dp_stopped_devices = summary["dp_stopped_devices"]

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
        self.server.start_run(env)
        server = env.process(self._server(stop))
        try:
            # until the server is done: a shared uplink may leave completion events it made
            # stale (cut at a deadline) scheduled after the last slot's end
            env.run(until=server)
        finally:
            self.server.close()
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
    def clock(self) -> Clock:
        """The run's event clock (a fresh one per :meth:`run`)."""
        return self._env

    @property
    def frame(self) -> FrameState | None:
        """The frame in progress (None between frames)."""
        return self._frame

    @property
    def ids(self) -> np.ndarray:
        """The device numbers ``0 .. N - 1``, int32, ``(N,)``."""
        return self._ids

    @property
    def record_events(self) -> bool:
        """Whether the trace holds every device event (``[trace] level = "events"``; else one
        ``device_slot`` row per device and slot)."""
        return self._events

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
        if self._frame is not None or self.server.in_slot:
            raise RuntimeError("the engine's state can only be saved at a frame boundary")
        out = {
            "next_frame": self.next_frame,
            "now_s": self.now_s,
            "queue_j": self.queue_j.copy(),
            "stats": self.stats.state_dict(),
        }
        server = self.server.state_dict()
        if server is not None:  # a server with state of its own (cycles in flight, versions)
            out["server"] = server
        if self.hierarchy is not None:  # rounds taken, the one in flight
            out["hierarchy"] = self.hierarchy.state_dict()
        if self.privacy is not None:  # every device's privacy spent, the stopped devices
            out["privacy"] = self.privacy.state_dict()
        return out

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
        if self.server.state_dict() is not None:
            self.server.load_state_dict(state.get("server"))
        if (self.hierarchy is None) != ("hierarchy" not in state):
            raise ValueError("engine state and this run differ in [server.hierarchy]")
        if self.hierarchy is not None:
            self.hierarchy.load_state_dict(state["hierarchy"])
        if (self.privacy is None) != ("privacy" not in state):
            raise ValueError("engine state and this run differ in [privacy]")
        if self.privacy is not None:
            self.privacy.load_state_dict(state["privacy"])
