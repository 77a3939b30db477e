"""Reading traces back: pandas, DuckDB and the stored metadata agree with the run."""

from __future__ import annotations

import re

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from conftest import REPO, base_scenario
from golden_runs import TRAINING_COLUMNS
from wflsim.analysis import load_events, load_manifest, read_metadata
from wflsim.app.run import execute, make_learner, prepare_scenario
from wflsim.sim.config.loading import validate_scenario


def write_run(out, seed: int = 1):
    """A small network-only run of seed ``seed`` written to ``out``."""
    scenario = base_scenario(seed=seed, run={"frames": 3, "slots_per_frame": 4, "deadline_s": 0.8})
    prep = prepare_scenario(validate_scenario(scenario))
    execute(prep, make_learner(prep), out)
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A small network-only run written to disk."""
    return write_run(tmp_path_factory.mktemp("runs") / "r")


def test_duckdb_and_pandas_give_the_same_energy_total(run_dir):
    """The total energy of the energy rows is the same through DuckDB and pandas."""
    path = str(run_dir / "events" / "*.parquet")
    via_duckdb = duckdb.sql(
        f"select sum(energy_j) from '{path}' where event = 'energy'"
    ).fetchall()[0][0]
    via_pandas = float(load_events(run_dir, events=["energy"])["energy_j"].sum())
    assert via_duckdb == pytest.approx(via_pandas, rel=1e-12)


def test_load_events_gives_the_documented_types(run_dir):
    """load_events gives each column its docs/trace.md type (nullable Arrow), `event` a category
    of strings."""
    doc = (REPO / "docs" / "trace.md").read_text()
    documented = dict(re.findall(r"^\| `([a-z_0-9]+)` \| (\w+) \| .+ \| .+ \|$", doc, flags=re.M))
    ev = load_events(run_dir)
    assert isinstance(ev["event"].dtype, pd.CategoricalDtype)
    assert all(isinstance(c, str) for c in ev["event"].cat.categories)
    for name in ev.columns.drop("event"):
        assert ev[name].dtype == pd.ArrowDtype(pa.type_for_alias(documented[name])), name


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
    """The scenario text and seed travel inside the trace files."""
    meta = read_metadata(run_dir)
    assert meta["wflsim.seed"] == "1"
    assert "wflsim.scenario_resolved" in meta


def test_stats_summary_matches_hand_computation(run_dir):
    """stats.summary's energy, participation and latency equal direct computations on the trace."""
    from wflsim.analysis import stats, tidy

    df = load_events(run_dir)
    e = df[df.event == "energy"]
    t = tidy.load(run_dir)
    s = stats.summary(t.device_slots, t.slots, t.evaluations).iloc[0]
    assert s["energy_per_device_slot_j"] == pytest.approx(
        float(e["energy_j"].astype(float).mean()), rel=1e-12
    )
    assert s["participation"] == pytest.approx(float(e["participating"].astype(bool).mean()))
    assert s["slots"] == 12
    assert s["total_latency_s"] == pytest.approx(12 * 0.8)  # fixed_power: every slot lasts tau_0


def test_stats_summary_worst_budget_ratio_by_hand(run_dir):
    """max_budget_ratio is the largest per-device mean energy over that device's budget."""
    from wflsim.analysis import stats, tidy

    df = load_events(run_dir)
    e = df[df.event == "energy"]
    budget = df[df.event == "device_config"].set_index("device")["energy_budget_j"].astype(float)
    mean_e = e.groupby("device")["energy_j"].mean().astype(float)
    t = tidy.load(run_dir)
    s = stats.summary(t.device_slots, t.slots, t.evaluations).iloc[0]
    assert s["max_budget_ratio"] == pytest.approx(float((mean_e / budget).max()), rel=1e-12)


def test_running_average_is_cumulative_mean(run_dir):
    """running_averages' avg_energy_j at the last slot equals the overall per-device-slot mean."""
    from wflsim.analysis import stats, tidy

    df = load_events(run_dir)
    e = df[df.event == "energy"]
    ra = stats.running_averages(tidy.device_slots(run_dir))
    assert len(ra) == 12
    assert ra["avg_energy_j"].iloc[-1] == pytest.approx(
        float(e["energy_j"].astype(float).mean()), rel=1e-12
    )


def test_stats_cli_prints_markdown_summary(run_dir, capsys):
    """python -m wflsim.analysis.stats prints one Markdown row per run with the chosen columns."""
    from wflsim.analysis.stats import main

    assert main([str(run_dir), "--columns", "scheme,slots,total_latency_s"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| scheme | slots | total_latency_s |"
    assert out[2].startswith("| fixed_power | 12 | 9.6")


def test_stats_cli_rejects_unknown_column(run_dir, capsys):
    """An unknown --columns name is a one-line error with exit code 2."""
    from wflsim.analysis.stats import main

    assert main([str(run_dir), "--columns", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --columns: unknown ['nope']") and err.count("\n") == 1


def test_missing_column_of_an_older_trace_reads_as_null(tmp_path):
    """A column asked for but absent from the file (an older trace) comes back all-null."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"event": ["eval", "eval"], "slot": [0, 1]}), tmp_path / "events.parquet"
    )
    df = load_events(tmp_path, columns=["slot", "stable_fraction"])
    assert list(df["slot"]) == [0, 1]
    assert df["stable_fraction"].isna().all() and len(df) == 2


def test_a_linked_or_irregular_trace_part_is_refused(run_dir, tmp_path, capsys):
    """A part in events/ that is a link (to a file elsewhere) or a folder is refused with a
    one-line error (exit 2 from the stats CLI), never read."""
    import shutil

    from wflsim.analysis.io import events_files
    from wflsim.analysis.stats import main

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    parts = events_files(copy)
    outside = tmp_path / "elsewhere.parquet"
    shutil.copy(parts[-1], outside)
    parts[-1].unlink()
    parts[-1].symlink_to(outside)
    with pytest.raises(ValueError, match="is a link"):
        events_files(copy)
    assert main([str(copy)]) == 2
    assert "is a link" in capsys.readouterr().err
    from wflsim.app.cli import main as cli

    assert cli(["report", str(copy), "--out", str(tmp_path / "report")]) == 2  # skipped, none left
    assert "no readable runs" in capsys.readouterr().err and not (tmp_path / "report").exists()
    parts[-1].unlink()
    parts[-1].mkdir()
    with pytest.raises(ValueError, match="not a regular file"):
        events_files(copy)


def test_duckdb_view_of_a_folder_named_like_a_glob_reads_that_folder(tmp_path):
    """The DuckDB view of run folder exp[1] reads exp[1]'s trace, not that of its neighbour exp1
    (which the name matches as a glob pattern)."""
    from wflsim.analysis import tidy

    literal = write_run(tmp_path / "exp[1]", seed=2)
    write_run(tmp_path / "exp1", seed=3)
    con = duckdb.connect()
    info = tidy.duckdb_view(con, str(literal))
    assert info["seed"].tolist() == [2]
    assert con.sql("select distinct seed from events").fetchall() == [(2,)]
    assert con.sql("select count(*) from events").fetchall()[0][0] == len(load_events(literal))


# ---------------------------------------------------------------------- the manifest vouches


def damaged_copy(run_dir, tmp_path, name: str = "copy"):
    """A copy of ``run_dir`` to damage."""
    import shutil

    return shutil.copytree(run_dir, tmp_path / name)


def test_load_run_refuses_a_completed_run_missing_a_part(run_dir, tmp_path):
    """A completed run whose part of frame 1 was deleted: its events are refused, naming the
    part, instead of a trace with a hole under the summary of the full run."""
    import wflsim

    copy = damaged_copy(run_dir, tmp_path)
    (copy / "events" / "part-000001.parquet").unlink()
    with pytest.raises(ValueError, match=r"part-000001\.parquet: is listed .* but missing"):
        _ = wflsim.load_run(copy).events


def test_a_part_swapped_in_from_another_seed_is_refused(run_dir, tmp_path):
    """Frame 1's part replaced by frame 1's part of a run of another seed: refused by its
    BLAKE3 hash, naming the part and --overwrite."""
    other = write_run(tmp_path / "other", seed=7)
    copy = damaged_copy(run_dir, tmp_path)
    name = "part-000001.parquet"
    (copy / "events" / name).write_bytes((other / "events" / name).read_bytes())
    with pytest.raises(ValueError, match="BLAKE3") as err:
        load_events(copy)
    assert name in str(err.value) and "--overwrite" in str(err.value)


def test_a_copied_part_the_manifest_does_not_list_is_refused(run_dir, tmp_path):
    """A copy of frame 0's part as part-000030.parquet (frame 0 counted twice) is refused."""
    copy = damaged_copy(run_dir, tmp_path)
    extra = copy / "events" / "part-000030.parquet"
    extra.write_bytes((copy / "events" / "part-000000.parquet").read_bytes())
    with pytest.raises(ValueError, match="not listed in manifest.json"):
        load_events(copy)


def test_without_digests_a_part_of_another_frame_is_refused_by_its_rows(run_dir, tmp_path):
    """verify=False checks each part's row count (the footer) instead of its hash: frame 0's
    part (with the device_config rows) in place of frame 2's is refused."""
    copy = damaged_copy(run_dir, tmp_path)
    events = copy / "events"
    (events / "part-000002.parquet").write_bytes((events / "part-000000.parquet").read_bytes())
    with pytest.raises(ValueError, match="rows where manifest.json records"):
        load_events(copy, verify=False)


def test_a_truncated_manifest_is_refused_by_readers(run_dir, tmp_path):
    """A manifest.json cut in half: load_run and load_events say it is not readable and how to
    compute the run again, instead of a JSON parser's error."""
    import wflsim

    copy = damaged_copy(run_dir, tmp_path)
    text = (copy / "manifest.json").read_text()
    (copy / "manifest.json").write_text(text[: len(text) // 2])
    for read in (wflsim.load_run, load_events):
        with pytest.raises(ValueError, match="manifest.json: is not readable") as err:
            read(copy)
        assert "--overwrite" in str(err.value)


def test_a_run_folder_without_its_manifest_is_refused_by_readers(run_dir, tmp_path):
    """A run folder (marker, parts) whose manifest.json was deleted: nothing vouches for its
    parts, so they are refused rather than read unchecked."""
    copy = damaged_copy(run_dir, tmp_path)
    (copy / "manifest.json").unlink()
    with pytest.raises(ValueError, match="manifest.json: is missing"):
        load_events(copy)


def test_a_completed_manifest_cut_short_with_its_last_part_is_refused(run_dir, tmp_path):
    """The last part and its manifest entry both removed from a completed run: the manifest
    still counts every frame, so the shortened trace is refused."""
    import json

    copy = damaged_copy(run_dir, tmp_path)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["parts"].pop()
    (copy / "manifest.json").write_text(json.dumps(manifest))
    (copy / "events" / "part-000002.parquet").unlink()
    with pytest.raises(ValueError, match="lists 2 parts but says 3 frames"):
        load_events(copy)


def test_the_part_in_flight_of_a_stopped_run_is_not_read(run_dir, tmp_path):
    """A run that stopped (status failed) with frame 2's part on disk but not yet in its
    manifest (the frame in flight): readers read the listed frames 0 and 1 only."""
    import json

    copy = damaged_copy(run_dir, tmp_path)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["parts"].pop()
    manifest.update(status="failed", frames_completed=2)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    ev = load_events(copy)
    assert sorted(ev["frame"].unique()) == [0, 1]
    assert len(ev) == sum(p["rows"] for p in manifest["parts"])


def test_duckdb_view_refuses_a_part_the_manifest_does_not_list(run_dir, tmp_path):
    """The DuckDB view of a run holding a copied part-000030.parquet is refused, not made over
    a trace that counts frame 0 twice."""
    from wflsim.analysis import tidy

    copy = damaged_copy(run_dir, tmp_path)
    events = copy / "events"
    (events / "part-000030.parquet").write_bytes((events / "part-000000.parquet").read_bytes())
    con = duckdb.connect()
    with pytest.raises(ValueError, match="part-000030.parquet: is not listed"):
        tidy.duckdb_view(con, copy)
    assert con.sql("select count(*) from duckdb_views() where view_name = 'events'").fetchall() == [
        (0,)
    ]


#: The columns schema 11 added (issue 47): a trace of schema 10 or older has none of them.
SCHEMA_11_COLUMNS = (
    "sinr_db",
    "interference_w",
    "edge",
    "edge_data_weight",
    "cloud_weight",
    "backhaul_up_s",
    "backhaul_down_s",
    *TRAINING_COLUMNS[3:],  # AirComp's learner-side columns
)


def test_a_schema_10_trace_reads_with_its_newer_columns_null(run_dir, tmp_path):
    """A trace without schema 11's columns (as schema 10 wrote it) loads, its tidy tables build, and those columns asked for come back all-null."""
    import pyarrow.parquet as pq

    from wflsim.analysis.tidy import device_slots_from_events, slots_from_events

    table = load_events(run_dir).pipe(pa.Table.from_pandas, preserve_index=False)
    old = table.drop_columns(list(SCHEMA_11_COLUMNS))
    pq.write_table(old, tmp_path / "events.parquet")
    ev = load_events(tmp_path)
    assert not set(SCHEMA_11_COLUMNS) & set(ev.columns)
    slots = slots_from_events(ev, device_slots_from_events(ev))
    assert len(slots) == ev["slot"][ev["slot"] >= 0].nunique()
    asked = load_events(tmp_path, columns=["slot", *SCHEMA_11_COLUMNS])
    assert all(asked[c].isna().all() for c in SCHEMA_11_COLUMNS)
