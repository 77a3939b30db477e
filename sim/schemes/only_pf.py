"""Only parameter freezing (the paper's Only-PF baseline): the controller's gamma, no outage."""

from __future__ import annotations

from typing import ClassVar

from ..world.system import SystemConstants
from .common import ControllerOptions, FreezingScheme


class OnlyPF(FreezingScheme):
    """The controller's ``gamma`` per frame; every device with something to send transmits at
    ``min(p_min, P_bar)`` and the server waits for the last upload, as in Ideal."""

    name: ClassVar[str] = "only_pf"
    Params = ControllerOptions

    def __init__(self, params: ControllerOptions, system: SystemConstants) -> None:
        super().__init__(params, system, freezing="controller", power="no_outage")
