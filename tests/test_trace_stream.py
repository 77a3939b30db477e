"""The trace leaves memory slot by slot: the buffer's table and the streamed parts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import base_scenario, run_in_memory
from wflsim.sim.trace import COLUMNS, EVENTS, SCHEMA, TraceBuffer


def reference_table(blocks: list[tuple[str, int, dict]]) -> pa.Table:
    """The table of ``blocks`` built the plain way: one Arrow array per block and column,
    concatenated (what :meth:`TraceBuffer.to_table` must equal)."""
    arrays = []
    for name, (typ, _, _) in COLUMNS.items():
        parts = []
        for event, n, cols in blocks:
            v = event if name == "event" else cols.get(name)
            if name == "event":
                parts.append(pa.array([event] * n, pa.string()).dictionary_encode())
            elif v is None:
                parts.append(pa.nulls(n, typ))
            elif isinstance(v, np.ma.MaskedArray):
                parts.append(pa.array(np.ma.getdata(v), typ, mask=np.ma.getmaskarray(v)))
            elif isinstance(v, np.ndarray):
                parts.append(pa.array(v, typ))
            else:
                parts.append(pa.array([v] * n, typ))
        col = pa.chunked_array(parts, parts[0].type if parts else typ).combine_chunks()
        arrays.append(col.cast(typ) if name != "event" else col.cast(pa.string()))
    return pa.Table.from_arrays(arrays, names=list(COLUMNS))


_FLOAT_COLS = [n for n, (t, _, _) in COLUMNS.items() if t == pa.float64()][:6]


@st.composite
def blocks(draw):
    out = []
    for _ in range(draw(st.integers(1, 5))):
        n = draw(st.integers(1, 6))
        cols: dict = {
            "time_s": draw(st.floats(0, 10)),
            "frame": 0,
            "slot": draw(st.integers(-1, 9)),
        }
        for name in draw(st.lists(st.sampled_from(_FLOAT_COLS), unique=True, max_size=4)):
            kind = draw(st.sampled_from(["array", "scalar", "masked"]))
            values = np.array(draw(st.lists(st.floats(-1e9, 1e9), min_size=n, max_size=n)))
            if kind == "array":
                cols[name] = values
            elif kind == "scalar":
                cols[name] = float(values[0])
            else:
                mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
                cols[name] = np.ma.MaskedArray(values, mask=mask)
        cols["device"] = np.arange(n, dtype=np.int32)  # an array sets the block's length
        if draw(st.booleans()):
            cols["success"] = np.ma.MaskedArray(np.ones(n, bool), mask=np.arange(n) % 2 == 0)
        out.append((draw(st.sampled_from(sorted(EVENTS))), n, cols))
    return out


@settings(max_examples=100, deadline=None)
@given(blocks())
def test_buffer_table_equals_the_plain_construction(bs):
    """TraceBuffer.to_table (each column built once) equals per-block arrays concatenated, nulls included."""
    buf = TraceBuffer()
    for event, _, cols in bs:
        c = dict(cols)
        buf.add(event, c.pop("time_s"), c.pop("frame"), c.pop("slot"), c.pop("device", None), **c)
    table = buf.to_table()
    assert table.schema == SCHEMA and buf.num_rows == 0
    got = table.set_column(
        table.column_names.index("event"), "event", table.column("event").cast(pa.string())
    )
    want = reference_table(
        [
            (e, n, {"time_s": c["time_s"], "frame": c["frame"], "slot": c["slot"], **c})
            for e, n, c in bs
        ]
    )
    assert got.equals(want)


def test_parts_hold_a_row_group_per_slot_and_the_in_memory_events(tmp_path, monkeypatch):
    """With a row group as small as a slot, a run folder's part holds one row group per slot
    (and one for the frame's closing rows); the parts read back are the in-memory run's events."""
    import wflsim
    from wflsim.sim.engine import Engine

    monkeypatch.setattr(Engine, "row_group_rows", 1)
    data = base_scenario(run={"frames": 2, "slots_per_frame": 5, "deadline_s": 0.8})
    out = tmp_path / "run"
    wflsim.run(data, out=out)
    parts = sorted((out / "events").glob("part-*.parquet"))
    assert [pq.ParquetFile(p).metadata.num_row_groups for p in parts] == [6, 6]
    on_disk = pa.concat_tables(pq.read_table(p).replace_schema_metadata(None) for p in parts)
    in_memory, _ = run_in_memory(data)
    assert on_disk.combine_chunks().equals(in_memory.combine_chunks())


def _codecs(path) -> set[str]:
    meta = pq.ParquetFile(path).metadata
    return {
        meta.row_group(g).column(c).compression
        for g in range(meta.num_row_groups)
        for c in range(meta.num_columns)
    }


def test_the_trace_codec_is_the_scenarios_and_leaves_the_data_unchanged(tmp_path):
    """``[trace] compression`` picks the parts' Parquet codec (lz4 by default); zstd and lz4 parts
    read back as the same table."""
    import wflsim

    tables = {}
    for codec in ("lz4", "zstd"):
        data = base_scenario(run={"frames": 2, "slots_per_frame": 3})
        if codec != "lz4":
            data["trace"] = {"compression": codec}
        out = tmp_path / codec
        wflsim.run(data, out=out)
        parts = sorted((out / "events").glob("part-*.parquet"))
        assert {c for p in parts for c in _codecs(p)} == {codec.upper()}
        tables[codec] = pa.concat_tables(pq.read_table(p) for p in parts).replace_schema_metadata(
            None
        )
    assert tables["lz4"].equals(tables["zstd"])


def test_parts_keep_statistics_of_the_key_columns_only(tmp_path):
    """A part's row groups carry min/max statistics for time, frame, slot and device (what
    readers filter on), and none for the other columns."""
    import wflsim

    out = tmp_path / "run"
    wflsim.run(base_scenario(run={"frames": 1, "slots_per_frame": 3}), out=out)
    meta = pq.ParquetFile(out / "events" / "part-000000.parquet").metadata
    rg = meta.row_group(0)
    with_stats = {rg.column(c).path_in_schema for c in range(meta.num_columns)
                  if rg.column(c).is_stats_set}  # fmt: skip
    assert with_stats == {"time_s", "frame", "slot", "device"}


def test_small_frames_are_one_row_group(tmp_path):
    """A frame with fewer rows than a row group is written as one row group."""
    import wflsim

    out = tmp_path / "run"
    wflsim.run(base_scenario(run={"frames": 2, "slots_per_frame": 5}), out=out)
    parts = sorted((out / "events").glob("part-*.parquet"))
    assert [pq.ParquetFile(p).metadata.num_row_groups for p in parts] == [1, 1]


def test_a_run_failing_mid_frame_leaves_no_part_of_it_and_resumes_identically(
    tmp_path, monkeypatch
):
    """Rows of a frame already written as row groups when the run fails leave no file behind;
    --resume gives the uninterrupted run's events."""
    import wflsim
    from wflsim.app.cli import main
    from wflsim.sim.engine import Engine

    monkeypatch.setattr(Engine, "row_group_rows", 1)
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "stream"\nseed = 2\n[run]\nframes = 3\nslots_per_frame = 5\n'
        "[network]\nnum_devices = 6\n[learning]\nenabled = false\nnum_params = 100000\n"
        '[scheme]\nname = "two_timescale"\n'
    )

    def failing(engine, t, outcome):
        if t == 7:  # frame 1, after two of its slots were handed to the writer
            raise OSError(28, "No space left on device")

    out = tmp_path / "run"
    argv = ["run", str(path), "--out", str(out), "--quiet"]
    assert main(argv, hooks=wflsim.Hooks(slot_end=failing)) == 1
    assert sorted(p.name for p in (out / "events").iterdir()) == ["part-000000.parquet"]
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    parts = sorted((out / "events").glob("part-*.parquet"))
    on_disk = pa.concat_tables(pq.read_table(p).replace_schema_metadata(None) for p in parts)
    whole = tmp_path / "whole"
    assert main(["run", str(path), "--out", str(whole), "--quiet"]) == 0
    ref = pa.concat_tables(
        pq.read_table(p).replace_schema_metadata(None)
        for p in sorted((whole / "events").glob("part-*.parquet"))
    )
    assert on_disk.combine_chunks().equals(ref.combine_chunks())


def test_values_a_column_cannot_hold_are_refused_when_added():
    """An array of the wrong length, or values an integer column cannot hold exactly (out of range, fractional, NaN), is refused by add, and the buffer keeps its rows."""
    import pytest

    buf = TraceBuffer()
    buf.add("decision", 0.0, 0, 0, np.arange(3, dtype=np.int32), energy_j=np.ones(3))
    for cols in (
        {"device": np.array([1, 2**31 + 5, 0])},
        {"device": np.arange(3), "sent_values": np.array([1.5, 2.0, 3.0])},
        {"device": np.arange(3), "iterations": np.array([np.nan, 3.0, 1.0])},
        {"device": np.arange(3), "energy_j": np.array([7.0])},
    ):
        with pytest.raises(ValueError, match="trace column"):
            buf.add("decision", 0.0, 0, 0, **cols)
    assert buf.num_rows == 3 and buf.to_table().num_rows == 3


def test_an_interrupt_while_a_frame_is_handed_over_leaves_no_temporary_part(tmp_path, monkeypatch):
    """Ctrl-C at the instant a frame's part passes to the writer thread: the run says
    interrupted and no hidden temporary part (or open file) is left behind."""
    import json

    from wflsim.app import recorder
    from wflsim.app.cli import main
    from wflsim.sim.config.loading import scenario_text
    from wflsim.sim.engine import Engine

    monkeypatch.setattr(Engine, "row_group_rows", 1)
    calls = {"n": 0}
    original = recorder.log.info

    def interrupting(msg, *args):
        if msg.startswith("frame"):
            calls["n"] += 1
            if calls["n"] == 2:
                raise KeyboardInterrupt
        original(msg, *args)

    monkeypatch.setattr(recorder.log, "info", interrupting)
    out = tmp_path / "run"
    data = base_scenario(run={"frames": 3, "slots_per_frame": 4})
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(data))
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 130
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    assert sorted(p.name for p in (out / "events").iterdir()) == ["part-000000.parquet"]


def test_part_writer_hash_matches_the_file_bytes(tmp_path, monkeypatch) -> None:
    """A part's BLAKE3, computed in its own thread in small chunks as the file grows, is that of
    the file's bytes."""
    import blake3

    from wflsim.app import recorder

    monkeypatch.setattr(recorder, "WRITE_BUFFER_BYTES", 4096)  # many writes while it hashes
    monkeypatch.setattr(recorder, "HASH_CHUNK_BYTES", 1000)
    rng = np.random.default_rng(3)
    writer = recorder.PartWriter(tmp_path / "part-000000.parquet", {b"k": b"v"})
    for _ in range(5):
        buf = TraceBuffer()
        n = 2000
        buf.add("energy", 1.0, 0, 0, device=np.arange(n), energy_j=rng.uniform(0, 1, n))
        writer.write(buf.to_table())
    digest = writer.finish()
    data = (tmp_path / "part-000000.parquet").read_bytes()
    assert len(data) > 20 * 4096
    assert writer.algorithm == "blake3"
    assert digest == blake3.blake3(data).hexdigest()
    assert pq.read_table(tmp_path / "part-000000.parquet").num_rows == 10_000
