"""The Python API (wflsim): runs, sweeps, resume and loading, against the command line."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wflsim
from conftest import base_scenario, failing_at_frame
from wflsim.analysis.io import load_events
from wflsim.app.cli import main
from wflsim.sim.config.loading import scenario_text, validate_scenario
from wflsim.sim.errors import ScenarioError

SMALL = base_scenario(
    run={"frames": 3, "slots_per_frame": 4, "deadline_s": 0.8},
    network={"num_devices": 8, "cell_radius_m": 500.0},
    mobility={"model": "random_waypoint", "speed_mps": [1.0, 2.0]},
    scheme={"name": "two_timescale", "V": 10.0},
)


def write_small(tmp_path: Path) -> Path:
    """SMALL as a scenario file."""
    path = tmp_path / "small.toml"
    path.write_text(scenario_text(SMALL))
    return path


def test_in_memory_run_equals_the_cli_run(tmp_path):
    """wflsim.run without a folder has the events `wflsim run` writes, column for column."""
    path = write_small(tmp_path)
    assert main(["run", str(path), "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    api = wflsim.run(path)
    cli = load_events(tmp_path / "cli")
    pd.testing.assert_frame_equal(api.events, cli)
    assert api.folder is None and api.manifest is None and api.status == "completed"


def test_folder_run_equals_the_cli_run_and_loads_back(tmp_path):
    """wflsim.run(out=...) writes the CLI's run folder; load_run reads the same result."""
    path = write_small(tmp_path)
    assert main(["run", str(path), "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    res = wflsim.run(path, out=tmp_path / "api")
    assert res.status == "completed" and res.manifest is not None
    pd.testing.assert_frame_equal(res.events, load_events(tmp_path / "cli"))
    back = wflsim.load_run(tmp_path / "api")
    assert back.summary == res.summary
    pd.testing.assert_frame_equal(back.events, res.events)


def test_file_dict_and_scenario_give_the_same_events(tmp_path):
    """A scenario as a file, as a dict and as a validated Scenario runs identically."""
    from_file = wflsim.run(write_small(tmp_path)).events
    from_dict = wflsim.run(SMALL).events
    from_model = wflsim.run(validate_scenario(SMALL)).events
    pd.testing.assert_frame_equal(from_file, from_dict)
    pd.testing.assert_frame_equal(from_file, from_model)


def test_overrides_and_seed_act_as_on_the_command_line(tmp_path):
    """overrides and seed equal --set and --seed of the CLI."""
    path = write_small(tmp_path)
    args = ["--set", "scheme.V=100", "--seed", "5", "--quiet"]
    assert main(["run", str(path), "--out", str(tmp_path / "cli"), *args]) == 0
    api = wflsim.run(SMALL, overrides=["scheme.V=100"], seed=5)
    pd.testing.assert_frame_equal(api.events, load_events(tmp_path / "cli"))
    assert api.scenario["seed"] == 5 and api.scenario["scheme"]["V"] == 100.0


def test_the_resolved_scenario_of_a_result_runs_again_identically():
    """RunResult.scenario (the resolved table) reproduces the run."""
    first = wflsim.run(SMALL)
    pd.testing.assert_frame_equal(wflsim.run(first.scenario).events, first.events)


def test_tidy_tables_of_a_result():
    """A result's slots table has one row per slot and sums the device-slot energies."""
    res = wflsim.run(SMALL)
    assert len(res.slots) == 3 * 4
    assert math.isclose(
        float(res.slots["energy_j"].sum()), float(res.device_slots["energy_j"].sum()), rel_tol=1e-9
    )


def test_a_bad_scenario_raises_and_writes_nothing(tmp_path):
    """An invalid field raises ScenarioError naming it; the out folder is not created."""
    with pytest.raises(ScenarioError) as err:
        wflsim.run(SMALL, overrides=["network.num_devices=0"], out=tmp_path / "x")
    assert err.value.field == "network.num_devices"
    assert not (tmp_path / "x").exists()


def test_something_that_is_not_a_scenario_is_refused():
    """A number is not a scenario: ScenarioError naming 'scenario'."""
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(42)  # type: ignore[arg-type]
    assert err.value.field == "scenario"


def test_resume_continues_a_failed_run_to_the_uninterrupted_events(tmp_path):
    """wflsim.resume after a failure in frame 2 gives the uninterrupted run's events."""
    with pytest.raises(RuntimeError):
        wflsim.run(SMALL, out=tmp_path / "r", hooks=failing_at_frame(2))
    assert wflsim.load_run(tmp_path / "r").status == "failed"
    res = wflsim.resume(tmp_path / "r")
    assert res.status == "completed"
    pd.testing.assert_frame_equal(res.events, wflsim.run(SMALL).events)


def test_sweep_from_python_equals_the_cli_sweep(tmp_path):
    """wflsim.sweep with a dict grid and seed list makes the CLI's points with the same events."""
    path = write_small(tmp_path)
    grid = ["--grid", "scheme.name=two_timescale,only_pc", "--seeds", "0-1", "--quiet"]
    assert main(["sweep", str(path), "--out", str(tmp_path / "cli"), *grid]) == 0
    sw = wflsim.sweep(
        path, {"scheme.name": ["two_timescale", "only_pc"]}, [0, 1], out=tmp_path / "api"
    )
    cli = wflsim.load_sweep(tmp_path / "cli")
    assert sorted(sw.points) == sorted(cli.points) and len(sw.points) == 4
    for name in sw.points:
        assert sw.points[name]["status"] == "completed"
        pd.testing.assert_frame_equal(sw.run(name).events, cli.run(name).events)
    assert len(sw.runs_table()) == 4
    assert set(sw.load().slots["scheme"]) == {"two_timescale", "only_pc"}


def test_grid_values_from_python_are_set_as_given(tmp_path):
    """A grid value given from Python is the value itself, never --grid text read back: text
    holding a comma is one value, and the text "true" stays text (not the bool)."""
    sw = wflsim.sweep(
        write_small(tmp_path), {"name": ["a,b", "true"]}, [0], out=tmp_path / "s", progress=False
    )
    names = sorted(run.scenario["name"] for run in (sw.run(p) for p in sw.points))
    assert names == ["a,b", "true"]
    grid = json.loads((tmp_path / "s" / "sweep.json").read_text())["grid"]
    assert grid == [{"field": "name", "values": ["a,b", "true"]}]


_KEY = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_SCALAR = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
)
_VALUE = st.one_of(
    _SCALAR,
    st.lists(_SCALAR, max_size=4),
    st.dictionaries(_KEY, _SCALAR, max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(_KEY, _SCALAR, max_size=3),
    st.dictionaries(_KEY, st.dictionaries(_KEY, _VALUE, max_size=4), max_size=4),
)
def test_scenario_text_round_trips_through_tomllib(top, sections):
    """tomllib.loads(scenario_text(table)) == table for tables of TOML values."""
    table = {**top, **{k: v for k, v in sections.items() if k not in top}}
    assert tomllib.loads(scenario_text(table)) == table
