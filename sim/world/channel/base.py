"""The channel interface: large-scale gains per frame, small-scale gains per slot.

A :class:`Channel` composes one :class:`PathLossModel` and one :class:`FadingModel`. Per frame the
engine asks it for the large-scale gains of the devices' positions (:meth:`Channel.large_scale`),
per slot for the channel power gains (:meth:`Channel.slot`): the gain the world applies (it
decides success, latency and energy) and the gain the scheme sees (today the same: perfect CSI).

Every draw is keyed by ``(device, slot)`` (:class:`sim.rng.KeyedStream`), so a channel keeps no
hidden state; a model whose gains depend on the past keeps that past in its ``state_dict``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sim.world import physics

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class LargeScale:
    """Large-scale channel of every device for one frame, arrays of shape ``(N,)``."""

    distance_m: F64  #: device-server distance (unclipped), m
    path_loss_db: F64  #: path loss, dB
    gain: F64  #: large-scale power gain ``H = 10^(-PL/10)``, linear


@dataclass(frozen=True)
class SlotChannel:
    """Channel power gains of every device in one slot, arrays of shape ``(N,)``, linear."""

    gain: F64  #: ``h`` the world applies: rate, success, energy follow it
    seen_gain: F64  #: ``h`` the scheme decides on (equal to ``gain`` under perfect CSI)


class PathLossModel(ABC):
    """Distance to path loss."""

    @abstractmethod
    def path_loss_db(self, distance_m: F64) -> F64:
        """Path loss, dB, for distances in metres (same shape)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """The model and its parameters (recorded in the run's metadata)."""


class FadingModel(ABC):
    """Small-scale power gain ``g`` (unit mean) of every device in a slot."""

    #: Whether the model is the controller's assumption: Theorem 2's closed forms take
    #: ``h ~ Exp(mean H)`` (Rayleigh block fading, i.i.d. per slot). A model that differs still
    #: runs; the controller then plans with a mismatched distribution, and the run says so.
    rayleigh: bool

    @abstractmethod
    def power_gain(self, devices: NDArray[np.int64], slot: int) -> F64:
        """``g`` of ``devices`` in ``slot``, shape ``(len(devices),)``, unit mean."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """The model and its parameters (recorded in the run's metadata)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """What the model must keep to continue exactly (empty for keyed, memoryless models)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from :meth:`state_dict` of the same scenario and seed)."""


class Channel:
    """The radio channel of a run: a path-loss model and a fading model.

    Args:
        pathloss: distance to path loss.
        fading: the small-scale power gain per slot.
        num_devices: ``N``.
    """

    def __init__(self, pathloss: PathLossModel, fading: FadingModel, num_devices: int) -> None:
        if num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, got {num_devices}")
        self.pathloss = pathloss
        self.fading = fading
        self.num_devices = int(num_devices)
        self._ids = np.arange(self.num_devices, dtype=np.int64)

    def large_scale(self, positions_m: ArrayLike) -> LargeScale:
        """Distances, path losses and large-scale gains of devices at ``positions_m`` ``(N, 2)``."""
        dist = physics.distance_m(positions_m)
        pl = self.pathloss.path_loss_db(dist)
        return LargeScale(distance_m=dist, path_loss_db=pl, gain=physics.large_scale_gain(pl))

    def slot(self, slot: int, large: LargeScale) -> SlotChannel:
        """The gains of slot ``slot``: ``h = g H`` (paper Sec. VI), seen exactly by the scheme."""
        g = self.fading.power_gain(self._ids, slot)
        h = physics.rayleigh_channel_gain(large.gain, g)
        return SlotChannel(gain=h, seen_gain=h)

    def describe(self) -> dict[str, Any]:
        """Models, parameters and what the controller assumes (for the run's metadata)."""
        return {
            "pathloss": self.pathloss.describe(),
            "fading": self.fading.describe(),
            "csi": "perfect",
            "controller_assumption": (
                "Rayleigh block fading h ~ Exp(mean H), i.i.d. per slot, perfect CSI: "
                + ("matches this channel" if self.fading.rayleigh else "differs from this channel")
            ),
        }

    def state_dict(self) -> dict[str, Any]:
        """The fading model's state (path loss is a pure function of distance)."""
        return {"fading": self.fading.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the fading model's state."""
        self.fading.load_state_dict(state["fading"])
