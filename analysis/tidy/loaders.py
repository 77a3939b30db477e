"""The tidy tables of many runs: each run read once (:func:`load`, into a :class:`Tidy`),
its tables built (:mod:`wflsim.analysis.tidy.tables`) and concatenated with the run's
identifying columns in front; :func:`events` for the raw events, and one function per table
(:func:`device_slots`, :func:`frames`, :func:`slots`, :func:`evaluations`, :func:`updates`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from ..io import load_events
from .runs import ID_COLUMNS, NO_PRIVACY, RunsArg, _runs_info, runs_table, with_cost_at
from .tables import (
    _DECISION_COLS,
    _ENERGY_COLS,
    _UPDATE_COLS,
    DP_COLUMNS,
    DP_EVENTS,
    PrivacyRows,
    device_slots_from_events,
    evaluations_from_events,
    frames_from_events,
    plain_dtypes,
    privacy_rows_from_events,
    slots_from_events,
    updates_from_events,
)

# --------------------------------------------------------------------------- multi-run tables


@dataclass
class Tidy:
    """All tidy tables of a set of runs (see :func:`load`)."""

    runs: pd.DataFrame
    device_slots: pd.DataFrame
    frames: pd.DataFrame
    slots: pd.DataFrame
    evaluations: pd.DataFrame
    #: the privacy rows of the runs with ``[privacy]`` (:class:`PrivacyRows`; empty otherwise)
    privacy: PrivacyRows = field(default_factory=PrivacyRows)


_ALL_EVENTS = [
    "device_slot",
    "device_config",
    "position",
    "freeze",
    "slot_start",
    "decision",
    "aggregate",
    "flush",
    "energy",
    "eval",
]

# Every trace column the tidy tables read.
_ALL_COLUMNS = sorted(
    set(_DECISION_COLS + _ENERGY_COLS + ["upload_planned_s"])
    | {"x_m", "y_m", "expected_cost", "iterations", "energy_budget_j"}
    | {"n_participants", "n_success", "slot_duration_s", "stable_fraction", "loss", "accuracy"}
)


def _with_ids(df: pd.DataFrame, info: pd.Series) -> pd.DataFrame:
    ids = pd.DataFrame({c: [info[c]] * len(df) for c in ID_COLUMNS}, index=df.index)
    return pd.concat([ids, df], axis=1)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    parts = [p for p in parts if len(p.columns)]
    if not parts:
        return pd.DataFrame(columns=ID_COLUMNS)
    nonempty = [p for p in parts if len(p)] or parts[:1]
    return pd.concat(nonempty, ignore_index=True)


def _tables(
    run_dir: str, want: set[str], cost_v: float | None = None, private: bool = False
) -> dict[str, pd.DataFrame]:
    """The tidy tables ``want`` of one run folder (without the ID columns; ``cost_v``: the
    ``V`` at which its cost is recomputed, :func:`with_cost_at`), and its privacy rows (as
    ``dp_steps``, ``dp_clips``, ``dp_stops``; read only where ``private``, a run with
    ``[privacy]``: a trace without them would get their columns as nulls on every row)."""
    ev = load_events(run_dir, events=_ALL_EVENTS, columns=_ALL_COLUMNS)
    if cost_v is not None:
        ev = with_cost_at(ev, cost_v)
    ds = device_slots_from_events(ev)
    built: dict[str, pd.DataFrame] = {"device_slots": ds}
    if want & {"slots", "evaluations"}:
        built["slots"] = slots_from_events(ev, ds)
    if "frames" in want:
        built["frames"] = frames_from_events(ev, ds)
    if "evaluations" in want:
        built["evaluations"] = evaluations_from_events(ev, built["slots"])
    dp = (
        # the parts' hashes were checked by the read above: their row counts suffice here
        privacy_rows_from_events(
            load_events(run_dir, events=DP_EVENTS, columns=DP_COLUMNS, verify=False)
        )
        if private
        else PrivacyRows()
    )
    built |= {"dp_steps": dp.steps, "dp_clips": dp.clips, "dp_stops": dp.stops}
    return built


def load(runs: RunsArg, tables: Iterable[str] | None = None) -> Tidy:
    """Read each run once and build its tidy tables (``tables``: a subset of
    ``device_slots``, ``frames``, ``slots``, ``evaluations`` to build; the others stay empty)."""
    want = set(tables or ("device_slots", "frames", "slots", "evaluations"))
    info, found = _runs_info(runs)
    parts: dict[str, list[pd.DataFrame]] = {k: [] for k in [*want, *_DP_PARTS]}
    # a run shared by sweep points is read once per V its cost is presented at
    done: dict[tuple[str, float | None], dict[str, pd.DataFrame]] = {}
    for (_, row), r in zip(info.iterrows(), found, strict=True):
        key = (row["run_dir"], r.cost_v)
        if key not in done:
            private = row.get("dp_mechanism", NO_PRIVACY) != NO_PRIVACY
            done[key] = _tables(row["run_dir"], want, r.cost_v, private)
        built = done[key]
        for k in [*want, *_DP_PARTS]:
            parts[k].append(_with_ids(built[k], row))
    empty = pd.DataFrame(columns=ID_COLUMNS)
    return Tidy(
        runs=info,
        **{
            k: _concat(parts[k]) if k in want else empty
            for k in ("device_slots", "frames", "slots", "evaluations")
        },
        privacy=PrivacyRows(*(_concat(parts[k]) for k in _DP_PARTS)),
    )


#: The privacy rows :func:`load` reads with every run's tables (:class:`PrivacyRows`' order).
_DP_PARTS = ("dp_steps", "dp_clips", "dp_stops")


def events(
    runs: RunsArg, events: list[str] | None = None, columns: list[str] | None = None
) -> pd.DataFrame:
    """The events of the runs, one row per event, with :data:`ID_COLUMNS` in front.

    ``events`` and ``columns`` filter while reading (as in :func:`wflsim.analysis.io.load_events`).
    Columns are NumPy-typed (:func:`plain_dtypes`); ``event`` is a category.
    """
    info, found = _runs_info(runs)
    parts = []
    for (_, row), r in zip(info.iterrows(), found, strict=True):
        ev = _point_events(row["run_dir"], r.cost_v, events, columns)
        ev["event"] = ev["event"].astype(str)
        parts.append(_with_ids(ev, row))
    df = _concat(parts)
    if "event" in df:
        df["event"] = df["event"].astype("category")
    return df


#: The columns :func:`with_cost_at` reads of the rows with a cost.
_COST_INPUTS = ["frame", "device", "conv_error", "energy_j"]


def _point_events(
    run_dir: str, cost_v: float | None, events: list[str] | None, columns: list[str] | None
) -> pd.DataFrame:
    """One run's events (:func:`events`), with the cost recomputed at ``cost_v`` (not None)."""
    recost = cost_v is not None and (columns is None or "cost" in columns)
    if not recost:
        return plain_dtypes(load_events(run_dir, events=events, columns=columns))
    assert cost_v is not None
    read = None if columns is None else [*columns, *(c for c in _COST_INPUTS if c not in columns)]
    ev = load_events(run_dir, events=events, columns=read)
    freeze = load_events(run_dir, events=["freeze"], columns=["frame", "device", "queue_j"])
    ev = with_cost_at(ev, cost_v, freeze)
    if columns is not None:
        ev = ev.drop(columns=[c for c in _COST_INPUTS if c not in columns and c != "event"])
    return plain_dtypes(ev)


def device_slots(runs: RunsArg) -> pd.DataFrame:
    """One row per device per slot.

    Columns: :data:`ID_COLUMNS`, ``frame``, ``slot``, ``device``, ``start_s`` / ``end_s`` (s, the
    slot's start and end), ``distance_m``, ``large_scale_gain``, ``channel_gain`` (linear h),
    ``seen_channel_gain`` (the h the scheme decided on; = ``channel_gain`` under perfect CSI and
    in traces from before imperfect CSI), ``gamma`` (frozen fraction), ``payload_bits``, ``min_tx_power_w`` / ``max_tx_power_w`` (W,
    p_min and the frame's p_max), ``tx_power_w`` (W), ``available`` (online at the slot's start;
    true without ``[availability]``), ``participating``, ``success``, ``outage`` (participated,
    upload not aggregated, not dropped), ``dropped`` (participated, went offline during its work),
    ``dropout`` (did not participate), ``compute_s`` (s, time actually computed),
    ``upload_s`` (s, time actually transmitted), ``upload_planned_s`` (s, the full tau_com),
    ``latency_s`` (s, compute + upload, NaN when not participating), ``energy_compute_j``,
    ``energy_upload_j``, ``energy_j`` (J), ``wasted_energy_j`` (J, the energy of an outage;
    derived from ``energy_j`` for older traces), ``energy_budget_j`` (J, E_bar), ``queue_j`` (J, Q after
    the slot), ``conv_error`` (X) and ``cost`` (z).
    """
    return load(runs, ["device_slots"]).device_slots


def frames(runs: RunsArg) -> pd.DataFrame:
    """One row per device per frame.

    Columns: :data:`ID_COLUMNS`, ``frame``, ``device``, ``start_s`` (s), ``x_m``, ``y_m``,
    ``distance_m`` (m), ``large_scale_gain`` (H), ``gamma``, ``max_tx_power_w`` (W, p_max),
    ``queue_j`` (J, Q at the frame start), ``expected_cost`` (Z(gamma)), ``iterations`` (MM), and
    over the frame's slots: ``slots``, ``energy_j`` (J, sum), ``participation`` (fraction of
    slots), ``successes`` (count), ``queue_end_j`` (J, Q after the last slot).
    """
    return load(runs, ["frames"]).frames


def slots(runs: RunsArg) -> pd.DataFrame:
    """One row per slot.

    Columns: :data:`ID_COLUMNS`, ``frame``, ``slot``, ``start_s`` / ``end_s`` (s),
    ``slot_duration_s`` (s, the slot's latency), ``n_devices``, ``n_participants``, ``n_success``,
    ``n_outage``, ``participation`` (participants per device), ``outage_rate`` (outages per
    participant; 0 with no participant), ``stable_fraction`` (Fig. 1), ``energy_j`` (J, all
    devices), ``mean_energy_j`` / ``mean_queue_j`` / ``max_queue_j`` (J, over devices),
    ``mean_gamma``, ``mean_conv_error`` (X), ``mean_cost`` (z), ``cum_energy_j`` (J, all devices,
    slots 0..t) and ``cum_latency_s`` (s, slots 0..t).
    """
    return load(runs, ["slots"]).slots


def evaluations(runs: RunsArg) -> pd.DataFrame:
    """One row per evaluation of the global model.

    Columns: :data:`ID_COLUMNS`, ``frame``, ``slot`` (-1: before training), ``round`` (global
    updates so far), ``time_s`` (s), ``loss`` (nat), ``accuracy`` (fraction), ``cum_energy_j``
    (J, all devices' energy up to the slot) and ``cum_latency_s`` (s, total latency up to it).
    """
    return load(runs, ["evaluations"]).evaluations


def updates(runs: RunsArg) -> pd.DataFrame:
    """One row per upload cycle that ended, in runs with stale updates (``[server] mode``
    ``semi_sync`` or ``async``; none for synchronous runs).

    Columns: :data:`ID_COLUMNS`, ``frame``, ``slot`` (the slot it ended in), ``device``,
    ``end_s`` (s, its arrival or drop), ``outcome`` (``applied``: entered the server's buffer;
    ``stale``: discarded, older than ``max_staleness``; ``dropped``: the device went offline),
    ``model_version`` (the version it was computed on), ``staleness`` (server steps since; NaN
    for drops), ``staleness_weight`` (its weight in the aggregate), ``tx_power_w`` (W) and
    ``upload_s`` (s, time transmitted).
    """
    info = runs_table(runs)
    parts = []
    for _, row in info.iterrows():
        ev = load_events(
            row["run_dir"], events=["upload_end", "dropped"], columns=[*_UPDATE_COLS, "event"]
        )
        parts.append(_with_ids(updates_from_events(plain_dtypes(ev)), row))
    return _concat(parts)
