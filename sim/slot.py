"""Slot resolution: plans + channel gains + system constants -> the slot's outcome.

Pure, vectorised functions over devices (arrays of shape ``(N,)``), the same for every scheme:

* :func:`frame_costs` -- a scheme's cost plan in seconds and joules for the frame;
* :func:`slot_costs` -- the costs a slot actually incurs when computation slows down
  (``[compute] jitter``, :mod:`wflsim.sim.world.compute`);
* :func:`min_tx_power_w` -- THE ``p_min`` of a slot (what a scheme sees in its slot context);
* :func:`slot_uploads` -- participation, power and upload times before the slot is played;
* :func:`dedicated_transmission` -- on dedicated bands, the time transmitted and the arrival;
* :func:`settle_slot` -- success, energies and queues from what the slot kernel decided;
* :func:`resolve_slot` -- the three above on dedicated bands, in closed form;
* :func:`queue_update_j` -- THE energy-deficit queue update;
* :func:`drift_plus_penalty` -- the paper's per-slot ``X`` and ``z = V X + Q E``.

The engine decides nothing itself: the slot kernel (:mod:`wflsim.sim.kernels`) plays the uploads out
and reports per device the time transmitted and whether the upload arrived in time (in closed
form on dedicated bands, from the events of a shared uplink), and :func:`settle_slot` turns that
into the outcome.

Timing rule: an upload counts as in time iff ``tau_cmp + tau_com <= tau_0 (1 + 1e-9)``. The
relative tolerance absorbs floating-point rounding of uploads sent at exactly ``p_min``, which
land on the deadline by construction. The decision is made from these numbers, never from the
order in which SimPy happens to process simultaneous events.

Compute that fluctuates (``[compute] jitter``): the slot is resolved on its actual costs
(:func:`slot_costs`: compute time ``s tau_cmp``, energy of the cycles at the clock used), while the
scheme plans on the nominal ones unless the slowdown is ``known``. Under ``closes_at =
"deadline"`` a device still computing at the deadline stops there (the server has closed the
round): its compute time is cut at ``tau_0``, it never uploads, and under ``late_upload_energy =
"until_deadline"`` it is charged the share of the computation's energy it ran (the power is
constant over the computation); under ``"full"`` the whole computation's (with the paper's whole
upload, eq. 11). Without jitter no computation reaches the deadline (``run.deadline_s`` exceeds
every device's full compute time), so none of this changes anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .radio import rates
from .world import physics
from .world.system import SystemConstants

F64 = NDArray[np.float64]
B8 = NDArray[np.bool_]

#: Relative tolerance of the deadline test (see the module docstring).
DEADLINE_REL_TOL = 1e-9


@dataclass(frozen=True)
class FrameCosts:
    """A frame's cost plan in physical units, ``(N,)`` each, for a device that participates."""

    payload_bits: F64  #: upload payload, bits
    compute_s: F64  #: local computation latency ``tau_cmp``, s (eq. 12)
    compute_energy_j: F64  #: local computation energy, J (eq. 13)


@dataclass(frozen=True)
class SlotRules:
    """How a slot ends and how late uploads are charged.

    ``closes_at``: ``"deadline"`` (the server closes at ``tau_0``; uploads not finished are
    outages, cut at the deadline) or ``"last_upload"`` (the server waits for every upload that
    can finish). ``late_upload_energy``: ``"until_deadline"`` (a late device transmits until the
    deadline and stops) or ``"full"`` (charged ``p tau_com`` for the whole payload, eq. 11).
    """

    closes_at: Literal["deadline", "last_upload"]
    late_upload_energy: Literal["until_deadline", "full"]


@dataclass(frozen=True)
class SlotOutcome:
    """What happened in a slot, per device, ``(N,)`` each."""

    participating: B8  #: computed and uploaded
    tx_power_w: F64  #: transmit power, W (0 when not participating)
    success: B8  #: the upload arrived in time and is aggregated
    #: computation latency actually spent, s (0 when not participating; cut at the deadline for a
    #: device still computing then, under ``closes_at = "deadline"``)
    compute_s: F64
    upload_full_s: F64  #: time the whole payload needs at this power, s (``inf``: never)
    upload_s: F64  #: time actually transmitted, s (cut at the deadline for late uploads)
    energy_compute_j: F64  #: J
    energy_upload_j: F64  #: J
    energy_j: F64  #: compute + upload, J
    wasted_energy_j: F64  #: energy of a participation whose upload failed (its ``energy_j``), J
    queue_j: F64  #: energy-deficit queue after this slot's update, J
    #: the device went offline during its compute or upload and lost its work
    #: (``[availability]``; all False without it)
    dropped: B8


def frame_costs(
    payload_bits: ArrayLike, compute_fraction: ArrayLike, system: SystemConstants
) -> FrameCosts:
    """Payload, compute time (eq. 12) and compute energy (eq. 13) of a cost plan, the compute
    times each device's local steps ``E_n`` (``u c' B E_n / f``, ``(alpha / 2) u c' B E_n f^2``
    with ``c' = c + X / B`` the cycles per sample of a step with the server strategy's extra ``X``
    cycles, :attr:`~wflsim.sim.world.system.DeviceArrays.step_cycles_per_sample`), the payload
    times the strategy's upload factor (:attr:`~wflsim.sim.world.system.SystemConstants.upload_factor`).

    Args:
        payload_bits: bits per device of the model's upload, ``(N,)``.
        compute_fraction: share ``u`` of a full gradient's ``c B`` cycles, ``(N,)``.
        system: the devices' hardware.
    """
    dev = system.devices
    u = np.asarray(compute_fraction, dtype=np.float64)
    c = dev.step_cycles_per_sample
    return FrameCosts(
        payload_bits=np.asarray(payload_bits, dtype=np.float64) * system.upload_factor,
        compute_s=physics.compute_time_s(u, c, dev.batch_size, dev.cpu_hz, dev.local_steps),
        compute_energy_j=physics.compute_energy_j(
            u, c, dev.batch_size, dev.cpu_hz, dev.capacitance, dev.local_steps
        ),
    )


def slot_costs(costs: FrameCosts, slowdown: ArrayLike, scales_clock: bool) -> FrameCosts:
    """The costs a slot actually incurs when computation slows down by ``s >= 1``, ``(N,)``.

    Time: ``s tau_cmp`` (:func:`wflsim.sim.world.physics.slowed_compute_time_s`). Energy: the same
    ``u c B`` cycles either at the lowered clock ``f' = f / s`` (``scales_clock``, throttling):
    ``(alpha / 2) u c B f'^2 = E_cmp / s^2``
    (:func:`wflsim.sim.world.physics.throttled_compute_energy_j`); or at the full clock ``f`` with
    the share ``1 / s`` of the CPU (background load): ``E_cmp`` unchanged. The payload is the
    plan's. ``s = 1`` gives ``costs``' values to the bit.

    Args:
        costs: the frame's nominal :class:`FrameCosts`.
        slowdown: ``s``, ``(N,)``, each ``>= 1``.
        scales_clock: whether the slowdown lowers the clock (else it shares the CPU).
    """
    energy = (
        physics.throttled_compute_energy_j(costs.compute_energy_j, slowdown)
        if scales_clock
        else costs.compute_energy_j
    )
    return FrameCosts(
        payload_bits=costs.payload_bits,
        compute_s=physics.slowed_compute_time_s(costs.compute_s, slowdown),
        compute_energy_j=energy,
    )


def min_tx_power_w(costs: FrameCosts, channel_gain: ArrayLike, system: SystemConstants) -> F64:
    """``p_min``: the power that lands each upload exactly on the deadline (Proposition 1).

    ``p_min = N0 / h (2^(payload / (W (tau0 - tau_cmp))) - 1)`` (paper eq. "min transmit
    power"), W, ``(N,)``; 0 for an empty payload; ``inf`` when no power meets the deadline (and
    where the formula would give NaN).
    """
    with np.errstate(invalid="ignore"):
        p = rates.min_tx_power_w(
            costs.payload_bits,
            channel_gain,
            system.bandwidth_hz,
            system.noise_w,
            system.deadline_s,
            costs.compute_s,
            system.rate_model,
        )
    return np.where(np.isnan(p), np.inf, p)


def queue_update_j(queue_j: ArrayLike, energy_j: ArrayLike, budget_j: ArrayLike) -> F64:
    """Energy-deficit virtual queue update ``Q <- max(Q + E - E_bar, 0)`` (eq. "queue update").

    Args:
        queue_j: current queue ``Q``, ``(N,)``, J, ``>= 0``.
        energy_j: energy spent this slot ``E`` (compute + upload), ``(N,)``, J, ``>= 0``.
        budget_j: per-slot energy budget ``E_bar``, ``(N,)`` or scalar, J, ``>= 0``.

    Returns:
        the next queue, ``(N,)``, J (``>= 0``).

    Raises:
        ValueError: on negative or non-finite inputs.
    """
    q = np.asarray(queue_j, dtype=np.float64)
    e = np.asarray(energy_j, dtype=np.float64)
    b = np.asarray(budget_j, dtype=np.float64)
    for name, arr in (("queue_j", q), ("energy_j", e), ("budget_j", b)):
        if not np.all(np.isfinite(arr)) or np.any(arr < 0.0):
            raise ValueError(f"{name} must be finite and >= 0")
    return np.maximum(q + e - b, 0.0)


@dataclass(frozen=True)
class SlotUploads:
    """A slot's uploads before the kernel plays them, ``(N,)`` each."""

    participating: B8  #: computes and uploads
    tx_power_w: F64  #: transmit power (capped at ``P_bar``), W (0 when not participating)
    channel_gain: F64  #: ``h`` the world applies, linear
    payload_bits: F64  #: bits to upload
    #: ``tau_cmp`` played, s (0 when not participating): the slot's actual computation, stopped
    #: at the deadline under ``closes_at = "deadline"`` if it runs past it (``[compute] jitter``)
    compute_s: F64
    #: the whole computation ``tau_cmp``, s (``compute_s`` unless stopped at the deadline)
    compute_needed_s: F64
    #: time the whole payload needs alone on the band ``W`` (eq. 10; on a dedicated band the
    #: upload time), s; 0 when not participating, ``inf``: never
    upload_full_s: F64


def slot_uploads(
    participate: ArrayLike,
    tx_power_w: ArrayLike,
    costs: FrameCosts,
    channel_gain: ArrayLike,
    system: SystemConstants,
    closes_at: Literal["deadline", "last_upload"] = "deadline",
) -> SlotUploads:
    """Who uploads what at which power: a device participates iff the scheme says so and it has
    something to send; its power is capped at its peak ``P_bar``; rate ``r = W log2(1 + p h /
    N0)`` (eq. 9) and time ``payload / r`` (eq. 10) on the whole band. Under ``closes_at =
    "deadline"`` a computation longer than ``tau_0`` (only a slowed one, ``[compute] jitter``)
    stops at the deadline: the device never uploads (module docstring).

    Args:
        participate: ``(N,)`` bool, the scheme's choice.
        tx_power_w: ``(N,)`` W, the scheme's power.
        costs: the slot's :class:`FrameCosts` (the frame's, or :func:`slot_costs`).
        channel_gain: ``h`` the world applies, ``(N,)``, linear.
        system: devices and radio constants.
        closes_at: the scheme's slot rule (:class:`SlotRules`).
    """
    dev = system.devices
    part = np.asarray(participate, dtype=bool) & (costs.payload_bits > 0)
    p = np.where(part, np.minimum(np.asarray(tx_power_w, dtype=np.float64), dev.peak_power_w), 0.0)
    h = np.asarray(channel_gain, dtype=np.float64)
    rate = rates.rate_bps(p, h, system.bandwidth_hz, system.noise_w, system.rate_model)
    need_s = np.where(part, costs.compute_s, 0.0)
    return SlotUploads(
        participating=part,
        tx_power_w=p,
        channel_gain=h,
        payload_bits=costs.payload_bits,
        compute_s=np.minimum(need_s, system.deadline_s) if closes_at == "deadline" else need_s,
        compute_needed_s=need_s,
        upload_full_s=np.where(part, rates.upload_time_s(costs.payload_bits, rate), 0.0),
    )


def dedicated_transmission(
    uploads: SlotUploads, deadline_s: float, closes_at: Literal["deadline", "last_upload"]
) -> tuple[F64, B8]:
    """On dedicated bands (uploads do not interact): the time each upload transmits and whether
    it arrives in time, in closed form, ``(N,)`` each.

    Arrival ``tau_cmp + tau_com``. Under ``closes_at = "deadline"`` an upload arrives iff it
    ends by ``tau_0`` (relative tolerance :data:`DEADLINE_REL_TOL`); under ``"last_upload"`` iff
    it ever ends. An upload that does not arrive transmits until the deadline.
    """
    part = uploads.participating
    arrival_s = uploads.compute_s + uploads.upload_full_s
    if closes_at == "last_upload":
        arrived = part & np.isfinite(arrival_s)
    else:
        arrived = part & (arrival_s <= deadline_s * (1.0 + DEADLINE_REL_TOL))
    cut_s = np.maximum(deadline_s - uploads.compute_s, 0.0)
    transmitted_s = np.where(
        arrived,
        uploads.upload_full_s,
        np.where(part, np.minimum(uploads.upload_full_s, cut_s), 0.0),
    )
    return transmitted_s, arrived


def settle_slot(
    uploads: SlotUploads,
    transmitted_s: ArrayLike,
    arrived: ArrayLike,
    costs: FrameCosts,
    queue_j: ArrayLike,
    system: SystemConstants,
    rules: SlotRules,
    computed_s: ArrayLike | None = None,
    dropped: ArrayLike | None = None,
    probe_energy_j: ArrayLike | None = None,
) -> SlotOutcome:
    """The outcome of a slot from what the kernel decided: per device the time its upload
    actually transmitted and whether it arrived in time (``(N,)`` each) and, where devices can
    go offline (``[availability]``), the time it actually computed and whether it was dropped.

    Success = arrived in time and not dropped. Energy: compute energy plus ``p`` times the time
    charged (eq. 11; :class:`SlotRules`: ``"full"`` charges ``p tau_com`` of the whole payload on
    the band); wasted energy: the whole energy of a participation whose upload is not aggregated
    (its gradient is dropped); queues: :func:`queue_update_j`. A computation stopped before its
    end (at the deadline, or by a drop) is charged the share of its energy it ran (the power is
    constant over the computation); a dropped device is charged the energy it spent until it
    went offline under either rule (``p`` times the time it transmitted).

    Args:
        uploads: the slot's :class:`SlotUploads`.
        transmitted_s: time actually transmitted, s.
        arrived: whether the upload arrived in time.
        costs: the frame's :class:`FrameCosts`.
        queue_j: queues before the slot, ``(N,)``, J.
        system: devices and radio constants.
        rules: :class:`SlotRules`.
        computed_s: time actually computed, s (None: ``uploads.compute_s``).
        dropped: the device went offline during its work (None: nobody did).
        probe_energy_j: the energy of the loss probes run at the slot's start
            (``[strategy.selection] rule = "power_of_choice"``), J, added to the computation
            energy of every device that ran one, asked or not (None: no probe).
    """
    part = uploads.participating
    n = part.shape[0]
    lost = np.zeros(n, dtype=bool) if dropped is None else part & np.asarray(dropped, dtype=bool)
    success = part & np.asarray(arrived, dtype=bool) & ~lost
    upload_s = np.where(part, np.asarray(transmitted_s, dtype=np.float64), 0.0)
    upload_full_s = uploads.upload_full_s
    if rules.late_upload_energy == "full":
        full = part & np.isfinite(upload_full_s) & ~lost
        charged_s = np.where(full, upload_full_s, upload_s)
    else:
        charged_s = upload_s
    p = uploads.tx_power_w
    energy_compute_j = np.where(part, costs.compute_energy_j, 0.0)
    need_s = uploads.compute_needed_s
    ran_s = uploads.compute_s if computed_s is None else np.asarray(computed_s, dtype=np.float64)
    stopped = part & ~success & (ran_s < need_s)  # at the deadline (jitter) or by a drop
    if rules.late_upload_energy == "full":
        stopped &= lost
    if stopped.any():
        share = np.divide(ran_s, need_s, out=np.ones_like(need_s), where=stopped)
        energy_compute_j = energy_compute_j * share
    if probe_energy_j is not None:
        energy_compute_j = energy_compute_j + np.asarray(probe_energy_j, dtype=np.float64)
    energy_upload_j = np.where(part, rates.upload_energy_j(p, charged_s), 0.0)
    energy_j = energy_compute_j + energy_upload_j
    return SlotOutcome(
        participating=part,
        tx_power_w=p,
        success=success,
        compute_s=np.where(part, ran_s, 0.0) if computed_s is not None else uploads.compute_s,
        upload_full_s=upload_full_s,
        upload_s=upload_s,
        energy_compute_j=energy_compute_j,
        energy_upload_j=energy_upload_j,
        energy_j=energy_j,
        wasted_energy_j=np.where(part & ~success, energy_j, 0.0),
        queue_j=queue_update_j(queue_j, energy_j, system.devices.energy_budget_j),
        dropped=lost,
    )


def resolve_slot(
    participate: ArrayLike,
    tx_power_w: ArrayLike,
    costs: FrameCosts,
    channel_gain: ArrayLike,
    queue_j: ArrayLike,
    system: SystemConstants,
    rules: SlotRules,
) -> SlotOutcome:
    """The outcome of a slot on dedicated bands, in closed form: :func:`slot_uploads`, then
    :func:`dedicated_transmission`, then :func:`settle_slot`.

    Args:
        participate: ``(N,)`` bool, the scheme's choice.
        tx_power_w: ``(N,)`` W, the scheme's power.
        costs: the frame's :class:`FrameCosts`.
        channel_gain: ``h`` the world applies, ``(N,)``, linear.
        queue_j: queues before the slot, ``(N,)``, J.
        system: devices and radio constants.
        rules: :class:`SlotRules`.
    """
    uploads = slot_uploads(participate, tx_power_w, costs, channel_gain, system, rules.closes_at)
    transmitted_s, arrived = dedicated_transmission(uploads, system.deadline_s, rules.closes_at)
    return settle_slot(uploads, transmitted_s, arrived, costs, queue_j, system, rules)


def drift_plus_penalty(
    success: ArrayLike,
    gamma: ArrayLike,
    batch_size: ArrayLike,
    energy_j: ArrayLike,
    queue_frame_j: ArrayLike,
    v: float,
    lam: float,
) -> tuple[F64, F64]:
    """The paper's per-slot ``X = lam 1{success} B (gamma - 1)`` and ``z = V X + Q E``.

    Args:
        success: ``(N,)`` bool; gamma: ``(N,)``; batch_size: ``B``, ``(N,)``; energy_j: ``E``,
        ``(N,)`` J; queue_frame_j: ``Q`` at the frame start, ``(N,)`` J; v, lam: ``V``,
        ``lambda``.

    Returns:
        ``(X, z)``, each ``(N,)``. ``X`` of a failed upload is ``+0.0``: the product
        ``0 (gamma - 1)`` is ``-0.0`` in IEEE arithmetic, and a column holding both zeros breaks
        pandas' multi-column sort; adding ``0.0`` turns ``-0.0`` into ``+0.0`` and changes no
        other value (``z`` is unchanged: ``V (-0.0) + Q E`` and ``V (+0.0) + Q E`` are equal).
    """
    x: F64 = lam * np.asarray(success) * np.asarray(batch_size) * (np.asarray(gamma) - 1.0) + 0.0
    z: F64 = v * x + np.asarray(queue_frame_j) * np.asarray(energy_j)
    return x, z
