"""The keyed draws' two backends: the compiled loops equal the pure-numpy reference bit for bit."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wflsim.sim
from golden_runs import GOLDEN_FILE, compare, golden_record, golden_runs, run_table
from wflsim.sim import rng
from wflsim.sim.rng import KeyedStream, Streams, philox4x64

U64 = st.integers(0, 2**64 - 1)
SMALL = st.integers(0, 2**20)


@pytest.fixture(autouse=True)
def _restore_backend():
    """Every test leaves the process on the backend of its environment."""
    yield
    rng.set_backend(None)


def _both(draw):
    """``draw()`` on the compiled backend, then on the numpy one."""
    rng.set_backend("compiled")
    assert rng.backend() == "compiled"
    fast = draw()
    rng.set_backend("numpy")
    assert rng.backend() == "numpy"
    return fast, draw()


@settings(max_examples=150, deadline=None)
@given(
    key=st.lists(U64, min_size=2, max_size=2),
    devices=st.lists(st.one_of(SMALL, st.integers(0, 2**63 - 1)), min_size=0, max_size=60),
    slot=st.one_of(SMALL, U64),
    draw=st.one_of(st.integers(0, 8), U64),
    subs=st.lists(st.one_of(st.integers(0, 3), U64), min_size=1, max_size=3),
)
def test_compiled_words_equal_numpy_words(key, devices, slot, draw, subs):
    """Any key, devices (any order, repeats, up to 2^63 - 1), slot, draw and subs: equal words."""
    k = KeyedStream(np.array(key, dtype=np.uint64))
    ids = np.array(devices, dtype=np.int64)
    fast, ref = _both(lambda: k._words(ids, slot, draw, tuple(subs)))
    assert fast.dtype == ref.dtype == np.uint64 and fast.shape == (len(subs), len(devices))
    np.testing.assert_array_equal(fast, ref)


@settings(max_examples=60, deadline=None)
@given(
    key=st.lists(U64, min_size=2, max_size=2),
    n=st.integers(1, 2000),
    start=st.integers(0, 3),
    slot=SMALL,
    draw=st.integers(0, 8),
)
def test_compiled_draws_equal_numpy_draws_on_device_ranges(key, n, start, slot, draw):
    """Raw words, uniforms and the Exp(1), normal, complex normal and gamma draws of a range of
    devices (all devices from 0, or a range starting elsewhere) are equal bit for bit."""
    k = KeyedStream(np.array(key, dtype=np.uint64))
    ids = np.arange(start, start + n)

    def draws():
        return [
            k.raw(ids, slot, draw),
            k.uniform(ids, slot, draw, sub=1),
            k.uniforms(ids, slot, draw, (0, 1, 2)),
            k.standard_exponential(ids, slot, draw),
            *k.polar(ids, slot, draw),
            k.standard_normal(ids, slot, draw),
            k.standard_complex_normal(ids, slot, draw),
            k.gamma(ids, slot, 2.5, draw),
        ]

    fast, ref = _both(draws)
    for a, b in zip(fast, ref, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_compiled_words_equal_the_philox_reference_at_block_edges():
    """Devices around block boundaries get lane ``d mod 4`` of Philox block ``d div 4``."""
    key = np.array([0x0123456789ABCDEF, 0xFEDCBA9876543210], dtype=np.uint64)
    ids = np.array([3, 4, 0, 7, 8, 2**40 + 1, 5, 5, 2**63 - 1], dtype=np.int64)
    rng.set_backend("compiled")
    got = KeyedStream(key).raw(ids, 11, 2, sub=3)
    blocks = (ids // 4).astype(np.uint64)
    ones = np.ones_like(blocks)
    words = philox4x64((blocks, 11 * ones, 2 * ones, 3 * ones), key)
    want = np.stack(words, axis=1)[np.arange(ids.size), ids % 4]
    np.testing.assert_array_equal(got, want)


def test_empty_device_list_gives_empty_draws_on_both_backends():
    """No devices: an empty array of the right dtype on either backend."""
    k = Streams(0).keyed("fading")
    fast, ref = _both(lambda: (k.raw([], 0), k.uniforms([], 0, 0, (0, 1))))
    assert fast[0].shape == ref[0].shape == (0,) and fast[0].dtype == np.uint64
    assert fast[1].shape == ref[1].shape == (2, 0) and fast[1].dtype == np.float64


def test_auto_backend_without_numba_stays_on_numpy(monkeypatch):
    """With numba missing, ``auto`` past its switch point stays on numpy, with the same draws."""
    ids = np.arange(1001)
    rng.set_backend("compiled")
    want = Streams(7).keyed("fading").uniforms(ids, 5, 1, (0, 1))
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    monkeypatch.delitem(sys.modules, "wflsim.sim.rng_compiled")
    monkeypatch.delattr(wflsim.sim, "rng_compiled")
    monkeypatch.setattr(rng, "AUTO_SWITCH_WORDS", 0)
    rng.set_backend("auto")
    assert rng.backend() == "numpy"
    np.testing.assert_array_equal(Streams(7).keyed("fading").uniforms(ids, 5, 1, (0, 1)), want)


def test_compiled_backend_without_numba_is_an_import_error(monkeypatch):
    """Asking for ``compiled`` where numba cannot be imported raises ImportError."""
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.delitem(sys.modules, "wflsim.sim.rng_compiled", raising=False)
    monkeypatch.delattr(wflsim.sim, "rng_compiled", raising=False)
    rng.set_backend("compiled")
    with pytest.raises(ImportError):
        rng.backend()


def test_backend_follows_the_environment_variable(monkeypatch):
    """``$WFLSIM_RNG_BACKEND`` chooses the backend; an unknown value is a ValueError naming it."""
    monkeypatch.setenv("WFLSIM_RNG_BACKEND", "numpy")
    rng.set_backend(None)
    assert rng.backend() == "numpy"
    monkeypatch.setenv("WFLSIM_RNG_BACKEND", "compiled")
    rng.set_backend(None)
    assert rng.backend() == "compiled"
    monkeypatch.setenv("WFLSIM_RNG_BACKEND", "fortran")
    rng.set_backend(None)
    with pytest.raises(ValueError, match="WFLSIM_RNG_BACKEND"):
        rng.backend()


def test_set_backend_refuses_an_unknown_name():
    """set_backend of a name outside BACKENDS is a ValueError."""
    with pytest.raises(ValueError, match="unknown keyed-draw backend"):
        rng.set_backend("cuda")


def test_auto_backend_switches_to_compiled_after_its_word_count(monkeypatch):
    """By default (``auto``) draws run in numpy until AUTO_SWITCH_WORDS words, compiled after."""
    monkeypatch.delenv("WFLSIM_RNG_BACKEND", raising=False)
    monkeypatch.setattr(rng, "AUTO_SWITCH_WORDS", 1000)
    rng.set_backend(None)
    k = Streams(2).keyed("fading")
    first = k.uniforms(np.arange(600), 0, 0, (0, 1))  # 1200 words in numpy
    assert rng.backend() == "compiled"
    np.testing.assert_array_equal(k.uniforms(np.arange(600), 0, 0, (0, 1)), first)


def test_auto_backend_leaves_short_runs_on_numpy(monkeypatch):
    """Under the default switch point a draw of a few devices keeps ``auto`` on numpy."""
    monkeypatch.delenv("WFLSIM_RNG_BACKEND", raising=False)
    rng.set_backend(None)
    Streams(2).keyed("fading").uniform(np.arange(30), 0)
    assert rng.backend() == "numpy"


_NETWORK_GOLDENS = sorted(
    n for n, (_, mnist) in golden_runs().items() if "network" in n and not mnist
)


@pytest.mark.parametrize("name", _NETWORK_GOLDENS)
def test_network_golden_traces_hold_on_the_compiled_backend(name):
    """The network-only golden runs hash to the recorded values with the compiled keyed draws
    (tests/test_golden.py runs every golden run on the default ``auto``: numpy for runs this small)."""
    record = json.loads(GOLDEN_FILE.read_text())
    rng.set_backend("compiled")
    scenario, _ = golden_runs()[name]
    problems = compare(record["runs"][name], golden_record(run_table(scenario)))
    assert rng.backend() == "compiled"
    assert not problems, f"{name}: " + "; ".join(problems)
