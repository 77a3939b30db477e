"""The radio channel: path loss and shadowing per frame, small-scale fading and CSI per slot.

The component: :class:`ChannelConfig` (the scenario's ``[channel]`` table), the interfaces
(:mod:`~wflsim.sim.world.channel.base`) and the records they give
(:mod:`~wflsim.sim.world.channel.gains`), one module per kind of model
(:mod:`~wflsim.sim.world.channel.pathloss`: log-distance and TR 38.901 UMa / UMi with the LOS state;
:mod:`~wflsim.sim.world.channel.shadowing`: Gudmundson-correlated shadowing and LOS state;
:mod:`~wflsim.sim.world.channel.fading`: Rayleigh, Rician, Nakagami-m, i.i.d. or Gauss-Markov;
:mod:`~wflsim.sim.world.channel.csi`: estimation error and delay), the drawn channel
(:mod:`~wflsim.sim.world.channel.drawn`), recording (:mod:`~wflsim.sim.world.channel.record`) and
replay (:mod:`~wflsim.sim.world.channel.replay`), and the factory :func:`build_channel`. Every
channel says whether it is what the controller's closed forms assume (Theorem 2: Rayleigh block
fading with mean ``H``, perfect CSI); :meth:`Channel.describe` records it in the run's metadata.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import ScenarioError
from ...rng import Streams
from .base import (
    Channel,
    FadingModel,
    LargeScale,
    PathLossModel,
    SlotChannel,
    SmallScale,
)
from .config import (
    ChannelConfig,
    GaussMarkovConfig,
    LogDistanceConfig,
    NakagamiConfig,
    NoFadingConfig,
    RayleighConfig,
    RicianConfig,
    UmaConfig,
    UmiConfig,
)
from .csi import Csi
from .drawn import DrawnChannel
from .fading import (
    Fading,
    Family,
    NakagamiFamily,
    NoFading,
    RayleighFamily,
    RicianFamily,
)
from .pathloss import MAX_2D_DISTANCE_M, LogDistance, Tr38901
from .record import ChannelRecorder
from .replay import ReplayChannel, read_channel_table
from .shadowing import LosState, Shadowing

__all__ = [
    "Channel",
    "ChannelConfig",
    "ChannelRecorder",
    "Csi",
    "DrawnChannel",
    "Fading",
    "FadingModel",
    "LargeScale",
    "LogDistance",
    "LosState",
    "NoFading",
    "PathLossModel",
    "ReplayChannel",
    "Shadowing",
    "SlotChannel",
    "SmallScale",
    "Tr38901",
    "build_channel",
    "build_fading",
]


def _pathloss(cfg: ChannelConfig, min_distance_m: float, cell_radius_m: float) -> PathLossModel:
    pl = cfg.pathloss
    if isinstance(pl, LogDistanceConfig):
        return LogDistance(pl.intercept_db, pl.slope_db, pl.reference_distance_m, min_distance_m)
    assert isinstance(pl, UmaConfig | UmiConfig)
    if cell_radius_m > MAX_2D_DISTANCE_M:
        raise ScenarioError(
            "channel.pathloss",
            f"TR 38.901's {pl.model.upper()} path loss holds up to {MAX_2D_DISTANCE_M:g} m but "
            f"the cell radius is {cell_radius_m:g} m",
            f"set network.cell_radius_m <= {MAX_2D_DISTANCE_M:g} or use pathloss = 'log_distance'",
        )
    return Tr38901(pl.model, pl.carrier_ghz, pl.los, pl.ut_height_m, min_distance_m)


def _fading(
    cfg: ChannelConfig, num_devices: int, slot_s: float, streams: Streams, key: str = "fading"
) -> FadingModel:
    """The ``[channel]``'s fading over ``num_devices`` links, drawn from the keyed stream
    ``key`` (``"fading"``: the devices' own links; ``"cell_fading"``: their links to the other
    sites of ``[cells]``, :func:`wflsim.sim.radio.cells.component.build_cells`)."""
    f = cfg.fading
    if isinstance(f, NoFadingConfig):
        return NoFading(num_devices)
    family: Family
    if isinstance(f, RayleighConfig):
        family = RayleighFamily()
    elif isinstance(f, RicianConfig):
        family = RicianFamily(f.k_db)
    else:
        assert isinstance(f, NakagamiConfig)
        family = NakagamiFamily(f.m)
    correlated = isinstance(f.correlation, GaussMarkovConfig)
    return Fading(
        family,
        streams.keyed(key),
        num_devices,
        carrier_ghz=cfg.carrier_ghz if correlated else None,
        slot_s=slot_s if correlated else None,
    )


build_fading = _fading


def build_channel(
    cfg: ChannelConfig,
    *,
    num_devices: int,
    min_distance_m: float,
    cell_radius_m: float,
    slot_s: float,
    frames: int,
    slots_per_frame: int,
    streams: Streams,
    base_dir: Path | None = None,
) -> Channel:
    """The channel of a scenario, validated up front.

    Args:
        cfg: the ``[channel]`` table.
        num_devices: ``N``.
        min_distance_m: distances below it are clipped in the path loss, metres.
        cell_radius_m: the cell radius (TR 38.901's models hold up to 5 km), metres.
        slot_s: the nominal slot length ``tau_0`` (time step of correlated fading), seconds.
        frames, slots_per_frame: ``K`` and ``T`` (what a replayed table must cover).
        streams: the run's random streams (keyed ``"fading"``, ``"shadowing"``, ``"csi"``,
            ``"los_state"``).
        base_dir: folder against which a relative ``cfg.replay`` is resolved (the scenario
            file's folder); None: the current directory.

    Raises:
        ScenarioError: a 3GPP path loss in a cell beyond 5 km (``channel.pathloss``), a replay
            table that is missing, unreadable or does not fit the scenario (``channel.replay``).
    """
    pathloss = _pathloss(cfg, min_distance_m, cell_radius_m)
    los_state = None
    if isinstance(pathloss, Tr38901) and pathloss.los_mode == "probabilistic":
        los_state = LosState(
            pathloss.los_probability,
            pathloss.los_decorrelation_m,
            streams.keyed("los_state"),
            num_devices,
        )
    shadowing = None
    sh = cfg.shadowing
    sigma: tuple[float, ...]
    dcorr: tuple[float, ...]
    if sh is not None:
        if sh.uses_3gpp:
            assert isinstance(pathloss, Tr38901)  # guaranteed by ChannelConfig
            sigma = pathloss.shadowing_sigma_db if sh.sigma_db == "3gpp" else (sh.sigma_db,) * 2
            dcorr = (
                pathloss.shadowing_decorrelation_m
                if sh.decorrelation_m == "3gpp"
                else (sh.decorrelation_m,) * 2
            )
            source = "3GPP TR 38.901 (Tables 7.4.1-1, 7.5-6) by LOS state"
        else:
            assert isinstance(sh.sigma_db, float) and isinstance(sh.decorrelation_m, float)
            sigma, dcorr, source = (sh.sigma_db,), (sh.decorrelation_m,), "scenario"
        shadowing = Shadowing(
            [float(s) for s in sigma],
            [float(d) for d in dcorr],
            streams.keyed("shadowing"),
            num_devices,
            source,
        )
    csi = None
    if cfg.csi is not None and (cfg.csi.error_variance > 0.0 or cfg.csi.delay_slots > 0):
        csi = Csi(cfg.csi.error_variance, cfg.csi.delay_slots, streams.keyed("csi"), num_devices)
    drawn = DrawnChannel(
        pathloss,
        _fading(cfg, num_devices, slot_s, streams),
        num_devices,
        shadowing=shadowing,
        los_state=los_state,
        csi=csi,
    )
    if cfg.replay is None:
        return drawn
    path = Path(cfg.replay).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    table = read_channel_table(
        path, num_devices=num_devices, frames=frames, slots_per_frame=slots_per_frame
    )
    return ReplayChannel(table, drawn, slots_per_frame, str(path))
