"""Several cells in a run (``[cells]``, docs/cells.md): the layout, the association of devices
with base stations at every frame start (with a hysteresis for handover), each device's gains to
every site (for the inter-cell interference), and what the scheme plans on.

The physics are the pure functions of :mod:`wflsim.sim.world.cells`; this module holds the run's
component, :class:`Cells`, which keeps the association between frames (its state) and draws the
fast fading of the links to the other sites.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import fmath
from ..errors import ScenarioError
from ..rng import Streams
from .cells import (
    associate_nearest,
    associate_strongest,
    hexagonal_sites_m,
    reuse_bands,
    site_distances_m,
    validate_sites_m,
)
from .cells_config import CellsConfig, CellUplinkMode
from .channel import Channel, ChannelConfig, build_fading
from .channel.base import FadingModel
from .mobility.base import Kinematics
from .system import SystemConstants

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
B8 = NDArray[np.bool_]

#: A path-loss gain as a function of distance: ``(M,)`` metres -> ``(M,)`` linear gains.
GainFn = Callable[[F64], F64]

_SQRT3 = math.sqrt(3.0)


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


@dataclass(frozen=True)
class Association:
    """The association of one frame (``(N,)`` arrays)."""

    serving: I64  #: each device's cell
    previous: I64  #: its cell in the frame before (-1 at the first frame)
    handover: B8  #: where a served device changed cell
    distance_m: F64  #: ``(N, C)`` distance of every device to every site, m


@dataclass
class Cells:
    """The run's cells: association at every frame start, each device's gains to every site,
    and the planning factor the scheme's gains are scaled by.

    Args:
        layout: the resolved layout.
        num_devices: ``N``.
        association: ``strongest`` (long-term gain, with ``hysteresis_db``) or ``nearest``.
        hysteresis_db: the handover margin, dB.
        median_gain: the channel's path-loss gain as a function of distance (the long-term
            gains of association and of the links to other sites).
        cross_fading: the fast fading of every device's links to every site, a fading model
            over ``N C`` links (link ``n C + c``); None where no two cells share a band (no
            interference to compute).
        plan_factor: ``(C,)`` what the scheme's gains are multiplied by in cell ``c``:
            ``N0 / (N0 + I_plan[c])`` (1: the paper's, interference-free).
    """

    layout: CellLayout
    num_devices: int
    association: str
    hysteresis_db: float
    median_gain: GainFn
    cross_fading: FadingModel | None = None
    plan_factor: F64 | None = None
    #: each device's cell (-1 before the first frame)
    serving: I64 = field(init=False)
    #: ``(N, C)`` long-term gains of the frame to every site (path loss and the device's
    #: shadowing), linear
    long_term_gain: F64 = field(init=False)
    #: ``(N, C)`` the slot's gains to every site (``long_term_gain`` times the fast fading), linear
    slot_gain: F64 = field(init=False)
    #: ``(C,)`` devices served by each cell in the frame
    load: I64 = field(init=False)
    #: ``(N,)`` the planning factor of each device's cell (:attr:`plan_factor`)
    device_plan_factor: F64 = field(init=False)

    def __post_init__(self) -> None:
        n, c = int(self.num_devices), self.layout.num_cells
        self.serving = np.full(n, -1, dtype=np.int64)
        self.long_term_gain = np.zeros((n, c))
        self.slot_gain = np.zeros((n, c))
        self.load = np.zeros(c, dtype=np.int64)
        if self.plan_factor is None:
            self.plan_factor = np.ones(c)
        self.device_plan_factor = np.ones(n)

    @property
    def num_cells(self) -> int:
        """``C``."""
        return self.layout.num_cells

    def associate(self, positions_m: F64) -> Association:
        """The frame's association from the devices' positions (updates :attr:`serving`)."""
        dist = site_distances_m(positions_m, self.layout.sites_m)
        previous = self.serving.copy()
        if self.association == "nearest":
            new = associate_nearest(positions_m, self.layout.sites_m)
            handover = (previous >= 0) & (new != previous)
        else:
            gain = self.median_gain(dist.ravel()).reshape(dist.shape)
            new, handover = associate_strongest(gain, previous, self.hysteresis_db)
            # a device out of every cell's reach keeps -1 only before any frame: take the nearest
            lost = new < 0
            if lost.any():
                new[lost] = np.argmin(dist[lost], axis=1)
        self.serving = new.astype(np.int64)
        self.load = np.bincount(self.serving, minlength=self.num_cells).astype(np.int64)
        assert self.plan_factor is not None
        self.device_plan_factor = self.plan_factor[self.serving]
        return Association(self.serving.copy(), previous, handover, dist)

    def relative(self, motion: Kinematics) -> Kinematics:
        """``motion`` with each device's position relative to its serving site (what the
        channel's distance and path loss are computed from)."""
        sites = self.layout.sites_m[self.serving]
        return replace(motion, positions_m=np.asarray(motion.positions_m) - sites)

    def frame_gains(self, assoc: Association, serving_gain: F64, shadowing_db: F64 | None) -> None:
        """The frame's long-term gains to every site: the path loss of each link with the
        device's shadowing (one per device, common to its links); the serving link's is the
        channel's own (``serving_gain``)."""
        d = assoc.distance_m
        g: F64 = np.asarray(self.median_gain(d.ravel()), dtype=np.float64).reshape(d.shape)
        n = int(d.shape[0])
        if shadowing_db is not None:
            g = g * fmath.power(10.0, -np.asarray(shadowing_db, dtype=np.float64) / 10.0)[:, None]
        g[np.arange(n), self.serving] = serving_gain
        self.long_term_gain = g

    def slot_gains(self, slot: int, serving_gain: F64, speed_mps: F64) -> None:
        """The slot's gains to every site (:attr:`slot_gain`): the long-term gain times an
        independent fast fading per link (keyed by device, site and slot); the serving link's
        is the channel's (``serving_gain``)."""
        n, c = self.long_term_gain.shape
        if self.cross_fading is None:
            g = self.long_term_gain.copy()
        else:
            small = self.cross_fading.draw(slot, np.repeat(speed_mps, c))
            g = self.long_term_gain * small.power.reshape(n, c)
        g[np.arange(n), self.serving] = serving_gain
        self.slot_gain = g

    def describe(self, system: SystemConstants) -> dict[str, Any]:
        """The cells for the run's manifest: the layout, the association and what the scheme
        plans on, with the difference from Proposition 1's interference-free assumption."""
        assert self.plan_factor is not None
        with np.errstate(divide="ignore"):
            margin_db = -10.0 * fmath.log10(self.plan_factor)
        return {
            **self.layout.describe(),
            "association": self.association,
            "hysteresis_db": self.hysteresis_db if self.association == "strongest" else None,
            "plan_factor": self.plan_factor.tolist(),
            "planned_interference_w": (system.noise_w * (1.0 / self.plan_factor - 1.0)).tolist(),
            "controller_assumption": {
                "assumption": "Proposition 1 and Theorem 2: the noise N0 alone limits an upload's rate",
                "matches": not self.layout.interferes,
                "differences": (
                    [
                        "cells share a band: an upload's rate follows its SINR, the interference "
                        "being the uploads in flight in the co-band cells; the scheme plans on "
                        f"N0 raised by {', '.join(f'{m:.2f}' for m in margin_db.tolist())} dB "
                        "per cell"
                    ]
                    if self.layout.interferes
                    else []
                ),
            },
        }

    def state_dict(self) -> dict[str, Any]:
        """Each device's cell (the hysteresis looks back at it) and the cross links' fading."""
        return {
            "serving": self.serving.copy(),
            "cross_fading": None if self.cross_fading is None else self.cross_fading.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        serving = np.array(state["serving"], dtype=np.int64)
        if serving.shape != (self.num_devices,) or (serving >= self.num_cells).any():
            raise ValueError("cells state is for another number of devices or cells")
        self.serving = serving
        if (serving >= 0).all():  # the frame's load and planning factors, as associate() left them
            self.load = np.bincount(serving, minlength=self.num_cells).astype(np.int64)
            assert self.plan_factor is not None
            self.device_plan_factor = self.plan_factor[serving]
        fading = state.get("cross_fading")
        if (fading is None) != (self.cross_fading is None):
            raise ValueError("cells state and this run disagree on the cross links' fading")
        if self.cross_fading is not None and fading is not None:
            self.cross_fading.load_state_dict(fading)


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


def build_cells(
    cfg: CellsConfig,
    *,
    channel: Channel,
    channel_cfg: ChannelConfig,
    system: SystemConstants,
    uplink_mode: CellUplinkMode,
    cell_radius_m: float,
    streams: Streams,
) -> Cells:
    """The run's cells of a ``[cells]`` table, on the run's channel (its path loss gives every
    link's long-term gain, its fading family the fast fading of the links to other sites).

    Raises:
        ScenarioError: a bad layout (``cells.sites_m``, ``cells.reuse_factor``), a replayed
            channel (``channel.replay``: it holds each device's gain to one base station).
    """
    if channel_cfg.replay is not None:
        raise ScenarioError(
            "channel.replay",
            "a replayed channel holds each device's gain to one base station; several cells "
            "need its gains to every site",
            "remove channel.replay, or remove [cells]",
        )
    layout = build_layout(cfg, cell_radius_m, uplink_mode)
    n = system.num_devices
    cross = None
    if layout.interferes:
        cross = build_fading(
            channel_cfg, n * layout.num_cells, system.deadline_s, streams, "cell_fading"
        )
    factor = np.ones(layout.num_cells)
    if cfg.plan_on == "margin":
        factor = np.full(layout.num_cells, 10.0 ** (-cfg.margin_db / 10.0))
    elif cfg.plan_on == "mean_interference":
        shadowing = getattr(channel, "shadowing", None)
        sigma = 0.0 if shadowing is None else max(shadowing.sigma_db)
        interference_w = planning_interference_w(
            layout,
            channel.median_gain,
            float(np.mean(system.devices.peak_power_w)),
            cfg.planning_activity,
            sigma,
        )
        factor = system.noise_w / (system.noise_w + interference_w)
    return Cells(
        layout,
        n,
        cfg.association,
        cfg.hysteresis_db,
        channel.median_gain,
        cross_fading=cross,
        plan_factor=factor,
    )
