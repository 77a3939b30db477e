"""The uplink: how the uploads of a slot share the server's band (the scenario's ``[uplink]``).

* ``dedicated`` (the paper's model): every device has its own band ``W`` with noise power ``N0``
  over it; uploads do not interact, and the closed-form kernel plays them.
* ``ofdma``: one band ``W`` shared by processor sharing. With ``k`` uploads in flight each gets
  ``b = W / k``; its noise power is ``N0' b`` (``N0' = N0 / W``, the noise power spectral
  density), so its rate is ``r = b log2(1 + p h / (N0' b))``
  (:func:`~wflsim.sim.world.physics.shared_rate_bps`). Whenever an upload starts or ends, every
  other upload's remaining bits are advanced at its old rate and its rate is recomputed; one
  completion event is pending at any time (:class:`~wflsim.sim.world.sharing.ProcessorSharing`).
* ``tdma``: one upload at a time on the whole band, at ``r = W log2(1 + p h / N0)``; the others
  wait in a queue (``fcfs``: by ready time = compute end, ties by device; ``edf``: by deadline,
  then as ``fcfs``) and waiting counts against the deadline
  (:class:`~wflsim.sim.world.uplink_disciplines.TdmaUplink`).

A shared uplink is a SimPy component
(:class:`~wflsim.sim.world.shared_uplink.SharedUplink`), used in one of two modes:

* **per slot** (:meth:`~wflsim.sim.world.shared_uplink.SharedUplink.open_slot`, the synchronous
  server's event kernel, :class:`wflsim.sim.kernels.EventKernel`): the slot's outcome (the time
  each upload actually transmitted, whether it arrived in time) comes from its events. Under a
  scheme that closes the slot at the deadline, uploads still in flight or still waiting are cut
  there; under one that waits for the last upload nothing is cut (an upload that can never
  finish, at zero power or gain, transmits until the deadline and fails, as on a dedicated
  band). State: none across slots; every upload ends or is cut by its slot's end.
* **continuous** (:meth:`~wflsim.sim.world.shared_uplink.SharedUplink.open_run`, the
  stale-update server, :class:`wflsim.sim.servers.stale.StaleServer`): one uplink for the whole
  run; a device's upload joins it with its own power, gain and payload
  (:meth:`~wflsim.sim.world.shared_uplink.SharedUplink.upload`; at most one upload per device at
  a time) and keeps its share across slot boundaries: rates are recomputed at every start, end
  and withdrawal, as in a slot. No deadline and no cut: every upload arrives unless its device
  withdraws it (goes offline); an upload that can never finish is refused. TDMA picks the next
  upload without a zero-delay SimPy event: when a completion or the slot boundary frees the band
  (every upload of the instant has joined), or, when an upload joins or leaves, through the
  caller's ``later`` (after the clock's device events of the instant). So no SimPy event of the
  uplink's is ever due at a slot boundary. At a checkpoint uploads are in flight:
  :meth:`~wflsim.sim.world.shared_uplink.SharedUplink.state_dict` holds them and
  :meth:`~wflsim.sim.world.shared_uplink.SharedUplink.load_state_dict` puts the pending
  completion back at its absolute time.

The code lives in :mod:`wflsim.sim.world.physics` (the shared band's rates),
:mod:`wflsim.sim.world.sharing` (processor sharing), :mod:`wflsim.sim.world.shared_uplink` (the
shared uplink's common part) and :mod:`wflsim.sim.world.uplink_disciplines` (OFDMA and TDMA);
this module holds the ``[uplink]`` spec and :func:`build_uplink`, and re-exports their names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from .. import fmath
from .cellular import Cells
from .physics import equal_share_hz, noise_psd_w_per_hz, shared_rate_bps
from .shared_uplink import LogFn, SharedUplink
from .sharing import DONE_REL_TOL, ProcessorSharing, RateModel
from .system import SystemConstants
from .uplink_disciplines import OfdmaUplink, TdmaUplink, UploadOrder

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
B8 = NDArray[np.bool_]

UplinkMode = Literal["dedicated", "ofdma", "tdma", "aircomp"]

#: What Proposition 1 and Theorem 2 assume of the uplink (the run manifest's ``uplink``).
CONTROLLER_ASSUMPTION = (
    "a dedicated band per device: each upload alone on W with noise power N0 over W "
    "(Proposition 1's p_min, Theorem 2's costs)"
)


@dataclass(frozen=True)
class UplinkSpec:
    """The resolved ``[uplink]`` table: how uploads share the band and what the scheme plans on.

    ``planned_concurrent_uploads`` ``k``: the scheme computes ``p_min`` (and the controller its
    costs) for a band ``W / k`` with the noise power ``N0 / k`` over it, in every server mode;
    ``1`` is the paper's controller unchanged (each upload alone on ``W``). Under stale updates
    the share an upload actually gets changes as uploads started in other slots join and leave.
    """

    mode: UplinkMode = "dedicated"
    order: UploadOrder = "fcfs"
    planned_concurrent_uploads: int = 1
    #: ``aircomp``: the power rule (:data:`wflsim.sim.world.aircomp.POWER_RULES`)
    power_control: str = "truncated_inversion"
    #: ``aircomp``, truncated inversion: the gain under which a device stays silent, linear
    threshold_gain: float = 0.0
    #: ``aircomp``: real values per symbol
    values_per_symbol: int = 1

    @property
    def shared(self) -> bool:
        """Whether uploads interact through events (the event kernel plays them); an
        over-the-air slot is one common transmission, a closed form for every kernel."""
        return self.mode in ("ofdma", "tdma")

    @property
    def aircomp(self) -> bool:
        """Whether the slot's uploads are one over-the-air sum (:mod:`wflsim.sim.world.aircomp`)."""
        return self.mode == "aircomp"

    def planned_system(self, system: SystemConstants) -> SystemConstants:
        """The constants the scheme plans on: the band ``W / k`` and its noise ``N0 / k``
        (``system`` itself for ``k = 1``); over the air under ``power_control = "controller"``
        the system with the sum's window (``aircomp_window_s``: the scheme's controller then
        plans on the over-the-air costs)."""
        if self.aircomp and self.power_control == "controller":  # the controller over the air
            from .aircomp import aircomp_latency_s

            window_s = aircomp_latency_s(
                system.num_params, system.bandwidth_hz, self.values_per_symbol
            )
            return replace(system, aircomp_window_s=window_s)
        k = self.planned_concurrent_uploads
        if k == 1:
            return system
        return replace(system, bandwidth_hz=system.bandwidth_hz / k, noise_w=system.noise_w / k)

    def describe(self, system: SystemConstants, server_mode: str = "sync") -> dict[str, Any]:
        """The uplink, what the scheme plans on and what the controller assumes of it (for the
        run's manifest); ``server_mode``: the ``[server] mode`` it runs under."""
        psd = float(noise_psd_w_per_hz(system.noise_w, system.bandwidth_hz))
        k = self.planned_concurrent_uploads
        differences: list[str] = []
        notes: list[str] = []
        if self.mode == "ofdma":
            differences.append(
                "OFDMA: the band W is shared equally by the uploads in flight; an upload's rate "
                "changes whenever another starts or ends, so the time p_min was computed for is "
                "not the time the upload takes"
            )
        elif self.mode == "tdma":
            differences.append(
                "TDMA: one upload at a time on the band W; an upload waits for the ones before "
                f"it ({self.order}), and the wait counts against the deadline p_min ignores"
            )
        elif self.mode == "aircomp" and self.power_control == "controller":
            differences.append(
                "AirComp: the participants send their updates at once on the band W and the "
                "server receives their sum with noise; the transmission takes ceil(D / v) / W "
                "whatever the number of devices; the controller is adapted to it (Proposition 1 "
                "as a gain threshold against the frame's receiver scaling, Theorem 2 in closed "
                "form: docs/aircomp.md)"
            )
        elif self.mode == "aircomp":
            differences.append(
                "AirComp: the participants send their updates at once on the band W and the "
                "server receives their sum with noise; the transmission takes ceil(D' / v) / W "
                f"whatever the number of devices, at the powers of {self.power_control} (not "
                "the scheme's): the scheme's p_min and the controller's upload costs are the "
                'digital model\'s (power_control = "controller" adapts them)'
            )
        if self.shared and server_mode != "sync":
            differences.append(
                f"stale updates ({server_mode}): uploads keep their share across slot "
                "boundaries, so uploads started in different slots overlap and an upload's "
                "share changes as they join and leave; no deadline cuts an upload"
            )
        if k > 1:
            differences.append(
                f"the scheme plans on a band W / {k} with noise N0 / {k} (p_min for {k} "
                "concurrent uploads), not on W"
            )
            if self.mode == "dedicated":
                notes.append("on a dedicated band W this over-provisions power")
        out: dict[str, Any] = {
            "mode": self.mode,
            "bandwidth_hz": system.bandwidth_hz,
            "noise_psd_dbm_hz": float(10.0 * fmath.log10(psd) + 30.0),
            "order": self.order if self.mode == "tdma" else None,
            "planned_concurrent_uploads": k,
            "plans_on": (
                f"p_min (Proposition 1) and the controller's costs for one upload on a band "
                f"W / {k} = {system.bandwidth_hz / k:.6g} Hz with noise power N0 / {k} over it, "
                f"whatever the uplink and the server mode"
            ),
            "controller_assumption": {
                "assumption": CONTROLLER_ASSUMPTION,
                "matches": not differences,
                "differences": differences,
                "notes": notes,
            },
        }
        if self.aircomp:
            out["aircomp"] = {
                "power_control": self.power_control,
                "threshold_gain_db": (
                    float(10.0 * fmath.log10(self.threshold_gain))
                    if self.threshold_gain > 0
                    else None
                ),
                "values_per_symbol": self.values_per_symbol,
            }
        return out


def build_uplink(
    spec: UplinkSpec,
    system: SystemConstants,
    upload_start: int,
    upload_end: int,
    cells: Cells | None = None,
) -> SharedUplink | None:
    """The shared uplink of ``spec`` (None: dedicated bands); with several cells whose uploads
    interact (``cells``: a cell shares its band, or two cells share one), the cells' uplink
    with inter-cell interference (:class:`~wflsim.sim.world.cellular_uplink.CellularUplink`),
    whatever ``spec.mode`` (each cell has its own)."""
    if cells is not None:
        if not cells.layout.interacts:
            return None
        from .cellular_uplink import CellularUplink

        return CellularUplink(
            cells, system.bandwidth_hz, system.noise_w, upload_start, upload_end, spec.order
        )
    if spec.mode == "ofdma":
        return OfdmaUplink(system.bandwidth_hz, system.noise_w, upload_start, upload_end)
    if spec.mode == "tdma":
        return TdmaUplink(
            system.bandwidth_hz, system.noise_w, upload_start, upload_end, order=spec.order
        )
    return None


__all__ = [
    "B8",
    "CONTROLLER_ASSUMPTION",
    "DONE_REL_TOL",
    "F64",
    "I64",
    "LogFn",
    "OfdmaUplink",
    "ProcessorSharing",
    "RateModel",
    "SharedUplink",
    "TdmaUplink",
    "UplinkMode",
    "UplinkSpec",
    "UploadOrder",
    "build_uplink",
    "equal_share_hz",
    "noise_psd_w_per_hz",
    "shared_rate_bps",
]
