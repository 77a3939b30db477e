"""Dedicated bands, the paper's model: every device has its own band ``W`` with noise power
``N0`` over it, so uploads do not interact; the closed-form kernel plays them
(:func:`wflsim.sim.slot.dedicated_transmission`: an upload of ``S`` bits at Shannon's rate
:func:`~wflsim.sim.radio.rates.rate_bps` takes ``S / r``)."""

from __future__ import annotations

from typing import ClassVar

from ..world.system import SystemConstants
from .base import UplinkMode
from .cells.component import Cells
from .cells.uplink import cellular_uplink
from .shared import SharedUplink
from .spec import UplinkSpec


class Dedicated(UplinkMode):
    """``[uplink] mode = "dedicated"`` (the module docstring)."""

    name: ClassVar[str] = "dedicated"
    summary: ClassVar[str] = "each device its own band W (the paper's model)"

    def differences(self, spec: UplinkSpec, server_mode: str) -> list[str]:
        """None: the controller's assumption itself."""
        return []

    def build(
        self,
        spec: UplinkSpec,
        system: SystemConstants,
        upload_start: int,
        upload_end: int,
        cells: Cells | None = None,
    ) -> SharedUplink | None:
        """None (the closed form), or the cells' uplink where co-band cells interfere."""
        return cellular_uplink(spec, system, upload_start, upload_end, cells)
