"""The records of the stale-update server (:mod:`wflsim.sim.servers.stale`): a device's upload
cycle (:class:`Cycle`), what the cycles that ended in a slot did (the slot's tally), the run's
counts under stale updates (:class:`AsyncStats`), the rule that lands an arrival on a slot
boundary (:func:`on_boundary_s`), and the cycles as arrays for checkpoints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ..slot import DEADLINE_REL_TOL
from ..stats import RunStats
from ..world.availability import Changes
from .base import account_privacy


@dataclass
class Cycle:
    """One device's download-compute-upload cycle, decided when it starts (times absolute, s)."""

    device: int
    key: int  #: the update's id (the learner's handle)
    version: int  #: the model version downloaded
    sample_key: int  #: the learner's minibatch key (the slot in semi_sync, the cycle in async)
    slot: int  #: the slot in which the cycle started
    start_s: float
    compute_end_s: float  #: the compute's end (or the drop, if that comes first)
    #: the arrival (or the drop); on a shared uplink ``inf`` until the uplink reports the end
    end_s: float
    dropped: bool  #: the device goes offline before its upload arrives
    tx_power_w: float
    compute_s: float  #: time computed (until the drop, if dropped while computing)
    upload_s: float  #: time transmitted
    energy_compute_j: float
    energy_upload_j: float
    uploading: bool = False  #: the compute has ended (its rows are logged)
    #: never to be applied (too stale already, or dropped): the learner holds nothing for it
    discarded: bool = False
    #: what its upload brings to a shared uplink, planned in the slot it started in (block
    #: fading: that slot's gain holds for the whole upload)
    channel_gain: float = float("nan")
    payload_bits: float = float("nan")  #: bits
    upload_full_s: float = float("nan")  #: alone on the whole band W, s
    #: when the device goes offline (absolute, s; ``inf``: not while the slot's plan holds)
    offline_s: float = float("inf")
    #: its upload ended in the shared uplink a rounding step before a slot's end (``end_s``),
    #: where it arrives (never across a checkpoint: the slot's end comes first)
    landing: bool = False
    #: ``[server.hierarchy]``: the edge server that applies it (the device's cell when it
    #: started; -1 without a hierarchy)
    edge: int = -1

    @property
    def energy_j(self) -> float:
        """Compute plus upload energy, J."""
        return self.energy_compute_j + self.energy_upload_j


_CYCLE_FIELDS = tuple(f.name for f in fields(Cycle))


@dataclass
class Tally:
    """What the cycles that ended in the slot did, per device, ``(N,)`` each."""

    n: int
    ended: np.ndarray = field(init=False)
    success: np.ndarray = field(init=False)
    dropped: np.ndarray = field(init=False)
    #: the device's last cycle that ended in the slot had reached the uplink
    uploaded: np.ndarray = field(init=False)
    tx_power_w: np.ndarray = field(init=False)
    compute_s: np.ndarray = field(init=False)
    upload_s: np.ndarray = field(init=False)
    energy_compute_j: np.ndarray = field(init=False)
    energy_upload_j: np.ndarray = field(init=False)
    wasted_energy_j: np.ndarray = field(init=False)
    #: the edge of the device's last cycle that ended in the slot (-1: none, or no hierarchy)
    edge: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Empty, for the next slot."""
        n = self.n
        self.cycles = 0  #: cycles that ended in the slot (a device may end several)
        self.ended = np.zeros(n, dtype=bool)
        self.success = np.zeros(n, dtype=bool)
        self.dropped = np.zeros(n, dtype=bool)
        self.uploaded = np.zeros(n, dtype=bool)
        self.tx_power_w = np.zeros(n)
        self.compute_s = np.zeros(n)
        self.upload_s = np.zeros(n)
        self.energy_compute_j = np.zeros(n)
        self.energy_upload_j = np.zeros(n)
        self.wasted_energy_j = np.zeros(n)
        self.edge = np.full(n, -1, dtype=np.int32)

    def add(self, c: Cycle, success: bool) -> None:
        """Count cycle ``c``, which just ended (aggregated later iff ``success``)."""
        self.cycles += 1
        n = c.device
        self.ended[n] = True
        self.success[n] |= success
        self.dropped[n] |= c.dropped
        self.uploaded[n] = c.uploading
        self.tx_power_w[n] = c.tx_power_w
        self.edge[n] = c.edge
        self.compute_s[n] += c.compute_s
        self.upload_s[n] += c.upload_s
        self.energy_compute_j[n] += c.energy_compute_j
        self.energy_upload_j[n] += c.energy_upload_j
        if not success:
            self.wasted_energy_j[n] += c.energy_j


@dataclass
class AsyncStats(RunStats):
    """:class:`~wflsim.sim.engine.RunStats` with the server's counts under stale updates."""

    cycles_ended: int = 0  #: upload cycles that ended (arrived or dropped)
    #: device-slots in which the device computed or uploaded at some time
    active_device_slots: int = 0
    server_steps: int = 0  #: buffers applied (model versions made)
    updates_applied: int = 0  #: updates aggregated in them
    stale_discarded: int = 0  #: arrivals older than ``max_staleness``
    staleness_sum: int = 0  #: sum of the applied updates' staleness
    max_versions_kept: int = 0  #: most model versions the learner held at once

    @property
    def outage_rate(self) -> float:
        """Uploads that arrived but were not applied (too stale, or in the server's buffer when
        the run ended), per upload cycle that ended."""
        arrived = self.cycles_ended - self.drops
        return (arrived - self.updates_applied) / self.cycles_ended if self.cycles_ended else 0.0

    @property
    def dropout_rate(self) -> float:
        """Device-slots in which the device neither computed nor uploaded, per device-slot."""
        return 1.0 - self.active_device_slots / self.device_slots if self.device_slots else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The summary, with the server's counts."""
        out = super().as_dict()
        out.update(
            cycles_ended=self.cycles_ended,
            server_steps=self.server_steps,
            updates_applied=self.updates_applied,
            stale_discarded=self.stale_discarded,
            mean_staleness=self.staleness_sum / self.updates_applied
            if self.updates_applied
            else float("nan"),
            max_versions_kept=self.max_versions_kept,
        )
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        super().load_state_dict(state)
        for k in (
            "cycles_ended",
            "active_device_slots",
            "server_steps",
            "updates_applied",
            "stale_discarded",
            "staleness_sum",
        ):
            setattr(self, k, int(state[k]))
        self.max_versions_kept = int(state["max_versions_kept"])


def on_boundary_s(time_s: float, deadline_s: float, after_s: float) -> float:
    """``time_s`` (an arrival, s), or the slot boundary ``j tau_0`` it is within
    ``tau_0 * DEADLINE_REL_TOL`` of, on either side, if that boundary is after ``after_s`` (the
    cycle's start). The boundary is computed as the server's clock computes its slot ends, so
    the two compare exactly."""
    j = round(time_s / deadline_s)
    boundary = j * deadline_s
    if boundary > after_s and abs(time_s - boundary) <= DEADLINE_REL_TOL * deadline_s:
        return float(boundary)
    return time_s


def one_change(changes: Changes, i: int) -> Changes:
    """Change ``i`` of ``changes`` alone."""
    return Changes(changes.time_s[i : i + 1], changes.device[i : i + 1], changes.online[i : i + 1])


def cycle_records(cycles: list[Cycle]) -> dict[str, np.ndarray]:
    """Cycles as one array per field (for checkpoints)."""
    return {
        name: np.array([getattr(c, name) for c in cycles], dtype=_FIELD_DTYPES[name])
        for name in _CYCLE_FIELDS
    }


def cycles_from_records(rec: dict[str, Any]) -> list[Cycle]:
    """The cycles of :func:`cycle_records`."""
    cols = {name: np.asarray(rec[name]) for name in _CYCLE_FIELDS if name in rec}
    count = cols["device"].shape[0]
    out = []
    for i in range(count):  # a field a checkpoint lacks (saved before it existed): its default
        kw = {name: _PY_TYPES[_FIELD_DTYPES[name]](col[i]) for name, col in cols.items()}
        out.append(Cycle(**kw))
    return out


_INT_FIELDS = ("device", "key", "version", "sample_key", "slot", "edge")


_BOOL_FIELDS = ("dropped", "uploading", "discarded", "landing")


_FIELD_DTYPES: dict[str, type] = {
    name: np.int64 if name in _INT_FIELDS else np.bool_ if name in _BOOL_FIELDS else np.float64
    for name in _CYCLE_FIELDS
}


_PY_TYPES: dict[type, Callable[[Any], Any]] = {np.int64: int, np.bool_: bool, np.float64: float}


def step_updates(
    host: Any, buf: list[Cycle], weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A stale server step's updates as :func:`~wflsim.sim.servers.base.account_privacy` takes them: their
    devices, their aggregation weights (``weights``, the staleness weights, times ``B_n``)
    and, under a hierarchy, their edges (each edge's aggregate is its own)."""
    devices = np.array([c.device for c in buf], dtype=np.int64)
    batch = host.system.devices.batch_size[devices].astype(np.float64)
    edges = None
    if host.hierarchy is not None:
        edges = np.array([c.edge for c in buf], dtype=np.int64)
    return devices, np.asarray(weights, dtype=np.float64) * batch, edges


def within_budget(
    host: Any,
    versioned: Any,
    buf: list[Cycle],
    version: int,
    weight: Callable[[np.ndarray], np.ndarray],
) -> list[Cycle]:
    """A stale server step's buffer (``[privacy]``) without the updates of devices whose step
    would take them past their budget (:meth:`~wflsim.sim.privacy.ledger.PrivacyLedger.admitted`:
    a stopped device's update still in flight, or a device with several updates in the step,
    whose multiplier may then be below ``z``); theirs are dropped, never applied. The buffer
    as it is without ``[privacy]``."""
    if host.privacy is None or not buf:
        return buf
    staleness = np.array([version - c.version for c in buf], dtype=np.int64)
    keep = host.privacy.admitted(*step_updates(host, buf, weight(staleness)))
    for c, kept in zip(buf, keep.tolist(), strict=True):
        if not kept and not c.discarded:
            versioned.drop_update(c.key)
    return [c for c, kept in zip(buf, keep.tolist(), strict=True) if kept]


def account_stale_step(
    host: Any, time_s: float, k: int, t: int, buf: list[Cycle], weights: np.ndarray
) -> None:
    """Account a stale server step that applied ``buf`` with ``weights`` (the staleness
    weights) at ``time_s`` (:func:`~wflsim.sim.servers.base.account_privacy`; nothing without ``[privacy]``)."""
    if host.privacy is not None:
        account_privacy(host, time_s, k, t, *step_updates(host, buf, weights))


def stopped(host: Any, n: int) -> bool:
    """Whether device ``n`` takes part no more, its privacy budget spent (``[privacy]``)."""
    return host.privacy is not None and host.privacy.is_stopped(n)
