"""Initial device positions: uniform by area in the cell's annulus, or explicit."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ... import fmath
from ...errors import ScenarioError
from ...rng import Streams
from .base import CELL_EDGE_RTOL, F64, id_list
from .config import MobilityConfig


def uniform_disc_positions_m(
    num_devices: int,
    radius_m: float,
    min_distance_m: float,
    rngs: Sequence[np.random.Generator] | F64,
) -> F64:
    """Positions uniform by area in the annulus ``min_distance_m <= r <= radius_m``.

    Device ``n`` uses only ``rngs[n]`` (``streams.device("placement", n)``): two doubles
    ``u0, u1``; radius ``sqrt(r_min^2 + u0 (R^2 - r_min^2))`` (radial CDF
    ``(r^2 - r_min^2) / (R^2 - r_min^2)``), angle ``2 pi u1``. ``rngs`` may also be those
    doubles themselves, an ``(N, 2)`` array (``streams.device_uniforms("placement", N, 2)``, the
    same numbers drawn for all devices at once).

    Args:
        num_devices: ``N >= 1``.
        radius_m: outer radius ``R``, metres.
        min_distance_m: inner radius ``r_min``, metres, ``0 <= r_min <= R``.
        rngs: ``N`` generators, one per device, or their first two doubles, ``(N, 2)``.

    Returns:
        shape ``(N, 2)``, ``float64``, metres.
    """
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1; got {num_devices}")
    if len(rngs) != num_devices:
        raise ValueError(f"need one generator per device: {num_devices} devices, {len(rngs)}")
    if not (0.0 <= min_distance_m <= radius_m and math.isfinite(radius_m)):
        raise ValueError(
            f"need 0 <= min_distance_m <= radius_m < inf; got {min_distance_m}, {radius_m}"
        )
    if isinstance(rngs, np.ndarray):
        u = np.asarray(rngs, dtype=np.float64).reshape(num_devices, 2)
    else:
        u = np.array([rng.random(2) for rng in rngs], dtype=np.float64).reshape(num_devices, 2)
    r2_min = min_distance_m * min_distance_m
    r = np.sqrt(r2_min + u[:, 0] * (radius_m * radius_m - r2_min))
    r = np.clip(r, min_distance_m, radius_m)  # guard against rounding at the edges
    ang = 2.0 * np.pi * u[:, 1]
    return np.column_stack((r * fmath.cos(ang), r * fmath.sin(ang)))


def initial_positions(
    cfg: MobilityConfig,
    *,
    num_devices: int,
    cell_radius_m: float,
    min_distance_m: float,
    streams: Streams,
) -> F64:
    if cfg.placement == "explicit":
        assert cfg.positions_m is not None  # guaranteed by MobilityConfig
        if len(cfg.positions_m) != num_devices:
            raise ScenarioError(
                "mobility.positions_m",
                f"{len(cfg.positions_m)} positions given for {num_devices} devices",
                "give exactly one [x, y] pair (metres) per device",
            )
        pos = np.asarray(cfg.positions_m, dtype=np.float64).reshape(num_devices, 2)
        dist = np.hypot(pos[:, 0], pos[:, 1])
        outside = np.flatnonzero(dist > cell_radius_m * (1.0 + CELL_EDGE_RTOL))
        if outside.size:
            i = int(outside[0])
            raise ScenarioError(
                "mobility.positions_m",
                f"device(s) {id_list(outside)} lie outside the cell of radius {cell_radius_m} m "
                f"(device {i} at ({pos[i, 0]}, {pos[i, 1]}) m is {dist[i]:.6g} m from the server)",
                "move them inside the cell or increase the cell radius",
            )
        return pos
    if min_distance_m >= cell_radius_m:
        raise ScenarioError(
            "mobility.placement",
            f'placement = "uniform_disc" needs the cell radius ({cell_radius_m} m) to exceed the '
            f"minimum distance ({min_distance_m} m)",
            "increase the cell radius or decrease the minimum distance",
        )
    return uniform_disc_positions_m(
        num_devices,
        cell_radius_m,
        min_distance_m,
        streams.device_uniforms("placement", num_devices, 2),
    )
