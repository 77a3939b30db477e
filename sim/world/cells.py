"""Several cells: base-station layouts, frequency reuse, association and inter-cell interference.

Groundwork of issue 37 (``docs/cells.md``): pure, vectorised functions over numpy arrays, SI
units in the names, as in :mod:`wflsim.sim.world.physics`. Nothing here is wired into the
scenario or the engine yet.

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
from functools import lru_cache
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import integrate

from ..errors import ScenarioError
from .physics import PATHLOSS_INTERCEPT_DB, PATHLOSS_SLOPE_DB, large_scale_gain, path_loss_db

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

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


# ------------------------------------------------------------------------------------ SINR


def uplink_interference_w(
    rx_power_w: ArrayLike, serving: ArrayLike, band: ArrayLike, active: ArrayLike
) -> F64:
    """Inter-cell interference at each cell's base station, W.

    ``I[c] = sum of rx_power_w[m, c]`` over the devices ``m`` that transmit (``active``), are
    served by another cell (``serving[m] != c``) and whose cell shares ``c``'s band
    (``band[serving[m]] == band[c]``).

    The model: devices of the same cell are orthogonal (dedicated bands or OFDMA sub-bands
    within the cell, or TDMA slots), so they never interfere with one another; across cells on
    one band every co-band transmission falls on the victim's band in full (the worst case: no
    coordination of sub-band allocations between cells). ``rx_power_w`` is the power that lands
    in the band the victim decodes; a caller whose interferers overlap only part of it scales
    the powers (e.g. by the overlapping fraction) before calling.

    Args:
        rx_power_w: ``(N, C)``, the power of device ``n``'s transmission received at cell
            ``c``'s base station (``p_n h[n, c]``, fading included or not), W, ``>= 0``.
        serving: ``(N,)`` serving cells; ``-1`` (unserved) only for devices that do not transmit.
        band: ``(C,)`` each cell's band (:func:`reuse_bands`).
        active: ``(N,)`` booleans, true for the devices transmitting at this instant.

    Returns:
        ``(C,)`` interference powers, W.

    Raises:
        ValueError: on shapes that do not match, a negative or non-finite power, a cell index
            out of range, or a transmitting device with no cell.
    """
    return _interference(*_sinr_inputs(rx_power_w, serving, band, active))


def _interference(rx: F64, cur: I64, bands: I64, on: NDArray[np.bool_]) -> F64:
    """:func:`uplink_interference_w` on checked arrays."""
    cells = np.arange(rx.shape[1])
    cur_band = bands[np.maximum(cur, 0)]
    mask = (
        on[:, None]
        & (cur[:, None] != cells[None, :])
        & (cur_band[:, None] == bands[None, :])
        & (cur[:, None] >= 0)
    )
    return np.where(mask, rx, 0.0).sum(axis=0)


def uplink_sinr(
    rx_power_w: ArrayLike,
    serving: ArrayLike,
    band: ArrayLike,
    active: ArrayLike,
    noise_w: ArrayLike,
) -> F64:
    """Uplink signal-to-interference-plus-noise ratio of each device at its serving cell.

    ``SINR[n] = S[n] / (N0 + I[serving[n]])`` with the signal ``S[n] = rx_power_w[n,
    serving[n]]`` and the interference ``I`` of :func:`uplink_interference_w`: the transmitting
    devices of the **other** cells on the same band (devices of one cell are orthogonal, as under
    dedicated bands or OFDMA; see there). The rate on a band ``W`` is then
    ``W log2(1 + SINR)`` (eq. 9 with ``N0 + I`` for ``N0``). With no co-band transmission it is
    the SNR ``p h / N0`` of :func:`~wflsim.sim.world.physics.rate_bps`.

    Every served device gets the SINR it has (or would have, if it is not ``active``) against
    the devices that transmit; an unserved device (``serving = -1``) gets 0.

    Args:
        rx_power_w: ``(N, C)`` received powers, W (``p_n h[n, c]``).
        serving: ``(N,)`` serving cells (``-1``: none; such a device must not be active).
        band: ``(C,)`` cell bands.
        active: ``(N,)`` booleans: who transmits at this instant.
        noise_w: noise power over the decoded band, W, ``> 0``: a scalar or ``(N,)``.

    Returns:
        ``(N,)`` SINRs, linear.
    """
    rx, cur, bands, on = _sinr_inputs(rx_power_w, serving, band, active)
    noise = np.broadcast_to(np.asarray(noise_w, dtype=np.float64), cur.shape)
    if not (np.isfinite(noise).all() and (noise > 0.0).all()):
        raise ValueError("noise_w must be finite and > 0")
    interference = _interference(rx, cur, bands, on)
    cell = np.maximum(cur, 0)
    signal = rx[np.arange(rx.shape[0]), cell]
    sinr = signal / (noise + interference[cell])
    return np.where(cur >= 0, sinr, 0.0)


def _sinr_inputs(
    rx_power_w: ArrayLike, serving: ArrayLike, band: ArrayLike, active: ArrayLike
) -> tuple[F64, I64, I64, NDArray[np.bool_]]:
    """The arrays of :func:`uplink_interference_w`, converted and checked."""
    rx = np.asarray(rx_power_w, dtype=np.float64)
    cur = np.asarray(serving)
    bands = np.asarray(band)
    on = np.asarray(active)
    if rx.ndim != 2:
        raise ValueError(f"rx_power_w must have shape (N, C), got {rx.shape}")
    n, c = rx.shape
    if not (np.isfinite(rx).all() and (rx >= 0.0).all()):
        raise ValueError("rx_power_w must hold finite, non-negative powers in W")
    if cur.shape != (n,) or not np.issubdtype(cur.dtype, np.integer):
        raise ValueError(f"serving must be ({n},) integers, got {cur.shape} {cur.dtype}")
    if bands.shape != (c,) or not np.issubdtype(bands.dtype, np.integer):
        raise ValueError(f"band must be ({c},) integers, got {bands.shape} {bands.dtype}")
    if on.shape != (n,) or on.dtype != np.bool_:
        raise ValueError(f"active must be ({n},) booleans, got {on.shape} {on.dtype}")
    if ((cur < -1) | (cur >= c)).any():
        raise ValueError(f"serving holds a cell outside -1 .. {c - 1}")
    if (on & (cur < 0)).any():
        raise ValueError(f"device {int(np.flatnonzero(on & (cur < 0))[0])} transmits with no cell")
    return rx, cur.astype(np.int64), bands.astype(np.int64), on


# ---------------------------------------------------------------------- mean interference


def mean_interference_w(
    tx_power_w: ArrayLike,
    victim_site_m: ArrayLike,
    interferer_site_m: ArrayLike,
    cell_radius_m: float,
    *,
    shape: Literal["hexagon", "disc"] = "hexagon",
    min_distance_m: float = 10.0,
    intercept_db: float = PATHLOSS_INTERCEPT_DB,
    slope_db: float = PATHLOSS_SLOPE_DB,
    reference_distance_m: float = 1000.0,
) -> F64:
    """Mean interference at a base station from one device dropped uniformly in another cell.

    ``E[I] = P / |A| * integral over A of 10^(-PL(|x - v|) / 10) dx``: the interfering device
    transmits at ``P`` from a point ``x`` uniform over the interfering cell ``A``; ``v`` is the
    victim base station; ``PL`` is :func:`~wflsim.sim.world.physics.path_loss_db` (clipped at
    ``min_distance_m``). Unit-mean fading (Rayleigh's ``g ~ Exp(1)``) leaves the mean unchanged;
    shadowing with a non-zero mean in linear terms would scale it. Computed by numerical
    integration (:func:`scipy.integrate.dblquad`, in polar coordinates about the interfering
    site, relative error about 1e-9).

    This is what a controller can plan on: the expected interference from each co-band cell
    with one upload in flight (times the probability that one is), added to ``N0`` as a margin
    (:func:`mean_cell_interference_w` sums it over a layout).

    Args:
        tx_power_w: the interferer's transmit power ``P``, W (any shape; the result is linear
            in it).
        victim_site_m: ``(2,)`` the victim base station, metres.
        interferer_site_m: ``(2,)`` the interfering cell's site, metres.
        cell_radius_m: the interfering cell's size, metres: for ``"hexagon"`` its circumradius
            (``ISD / sqrt(3)`` in :func:`hexagonal_sites_m`'s layout, oriented as there:
            vertices at the bearings 30, 90, ..., 330 degrees); for ``"disc"`` its radius.
        shape: ``"hexagon"`` (the cell of a hexagonal layout) or ``"disc"``.
        min_distance_m, intercept_db, slope_db, reference_distance_m: the path-loss model
            (:func:`~wflsim.sim.world.physics.path_loss_db`).

    Returns:
        the mean received interference power, W (the shape of ``tx_power_w``).
    """
    radius = float(cell_radius_m)
    if not (math.isfinite(radius) and radius > 0.0):
        raise ValueError(f"cell_radius_m must be finite and > 0, got {cell_radius_m!r}")
    if shape not in ("hexagon", "disc"):
        raise ValueError(f'shape must be "hexagon" or "disc", got {shape!r}')
    v = np.asarray(victim_site_m, dtype=np.float64) - np.asarray(interferer_site_m, np.float64)
    if v.shape != (2,) or not np.isfinite(v).all():
        raise ValueError("victim_site_m and interferer_site_m must be finite (2,) positions")
    dx, dy = float(v[0]), float(v[1])
    if shape == "hexagon":
        dx, dy = _hexagon_canonical(dx, dy)
    gain = _mean_gain(
        shape,
        round(dx, 9),
        round(dy, 9),
        radius,
        float(min_distance_m),
        float(intercept_db),
        float(slope_db),
        float(reference_distance_m),
    )
    return np.asarray(tx_power_w, dtype=np.float64) * gain


def mean_cell_interference_w(
    sites_m: ArrayLike,
    band: ArrayLike,
    tx_power_w: float,
    cell_radius_m: float,
    activity: float = 1.0,
    *,
    shape: Literal["hexagon", "disc"] = "hexagon",
    min_distance_m: float = 10.0,
) -> F64:
    """Planning interference at every cell: ``sum over co-band cells c' != c of a P g(c, c')``,
    W, with ``g`` the mean gain of :func:`mean_interference_w` and ``a`` the probability that a
    cell has one upload in flight on the victim's band (``activity``; 1: always, the worst case
    of one interferer per co-band cell).

    Args:
        sites_m: ``(C, 2)`` site positions, metres.
        band: ``(C,)`` cell bands.
        tx_power_w: the interferers' transmit power, W.
        cell_radius_m: cells' circumradius (``"hexagon"``) or radius (``"disc"``), metres.
        activity: ``a`` in ``[0, 1]``.
        shape, min_distance_m: see :func:`mean_interference_w` (the paper's path loss).

    Returns:
        ``(C,)`` mean interference powers, W.
    """
    sites = validate_sites_m(sites_m)
    bands = np.asarray(band)
    if bands.shape != (len(sites),):
        raise ValueError(f"band must have shape ({len(sites)},), got {bands.shape}")
    if not 0.0 <= activity <= 1.0:
        raise ValueError(f"activity must be in [0, 1], got {activity!r}")
    out = np.zeros(len(sites), dtype=np.float64)
    for c in range(len(sites)):  # C^2 integrals at most, cached by relative position
        for other in np.flatnonzero((bands == bands[c]) & (np.arange(len(sites)) != c)):
            out[c] += float(
                mean_interference_w(
                    tx_power_w,
                    sites[c],
                    sites[other],
                    cell_radius_m,
                    shape=shape,
                    min_distance_m=min_distance_m,
                )
            )
    return activity * out


def _hexagon_canonical(dx: float, dy: float) -> tuple[float, float]:
    """The victim's position relative to a hexagon's centre, folded by the hexagon's symmetries
    (rotations by 60 degrees, reflections) into the sector of bearings 0 to 30 degrees."""
    rho = math.hypot(dx, dy)
    phi = math.atan2(dy, dx) % (math.pi / 3.0)
    phi = min(phi, math.pi / 3.0 - phi)
    return rho * math.cos(phi), rho * math.sin(phi)


@lru_cache(maxsize=4096)
def _mean_gain(
    shape: str,
    dx: float,
    dy: float,
    radius: float,
    min_distance_m: float,
    intercept_db: float,
    slope_db: float,
    reference_distance_m: float,
) -> float:
    """Mean linear gain from a point uniform over the cell (centred at the origin) to ``(dx,
    dy)``: the integral over the cell divided by its area."""

    def gain(r: float, phi: float) -> float:
        d = math.hypot(r * math.cos(phi) - dx, r * math.sin(phi) - dy)
        d_rel = max(d, min_distance_m) / reference_distance_m
        return float(r * 10.0 ** (-(intercept_db + slope_db * math.log10(d_rel)) / 10.0))

    # 12 pieces of 30 degrees, each from a side's normal (bearing 60 j) to a vertex (60 j +- 30):
    # on each the hexagon's edge apothem / cos(phi - 60 j) is smooth (the piece's midpoint picks
    # its normal; the disc is cut the same way)
    total = 0.0
    for k in range(12):
        lo, hi = k * math.pi / 6.0, (k + 1) * math.pi / 6.0
        mid_normal = math.pi / 3.0 * round((lo + hi) / 2.0 / (math.pi / 3.0))

        def edge(phi: float, normal: float = mid_normal) -> float:
            if shape == "disc":
                return radius
            return radius * _SQRT3 / 2.0 / math.cos(phi - normal)

        # dblquad integrates func(y, x) over x in [a, b], y in [g(x), h(x)]: here x = phi, y = r
        value, _ = integrate.dblquad(gain, lo, hi, 0.0, edge, epsabs=0.0, epsrel=1e-10)
        total += value
    area = math.pi * radius * radius if shape == "disc" else 1.5 * _SQRT3 * radius * radius
    return total / area


def _positive(value: float, field: str) -> float:
    """A finite, positive number, or a refusal naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ScenarioError(field, f"must be a number, got {value!r}")
    if not (math.isfinite(float(value)) and float(value) > 0.0):
        raise ScenarioError(field, f"must be finite and > 0, got {value!r}")
    return float(value)
