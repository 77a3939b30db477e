"""The resolved ``[uplink]`` table (:class:`UplinkSpec`): which uplink mode the run's uploads
take (:mod:`wflsim.sim.radio`) and what the scheme plans on."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ..world.system import SystemConstants
from .rates import aircomp_latency_s

UplinkModeName = Literal["dedicated", "ofdma", "tdma", "aircomp", "ns3_lte"]
#: TDMA's queue: by ready time (``fcfs``) or earliest deadline first (``edf``).
UploadOrder = Literal["fcfs", "edf"]

#: What Proposition 1 and Theorem 2 assume of the uplink (the run manifest's ``uplink``).
CONTROLLER_ASSUMPTION = (
    "a dedicated band per device: each upload alone on W with noise power N0 over W "
    "(Proposition 1's p_min, Theorem 2's costs)"
)


@dataclass(frozen=True)
class Ns3Options:
    """The resolved ``[uplink.ns3]`` table of ``mode = "ns3_lte"`` (docs/ns3.md), with the run's
    constants the ns-3 program needs."""

    #: ``tcp`` (a new connection per upload) or ``udp`` (a paced flow)
    transport: Literal["tcp", "udp"] = "tcp"
    #: the LTE MAC scheduler: ``pf`` (proportional fair) or ``rr`` (round robin)
    scheduler: Literal["pf", "rr"] = "pf"
    #: simulated time each frame's process runs before its first slot (attach, RRC), s
    warmup_s: float = 0.2
    #: one-way delay between the core network and the FL server, s
    backhaul_delay_s: float = 0.001
    #: TCP's maximum segment size, bytes
    tcp_segment_bytes: int = 1400
    #: the longest one exchange with the ns-3 process may take (wall clock), s
    exchange_timeout_s: float = 60.0
    #: ns-3's seed (``RngSeedManager::SetSeed``), drawn from the run's seed
    seed: int = 1
    #: the run's slots per frame (one ns-3 process per frame)
    slots_per_frame: int = 1


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
    #: ``ns3_lte``: the ns-3 settings (None: another mode)
    ns3: Ns3Options | None = None

    def planned_system(self, system: SystemConstants) -> SystemConstants:
        """The constants the scheme plans on: the band ``W / k`` and its noise ``N0 / k``
        (``system`` itself for ``k = 1``); over the air under ``power_control = "controller"``
        the system with the sum's window (``aircomp_window_s``: the scheme's controller then
        plans on the over-the-air costs)."""
        if self.mode == "aircomp" and self.power_control == "controller":  # over the air
            window_s = aircomp_latency_s(
                system.num_params, system.bandwidth_hz, self.values_per_symbol
            )
            return replace(system, aircomp_window_s=window_s)
        k = self.planned_concurrent_uploads
        if k == 1:
            return system
        return replace(system, bandwidth_hz=system.bandwidth_hz / k, noise_w=system.noise_w / k)
