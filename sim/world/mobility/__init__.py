"""Device mobility: where every device is at a given simulated time.

Devices live in a disc of radius ``cell_radius_m`` around the server at ``(0, 0)``; positions are
in metres, times in seconds. The engine asks for positions at frame boundaries only (distances and
large-scale gains change at frame boundaries), with non-decreasing times.

The component: :class:`MobilityConfig` (the scenario's ``[mobility]`` table), the base class
:class:`Mobility` (``positions_m(time_s)``, ``state_dict()``, ``load_state_dict()``), one module
per model and the factory :func:`build_mobility`:

* ``static``: devices never move (:class:`StaticMobility`).
* ``random_waypoint``: each device walks in straight lines to waypoints drawn uniformly (by area)
  in the disc, at a speed drawn uniformly in ``speed_mps`` for each leg, and pauses ``pause_s`` at
  each waypoint (:class:`RandomWaypoint`). Exact in continuous time.
* ``trace``: positions read from a CSV or Parquet file with columns ``time_s, device, x_m, y_m``,
  linearly interpolated in time per device and held at the first / last sample outside the
  recorded range (:class:`TraceMobility`).

Traces of other tools (SUMO's floating car data, ns-2 movement files, BonnMotion's
``.movements``) become trace files through :mod:`.formats` (``wflsim convert-mobility``,
``docs/mobility.md``).

Initial positions (``static`` and ``random_waypoint``) are either uniform by area in the annulus
``[min_distance_m, cell_radius_m]`` (:func:`uniform_disc_positions_m`) or given explicitly.

Randomness (see :mod:`wflsim.sim.rng`): device ``n`` draws its initial position from
``streams.device("placement", n)`` and its waypoints from ``streams.device("mobility", n)``, so
adding a device never changes the positions or paths of the others.

Waypoints are *not* kept out of the inner ``min_distance_m`` disc: a device may walk close to (or
through) the server; the path loss clips distances below ``min_distance_m``
(:func:`wflsim.sim.world.physics.path_loss_db`). Explicit positions and trace positions closer than
``min_distance_m`` are accepted for the same reason.
"""

from __future__ import annotations

import math
from pathlib import Path

from ...rng import Streams
from .base import Mobility
from .config import MobilityConfig
from .placement import initial_positions, uniform_disc_positions_m
from .random_waypoint import RandomWaypoint
from .static import StaticMobility
from .trace import TRACE_COLUMNS, TraceMobility, read_trace

__all__ = [
    "TRACE_COLUMNS",
    "Mobility",
    "MobilityConfig",
    "RandomWaypoint",
    "StaticMobility",
    "TraceMobility",
    "build_mobility",
    "read_trace",
    "uniform_disc_positions_m",
]


def build_mobility(
    cfg: MobilityConfig,
    *,
    num_devices: int,
    cell_radius_m: float,
    min_distance_m: float,
    streams: Streams,
    base_dir: Path | None = None,
) -> Mobility:
    """Build the mobility model of a scenario, validating everything up front.

    Args:
        cfg: the ``[mobility]`` table.
        num_devices: ``N >= 1``.
        cell_radius_m: cell radius ``R``, metres, ``> 0``.
        min_distance_m: minimum device-server distance, metres, ``>= 0`` (inner radius of the
            uniform placement; waypoints and explicit / trace positions may be closer).
        streams: the run's random streams (``"placement"`` and ``"mobility"``, per device).
        base_dir: folder against which a relative ``cfg.file`` is resolved (the scenario file's
            folder); ``None``: the current directory.

    Returns:
        a :class:`StaticMobility`, :class:`RandomWaypoint` or :class:`TraceMobility`.

    Raises:
        ScenarioError: with field ``mobility.positions_m`` (wrong count, outside the cell),
            ``mobility.placement`` (cell radius not above the minimum distance) or
            ``mobility.file`` (missing / unreadable file, missing columns, bad values, devices
            missing from or unknown to the scenario, duplicate samples, samples outside the cell).
        ValueError: ``num_devices``, ``cell_radius_m`` or ``min_distance_m`` out of range (the
            scenario schema owns and validates those fields).
    """
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1; got {num_devices}")
    if not (math.isfinite(cell_radius_m) and cell_radius_m > 0.0):
        raise ValueError(f"cell_radius_m must be finite and > 0; got {cell_radius_m}")
    if not (math.isfinite(min_distance_m) and min_distance_m >= 0.0):
        raise ValueError(f"min_distance_m must be finite and >= 0; got {min_distance_m}")

    if cfg.model == "trace":
        assert cfg.file is not None  # guaranteed by MobilityConfig
        path = Path(cfg.file).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        return TraceMobility.from_file(
            path, num_devices=num_devices, cell_radius_m=cell_radius_m, field="mobility.file"
        )

    pos = initial_positions(
        cfg,
        num_devices=num_devices,
        cell_radius_m=cell_radius_m,
        min_distance_m=min_distance_m,
        streams=streams,
    )
    if cfg.model == "static":
        return StaticMobility(pos)
    return RandomWaypoint(
        pos,
        cell_radius_m,
        cfg.speed_mps,
        cfg.pause_s,
        streams.devices("mobility", num_devices),
    )
