"""The participation and radio checks of the diagnostics (:mod:`wflsim.analysis.diagnostics`):
no device took part, slots without a participant and their cause, every upload lost, co-band
interference left out of the plan, uploads over LTE below its lowest MCS."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from wflsim.sim.errors import Diagnostic

from ..tidy import plain_dtypes
from .run import _co_band, _Run, _uploads
from .thresholds import (
    COMPUTE_FILL_SHARE,
    IDLE_SHARE,
    INTERFERENCE_OUTAGE,
    LTE_MIN_SNR_DB,
    NAMED_DEVICES,
)


def _uploads_lost(run: _Run) -> list[Diagnostic]:
    uploads, arrived = _uploads(run)
    if uploads == 0 or arrived > 0:
        return []
    up = run.get("uplink", {}) or {}
    n = run.num_devices
    if run.uplink_mode == "ns3_lte" and (lte := _below_lte_mcs(run)) is not None:
        field, fix = lte
    elif run.server.mode != "sync":
        field, fix = (
            "server.max_staleness",
            "raise it or remove it (every update arrived too stale and was discarded)",
        )
    elif up.get("mode", "dedicated") != "dedicated" and int(
        up.get("planned_concurrent_uploads", 1)
    ) < max(2, n // 2):
        field = "uplink.planned_concurrent_uploads"
        fix = (
            f"the controller planned on W / {up.get('planned_concurrent_uploads', 1)} while up to "
            f"{n} uploads shared the band: set it to the number of concurrent uploads"
        )
    elif run.co_band_on_noise():
        field, fix = "cells.plan_on", _PLAN_ON_FIX
    else:
        field = "run.deadline_s"
        fix = "raise it, or devices.peak_power_w: the uploads the scheme planned never fit the slot"
    return [
        Diagnostic(
            "all_uploads_lost",
            f"every upload was lost: 0 of {uploads} arrived in time (outage rate 1)",
            field,
            fix,
        )
    ]


#: The fix of co-band cells planned on the noise alone.
_PLAN_ON_FIX = (
    'set it to "mean_interference" (or "margin" with cells.margin_db): the plan saw the noise '
    "alone while co-band cells interfered, so uploads planned to end at the deadline ended "
    "after it; or separate the bands (cells.reuse_factor)"
)


def _noise_dbm(run: _Run) -> float:
    """The noise power over the band, dBm (``uplink.noise_psd_dbm_hz`` over W, else
    ``network.noise_dbm``)."""
    psd = run.get("uplink.noise_psd_dbm_hz")
    if psd is not None:
        return float(psd) + 10.0 * float(np.log10(float(run.get("network.bandwidth_hz", 10e6))))
    return float(run.get("network.noise_dbm", -104.0))


def upload_snr_db(events: pd.DataFrame, noise_dbm: float) -> np.ndarray:
    """The SNR over the band of each upload ns-3 played, dB: ``ns3_tx_dbm - ns3_loss_db -
    noise_dbm`` on the rows that carry them (``upload_end``, ``dropped``, ``device_slot``; one
    per upload; no interference counted). Empty without them."""
    cols = [c for c in ("ns3_tx_dbm", "ns3_loss_db") if c in events.columns]
    if len(cols) < 2:
        return np.array([], dtype=np.float64)
    rows = events[events["event"].isin(("upload_end", "dropped")).to_numpy()]
    if len(rows) == 0:
        rows = events[(events["event"] == "device_slot").to_numpy()]
    tx = pd.to_numeric(rows["ns3_tx_dbm"], errors="coerce").to_numpy(dtype=np.float64)
    loss = pd.to_numeric(rows["ns3_loss_db"], errors="coerce").to_numpy(dtype=np.float64)
    snr = tx - loss - noise_dbm
    return snr[np.isfinite(snr)]


def _below_lte_mcs(run: _Run) -> tuple[str, str] | None:
    """``(field, fix)`` where most uploads over ns-3's LTE were sent at an SNR below its lowest
    MCS (:data:`LTE_MIN_SNR_DB`): the controller planned their powers on a rate model that
    carries bits at any SNR (``channel.rate_model``), or on a share of the band
    (``uplink.planned_concurrent_uploads``) that LTE does not give; None otherwise."""
    snr = upload_snr_db(run.events, _noise_dbm(run))
    if snr.size == 0 or float(np.median(snr)) >= LTE_MIN_SNR_DB:
        return None
    what = (
        f"the median upload's SNR over the band was {float(np.median(snr)):.3g} dB, below LTE's "
        f"lowest MCS (about {LTE_MIN_SNR_DB:g} dB): ns-3 decoded nothing of it"
    )
    if run.get("channel.rate_model", "shannon") == "shannon":
        return "channel.rate_model", (
            f'{what}; set it to "truncated_shannon" (the fit to ns-3\'s LTE, docs/ns3.md) so '
            "that the controller plans powers above that SNR, and uplink.planned_concurrent_"
            "uploads to the number of concurrent uploads"
        )
    return "uplink.planned_concurrent_uploads", (
        f"{what}; set it to the number of concurrent uploads (the controller planned on W / "
        f"{run.planned_k}), or raise devices.peak_power_w"
    )


def _nobody_took_part(run: _Run) -> list[Diagnostic]:
    ds = run.device_slots
    if len(ds) == 0 or bool(ds["participating"].any()):
        return []
    online = bool(ds["available"].any())
    if online and _idle_cause(run, idle_slots(ds)[0])[1] != _KEPT_OUT[1]:
        return []  # no power up to the peak uploaded in time: idle_slots names the cause
    return [
        Diagnostic(
            "no_participation",
            f"no device took part in any of {ds['slot'].nunique()} slots"
            + ("" if online else " (no device was ever online)"),
            "devices.energy_budget_j" if online else "availability",
            "raise the budgets (the controller keeps a device out whose budget cannot pay a "
            "slot), or use a scheme without budgets"
            if online
            else "check the availability model or trace",
        )
    ]


def idle_slots(device_slots: pd.DataFrame) -> tuple[np.ndarray, int]:
    """``(idle, slots)``: the slots of a device-slot table
    (:func:`~wflsim.analysis.diagnostics.run.device_slot_outcomes`) in which a device was online
    and none took part, and the number of slots it has."""
    per = device_slots.groupby("slot", sort=True).agg(
        took_part=("participating", "any"), online=("available", "any")
    )
    mask = (~per["took_part"] & per["online"]).to_numpy(dtype=bool)
    return per.index.to_numpy()[mask], len(per)


def _full_compute_s(run: _Run) -> pd.Series:
    """Each device's full computation ``c B E_n / f``, s, from its ``device_config`` row and
    ``learning.local_steps`` / ``local_epochs`` (``k ceil(D_n / B)``, or ``k`` where ``D_n`` is
    not in the trace); the strategy's extra cycles are not counted (a lower bound). Indexed by
    device; empty without ``device_config`` rows."""
    cfg = plain_dtypes(run.rows("device_config"))
    cols = ("device", "cycles_per_sample", "batch_size", "cpu_hz")
    if len(cfg) == 0 or not all(c in cfg.columns for c in cols):
        return pd.Series(dtype=np.float64)
    cfg = cfg.drop_duplicates("device", keep="last").set_index("device")
    c, b, f = (pd.to_numeric(cfg[k], errors="coerce") for k in cols[1:])
    epochs = run.get("learning.local_epochs")
    if epochs:
        samples = pd.to_numeric(cfg.get("num_samples"), errors="coerce")
        steps = (float(epochs) * np.ceil(samples / b)).fillna(float(epochs))
    else:
        steps = pd.Series(float(run.get("learning.local_steps") or 1), index=cfg.index)
    return (c * b * steps / f).astype(np.float64)


def _steps_field(run: _Run) -> str:
    if run.get("learning.local_epochs"):
        return "learning.local_epochs"
    return (
        "learning.local_steps"
        if int(run.get("learning.local_steps") or 1) > 1
        else "run.deadline_s"
    )


def _idle_cause(run: _Run, idle: np.ndarray) -> tuple[str, str, str]:
    """``(why, field, fix)`` of the slots ``idle`` (devices online, none took part), from
    their decision rows: every online device needed more than its peak power
    (``min_tx_power_w`` above ``peak_power_w``), because its computation filled the slot
    (:data:`COMPUTE_FILL_SHARE`), or the plan saw the co-band cells' interference, or a share
    ``W / k`` of the band; else the controller kept the devices out (their energy budgets)."""
    dec = plain_dtypes(run.rows("decision"))
    if len(dec) == 0:  # [trace] level = "device_slots": the decision columns are on these
        dec = plain_dtypes(run.rows("device_slot"))
    need_cols = ("slot", "device", "min_tx_power_w")
    if len(dec) == 0 or not all(c in dec.columns for c in need_cols):
        return _KEPT_OUT
    dec = dec[dec["slot"].isin(idle).to_numpy()]
    if "available" in dec.columns:
        dec = dec[dec["available"].astype("boolean").fillna(True).to_numpy(dtype=bool)]
    cfg = plain_dtypes(run.rows("device_config"))
    peak = (
        cfg.drop_duplicates("device", keep="last").set_index("device")["peak_power_w"]
        if "peak_power_w" in cfg.columns and len(cfg)
        else pd.Series(dtype=np.float64)
    )
    need = pd.to_numeric(dec["min_tx_power_w"], errors="coerce").to_numpy(dtype=np.float64)
    cap = pd.to_numeric(dec["device"].map(peak), errors="coerce").to_numpy(dtype=np.float64)
    if "max_tx_power_w" in dec.columns:  # the scheme's own cap where it writes one
        own = pd.to_numeric(dec["max_tx_power_w"], errors="coerce").to_numpy(dtype=np.float64)
        cap = np.where(np.isfinite(own), own, cap)
    if need.size == 0 or not bool(np.all(need > cap)):
        return _KEPT_OUT
    what = (
        f"every online device needed more than its peak power to upload in time (the least "
        f"required {_power_text(float(np.min(need)))}, peak {float(np.max(cap)):.3g} W)"
    )
    deadline = run.deadline_s
    full = _full_compute_s(run)
    gamma = (
        pd.to_numeric(dec.get("gamma"), errors="coerce").fillna(0.0)
        if "gamma" in dec.columns
        else pd.Series(0.0, index=dec.index)
    )
    planned = (1.0 - gamma.to_numpy(dtype=np.float64)) * dec["device"].map(full).to_numpy(
        dtype=np.float64
    )
    planned = planned[np.isfinite(planned)]
    if deadline > 0 and planned.size and planned.min() >= COMPUTE_FILL_SHARE * deadline:
        t = float(planned.min())
        field = _steps_field(run)
        return (
            f"{what}: the computation alone took at least {t:.3g} s of the {deadline:g} s "
            f"deadline (frozen share {float(gamma.max()):.3g}; a slot that freezes nothing "
            "computes in full: every slot of a scheme that never freezes, the paper's "
            f"controller's first frame), leaving {deadline - t:.3g} s for the upload",
            field,
            "lower it, or raise run.deadline_s or devices.cpu_hz"
            if field != "run.deadline_s"
            else "raise it, or devices.cpu_hz, or lower devices.batch_size",
        )
    cells = run.get("cells")
    if isinstance(cells, Mapping) and cells.get("plan_on", "noise") != "noise" and _co_band(cells):
        return (
            f"{what}: the plan added the co-band cells' interference (cells.plan_on = "
            f"{cells.get('plan_on')!r})",
            "cells.plan_on",
            "lower cells.margin_db or cells.planning_activity, or separate the bands "
            "(cells.reuse_factor), or raise devices.peak_power_w",
        )
    if run.uplink_mode in ("ofdma", "tdma", "ns3_lte") and run.planned_k > 1:
        return (
            f"{what}: the controller planned each upload on W / {run.planned_k}",
            "uplink.planned_concurrent_uploads",
            "lower it to the number of uploads that share the band, or raise "
            "devices.peak_power_w or run.deadline_s",
        )
    return (
        what,
        "devices.peak_power_w",
        "raise it, or run.deadline_s, or bring the devices closer (network.cell_radius_m)",
    )


#: The cause of idle slots whose devices could have uploaded in time: the controller kept them
#: out.
_KEPT_OUT = (
    "the controller kept every online device out (their energy budgets could not pay the slot)",
    "devices.energy_budget_j",
    "raise the budgets, or use a scheme without budgets",
)


def _power_text(watts: float) -> str:
    return "an infinite power" if not np.isfinite(watts) else f"{watts:.3g} W"


def _idle_slots(run: _Run) -> list[Diagnostic]:
    """Slots in which devices were online but none took part (under ``semi_sync`` and
    ``async``: no device's update cycle is recorded in the slot's device-slot rows, the
    ``energy`` / ``device_slot`` rows that carry a cycle's outcome). Flagged when a whole
    frame is such or they are :data:`IDLE_SHARE` of the slots; a run in which no slot had a
    participant is ``no_participation``'s unless the cause is a power above the peak."""
    idle, slots = idle_slots(run.device_slots)
    if idle.size == 0:
        return []
    spf = int(run.get("run.slots_per_frame", 0) or 0)
    frames: list[int] = []
    if spf > 0:
        counts = pd.Series(idle // spf).value_counts()
        frames = sorted(int(k) for k, v in counts.items() if v == spf)
    if not frames and idle.size < IDLE_SHARE * slots:
        return []
    why, field, fix = _idle_cause(run, idle)
    if idle.size == slots and field == _KEPT_OUT[1]:
        return []  # said by no_participation
    named = ", ".join(str(f) for f in frames[:NAMED_DEVICES])
    more = f" and {len(frames) - NAMED_DEVICES} more" if len(frames) > NAMED_DEVICES else ""
    where = f" (frame{'s' if len(frames) > 1 else ''} {named}{more} entirely)" if frames else ""
    return [
        Diagnostic(
            "idle_slots",
            f"{idle.size} of {slots} slots had no participant while devices were "
            f"online{where}: {why}",
            field,
            fix,
        )
    ]


def _interference_unplanned(run: _Run) -> list[Diagnostic]:
    """Co-band cells planned on the noise alone with most uploads lost (all lost:
    ``all_uploads_lost`` names the same field)."""
    uploads, arrived = _uploads(run)
    if uploads == 0 or arrived == 0 or not run.co_band_on_noise():
        return []
    outage = 1.0 - arrived / uploads
    if outage <= INTERFERENCE_OUTAGE:
        return []
    return [
        Diagnostic(
            "interference_unplanned",
            f"{uploads - arrived} of {uploads} uploads were lost (outage rate {outage:.3g}) in "
            "cells that share a band, planned on the noise alone",
            "cells.plan_on",
            _PLAN_ON_FIX,
        )
    ]
