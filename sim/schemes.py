"""Schemes: how the freezing fraction, the transmit power and the slot's end are chosen.

One interface (:class:`Scheme`), one registry (:data:`SCHEMES`). A scheme decides

* per frame, :meth:`Scheme.plan_frame`: the freezing fraction ``gamma`` of every device (and any
  per-frame quantities it wants logged);
* per slot, :meth:`Scheme.plan_slot`: which devices train and upload, and their transmit power;
* :attr:`Scheme.wait_for_all`: whether the server waits for the last upload (schemes that promise
  "no outage") or closes the slot at the deadline ``tau_0`` (late uploads are outages).

Everything is vectorised over devices: arrays have shape ``(N,)``. The engine owns the clock, the
queues, the energy accounting and the trace; schemes only decide.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from sim.scenario import SystemConstants


@dataclass(frozen=True)
class FrameInputs:
    """What a scheme knows at a frame boundary."""

    frame: int
    large_scale_gain: np.ndarray  # H_n^k, linear, (N,)
    queue_j: np.ndarray  # Q_n^{kT}, joules, (N,)


@dataclass(frozen=True)
class FramePlan:
    """A scheme's per-frame decision."""

    gamma: np.ndarray  # freezing fraction in [0, 1], (N,)
    columns: dict[str, np.ndarray] = field(default_factory=dict)  # extra per-device trace columns


@dataclass(frozen=True)
class SlotInputs:
    """What a scheme knows at the start of a slot (after the channel draw)."""

    slot: int
    frame: int
    channel_gain: np.ndarray  # h_n^t, linear, (N,)
    large_scale_gain: np.ndarray  # H_n^k, linear, (N,)
    gamma: np.ndarray  # (N,)
    queue_j: np.ndarray  # Q at the frame start (the price of the frame), joules, (N,)
    compute_s: np.ndarray  # tau_cmp at this gamma, seconds, (N,)
    payload_bits: np.ndarray  # (1 - gamma) S, bits, (N,)
    min_tx_power_w: np.ndarray  # p_min meeting the deadline exactly, W, (N,) (inf: infeasible)


@dataclass(frozen=True)
class SlotPlan:
    """A scheme's per-slot decision."""

    participate: np.ndarray  # bool (N,): the device computes and uploads
    tx_power_w: np.ndarray  # W, (N,); 0 where not participating
    columns: dict[str, np.ndarray] = field(default_factory=dict)


class NoParams(BaseModel):
    """A scheme without parameters."""

    model_config = ConfigDict(extra="forbid")


class Scheme(ABC):
    """Base class of all schemes."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams
    wait_for_all: ClassVar[bool] = False

    def __init__(self, params: BaseModel, system: SystemConstants) -> None:
        self.params = params
        self.system = system

    def plan_frame(self, inputs: FrameInputs) -> FramePlan:
        """Default: freeze nothing."""
        return FramePlan(gamma=np.zeros(self.system.num_devices))

    @abstractmethod
    def plan_slot(self, inputs: SlotInputs) -> SlotPlan:
        """Choose participation and transmit power for every device."""

    def cost_weights(self) -> tuple[float, float] | None:
        """``(V, lam)`` used to log the per-slot ``X`` and ``z = V X + Q E``; None: not logged."""
        return None


SCHEMES: dict[str, type[Scheme]] = {}


def register(cls: type[Scheme]) -> type[Scheme]:
    """Class decorator adding a scheme to :data:`SCHEMES` under ``cls.name``."""
    if cls.name in SCHEMES:
        raise ValueError(f"scheme {cls.name!r} registered twice")
    SCHEMES[cls.name] = cls
    return cls


def build_scheme(name: str, params: dict, system: SystemConstants) -> Scheme:
    """Instantiate a registered scheme with validated parameters."""
    cls = SCHEMES[name]
    return cls(cls.Params.model_validate(params), system)


@register
class Ideal(Scheme):
    """Ideal FL: no freezing, every device uploads, no outage.

    Each device transmits at ``min(p_min, P_bar)``: at ``p_min`` its upload lands exactly on the
    deadline; where ``p_min`` exceeds the peak power it transmits at ``P_bar`` and arrives late, and
    the server waits for it (the slot lasts until the last upload arrives; the latency is logged).
    """

    name = "ideal"
    wait_for_all = True

    def plan_slot(self, inputs: SlotInputs) -> SlotPlan:
        peak = self.system.devices.peak_power_w
        return SlotPlan(
            participate=np.ones(self.system.num_devices, dtype=bool),
            tx_power_w=np.minimum(inputs.min_tx_power_w, peak),
        )


@register
class FixedPower(Scheme):
    """Every device trains and transmits at its peak power; the deadline is enforced.

    The validation scheme: a device is in outage iff ``h < h_min = N0 A / P_bar``, so its outage
    probability is ``1 - exp(-h_min / H)`` in closed form.
    """

    name = "fixed_power"

    def plan_slot(self, inputs: SlotInputs) -> SlotPlan:
        return SlotPlan(
            participate=np.ones(self.system.num_devices, dtype=bool),
            tx_power_w=self.system.devices.peak_power_w.copy(),
        )
