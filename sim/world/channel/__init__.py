"""The radio channel: path loss per frame, small-scale fading per slot.

The component: :class:`ChannelConfig` (the scenario's ``[channel]`` table), the base classes
(:class:`Channel`, :class:`PathLossModel`, :class:`FadingModel`), one module per kind of model
(:mod:`~sim.world.channel.pathloss`, :mod:`~sim.world.channel.fading`) and the factory
:func:`build_channel`. Every model says whether it is what the controller's closed forms assume
(Theorem 2: Rayleigh block fading with mean ``H``, perfect CSI); :meth:`Channel.describe` records
it in the run's metadata.
"""

from __future__ import annotations

from sim.rng import Streams
from sim.world.channel.base import Channel, FadingModel, LargeScale, PathLossModel, SlotChannel
from sim.world.channel.config import (
    ChannelConfig,
    LogDistanceConfig,
    NoFadingConfig,
    RayleighConfig,
)
from sim.world.channel.fading import NoFading, Rayleigh
from sim.world.channel.pathloss import LogDistance

__all__ = [
    "Channel",
    "ChannelConfig",
    "FadingModel",
    "LargeScale",
    "LogDistance",
    "NoFading",
    "PathLossModel",
    "Rayleigh",
    "SlotChannel",
    "build_channel",
]


def build_channel(
    cfg: ChannelConfig, *, num_devices: int, min_distance_m: float, streams: Streams
) -> Channel:
    """The channel of a scenario.

    Args:
        cfg: the ``[channel]`` table.
        num_devices: ``N``.
        min_distance_m: distances below it are clipped in the path loss, metres.
        streams: the run's random streams (keyed stream ``"fading"``).
    """
    pl = cfg.pathloss
    assert isinstance(pl, LogDistanceConfig)  # the only path-loss model so far
    pathloss = LogDistance(pl.intercept_db, pl.slope_db, pl.reference_distance_m, min_distance_m)
    fading: FadingModel
    if isinstance(cfg.fading, RayleighConfig):
        fading = Rayleigh(streams.keyed("fading"))
    else:
        assert isinstance(cfg.fading, NoFadingConfig)
        fading = NoFading()
    return Channel(pathloss, fading, num_devices)
