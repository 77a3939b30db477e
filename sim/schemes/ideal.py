"""Ideal FL: no freezing, every device uploads, no outage (the paper's upper baseline)."""

from __future__ import annotations

from typing import ClassVar

from ..world.system import SystemConstants
from .common import CostParams, FreezingScheme


class Ideal(FreezingScheme):
    """Ideal FL: ``gamma = 0``, everyone transmits at ``min(p_min, P_bar)``, no outage.

    At ``p_min`` an upload lands exactly on the deadline; where ``p_min`` exceeds the peak power
    the device transmits at ``P_bar`` and arrives late, and the server waits for it (the slot
    lasts until the last upload arrives; the latency is logged).

    ``V`` changes only the logged cost (:attr:`cost_only_params`): with no frame controller,
    ``gamma = 0`` and the power ``min(p_min, P_bar)`` do not read it; it reaches only
    :meth:`cost_weights`, hence the ``cost`` column ``z = V X + Q E`` (there is no
    ``expected_cost``)."""

    name: ClassVar[str] = "ideal"
    Params = CostParams
    cost_only_params: ClassVar[frozenset[str]] = frozenset({"V"})

    def __init__(self, params: CostParams, system: SystemConstants) -> None:
        super().__init__(params, system, freezing="none", power="no_outage")
