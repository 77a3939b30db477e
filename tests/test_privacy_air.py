"""``[privacy] mechanism = "over_the_air"``: the receiver's noise as the Gaussian mechanism
(docs/privacy.md, "Over the air"): each device's multiplier against its closed form, measured
through the learner's over-the-air apply, the fills and power caps meeting ``z``, the public
scale, the refusals. Whole runs need the engine's privacy wiring (tests/test_privacy_*.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from test_learner import tiny_learner

from wflsim.models.learner.core import TorchLearner
from wflsim.sim.learner import OverTheAir
from wflsim.sim.privacy.config import PrivacyConfig
from wflsim.sim.privacy.mechanism import PrivacySpec
from wflsim.sim.radio.aircomp import (
    AirCompPlan,
    aircomp_energy_j,
    optimal_eta,
    plan_aircomp,
)
from wflsim.sim.servers.aircomp import over_the_air_sum, private_plan

T_S = 0.01  # the window, s


def spec(air_noise: str = "receiver", air_power: str = "scheme", z: float | None = 1.0):
    """The resolved [privacy] table over the air."""
    cfg = PrivacyConfig(
        mechanism="over_the_air",
        clip_norm=1.0,
        noise_multiplier=z,
        air_noise=air_noise,
        air_power=air_power,
    )
    return PrivacySpec.from_config(cfg, 8)


def planned(rule, seen, true, peak, batch, noise_w, privacy, values, group=None, given=None,
            eta_w=None) -> tuple[AirCompPlan, AirCompPlan]:  # fmt: skip
    """(the rule's plan, the private plan) for every device taking part."""
    part = np.ones(len(seen), dtype=bool)
    num = None if group is None else int(np.max(group)) + 1

    def replan(pk, giv, eta):
        return plan_aircomp(
            part, batch, seen, true, pk, noise_w, rule, 0.0, T_S, group, num, giv, eta
        )

    plan = replan(peak, given, eta_w)
    private = private_plan(
        plan, privacy, np.asarray(values, dtype=np.float64), noise_w, seen, true, peak,
        replan, given, eta_w, batch,
    )  # fmt: skip
    return plan, private


SEEN = np.array([2e-10, 5e-11, 1e-10])
TRUE = SEEN * np.array([1.3, 0.8, 1.0])  # imperfect CSI: misaligned
PEAK = np.full(3, 0.2)
BATCH = np.array([3.0, 5.0, 4.0])
N0 = 1e-13


def test_truncated_inversion_multipliers_are_the_received_snr_in_closed_form() -> None:
    """Receiver fill: z_n = sqrt((N0 + A) / (p_n g_n D_min)) with p_n = eta a_n^2 / g_seen,
    eta = min P g_seen / a^2 and A = z^2 D_min max p g_true - N0, computed here by hand."""
    d = 1000
    _, plan = planned("truncated_inversion", SEEN, TRUE, PEAK, BATCH, N0, spec(z=1.5), [d] * 3)
    air = over_the_air_sum(plan, np.arange(3), 0, np.array([N0]))
    a = BATCH / BATCH.sum()
    eta = np.min(PEAK * SEEN / a**2)
    rx = eta * a**2 / SEEN * TRUE
    fill = 1.5**2 * d * rx.max() - N0
    want = np.sqrt((N0 + fill) / (rx * d))
    np.testing.assert_allclose(air.privacy_multipliers, want, rtol=1e-12)
    assert air.privacy_multipliers.min() == pytest.approx(1.5, rel=1e-12)
    assert air.clip_scale_values == d
    assert air.noise_stds[0] == pytest.approx(math.sqrt((N0 + fill) / eta), rel=1e-12)


def test_the_noise_the_learner_adds_gives_each_device_its_closed_form_multiplier(
    monkeypatch,
) -> None:
    """Synthetic clipped uploads (|u| = C) through the learner's over-the-air apply, D = 16,003
    entries: the measured noise std over each device's sensitivity c_n C in the aggregate is
    the closed form sqrt((N0 + A) / (p_n g_n D)) within 3 % (the std's relative error is
    1 / sqrt(2 D), 0.6 %)."""
    clip = 0.7
    monkeypatch.setattr(TorchLearner, "clip_norm", property(lambda self: clip), raising=False)
    learner = tiny_learner([3, 5, 4], hidden=2000, lr=1.0)
    d = learner.num_params
    _, plan = planned("truncated_inversion", SEEN, TRUE, PEAK, BATCH, N0, spec(z=1.0), [d] * 3)
    air = over_the_air_sum(plan, np.arange(3), 0, np.array([N0]))
    learner.compute(0, np.arange(3))
    g = torch.Generator().manual_seed(5)
    u = torch.randn(3, d, generator=g)
    u = u / u.norm(dim=1, keepdim=True) * clip
    learner._uploads = u
    w0 = learner._w.double().clone()
    learner.receive_over_the_air(air)
    learner.apply(0, np.arange(3))
    weight = torch.tensor(BATCH / BATCH.sum() * air.ratio, dtype=torch.float64)  # c_n / s
    noise = (w0 - learner._w.double()) - weight @ u.double()
    measured = float(noise.std())
    a = BATCH / BATCH.sum()
    eta = np.min(PEAK * SEEN / a**2)
    rx = eta * a**2 / SEEN * TRUE
    closed = np.sqrt((N0 + (d * rx.max() - N0)) / (rx * d))
    np.testing.assert_allclose(measured / (weight.numpy() * clip), closed, rtol=0.03)
    assert learner.last_air_noise.scale == pytest.approx(clip / math.sqrt(d))


def test_the_public_scale_leaves_a_constant_offset_update_unbiased(monkeypatch) -> None:
    """Every device sends the constant update b 1 (|u| = C), aligned: the aggregate's error has
    mean 0 within 4 standard errors, and the scale is C / sqrt(D) whatever the data (no mean,
    no side information)."""
    monkeypatch.setattr(TorchLearner, "clip_norm", property(lambda self: 1.0), raising=False)
    learner = tiny_learner([3, 5, 4], hidden=2000, lr=1.0)
    d = learner.num_params
    b = 1.0 / math.sqrt(d)
    learner.compute(0, np.arange(3))
    learner._uploads = torch.full((3, d), b)
    w0 = learner._w.double().clone()
    air = OverTheAir(slot=0, ratio=np.ones(3), noise_std=2.0, clip_scale_values=d)
    learner.receive_over_the_air(air)
    learner.apply(0, np.arange(3))
    error = (w0 - learner._w.double()) - b
    std = 2.0 / math.sqrt(d)
    assert abs(float(error.mean())) < 4 * std / math.sqrt(d)
    assert learner.last_air_noise.scale == pytest.approx(1.0 / math.sqrt(d))


def test_an_upload_above_the_clip_is_refused_over_the_air(monkeypatch) -> None:
    """An upload of norm 2 C under the public scale would break the peak power: ValueError."""
    monkeypatch.setattr(TorchLearner, "clip_norm", property(lambda self: 0.5), raising=False)
    learner = tiny_learner([3, 5])
    learner.compute(0, np.arange(2))
    u = torch.ones(2, learner.num_params)
    learner._uploads = u / u.norm(dim=1, keepdim=True)
    learner.receive_over_the_air(
        OverTheAir(slot=0, ratio=np.ones(2), noise_std=0.1, clip_scale_values=10)
    )
    with pytest.raises(ValueError, match="exceeds the clip"):
        learner.apply(0, np.arange(2))


def test_channel_only_measures_the_thermal_noise_alone() -> None:
    """channel_only: nothing added, z_n = sqrt(N0 / (p_n g_n D_min)) by hand, the sum's noise
    that of the rule's plan without privacy."""
    rule_plan, plan = planned(
        "optimal", SEEN, TRUE, PEAK, BATCH, N0, spec("channel_only", z=None), [500, 800, 900]
    )
    air = over_the_air_sum(plan, np.arange(3), 0, np.array([N0]))
    plain = over_the_air_sum(rule_plan, np.arange(3), 0, np.array([N0]))
    rx = plan.tx_power_w * TRUE
    np.testing.assert_allclose(air.privacy_multipliers, np.sqrt(N0 / (rx * 500)), rtol=1e-12)
    np.testing.assert_array_equal(air.noise_stds, plain.noise_stds)
    assert plain.privacy_multipliers is None and plain.clip_scale_values is None


def test_d_min_is_the_fewest_values_an_aligned_device_sends() -> None:
    """A truncated device's smaller payload does not set D_min (it does not transmit)."""
    seen = np.array([2e-10, 1e-14, 1e-10])
    part = np.ones(3, dtype=bool)

    def replan(pk, giv, eta):
        return plan_aircomp(
            part, BATCH, seen, seen, pk, N0, "truncated_inversion", 1e-12, T_S, None, None
        )

    plan = private_plan(
        replan(PEAK, None, None), spec(), np.array([900.0, 10.0, 700.0]), N0, seen, seen,
        PEAK, replan,
    )  # fmt: skip
    assert not plan.aligned[1]
    assert plan.privacy.clip_values == 700


def test_privacy_power_caps_eta_under_truncated_inversion_and_saves_energy() -> None:
    """air_power = "privacy": eta = min(eta_scheme, N0 / (z^2 D max a^2)) by hand, the powers
    eta a^2 / g_seen, energy p T below the scheme's, and N0 alone meets z (perfect CSI)."""
    z, d = 2.0, 400
    seen = SEEN
    rule_plan, plan = planned(
        "truncated_inversion", seen, seen, PEAK, BATCH, N0, spec(air_power="privacy", z=z), [d] * 3
    )
    a = BATCH / BATCH.sum()
    eta = min(np.min(PEAK * seen / a**2), N0 / (z**2 * d * np.max(a**2)))
    assert plan.eta[0] == pytest.approx(eta, rel=1e-12)
    np.testing.assert_allclose(plan.tx_power_w, eta * a**2 / seen, rtol=1e-12)
    energy = aircomp_energy_j(plan.tx_power_w, T_S)
    np.testing.assert_allclose(energy, eta * a**2 / seen * T_S, rtol=1e-12)
    assert (energy <= aircomp_energy_j(rule_plan.tx_power_w, T_S)).all()
    assert energy.sum() < aircomp_energy_j(rule_plan.tx_power_w, T_S).sum()
    air = over_the_air_sum(plan, np.arange(3), 0, np.array([N0]))
    assert air.noise_stds[0] == pytest.approx(math.sqrt(N0 / eta), rel=1e-12)  # nothing added
    assert air.privacy_multipliers.min() == pytest.approx(z, rel=1e-9)


def test_privacy_power_under_the_optimal_rule_is_its_optimum_under_lowered_peaks() -> None:
    """air_power = "privacy" with the optimal powers: Cao et al.'s optimum under the peaks
    min(P_n, N0 / (z^2 D g_n)), so no device arrives above N0 / (z^2 D)."""
    z, d = 1.0, 300
    _, plan = planned(
        "optimal", SEEN, SEEN, PEAK, BATCH, N0, spec(air_power="privacy", z=z), [d] * 3
    )
    cap = N0 / (z**2 * d)
    a = BATCH / BATCH.sum()
    eta, p, _ = optimal_eta(SEEN, a, np.minimum(PEAK, cap / SEEN), N0)
    assert plan.eta[0] == pytest.approx(eta, rel=1e-12)
    np.testing.assert_allclose(plan.tx_power_w, p, rtol=1e-12)
    assert (plan.tx_power_w * SEEN <= cap * (1 + 1e-12)).all()


def test_privacy_power_under_the_controller_scales_its_powers_with_eta() -> None:
    """The controller's powers eta_w a^2 / g scale by eta' / eta_w, eta' = min(eta_w,
    N0 / (z^2 D max a^2)) (a over all devices), so each device arrives at eta' a^2."""
    z, d = 1.0, 300
    a = BATCH / BATCH.sum()
    eta_w = float(np.min(PEAK * SEEN / a**2))
    given = eta_w * a**2 / SEEN
    _, plan = planned(
        "controller", SEEN, SEEN, PEAK, BATCH, N0, spec(air_power="privacy", z=z), [d] * 3,
        given=given, eta_w=eta_w,
    )  # fmt: skip
    capped = min(eta_w, N0 / (z**2 * d * np.max(a**2)))
    assert capped < eta_w
    np.testing.assert_allclose(plan.tx_power_w, capped * a**2 / SEEN, rtol=1e-12)
    air = over_the_air_sum(plan, np.arange(3), 0, np.array([N0]))
    np.testing.assert_allclose(
        air.privacy_multipliers, np.sqrt(N0 / (capped * a**2 * d)), rtol=1e-9
    )


def test_devices_fill_adds_the_missing_noise_within_their_peaks() -> None:
    """air_noise = "devices": q_n = f (P_n - p_n) with sum q_n g_n = A (by hand), p + q <= P,
    the receiver adds nothing more (perfect CSI) and the strongest device gets exactly z."""
    z, d, n0 = 1.0, 3, 2e-11
    rule_plan, plan = planned(
        "truncated_inversion", SEEN, SEEN, PEAK, BATCH, n0, spec("devices", z=z), [d] * 3
    )
    p = rule_plan.tx_power_w
    fill = z**2 * d * np.max(p * SEEN) - n0
    q = fill / np.sum((PEAK - p) * SEEN) * (PEAK - p)
    assert fill > 0 and (q > 0).sum() == 2  # the device at its peak adds nothing
    np.testing.assert_allclose(plan.privacy.added_w, q, rtol=1e-12)
    np.testing.assert_allclose(plan.tx_power_w, p + q, rtol=1e-12)
    assert (plan.tx_power_w <= PEAK * (1 + 1e-12)).all()
    air = over_the_air_sum(plan, np.arange(3), 0, np.array([n0]))
    assert air.noise_stds[0] == pytest.approx(math.sqrt((n0 + fill) / plan.eta[0]), rel=1e-9)
    assert air.privacy_multipliers.min() == pytest.approx(z, rel=1e-9)


def test_devices_without_headroom_take_the_privacy_powers() -> None:
    """Devices already at their peak (optimal powers, weak channels) cannot add noise: the sum
    takes the privacy powers, nothing added."""
    seen = np.array([1e-13, 2e-13, 1.5e-13])
    d = 5000
    _, plan = planned("optimal", seen, seen, PEAK, BATCH, N0, spec("devices"), [d] * 3)
    _, capped = planned("optimal", seen, seen, PEAK, BATCH, N0, spec(air_power="privacy"), [d] * 3)
    assert not plan.privacy.added_w.any()
    np.testing.assert_allclose(plan.tx_power_w, capped.tx_power_w, rtol=1e-12)
    assert plan.eta[0] == capped.eta[0]


_gain = st.floats(1e-12, 1e-8)


@settings(max_examples=60, deadline=None)
@given(
    seen=st.lists(_gain, min_size=6, max_size=6),
    error=st.lists(st.floats(0.3, 3.0), min_size=6, max_size=6),
    peak=st.lists(st.floats(0.01, 1.0), min_size=6, max_size=6),
    batch=st.lists(st.integers(1, 50), min_size=6, max_size=6),
    group=st.lists(st.integers(0, 1), min_size=6, max_size=6),
    values=st.lists(st.integers(50, 5000), min_size=6, max_size=6),
    noise_db=st.floats(-150.0, -110.0),
    z=st.floats(0.3, 5.0),
    rule=st.sampled_from(["truncated_inversion", "optimal"]),
    mode=st.sampled_from(["receiver", "devices", "privacy"]),
)
def test_every_device_in_a_sum_reaches_z(
    seen, error, peak, batch, group, values, noise_db, z, rule, mode
) -> None:
    """Any gains, CSI errors, peaks, cells and payloads: every device's multiplier in its own
    sum is at least z (the receiver tops up what the seen gains left missing), and no device
    transmits above its peak."""
    s = np.array(seen)
    privacy = spec(
        "devices" if mode == "devices" else "receiver",
        "privacy" if mode == "privacy" else "scheme",
        z,
    )
    n0 = 10 ** (noise_db / 10)
    grp = np.array(group)
    _, plan = planned(
        rule, s, s * np.array(error), np.array(peak), np.array(batch, dtype=float), n0,
        privacy, values, grp,
    )  # fmt: skip
    ok = np.flatnonzero(plan.aligned)
    air = over_the_air_sum(plan, ok, 0, np.full(plan.eta.shape[0], n0))
    assert (air.privacy_multipliers >= z * (1 - 1e-9)).all()
    assert (plan.tx_power_w <= np.array(peak) * (1 + 1e-12)).all()


def test_each_cells_sum_is_filled_on_its_own() -> None:
    """Two sums (cells): each receiver fills for its own strongest device, so the strongest of
    each gets z (one filled sum does not count for the other's devices)."""
    grp = np.array([0, 0, 1])
    _, plan = planned(
        "truncated_inversion", SEEN, SEEN, PEAK, BATCH, N0, spec(z=2.0), [800] * 3, grp
    )
    air = over_the_air_sum(plan, np.arange(3), 0, np.full(2, N0))
    m = air.privacy_multipliers
    assert m[:2].min() == pytest.approx(2.0, rel=1e-9)
    assert m[2] == pytest.approx(2.0, rel=1e-9)


def test_adaptive_clipping_over_the_air_is_refused() -> None:
    """The clipped count is a second release the radio does not send: refused, naming the fix."""
    with pytest.raises(ValidationError, match='clipping = "fixed"'):
        PrivacyConfig(
            mechanism="over_the_air", clip_norm=1.0, noise_multiplier=1.0, clipping="adaptive"
        )


def test_the_fill_covers_a_device_dropped_part_way_through_its_sum() -> None:
    """The strongest device transmitted and dropped (not in ok): the receiver's fill still
    brings it to z, so the arrived devices get more than z."""
    _, plan = planned("truncated_inversion", SEEN, TRUE, PEAK, BATCH, N0, spec(z=1.0), [500] * 3)
    rx = plan.eta[0] * plan.coefficient**2
    strongest = int(np.argmax(rx))
    ok = np.setdiff1d(np.arange(3), [strongest])
    air = over_the_air_sum(plan, ok, 0, np.array([N0]), transmitted=np.ones(3, dtype=bool))
    counted = 1.0**2 * 500 * rx[strongest]
    np.testing.assert_allclose(air.privacy_multipliers, np.sqrt(counted / (rx[ok] * 500)))
    assert (air.privacy_multipliers > 1.0).all()


def _slot(privacy, payload_values, seen=SEEN, n0=N0):
    """over_the_air's uploads and plan for three devices (a duck-typed world: D = 1000,
    W = 1e5 Hz, one value per symbol)."""
    from types import SimpleNamespace as NS

    from wflsim.sim.servers.aircomp import over_the_air
    from wflsim.sim.slot import SlotUploads

    n = len(seen)
    system = NS(
        bandwidth_hz=1e5, num_params=1000, noise_w=n0, bits_per_param=32,
        devices=NS(batch_size=BATCH, peak_power_w=PEAK),
    )  # fmt: skip
    ones = np.ones(n)
    uploads = SlotUploads(
        np.ones(n, dtype=bool), PEAK.copy(), seen, 32.0 * np.asarray(payload_values), 0.1 * ones,
        0.1 * ones, ones,
    )  # fmt: skip
    spec_ = NS(values_per_symbol=1, power_control="truncated_inversion", threshold_gain=0.0)
    sp = NS(gains=NS(seen_gain=seen, gain=seen))
    costs = NS(payload_bits=uploads.payload_bits)
    return over_the_air(uploads, sp, costs, system, spec_, privacy=privacy)


def test_devices_adding_noise_are_charged_p_plus_q_over_the_whole_window() -> None:
    """air_noise = "devices": a device sending 3 of 1000 values but adding noise transmits for
    the whole window T = 1000 / W at p + q; energy (p + q) T computed here by hand."""
    up, plan = _slot(spec("devices", z=1.0), [3, 1000, 1000], n0=2e-11)
    q = plan.privacy.added_w
    assert q[0] > 0
    window = 1000 / 1e5
    np.testing.assert_allclose(up.upload_full_s, window)
    _, rule = planned("truncated_inversion", SEEN, SEEN, PEAK, BATCH, 2e-11, spec(), [3] * 3)
    np.testing.assert_allclose(
        up.tx_power_w * up.upload_full_s, (rule.tx_power_w + q) * window, rtol=1e-12
    )


def test_privacy_powers_are_charged_at_the_scaled_powers() -> None:
    """air_power = "privacy": each device's energy p' T with p' = eta' a^2 / g (eta' by hand),
    below the scheme's p T; a device sending 400 values transmits 400 / W."""
    z, d = 2.0, 400
    up, plan = _slot(spec(air_power="privacy", z=z), [1000, 400, 1000])
    a = BATCH / BATCH.sum()
    eta = min(np.min(PEAK * SEEN / a**2), N0 / (z**2 * d * np.max(a**2)))
    own = np.array([1000, 400, 1000]) / 1e5
    np.testing.assert_allclose(up.tx_power_w * up.upload_full_s, eta * a**2 / SEEN * own)
    plain, _ = _slot(None, [1000, 400, 1000])
    assert (up.tx_power_w * up.upload_full_s < plain.tx_power_w * plain.upload_full_s).all()


def test_each_edge_applies_its_cells_sum_at_the_public_scale(monkeypatch) -> None:
    """[server.hierarchy]: every edge receives D_min with its own cell's sum, so its scale is
    C / sqrt(D_min) (not its devices' largest deviation)."""
    from wflsim.models.learner.hierarchy import HierarchicalLearner

    monkeypatch.setattr(TorchLearner, "clip_norm", property(lambda self: 1.0), raising=False)
    h = HierarchicalLearner(tiny_learner([3, 5, 4]), 2)
    h.assign_edges(np.array([0, 0, 1]))
    h.compute(0, np.arange(3))
    for e in h.edges:
        if e._uploads.shape[0]:
            e._uploads = e._uploads / e._uploads.norm(dim=1, keepdim=True)
    air = OverTheAir(
        slot=0, ratio=np.ones(3), noise_std=np.array([0.1, 0.2]), group=np.array([0, 0, 1]),
        clip_scale_values=20,
    )  # fmt: skip
    h.receive_over_the_air(air)
    h.apply(0, np.arange(3))
    assert [nz.scale for nz in h.last_air_noise] == pytest.approx([1 / math.sqrt(20)] * 2)
