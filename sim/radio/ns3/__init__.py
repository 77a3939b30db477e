"""``[uplink] mode = "ns3_lte"``: the uploads played by ns-3's LTE module, packet by packet, in
an ns-3 process that wflsim's clock drives (docs/ns3.md).

* :mod:`.build`: wflsim's C++ program (``wflsim_lte.cc``, shipped in the package) compiled
  against the system's ns-3 on first use, into a cache keyed by the source and the toolchain;
* :mod:`.process`: one ns-3 process and its line protocol;
* :mod:`.uplink`: :class:`~wflsim.sim.radio.ns3.uplink.Ns3LteUplink`, the
  :class:`~wflsim.sim.radio.shared.SharedUplink` that drives it (the same channel in both
  simulators, the conservative synchronisation, a fresh process per frame, the trace's ns-3
  columns);
* :class:`Ns3Lte`, the mode.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ...world.system import SystemConstants
from ..base import UplinkMode
from ..cells.component import Cells
from ..ofdma import stale_difference
from ..shared import SharedUplink
from ..spec import Ns3Options, UplinkSpec
from .build import ensure_program
from .uplink import Ns3LteUplink, noise_figure_db, resource_blocks


class Ns3Lte(UplinkMode):
    """``[uplink] mode = "ns3_lte"`` (the package docstring)."""

    name: ClassVar[str] = "ns3_lte"
    interacting: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "ns-3's LTE module plays the uploads packet by packet (scheduler, link adaptation, "
        "HARQ, RLC, TCP or UDP): a co-simulation"
    )

    def differences(self, spec: UplinkSpec, server_mode: str) -> list[str]:
        """LTE, not Shannon: the scheduler's share, the MCS, HARQ, the transport."""
        opts = spec.ns3 or Ns3Options()
        return [
            "ns-3 LTE: the uploads share each cell's resource blocks as ns-3's "
            f"{opts.scheduler.upper()} scheduler allocates them, at the MCS its link "
            "adaptation picks from the SINR, with HARQ, RLC AM and "
            f"{opts.transport.upper()} over the EPC; an upload's time is not Shannon's "
            "W log2(1 + SNR) (docs/ns3.md)"
        ] + stale_difference(server_mode)

    def details(self, spec: UplinkSpec) -> dict[str, Any]:
        """The ns-3 settings."""
        opts = spec.ns3 or Ns3Options()
        return {
            "ns3": {
                "transport": opts.transport,
                "scheduler": opts.scheduler,
                "warmup_s": opts.warmup_s,
                "backhaul_delay_s": opts.backhaul_delay_s,
                "tcp_segment_bytes": opts.tcp_segment_bytes,
                "seed": opts.seed,
            }
        }

    def build(
        self,
        spec: UplinkSpec,
        system: SystemConstants,
        upload_start: int,
        upload_end: int,
        cells: Cells | None = None,
    ) -> SharedUplink | None:
        """:class:`~wflsim.sim.radio.ns3.uplink.Ns3LteUplink` (the program built if needed)."""
        return Ns3LteUplink(
            ensure_program(),
            spec.ns3 or Ns3Options(),
            system.num_devices,
            system.bandwidth_hz,
            system.noise_w,
            upload_start,
            upload_end,
            cells,
        )


__all__ = ["Ns3Lte", "Ns3LteUplink", "noise_figure_db", "resource_blocks"]
