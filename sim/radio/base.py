"""What every uplink mode implements: :class:`UplinkMode`, the protocol of the scenario's
``[uplink] mode`` (one module per mode in :mod:`wflsim.sim.radio`, registered in
:mod:`wflsim.sim.radio.modes`).

A mode decides *when* each upload ends (or that it did not), never *who* takes part or at what
power: that stays the scheme's. It says whether its uploads interact (then the event kernel and
the stale server's continuous uplink play them through the component it builds, a
:class:`~wflsim.sim.radio.shared.SharedUplink`), whether a slot's uploads are one over-the-air sum
(a closed form for every kernel), how it departs from what the paper's controller assumes (the
run manifest's ``uplink.controller_assumption``), and what else the manifest records of it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from ..world.system import SystemConstants
from .cells.component import Cells
from .shared import SharedUplink
from .spec import UplinkSpec


class UplinkMode(ABC):
    """One ``[uplink] mode``: a stateless description and the factory of its component.

    Attributes:
        name: the mode's name in ``[uplink] mode``.
        interacting: whether uploads interact through events (one upload's end depends on the
            others': a shared band, a packet-level network), so that the event kernel and the
            stale server's continuous uplink play them through :meth:`build`'s component.
        over_the_air: whether a slot's uploads are one over-the-air sum (a closed form for
            every kernel; the learner applies the received sum).
        summary: one line for the docs and the manifest.
    """

    name: ClassVar[str]
    interacting: ClassVar[bool] = False
    over_the_air: ClassVar[bool] = False
    summary: ClassVar[str]

    def differences(self, spec: UplinkSpec, server_mode: str) -> list[str]:
        """How the mode departs from what Proposition 1 and Theorem 2 assume (each upload alone
        on ``W`` with noise ``N0``), under ``[server] mode`` ``server_mode``; none by default."""
        return []

    def details(self, spec: UplinkSpec) -> dict[str, Any]:
        """What else the run manifest's ``uplink`` records of the mode (its own settings)."""
        return {}

    @abstractmethod
    def build(
        self,
        spec: UplinkSpec,
        system: SystemConstants,
        upload_start: int,
        upload_end: int,
        cells: Cells | None = None,
    ) -> SharedUplink | None:
        """The component that decides when each upload ends (None: no component, the closed
        form of :func:`wflsim.sim.slot.dedicated_transmission` or one over-the-air sum);
        ``upload_start`` and ``upload_end``: the trace's event codes its log uses; ``cells``: the
        run's cells, if any."""
