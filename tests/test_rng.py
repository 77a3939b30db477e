"""Random streams: named per-device generators and counter-based keyed draws."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from wflsim.sim.rng import STREAM_IDS, KeyedStream, Streams, philox4x64, seed_states

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


# ------------------------------------------------------------ normal, complex normal, gamma


def _grid(draw, n_dev: int = 200, n_slot: int = 400) -> np.ndarray:
    """``draw(devices, slot)`` over devices x slots, flattened."""
    ids = np.arange(n_dev)
    return np.concatenate([draw(ids, t) for t in range(n_slot)])


def test_keyed_uniform_of_sub_zero_is_unchanged_and_sub_one_is_independent():
    """sub = 0 is the plain keyed word; sub = 1 differs everywhere and is uncorrelated with it."""
    k = Streams(4).keyed("fading")
    ids = np.arange(64)
    np.testing.assert_array_equal(k.raw(ids, 3), k.raw(ids, 3, sub=0))
    assert np.all(k.raw(ids, 3) != k.raw(ids, 3, sub=1))
    u0 = _grid(lambda d, t: k.uniform(d, t, sub=0))
    u1 = _grid(lambda d, t: k.uniform(d, t, sub=1))
    assert abs(np.corrcoef(u0, u1)[0, 1]) < 4.0 / np.sqrt(u0.size)
    both = k.uniforms(ids, 3, 0, (0, 1))
    np.testing.assert_array_equal(both[1], k.uniform(ids, 3, sub=1))


def test_keyed_normal_is_standard_normal():
    """80k keyed Box-Muller normals: KS p > 1 %, mean within 4 SE of 0, variance within 4 SE of 1."""
    k = Streams(21).keyed("shadowing")
    z = _grid(k.standard_normal)
    assert stats.kstest(z, "norm").pvalue > 0.01
    n = z.size
    assert abs(z.mean()) < 4.0 / np.sqrt(n)
    assert abs(z.var() - 1.0) < 4.0 * np.sqrt(2.0 / n)


def test_keyed_complex_normal_is_circular_cn01():
    """CN(0, 1): |x|^2 is the keyed Exp(1) draw, real and imaginary parts N(0, 1/2) and uncorrelated."""
    k = Streams(22).keyed("fading")
    ids = np.arange(50)
    np.testing.assert_allclose(
        np.abs(k.standard_complex_normal(ids, 9)) ** 2, k.standard_exponential(ids, 9), rtol=1e-12
    )
    x = _grid(k.standard_complex_normal)
    n = x.size
    assert stats.kstest(x.real * np.sqrt(2.0), "norm").pvalue > 0.01
    assert stats.kstest(x.imag * np.sqrt(2.0), "norm").pvalue > 0.01
    assert abs(np.corrcoef(x.real, x.imag)[0, 1]) < 4.0 / np.sqrt(n)
    assert abs(np.mean(np.abs(x) ** 2) - 1.0) < 4.0 / np.sqrt(n)


@pytest.mark.parametrize("shape", [0.5, 2.0, 7.5])
def test_keyed_gamma_matches_scipy_gamma(shape):
    """Keyed gamma draws by inversion: KS p > 1 % against scipy's Gamma(shape, 1), mean = shape within 4 SE."""
    k = Streams(23).keyed("fading")
    g = _grid(lambda d, t: k.gamma(d, t, shape), n_dev=100, n_slot=300)
    assert stats.kstest(g, stats.gamma(shape).cdf).pvalue > 0.01
    assert abs(g.mean() - shape) < 4.0 * np.sqrt(shape / g.size)


def test_keyed_gamma_of_shape_one_is_the_exponential_draw():
    """Gamma(1) by inversion is the same quantile of the same uniform as the keyed Exp(1)."""
    k = Streams(24).keyed("fading")
    ids = np.arange(40)
    np.testing.assert_allclose(k.gamma(ids, 2, 1.0), k.standard_exponential(ids, 2), rtol=1e-12)


def test_gamma_quantile_transforms_match_scipy_in_both_tails():
    """gamma_from_uniform and gamma_from_exponential equal scipy's gamma.ppf, also deep in the tails."""
    from wflsim.sim.rng import gamma_from_exponential, gamma_from_uniform

    u = np.array([1e-12, 1e-4, 0.3, 0.5, 0.7, 1 - 1e-6])
    e = -np.log1p(-u)
    for a in (0.5, 1.0, 3.0):
        ref = stats.gamma(a).ppf(u)
        np.testing.assert_allclose(gamma_from_uniform(u, a), ref, rtol=1e-9)
        np.testing.assert_allclose(gamma_from_exponential(e, a), ref, rtol=1e-9)
    upper = np.array([20.0, 40.0])  # P(E > 40) = 4e-18: only the complementary branch keeps it
    np.testing.assert_allclose(
        gamma_from_exponential(upper, 2.0), stats.gamma(2.0).isf(np.exp(-upper)), rtol=1e-9
    )


@given(st.lists(st.integers(0, 5000), min_size=1, max_size=30, unique=True), st.integers(0, 10**6))
def test_keyed_normal_and_gamma_depend_only_on_device_and_slot(devices, slot):
    """Normal, complex normal and gamma draws of a device do not depend on the others drawn with it."""
    k = Streams(25).keyed("csi")
    ids = np.array(devices)
    full = np.arange(max(devices) + 1)
    np.testing.assert_array_equal(k.standard_normal(ids, slot), k.standard_normal(full, slot)[ids])
    np.testing.assert_array_equal(
        k.standard_complex_normal(ids, slot), k.standard_complex_normal(full, slot)[ids]
    )
    np.testing.assert_array_equal(k.gamma(ids, slot, 2.5), k.gamma(full, slot, 2.5)[ids])


def test_new_streams_have_new_ids():
    """The channel's streams have ids of their own; the old ids are unchanged."""
    from wflsim.sim.rng import STREAM_IDS

    assert STREAM_IDS["fading"] == 4 and STREAM_IDS["freeze_choice"] == 9
    new = [STREAM_IDS[s] for s in ("shadowing", "csi", "los_state")]
    assert len(set(STREAM_IDS.values())) == len(STREAM_IDS) and min(new) > 9


def test_keyed_draws_of_a_permutation_of_all_devices_come_in_the_order_asked():
    """Asking for every device in another order gives each device its own draw (no fast path)."""
    k = Streams(26).keyed("fading")
    perm = np.array([0, 2, 1, 3, 4, 5])  # first 0 and last n - 1, as the full range
    np.testing.assert_array_equal(k.raw(perm, 8), k.raw(np.arange(6), 8)[perm])


@settings(max_examples=40, deadline=None)
@given(
    seed=st.sampled_from([0, 1, 7, 2**32 - 1, 2**32, 2**40 + 3, 2**63 - 1]),
    name=st.sampled_from(sorted(STREAM_IDS)),
    sub=st.lists(st.integers(0, 2**33), max_size=2),
    n=st.integers(1, 40),
    count=st.integers(1, 3),
)
def test_device_uniforms_equal_each_devices_generator(seed, name, sub, n, count):
    """Streams.device_uniforms (all devices at once) equals each device's own generator's
    first doubles, bit for bit."""
    s = Streams(seed)
    got = s.device_uniforms(name, n, count, *sub)
    want = np.array([s.device(name, d, *sub).random(count) for d in range(n)])
    np.testing.assert_array_equal(got, want)


def test_seed_states_equal_numpys_seed_sequence_at_large_indices():
    """seed_states equals SeedSequence.generate_state for device indices up to 2^32 - 1."""
    idx = np.array([0, 1, 65_535, 2**31, 2**32 - 1], dtype=np.uint64)
    got = seed_states(123, (4,), idx, (9,))
    want = np.array(
        [
            np.random.SeedSequence(123, spawn_key=(4, int(i), 9)).generate_state(4, np.uint64)
            for i in idx
        ]
    )
    np.testing.assert_array_equal(got, want)


def test_uniform_device_fields_are_drawn_from_each_devices_generator():
    """A uniform per-device field resolved for all devices at once is low + (high - low) u with u
    the first double of each device's own generator (what Generator.uniform computes on x86-64;
    written out here so the result is the same on every platform)."""
    from wflsim.sim.config.resolve import _DEVICE_FIELDS, resolve_devices
    from wflsim.sim.config.schema import DevicesConfig

    cfg = DevicesConfig.model_validate(
        {"energy_budget_j": {"dist": "uniform", "low": 0.3, "high": 0.45}}
    )
    streams = Streams(5)
    arrays = resolve_devices(cfg, 300, streams)
    index = list(_DEVICE_FIELDS).index("energy_budget_j")
    u = np.array([streams.device("device_params", n, index).random() for n in range(300)])
    np.testing.assert_array_equal(arrays.energy_budget_j, 0.3 + (0.45 - 0.3) * u)


@pytest.mark.parametrize(
    "spec",
    [
        {"dist": "loguniform", "low": 1e9, "high": 3e9},
        {"dist": "choice", "values": [1e9, 2e9, 2.5e9], "probs": [0.2, 0.5, 0.3]},
        {"dist": "normal", "mean": 2e9, "std": 3e8, "low": 1e9},
        {"dist": "choice", "values": [1e9, 2e9]},
    ],
    ids=["loguniform", "choice", "normal", "choice-no-probs"],
)
def test_distributed_device_fields_equal_each_devices_draw(spec):
    """Every per-device distribution resolved for all devices at once (vectorised where one
    double decides the value) equals drawing it device by device from each device's generator."""
    from wflsim.sim.config.distributions import draw
    from wflsim.sim.config.resolve import _DEVICE_FIELDS, resolve_devices
    from wflsim.sim.config.schema import DevicesConfig

    cfg = DevicesConfig.model_validate({"cpu_hz": spec})
    streams = Streams(11)
    arrays = resolve_devices(cfg, 500, streams)
    index = list(_DEVICE_FIELDS).index("cpu_hz")
    want = [draw(cfg.cpu_hz, streams.device("device_params", n, index)) for n in range(500)]
    np.testing.assert_array_equal(arrays.cpu_hz, np.array(want))
