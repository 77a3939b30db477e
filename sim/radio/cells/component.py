"""Several cells in a run (``[cells]``, docs/cells.md): the layout, the association of devices
with base stations at every frame start (with a hysteresis for handover), each device's gains to
every site (for the inter-cell interference), and what the scheme plans on.

The layout and association are the pure functions of :mod:`wflsim.sim.radio.cells.layout`, the
interference those of :mod:`wflsim.sim.radio.interference`; this module holds the run's
component, :class:`Cells`, which keeps the association between frames (its state) and draws the
fast fading of the links to the other sites.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ... import fmath
from ...errors import ScenarioError
from ...rng import Streams
from ...world.channel import Channel, ChannelConfig, build_fading
from ...world.channel.base import FadingModel
from ...world.mobility.base import Kinematics
from ...world.system import SystemConstants
from ..interference import GainFn, planning_interference_w
from .config import CellsConfig, CellUplinkMode
from .layout import (
    CellLayout,
    associate_nearest,
    associate_strongest,
    build_layout,
    site_distances_m,
)

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
B8 = NDArray[np.bool_]


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


def refuse_replay(replay: object) -> None:
    """Refuse a replayed channel (``channel.replay``, when not None) with several cells, for its
    physics (docs/decisions.md, issue 47).

    Raises:
        ScenarioError: naming ``channel.replay``.
    """
    if replay is not None:
        raise ScenarioError(
            "channel.replay",
            "a channel table holds one gain per device and slot, to a site it does not name; "
            "several cells need each device's gains to every site (association compares them, "
            "and co-band cells interfere through them)",
            "remove channel.replay, or remove [cells]",
        )


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
    refuse_replay(channel_cfg.replay)
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
