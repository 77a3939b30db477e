"""The tidy tables of one run built from its events (a DataFrame of
:func:`wflsim.analysis.io.load_events`, either trace level): one row per device and slot
(:func:`device_slots_from_events`), per device and frame, per slot, per evaluation and per
upload of a run with stale updates; and :func:`plain_dtypes`, which turns Arrow-backed columns
into NumPy ones. :mod:`wflsim.analysis.tidy` builds them for many runs at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

# --------------------------------------------------------------------------- dtypes


def plain_dtypes(df: pd.DataFrame) -> pd.DataFrame:
    """Arrow-backed columns as NumPy ones: floats (nulls as NaN), ints and bools (nullable
    ``Int64`` / ``boolean`` only where nulls remain), strings as objects."""
    out = {}
    for c in df.columns:
        s = df[c]
        if isinstance(s.dtype, pd.ArrowDtype):
            kind = s.dtype.numpy_dtype.kind if s.dtype.numpy_dtype is not None else "O"
            has_na = bool(s.isna().any())
            if kind == "f":
                s = s.astype("float64")
            elif kind in "iu":
                s = s.astype("Int64" if has_na else "int64")
            elif kind == "b":
                s = s.astype("boolean" if has_na else "bool")
            else:
                s = s.astype(object)
        out[c] = s
    return pd.DataFrame(out, index=df.index)


# --------------------------------------------------------------------------- per-run builders

_DECISION_COLS = [
    "slot",
    "device",
    "time_s",
    "distance_m",
    "large_scale_gain",
    "channel_gain",
    "seen_channel_gain",
    "gamma",
    "payload_bits",
    "min_tx_power_w",
    "max_tx_power_w",
    "compute_s",
    "upload_s",
    "available",
]
_ENERGY_COLS = [
    "frame",
    "slot",
    "device",
    "time_s",
    "participating",
    "success",
    "tx_power_w",
    "upload_s",
    "energy_compute_j",
    "energy_upload_j",
    "energy_j",
    "wasted_energy_j",
    "queue_j",
    "conv_error",
    "cost",
    "dropped",
]


def _rows(ev: pd.DataFrame, name: str, cols: list[str]) -> pd.DataFrame:
    sub = ev[[c for c in cols if c in ev.columns]][(ev["event"] == name).to_numpy()]
    return plain_dtypes(sub.reset_index(drop=True))


def _device_slot_rows(ev: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The outcome (``energy``) and decision rows of one run, renamed for the device-slot table;
    from a ``[trace] level = "device_slots"`` trace, split out of its ``device_slot`` rows (the
    slot's end from its ``aggregate`` row)."""
    if not (ev["event"] == "device_slot").any():
        en = _rows(ev, "energy", _ENERGY_COLS).rename(columns={"time_s": "end_s"})
        de = _rows(ev, "decision", _DECISION_COLS).rename(
            columns={"time_s": "start_s", "upload_s": "upload_planned_s"}
        )
        # under stale updates a device that starts again within a slot has a decision row
        # there too: the slot's is the first
        return en, de.drop_duplicates(["slot", "device"], keep="first")
    both = _rows(ev, "device_slot", sorted({*_ENERGY_COLS, *_DECISION_COLS, "upload_planned_s"}))
    ends = _rows(ev, "aggregate", ["slot", "time_s"]).rename(columns={"time_s": "end_s"})
    en = both[[c for c in _ENERGY_COLS if c in both and c != "time_s"]].merge(
        ends, on="slot", how="left"
    )
    de_cols = [c for c in _DECISION_COLS if c != "upload_s"] + ["upload_planned_s"]
    de = both[[c for c in de_cols if c in both]].rename(columns={"time_s": "start_s"})
    return en, de


def device_slots_from_events(ev: pd.DataFrame) -> pd.DataFrame:
    """The device-slot table (see :func:`~wflsim.analysis.tidy.device_slots`) of one run's events
    (either trace level)."""
    en, de = _device_slot_rows(ev)
    cfg = _rows(ev, "device_config", ["device", "energy_budget_j"])
    df = en.merge(de, on=["slot", "device"], how="left")
    df = df.merge(cfg, on="device", how="left")
    part = df["participating"].astype(bool)
    succ = df["success"].astype(bool)
    df["participating"], df["success"] = part, succ
    # without [availability] (or in traces before it) every device is online, none dropped
    df["available"] = df["available"].fillna(True).astype(bool) if "available" in df else True
    df["dropped"] = df["dropped"].fillna(False).astype(bool) if "dropped" in df else False
    df["outage"] = part & ~succ & ~df["dropped"]
    df["dropout"] = ~part
    # traces written before imperfect CSI lack these (read back as all null): the scheme saw h,
    # and the wasted energy is the energy of a failed participation
    if "seen_channel_gain" not in df or df["seen_channel_gain"].isna().all():
        df["seen_channel_gain"] = df["channel_gain"]
    if "wasted_energy_j" not in df or df["wasted_energy_j"].isna().all():
        df["wasted_energy_j"] = df["energy_j"].where(df["outage"], 0.0)
    df["latency_s"] = (df["compute_s"] + df["upload_s"]).where(part)
    order = [
        "frame",
        "slot",
        "device",
        "start_s",
        "end_s",
        "distance_m",
        "large_scale_gain",
        "channel_gain",
        "seen_channel_gain",
        "gamma",
        "payload_bits",
        "min_tx_power_w",
        "max_tx_power_w",
        "tx_power_w",
        "available",
        "participating",
        "success",
        "outage",
        "dropped",
        "dropout",
        "compute_s",
        "upload_s",
        "upload_planned_s",
        "latency_s",
        "energy_compute_j",
        "energy_upload_j",
        "energy_j",
        "wasted_energy_j",
        "energy_budget_j",
        "queue_j",
        "conv_error",
        "cost",
    ]
    return df[order].sort_values(["slot", "device"], kind="stable").reset_index(drop=True)


def frames_from_events(ev: pd.DataFrame, ds: pd.DataFrame | None = None) -> pd.DataFrame:
    """The device-frame table (see :func:`~wflsim.analysis.tidy.frames`) of one run's events
    (``ds``: its device-slot table, built from ``ev`` when not given)."""
    pos = _rows(
        ev,
        "position",
        ["frame", "device", "time_s", "x_m", "y_m", "distance_m", "large_scale_gain"],
    ).rename(columns={"time_s": "start_s"})
    fr = _rows(
        ev,
        "freeze",
        ["frame", "device", "gamma", "max_tx_power_w", "queue_j", "expected_cost", "iterations"],
    )
    df = pos.merge(fr, on=["frame", "device"], how="outer")
    ds = device_slots_from_events(ev) if ds is None else ds
    if len(ds):
        g = ds.sort_values("slot").groupby(["frame", "device"])
        per = pd.DataFrame(
            {
                "slots": g["slot"].count(),
                "energy_j": g["energy_j"].sum(),
                "participation": g["participating"].mean(),
                "successes": g["success"].sum(),
                "queue_end_j": g["queue_j"].last(),
            }
        ).reset_index()
        df = df.merge(per, on=["frame", "device"], how="left")
    else:
        for c in ("slots", "energy_j", "participation", "successes", "queue_end_j"):
            df[c] = np.nan
    return df.sort_values(["frame", "device"], kind="stable").reset_index(drop=True)


def slots_from_events(ev: pd.DataFrame, ds: pd.DataFrame | None = None) -> pd.DataFrame:
    """The slot table (see :func:`~wflsim.analysis.tidy.slots`) of one run's events."""
    st = _rows(ev, "slot_start", ["slot", "time_s"]).rename(columns={"time_s": "start_s"})
    ag = _rows(
        ev,
        "aggregate",
        [
            "frame",
            "slot",
            "time_s",
            "n_participants",
            "n_success",
            "slot_duration_s",
            "stable_fraction",
        ],
    ).rename(columns={"time_s": "end_s"})
    ds = device_slots_from_events(ev) if ds is None else ds
    if not len(ag) and len(ds):
        ag = _stale_slot_rows(ev, ds)
    df = ag.merge(st, on="slot", how="left")
    g = ds.groupby("slot")
    per = pd.DataFrame(
        {
            "n_devices": g["device"].count(),
            "n_outage": g["outage"].sum(),
            "energy_j": g["energy_j"].sum(),
            "mean_energy_j": g["energy_j"].mean(),
            "mean_queue_j": g["queue_j"].mean(),
            "max_queue_j": g["queue_j"].max(),
            "mean_gamma": g["gamma"].mean(),
            "mean_conv_error": g["conv_error"].mean(),
            "mean_cost": g["cost"].mean(),
        }
    ).reset_index()
    df = df.merge(per, on="slot", how="left").sort_values("slot").reset_index(drop=True)
    n = df["n_devices"].astype(float)
    df["participation"] = df["n_participants"] / n
    df["outage_rate"] = (
        df["n_outage"] / df["n_participants"].where(df["n_participants"] > 0)
    ).fillna(0.0)
    df["cum_energy_j"] = df["energy_j"].cumsum()
    df["cum_latency_s"] = df["slot_duration_s"].cumsum()
    order = [
        "frame",
        "slot",
        "start_s",
        "end_s",
        "slot_duration_s",
        "n_devices",
        "n_participants",
        "n_success",
        "n_outage",
        "participation",
        "outage_rate",
        "stable_fraction",
        "energy_j",
        "mean_energy_j",
        "mean_queue_j",
        "max_queue_j",
        "mean_gamma",
        "mean_conv_error",
        "mean_cost",
        "cum_energy_j",
        "cum_latency_s",
    ]
    return df[order]


def _stale_slot_rows(ev: pd.DataFrame, ds: pd.DataFrame) -> pd.DataFrame:
    """The per-slot server columns of a trace with stale updates (``[server] mode`` semi_sync or
    async: no ``aggregate`` rows): the slot's end from its ``energy`` rows, ``n_participants``
    the devices whose cycle ended in it, ``n_success`` the updates the server applied in it
    (``flush`` rows), the duration tau_0; no stable fraction."""
    g = ds.groupby("slot")
    ag = pd.DataFrame(
        {
            "frame": g["frame"].first(),
            "end_s": g["end_s"].max(),
            "n_participants": g["participating"].sum().astype(np.int64),
        }
    ).reset_index()
    fl = _rows(ev, "flush", ["slot", "n_success"])
    applied = fl.groupby("slot")["n_success"].sum() if len(fl) else pd.Series(dtype=np.int64)
    ag["n_success"] = ag["slot"].map(applied).fillna(0).astype(np.int64)
    st = _rows(ev, "slot_start", ["slot", "time_s"]).set_index("slot")["time_s"]
    ag["slot_duration_s"] = ag["end_s"] - ag["slot"].map(st)
    ag["stable_fraction"] = np.nan
    return ag


def evaluations_from_events(ev: pd.DataFrame, sl: pd.DataFrame | None = None) -> pd.DataFrame:
    """The evaluation table (see :func:`~wflsim.analysis.tidy.evaluations`) of one run's events."""
    e = _rows(ev, "eval", ["frame", "slot", "time_s", "loss", "accuracy"])
    sl = slots_from_events(ev) if sl is None else sl
    cum = sl.set_index("slot")[["cum_energy_j", "cum_latency_s"]]
    e = e.merge(cum, left_on="slot", right_index=True, how="left")
    before = e["slot"] < 0
    e.loc[before, ["cum_energy_j", "cum_latency_s"]] = 0.0
    e.insert(2, "round", e["slot"] + 1)
    return e.sort_values(["slot", "time_s"], kind="stable").reset_index(drop=True)


_UPDATE_COLS = [
    "frame",
    "slot",
    "device",
    "time_s",
    "model_version",
    "staleness",
    "staleness_weight",
    "success",
    "tx_power_w",
    "upload_s",
    "compute_s",
]


def updates_from_events(ev: pd.DataFrame) -> pd.DataFrame:
    """The update table (see :func:`~wflsim.analysis.tidy.updates`) of one run's events."""
    ends = _rows(ev, "upload_end", _UPDATE_COLS)
    ends["outcome"] = np.where(ends["success"].fillna(False).astype(bool), "applied", "stale")
    drops = _rows(ev, "dropped", _UPDATE_COLS)
    drops["outcome"] = "dropped"
    df = pd.concat([p for p in (ends, drops) if len(p)] or [ends], ignore_index=True)
    if "model_version" not in df or df["model_version"].isna().all():
        return df.iloc[0:0]  # a synchronous trace: no per-update versions
    df = df.rename(columns={"time_s": "end_s"})
    keep = ["frame", "slot", "device", "end_s", "outcome", "model_version", "staleness"]
    keep += ["staleness_weight", "tx_power_w", "upload_s"]
    return df[keep].sort_values(["end_s", "device"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- privacy rows

#: The trace columns of the ``privacy`` rows (one per device per applied update of a
#: ``[privacy]`` run: the multiplier accounted and the device's epsilon after it).
DP_STEP_COLS = ["frame", "slot", "time_s", "device", "dp_noise_multiplier", "dp_epsilon"]
#: The trace columns of the ``dp_clip`` rows (one per applied update, learner side).
DP_CLIP_COLS = [
    "frame",
    "slot",
    "time_s",
    "device",
    "dp_update_norm",
    "dp_clip_norm",
    "dp_clipped",
    "dp_noise_std",
]
#: The trace columns of the ``dp_budget_spent`` rows (a device stops: its budget is spent).
DP_STOP_COLS = ["frame", "slot", "time_s", "device"]
#: The privacy events and every column of theirs the tidy tables read.
DP_EVENTS = ["privacy", "dp_clip", "dp_budget_spent"]
DP_COLUMNS = sorted(set(DP_STEP_COLS + DP_CLIP_COLS + DP_STOP_COLS))


@dataclass
class PrivacyRows:
    """The privacy rows of one run or many (empty tables for runs without ``[privacy]`` and
    traces older than schema 12): ``steps`` (``privacy`` rows: ``dp_noise_multiplier``,
    ``dp_epsilon``), ``clips`` (``dp_clip`` rows: ``dp_update_norm``, ``dp_clip_norm`` in update
    units, ``dp_clipped``, ``dp_noise_std`` in update units) and ``stops``
    (``dp_budget_spent`` rows), each with ``frame``, ``slot``, ``time_s`` (s) and ``device``."""

    steps: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DP_STEP_COLS))
    clips: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DP_CLIP_COLS))
    stops: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DP_STOP_COLS))


def privacy_rows_from_events(ev: pd.DataFrame) -> PrivacyRows:
    """The privacy rows (:class:`PrivacyRows`) of one run's events, in trace order."""
    return PrivacyRows(
        steps=_rows(ev, "privacy", DP_STEP_COLS),
        clips=_rows(ev, "dp_clip", DP_CLIP_COLS),
        stops=_rows(ev, "dp_budget_spent", DP_STOP_COLS),
    )
