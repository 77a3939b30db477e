"""The synchronous server's over-the-air slot (``[uplink] mode = "aircomp"``, docs/aircomp.md).

At the slot's start the power rule (:func:`wflsim.sim.radio.aircomp.plan_aircomp`) decides,
from the gains the devices see, who transmits in the sum and at which power; the slot's uploads
become those devices' computations and their share of the common transmission (each device
transmits on the symbols of the coordinates it sends: ``ceil(D'_n / v) / W`` of the
``ceil(D / v) / W`` window). At its end the learner receives the sum of the devices that made
it (:class:`wflsim.sim.learner.OverTheAir`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..learner import OverTheAir
from ..radio.aircomp import (
    AirCompPlan,
    aircomp_transmission,
    interference_w,
    plan_aircomp,
    planned_eta,
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
) -> tuple[SlotUploads, AirCompPlan]:
    """The slot's uploads under AirComp and its plan: the aligned devices take part (a
    truncated one neither computes nor transmits), at the rule's powers, each transmitting
    its own coordinates' symbols (``upload_full_s``, s, ``(N,)``). With ``[cells]`` each cell
    is one sum at its base station, planned on the noise plus the interference the scheme
    plans on there (``N0 / plan_factor``)."""
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
    plan = plan_aircomp(
        uploads.participating,
        system.devices.batch_size,
        sp.gains.seen_gain,
        sp.gains.gain,
        system.devices.peak_power_w,
        noise,
        spec.power_control,
        spec.threshold_gain,
        window_s,
        group,
        None if cells is None else cells.num_cells,
        uploads.tx_power_w if controlled else None,
        eta_w,
    )
    on = plan.aligned
    values = costs.payload_bits / float(system.bits_per_param)
    own_s = np.minimum(np.ceil(values / v) / w, window_s)
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
    plan: AirCompPlan, ok: np.ndarray, slot: int, noise_w: np.ndarray
) -> OverTheAir:
    """What the learner applies for the devices ``ok`` (ascending) that made it into their
    sums: their alignment ratios ``c_n / a_n``, their sums, and each sum's noise
    ``sqrt(noise / eta)`` rescaled by the weight its arrived devices carry (the server knows
    who transmitted: their side information arrived)."""
    a = plan.weights[ok]
    group = plan.group[ok]
    carried = np.bincount(group, weights=a, minlength=plan.eta.shape[0])
    ratio = np.divide(plan.coefficient[ok], a, out=np.ones_like(a), where=a > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        std = np.where((plan.eta > 0) & (carried > 0), np.sqrt(noise_w / plan.eta) / carried, 0.0)
    return OverTheAir(slot=slot, ratio=ratio, noise_std=std, group=group)
