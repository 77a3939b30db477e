"""Devices that never move."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .base import F64, Mobility, as_positions, check_time


class StaticMobility(Mobility):
    """Devices that never move.

    Args:
        positions_m: shape ``(N, 2)``, metres.
    """

    def __init__(self, positions_m: ArrayLike) -> None:
        self._pos = as_positions(positions_m)
        self._pos.setflags(write=False)
        self.num_devices = int(self._pos.shape[0])

    def positions_m(self, time_s: float) -> F64:
        """The fixed positions, shape ``(N, 2)``, metres (``time_s`` is ignored)."""
        check_time(time_s)
        return self._pos.copy()

    def speed_mps(self, time_s: float) -> F64:
        """Zeros, ``(N,)``, m/s."""
        check_time(time_s)
        return np.zeros(self.num_devices)

    def odometer_m(self, time_s: float) -> F64:
        """Zeros, ``(N,)``, m: a static device never travels."""
        check_time(time_s)
        return np.zeros(self.num_devices)

    def state_dict(self) -> dict[str, Any]:
        """Nothing changes over time: no state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""
