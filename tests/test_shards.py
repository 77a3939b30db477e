"""A frame's part written as several shard files (issue 49): the same rows in the same order as
one file per frame, names that sort in row order, crash safety and verification shard by shard,
and folders of one file per frame (old or small runs) that still read and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_resume import fail_at_frame, run, scenario, strict

from wflsim.analysis.io import load_events
from wflsim.app import recorder
from wflsim.sim import rundir
from wflsim.sim.engine import Engine
from wflsim.sim.trace import MAX_SHARDS, list_parts, part_frame, part_name, shard_name


def force_shards(monkeypatch) -> None:
    """Shard every frame in 2 (as on a 2-core machine), each slot its own row group."""
    monkeypatch.setattr(recorder, "SHARD_MIN_ROWS", 0)
    monkeypatch.setattr(recorder, "available_cores", lambda: 2)
    monkeypatch.setattr(Engine, "row_group_rows", 1)


def write_run(tmp_path: Path, name: str, monkeypatch=None, fail: int | None = None) -> Path:
    """The resume scenario (6 frames x 4 slots) run into ``tmp_path/name``, sharded where
    ``monkeypatch`` is given, failed in frame ``fail`` if given; the run folder."""
    path, out = scenario(tmp_path), tmp_path / name
    with pytest.MonkeyPatch.context() as m:
        if monkeypatch is not None:
            force_shards(m)
        if fail is not None:
            fail_at_frame(m, fail)
        assert run(str(path), "--out", str(out)) == (0 if fail is None else 1)
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    """The scenario's uninterrupted run, one file per frame."""
    return write_run(tmp_path_factory.mktemp("plain"), "run")


@pytest.fixture
def sharded(tmp_path, monkeypatch) -> Path:
    """The scenario's uninterrupted run with every frame in 2 shards."""
    return write_run(tmp_path, "sharded", monkeypatch)


def test_a_sharded_run_reads_back_as_the_unsharded_run(sharded, plain):
    """Every frame in 2 shards gives exactly the rows, order and values of one file per frame."""
    assert load_events(sharded).equals(load_events(plain))


def test_a_shard_backlog_of_one_hand_over_reads_back_the_same(tmp_path, monkeypatch, plain):
    """With each shard's backlog bounded to one hand-over (the simulation waits for every
    previous write of the shard) the rows are still exactly the unsharded run's."""
    monkeypatch.setattr(recorder, "SHARD_BACKLOG_ROWS", 1)
    assert load_events(write_run(tmp_path, "run", monkeypatch)).equals(load_events(plain))


def test_a_sharded_frame_lists_its_shards_with_rows_and_hashes(sharded):
    """Each frame's entry lists part-NNNNNN-00 and -01 with their rows (adding up to the
    frame's) and the BLAKE3 of each file; no single "file" of its own."""
    import blake3

    for e in strict(sharded / "manifest.json")["parts"]:
        f = e["frame"]
        assert "file" not in e
        assert [s["file"] for s in e["files"]] == [f"events/{shard_name(f, s)}" for s in (0, 1)]
        assert sum(s["rows"] for s in e["files"]) == e["rows"]
        for s in e["files"]:
            assert s["blake3"] == blake3.blake3((sharded / s["file"]).read_bytes()).hexdigest()


def test_pandas_reads_a_sharded_events_folder_in_row_order(sharded, plain):
    """pd.read_parquet(run / "events"), as docs/trace.md shows, gives the rows in order."""
    got = pd.read_parquet(sharded / "events")
    assert got.equals(pd.read_parquet(plain / "events"))


def test_duckdb_reads_a_sharded_events_glob_in_row_order(sharded, plain):
    """DuckDB's read_parquet('run/events/*.parquet'), as docs/trace.md shows, gives the rows in
    order."""
    import duckdb

    def read(run: Path) -> pd.DataFrame:
        with duckdb.connect() as con:
            return con.execute(f"select * from read_parquet('{run}/events/*.parquet')").df()

    assert read(sharded).equals(read(plain))


def test_a_small_run_keeps_one_file_per_frame(plain):
    """Without many rows per frame nothing is sharded: entries are as before shards existed."""
    entries = strict(plain / "manifest.json")["parts"]
    assert [sorted(e) for e in entries] == [["blake3", "file", "frame", "rows"]] * 6
    assert [p.name for _, p in list_parts(plain / "events")] == [part_name(f) for f in range(6)]


@settings(max_examples=50, deadline=None)
@given(
    frames=st.dictionaries(
        st.integers(0, 999_999), st.integers(0, MAX_SHARDS), min_size=1, max_size=30
    )
)
def test_shard_names_sort_in_row_order(frames):
    """Lexicographic order of any mix of whole parts (0 shards) and shards is frame order, a
    frame's shards by index, and every name parses back to its frame."""
    files = [
        (f, s, shard_name(f, s) if n else part_name(f))
        for f, n in frames.items()
        for s in range(max(n, 1))
    ]
    assert sorted(name for *_, name in files) == [name for *_, name in sorted(files)]
    assert all(part_frame(name) == f for f, _, name in files)


def test_a_kill_between_shards_resumes_to_the_uninterrupted_trace(tmp_path, monkeypatch, plain):
    """Frame 3's first shard in place and its second failed (manifest not updated): the run
    resumes to exactly the uninterrupted run's rows."""
    force_shards(monkeypatch)
    finish = recorder.PartWriter.finish

    def fail_second_shard(self):
        if self.path.name == shard_name(3, 1):
            raise OSError("injected")
        return finish(self)

    path, out = scenario(tmp_path), tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(recorder.PartWriter, "finish", fail_second_shard)
        assert run(str(path), "--out", str(out)) == 1
    assert (out / "events" / shard_name(3, 0)).is_file()
    assert strict(out / "manifest.json")["frames_completed"] == 3
    assert run("--resume", str(out)) == 0
    assert load_events(out).equals(load_events(plain))


def test_an_unsharded_folder_resumes_with_shards(tmp_path, monkeypatch, plain):
    """A folder of one file per frame (written before shards) resumed with sharding on reads,
    names mixed, to the uninterrupted run's rows."""
    out = write_run(tmp_path, "run", fail=3)
    force_shards(monkeypatch)
    assert run("--resume", str(out)) == 0
    names = [p.name for _, p in list_parts(out / "events")]
    assert names[:4] == [part_name(0), part_name(1), part_name(2), shard_name(3, 0)]
    assert load_events(out).equals(load_events(plain))


def test_a_missing_shard_of_a_recorded_frame_is_refused(sharded):
    """A listed shard deleted: reading refuses with one line naming the file."""
    (sharded / "events" / shard_name(2, 1)).unlink()
    with pytest.raises(rundir.RunFolderError, match=rf"{shard_name(2, 1)}: is listed .* missing"):
        load_events(sharded)


def test_a_replaced_shard_of_a_recorded_frame_is_refused(sharded):
    """A listed shard replaced by its neighbour: reading refuses naming the file and BLAKE3."""
    events = sharded / "events"
    (events / shard_name(2, 1)).write_bytes((events / shard_name(2, 0)).read_bytes())
    with pytest.raises(
        rundir.RunFolderError, match=rf"{shard_name(2, 1)}: does not match the BLAKE3"
    ):
        load_events(sharded)


def test_a_replaced_shard_is_refused_by_resume(tmp_path, monkeypatch, capsys):
    """--resume of a failed sharded run with a kept shard replaced exits 2 naming the file."""
    out = write_run(tmp_path, "run", monkeypatch, fail=3)
    events = out / "events"
    (events / shard_name(1, 1)).write_bytes((events / shard_name(1, 0)).read_bytes())
    capsys.readouterr()
    force_shards(monkeypatch)
    assert run("--resume", str(out)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and shard_name(1, 1) in err and "BLAKE3" in err


def test_a_shard_added_beside_a_recorded_frame_is_refused(sharded):
    """A third shard copied in beside frame 1's two: refused as no part of the run."""
    events = sharded / "events"
    (events / shard_name(1, 2)).write_bytes((events / shard_name(1, 1)).read_bytes())
    with pytest.raises(rundir.RunFolderError, match=rf"{shard_name(1, 2)}: is not listed"):
        load_events(sharded)


@pytest.mark.parametrize(
    "change",
    [
        lambda e: e["files"][1].update(rows=e["files"][1]["rows"] + 1),
        lambda e: e["files"][1].update(file="events/" + shard_name(0, 2)),
        lambda e: e.update(file="events/" + part_name(0)),
        lambda e: e.update(files=[]),
    ],
    ids=["rows do not add up", "a shard skipped", "file and files", "no shard"],
)
def test_an_edited_sharded_entry_is_refused(sharded, change):
    """A sharded entry edited (rows, names, shape) is refused naming the manifest's entry."""
    manifest = json.loads((sharded / "manifest.json").read_text())
    change(manifest["parts"][0])
    with pytest.raises(rundir.RunFolderError, match="entry 0 of its 'parts'"):
        rundir.listed_parts(sharded, manifest)
