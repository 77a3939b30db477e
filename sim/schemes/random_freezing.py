"""Random freezing: the ablation that measures what the stability criterion is worth."""

from __future__ import annotations

from typing import ClassVar

from ..updates import UpdateRuleSpec
from ..world.system import SystemConstants
from .common import FreezingScheme, ThresholdOptions


class RandomFreezing(FreezingScheme):
    """The paper's two-timescale control (the controller's ``gamma`` per frame, Proposition-1
    power per slot), but each device freezes a uniformly random ``gamma`` fraction of its
    parameters instead of its most stable ones.

    Its network side (``gamma``, power, energy, queues, outages) is exactly ``two_timescale``'s
    on the same seed: only which parameters are frozen differs, so the accuracy gap between the
    two is what the stability criterion buys.
    """

    name: ClassVar[str] = "random_freezing"
    Params = ThresholdOptions

    def __init__(self, params: ThresholdOptions, system: SystemConstants) -> None:
        super().__init__(
            params,
            system,
            freezing="controller",
            power="threshold",
            update_rule=UpdateRuleSpec("freezing", {"selection": "random"}),
        )
