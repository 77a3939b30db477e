"""Tidy tables of one run or many: one row per event, device-slot, device-frame, slot or evaluation.

Every table has a ``run`` column (the run directory's name, or its path relative to the runs'
common folder when names repeat) and the run's identifying fields (:data:`ID_COLUMNS`), read from
the scenario stored in the trace (``wflsim.scenario_resolved``), so that many runs (a sweep)
concatenate into one table that groups by scheme, ``V``, seed, dataset, partition or energy
budget.

``runs`` arguments everywhere accept a run directory (holding ``events/``, or ``events.parquet``
for runs of wflsim before 0.3), a sweep directory (run directories anywhere below it), a glob
pattern (``"runs/sweep/*"``), an ``events.parquet`` path, or a list of any of these. A path
that exists is always that path, even when its name holds glob characters (``runs/exp[1]``);
only a name that does not exist is expanded as a pattern.

A sweep's points whose runs were identical share one run folder (``sweep.json``: ``same_as``):
every table presents such a run once per point that shares it (also when only its folder is
named), each time with that point's ``run`` name and configuration (its scheme parameters from
the grid), so that a figure over a swept value draws the point too. A point's grid value of a scheme parameter its scheme does not
have (``scheme.tol`` of ``ideal``) is part of its configuration too (``variant``). A point that
shares a run made at another ``V`` (a scheme whose ``V`` changes only its logged cost: ``ideal``,
``fixed_power``) gets the ``cost`` column of its own ``V``, recomputed as the engine computes it
(:func:`with_cost_at`), in every table, :func:`events` and :func:`duckdb_view`.

For traces too large for memory, :func:`duckdb_view` puts a DuckDB view over many runs' Parquet
files instead.

The package, by concern: :mod:`wflsim.analysis.tidy.runs` (finding and labelling runs, the
runs table), :mod:`wflsim.analysis.tidy.tables` (one run's tables from its events),
:mod:`wflsim.analysis.tidy.loaders` (the tables of many runs) and
:mod:`wflsim.analysis.tidy.sql` (the DuckDB view); every public name is importable from
``wflsim.analysis.tidy`` itself.
"""

from .loaders import Tidy, device_slots, evaluations, events, frames, load, slots, updates
from .runs import (
    ID_COLUMNS,
    MECHANISM_LABELS,
    NO_PRIVACY,
    SCHEME_LABELS,
    RunsArg,
    cells_label,
    describe_budget,
    find_runs,
    nominal_budget_j,
    partition_label,
    point_cost_v,
    point_scenario,
    privacy_label,
    run_fields,
    run_labels,
    run_status,
    run_wall_time_s,
    runs_table,
    server_label,
    strategy_label,
    uplink_label,
    with_cost_at,
)
from .sql import duckdb_literal, duckdb_view
from .tables import (
    DP_CLIP_COLS,
    DP_STEP_COLS,
    DP_STOP_COLS,
    PrivacyRows,
    device_slots_from_events,
    evaluations_from_events,
    frames_from_events,
    plain_dtypes,
    privacy_rows_from_events,
    slots_from_events,
    updates_from_events,
)

__all__ = [
    "DP_CLIP_COLS",
    "DP_STEP_COLS",
    "DP_STOP_COLS",
    "ID_COLUMNS",
    "MECHANISM_LABELS",
    "NO_PRIVACY",
    "PrivacyRows",
    "SCHEME_LABELS",
    "RunsArg",
    "Tidy",
    "describe_budget",
    "device_slots",
    "device_slots_from_events",
    "duckdb_literal",
    "duckdb_view",
    "evaluations",
    "evaluations_from_events",
    "events",
    "find_runs",
    "frames",
    "frames_from_events",
    "load",
    "nominal_budget_j",
    "partition_label",
    "plain_dtypes",
    "privacy_label",
    "privacy_rows_from_events",
    "point_cost_v",
    "point_scenario",
    "run_fields",
    "run_labels",
    "run_status",
    "run_wall_time_s",
    "runs_table",
    "server_label",
    "strategy_label",
    "uplink_label",
    "cells_label",
    "slots",
    "slots_from_events",
    "updates",
    "updates_from_events",
    "with_cost_at",
]
