"""Path-loss models."""

from __future__ import annotations

from typing import Any

from sim.world import physics
from sim.world.channel.base import F64, PathLossModel


class LogDistance(PathLossModel):
    """``PL[dB] = intercept_db + slope_db log10(max(d, d_min) / d_ref)``.

    The defaults are the paper's ``128.1 + 37.6 log10(d[km])`` (Sec. VI, d in kilometres: with
    metres the SNRs would be absurd, see ``docs/decisions.md``).

    Args:
        intercept_db: path loss at ``d_ref``, dB.
        slope_db: dB per decade of distance (``10 n`` for a path-loss exponent ``n``), > 0.
        reference_distance_m: ``d_ref``, metres, > 0.
        min_distance_m: distances below it are clipped to it, metres, > 0.
    """

    def __init__(
        self,
        intercept_db: float = physics.PATHLOSS_INTERCEPT_DB,
        slope_db: float = physics.PATHLOSS_SLOPE_DB,
        reference_distance_m: float = 1000.0,
        min_distance_m: float = 10.0,
    ) -> None:
        if not slope_db > 0 or not reference_distance_m > 0 or not min_distance_m > 0:
            raise ValueError("slope_db, reference_distance_m and min_distance_m must be > 0")
        self.intercept_db = float(intercept_db)
        self.slope_db = float(slope_db)
        self.reference_distance_m = float(reference_distance_m)
        self.min_distance_m = float(min_distance_m)

    def path_loss_db(self, distance_m: F64) -> F64:
        """Path loss, dB (see the class docstring)."""
        return physics.path_loss_db(
            distance_m,
            self.min_distance_m,
            self.intercept_db,
            self.slope_db,
            self.reference_distance_m,
        )

    def describe(self) -> dict[str, Any]:
        """``{"model": "log_distance", ...parameters}``."""
        return {
            "model": "log_distance",
            "intercept_db": self.intercept_db,
            "slope_db": self.slope_db,
            "reference_distance_m": self.reference_distance_m,
            "min_distance_m": self.min_distance_m,
        }
