"""The mobility interface: where every device is at a given simulated time, and its state."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

F64 = NDArray[np.float64]

#: Relative slack when checking that a position lies inside the cell (absorbs float rounding of
#: positions written with a few digits, e.g. a device exactly on the cell edge).
CELL_EDGE_RTOL = 1e-9


class Mobility(ABC):
    """Positions of ``num_devices`` devices as a function of simulated time.

    Callers query with non-decreasing times (the engine does, at frame boundaries).
    :class:`StaticMobility` and :class:`TraceMobility` accept any order;
    :class:`RandomWaypoint` raises ``ValueError`` when time goes backwards.
    """

    num_devices: int

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
