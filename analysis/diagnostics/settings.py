"""The checks of the diagnostics (:mod:`wflsim.analysis.diagnostics`) that hold a setting against
what the run saw: the planned concurrency of a shared uplink, devices that never took part, a
stale server's step."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wflsim.sim.errors import Diagnostic

from ..tidy import plain_dtypes
from .run import _online_fraction, _Run
from .thresholds import CONCURRENCY_FACTOR, MAX_STEP_RATIO, MIN_SLOTS_FOR_ABSENCE, NAMED_DEVICES


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
