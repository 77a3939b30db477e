"""Privacy in the analysis: what the runs with ``[privacy]`` spent and what their updates got.

From the privacy rows of the trace (schema 12: ``privacy``, ``dp_clip`` and
``dp_budget_spent``; :class:`wflsim.analysis.tidy.PrivacyRows`, read by
:func:`wflsim.analysis.tidy.load` with the other tables): each device's epsilon after each update
it took part in (:func:`device_epsilons`, :func:`epsilon_over_time`), the share of the updates of
each server step that were clipped and the noise they got (:func:`clipped_fraction`), and per run
the final epsilon's maximum and mean over the devices, the clipped share and the mean noise
(:func:`privacy_summary`, the columns :data:`SUMMARY_COLUMNS` of the report's summary table and
of the ``[[claims]]`` metrics). A run without ``[privacy]`` has NaN there, never an error;
a ``[privacy]`` run before its first applied update has epsilon 0 (no device has spent any).
Epsilons are at the run's ``privacy.delta``; norms and standard deviations in update units.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .tidy import ID_COLUMNS, NO_PRIVACY, PrivacyRows

#: The privacy measures of a run (:func:`privacy_summary`): ``epsilon_max`` and
#: ``epsilon_mean`` (the final epsilon, max and mean over all the run's devices, those that never
#: took part at 0), ``dp_clipped_fraction`` (the share of the applied updates that were clipped),
#: ``dp_noise_std`` (the mean standard deviation per entry of the noise on the applied updates,
#: update units) and ``dp_stopped_devices`` (devices stopped for their spent budget).
SUMMARY_COLUMNS: list[str] = [
    "epsilon_max",
    "epsilon_mean",
    "dp_clipped_fraction",
    "dp_noise_std",
    "dp_stopped_devices",
]


def private_runs(runs: pd.DataFrame) -> list[str]:
    """The runs (labels, :func:`wflsim.analysis.tidy.runs_table`'s ``run``) with ``[privacy]``."""
    if "dp_mechanism" not in runs.columns:
        return []
    return [str(r) for r in runs.loc[runs["dp_mechanism"] != NO_PRIVACY, "run"]]


def _of_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with a ``run`` column (an empty table of one run's rows has none)."""
    return rows if "run" in rows.columns else rows.assign(run=pd.Series(dtype=object))


def _num_devices(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.Series:
    """Per run: its number of devices (``network.num_devices``; where unknown, the devices of
    its privacy rows)."""
    n = pd.to_numeric(runs.set_index("run")["num_devices"], errors="coerce")
    seen = steps.groupby("run")["device"].nunique() if len(steps) else pd.Series(dtype=float)
    return n.fillna(seen.reindex(n.index)).fillna(0).astype(int)


def device_epsilons(steps: pd.DataFrame) -> pd.DataFrame:
    """Per run and device that took part: its final ``epsilon`` (the largest of its ``privacy``
    rows: composition never lowers it), ``updates`` (the applied updates it was accounted for)
    and ``min_multiplier`` (the smallest multiplier it was accounted at)."""
    cols = [c for c in ID_COLUMNS if c in steps.columns]
    if steps.empty:
        return pd.DataFrame(columns=[*cols, "device", "epsilon", "updates", "min_multiplier"])
    g = steps.groupby(["run", "device"], sort=True)
    out = pd.DataFrame(
        {
            "epsilon": g["dp_epsilon"].max(),
            "updates": g.size(),
            "min_multiplier": g["dp_noise_multiplier"].min(),
        }
    ).reset_index()
    ids = steps.drop_duplicates("run")[cols]
    return ids.merge(out, on="run")


def epsilon_over_time(steps: pd.DataFrame, slots: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per run with ``[privacy]`` and slot: ``epsilon_max`` and ``epsilon_mean``, the largest
    and the mean over all the run's devices of each device's epsilon after the slot (0 for a
    device not yet accounted), with the slot's ``frame`` and ``end_s`` (s, simulated time).

    ``steps``: the ``privacy`` rows (:attr:`PrivacyRows.steps`); ``slots``: the slot table
    (:func:`wflsim.analysis.tidy.slots`); ``runs``: the runs table."""
    mine = private_runs(runs)
    steps = _of_runs(steps)
    n_of = _num_devices(runs, steps)
    parts = []
    for run in mine:
        sl = slots[slots["run"] == run].sort_values("slot")
        if sl.empty:
            continue
        st = steps[steps["run"] == run]
        n = max(int(n_of.get(run, 0)), int(st["device"].max()) + 1 if len(st) else 0, 1)
        pos = np.searchsorted(sl["slot"].to_numpy(), st["slot"].to_numpy())
        eps = np.zeros((len(sl), n))
        ok = pos < len(sl)
        np.maximum.at(
            eps, (pos[ok], st["device"].to_numpy(int)[ok]), st["dp_epsilon"].to_numpy(float)[ok]
        )
        eps = np.maximum.accumulate(eps, axis=0)  # a device keeps its epsilon between updates
        ids = [c for c in ID_COLUMNS if c in sl.columns]
        part = sl[[*ids, "frame", "slot", "end_s"]].reset_index(drop=True)
        part["epsilon_max"] = eps.max(axis=1)
        part["epsilon_mean"] = eps.mean(axis=1)
        parts.append(part)
    cols = [*ID_COLUMNS, "frame", "slot", "end_s", "epsilon_max", "epsilon_mean"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def clipped_fraction(clips: pd.DataFrame) -> pd.DataFrame:
    """Per run and server step (its ``frame``, ``slot`` and ``time_s``, s) that applied updates:
    ``updates`` (the ``dp_clip`` rows), ``clipped`` (of them, clipped), ``clipped_fraction``,
    ``clip_norm`` (the mean clip C used, update units) and ``noise_std`` (the mean standard
    deviation per entry of the noise on them, update units)."""
    cols = [c for c in ID_COLUMNS if c in clips.columns]
    keys = ["run", "frame", "slot", "time_s"]
    out_cols = [*cols, "frame", "slot", "time_s", "updates", "clipped", "clipped_fraction"]
    if clips.empty:
        return pd.DataFrame(columns=[*out_cols, "clip_norm", "noise_std"])
    c = clips.assign(_clipped=clips["dp_clipped"].astype(float))
    g = c.groupby(keys, sort=True)
    out = pd.DataFrame(
        {
            "updates": g.size(),
            "clipped": g["_clipped"].sum().astype(int),
            "clip_norm": g["dp_clip_norm"].mean(),
            "noise_std": g["dp_noise_std"].mean(),
        }
    ).reset_index()
    out["clipped_fraction"] = out["clipped"] / out["updates"]
    ids = clips.drop_duplicates("run")[cols]
    return ids.merge(out, on="run")[[*out_cols, "clip_norm", "noise_std"]]


def privacy_summary(privacy: PrivacyRows, runs: pd.DataFrame) -> pd.DataFrame:
    """Per run of ``runs`` (the runs table): ``run`` and :data:`SUMMARY_COLUMNS`; NaN for a run
    without ``[privacy]`` (and ``dp_clipped_fraction`` / ``dp_noise_std`` for one without
    ``dp_clip`` rows: a network-only run has no updates to clip)."""
    out = pd.DataFrame({"run": runs["run"].astype(str)})
    for c in SUMMARY_COLUMNS:
        out[c] = np.nan
    mine = private_runs(runs)
    if not mine:
        return out
    steps, clips, stops = (_of_runs(t) for t in (privacy.steps, privacy.clips, privacy.stops))
    n_of = _num_devices(runs, steps)
    eps = device_epsilons(steps).groupby("run")["epsilon"]
    sums, peaks = eps.sum(), eps.max()
    rate = clips.assign(_c=clips["dp_clipped"].astype(float)).groupby("run")["_c"].mean()
    noise = clips.groupby("run")["dp_noise_std"].mean()
    stopped = stops.groupby("run")["device"].nunique()
    at = out["run"].isin(mine)
    runs_at = out.loc[at, "run"]
    n = runs_at.map(n_of).astype(float).where(lambda v: v > 0)
    out.loc[at, "epsilon_max"] = runs_at.map(peaks).fillna(0.0)
    out.loc[at, "epsilon_mean"] = runs_at.map(sums).fillna(0.0) / n
    out.loc[at, "dp_clipped_fraction"] = runs_at.map(rate)
    out.loc[at, "dp_noise_std"] = runs_at.map(noise)
    out.loc[at, "dp_stopped_devices"] = runs_at.map(stopped).fillna(0.0)
    return out


__all__ = [
    "SUMMARY_COLUMNS",
    "clipped_fraction",
    "device_epsilons",
    "epsilon_over_time",
    "privacy_summary",
    "private_runs",
]
