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

The package, by concern: :mod:`~wflsim.analysis.diagnostics.thresholds` (the thresholds),
:mod:`~wflsim.analysis.diagnostics.run` (the run the checks read: its events, device-slot table,
scenario and summary), :mod:`~wflsim.analysis.diagnostics.participation` (the participation and
radio checks), :mod:`~wflsim.analysis.diagnostics.learning` (the learning checks) and
:mod:`~wflsim.analysis.diagnostics.settings` (the planned concurrency, absent devices, the
server's step); every public name is importable from ``wflsim.analysis.diagnostics`` itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from wflsim.sim.errors import Diagnostic as Diagnostic
from wflsim.sim.errors import DiagnosticsError as DiagnosticsError

from ..io import event_codes, events_frame, load_events_table, load_manifest
from .learning import _diverged, _never_updated, _no_progress
from .participation import (
    _idle_slots,
    _interference_unplanned,
    _nobody_took_part,
    _uploads_lost,
    idle_slots,
    upload_snr_db,
)
from .run import (
    _PER_DEVICE_EVENTS,
    _UPLOAD_EVENTS,
    DIAGNOSED_COLUMNS,
    DIAGNOSED_EVENTS,
    _Run,
    device_slot_outcomes,
    device_slot_outcomes_arrow,
)
from .settings import _absent_devices, _concurrency, _server_step, upload_concurrency
from .thresholds import (
    COMPUTE_FILL_SHARE,
    CONCURRENCY_FACTOR,
    DIVERGED_LOSS_FACTOR,
    FELL_MIN,
    FELL_SHARE,
    IDLE_SHARE,
    INTERFERENCE_OUTAGE,
    LTE_MIN_SNR_DB,
    MAX_STEP_RATIO,
    MIN_SLOTS_FOR_ABSENCE,
    NAMED_DEVICES,
)

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


__all__ = [
    "CHECKS",
    "CODES",
    "COMPUTE_FILL_SHARE",
    "CONCURRENCY_FACTOR",
    "DIAGNOSED_COLUMNS",
    "DIAGNOSED_EVENTS",
    "DIVERGED_LOSS_FACTOR",
    "FELL_MIN",
    "FELL_SHARE",
    "IDLE_SHARE",
    "INTERFERENCE_OUTAGE",
    "LTE_MIN_SNR_DB",
    "MAX_STEP_RATIO",
    "MIN_SLOTS_FOR_ABSENCE",
    "NAMED_DEVICES",
    "Diagnostic",
    "DiagnosticsError",
    "device_slot_outcomes",
    "device_slot_outcomes_arrow",
    "diagnose",
    "diagnose_folder",
    "idle_slots",
    "upload_concurrency",
    "upload_snr_db",
]
