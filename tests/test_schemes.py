"""The paper's schemes inside the engine: two_timescale, only_pc, only_pf (network-only runs)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import base_scenario, events, run_in_memory

S_BITS = 32 * 440_812


def _paper(scheme: str, frames: int = 6, **params) -> dict:
    return base_scenario(
        run={"frames": frames, "slots_per_frame": 20, "deadline_s": 0.8},
        network={"num_devices": 30, "cell_radius_m": 1000.0},
        devices={
            "batch_size": 512,
            "energy_budget_j": {"dist": "uniform", "low": 0.30, "high": 0.45},
        },
        learning={"enabled": False, "num_params": 440_812},
        scheme={"name": scheme, **params},
    )


@pytest.fixture(scope="module")
def proposed():
    """A two_timescale run (V = 100)."""
    return run_in_memory(_paper("two_timescale", V=100.0))[0]


@pytest.fixture(scope="module")
def long_runs():
    """two_timescale over 100 frames for V in {10, 100, 1000} (same seed)."""
    return {
        v: run_in_memory(_paper("two_timescale", frames=100, V=v))[0] for v in (10.0, 100.0, 1000.0)
    }


def test_two_timescale_freezes_nothing_in_frame_zero(proposed):
    """Frame 0 has no stability scores: gamma = 0 for every device."""
    fr = events(proposed, "freeze")
    assert (fr.loc[fr.frame == 0, "gamma"] == 0).all()
    assert (fr.loc[fr.frame > 0, "gamma"] > 0).any()


def test_two_timescale_participants_transmit_at_min_power_and_never_miss(proposed):
    """Proposition 1: participants send at p_min (landing on the deadline), so no upload is late."""
    dec, e = events(proposed, "decision"), events(proposed, "energy")
    part = dec["participating"].astype(bool)
    np.testing.assert_allclose(
        dec.loc[part, "tx_power_w"], dec.loc[part, "min_tx_power_w"], rtol=1e-12
    )
    assert (e.loc[part, "success"]).all()
    np.testing.assert_allclose((dec["compute_s"] + dec["upload_s"])[part], 0.8, rtol=1e-9)


def test_two_timescale_drops_exactly_when_min_power_exceeds_threshold(proposed):
    """A device drops out iff p_min > p_max of its frame (or p_max = 0)."""
    dec = events(proposed, "decision")
    p_max = dec["max_tx_power_w"]
    expect = (dec["min_tx_power_w"] <= p_max) & (p_max > 0) & (dec["gamma"] < 1)
    np.testing.assert_array_equal(dec["participating"].astype(bool), expect)


def test_payload_scales_with_one_minus_gamma(proposed):
    """payload_bits = (1 - gamma) S and compute time = (1 - gamma) c B / f on the decision rows."""
    dec = events(proposed, "decision")
    np.testing.assert_allclose(dec["payload_bits"], (1 - dec["gamma"]) * S_BITS, rtol=1e-12)
    part = dec["participating"].astype(bool)
    np.testing.assert_allclose(
        dec.loc[part, "compute_s"], (1 - dec.loc[part, "gamma"]) * 0.512, rtol=1e-12
    )


def test_convergence_error_of_a_failed_upload_is_positive_zero():
    """X = lam 1{success} B (gamma - 1) of a failed upload is written +0.0, never -0.0."""
    table = run_in_memory(_paper("fixed_power", frames=2))[0]
    x = table.column("conv_error").to_numpy(zero_copy_only=False)
    zeros = x == 0.0
    assert zeros.any() and not np.signbit(x[zeros]).any()


def test_events_of_runs_with_and_without_outages_sort_on_all_columns():
    """The events of a run with outages (X = 0 for failed uploads) and of one fully frozen at
    times (X = 0 for gamma = 1), concatenated, sort on every column in pandas."""
    import pandas as pd

    from wflsim.analysis.io import events_frame

    runs = [run_in_memory(_paper(scheme, frames=2))[0] for scheme in ("fixed_power", "only_pf")]
    ev = pd.concat([events_frame(t) for t in runs], ignore_index=True)
    ev["event"] = ev["event"].astype(str)
    assert len(ev.sort_values(list(ev.columns))) == len(ev)


def test_convergence_error_and_cost_are_logged_per_slot(proposed):
    """X = lam 1{success} B (gamma - 1) and z = V X + Q E with Q of the frame start."""
    e, dec, fr = (
        events(proposed, "energy"),
        events(proposed, "decision"),
        events(proposed, "freeze"),
    )
    lam = 1.0 / (30 * 512)
    x = lam * e["success"].astype(float) * 512 * (dec["gamma"] - 1.0)
    np.testing.assert_allclose(e["conv_error"], x, rtol=1e-12, atol=1e-18)
    q_frame = fr.set_index(["frame", "device"])["queue_j"]
    q = q_frame.loc[list(zip(e["frame"], e["device"], strict=True))].to_numpy()
    np.testing.assert_allclose(e["cost"], 100.0 * x + q * e["energy_j"], rtol=1e-12, atol=1e-15)


def test_controller_state_is_logged_per_frame(proposed):
    """Each freeze row carries gamma, Q, p_max, Z(gamma) and the MM iteration count."""
    fr = events(proposed, "freeze")
    for col in ("gamma", "queue_j", "max_tx_power_w", "expected_cost", "iterations"):
        assert fr[col].notna().all(), col
    assert (fr["expected_cost"] <= 1e-15).all()


def test_only_pc_never_freezes():
    """only_pc keeps gamma = 0 in every frame and uses the threshold rule."""
    t = run_in_memory(_paper("only_pc", frames=3))[0]
    assert (events(t, "freeze")["gamma"] == 0).all()
    assert not events(t, "decision")["participating"].all()


def test_only_pf_has_no_outage_and_waits_for_all():
    """only_pf: every device with a payload uploads at min(p_min, P_bar) and succeeds."""
    t = run_in_memory(_paper("only_pf", frames=3))[0]
    dec, e = events(t, "decision"), events(t, "energy")
    has_payload = dec["payload_bits"] > 0
    assert (dec["participating"].astype(bool) == has_payload).all()
    assert e.loc[has_payload, "success"].all()
    np.testing.assert_allclose(
        dec["tx_power_w"][has_payload],
        np.minimum(dec["min_tx_power_w"], 1.0)[has_payload],
        rtol=1e-12,
    )
    assert len(events(t, "deadline")) == 0


def test_long_run_energy_stays_within_budget(long_runs):
    """Over 100 frames with V <= 100 every device's average energy per slot is within 5 % of its budget."""
    for v in (10.0, 100.0):
        t = long_runs[v]
        budget = events(t, "device_config").set_index("device")["energy_budget_j"]
        avg = events(t, "energy").groupby("device")["energy_j"].mean()
        assert (avg <= 1.05 * budget).all(), (v, (avg / budget).max())


def test_energy_rises_and_gamma_falls_with_v(long_runs):
    """The paper's V trend: more energy and less freezing as V grows."""
    energy = [events(long_runs[v], "energy")["energy_j"].mean() for v in (10.0, 100.0, 1000.0)]
    gamma = [
        events(long_runs[v], "freeze").query("frame > 0")["gamma"].mean()
        for v in (10.0, 100.0, 1000.0)
    ]
    assert energy[0] < energy[1] < energy[2]
    assert gamma[0] > gamma[1] > gamma[2]


def test_queue_grows_with_v(long_runs):
    """The time-averaged queue grows with V, by a factor between 3 and 30 per decade (about linear)."""
    q = [events(long_runs[v], "energy")["queue_j"].mean() for v in (10.0, 100.0, 1000.0)]
    for lo, hi in zip(q, q[1:], strict=False):
        assert 3 < hi / lo < 30
