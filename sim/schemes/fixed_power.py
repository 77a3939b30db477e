"""Everyone at peak power with the deadline enforced: the validation scheme."""

from __future__ import annotations

from typing import ClassVar

from ..world.system import SystemConstants
from .common import CostParams, FreezingScheme


class FixedPower(FreezingScheme):
    """Every device trains and transmits at its peak power; the deadline is enforced.

    A device is in outage iff ``h < h_min = N0 A / P_bar``, so its outage probability is
    ``1 - exp(-h_min / H)`` in closed form (the tests check the trace against it).

    ``V`` changes only the logged cost (:attr:`cost_only_params`): with no frame controller,
    ``gamma = 0`` and the peak power do not read it; it reaches only :meth:`cost_weights`,
    hence the ``cost`` column ``z = V X + Q E`` (there is no ``expected_cost``)."""

    name: ClassVar[str] = "fixed_power"
    Params = CostParams
    cost_only_params: ClassVar[frozenset[str]] = frozenset({"V"})

    def __init__(self, params: CostParams, system: SystemConstants) -> None:
        super().__init__(params, system, freezing="none", power="peak")
