"""``[channel] rate_model``: Shannon's bound (the paper's) or the attenuated and truncated
Shannon bound of 3GPP TR 36.942, Annex A.2, in closed form everywhere a rate is computed."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import wflsim  # noqa: E402
from conftest import base_scenario, run_in_memory  # noqa: E402
from wflsim.sim.errors import ScenarioError  # noqa: E402
from wflsim.sim.radio.rates import (  # noqa: E402
    SHANNON,
    RateModel,
    min_tx_power_w,
    rate_bps,
    shared_rate_bps,
)
from wflsim.sim.schemes import controller  # noqa: E402

TR = RateModel("truncated_shannon", alpha=0.6, snr_min=10 ** (-0.2), se_max=3.6)


def _by_hand(snr: float, m: RateModel) -> float:
    """TR 36.942 A.2 written out: 0 below SNR_min, alpha log2(1 + SNR), at most SE_max."""
    if snr < m.snr_min:
        return 0.0
    return min(m.alpha * math.log2(1.0 + snr), m.se_max)


def test_shannon_is_log2_of_one_plus_snr():
    """The default model is Shannon's log2(1 + SNR), and rate_bps W times it."""
    snr = np.array([0.0, 0.5, 1.0, 3.0, 1e3])
    np.testing.assert_allclose(SHANNON.efficiency(snr), np.log2(1 + snr), rtol=1e-15)
    np.testing.assert_allclose(rate_bps(snr, 1.0, 1e6, 1.0), 1e6 * np.log2(1 + snr), rtol=1e-15)


@pytest.mark.parametrize("snr_db", [-30.0, -2.5, -2.0, -1.0, 0.0, 10.0, 17.5, 18.2, 30.0, 60.0])
def test_the_truncated_bound_is_tr_36942s_three_pieces(snr_db):
    """Below SNR_min nothing, then alpha log2(1 + SNR), capped at SE_max (written out by hand)."""
    snr = 10 ** (snr_db / 10)
    assert TR.efficiency(snr) == pytest.approx(_by_hand(snr, TR), rel=1e-14, abs=0)


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e-6, max_value=3.6))
def test_the_required_snr_is_the_least_that_gives_the_efficiency(efficiency):
    """required_snr(e) gives at least e, and 1e-9 less SNR gives less (or nothing, at SNR_min)."""
    snr = float(TR.required_snr(efficiency))
    assert _by_hand(snr, TR) >= efficiency * (1 - 1e-12)
    assert _by_hand(snr * (1 - 1e-9), TR) < efficiency


def test_no_snr_gives_more_than_the_highest_mcs():
    """Above SE_max the required SNR is inf; at 0 it is 0."""
    assert TR.required_snr(3.6000001) == math.inf
    assert TR.required_snr(0.0) == 0.0


def test_p_min_lands_on_the_deadline_or_earlier_at_the_lowest_mcs():
    """p_min of the truncated model: the upload takes exactly the slack on the middle piece, less
    where SNR_min binds (a small payload), and no power suffices above SE_max."""
    w, n0, h, tau0, tcmp = 10e6, 1e-13, 1e-10, 0.5, 0.1
    bits = np.array([1e5, 4e6, 1e7, 1.5e7])  # efficiency 0.025 .. 3.75 bit/s/Hz over 0.4 s
    p = min_tx_power_w(bits, h, w, n0, tau0, tcmp, TR)
    r = rate_bps(p, h, w, n0, TR)
    t = bits / r
    assert t[0] < 0.4 * 0.5  # the floor: the lowest MCS carries it faster than needed
    assert p[0] * h / n0 == pytest.approx(TR.snr_min, rel=1e-12)
    np.testing.assert_allclose(t[1:3], 0.4, rtol=1e-9)
    assert p[3] == math.inf


def test_the_shared_rate_uses_the_model_on_the_shares_snr():
    """On a share b the efficiency is at the SNR p h / (N0' b)."""
    p, h, psd = np.array([1e-3, 1e-2]), np.array([1e-9, 1e-10]), 1e-20
    b = 5e6
    got = shared_rate_bps(p, h, b, psd, TR)
    want = [b * _by_hand(float(p[i] * h[i] / (psd * b)), TR) for i in range(2)]
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_the_controller_never_plans_a_payload_above_the_highest_mcs():
    """min_gamma: the MM never returns less; the grid's best over [min_gamma, 1] agrees."""
    n = 6
    params = controller.ControllerParams(
        model_bits=np.full(n, 2e7),
        bandwidth_hz=np.full(n, 0.6 * 10e6),
        noise_w=np.full(n, 1e-13),
        mean_gain=np.geomspace(1e-12, 1e-9, n),
        deadline_s=np.full(n, 0.5),
        cycles_per_sample=np.full(n, 2e6),
        batch_size=np.full(n, 16.0),
        cpu_hz=np.full(n, 2e9),
        capacitance=np.full(n, 2e-28),
        peak_power_w=np.full(n, 1.0),
        queue_j=np.full(n, 0.5),
        v=np.full(n, 100.0),
        lam=np.full(n, 1 / 96),
        min_gamma=np.linspace(0.1, 0.6, n),
    )
    res = controller.solve_gamma(params)
    assert (res.gamma >= params.min_gamma - 1e-15).all()
    grid = np.linspace(0.0, 1.0, 20001)
    for i in range(n):
        g = grid[grid >= params.min_gamma[i]]
        z = controller.expected_cost(g, _one(params, i))
        assert res.cost[i] <= z.min() + 1e-9 * max(abs(z.min()), 1e-12)


def _one(params: controller.ControllerParams, i: int) -> controller.ControllerParams:
    fields = controller.ControllerParams._POSITIVE + controller.ControllerParams._NONNEG
    return controller.ControllerParams(**{f: getattr(params, f)[i] for f in fields})


def test_a_min_gamma_of_zero_changes_nothing():
    """The default floor leaves the solution as it was (bit for bit)."""
    kw = dict(
        model_bits=np.full(3, 1.4e7),
        bandwidth_hz=np.full(3, 10e6),
        noise_w=np.full(3, 4e-14),
        mean_gain=np.array([1e-11, 1e-10, 1e-9]),
        deadline_s=np.full(3, 0.8),
        cycles_per_sample=np.full(3, 2e6),
        batch_size=np.full(3, 512.0),
        cpu_hz=np.full(3, 2e9),
        capacitance=np.full(3, 2e-28),
        peak_power_w=np.full(3, 1.0),
        queue_j=np.full(3, 0.3),
        v=np.full(3, 100.0),
        lam=np.full(3, 1 / 1536),
    )
    a = controller.solve_gamma(controller.ControllerParams(**kw))
    b = controller.solve_gamma(controller.ControllerParams(**kw, min_gamma=np.zeros(3)))
    np.testing.assert_array_equal(a.gamma, b.gamma)


def test_proposition_1_over_the_truncated_model_meets_every_deadline():
    """With perfect CSI the paper's controller on the truncated model loses no upload that it
    sends, on dedicated bands (the powers are the model's exact p_min)."""
    data = base_scenario(
        channel={"rate_model": "truncated_shannon"},
        scheme={"name": "two_timescale"},
        run={"frames": 3},
    )
    table, stats = run_in_memory(data)
    df = table.to_pandas()
    ends = df[df.event == "upload_end"]
    assert len(ends) > 10 and ends.success.astype(bool).all()


def test_a_run_on_the_truncated_model_differs_from_shannon():
    """The model reaches the slot: other upload times, same channel."""
    a, _ = run_in_memory(base_scenario(scheme={"name": "fixed_power"}))
    b, _ = run_in_memory(
        base_scenario(scheme={"name": "fixed_power"}, channel={"rate_model": "truncated_shannon"})
    )
    da, db = a.to_pandas(), b.to_pandas()
    dec_a, dec_b = da[da.event == "decision"], db[db.event == "decision"]
    np.testing.assert_array_equal(dec_a.channel_gain, dec_b.channel_gain)
    assert not np.array_equal(dec_a.upload_s, dec_b.upload_s)


def test_the_manifest_records_the_rate_model_and_the_controllers_difference(tmp_path):
    """manifest.json's channel names the model and says the controller's closed forms differ."""
    data = base_scenario(channel={"rate_model": "truncated_shannon"})
    res = wflsim.run(data, out=tmp_path / "t", progress=False)
    ch = res.manifest["channel"]
    assert ch["rate_model"]["name"] == "truncated_shannon"
    assert ch["controller_assumption"]["matches"] is False
    shannon = wflsim.run(base_scenario(), out=tmp_path / "s", progress=False)
    assert shannon.manifest["channel"]["rate_model"] == {"name": "shannon"}


@pytest.mark.parametrize(
    ("channel", "match"),
    [
        ({"truncated_shannon": {"alpha": 0.5}}, "truncated_shannon sets"),
        ({"rate_model": "truncated_shannon", "truncated_shannon": {"alpha": 1.5}}, "alpha"),
        ({"rate_model": "truncated_shannon", "truncated_shannon": {"se_max": 0}}, "se_max"),
        ({"rate_model": "gaussian"}, "rate_model"),
    ],
)
def test_bad_rate_model_settings_are_refused_naming_the_field(channel, match):
    """Parameters without the model, an alpha above 1, a zero SE_max, an unknown model."""
    with pytest.raises(ScenarioError, match=match):
        wflsim.prepare(base_scenario(channel=channel))


def test_an_upload_below_snr_min_on_the_whole_band_still_uses_its_ofdma_share():
    """Under OFDMA a share's noise is the share's: planned on W / k, the controller's powers are
    below SNR_min on the whole band yet every upload arrives on its share (not held and cut)."""
    data = base_scenario(
        network={"num_devices": 6, "cell_radius_m": 500.0},
        devices={"batch_size": 32},
        learning={"enabled": False, "num_params": 9610},
        uplink={"mode": "ofdma", "planned_concurrent_uploads": 6},
        channel={"rate_model": "truncated_shannon"},
        scheme={"name": "only_pc"},
        run={"deadline_s": 0.5},
    )
    table, _ = run_in_memory(data)
    df = table.to_pandas()
    dec = df[df.event == "decision"]
    assert np.isinf(dec[dec.participating.astype(bool)].upload_s).any()  # hopeless on all of W
    ends = df[df.event == "upload_end"]
    assert len(ends) > 10 and ends.success.astype(bool).all()


def test_a_synchronous_no_outage_scheme_on_a_shared_band_under_the_truncated_model_is_refused():
    """ideal on OFDMA with rate_model = truncated_shannon: refused on scheme.name (a slot could
    wait forever for an upload below SNR_min)."""
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(
            base_scenario(
                channel={"rate_model": "truncated_shannon"},
                uplink={"mode": "ofdma"},
                scheme={"name": "ideal"},
            )
        )
    assert err.value.field == "scheme.name" and "SNR_min" in err.value.problem
