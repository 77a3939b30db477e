"""Random streams: named per-device generators and counter-based keyed draws."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from sim.rng import KeyedStream, Streams, philox4x64

U64 = st.integers(0, 2**64 - 1)


@given(st.lists(U64, min_size=4, max_size=4), st.lists(U64, min_size=2, max_size=2))
def test_philox_matches_numpy_philox(counter, key):
    """philox4x64(c + 1, k) equals the first four words numpy's Philox(counter=c, key=k) outputs."""
    ref = np.random.Philox(
        counter=np.array(counter, dtype=np.uint64), key=np.array(key, dtype=np.uint64)
    ).random_raw(4)
    # numpy increments the 256-bit counter (carrying across words) before generating
    total = sum(c << (64 * i) for i, c in enumerate(counter)) + 1
    words = [(total >> (64 * i)) & (2**64 - 1) for i in range(4)]
    ours = philox4x64(
        tuple(np.array([w], dtype=np.uint64) for w in words), np.array(key, dtype=np.uint64)
    )
    assert [int(w[0]) for w in ours] == [int(x) for x in ref]


def test_keyed_draw_depends_only_on_device_and_slot():
    """A device's draw is the same whichever other devices are drawn with it, in any order."""
    k = Streams(3).keyed("fading")
    full = k.uniform(np.arange(23), slot=7)
    subset = np.array([22, 5, 0, 13, 14, 15])
    np.testing.assert_array_equal(k.uniform(subset, slot=7), full[subset])
    np.testing.assert_array_equal(k.uniform(np.array([9]), slot=7), full[[9]])


def test_keyed_draws_differ_by_slot_draw_stream_and_seed():
    """Changing the slot, the draw index, the stream or the seed changes every draw."""
    ids = np.arange(8)
    base = Streams(0).keyed("fading").raw(ids, 4)
    assert np.all(base != Streams(0).keyed("fading").raw(ids, 5))
    assert np.all(base != Streams(0).keyed("fading").raw(ids, 4, draw=1))
    assert np.all(base != Streams(0).keyed("sampling").raw(ids, 4))
    assert np.all(base != Streams(1).keyed("fading").raw(ids, 4))


def test_keyed_uniform_is_uniform():
    """200 x 500 keyed uniforms pass a KS test against U(0, 1) at the 1 % level (fixed seed)."""
    k = Streams(11).keyed("fading")
    u = np.concatenate([k.uniform(np.arange(200), t) for t in range(500)])
    assert u.min() >= 0.0 and u.max() < 1.0
    assert stats.kstest(u, "uniform").pvalue > 0.01


def test_keyed_exponential_is_exp1_and_uncorrelated_in_time():
    """Keyed Exp(1) draws: KS p > 1 %, mean 1 within 4 standard errors, lag-1 correlation ~ 0."""
    k = Streams(5).keyed("fading")
    g = np.stack([k.standard_exponential(np.arange(100), t) for t in range(1000)])  # (slot, dev)
    assert stats.kstest(g.ravel(), "expon").pvalue > 0.01
    n = g.size
    assert abs(g.mean() - 1.0) < 4.0 / np.sqrt(n)
    lag = np.corrcoef(g[1:].ravel(), g[:-1].ravel())[0, 1]
    assert abs(lag) < 4.0 / np.sqrt(n)


def test_keyed_stream_refuses_bad_input():
    """Negative devices, slots or draws and malformed keys are ValueErrors."""
    k = Streams(0).keyed("fading")
    with pytest.raises(ValueError, match="device"):
        k.raw(np.array([-1]), 0)
    with pytest.raises(ValueError, match="slot"):
        k.raw(np.array([0]), -1)
    with pytest.raises(ValueError, match="key"):
        KeyedStream(np.array([1, 2, 3]))


def test_device_streams_are_reproducible_and_independent():
    """The same (seed, stream, device) gives the same generator; another device another one."""
    a = Streams(2).device("placement", 4).random(5)
    b = Streams(2).device("placement", 4).random(5)
    c = Streams(2).device("placement", 5).random(5)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
