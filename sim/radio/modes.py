"""The uplink modes of a run: building the component that decides when each upload ends."""

from __future__ import annotations

from ..world.system import SystemConstants
from .cells.component import Cells
from .ofdma import OfdmaUplink
from .shared import SharedUplink
from .spec import UplinkSpec
from .tdma import TdmaUplink


def build_uplink(
    spec: UplinkSpec,
    system: SystemConstants,
    upload_start: int,
    upload_end: int,
    cells: Cells | None = None,
) -> SharedUplink | None:
    """The shared uplink of ``spec`` (None: dedicated bands); with several cells whose uploads
    interact (``cells``: a cell shares its band, or two cells share one), the cells' uplink
    with inter-cell interference (:class:`~wflsim.sim.radio.cells.uplink.CellularUplink`),
    whatever ``spec.mode`` (each cell has its own)."""
    if cells is not None:
        if not cells.layout.interacts:
            return None
        from .cells.uplink import CellularUplink

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
