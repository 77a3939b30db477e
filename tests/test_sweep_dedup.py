"""Sweeps share one run among points whose runs would be identical (``same_as``)."""

from __future__ import annotations

import json
import shutil

import duckdb
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import wflsim
from conftest import REPO
from wflsim.analysis import tidy
from wflsim.analysis.report import write_report
from wflsim.app.cli import main
from wflsim.app.sweep import (
    GridPoint,
    SweepInterrupted,
    SweepPlan,
    plan_sweep,
    point_counts,
    run_sweep,
    shared_points,
)
from wflsim.sim.engine import Hooks
from wflsim.sim.errors import ScenarioError

SCENARIO = REPO / "scenarios" / "paper" / "mnist_noniid.toml"
#: network only, 3 devices, one frame of two slots: each run takes milliseconds
TINY = [
    "learning.enabled=false",
    "learning.num_params=440812",
    "network.num_devices=3",
    "run.frames=1",
    "run.slots_per_frame=2",
]
TINY_ARGS = [a for o in TINY for a in ("--set", o)]
#: ideal has no MM controller, hence no tol: its two tol values make one run per seed
GRID = ["scheme=ideal,two_timescale", "scheme.tol=1e-6,1e-9"]
IDEAL = "ideal__tol=1e-6__seed={}"
IDEAL_DUP = "ideal__tol=1e-9__seed={}"


def run_folders(out):
    """The point folders holding a run (a manifest)."""
    return sorted(p.name for p in out.iterdir() if (p / "manifest.json").is_file())


def sweep(out, grid=GRID, seeds="0-1", dedup=True, **kwargs):
    plan = plan_sweep(SCENARIO, grid, seeds, extra_overrides=TINY, dedup=dedup)
    return run_sweep(plan, out, extra_overrides=TINY, **kwargs)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """ideal, two_timescale x tol 1e-6, 1e-9 x seeds 0, 1: 8 points, 6 runs."""
    out = tmp_path_factory.mktemp("dedup") / "sw"
    sweep(out)
    return out


def test_identical_points_run_once(shared):
    """8 points make 6 run folders: ideal's tol=1e-9 points share the tol=1e-6 runs."""
    points = json.loads((shared / "sweep.json").read_text())["points"]
    assert len(points) == 8
    assert len(run_folders(shared)) == 6
    assert not any((shared / IDEAL_DUP.format(s)).exists() for s in (0, 1))


def test_a_shared_point_records_same_as_its_overrides_and_status(shared):
    """A sharing point keeps its overrides and seed, names the first point as same_as and dir,
    lists the value its scheme does not take, and is completed with that point's summary."""
    points = json.loads((shared / "sweep.json").read_text())["points"]
    for seed in (0, 1):
        dup, orig = points[IDEAL_DUP.format(seed)], points[IDEAL.format(seed)]
        assert dup["same_as"] == dup["dir"] == IDEAL.format(seed)
        assert dup["overrides"] == ["scheme.name=ideal", "scheme.tol=1e-9"]
        assert dup["seed"] == seed and dup["unused_overrides"] == ["scheme.tol=1e-9"]
        assert dup["status"] == orig["status"] == "completed"
        assert dup["summary"] == orig["summary"]


def test_a_scheme_with_the_parameter_never_shares(shared):
    """two_timescale declares tol: its four points have four folders, none a same_as."""
    points = json.loads((shared / "sweep.json").read_text())["points"]
    mine = [n for n in points if n.startswith("two_timescale__")]
    assert len(mine) == 4 and all("same_as" not in points[n] for n in mine)
    assert all(n in run_folders(shared) for n in mine)


def test_tidy_rows_of_a_shared_point_equal_its_originals(shared):
    """tidy.load gives each sharing point the rows of the run it shares, under its own name."""
    t = tidy.load(shared)
    for table in (t.device_slots, t.slots, t.frames):
        for seed in (0, 1):
            dup = table[table["run"] == IDEAL_DUP.format(seed)].drop(columns=tidy.ID_COLUMNS)
            orig = table[table["run"] == IDEAL.format(seed)].drop(columns=tidy.ID_COLUMNS)
            assert len(dup) > 0
            pd.testing.assert_frame_equal(dup.reset_index(drop=True), orig.reset_index(drop=True))


def test_runs_table_gives_every_point_its_configuration(shared):
    """runs_table: 8 rows; a sharing point shows its own tol (variant) and same_as."""
    runs = tidy.runs_table(shared).set_index("run")
    assert len(runs) == 8
    for seed in (0, 1):
        dup, orig = runs.loc[IDEAL_DUP.format(seed)], runs.loc[IDEAL.format(seed)]
        assert (dup["variant"], orig["variant"]) == ("scheme.tol=1e-09", "scheme.tol=1e-06")
        assert dup["same_as"] == IDEAL.format(seed) and orig["same_as"] == ""
        assert dup["run_dir"] == orig["run_dir"] and dup["status"] == "completed"
        assert (dup["scheme"], dup["seed"]) == ("ideal", seed)


def test_duckdb_view_gives_a_shared_run_per_point(shared):
    """The DuckDB view has the shared run's events once under each point."""
    con = duckdb.connect()
    tidy.duckdb_view(con, shared)
    counts = dict(con.execute("select run, count(*) from events group by run").fetchall())
    assert len(counts) == 8
    rows = len(wflsim.load_run(shared / IDEAL.format(0)).events)
    assert counts[IDEAL_DUP.format(0)] == counts[IDEAL.format(0)] == rows


def test_api_points_and_runs_of_a_shared_point(shared):
    """wflsim.load_sweep lists every point; a sharing point's run is the run it shares."""
    sw = wflsim.load_sweep(shared)
    assert len(sw.points) == 8 and sw.points[IDEAL_DUP.format(1)]["same_as"] == IDEAL.format(1)
    assert sw.run(IDEAL_DUP.format(1)).folder == shared / IDEAL.format(1)


def test_report_of_a_sweep_with_shared_points(shared, tmp_path):
    """wflsim report lists every point, the sharing ones with their own tol."""
    write_report(shared, tmp_path / "rep")
    runs = pd.read_csv(tmp_path / "rep" / "runs.csv").set_index("run")
    assert len(runs) == 8 and runs.loc[IDEAL_DUP.format(0), "variant"] == "scheme.tol=1e-09"


def test_repeating_the_command_skips_everything_and_prints_the_count(shared, capsys):
    """A repeat prints that its 6 runs were completed before, runs nothing and makes no folder."""
    before = run_folders(shared)
    args = ["sweep", str(SCENARIO), *(a for g in GRID for a in ("--grid", g)), "--seeds", "0-1"]
    assert main([*args, *TINY_ARGS, "--out", str(shared), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "wflsim: 8 points, 6 runs, 2 shared; 6 completed before, 0 to resume, 0 to start" in out
    assert "sweep of 6 runs" in out and "0 run, 6 already complete" in out
    points = json.loads((shared / "sweep.json").read_text())["points"]
    assert all(p["status"].startswith("skipped") for p in points.values())
    assert run_folders(shared) == before


def test_no_dedup_runs_every_point(tmp_path, capsys):
    """--no-dedup gives all 8 points their own folder, and says nothing is shared."""
    out = tmp_path / "sw"
    args = ["sweep", str(SCENARIO), *(a for g in GRID for a in ("--grid", g)), "--seeds", "0-1"]
    assert main([*args, *TINY_ARGS, "--out", str(out), "--quiet", "--no-dedup"]) == 0
    assert (
        "wflsim: 8 points, 8 runs, 0 shared; 0 completed before, 0 to resume, 8 to start"
        in capsys.readouterr().out
    )
    assert len(run_folders(out)) == 8
    points = json.loads((out / "sweep.json").read_text())["points"]
    assert not any("same_as" in p for p in points.values())


def test_a_v_grid_shares_only_for_schemes_whose_v_is_cost_only():
    """ideal's V changes only its logged cost: its V=10 points share the V=1 runs; the
    two_timescale points, whose decisions read V, do not share."""
    plan = plan_sweep(
        SCENARIO, ["scheme=ideal,two_timescale", "scheme.V=1,10"], "0-1", extra_overrides=TINY
    )
    assert len(plan.points) == 8
    assert shared_points(plan) == {
        f"ideal__V=10__seed={s}": f"ideal__V=1__seed={s}" for s in (0, 1)
    }


def test_ideal_runs_at_two_values_of_v_differ_in_cost():
    """Why readers recompute the cost: ideal's logged z = V X + Q E is V times X when Q = 0."""
    ev = {
        v: wflsim.run(SCENARIO, overrides=[*TINY, "scheme.name=ideal", f"scheme.V={v}"]).events
        for v in (1, 10)
    }
    cost = {v: e.loc[e["event"] == "energy", ["cost", "conv_error"]] for v, e in ev.items()}
    pd.testing.assert_series_equal(cost[1]["conv_error"], cost[10]["conv_error"])
    first = cost[1].index[0]  # slot 0: every queue is still 0, so z = V X
    assert cost[10].loc[first, "cost"] == pytest.approx(10 * cost[1].loc[first, "cost"])
    assert cost[1].loc[first, "cost"] != 0


def test_values_written_differently_share():
    """scheme.V = 10, 10.0 and 1e1 are one value: three points, one run per seed."""
    plan = plan_sweep(SCENARIO, ["scheme.V=10,10.0,1e1"], "0-1", extra_overrides=TINY)
    assert shared_points(plan) == {
        "V=10.0__seed=0": "V=10__seed=0",
        "V=1e1__seed=0": "V=10__seed=0",
        "V=10.0__seed=1": "V=10__seed=1",
        "V=1e1__seed=1": "V=10__seed=1",
    }


def test_a_parameter_no_scheme_of_the_sweep_has_is_refused():
    """A grid parameter that no scheme of the sweep declares is still an error (a misspelling)."""
    with pytest.raises(ScenarioError) as err:
        plan_sweep(
            SCENARIO, ["scheme=ideal,two_timescale", "scheme.tolx=1,2"], "0", extra_overrides=TINY
        )
    assert err.value.field == "scheme.tolx"


def test_interrupted_sweep_resumes_and_shared_points_follow(tmp_path):
    """Interrupted in its first run: the sharing points take their originals' states; the
    repeat completes every point with 6 folders."""
    out = tmp_path / "sw"

    def stop(engine, frame):
        raise KeyboardInterrupt

    with pytest.raises(SweepInterrupted) as info:
        sweep(out, hooks=Hooks(frame_start=stop))
    assert info.value.counts["completed"] == 0
    points = json.loads((out / "sweep.json").read_text())["points"]
    for seed in (0, 1):
        assert points[IDEAL_DUP.format(seed)]["status"] == points[IDEAL.format(seed)]["status"]
    assert points[IDEAL.format(0)]["status"] == "interrupted"
    assert points[IDEAL_DUP.format(0)]["status"] == "interrupted"
    manifest = sweep(out)
    assert all(p["status"] == "completed" for p in manifest["points"].values())
    assert len(run_folders(out)) == 6


def test_the_counts_say_what_a_repeat_will_do(tmp_path):
    """Stopped in the second frame of its second run: of 6 runs (2 points share), 1 completed
    before, 1 to resume, 4 to start."""
    out = tmp_path / "sw"
    two_frames = [o for o in TINY if not o.startswith("run.frames")] + ["run.frames=2"]
    plan = plan_sweep(SCENARIO, GRID, "0-1", extra_overrides=two_frames)
    assert point_counts(plan, out)["start"] == 6  # no folder yet
    starts = []

    def stop(engine, frame):
        starts.append(frame)
        if len(starts) == 4:  # frame 1 of the second run
            raise KeyboardInterrupt

    with pytest.raises(SweepInterrupted):
        run_sweep(plan, out, extra_overrides=two_frames, hooks=Hooks(frame_start=stop))
    assert point_counts(plan, out) == {
        "points": 8,
        "runs": 6,
        "shared": 2,
        "completed": 1,
        "resume": 1,
        "start": 4,
    }


def test_a_former_sharing_point_runs_when_its_original_leaves_the_grid(shared, tmp_path):
    """Changing the grid to tol = 1e-9, 1e-12: ideal's tol=1e-9 point, which shared, now runs
    in its own folder, and tol=1e-12 shares it."""
    out = tmp_path / "sw"
    shutil.copytree(shared, out)
    manifest = sweep(out, grid=["scheme=ideal,two_timescale", "scheme.tol=1e-9,1e-12"])
    points = manifest["points"]
    for seed in (0, 1):
        assert points[IDEAL_DUP.format(seed)]["status"] == "completed"
        assert "same_as" not in points[IDEAL_DUP.format(seed)]
        assert (out / IDEAL_DUP.format(seed) / "manifest.json").is_file()
        assert points[f"ideal__tol=1e-12__seed={seed}"]["same_as"] == (IDEAL_DUP.format(seed))


def test_points_with_folders_of_their_own_keep_them(tmp_path):
    """A sweep made without sharing, repeated with it: every point keeps its folder (skipped)."""
    out = tmp_path / "sw"
    sweep(out, seeds="0", dedup=False)
    manifest = sweep(out, seeds="0")
    assert len(run_folders(out)) == 4
    assert all(p["status"].startswith("skipped") for p in manifest["points"].values())
    assert not any("same_as" in p for p in manifest["points"].values())


def test_overwrite_recomputes_an_original_and_its_sharing_point_follows(tmp_path, capsys):
    """Another --set: refused naming a point (exit 2); with --overwrite the originals are
    recomputed and the sharing points complete with them."""
    out = tmp_path / "sw"
    args = ["sweep", str(SCENARIO), *(a for g in GRID for a in ("--grid", g)), "--seeds", "0"]
    args += [*TINY_ARGS, "--out", str(out), "--quiet"]
    assert main(args) == 0
    assert main([*args, "--set", "scheme.V=7"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main([*args, "--set", "scheme.V=7", "--overwrite"]) == 0
    points = json.loads((out / "sweep.json").read_text())["points"]
    assert points[IDEAL_DUP.format(0)]["status"] == "completed"
    made = json.loads((out / IDEAL.format(0) / "manifest.json").read_text())
    assert "scheme.V=7" in made["overrides"] and len(run_folders(out)) == 3


def test_tidy_ignores_a_sharing_record_that_names_another_folder(shared, tmp_path):
    """A hand-edited sweep.json whose point name is a path ('../x') adds no run."""
    out = tmp_path / "sw"
    shutil.copytree(shared, out)
    manifest = json.loads((out / "sweep.json").read_text())
    manifest["points"]["../x"] = {"same_as": IDEAL.format(0), "overrides": ["scheme.tol=1"]}
    (out / "sweep.json").write_text(json.dumps(manifest))
    assert "../x" not in set(tidy.runs_table(out)["run"]) and len(tidy.runs_table(out)) == 8


@given(st.lists(st.integers(0, 3), min_size=1, max_size=12), st.booleans())
def test_each_point_shares_the_first_identical_point(kinds, dedup):
    """Every point whose run equals an earlier point's shares the first such point (none
    without dedup); the others run."""
    points = [GridPoint((f"x={i}",), 0) for i in range(len(kinds))]
    identities = {p.name: str(k) for p, k in zip(points, kinds, strict=True)}
    plan = SweepPlan(SCENARIO, [], [0], points, identities=identities, dedup=dedup)
    first: dict[int, str] = {}
    expected = {}
    for p, k in zip(points, kinds, strict=True):
        if k in first:
            expected[p.name] = first[k]
        first.setdefault(k, p.name)
    assert shared_points(plan) == (expected if dedup else {})


# ------------------------------------------------- V shared by schemes whose V is cost-only

#: two frames, so that the queues at the second frame's start (the Q of z = V X + Q E) are not 0
TWO_FRAMES = [*TINY, "run.frames=2"]
V_GRID = ["scheme=ideal,fixed_power,two_timescale", "scheme.V=1,10"]
#: the points sharing a run made at V=1
V_SHARED = [f"{s}__V=10__seed=0" for s in ("ideal", "fixed_power")]


def v_sweep(out, dedup):
    plan = plan_sweep(SCENARIO, V_GRID, "0", extra_overrides=TWO_FRAMES, dedup=dedup)
    return run_sweep(plan, out, extra_overrides=TWO_FRAMES)


@pytest.fixture(scope="module")
def v_sweeps(tmp_path_factory):
    """The V grid swept with sharing (4 runs) and without (6 runs: the real runs at V=10)."""
    base = tmp_path_factory.mktemp("dedup_v")
    v_sweep(base / "shared", dedup=True)
    v_sweep(base / "real", dedup=False)
    return base / "shared", base / "real"


def test_v_grid_runs_four_runs_for_six_points(v_sweeps):
    """ideal and fixed_power at V=10 share their V=1 runs; two_timescale runs at both V."""
    shared, _ = v_sweeps
    points = json.loads((shared / "sweep.json").read_text())["points"]
    assert len(points) == 6 and len(run_folders(shared)) == 4
    assert {n: p["same_as"] for n, p in points.items() if "same_as" in p} == {
        n: n.replace("V=10", "V=1") for n in V_SHARED
    }
    assert {f"two_timescale__V={v}__seed=0" for v in (1, 10)} <= set(run_folders(shared))


def test_the_queues_of_the_v_grid_are_not_all_zero(v_sweeps):
    """The Q E term of the recomputed cost is exercised: some frame starts with a queue > 0."""
    _, real = v_sweeps
    fr = tidy.frames(real / V_SHARED[1])
    assert (fr["queue_j"] > 0).any()


def test_tidy_tables_of_a_point_sharing_at_another_v_equal_a_real_run(v_sweeps):
    """Every tidy table of a point sharing a run made at V=1 equals the real V=10 run's, cost
    included, bit for bit."""
    shared, real = v_sweeps
    a, b = tidy.load(shared), tidy.load(real)
    for table in ("device_slots", "frames", "slots", "evaluations"):
        for name in V_SHARED:
            got, want = getattr(a, table), getattr(b, table)
            got = got[got["run"] == name].reset_index(drop=True)
            want = want[want["run"] == name].reset_index(drop=True)
            pd.testing.assert_frame_equal(got, want, check_exact=True)
    costs = a.device_slots.groupby("run")["cost"].sum()
    assert costs[V_SHARED[0]] != costs[V_SHARED[0].replace("V=10", "V=1")]


def test_events_of_a_point_sharing_at_another_v_equal_a_real_run(v_sweeps):
    """tidy.events, whole and filtered to the cost, equals the real V=10 run's."""
    shared, real = v_sweeps
    for kwargs in ({}, {"events": ["energy"], "columns": ["slot", "cost"]}):
        got, want = tidy.events(shared, **kwargs), tidy.events(real, **kwargs)
        for name in V_SHARED:
            pd.testing.assert_frame_equal(
                got[got["run"] == name].drop(columns="run").reset_index(drop=True),
                want[want["run"] == name].drop(columns="run").reset_index(drop=True),
                check_exact=True,
            )


def test_api_run_of_a_point_sharing_at_another_v_equals_a_real_run(v_sweeps):
    """SweepResult.run gives the point's V in its scenario and the events of a real run at V=10
    (made in memory), cost included."""
    shared, _ = v_sweeps
    sw = wflsim.load_sweep(shared)
    for name in V_SHARED:
        scheme = name.split("__")[0]
        got = sw.run(name)
        want = wflsim.run(SCENARIO, overrides=[*TWO_FRAMES, f"scheme.name={scheme}", "scheme.V=10"])
        assert got.scenario["scheme"]["V"] == 10 and got.folder == shared / sw.points[name]["dir"]
        pd.testing.assert_frame_equal(got.events, want.events, check_exact=True)


def test_duckdb_view_of_a_point_sharing_at_another_v_has_its_cost(v_sweeps):
    """The DuckDB view's cost of a point sharing a run at V=1 equals the real V=10 run's."""
    query = (
        "select run, frame, slot, device, cost from events where event = 'energy' "
        "order by run, slot, device"
    )
    got, want = [], []
    for folder, rows in zip(v_sweeps, (got, want), strict=True):
        con = duckdb.connect()
        tidy.duckdb_view(con, folder)
        rows.append(con.execute(query).fetchdf())
    pd.testing.assert_frame_equal(got[0], want[0], check_exact=True)


def test_with_cost_at_the_run_s_own_v_gives_the_logged_cost(v_sweeps):
    """Recomputing two_timescale's cost at its own V (Q > 0 in its second frame) reproduces the
    logged column bit for bit: the engine's operations in its order."""
    _, real = v_sweeps
    ev = wflsim.load_run(real / "two_timescale__V=10__seed=0").events
    recomputed = tidy.with_cost_at(ev.assign(cost=ev["cost"] * 0.0), 10.0)
    pd.testing.assert_series_equal(recomputed["cost"], ev["cost"], check_exact=True)


def test_only_a_recomputable_cost_parameter_counts_as_cost_only():
    """A scheme's declared cost-only parameters count only where the cost can be recomputed
    (V; not lam, which changes X too); a scheme without the attribute declares none."""
    from wflsim.sim.registry import SCHEMES
    from wflsim.sim.schemes.base import cost_only_params

    class Both:
        cost_only_params = frozenset({"V", "lam"})

    assert cost_only_params(Both) == {"V"} and cost_only_params(object) == frozenset()
    assert cost_only_params(SCHEMES["ideal"]) == cost_only_params(SCHEMES["fixed_power"]) == {"V"}
    assert cost_only_params(SCHEMES["two_timescale"]) == frozenset()
