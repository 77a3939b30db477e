"""What a scheme of one's own is written against: the public face of :mod:`wflsim.sim.schemes`.

A scheme decides, per frame, what each device freezes or sends and what it costs
(:meth:`Scheme.plan_frame` returns a :class:`FramePlan` with a :class:`CostPlan`) and, per slot,
who transmits at which power (:meth:`Scheme.plan_slot` returns a :class:`SlotPlan`); it names the
learner-side update rule it needs (:class:`UpdateRuleSpec`; rules of one's own:
:mod:`wflsim.rules`). Register it with :func:`wflsim.register_scheme` and name it in a scenario
(``docs/api.md``, "Your own scheme and update rule")::

    import wflsim
    from wflsim.schemes import ControllerOptions, FreezingScheme, freezing_plan

Every name here is torch-free, as the simulation is; importing this module loads neither torch
nor pandas.
"""

from __future__ import annotations

from wflsim.sim.schemes.base import (
    CostPlan,
    FrameContext,
    FramePlan,
    Scheme,
    SlotContext,
    SlotPlan,
)
from wflsim.sim.schemes.common import (
    ControllerOptions,
    FreezingScheme,
    Memoryless,
    freezing_plan,
    threshold_slot_plan,
)
from wflsim.sim.slot import SlotOutcome
from wflsim.sim.updates import UpdateRuleSpec
from wflsim.sim.world.system import SystemConstants

__all__ = [
    "ControllerOptions",
    "CostPlan",
    "FrameContext",
    "FramePlan",
    "FreezingScheme",
    "Memoryless",
    "Scheme",
    "SlotContext",
    "SlotOutcome",
    "SlotPlan",
    "SystemConstants",
    "UpdateRuleSpec",
    "freezing_plan",
    "threshold_slot_plan",
]
