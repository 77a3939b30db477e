"""Several cells' layout: base-station sites, frequency reuse, association, and the resolved
layout of a run (:class:`CellLayout`, :func:`build_layout`).

Pure, vectorised functions over numpy arrays, SI units in the names, as in
:mod:`wflsim.sim.world.physics` (``docs/cells.md``); the inter-cell interference is
:mod:`wflsim.sim.radio.interference`'s.

Shapes: ``N`` devices, ``C`` cells (one base station, or *site*, per cell). Positions are
metres in the plane, shape ``(..., 2)``; gains and powers are linear (not dB).

The hexagonal grid. Sites sit on a triangular lattice with the inter-site distance ``ISD`` as
its spacing; a site's six neighbours lie at the bearings 0, 60, ..., 300 degrees. Its cell (the
region closer to it than to any other site) is a hexagon with flat sides facing the neighbours:
apothem ``ISD / 2``, circumradius (the usual "cell radius") ``ISD / sqrt(3)``, vertices at the
bearings 30, 90, ..., 330 degrees. Axial coordinates ``(q, r)`` name a site at
``ISD * (q + r / 2, r sqrt(3) / 2)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ...errors import ScenarioError
from ...world.physics import large_scale_gain, path_loss_db
from .config import CellsConfig, CellUplinkMode

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
B8 = NDArray[np.bool_]

#: The frequency reuse factors :func:`reuse_bands` knows (``N = i^2 + i j + j^2`` clusters of the
#: hexagonal grid: 1 = (1, 0), 3 = (1, 1), 7 = (2, 1)).
REUSE_FACTORS = (1, 3, 7)

#: Tolerance, in units of the inter-site distance, for a site to count as a node of the
#: hexagonal grid (:func:`reuse_bands`).
GRID_TOLERANCE = 1e-6

_SQRT3 = math.sqrt(3.0)
#: Axial steps to the six neighbours, counterclockwise from the bearing 0 degrees.
_AXIAL_DIRECTIONS = ((1, 0), (0, 1), (-1, 1), (-1, 0), (0, -1), (1, -1))


# ----------------------------------------------------------------------------------- layouts


def hexagonal_axial(rings: int) -> I64:
    """Axial coordinates ``(q, r)`` of the sites of a hexagonal layout, in the order of
    :func:`hexagonal_sites_m`.

    Args:
        rings: rings of cells around the centre cell, ``>= 0``.

    Returns:
        ``(C, 2)`` integers, ``C = 1 + 3 rings (rings + 1)``.

    Raises:
        ScenarioError: on ``cells.rings`` when ``rings`` is not a non-negative integer.
    """
    if isinstance(rings, bool) or not isinstance(rings, int | np.integer) or rings < 0:
        raise ScenarioError(
            "cells.rings", f"must be a non-negative integer, got {rings!r}", "0 for one cell"
        )
    coords = [(0, 0)]
    for k in range(1, int(rings) + 1):
        # ring k starts on the bearing 0 degrees and walks counterclockwise: k steps along each
        # side, the first side heading 120 degrees
        q, r = k, 0
        for dq, dr in _AXIAL_DIRECTIONS[2:] + _AXIAL_DIRECTIONS[:2]:
            for _ in range(k):
                coords.append((q, r))
                q, r = q + dq, r + dr
    return np.asarray(coords, dtype=np.int64).reshape(-1, 2)


def hexagonal_sites_m(rings: int, inter_site_distance_m: float) -> F64:
    """Base-station positions of a hexagonal layout: a centre cell and ``rings`` rings around it.

    Order: the centre site first, at the origin; then ring 1, ring 2, ... Ring ``k`` holds
    ``6 k`` sites; it starts at ``(k ISD, 0)`` (bearing 0 degrees) and walks counterclockwise,
    ``k`` sites along each of the ring's six sides (ring 1: the bearings 0, 60, ..., 300
    degrees). Every site's nearest neighbours are ``ISD`` away.

    Args:
        rings: rings around the centre cell, ``>= 0`` (0: one cell, 1: 7 cells, 2: 19 cells).
        inter_site_distance_m: ``ISD``, the distance between neighbouring sites, metres (> 0).

    Returns:
        ``(C, 2)`` positions, metres, ``C = 1 + 3 rings (rings + 1)``.

    Raises:
        ScenarioError: on ``cells.rings`` or ``cells.inter_site_distance_m``.
    """
    isd = _positive(inter_site_distance_m, "cells.inter_site_distance_m")
    axial = hexagonal_axial(rings).astype(np.float64)
    q, r = axial[:, 0], axial[:, 1]
    return np.stack([isd * (q + 0.5 * r), isd * (0.5 * _SQRT3) * r], axis=1)


def validate_sites_m(sites_m: ArrayLike, field: str = "cells.sites_m") -> F64:
    """An explicit list of base-station positions, checked.

    Args:
        sites_m: positions, shape ``(C, 2)`` (a list of ``[x, y]`` pairs), metres.
        field: the scenario field named in a refusal.

    Returns:
        the positions as a ``(C, 2)`` float64 array (a copy).

    Raises:
        ScenarioError: on ``field`` when the list is empty, not of pairs, holds a value that is
            not a finite number, or places two sites at the same point.
    """
    try:
        sites = np.array(sites_m, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(field, f"must be a list of [x, y] pairs in metres ({exc})") from None
    if sites.size == 0:
        raise ScenarioError(field, "is empty", "give at least one site")
    if sites.ndim != 2 or sites.shape[1] != 2:
        raise ScenarioError(
            field, f"must be a list of [x, y] pairs in metres, got shape {sites.shape}"
        )
    bad = ~np.isfinite(sites).all(axis=1)
    if bad.any():
        raise ScenarioError(field, f"site {int(np.flatnonzero(bad)[0])} is not finite")
    order = np.lexsort((sites[:, 1], sites[:, 0]))
    same = (sites[order[1:]] == sites[order[:-1]]).all(axis=1)
    if same.any():
        k = int(np.flatnonzero(same)[0])
        i, twin = sorted((int(order[k]), int(order[k + 1])))
        raise ScenarioError(field, f"sites {i} and {twin} are at the same point")
    return sites


def site_distances_m(positions_m: ArrayLike, sites_m: ArrayLike) -> F64:
    """Distance of every device to every site.

    Args:
        positions_m: device positions, ``(N, 2)``, metres.
        sites_m: site positions, ``(C, 2)``, metres.

    Returns:
        ``(N, C)`` distances, metres.
    """
    pos = np.asarray(positions_m, dtype=np.float64)
    sites = np.asarray(sites_m, dtype=np.float64)
    return np.hypot(
        pos[:, None, 0] - sites[None, :, 0], pos[:, None, 1] - sites[None, :, 1]
    ).reshape(pos.shape[0], sites.shape[0])


def site_gains(positions_m: ArrayLike, sites_m: ArrayLike, min_distance_m: float = 10.0) -> F64:
    """Long-term (path-loss) gain of every device to every site,
    ``H[n, c] = 10^(-PL(d[n, c]) / 10)`` with the paper's path loss (:func:`path_loss_db`).

    Args:
        positions_m: ``(N, 2)``, metres.
        sites_m: ``(C, 2)``, metres.
        min_distance_m: distances below it are clipped to it, metres.

    Returns:
        ``(N, C)`` linear gains.
    """
    d = site_distances_m(positions_m, sites_m)
    return large_scale_gain(path_loss_db(d, min_distance_m=min_distance_m))


# ---------------------------------------------------------------------------- frequency reuse


def reuse_bands(sites_m: ArrayLike, reuse_factor: int) -> I64:
    """Band of each cell under frequency reuse ``N`` (the cell's band index, ``0 .. N-1``).

    * ``N = 1``: every cell on band 0 (full reuse: every other cell interferes).
    * ``N = 3``: the 3-colouring of the hexagonal grid, band ``(q - r) mod 3`` of a site's axial
      coordinates: no two neighbouring cells share a band; co-band sites are ``sqrt(3) ISD``
      apart at least.
    * ``N = 7``: band ``(q + 3 r) mod 7``: a cell and its six neighbours use the seven bands;
      co-band sites are ``sqrt(7) ISD`` apart at least.

    For ``N > 1`` the sites must be nodes of one hexagonal grid (any subset of it): the grid is
    read off the sites themselves: the first site is its origin (band 0), the closest pair of
    sites gives its spacing ``ISD`` and its orientation (modulo 60 degrees), so a translated or
    rotated :func:`hexagonal_sites_m` layout gets the same bands up to a relabelling (the same
    cells share a band).

    Args:
        sites_m: ``(C, 2)`` positions, metres.
        reuse_factor: ``N``, one of :data:`REUSE_FACTORS`.

    Returns:
        ``(C,)`` band indices.

    Raises:
        ScenarioError: on ``cells.reuse_factor`` for a factor other than 1, 3 or 7; on
            ``cells.sites_m`` for sites off one hexagonal grid when ``N > 1``.
    """
    if (
        isinstance(reuse_factor, bool)
        or not isinstance(reuse_factor, int | np.integer)
        or int(reuse_factor) not in REUSE_FACTORS
    ):
        raise ScenarioError(
            "cells.reuse_factor",
            f"must be one of {', '.join(map(str, REUSE_FACTORS))}, got {reuse_factor!r}",
        )
    sites = validate_sites_m(sites_m)
    if reuse_factor == 1 or len(sites) == 1:
        return np.zeros(len(sites), dtype=np.int64)
    q, r = _grid_axial(sites).T
    if reuse_factor == 3:
        return np.mod(q - r, 3)
    return np.mod(q + 3 * r, 7)


def _grid_axial(sites: F64) -> I64:
    """Axial coordinates of sites on one hexagonal grid, read off the sites (origin: site 0;
    spacing and orientation: the closest pair). Refuses sites off the grid."""
    rel = sites - sites[0]
    diff = rel[:, None, :] - rel[None, :, :]
    dist = np.hypot(diff[..., 0], diff[..., 1])
    np.fill_diagonal(dist, np.inf)
    i, j = np.unravel_index(int(np.argmin(dist)), dist.shape)
    isd = float(dist[i, j])
    # rotate so that the closest pair lies along a lattice direction (bearing 0 mod 60 degrees)
    angle = math.atan2(diff[j, i, 1], diff[j, i, 0]) % (math.pi / 3.0)
    c, s = math.cos(-angle), math.sin(-angle)
    x = (c * rel[:, 0] - s * rel[:, 1]) / isd
    y = (s * rel[:, 0] + c * rel[:, 1]) / isd
    r_f = y / (0.5 * _SQRT3)
    q_f = x - 0.5 * r_f
    axial = np.rint(np.stack([q_f, r_f], axis=1))
    off = np.hypot(
        x - (axial[:, 0] + 0.5 * axial[:, 1]), y - 0.5 * _SQRT3 * axial[:, 1]
    )  # in units of ISD
    if (off > GRID_TOLERANCE).any():
        k = int(np.argmax(off))
        raise ScenarioError(
            "cells.sites_m",
            f"site {k} is off the hexagonal grid of spacing {isd:g} m that the closest sites "
            f"({i} and {j}) span ({off[k] * isd:g} m from its nearest node); reuse 3 and 7 "
            "need sites on one hexagonal grid",
            "use a hexagonal layout, or cells.reuse_factor = 1",
        )
    return axial.astype(np.int64)


# -------------------------------------------------------------------------------- association


def associate_strongest(
    gain: ArrayLike, serving: ArrayLike, hysteresis_db: float
) -> tuple[I64, NDArray[np.bool_]]:
    """Association by the strongest long-term gain, with a hysteresis for handover.

    * A device with no cell (``serving = -1``) takes the cell of the strongest gain.
    * A served device hands over to the strongest cell only when that cell's gain exceeds its
      serving cell's by **more than** ``hysteresis_db``:
      ``10 log10(H[best] / H[serving]) > hysteresis_db`` (at exactly the hysteresis it stays).
      Moving from site A to site B along the line between them, it hands over once, where B's
      gain first exceeds A's by the hysteresis; back at the same point it stays with B until A
      leads by the hysteresis: no back-and-forth within the margin.
    * Ties (equal gains) go to the lowest cell index.
    * A device whose gains are all 0 (no cell reachable) keeps its cell (``-1`` if none).

    Args:
        gain: ``(N, C)`` long-term linear gains of each device to each cell (path loss and
            shadowing, not the fast fading), ``>= 0``.
        serving: ``(N,)`` each device's current cell, ``-1`` for none yet.
        hysteresis_db: the handover margin, dB, ``>= 0``.

    Returns:
        ``(new_serving, handover)``: ``(N,)`` cells and a ``(N,)`` boolean mask, true where a
        served device changed cell (a first association is not a handover).

    Raises:
        ValueError: on a gain that is negative or not finite, a cell index out of range, shapes
            that do not match, or a negative hysteresis.
    """
    g = np.asarray(gain, dtype=np.float64)
    cur = np.asarray(serving)
    if g.ndim != 2 or g.shape[1] == 0:
        raise ValueError(f"gain must have shape (N, C) with C >= 1, got {g.shape}")
    if not (np.isfinite(g).all() and (g >= 0.0).all()):
        raise ValueError("gain must hold finite, non-negative linear gains")
    if cur.shape != (g.shape[0],) or not np.issubdtype(cur.dtype, np.integer):
        raise ValueError(f"serving must be ({g.shape[0]},) integers, got {cur.shape} {cur.dtype}")
    if ((cur < -1) | (cur >= g.shape[1])).any():
        raise ValueError(f"serving holds a cell outside -1 .. {g.shape[1] - 1}")
    if not (math.isfinite(hysteresis_db) and hysteresis_db >= 0.0):
        raise ValueError(f"hysteresis_db must be finite and >= 0, got {hysteresis_db!r}")
    cur = cur.astype(np.int64)
    rows = np.arange(g.shape[0])
    best = np.argmax(g, axis=1)  # the first maximum: ties go to the lowest index
    best_gain = g[rows, best]
    reachable = best_gain > 0.0
    served = cur >= 0
    current_gain = g[rows, np.maximum(cur, 0)]
    margin = 10.0 ** (hysteresis_db / 10.0)
    move = reachable & (best != cur) & (best_gain > current_gain * margin)
    new = np.where(served, np.where(move, best, cur), np.where(reachable, best, -1))
    return new.astype(np.int64), served & move


def associate_nearest(positions_m: ArrayLike, sites_m: ArrayLike) -> I64:
    """Association by distance: each device's nearest site (ties: the lowest site index).

    Args:
        positions_m: ``(N, 2)`` device positions, metres.
        sites_m: ``(C, 2)`` site positions, metres.

    Returns:
        ``(N,)`` cell indices.
    """
    return np.argmin(site_distances_m(positions_m, sites_m), axis=1).astype(np.int64)


def _positive(value: float, field: str) -> float:
    """A finite, positive number, or a refusal naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ScenarioError(field, f"must be a number, got {value!r}")
    if not (math.isfinite(float(value)) and float(value) > 0.0):
        raise ScenarioError(field, f"must be finite and > 0, got {value!r}")
    return float(value)


# ------------------------------------------------------------------------- a run's layout


@dataclass(frozen=True)
class CellLayout:
    """The resolved layout of a run's cells (``(C,)`` arrays over cells).

    Attributes:
        sites_m: ``(C, 2)`` base-station positions, m (cell ``c`` is row ``c``).
        band: ``(C,)`` each cell's band: cells on one band interfere.
        modes: each cell's uplink (``dedicated``, ``ofdma``, ``tdma``).
        cell_radius_m: a cell's circumradius (``network.cell_radius_m``), m.
        area_radius_m: devices live in the disc of this radius about the origin, m.
        hexagonal: whether the sites come from ``rings`` (their cells are hexagons).
    """

    sites_m: F64
    band: I64
    modes: tuple[CellUplinkMode, ...]
    cell_radius_m: float
    area_radius_m: float
    hexagonal: bool = False

    @property
    def num_cells(self) -> int:
        """``C``."""
        return int(self.sites_m.shape[0])

    @property
    def co_band(self) -> B8:
        """``(C, C)``: ``co_band[a, v]`` iff ``a != v`` share a band (``a``'s uploads interfere
        at ``v``'s base station)."""
        same = self.band[:, None] == self.band[None, :]
        return same & ~np.eye(self.num_cells, dtype=bool)

    @property
    def interferes(self) -> bool:
        """Whether two cells share a band (uploads in different cells interact)."""
        return bool(self.co_band.any())

    @property
    def shared(self) -> bool:
        """Whether a cell shares its band among its uploads (OFDMA or TDMA)."""
        return any(m != "dedicated" for m in self.modes)

    @property
    def interacts(self) -> bool:
        """Whether uploads interact anywhere (the event kernel plays them)."""
        return self.interferes or self.shared

    def describe(self) -> dict[str, Any]:
        """The layout for the run's manifest."""
        return {
            "num_cells": self.num_cells,
            "sites_m": self.sites_m.tolist(),
            "band": self.band.tolist(),
            "uplink": list(self.modes),
            "cell_radius_m": self.cell_radius_m,
            "area_radius_m": self.area_radius_m,
        }


def build_layout(cfg: CellsConfig, cell_radius_m: float, uplink_mode: CellUplinkMode) -> CellLayout:
    """The layout of a ``[cells]`` table (``cell_radius_m``: ``network.cell_radius_m``;
    ``uplink_mode``: ``[uplink] mode``, each cell's default).

    Raises:
        ScenarioError: sites that coincide or are not finite (``cells.sites_m``), a reuse factor
            the sites' grid cannot take (``cells.reuse_factor``).
    """
    if cfg.sites_m is not None:
        sites = validate_sites_m(np.asarray(cfg.sites_m, dtype=np.float64).reshape(-1, 2))
        hexagonal = False
    else:
        assert cfg.rings is not None
        sites = hexagonal_sites_m(cfg.rings, cfg.isd_m(cell_radius_m))
        hexagonal = True
    if cfg.bands is not None:
        band = np.asarray(cfg.bands, dtype=np.int64)
    else:
        band = reuse_bands(sites, cfg.reuse_factor)
    modes = tuple(cfg.uplink) if cfg.uplink is not None else (uplink_mode,) * len(sites)
    area = cfg.area_radius_m
    if area is None:
        area = float(np.hypot(sites[:, 0], sites[:, 1]).max()) + float(cell_radius_m)
    return CellLayout(sites, band, modes, float(cell_radius_m), float(area), hexagonal)
