"""The uplink of several cells (``[cells]``, docs/cells.md): each cell shares its band its own way
(``dedicated``, ``ofdma``, ``tdma``) and uploads in cells on one band interfere, as a
:class:`~wflsim.sim.radio.shared.SharedUplink` (per slot or for a whole run).

Every upload in flight, in every cell, is one job of one
:class:`~wflsim.sim.radio.sharing.ProcessorSharing`, whose rate model gives each its rate from
the set in flight: ``r = b log2(1 + p h / ((N0' + I') b))`` with ``b`` its band (``W`` on a
dedicated band or under TDMA, ``W / k_c`` under OFDMA with ``k_c`` uploads in flight in its
cell), ``N0'`` the noise spectral density and ``I'`` the interference spectral density at its
base station: every upload ``m`` in flight in another cell on the same band adds
``p_m g[m, v] / B_a``, its received power at the victim's site spread over the spectrum its cell
``a`` occupies (``B_a = W`` under OFDMA and TDMA; ``n_a W`` for ``n_a`` devices on dedicated
bands of ``W`` each): the mean over a random placement of sub-bands, exact for TDMA. Whenever an
upload starts or ends anywhere, every rate is recomputed (the interacting events of the issue:
a rate changes when an upload in another cell starts or ends). A TDMA cell keeps its queue and
puts one upload at a time into the sharing.

An upload's cell and its gains to every site are those of the moment it joins the uplink
(:class:`~wflsim.sim.radio.cells.component.Cells`' current slot), and stay with it until it ends.

What each upload heard goes to the trace (:meth:`CellularUplink.trace_columns`): the
interference power in its band at its base station and its SINR, over the time it transmitted
(:func:`upload_link_columns`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import simpy
from numpy.typing import NDArray

from ... import fmath
from ...world.system import SystemConstants
from ..rates import noise_psd_w_per_hz, shared_rate_bps
from ..shared import SharedUplink
from ..sharing import ProcessorSharing
from ..spec import UplinkSpec
from .component import Cells

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: The trace columns of an upload in several cells (:func:`upload_link_columns`).
LINK_COLUMNS = ("sinr_db", "interference_w")


def upload_link_columns(
    interference_ws: F64, spectral_s: F64, transmitted_s: F64
) -> dict[str, np.ma.MaskedArray]:
    """The trace's columns of uploads that interference may have slowed, ``(N,)`` each, masked
    where a device transmitted for no time (or has no upload).

    An upload's interference and SINR change whenever an upload starts or ends in a cell on its
    band (and its band, under OFDMA); over its transmission time ``T`` they are summarised as

    * ``interference_w = (1/T) integral I(t) dt``: the mean interference power at its serving
      site in the band it used, W;
    * ``sinr_db = 10 log10(2^((1/T) integral log2(1 + SINR(t)) dt) - 1)``: the constant SINR
      that gives its mean spectral efficiency (the SINR itself wherever it was constant), dB.

    Args:
        interference_ws: ``(N,)`` ``integral I(t) dt`` over each upload, W s.
        spectral_s: ``(N,)`` ``integral log2(1 + SINR(t)) dt`` over each upload, s (bit/Hz s).
        transmitted_s: ``(N,)`` ``T``, s.
    """
    t = np.asarray(transmitted_s, dtype=np.float64)
    has = t > 0.0
    safe = np.where(has, t, 1.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sinr = fmath.expm1(np.asarray(spectral_s) / safe * fmath.log(2.0))
        sinr_db = 10.0 * fmath.log10(np.where(has, sinr, 1.0))
    return {
        "sinr_db": np.ma.MaskedArray(np.where(has, sinr_db, 0.0), mask=~has),
        "interference_w": np.ma.MaskedArray(
            np.where(has, np.asarray(interference_ws) / safe, 0.0), mask=~has
        ),
    }


class CellularUplink(SharedUplink):
    """The uplinks of a run's cells with inter-cell interference (module docstring).

    Args:
        cells: the run's cells (their layout; each device's cell and gains to every site).
        bandwidth_hz: ``W``, Hz.
        noise_w: the noise power over ``W``, W.
        upload_start, upload_end: the trace's event codes the log uses.
        order: a TDMA cell's queue (``fcfs`` or ``edf``).
    """

    #: interference can slow any upload: no closed-form bound on its time
    bounded: ClassVar[bool] = False
    #: an OFDMA cell shares its band
    shares_band: ClassVar[bool] = True

    def __init__(
        self,
        cells: Cells,
        bandwidth_hz: float,
        noise_w: float,
        upload_start: int,
        upload_end: int,
        order: str = "fcfs",
    ) -> None:
        super().__init__(bandwidth_hz, noise_w, upload_start, upload_end)
        self.cells = cells
        self.order = order
        lay = cells.layout
        self._mode = np.array([{"dedicated": 0, "ofdma": 1, "tdma": 2}[m] for m in lay.modes])
        self._co = lay.co_band.astype(np.float64)  # (C, C): [a, v] a interferes at v
        self._num_cells = lay.num_cells
        n = cells.num_devices
        self._cell = np.zeros(n, dtype=np.int64)
        self._g = np.zeros((n, lay.num_cells))
        self._heard_since = 0.0
        self._reset_heard(n, 0.0)

    # ------------------------------------------------------------------ the rate model

    def _spread_hz(self) -> F64:
        """``(C,)`` the spectrum each cell's uploads spread over, Hz."""
        w = self.bandwidth_hz
        dedicated = self._mode == 0
        return np.where(dedicated, np.maximum(self.cells.load, 1) * w, w)

    def interference_psd(self, jobs: I64) -> F64:
        """``(C,)`` the interference spectral density at each site from the uploads ``jobs`` in
        flight, W/Hz."""
        c = self._num_cells
        if not self._co.any() or jobs.shape[0] == 0:
            return np.zeros(c)
        cell = self._cell[jobs]
        rx = self._p[jobs, None] * self._g[jobs] / self._spread_hz()[cell][:, None]  # (k, C)
        per_cell = np.zeros((c, c))  # [a, v]: from cell a's uploads at site v
        for v in range(c):
            per_cell[:, v] = np.bincount(cell, weights=rx[:, v], minlength=c)
        return np.asarray((per_cell * self._co).sum(axis=0))

    def _rates(self, jobs: I64) -> F64:
        cell = self._cell[jobs]
        k = np.bincount(cell, minlength=self._num_cells)
        band = np.where(self._mode[cell] == 1, self.bandwidth_hz / k[cell], self.bandwidth_hz)
        interference = self.interference_psd(jobs)[cell]
        psd = self._psd + interference
        # what each upload hears from now on (the trace's columns): the set in flight changed
        self._accumulate()
        self._live[:] = False
        self._live[jobs] = True
        self._heard_w[jobs] = interference * band
        with np.errstate(divide="ignore", invalid="ignore"):
            snr = self._p[jobs] * self._h[jobs] / (psd * band)
        self._efficiency[jobs] = fmath.log1p(snr) / fmath.log(2.0)
        return shared_rate_bps(self._p[jobs], self._h[jobs], band, psd, self.rate_model)

    def _accumulate(self) -> None:
        """Add what the uploads in flight heard since the last change to their integrals."""
        now = self._now()
        live = self._live
        dt = now - self._heard_since
        self._interference_ws[live] += self._heard_w[live] * dt
        self._spectral_s[live] += self._efficiency[live] * dt
        self._heard_since = now

    def _reset_heard(self, n: int, now_s: float) -> None:
        """Nothing heard yet by ``n`` devices' uploads, as of ``now_s`` (s)."""
        self._live = np.zeros(n, dtype=bool)
        self._heard_w, self._efficiency = np.zeros(n), np.zeros(n)
        self._interference_ws, self._spectral_s = np.zeros(n), np.zeros(n)
        self._heard_since = now_s
        #: the integrals and time of each device's latest upload that ended (or left)
        self._last = (np.zeros(n), np.zeros(n), np.zeros(n))

    def _keep_last(self, device: int) -> None:
        """``device``'s upload has ended or left: keep what it heard for its rows."""
        ws, spectral, t = self._last
        ws[device] = self._interference_ws[device]
        spectral[device] = self._spectral_s[device]
        t[device] = self.transmitted_s[device]

    def _begin(self, device: int) -> None:
        super()._begin(device)
        self._interference_ws[device] = self._spectral_s[device] = 0.0

    def _end(self, device: int, arrived: bool) -> None:
        if self._live[device]:  # a cut: it heard the last interval too
            self._accumulate()
            self._live[device] = False
        now = self._now()
        self.transmitted_s[device] = now - self._began[device]
        self._keep_last(device)
        super()._end(device, arrived)

    def withdraw(self, device: int, at_s: float) -> bool:
        """:meth:`SharedUplink.withdraw`; what it heard until now stays for its ``dropped``
        row."""
        if self._live[device]:
            self._accumulate()
        left = super().withdraw(device, at_s)
        if left:
            self._live[device] = False
            self._keep_last(device)
        return left

    def trace_columns(self) -> dict[str, np.ma.MaskedArray]:
        """``sinr_db`` and ``interference_w`` of the devices' latest uploads
        (:func:`upload_link_columns`), ``(N,)`` each, masked where a device transmitted for no
        time."""
        return upload_link_columns(*self._last)

    def upload_columns(self, device: int) -> dict[str, Any]:
        """The same for ``device``'s latest upload, as scalars ({} if it transmitted for no
        time)."""
        cols = upload_link_columns(*(a[device : device + 1] for a in self._last))
        if np.ma.getmaskarray(cols["sinr_db"])[0]:
            return {}
        return {k: float(v[0]) for k, v in cols.items()}

    # ------------------------------------------------------------------ the discipline

    def _open(self) -> None:
        assert self.env is not None
        self._psd = float(noise_psd_w_per_hz(self.noise_w, self.bandwidth_hz))
        self.sharing = ProcessorSharing(self.env, self._rates, self._complete)
        self._queue: list[list[tuple[float, float, int]]] = [[] for _ in range(self._num_cells)]
        self._active = np.full(self._num_cells, -1, dtype=np.int64)
        self._pick_pending = np.zeros(self._num_cells, dtype=bool)
        self._reset_heard(self._p.shape[0], self._now())
        if not self.continuous:  # a slot: every upload of it has the cells' current gains
            self._cell = self.cells.serving.copy()
            self._g = self.cells.slot_gain.copy()

    def _enter(self, device: int) -> None:
        if self.continuous:  # an upload brings its cell and gains of now
            self._cell[device] = self.cells.serving[device]
            self._g[device] = self.cells.slot_gain[device]
        c = int(self._cell[device])
        if self._mode[c] != 2:
            self._begin(device)
            self.sharing.add(device, float(self._bits[device]))
            return
        if self.order != "edf":
            due = 0.0
        elif self.continuous:
            due = float(self._target_s[device])
        else:
            due = self._start_s + self._deadline_s
        heapq.heappush(self._queue[c], (due, self._now(), device))
        self._want_pick(c)

    def _want_pick(self, c: int, at_once: bool = False) -> None:
        """Cell ``c``'s band goes to its queue's first once every event of this instant has
        run (as :class:`~wflsim.sim.radio.tdma.TdmaUplink`)."""
        if self._active[c] >= 0 or self._pick_pending[c] or not self._queue[c]:
            return
        if self.continuous:
            if at_once or self._later is None:
                self._serve_next(c)
            else:
                self._pick_pending[c] = True
                self._later(lambda: self._pick_later(c))
            return
        assert self.env is not None
        self._pick_pending[c] = True
        self.env.timeout(0.0).callbacks.append(lambda _e: self._pick(c))

    def _pick(self, c: int) -> None:
        self._pick_pending[c] = False
        if self._closed or self._active[c] >= 0 or not self._queue[c]:
            return
        self._serve_next(c)

    def _pick_later(self, c: int) -> None:
        self._pick_pending[c] = False
        if self._active[c] < 0 and self._queue[c]:
            self._serve_next(c)

    def _serve_next(self, c: int) -> None:
        _, _, device = heapq.heappop(self._queue[c])
        self._begin(device)
        self._active[c] = device
        self.sharing.add(device, float(self._bits[device]))

    def _complete(self, device: int) -> None:
        c = int(self._cell[device])
        self._end(device, True)
        if self._active[c] == device:
            self._active[c] = -1
            self._want_pick(c, at_once=True)

    def _leave(self, device: int) -> bool:
        c = int(self._cell[device])
        for i, entry in enumerate(self._queue[c]):
            if entry[2] == device:
                self._queue[c].pop(i)
                heapq.heapify(self._queue[c])
                return True
        if not self.sharing.remove(device):
            return False
        if self._active[c] == device:
            self._active[c] = -1
            self._want_pick(c)
        return True

    def _cut(self) -> None:
        self._accumulate()
        jobs, ends = self.sharing.cut()
        self._active[:] = -1
        for d, end in zip(jobs.tolist(), ends.tolist(), strict=True):
            self._end(d, self.in_time(end))
        for queue in self._queue:
            while queue:
                _, _, device = heapq.heappop(queue)
                self._begin(device)
                self._end(device, False)

    def _inside(self) -> I64:
        waiting = [e[2] for q in self._queue for e in q]
        return np.array(sorted([*waiting, *self.sharing.in_flight.tolist()]), dtype=np.int64)

    def _settle(self, until_s: float) -> None:
        self.sharing.settle(until_s)

    # ------------------------------------------------------------------ state (continuous)

    def _state(self) -> dict[str, Any]:
        if self._pick_pending.any():
            raise RuntimeError("a TDMA turn is being decided at this instant: no state now")
        inside = self._inside()
        queue = sorted((e[2], e[0], e[1]) for q in self._queue for e in q)
        return {
            "sharing": self.sharing.state_dict(),
            "cell": self._cell[inside].copy(),
            "site_gain": self._g[inside].copy(),
            "active": self._active.copy(),
            "queue_device": np.array([e[0] for e in queue], dtype=np.int64),
            "queue_key": np.array([e[1] for e in queue], dtype=np.float64),
            "queue_ready_s": np.array([e[2] for e in queue], dtype=np.float64),
            **self._heard_state(inside),
        }

    def _heard_state(self, inside: I64) -> dict[str, Any]:
        """What the uploads ``inside`` heard so far and hear now (the trace's columns)."""
        return {
            "heard_since_s": self._heard_since if inside.shape[0] else 0.0,
            "heard_live": self._live[inside].copy(),
            "heard_w": self._heard_w[inside].copy(),
            "heard_efficiency": self._efficiency[inside].copy(),
            "interference_ws": self._interference_ws[inside].copy(),
            "spectral_s": self._spectral_s[inside].copy(),
        }

    def _idle_state(self) -> dict[str, Any]:
        nothing = np.zeros(0)
        return {
            "sharing": ProcessorSharing.idle_state(),
            "cell": np.zeros(0, dtype=np.int64),
            "site_gain": np.zeros((0, self._num_cells)),
            "active": np.full(self._num_cells, -1, dtype=np.int64),
            "queue_device": np.zeros(0, dtype=np.int64),
            "queue_key": nothing,
            "queue_ready_s": nothing,
            **self._heard_state(np.zeros(0, dtype=np.int64)),
        }

    def _load(self, state: dict[str, Any], schedule_at: Callable[[float], simpy.Event]) -> None:
        inside = np.asarray(state["device"], dtype=np.int64)
        cell = np.asarray(state["cell"], dtype=np.int64)
        gain = np.asarray(state["site_gain"], dtype=np.float64)
        if cell.shape != inside.shape or gain.shape != (inside.shape[0], self._num_cells):
            raise ValueError("uplink state: cells and site gains are not its uploads'")
        self._cell[inside], self._g[inside] = cell, gain
        if "heard_live" in state:  # a checkpoint of a version that kept them
            self._heard_since = float(state["heard_since_s"])
            self._live[inside] = np.asarray(state["heard_live"], dtype=bool)
            self._heard_w[inside] = np.asarray(state["heard_w"], dtype=np.float64)
            self._efficiency[inside] = np.asarray(state["heard_efficiency"], dtype=np.float64)
            self._interference_ws[inside] = np.asarray(state["interference_ws"], dtype=np.float64)
            self._spectral_s[inside] = np.asarray(state["spectral_s"], dtype=np.float64)
        self._active = np.asarray(state["active"], dtype=np.int64).copy()
        devices = np.asarray(state["queue_device"], dtype=np.int64).tolist()
        keys = np.asarray(state["queue_key"], dtype=np.float64).tolist()
        ready = np.asarray(state["queue_ready_s"], dtype=np.float64).tolist()
        self._queue = [[] for _ in range(self._num_cells)]
        for d, k, r in zip(devices, keys, ready, strict=True):
            self._queue[int(self._cell[d])].append((k, r, d))
        for q in self._queue:
            heapq.heapify(q)
        self._pick_pending[:] = False
        waiting = sorted([*devices, *np.asarray(state["sharing"]["jobs"]).tolist()])
        if waiting != inside.tolist():
            raise ValueError("uplink state: the queues and the sharing are not its uploads")
        self.sharing.load_state_dict(state["sharing"], schedule_at)


def cellular_uplink(
    spec: UplinkSpec,
    system: SystemConstants,
    upload_start: int,
    upload_end: int,
    cells: Cells | None,
) -> CellularUplink | None:
    """The uplink of a digital mode's cells: :class:`CellularUplink` where their uploads
    interact (a cell shares its band, or two cells share one), else None (no cells, or cells on
    dedicated bands of their own: the closed form)."""
    if cells is None or not cells.layout.interacts:
        return None
    link = CellularUplink(
        cells, system.bandwidth_hz, system.noise_w, upload_start, upload_end, spec.order
    )
    link.rate_model = system.rate_model
    return link
