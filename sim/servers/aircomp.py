"""The synchronous server's over-the-air slot (``[uplink] mode = "aircomp"``, docs/aircomp.md).

At the slot's start the power rule (:func:`wflsim.sim.radio.aircomp.plan_aircomp`) decides,
from the gains the devices see, who transmits in the sum and at which power; the slot's uploads
become those devices' computations and their share of the common transmission (each device
transmits on the symbols of the coordinates it sends: ``ceil(D'_n / v) / W`` of the
``ceil(D / v) / W`` window). At its end the learner receives the sum of the devices that made
it (:class:`wflsim.sim.learner.OverTheAir`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..learner import OverTheAir
from ..privacy.mechanism import PrivacySpec
from ..radio.aircomp import (
    AirCompPlan,
    AirPrivacy,
    air_fill_w,
    air_multipliers,
    aircomp_transmission,
    device_noise_split,
    interference_w,
    plan_aircomp,
    planned_eta,
    privacy_peak_w,
    privacy_received_w,
    strongest_w,
)
from ..radio.cells.component import Cells
from ..radio.rates import aircomp_latency_s
from ..radio.spec import UplinkSpec
from ..slot import FrameCosts, SlotUploads
from ..world.system import SystemConstants
from .base import SlotPlanning


def over_the_air(
    uploads: SlotUploads,
    sp: SlotPlanning,
    costs: FrameCosts,
    system: SystemConstants,
    spec: UplinkSpec,
    cells: Cells | None = None,
    planned_gain: np.ndarray | None = None,
    privacy: PrivacySpec | None = None,
) -> tuple[SlotUploads, AirCompPlan]:
    """The slot's uploads under AirComp and its plan: the aligned devices take part (a
    truncated one neither computes nor transmits), at the rule's powers, each transmitting
    its own coordinates' symbols (``upload_full_s``, s, ``(N,)``). With ``[cells]`` each cell
    is one sum at its base station, planned on the noise plus the interference the scheme
    plans on there (``N0 / plan_factor``). Under ``[privacy] mechanism = "over_the_air"``
    (``privacy``) the plan carries the public scale and the powers :func:`private_plan` gives;
    a device that adds noise transmits it over the whole window, charged at ``p + q``."""
    v, w = spec.values_per_symbol, system.bandwidth_hz
    window_s = aircomp_latency_s(system.num_params, w, v)
    group = None if cells is None else cells.serving
    noise: float | np.ndarray = system.noise_w
    if cells is not None:
        assert cells.plan_factor is not None
        noise = system.noise_w / cells.plan_factor
    controlled = spec.power_control == "controller"
    eta_w = None
    if controlled:  # the receiver's scaling the scheme planned the frame with
        assert planned_gain is not None, "the controller rule needs the frame's planned gains"
        eta_w = planned_eta(system.devices.peak_power_w, planned_gain, system.devices.batch_size)

    def replan(peak_w: np.ndarray, given_w: np.ndarray | None, eta: float | None) -> AirCompPlan:
        return plan_aircomp(
            uploads.participating,
            system.devices.batch_size,
            sp.gains.seen_gain,
            sp.gains.gain,
            peak_w,
            noise,
            spec.power_control,
            spec.threshold_gain,
            window_s,
            group,
            None if cells is None else cells.num_cells,
            given_w,
            eta,
        )

    peak = np.broadcast_to(
        np.asarray(system.devices.peak_power_w, dtype=np.float64), uploads.participating.shape
    )
    plan = replan(peak, uploads.tx_power_w if controlled else None, eta_w)
    values = costs.payload_bits / float(system.bits_per_param)
    if privacy is not None and privacy.mechanism == "over_the_air":
        plan = private_plan(
            plan,
            privacy,
            values,
            system.noise_w,
            sp.gains.seen_gain,
            sp.gains.gain,
            peak,
            replan,
            uploads.tx_power_w if controlled else None,
            eta_w,
            system.devices.batch_size,
        )
    on = plan.aligned
    own_s = np.minimum(np.ceil(values / v) / w, window_s)
    if plan.privacy is not None:  # a device adding noise adds it on every symbol of the window
        own_s = np.where(plan.privacy.added_w > 0.0, window_s, own_s)
    zero = np.zeros_like(own_s)
    return (
        replace(
            uploads,
            participating=on,
            tx_power_w=plan.tx_power_w,
            compute_s=np.where(on, uploads.compute_s, zero),
            compute_needed_s=np.where(on, uploads.compute_needed_s, zero),
            upload_full_s=np.where(on, own_s, zero),
        ),
        plan,
    )


def private_plan(
    plan: AirCompPlan,
    privacy: PrivacySpec,
    values: np.ndarray,
    thermal_w: float,
    seen_gain: np.ndarray,
    true_gain: np.ndarray,
    peak_power_w: np.ndarray,
    replan: Callable[[np.ndarray, np.ndarray | None, float | None], AirCompPlan],
    given_w: np.ndarray | None = None,
    eta_w: float | None = None,
    batch_size: np.ndarray | None = None,
) -> AirCompPlan:
    """The slot's plan under ``[privacy] mechanism = "over_the_air"`` (docs/privacy.md, "Over
    the air"): ``D_min`` the fewest values an aligned device sends (the public scale), and the
    powers ``air_power`` / ``air_noise`` ask for, planned on the gains the devices see (the
    receiver tops up what the true gains leave missing, :func:`over_the_air_sum`):

    * ``air_power = "privacy"``: no device's received power per symbol above
      ``R = N0 / (z^2 D_min)`` (``N0`` alone meets ``z``): truncated inversion and the optimal
      powers are recomputed under the peaks ``min(P_n, R / g_n)``; the controller's powers
      ``eta a_n^2 / g_n`` scale with ``eta`` capped at ``R / max a_n^2`` over the aligned.
    * ``air_noise = "devices"``: each sum's devices add the noise its strongest device misses
      (:func:`~wflsim.sim.radio.aircomp.device_noise_split`); a sum whose devices' headroom
      cannot reach it takes the ``"privacy"`` powers instead.
    * ``"receiver"`` and ``"channel_only"``: the rule's powers.

    Args:
        values: ``(N,)`` the values each device sends (its payload, parameters).
        thermal_w: ``N0``, W.
        replan: the slot's rule re-planned with other peaks (and, for the controller, other
            powers and ``eta``).
        given_w, eta_w, batch_size: the controller's powers, ``eta`` and ``B_n``.
    """
    n = plan.aligned.shape[0]
    sends = plan.aligned & (values > 0)
    if not sends.any():
        return plan
    d_min = int(round(float(values[sends].min())))
    z = privacy.update_multiplier
    zeros = np.zeros(n)
    if z is None:  # channel_only: the rule's powers, the multipliers measured
        return replace(plan, privacy=AirPrivacy(None, d_min, thermal_w, zeros, zeros))
    cap_w = privacy_received_w(thermal_w, z, d_min)

    def capped() -> AirCompPlan:
        if given_w is None or eta_w is None:
            return replan(privacy_peak_w(peak_power_w, seen_gain, cap_w), None, None)
        assert batch_size is not None
        a = np.asarray(batch_size, dtype=np.float64) / float(np.sum(batch_size))
        eta = min(eta_w, cap_w / float(np.max(a[plan.aligned] ** 2)))
        return replan(peak_power_w, np.asarray(given_w) * (eta / eta_w), eta)

    q = zeros
    if privacy.air_power == "privacy":
        plan = capped()
    elif privacy.air_noise == "devices":
        num = plan.eta.shape[0]
        seen_rx = np.where(plan.aligned, plan.tx_power_w * seen_gain, 0.0)
        need = air_fill_w(strongest_w(seen_rx, plan.group, num), thermal_w, z, d_min)
        room = np.where(plan.aligned, peak_power_w - plan.tx_power_w, 0.0)
        q, reached = device_noise_split(need, room, seen_gain, plan.group)
        if not reached.all():  # not enough headroom: that sum's powers scale down instead
            low, mine = capped(), ~reached[plan.group]
            plan = replace(
                plan,
                tx_power_w=np.where(mine, low.tx_power_w, plan.tx_power_w),
                weights=np.where(mine, low.weights, plan.weights),
                coefficient=np.where(mine, low.coefficient, plan.coefficient),
                eta=np.where(reached, plan.eta, low.eta),
            )
    return replace(
        plan,
        tx_power_w=plan.tx_power_w + q,
        privacy=AirPrivacy(z, d_min, thermal_w, q, q * np.asarray(true_gain, dtype=np.float64)),
    )


def received_noise_w(
    plan: AirCompPlan,
    uploads: SlotUploads,
    transmitted_s: np.ndarray,
    system: SystemConstants,
    closes_at: str,
    cells: Cells | None = None,
) -> np.ndarray:
    """``(G,)`` the noise each sum actually received, W: ``N0`` plus, with cells on one band,
    the other cells' transmissions that overlapped its window (true gains to every site)."""
    noise = np.full(plan.eta.shape[0], system.noise_w)
    if cells is None or not cells.layout.interferes:
        return noise
    start, _, _ = aircomp_transmission(
        uploads.compute_s,
        plan.aligned,
        plan.latency_s,
        system.deadline_s,
        closes_at,
        plan.group,
        plan.eta.shape[0],
    )
    return noise + interference_w(
        plan, np.asarray(transmitted_s), start, cells.slot_gain, cells.layout.co_band
    )


def over_the_air_sum(
    plan: AirCompPlan,
    ok: np.ndarray,
    slot: int,
    noise_w: np.ndarray,
    transmitted: np.ndarray | None = None,
) -> OverTheAir:
    """What the learner applies for the devices ``ok`` (ascending) that made it into their
    sums: their alignment ratios ``c_n / a_n``, their sums, and each sum's noise
    ``sqrt(noise / eta)`` rescaled by the weight its arrived devices carry (the server knows
    who transmitted: their side information arrived).

    Under over-the-air privacy (``plan.privacy``) the noise also has the devices' added noise
    that arrived and what the receiver adds for the strongest arrived device of each sum to
    reach ``z`` (true gains: it tops up what imperfect CSI or the devices left missing; nothing
    under channel_only), and each device's multiplier is its received SNR against the thermal
    and added noise (:func:`~wflsim.sim.radio.aircomp.air_multipliers`; interference, other
    devices' data, does not count). ``transmitted`` (``(N,)`` bool, default: ``ok``): every
    device that sent any symbol; the fill covers the strongest of them, so a device dropped
    part-way through its sum (not applied, not accounted) had its symbols noised to ``z`` too."""
    a = plan.weights[ok]
    group = plan.group[ok]
    num = plan.eta.shape[0]
    carried = np.bincount(group, weights=a, minlength=num)
    ratio = np.divide(plan.coefficient[ok], a, out=np.ones_like(a), where=a > 0)
    noise = np.asarray(noise_w, dtype=np.float64)
    pr, multipliers = plan.privacy, None
    if pr is not None:
        rx = plan.eta[group] * plan.coefficient[ok] ** 2  # p_n g_n with the true gain
        counted = pr.thermal_w + np.bincount(group, weights=pr.added_rx_w[ok], minlength=num)
        if pr.noise_multiplier is not None:
            sent = np.zeros(plan.aligned.shape[0], dtype=bool)
            sent[ok] = True
            if transmitted is not None:
                sent |= np.asarray(transmitted, dtype=bool) & plan.aligned
            every = plan.eta[plan.group[sent]] * plan.coefficient[sent] ** 2
            top = strongest_w(every, plan.group[sent], num)
            counted = counted + air_fill_w(top, counted, pr.noise_multiplier, pr.clip_values)
        noise = noise + (counted - pr.thermal_w)
        multipliers = air_multipliers(rx, counted[group], pr.clip_values)
    with np.errstate(divide="ignore", invalid="ignore"):
        std = np.where((plan.eta > 0) & (carried > 0), np.sqrt(noise / plan.eta) / carried, 0.0)
    return OverTheAir(
        slot=slot,
        ratio=ratio,
        noise_std=std,
        group=group,
        clip_scale_values=None if pr is None else pr.clip_values,
        privacy_multipliers=multipliers,
    )
