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
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import simpy
from numpy.typing import NDArray

from ...world.system import SystemConstants
from ..rates import noise_psd_w_per_hz, shared_rate_bps
from ..shared import SharedUplink
from ..sharing import ProcessorSharing
from ..spec import UplinkSpec
from .component import Cells

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


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
        psd = self._psd + self.interference_psd(jobs)[cell]
        return shared_rate_bps(self._p[jobs], self._h[jobs], band, psd, self.rate_model)

    # ------------------------------------------------------------------ the discipline

    def _open(self) -> None:
        assert self.env is not None
        self._psd = float(noise_psd_w_per_hz(self.noise_w, self.bandwidth_hz))
        self.sharing = ProcessorSharing(self.env, self._rates, self._complete)
        self._queue: list[list[tuple[float, float, int]]] = [[] for _ in range(self._num_cells)]
        self._active = np.full(self._num_cells, -1, dtype=np.int64)
        self._pick_pending = np.zeros(self._num_cells, dtype=bool)
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
        }

    def _load(self, state: dict[str, Any], schedule_at: Callable[[float], simpy.Event]) -> None:
        inside = np.asarray(state["device"], dtype=np.int64)
        cell = np.asarray(state["cell"], dtype=np.int64)
        gain = np.asarray(state["site_gain"], dtype=np.float64)
        if cell.shape != inside.shape or gain.shape != (inside.shape[0], self._num_cells):
            raise ValueError("uplink state: cells and site gains are not its uploads'")
        self._cell[inside], self._g[inside] = cell, gain
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
