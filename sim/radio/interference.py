"""Inter-cell interference on the uplink: who interferes with whom, the SINR it leaves, and the
mean interference a scheme can plan on.

Pure, vectorised functions over numpy arrays, SI units in the names (``docs/cells.md``). ``N``
devices, ``C`` cells (one base station, or *site*, per cell); gains and powers are linear. The
rate an SINR gives is :mod:`wflsim.sim.radio.rates`' (eq. 9 with ``N0 + I`` for ``N0``); the
cells' layout is :mod:`wflsim.sim.radio.cells.layout`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import integrate

from .. import fmath
from ..world.physics import PATHLOSS_INTERCEPT_DB, PATHLOSS_SLOPE_DB
from .cells.layout import CellLayout, validate_sites_m

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: A path-loss gain as a function of distance: ``(M,)`` metres -> ``(M,)`` linear gains.
GainFn = Callable[[F64], F64]

_SQRT3 = math.sqrt(3.0)


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
        band: ``(C,)`` each cell's band (:func:`~wflsim.sim.radio.cells.layout.reuse_bands`).
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
    the SNR ``p h / N0`` of :func:`~wflsim.sim.radio.rates.rate_bps`.

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
            (``ISD / sqrt(3)`` in :func:`~wflsim.sim.radio.cells.layout.hexagonal_sites_m`'s layout, oriented as there:
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


def mean_link_gain(
    median_gain: GainFn,
    victim_rel_m: tuple[float, float],
    cell_radius_m: float,
    *,
    hexagon: bool = True,
    order: int = 48,
) -> float:
    """Mean path-loss gain from a point uniform over a cell (centred at the origin) to a base
    station at ``victim_rel_m`` (outside the cell), by Gauss-Legendre quadrature in polar
    coordinates over 12 pieces of 30 degrees (on each the hexagon's edge is smooth): any
    path-loss model, vectorised in one call of ``median_gain``.

    Args:
        median_gain: ``(M,)`` metres -> ``(M,)`` linear gains.
        victim_rel_m: the victim site relative to the cell's centre, m.
        cell_radius_m: the cell's circumradius (``hexagon``) or radius, m.
        hexagon: a hexagon with vertices at the bearings 30, 90, ..., 330 degrees (else a disc).
        order: quadrature nodes per dimension and piece.

    Returns:
        the mean linear gain (multiply by a transmit power for the mean interference, W).
    """
    x, w = fmath.gauss_legendre(order)
    pieces = []
    weights = []
    for k in range(12):
        lo, hi = k * math.pi / 6.0, (k + 1) * math.pi / 6.0
        normal = math.pi / 3.0 * round((lo + hi) / 2.0 / (math.pi / 3.0))
        phi = lo + (hi - lo) * (x + 1.0) / 2.0
        wphi = w * (hi - lo) / 2.0
        edge = (
            cell_radius_m * _SQRT3 / 2.0 / fmath.cos(phi - normal)
            if hexagon
            else np.full(order, cell_radius_m)
        )
        r = edge[:, None] * (x[None, :] + 1.0) / 2.0  # (phi, r)
        wr = edge[:, None] * w[None, :] / 2.0
        pieces.append(np.stack([r * fmath.cos(phi)[:, None], r * fmath.sin(phi)[:, None]], axis=-1))
        weights.append(wphi[:, None] * wr * r)  # the Jacobian r
    pts = np.concatenate([p.reshape(-1, 2) for p in pieces])
    wts = np.concatenate([q.ravel() for q in weights])
    d = np.hypot(pts[:, 0] - victim_rel_m[0], pts[:, 1] - victim_rel_m[1])
    area = 1.5 * _SQRT3 * cell_radius_m**2 if hexagon else math.pi * cell_radius_m * cell_radius_m
    return float(np.sum(wts * median_gain(d)) / area)


def planning_interference_w(
    layout: CellLayout,
    median_gain: GainFn,
    tx_power_w: float,
    activity: float,
    shadowing_sigma_db: float = 0.0,
) -> F64:
    """The mean interference each cell's base station plans on, ``(C,)`` W: for every co-band
    cell one interferer at ``tx_power_w`` uniform over that cell (a hexagon of the layout's
    circumradius; a disc of the cell radius for explicit sites) with probability
    ``activity``, the log-normal shadowing's mean ``exp((sigma ln 10 / 10)^2 / 2)`` applied."""
    sites = layout.sites_m
    out = np.zeros(layout.num_cells)
    co = layout.co_band
    shadow = math.exp((shadowing_sigma_db * math.log(10.0) / 10.0) ** 2 / 2.0)
    for v in range(layout.num_cells):
        for a in np.flatnonzero(co[:, v]).tolist():
            rel = (float(sites[v, 0] - sites[a, 0]), float(sites[v, 1] - sites[a, 1]))
            out[v] += mean_link_gain(
                median_gain, rel, layout.cell_radius_m, hexagon=layout.hexagonal
            )
    return activity * tx_power_w * shadow * out
