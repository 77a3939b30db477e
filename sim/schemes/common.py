"""Building blocks that schemes compose: parameters, the paper's frame controller, the two slot
rules (Proposition 1, optionally with a CSI margin, and "no outage"), and the freezing cost
model.

Nothing here is a base class that reads a subclass's fields: a scheme holds what it uses
(:class:`LyapunovWeights`, :class:`FrameController`) and calls the functions it needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..slot import SlotOutcome, frame_costs
from ..updates import FreezingInputs, UpdateInputs, UpdateRuleSpec
from ..world import physics
from ..world.system import SystemConstants
from . import controller
from .base import (
    F64,
    ClosesAt,
    CostPlan,
    FrameContext,
    FramePlan,
    SlotContext,
    SlotPlan,
)
from .csi_margin import CsiMargin, margin_power_w

#: The learner-side rule of the paper's schemes: device ``n`` freezes its ``frozen_count[n]``
#: most stable parameters (smallest stability score of the previous frame, eq. 6).
FREEZING = UpdateRuleSpec("freezing", {"selection": "stability"})


class CostParams(BaseModel):
    """The Lyapunov weights. Schemes that do not optimise use them only to log ``X`` and ``z``.

    ``V`` trades convergence error against energy (paper, drift-plus-penalty); ``lam`` is the
    ``lambda`` of the convergence-error term ``X = lam 1{success} B (gamma - 1)``; only ``V lam``
    matters to the decisions. Default ``lam = 1 / sum_n B_n``.
    """

    model_config = ConfigDict(extra="forbid")
    # Bounds far beyond any study (docs/scenario.md): V lam B stays finite for every B.
    V: float = Field(100.0, ge=0, le=1e12, allow_inf_nan=False)
    lam: float | None = Field(None, gt=0, le=1e12, allow_inf_nan=False)


class ControllerOptions(CostParams):
    """Parameters of schemes that run the paper's MM controller."""

    tol: float = Field(1e-9, gt=0, lt=1, description="relative (scale-free) MM stopping tolerance")
    max_iter: int = Field(200, ge=1, le=100_000, description="MM iteration cap per piece")


class ThresholdOptions(ControllerOptions):
    """Parameters of schemes whose slot rule is Proposition 1: the controller's, and an optional
    CSI margin (:mod:`wflsim.sim.schemes.csi_margin`; None: the paper's rule)."""

    csi_margin: CsiMargin | None = None


def margin_target(params: CostParams) -> float | None:
    """The CSI margin's target outage of a scheme's parameters (None: no margin)."""
    margin = params.csi_margin if isinstance(params, ThresholdOptions) else None
    return None if margin is None else margin.target_outage


@dataclass(frozen=True)
class LyapunovWeights:
    """``V`` and ``lambda`` of a run (``lambda`` resolved to its default ``1 / sum B_n``)."""

    v: float
    lam: float

    def as_tuple(self) -> tuple[float, float]:
        """``(V, lam)``."""
        return (self.v, self.lam)

    @classmethod
    def from_params(cls, params: CostParams, system: SystemConstants) -> LyapunovWeights:
        """``V`` from the parameters; ``lam`` from them or ``1 / sum_n B_n``."""
        lam = (
            float(params.lam)
            if params.lam is not None
            else controller.default_lambda(system.devices.batch_size)
        )
        return cls(v=float(params.V), lam=lam)


@dataclass(frozen=True)
class ControllerDecision:
    """The frame controller's output: the raw ``gamma`` (before rounding to whole parameters),
    the Proposition-1 threshold ``p_max`` of the frame and the columns logged on ``freeze`` rows."""

    gamma: F64
    p_max_w: F64
    columns: dict[str, np.ndarray] = field(default_factory=dict)


class FrameController:
    """The paper's per-frame decision (Theorem 2 + MM), vectorised over devices.

    Args:
        system: the devices and radio constants (full payload ``S``, compute ``c B / f``, ...).
        weights: ``V`` and ``lambda``.
        tol, max_iter: the MM solver's relative tolerance and iteration cap.
    """

    def __init__(
        self, system: SystemConstants, weights: LyapunovWeights, tol: float, max_iter: int
    ) -> None:
        self.system = system
        self.weights = weights
        self.tol = float(tol)
        self.max_iter = int(max_iter)

    def params(self, ctx: FrameContext) -> controller.ControllerParams:
        """The per-device inputs of the per-frame problem (P4) for this frame. Under the
        truncated Shannon rate model (``[channel] rate_model``) the controller plans on its
        middle piece, ``alpha W log2(1 + SNR)`` (Theorem 2 with the band ``alpha W`` in the
        exponent), with the payloads its highest efficiency cannot carry in the time left
        infeasible (``min_gamma``: at least ``1 - u_max``, ``u_max S = se_max W (tau0 - theta
        u_max)``); its lowest MCS is Proposition 1's, per slot, not Theorem 2's (docs/ns3.md)."""
        s, d = self.system, self.system.devices
        model = s.rate_model
        band = s.bandwidth_hz if model.is_shannon else model.alpha * s.bandwidth_hz
        extra: dict[str, np.ndarray] = {}
        if not model.is_shannon and math.isfinite(model.se_max):
            theta = physics.compute_time_s(
                1.0, d.step_cycles_per_sample * d.local_steps, d.batch_size, d.cpu_hz
            )
            carry = model.se_max * s.bandwidth_hz
            u_max = carry * s.deadline_s / (s.full_payload_bits + carry * theta)
            extra["min_gamma"] = np.clip(1.0 - u_max, 0.0, 1.0)
        return controller.ControllerParams(
            model_bits=np.asarray(s.full_payload_bits, dtype=np.float64),
            bandwidth_hz=np.asarray(band, dtype=np.float64),
            noise_w=np.asarray(s.noise_w, dtype=np.float64),
            mean_gain=ctx.large_scale_gain,
            deadline_s=np.asarray(s.deadline_s, dtype=np.float64),
            # an update's E_n local steps run E_n c' cycles per sample of its batch (c' = c
            # plus the strategy's extra cycles per step over B): theta and e_cmp scale with E_n,
            # the value V lam B does not (E_n = 1 and FedAvg: c itself)
            cycles_per_sample=d.step_cycles_per_sample * d.local_steps,
            batch_size=d.batch_size,
            cpu_hz=d.cpu_hz,
            capacitance=d.capacitance,
            peak_power_w=d.peak_power_w,
            queue_j=ctx.queue_j,
            v=np.asarray(self.weights.v, dtype=np.float64),
            lam=np.asarray(self.weights.lam, dtype=np.float64),
            **extra,
        )

    def over_the_air(self, ctx: FrameContext, freeze: bool) -> ControllerDecision:
        """The per-frame problem over the air (``[uplink] power_control = "controller"``):
        :func:`wflsim.sim.radio.aircomp.controller_frame`'s closed form; without freezing
        (``freeze`` False, or frame 0) ``gamma = 0`` where the full computation fits before the
        window, else the device sits the frame out."""
        from ..radio.aircomp import controller_frame, planned_eta

        s, d = self.system, self.system.devices
        assert s.aircomp_window_s is not None
        params = self.params(ctx)
        eta = planned_eta(d.peak_power_w, ctx.large_scale_gain, d.batch_size)
        a = d.batch_size / d.batch_size.sum()
        gamma, p_max, cost, slope = controller_frame(
            params.net_value,
            params.queue_j,
            params.theta_s,
            s.deadline_s,
            s.aircomp_window_s,
            s.aircomp_window_s,
            params.peak_power_w,
            params.mean_gain,
            eta,
            a,
        )
        if not freeze or ctx.frame == 0:  # nothing frozen: take part at u = 1 or not at all
            fits = params.theta_s <= s.deadline_s - s.aircomp_window_s
            take = (gamma < 1.0) & fits
            gamma = np.where(take, 0.0, 1.0)
            p_max = np.where(take, p_max, 0.0)
            cost = np.where(take, slope, 0.0)
        n = gamma.shape[0]
        return ControllerDecision(
            gamma,
            p_max,
            {
                "max_tx_power_w": p_max,
                "expected_cost": cost,
                "iterations": np.zeros(n, dtype=np.int32),
            },
        )

    def no_freezing(self, ctx: FrameContext) -> ControllerDecision:
        """``gamma = 0`` with the Proposition-1 threshold ``p_max`` at ``u = 1``."""
        if self.system.aircomp_window_s is not None:
            return self.over_the_air(ctx, freeze=False)
        params = self.params(ctx)
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
        return ControllerDecision(
            gamma,
            p_max,
            {
                "max_tx_power_w": p_max,
                "expected_cost": controller.expected_cost(gamma, params),
                "iterations": np.zeros(n, dtype=np.int32),
            },
        )

    def solve(self, ctx: FrameContext) -> ControllerDecision:
        """The MM solution of (P4) on both pieces; frame 0 freezes nothing (the stability
        scores that freezing needs exist only after a frame)."""
        if ctx.frame == 0:
            return self.no_freezing(ctx)
        if self.system.aircomp_window_s is not None:
            return self.over_the_air(ctx, freeze=True)
        res = controller.solve_gamma(self.params(ctx), tol=self.tol, max_iter=self.max_iter)
        return ControllerDecision(
            res.gamma,
            res.p_max_w,
            {
                "max_tx_power_w": res.p_max_w,
                "expected_cost": res.cost,
                "iterations": res.iterations.astype(np.int32),
            },
        )


def freezing_plan(
    gamma: np.ndarray, frame: int, system: SystemConstants, columns: dict[str, np.ndarray]
) -> FramePlan:
    """The cost model of freezing schemes: device ``n`` freezes ``rint(gamma_n D)`` parameters,
    uploads the rest and computes only their gradients.

    ``gamma`` is clipped to ``[0, 1]``; frame 0 freezes nothing (no stability scores yet: the
    documented warm-up). The plan's ``gamma`` is what is really frozen, ``count / D``; payload
    ``(1 - gamma) S`` (eq. 10), compute fraction ``1 - gamma`` (eqs. 12-13). Update-rule input:
    :class:`~wflsim.sim.updates.FreezingInputs` (``frozen_count`` ``(N,)`` int64).
    """
    d = system.num_params
    g = np.clip(np.asarray(gamma, dtype=np.float64), 0.0, 1.0)
    counts = np.rint(g * d).astype(np.int64)
    if frame == 0:
        counts = np.zeros_like(counts)
    frozen = counts / d
    compute_fraction = 1.0 - frozen
    return FramePlan(
        gamma=frozen,
        cost=CostPlan(
            payload_bits=physics.payload_bits(d, frozen, system.bits_per_param),
            compute_fraction=compute_fraction,
        ),
        update=FreezingInputs(frozen_count=counts),
        columns={
            **columns,
            "compute_fraction": compute_fraction,
            "sent_values": d - counts,
            "bits_per_value": np.full(counts.shape, float(system.bits_per_param)),
        },
    )


def threshold_slot_plan(
    ctx: SlotContext, p_max_w: F64, target_outage: float | None = None
) -> SlotPlan:
    """Proposition 1: transmit at ``p_min`` iff ``p_min <= p_max``, else drop out. With a
    ``target_outage`` (a CSI margin), ``p_min`` is computed on the conservative gain
    (:func:`wflsim.sim.schemes.csi_margin.margin_power_w`; unchanged under perfect CSI)."""
    p_min = ctx.min_tx_power_w if target_outage is None else margin_power_w(ctx, target_outage)
    dec = controller.slot_power_decision(p_min, p_max_w, ctx.payload_bits)
    return SlotPlan(
        participate=dec.transmit, tx_power_w=dec.tx_power_w, columns={"max_tx_power_w": p_max_w}
    )


def over_the_air_slot_plan(ctx: SlotContext, p_max_w: F64, system: SystemConstants) -> SlotPlan:
    """Proposition 1 adapted to over-the-air aggregation (docs/aircomp.md): a device inverts its
    channel, ``p = eta a^2 / h`` on the gain it sees (``eta``: the frame's receiver scaling,
    :func:`wflsim.sim.radio.aircomp.planned_eta`; ``a = B / sum B``), and takes part iff
    ``p <= p_max`` (the frame's threshold, 0 for a device sitting the frame out) and its
    computation ends before the window opens."""
    from ..radio.aircomp import planned_eta

    d = system.devices
    assert system.aircomp_window_s is not None
    eta = planned_eta(d.peak_power_w, ctx.large_scale_gain, d.batch_size)
    a = d.batch_size / d.batch_size.sum()
    h = ctx.channel_gain
    with np.errstate(divide="ignore"):
        p = np.where(h > 0.0, eta * a * a / np.where(h > 0.0, h, 1.0), np.inf)
    fits = ctx.compute_s <= system.deadline_s - system.aircomp_window_s
    go = (p_max_w > 0.0) & (p <= p_max_w) & fits & (ctx.payload_bits > 0)
    return SlotPlan(
        participate=go,
        tx_power_w=np.where(go, p, 0.0),
        columns={"max_tx_power_w": p_max_w},
    )


def no_outage_slot_plan(ctx: SlotContext, peak_power_w: F64) -> SlotPlan:
    """ "No outage": everyone with something to send transmits at ``min(p_min, P_bar)`` (the
    server waits for the last upload; where ``p_min > P_bar`` the upload arrives late)."""
    return SlotPlan(
        participate=np.ones(ctx.channel_gain.shape[0], dtype=bool),
        tx_power_w=np.minimum(ctx.min_tx_power_w, peak_power_w),
    )


class Memoryless:
    """Mixin of schemes whose decisions depend on nothing but the current frame and slot: no
    state crosses a frame boundary (a frame's threshold is recomputed at the next frame start),
    and the slot outcome changes nothing."""

    def observe(self, outcome: SlotOutcome) -> None:
        """Nothing to remember."""

    def state_dict(self) -> dict[str, Any]:
        """No state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Check that the saved state is empty."""
        if state:
            raise ValueError(f"a memoryless scheme got a state with keys {sorted(state)}")


#: How a :class:`FreezingScheme` chooses ``gamma`` per frame: not at all (``gamma = 0``) or by
#: the paper's frame controller.
Freezing = Literal["none", "controller"]
#: How it chooses power per slot: Proposition 1 against the frame's threshold (deadline
#: enforced), "no outage" (``min(p_min, P_bar)``, the server waits), or everyone at peak power
#: (deadline enforced).
Power = Literal["threshold", "no_outage", "peak"]


class FreezingScheme(Memoryless):
    """A scheme of the paper's family: freezing as the update rule, ``gamma`` from nowhere or
    from the frame controller, power by one of the three slot rules.

    The registered schemes are one-line specialisations: ``two_timescale`` (controller,
    threshold), ``only_pc`` (none, threshold), ``only_pf`` (controller, no outage), ``ideal``
    (none, no outage), ``fixed_power`` (none, peak).

    Args:
        params: the scheme's parameters (``ControllerOptions`` when the controller is used;
            ``ThresholdOptions`` may add a CSI margin to Proposition 1).
        system: devices and radio constants.
        freezing, power: the two choices (see :data:`Freezing`, :data:`Power`).
        update_rule: the learner-side rule (default: freezing by stability).
    """

    def __init__(
        self,
        params: CostParams,
        system: SystemConstants,
        *,
        freezing: Freezing,
        power: Power,
        update_rule: UpdateRuleSpec = FREEZING,
    ) -> None:
        self.system = system
        self.weights = LyapunovWeights.from_params(params, system)
        self.freezing = freezing
        self.power = power
        self.update_rule = update_rule
        self.closes_at: ClosesAt = "last_upload" if power == "no_outage" else "deadline"
        self.controller: FrameController | None = None
        if freezing == "controller" or power == "threshold":
            if not isinstance(params, ControllerOptions):
                raise TypeError("the frame controller needs ControllerOptions parameters")
            self.controller = FrameController(system, self.weights, params.tol, params.max_iter)
        #: the current frame's Proposition-1 threshold, W (recomputed every frame)
        self.p_max_w: F64 = np.zeros(system.num_devices)
        #: the CSI margin's target outage (None for Proposition 1 on the estimate)
        self.target_outage = margin_target(params)

    def plan_frame(self, ctx: FrameContext) -> FramePlan:
        """``gamma`` (and the frame's threshold), rounded to whole parameters."""
        if self.controller is None:
            return freezing_plan(np.zeros(self.system.num_devices), ctx.frame, self.system, {})
        if self.freezing == "controller":
            dec = self.controller.solve(ctx)
        else:
            dec = self.controller.no_freezing(ctx)
        self.p_max_w = dec.p_max_w
        return freezing_plan(dec.gamma, ctx.frame, self.system, dec.columns)

    def plan_slot(self, ctx: SlotContext) -> SlotPlan:
        """Proposition 1 (over the air: its adapted threshold), no outage, or peak power."""
        if self.power == "threshold" and self.system.aircomp_window_s is not None:
            return over_the_air_slot_plan(ctx, self.p_max_w, self.system)
        if self.power == "threshold":
            return threshold_slot_plan(ctx, self.p_max_w, self.target_outage)
        if self.power == "no_outage":
            return no_outage_slot_plan(ctx, self.system.devices.peak_power_w)
        return SlotPlan(
            participate=np.ones(self.system.num_devices, dtype=bool),
            tx_power_w=self.system.devices.peak_power_w.copy(),
        )

    def cost_weights(self) -> tuple[float, float]:
        """``(V, lam)`` with which ``X`` and ``z`` are logged."""
        return self.weights.as_tuple()


@dataclass(frozen=True)
class Compression:
    """A baseline's cost model for one frame: what each device sends and computes at the
    controller's ``gamma``, the inputs of the learner's update rule, and the logged columns
    (``compute_fraction``, ``sent_values``, ``bits_per_value``, and e.g. ``width``)."""

    cost: CostPlan
    update: UpdateInputs
    columns: dict[str, np.ndarray]


#: ``(gamma, frame) -> Compression``: a baseline's cost model.
CostModel = Callable[[F64, int], Compression]


class CompressionScheme(Memoryless):
    """A state-of-the-art baseline run at the proposed scheme's ``gamma``.

    The paper's frame controller picks ``gamma`` (same inputs, same MM solver: Theorem 2 under the
    freezing cost model; frame 0: ``gamma = 0``); the baseline's cost model turns it into its own
    payload, compute fraction and update-rule inputs; per slot, Proposition 1 on the baseline's
    own payload and compute (:func:`controller.max_tx_power_for_cost_w`): a method with full
    compute has less time left to upload. The deadline is enforced (late uploads are outages).
    The logged ``gamma`` is the controller's (the convergence-error term ``X`` counts it).

    Args:
        params: the controller's parameters (and an optional CSI margin).
        system: devices and radio constants.
        cost_model: the baseline's :data:`CostModel`.
        update_rule: its learner-side rule.
    """

    closes_at: ClosesAt = "deadline"

    def __init__(
        self,
        params: ThresholdOptions,
        system: SystemConstants,
        *,
        cost_model: CostModel,
        update_rule: UpdateRuleSpec,
    ) -> None:
        self.system = system
        self.weights = LyapunovWeights.from_params(params, system)
        self.controller = FrameController(system, self.weights, params.tol, params.max_iter)
        self.cost_model = cost_model
        self.update_rule = update_rule
        #: the current frame's Proposition-1 threshold, W (recomputed every frame)
        self.p_max_w: F64 = np.zeros(system.num_devices)
        #: the CSI margin's target outage (None for Proposition 1 on the estimate)
        self.target_outage = margin_target(params)

    def plan_frame(self, ctx: FrameContext) -> FramePlan:
        """The controller's ``gamma``, the baseline's cost model, the threshold on that cost."""
        dec = self.controller.solve(ctx)
        gamma = np.clip(dec.gamma, 0.0, 1.0)
        comp = self.cost_model(gamma, ctx.frame)
        costs = frame_costs(comp.cost.payload_bits, comp.cost.compute_fraction, self.system)
        dev = self.system.devices
        value = np.where(
            costs.payload_bits > 0.0,
            self.weights.v * self.weights.lam * dev.batch_size * (1.0 - gamma),
            0.0,
        )
        self.p_max_w = controller.max_tx_power_for_cost_w(
            ctx.queue_j,
            value,
            costs.compute_energy_j,
            self.system.deadline_s - costs.compute_s,
            dev.peak_power_w,
        )
        columns = {**dec.columns, **comp.columns, "max_tx_power_w": self.p_max_w}
        return FramePlan(gamma=gamma, cost=comp.cost, update=comp.update, columns=columns)

    def plan_slot(self, ctx: SlotContext) -> SlotPlan:
        """Proposition 1 against the frame's threshold on the baseline's own cost."""
        return threshold_slot_plan(ctx, self.p_max_w, self.target_outage)

    def cost_weights(self) -> tuple[float, float]:
        """``(V, lam)``."""
        return self.weights.as_tuple()
