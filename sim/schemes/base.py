"""The scheme seam: what a scheme sees, what it decides, what it costs, and what it hears back.

A scheme is one object (:class:`Scheme`) that owns, for a run:

* its **frame decision** (:meth:`Scheme.plan_frame`): per device, the fraction ``gamma`` it runs
  at, its **cost model** for the frame (payload bits and compute fraction, :class:`CostPlan`), and
  the per-device inputs of its learner-side update rule (``update``);
* its **slot decision** (:meth:`Scheme.plan_slot`): who computes and uploads, at what power;
* the **learner-side update rule** it needs (:attr:`Scheme.update_rule`, name and parameters:
  the scheme's parameters reach the learner through it and nowhere else);
* when the server closes a slot (:attr:`Scheme.closes_at`: at the deadline, late uploads are
  outages; or after the last upload, "no outage");
* a hook that hears each slot's outcome (:meth:`Scheme.observe`: who made the deadline);
* its state (:meth:`Scheme.state_dict` / :meth:`Scheme.load_state_dict`).

Everything is vectorised over devices: arrays have shape ``(N,)``. The engine owns the clock and
the trace; :mod:`wflsim.sim.slot` turns plans into outcomes (physics, energy, queues) with the same
code for every scheme. Schemes only decide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from ..slot import SlotOutcome
from ..updates import UpdateInputs, UpdateRuleSpec

if TYPE_CHECKING:
    from ..world.channel.csi import CsiPosterior
    from ..world.system import SystemConstants

F64 = NDArray[np.float64]

#: When the server closes a slot: at the deadline ``tau_0`` (uploads still running are cut:
#: outages) or after the last upload arrives (schemes that promise "no outage").
ClosesAt = Literal["deadline", "last_upload"]


@dataclass(frozen=True)
class FrameContext:
    """What a scheme knows at a frame boundary."""

    frame: int  #: frame index ``k``
    large_scale_gain: F64  #: ``H_n^k`` as the scheme sees it, linear, ``(N,)``
    queue_j: F64  #: energy-deficit queues ``Q_n^{kT}`` at the frame start, J, ``(N,)``


@dataclass(frozen=True)
class CostPlan:
    """What a device's participation costs in this frame, per device, ``(N,)`` each.

    ``payload_bits``: bits uploaded; ``compute_fraction``: share of a full local gradient's
    ``c B`` cycles the device runs (compute time ``u c B / f``, energy ``(alpha/2) u c B f^2``).
    """

    payload_bits: F64
    compute_fraction: F64


@dataclass(frozen=True)
class FramePlan:
    """A scheme's per-frame decision.

    Attributes:
        gamma: the fraction each device runs at in ``[0, 1]`` (logged as ``gamma``; the frozen
            fraction for freezing schemes, the controller's fraction for the others).
        cost: the frame's cost model.
        update: the learner's update-rule inputs for the frame, the rule's record of
            :mod:`wflsim.sim.updates` (e.g. ``FreezingInputs(frozen_count=(N,) int64)``), passed to
            ``Learner.begin_frame``.
        columns: extra per-device columns of the ``freeze`` rows (trace schema names).
    """

    gamma: F64
    cost: CostPlan
    update: UpdateInputs
    columns: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class SlotContext:
    """What a scheme knows at the start of a slot (after the channel draw)."""

    slot: int  #: global slot index ``t``
    frame: int  #: frame index ``k``
    channel_gain: F64  #: ``h_n^t`` the scheme sees, linear, ``(N,)``
    large_scale_gain: F64  #: ``H_n^k``, linear, ``(N,)``
    gamma: F64  #: the frame's ``gamma``, ``(N,)``
    queue_j: F64  #: ``Q`` at the frame start (the frame's price), J, ``(N,)``
    compute_s: F64  #: compute time at the frame's cost plan, s, ``(N,)``
    payload_bits: F64  #: payload at the frame's cost plan, bits, ``(N,)``
    #: power that lands the upload exactly on the deadline (on the seen channel), W, ``(N,)``;
    #: ``inf``: impossible, 0: nothing to send (:func:`wflsim.sim.slot.min_tx_power_w`)
    min_tx_power_w: F64
    #: with imperfect CSI, the law of the true small-scale coefficient given the estimate under
    #: the channel's CSI model (None: perfect CSI, or no closed form;
    #: :mod:`wflsim.sim.world.channel.csi`)
    csi_posterior: CsiPosterior | None = None
    #: which devices are online at the slot's start (``[availability]``; None: every device);
    #: the engine lets only these take part, whatever the plan says
    available: NDArray[np.bool_] | None = None


@dataclass(frozen=True)
class SlotPlan:
    """A scheme's per-slot decision."""

    participate: NDArray[np.bool_]  #: ``(N,)``: the device computes and uploads
    tx_power_w: F64  #: ``(N,)`` W; capped at the peak power by the slot resolution
    columns: Mapping[str, np.ndarray] = field(default_factory=dict)  #: extra ``decision`` columns


class Scheme(Protocol):
    """What the engine needs from a scheme (see the module docstring)."""

    #: registry name (``scheme.name`` in a scenario)
    name: ClassVar[str]
    #: the pydantic model of the scheme's parameters (the ``[scheme]`` table minus ``name``)
    Params: ClassVar[type[BaseModel]]
    #: when the server closes the slot
    closes_at: ClosesAt
    #: the learner-side update rule and its parameters
    update_rule: UpdateRuleSpec
    #: the parameters (names in :attr:`Params`) that change only the logged cost column
    #: ``cost`` (``z = V X + Q E``, through :meth:`cost_weights`), never a decision nor another
    #: column: sweep points that differ only in them share one run and readers recompute the
    #: cost (only ``V`` can be recomputed so; :func:`cost_only_params`: a scheme without this
    #: attribute declares none)
    cost_only_params: ClassVar[frozenset[str]] = frozenset()

    def plan_frame(self, ctx: FrameContext) -> FramePlan:
        """Decide the frame: ``gamma``, cost model, update-rule inputs."""
        ...

    def plan_slot(self, ctx: SlotContext) -> SlotPlan:
        """Decide the slot: participation and transmit power of every device. A function of
        ``ctx`` (and the state the frame plan and ``observe`` left): a stale-update server may
        call it again within a slot (a cycle planned on its own known slowdown)."""
        ...

    def observe(self, outcome: SlotOutcome) -> None:
        """Hear the slot's outcome (who participated, who made the deadline, energy, queues)."""
        ...

    def cost_weights(self) -> tuple[float, float] | None:
        """``(V, lam)`` with which the per-slot ``X`` and ``z = V X + Q E`` are logged (None:
        not logged)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The scheme's state at a frame boundary (arrays, numbers)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into a scheme built from the same scenario."""
        ...


class SchemeClass(Protocol):
    """A registered scheme class (an entry of ``wflsim.sim.registry.SCHEMES``): its name, its
    parameter model, and its constructor."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def __call__(self, params: Any, system: SystemConstants) -> Scheme: ...


#: The parameters whose cost readers can recompute (``z = V X + Q E`` at another ``V``; another
#: ``lam`` would change ``X`` too).
RECOMPUTABLE_COST_PARAMS = frozenset({"V"})


def cost_only_params(scheme: object) -> frozenset[str]:
    """The parameters a scheme class declares to change only its logged cost
    (:attr:`Scheme.cost_only_params`) that readers can recompute
    (:data:`RECOMPUTABLE_COST_PARAMS`); empty when it declares none."""
    declared: object = getattr(scheme, "cost_only_params", frozenset())
    if not isinstance(declared, frozenset | set | tuple | list):
        return frozenset()
    return RECOMPUTABLE_COST_PARAMS & frozenset(p for p in declared if isinstance(p, str))
