"""The mobility interface: where every device is at a given simulated time, how fast it moves
and how far it has walked, and its state."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

F64 = NDArray[np.float64]

#: Relative slack when checking that a position lies inside the cell (absorbs float rounding of
#: positions written with a few digits, e.g. a device exactly on the cell edge).
CELL_EDGE_RTOL = 1e-9


@dataclass(frozen=True)
class Kinematics:
    """What the channel needs of the devices' motion at one instant (arrays over devices).

    The distance a device travelled between two instants is the difference of its odometer
    readings (path length along its route, not the displacement): what the Gudmundson shadowing
    correlation ``exp(-d / d_corr)`` takes. The speed drives the Doppler frequency
    ``f_d = v f_c / c`` of time-correlated fading.
    """

    positions_m: F64  #: ``(N, 2)``, metres, relative to the server at ``(0, 0)``
    speed_mps: F64  #: ``(N,)``, m/s, >= 0: the speed from this instant on (0 while pausing)
    odometer_m: F64  #: ``(N,)``, metres, >= 0: path length walked since the model's start


class Mobility(ABC):
    """Positions of ``num_devices`` devices as a function of simulated time.

    Callers query with non-decreasing times (the engine does, at frame boundaries).
    :class:`~wflsim.sim.world.mobility.static.StaticMobility` and
    :class:`~wflsim.sim.world.mobility.trace.TraceMobility` accept any order;
    :class:`~wflsim.sim.world.mobility.random_waypoint.RandomWaypoint` raises ``ValueError`` when
    time goes backwards.
    """

    num_devices: int

    def kinematics(self, time_s: float) -> Kinematics:
        """Positions, speeds and odometer readings at ``time_s`` (seconds): what the engine
        asks at each frame start and hands to the channel."""
        return Kinematics(
            positions_m=self.positions_m(time_s),
            speed_mps=self.speed_mps(time_s),
            odometer_m=self.odometer_m(time_s),
        )

    @abstractmethod
    def speed_mps(self, time_s: float) -> F64:
        """Each device's speed at ``time_s``, ``(N,)``, m/s: the right-hand derivative of its path
        (the speed it moves on with from ``time_s``; 0 while it stands still)."""

    @abstractmethod
    def odometer_m(self, time_s: float) -> F64:
        """Path length each device has walked from the model's start to ``time_s``, ``(N,)``,
        metres (non-decreasing in time; the distance between two instants is the difference)."""

    @abstractmethod
    def positions_m(self, time_s: float) -> F64:
        """Device positions at ``time_s`` (seconds).

        Returns:
            a new array of shape ``(num_devices, 2)``, ``float64``, metres; row ``n`` is device
            ``n``'s ``(x, y)`` relative to the server at ``(0, 0)``.
        """

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """What the model must keep to continue exactly from the last query (arrays, numbers)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from :meth:`state_dict` of a model built from the same
        scenario and seed): later queries return what the saved model would have returned."""


def as_positions(positions_m: ArrayLike, what: str = "positions_m") -> F64:
    """``positions_m`` as a finite ``(N, 2)`` float64 array (N >= 1), else ValueError naming
    ``what``."""
    pos = np.array(positions_m, dtype=np.float64)
    if pos.ndim != 2 or pos.shape[1] != 2 or pos.shape[0] < 1:
        raise ValueError(f"{what} must have shape (N, 2) with N >= 1; got {pos.shape}")
    if not np.isfinite(pos).all():
        raise ValueError(f"{what} must be finite")
    return pos


def check_time(time_s: float) -> float:
    """``time_s`` as a float (seconds); NaN is a ValueError."""
    t = float(time_s)
    if math.isnan(t):
        raise ValueError("time_s must not be NaN")
    return t


def id_list(ids: ArrayLike, limit: int = 20) -> str:
    """Device ids for an error message: the first ``limit``, then how many in all."""
    ids = [int(i) for i in np.asarray(ids).reshape(-1)]
    text = ", ".join(map(str, ids[:limit]))
    if len(ids) > limit:
        text += f", ... ({len(ids)} in all)"
    return text
