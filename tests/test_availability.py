"""Availability: devices that come and go (``[availability]``), checked against renewal theory,
closed forms of dropped uploads on a shared uplink and the trace's own events."""

from __future__ import annotations

import contextlib
import copy
import io
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from test_uplink import _one_slot

from conftest import base_scenario, events, run_in_memory, saved_and_continued, with_kernel
from wflsim.app.cli import main
from wflsim.app.run import kernel_of
from wflsim.sim.config.loading import validate_scenario
from wflsim.sim.errors import ScenarioError
from wflsim.sim.kernels import DROPPED, U_END, U_START, SlotResult
from wflsim.sim.rng import Streams
from wflsim.sim.world import physics
from wflsim.sim.world.availability import (
    MarkovAvailability,
    MarkovConfig,
    TraceAvailability,
    build_availability,
)

W_HZ = 10e6
N0_W = float(physics.dbm_to_w(-104.0))


def _markov(online_s, offline_s, n: int, seed: int = 0, initial: str = "stationary"):
    cfg = MarkovConfig.model_validate(
        {"model": "markov", "online_s": online_s, "offline_s": offline_s, "initial": initial}
    )
    model = build_availability(cfg, num_devices=n, streams=Streams(seed))
    assert isinstance(model, MarkovAvailability)
    return model


def _online_time_s(model, horizon_s: float) -> np.ndarray:
    """Each device's time online in ``[0, horizon_s]``, from the model's changes."""
    n = model.num_devices
    first = model.reset()
    state = np.zeros(n, dtype=bool)
    state[first.device] = first.online
    since = np.zeros(n)
    total = np.zeros(n)
    later = model.advance(horizon_s)
    for t, d, on in zip(later.time_s, later.device, later.online, strict=True):
        if state[d]:
            total[d] += t - since[d]
        state[d], since[d] = on, t
    total[state] += horizon_s - since[state]
    return total


def _churn(**sections) -> dict:
    """A small network-only scenario whose devices come and go every few slots."""
    data = base_scenario(
        run={"frames": 3, "slots_per_frame": 10, "deadline_s": 0.8},
        network={"num_devices": 10},
        availability={
            "model": "markov",
            "online_s": {"dist": "exponential", "mean": 2.0},
            "offline_s": {"dist": "exponential", "mean": 1.0},
        },
    )
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return data


def _write_trace(path, rows) -> str:
    pd.DataFrame(rows, columns=["device", "start_s", "end_s"]).to_csv(path, index=False)
    return str(path)


# ------------------------------------------------------------------------------ the models


@pytest.mark.parametrize(
    ("online_s", "offline_s"),
    [
        ({"dist": "exponential", "mean": 2.0}, {"dist": "exponential", "mean": 1.0}),
        (
            {"dist": "weibull", "shape": 0.7, "scale": 1.5},
            {"dist": "uniform", "low": 0.5, "high": 2.5},
        ),
    ],
)
def test_markov_long_run_online_fraction_is_on_over_on_plus_off(online_s, offline_s):
    """Over 2,000 devices and 200 s the time online is E[on] / (E[on] + E[off]) within 0.01 (the
    renewal-reward theorem; sd of the mean about 0.003 here)."""
    model = _markov(online_s, offline_s, 2000, seed=3)
    horizon = 200.0
    fraction = _online_time_s(model, horizon).mean() / horizon
    assert fraction == pytest.approx(model.config.online_fraction(), abs=0.01)


def test_markov_exponential_periods_follow_their_law():
    """Completed online periods of exponential(mean 2 s) pass a KS test against Exp(2) (p > 0.001)."""
    model = _markov({"dist": "exponential", "mean": 2.0}, 1.0, 300, seed=5, initial="offline")
    model.reset()
    ch = model.advance(100.0)
    df = pd.DataFrame({"t": ch.time_s, "d": ch.device, "on": ch.online})
    lengths = []
    for _, g in df.groupby("d"):
        t, on = g["t"].to_numpy(), g["on"].to_numpy()
        starts = np.flatnonzero(on[:-1])
        lengths.extend(t[starts + 1] - t[starts])
    assert len(lengths) > 5000
    assert stats.kstest(lengths, stats.expon(scale=2.0).cdf).pvalue > 0.001


def test_fixed_periods_alternate_exactly():
    """online_s = 3, offline_s = 1 from online: changes at 3, 4, 7, 8, ... s."""
    model = _markov(3.0, 1.0, 2, initial="online")
    model.reset()
    ch = model.advance(8.0)
    np.testing.assert_array_equal(ch.time_s, np.repeat([3.0, 4.0, 7.0, 8.0], 2))
    np.testing.assert_array_equal(ch.online, np.repeat([False, True, False, True], 2))


def test_adding_a_device_leaves_the_others_time_lines_unchanged():
    """Device n's changes with 5 devices equal its changes with 9 (keyed draws)."""
    law = {"dist": "exponential", "mean": 0.7}
    small, large = _markov(law, law, 5, seed=2), _markov(law, law, 9, seed=2)
    a, b = small.advance(30.0), large.advance(30.0)
    keep = b.device < 5
    np.testing.assert_array_equal(a.time_s, b.time_s[keep])
    np.testing.assert_array_equal(a.device, b.device[keep])


def test_advancing_in_steps_gives_the_changes_of_one_advance():
    """Advancing to 0.8, 1.6, ... 40 s gives the same changes as advancing to 40 s at once."""
    law = {"dist": "loguniform", "low": 0.1, "high": 5.0}
    one, steps = _markov(law, law, 20, seed=4), _markov(law, law, 20, seed=4)
    whole = one.advance(40.0)
    parts = [steps.advance(0.8 * i) for i in range(1, 51)]
    np.testing.assert_array_equal(np.concatenate([p.time_s for p in parts]), whole.time_s)
    np.testing.assert_array_equal(np.concatenate([p.device for p in parts]), whole.device)


def test_a_restored_state_continues_the_time_lines():
    """state_dict after 10 s loaded into a fresh model gives the original's changes to 50 s."""
    law = {"dist": "exponential", "mean": 1.0}
    first, second = _markov(law, law, 8, seed=6), _markov(law, law, 8, seed=6)
    first.advance(10.0)
    second.load_state_dict(first.state_dict())
    a, b = first.advance(50.0), second.advance(50.0)
    np.testing.assert_array_equal(a.time_s, b.time_s)
    np.testing.assert_array_equal(a.online, b.online)


def test_trace_devices_are_online_exactly_on_their_half_open_intervals(tmp_path):
    """Online on [a, b): state at a is online, at b offline; touching intervals make one."""
    path = _write_trace(
        tmp_path / "a.csv", [(0, 1.0, 2.0), (0, 2.0, 3.5), (1, 0.0, 0.5), (1, 4.0, math.inf)]
    )
    model = TraceAvailability.from_file(path, num_devices=2)
    first = model.reset()
    assert first.online.tolist() == [False, True]
    ch = model.advance(10.0)
    assert list(zip(ch.time_s.tolist(), ch.device.tolist(), ch.online.tolist(), strict=True)) == [
        (0.5, 1, False),
        (1.0, 0, True),
        (3.5, 0, False),
        (4.0, 1, True),
    ]
    assert model.online_until_s()[1] == math.inf


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        ([(0, 0.0, 1.0), (2, 0.0, 1.0)], "outside 0..1"),
        ([(0, 0.0, 1.0)], "no interval for device(s) 1"),
        ([(0, 0.0, 1.0), (1, 2.0, 2.0)], "not after its start"),
        ([(0, 0.0, 1.0), (0, 0.5, 2.0), (1, 0.0, 1.0)], "overlapping"),
        ([(0, 0.0, 1.0), (1.5, 0.0, 1.0)], "integers"),
        ([(0, "x", 1.0), (1, 0.0, 1.0)], "non-numeric"),
        ([(0, -math.inf, 1.0), (1, 0.0, 1.0)], "infinite"),
    ],
)
def test_bad_trace_files_name_the_field(tmp_path, rows, needle):
    """Each malformed availability trace is refused as availability.file, saying what is wrong."""
    path = _write_trace(tmp_path / "bad.csv", rows)
    with pytest.raises(ScenarioError) as err:
        TraceAvailability.from_file(path, num_devices=2)
    assert err.value.field == "availability.file"
    assert needle in str(err.value)


def test_a_trace_without_the_columns_or_the_file_is_refused(tmp_path):
    """Missing columns and a missing file are availability.file errors."""
    (tmp_path / "c.csv").write_text("device,begin,end\n0,0,1\n")
    for path in (tmp_path / "c.csv", tmp_path / "none.csv"):
        with pytest.raises(ScenarioError, match="availability.file"):
            TraceAvailability.from_file(path, num_devices=1)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.0, 50.0), st.floats(0.01, 10.0)), min_size=1, max_size=8).map(
        lambda xs: sorted(xs)
    )
)
def test_trace_state_at_any_time_is_membership_in_an_interval(pieces):
    """After advancing to t a trace device is online iff some interval [a, b) holds t."""
    intervals, end = [], -1.0
    for a, length in pieces:
        a = max(a, end + 0.5)
        intervals.append((a, a + length))
        end = a + length
    starts, ends = np.array([intervals])[0].T
    model = TraceAvailability([starts], [ends])
    model.reset()
    for t in np.linspace(0.0, end + 1.0, 37):
        model.advance(float(t))
        assert bool(model.online[0]) == any(a <= t < b for a, b in intervals)


# ------------------------------------------------------------------------------ in the engine


def test_availability_selects_the_event_kernel_and_the_closed_form_refuses_it():
    """auto resolves to the event kernel; an explicit closed_form is a run.kernel error."""
    assert kernel_of(validate_scenario(_churn())) == "event"
    with pytest.raises(ScenarioError, match="run.kernel"):
        validate_scenario(with_kernel(_churn(), "closed_form"))


def test_offline_devices_never_take_part():
    """Every participating decision row is of a device online at the slot's start."""
    table, _ = run_in_memory(_churn(scheme={"name": "ideal"}))
    dec = events(table, "decision")
    assert (~dec["available"]).any() and dec["participating"].any()
    assert not (dec["participating"] & ~dec["available"]).any()


def test_availability_matches_the_change_rows():
    """A device's ``available`` at each slot start is the state its online/offline rows give."""
    table, _ = run_in_memory(_churn())
    df = table.to_pandas()
    changes = df[df["event"].isin(["online", "offline"])]
    dec = events(table, "decision")
    slot_start = events(table, "slot_start").set_index("slot")["time_s"]
    for d, rows in dec.groupby("device"):
        ch = changes[changes["device"] == d]
        for _, row in rows.iterrows():
            t = slot_start[row["slot"]]
            last = ch[ch["time_s"] <= t]["event"].iloc[-1]
            assert row["available"] == (last == "online")


def test_a_dropped_device_stops_at_the_instant_it_went_offline():
    """Each dropped row shares its time with the device's offline row; the device has no later
    event in the slot; it did not succeed; it computed or transmitted exactly until then."""
    table, stats = run_in_memory(_churn(scheme={"name": "fixed_power"}))
    df = table.to_pandas()
    drops = df[df["event"] == "dropped"]
    assert len(drops) > 5 and stats.drops == len(drops)
    energy = events(table, "energy").set_index(["slot", "device"])
    starts = events(table, "slot_start").set_index("slot")["time_s"]
    for _, row in drops.iterrows():
        same = df[(df["slot"] == row["slot"]) & (df["device"] == row["device"])]
        offline = same[same["event"] == "offline"]
        assert row["time_s"] in offline["time_s"].tolist()
        device_events = same[same["event"].isin(["compute_end", "upload_start", "upload_end"])]
        assert (device_events["time_s"] <= row["time_s"]).all()
        assert not (same["event"] == "upload_end").any()
        out = energy.loc[(row["slot"], row["device"])]
        assert out["dropped"] and not out["success"]
        uploads = same[same["event"] == "upload_start"]
        if len(uploads):
            assert row["upload_s"] == pytest.approx(row["time_s"] - uploads["time_s"].iloc[0])
        else:
            assert row["compute_s"] == pytest.approx(row["time_s"] - starts[row["slot"]])


def test_energy_until_the_drop_is_counted():
    """A dropped device's energy is its compute energy's share for the time computed plus
    power x time transmitted; energy_j = compute + upload on every row."""
    table, _ = run_in_memory(_churn(scheme={"name": "fixed_power"}))
    energy = events(table, "energy")
    dec = events(table, "decision").set_index(["slot", "device"])
    cfg = events(table, "device_config").set_index("device")
    np.testing.assert_allclose(
        energy["energy_j"], energy["energy_compute_j"] + energy["energy_upload_j"], rtol=1e-15
    )
    dropped = energy[energy["dropped"]]
    assert len(dropped)
    drop_rows = events(table, "dropped").set_index(["slot", "device"])
    for _, row in dropped.iterrows():
        key = (row["slot"], row["device"])
        d = cfg.loc[row["device"]]
        needed_s = dec.loc[key, "compute_s"]
        full_j = physics.compute_energy_j(
            1.0, d["cycles_per_sample"], d["batch_size"], d["cpu_hz"], d["capacitance"]
        )
        computed_s = drop_rows.loc[key, "compute_s"]
        assert row["energy_compute_j"] == pytest.approx(full_j * computed_s / needed_s, rel=1e-12)
        assert row["energy_upload_j"] == pytest.approx(row["tx_power_w"] * row["upload_s"])


def test_the_available_fraction_is_the_long_run_online_fraction():
    """Over 300 devices and 60 slots the share of device-slots online is 2/3 within 0.03."""
    data = _churn(
        run={"frames": 6, "slots_per_frame": 10, "deadline_s": 0.8}, network={"num_devices": 300}
    )
    _, stats = run_in_memory(data)
    assert stats.as_dict()["available_fraction"] == pytest.approx(2.0 / 3.0, abs=0.03)


def test_device_slot_rows_fold_the_event_rows_with_drops():
    """At level device_slots the dropped, available and outcome columns equal the event rows'."""
    data = _churn(scheme={"name": "fixed_power"}, uplink={"mode": "ofdma"})
    ev, _ = run_in_memory(data)
    folded, _ = run_in_memory({**copy.deepcopy(data), "trace": {"level": "device_slots"}})
    rows = events(folded, "device_slot").set_index(["slot", "device"])
    energy = events(ev, "energy").set_index(["slot", "device"])
    dec = events(ev, "decision").set_index(["slot", "device"])
    for col in ("dropped", "success", "energy_j", "upload_s"):
        pd.testing.assert_series_equal(rows[col], energy[col], check_names=False)
    drops = events(ev, "dropped").set_index(["slot", "device"])
    assert len(drops)
    pd.testing.assert_series_equal(
        rows.loc[drops.index, "compute_s"], drops["compute_s"], check_names=False
    )
    pd.testing.assert_series_equal(rows["available"], dec["available"], check_names=False)
    for name in ("online", "offline"):
        a, b = events(ev, name), events(folded, name)
        np.testing.assert_array_equal(a["time_s"], b["time_s"])


@pytest.mark.parametrize("uplink", ["dedicated", "ofdma", "tdma"])
def test_save_and_continue_with_churn_equals_the_uninterrupted_run(uplink, tmp_path):
    """Kill-and-resume at frame 2 with churn, jitter and the uplink gives the same events."""
    data = _churn(
        uplink={"mode": uplink},
        compute={"jitter": {"model": "throttling", "sigma": 0.4}},
        scheme={"name": "two_timescale"},
        run={"frames": 4, "slots_per_frame": 6, "deadline_s": 0.8},
    )
    whole, _ = run_in_memory(data)
    resumed = saved_and_continued(data, 2, tmp_path / "state.npz")
    assert resumed.equals(whole)


def test_the_same_seed_gives_the_same_churn_trace():
    """Two runs of one scenario give identical tables; another seed another table."""
    a, _ = run_in_memory(_churn())
    b, _ = run_in_memory(_churn())
    c, _ = run_in_memory({**_churn(), "seed": 2})
    assert a.equals(b) and not a.equals(c)


def test_an_availability_trace_drives_a_run(tmp_path):
    """A trace file's devices are online exactly in its intervals during a run."""
    path = _write_trace(tmp_path / "on.csv", [(0, 0.0, math.inf), (1, 1.0, 2.5), (1, 4.0, 6.0)])
    data = base_scenario(
        network={"num_devices": 2},
        run={"frames": 2, "slots_per_frame": 5, "deadline_s": 0.8},
        availability={"model": "trace", "file": path},
        scheme={"name": "ideal"},
    )
    table, _ = run_in_memory(data)
    dec = events(table, "decision")
    start = events(table, "slot_start").set_index("slot")["time_s"]
    one = dec[dec["device"] == 1]
    t = start[one["slot"]].to_numpy()
    expected = ((t >= 1.0) & (t < 2.5)) | ((t >= 4.0) & (t < 6.0))
    np.testing.assert_array_equal(one["available"].to_numpy(), expected)
    assert dec[dec["device"] == 0]["available"].all()


def test_always_writes_no_availability_rows_or_values():
    """Without [availability] no online/offline/dropped rows exist and the columns are null."""
    table, _ = run_in_memory(base_scenario())
    df = table.to_pandas()
    assert not df["event"].isin(["online", "offline", "dropped"]).any()
    assert df["available"].isna().all() and df["dropped"].isna().all()


# ------------------------------------------------------------------------------ drops on a shared uplink


def _slot_with_drops(mode, compute_s, bits, power_w, gain, online_until_s):
    """One shared-uplink slot (deadline 10 s) whose devices go offline at ``online_until_s``."""
    result, _ = _one_slot(
        mode, compute_s, bits, power_w, gain, deadline_s=10.0, online_until_s=online_until_s
    )
    return result


def _event_time(result: SlotResult, device: int, code: int) -> float | None:
    a = result.activity
    hit = (a.device == device) & (a.code == code)
    return float(a.time_s[hit][0]) if hit.any() else None


def test_an_ofdma_upload_that_drops_gives_its_band_back():
    """Two equal uploads share W from t = c; one drops at b: the other sends the rest alone on W,
    ending at b + (S - r_half (b - c)) / r_full (closed form)."""
    bits, p, h, c = 4e6, 0.2, 2e-11, 0.05
    r_half = (W_HZ / 2) * np.log2(1.0 + p * h / (N0_W / 2))
    r_full = W_HZ * np.log2(1.0 + p * h / N0_W)
    b = c + 0.5 * bits / r_half  # mid-upload
    result = _slot_with_drops("ofdma", [c, c], bits, p, h, [b, math.inf])
    assert result.dropped is not None and result.dropped.tolist() == [True, False]
    end = _event_time(result, 1, U_END)
    assert end == pytest.approx(b + (bits - r_half * (b - c)) / r_full, rel=1e-12)
    assert result.transmitted_s[0] == pytest.approx(b - c, rel=1e-12)
    assert result.arrived.tolist() == [False, True]
    assert _event_time(result, 0, DROPPED) == b and _event_time(result, 0, U_END) is None


def test_a_tdma_upload_dropped_while_waiting_never_transmits():
    """Device 1 waits behind device 0 and drops before its turn: it transmits 0 s, logs no
    upload_start, and device 2 starts when device 0 ends."""
    bits, p, h, c = 4e6, 0.2, 2e-11, 0.05
    full = bits / (W_HZ * np.log2(1.0 + p * h / N0_W))
    result = _slot_with_drops("tdma", [c, c, c], bits, p, h, [math.inf, c + 0.5 * full, math.inf])
    assert result.dropped is not None and result.dropped.tolist() == [False, True, False]
    assert result.transmitted_s[1] == 0.0 and _event_time(result, 1, U_START) is None
    assert _event_time(result, 2, U_START) == pytest.approx(c + full, rel=1e-12)


def test_a_drop_during_compute_reports_the_time_computed():
    """Offline at half the computation: computed c/2, transmitted 0, dropped."""
    result = _slot_with_drops("ofdma", [0.4, 0.4], 4e6, 0.2, 2e-11, [0.2, math.inf])
    assert result.computed_s is not None
    assert result.computed_s[0] == pytest.approx(0.2) and result.transmitted_s[0] == 0.0
    assert result.computed_s[1] == 0.4


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("availability", "field"),
    [
        ({"model": "markov", "online_s": -1.0, "offline_s": 1.0}, "availability"),
        (
            {"model": "markov", "online_s": {"dist": "exponential", "mean": 0}, "offline_s": 1.0},
            "availability",
        ),
        ({"model": "markov", "online_s": 1e-6, "offline_s": 1e-6}, "availability.online_s"),
        ({"model": "markov", "online_s": 1.0}, "availability"),
        ({"model": "trace"}, "availability"),
        ({"model": "sometimes"}, "availability"),
        (
            {"model": "markov", "online_s": 1.0, "offline_s": 1.0, "initial": "maybe"},
            "availability",
        ),
    ],
)
def test_bad_availability_values_name_the_field(availability, field):
    """Bad availability tables are ScenarioErrors whose field starts with availability."""
    with pytest.raises(ScenarioError) as err:
        validate_scenario(base_scenario(availability=availability))
    assert err.value.field.startswith(field)


def test_a_missing_availability_trace_exits_2_naming_the_field(tmp_path, capsys):
    """wflsim run with a missing trace file exits 2 with availability.file named, no folder."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'name = "x"\n[learning]\nenabled = false\nnum_params = 1000\n'
        '[availability]\nmodel = "trace"\nfile = "missing.csv"\n'
    )
    out = tmp_path / "out"
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["run", str(scenario), "--out", str(out)])
    assert code == 2
    assert "availability.file" in capsys.readouterr().err
    assert not out.exists()


def test_change_rows_are_in_time_order_within_each_slot():
    """Within each slot the online/offline rows' times do not decrease and lie in the slot."""
    table, _ = run_in_memory(_churn(uplink={"mode": "tdma"}))
    df = table.to_pandas()
    starts = events(table, "slot_start").set_index("slot")["time_s"]
    ends = events(table, "aggregate").set_index("slot")["time_s"]
    ch = df[df["event"].isin(["online", "offline"]) & (df["slot"] >= 0)]
    for slot, rows in ch.groupby("slot"):
        assert (np.diff(rows["time_s"].to_numpy()) >= 0).all()
        assert (rows["time_s"] > starts[slot] - 1e-12).all() and (
            rows["time_s"] <= ends[slot]
        ).all()


def test_pa_tables_carry_the_new_columns():
    """The schema holds available and dropped as booleans."""
    table, _ = run_in_memory(_churn())
    assert table.schema.field("available").type == pa.bool_()
    assert table.schema.field("dropped").type == pa.bool_()


# ------------------------------------------------------------------------------ the converter


def _convert(*args: str) -> tuple[int, str]:
    """Run ``wflsim convert-availability ARGS`` in this process: (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["convert-availability", *args])
    return code, err.getvalue().strip()


def _convert_refused(args: list[str], words: str, out) -> None:
    """Exit 2 with one line naming ``words``, no traceback, nothing written at ``out``."""
    code, err = _convert(*args)
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert words in err, err
    assert not out.exists()


def _fedscale(tmp_path, trace) -> str:
    import json

    src = tmp_path / "trace.json"
    src.write_text(trace if isinstance(trace, str) else json.dumps(trace))
    return str(src)


def test_fedscale_json_becomes_a_valid_availability_file(tmp_path):
    """FedScale's active/inactive lists, repeated every finish_time up to --until-s, renumbered
    in id order and skipping clients never online, give intervals wflsim reads back."""
    trace = {
        "10": {"active": [0, 50], "inactive": [20, 80], "finish_time": 100},
        "2": {"active": [5], "inactive": [10], "finish_time": 100},
        "7": {"active": [], "inactive": [], "finish_time": 100},
    }
    src, out = _fedscale(tmp_path, trace), tmp_path / "avail.csv"
    code, err = _convert(
        src, "--format", "fedscale-json", "--out", str(out), "--devices", "2", "--until-s", "150"
    )
    assert code == 0, err
    table = pd.read_csv(out)
    assert table.values.tolist() == [
        [0, 5.0, 10.0],
        [0, 105.0, 110.0],
        [1, 0.0, 20.0],
        [1, 50.0, 80.0],
        [1, 100.0, 120.0],
    ]
    model = TraceAvailability.from_file(out, num_devices=2)
    assert model.intervals == 5


def test_state_changes_become_intervals_and_bad_input_exits_2(tmp_path, capsys):
    """device,time_s,online rows give [on, off) intervals (the last state lasting); a row with
    online = 2 exits 2 and writes nothing."""
    src, out = tmp_path / "states.csv", tmp_path / "avail.parquet"
    src.write_text("device,time_s,online\na,0,1\na,4,0\na,6,1\nb,1,0\nb,2,1\nb,3,1\n")
    code, err = _convert(str(src), "--format", "state-changes", "--out", str(out), "--devices", "2")
    assert code == 0, err
    table = pd.read_parquet(out)
    assert table.values.tolist() == [[0, 0.0, 4.0], [0, 6.0, math.inf], [1, 2.0, math.inf]]
    src.write_text("device,time_s,online\na,0,2\n")
    bad = tmp_path / "bad.csv"
    args = [str(src), "--format", "state-changes", "--out", str(bad), "--devices", "1"]
    _convert_refused(args, "online is not 0 or 1", bad)


def test_the_converter_refuses_to_overwrite_its_output(tmp_path):
    """An existing output is kept (exit 2, naming --out and --overwrite); --overwrite replaces
    it."""
    src, out = _fedscale(tmp_path, {"1": {"active": [0], "inactive": [5]}}), tmp_path / "a.csv"
    out.write_text("keep me\n")
    code, err = _convert(src, "--format", "fedscale-json", "--out", str(out), "--devices", "1")
    assert code == 2 and "--out" in err and "--overwrite" in err, err
    assert out.read_text() == "keep me\n"
    args = [src, "--format", "fedscale-json", "--out", str(out), "--devices", "1", "--overwrite"]
    assert _convert(*args)[0] == 0
    assert pd.read_csv(out).values.tolist() == [[0, 0.0, 5.0]]


def test_deeply_nested_json_is_one_line_not_a_recursion_error(tmp_path):
    """JSON nested deeper than the parser goes: exit 2, one line naming the file."""
    src = _fedscale(tmp_path, '{"a": ' + "[" * 200_000 + "]" * 200_000 + "}")
    out = tmp_path / "a.csv"
    args = [src, "--format", "fedscale-json", "--out", str(out), "--devices", "1"]
    _convert_refused(args, "nested too deeply", out)


@pytest.mark.parametrize(
    "number",
    ["1" + "0" * 400, "-1" + "0" * 400, "1e400", "NaN", "Infinity"],
    ids=["10**400", "-10**400", "1e400", "NaN", "Infinity"],
)
def test_a_time_beyond_a_float_is_refused_in_one_line(tmp_path, number):
    """10**400, 1e400, NaN and Infinity as a time: exit 2, one line, no OverflowError."""
    src = _fedscale(tmp_path, '{"1": {"active": [0], "inactive": [' + number + "]}}")
    out = tmp_path / "a.csv"
    code, err = _convert(src, "--format", "fedscale-json", "--out", str(out), "--devices", "1")
    assert code == 2 and len(err.splitlines()) == 1 and "Error:" not in err, err
    assert src in err and not out.exists()


def test_a_tiny_finish_time_with_a_long_until_is_refused_before_repeating(tmp_path):
    """finish_time 1e-300 repeated up to 1e10 s would make 1e310 intervals: refused at once on
    --until-s, naming the cap."""
    trace = {"1": {"active": [0], "inactive": [5e-301], "finish_time": 1e-300}}
    src, out = _fedscale(tmp_path, trace), tmp_path / "a.csv"
    args = [src, "--format", "fedscale-json", "--out", str(out), "--devices", "1"]
    _convert_refused([*args, "--until-s", "1e10"], "--until-s", out)


def test_more_active_than_inactive_times_is_refused(tmp_path):
    """A client with an active time that has no inactive one is refused, naming the client."""
    trace = {"7": {"active": [0, 5], "inactive": [1], "finish_time": 10}}
    src, out = _fedscale(tmp_path, trace), tmp_path / "a.csv"
    args = [src, "--format", "fedscale-json", "--out", str(out), "--devices", "1"]
    _convert_refused(args, "client '7' has 2 active times but 1 inactive", out)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=12,
    )
)
@settings(max_examples=60, deadline=None)
def test_any_json_converts_or_exits_2_in_one_line(data):
    """Whatever JSON the input holds, the converter writes a readable trace or exits 2 with
    one line; never a traceback."""
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "t.json", Path(tmp) / "a.csv"
        src.write_text(json.dumps(data))
        code, err = _convert(
            str(src), "--format", "fedscale-json", "--out", str(out), "--devices", "1"
        )
        assert code in (0, 2), err
        if code == 2:
            assert len(err.splitlines()) == 1 and not out.exists(), err
        else:
            TraceAvailability.from_file(out, num_devices=1)


def test_the_old_converter_script_is_gone_and_no_doc_names_it():
    """The conversion is the command wflsim convert-availability: the script is gone and no
    document tells to run it (docs/decisions.md records what it was)."""
    from conftest import REPO, doc_pages

    assert not (REPO / "scenarios" / "churn" / "convert_availability.py").exists()
    docs = [p for p in doc_pages() if p.name != "decisions.md"]
    for path in [REPO / "README.md", *docs]:
        assert "convert_availability.py" not in path.read_text(), path


# ------------------------------------------------------------------------------ trace caps


def test_an_availability_trace_with_too_many_changes_in_a_slot_is_refused(tmp_path):
    """2,000 intervals of a device inside one 0.8 s slot (4,000 changes, more than 100): the
    scenario is refused on availability.file, naming the device and the cap, before a run."""
    k = 2000
    starts = np.arange(k) * 1e-4
    rows = [(0, a, a + 5e-5) for a in starts] + [(1, 0.0, math.inf)]
    path = _write_trace(tmp_path / "dense.csv", rows)
    data = base_scenario(network={"num_devices": 2}, availability={"model": "trace", "file": path})
    code, err = _cli_validate(tmp_path, data)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "availability.file" in err and "device 0" in err and "at most 100" in err, err


def test_an_availability_trace_of_dates_is_refused_not_read_as_numbers(tmp_path):
    """A Parquet trace whose start_s holds datetime64 values is refused, naming the column and
    asking for seconds (not read as the nanoseconds it stores)."""
    path = tmp_path / "dates.parquet"
    pd.DataFrame(
        {
            "device": [0, 1],
            "start_s": pd.to_datetime(["2024-01-01", "2024-01-01"]),
            "end_s": [math.inf, math.inf],
        }
    ).to_parquet(path)
    data = base_scenario(
        network={"num_devices": 2}, availability={"model": "trace", "file": str(path)}
    )
    code, err = _cli_validate(tmp_path, data)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "availability.file" in err and "start_s holds dates" in err and "seconds" in err, err


def _cli_validate(tmp_path, data) -> tuple[int, str]:
    """``wflsim validate`` of the scenario table ``data``: (exit code, stderr)."""
    from wflsim.sim.config.loading import scenario_text

    path = tmp_path / "s.toml"
    path.write_text(scenario_text(data))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["validate", str(path)])
    return code, err.getvalue().strip()


# ------------------------------------------------------------------------------ review fixes


@pytest.mark.parametrize(
    "law",
    [
        {"dist": "fixed", "value": 3.0},
        {"dist": "uniform", "low": 0.5, "high": 4.0},
        {"dist": "loguniform", "low": 0.1, "high": 20.0},
        {"dist": "weibull", "shape": 0.6, "scale": 2.0},
        {"dist": "exponential", "mean": 1.5},
    ],
)
def test_residual_quantile_inverts_the_equilibrium_law(law):
    """F_e(residual(u)) = u, with F_e(x) = E[min(L, x)] / E[L] estimated from 400,000 draws of
    the law itself (an independent reference): within 0.004 at u = 0.05 .. 0.95."""
    cfg = MarkovConfig.model_validate({"model": "markov", "online_s": law, "offline_s": 1.0})
    dist = cfg.online_s
    lengths = dist.from_uniform(np.random.default_rng(7).random(400_000))
    u = np.linspace(0.05, 0.95, 10)
    x = dist.residual_from_uniform(u)
    f_e = np.array([np.minimum(lengths, xi).mean() for xi in x]) / lengths.mean()
    np.testing.assert_allclose(f_e, u, atol=0.004)


@pytest.mark.parametrize(
    ("online_s", "offline_s"),
    [(3.0, 1.0), ({"dist": "weibull", "shape": 0.5, "scale": 1.0}, 2.0)],
)
def test_a_stationary_start_is_stationary_at_every_time(online_s, offline_s):
    """With 4,000 devices the share online at any time is E[on] / (E[on] + E[off]) within
    0.03 (4.4 binomial sd), also for fixed periods, which a full first period would lock in step."""
    model = _markov(online_s, offline_s, 4000, seed=11)
    target = model.config.online_fraction()
    model.reset()
    for t in (0.0, 0.5, 1.7, 2.9, 3.5, 7.3):
        model.advance(t)
        assert model.online.mean() == pytest.approx(target, abs=0.03), t


def test_editing_the_availability_trace_changes_the_run_fingerprint(tmp_path):
    """A run is continued only with the same availability file: its hash is in the fingerprint."""
    import wflsim
    from wflsim.app.run import fingerprint, fingerprint_difference

    path = tmp_path / "on.csv"
    _write_trace(path, [(0, 0.0, math.inf), (1, 0.0, 5.0)])
    data = base_scenario(
        network={"num_devices": 2}, availability={"model": "trace", "file": str(path)}
    )
    before = fingerprint(wflsim.prepare(data))
    _write_trace(path, [(0, 0.0, math.inf), (1, 0.0, 6.0)])
    after = fingerprint(wflsim.prepare(data))
    assert fingerprint_difference(before, after) == "the availability trace file differs"


@pytest.mark.parametrize("mode", ["ofdma", "tdma"])
def test_a_slot_leaves_at_most_one_pending_drop_timer(mode):
    """Ideal waits for the last upload on a shared band with hour-long sessions: drops are
    scheduled one at a time, so at most one timer per slot outlives it (the SimPy queue holds
    at most one event per slot at the end of the run)."""
    from wflsim.app.run import build_engine, make_learner, prepare_scenario

    data = _churn(
        network={"num_devices": 60},
        run={"frames": 2, "slots_per_frame": 20, "deadline_s": 0.8},
        scheme={"name": "ideal"},
        uplink={"mode": mode},
        availability={
            "model": "markov",
            "online_s": {"dist": "exponential", "mean": 3600.0},
            "offline_s": 10.0,
        },  # fmt: skip
    )
    prep = prepare_scenario(validate_scenario(data))
    engine = build_engine(prep, make_learner(prep))
    engine.run()
    assert len(engine._env._queue) <= 40  # the run's environment: what is still scheduled


@pytest.mark.parametrize("mode", ["ofdma", "tdma"])
def test_an_upload_that_cannot_finish_after_the_deadline_ends_at_once(mode):
    """Under last_upload a zero-power upload whose compute ends after the deadline fails at
    once (it used to wait for a deadline that had passed, and the slot never ended)."""
    result, end = _one_slot(mode, [2.0, 0.1], 1e5, [0.0, 0.2], 2e-11, deadline_s=1.0,
                            closes_at="last_upload")  # fmt: skip
    assert result.arrived.tolist() == [False, True]
    assert result.transmitted_s[0] == 0.0 and end == pytest.approx(2.0)


def test_per_device_scales_give_each_device_its_own_online_fraction():
    """online_scale = [0.1, 1, 10] (repeated over 3,000 devices), exponential periods of mean 1
    s: each group's time online over 300 s is a / (a + 1) within 0.015 (about 5 sd)."""
    scales = [0.1, 1.0, 10.0] * 1000
    cfg = MarkovConfig.model_validate(
        {
            "model": "markov",
            "online_s": {"dist": "exponential", "mean": 1.0},
            "offline_s": {"dist": "exponential", "mean": 1.0},
            "online_scale": scales,
        }  # fmt: skip
    )
    model = build_availability(cfg, num_devices=3000, streams=Streams(4))
    share = _online_time_s(model, 300.0) / 300.0
    for k, a in enumerate((0.1, 1.0, 10.0)):
        assert share[k::3].mean() == pytest.approx(a / (a + 1.0), abs=0.015)


def test_scales_out_of_range_or_too_fast_name_their_field():
    """A scale of 0 is refused by the schema (the field named with its model, as for jitter); a
    scale that makes a device change more than 100 times per slot is refused when the scenario
    is prepared, naming availability.online_scale and the device."""
    import wflsim

    base = {"model": "markov", "online_s": 1.0, "offline_s": 1.0}
    with pytest.raises(ScenarioError, match=r"availability\.markov\.online_scale"):
        validate_scenario(base_scenario(availability={**base, "online_scale": 0.0}))
    fast = {**base, "online_scale": [1.0] * 5 + [1e-4], "offline_scale": [1.0] * 5 + [1e-4]}
    with pytest.raises(ScenarioError, match="device 5's scaled periods"):
        wflsim.prepare(base_scenario(availability=fast))
