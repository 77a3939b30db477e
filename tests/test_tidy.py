"""Tidy tables and metrics: hand-built traces with hand-computed answers, DuckDB against pandas.

``write_synthetic_run`` writes a tiny trace by hand (2 devices, 2 frames x 2 slots, deadline
1 s) whose every metric can be computed on paper; the figure and report tests reuse it.

Per device and slot (device 0 | device 1), budgets E_bar = 0.3 | 0.4 J:

====  ==========  ==========  ===========  ==========  ========
slot  energy (J)  takes part  aggregated   queue (J)   gamma
====  ==========  ==========  ===========  ==========  ========
0     0.1 | 0.0   yes | no    yes | no     0 | 0       0 | 0
1     0.2 | 0.5   yes | yes   yes | yes    0 | 0.1     0 | 0
2     0.3 | 0.5   yes | yes   yes | no     0 | 0.2     0.5 | 0.25
3     0.4 | 0.1   yes | yes   yes | yes    0.1 | 0     0.5 | 0.25
====  ==========  ==========  ===========  ==========  ========

Slot durations 1, 1, 1.5, 1 s; evaluations after slots -1, 1, 3 with accuracy 0.1, 0.5, 0.8;
``stable_fraction`` null, null, 0.4, 0.6.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from conftest import base_scenario, run_in_memory
from wflsim.analysis import stats, tidy

ENERGY = np.array([[0.1, 0.0], [0.2, 0.5], [0.3, 0.5], [0.4, 0.1]])  # (slot, device), J
PART = np.array([[1, 0], [1, 1], [1, 1], [1, 1]], dtype=bool)
SUCC = np.array([[1, 0], [1, 1], [1, 0], [1, 1]], dtype=bool)
GAMMA = np.array([[0.0, 0.0], [0.5, 0.25]])  # (frame, device)
BUDGET = np.array([0.3, 0.4])
DURATION = np.array([1.0, 1.0, 1.5, 1.0])
EVALS = [(-1, 0.1), (1, 0.5), (3, 0.8)]
STABLE = [None, None, 0.4, 0.6]


def write_synthetic_run(
    out: Path,
    *,
    scheme: str = "two_timescale",
    V: float = 100.0,
    seed: int = 0,
    partition: str = "iid",
    budget: float = 0.35,
    scale: float = 1.0,
    evals: bool = True,
    extra: dict | None = None,
) -> Path:
    """Write the hand-built trace above (energies times ``scale``) with its scenario metadata."""
    from conftest import write_legacy_trace
    from wflsim.sim.config.loading import validate_scenario
    from wflsim.sim.trace import TraceBuffer

    sections: dict = {
        "name": "synthetic",
        "seed": seed,
        "network": {"num_devices": 2},
        "run": {"frames": 2, "slots_per_frame": 2, "deadline_s": 1.0},
        "devices": {"energy_budget_j": budget},
        "learning": {"partition": partition},
        "scheme": {"name": scheme, "V": V},
    }
    for key, value in (extra or {}).items():
        sections[key] = {**sections.get(key, {}), **value} if isinstance(value, dict) else value
    sc = base_scenario(**sections)
    resolved = validate_scenario(sc).model_dump(mode="json")
    out.mkdir(parents=True, exist_ok=True)
    meta = {"wflsim.scenario_resolved": json.dumps(resolved), "wflsim.seed": str(seed)}
    b = TraceBuffer()
    ids = np.arange(2, dtype=np.int32)
    energy = ENERGY * scale
    b.add("device_config", 0.0, 0, -1, ids, energy_budget_j=BUDGET, batch_size=np.full(2, 4))
    if evals:
        b.add("eval", 0.0, 0, -1, accuracy=EVALS[0][1], loss=2.0)
    queue = np.zeros(2)
    now = 0.0
    for k in range(2):
        t0 = 2 * k
        b.add("frame_start", now, k, t0)
        pos = np.array([[100.0 * (k + 1), 0.0], [0.0, 200.0]])
        b.add(
            "position", now, k, t0, ids, x_m=pos[:, 0], y_m=pos[:, 1], distance_m=np.hypot(*pos.T)
        )
        b.add(
            "freeze",
            now,
            k,
            t0,
            ids,
            gamma=GAMMA[k],
            queue_j=queue.copy(),
            max_tx_power_w=np.ones(2),
            iterations=np.array([0, 3], dtype=np.int32),
        )
        q_frame = queue.copy()
        for j in range(2):
            t = t0 + j
            part, succ, e = PART[t], SUCC[t], energy[t]
            b.add("slot_start", now, k, t)
            b.add(
                "decision",
                now,
                k,
                t,
                ids,
                channel_gain=np.full(2, 1e-12),
                gamma=GAMMA[k],
                participating=part,
                tx_power_w=np.where(part, 0.5, 0.0),
                compute_s=np.where(part, 0.2, 0.0),
                upload_s=np.where(part, 0.8, 0.0),
            )
            end = now + DURATION[t]
            b.add(
                "aggregate",
                end,
                k,
                t,
                n_participants=int(part.sum()),
                n_success=int(succ.sum()),
                slot_duration_s=DURATION[t],
                stable_fraction=STABLE[t],
            )
            queue = np.maximum(queue + e - BUDGET, 0.0)
            x = 0.5 * succ * (GAMMA[k] - 1.0)
            b.add(
                "energy",
                end,
                k,
                t,
                ids,
                participating=part,
                success=succ,
                tx_power_w=np.where(part, 0.5, 0.0),
                upload_s=np.where(part, 0.8, 0.0),
                energy_compute_j=e / 2,
                energy_upload_j=e / 2,
                energy_j=e,
                queue_j=queue.copy(),
                conv_error=x,
                cost=V * x + q_frame * e,
            )
            if evals and any(s == t for s, _ in EVALS):
                acc = dict(EVALS)[t]
                b.add("eval", end, k, t, accuracy=acc, loss=1.0 - acc)
            now = end
        b.add("frame_end", now, k, t0 + 1)
    write_legacy_trace(out / "events.parquet", b, meta)
    return out


@pytest.fixture
def syn(tmp_path) -> Path:
    """One hand-built run."""
    return write_synthetic_run(tmp_path / "syn")


@pytest.fixture
def sweep(tmp_path) -> Path:
    """Two hand-built runs (two schemes, energies 1x and 2x) in one sweep folder."""
    write_synthetic_run(tmp_path / "sw" / "a", scheme="two_timescale")
    write_synthetic_run(tmp_path / "sw" / "b", scheme="ideal", scale=2.0)
    return tmp_path / "sw"


def test_device_slots_shape_and_ids(syn):
    """One row per device per slot, with the run's identifying fields read from the metadata."""
    ds = tidy.device_slots(syn)
    assert len(ds) == 8
    row = ds.iloc[0]
    assert (row["run"], row["scheme"], row["V"], row["seed"]) == ("syn", "two_timescale", 100.0, 0)
    assert (row["partition"], row["energy_budget"], row["energy_budget_mean_j"]) == (
        "IID",
        "0.35",
        0.35,
    )


def test_device_slot_flags_and_latency(syn):
    """Outage, drop-out and latency follow participation and success (slot 2: device 1 late)."""
    ds = tidy.device_slots(syn).set_index(["slot", "device"])
    assert bool(ds.loc[(2, 1), "outage"]) and not bool(ds.loc[(2, 0), "outage"])
    assert bool(ds.loc[(0, 1), "dropout"])
    assert ds.loc[(0, 0), "latency_s"] == pytest.approx(1.0)  # 0.2 s compute + 0.8 s upload
    assert np.isnan(ds.loc[(0, 1), "latency_s"])
    assert ds.loc[(3, 1), "energy_budget_j"] == pytest.approx(0.4)


def test_rates_by_hand(syn):
    """Participation 7/8, drop-out 1/8, outage 1/7 (per participation), success 6/8."""
    r = stats.rates(tidy.device_slots(syn)).iloc[0]
    assert r["participation"] == pytest.approx(7 / 8)
    assert r["dropout_rate"] == pytest.approx(1 / 8)
    assert r["outage_rate"] == pytest.approx(1 / 7)
    assert r["success_rate"] == pytest.approx(6 / 8)


def test_energy_totals_by_hand(syn):
    """Total energy 2.1 J, 0.2625 J per device-slot, 1.05 J per device."""
    e = stats.energy_totals(tidy.device_slots(syn)).iloc[0]
    assert e["total_energy_j"] == pytest.approx(2.1)
    assert e["energy_per_device_slot_j"] == pytest.approx(2.1 / 8)
    assert e["energy_per_device_j"] == pytest.approx(1.05)
    assert e["compute_energy_j"] + e["upload_energy_j"] == pytest.approx(2.1)


def test_energy_per_device_by_hand(syn):
    """Device 0: 1.0 J in total, 0.25 J per slot, 0.25 / 0.3 of its budget; device 1: 1.1 J."""
    e = stats.energy_per_device(tidy.device_slots(syn)).set_index("device")
    assert e.loc[0, "total_energy_j"] == pytest.approx(1.0)
    assert e.loc[0, "budget_ratio"] == pytest.approx(0.25 / 0.3)
    assert e.loc[1, "total_energy_j"] == pytest.approx(1.1)
    assert e.loc[1, "final_queue_j"] == pytest.approx(0.0)


def test_queue_and_gamma_by_hand(syn):
    """Mean queue per slot 0, 0.05, 0.1, 0.05 J; mean gamma per frame 0 and 0.375."""
    q = stats.queue_trajectories(tidy.device_slots(syn))
    assert q["mean_queue_j"].tolist() == pytest.approx([0.0, 0.05, 0.1, 0.05])
    g = stats.gamma_trajectories(tidy.frames(syn))
    assert g["mean_gamma"].tolist() == pytest.approx([0.0, 0.375])
    assert g["max_gamma"].tolist() == pytest.approx([0.0, 0.5])


def test_slots_by_hand(syn):
    """Slot 2: two participants, one outage, 0.8 J; cumulative latency 1, 2, 3.5, 4.5 s."""
    sl = tidy.slots(syn).set_index("slot")
    assert (sl.loc[2, "n_participants"], sl.loc[2, "n_outage"]) == (2, 1)
    assert sl.loc[2, "outage_rate"] == pytest.approx(0.5)
    assert sl.loc[2, "energy_j"] == pytest.approx(0.8)
    assert sl["cum_latency_s"].tolist() == pytest.approx([1.0, 2.0, 3.5, 4.5])
    assert sl.loc[3, "stable_fraction"] == pytest.approx(0.6)


def test_slot_latency_by_hand(syn):
    """Total latency 4.5 s over 4 slots, the longest 1.5 s."""
    lat = stats.slot_latency(tidy.slots(syn)).iloc[0]
    assert (lat["slots"], lat["total_latency_s"], lat["max_slot_s"]) == (4, 4.5, 1.5)


def test_running_averages_by_hand(syn):
    """Device-mean energy per slot 0.05, 0.35, 0.4, 0.25 J; running mean ends at 0.2625 J."""
    ra = stats.running_averages(tidy.device_slots(syn))
    assert ra["energy_j"].tolist() == pytest.approx([0.05, 0.35, 0.4, 0.25])
    assert ra["avg_energy_j"].tolist() == pytest.approx([0.05, 0.2, 0.8 / 3, 0.2625])


def test_conv_error_and_cost_by_hand(syn):
    """X_av = -2.375 / 8 (lam B = 0.5) and slot 2's device-1 cost is V X + Q E = 0 + 0.1 * 0.5."""
    ds = tidy.device_slots(syn).set_index(["slot", "device"])
    assert ds["conv_error"].mean() == pytest.approx(-2.375 / 8)
    assert ds.loc[(2, 1), "cost"] == pytest.approx(0.05)


def test_accuracy_against_energy_and_time_by_hand(syn):
    """Evaluations after slots -1, 1, 3: cumulative energy 0, 0.8, 2.1 J and latency 0, 2, 4.5 s."""
    ev = tidy.evaluations(syn)
    assert ev["round"].tolist() == [0, 2, 4]
    ae = stats.accuracy_vs_energy(ev)
    assert ae["cum_energy_j"].tolist() == pytest.approx([0.0, 0.8, 2.1])
    at = stats.accuracy_vs_time(ev)
    assert at["cum_latency_s"].tolist() == pytest.approx([0.0, 2.0, 4.5])
    assert at["accuracy"].tolist() == pytest.approx([0.1, 0.5, 0.8])


def test_summary_by_hand(syn):
    """The one-row summary: energy, queue, gamma, latency, stability and accuracy."""
    d = tidy.load(syn)
    s = stats.summary(d.device_slots, d.slots, d.evaluations).iloc[0]
    assert s["energy_per_device_slot_j"] == pytest.approx(0.2625)
    assert s["mean_queue_j"] == pytest.approx(0.05)
    assert s["final_queue_j"] == pytest.approx(0.05)
    assert s["mean_gamma"] == pytest.approx(0.1875)
    assert s["total_latency_s"] == pytest.approx(4.5)
    assert s["final_stable_fraction"] == pytest.approx(0.6)
    assert (s["final_accuracy"], s["best_accuracy"]) == (0.8, 0.8)


def test_frames_by_hand(syn):
    """Per device-frame: position, gamma, queue at the frame start, energy and participation."""
    fr = tidy.frames(syn).set_index(["frame", "device"])
    assert fr.loc[(1, 0), "x_m"] == pytest.approx(200.0)
    assert fr.loc[(1, 0), "gamma"] == pytest.approx(0.5)
    assert fr.loc[(1, 1), "queue_j"] == pytest.approx(0.1)
    assert fr.loc[(0, 1), "energy_j"] == pytest.approx(0.5)
    assert fr.loc[(0, 1), "participation"] == pytest.approx(0.5)
    assert fr.loc[(1, 1), "iterations"] == 3


def test_many_runs_concatenate_with_run_column(sweep):
    """A sweep folder yields both runs, each with its own scheme and energies."""
    ds = tidy.device_slots(sweep)
    tot = ds.groupby("run")["energy_j"].sum()
    assert tot.to_dict() == pytest.approx({"a": 2.1, "b": 4.2})
    assert ds.groupby("run")["scheme"].first().to_dict() == {"a": "two_timescale", "b": "ideal"}


def test_duckdb_view_matches_pandas(sweep):
    """Energy totals and row counts per run are the same through the DuckDB view and pandas."""
    con = duckdb.connect()
    tidy.duckdb_view(con, sweep)
    via_sql = con.sql(
        "select run, sum(energy_j) as e, count(*) as n from events where event = 'energy' "
        "group by run order by run"
    ).df()
    ds = tidy.device_slots(sweep)
    via_pd = ds.groupby("run").agg(e=("energy_j", "sum"), n=("energy_j", "size")).reset_index()
    assert via_sql["run"].tolist() == via_pd["run"].tolist()
    assert via_sql["e"].tolist() == pytest.approx(via_pd["e"].tolist(), rel=1e-12)
    assert via_sql["n"].tolist() == via_pd["n"].tolist()


def test_duckdb_view_carries_ids_and_glob(sweep):
    """A glob of events.parquet files works, and the view has the scheme column and a runs table."""
    con = duckdb.connect()
    tidy.duckdb_view(con, str(sweep / "*" / "events.parquet"), name="ev")
    rows = con.sql("select scheme, count(*) from ev group by scheme order by scheme").fetchall()
    assert [r[0] for r in rows] == ["ideal", "two_timescale"]
    assert con.sql("select count(*) from ev_runs").fetchall()[0][0] == 2


def test_events_table_has_ids(sweep):
    """events() returns every event row of both runs with run and scheme columns."""
    ev = tidy.events(sweep, events=["aggregate"])
    assert len(ev) == 8
    assert set(ev["run"]) == {"a", "b"}
    assert ev["device"].isna().all()


def test_repeated_run_names_get_relative_labels(tmp_path):
    """Runs with the same folder name in two sweeps are told apart by their relative paths."""
    write_synthetic_run(tmp_path / "x" / "r")
    write_synthetic_run(tmp_path / "y" / "r")
    assert tidy.runs_table(tmp_path)["run"].tolist() == ["x/r", "y/r"]


def test_variant_names_other_differing_fields(tmp_path):
    """A field outside the ID columns that differs (lr) goes into variant; scheme does not."""
    write_synthetic_run(tmp_path / "a", extra={"learning": {"lr": 0.1}})
    write_synthetic_run(tmp_path / "b", scheme="ideal")
    info = tidy.runs_table(tmp_path).set_index("run")
    assert info.loc["a", "variant"] == "learning.lr=0.1"
    assert info.loc["b", "variant"] == "learning.lr=0.05"


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ({"status": "completed", "summary": {"wall_time_s": 12.5}}, 12.5),
        ({"status": "interrupted", "summary": {"wall_time_s": 12.5}}, None),
        ({"status": "completed", "summary": {"wall_time_s": "12.5"}}, None),
        ({"status": "completed", "summary": {"wall_time_s": -1.0}}, None),
        ({"status": "completed", "summary": None}, None),
        ([1, 2], None),
    ],
)
def test_wall_time_is_a_completed_runs_and_nan_otherwise(tmp_path, manifest, expected):
    """wall_time_s comes from a completed run's manifest; not completed, or not a
    non-negative number: NaN."""
    write_synthetic_run(tmp_path / "a")
    (tmp_path / "a" / "manifest.json").write_text(json.dumps(manifest))
    wall = tidy.runs_table(tmp_path)["wall_time_s"].iloc[0]
    assert np.isnan(wall) if expected is None else wall == expected


def test_budget_descriptions():
    """Budget specs read as text and as their expected value."""
    spec = {"dist": "uniform", "low": 0.3, "high": 0.45}
    assert tidy.describe_budget(spec) == "U[0.3, 0.45]"
    assert tidy.nominal_budget_j(spec) == pytest.approx(0.375)
    assert tidy.nominal_budget_j([0.2, 0.4]) == pytest.approx(0.3)
    assert tidy.nominal_budget_j({"dist": "choice", "values": [1, 3], "probs": [0.75, 0.25]}) == 1.5


def test_mean_over_seeds(tmp_path):
    """Two seeds of one configuration average into one row with n_runs = 2."""
    write_synthetic_run(tmp_path / "s0", seed=0, scale=1.0)
    write_synthetic_run(tmp_path / "s1", seed=1, scale=3.0)
    d = tidy.load(tmp_path)
    m = stats.mean_over_seeds(stats.summary(d.device_slots, d.slots))
    assert len(m) == 1 and m["n_runs"].iloc[0] == 2
    assert m["total_energy_j"].iloc[0] == pytest.approx((2.1 + 6.3) / 2)


def test_builders_on_an_engine_trace():
    """On a real network-only trace, device slots hold every device-slot and the engine's energy."""
    table, stats_ = run_in_memory(base_scenario())
    ev = table.to_pandas(types_mapper=pd.ArrowDtype)
    ds = tidy.device_slots_from_events(ev)
    assert len(ds) == 6 * 10
    assert ds["energy_j"].sum() == pytest.approx(stats_.energy_j, rel=1e-12)
    ok = ds[ds["success"]]
    assert (ok["latency_s"] <= 0.8 * (1 + 1e-9)).all()  # fixed_power enforces the deadline
    sl = tidy.slots_from_events(ev, ds)
    assert sl["n_success"].sum() == int(ds["success"].sum())


def test_stats_cli_over_seeds_prints_the_t_interval(tmp_path, capsys):
    """--over-seeds prints one row per configuration: the mean and its 95 % t interval over the
    seeds (two seeds with energies 2.1 and 6.3 J: 4.2 +- t_{0.975,1} x 2.1, cut at 0 J)."""
    from scipy import stats as st

    from wflsim.analysis.stats import main

    write_synthetic_run(tmp_path / "s0", seed=0, scale=1.0)
    write_synthetic_run(tmp_path / "s1", seed=1, scale=3.0)
    assert main([str(tmp_path), "--over-seeds", "--columns", "total_energy_j"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| n | total_energy_j |"
    half = st.t.ppf(0.975, 1) * 2.1
    assert 4.2 - half < 0  # an energy below zero: the interval stops at 0
    assert out[2] == f"| 2 | {4.2:.4g} [0, {4.2 + half:.4g}] |"
    assert main([str(tmp_path), "--over-seeds", "--level", "1.5"]) == 2


def test_device_slots_without_availability_are_all_online_and_never_dropped(syn):
    """A trace without [availability] reads as every device online, nobody dropped."""
    ds = tidy.device_slots(syn)
    assert ds["available"].all() and not ds["dropped"].any()
    r = stats.rates(ds).iloc[0]
    assert r["available_rate"] == 1.0 and r["drop_rate"] == 0.0


def test_drops_are_not_outages_in_the_tidy_table():
    """On a churn run, drop_rate counts the dropped participations and outage_rate the others."""
    from conftest import base_scenario, run_in_memory

    data = base_scenario(
        run={"frames": 2, "slots_per_frame": 10, "deadline_s": 0.8},
        network={"num_devices": 12},
        availability={
            "model": "markov",
            "online_s": {"dist": "exponential", "mean": 2.0},
            "offline_s": 1.0,
        },  # fmt: skip
    )
    table, run_stats = run_in_memory(data)
    ev = table.to_pandas()
    ds = tidy.device_slots_from_events(ev)
    r = stats.rates(ds.assign(run="r")).iloc[0]
    assert r["drops"] == run_stats.drops > 0
    assert r["drop_rate"] == pytest.approx(run_stats.drops / run_stats.participations)
    assert r["outage_rate"] == pytest.approx(run_stats.outage_rate)
    assert not (ds["outage"] & ds["dropped"]).any()


# ------------------------------------------------------- a sweep's runs table (issue 47)

_QUICK = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.toml"
_QUICK_NET = ["learning.enabled=false", "run.frames=1", "run.slots_per_frame=2"]


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory):
    """ideal and fixed_power x V 10 and 100, seed 0: four points, two runs (V is cost-only)."""
    from wflsim.app.sweep import plan_sweep, run_sweep

    out = tmp_path_factory.mktemp("runs_table") / "sw"
    plan = plan_sweep(
        _QUICK, ["scheme=ideal,fixed_power", "scheme.V=10,100"], "0", extra_overrides=_QUICK_NET
    )
    run_sweep(plan, out, extra_overrides=_QUICK_NET)
    return out


def test_runs_table_has_a_column_per_swept_field(small_sweep):
    """A sweep's runs table has scheme.name and scheme.V, the values of each point's grid, also
    for the points that share another's run."""
    runs = tidy.runs_table(small_sweep).set_index("run")
    points = json.loads((small_sweep / "sweep.json").read_text())["points"]
    assert set(runs.index) == set(points)
    for name, entry in points.items():
        assert runs.loc[name, "scheme.name"] == entry["values"]["scheme.name"]
        assert runs.loc[name, "scheme.V"] == entry["values"]["scheme.V"]
    assert runs.attrs["swept_columns"] == ["scheme.name", "scheme.V"]


def test_runs_table_has_each_runs_summary(small_sweep):
    """A sweep's runs table has each run's summary measures: its total energy is the sum of its
    trace's device-slot energies, its outage rate the one sweep.json records."""
    data = tidy.load(small_sweep, tables=("device_slots",))
    runs = data.runs.set_index("run")
    energy = data.device_slots.groupby("run")["energy_j"].sum()
    points = json.loads((small_sweep / "sweep.json").read_text())["points"]
    for name in points:
        assert runs.loc[name, "total_energy_j"] == pytest.approx(energy[name], rel=1e-9)
        assert runs.loc[name, "outage_rate"] == points[name]["summary"]["outage_rate"]
        assert np.isnan(runs.loc[name, "final_accuracy"])  # network only: not measured
    assert {"slots", "total_energy_j", "simulated_time_s"} <= set(runs.attrs["summary_columns"])
