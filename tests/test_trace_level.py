"""``[trace] level = "device_slots"``: one row per device per slot with the events trace's information."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import base_scenario, network_only, run_in_memory
from wflsim.sim.config.loading import validate_scenario
from wflsim.sim.registry import SCHEMES

#: The events-level rows a device_slot row stands for.
FOLDED = ["decision", "compute_start", "compute_end", "upload_start", "upload_end", "dropped",
          "energy"]  # fmt: skip
DECISION = ["distance_m", "large_scale_gain", "channel_gain", "seen_channel_gain", "gamma",
            "payload_bits", "min_tx_power_w", "max_tx_power_w", "compute_s", "available"]  # fmt: skip
OUTCOME = ["participating", "success", "tx_power_w", "upload_s", "energy_compute_j",
           "energy_upload_j", "energy_j", "wasted_energy_j", "queue_j", "conv_error", "cost",
           "dropped"]  # fmt: skip


def at_level(data: dict, level: str) -> dict:
    """``data`` with ``[trace] level = level``."""
    return {**data, "trace": {**data.get("trace", {}), "level": level}}


def both_levels(data: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The events tables of ``data`` at both trace levels (pandas, the event as a string)."""
    out = []
    for level in ("events", "device_slots"):
        table, _ = run_in_memory(at_level(data, level))
        df = table.to_pandas()
        df["event"] = df["event"].astype(str)
        out.append(df)
    return out[0], out[1]


def expected_device_slots(ev: pd.DataFrame) -> pd.DataFrame:
    """The device_slot rows an events-level trace folds into: its decision and energy rows of
    each (slot, device) side by side, at the decision's time, by slot and device."""
    dec = ev[ev["event"] == "decision"]
    en = ev[ev["event"] == "energy"]
    keys = ["frame", "slot", "device"]
    left = dec[[*keys, "time_s", *DECISION, "upload_s"]].rename(
        columns={"upload_s": "upload_planned_s"}
    )
    merged = left.merge(en[[*keys, *OUTCOME]], on=keys, how="inner", validate="one_to_one")
    assert len(merged) == len(dec) == len(en)
    # a dropped device computed until it went offline (its dropped row's compute_s)
    drops = ev[ev["event"] == "dropped"].set_index(["slot", "device"])["compute_s"]
    if len(drops):
        at = merged.set_index(["slot", "device"]).index
        hit = at.isin(drops.index)
        merged.loc[hit, "compute_s"] = drops.reindex(at[hit]).to_numpy()
    return merged.sort_values(["slot", "device"], kind="stable").reset_index(drop=True)


def assert_folds(ev: pd.DataFrame, ds: pd.DataFrame) -> None:
    """``ds`` (device_slots level) is ``ev`` (events level) with each device's rows of a slot
    folded into one device_slot row, placed right after the slot's ``slot_start``."""
    rest_ev = ev[~ev["event"].isin(FOLDED)].reset_index(drop=True)
    rest_ds = ds[ds["event"] != "device_slot"].reset_index(drop=True)
    pd.testing.assert_frame_equal(rest_ev, rest_ds)
    got = ds[ds["event"] == "device_slot"]
    cols = ["frame", "slot", "device", "time_s", *DECISION, "upload_planned_s", *OUTCOME]
    want = expected_device_slots(ev)
    pd.testing.assert_frame_equal(
        got[cols].reset_index(drop=True), want[cols], check_dtype=False, check_exact=True
    )
    # placement: a slot's device_slot rows follow its slot_start, one per device, in device order
    n = int((ev["event"] == "device_config").sum())
    for i in np.flatnonzero(ds["event"].to_numpy() == "slot_start"):
        block = ds.iloc[i + 1 : i + 1 + n]
        assert (block["event"] == "device_slot").all()
        assert block["device"].tolist() == list(range(n))


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_every_scheme_folds_its_device_rows_into_device_slot_rows(scheme):
    """Each scheme, network only with outages and moving devices: the device_slots trace is the
    events trace with every device's rows of a slot folded into one row, values bit for bit."""
    data = network_only(
        run={"frames": 3, "slots_per_frame": 4, "deadline_s": 0.5},
        network={"num_devices": 10, "cell_radius_m": 800.0, "bandwidth_hz": 2e6},
        mobility={"model": "random_waypoint", "speed_mps": [1.0, 5.0]},
        scheme={"name": scheme, "V": 50.0},
    )
    assert_folds(*both_levels(data))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scheme=st.sampled_from(sorted(SCHEMES)),
    n=st.integers(1, 8),
    frames=st.integers(1, 3),
    slots=st.integers(1, 4),
    deadline_s=st.sampled_from([0.2, 0.5, 1.5]),
    kernel=st.sampled_from(["closed_form", "event"]),
    late=st.sampled_from(["until_deadline", "full"]),
    seed=st.integers(0, 1000),
    churn=st.booleans(),
)
def test_random_scenarios_fold_on_either_kernel(
    scheme, n, frames, slots, deadline_s, kernel, late, seed, churn
):
    """Random small scenarios on either kernel (with churn: the event kernel): the device_slots
    trace folds the events trace."""
    data = network_only(
        seed=seed,
        run={
            "frames": frames,
            "slots_per_frame": slots,
            "deadline_s": deadline_s,
            "kernel": kernel,
        },  # fmt: skip
        network={"num_devices": n, "cell_radius_m": 600.0},
        devices={"batch_size": 64},
        scheme={"name": scheme, "V": 100.0},
        trace={"late_upload_energy": late},
    )
    if churn:
        data["run"]["kernel"] = "event"
        data["availability"] = {
            "model": "markov",
            "online_s": {"dist": "exponential", "mean": 2 * deadline_s},
            "offline_s": {"dist": "exponential", "mean": deadline_s},
        }
    assert_folds(*both_levels(data))


def test_device_slots_level_with_training_folds_the_events_trace():
    """With training (digits), the device_slots trace folds the events trace and its training
    rows (eval, aggregate) are the events trace's."""
    data = base_scenario(
        run={"frames": 2, "slots_per_frame": 3, "deadline_s": 0.8},
        scheme={"name": "two_timescale", "V": 10.0},
    )
    data["learning"] = {"dataset": "digits", "model": "mlp", "eval_every_slots": 3}
    ev, ds = both_levels(data)
    assert (ev["event"] == "eval").sum() > 0
    assert_folds(ev, ds)


def test_tidy_device_slots_are_the_same_at_both_levels(tmp_path):
    """The analysis library's device-slot, slot and frame tables of a device_slots run equal
    those of the events run."""
    import wflsim
    from wflsim.analysis import tidy

    data = base_scenario(
        run={"frames": 2, "slots_per_frame": 4, "deadline_s": 0.5},
        network={"num_devices": 7, "cell_radius_m": 800.0, "bandwidth_hz": 2e6},
        scheme={"name": "two_timescale", "V": 50.0},
    )
    runs = {}
    for level in ("events", "device_slots"):
        runs[level] = tmp_path / f"run-{level}"
        wflsim.run(at_level(data, level), out=runs[level])
    a = tidy.load([runs["events"]], ["device_slots", "slots", "frames"])
    b = tidy.load([runs["device_slots"]], ["device_slots", "slots", "frames"])
    for name in ("device_slots", "slots", "frames"):
        left = getattr(a, name).drop(columns=["run_dir", "run"], errors="ignore")
        right = getattr(b, name).drop(columns=["run_dir", "run"], errors="ignore")
        pd.testing.assert_frame_equal(left, right, check_exact=True)


def test_device_slots_level_has_a_third_of_the_rows():
    """With every device participating (fixed power), the device_slots trace has one device row
    per device-slot where the events trace has six."""
    data = base_scenario(network={"num_devices": 5, "cell_radius_m": 100.0})
    ev, ds = both_levels(data)
    device_slots = 5 * 2 * 5
    assert (ds["event"] == "device_slot").sum() == device_slots
    assert ev["event"].isin(FOLDED).sum() == 6 * device_slots


def test_unknown_trace_level_is_refused():
    """A [trace] level other than events or device_slots is refused, naming the field."""
    from wflsim.sim.errors import ScenarioError

    with pytest.raises(ScenarioError, match="level"):
        validate_scenario(at_level(base_scenario(), "rows"))


def test_device_slot_column_is_null_on_an_events_trace():
    """``upload_planned_s`` is set on device_slot rows only."""
    table, _ = run_in_memory(base_scenario())
    assert table.column("upload_planned_s").null_count == table.num_rows
    assert "device_slot" not in set(table.column("event").to_pylist())


def _stale_churn(mode: str) -> dict:
    """A network-only cell with fading, churn, jitter and unequal batches under a stale server."""
    from golden_runs import composed

    data = composed(mode, "dedicated", churn=True, training=False)
    if mode == "async":
        data["server"] = {"mode": "async", "buffer_size": 2}
    return data


@pytest.mark.parametrize("mode", ["semi_sync", "async"])
def test_stale_servers_fold_their_device_rows_into_device_slot_rows(mode):
    """Under semi_sync / async the device_slots trace is the events trace with each device's slot-start decision and energy row folded into one row (decision null for a device busy with an earlier cycle)."""
    ev, ds = both_levels(_stale_churn(mode))
    folded = [*FOLDED, "decision"]
    rest_ev = ev[~ev["event"].isin(folded)].reset_index(drop=True)
    rest_ds = ds[ds["event"] != "device_slot"].reset_index(drop=True)
    pd.testing.assert_frame_equal(rest_ev, rest_ds)
    got = ds[ds["event"] == "device_slot"].set_index(["slot", "device"]).sort_index()
    energy = ev[ev["event"] == "energy"].set_index(["slot", "device"]).sort_index()
    assert got.index.equals(energy.index)
    outcome = [c for c in OUTCOME if c not in ("conv_error", "cost")]
    pd.testing.assert_frame_equal(got[outcome], energy[outcome], check_exact=True)
    starts = ev[ev["event"] == "slot_start"].set_index("slot")["time_s"]
    dec = ev[ev["event"] == "decision"]
    at_start = dec[dec["time_s"].to_numpy() == starts.loc[dec["slot"]].to_numpy()]
    at_start = at_start.set_index(["slot", "device"]).sort_index()
    cols = [c for c in DECISION if c not in ("max_tx_power_w", "compute_s")] + ["model_version"]
    pd.testing.assert_frame_equal(
        got.loc[at_start.index, cols], at_start[cols], check_exact=True, check_dtype=False
    )
    busy = got.index.difference(at_start.index)
    assert len(busy) > 0 and got.loc[busy, "gamma"].isna().all()
    assert (got["time_s"].to_numpy() == starts.loc[got.index.get_level_values(0)].to_numpy()).all()


@pytest.mark.parametrize("mode", ["semi_sync", "async"])
def test_stale_device_slots_trace_is_in_time_order(mode):
    """Under stale servers the device_slots trace's rows never go back in time."""
    _, ds = both_levels(_stale_churn(mode))
    assert (np.diff(ds["time_s"].to_numpy()) >= 0).all()
