"""The server seam: what happens between "devices are told to work" and "the model moves".

The :class:`~wflsim.sim.engine.Engine` keeps the clock, the frame loop, the slot plan (the
scheme) and one copy of the end-of-slot bookkeeping (queues, ``energy`` rows, the run's totals,
evaluations, hooks, checkpoints). A :class:`Server` plays one slot out on the clock, from the
slot's start to its end, and hands the engine the slot's :class:`SlotEnd`:

* :class:`~wflsim.sim.servers.synchronous.SyncServer` (``[server] mode = "sync"``, the paper's):
  a slot kernel plays the participants' compute and uploads; the server settles the slot at its
  deadline (or its last upload) and aggregates what arrived in time;
* :class:`~wflsim.sim.servers.stale.StaleServer` (``semi_sync``, ``async``): each device's
  download-compute-upload cycle runs on the clock across slots; arrivals enter a buffer with the
  model version they were computed on; the server applies the buffer at each slot's end
  (``semi_sync``) or every ``buffer_size`` arrivals (``async``).

A server reads and writes the run through its host (the engine, :meth:`Server.bind`), and only
through what :class:`Host` names: a server imports nothing of the engine.

A new server is one module with a :class:`Server` subclass and a line in
:data:`wflsim.sim.servers.BUILT_IN_SERVERS` (docs/architecture.md, "A new server").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import simpy

from ..clock import Clock
from ..learner import Learner, ProbingLearner
from ..privacy.ledger import PrivacyLedger, step_multipliers
from ..privacy.mechanism import combined_multiplier
from ..radio.aircomp import AirCompPlan
from ..radio.cells.component import Cells
from ..schemes.base import FramePlan, Scheme, SlotPlan
from ..selection import Selection, SelectionInputs, probe_energy_j, probe_time_s
from ..slot import FrameCosts, SlotOutcome, SlotRules, SlotUploads
from ..stats import RunStats
from ..trace import TraceBuffer
from ..world.availability import Availability, Changes
from ..world.channel import LargeScale, SlotChannel
from ..world.compute import ComputeJitter
from ..world.system import SystemConstants

if TYPE_CHECKING:
    from ..kernels import SlotKernel
    from .config import ServerConfig
    from .hierarchy import CloudRounds


@dataclass(frozen=True)
class FrameState:
    """The frame in progress."""

    frame: int
    large: LargeScale  #: positions' distances and large-scale gains
    queue_j: np.ndarray  #: queues at the frame start (the frame's price), J
    plan: FramePlan  #: the scheme's frame decision
    costs: FrameCosts  #: its cost plan in seconds and joules
    #: the large-scale gains the scheme planned the frame on (None: the true ones, ``large``)
    planned_gain: np.ndarray | None = None


@dataclass(frozen=True)
class SlotPlanning:
    """What a slot's start decides before anything plays out (:meth:`Host.plan_slot`)."""

    gains: SlotChannel  #: the slot's channel draw
    costs: FrameCosts  #: what the slot actually costs (the frame's; slowed under jitter)
    planned: FrameCosts  #: what the scheme planned on
    p_min: np.ndarray  #: ``p_min`` on the gain the scheme sees, W, ``(N,)``
    available: np.ndarray | None  #: online at the slot's start (None: always online)
    online_until_s: np.ndarray | None  #: each device's next change if online now (None: always)
    plan: SlotPlan  #: the scheme's slot decision


def decision_columns(
    frame: FrameState, sp: SlotPlanning, uploads: SlotUploads, compute_s: np.ndarray
) -> dict[str, Any]:
    """A slot's ``decision`` columns for every device, ``(N,)`` each: the frame's distances,
    gains, ``gamma`` and payload, the slot's channel draw, ``p_min``, the uploads' power and
    full upload time, the availability at the slot's start, the planned ``compute_s`` and the
    scheme's own columns."""
    return {
        "distance_m": frame.large.distance_m,
        "large_scale_gain": frame.large.gain,
        "channel_gain": sp.gains.gain,
        "seen_channel_gain": sp.gains.seen_gain,
        "gamma": frame.plan.gamma,
        "payload_bits": frame.costs.payload_bits,
        "min_tx_power_w": sp.p_min,
        "tx_power_w": uploads.tx_power_w,
        "participating": uploads.participating,
        "available": sp.available,
        "compute_s": compute_s,
        "upload_s": uploads.upload_full_s,
        **sp.plan.columns,
    }


@dataclass(frozen=True)
class Selected:
    """What the selection rule decided at a slot's start (:func:`select`)."""

    chosen: np.ndarray  #: the candidates asked, ``(N,)`` bool
    #: the decision rows' columns: ``selected``, and under ``power_of_choice`` ``probe_loss``
    #: and ``probe_energy_j`` (null where not probed; None under other rules)
    columns: dict[str, Any]
    probe_energy_j: np.ndarray | None  #: the loss probes' energy, J, ``(N,)`` (None: no probe)
    #: how long the server waits for the probes' losses before it asks anyone, s: the longest
    #: probe's computation (0: no probe)
    probe_phase_s: float = 0.0


def log_strategy_rows(host: Host, time_s: float, k: int, t: int) -> None:
    """Write the ``strategy`` rows of the server steps the learner took since the last call
    (a learner without ``take_strategy_rows`` has none), and under ``[privacy]`` the ``dp_clip``
    rows of their updates (the learner's ``take_privacy_rows``)."""
    take = getattr(host.learner, "take_strategy_rows", None)
    if take is not None:
        for block in take():
            cols = dict(block)
            host.buffer.add("strategy", time_s, k, t, cols.pop("device"), **cols)
    take_dp = getattr(host.learner, "take_privacy_rows", None)
    if take_dp is not None and host.privacy is not None:  # the clipping of the steps' updates
        for block in take_dp():
            cols = dict(block)
            host.buffer.add("dp_clip", time_s, k, t, cols.pop("device"), **cols)


def account_privacy(
    host: Host,
    time_s: float,
    k: int,
    t: int,
    devices: Any,
    weights: Any,
    groups: Any = None,
    air_multipliers: Any = None,
) -> None:
    """Account a server step (``[privacy]``; nothing without): the devices of the updates it
    applied (``(k,)``), their aggregation weights and aggregates (``groups``: each update's edge
    under a hierarchy; None: one aggregate), or over the air the multipliers the radio gave
    each device in the sum (``air_multipliers``, ``(k,)``, ``devices`` in the same order)."""
    ledger = host.privacy
    if ledger is None:
        return
    spec = ledger.spec
    if spec.mechanism == "over_the_air":
        if air_multipliers is None:
            raise RuntimeError(
                "over-the-air privacy needs the radio's multipliers (OverTheAir."
                "privacy_multipliers), which this slot's sum does not carry"
            )
        ids = np.asarray(devices, dtype=np.int64)
        mult = combined_multiplier(air_multipliers, spec.clipped_count_std)
    else:
        ids, mult = step_multipliers(spec, devices, weights, groups)
    ledger.account(time_s, k, t, ids, mult)


def select(
    host: Host, t: int, sp: SlotPlanning, uploads: SlotUploads, candidates: np.ndarray, limit: int
) -> Selected:
    """The candidates of slot ``t`` (``(N,)`` bool: the devices the plan lets take part) the
    host's selection rule asks, at most ``limit`` of them (:class:`~wflsim.sim.selection.Selection`
    on the slot's planned power, the gain the scheme sees, the payload, the planned computation
    energy and the queues at the slot's start; ``power_of_choice`` on the learner's loss
    probes), the ``selected`` column (the choice where the device was a candidate, null where it
    was not) and the probes' columns and energy."""
    system = host.system
    inputs = SelectionInputs(
        tx_power_w=uploads.tx_power_w,
        seen_gain=sp.gains.seen_gain,
        payload_bits=uploads.payload_bits,
        compute_energy_j=sp.planned.compute_energy_j,
        queue_j=host.queue_j,
        bandwidth_hz=system.bandwidth_hz,
        noise_w=system.noise_w,
        rate_model=system.rate_model,
    )
    cand = np.asarray(candidates, dtype=bool)
    sel = host.selection
    probe = host.learner.probe_losses if isinstance(host.learner, ProbingLearner) else None
    choice = sel.decide(t, cand, limit, inputs, probe)
    columns: dict[str, Any] = {"selected": np.ma.MaskedArray(choice.chosen, mask=~cand)}
    energy = None
    phase_s = 0.0
    if sel.probes:
        energy = np.where(choice.probed, probe_energy_j(system.devices), 0.0)
        if choice.probed.any():
            phase_s = float(probe_time_s(system.devices)[choice.probed].max())
        columns["probe_loss"] = np.ma.MaskedArray(choice.probe_loss, mask=~choice.probed)
        columns["probe_energy_j"] = np.ma.MaskedArray(energy, mask=~choice.probed)
    return Selected(choice.chosen, columns, energy, phase_s)


@dataclass(frozen=True)
class SlotInProgress:
    """The slot in progress: what its start decided for every device."""

    slot: int
    frame: int
    start_s: float  #: its start, s (absolute)
    deadline_s: float  #: its nominal end ``start + tau_0``, s (absolute)
    uploads: SlotUploads  #: who uploads what at which power (before anything plays out)
    costs: FrameCosts  #: what the slot actually costs (the frame's; under jitter, slowed)
    who: np.ndarray  #: the participating devices, ascending
    #: when each device goes offline (absolute, s; ``inf`` if offline now; None: always online)
    online_until_s: np.ndarray | None = None
    available: np.ndarray | None = None  #: online at the slot's start (None: always online)
    #: the decision columns, written at the slot's end with the outcome (``device_slots``)
    decision: dict[str, Any] = field(default_factory=dict)
    #: the loss probes' energy of the slot's start, J, ``(N,)`` (``power_of_choice``; None: none)
    probe_energy_j: np.ndarray | None = None
    #: the probe phase at the slot's start, s: the asked devices start after it (0: none)
    probe_phase_s: float = 0.0
    #: ``[uplink] mode = "aircomp"``: the slot's over-the-air plan (None: digital uploads)
    aircomp: AirCompPlan | None = None


@dataclass(frozen=True)
class SlotEnd:
    """What a server hands the engine when a slot ends (``env.now`` is the slot's end)."""

    outcome: SlotOutcome  #: per device: energies, success, queue after the update
    available: np.ndarray | None  #: online at the slot's start (None: always online)
    #: more columns of the slot's ``energy`` rows (the drift-plus-penalty cost)
    columns: dict[str, Any] = field(default_factory=dict)


class Host(Protocol):
    """What a server may use of the engine that runs it (:class:`~wflsim.sim.engine.Engine`)."""

    config: Any  #: the run's timing and logging settings (``EngineConfig``)
    system: SystemConstants  #: devices and radio constants
    learner: Learner
    scheme: Scheme
    rules: SlotRules  #: when a slot closes, what a late upload costs
    availability: Availability | None
    jitter: ComputeJitter | None
    cells: Cells | None  #: several cells (``[cells]``; None: one)
    hierarchy: CloudRounds | None  #: the cloud tier (``[server.hierarchy]``; None: flat)
    buffer: TraceBuffer  #: the trace rows of the frame in progress
    queue_j: np.ndarray  #: the energy-deficit queues, J, ``(N,)``
    selection: Selection  #: which candidates of a slot the server asks (``[strategy.selection]``)
    privacy: PrivacyLedger | None  #: the privacy spent (``[privacy]``; None: no privacy)
    stats: RunStats  #: the run's totals (:meth:`Server.new_stats`)
    num_devices: int
    next_frame: int  #: the frame in progress, or the next one between frames
    max_wait_s: float  #: the longest a slot may wait for its last upload, s

    @property
    def clock(self) -> Clock:
        """The run's clock."""
        ...

    @property
    def frame(self) -> FrameState | None:
        """The frame in progress."""
        ...

    @property
    def ids(self) -> np.ndarray:
        """The device numbers, int32, ``(N,)``."""
        ...

    @property
    def record_events(self) -> bool:
        """Whether the trace holds every device event (else ``device_slot`` rows)."""
        ...

    def plan_slot(
        self, k: int, t: int, slot_jitter: bool = True, slowdown: np.ndarray | None = None
    ) -> SlotPlanning:
        """The slot's channel draw, costs, ``p_min``, availability and the scheme's plan."""
        ...

    def replan(
        self,
        k: int,
        t: int,
        gains: SlotChannel,
        available: np.ndarray | None,
        online_until_s: np.ndarray | None,
        slowdown: np.ndarray | None,
    ) -> SlotPlanning:
        """The slot's costs, ``p_min`` and plan again on its channel draw, with ``slowdown``."""
        ...

    def log_changes(self, changes: Changes, k: int, t: int) -> None:
        """Availability changes as ``online`` / ``offline`` rows."""
        ...

    def outcome_columns(self, out: SlotOutcome) -> dict[str, Any]:
        """A slot's outcome as the per-device columns of its rows."""
        ...

    def cost_columns(self, out: SlotOutcome) -> dict[str, Any]:
        """The slot's drift-plus-penalty columns (or none)."""
        ...


#: What :meth:`Server.play_slot` is: a SimPy process body that returns the slot's end.
SlotPlay = Generator[simpy.Event, Any, SlotEnd]


class Server(ABC):
    """Plays slots out between the scheme's plan and the model's step (the module docstring)."""

    #: the ``[server] mode`` values this server runs
    modes: ClassVar[tuple[str, ...]]
    #: whether slot ``t`` always ends at ``(t + 1) tau_0`` (stale updates) rather than when its
    #: play ends: a cloud round (``[server.hierarchy]``) then cannot hold the next slot back
    fixed_slot_grid: ClassVar[bool] = False

    def __init__(self) -> None:
        self._host: Host | None = None

    @classmethod
    @abstractmethod
    def build(cls, config: ServerConfig, kernel: SlotKernel) -> Server:
        """The server of a ``[server]`` table whose mode is one of :attr:`modes`; ``kernel``
        plays slot activity for a server that uses one (:func:`wflsim.sim.kernels.make_kernel`)."""

    @property
    def host(self) -> Host:
        """The engine this server runs in (:meth:`bind`)."""
        if self._host is None:
            raise RuntimeError(f"{type(self).__name__} is not bound to an engine")
        return self._host

    def bind(self, engine: Host) -> None:
        """Called once by the engine that runs this server, before anything else.

        Raises:
            ValueError: the engine's parts do not fit the server (with the reason).
        """
        self._host = engine

    def new_stats(self, num_devices: int) -> RunStats:
        """The run's totals, as this server counts them (a :class:`RunStats` subclass may add
        the server's own counts)."""
        return RunStats(energy_per_device_j=np.zeros(num_devices))

    def start_run(self, env: simpy.Environment) -> None:  # noqa: B027
        """Called once per run (``Engine.run``) with its fresh clock, before its process starts."""

    def resume(self) -> None:  # noqa: B027
        """Put back on the clock what was in flight at the frame boundary the run continues
        from (called in the run's process after its first rows)."""

    def close(self) -> None:  # noqa: B027
        """The engine's ``run`` returns (its end, a frame boundary it stops at, or a failure):
        release what the server's uplink holds outside Python (an ns-3 process)."""

    @abstractmethod
    def play_slot(self, k: int, t: int) -> SlotPlay:
        """Slot ``t`` of frame ``k`` from its start to its end (``yield from``); returns its
        :class:`SlotEnd` with ``env.now`` at the slot's end."""

    @property
    def in_slot(self) -> bool:
        """Whether a slot is in progress (the engine's state cannot be saved then)."""
        return False

    def count_by_edge(self, devices: Any, edges: Any) -> None:
        """Under ``[server.hierarchy]``, count the applied updates of ``devices`` for their
        ``edges`` (what each edge aggregated since the last cloud round, the trace's
        ``edge_model`` rows); nothing without a hierarchy."""
        host = self.host
        devs = np.asarray(devices, dtype=np.int64)
        if host.hierarchy is not None and devs.shape[0]:
            batch = host.system.devices.batch_size[devs]
            host.hierarchy.aggregated(np.asarray(edges, dtype=np.int64), batch)

    def state_dict(self) -> dict[str, Any] | None:
        """The server's state at a frame boundary (None: it keeps none)."""
        return None

    def load_state_dict(self, state: dict[str, Any] | None) -> None:  # noqa: B027
        """Restore :meth:`state_dict`."""
