"""The resolved ``[uplink]`` table (:class:`UplinkSpec`): which uplink mode the run's uploads
take (:mod:`wflsim.sim.radio`) and what the scheme plans on."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from .. import fmath
from ..world.system import SystemConstants
from .rates import noise_psd_w_per_hz
from .tdma import UploadOrder

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
B8 = NDArray[np.bool_]

UplinkModeName = Literal["dedicated", "ofdma", "tdma", "aircomp"]

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

    mode: UplinkModeName = "dedicated"
    order: UploadOrder = "fcfs"
    planned_concurrent_uploads: int = 1
    #: ``aircomp``: the power rule (:data:`wflsim.sim.radio.aircomp.POWER_RULES`)
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
        """Whether the slot's uploads are one over-the-air sum (:mod:`wflsim.sim.radio.aircomp`)."""
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
