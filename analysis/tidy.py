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
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from wflsim.sim.rundir import liveness, read_json

from .io import events_files, has_trace, load_events, read_metadata, trace_path

if TYPE_CHECKING:
    import duckdb

RunsArg = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]

#: Columns identifying a run, carried by every tidy table (constant within a run).
ID_COLUMNS: list[str] = [
    "run",
    "scheme",
    "V",
    "seed",
    "dataset",
    "partition",
    "energy_budget",
    "energy_budget_mean_j",
    "variant",
]

#: Display names of the schemes (the paper's names for its own scheme and baselines).
SCHEME_LABELS: dict[str, str] = {
    "two_timescale": "Proposed",
    "only_pf": "Only-PF",
    "only_pc": "Only-PC",
    "ideal": "Ideal FL",
    "fixed_power": "Fixed power",
    # the paper's state-of-the-art baselines (its labels; FedHQ-like: the weights are a stand-in)
    "topk_ef": "Top-K sparsification",
    "pruning": "Model pruning",
    "fedhq": "FedHQ-like",
    "fjord": "FjORD",
    "random_freezing": "Random freezing (ablation)",
}

# Flattened scenario fields never used to tell configurations apart (they do not change results,
# or are already ID columns).
_NOT_VARIANT = {
    "name",
    "description",
    "seed",
    "learning.data_dir",
    "learning.device",
    "run.checkpoint_every_frames",
    "scheme.name",
    "scheme.V",
    "learning.dataset",
    "learning.partition",
    "learning.dirichlet_alpha",
    "devices.energy_budget_j",
}
_DEFAULT_V = 100.0  # sim.schemes.CostParams.V


# --------------------------------------------------------------------------- finding runs


def _is_glob(s: str) -> bool:
    """Whether ``s`` is a glob pattern: it holds ``*``, ``?`` or ``[`` and names no existing path
    (a folder named ``exp[1]`` is that folder, never the pattern that matches ``exp1``)."""
    return any(c in s for c in "*?[") and not os.path.lexists(s)


def find_runs(runs: RunsArg) -> list[Path]:
    """The run directories named by ``runs`` (see the module docstring), sorted, without repeats.

    A path that exists is taken as it is, whatever characters it holds; only a name that does
    not exist and holds ``*``, ``?`` or ``[`` is expanded as a glob.

    Raises:
        FileNotFoundError: a named path does not exist.
    """
    items = [runs] if isinstance(runs, str | os.PathLike) else list(runs)
    found: list[Path] = []
    for item in items:
        s = os.fspath(item)
        if _is_glob(s):
            paths = [Path(p) for p in sorted(glob.glob(s, recursive=True))]
        else:
            paths = [Path(s)]
            if not paths[0].exists():
                raise FileNotFoundError(f"no such run or sweep directory: {s}")
        for p in paths:
            if p.is_file() and p.name == "events.parquet":
                found.append(p.parent)
            elif p.is_dir() and p.name == "events" and has_trace(p.parent):
                found.append(p.parent)
            elif has_trace(p):
                found.append(p)
            elif p.is_dir():
                below = {q.parent for q in p.rglob("events.parquet") if q.is_file()}
                below |= {q.parent for q in p.rglob("events") if q.is_dir()}
                found.extend(sorted(below))
    out = list(dict.fromkeys(p.resolve() for p in found))
    return sorted(out)


@dataclass(frozen=True)
class _Run:
    """A run as the tables present it: the folder holding its trace, the path it is presented
    as (its folder, or for a sweep point sharing another's run, the point's name in the sweep
    folder), its sweep point's scheme values (its configuration) and the folder it shares."""

    folder: Path
    path: Path
    scheme: tuple[tuple[str, Any], ...] = ()
    shares: Path | None = None
    #: the ``V`` at which its ``cost`` is recomputed (:func:`point_cost_v`; None: as logged)
    cost_v: float | None = None


def _runs(runs: RunsArg) -> list[_Run]:
    """The runs named by ``runs`` (:func:`find_runs`), each followed by the points of its sweep
    that share it (``sweep.json``'s ``same_as``; a point with a trace of its own is found
    itself)."""
    sweeps: dict[Path, dict[str, dict[str, Any]]] = {}
    out: list[_Run] = []
    for d in find_runs(runs):
        if d.parent not in sweeps:
            sweeps[d.parent] = _sweep_points(d.parent)
        points = sweeps[d.parent]
        out.append(_Run(d, d, _scheme_values(points.get(d.name))))
        for name, entry in points.items():
            if entry.get("same_as") == d.name and name != d.name and not has_trace(d.parent / name):
                values = _scheme_values(entry)
                out.append(_Run(d, d.parent / name, values, d, point_cost_v(entry, d)))
    return sorted(out, key=lambda r: r.path)


def point_cost_v(entry: dict[str, Any] | None, folder: str | os.PathLike[str]) -> float | None:
    """The ``V`` at which the sweep point ``entry`` (its ``sweep.json`` record) that shares the
    run in ``folder`` has its ``cost`` recomputed: its grid value of ``scheme.V`` where that
    differs from the run's own ``V`` and its scheme took it (a sweep shares runs at other values
    of ``V`` only for schemes whose ``V`` changes only the logged cost); None otherwise."""
    entry = entry or {}
    values = dict(_scheme_values(entry))
    unused = entry.get("unused_overrides")
    if "scheme.V" not in values or isinstance(values["scheme.V"], bool | str):
        return None
    if isinstance(unused, list) and any(str(o).startswith("scheme.V=") for o in unused):
        return None  # the scheme has no V: the value is only a label
    v = float(values["scheme.V"])
    own = _resolved_scenario(Path(folder)).get("scheme", {}).get("V", _DEFAULT_V)
    return None if v == float(own) else v


def with_cost_at(ev: pd.DataFrame, v: float, freeze: pd.DataFrame | None = None) -> pd.DataFrame:
    """A run's events with the ``cost`` column as a run at ``V = v`` logs it: ``z = v X + Q E``
    with ``X`` (``conv_error``) and ``E`` (``energy_j``, J) of each row that has a cost, and ``Q``
    (J) the device's queue at its frame's start (``queue_j`` of the ``freeze`` row of that frame
    and device), in float64, in the engine's order (``v X``, then ``Q E``, then their sum:
    :func:`wflsim.sim.slot.drift_plus_penalty`), so the column equals a real run's bit for bit.

    ``freeze``: the run's ``freeze`` rows (``frame``, ``device``, ``queue_j``) when ``ev`` lacks
    them. Only a scheme whose ``V`` changes nothing but its cost may be recomputed so.
    """
    if "cost" not in ev.columns:
        return ev
    rows = ev["cost"].notna().to_numpy()
    if not rows.any():
        return ev
    if freeze is None:
        freeze = ev[(ev["event"] == "freeze").to_numpy()]
    key = ["frame", "device"]
    queue = pd.Series(
        freeze["queue_j"].to_numpy(np.float64),
        index=pd.MultiIndex.from_frame(freeze[key].astype(np.int64)),
    )
    queue = queue[~queue.index.duplicated(keep="last")]
    sub = ev.loc[rows, [*key, "conv_error", "energy_j"]]
    q = queue.reindex(pd.MultiIndex.from_frame(sub[key].astype(np.int64))).to_numpy(np.float64)
    x = sub["conv_error"].to_numpy(np.float64)
    e = sub["energy_j"].to_numpy(np.float64)
    z = v * x + q * e
    cost = ev["cost"].copy()
    cost[rows] = z
    return ev.assign(cost=cost)


def _sweep_points(folder: Path) -> dict[str, dict[str, Any]]:
    """The point records of the sweep folder ``folder`` (``sweep.json``; none when it is not
    one); names that are not a plain folder name are left out."""
    manifest = read_json(folder / "sweep.json")
    points = manifest.get("points") if manifest else None
    if not isinstance(points, dict):
        return {}
    return {
        name: entry
        for name, entry in points.items()
        if isinstance(entry, dict) and name not in ("", ".", "..") and Path(name).name == name
    }


def _scheme_values(entry: dict[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    """A sweep point's grid values of scheme parameters (``sweep.json``'s ``values``, without
    ``scheme.name``), as ``(field, value)`` pairs."""
    values = (entry or {}).get("values")
    if not isinstance(values, dict):
        return ()
    return tuple(
        (k, v)
        for k, v in values.items()
        if isinstance(k, str)
        and k.startswith("scheme.")
        and k != "scheme.name"
        and isinstance(v, str | int | float | bool)
    )


def _with_point(scenario: dict[str, Any], values: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """A run's resolved scenario with its sweep point's scheme values set: the parameters as
    the point's own run records them, and those its scheme does not have."""
    if not values:
        return scenario
    out = json.loads(json.dumps(scenario))  # a copy
    for key, value in values:
        node = out
        *parents, last = key.split(".")
        for k in parents:
            if not isinstance(node.get(k, {}), dict):
                break
            node = node.setdefault(k, {})
        else:
            node[last] = value
    return out


def point_scenario(scenario: dict[str, Any], entry: dict[str, Any] | None) -> dict[str, Any]:
    """The resolved scenario of a run as the sweep point ``entry`` (its ``sweep.json`` record)
    presents it: with the point's grid values of scheme parameters set."""
    return _with_point(scenario, _scheme_values(entry))


def run_labels(dirs: Sequence[Path]) -> list[str]:
    """Directory names if unique, else paths relative to the runs' common folder."""
    names = [d.name for d in dirs]
    if len(set(names)) == len(names):
        return names
    common = Path(os.path.commonpath([str(d) for d in dirs]))
    return [d.relative_to(common).as_posix() for d in dirs]


# --------------------------------------------------------------------------- run identity


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and "dist" not in v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def describe_budget(spec: object) -> str:
    """A short text for a per-device field's value: ``0.35``, ``U[0.3, 0.45]``, a list summary."""
    if spec is None:
        return "-"
    if isinstance(spec, int | float):
        return f"{spec:g}"
    if isinstance(spec, list):
        vals = [float(v) for v in spec]
        return f"list[{min(vals):g}..{max(vals):g}]" if vals else "list[]"
    if isinstance(spec, dict):
        dist = spec.get("dist")
        if dist == "uniform":
            return f"U[{spec['low']:g}, {spec['high']:g}]"
        if dist == "loguniform":
            return f"logU[{spec['low']:g}, {spec['high']:g}]"
        if dist == "normal":
            return f"N({spec['mean']:g}, {spec['std']:g})"
        if dist == "choice":
            return "choice{" + ", ".join(f"{v:g}" for v in spec["values"]) + "}"
    return json.dumps(spec, sort_keys=True)


def nominal_budget_j(spec: object) -> float:
    """The expected value of a per-device field's specification (NaN when unknown).

    A scalar is itself; a list its mean; ``uniform`` the midpoint; ``loguniform`` its mean
    ``(hi - lo) / ln(hi / lo)``; ``normal`` its mean (clipping ignored); ``choice`` the weighted mean.
    """
    try:
        if isinstance(spec, int | float):
            return float(spec)
        if isinstance(spec, list):
            return float(np.mean([float(v) for v in spec])) if spec else math.nan
        if isinstance(spec, dict):
            dist = spec.get("dist")
            if dist == "uniform":
                return (float(spec["low"]) + float(spec["high"])) / 2.0
            if dist == "loguniform":
                lo, hi = float(spec["low"]), float(spec["high"])
                return lo if hi == lo else (hi - lo) / math.log(hi / lo)
            if dist == "normal":
                return float(spec["mean"])
            if dist == "choice":
                vals = np.asarray(spec["values"], dtype=float)
                probs = spec.get("probs")
                w = np.full(len(vals), 1.0 / len(vals)) if probs is None else np.asarray(probs)
                return float(np.sum(vals * w) / np.sum(w))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        pass
    return math.nan


def _resolved_scenario(run: Path) -> dict[str, Any]:
    meta = read_metadata(run)
    if "wflsim.scenario_resolved" in meta:
        return json.loads(meta["wflsim.scenario_resolved"])
    manifest = run / "manifest.json"
    if manifest.is_file():
        m = json.loads(manifest.read_text(encoding="utf-8"))
        if isinstance(m.get("scenario_resolved"), dict):
            return m["scenario_resolved"]
    return {}


def _manifest(run: str | os.PathLike) -> dict[str, Any] | None:
    """The run's ``manifest.json`` as a dict (``None``: missing or unreadable)."""
    manifest = Path(run) / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        m = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return m if isinstance(m, dict) else None


def run_status(run: str | os.PathLike) -> str:
    """The run's status: ``completed``, ``failed`` or ``interrupted`` from its ``manifest.json``;
    ``running`` while its writer is alive; ``crashed`` when the manifest says running but the
    writing process is dead (killed: ``wflsim run --resume`` continues it); ``unknown`` without
    a readable manifest."""
    m = _manifest(run)
    return "unknown" if m is None else liveness(m)


def run_wall_time_s(run: str | os.PathLike) -> float:
    """The wall-clock time (s) a completed run took to compute, summed over its executions
    (a resumed run's time before the interruption counts; the frame lost in flight does not),
    from its ``manifest.json``; NaN for a run not completed or a manifest without it."""
    m = _manifest(run)
    summary = m.get("summary") if m is not None and m.get("status") == "completed" else None
    value = summary.get("wall_time_s") if isinstance(summary, dict) else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return float("nan")
    return float(value) if math.isfinite(value) and value >= 0 else float("nan")


def partition_label(partition: str | None, alpha: float | None) -> str:
    """``"IID"`` or ``"non-IID (Dir 0.3)"`` for a scenario's partition."""
    if partition == "dirichlet":
        return f"non-IID (Dir {alpha:g})" if alpha is not None else "non-IID"
    return "IID" if partition == "iid" else str(partition)


def server_label(server: dict[str, Any]) -> str:
    """A run's ``[server]`` table in a few words: ``sync``, ``semi_sync``, ``FedAsync`` (async,
    buffer 1) or ``FedBuff-K``, with the server learning rate, staleness function and limit where
    they are not the defaults."""
    mode = server.get("mode", "sync")
    if mode == "async":
        k = int(server.get("buffer_size", 1))
        label = "FedAsync" if k == 1 else f"FedBuff-{k}"
    else:
        label = str(mode)
    extra = []
    if float(server.get("server_lr", 1.0)) != 1.0:
        extra.append(f"eta_g {float(server['server_lr']):.3g}")
    st = server.get("staleness") or {}
    if st.get("function", "constant") != "constant":
        params = f"a={st.get('a', 0.5):g}" + (
            f", b={st.get('b')}" if st["function"] == "hinge" else ""
        )
        extra.append(f"{st['function']} {params}")
    if server.get("max_staleness") is not None:
        extra.append(f"max staleness {server['max_staleness']}")
    return label + (f" ({'; '.join(extra)})" if extra else "")


def runs_table(runs: RunsArg) -> pd.DataFrame:
    """One row per run: :data:`ID_COLUMNS` plus ``run_dir``, ``events_path`` (its ``events/``
    folder, or ``events.parquet``), ``name``, ``status``
    (from ``manifest.json``), ``wall_time_s`` (:func:`run_wall_time_s`), ``learning`` (False: network-only), ``num_devices``, ``frames``,
    ``slots_per_frame``, ``deadline_s``, ``model``, ``lam``, ``server_mode`` (``[server] mode``),
    ``server`` (:func:`server_label`), ``scheme_label`` and ``same_as`` (for a sweep point
    sharing another point's run: that run's ``run``, whose folder ``run_dir`` is; else ``""``).

    ``variant`` names the scenario fields (beyond the other ID columns and the seed) that differ
    between the runs given, e.g. ``"learning.lr=0.1"``; it is ``""`` when none do, so runs with
    the same ``(scheme, V, dataset, partition, energy_budget, variant)`` are seeds of one
    configuration.
    """
    return _runs_info(runs)[0]


def _runs_info(runs: RunsArg) -> tuple[pd.DataFrame, list[_Run]]:
    """:func:`runs_table` and the runs of its rows, in its order."""
    found = _runs(runs)
    labels = run_labels([r.path for r in found])
    label_of = {r.path: label for r, label in zip(found, labels, strict=True)}
    rows, flats = [], []
    for r, label in zip(found, labels, strict=True):
        d = r.folder
        sc = _with_point(_resolved_scenario(d), r.scheme)
        flat = {k: v for k, v in _flatten(sc).items() if k not in _NOT_VARIANT}
        # the server's fields as one value, named as the literature names the mode
        flat = {k: v for k, v in flat.items() if not k.startswith("server.")}
        flat["server"] = server_label(sc.get("server", {}))
        flats.append(flat)
        learning = sc.get("learning", {})
        scheme = sc.get("scheme", {})
        devices = sc.get("devices", {})
        run_cfg = sc.get("run", {})
        name = scheme.get("name", "unknown")
        budget = devices.get("energy_budget_j")
        rows.append(
            {
                "run": label,
                "scheme": name,
                "V": float(scheme.get("V", _DEFAULT_V)),
                "seed": int(sc.get("seed", -1)),
                "dataset": learning.get("dataset", "unknown"),
                "partition": partition_label(
                    learning.get("partition"), learning.get("dirichlet_alpha")
                ),
                "energy_budget": describe_budget(budget),
                "energy_budget_mean_j": nominal_budget_j(budget),
                "run_dir": str(d),
                "run_dir_posix": d.as_posix(),
                "events_path": str(trace_path(d)),
                "name": sc.get("name", d.name),
                "status": run_status(d),
                "wall_time_s": run_wall_time_s(d),
                "learning": bool(learning.get("enabled", True)),
                "model": learning.get("model"),
                "num_devices": sc.get("network", {}).get("num_devices"),
                "frames": run_cfg.get("frames"),
                "slots_per_frame": run_cfg.get("slots_per_frame"),
                "deadline_s": run_cfg.get("deadline_s"),
                "lam": scheme.get("lam"),
                "server_mode": sc.get("server", {}).get("mode", "sync"),
                "server": server_label(sc.get("server", {})),
                "scheme_label": SCHEME_LABELS.get(name, name),
                "same_as": "" if r.shares is None else label_of.get(r.shares, r.shares.name),
            }
        )
    keys = sorted({k for f in flats for k in f})
    varying = []
    for k in keys:
        vals = {json.dumps(f.get(k), sort_keys=True) for f in flats if f.get(k) is not None}
        if len(vals) > 1:
            varying.append(k)
    for row, flat in zip(rows, flats, strict=True):
        row["variant"] = ", ".join(
            str(flat[k]) if k == "server" else f"{k}={_short(flat.get(k))}"
            for k in varying
            if flat.get(k) is not None
        )
    cols = ID_COLUMNS + [c for c in (rows[0] if rows else {}) if c not in ID_COLUMNS]
    return pd.DataFrame(rows, columns=cols), found


def _short(v: object) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict | list):
        return describe_budget(v) if isinstance(v, dict) and "dist" in v else json.dumps(v)
    return str(v)


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
    """The device-slot table (see :func:`device_slots`) of one run's events (either trace level)."""
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
    """The device-frame table (see :func:`frames`) of one run's events (``ds``: its device-slot
    table, built from ``ev`` when not given)."""
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
    """The slot table (see :func:`slots`) of one run's events."""
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
    """The evaluation table (see :func:`evaluations`) of one run's events."""
    e = _rows(ev, "eval", ["frame", "slot", "time_s", "loss", "accuracy"])
    sl = slots_from_events(ev) if sl is None else sl
    cum = sl.set_index("slot")[["cum_energy_j", "cum_latency_s"]]
    e = e.merge(cum, left_on="slot", right_index=True, how="left")
    before = e["slot"] < 0
    e.loc[before, ["cum_energy_j", "cum_latency_s"]] = 0.0
    e.insert(2, "round", e["slot"] + 1)
    return e.sort_values(["slot", "time_s"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- multi-run tables


@dataclass
class Tidy:
    """All tidy tables of a set of runs (see :func:`load`)."""

    runs: pd.DataFrame
    device_slots: pd.DataFrame
    frames: pd.DataFrame
    slots: pd.DataFrame
    evaluations: pd.DataFrame


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


def _tables(run_dir: str, want: set[str], cost_v: float | None = None) -> dict[str, pd.DataFrame]:
    """The tidy tables ``want`` of one run folder (without the ID columns; ``cost_v``: the
    ``V`` at which its cost is recomputed, :func:`with_cost_at`)."""
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
    return built


def load(runs: RunsArg, tables: Iterable[str] | None = None) -> Tidy:
    """Read each run once and build its tidy tables (``tables``: a subset of
    ``device_slots``, ``frames``, ``slots``, ``evaluations`` to build; the others stay empty)."""
    want = set(tables or ("device_slots", "frames", "slots", "evaluations"))
    info, found = _runs_info(runs)
    parts: dict[str, list[pd.DataFrame]] = {k: [] for k in want}
    # a run shared by sweep points is read once per V its cost is presented at
    done: dict[tuple[str, float | None], dict[str, pd.DataFrame]] = {}
    for (_, row), r in zip(info.iterrows(), found, strict=True):
        key = (row["run_dir"], r.cost_v)
        if key not in done:
            done[key] = _tables(row["run_dir"], want, r.cost_v)
        built = done[key]
        for k in want:
            parts[k].append(_with_ids(built[k], row))
    empty = pd.DataFrame(columns=ID_COLUMNS)
    return Tidy(
        runs=info,
        **{
            k: _concat(parts[k]) if k in want else empty
            for k in ("device_slots", "frames", "slots", "evaluations")
        },
    )


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
    """The update table (see :func:`updates`) of one run's events."""
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


# --------------------------------------------------------------------------- DuckDB

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def duckdb_view(
    con: duckdb.DuckDBPyConnection, runs: RunsArg, name: str = "events", *, verify: bool = True
) -> pd.DataFrame:
    """Create (or replace) a DuckDB view ``name`` over the runs' trace files.

    The view has every trace column plus :data:`ID_COLUMNS` (``run``, ``scheme``, ``V``, ...),
    read lazily with ``read_parquet([...], filename = true)``: queries stream over the files and
    need not fit in memory. A table ``{name}_runs`` holds :func:`runs_table` (one row per run).
    The view names each trace file literally (:func:`duckdb_literal`), never by a pattern built
    from a folder's name, so a run folder named ``exp[1]`` is read, not ``exp1``.

    Args:
        con: a ``duckdb.DuckDBPyConnection``.
        runs: run or sweep directories or a glob (see the module docstring).
        name: the view's name (an SQL identifier).
        verify: check each listed part's SHA-256 before the view is made (False: its row count;
            :func:`wflsim.analysis.io.events_files`).

    Returns:
        The runs table.

    Raises:
        RunFolderError: a run's parts and its manifest disagree (nothing is created).
    """
    if not _IDENT.match(name):
        raise ValueError(f"view name {name!r} is not a plain SQL identifier")
    info, found = _runs_info(runs)
    if info.empty:
        raise FileNotFoundError(f"no runs (events.parquet) found in {runs!r}")
    paths = _parquet_paths(con, info["run_dir"], verify)  # literal paths, a shared run's once
    tmp = f"__{name}_runs_df"
    con.register(tmp, info)
    try:
        con.execute(f"create or replace table {name}_runs as select * from {tmp}")
    finally:
        con.unregister(tmp)
    files = _sql_list(p for d in paths for p in paths[d])
    ids = ", ".join(f'r."{c}"' for c in ID_COLUMNS)
    # a part events/part-N.parquet or a file events.parquet belongs to the folder above it
    run_of = "regexp_replace({}.filename, '/events(/[^/]*|[.]parquet)$', '')"
    columns, queues = "e.* exclude (filename)", ""
    recost = [i for i, r in enumerate(found) if r.cost_v is not None]
    if recost:  # points sharing a run at another V: the cost at theirs (r.V), as with_cost_at
        points = _sql_list(info["run"].iloc[recost])
        columns += (
            f" replace (case when r.run in ({points}) and e.cost is not null then "
            "r.V * e.conv_error + q.queue_j * e.energy_j else e.cost end as cost)"
        )
        shared = dict.fromkeys(info["run_dir"].iloc[recost])
        queues = (
            f" left join (select {run_of.format('f')} as folder, frame, device, queue_j "
            f"from read_parquet([{_sql_list(p for d in shared for p in paths[d])}], "
            "filename = true, union_by_name = true) f where event = 'freeze') q "
            "on q.folder = r.run_dir_posix and q.frame = e.frame and q.device = e.device"
        )
    con.execute(
        f"create or replace view {name} as "
        f"select {ids}, {columns} "
        f"from read_parquet([{files}], filename = true, union_by_name = true) e "
        f"join {name}_runs r on {run_of.format('e')} = r.run_dir_posix{queues}"
    )
    return info


#: The characters DuckDB's ``read_parquet`` expands in every path it is given (glob syntax).
_GLOB_CHARS = re.compile(r"[*?\[]")


def duckdb_literal(path: str | os.PathLike[str]) -> str:
    """A file's path as DuckDB's ``read_parquet`` reads that file and no other: DuckDB expands
    ``*``, ``?`` and ``[...]`` in every path, also in a list of files, so each of these characters
    becomes a class that matches only itself (``[*]``, ``[?]``, ``[[]``)."""
    return _GLOB_CHARS.sub(lambda m: f"[{m.group()}]", Path(path).as_posix())


def _parquet_paths(
    con: duckdb.DuckDBPyConnection, run_dirs: Iterable[str], verify: bool = True
) -> dict[str, list[str]]:
    """Each run folder's trace files as literal DuckDB paths (:func:`duckdb_literal`), each
    checked to name exactly its file (DuckDB's ``glob``), never a pattern built from a folder.

    Raises:
        FileNotFoundError: none of the runs has a completed frame.
        ValueError: DuckDB would read another file than the one named.
    """
    out: dict[str, list[str]] = {}
    for d in dict.fromkeys(run_dirs):
        out[d] = []
        for f in events_files(d, verify=verify):
            literal = duckdb_literal(f)
            if literal != f.as_posix():
                matched = [
                    r[0] for r in con.execute("select file from glob(?)", [literal]).fetchall()
                ]
                if matched != [f.as_posix()]:
                    raise ValueError(f"DuckDB cannot name {f} literally (it matches {matched})")
            out[d].append(literal)
    if not any(out.values()):
        raise FileNotFoundError("no completed frame in the runs' traces")
    return out


def _sql_list(texts: Iterable[str]) -> str:
    """Texts as a comma-separated list of SQL string literals."""
    return ", ".join("'" + str(t).replace("'", "''") + "'" for t in texts)
