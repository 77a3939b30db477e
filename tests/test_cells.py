"""Several cells (sim/radio/cells/layout.py): layouts, reuse, association, SINR and mean interference,
against hand computations, brute force, closed forms and Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wflsim.sim.errors import ScenarioError
from wflsim.sim.radio import interference
from wflsim.sim.radio.cells import layout
from wflsim.sim.world import physics

ISD = 500.0
SQRT3 = math.sqrt(3.0)


def _neighbour_pairs(sites: np.ndarray, isd: float) -> list[tuple[int, int]]:
    """Pairs of sites exactly one ISD apart (relative tolerance 1e-9)."""
    d = np.hypot(*(sites[:, None, :] - sites[None, :, :]).transpose(2, 0, 1))
    i, j = np.nonzero(np.isclose(d, isd, rtol=1e-9, atol=0.0))
    return [(int(a), int(b)) for a, b in zip(i, j, strict=True) if a < b]


def _pairwise_m(sites: np.ndarray) -> np.ndarray:
    d = np.hypot(*(sites[:, None, :] - sites[None, :, :]).transpose(2, 0, 1))
    np.fill_diagonal(d, np.inf)
    return d


def _rotated(sites: np.ndarray, angle: float, shift: tuple[float, float]) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return sites @ np.array([[c, s], [-s, c]]) + np.asarray(shift)


# ------------------------------------------------------------------------------------ layouts


def test_one_ring_has_seven_sites_and_two_rings_nineteen():
    """1 ring gives 7 sites, 2 rings 19, 0 rings the single centre cell."""
    assert layout.hexagonal_sites_m(0, ISD).shape == (1, 2)
    assert layout.hexagonal_sites_m(1, ISD).shape == (7, 2)
    assert layout.hexagonal_sites_m(2, ISD).shape == (19, 2)


def test_the_centre_site_comes_first_then_ring_one_counterclockwise_from_bearing_zero():
    """Site 0 is the origin; ring 1 sits at ISD on the bearings 0, 60, ..., 300 degrees, in order."""
    sites = layout.hexagonal_sites_m(1, ISD)
    assert sites[0] == pytest.approx([0.0, 0.0])
    bearings = np.degrees(np.arctan2(sites[1:, 1], sites[1:, 0])) % 360.0
    assert bearings == pytest.approx([0.0, 60.0, 120.0, 180.0, 240.0, 300.0])
    assert np.hypot(sites[1:, 0], sites[1:, 1]) == pytest.approx(np.full(6, ISD))


def test_ring_two_starts_on_bearing_zero_at_twice_the_isd():
    """Ring 2's first site is (2 ISD, 0) and its corners follow counterclockwise every 2 sites."""
    sites = layout.hexagonal_sites_m(2, ISD)
    assert sites[7] == pytest.approx([2 * ISD, 0.0])
    corners = sites[7::2][:6]
    bearings = np.degrees(np.arctan2(corners[:, 1], corners[:, 0])) % 360.0
    assert bearings == pytest.approx([0.0, 60.0, 120.0, 180.0, 240.0, 300.0])


def test_neighbours_are_one_isd_apart():
    """In 2 rings the closest pairs are ISD apart; the centre has 6 such neighbours, 42 pairs in all."""
    sites = layout.hexagonal_sites_m(2, ISD)
    assert _pairwise_m(sites).min() == pytest.approx(ISD, rel=1e-12)
    pairs = _neighbour_pairs(sites, ISD)
    assert sum(1 for a, _ in pairs if a == 0) == 6
    assert len(pairs) == 42  # 9 R^2 + 3 R for R = 2 rings (the edges of a hexagonal patch)


@given(rings=st.integers(0, 6), isd=st.floats(10.0, 1e5))
def test_layout_count_and_spacing_hold_for_any_size(rings, isd):
    """C = 1 + 3 R (R + 1) distinct sites, nearest neighbours one ISD apart (rel. 1e-9)."""
    sites = layout.hexagonal_sites_m(rings, isd)
    assert sites.shape == (1 + 3 * rings * (rings + 1), 2)
    if rings:
        assert _pairwise_m(sites).min() == pytest.approx(isd, rel=1e-9)


@given(rings=st.one_of(st.integers(max_value=-1), st.floats(), st.booleans(), st.text()))
def test_a_bad_ring_count_is_refused_naming_the_field(rings):
    """A negative, fractional, boolean or non-numeric ring count names cells.rings."""
    with pytest.raises(ScenarioError, match=r"cells\.rings"):
        layout.hexagonal_sites_m(rings, ISD)


@given(isd=st.one_of(st.floats(max_value=0.0), st.just(math.nan), st.just(math.inf)))
def test_a_bad_inter_site_distance_is_refused_naming_the_field(isd):
    """A non-positive or non-finite ISD names cells.inter_site_distance_m."""
    with pytest.raises(ScenarioError, match=r"cells\.inter_site_distance_m"):
        layout.hexagonal_sites_m(1, isd)


def test_an_explicit_list_of_sites_is_returned_as_an_array():
    """A list of [x, y] pairs comes back as a (C, 2) float array."""
    sites = layout.validate_sites_m([[0, 0], [1000, 0], [0, 1000.5]])
    assert sites.dtype == np.float64 and sites.shape == (3, 2)
    assert sites[2, 1] == 1000.5


@pytest.mark.parametrize(
    ("sites", "problem"),
    [
        ([], "empty"),
        ([[0.0, 0.0, 0.0]], "pairs"),
        ([1.0, 2.0], "pairs"),
        ([["a", 0.0]], "pairs"),
        ([[0.0, 0.0], [math.nan, 1.0]], "site 1 is not finite"),
        ([[0.0, 0.0], [5.0, 1.0], [0.0, -0.0]], "sites 0 and 2 are at the same point"),
    ],
)
def test_a_bad_list_of_sites_is_refused_naming_the_field(sites, problem):
    """Empty lists, non-pairs, non-finite values and two sites at one point name cells.sites_m."""
    with pytest.raises(ScenarioError, match=r"cells\.sites_m") as info:
        layout.validate_sites_m(sites)
    assert problem in str(info.value)


# ----------------------------------------------------------------------------- frequency reuse


def test_reuse_one_puts_every_cell_on_band_zero():
    """Reuse 1: all 19 cells on band 0."""
    assert layout.reuse_bands(layout.hexagonal_sites_m(2, ISD), 1).tolist() == [0] * 19


def test_reuse_three_gives_neighbouring_sites_different_bands():
    """Reuse 3 on 2 rings: bands 0..2, every pair of neighbouring sites on different bands."""
    sites = layout.hexagonal_sites_m(2, ISD)
    band = layout.reuse_bands(sites, 3)
    assert set(band.tolist()) == {0, 1, 2}
    assert all(band[a] != band[b] for a, b in _neighbour_pairs(sites, ISD))


def test_reuse_seven_gives_a_cell_and_its_six_neighbours_the_seven_bands():
    """Reuse 7 on 1 ring: the 7 cells use the 7 bands once each."""
    assert sorted(layout.reuse_bands(layout.hexagonal_sites_m(1, ISD), 7).tolist()) == list(
        range(7)
    )


@settings(max_examples=40)
@given(
    rings=st.integers(1, 4),
    factor=st.sampled_from([3, 7]),
    angle=st.floats(-math.pi, math.pi),
    shift=st.tuples(st.floats(-1e4, 1e4), st.floats(-1e4, 1e4)),
)
def test_co_band_sites_are_sqrt_n_isd_apart_in_any_placed_layout(rings, factor, angle, shift):
    """Reuse N (3, 7) on a rotated, shifted layout: co-band sites are at least sqrt(N) ISD apart
    (rel. 1e-9), so neighbours never share a band; the same cells share a band as in the plain
    layout."""
    plain = layout.hexagonal_sites_m(rings, ISD)
    sites = _rotated(plain, angle, shift)
    band = layout.reuse_bands(sites, factor)
    d = _pairwise_m(sites)
    same = band[:, None] == band[None, :]
    assert d[same].min() >= math.sqrt(factor) * ISD * (1 - 1e-9)
    plain_band = layout.reuse_bands(plain, factor)
    assert np.array_equal(same, plain_band[:, None] == plain_band[None, :])


@given(factor=st.integers(-10, 50).filter(lambda n: n not in (1, 3, 7)))
def test_other_reuse_factors_are_refused_naming_the_field_and_the_allowed_values(factor):
    """Any factor but 1, 3 and 7 names cells.reuse_factor and lists 1, 3, 7."""
    with pytest.raises(ScenarioError, match=r"cells\.reuse_factor.*1, 3, 7"):
        layout.reuse_bands(layout.hexagonal_sites_m(1, ISD), factor)


def test_reuse_three_refuses_sites_off_the_hexagonal_grid():
    """Reuse 3 on sites that are not nodes of one hexagonal grid names cells.sites_m."""
    with pytest.raises(ScenarioError, match=r"cells\.sites_m.*site 2 is off"):
        layout.reuse_bands([[0.0, 0.0], [500.0, 0.0], [1000.0, 100.0]], 3)


# -------------------------------------------------------------------------------- association


def test_a_device_with_no_cell_takes_the_strongest_and_it_is_no_handover():
    """serving = -1 takes the argmax gain; the handover mask stays false."""
    gain = np.array([[1e-10, 3e-10, 2e-10], [5e-9, 1e-10, 1e-12]])
    new, handover = layout.associate_strongest(gain, np.array([-1, -1]), 3.0)
    assert new.tolist() == [1, 0] and handover.tolist() == [False, False]


def test_ties_go_to_the_lowest_cell_index():
    """Equal strongest gains: the lowest index, both for a first association and a handover."""
    gain = np.array([[1e-10, 4e-10, 4e-10], [1e-10, 4e-10, 4e-10]])
    new, handover = layout.associate_strongest(gain, np.array([-1, 0]), 0.0)
    assert new.tolist() == [1, 1] and handover.tolist() == [False, True]


def test_a_served_device_stays_within_the_hysteresis():
    """Another cell 2.9 dB stronger with a 3 dB hysteresis: no handover; 3.1 dB: handover."""
    h = np.array([[1.0, 10**0.29], [1.0, 10**0.31]]) * 1e-10
    new, handover = layout.associate_strongest(h, np.array([0, 0]), 3.0)
    assert new.tolist() == [0, 1] and handover.tolist() == [False, True]


def test_a_device_with_no_reachable_cell_keeps_its_cell():
    """All-zero gains: an unserved device stays -1, a served one stays where it is."""
    new, handover = layout.associate_strongest(np.zeros((2, 3)), np.array([-1, 2]), 3.0)
    assert new.tolist() == [-1, 2] and not handover.any()


@pytest.mark.parametrize("hysteresis_db", [0.0, 2.0, 3.0, 6.0])
def test_a_device_walking_between_two_sites_hands_over_once_at_the_documented_point(
    hysteresis_db,
):
    """Walking from site A (x = 0) to site B (x = 1000 m) in 1 m steps (gains of the paper's path
    loss), the device hands over once: at the first step where B's gain exceeds A's by more than
    the hysteresis, x > D k / (1 + k) with k = 10^(h / 37.6); walking back, once at D - that."""
    d = 1000.0
    sites = np.array([[0.0, 0.0], [d, 0.0]])
    xs = np.arange(20.0, d - 19.0, 1.0)
    k = 10 ** (hysteresis_db / physics.PATHLOSS_SLOPE_DB)
    point = d * k / (1 + k)  # PL_A - PL_B = 37.6 log10(x / (d - x)) = h there
    for path, expected_x in ((xs, xs[xs > point][0]), (xs[::-1], xs[xs < d - point][-1])):
        serving = np.array([-1])
        handovers = []
        for x in path:
            gain = layout.site_gains(np.array([[x, 0.0]]), sites)
            serving, moved = layout.associate_strongest(gain, serving, hysteresis_db)
            if moved[0]:
                handovers.append(x)
        assert handovers == [pytest.approx(expected_x)]
        assert serving[0] == (1 if path[0] < path[-1] else 0)


def test_a_device_dithering_around_the_midpoint_never_hands_over():
    """Back and forth within +-40 m of the midpoint (gains 2.6 dB apart at most) for 200 steps: no
    handover after the first association."""
    sites = np.array([[0.0, 0.0], [1000.0, 0.0]])
    rng = np.random.default_rng(3)
    serving = np.array([-1])
    for x in 500.0 + rng.uniform(-40.0, 40.0, 200):
        gain = layout.site_gains(np.array([[x, 0.0]]), sites)
        serving, moved = layout.associate_strongest(gain, serving, 3.0)
        assert not moved[0]


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 40),
    c=st.integers(1, 8),
    hysteresis_db=st.floats(0.0, 20.0),
)
def test_association_invariants(seed, n, c, hysteresis_db):
    """Against a loop over devices: the new cell is valid; a handover means a gain more than the
    hysteresis above the old cell's, to the strongest cell; without one a served device stays."""
    rng = np.random.default_rng(seed)
    gain = rng.lognormal(-25.0, 2.0, (n, c))
    serving = rng.integers(-1, c, n)
    new, handover = layout.associate_strongest(gain, serving, hysteresis_db)
    for i in range(n):
        best = int(np.argmax(gain[i]))
        if serving[i] < 0:
            assert new[i] == best and not handover[i]
        elif (
            gain[i, best] > gain[i, serving[i]] * 10 ** (hysteresis_db / 10) and best != serving[i]
        ):
            assert new[i] == best and handover[i]
        else:
            assert new[i] == serving[i] and not handover[i]


@pytest.mark.parametrize(
    ("gain", "serving", "hysteresis_db"),
    [
        (np.ones((2, 2)), np.array([0, 2]), 3.0),
        (np.ones((2, 2)), np.array([0, -2]), 3.0),
        (np.ones((2, 2)), np.array([0.0, 1.0]), 3.0),
        (np.ones((2, 2)), np.array([0]), 3.0),
        (np.array([[1.0, -1.0]]), np.array([0]), 3.0),
        (np.array([[1.0, math.nan]]), np.array([0]), 3.0),
        (np.ones(2), np.array([0, 1]), 3.0),
        (np.ones((2, 2)), np.array([0, 1]), -1.0),
        (np.ones((2, 2)), np.array([0, 1]), math.nan),
    ],
)
def test_bad_association_inputs_are_refused(gain, serving, hysteresis_db):
    """Cells out of range, float cells, wrong shapes, negative or NaN gains and a negative or NaN
    hysteresis raise ValueError."""
    with pytest.raises(ValueError):
        layout.associate_strongest(gain, serving, hysteresis_db)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 50), rings=st.integers(0, 2))
def test_nearest_association_matches_brute_force(seed, n, rings):
    """associate_nearest is the argmin distance over sites, device by device."""
    rng = np.random.default_rng(seed)
    sites = layout.hexagonal_sites_m(rings, ISD)
    pos = rng.uniform(-1500.0, 1500.0, (n, 2))
    expected = [int(np.argmin([math.dist(p, s) for s in sites])) for p in pos]
    assert layout.associate_nearest(pos, sites).tolist() == expected


def test_nearest_association_breaks_ties_by_lowest_index():
    """A device on the bisector of sites 0 and 1 goes to site 0."""
    sites = np.array([[0.0, 0.0], [1000.0, 0.0]])
    assert layout.associate_nearest(np.array([[500.0, 30.0]]), sites).tolist() == [0]


# ---------------------------------------------------------------------------------------- SINR


def test_sinr_with_two_interferers_matches_a_hand_computation():
    """Cell A at (0, 0), B at (1000, 0), C at (0, 1000), one band. Device 0 in A at (100, 0)
    sends 0.1 W; interferers in B at (900, 0) with 0.2 W and in C at (0, 700) with 0.5 W. At A:
    S = 0.1 * 10^-(128.1 + 37.6 log10 0.1)/10, I = 0.2 * 10^-(128.1 + 37.6 log10 0.9)/10
    + 0.5 * 10^-(128.1 + 37.6 log10 0.7)/10, SINR = S / (N0 + I), N0 = -104 dBm."""
    sites = np.array([[0.0, 0.0], [1000.0, 0.0], [0.0, 1000.0]])
    pos = np.array([[100.0, 0.0], [900.0, 0.0], [0.0, 700.0]])
    power_w = np.array([0.1, 0.2, 0.5])
    rx = power_w[:, None] * layout.site_gains(pos, sites)
    noise_w = 10 ** (-13.4)

    def gain(d_km: float) -> float:
        return 10 ** (-(128.1 + 37.6 * math.log10(d_km)) / 10)

    s = 0.1 * gain(0.1)
    i = 0.2 * gain(0.9) + 0.5 * gain(0.7)
    sinr = interference.uplink_sinr(
        rx, np.array([0, 1, 2]), np.array([0, 0, 0]), np.ones(3, bool), noise_w
    )
    assert sinr[0] == pytest.approx(s / (noise_w + i), rel=1e-12)
    assert interference.uplink_interference_w(
        rx, np.array([0, 1, 2]), np.array([0, 0, 0]), np.ones(3, bool)
    )[0] == pytest.approx(i, rel=1e-12)


def test_reuse_three_among_three_neighbouring_cells_gives_zero_interference():
    """Three mutually neighbouring cells of the hexagonal layout (0, 1, 2) under reuse 3, two
    devices each, all transmitting: zero interference, so SINR = SNR."""
    sites = layout.hexagonal_sites_m(1, ISD)[:3]
    band = layout.reuse_bands(sites, 3)
    assert len(set(band.tolist())) == 3
    rng = np.random.default_rng(11)
    pos = sites[[0, 0, 1, 1, 2, 2]] + rng.uniform(-100.0, 100.0, (6, 2))
    rx = 0.2 * layout.site_gains(pos, sites)
    serving = np.array([0, 0, 1, 1, 2, 2])
    active = np.ones(6, bool)
    assert interference.uplink_interference_w(rx, serving, band, active).tolist() == [0.0, 0.0, 0.0]
    snr = rx[np.arange(6), serving] / 1e-13
    assert interference.uplink_sinr(rx, serving, band, active, 1e-13) == pytest.approx(
        snr, rel=1e-15
    )


def test_devices_of_the_same_cell_do_not_interfere():
    """Two devices in one cell, both transmitting: each gets its SNR (orthogonal in the cell)."""
    rx = np.array([[2e-12], [5e-12]])
    sinr = interference.uplink_sinr(rx, np.array([0, 0]), np.array([0]), np.ones(2, bool), 1e-13)
    assert sinr == pytest.approx([20.0, 50.0])


def test_silent_devices_do_not_interfere_but_get_the_sinr_they_would_have():
    """Device 1 (cell 1) silent: device 0 sees no interference; device 1's SINR counts device 0."""
    rx = np.array([[4e-12, 1e-13], [3e-13, 6e-12]])
    sinr = interference.uplink_sinr(
        rx, np.array([0, 1]), np.array([0, 0]), np.array([True, False]), 1e-13
    )
    assert sinr == pytest.approx([40.0, 6e-12 / (1e-13 + 1e-13)])


def test_an_unserved_silent_device_gets_zero_and_an_unserved_transmitter_is_refused():
    """serving = -1: SINR 0 when silent; transmitting with no cell raises ValueError."""
    rx = np.array([[4e-12], [3e-13]])
    sinr = interference.uplink_sinr(
        rx, np.array([0, -1]), np.array([0]), np.array([True, False]), 1e-13
    )
    assert sinr.tolist() == [40.0, 0.0]
    with pytest.raises(ValueError, match="device 1 transmits with no cell"):
        interference.uplink_sinr(rx, np.array([0, -1]), np.array([0]), np.ones(2, bool), 1e-13)


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 30),
    c=st.integers(1, 7),
    bands=st.integers(1, 3),
)
def test_sinr_matches_a_loop_over_devices(seed, n, c, bands):
    """The vectorised SINR equals a loop over devices and interferers (rel. 1e-12), and never
    exceeds the SNR."""
    rng = np.random.default_rng(seed)
    rx = rng.lognormal(-28.0, 2.0, (n, c))
    serving = rng.integers(0, c, n)
    band = rng.integers(0, bands, c)
    active = rng.random(n) < 0.6
    noise = 1e-13
    sinr = interference.uplink_sinr(rx, serving, band, active, noise)
    for i in range(n):
        cell = serving[i]
        interferers = sum(
            rx[m, cell]
            for m in range(n)
            if active[m] and serving[m] != cell and band[serving[m]] == band[cell]
        )
        assert sinr[i] == pytest.approx(rx[i, cell] / (noise + interferers), rel=1e-12)
    assert (sinr <= rx[np.arange(n), serving] / noise * (1 + 1e-12)).all()


@pytest.mark.parametrize(
    ("rx", "serving", "band", "active", "noise"),
    [
        (np.ones(3), np.array([0, 0, 0]), np.array([0]), np.ones(3, bool), 1.0),
        (np.ones((2, 2)), np.array([0, 2]), np.array([0, 0]), np.ones(2, bool), 1.0),
        (np.ones((2, 2)), np.array([0, 1]), np.array([0]), np.ones(2, bool), 1.0),
        (np.ones((2, 2)), np.array([0, 1]), np.array([0, 0]), np.ones(2), 1.0),
        (-np.ones((2, 2)), np.array([0, 1]), np.array([0, 0]), np.ones(2, bool), 1.0),
        (np.full((2, 2), np.inf), np.array([0, 1]), np.array([0, 0]), np.ones(2, bool), 1.0),
        (np.ones((2, 2)), np.array([0, 1]), np.array([0, 0]), np.ones(2, bool), 0.0),
        (np.ones((2, 2)), np.array([0.0, 1.0]), np.array([0, 0]), np.ones(2, bool), 1.0),
    ],
)
def test_bad_sinr_inputs_are_refused(rx, serving, band, active, noise):
    """Wrong shapes or dtypes, cells out of range, negative or infinite powers and zero noise
    raise ValueError."""
    with pytest.raises(ValueError):
        interference.uplink_sinr(rx, serving, band, active, noise)


# --------------------------------------------------------------------------- mean interference


def _uniform_in_hexagon(rng: np.random.Generator, n: int, radius: float) -> np.ndarray:
    """n points uniform in the layout's hexagon (circumradius radius, flat sides facing the
    bearings 0, 60, ... degrees), by rejection from its bounding box."""
    apothem = radius * SQRT3 / 2
    out = []
    while sum(len(o) for o in out) < n:
        p = rng.uniform([-apothem, -radius], [apothem, radius], (2 * n, 2))
        inside = np.ones(len(p), bool)
        for k in range(6):
            normal = np.array([math.cos(k * math.pi / 3), math.sin(k * math.pi / 3)])
            inside &= p @ normal <= apothem
        out.append(p[inside])
    return np.concatenate(out)[:n]


@pytest.mark.parametrize(
    ("neighbour", "shape"), [(1, "hexagon"), (2, "hexagon"), (8, "hexagon"), (1, "disc")]
)
def test_mean_interference_matches_monte_carlo_drops(neighbour, shape):
    """400,000 uniform drops in the interfering cell (seed 5): the sample mean of P 10^(-PL/10)
    at the victim (the centre site) is within 4 standard errors of mean_interference_w, and
    within 1 %."""
    sites = layout.hexagonal_sites_m(2, ISD)
    radius = ISD / SQRT3
    rng = np.random.default_rng(5)
    n = 400_000
    if shape == "hexagon":
        drops = _uniform_in_hexagon(rng, n, radius)
    else:
        r = radius * np.sqrt(rng.random(n))
        a = rng.uniform(0, 2 * math.pi, n)
        drops = np.stack([r * np.cos(a), r * np.sin(a)], axis=1)
    drops = drops + sites[neighbour]
    power_w = 0.2
    samples = power_w * physics.large_scale_gain(
        physics.path_loss_db(physics.distance_m(drops, sites[0]))
    )
    expected = float(
        interference.mean_interference_w(power_w, sites[0], sites[neighbour], radius, shape=shape)
    )
    se = samples.std(ddof=1) / math.sqrt(n)
    assert abs(samples.mean() - expected) < 4 * se
    assert samples.mean() == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize(
    ("slope_db", "closed_form"),
    [
        (20.0, lambda d, r: math.log(d**2 / (d**2 - r**2)) / r**2),
        (40.0, lambda d, r: 1.0 / (d**2 - r**2) ** 2),
    ],
)
def test_mean_interference_of_a_disc_matches_the_closed_forms(slope_db, closed_form):
    """Slopes 20 and 40 dB/decade (gain 10^(-PL0/10) / d^2 or / d^4, d_ref = 1 m): over a disc of
    radius R whose centre is D > R away the mean of 1/d^2 is ln(D^2 / (D^2 - R^2)) / R^2 and of
    1/d^4 is 1 / (D^2 - R^2)^2 (rel. 1e-7)."""
    big_d, radius, pl0 = 800.0, 300.0, 100.0
    got = interference.mean_interference_w(
        1.0,
        [0.0, 0.0],
        [big_d, 0.0],
        radius,
        shape="disc",
        intercept_db=pl0,
        slope_db=slope_db,
        reference_distance_m=1.0,
        min_distance_m=1e-3,
    )
    expected = 10 ** (-pl0 / 10) * closed_form(big_d, radius)
    assert float(got) == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize(
    ("radius", "shape"), [(0.0, "hexagon"), (math.nan, "hexagon"), (100.0, "square")]
)
def test_bad_mean_interference_inputs_are_refused(radius, shape):
    """A zero or NaN cell radius and an unknown cell shape raise ValueError."""
    with pytest.raises(ValueError):
        interference.mean_interference_w(0.2, [0.0, 0.0], [ISD, 0.0], radius, shape=shape)


def test_mean_interference_is_linear_in_power_and_the_same_for_symmetric_neighbours():
    """Twice the power, twice the interference; the six ring-1 neighbours give the same value."""
    sites = layout.hexagonal_sites_m(1, ISD)
    radius = ISD / SQRT3
    values = [float(interference.mean_interference_w(0.1, sites[0], s, radius)) for s in sites[1:]]
    assert values == pytest.approx([values[0]] * 6, rel=1e-9)
    assert interference.mean_interference_w(
        [0.1, 0.2], sites[0], sites[1], radius
    ) == pytest.approx([values[0], 2 * values[0]], rel=1e-12)


def test_planning_interference_is_zero_for_the_centre_under_reuse_seven_in_one_ring():
    """Reuse 7 on 7 cells: no co-band cell, no planning interference; reuse 1: the centre's is
    six neighbours' mean interference, times the activity."""
    sites = layout.hexagonal_sites_m(1, ISD)
    radius = ISD / SQRT3
    assert (
        interference.mean_cell_interference_w(
            sites, layout.reuse_bands(sites, 7), 0.2, radius
        ).tolist()
        == [0.0] * 7
    )
    one = float(interference.mean_interference_w(0.2, sites[0], sites[1], radius))
    full = interference.mean_cell_interference_w(
        sites, layout.reuse_bands(sites, 1), 0.2, radius, 0.5
    )
    assert full[0] == pytest.approx(0.5 * 6 * one, rel=1e-9)
