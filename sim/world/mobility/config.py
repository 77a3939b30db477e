"""The ``[mobility]`` table of a scenario (validated by pydantic; see ``docs/scenario.md``)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator


class MobilityConfig(BaseModel):
    """The ``[mobility]`` table of a scenario.

    Attributes:
        model: ``"static"``, ``"random_waypoint"`` or ``"trace"``.
        placement: initial positions for ``static`` and ``random_waypoint``: ``"uniform_disc"``
            (uniform by area in the annulus ``[min_distance_m, cell_radius_m]``) or ``"explicit"``
            (``positions_m``). Not used by ``trace`` (which must keep ``"uniform_disc"``, the
            default).
        positions_m: explicit initial positions ``[[x, y], ...]`` in metres, one per device
            (required iff ``placement = "explicit"``; the count is checked against the number of
            devices by :func:`build_mobility`).
        speed_mps: random waypoint: ``(lo, hi)`` in m/s, ``0 < lo <= hi``; each leg's speed is
            uniform in ``[lo, hi]``.
        pause_s: random waypoint: pause at each waypoint, seconds, ``>= 0``.
        clock: when positions are read at frame ``k``: ``"nominal"`` at ``k T tau_0`` (the same
            instant for every scheme, so schemes compare on the same channels even when some
            stretch their slots), or ``"simulated"`` at the frame's actual start time.
        file: trace: path of a ``.csv`` or ``.parquet`` file with columns
            ``time_s, device, x_m, y_m`` (required iff ``model = "trace"``); a relative path is
            resolved against the scenario file's folder.
    """

    model_config = ConfigDict(extra="forbid")

    model: Literal["static", "random_waypoint", "trace"] = "static"
    placement: Literal["uniform_disc", "explicit"] = "uniform_disc"
    positions_m: list[tuple[float, float]] | None = None
    speed_mps: tuple[float, float] = (0.5, 1.5)
    pause_s: float = 0.0
    file: str | None = None
    clock: Literal["nominal", "simulated"] = "nominal"

    @field_validator("speed_mps")
    @classmethod
    def _check_speed(cls, value: tuple[float, float]) -> tuple[float, float]:
        lo, hi = value
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"speed_mps must be finite (lo, hi) in m/s; got ({lo}, {hi})")
        if not 0.0 < lo <= hi:
            raise ValueError(
                f"speed_mps must be (lo, hi) with 0 < lo <= hi, in m/s; got ({lo}, {hi})"
            )
        return value

    @field_validator("pause_s")
    @classmethod
    def _check_pause(cls, value: float) -> float:
        if not (math.isfinite(value) and value >= 0.0):
            raise ValueError(f"pause_s must be a finite number of seconds >= 0; got {value}")
        return value

    @field_validator("positions_m")
    @classmethod
    def _check_positions(
        cls, value: list[tuple[float, float]] | None
    ) -> list[tuple[float, float]] | None:
        if value is None:
            return value
        if len(value) == 0:
            raise ValueError("positions_m must list one [x, y] pair (metres) per device; got []")
        for i, (x, y) in enumerate(value):
            if not (math.isfinite(x) and math.isfinite(y)):
                raise ValueError(f"positions_m[{i}] must be finite metres; got [{x}, {y}]")
        return value

    @field_validator("file")
    @classmethod
    def _check_file(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("file must be a non-empty path to a .csv or .parquet trace")
        return value

    @model_validator(mode="after")
    def _check_combinations(self) -> MobilityConfig:
        if self.placement == "explicit" and self.positions_m is None:
            raise ValueError(
                'placement = "explicit" needs positions_m = [[x, y], ...] (metres, one per device)'
            )
        if self.placement != "explicit" and self.positions_m is not None:
            raise ValueError(
                f'positions_m is given but placement = "{self.placement}"; '
                'set placement = "explicit" or remove positions_m'
            )
        if self.model == "trace" and self.file is None:
            raise ValueError('model = "trace" needs file = "<path to a .csv or .parquet trace>"')
        if self.model != "trace" and self.file is not None:
            raise ValueError(
                f'file is given but model = "{self.model}"; set model = "trace" or remove file'
            )
        if self.model == "trace" and self.placement == "explicit":
            raise ValueError(
                'placement = "explicit" has no effect with model = "trace" (the trace gives the '
                "positions); remove placement and positions_m"
            )
        return self
