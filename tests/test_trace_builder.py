"""The trace builder (TraceBuffer.to_table) gives the same table and Parquet bytes as before."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from golden_runs import column_hashes
from wflsim.sim.trace import COLUMNS, EVENTS, SCHEMA, TraceBuffer, encode_part

_EVENT_CODE = {name: i for i, name in enumerate(EVENTS)}
_EVENT_DICT = pa.array(list(EVENTS), pa.string())
_NUMPY_TYPES = {pa.float64(): np.float64, pa.int32(): np.int32, pa.int64(): np.int64,
                pa.bool_(): np.bool_, pa.int8(): np.int8}  # fmt: skip


def previous_table(blocks: list[tuple[int, dict[str, Any]]], total: int) -> pa.Table:
    """The table of a buffer's blocks as the builder before issue 36 made it (commit 823c0e1,
    kept verbatim as the reference): NumPy columns handed to ``pa.array`` with a null mask."""
    starts = np.cumsum([0] + [n for n, _ in blocks])
    arrays = []
    for name, (typ, _, _) in COLUMNS.items():
        if name == "event":
            idx = np.empty(total, np.int8)
            for (n, b), lo in zip(blocks, starts, strict=False):
                ev = b["event"]
                idx[lo : lo + n] = _EVENT_CODE[ev] if isinstance(ev, str) else ev
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(idx, pa.int8()), _EVENT_DICT))
            continue
        present = [(lo, n, b[name]) for (n, b), lo in zip(blocks, starts, strict=False)
                   if b.get(name) is not None]  # fmt: skip
        if not present:
            arrays.append(pa.nulls(total, typ))
            continue
        values: np.ndarray = np.empty(total, _NUMPY_TYPES[typ])
        covered = sum(n for _, n, _ in present) == total
        masked = any(isinstance(v, np.ma.MaskedArray) for _, _, v in present)
        null = None if covered and not masked else np.ones(total, bool)
        for lo, n, v in present:
            if isinstance(v, np.ma.MaskedArray):
                values[lo : lo + n] = np.ma.getdata(v)
                null[lo : lo + n] = np.ma.getmaskarray(v)  # type: ignore[index]
            else:
                values[lo : lo + n] = v
                if null is not None:
                    null[lo : lo + n] = False
        arrays.append(pa.array(values, typ, mask=null))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


_POSITIONAL = ("time_s", "frame", "slot", "device", "event")
_OTHER = [name for name in COLUMNS if name not in _POSITIONAL]
_INT_RANGE = {pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (-(2**63), 2**63 - 1)}


def _values(draw: Any, typ: pa.DataType, n: int) -> np.ndarray:
    """``n`` values a column of type ``typ`` holds exactly, as an array of its NumPy dtype."""
    if typ == pa.bool_():
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), np.bool_)
    if typ in _INT_RANGE:
        lo, hi = _INT_RANGE[typ]
        ints = draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
        return np.array(ints, _NUMPY_TYPES[typ])
    floats = draw(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=n, max_size=n))
    return np.array(floats, np.float64)


def _column_value(draw: Any, typ: pa.DataType, n: int) -> Any:
    """A column's value in a block of ``n`` rows: a scalar (Python or NumPy) broadcast, an
    array, or a masked array (with a mask array or none)."""
    values = _values(draw, typ, max(n, 1))
    kind = draw(st.sampled_from(["python", "numpy", "array", "masked", "nomask", "widened"]))
    if kind == "python" or n == 0:
        return values[0].item()
    if kind == "numpy":
        return values[0]
    if kind == "masked":
        mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
        return np.ma.MaskedArray(values[:n], mask=mask)
    if kind == "nomask":
        return np.ma.MaskedArray(values[:n])
    if kind == "widened" and typ == pa.int32():
        return values[:n].astype(np.int64)  # an int64 array into an int32 column
    return values[:n]


@st.composite
def calls(draw: Any) -> list[tuple[int | None, tuple, dict[str, Any]]]:
    """A frame's buffer calls: ``(position or None for add, args, columns)``, with blocks of
    0 to 6 rows, one event or a mix of event codes, any columns of every type."""
    out: list[tuple[int | None, tuple, dict[str, Any]]] = []
    blocks = 0
    for _ in range(draw(st.integers(0, 6))):
        n = draw(st.integers(0, 6))
        if draw(st.booleans()) and n:
            codes = draw(st.lists(st.integers(0, len(EVENTS) - 1), min_size=n, max_size=n))
            event: Any = np.array(codes, np.int8)
        else:
            event = draw(st.sampled_from(list(EVENTS)))
        array_time = n != 1 or draw(st.booleans())
        time_s = np.sort(_values(draw, pa.float64(), n)) if array_time else 0.5
        slot = draw(st.integers(-1, 9))
        device = draw(st.sampled_from(["none", "scalar", "array"]))
        dev: Any = {"none": None, "scalar": 3, "array": np.arange(n, dtype=np.int32)}[device]
        names = draw(st.lists(st.sampled_from(_OTHER), unique=True, max_size=8))
        cols = {name: _column_value(draw, COLUMNS[name][0], n) for name in names}
        insert = draw(st.booleans()) and blocks > 0
        position = draw(st.integers(0, blocks)) if insert else None
        out.append((position, (event, time_s, 0, slot, dev), cols))
        blocks += n > 0
    return out


def _filled(calls_: list[tuple[int | None, tuple, dict[str, Any]]]) -> TraceBuffer:
    buf = TraceBuffer()
    for position, args, cols in calls_:
        if position is None:
            buf.add(*args, **cols)
        else:
            buf.insert(min(position, buf.position), *args, **cols)
    return buf


@settings(max_examples=200, deadline=None)
@given(calls())
def test_the_builder_equals_the_previous_one(calls_):
    """On any blocks (scalars, arrays, masked arrays, mixed events, inserts, empty frames, every column type) the table has the previous builder's schema, null masks and values (the golden hashes; NaN equal to NaN)."""
    buf = _filled(calls_)
    want = previous_table(list(buf._blocks), buf.num_rows)
    got = buf.to_table()
    got.validate(full=True)
    assert got.schema == SCHEMA and column_hashes(got) == column_hashes(want)


@settings(max_examples=60, deadline=None)
@given(calls())
def test_the_builder_writes_the_previous_parquet_bytes(calls_):
    """A part encoded from the table has the bytes of one encoded from the previous builder's."""
    buf = _filled(calls_)
    want = previous_table(list(buf._blocks), buf.num_rows)
    meta = {b"k": b"v"}
    assert encode_part(buf.to_table(), meta) == encode_part(want, meta)


def test_an_empty_buffer_gives_an_empty_table_of_the_schema():
    """A frame without rows is an empty table with the schema, as before."""
    got = TraceBuffer().to_table()
    assert got.num_rows == 0 and got.equals(previous_table([], 0))


def test_columns_no_block_sets_are_null_in_every_row():
    """A column no block sets is null in every row, whatever its type."""
    buf = TraceBuffer()
    buf.add("decision", 0.0, 0, 0, np.arange(5, dtype=np.int32), energy_j=np.ones(5))
    table = buf.to_table()
    unset = [n for n in COLUMNS if n not in ("time_s", "frame", "slot", "device", "event",
                                              "energy_j")]  # fmt: skip
    assert all(table.column(n).null_count == 5 for n in unset)


def test_the_table_does_not_share_memory_with_the_added_arrays():
    """Arrays changed after the table is built (a block that is the whole frame) leave the table as it was: the writer thread never sees a later change."""
    ids = np.arange(4, dtype=np.int32)
    gain = np.array([1.0, 2.0, 3.0, 4.0])
    ok = np.array([True, False, True, True])
    buf = TraceBuffer()
    buf.add("decision", np.zeros(4), 0, 0, ids, channel_gain=gain, participating=ok)
    table = buf.to_table()
    ids[:], gain[:], ok[:] = 9, -1.0, False
    assert table.column("device").to_pylist() == [0, 1, 2, 3]
    assert table.column("channel_gain").to_pylist() == [1.0, 2.0, 3.0, 4.0]
    assert table.column("participating").to_pylist() == [True, False, True, True]


def test_a_masked_block_gives_nulls_exactly_under_its_mask():
    """A masked array's masked rows are null and its other rows keep their values (booleans too)."""
    buf = TraceBuffer()
    mask = np.array([True, False, False, True, False, True, False, False, True])
    buf.add(
        "energy",
        1.0,
        0,
        0,
        np.arange(9, dtype=np.int32),
        success=np.ma.MaskedArray(np.ones(9, bool), mask=mask),
        upload_s=np.ma.MaskedArray(np.arange(9.0), mask=~mask),
    )
    table = buf.to_table()
    assert table.column("success").to_pylist() == [None if m else True for m in mask]
    assert table.column("upload_s").to_pylist() == [float(i) if m else None
                                                    for i, m in enumerate(mask)]  # fmt: skip
