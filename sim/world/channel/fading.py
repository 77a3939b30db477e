"""Small-scale fading models: the unit-mean power gain ``g`` of ``h = g H``."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from sim.rng import KeyedStream
from sim.world.channel.base import F64, FadingModel


class Rayleigh(FadingModel):
    """Rayleigh block fading (the paper's): ``g ~ Exp(1)``, i.i.d. per device and slot.

    Draws are keyed by ``(device, slot)`` (:class:`sim.rng.KeyedStream`, stream ``"fading"``):
    no state. This is exactly the distribution Theorem 2's closed forms assume.

    Args:
        stream: the run's keyed ``"fading"`` stream.
    """

    rayleigh = True

    def __init__(self, stream: KeyedStream) -> None:
        self.stream = stream

    def power_gain(self, devices: NDArray[np.int64], slot: int) -> F64:
        """``g ~ Exp(1)`` of ``devices`` in ``slot``."""
        return self.stream.standard_exponential(devices, slot)

    def describe(self) -> dict[str, Any]:
        """``{"model": "rayleigh"}``."""
        return {"model": "rayleigh"}

    def state_dict(self) -> dict[str, Any]:
        """Keyed and memoryless: no state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""


class NoFading(FadingModel):
    """No small-scale fading: ``g = 1``, ``h = H`` in every slot (not the controller's Rayleigh
    assumption: the controller still plans as if ``h ~ Exp(mean H)``)."""

    rayleigh = False

    def power_gain(self, devices: NDArray[np.int64], slot: int) -> F64:
        """Ones, shape ``(len(devices),)``."""
        return np.ones(np.asarray(devices).shape[0])

    def describe(self) -> dict[str, Any]:
        """``{"model": "none"}``."""
        return {"model": "none"}

    def state_dict(self) -> dict[str, Any]:
        """No state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""
