"""Reading traces back: pandas, DuckDB and the stored metadata agree with the run."""

from __future__ import annotations

import duckdb
import pytest

from analysis import load_events, load_manifest, read_metadata
from conftest import base_scenario
from sim.run import execute, make_learner, prepare_scenario
from sim.scenario import validate_scenario


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A small network-only run written to disk."""
    out = tmp_path_factory.mktemp("runs") / "r"
    prep = prepare_scenario(
        validate_scenario(base_scenario(run={"frames": 3, "slots_per_frame": 4, "deadline_s": 0.8}))
    )
    execute(prep, make_learner(prep), out)
    return out


def test_duckdb_and_pandas_give_the_same_energy_total(run_dir):
    """The total energy of the energy rows is the same through DuckDB and pandas."""
    path = str(run_dir / "events.parquet")
    via_duckdb = duckdb.sql(
        f"select sum(energy_j) from '{path}' where event = 'energy'"
    ).fetchall()[0][0]
    via_pandas = float(load_events(run_dir, events=["energy"])["energy_j"].sum())
    assert via_duckdb == pytest.approx(via_pandas, rel=1e-12)


def test_manifest_total_matches_the_trace(run_dir):
    """manifest.json's total energy equals the sum over the trace's energy rows."""
    total = float(load_events(run_dir, events=["energy"])["energy_j"].sum())
    assert load_manifest(run_dir)["summary"]["total_energy_j"] == pytest.approx(total, rel=1e-12)


def test_event_filter_and_nulls(run_dir):
    """Filtering by event keeps only those rows, and server rows have a null device."""
    df = load_events(run_dir, events=["aggregate", "deadline"])
    assert set(df["event"].astype(str)) == {"aggregate", "deadline"}
    assert df["device"].isna().all()


def test_parquet_metadata_holds_the_scenario(run_dir):
    """The scenario text and seed travel inside events.parquet."""
    meta = read_metadata(run_dir)
    assert meta["wflsim.seed"] == "1"
    assert "wflsim.scenario_resolved" in meta


def test_run_summary_matches_hand_computation(run_dir):
    """run_summary's energy, participation and latency equal direct computations on the trace."""
    from analysis.metrics import run_summary

    df = load_events(run_dir)
    e = df[df.event == "energy"]
    s = run_summary(run_dir)
    assert s["energy_per_slot_j"] == pytest.approx(
        float(e["energy_j"].astype(float).mean()), rel=1e-12
    )
    assert s["participation"] == pytest.approx(float(e["participating"].astype(bool).mean()))
    assert s["slots"] == 12
    assert s["total_latency_s"] == pytest.approx(12 * 0.8)  # fixed_power: every slot lasts tau_0


def test_running_average_is_cumulative_mean(run_dir):
    """running_averages' avg_energy_j at the last slot equals the overall per-device-slot mean."""
    from analysis.metrics import run_summary, running_averages

    ra = running_averages(run_dir)
    assert len(ra) == 12
    assert ra["avg_energy_j"].iloc[-1] == pytest.approx(
        run_summary(run_dir)["energy_per_slot_j"], rel=1e-12
    )
