"""Only power control (the paper's Only-PC baseline): no freezing, Proposition-1 power."""

from __future__ import annotations

from typing import ClassVar

from ..world.system import SystemConstants
from .common import FreezingScheme, ThresholdOptions


class OnlyPC(FreezingScheme):
    """``gamma = 0`` every frame; per slot Proposition 1 with ``p_max`` at ``u = 1``."""

    name: ClassVar[str] = "only_pc"
    Params = ThresholdOptions

    def __init__(self, params: ThresholdOptions, system: SystemConstants) -> None:
        super().__init__(params, system, freezing="none", power="threshold")
