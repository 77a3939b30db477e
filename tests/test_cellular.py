"""Several cells in a run ([cells]): the interference uplink against hand computations, reuse,
association and handover in the trace, planning, composition with the server modes, resume."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import wflsim
from conftest import base_scenario, events, run_in_memory, saved_and_continued
from wflsim.app.run import build_engine, make_learner
from wflsim.sim.errors import ScenarioError
from wflsim.sim.radio.cells.component import Cells
from wflsim.sim.radio.cells.config import CellsConfig, read_sites_file
from wflsim.sim.radio.cells.layout import CellLayout, build_layout
from wflsim.sim.radio.cells.uplink import CellularUplink
from wflsim.sim.radio.interference import (
    mean_interference_w,
    mean_link_gain,
    planning_interference_w,
)
from wflsim.sim.world.mobility.base import Kinematics, Mobility

W_HZ = 1e6
N0_W = 1e-13


def paper_gain(d_m):
    """The paper's path loss written out: 128.1 + 37.6 log10(d / 1 km) dB, as a linear gain."""
    d = np.maximum(np.asarray(d_m, dtype=np.float64), 10.0)
    return 10.0 ** (-(128.1 + 37.6 * np.log10(d / 1000.0)) / 10.0)


def uplink_of(sites, serving, positions, modes=None, band=None, load=None):
    """A CellularUplink over fixed cells, with gains from the written-out path loss (no
    fading), opened for a slot of deadline 10 s; returns (env, uplink, log)."""
    sites = np.asarray(sites, dtype=np.float64)
    c = len(sites)
    layout = CellLayout(
        sites,
        np.zeros(c, dtype=np.int64) if band is None else np.asarray(band),
        tuple(modes or ["dedicated"] * c),
        1000.0,
        5000.0,
    )
    n = len(serving)
    cells = Cells(layout, n, "nearest", 0.0, paper_gain)
    cells.serving = np.asarray(serving, dtype=np.int64)
    cells.load = (
        np.bincount(cells.serving, minlength=c) if load is None else np.asarray(load, np.int64)
    )
    pos = np.asarray(positions, dtype=np.float64)
    d = np.hypot(pos[:, None, 0] - sites[None, :, 0], pos[:, None, 1] - sites[None, :, 1])
    cells.slot_gain = paper_gain(d)
    env = simpy.Environment()
    log = []
    link = CellularUplink(cells, W_HZ, N0_W, 8, 9)
    return env, link, log, cells


def open_slot(env, link, log, power, bits, closes_at="last_upload"):
    h = link.cells.slot_gain[np.arange(len(power)), link.cells.serving]
    link.open_slot(
        env,
        deadline_s=10.0,
        closes_at=closes_at,
        tx_power_w=np.asarray(power, dtype=np.float64),
        channel_gain=h,
        payload_bits=np.asarray(bits, dtype=np.float64),
        upload_full_s=np.asarray(bits) / (W_HZ * np.log2(1 + np.asarray(power) * h / N0_W)),
        log=log.append,
        on_end=lambda d: None,
    )
    return h


SITES3 = [[0.0, 0.0], [1000.0, 0.0], [0.0, 1000.0]]
POS3 = [[100.0, 0.0], [900.0, 50.0], [30.0, 800.0]]


def test_sinr_with_two_interferers_matches_a_hand_computation():
    """Device 0's rate with uploads in flight in two co-band cells is W log2(1 + p h / (N0 + I)), I the two received powers."""
    env, link, log, _ = uplink_of(SITES3, [0, 1, 2], POS3)
    p = np.array([0.5, 1.0, 0.2])
    open_slot(env, link, log, p, [1e6, 1e6, 1e6])
    for d in range(3):
        link.submit(d)
    rates = link._rates(np.arange(3))
    d10 = math.hypot(900.0 - 0.0, 50.0 - 0.0)  # device 1 to site 0
    d20 = math.hypot(30.0, 800.0)  # device 2 to site 0
    interference = 1.0 * paper_gain(d10) + 0.2 * paper_gain(d20)
    signal = 0.5 * paper_gain(100.0)
    expected = W_HZ * math.log2(1.0 + signal / (N0_W + interference))
    assert rates[0] == pytest.approx(expected, rel=1e-12)


def test_a_rate_changes_when_an_upload_in_another_cell_ends():
    """Device 0's upload ends when its bits at the rate before and after device 1's end add up (hand computation)."""
    env, link, log, _ = uplink_of(SITES3[:2], [0, 1], POS3[:2])
    p = np.array([1.0, 1.0])
    bits = np.array([4e6, 1e5])
    open_slot(env, link, log, p, bits)
    link.submit(0)
    link.submit(1)
    env.run()
    g00, g01 = paper_gain(100.0), paper_gain(1000.0 - 100.0)
    g11, g10 = paper_gain(math.hypot(100.0, 50.0)), paper_gain(math.hypot(900.0, 50.0))
    r1 = W_HZ * math.log2(1 + g11 / (N0_W + g01))
    t1 = bits[1] / r1
    r0_both = W_HZ * math.log2(1 + g00 / (N0_W + g10))
    r0_alone = W_HZ * math.log2(1 + g00 / N0_W)
    t0 = t1 + (bits[0] - r0_both * t1) / r0_alone
    ends = {d: t for t, d, code in log if code == 9}
    assert ends[1] == pytest.approx(t1, rel=1e-9)
    assert ends[0] == pytest.approx(t0, rel=1e-9)
    assert link.arrived.all()


def test_interference_is_spread_over_a_dedicated_cells_spectrum():
    """An interferer in a cell of 4 dedicated devices adds a quarter of its received power to a victim's band."""
    env, link, log, _ = uplink_of(SITES3[:2], [0, 1], POS3[:2], load=[1, 4])
    open_slot(env, link, log, [1.0, 1.0], [1e6, 1e6])
    link.submit(0)
    link.submit(1)
    psd = link.interference_psd(np.arange(2))
    g10 = paper_gain(math.hypot(900.0, 50.0))
    assert psd[0] * W_HZ == pytest.approx(g10 / 4.0, rel=1e-12)


def test_reuse_3_among_three_neighbouring_cells_gives_zero_interference():
    """Three mutually neighbouring hexagonal cells under reuse 3 get three bands, and every rate is the interference-free one."""
    isd = 1000.0
    sites = [[0.0, 0.0], [isd, 0.0], [isd / 2, isd * math.sqrt(3) / 2]]
    cfg = CellsConfig(sites_m=[tuple(s) for s in sites], reuse_factor=3)
    layout = build_layout(cfg, 577.0, "dedicated")
    assert sorted(layout.band.tolist()) == [0, 1, 2] and not layout.interferes
    pos = [[100.0, 0.0], [900.0, 0.0], [500.0, 800.0]]
    env, link, log, _ = uplink_of(sites, [0, 1, 2], pos, band=layout.band)
    h = open_slot(env, link, log, [1.0, 1.0, 1.0], [1e6, 1e6, 1e6])
    for d in range(3):
        link.submit(d)
    assert (link.interference_psd(np.arange(3)) == 0.0).all()
    alone = W_HZ * np.log2(1.0 + h / N0_W)
    np.testing.assert_allclose(link._rates(np.arange(3)), alone, rtol=1e-13)


def test_ofdma_cell_shares_its_band_and_sees_the_other_cells_interference():
    """Two uploads in an OFDMA cell get W/2 each, with the interference of the other cell's upload over their half band."""
    pos = [[100.0, 0.0], [0.0, 150.0], [900.0, 0.0]]
    env, link, log, _ = uplink_of(SITES3[:2], [0, 0, 1], pos, modes=["ofdma", "tdma"])
    open_slot(env, link, log, [1.0, 0.5, 1.0], [1e6, 1e6, 1e6])
    for d in range(3):
        link.submit(d)
    env.run(until=1e-9)  # the TDMA cell's pick (a zero-delay event)
    rates = link._rates(np.arange(3))
    i0 = 1.0 * paper_gain(900.0) / W_HZ  # device 2 (TDMA, whole band) at site 0, per Hz
    b = W_HZ / 2
    g = paper_gain(np.array([100.0, 150.0]))
    expected = b * np.log2(1 + np.array([1.0, 0.5]) * g / ((N0_W / W_HZ + i0) * b))
    np.testing.assert_allclose(rates[:2], expected, rtol=1e-12)


def test_planning_quadrature_matches_the_double_integral():
    """The planning mean gain by quadrature equals the dblquad integral of the paper's path loss over a hexagon."""
    isd = 1732.0508
    for rel in [(isd, 0.0), (1.5 * isd, isd * math.sqrt(3) / 2), (2 * isd, 0.3 * isd)]:
        quad = mean_link_gain(paper_gain, rel, isd / math.sqrt(3))
        ref = float(mean_interference_w(1.0, rel, (0.0, 0.0), isd / math.sqrt(3)))
        assert quad == pytest.approx(ref, rel=1e-9)


def test_planning_interference_of_reuse_7_layout_is_zero():
    """Seven cells under reuse 7 plan on no interference; under reuse 1 the centre plans on the most."""
    cfg7 = CellsConfig(rings=1, reuse_factor=7)
    cfg1 = CellsConfig(rings=1, reuse_factor=1)
    i7 = planning_interference_w(build_layout(cfg7, 1000.0, "dedicated"), paper_gain, 1.0, 1.0)
    i1 = planning_interference_w(build_layout(cfg1, 1000.0, "dedicated"), paper_gain, 1.0, 1.0)
    assert (i7 == 0.0).all()
    assert i1[0] == i1.max() and (i1[1:] < i1[0]).all()


# ------------------------------------------------------------------ runs


def cells_scenario(**cells):
    """Three cells on one band, 12 devices, fading, the controller."""
    return base_scenario(
        run={"frames": 2, "slots_per_frame": 3, "deadline_s": 0.8},
        network={"num_devices": 12, "cell_radius_m": 400.0},
        channel={"fading": "rayleigh"},
        scheme={"name": "two_timescale"},
        cells={"sites_m": [[0.0, 0.0], [600.0, 0.0], [300.0, 520.0]], **cells},
    )


class LineMobility(Mobility):
    """One device walking from (x0, 0) to (x1, 0) over half the run and back over the other half."""

    def __init__(self, x0, x1, half_s):
        self.x0, self.x1, self.half_s = x0, x1, half_s

    def _x(self, t):
        u = min(t / self.half_s, 2.0)
        f = u if u <= 1.0 else 2.0 - u
        return self.x0 + (self.x1 - self.x0) * f

    def positions_m(self, time_s):
        return np.array([[self._x(time_s), 0.0]])

    def speed_mps(self, time_s):
        return np.array([abs(self.x1 - self.x0) / self.half_s])

    def odometer_m(self, time_s):
        return np.array([abs(self.x1 - self.x0) * min(time_s / self.half_s, 2.0)])

    def kinematics(self, time_s):
        return Kinematics(self.positions_m(time_s), self.speed_mps(time_s), self.odometer_m(time_s))

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_walking_between_two_sites_hands_over_once_each_way_at_the_documented_point():
    """A device walking A -> B -> A hands over to B at the first frame past D k/(1+k), k = 10^(h/37.6), and back at the mirror point."""
    d_ab, hyst, frames, tau = 1000.0, 3.0, 40, 0.8
    data = base_scenario(
        run={"frames": frames, "slots_per_frame": 1, "deadline_s": tau},
        network={"num_devices": 1, "cell_radius_m": 600.0},
        cells={"sites_m": [[0.0, 0.0], [d_ab, 0.0]], "reuse_factor": 1, "hysteresis_db": hyst},
    )
    prep = wflsim.prepare(data)
    walk = LineMobility(20.0, 980.0, frames / 2 * tau)
    prep.mobility = walk
    engine = build_engine(prep, make_learner(prep))
    engine.run()
    hand = events(engine.table(), "handover")
    k = 10.0 ** (hyst / 37.6)
    x_h = d_ab * k / (1.0 + k)
    xs = np.array([walk._x(f * tau) for f in range(frames)])
    going = int(np.flatnonzero(xs > x_h)[0])
    back = int(np.flatnonzero((np.arange(frames) > going) & (xs < d_ab - x_h))[0])
    assert hand["frame"].tolist() == [going, back]
    assert hand["cell"].tolist() == [1, 0] and hand["previous_cell"].tolist() == [0, 1]
    assert engine.stats.handovers == 2


def test_position_rows_carry_the_serving_cell_and_distance_to_its_site():
    """Position rows hold each device's serving cell and its distance to that site."""
    table, _ = run_in_memory(cells_scenario())
    pos = events(table, "position")
    sites = np.array([[0.0, 0.0], [600.0, 0.0], [300.0, 520.0]])
    s = sites[pos["cell"].to_numpy().astype(int)]
    d = np.hypot(pos["x_m"] - s[:, 0], pos["y_m"] - s[:, 1])
    np.testing.assert_allclose(pos["distance_m"], d, rtol=1e-12)
    nearest = np.argmin(
        np.hypot(
            pos["x_m"].to_numpy()[:, None] - sites[:, 0],
            pos["y_m"].to_numpy()[:, None] - sites[:, 1],
        ),
        axis=1,
    )
    assert (pos["cell"].to_numpy().astype(int) == nearest).all()


def test_one_site_through_the_cells_path_equals_no_cells():
    """rings = 0 (one site at the origin) gives the trace of a run without [cells], but for the cell column."""
    data = base_scenario(channel={"fading": "rayleigh"}, scheme={"name": "two_timescale"})
    plain, _ = run_in_memory(data)
    one, stats = run_in_memory({**data, "cells": {"rings": 0}})
    assert stats.handovers == 0
    assert set(events(one, "position")["cell"]) == {0}
    assert one.drop_columns(["cell"]).equals(plain.drop_columns(["cell"]))


def test_interference_raises_outage_and_planning_on_it_lowers_it():
    """Under reuse 1 the controller planning on noise loses more uploads than without interference; planning on the mean interference loses fewer."""

    def outage(**cells):
        _, st = run_in_memory(cells_scenario(**cells))
        return st.outage_rate

    own_bands = outage(bands=[0, 1, 2])
    reuse1 = outage()
    planned = outage(plan_on="mean_interference")
    assert own_bands < reuse1
    assert planned < reuse1


@pytest.mark.parametrize("server", ["sync", "semi_sync", "async"])
@pytest.mark.parametrize("uplink", [["dedicated"] * 3, ["ofdma", "tdma", "dedicated"]])
def test_cells_resume_to_the_uninterrupted_trace(tmp_path, server, uplink):
    """Kill-and-resume at a frame boundary continues a run with cells exactly (association, uplinks in flight)."""
    data = cells_scenario(uplink=uplink)
    data["mobility"] = {"model": "random_waypoint", "speed_mps": [20.0, 40.0]}
    data["run"] = {"frames": 3, "slots_per_frame": 3, "deadline_s": 0.8}
    if server == "async":
        data["server"] = {"mode": "async", "buffer_size": 3}
    elif server == "semi_sync":
        data["server"] = {"mode": "semi_sync"}
    full, _ = run_in_memory(copy.deepcopy(data))
    resumed = saved_and_continued(data, 1, tmp_path / "state.npz")
    assert resumed.equals(full)


def test_a_run_with_cells_is_reproducible():
    """The same scenario and seed give the identical trace with cells and interference."""
    a, _ = run_in_memory(cells_scenario())
    b, _ = run_in_memory(cells_scenario())
    assert a.equals(b)


@pytest.mark.parametrize(
    ("cells", "extra", "field"),
    [
        ({"rings": 1, "sites_m": [[0.0, 0.0]]}, {}, "cells"),
        ({"rings": 1, "bands": [0, 1]}, {}, "cells"),
        ({"sites_m": [[0.0, 0.0], [0.0, 0.0]]}, {}, "cells.sites_m"),
        (
            {"sites_m": [[0.0, 0.0], [700.0, 10.0], [5.0, 333.0]], "reuse_factor": 3},
            {},
            "cells.sites_m",
        ),
        ({"rings": 1}, {"run": {"kernel": "closed_form"}}, "run.kernel"),
        ({"rings": 1, "hysteresis_db": -1.0}, {}, "cells.hysteresis_db"),
        ({"rings": 1, "margin_db": 3.0}, {}, "cells"),
    ],
)
def test_bad_cells_are_refused_naming_the_field(cells, extra, field):
    """A malformed or impossible [cells] table is refused with a ScenarioError naming its field."""
    data = base_scenario(cells=cells, **extra)
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(data)
    assert err.value.field == field or err.value.field.startswith(field + "."), str(err.value)


def test_closed_form_runs_cells_that_do_not_interact():
    """Seven cells under reuse 7 with dedicated bands run on the closed form and equal the event kernel's trace."""
    data = cells_scenario()
    data["cells"] = {"rings": 1, "reuse_factor": 7}
    closed, _ = run_in_memory({**data, "run": {**data["run"], "kernel": "closed_form"}})
    event, _ = run_in_memory({**data, "run": {**data["run"], "kernel": "event"}})
    assert closed.equals(event)


def test_sites_from_a_file_become_the_scenarios_sites(tmp_path):
    """A sites file's rows (and band column) are the cells' sites and bands, relative to the scenario's folder."""
    (tmp_path / "sites.csv").write_text("x_m,y_m,band\n0,0,0\n800,0,0\n400,700,1\n")
    (tmp_path / "s.toml").write_text(
        'name = "f"\n[learning]\nenabled = false\nnum_params = 1000\n'
        '[cells]\nsites_file = "sites.csv"\n'
    )
    prep = wflsim.prepare(tmp_path / "s.toml")
    assert prep.cells is not None
    np.testing.assert_array_equal(prep.cells.layout.sites_m, [[0, 0], [800, 0], [400, 700]])
    assert prep.cells.layout.band.tolist() == [0, 0, 1]
    assert prep.scenario.cells.sites_file is None


@pytest.mark.parametrize(
    "text",
    [
        "x,y\n1,2\n",  # no x_m / y_m columns
        "x_m,y_m\n",  # no site
        "x_m,y_m\n1,nan\n",  # not finite
        "x_m,y_m\n1,abc\n",  # not a number
        "x_m,y_m,band\n0,0,-1\n",  # a negative band
        "x_m,y_m\n0,0\n0,0\n",  # two sites at one point
    ],
)
def test_a_bad_sites_file_is_refused_naming_the_field(tmp_path, text):
    """A sites file that is malformed is refused with a ScenarioError naming a cells field."""
    (tmp_path / "sites.csv").write_text(text)
    data = cells_scenario()
    data["cells"] = {"sites_file": str(tmp_path / "sites.csv")}
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(data)
    assert err.value.field.startswith("cells")


def test_a_missing_sites_file_is_refused(tmp_path):
    """A sites file that is not there is refused naming cells.sites_file."""
    data = cells_scenario()
    data["cells"] = {"sites_file": str(tmp_path / "nowhere.csv")}
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(data)
    assert err.value.field == "cells.sites_file"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300))
@example(blob=b"\r\x00")  # a carriage return the CSV reader took for a line break in a field
def test_any_bytes_as_a_sites_file_give_sites_or_a_scenario_error(tmp_path, blob):
    """Whatever bytes a sites file holds, reading it gives sites or a ScenarioError naming the field, nothing else."""
    path = tmp_path / "sites.csv"
    path.write_bytes(blob)
    try:
        sites, bands = read_sites_file(path)
    except ScenarioError as err:
        assert err.field == "cells.sites_file"
        return
    assert 1 <= len(sites) and all(np.isfinite(s).all() for s in np.asarray(sites))


_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -1.0, 1e12, 250.0])
)


def _mostly(valid, hostile):
    """Valid values about three times in four (so that runs happen), hostile ones the rest."""
    return st.one_of(valid, valid, valid, hostile)


_SITES = st.lists(
    st.tuples(st.floats(-900.0, 900.0), st.floats(-900.0, 900.0)).map(list),
    min_size=1,
    max_size=4,
    unique_by=lambda p: (round(p[0]), round(p[1])),
)
_LAYOUT = st.one_of(
    st.fixed_dictionaries({"rings": st.integers(0, 2)}),
    st.fixed_dictionaries({"sites_m": _SITES}),
    st.fixed_dictionaries(
        {},
        optional={
            "rings": st.integers(-1, 20),
            "sites_m": st.lists(st.lists(_FLOATS, min_size=1, max_size=3), max_size=4),
        },
    ),
)
_CELLS = st.tuples(
    _LAYOUT,
    st.fixed_dictionaries(
        {},
        optional={
            "reuse_factor": _mostly(st.just(1), st.sampled_from([2, 3, 7])),
            "uplink": st.lists(st.sampled_from(["dedicated", "ofdma", "tdma", "fdma"]), max_size=4),
            "association": st.sampled_from(["strongest", "nearest", "random"]),
            "hysteresis_db": _mostly(st.floats(0.0, 10.0), _FLOATS),
            "plan_on": st.sampled_from(["noise", "mean_interference", "margin", "oracle"]),
            "margin_db": _mostly(st.just(0.0), _FLOATS),
            "area_radius_m": _mostly(st.floats(600.0, 3000.0), _FLOATS),
        },
    ),
).map(lambda parts: {**parts[0], **parts[1]})
_HIERARCHY = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "cloud_every_slots": _mostly(st.integers(1, 3), st.integers(-1, 0)),
            "backhaul_latency_s": _mostly(
                st.floats(0.0, 0.2), st.just({"dist": "uniform", "low": -1.0, "high": 0.1})
            ),
            "backhaul_rate_bps": _mostly(st.floats(1e6, 1e10), _FLOATS),
            "backhaul_energy_j_per_bit": _mostly(st.floats(0.0, 1e-6), _FLOATS),
        },
    ),
)


@settings(max_examples=60, deadline=None)
@given(_CELLS, _HIERARCHY, st.sampled_from(["sync", "async"]))
def test_any_cells_and_hierarchy_tables_run_or_are_refused_in_one_line(cells, hierarchy, mode):
    """Whatever a [cells] and [server.hierarchy] table hold, the run completes or is refused with a one-line ScenarioError naming a field."""
    data = base_scenario(run={"frames": 1, "slots_per_frame": 2, "deadline_s": 0.8}, cells=cells)
    data["server"] = {"mode": mode}
    if hierarchy is not None:
        data["server"]["hierarchy"] = hierarchy
    try:
        run_in_memory(data)
    except ScenarioError as err:
        assert err.field and "\n" not in str(err), str(err)


def test_labels_tell_layouts_and_hierarchies_apart():
    """The runs table's labels name the layout and the cloud period, so configurations that differ only there are not pooled."""
    from wflsim.analysis.tidy import cells_label, server_label

    assert cells_label(None) == "one cell"
    assert cells_label({"rings": 1, "reuse_factor": 3}) == "7 cells (reuse 3)"
    assert cells_label({"sites_m": [[0, 0], [1, 1]], "bands": [0, 0], "plan_on": "margin",
                        "margin_db": 3.0}) == "2 cells (bands [0, 0]; plan on 3 dB margin)"  # fmt: skip
    assert server_label({"mode": "sync"}) == "sync"
    h = {"cloud_every_slots": 5, "backhaul_latency_s": 0.02, "backhaul_energy_j_per_bit": 1e-8}
    assert server_label({"mode": "sync", "hierarchy": h}) == (
        "sync (cloud every 5 slots, backhaul latency 0.02 s, 1e-08 J/bit)"
    )
    assert server_label({"mode": "sync", "hierarchy": {**h, "cloud_every_slots": 1}}) != (
        server_label({"mode": "sync", "hierarchy": h})
    )


# ------------------------------------------------------------- what an upload heard (trace)


def test_an_uploads_sinr_and_interference_are_its_time_averages_hand_computed():
    """Device 0 hears device 1 only while device 1 transmits: its interference_w and sinr_db are the time averages of I and log2(1 + SINR), by hand."""
    env, link, log, _ = uplink_of(SITES3[:2], [0, 1], POS3[:2])
    bits = np.array([4e6, 1e5])
    open_slot(env, link, log, [1.0, 1.0], bits)
    link.submit(0)
    link.submit(1)
    env.run()
    g00, g01 = paper_gain(100.0), paper_gain(900.0)
    g11, g10 = paper_gain(math.hypot(100.0, 50.0)), paper_gain(math.hypot(900.0, 50.0))
    sinr1 = g11 / (N0_W + g01)
    t1 = bits[1] / (W_HZ * math.log2(1 + sinr1))
    sinr0_both, sinr0_alone = g00 / (N0_W + g10), g00 / N0_W
    t0 = t1 + (bits[0] - W_HZ * math.log2(1 + sinr0_both) * t1) / (
        W_HZ * math.log2(1 + sinr0_alone)
    )
    se0 = (math.log2(1 + sinr0_both) * t1 + math.log2(1 + sinr0_alone) * (t0 - t1)) / t0
    cols = link.trace_columns()
    assert cols["interference_w"][0] == pytest.approx(g10 * t1 / t0, rel=1e-9)
    assert cols["interference_w"][1] == pytest.approx(g01, rel=1e-12)
    assert cols["sinr_db"][0] == pytest.approx(10 * math.log10(2**se0 - 1), rel=1e-9)
    assert cols["sinr_db"][1] == pytest.approx(10 * math.log10(sinr1), rel=1e-12)


def test_an_upload_cut_at_the_deadline_keeps_what_it_heard_until_the_cut():
    """Two uploads that never end in time are cut at the deadline, each having heard the other all along (constant SINR, by hand)."""
    env, link, log, _ = uplink_of(SITES3[:2], [0, 1], POS3[:2])
    open_slot(env, link, log, [1.0, 1.0], [1e12, 1e12], closes_at="deadline")
    link.submit(0)
    link.submit(1)
    env.run(until=10.0)
    link.close(everything=True)
    g00, g10 = paper_gain(100.0), paper_gain(math.hypot(900.0, 50.0))
    cols = link.trace_columns()
    assert not link.arrived.any()
    assert cols["interference_w"][0] == pytest.approx(g10, rel=1e-12)
    assert cols["sinr_db"][0] == pytest.approx(10 * math.log10(g00 / (N0_W + g10)), rel=1e-9)


def test_ofdma_uploads_hear_the_interference_over_their_share_of_the_band():
    """Under OFDMA an upload's interference_w is the other cell's interference over its half band, and its SINR p h / ((N0' + I') W/2), by hand."""
    pos = [[100.0, 0.0], [0.0, 150.0], [900.0, 0.0]]
    env, link, log, _ = uplink_of(SITES3[:2], [0, 0, 1], pos, modes=["ofdma", "tdma"])
    open_slot(env, link, log, [1.0, 0.5, 1.0], [1e12, 1e12, 1e12], closes_at="deadline")
    for d in range(3):
        link.submit(d)
    env.run(until=10.0)
    link.close(everything=True)
    i_psd = paper_gain(900.0) / W_HZ
    b = W_HZ / 2
    cols = link.trace_columns()
    assert cols["interference_w"][0] == pytest.approx(i_psd * b, rel=1e-12)
    snr = 0.5 * paper_gain(150.0) / ((N0_W / W_HZ + i_psd) * b)
    assert cols["sinr_db"][1] == pytest.approx(10 * math.log10(snr), rel=1e-9)


@pytest.mark.parametrize("server", ["sync", "semi_sync", "async"])
@pytest.mark.parametrize("level", ["events", "device_slots"])
def test_upload_rows_carry_sinr_and_interference_in_every_server_mode(server, level):
    """Under reuse 1, every upload that transmitted carries sinr_db and interference_w (upload_end or device_slot rows), and no other row does."""
    data = cells_scenario()
    data["trace"] = {"level": level}
    if server != "sync":
        data["server"] = {"mode": server, **({"buffer_size": 3} if server == "async" else {})}
    table, _ = run_in_memory(data)
    df = table.to_pandas()
    row = "upload_end" if level == "events" else "device_slot"
    sent = (df["event"] == row) & (df["upload_s"] > 0)
    assert sent.sum() > 0
    assert df.loc[sent, "sinr_db"].notna().all() and df.loc[sent, "interference_w"].notna().all()
    assert (df.loc[sent, "interference_w"] >= 0).all()
    assert (df.loc[sent, "interference_w"] > 0).any()
    others = ~df["event"].isin(["upload_end", "dropped", "device_slot"])
    assert df.loc[others, "sinr_db"].isna().all()


def test_a_replayed_channel_with_cells_is_refused_for_its_physics(tmp_path):
    """channel.replay with [cells] is refused naming channel.replay, saying the table's one gain per device cannot give the gains to every site."""
    data = cells_scenario()
    data["channel"] = {"replay": str(tmp_path / "recorded")}
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(data)
    assert err.value.field == "channel.replay"
    assert "gains to every site" in str(err.value) and "one gain per device" in str(err.value)
