"""The learning checks of the diagnostics (:mod:`wflsim.analysis.diagnostics`): the model never
updated, training diverged, the accuracy not improved or fallen."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wflsim.sim.errors import Diagnostic

from ..tidy import plain_dtypes
from .run import _online_fraction, _Run, _uploads
from .thresholds import DIVERGED_LOSS_FACTOR, FELL_MIN, FELL_SHARE


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
