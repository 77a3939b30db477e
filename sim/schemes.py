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
from pydantic import BaseModel, ConfigDict, Field

from sim import controller
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


class CostParams(BaseModel):
    """The Lyapunov weights. Schemes that do not optimise use them only to log ``X`` and ``z``.

    ``V`` trades convergence error against energy (paper, drift-plus-penalty); ``lam`` is the
    ``lambda`` of the convergence-error term ``X = lam 1{success} B (gamma - 1)``; only ``V lam``
    matters to the decisions. Default ``lam = 1 / sum_n B_n``.
    """

    model_config = ConfigDict(extra="forbid")
    V: float = Field(100.0, ge=0, allow_inf_nan=False)
    lam: float | None = Field(None, gt=0, allow_inf_nan=False)


class ControllerOptions(CostParams):
    """Parameters of schemes that run the paper's MM controller."""

    tol: float = Field(1e-9, gt=0, lt=1, description="relative (scale-free) MM stopping tolerance")
    max_iter: int = Field(200, ge=1, description="MM iteration cap per piece")


class Scheme(ABC):
    """Base class of all schemes."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = CostParams
    wait_for_all: ClassVar[bool] = False

    def __init__(self, params: BaseModel, system: SystemConstants) -> None:
        self.params = params
        self.system = system
        lam = getattr(params, "lam", None)
        self.lam = (
            float(lam) if lam is not None else controller.default_lambda(system.devices.batch_size)
        )
        self.v = float(getattr(params, "V", 0.0))

    def plan_frame(self, inputs: FrameInputs) -> FramePlan:
        """Default: freeze nothing."""
        return FramePlan(gamma=np.zeros(self.system.num_devices))

    @abstractmethod
    def plan_slot(self, inputs: SlotInputs) -> SlotPlan:
        """Choose participation and transmit power for every device."""

    def cost_weights(self) -> tuple[float, float] | None:
        """``(V, lam)`` used to log the per-slot ``X`` and ``z = V X + Q E``; None: not logged."""
        return (self.v, self.lam)

    # -- helpers for schemes built on the paper's controller

    def controller_params(
        self, large_scale_gain: np.ndarray, queue_j: np.ndarray
    ) -> controller.ControllerParams:
        """The per-device inputs of the paper's per-frame problem (P4) for this frame."""
        s, d = self.system, self.system.devices
        return controller.ControllerParams(
            model_bits=s.full_payload_bits,
            bandwidth_hz=s.bandwidth_hz,
            noise_w=s.noise_w,
            mean_gain=large_scale_gain,
            deadline_s=s.deadline_s,
            cycles_per_sample=d.cycles_per_sample,
            batch_size=d.batch_size,
            cpu_hz=d.cpu_hz,
            capacitance=d.capacitance,
            peak_power_w=d.peak_power_w,
            queue_j=queue_j,
            v=self.v,
            lam=self.lam,
        )

    @staticmethod
    def no_freezing_plan(params: controller.ControllerParams) -> FramePlan:
        """gamma = 0 with the Proposition-1 threshold ``p_max`` at ``u = 1``."""
        n = params.n_devices
        gamma = np.zeros(n)
        p_max = controller.max_tx_power_w(
            params.queue_j,
            params.net_value,
            1.0,
            params.deadline_s,
            params.theta_s,
            params.peak_power_w,
        )
        return FramePlan(
            gamma=gamma,
            columns={
                "max_tx_power_w": p_max,
                "expected_cost": controller.expected_cost(gamma, params),
                "iterations": np.zeros(n, dtype=np.int32),
            },
        )

    def solved_plan(self, params: controller.ControllerParams, frame: int) -> FramePlan:
        """The controller's gamma (MM on both pieces); frame 0 freezes nothing (no stability scores yet)."""
        if frame == 0:
            return self.no_freezing_plan(params)
        res = controller.solve_gamma(params, tol=self.params.tol, max_iter=self.params.max_iter)
        return FramePlan(
            gamma=res.gamma,
            columns={
                "max_tx_power_w": res.p_max_w,
                "expected_cost": res.cost,
                "iterations": res.iterations.astype(np.int32),
            },
        )


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


class _ThresholdPower(Scheme):
    """Proposition 1 per slot: transmit at ``p_min`` iff ``p_min <= p_max``, else drop out."""

    Params = ControllerOptions

    def _frame_plan(self, params: controller.ControllerParams, frame: int) -> FramePlan:
        raise NotImplementedError

    def plan_frame(self, inputs: FrameInputs) -> FramePlan:
        self._cparams = self.controller_params(inputs.large_scale_gain, inputs.queue_j)
        plan = self._frame_plan(self._cparams, inputs.frame)
        self._p_max_w = plan.columns["max_tx_power_w"]
        return plan

    def plan_slot(self, inputs: SlotInputs) -> SlotPlan:
        dec = controller.slot_power_decision(
            inputs.channel_gain, inputs.gamma, self._p_max_w, self._cparams
        )
        return SlotPlan(
            participate=dec.transmit,
            tx_power_w=dec.tx_power_w,
            columns={"max_tx_power_w": self._p_max_w},
        )


@register
class TwoTimescale(_ThresholdPower):
    """The paper's scheme (Algorithm 1): MM freezing per frame, Proposition-1 power per slot."""

    name = "two_timescale"

    def _frame_plan(self, params: controller.ControllerParams, frame: int) -> FramePlan:
        return self.solved_plan(params, frame)


@register
class OnlyPC(_ThresholdPower):
    """Only power control: gamma = 0, Proposition-1 power per slot (paper baseline Only-PC)."""

    name = "only_pc"

    def _frame_plan(self, params: controller.ControllerParams, frame: int) -> FramePlan:
        return self.no_freezing_plan(params)


@register
class OnlyPF(Scheme):
    """Only parameter freezing: the controller's gamma, no outage (paper baseline Only-PF).

    Every device with something to send transmits at ``min(p_min, P_bar)`` and the server waits
    for the last upload, as in :class:`Ideal`.
    """

    name = "only_pf"
    Params = ControllerOptions
    wait_for_all = True

    def plan_frame(self, inputs: FrameInputs) -> FramePlan:
        return self.solved_plan(
            self.controller_params(inputs.large_scale_gain, inputs.queue_j), inputs.frame
        )

    def plan_slot(self, inputs: SlotInputs) -> SlotPlan:
        return SlotPlan(
            participate=np.ones(self.system.num_devices, dtype=bool),
            tx_power_w=np.minimum(inputs.min_tx_power_w, self.system.devices.peak_power_w),
        )
