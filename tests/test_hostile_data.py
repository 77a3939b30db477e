"""Hostile CIFAR-10 batch files: small pickles that would grow huge or take forever when built
(shared memo references, exponential nesting, hash floods). Each is read in a child process
under a 2 GiB address-space limit and a 20 s timeout, and must be refused with the one-line data
error in well under 2 s; real-sized batches in the original Python 2 layout still load."""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import REPO, write_fake_cifar

P = pickle  # the opcode constants (pickle.MARK, pickle.APPENDS, ...)
FAST_S = 2.0  # a refusal must take less than this (it takes milliseconds)
CHILD_TIMEOUT_S = 20.0  # the child also imports torch; the old reader ran for minutes

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path

from wflsim.models.data import read_cifar_batch
from wflsim.app.cli import main
from wflsim.sim.config.catalogue import DatasetError


def address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


limit = address_space() + 2 * 1024**3  # 2 GiB beyond what the imports mapped
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
out = {}
t0 = time.perf_counter()
try:
    if sys.argv[1] == "read":
        x, y = read_cifar_batch(Path(sys.argv[2]))
        out = {"outcome": "loaded", "shape": list(x.shape)}
    else:
        code = main(sys.argv[2:])
        out = {"outcome": "exit", "code": code}
except DatasetError as err:
    out = {"outcome": "refused", "field": err.field, "message": str(err)}
except BaseException as err:
    out = {"outcome": type(err).__name__}
out["seconds"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def _child(*args: str) -> dict[str, Any]:
    """Run :data:`_CHILD` with ``args`` against this tree's wflsim; its JSON answer, or the
    outcome ``timeout`` / ``crashed``, with the child's stderr."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, *args],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            env=env,
            cwd=REPO,
        )
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"outcome": "crashed", "returncode": proc.returncode, "stderr": proc.stderr[-2000:]}
    return {**json.loads(lines[-1]), "stderr": proc.stderr}


def _assert_refused_fast(path: Path) -> None:
    """Reading ``path`` is a DatasetError on ``learning.data_dir`` naming the file, in < 2 s."""
    got = _child("read", str(path))
    assert got["outcome"] == "refused", got
    assert got["field"] == "learning.data_dir" and path.name in got["message"]
    assert "\n" not in got["message"]
    assert got["seconds"] < FAST_S, got


# ----------------------------------------------------------------------- a tiny assembler


def _put(i: int) -> bytes:
    return P.BINPUT + bytes([i]) if i < 256 else P.LONG_BINPUT + struct.pack("<I", i)


def _get(i: int) -> bytes:
    return P.BINGET + bytes([i]) if i < 256 else P.LONG_BINGET + struct.pack("<I", i)


def _str(b: bytes) -> bytes:
    """A Python 2 string, as cPickle wrote them (read back as latin-1 text)."""
    if len(b) < 256:
        return P.SHORT_BINSTRING + bytes([len(b)]) + b
    return P.BINSTRING + struct.pack("<i", len(b)) + b


def _int(v: int) -> bytes:
    if 0 <= v < 256:
        return P.BININT1 + bytes([v])
    if 0 <= v < 65536:
        return P.BININT2 + struct.pack("<H", v)
    return P.BININT + struct.pack("<i", v)


def _array(rows: int, pixels: bytes) -> bytes:
    """A ``uint8 (rows, 3072)`` array exactly as Python 2's cPickle wrote numpy arrays into the
    real files (memo 1..5)."""
    return (
        P.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n" + _put(1)
        + P.GLOBAL + b"numpy\nndarray\n" + _put(2)
        + _int(0) + P.TUPLE1 + _str(b"b") + P.TUPLE3 + P.REDUCE + _put(3)
        + P.MARK + _int(1) + _int(rows) + _int(3072) + P.TUPLE2
        + P.GLOBAL + b"numpy\ndtype\n" + _put(4)
        + _str(b"u1") + _int(0) + _int(1) + P.TUPLE3 + P.REDUCE + _put(5)
        + P.MARK + _int(3) + _str(b"|") + P.NONE * 3 + _int(-1) * 2 + _int(0) + P.TUPLE + P.BUILD
        + P.NEWFALSE + _str(pixels) + P.TUPLE + P.BUILD
    )  # fmt: skip


def _batch(labels: bytes, rows: int = 1, extra: bytes = b"") -> bytes:
    """A batch ``{"data": uint8 (rows, 3072), "labels": <labels ops>, <extra pairs>}`` in the
    real files' layout (protocol 2, Python 2 strings); ``labels`` and ``extra`` use memo >= 10."""
    return (
        P.PROTO + b"\x02" + P.EMPTY_DICT + _put(0) + P.MARK
        + _str(b"data") + _array(rows, bytes(rows * 3072))
        + _str(b"labels") + labels + extra
        + P.SETITEMS + P.STOP
    )  # fmt: skip


def _list_of(items: list[bytes], memo: int | None = None) -> bytes:
    """A list of the given item ops (appended in one MARK ... APPENDS), memoised at ``memo``."""
    return (
        P.EMPTY_LIST
        + (_put(memo) if memo is not None else b"")
        + (P.MARK + b"".join(items) + P.APPENDS if items else b"")
    )


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


# ----------------------------------------------------------------------- hostile files


@pytest.mark.slow
def test_labels_repeating_one_memo_reference_are_refused_fast(tmp_path: Path) -> None:
    """Labels [R] with R = [B]*m, B = [C]*m, C = [0]*m (memo references; 10 GB as an array)."""
    m = 1100
    cube = (
        _list_of([_int(0)] * m, memo=10) + P.POP
        + _list_of([_get(10)] * m, memo=11) + P.POP
        + _list_of([_get(11)] * m, memo=12) + P.POP
    )  # fmt: skip
    path = _write(tmp_path / "data_batch_1", _batch(cube + _list_of([_get(12)])))
    assert path.stat().st_size < 16_000
    _assert_refused_fast(path)


@pytest.mark.slow
def test_labels_nesting_that_doubles_per_level_are_refused_fast(tmp_path: Path) -> None:
    """Labels [L60] with L(k) = [L(k-1), L(k-1)]: 2**60 integers once expanded."""
    levels = _list_of([_int(0)], memo=10) + P.POP
    for k in range(1, 61):
        levels += _list_of([_get(9 + k)] * 2, memo=10 + k) + P.POP
    path = _write(tmp_path / "data_batch_1", _batch(levels + _list_of([_get(70)])))
    _assert_refused_fast(path)


@pytest.mark.slow
def test_doubling_lists_filled_top_down_are_refused_fast(tmp_path: Path) -> None:
    """The same doubling lists made empty first and filled from the top level down."""
    ops = b"".join(P.EMPTY_LIST + _put(10 + k) + P.POP for k in range(61))
    for k in range(60, 0, -1):
        ops += _get(10 + k) + P.MARK + _get(9 + k) * 2 + P.APPENDS + P.POP
    ops += _get(10) + _int(0) + P.APPEND + P.POP
    path = _write(tmp_path / "data_batch_1", _batch(ops + _list_of([_get(70)])))
    _assert_refused_fast(path)


@pytest.mark.slow
def test_a_dict_key_that_quadruples_per_level_is_refused_fast(tmp_path: Path) -> None:
    """A key T20 with T(k) = (T(k-1),)*4: hashing it would visit 4**20 tuples."""
    ops = _int(0) + P.TUPLE1 + _put(10) + P.POP
    for k in range(1, 21):
        ops += P.MARK + _get(9 + k) * 4 + P.TUPLE + _put(10 + k) + P.POP
    path = _write(
        tmp_path / "data_batch_1", _batch(_list_of([_int(0)]), extra=ops + _get(30) + _int(0))
    )
    _assert_refused_fast(path)


def test_a_deeply_nested_dict_key_is_refused_fast(tmp_path: Path) -> None:
    """A key nested 150000 tuples deep (hashing it recurses once per level)."""
    key = _int(0) + P.TUPLE1 * 150_000
    path = _write(tmp_path / "data_batch_1", _batch(_list_of([_int(0)]), extra=key + _int(0)))
    _assert_refused_fast(path)


def test_colliding_integer_keys_are_refused_fast(tmp_path: Path) -> None:
    """A dict of 60000 keys with one hash (multiples of 2**61 - 1): quadratic to build."""
    step = 2**61 - 1
    pairs = b"".join(
        P.LONG1 + bytes([10]) + (k * step).to_bytes(10, "little", signed=True) + _int(0) + P.SETITEM
        for k in range(1, 60_001)
    )
    extra = _str(b"extra") + P.EMPTY_DICT + pairs
    path = _write(tmp_path / "data_batch_1", _batch(_list_of([_int(0)]), extra=extra))
    _assert_refused_fast(path)


def test_a_huge_memo_index_is_refused_fast(tmp_path: Path) -> None:
    """A memo entry numbered 2**30 (the unpickler would size its memo table to match)."""
    extra = _str(b"extra") + _int(0) + P.LONG_BINPUT + struct.pack("<I", 2**30)
    path = _write(tmp_path / "data_batch_1", _batch(_list_of([_int(0)]), extra=extra))
    _assert_refused_fast(path)


def test_a_flood_of_memo_references_is_refused_fast(tmp_path: Path) -> None:
    """Labels made of 5000 memo references (one per image) exceed the memo-reference bound."""
    rows = 5000
    labels = _int(3) + _put(10) + P.POP + _list_of([_get(10)] * rows)
    path = _write(tmp_path / "data_batch_1", _batch(labels, rows=rows))
    _assert_refused_fast(path)


def test_a_file_larger_than_any_batch_is_refused_unread(tmp_path: Path) -> None:
    """A 200 MB (sparse) file is refused by its size alone."""
    path = tmp_path / "data_batch_1"
    with open(path, "wb") as f:
        f.truncate(200 * 1024 * 1024)
    _assert_refused_fast(path)


def test_validate_exits_2_in_one_line_on_a_hostile_batch(tmp_path: Path) -> None:
    """`wflsim validate` on a data folder holding the doubling-lists file: exit 2, one line."""
    data = tmp_path / "data"
    write_fake_cifar(data, per_batch=2, rng=np.random.default_rng(0))
    levels = _list_of([_int(0)], memo=10) + P.POP
    for k in range(1, 61):
        levels += _list_of([_get(9 + k)] * 2, memo=10 + k) + P.POP
    bad = data / "cifar-10-batches-py" / "data_batch_4"
    bad.write_bytes(_batch(levels + _list_of([_get(70)])))
    scenario = REPO / "scenarios" / "paper" / "cifar10_noniid.toml"
    got = _child("cli", "validate", str(scenario), "--data-dir", str(data))
    assert got["outcome"] == "exit" and got["code"] == 2, got
    err = got["stderr"].strip().splitlines()
    assert len(err) == 1 and "learning.data_dir" in err[0] and "data_batch_4" in err[0]
    assert got["seconds"] < CHILD_TIMEOUT_S / 2


# ----------------------------------------------------------------------- real files still load


def _python2_batch(n: int, rng: np.random.Generator) -> tuple[bytes, np.ndarray, np.ndarray]:
    """A batch of ``n`` images laid out as the real cifar-10-batches-py files are (Python 2
    cPickle, protocol 2: appends and set-items in runs of 1000, every string memoised)."""
    pixels = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n)
    memo = iter(range(10, 10**9))

    def runs(items: list[bytes], op: bytes) -> bytes:
        return b"".join(
            P.MARK + b"".join(items[i : i + 1000]) + op for i in range(0, len(items), 1000)
        )

    names = [_str(f"img_{j:05d}.png".encode()) + _put(next(memo)) for j in range(n)]
    entries = [
        _str(b"batch_label") + _put(next(memo)) + _str(b"training batch 1 of 5") + _put(next(memo)),
        _str(b"labels") + _put(next(memo)) + P.EMPTY_LIST + _put(next(memo))
        + runs([_int(int(v)) for v in labels], P.APPENDS),
        _str(b"data") + _put(next(memo)) + _array(n, pixels.tobytes()),
        _str(b"filenames") + _put(next(memo)) + P.EMPTY_LIST + _put(next(memo))
        + runs(names, P.APPENDS),
    ]  # fmt: skip
    body = P.PROTO + b"\x02" + P.EMPTY_DICT + _put(0) + runs(entries, P.SETITEMS) + P.STOP
    return body, pixels, labels


def test_a_full_size_python2_batch_loads(tmp_path: Path) -> None:
    """A 10000-image batch in the original Python 2 layout (about 31 MB) loads unchanged."""
    from wflsim.models.data import read_cifar_batch

    body, pixels, labels = _python2_batch(10_000, np.random.default_rng(3))
    path = _write(tmp_path / "data_batch_1", body)
    assert 30_000_000 < path.stat().st_size < 32_000_000
    x, y = read_cifar_batch(path)
    assert x.shape == (10_000, 3, 32, 32) and x.dtype == np.uint8 and y.dtype == np.int64
    assert np.array_equal(x.reshape(10_000, 3072), pixels) and np.array_equal(y, labels)


def test_a_batch_pickled_by_python3_with_a_labels_array_loads(tmp_path: Path) -> None:
    """A re-pickled batch (protocol 4, bytes pixels, labels as an int64 array) still loads."""
    from wflsim.models.data import read_cifar_batch

    pixels = np.random.default_rng(4).integers(0, 256, size=(3, 3072), dtype=np.uint8)
    entry = {"data": pixels, "labels": np.array([7, 0, 9]), "batch_label": "x"}
    path = _write(tmp_path / "data_batch_1", pickle.dumps(entry, protocol=4))
    x, y = read_cifar_batch(path)
    assert np.array_equal(x.reshape(3, 3072), pixels) and y.tolist() == [7, 0, 9]
    assert x.flags.writeable


@pytest.mark.parametrize("bad", [b"O8", b"V8"])
def test_arrays_of_objects_or_records_are_refused(tmp_path: Path, bad: bytes) -> None:
    """An array whose dtype is not a plain number (objects, records) is refused as not plain data."""
    from wflsim.models.data import read_cifar_batch
    from wflsim.sim.config.catalogue import DatasetError

    body = _batch(_list_of([_int(0)])).replace(_str(b"u1"), _str(bad), 1)
    path = _write(tmp_path / "data_batch_1", body)
    with pytest.raises(DatasetError, match="data_batch_1"):
        read_cifar_batch(path)
