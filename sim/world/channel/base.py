"""The channel interface: large-scale gains per frame, the slot's gains per slot.

A :class:`Channel` gives, per frame, the large-scale gains of the devices' motion
(:meth:`Channel.large_scale`: path loss, LOS state, shadowing) and, per slot, the channel power
gains (:meth:`Channel.slot`): the gain the world applies (it decides success, latency and
energy) and the gain the scheme sees (equal under perfect CSI). A channel draws them from models
(:class:`wflsim.sim.world.channel.drawn.DrawnChannel`) or replays a recorded table
(:class:`wflsim.sim.world.channel.replay.ReplayChannel`); either can record what it gives
(:attr:`Channel.recorder`).

Every draw is keyed by ``(device, slot)`` or ``(device, frame)``
(:class:`wflsim.sim.rng.KeyedStream`); a model whose gains depend on the past (time-correlated
fading, shadowing along a path, outdated CSI) keeps that past in its ``state_dict``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import numpy as np

from .gains import B8, C128, F64, LargeScale, SlotChannel, SmallScale

if TYPE_CHECKING:
    from ..mobility.base import Kinematics
    from .record import ChannelRecorder

__all__ = [
    "B8",
    "C128",
    "CONTROLLER_ASSUMPTION",
    "F64",
    "Channel",
    "FadingModel",
    "LargeScale",
    "PathLossModel",
    "SlotChannel",
    "SmallScale",
]

#: What the controller's closed forms assume (Theorem 2).
CONTROLLER_ASSUMPTION = (
    "Theorem 2: h = g H with g ~ Exp(1) (Rayleigh block fading, mean H), i.i.d. per slot; H "
    "known at each frame start; the scheme's p_min computed on the true h (perfect CSI)"
)


class PathLossModel(ABC):
    """Distance (and LOS state) to path loss."""

    #: ``None`` (no LOS state), or ``"los"``, ``"nlos"``, ``"probabilistic"``.
    los_mode: str | None
    #: The carrier frequency, GHz (None: the model has none).
    carrier_ghz: float | None
    #: Distances below it are clipped, m.
    min_distance_m: float

    @abstractmethod
    def path_loss_db(self, distance_m: F64, los: B8 | None = None) -> F64:
        """Path loss, dB, for distances in metres and LOS states (same shape)."""

    def los_probability(self, distance_m: F64) -> F64:
        """Probability of LOS at each distance (models with ``los_mode = "probabilistic"``)."""
        raise NotImplementedError(f"{type(self).__name__} has no LOS probability")

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """The model and its parameters (recorded in the run's metadata)."""


class FadingModel(ABC):
    """Small-scale fading: the unit-mean power gain ``g`` (and complex coefficient) per slot."""

    #: Whether each slot's marginal distribution is Theorem 2's ``g ~ Exp(1)`` (Rayleigh).
    rayleigh: bool
    #: Whether consecutive slots are dependent (a model with state).
    correlated: bool

    @abstractmethod
    def draw(self, slot: int, speed_mps: F64, *, coefficient: bool = False) -> SmallScale:
        """The fading of every device in ``slot`` (slots in order for correlated models);
        ``speed_mps`` ``(N,)`` sets the Doppler; ``coefficient``: also the complex ``c``."""

    def coefficient_map(self) -> tuple[float, float] | None:
        """``(a, b)`` when the coefficient is ``c = a + b x`` with ``x ~ CN(0, 1)`` (what the
        posterior of imperfect CSI needs, :meth:`wflsim.sim.world.channel.csi.Csi.posterior`); None
        when it is not an affine map of a complex Gaussian."""
        return None

    def lag_correlation(self, speed_mps: F64, lag: int) -> F64:
        """``E[x_t conj(x_{t-lag})]`` of each device at the frame's speeds, ``(N,)``: 1 at lag 0,
        0 for independent slots (overridden by time-correlated models)."""
        n = np.asarray(speed_mps).shape[0]
        return np.ones(n) if lag == 0 else np.zeros(n)

    @abstractmethod
    def history(self, depth: int, speed_mps: F64) -> C128:
        """Complex coefficients of the slots before slot 0, ``(depth, N)``: row ``j - 1`` is slot
        ``-j``, drawn from the model's own law (what outdated CSI sees at the start of a run).
        Call right after slot 0 was drawn."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """The model and its parameters (recorded in the run's metadata)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """What the model must keep to continue exactly (empty for keyed, memoryless models)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from :meth:`state_dict` of the same scenario and seed)."""


class Channel(ABC):
    """The radio channel of a run.

    Subclasses implement :meth:`large_scale` and :meth:`_slot`; :meth:`slot` hands every slot's
    gains to :attr:`recorder` when one is set (``[channel] record = true``).
    """

    num_devices: int
    #: Where every slot's channel goes (set by the run when ``[channel] record = true``).
    recorder: ChannelRecorder | None = None

    @abstractmethod
    def large_scale(self, frame: int, motion: Kinematics) -> LargeScale:
        """Distances, path losses, LOS states, shadowing and large-scale gains of frame
        ``frame`` (frames in order), from the devices' positions, speeds and odometers."""

    def slot(self, slot: int, large: LargeScale) -> SlotChannel:
        """The gains of slot ``slot`` (slots in order) in the frame of ``large``."""
        gains = self._slot(slot, large)
        if self.recorder is not None:
            self.recorder.add(slot, large, gains)
        return gains

    @abstractmethod
    def _slot(self, slot: int, large: LargeScale) -> SlotChannel:
        """The gains of slot ``slot`` (see :meth:`slot`)."""

    @abstractmethod
    def median_gain(self, distance_m: F64) -> F64:
        """The large-scale gain ``10^(-PL/10)`` from the path loss alone (no shadowing; with a
        LOS state, the lower of LOS and NLOS) at ``distance_m`` (shape ``(M,)``), without
        touching the channel's state: what validation probes at the cell's extremes."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Models, parameters and what the controller assumes (for the run's metadata)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """What the channel must keep to continue exactly at a frame boundary."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` of a channel built from the same scenario and seed."""

    @property
    def has_shadowing(self) -> bool:
        """Whether :meth:`large_scale` gives a shadowing value (the record's ``shadowing_db``)."""
        return False

    @property
    def has_los(self) -> bool:
        """Whether :meth:`large_scale` gives a LOS state (the record's ``los`` column)."""
        return False
