"""Tests of sim.mobility: placement, random waypoint, traces, configuration and errors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from scipy import stats

from wflsim.sim.errors import ScenarioError
from wflsim.sim.rng import Streams
from wflsim.sim.world.mobility import (
    MobilityConfig,
    RandomWaypoint,
    StaticMobility,
    TraceMobility,
    build_mobility,
    uniform_disc_positions_m,
)

R = 500.0  # cell radius, m
RMIN = 10.0  # minimum distance, m


def rwp(
    seed: int = 0,
    n: int = 4,
    radius_m: float = R,
    speed: tuple[float, float] = (0.5, 1.5),
    pause_s: float = 0.0,
    **kw,
) -> RandomWaypoint:
    """A random-waypoint model built the way build_mobility builds it."""
    rmin = min(RMIN, radius_m / 2)
    cfg = MobilityConfig(model="random_waypoint", speed_mps=speed, pause_s=pause_s)
    m = build_mobility(
        cfg, num_devices=n, cell_radius_m=radius_m, min_distance_m=rmin, streams=Streams(seed)
    )
    assert isinstance(m, RandomWaypoint)
    if kw:  # rebuild with the same inputs and extra constructor options
        pos = uniform_disc_positions_m(n, radius_m, rmin, Streams(seed).devices("placement", n))
        m = RandomWaypoint(
            pos, radius_m, speed, pause_s, Streams(seed).devices("mobility", n), **kw
        )
    return m


def write_trace(path: Path, frame: pd.DataFrame) -> Path:
    """Write ``frame`` as CSV or Parquet according to the suffix of ``path``."""
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return path


def trace_frame() -> pd.DataFrame:
    """Two devices: 0 walks (0,0)->(10,20) over t in [0, 10]; 1 sits at (-5, 5) from t=2."""
    return pd.DataFrame(
        {
            "time_s": [10.0, 0.0, 2.0],  # unsorted on purpose
            "device": [0, 0, 1],
            "x_m": [10.0, 0.0, -5.0],
            "y_m": [20.0, 0.0, 5.0],
        }
    )


def build_trace(path: Path, n: int = 2, radius_m: float = R) -> TraceMobility:
    """Build a trace model from ``path`` through build_mobility."""
    cfg = MobilityConfig(model="trace", file=str(path))
    m = build_mobility(
        cfg, num_devices=n, cell_radius_m=radius_m, min_distance_m=RMIN, streams=Streams(0)
    )
    assert isinstance(m, TraceMobility)
    return m


# ---------------------------------------------------------------------------- placement


def test_uniform_disc_radii_within_annulus():
    """Uniform placement puts every device at a distance in [min_distance, R]."""
    pos = uniform_disc_positions_m(5000, R, RMIN, Streams(1).devices("placement", 5000))
    r = np.hypot(pos[:, 0], pos[:, 1])
    assert pos.shape == (5000, 2) and pos.dtype == np.float64
    assert r.min() >= RMIN * (1 - 1e-12) and r.max() <= R * (1 + 1e-12)


def test_uniform_disc_radial_cdf_ks():
    """Radial CDF matches (r^2 - rmin^2)/(R^2 - rmin^2): KS test, fixed seed, p > 0.001."""
    # Deterministic (fixed seed); a correct sampler fails this for only 0.1 % of seeds.
    rmin, n = 100.0, 4000
    pos = uniform_disc_positions_m(n, R, rmin, Streams(2024).devices("placement", n))
    r = np.hypot(pos[:, 0], pos[:, 1])
    cdf = lambda x: np.clip((x**2 - rmin**2) / (R**2 - rmin**2), 0.0, 1.0)  # noqa: E731
    assert stats.kstest(r, cdf).pvalue > 1e-3


def test_uniform_disc_angle_uniform_ks():
    """Placement angles are uniform on [-pi, pi): KS test, fixed seed, p > 0.001."""
    n = 4000
    pos = uniform_disc_positions_m(n, R, RMIN, Streams(7).devices("placement", n))
    ang = np.arctan2(pos[:, 1], pos[:, 0])
    assert stats.kstest(ang, stats.uniform(loc=-np.pi, scale=2 * np.pi).cdf).pvalue > 1e-3


def test_uniform_disc_adding_device_keeps_others():
    """Adding a device leaves the first N devices' initial positions unchanged."""
    a = uniform_disc_positions_m(5, R, RMIN, Streams(3).devices("placement", 5))
    b = uniform_disc_positions_m(8, R, RMIN, Streams(3).devices("placement", 8))
    np.testing.assert_array_equal(a, b[:5])


# ---------------------------------------------------------------------------- streams


def test_rwp_adding_device_keeps_other_paths():
    """Adding devices leaves the first N devices' waypoint paths unchanged."""
    a, b = rwp(seed=5, n=3), rwp(seed=5, n=7)
    for t in [0.0, 13.0, 250.0, 1999.5, 40_000.0]:
        np.testing.assert_array_equal(a.positions_m(t), b.positions_m(t)[:3])


def test_rwp_same_seed_same_paths():
    """Two models built from the same seed walk identical paths."""
    a, b = rwp(seed=11), rwp(seed=11)
    for t in np.linspace(0.0, 5000.0, 21):
        np.testing.assert_array_equal(a.positions_m(t), b.positions_m(t))


def test_rwp_different_seed_different_paths():
    """Different seeds give different initial positions and waypoints."""
    a, b = rwp(seed=11), rwp(seed=12)
    for t in [0.0, 1000.0]:
        assert not np.allclose(a.positions_m(t), b.positions_m(t))


# ---------------------------------------------------------------------------- random waypoint


def test_rwp_stays_inside_disc():
    """Random-waypoint devices never leave the disc of radius R (small cell, many legs)."""
    radius = 20.0
    m = rwp(seed=2, n=16, radius_m=radius, speed=(1.0, 3.0), pause_s=0.3)
    for t in np.linspace(0.0, 3000.0, 2001):
        pos = m.positions_m(t)
        assert np.hypot(pos[:, 0], pos[:, 1]).max() <= radius * (1 + 1e-12)


def test_rwp_speed_never_exceeds_hi():
    """Displacement between consecutive queries is at most hi * dt (+1e-9 m)."""
    hi = 2.0
    m = rwp(seed=3, n=16, radius_m=30.0, speed=(0.5, hi), pause_s=1.0)
    times = np.cumsum(np.random.default_rng(0).exponential(2.0, 3000))
    prev_t, prev = 0.0, m.positions_m(0.0)
    for t in times:
        pos = m.positions_m(t)
        step = np.hypot(*(pos - prev).T)
        assert (step <= hi * (t - prev_t) + 1e-9).all()
        prev_t, prev = t, pos


def _first_leg(seed: int, device: int, radius: float, v: float) -> np.ndarray:
    """Waypoint of a device's first leg, from the documented draw order (u0, u1, u2)."""
    u0, u1, _ = Streams(seed).device("mobility", device).random(3)
    r, a = radius * math.sqrt(u0), 2 * math.pi * u1
    return np.array([r * math.cos(a), r * math.sin(a)])


def test_rwp_single_leg_hand_check():
    """With lo = hi = v, position after dt is start + v dt * (unit vector to first waypoint)."""
    v, dt = 1.25, 7.0
    m = rwp(seed=9, n=3, speed=(v, v))
    start = m.positions_m(0.0)
    pos = m.positions_m(dt)
    for d in range(3):
        wp = _first_leg(9, d, R, v)
        direction = (wp - start[d]) / np.linalg.norm(wp - start[d])
        assert np.linalg.norm(wp - start[d]) > v * dt  # still on the first leg
        np.testing.assert_allclose(pos[d], start[d] + v * dt * direction, rtol=0, atol=1e-9)


def test_rwp_pauses_at_waypoint():
    """A device stands at its first waypoint for pause_s after arriving, then leaves."""
    v, pause = 2.0, 30.0
    m = rwp(seed=4, n=1, speed=(v, v), pause_s=pause)
    start = m.positions_m(0.0)[0]
    wp = _first_leg(4, 0, R, v)
    arrive = np.linalg.norm(wp - start) / v
    np.testing.assert_allclose(m.positions_m(arrive + 1e-6)[0], wp, atol=1e-9)
    np.testing.assert_allclose(m.positions_m(arrive + pause - 1e-6)[0], wp, atol=1e-9)
    assert np.linalg.norm(m.positions_m(arrive + pause + 1.0)[0] - wp) > 0.5 * v


def test_rwp_time_backwards_raises():
    """Querying an earlier time than the previous query raises ValueError."""
    m = rwp()
    m.positions_m(10.0)
    m.positions_m(10.0)  # equal times are fine
    with pytest.raises(ValueError, match="non-decreasing"):
        m.positions_m(9.0)


def test_rwp_many_legs_in_one_jump():
    """One query spanning ~10^5 legs per device is fast and matches coarse stepping."""
    kw = dict(seed=6, n=8, radius_m=5.0, speed=(1.0, 2.0), pause_s=0.0)
    jump, steps = rwp(**kw), rwp(**kw)
    for t in np.linspace(0.0, 3.0e5, 31)[1:]:
        steps.positions_m(t)
    np.testing.assert_array_equal(jump.positions_m(3.0e5), steps.positions_m(3.0e5))


def test_rwp_block_size_does_not_change_paths():
    """The number of legs generated at a time is invisible in the paths."""
    a = rwp(seed=8, radius_m=40.0, pause_s=0.7, legs_per_block=1)
    b = rwp(seed=8, radius_m=40.0, pause_s=0.7, legs_per_block=32)
    for t in np.linspace(0.0, 2000.0, 41):
        np.testing.assert_array_equal(a.positions_m(t), b.positions_m(t))


def test_rwp_state_rewinds_a_model_that_ran_ahead():
    """Loading a saved state into a model already queried far later continues from the save."""
    kw = dict(seed=9, n=5, radius_m=30.0, pause_s=0.3, legs_per_block=2)  # many blocks
    saved, other = rwp(**kw), rwp(**kw)
    saved.positions_m(150.0)
    state = saved.state_dict()
    other.positions_m(4000.0)  # far ahead: later blocks drawn, generator advanced
    other.load_state_dict(state)
    for t in (150.0, 151.0, 600.0, 2500.0):
        np.testing.assert_array_equal(other.positions_m(t), saved.positions_m(t))


def test_rwp_state_of_another_size_is_refused():
    """A 5-device state does not load into a 4-device model."""
    with pytest.raises(ValueError, match="devices"):
        rwp(n=4).load_state_dict(rwp(n=5).state_dict())


def test_static_and_trace_models_have_no_state(tmp_path):
    """Static and trace positions are functions of time: empty states."""
    assert rwp(n=2, pause_s=0.0).state_dict()["leg"].shape == (2,)
    assert StaticMobility(np.zeros((2, 2))).state_dict() == {}
    assert build_trace(write_trace(tmp_path / "t.csv", trace_frame())).state_dict() == {}


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 5),
    radius=st.floats(1.0, 1000.0),
    lo=st.floats(0.05, 5.0),
    spread=st.floats(0.0, 5.0),
    pause=st.sampled_from([0.0, 0.5, 10.0]),
    gaps=st.lists(st.floats(0.0, 200.0), min_size=1, max_size=30),
)
def test_rwp_query_granularity_invariance(seed, n, radius, lo, spread, pause, gaps):
    """Querying at t in one jump gives exactly the positions of many small steps to t."""
    speed = (lo, lo + spread)
    kw = dict(seed=seed, n=n, radius_m=radius, speed=speed, pause_s=pause)
    stepped, jumped = rwp(**kw), rwp(**kw)
    times = np.cumsum(gaps)
    for t in times:
        stepped.positions_m(t)
    np.testing.assert_array_equal(stepped.positions_m(times[-1]), jumped.positions_m(times[-1]))


def test_static_positions_constant():
    """Static mobility returns the same (copied) positions at every time."""
    m = build_mobility(
        MobilityConfig(), num_devices=6, cell_radius_m=R, min_distance_m=RMIN, streams=Streams(0)
    )
    assert isinstance(m, StaticMobility)
    p0 = m.positions_m(0.0)
    p0[:] = 0.0  # mutating the result must not affect the model
    np.testing.assert_array_equal(m.positions_m(1e6), m.positions_m(0.0))
    assert m.positions_m(5.0).shape == (6, 2)


def test_explicit_placement_used_as_initial_positions():
    """placement = "explicit" puts devices at positions_m at t = 0."""
    pts = [(1.0, 2.0), (-300.0, 0.0), (0.0, 499.0)]
    cfg = MobilityConfig(model="random_waypoint", placement="explicit", positions_m=pts)
    m = build_mobility(cfg, num_devices=3, cell_radius_m=R, min_distance_m=RMIN, streams=Streams(0))
    np.testing.assert_array_equal(m.positions_m(0.0), np.array(pts))


# ---------------------------------------------------------------------------- traces


def test_trace_linear_interpolation_midpoint(tmp_path):
    """Halfway between two samples the position is the midpoint."""
    m = build_trace(write_trace(tmp_path / "t.csv", trace_frame()))
    np.testing.assert_allclose(m.positions_m(5.0)[0], [5.0, 10.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(m.positions_m(2.5)[0], [2.5, 5.0], rtol=0, atol=1e-12)


def test_trace_clamped_outside_range(tmp_path):
    """Before the first / after the last sample a device holds its first / last position."""
    m = build_trace(write_trace(tmp_path / "t.csv", trace_frame()))
    np.testing.assert_array_equal(m.positions_m(-5.0), [[0.0, 0.0], [-5.0, 5.0]])
    np.testing.assert_array_equal(m.positions_m(1e9), [[10.0, 20.0], [-5.0, 5.0]])


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_trace_csv_and_parquet_load(tmp_path, suffix):
    """CSV and Parquet traces both load and give the same positions."""
    m = build_trace(write_trace(tmp_path / f"t{suffix}", trace_frame()))
    np.testing.assert_allclose(m.positions_m(7.5), [[7.5, 15.0], [-5.0, 5.0]])


def test_trace_csv_header_with_spaces(tmp_path):
    """A CSV header written as 'time_s, device, x_m, y_m' is accepted."""
    path = tmp_path / "t.csv"
    path.write_text("time_s, device, x_m, y_m\n0, 0, 1.0, 2.0\n0, 1, 3.0, 4.0\n")
    np.testing.assert_array_equal(build_trace(path).positions_m(0.0), [[1, 2], [3, 4]])


def test_trace_relative_path_resolves_against_base_dir(tmp_path):
    """A relative file path is resolved against base_dir (the scenario's folder)."""
    write_trace(tmp_path / "walk.csv", trace_frame())
    m = build_mobility(
        MobilityConfig(model="trace", file="walk.csv"),
        num_devices=2,
        cell_radius_m=R,
        min_distance_m=RMIN,
        streams=Streams(0),
        base_dir=tmp_path,
    )
    np.testing.assert_allclose(m.positions_m(5.0)[0], [5.0, 10.0])


def test_trace_missing_column_raises(tmp_path):
    """A trace without y_m raises ScenarioError naming mobility.file and the column."""
    path = write_trace(tmp_path / "t.csv", trace_frame().drop(columns="y_m"))
    with pytest.raises(ScenarioError, match="y_m") as err:
        build_trace(path)
    assert err.value.field == "mobility.file"


def test_trace_missing_device_raises(tmp_path):
    """Devices absent from the trace are named in a ScenarioError on mobility.file."""
    path = write_trace(tmp_path / "t.parquet", trace_frame())
    with pytest.raises(ScenarioError, match=r"device\(s\) 2, 3") as err:
        build_trace(path, n=4)
    assert err.value.field == "mobility.file"


def test_trace_unknown_device_raises(tmp_path):
    """A device id outside 0..N-1 in the trace raises ScenarioError on mobility.file."""
    path = write_trace(tmp_path / "t.csv", trace_frame())
    with pytest.raises(ScenarioError, match=r"1 device id\(s\) outside 0\.\.0") as err:
        build_trace(path, n=1)
    assert err.value.field == "mobility.file"


def test_trace_missing_file_raises(tmp_path):
    """A missing trace file raises ScenarioError on mobility.file naming the path."""
    with pytest.raises(ScenarioError, match="does not exist") as err:
        build_trace(tmp_path / "nope.csv")
    assert err.value.field == "mobility.file"
    assert "nope.csv" in str(err.value)


def test_trace_unreadable_file_raises(tmp_path):
    """A corrupt Parquet file raises ScenarioError on mobility.file."""
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"this is not parquet")
    with pytest.raises(ScenarioError, match="cannot read") as err:
        build_trace(path)
    assert err.value.field == "mobility.file"


def test_trace_duplicate_sample_raises(tmp_path):
    """Two samples of one device at the same time raise ScenarioError."""
    frame = pd.concat([trace_frame(), trace_frame().iloc[[0]]], ignore_index=True)
    with pytest.raises(ScenarioError, match="two samples"):
        build_trace(write_trace(tmp_path / "t.csv", frame))


def test_trace_non_numeric_value_raises(tmp_path):
    """A non-numeric coordinate raises ScenarioError naming the column and row."""
    frame = trace_frame().astype({"x_m": object})
    frame.loc[1, "x_m"] = "abc"
    with pytest.raises(ScenarioError, match="column x_m .* row 1"):
        build_trace(write_trace(tmp_path / "t.csv", frame))


@pytest.mark.parametrize("column", ["x_m", "device", "time_s"])
def test_trace_errors_never_quote_the_file(tmp_path, column):
    """A bad cell, or a file that is not a trace at all, is reported without its contents."""
    secret = "s3cr3t-passw0rd"
    frame = trace_frame().astype({column: object})
    frame.loc[1, column] = secret
    with pytest.raises(ScenarioError) as err:
        build_trace(write_trace(tmp_path / "t.csv", frame))
    assert secret not in str(err.value) and "row 1" in str(err.value)
    other = tmp_path / "other.csv"
    other.write_text(f"user,{secret}\nroot,{secret}\n")
    with pytest.raises(ScenarioError) as err:
        build_trace(other)
    assert secret not in str(err.value)


def test_trace_outside_cell_raises(tmp_path):
    """A trace sample outside the cell raises ScenarioError on mobility.file."""
    path = write_trace(tmp_path / "t.csv", trace_frame())
    with pytest.raises(ScenarioError, match="outside the cell") as err:
        build_trace(path, radius_m=15.0)
    assert err.value.field == "mobility.file"


# ---------------------------------------------------------------------------- configuration


def test_explicit_positions_count_mismatch_raises():
    """Explicit positions whose count differs from num_devices raise on mobility.positions_m."""
    cfg = MobilityConfig(placement="explicit", positions_m=[(0.0, 20.0), (30.0, 0.0)])
    with pytest.raises(ScenarioError, match="2 positions given for 3 devices") as err:
        build_mobility(cfg, num_devices=3, cell_radius_m=R, min_distance_m=RMIN, streams=Streams(0))
    assert err.value.field == "mobility.positions_m"


def test_explicit_positions_outside_cell_raise():
    """An explicit position outside the cell raises on mobility.positions_m naming the device."""
    cfg = MobilityConfig(placement="explicit", positions_m=[(0.0, 20.0), (400.0, 400.0)])
    with pytest.raises(ScenarioError, match=r"device\(s\) 1 lie outside") as err:
        build_mobility(cfg, num_devices=2, cell_radius_m=R, min_distance_m=RMIN, streams=Streams(0))
    assert err.value.field == "mobility.positions_m"


def test_uniform_placement_radius_below_min_distance_raises():
    """Uniform placement with cell radius <= min distance raises on mobility.placement."""
    with pytest.raises(ScenarioError) as err:
        build_mobility(
            MobilityConfig(), num_devices=2, cell_radius_m=5.0, min_distance_m=10.0,
            streams=Streams(0),
        )  # fmt: skip
    assert err.value.field == "mobility.placement"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"speed_mps": (0.0, 1.0)}, "0 < lo <= hi"),
        ({"speed_mps": (2.0, 1.0)}, "0 < lo <= hi"),
        ({"speed_mps": (1.0, math.inf)}, "finite"),
        ({"pause_s": -1.0}, "pause_s must be"),
        ({"placement": "explicit"}, "needs positions_m"),
        ({"positions_m": [(1.0, 1.0)]}, 'set placement = "explicit"'),
        ({"model": "trace"}, "needs file"),
        ({"file": "x.csv"}, 'set model = "trace"'),
        ({"positions_m": [(1.0, math.nan)], "placement": "explicit"}, r"positions_m\[0\]"),
        ({"speed": 1.0}, "Extra inputs are not permitted"),
    ],
)
def test_config_validation_messages(kwargs, message):
    """Invalid [mobility] tables fail validation with a precise message."""
    with pytest.raises(ValidationError, match=message):
        MobilityConfig(**kwargs)


# ---------------------------------------------------------------------------- kinematics


def test_static_kinematics_are_positions_with_zero_speed_and_odometer():
    """A static model: kinematics gives its positions, speed 0 and odometer 0."""
    m = StaticMobility([[1.0, 2.0], [3.0, -4.0]])
    k = m.kinematics(12.5)
    np.testing.assert_array_equal(k.positions_m, [[1.0, 2.0], [3.0, -4.0]])
    np.testing.assert_array_equal(k.speed_mps, [0.0, 0.0])
    np.testing.assert_array_equal(k.odometer_m, [0.0, 0.0])


def test_rwp_speed_is_the_leg_speed_while_walking_and_zero_while_paused():
    """With lo = hi = v: speed v on the first leg, 0 during the pause at its waypoint, v after."""
    v, pause = 2.0, 30.0
    m = rwp(seed=4, n=1, speed=(v, v), pause_s=pause)
    arrive = np.linalg.norm(_first_leg(4, 0, R, v) - m.positions_m(0.0)[0]) / v
    assert m.speed_mps(0.0)[0] == v
    assert m.speed_mps(arrive / 2)[0] == v
    assert m.speed_mps(arrive + 1.0)[0] == 0.0
    assert m.speed_mps(arrive + pause + 1.0)[0] == v


def test_rwp_odometer_grows_by_the_distance_walked():
    """On a straight leg the odometer grows by the displacement; over many legs it never grows
    less than the displacement nor more than speed x time, and pauses do not count."""
    v = 1.0
    m = rwp(seed=5, n=3, radius_m=50.0, speed=(v, v), pause_s=2.0)
    prev, prev_t = m.kinematics(0.0), 0.0
    k = m.kinematics(0.5)  # 0.5 m along the first leg (legs in a 50 m disc are longer)
    step = np.linalg.norm(k.positions_m - prev.positions_m, axis=1)
    np.testing.assert_allclose(k.odometer_m - prev.odometer_m, step, rtol=1e-9)
    for t in np.linspace(1.0, 600.0, 300):
        k = m.kinematics(t)
        walked = k.odometer_m - prev.odometer_m
        assert np.all(walked >= np.linalg.norm(k.positions_m - prev.positions_m, axis=1) - 1e-9)
        assert np.all(walked <= v * (t - prev_t) + 1e-9)
        prev, prev_t = k, t
    assert np.all(m.odometer_m(600.0) < v * 600.0)  # part of the time was spent pausing


def test_rwp_odometer_does_not_depend_on_how_often_it_is_read():
    """Reading the odometer at every second or once gives the same value (path length is exact)."""
    kw = dict(seed=7, n=4, radius_m=40.0, speed=(0.5, 3.0), pause_s=1.0, legs_per_block=2)
    fine, coarse = rwp(**kw), rwp(**kw)
    for t in np.arange(0.0, 900.0, 1.0):
        fine.kinematics(t)
    np.testing.assert_allclose(fine.odometer_m(900.0), coarse.odometer_m(900.0), rtol=1e-12)


def test_rwp_state_keeps_the_odometer():
    """A model loaded from a state continues the saved model's odometer and speeds."""
    kw = dict(seed=3, n=5, radius_m=30.0, pause_s=0.3, legs_per_block=2)
    saved, other = rwp(**kw), rwp(**kw)
    saved.kinematics(150.0)
    other.kinematics(3000.0)
    other.load_state_dict(saved.state_dict())
    for t in (150.0, 400.0, 2500.0):
        a, b = other.kinematics(t), saved.kinematics(t)
        np.testing.assert_array_equal(a.odometer_m, b.odometer_m)
        np.testing.assert_array_equal(a.speed_mps, b.speed_mps)


def test_trace_speed_and_odometer_by_hand(tmp_path):
    """Device 0 walks sqrt(500) m in 10 s: speed sqrt(5) m/s inside, 0 outside; odometer linear, clamped."""
    m = build_trace(write_trace(tmp_path / "t.csv", trace_frame()))
    length = math.hypot(10.0, 20.0)
    np.testing.assert_allclose(m.speed_mps(4.0), [length / 10.0, 0.0])
    np.testing.assert_allclose(m.speed_mps(0.0), [length / 10.0, 0.0])  # walks on from t = 0
    np.testing.assert_array_equal(m.speed_mps(10.0), [0.0, 0.0])  # after its last sample
    np.testing.assert_array_equal(m.speed_mps(-1.0), [0.0, 0.0])
    np.testing.assert_allclose(m.odometer_m(4.0), [0.4 * length, 0.0])
    np.testing.assert_allclose(m.odometer_m(99.0), [length, 0.0])
    np.testing.assert_array_equal(m.odometer_m(-3.0), [0.0, 0.0])
