"""Sweeps: grid parsing, resumption, common random numbers, executors."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest

from conftest import REPO
from wflsim.app.cli import main
from wflsim.app.sweep import GridPoint, expand, parse_grid, parse_seeds, plan_sweep, run_sweep
from wflsim.sim.errors import ScenarioError

SCENARIO = REPO / "scenarios" / "paper" / "mnist_noniid.toml"
NET = [
    "--set",
    "learning.enabled=false",
    "--set",
    "learning.num_params=440812",
    "--set",
    "run.frames=2",
    "--set",
    "run.slots_per_frame=5",
]
NET_OVERRIDES = [
    "learning.enabled=false",
    "learning.num_params=440812",
    "run.frames=2",
    "run.slots_per_frame=5",
]


def test_parse_grid_maps_section_to_its_name():
    """--grid scheme=a,b means scheme.name; other keys are fields."""
    assert parse_grid(["scheme=ideal,only_pc", "scheme.V=10,100"]) == [
        ("scheme.name", ["ideal", "only_pc"]),
        ("scheme.V", ["10", "100"]),
    ]


def test_parse_seeds_ranges_and_lists():
    """Seeds accept ranges and lists."""
    assert parse_seeds("0-2") == [0, 1, 2]
    assert parse_seeds("1-2,7") == [1, 2, 7]


@pytest.mark.parametrize("bad", ["", "2-1", "a", "1,1", "-1"])
def test_parse_seeds_rejects_nonsense(bad):
    """Empty, reversed, non-numeric, duplicate or negative seeds are errors on --seeds."""
    with pytest.raises(ScenarioError) as info:
        parse_seeds(bad)
    assert info.value.field == "--seeds"


def test_expand_is_the_cartesian_product():
    """2 schemes x 3 values of V x 2 seeds = 12 distinct points with distinct directory names."""
    points = expand(parse_grid(["scheme=a,b", "scheme.V=1,2,3"]), [0, 1])
    assert len(points) == 12 and len({p.name for p in points}) == 12
    assert points[0] == GridPoint(("scheme.name=a", "scheme.V=1"), 0)


def test_bad_grid_value_fails_before_anything_is_written(tmp_path, capsys):
    """An invalid value in the grid stops the sweep with exit 2 and no sweep directory."""
    out = tmp_path / "sw"
    code = main(
        ["sweep", str(SCENARIO), "--grid", "scheme.V=10,-1", *NET, "--out", str(out), "--quiet"]
    )
    assert code == 2 and not out.exists()
    assert "scheme.V" in capsys.readouterr().err


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A 2 schemes x 2 seeds network-only sweep run with the local executor."""
    out = tmp_path_factory.mktemp("sweep") / "sw"
    plan = plan_sweep(
        SCENARIO, ["scheme=two_timescale,ideal"], "0-1", extra_overrides=NET_OVERRIDES
    )
    manifest = run_sweep(plan, out, extra_overrides=NET_OVERRIDES)
    assert all(p["status"] == "completed" for p in manifest["points"].values())
    return out


def test_sweep_writes_one_run_per_point_and_a_manifest(sweep_dir):
    """Four run directories, each with a completed manifest, and sweep.json listing them."""
    manifest = json.loads((sweep_dir / "sweep.json").read_text())
    assert len(manifest["points"]) == 4
    for name in manifest["points"]:
        assert json.loads((sweep_dir / name / "manifest.json").read_text())["status"] == "completed"


def test_repeating_a_sweep_runs_nothing_new(sweep_dir):
    """A second identical sweep skips every completed run (files untouched)."""
    before = {p: p.stat().st_mtime_ns for p in sweep_dir.glob("*/events/*.parquet")}
    plan = plan_sweep(
        SCENARIO, ["scheme=two_timescale,ideal"], "0-1", extra_overrides=NET_OVERRIDES
    )
    manifest = run_sweep(plan, sweep_dir, extra_overrides=NET_OVERRIDES)
    assert all(p["status"].startswith("skipped") for p in manifest["points"].values())
    assert before == {p: p.stat().st_mtime_ns for p in sweep_dir.glob("*/events/*.parquet")}


def test_repeating_a_sweep_keeps_the_earlier_records(sweep_dir):
    """A repeat keeps each skipped point's summary and the first execution's start time."""
    first = json.loads((sweep_dir / "sweep.json").read_text())
    plan = plan_sweep(
        SCENARIO, ["scheme=two_timescale,ideal"], "0-1", extra_overrides=NET_OVERRIDES
    )
    manifest = run_sweep(plan, sweep_dir, extra_overrides=NET_OVERRIDES)
    assert manifest["first_started_at"] == first.get("first_started_at", first["started_at"])
    for name, entry in manifest["points"].items():
        if "summary" in first["points"][name]:
            assert entry["summary"] == first["points"][name]["summary"]
    assert any("summary" in e for e in manifest["points"].values())


def test_interrupted_run_is_redone(sweep_dir):
    """A run whose manifest is not 'completed' is run again on resume; the others are skipped."""
    victim = sweep_dir / "ideal__seed=1" / "manifest.json"
    m = json.loads(victim.read_text())
    m["status"] = "interrupted"
    victim.write_text(json.dumps(m))
    plan = plan_sweep(
        SCENARIO, ["scheme=two_timescale,ideal"], "0-1", extra_overrides=NET_OVERRIDES
    )
    manifest = run_sweep(plan, sweep_dir, extra_overrides=NET_OVERRIDES)
    statuses = {n: p["status"] for n, p in manifest["points"].items()}
    assert statuses.pop("ideal__seed=1") == "completed"
    assert all(s.startswith("skipped") for s in statuses.values())


def test_point_killed_before_its_run_began_is_run_anew(sweep_dir):
    """A point folder holding only a lock and a marker's temporary (a kill before the marker)
    is run anew, not refused as foreign."""
    victim = sweep_dir / "ideal__seed=0"
    for p in victim.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    (victim / "wflsim.lock").write_text("{}")
    (victim / ".wflsim-run.123.tmp").write_text("{")
    plan = plan_sweep(
        SCENARIO, ["scheme=two_timescale,ideal"], "0-1", extra_overrides=NET_OVERRIDES
    )
    manifest = run_sweep(plan, sweep_dir, extra_overrides=NET_OVERRIDES)
    assert manifest["points"]["ideal__seed=0"]["status"] == "completed"
    assert not list(victim.glob(".*.tmp"))


def test_same_seed_different_schemes_see_the_same_channels(sweep_dir):
    """Common random numbers: the logged positions and fading draws agree across schemes for a seed."""

    def channels(name):
        df = pd.read_parquet(sweep_dir / name / "events")
        dec = df[df.event == "decision"]
        return dec["channel_gain"].to_numpy(), df[df.event == "position"]["distance_m"].to_numpy()

    (ha, da), (hb, db) = (
        channels("two_timescale__seed=0"),
        channels("ideal__seed=0"),
    )
    np.testing.assert_array_equal(ha, hb)
    np.testing.assert_array_equal(da, db)
    hc, _ = channels("ideal__seed=1")
    assert not np.array_equal(hb, hc)


def test_local_executor_with_two_workers(tmp_path):
    """--workers 2 runs points in a process pool and gives the same trace as a serial run."""
    plan = plan_sweep(SCENARIO, ["scheme=only_pc"], "0-1", extra_overrides=NET_OVERRIDES)
    par = run_sweep(plan, tmp_path / "par", workers=2, extra_overrides=NET_OVERRIDES)
    ser = run_sweep(plan, tmp_path / "ser", workers=1, extra_overrides=NET_OVERRIDES)
    assert all(p["status"] == "completed" for p in par["points"].values())
    for name in ser["points"]:
        a = pd.read_parquet(tmp_path / "par" / name / "events")
        b = pd.read_parquet(tmp_path / "ser" / name / "events")
        pd.testing.assert_frame_equal(a, b)


@pytest.mark.slow
def test_ray_executor_runs_a_sweep(tmp_path):
    """--executor ray on a local Ray runs every point (skipped when ray is not installed, unless
    WFLSIM_NO_SKIP=1: CI installs it and the test must run there)."""
    if os.environ.get("WFLSIM_NO_SKIP") != "1":
        pytest.importorskip("ray")
    plan = plan_sweep(SCENARIO, ["scheme=only_pc,ideal"], "0", extra_overrides=NET_OVERRIDES)
    manifest = run_sweep(plan, tmp_path / "ray", executor="ray", extra_overrides=NET_OVERRIDES)
    assert all(p["status"] == "completed" for p in manifest["points"].values())


def test_ray_executor_without_ray_writes_nothing(tmp_path, monkeypatch):
    """--executor ray where Ray is not installed: ScenarioError naming --executor, no folder."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    plan = plan_sweep(SCENARIO, ["scheme=only_pc,ideal"], "0", extra_overrides=NET_OVERRIDES)
    with pytest.raises(ScenarioError) as err:
        run_sweep(plan, tmp_path / "ray", executor="ray", extra_overrides=NET_OVERRIDES)
    assert err.value.field == "--executor"
    assert not (tmp_path / "ray").exists()


def test_sweep_table_in_the_scenario_file(tmp_path):
    """A [sweep] table gives the grid and seeds when the command line does not."""
    text = SCENARIO.read_text() + '\n[sweep]\ngrid = { "scheme.V" = [10, 1000] }\nseeds = [3]\n'
    path = tmp_path / "s.toml"
    path.write_text(text)
    plan = plan_sweep(path, [], None, extra_overrides=NET_OVERRIDES)
    assert [p.name for p in plan.points] == ["V=10__seed=3", "V=1000__seed=3"]


def test_a_value_given_twice_is_refused():
    """A grid value given twice makes two equal points: refused, naming the point."""
    with pytest.raises(ScenarioError) as info:
        expand(parse_grid(["scheme.V=10,10"]), [0])
    assert info.value.field == "--grid" and "scheme.V=10" in info.value.problem


def test_long_point_names_are_cut_with_a_hash():
    """A point name over 160 characters is cut and ends with a hash: unique and deterministic."""
    a = GridPoint(("learning.data_dir=" + "x" * 300 + "a",), 0)
    b = GridPoint(("learning.data_dir=" + "x" * 300 + "b",), 0)
    assert len(a.name) <= 160 and a.name != b.name and a.name == GridPoint(a.overrides, 0).name


def _tiny_sweep(tmp_path, text_extra: str = "") -> tuple:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.read_text() + text_extra)
    return path, tmp_path / "sw"


def test_repeat_with_other_overrides_is_refused_naming_the_point(tmp_path, capsys):
    """A repeat into the same --out with another --set exits 2 naming a point and --overwrite;
    with --overwrite the points are recomputed."""
    path, out = _tiny_sweep(tmp_path)
    args = ["sweep", str(path), "--grid", "scheme=only_pc", "--seeds", "0", *NET, "--out", str(out)]
    assert main([*args, "--quiet"]) == 0
    before = json.loads((out / "only_pc__seed=0" / "manifest.json").read_text())
    capsys.readouterr()
    assert main([*args, "--set", "scheme.V=7", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "only_pc__seed=0" in err and "--overwrite" in err
    assert main([*args, "--set", "scheme.V=7", "--overwrite", "--quiet"]) == 0
    after = json.loads((out / "only_pc__seed=0" / "manifest.json").read_text())
    assert after["overrides"] != before["overrides"] and after["status"] == "completed"


def test_repeat_after_editing_the_scenario_is_refused(tmp_path, capsys):
    """Editing the scenario file between two runs of a sweep makes its repeat refuse."""
    path, out = _tiny_sweep(tmp_path)
    args = ["sweep", str(path), "--grid", "scheme=only_pc", "--seeds", "0", *NET, "--out", str(out)]
    assert main([*args, "--quiet"]) == 0
    path.write_text(path.read_text() + "\n# edited\n")
    capsys.readouterr()
    assert main([*args, "--quiet"]) == 2
    assert "scenario file's text" in capsys.readouterr().err


def test_point_names_of_letters_outside_ascii_stay_within_160_bytes():
    """Grid values of 4-byte letters are cut by bytes, not characters, at a letter boundary:
    the folder name fits a file system's 255-byte limit with room to spare."""
    a = GridPoint(("scheme.label=" + "\U00010348" * 100,), 0)
    b = GridPoint(("scheme.label=" + "\U00010348" * 99 + "x",), 0)
    for p in (a, b):
        assert len(p.name.encode("utf-8")) <= 160
        p.name.encode("utf-8").decode("utf-8")  # whole letters only
    assert a.name != b.name


def test_worker_told_to_stop_while_preparing_starts_no_run(tmp_path, monkeypatch):
    """Ctrl-C reaching a worker while it prepares its point (no run to interrupt yet): the point
    is 'not started' and nothing is run, rather than run to its end deaf to the next signal."""
    import wflsim.app.run as run_module
    from wflsim.app import sweep

    real = run_module.make_learner

    def signalled_while_preparing(prep):
        sweep._STOPPING.set()  # what the worker's signal handler does when no run is in flight
        return real(prep)

    monkeypatch.setattr(run_module, "make_learner", signalled_while_preparing)
    out = tmp_path / "point"
    try:
        result = sweep.run_point(
            str(SCENARIO), NET_OVERRIDES, 0, str(out), None, None, in_worker=True
        )
    finally:
        sweep._STOPPING.clear()
    assert result == {"status": "not started"}
    assert (
        not out.exists() or not any(out.glob("*.parquet")) and not (out / "manifest.json").exists()
    )


# ------------------------------------------------------------------ point names (issue 47)

QUICK = REPO / "scenarios" / "quickstart.toml"
QUICK_NET = ["learning.enabled=false", "run.frames=1", "run.slots_per_frame=2"]


def _names(specs: list[str], seeds: list[int] = [0]) -> list[str]:  # noqa: B006
    return [p.name for p in expand(parse_grid(specs), seeds)]


def test_point_names_are_the_values_after_short_labels():
    """A scheme, mode or model is named by its value, another field by its last name and value."""
    assert _names(["scheme=ideal,fixed_power", "scheme.V=10", "network.noise_dbm=-104.0"]) == [
        "ideal__V=10__noise_dbm=-104.0__seed=0",
        "fixed_power__V=10__noise_dbm=-104.0__seed=0",
    ]
    assert _names(["uplink.mode=ofdma", "channel.fading.model=rician"], [3]) == [
        "ofdma__rician__seed=3"
    ]


def test_a_quoted_text_value_names_without_its_quotes(tmp_path):
    """A [sweep] grid's text value (written "fixed_power") names the folder fixed_power, not
    scheme.name=_fixed_power_."""
    path = tmp_path / "s.toml"
    path.write_text(QUICK.read_text() + '\n[sweep]\ngrid = { "scheme.name" = ["fixed_power"] }\n')
    plan = plan_sweep(path, [], "0", extra_overrides=QUICK_NET)
    assert [p.name for p in plan.points] == ["fixed_power__seed=0"]


def test_a_table_value_is_named_by_its_values():
    """A grid value that is a whole table (uplink = {mode, power_control}) names the folder by
    its values: aircomp.controller."""
    from wflsim.sim.config.loading import Override

    grid = [
        ("uplink", [Override.of("uplink", {"mode": "aircomp", "power_control": "controller"})]),
        ("network.noise_dbm", [Override.of("network.noise_dbm", -104.0)]),
    ]
    assert [p.name for p in expand(grid, [0])] == ["aircomp.controller__noise_dbm=-104.0__seed=0"]


def test_fields_of_one_last_name_keep_the_names_that_tell_them_apart():
    """scheme.tol and strategy.tol are labelled scheme.tol and strategy.tol, not tol twice."""
    assert _names(["scheme.tol=1e-6", "strategy.tol=3"]) == [
        "scheme.tol=1e-6__strategy.tol=3__seed=0"
    ]


def test_values_alike_but_for_unsafe_characters_get_distinct_hashed_names():
    """ "a b" and "a_b" would both read a_b: each name ends in a hash of its own value."""
    a, b = _names(["scheme.name=a b,a_b"])
    assert a != b and a.startswith("a_b~") and b.startswith("a_b~")
    assert a.endswith("__seed=0") and len(a) == len("a_b~") + 12 + len("__seed=0")
    assert _names(["scheme.name=a b,a_b"]) == [a, b]  # deterministic


def test_a_long_readable_name_is_cut_and_ends_in_a_hash():
    """A readable part over 96 bytes is cut there and ends in a hash of the point's values."""
    a, b = _names(["learning.data_dir=" + "x" * 200 + "a," + "x" * 200 + "b"])
    assert a != b and len(a.split("__seed=")[0].encode()) <= 96 and "~" in a


def test_adding_values_to_a_grid_keeps_the_names_of_the_points_there():
    """A name depends on the point and the grid's fields, not on the other values."""
    small = _names(["scheme=ideal", "scheme.V=10"], [0, 1])
    assert set(small) <= set(_names(["scheme=ideal,only_pc", "scheme.V=10,100"], [0, 1]))


def test_a_sweep_folder_of_full_names_is_continued_in_its_own_folders(tmp_path):
    """A sweep folder written when points were named by their overrides in full keeps those
    names: its completed points are skipped, a point added to the grid gets a short name."""
    from wflsim.app.sweep_plan import full_name, shown

    out = tmp_path / "sw"
    plan = plan_sweep(QUICK, ["scheme=ideal"], "0", extra_overrides=QUICK_NET)
    run_sweep(plan, out, extra_overrides=QUICK_NET)
    # the folder as a sweep wrote it before short names: scheme.name=ideal__seed=0
    manifest = json.loads((out / "sweep.json").read_text())
    old = {}
    for p in plan.points:
        old_name = full_name([shown(o) for o in p.overrides], p.seed)
        (out / p.name).rename(out / old_name)
        entry = manifest["points"].pop(p.name)
        manifest["points"][old_name] = {**entry, "dir": old_name}
        old[p.name] = old_name
    (out / "sweep.json").write_text(json.dumps(manifest))
    assert old == {"ideal__seed=0": "scheme.name=ideal__seed=0"}
    before = {q: q.stat().st_mtime_ns for q in out.glob("*/events/*.parquet")}
    plan = plan_sweep(QUICK, ["scheme=ideal,fixed_power"], "0", extra_overrides=QUICK_NET)
    result = run_sweep(plan, out, extra_overrides=QUICK_NET)
    assert set(result["points"]) == {"scheme.name=ideal__seed=0", "fixed_power__seed=0"}
    assert result["points"]["scheme.name=ideal__seed=0"]["status"].startswith("skipped")
    assert sorted(q.name for q in out.iterdir() if q.is_dir()) == [
        "fixed_power__seed=0",
        "scheme.name=ideal__seed=0",
    ]
    assert before == {q: q.stat().st_mtime_ns for q in out.glob("scheme.name=*/events/*.parquet")}


# ------------------------------------------------------- fields of one mode in a grid (issue 47)


def _applied(specs: list[str], extra: list[str] = ()) -> dict[str, list[str]]:  # type: ignore[assignment]
    overrides = [*QUICK_NET, *extra]
    plan = plan_sweep(QUICK, specs, "0", extra_overrides=overrides)
    return {p.name: [str(o) for o in plan.applied(p)] for p in plan.points}


def test_a_grid_over_uplink_modes_leaves_aircomp_fields_out_of_other_modes():
    """uplink.power_control applies to AirComp only: the OFDMA points run without it (and share
    one run), the AirComp points with it."""
    applied = _applied(
        ["uplink.mode=ofdma,aircomp", "uplink.power_control=controller,optimal"],
        ['scheme.name="two_timescale"'],
    )
    assert applied == {
        "ofdma__power_control=controller__seed=0": ["uplink.mode=ofdma"],
        "ofdma__power_control=optimal__seed=0": ["uplink.mode=ofdma"],
        "aircomp__power_control=controller__seed=0": [
            "uplink.mode=aircomp",
            "uplink.power_control=controller",
        ],
        "aircomp__power_control=optimal__seed=0": [
            "uplink.mode=aircomp",
            "uplink.power_control=optimal",
        ],
    }


def test_a_grid_over_server_modes_leaves_the_async_buffer_out_of_sync():
    """server.buffer_size applies to async only: the sync points run without it."""
    applied = _applied(["server.mode=sync,async", "server.buffer_size=2"])
    assert applied == {
        "sync__buffer_size=2__seed=0": ["server.mode=sync"],
        "async__buffer_size=2__seed=0": ["server.mode=async", "server.buffer_size=2"],
    }


def test_a_grid_over_fading_models_leaves_the_k_factor_out_of_rayleigh():
    """channel.fading.k_db is Rician's: the Rayleigh points run without it."""
    applied = _applied(["channel.fading.model=rayleigh,rician", "channel.fading.k_db=6"])
    assert applied == {
        "rayleigh__k_db=6__seed=0": ["channel.fading.model=rayleigh"],
        "rician__k_db=6__seed=0": ["channel.fading.model=rician", "channel.fading.k_db=6"],
    }


def test_a_mode_field_no_mode_of_the_grid_takes_is_refused():
    """uplink.power_control over OFDMA and TDMA only: refused, naming the field."""
    with pytest.raises(ScenarioError) as info:
        _applied(["uplink.mode=ofdma,tdma", "uplink.power_control=optimal"])
    assert "power_control" in info.value.problem


def test_a_mode_field_given_outside_the_grid_is_refused_with_the_way_out():
    """uplink.power_control given by --set under a grid over uplink.mode: the refusal says to
    give it in the grid instead."""
    with pytest.raises(ScenarioError) as info:
        _applied(["uplink.mode=ofdma,aircomp"], ['uplink.power_control="optimal"'])
    assert "--grid uplink.power_control=VALUE" in info.value.fix


@pytest.mark.parametrize(
    ("table", "field", "value"),
    [
        ("uplink", "power_control", "optimal"),
        ("uplink", "threshold_gain_db", -120.0),
        ("uplink", "values_per_symbol", 2),
        ("uplink", "ns3", {}),
        ("server", "buffer_size", 2),
        ("server", "staleness", {"function": "polynomial"}),
        ("server", "server_lr", 0.5),
        ("server", "max_staleness", 3),
        ("mobility", "file", "trace.csv"),
        ("mobility", "placement", "explicit"),
        ("mobility", "positions_m", [[0.0, 0.0]]),
    ],
)
def test_the_mode_tables_say_what_the_validators_refuse(table, field, value):
    """A field of UPLINK_MODE_FIELDS, SERVER_MODE_FIELDS or MOBILITY_MODEL_FIELDS is accepted
    exactly under its modes."""
    import typing

    from wflsim.sim.config.schema import UPLINK_MODE_FIELDS, UplinkConfig
    from wflsim.sim.servers.config import SERVER_MODE_FIELDS, SERVER_MODES, ServerConfig
    from wflsim.sim.world.mobility.config import MOBILITY_MODEL_FIELDS, MobilityConfig

    cls, modes_of, modes = {
        "uplink": (
            UplinkConfig,
            UPLINK_MODE_FIELDS,
            typing.get_args(UplinkConfig.model_fields["mode"].annotation),
        ),
        "server": (ServerConfig, SERVER_MODE_FIELDS, SERVER_MODES),
        "mobility": (
            MobilityConfig,
            MOBILITY_MODEL_FIELDS,
            typing.get_args(MobilityConfig.model_fields["model"].annotation),
        ),
    }[table]
    for mode in modes:
        try:
            given = {"model" if table == "mobility" else "mode": mode, field: value}
            if table == "mobility" and field in ("placement", "positions_m"):
                given |= {"placement": "explicit", "positions_m": [[0.0, 0.0]]}
            cls.model_validate(given)
            accepted = True
        except ValueError:
            accepted = False
        assert accepted == (mode in modes_of[field]), (field, mode)


def test_a_hostile_sweep_json_cannot_rename_a_point_out_of_its_folder(tmp_path):
    """A sweep.json whose record of a point is named .. (or a path) is not taken as that
    point's folder name."""
    from wflsim.app.sweep import adopt_names

    out = tmp_path / "sw"
    out.mkdir()
    plan = plan_sweep(QUICK, ["scheme=ideal"], "0", extra_overrides=QUICK_NET)
    record = {"overrides": ["scheme.name=ideal"], "seed": 0}
    for bad in ("..", ".", "a/b", "", "x" * 300):
        (out / "sweep.json").write_text(json.dumps({"points": {bad: record}}))
        adopt_names(plan, out)
        assert [p.name for p in plan.points] == ["ideal__seed=0"], bad
    (out / "sweep.json").write_text(json.dumps({"points": {"scheme.name=ideal__seed=0": record}}))
    adopt_names(plan, out)
    assert [p.name for p in plan.points] == ["scheme.name=ideal__seed=0"]
    assert set(plan.fingerprints) == {"scheme.name=ideal__seed=0"}


def test_a_point_name_is_never_a_hidden_folder():
    """A value named by itself that starts with a dot does not make a hidden folder."""
    assert _names(["name=.hidden"]) == ["_hidden__seed=0"]
