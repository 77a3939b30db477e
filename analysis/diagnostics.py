"""Diagnostics of a finished run: what went wrong, computed from its trace, each with the field
to change (``docs/diagnostics.md``).

A run can complete and still have failed: every upload lost, the model never updated, accuracy
back at its start. :func:`diagnose` reads the run's events and its scenario and returns one
:class:`Diagnostic` per such finding, in the order of :data:`CHECKS`. ``wflsim run`` prints them
after its summary (``--strict``: exit code 3), :func:`wflsim.run` returns them
(``RunResult.diagnostics``; ``strict=True`` raises :class:`DiagnosticsError`), and the report
lists them per run and per sweep point.

The thresholds are stated with their constants; a diagnostic is a finding, not a verdict: a
study of outage may want every upload lost.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from wflsim.sim.errors import Diagnostic as Diagnostic
from wflsim.sim.errors import DiagnosticsError as DiagnosticsError

from .io import event_codes, events_frame, load_events_table, load_manifest
from .tidy import plain_dtypes

#: A stale server's step per applied update above this many times the synchronous one is
#: flagged (the warning before the run uses the same limit,
#: ``wflsim.sim.config.plausibility.MAX_STEP_RATIO``; a test keeps the two equal).
MAX_STEP_RATIO = 3.0
#: A shared uplink whose uploads shared the band with more than this factor times (or fewer
#: than 1 / this factor times) the planned ``planned_concurrent_uploads`` is flagged.
CONCURRENCY_FACTOR = 2.0
#: Training diverged: a non-finite test loss, or a final loss above this factor times the
#: initial one (the initial cross-entropy of C classes is about ln C; twice it is no model).
DIVERGED_LOSS_FACTOR = 2.0
#: The accuracy fell: the final accuracy lies more than :data:`FELL_MIN` below the best one
#: reached and has lost more than this share of the gain from the initial accuracy to the best.
FELL_SHARE = 0.5
#: The smallest fall of the accuracy that is flagged (a fraction: 0.05 is 5 points).
FELL_MIN = 0.05
#: A device is flagged for never taking part only in runs of at least this many slots.
MIN_SLOTS_FOR_ABSENCE = 20
#: At most this many devices are named in one diagnostic (the rest are counted).
NAMED_DEVICES = 5
#: Slots in which devices were online but none took part are flagged when a whole frame is
#: such, or when they make up at least this share of the run's slots.
IDLE_SHARE = 0.1
#: A computation of at least this share of ``run.deadline_s`` fills the slot: the upload is left
#: too little time for any power up to the peak (the warning before the run uses the same
#: share, ``wflsim.sim.config.plausibility.COMPUTE_FILL_SHARE``; a test keeps the two equal).
COMPUTE_FILL_SHARE = 0.9
#: LTE's lowest MCS decodes nothing below this SNR over the band, dB: ``snr_min_db`` of the
#: ``truncated_shannon`` rate model's fit to ns-3's LTE uplink (docs/ns3.md; a test keeps the
#: two equal).
LTE_MIN_SNR_DB = -2.95
#: Co-band cells planned on the noise alone are flagged at an outage rate above this.
INTERFERENCE_OUTAGE = 0.5


@dataclass(frozen=True)
class _Server:
    """The ``[server]`` fields the checks read, from the trace's resolved scenario (defaults as
    ``docs/scenario.md`` gives them)."""

    mode: str = "sync"
    buffer_size: int = 1
    server_lr: float = 1.0

    @classmethod
    def of(cls, table: Mapping[str, Any]) -> _Server:
        return cls(
            str(table.get("mode", "sync")),
            int(table.get("buffer_size", 1)),
            float(table.get("server_lr", 1.0)),
        )

    def step_ratio(self, devices_cycling: float) -> float:
        """The step per applied update over the synchronous server's: 1 (``sync``),
        ``server_lr`` (``semi_sync``), ``server_lr N / buffer_size`` (``async``); the closed form
        ``ServerConfig.step_ratio`` derives (a test checks the two agree)."""
        if self.mode == "sync":
            return 1.0
        if self.mode == "semi_sync":
            return self.server_lr
        return self.server_lr * float(devices_cycling) / float(self.buffer_size)


@dataclass
class _Run:
    """What the checks read: the run's events, device-slot table, scenario and summary."""

    events: pd.DataFrame
    device_slots: pd.DataFrame
    scenario: Mapping[str, Any]
    summary: Mapping[str, Any]

    def get(self, dotted: str, default: Any = None) -> Any:
        """The scenario's value at ``dotted`` (``default`` if absent)."""
        value: Any = self.scenario
        for part in dotted.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return default
            value = value[part]
        return value

    @property
    def server(self) -> _Server:
        return _Server.of(self.get("server", {}) or {})

    @property
    def num_devices(self) -> int:
        return int(self.get("network.num_devices", 0) or 0)

    def rows(self, *names: str) -> pd.DataFrame:
        ev = self.events
        return ev[ev["event"].isin(names).to_numpy()]

    @property
    def learning(self) -> bool:
        return bool(self.get("learning.enabled", True))

    @property
    def uplink_mode(self) -> str:
        return str(self.get("uplink.mode", "dedicated") or "dedicated")

    @property
    def planned_k(self) -> int:
        return int(self.get("uplink.planned_concurrent_uploads", 1) or 1)

    @property
    def deadline_s(self) -> float:
        return float(self.get("run.deadline_s", 0.0) or 0.0)

    def co_band_on_noise(self) -> bool:
        """Whether cells share a band while the plan sees the noise alone (``cells.plan_on =
        "noise"``, the default): the interference of the co-band cells is left out of every
        required power, so uploads planned to end at the deadline end after it."""
        cells = self.get("cells")
        if not isinstance(cells, Mapping) or cells.get("plan_on", "noise") != "noise":
            return False
        return _co_band(cells)


def _co_band(cells: Mapping[str, Any]) -> bool:
    """Whether two cells of a ``[cells]`` table share a band: explicit ``bands`` with a repeat;
    else more cells than the reuse factor's bands (the hexagonal layouts: ``1 + 3 R (R + 1)``
    cells of ``R`` rings, or the ``sites_m`` given)."""
    bands = cells.get("bands")
    if bands:
        return len(set(bands)) < len(bands)
    sites = cells.get("sites_m")
    if sites:
        count = len(sites)
    else:
        rings = int(cells.get("rings") or 0)
        count = 1 + 3 * rings * (rings + 1)
    return count > int(cells.get("reuse_factor", 1) or 1)


def _uploads(run: _Run) -> tuple[int, int]:
    """``(uploads, arrived)``: participations not lost to a drop, and those that succeeded."""
    ds = run.device_slots
    tried = ds["participating"] & ~ds["dropped"]
    return int(tried.sum()), int((tried & ds["success"]).sum())


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
    """``(idle, slots)``: the slots of a device-slot table (:func:`device_slot_outcomes`) in
    which a device was online and none took part, and the number of slots it has."""
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


def _never_updated(run: _Run) -> list[Diagnostic]:
    uploads, arrived = _uploads(run)
    if arrived == 0:  # said by all_uploads_lost / no_participation
        return []
    steps = run.rows("aggregate", "flush")
    applied = pd.to_numeric(steps["n_success"], errors="coerce").fillna(0)
    if len(steps) and float(applied.sum()) > 0:
        return []
    server = run.server
    return [
        Diagnostic(
            "model_never_updated",
            f"{arrived} updates arrived but the server never applied one",
            "server.buffer_size" if server.mode == "async" else "run.frames",
            f"lower it below the {arrived} arrivals" if server.mode == "async" else "run longer",
        )
    ]


def _evals(run: _Run) -> pd.DataFrame:
    ev = run.rows("eval")
    cols = [c for c in ("slot", "time_s", "loss", "accuracy") if c in ev.columns]
    out = plain_dtypes(ev[cols].reset_index(drop=True))
    return out.sort_values(["slot", "time_s"], kind="stable").reset_index(drop=True)


def _lr_field(run: _Run) -> tuple[str, str]:
    server = run.server
    ratio = server.step_ratio(run.num_devices * _online_fraction(run))
    if server.mode != "sync" and ratio > 1.0:
        return (
            "server.server_lr",
            "lower it (the step per update is larger than the synchronous one)",
        )
    return "learning.lr", "lower it"


def _diverged(run: _Run) -> list[Diagnostic]:
    if not run.learning:
        return []
    ev = _evals(run)
    loss = ev["loss"].to_numpy(dtype=np.float64) if "loss" in ev else np.array([])
    if loss.size < 2:
        return []
    field, fix = _lr_field(run)
    bad = ~np.isfinite(loss)
    if bad.any():
        first = int(np.argmax(bad))
        return [
            Diagnostic(
                "training_diverged",
                f"the test loss became {loss[first]} at slot {int(ev['slot'].iloc[first])}",
                field,
                fix,
            )
        ]
    if loss[-1] > DIVERGED_LOSS_FACTOR * loss[0]:
        return [
            Diagnostic(
                "training_diverged",
                f"the test loss grew from {loss[0]:.4g} to {loss[-1]:.4g} "
                f"(more than {DIVERGED_LOSS_FACTOR:g} times)",
                field,
                fix,
            )
        ]
    return []


def _no_progress(run: _Run) -> list[Diagnostic]:
    if not run.learning:
        return []
    uploads, arrived = _uploads(run)
    if arrived == 0:
        return []
    ev = _evals(run)
    if len(ev) < 2 or "accuracy" not in ev:
        return []
    acc = ev["accuracy"].to_numpy(dtype=np.float64)
    if not (np.isfinite(acc[0]) and np.isfinite(acc[-1])):
        return []
    best = float(np.nanmax(acc))
    field, fix = _lr_field(run)
    if acc[-1] > acc[0]:
        at = int(np.nanargmax(acc))
        lost = best - acc[-1]
        if lost <= FELL_MIN or lost <= FELL_SHARE * (best - acc[0]):
            return []
        return [
            Diagnostic(
                "accuracy_fell",
                f"the accuracy fell from its best {best:.4f} (slot {int(ev['slot'].iloc[at])}) "
                f"to {acc[-1]:.4f} at the end (initial {acc[0]:.4f})",
                field,
                fix,
            )
        ]
    return [
        Diagnostic(
            "accuracy_not_improved",
            f"the final accuracy {acc[-1]:.4f} is at or below the initial {acc[0]:.4f}"
            + (f" (it reached {best:.4f} on the way)" if best > acc[0] else ""),
            field,
            fix + ", or run longer (run.frames)" if best <= acc[0] else fix,
        )
    ]


def _online_fraction(run: _Run) -> float:
    value = run.summary.get("available_fraction") if run.summary else None
    try:
        return float(value) if value is not None else 1.0
    except (TypeError, ValueError):
        return 1.0


def upload_concurrency(events: pd.DataFrame, mode: str) -> np.ndarray:
    """For each upload that ended, the mean number of uploads sharing the band over its
    lifetime, itself included (time-weighted; dimensionless, ``(U,)``).

    An upload lives from its ``upload_start`` (``ofdma``; under ``tdma`` from its
    ``compute_end``: the wait in the queue is its share of the band) to its ``upload_end`` row
    of the same device; the number in flight ``n(t)`` is counted from all of them and averaged
    over each life, ``(1 / (e - s)) integral_s^e n(t) dt``, in the order of the uploads' ends.
    Uploads of zero length are left out. Empty without event-level rows (``[trace] level = "device_slots"``).
    """
    start_event = "compute_end" if mode == "tdma" else "upload_start"
    ev = events[["event", "device", "time_s"]]
    starts = plain_dtypes(ev[(ev["event"] == start_event).to_numpy()])
    ends = plain_dtypes(ev[(ev["event"] == "upload_end").to_numpy()])
    if len(starts) == 0 or len(ends) == 0:
        return np.array([], dtype=np.float64)
    starts = starts.rename(columns={"time_s": "start_s"}).astype({"device": "int64"})
    ends = ends.rename(columns={"time_s": "end_s"}).astype({"device": "int64"})
    starts = starts.sort_values("start_s", kind="stable")
    ends = ends.sort_values("end_s", kind="stable")
    pairs = pd.merge_asof(
        ends, starts, left_on="end_s", right_on="start_s", by="device", direction="backward"
    ).dropna(subset=["start_s"])
    s = pairs["start_s"].to_numpy(dtype=np.float64)
    e = pairs["end_s"].to_numpy(dtype=np.float64)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return np.array([], dtype=np.float64)
    times = np.concatenate([s, e])
    steps = np.concatenate([np.ones_like(s), -np.ones_like(e)])
    order = np.argsort(times, kind="stable")
    times, steps = times[order], steps[order]
    grid, first = np.unique(times, return_index=True)
    n_after = np.cumsum(steps)[np.r_[first[1:] - 1, times.size - 1]]  # in flight after each time
    area = np.r_[0.0, np.cumsum(n_after[:-1] * np.diff(grid))]
    return (np.interp(e, grid, area) - np.interp(s, grid, area)) / (e - s)


def _concurrency(run: _Run) -> list[Diagnostic]:
    up = run.get("uplink", {}) or {}
    mode = up.get("mode", "dedicated")
    if mode in ("dedicated", "aircomp"):  # aircomp: every update is on the band at once, by design
        return []
    k = int(up.get("planned_concurrent_uploads", 1))
    seen = upload_concurrency(run.events, mode)
    if seen.size == 0:
        return []
    mean = float(seen.mean())
    if k / CONCURRENCY_FACTOR <= mean <= k * CONCURRENCY_FACTOR:
        return []
    what = "queued for" if mode == "tdma" else "shared"
    towards = max(1, round(mean))
    if mean > k:
        fix = (
            f"raise it towards {towards}: uploads planned to end at the deadline on W / {k} "
            "end later on a smaller share"
        )
    else:
        fix = (
            f"lower it towards {towards}: the controller over-provisions power and keeps "
            "devices out (more then take part: check the concurrency again)"
        )
    return [
        Diagnostic(
            "planned_concurrency_mismatch",
            f"the controller planned each upload on W / {k}, but an upload {what} the band with "
            f"{mean:.3g} uploads on average (itself included; time-weighted over "
            f"{seen.size} uploads)",
            "uplink.planned_concurrent_uploads",
            fix,
        )
    ]


def _absent_devices(run: _Run) -> list[Diagnostic]:
    ds = run.device_slots
    slots = int(ds["slot"].nunique()) if len(ds) else 0
    if slots < MIN_SLOTS_FOR_ABSENCE or not bool(ds["participating"].any()):
        return []
    per = ds.groupby("device", sort=True).agg(
        took_part=("participating", "any"), online=("available", "any")
    )
    absent = per.index[~per["took_part"].to_numpy()].to_numpy()
    if absent.size == 0:
        return []
    offline = per.loc[absent, "online"].to_numpy()
    named = ", ".join(str(int(d)) for d in absent[:NAMED_DEVICES])
    more = f" (and {absent.size - NAMED_DEVICES} more)" if absent.size > NAMED_DEVICES else ""
    word = "device" if absent.size == 1 else "devices"
    if not offline.any():
        return [
            Diagnostic(
                "device_never_online",
                f"{word} {named}{more} never came online in {slots} slots",
                "availability",
                "check the availability model or trace for these devices",
            )
        ]
    return [
        Diagnostic(
            "device_never_took_part",
            f"{word} {named}{more} never took part in {slots} slots",
            "devices.energy_budget_j",
            "the scheme kept them out: raise their budgets, or check their distance "
            "(network.cell_radius_m) and power (devices.peak_power_w)",
        )
    ]


def _server_step(run: _Run) -> list[Diagnostic]:
    server = run.server
    if server.mode == "sync":
        return []
    cycling = run.num_devices * _online_fraction(run)
    ratio = server.step_ratio(cycling)
    if ratio <= MAX_STEP_RATIO:
        return []
    same = 1.0 if server.mode == "semi_sync" else server.buffer_size / max(cycling, 1.0)
    return [
        Diagnostic(
            "server_step_too_large",
            f"each applied update moved the model {ratio:.3g} times as far as under the "
            f"synchronous server (server_lr = {server.server_lr:g}, mode = {server.mode!r}"
            + (
                f", buffer_size = {server.buffer_size}, {cycling:.3g} devices online on average"
                if server.mode == "async"
                else ""
            )
            + ")",
            "server.server_lr",
            f"server_lr = {same:.3g} gives the synchronous step per update",
        )
    ]


#: The checks, in the order their findings are listed.
CHECKS = (
    _nobody_took_part,
    _idle_slots,
    _uploads_lost,
    _interference_unplanned,
    _never_updated,
    _diverged,
    _no_progress,
    _concurrency,
    _absent_devices,
    _server_step,
)

#: Every diagnostic's code (``docs/diagnostics.md``).
CODES = (
    "no_participation",
    "idle_slots",
    "all_uploads_lost",
    "interference_unplanned",
    "model_never_updated",
    "training_diverged",
    "accuracy_not_improved",
    "accuracy_fell",
    "planned_concurrency_mismatch",
    "device_never_online",
    "device_never_took_part",
    "server_step_too_large",
)


#: The events the checks read (a run folder is read filtered to them).
DIAGNOSED_EVENTS = (
    "device_config",
    "decision",
    "energy",
    "device_slot",
    "aggregate",
    "flush",
    "eval",
    "compute_end",
    "upload_start",
    "upload_end",
    "dropped",
)


#: The trace columns the checks read (a run folder is read with only these).
DIAGNOSED_COLUMNS = (
    "time_s",
    "slot",
    "device",
    "participating",
    "success",
    "dropped",
    "available",
    "n_success",
    "loss",
    "accuracy",
    "gamma",
    "min_tx_power_w",
    "max_tx_power_w",
    "peak_power_w",
    "cycles_per_sample",
    "batch_size",
    "cpu_hz",
    "num_samples",
    "ns3_tx_dbm",
    "ns3_loss_db",
)


def device_slot_outcomes(events: pd.DataFrame) -> pd.DataFrame:
    """One row per device and slot: ``slot``, ``device``, ``participating``, ``success``,
    ``dropped`` (from the ``energy`` rows, or the ``device_slot`` rows of ``[trace] level =
    "device_slots"``) and ``available`` (from the slot's first ``decision`` row, or its
    ``device_slot`` row; True where the trace has none: always online). Bools, no nulls."""
    ev = events
    name = "device_slot" if bool((ev["event"] == "device_slot").any()) else "energy"
    cols = ["slot", "device", "participating", "success", "dropped"]
    out = plain_dtypes(ev.loc[(ev["event"] == name).to_numpy(), cols + ["available"]])
    if name == "energy":
        dec = plain_dtypes(
            ev.loc[(ev["event"] == "decision").to_numpy(), ["slot", "device", "available"]]
        )
        dec = dec.drop_duplicates(["slot", "device"], keep="first")
        out = out[cols].merge(dec, on=["slot", "device"], how="left")
    for c, default in (
        ("participating", False),
        ("success", False),
        ("dropped", False),
        ("available", True),
    ):
        out[c] = out[c].astype("boolean").fillna(default).astype(bool)
    return out.reset_index(drop=True)


def diagnose_folder(folder: str | os.PathLike[str], *, verify: bool = True) -> list[Diagnostic]:
    """The diagnostics of a run folder (its trace, filtered to :data:`DIAGNOSED_EVENTS`, and
    its manifest's resolved scenario and summary); the same findings as :func:`diagnose` on
    the folder's events, read leanly: the per-device rows go straight from Arrow into the
    device-slot table (:func:`device_slot_outcomes_arrow`), the upload events are read only
    for a shared uplink (the one check that reads them), and only the other rows become a
    DataFrame.

    Args:
        folder: the run folder.
        verify: check every part against its SHA-256 (False: the caller just wrote them).

    Raises:
        FileNotFoundError: no ``manifest.json`` or no completed frame in ``folder``.
    """
    path = Path(folder)
    manifest = load_manifest(path)
    scenario = manifest.get("scenario_resolved") or {}
    shared = ((scenario.get("uplink") or {}).get("mode", "dedicated")) != "dedicated"
    other = [
        e
        for e in DIAGNOSED_EVENTS
        if e not in _PER_DEVICE_EVENTS and (shared or e not in _UPLOAD_EVENTS)
    ]
    # one read of the columns the checks read, unfiltered (a filter on ``event`` decodes every
    # column of every row group anyway, events being interleaved); rows picked by event code
    table, missing = load_events_table(path, columns=list(DIAGNOSED_COLUMNS), verify=verify)
    if table.num_rows == 0:
        return []
    codes, names = event_codes(table["event"])

    def picked(events: list[str] | tuple[str, ...]) -> np.ndarray:
        return np.isin(codes, [i for i, n in enumerate(names) if n in events])

    keep = picked(other)
    if not keep.any() and not picked(_PER_DEVICE_EVENTS).any():
        return []
    outcomes = device_slot_outcomes_arrow(table, (codes, names))
    # the decision rows of the slots without a participant (their cause), and under ns-3 the
    # device-slot rows (an upload's ns-3 columns at that trace level)
    idle, _ = idle_slots(outcomes)
    if idle.size:
        slots = table["slot"].to_numpy(zero_copy_only=False)
        keep |= picked(("decision", "device_slot")) & np.isin(slots, idle)
    if (scenario.get("uplink") or {}).get("mode") == "ns3_lte":
        keep |= picked(("device_slot",))
    rest = events_frame(table.filter(pa.array(keep)))
    for c in missing:
        rest[c] = pd.Series(pd.NA, index=rest.index, dtype=pd.ArrowDtype(pa.float64()))
    return _checks(_Run(rest, outcomes, scenario, manifest.get("summary") or {}))


#: The events whose rows :func:`device_slot_outcomes` reads (one per device and slot or more).
_PER_DEVICE_EVENTS = ("decision", "energy", "device_slot")
#: The decision rows are looked up in a dense (slot, device) grid when it has at most this many
#: cells per row read (else by sorting their keys).
_DENSE_FACTOR = 4
#: The events only the shared-uplink check reads.
_UPLOAD_EVENTS = ("compute_end", "upload_start", "upload_end")


def device_slot_outcomes_arrow(
    table: pa.Table, codes: tuple[np.ndarray, list[str]] | None = None
) -> pd.DataFrame:
    """:func:`device_slot_outcomes` of an events table (Arrow) holding at least the
    ``device_slot`` rows, or the ``energy`` and ``decision`` rows: the same DataFrame (the
    rows of the ``device_slot`` or ``energy`` events in trace order), built with numpy.
    ``codes``: the table's :func:`~wflsim.analysis.io.event_codes`, if already computed."""
    code, names = codes if codes is not None else event_codes(table["event"])

    def rows(which: str, cols: list[str]) -> pa.Table:
        mask = code == (names.index(which) if which in names else -1)
        return table.select([c for c in cols if c in table.column_names]).filter(pa.array(mask))

    def ints(t: pa.Table, c: str) -> np.ndarray:
        return t[c].to_numpy().astype(np.int64, copy=False)

    def flags(t: pa.Table, c: str, default: bool) -> np.ndarray:
        if c not in t.column_names:
            return np.full(t.num_rows, default)
        return pc.fill_null(t[c], default).to_numpy().astype(bool, copy=False)

    name = (
        "device_slot"
        if "device_slot" in names and bool((code == names.index("device_slot")).any())
        else "energy"
    )
    main = rows(name, ["slot", "device", "participating", "success", "dropped", "available"])
    slot, device = ints(main, "slot"), ints(main, "device")
    out = {
        "slot": slot,
        "device": device,
        "participating": flags(main, "participating", False),
        "success": flags(main, "success", False),
        "dropped": flags(main, "dropped", False),
    }
    if name == "device_slot":
        available = flags(main, "available", True)
    else:  # the slot's first decision row of the device; True where there is none
        dec = rows("decision", ["slot", "device", "available"])
        d_slot, d_dev = ints(dec, "slot"), ints(dec, "device")
        available = np.ones(slot.shape, dtype=bool)
        if d_slot.size and slot.size:
            lo = int(min(slot.min(), d_slot.min()))
            span = int(max(device.max(), d_dev.max())) + 1
            size = (int(max(slot.max(), d_slot.max())) - lo + 1) * span
            d_key = (d_slot - lo) * span + d_dev
            key = (slot - lo) * span + device
            d_avail = flags(dec, "available", True)
            if size <= _DENSE_FACTOR * (slot.size + d_slot.size):  # a (slot, device) grid
                first = np.full(size, d_slot.size, dtype=np.int64)
                np.minimum.at(first, d_key, np.arange(d_slot.size))
                at = first[key]
                hit = at < d_slot.size
                available[hit] = d_avail[at[hit]]
            else:
                keys, first_at = np.unique(d_key, return_index=True)
                pos = np.minimum(np.searchsorted(keys, key), keys.size - 1)
                hit = keys[pos] == key
                available[hit] = d_avail[first_at[pos[hit]]]
    out["available"] = np.asarray(available, dtype=bool)
    return pd.DataFrame(out)


def diagnose(
    events: pd.DataFrame,
    scenario: Mapping[str, Any],
    summary: Mapping[str, Any] | None = None,
) -> list[Diagnostic]:
    """The diagnostics of one finished run (:data:`CHECKS`, in order).

    Args:
        events: the run's trace (``docs/trace.md``; either trace level).
        scenario: the resolved scenario (the manifest's ``scenario_resolved``, or
            ``Scenario.model_dump(mode="json")``).
        summary: the run's summary (``available_fraction`` is read; None: every device online).
    """
    if len(events) == 0:
        return []
    return _checks(_Run(events, device_slot_outcomes(events), scenario, summary or {}))


def _checks(run: _Run) -> list[Diagnostic]:
    """Every check of :data:`CHECKS` on ``run``, their findings in order."""
    out: list[Diagnostic] = []
    for check in CHECKS:
        out.extend(check(run))
    return out
