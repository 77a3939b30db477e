"""The paper's scheme (Algorithm 1): MM freezing per frame, Proposition-1 power per slot."""

from __future__ import annotations

from typing import ClassVar

from ..world.system import SystemConstants
from .common import FreezingScheme, ThresholdOptions


class TwoTimescale(FreezingScheme):
    """Two-timescale control: per frame, each device's freezing fraction ``gamma`` minimises the
    expected drift-plus-penalty cost ``Z(gamma)`` (Theorem 2, MM on both pieces; frame 0 freezes
    nothing); per slot it transmits at ``p_min`` iff ``p_min <= p_max`` (Proposition 1), else it
    drops out."""

    name: ClassVar[str] = "two_timescale"
    Params = ThresholdOptions

    def __init__(self, params: ThresholdOptions, system: SystemConstants) -> None:
        super().__init__(params, system, freezing="controller", power="threshold")
