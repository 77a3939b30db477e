"""Stale updates in closed form: the ``semi_sync`` and ``async`` server modes where device
cycles do not interact (``[run] kernel = "closed_form"``; ``auto`` picks it where it applies).

:class:`ClosedFormStaleServer` is :class:`~wflsim.sim.servers.stale.StaleServer` (its module
docstring holds the semantics) with the device cycles computed per slot, vectorised over the
devices, instead of played one event at a time on the clock. On a dedicated uplink, with no
``[availability]`` and (in ``async``) no ``[compute] jitter``, nothing a device does changes
when another's cycle ends: a cycle's compute end and arrival are known when it starts
(``start + tau_cmp``, then ``+ tau_com`` landed on a slot boundary by
:func:`~wflsim.sim.servers.cycles.on_boundary_s`), and the model versions move only the
learner and the rows, never a time. So a slot is computed in three steps:

1. **times**: the cycles in flight and those the slot starts (round 0); in ``async`` each one
   that arrives before the slot's end restarts there if the slot's plan lets its device (round
   1, 2, ... until no cycle arrives within the slot), each round one array operation over its
   devices;
2. **order**: the slot's events -- compute ends (``DEVICE``), arrivals (``DEVICE``), restarts
   (``RESTART``), each in ``(S, E]`` -- sorted by (time, order, device), the clock's order
   (:class:`~wflsim.sim.clock.Order`; two events of one device never tie);
3. **versions**: in that order, each arrival's staleness, its admission (``max_staleness``),
   the buffer's flushes (``async``: every ``buffer_size``-th admitted arrival) and the version
   each restart downloads -- in closed form without ``max_staleness`` (the ``i``-th arrival
   sees version ``V0 + (b0 + i) // B``), else in one scalar pass over the arrivals.

The rows of the slot's device events are then one block in that order (at trace level
``events``: ``compute_end`` and ``upload_start``, ``upload_end``, ``stale``, ``flush`` and the
restarts' ``decision`` rows; at ``device_slots``: the ``stale`` and ``flush`` rows, the
``device_slot`` rows folded at the slot's end as on the clock), the slot's tally is added per
device in time order, and a learner that keeps model versions (anything but the network-only
:class:`~wflsim.sim.learner.NullLearner`) is called in the clock's order: ``start_update`` at
each start, ``apply_updates`` at each flush, ``drop_update`` for the cycles a flush makes too
stale (the insertion order of the clock's cycles). The state at a frame boundary is the event
path's (:meth:`StaleServer.state_dict`): a checkpoint of either path continues on the other.

Elsewhere (a shared uplink, devices that go offline, per-cycle jitter in ``async``) cycles
interact or are replanned one at a time: the server plays them on the clock, as
:class:`StaleServer` (``tests/test_stale_closed.py`` compares the two paths' traces).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..clock import Order
from ..learner import NullLearner
from ..radio import rates
from ..slot import DEADLINE_REL_TOL, SlotUploads
from ..trace import event_code
from .base import Host, SlotPlay
from .config import ServerConfig
from .cycles import _CYCLE_FIELDS, _FIELD_DTYPES, cycle_records
from .stale import StaleServer

_CE, _US, _UE = event_code("compute_end"), event_code("upload_start"), event_code("upload_end")
_STALE, _FLUSH, _DECISION = event_code("stale"), event_code("flush"), event_code("decision")
#: the event kinds of a slot (compute end, arrival, restart)
_K_CE, _K_END, _K_RST = 0, 1, 2
#: the per-device fields of a cycle in flight (the others are constant on this path)
_KEPT = (
    "key",
    "version",
    "sample_key",
    "slot",
    "start_s",
    "compute_end_s",
    "end_s",
    "tx_power_w",
    "compute_s",
    "upload_s",
    "energy_compute_j",
    "energy_upload_j",
    "channel_gain",
    "payload_bits",
    "upload_full_s",
    "edge",
)


def on_boundary(time_s: np.ndarray, deadline_s: float, after_s: Any) -> np.ndarray:
    """:func:`~wflsim.sim.servers.cycles.on_boundary_s` over arrays, the same operations."""
    boundary = np.round(time_s / deadline_s) * deadline_s
    land = (boundary > after_s) & (np.abs(time_s - boundary) <= DEADLINE_REL_TOL * deadline_s)
    return np.where(land, boundary, time_s)


class ClosedFormStaleServer(StaleServer):
    """:class:`StaleServer` with its device cycles computed per slot in closed form where they
    do not interact (the module docstring); elsewhere the clock's path, unchanged."""

    def __init__(self, config: ServerConfig) -> None:
        super().__init__(config)
        self.closed = True  #: whether this run's cycles are computed in closed form
        self._on = np.zeros(0, dtype=bool)  # per device: a cycle in flight
        self._c: dict[str, np.ndarray] = {}  # per device: its cycle's fields (_KEPT)
        self._seq = np.zeros(0, dtype=np.int64)  # the clock's insertion order of the cycles
        self._buf: dict[str, np.ndarray] = cycle_records([])  # arrived, not applied, in order
        self._null = True

    def bind(self, engine: Host) -> None:
        """:meth:`StaleServer.bind`; the closed form unless cycles interact."""
        super().bind(engine)
        self.closed = (
            self._uplink is None
            and engine.availability is None
            and not (self._async and engine.jitter is not None)
            # every flush accounted, devices stopped by their privacy budget: the clock's path
            and engine.privacy is None
        )
        n = engine.num_devices
        self._on = np.zeros(n, dtype=bool)
        self._c = {name: np.zeros(n, dtype=_FIELD_DTYPES[name]) for name in _KEPT}
        self._seq = np.zeros(n, dtype=np.int64)
        self._null = type(engine.learner) is NullLearner  # a subclass may record calls

    # ------------------------------------------------------------------ hooks of the clock path

    def play_slot(self, k: int, t: int) -> SlotPlay:
        """Slot ``t``: its plan and starts, its cycles in closed form, then its end."""
        if not self.closed:
            return (yield from super().play_slot(k, t))
        self._slot_open(k, t)
        self._play_cycles(k, t)
        yield self.host.clock.at((t + 1) * self.host.system.deadline_s, Order.SERVER)
        return self._slot_close(k, t)

    def _busy(self) -> np.ndarray:
        if not self.closed:
            return super()._busy()
        return np.flatnonzero(self._on).astype(np.int32)

    def _start_all(self, starting: np.ndarray, at_s: float) -> None:
        if not self.closed:
            super()._start_all(starting, at_s)
            return
        sl = self._tick
        assert sl is not None
        cyc = self._new_cycles(starting, np.full(len(starting), at_s), sl.uploads)
        m = len(starting)
        cyc["key"] = self._next_key + np.arange(m, dtype=np.int64)
        cyc["version"] = np.full(m, self.version, dtype=np.int64)
        self._next_key += m
        for name in _KEPT:
            self._c[name][starting] = cyc[name]
        self._on[starting] = True
        self._seq[starting] = cyc["key"]
        if not self._null:
            for n, key, sample in zip(starting.tolist(), cyc["key"].tolist(),
                                      cyc["sample_key"].tolist(), strict=True):  # fmt: skip
                self._learner_start(key, n, sample, sl.slot)

    def _learner_start(self, key: int, n: int, sample_key: int, slot: int) -> None:
        self.versioned.start_update(key, n, sample_key, slot)
        st = self.stats
        st.max_versions_kept = max(st.max_versions_kept, int(self.versioned.versions_kept))

    def resume(self) -> None:
        """Nothing goes back on the clock: the cycles in flight are arrays."""
        if not self.closed:
            super().resume()

    # ------------------------------------------------------------------ cycles

    def _new_cycles(self, devs: np.ndarray, at_s: np.ndarray, up: SlotUploads) -> dict[str, Any]:
        """The cycles devices ``devs`` (distinct) start at ``at_s`` on ``up``: every field but
        the key and the version (:meth:`StaleServer._start`, vectorised)."""
        eng = self.host
        sl, fr = self._tick, eng.frame
        assert sl is not None and fr is not None
        if self._async:
            sample = self._cycles_started[devs].copy()
            need = fr.costs.compute_s[devs]
            energy_c = fr.costs.compute_energy_j[devs]
        else:
            sample = np.full(len(devs), sl.slot, dtype=np.int64)
            need = sl.costs.compute_s[devs]
            energy_c = sl.costs.compute_energy_j[devs]
        self._cycles_started[devs] += 1
        upload_full = up.upload_full_s[devs]
        p = up.tx_power_w[devs]
        compute_end = at_s + need
        end = on_boundary(compute_end + upload_full, eng.system.deadline_s, at_s)
        cells = eng.cells
        edge = (
            np.full(len(devs), -1, dtype=np.int64)
            if eng.hierarchy is None or cells is None
            else cells.serving[devs].astype(np.int64)
        )
        return {
            "device": devs,
            "edge": edge,
            "sample_key": sample,
            "slot": np.full(len(devs), sl.slot, dtype=np.int64),
            "start_s": at_s,
            "compute_end_s": np.minimum(compute_end, end),
            "end_s": end,
            "tx_power_w": p,
            "compute_s": need,
            "upload_s": upload_full,
            "energy_compute_j": energy_c,
            "energy_upload_j": rates.upload_energy_j(p, upload_full),
            "channel_gain": up.channel_gain[devs],
            "payload_bits": up.payload_bits[devs],
            "upload_full_s": upload_full,
        }

    def _play_cycles(self, k: int, t: int) -> None:
        """The slot's cycles in closed form (the module docstring): times, order, versions,
        then the rows, the tally, the learner's calls and the cycles left in flight."""
        eng = self.host
        sl = self._tick
        assert sl is not None
        tau = eng.system.deadline_s
        start, end = float(eng.clock.now), (t + 1) * tau
        up = sl.uploads
        # 1. times: round 0 (in flight), then the restarts, round by round
        devs0 = np.flatnonzero(self._on)
        rounds = [{"device": devs0, **{name: self._c[name][devs0] for name in _KEPT}}]
        parents: list[np.ndarray] = []  # per round >= 1: its cycles' parents (all rounds' index)
        offset = 0
        while self._async:
            cur = rounds[-1]
            again = (cur["end_s"] < end) & up.participating[cur["device"]]
            if not again.any():
                break
            nxt = self._new_cycles(cur["device"][again], cur["end_s"][again], up)
            nxt["key"] = np.zeros(len(nxt["device"]), dtype=np.int64)  # in the order they start
            nxt["version"] = np.zeros(len(nxt["device"]), dtype=np.int64)  # step 3
            parents.append(offset + np.flatnonzero(again))
            offset += len(cur["device"])
            rounds.append(nxt)
        cyc = {name: np.concatenate([r[name] for r in rounds]) for name in rounds[0]}
        dev, ce, fin = cyc["device"], cyc["compute_end_s"], cyc["end_s"]
        n_cyc = len(dev)
        # 2. order: compute ends, arrivals, restarts in (S, E]
        ce_i = np.flatnonzero((ce > start) & (ce <= end) & (ce < fin))
        end_i = np.flatnonzero(fin <= end)
        parent = np.concatenate(parents) if parents else np.zeros(0, dtype=np.int64)
        rst_i = np.arange(len(devs0), n_cyc)  # the restarted cycles, at their parents' ends
        time = np.concatenate([ce[ce_i], fin[end_i], fin[parent]])
        order = np.concatenate([np.full(len(ce_i) + len(end_i), int(Order.DEVICE)),
                                np.full(len(rst_i), int(Order.RESTART))])  # fmt: skip
        kind = np.concatenate([np.full(len(ce_i), _K_CE), np.full(len(end_i), _K_END),
                               np.full(len(rst_i), _K_RST)])  # fmt: skip
        which = np.concatenate([ce_i, end_i, rst_i])
        ev_dev = dev[which]
        srt = np.lexsort((ev_dev, order, time))
        time, kind, which, ev_dev = time[srt], kind[srt], which[srt], ev_dev[srt]
        # restarts' keys: in the order they start
        rst_at = kind == _K_RST
        cyc["key"][which[rst_at]] = self._next_key + np.arange(int(rst_at.sum()), dtype=np.int64)
        self._next_key += int(rst_at.sum())
        # 3. versions
        is_end = kind == _K_END
        v0, b0 = self.version, len(self._buf["device"])
        limit = self.config.max_staleness
        if not self._async:  # one version all slot long; no learner call until its end
            v_seen = np.full(int(is_end.sum()), v0, dtype=np.int64)
            ok = np.ones(len(v_seen), dtype=bool)
            if limit is not None:
                ok = v0 - cyc["version"][which[is_end]] <= limit
            flush = np.zeros(len(v_seen), dtype=bool)
        elif limit is None and self._null:
            size = self.config.buffer_size
            before = np.cumsum(is_end) - is_end  # arrivals before each event
            cyc["version"][which[rst_at]] = v0 + (b0 + before[rst_at]) // size
            arrivals = before[is_end]
            v_seen = v0 + (b0 + arrivals) // size
            ok = np.ones(len(arrivals), dtype=bool)
            flush = (b0 + arrivals + 1) % size == 0
        else:
            v_seen, ok, flush = self._sequence(t, kind, which, cyc)
        stal = v_seen - cyc["version"][which[is_end]]
        flush_v = v_seen + 1
        # the buffer: what entered it before the slot and now, the flushes take from its front
        entered = which[is_end][ok]
        n_flush = int(flush.sum())
        size = self.config.buffer_size if self._async else 0
        taken = n_flush * size
        old_stal = v0 - self._buf["version"]
        stal_ok = stal[ok]
        st = self.stats
        st.server_steps += n_flush
        st.updates_applied += taken
        st.successes += taken
        st.staleness_sum += int(old_stal[:taken].sum()) + int(stal_ok[: max(taken - b0, 0)].sum())
        st.stale_discarded += int((~ok).sum())
        self.version = v0 + n_flush
        if taken:  # the flushes apply the buffer's first ``taken``
            self.count_by_edge(
                np.concatenate([self._buf["device"], cyc["device"][entered]])[:taken],
                np.concatenate([self._buf["edge"], cyc["edge"][entered]])[:taken],
            )
        self._buf = self._buffer_after(cyc, entered, taken)
        # rows, tally, what stays in flight
        self._rows(k, t, time, kind, which, ev_dev, cyc, stal, ok, flush, flush_v)
        self._add_tally(cyc, which[is_end], ok)
        ended = dev[end_i]
        self._on[ended] = False
        left = np.flatnonzero(fin > end)
        left = left[left >= len(devs0)]  # restarted cycles still in flight
        ld = dev[left]
        for name in _KEPT:
            self._c[name][ld] = cyc[name][left]
        self._on[ld] = True
        self._seq[ld] = cyc["key"][left]

    def _sequence(
        self, t: int, kind: np.ndarray, which: np.ndarray, cyc: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Arrivals and restarts one by one in the clock's order: per arrival the version it
        sees, whether it enters the buffer and whether the buffer is applied after it; the
        restarts' versions and, for a learner that keeps versions, its calls."""
        limit = self.config.max_staleness
        size = self.config.buffer_size
        version = cyc["version"]
        v, b = self.version, len(self._buf["device"])
        ends = int((kind == _K_END).sum())
        v_seen = np.zeros(ends, dtype=np.int64)
        ok = np.zeros(ends, dtype=bool)
        flush = np.zeros(ends, dtype=bool)
        learner = None if self._null else self.versioned
        flight: dict[int, tuple[int, int]] = {}  # device -> (key, version), the clock's order
        pending: list[tuple[int, int, int]] = []  # the buffer: (device, key, version)
        if learner is not None:
            devs0 = np.flatnonzero(self._on)
            for i in np.argsort(self._seq[devs0], kind="stable").tolist():
                n = int(devs0[i])
                flight[n] = (int(self._c["key"][n]), int(self._c["version"][n]))
            buf = self._buf
            pending = list(zip(buf["device"].tolist(), buf["key"].tolist(),
                               buf["version"].tolist(), strict=True))  # fmt: skip
        dev, key, sample = cyc["device"], cyc["key"], cyc["sample_key"]
        a = 0
        for kd, c in zip(kind.tolist(), which.tolist(), strict=True):
            if kd == _K_RST:
                version[c] = v
                if learner is not None:
                    n = int(dev[c])
                    self._learner_start(int(key[c]), n, int(sample[c]), t)
                    flight[n] = (int(key[c]), v)
                continue
            if kd != _K_END:
                continue
            s = v - int(version[c])
            v_seen[a] = v
            if learner is not None:
                del flight[int(dev[c])]
            if limit is None or s <= limit:
                ok[a] = True
                b += 1
                if learner is not None:
                    pending.append((int(dev[c]), int(key[c]), int(version[c])))
                if b == size:
                    flush[a] = True
                    b = 0
                    if learner is not None:
                        self._learner_flush(t, v, pending, flight)
                        pending = []
                    v += 1
            a += 1
        return v_seen, ok, flush

    def _learner_flush(
        self, t: int, v: int, pending: list[tuple[int, int, int]], flight: dict[int, Any]
    ) -> None:
        """The learner's calls of a flush at version ``v`` (:meth:`StaleServer._apply`)."""
        buf = sorted(pending, key=lambda e: (e[0], e[1]))
        staleness = np.array([v - e[2] for e in buf], dtype=np.int64)
        keys = np.array([e[1] for e in buf], dtype=np.int64)
        self.versioned.apply_updates(t, keys, self.config.weight(staleness), self.config.server_lr)
        limit = self.config.max_staleness
        if limit is not None:  # made too stale by this step (the older ones by an earlier one)
            for key, version in flight.values():
                if v + 1 - version == limit + 1:
                    self.versioned.drop_update(key)

    def _buffer_after(
        self, cyc: dict[str, np.ndarray], entered: np.ndarray, taken: int
    ) -> dict[str, np.ndarray]:
        """The buffer after the slot: the one before it and the admitted arrivals, less the
        ``taken`` first (applied)."""
        new = self._records(cyc, entered, uploading=None)
        new["discarded"][:] = False  # admitted
        return {name: np.concatenate([self._buf[name], new[name]])[taken:] for name in new}

    def _records(
        self, cyc: dict[str, np.ndarray], idx: np.ndarray, uploading: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        """Cycles ``idx`` of ``cyc`` as :func:`cycle_records` (``uploading`` None: those that
        ended, computed iff their compute ended first)."""
        m = len(idx)
        out: dict[str, np.ndarray] = {
            name: np.asarray(cyc[name][idx], dtype=_FIELD_DTYPES[name]) for name in _KEPT
        }
        out["device"] = np.asarray(cyc["device"][idx], dtype=np.int64)
        out["dropped"] = np.zeros(m, dtype=bool)
        if uploading is None:
            uploading = out["compute_end_s"] < out["end_s"]
        out["uploading"] = uploading
        limit = self.config.max_staleness
        out["discarded"] = (
            np.zeros(m, dtype=bool) if limit is None else self.version - out["version"] > limit
        )
        out["offline_s"] = np.full(m, np.inf)
        out["landing"] = np.zeros(m, dtype=bool)
        return {name: out[name] for name in _CYCLE_FIELDS}

    def _add_tally(self, cyc: dict[str, np.ndarray], idx: np.ndarray, ok: np.ndarray) -> None:
        """The arrivals ``idx`` (in time order) into the slot's tally, per device in order."""
        tally = self._tally
        tally.cycles += len(idx)
        dev = cyc["device"][idx]
        # per device, its arrivals in time order: layer j holds each device's j-th
        srt = np.argsort(dev, kind="stable")
        first = np.searchsorted(dev[srt], dev[srt], side="left")
        layer = np.empty(len(idx), dtype=np.int64)
        layer[srt] = np.arange(len(idx)) - first
        energy_c, energy_u = cyc["energy_compute_j"][idx], cyc["energy_upload_j"][idx]
        for j in range(int(layer.max()) + 1 if len(idx) else 0):
            at = layer == j
            n = dev[at]
            tally.ended[n] = True
            tally.success[n] |= ok[at]
            tally.tx_power_w[n] = cyc["tx_power_w"][idx[at]]
            tally.edge[n] = cyc["edge"][idx[at]]
            tally.compute_s[n] += cyc["compute_s"][idx[at]]
            tally.upload_s[n] += cyc["upload_s"][idx[at]]
            tally.energy_compute_j[n] += energy_c[at]
            tally.energy_upload_j[n] += energy_u[at]
            lost = at & ~ok
            tally.wasted_energy_j[dev[lost]] += energy_c[lost] + energy_u[lost]

    def _rows(
        self,
        k: int,
        t: int,
        time: np.ndarray,
        kind: np.ndarray,
        which: np.ndarray,
        ev_dev: np.ndarray,
        cyc: dict[str, np.ndarray],
        stal: np.ndarray,
        ok: np.ndarray,
        flush: np.ndarray,
        flush_v: np.ndarray,
    ) -> None:
        """The slot's device rows, one block in the clock's order."""
        rec = self._record
        is_end = kind == _K_END
        # rows per event: compute_end + upload_start; upload_end, stale, flush; decision
        e_ok, e_flush = np.ones(len(kind), dtype=bool), np.zeros(len(kind), dtype=bool)
        e_ok[is_end], e_flush[is_end] = ok, flush
        per = np.where(kind == _K_CE, 2 if rec else 0, np.where(kind == _K_RST, int(rec), 0))
        per = per + is_end * (int(rec) + ~e_ok + e_flush)
        total = int(per.sum())
        if total == 0:
            return
        first = np.cumsum(per) - per
        ev = np.repeat(np.arange(len(kind)), per)
        sub = np.arange(total) - first[ev]  # the row's rank within its event
        k_of, c_of = kind[ev], which[ev]
        code = np.empty(total, dtype=np.int8)
        ce_row = k_of == _K_CE
        code[ce_row] = np.where(sub[ce_row] == 0, _CE, _US)
        code[k_of == _K_RST] = _DECISION
        end_row = k_of == _K_END
        # an arrival's rows: upload_end (events level), stale (not admitted), flush (applied)
        r = sub[end_row] + (0 if rec else 1)
        okr = e_ok[ev[end_row]]
        code[end_row] = np.where(r == 0, _UE, np.where((r == 1) & ~okr, _STALE, _FLUSH))
        cols: dict[str, np.ndarray] = {}

        def col(name: str, dtype: Any, rows: np.ndarray, values: Any) -> None:
            if name not in cols:
                cols[name] = np.ma.MaskedArray(np.zeros(total, dtype), mask=np.ones(total, bool))
            cols[name][rows] = values

        version = cyc["version"][c_of]
        i_end = np.cumsum(is_end) - 1  # an event's arrival index
        a_of = i_end[ev]
        is_ue, is_st, is_fl = code == _UE, code == _STALE, code == _FLUSH
        is_ce, is_us, is_dec = code == _CE, code == _US, code == _DECISION
        col("device", np.int32, ~is_fl, ev_dev[ev][~is_fl])
        col("compute_s", np.float64, is_ce, cyc["compute_s"][c_of[is_ce]])
        power = is_us | is_ue
        col("tx_power_w", np.float64, power, cyc["tx_power_w"][c_of[power]])
        mv = ~is_fl
        col("model_version", np.int64, mv, version[mv])
        col("model_version", np.int64, is_fl, flush_v[a_of[is_fl]])
        col("n_success", np.int32, is_fl, self.config.buffer_size)
        if rec:
            col("upload_s", np.float64, is_ue, cyc["upload_s"][c_of[is_ue]])
            col("success", np.bool_, is_ue, ok[a_of[is_ue]])
            col("energy_upload_j", np.float64, is_ue, cyc["energy_upload_j"][c_of[is_ue]])
            weighted = is_ue & e_ok[ev]
            col("staleness_weight", np.float64, weighted,
                self.config.weight(stal[a_of[weighted]]))  # fmt: skip
        stale_of = is_ue | is_st
        col("staleness", np.int64, stale_of, stal[a_of[stale_of]])
        if rec and self.host.hierarchy is not None:
            col("edge", np.int32, is_ue, cyc["edge"][c_of[is_ue]])
        if rec and is_dec.any():
            self._decision_cols(col, is_dec, c_of[is_dec], cyc)
        self.host.buffer.add(code, time[ev], k, t, cols.pop("device"), **cols)

    def _decision_cols(
        self, col: Any, rows: np.ndarray, c: np.ndarray, cyc: dict[str, Any]
    ) -> None:
        """A restart's ``decision`` row (:meth:`StaleServer._restart`)."""
        eng = self.host
        sl, fr = self._tick, eng.frame
        assert sl is not None and fr is not None
        up, n = sl.uploads, cyc["device"][c]
        col("tx_power_w", np.float64, rows, up.tx_power_w[n])
        col("participating", np.bool_, rows, True)
        col("channel_gain", np.float64, rows, up.channel_gain[n])
        col("payload_bits", np.float64, rows, up.payload_bits[n])
        col("upload_s", np.float64, rows, up.upload_full_s[n])
        col("gamma", np.float64, rows, fr.plan.gamma[n])
        if eng.selection.active:
            col("selected", np.bool_, rows, True)

    # ------------------------------------------------------------------ semi_sync's step

    def _apply(self, k: int, t: int) -> None:
        """The server applies its buffer (``semi_sync``, at the slot's end)."""
        if not self.closed:
            super()._apply(k, t)
            return
        buf = self._buf
        self._buf = cycle_records([])
        order = np.lexsort((buf["key"], buf["device"]))
        staleness = self.version - buf["version"][order]
        weights = self.config.weight(staleness)
        self.versioned.apply_updates(t, buf["key"][order], weights, self.config.server_lr)
        self.count_by_edge(buf["device"][order], buf["edge"][order])
        self.version += 1
        st = self.stats
        st.server_steps += 1
        st.updates_applied += len(order)
        st.successes += len(order)
        st.staleness_sum += int(staleness.sum())
        now = self.host.clock.now
        self.host.buffer.add("flush", now, k, t, n_success=len(order), model_version=self.version)
        limit = self.config.max_staleness
        if limit is not None and not self._null:  # made too stale by this step
            devs = np.flatnonzero(self._on)
            devs = devs[np.argsort(self._seq[devs], kind="stable")]
            for n in devs[self.version - self._c["version"][devs] == limit + 1].tolist():
                self.versioned.drop_update(int(self._c["key"][n]))

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """:meth:`StaleServer.state_dict`, the same representation."""
        if not self.closed:
            return super().state_dict()
        devs = np.flatnonzero(self._on)
        cyc = {name: self._c[name] for name in _KEPT}
        cyc["device"] = np.arange(len(self._on))
        now = float(self.host.clock.now)
        ce, fin = self._c["compute_end_s"][devs], self._c["end_s"][devs]
        return {
            "version": self.version,
            "next_key": self._next_key,
            "cycles_started": self._cycles_started.copy(),
            "cycles": self._records(cyc, devs, uploading=(ce < fin) & (ce <= now)),
            "buffer": {name: v.copy() for name, v in self._buf.items()},
        }

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """:meth:`StaleServer.load_state_dict`; in closed form, the cycles as arrays."""
        super().load_state_dict(state)
        if not self.closed:
            return
        n_dev = len(self._on)
        self._on[:] = False
        for c in self._cycles.values():
            n = c.device
            self._on[n] = True
            for name in _KEPT:
                self._c[name][n] = getattr(c, name)
            self._seq[n] = n - n_dev  # a resumed run's cycles come first, by device
        self._cycles = {}
        self._buf = cycle_records(self._buffer)
        self._buffer = []
