"""The ``[mobility]`` table of a scenario (validated by pydantic; see ``docs/scenario.md``)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...config.distributions import lists_as_pairs
from ...config.limits import MAX_DEVICES, path_problem, shorten

#: Fastest random-waypoint speed, m/s (faster than any vehicle on or near the ground; a jet
#: airliner cruises at about 250 m/s).
MAX_SPEED_MPS = 1000.0
#: Longest random-waypoint pause, s (11.6 days).
MAX_PAUSE_S = 1e6
#: Farthest explicit position from the server, m, on either axis.
MAX_POSITION_M = 1e6


#: The ``[mobility]`` fields that apply to some models only (:class:`MobilityConfig` refuses
#: them under the others): field -> those models. A sweep over ``mobility.model`` leaves a grid
#: value of such a field out at the points of the other models (:mod:`wflsim.app.sweep_modes`).
MOBILITY_MODEL_FIELDS: dict[str, frozenset[str]] = {
    "file": frozenset({"trace"}),
    "placement": frozenset({"static", "random_waypoint"}),
    "positions_m": frozenset({"static", "random_waypoint"}),
}


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
            devices by :func:`~wflsim.sim.world.mobility.build_mobility`).
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
    positions_m: list[tuple[float, float]] | None = Field(None, max_length=MAX_DEVICES)
    speed_mps: tuple[float, float] = (0.5, 1.5)
    pause_s: float = 0.0
    file: str | None = None
    clock: Literal["nominal", "simulated"] = "nominal"

    @field_validator("speed_mps", mode="before")
    @classmethod
    def _list_as_pair(cls, value: Any) -> Any:
        """A file's ``[lo, hi]`` is a list: take it as the pair (also in strict validation)."""
        return tuple(value) if isinstance(value, list) else value

    @field_validator("positions_m", mode="before")
    @classmethod
    def _lists_as_pairs(cls, value: Any) -> Any:
        """A file's ``[[x, y], ...]`` holds lists: take them as the pairs."""
        return lists_as_pairs(value)

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
        if hi > MAX_SPEED_MPS:
            raise ValueError(
                f"speed_mps must be at most {MAX_SPEED_MPS:g} m/s; got ({lo:g}, {hi:g})"
            )
        return value

    @field_validator("pause_s")
    @classmethod
    def _check_pause(cls, value: float) -> float:
        if not (math.isfinite(value) and 0.0 <= value <= MAX_PAUSE_S):
            raise ValueError(
                f"pause_s must be a finite number of seconds in [0, {MAX_PAUSE_S:g}]; got {value}"
            )
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
            if max(abs(x), abs(y)) > MAX_POSITION_M:
                raise ValueError(
                    f"positions_m[{i}] must be within {MAX_POSITION_M:g} m of the server on "
                    f"each axis; got [{x:g}, {y:g}]"
                )
        return value

    @field_validator("file")
    @classmethod
    def _check_file(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("file must be a non-empty path to a .csv or .parquet trace")
        problem = None if value is None else path_problem(value)
        if value is not None and problem is not None:
            raise ValueError(f"file {problem} (got {shorten(value)!r})")
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
