"""Finding and labelling runs: the run folders a ``runs`` argument names (:func:`find_runs`;
what such an argument may be: :mod:`wflsim.analysis.tidy`), a sweep's points that share one
run (``sweep.json``: ``same_as``) and their cost at their own ``V`` (:func:`with_cost_at`), the
run's scenario as stored in its trace or manifest, its status and wall time from
``manifest.json``, short labels (runs, energy budgets, partitions, the ``[server]``,
``[strategy]`` and ``[uplink]`` tables) and
:func:`runs_table`, one row per run with its identifying columns (:data:`ID_COLUMNS`).
"""

from __future__ import annotations

import glob
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wflsim.sim.rundir import liveness, read_json

from ..io import has_trace, read_metadata, trace_path

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

#: Flattened scenario fields that never tell configurations apart: they change no result, or
#: are the seed that runs of one configuration differ in.
NOT_CONFIG_FIELDS = frozenset(
    {
        "name",
        "description",
        "seed",
        "learning.data_dir",
        "learning.device",
        "run.checkpoint_every_frames",
    }
)
# ... and those already ID columns (the variant column leaves them out too).
_NOT_VARIANT = NOT_CONFIG_FIELDS | {
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
    """The run directories named by ``runs`` (see :mod:`wflsim.analysis.tidy`), sorted, without
    repeats.

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
    #: its sweep point's grid values (``sweep.json``'s ``values``: field -> value; empty for a
    #: run outside a sweep)
    grid: tuple[tuple[str, Any], ...] = ()


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
        own = points.get(d.name)
        out.append(_Run(d, d, _scheme_values(own), grid=_grid_values(own)))
        for name, entry in points.items():
            if entry.get("same_as") == d.name and name != d.name and not has_trace(d.parent / name):
                values = _scheme_values(entry)
                cost_v = point_cost_v(entry, d)
                out.append(_Run(d, d.parent / name, values, d, cost_v, _grid_values(entry)))
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


def _grid_values(entry: dict[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    """A sweep point's grid values (``sweep.json``'s ``values``: every field of the grid, as
    read), as ``(field, value)`` pairs; a table or list value as its JSON text."""
    values = (entry or {}).get("values")
    if not isinstance(values, dict):
        return ()
    return tuple(
        (k, v if isinstance(v, str | int | float | bool) else json.dumps(v, sort_keys=True))
        for k, v in values.items()
        if isinstance(k, str) and k
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
    m = read_json(run / "manifest.json") or {}
    if isinstance(m.get("scenario_resolved"), dict):
        return m["scenario_resolved"]
    return {}


def _manifest(run: str | os.PathLike) -> dict[str, Any] | None:
    """The run's ``manifest.json`` as a dict (``None``: missing or unreadable)."""
    return read_json(Path(run) / "manifest.json")


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
    they are not the defaults, and a hierarchy's cloud period and backhaul
    (``sync (cloud every 5 slots, backhaul latency 0.02 s, 1e-08 J/bit)``)."""
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
    h = server.get("hierarchy")
    if h:  # edge servers and a cloud ([server.hierarchy])
        k2 = int(h.get("cloud_every_slots", 1))
        tier = [f"cloud every {k2} slot{'s' if k2 != 1 else ''}"]
        lat = h.get("backhaul_latency_s", 0.0)
        if isinstance(lat, dict):
            tier.append(f"backhaul latency {describe_budget(lat)}")
        elif float(lat) != 0.0:
            tier.append(f"backhaul latency {float(lat):g} s")
        if float(h.get("backhaul_rate_bps", 1e9)) != 1e9:
            tier.append(f"{float(h['backhaul_rate_bps']):g} bit/s")
        if float(h.get("backhaul_energy_j_per_bit", 0.0)) != 0.0:
            tier.append(f"{float(h['backhaul_energy_j_per_bit']):g} J/bit")
        extra.append(", ".join(tier))
    return label + (f" ({'; '.join(extra)})" if extra else "")


def runs_table(runs: RunsArg) -> pd.DataFrame:
    """One row per run: :data:`ID_COLUMNS` plus ``run_dir``, ``events_path`` (its ``events/``
    folder, or ``events.parquet``), ``name``, ``status``
    (from ``manifest.json``), ``wall_time_s`` (:func:`run_wall_time_s`), ``learning`` (False: network-only), ``num_devices``, ``frames``,
    ``slots_per_frame``, ``deadline_s``, ``model``, ``lam``, ``server_mode`` (``[server] mode``),
    ``server`` (:func:`server_label`), ``strategy`` (:func:`strategy_label`), ``uplink``
    (:func:`uplink_label`), ``cells`` (:func:`cells_label`), ``privacy`` (:func:`privacy_label`), ``dp_mechanism``
    (:data:`MECHANISM_LABELS`: ``central DP``, ``local DP``, ``over-the-air DP``, or ``no DP``
    without ``[privacy]``), ``scheme_label`` and ``same_as`` (for a sweep point
    sharing another point's run: that run's ``run``, whose folder ``run_dir`` is; else ``""``).

    ``variant`` names the scenario fields (beyond the other ID columns and the seed) that differ
    between the runs given, e.g. ``"learning.lr=0.1"``; it is ``""`` when none do, so runs with
    the same ``(scheme, V, dataset, partition, energy_budget, variant)`` are seeds of one
    configuration.

    Then, for runs of a sweep, one column per field its grid sweeps, named by the field's
    dotted name (``scheme.name``, ``scheme.V``, ``uplink.mode``; ``grid.<field>`` where that
    name is one of the columns above, as a whole-table field ``uplink`` is): the point's grid
    value as given (a table's as JSON text; a value the point's run left out, ``sweep.json``'s
    ``unused_overrides``, is still the point's), empty for a run outside the sweep. Last, the
    run's summary from ``manifest.json`` (``wflsim.sim.stats.RunStats``), one column each:
    ``slots``, ``final_accuracy`` and ``initial_accuracy`` (fractions; NaN without learning),
    ``final_loss``, ``total_energy_j`` and ``wasted_energy_j`` (J, all devices),
    ``mean_energy_per_device_slot_j`` (J), ``outage_rate`` (late uploads per participation),
    ``dropout_rate`` (device-slots not participating), ``available_fraction`` (device-slots
    online), ``drops`` (participations lost offline), ``simulated_time_s`` (s),
    ``trace_rows``, and where the run has them ``handovers``, ``cloud_rounds``,
    ``backhaul_energy_j`` (J), ``aircomp_aligned_share``, ``aircomp_mean_aggregation_mse``,
    the privacy summary (``epsilon_max``, ``epsilon_mean``, ``dp_noise_multiplier``,
    ``dp_stopped_devices``) and a server's own counts; NaN where a run has none (not completed, or not measured).
    ``attrs["swept_columns"]`` and ``attrs["summary_columns"]`` name these columns.
    """
    return _runs_info(runs)[0]


#: The strategies' names as their papers write them (:func:`strategy_label`).
STRATEGY_LABELS: dict[str, str] = {
    "fedavg": "FedAvg",
    "fedavgm": "FedAvgM",
    "fedadagrad": "FedAdagrad",
    "fedadam": "FedAdam",
    "fedyogi": "FedYogi",
    "fedmedian": "FedMedian",
    "fedtrimmedavg": "FedTrimmedAvg",
    "krum": "Krum",
    "fednova": "FedNova",
    "fedprox": "FedProx",
    "scaffold": "SCAFFOLD",
}


def strategy_label(strategy: dict[str, Any]) -> str:
    """A run's ``[strategy]`` table in a few words: ``FedAvg``, ``FedProx (mu 0.1)``,
    ``FedAdam (b1 0.9; b2 0.99; eta 0.01; tau 0.001)``, with the selection rule where it is not
    ``all``."""
    name = str(strategy.get("name", "fedavg"))
    extra = [
        f"{k} {_short(v)}"
        for k, v in sorted(strategy.items())
        if k not in ("name", "selection") and v is not None
    ]
    selection = strategy.get("selection") or {}
    if selection.get("rule", "all") != "all":
        extra.append(
            " ".join(
                [str(selection["rule"])]
                + [f"{k}={_short(v)}" for k in ("k", "d") if (v := selection.get(k)) is not None]
            )
        )
    label = STRATEGY_LABELS.get(name, name)
    return label + (f" ({'; '.join(extra)})" if extra else "")


#: AirComp's power rules (``uplink.power_control``) as the labels name them.
_AIRCOMP_RULES = {
    "truncated_inversion": "truncated inversion",
    "optimal": "optimal powers",
    "controller": "controller",
}


def uplink_label(uplink: dict[str, Any]) -> str:
    """A run's ``[uplink]`` table in a few words: ``dedicated``, ``OFDMA (planned k 15)``,
    ``TDMA (edf)``, ``AirComp (truncated inversion; threshold -125 dB)``, with the planned
    concurrent uploads, the queue order, the noise density and AirComp's power rule where they
    are not the defaults."""
    mode = str(uplink.get("mode", "dedicated"))
    extra = []
    if mode == "aircomp":  # the power rule, its threshold and symbols: what tells AirComps apart
        rule = str(uplink.get("power_control") or "truncated_inversion")
        extra.append(_AIRCOMP_RULES.get(rule, rule))
        if uplink.get("threshold_gain_db") is not None:
            extra.append(f"threshold {float(uplink['threshold_gain_db']):g} dB")
        if uplink.get("values_per_symbol") not in (None, 1):
            extra.append(f"{int(uplink['values_per_symbol'])} values per symbol")
    if mode == "tdma" and uplink.get("order", "fcfs") != "fcfs":
        extra.append(str(uplink["order"]))
    if int(uplink.get("planned_concurrent_uploads", 1)) != 1:
        extra.append(f"planned k {int(uplink['planned_concurrent_uploads'])}")
    if uplink.get("noise_psd_dbm_hz") is not None:
        extra.append(f"N0 {float(uplink['noise_psd_dbm_hz']):g} dBm/Hz")
    label = {"ofdma": "OFDMA", "tdma": "TDMA", "aircomp": "AirComp"}.get(mode, mode)
    return label + (f" ({'; '.join(extra)})" if extra else "")


def cells_label(cells: dict[str, Any] | None) -> str:
    """A run's ``[cells]`` table in a few words: ``one cell``, ``7 cells (reuse 1)``,
    ``7 cells (reuse 3; plan on mean interference)``, ``2 cells (bands [0, 0]; uplinks ofdma,
    tdma)``."""
    if not cells:
        return "one cell"
    if cells.get("sites_m") is not None:
        count = len(cells["sites_m"])
    else:
        rings = int(cells.get("rings") or 0)
        count = 1 + 3 * rings * (rings + 1)
    extra = []
    if cells.get("bands") is not None:
        extra.append(f"bands {json.dumps(cells['bands'])}")
    else:
        extra.append(f"reuse {int(cells.get('reuse_factor', 1))}")
    if cells.get("uplink") is not None:
        extra.append("uplinks " + ", ".join(str(m) for m in cells["uplink"]))
    plan = cells.get("plan_on", "noise")
    if plan == "mean_interference":
        activity = float(cells.get("planning_activity", 1.0))
        extra.append("plan on mean interference" + (f" x {activity:g}" if activity != 1 else ""))
    elif plan == "margin":
        extra.append(f"plan on {float(cells.get('margin_db', 0.0)):g} dB margin")
    if cells.get("association", "strongest") != "strongest":
        extra.append(str(cells["association"]))
    return f"{count} cell{'s' if count != 1 else ''} ({'; '.join(extra)})"


#: The privacy mechanisms (``privacy.mechanism``) as the labels name them.
MECHANISM_LABELS: dict[str, str] = {
    "central": "central DP",
    "local": "local DP",
    "over_the_air": "over-the-air DP",
}
#: What a run without ``[privacy]`` is called in :func:`privacy_label` and ``dp_mechanism``.
NO_PRIVACY = "no DP"


def privacy_label(privacy: dict[str, Any] | None) -> str:
    """A run's ``[privacy]`` table in a few words: ``no DP``, ``central DP (z 1.1; C 1)``,
    ``local DP (target epsilon 8; C 0.5; adaptive clip)``, ``over-the-air DP (channel only;
    C 1)``, with the delta, the accountant, amplification and the over-the-air options where
    they are not the defaults."""
    if not privacy:
        return NO_PRIVACY
    mech = str(privacy.get("mechanism"))
    extra = []
    if privacy.get("noise_multiplier") is not None:
        extra.append(f"z {_short(privacy['noise_multiplier'])}")
    if privacy.get("target_epsilon") is not None:
        extra.append(f"target epsilon {_short(privacy['target_epsilon'])}")
    if privacy.get("air_noise") not in (None, "receiver"):
        extra.append(str(privacy["air_noise"]).replace("_", " "))
    if privacy.get("air_power") == "privacy":
        extra.append("powers scaled for privacy")
    extra.append(f"C {_short(privacy.get('clip_norm'))}")
    if privacy.get("clipping") == "adaptive":
        extra.append("adaptive clip")
    if privacy.get("delta") is not None and float(privacy["delta"]) != 1e-5:
        extra.append(f"delta {_short(privacy['delta'])}")
    if privacy.get("accountant", "rdp") != "rdp":
        extra.append(str(privacy["accountant"]).upper())
    if privacy.get("amplification", "none") != "none":
        extra.append("amplified by uniform selection")
    if privacy.get("epsilon_budget") is not None:
        extra.append(f"budget {_short(privacy['epsilon_budget'])}")
    return f"{MECHANISM_LABELS.get(mech, mech)} ({'; '.join(extra)})"


#: The tables :func:`runs_table` folds into one labelled value each (``variant`` and columns).
_FOLDED = {
    "server": server_label,
    "strategy": strategy_label,
    "uplink": uplink_label,
    "cells": cells_label,
    "privacy": privacy_label,
}


def _runs_info(runs: RunsArg) -> tuple[pd.DataFrame, list[_Run]]:
    """:func:`runs_table` and the runs of its rows, in its order."""
    found = _runs(runs)
    labels = run_labels([r.path for r in found])
    label_of = {r.path: label for r, label in zip(found, labels, strict=True)}
    rows, flats = [], []
    grids: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    for r, label in zip(found, labels, strict=True):
        d = r.folder
        sc = _with_point(_resolved_scenario(d), r.scheme)
        flat = {k: v for k, v in _flatten(sc).items() if k not in _NOT_VARIANT}
        # the server's, strategy's and uplink's fields as one value each, named as the
        # literature names the mode, the strategy and the access scheme (a selection rule,
        # part of the strategy's label, too)
        flat = {k: v for k, v in flat.items() if k.split(".")[0] not in _FOLDED}
        flat.update({t: label_of_table(sc.get(t) or {}) for t, label_of_table in _FOLDED.items()})
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
                "strategy": strategy_label(sc.get("strategy", {})),
                "uplink": uplink_label(sc.get("uplink", {})),
                "cells": cells_label(sc.get("cells")),
                "privacy": privacy_label(sc.get("privacy")),
                "dp_mechanism": MECHANISM_LABELS.get(
                    str((sc.get("privacy") or {}).get("mechanism")), NO_PRIVACY
                ),
                "scheme_label": SCHEME_LABELS.get(name, name),
                "same_as": "" if r.shares is None else label_of.get(r.shares, r.shares.name),
            }
        )
        grids.append(dict(r.grid))
        summaries.append(_summary_values(d))
    keys = sorted({k for f in flats for k in f})
    varying = []
    for k in keys:
        vals = {json.dumps(f.get(k), sort_keys=True) for f in flats if f.get(k) is not None}
        if len(vals) > 1:
            varying.append(k)
    for row, flat in zip(rows, flats, strict=True):
        row["variant"] = ", ".join(
            str(flat[k]) if k in _FOLDED else f"{k}={_short(flat.get(k))}"
            for k in varying
            if flat.get(k) is not None
        )
    cols = ID_COLUMNS + [c for c in (rows[0] if rows else {}) if c not in ID_COLUMNS]
    swept = _column_names([k for g in grids for k in g], set(cols))
    summary = [k for k in dict.fromkeys(k for m in summaries for k in m) if k not in cols]
    summary = [k for k in summary if k not in swept.values()]
    for row, grid, measured in zip(rows, grids, summaries, strict=True):
        row.update({swept[k]: v for k, v in grid.items()})
        row.update({k: measured.get(k) for k in summary})
    table = pd.DataFrame(rows, columns=[*cols, *swept.values(), *summary])
    for c in swept.values():  # one type per column: text where the sweeps' values differ in type
        kinds = {type(v) for v in table[c] if v is not None and not pd.isna(v)}
        if len(kinds) > 1 and not kinds <= {int, float}:
            table[c] = [None if v is None or pd.isna(v) else str(v) for v in table[c]]
    for c in summary:
        if all(v is None or isinstance(v, int | float) for v in table[c]):
            table[c] = pd.to_numeric(table[c], errors="coerce")
    table.attrs["swept_columns"] = list(swept.values())
    table.attrs["summary_columns"] = summary
    return table, found


def _column_names(fields: Iterable[str], taken: set[str]) -> dict[str, str]:
    """Each swept field's column (:func:`runs_table`): its dotted name, or ``grid.<field>``
    where that is already a column."""
    return {f: f if f not in taken else f"grid.{f}" for f in dict.fromkeys(fields)}


def _summary_values(run: Path) -> dict[str, Any]:
    """A run's summary from its ``manifest.json``: the numbers (NaN for null), without
    what is not one number (``stopped_early``)."""
    summary = (_manifest(run) or {}).get("summary")
    if not isinstance(summary, dict):
        return {}
    return {
        k: (float("nan") if v is None else v)
        for k, v in summary.items()
        if isinstance(k, str) and (v is None or isinstance(v, int | float))
    }


def _short(v: object) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict | list):
        return describe_budget(v) if isinstance(v, dict) and "dist" in v else json.dumps(v)
    return str(v)


def run_fields(runs: RunsArg) -> dict[str, dict[str, Any]]:
    """Per run (by its label, as in :func:`runs_table`): every field of its resolved scenario,
    flattened to dotted names (``strategy.name``, ``network.noise_dbm``; a distribution is one
    value), with its sweep point's grid values of scheme parameters set and the point's grid
    values as the sweep wrote them (``sweep.json``'s ``values``) and, for a point of
    :func:`wflsim.compare`, its ``variant`` label."""
    found = _runs(runs)
    labels = run_labels([r.path for r in found])
    points: dict[Path, dict[str, dict[str, Any]]] = {}
    out: dict[str, dict[str, Any]] = {}
    for r, label in zip(found, labels, strict=True):
        if r.path.parent not in points:
            points[r.path.parent] = _sweep_points(r.path.parent)
        flat = _flatten(_with_point(_resolved_scenario(r.folder), r.scheme))
        entry = points[r.path.parent].get(r.path.name) or {}
        values = entry.get("values")
        if isinstance(values, dict):
            flat.update(_flatten({k: v for k, v in values.items() if isinstance(k, str)}))
        if isinstance(entry.get("variant"), str):
            flat["variant"] = entry["variant"]
        out[label] = flat
    return out
