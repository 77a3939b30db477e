"""Tests of the Lyapunov controller (sim/schemes/controller.py) against direct numerical solutions.

Instances are centred on the paper's MNIST setting (Sec. VI): S = 32 * 440812 bits, W = 10 MHz,
N0 = -104 dBm, H from 128.1 + 37.6 log10(d[km]) with d in [10, 1000] m, tau0 = 0.8 s, c = 2e6,
B = 512, f = 2 GHz, alpha = 2e-28, P_bar = 1 W, V in [1, 1e4], lam = 1 / (30 * 512), Q in [0, 50],
plus randomised scales and forced regimes (I <= 0, Q = 0, Gamma outside [0, 1], theta > tau0,
overflowing A, tiny H, tiny cost scale, nearly dead devices).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import exp1, expn

from wflsim.sim.radio import rates as rt
from wflsim.sim.schemes.controller import (
    ControllerParams,
    default_lambda,
    expected_cost,
    expected_cost_derivative,
    lambda_from_constants,
    max_tx_power_for_cost_w,
    max_tx_power_w,
    paper_curvature_bound,
    slot_power_decision,
    solve_gamma,
    truncation_gamma,
)
from wflsim.sim.slot import queue_update_j
from wflsim.sim.world import physics as ph

#: the fields an instance gives (min_gamma, a rate model's floor, keeps its default 0 here)
FIELDS = tuple(
    f.name
    for f in dataclasses.fields(ControllerParams)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
)


def prop1(h, gamma, p_max, params: ControllerParams):
    """Proposition 1 for channel gains ``h``: p_min from the physics formula, then the decision."""
    u = 1.0 - np.asarray(gamma)
    tau_cmp = ph.compute_time_s(u, params.cycles_per_sample, params.batch_size, params.cpu_hz)
    p_min = rt.min_tx_power_w(
        u * params.model_bits, h, params.bandwidth_hz, params.noise_w, params.deadline_s, tau_cmp
    )
    return slot_power_decision(p_min, p_max, u * params.model_bits)


MNIST = {
    "model_bits": 32.0 * 440812.0,
    "bandwidth_hz": 10e6,
    "noise_w": float(ph.dbm_to_w(-104.0)),
    "deadline_s": 0.8,
    "cycles_per_sample": 2e6,
    "batch_size": 512.0,
    "cpu_hz": 2e9,
    "capacitance": 2e-28,
    "peak_power_w": 1.0,
    "lam": 1.0 / (30 * 512),
}
REL_GAP = 1e-6  # MM may be worse than the grid minimum by at most this, relative


def _loguniform(rng: np.random.Generator, lo: float, hi: float, n: int) -> np.ndarray:
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


def _gain(rng: np.random.Generator, n: int, lo_m: float = 10.0, hi_m: float = 1000.0) -> np.ndarray:
    return ph.large_scale_gain(ph.path_loss_db(_loguniform(rng, lo_m, hi_m, n)))


def _mnist(rng: np.random.Generator, n: int, q_zero: float = 0.15, **override) -> dict:
    """MNIST-centred instances (field -> array of shape (n,))."""
    q = rng.uniform(0.0, 50.0, n)
    q[rng.random(n) < q_zero] = 0.0
    kw = {k: np.full(n, v) for k, v in MNIST.items()}
    kw.update(mean_gain=_gain(rng, n), v=_loguniform(rng, 1.0, 1e4, n), queue_j=q)
    kw.update(override)
    return kw


def _randomised(rng: np.random.Generator, n: int) -> dict:
    """Every constant scaled by a random log-uniform factor around the MNIST centre."""
    kw = _mnist(rng, n, q_zero=0.1)
    for name, span in [
        ("model_bits", 100.0),
        ("bandwidth_hz", 10.0),
        ("noise_w", 10.0),
        ("mean_gain", 1e3),
        ("deadline_s", 3.0),
        ("cycles_per_sample", 10.0),
        ("cpu_hz", 3.0),
        ("capacitance", 10.0),
        ("peak_power_w", 10.0),
        ("lam", 10.0),
    ]:
        kw[name] = kw[name] * _loguniform(rng, 1.0 / span, span, n)
    kw["v"] = _loguniform(rng, 1e-2, 1e6, n)
    kw["queue_j"] = np.where(kw["queue_j"] > 0.0, _loguniform(rng, 1e-3, 1e3, n), 0.0)
    return kw


def _concat(*parts: dict) -> ControllerParams:
    return ControllerParams(
        **{f: np.concatenate([np.asarray(p[f], dtype=float) for p in parts]) for f in FIELDS}
    )


def _e_cmp(kw: dict) -> np.ndarray:
    return 0.5 * kw["capacitance"] * kw["cycles_per_sample"] * kw["batch_size"] * kw["cpu_hz"] ** 2


def _regime_instances(seed: int = 20240611) -> tuple[ControllerParams, dict[str, np.ndarray]]:
    """>= 500 instances spanning all regimes; returns the params and a mask per regime."""
    rng = np.random.default_rng(seed)
    blocks: dict[str, dict] = {}
    blocks["mnist"] = _mnist(rng, 300)
    blocks["randomised"] = _randomised(rng, 200)
    n = 30
    blocks["q_zero"] = _mnist(rng, n, queue_j=np.zeros(n))
    # Gamma in (0, 1): small queue against a large value of participating
    blocks["gamma_inside"] = _mnist(
        rng, n, queue_j=_loguniform(rng, 0.01, 5.0, n), v=_loguniform(rng, 300, 1e4, n)
    )
    # Gamma <= 0 (Case 2: p_max < P_bar everywhere): I small against Q P_bar (tau0 - theta)
    kw = _mnist(rng, n, queue_j=rng.uniform(5.0, 50.0, n))
    kw["v"] = 30.0 * kw["queue_j"] * _e_cmp(kw) + _loguniform(rng, 0.05, 2.0, n)
    blocks["gamma_negative"] = kw
    # I <= 0: the queue price of computing exceeds the value of the update
    kw = _mnist(rng, n, queue_j=rng.uniform(20.0, 50.0, n))
    kw["v"] = 30.0 * kw["queue_j"] * _e_cmp(kw) * rng.uniform(0.2, 1.0, n)
    blocks["i_nonpositive"] = kw
    # nearly dead: I barely positive, so x(gamma = 1) = Q N0 ln2 S / (I W H) is large: flat Z ~ 0
    kw = _mnist(rng, n, queue_j=rng.uniform(1.0, 50.0, n))
    kw["v"] = 30.0 * kw["queue_j"] * _e_cmp(kw) * (1.0 + _loguniform(rng, 1e-9, 1e-3, n))
    blocks["nearly_dead"] = kw
    # tiny cost scale (Z ~ 1e-12 * MNIST scale): an absolute stopping rule would stall here
    kw = _mnist(rng, n)
    kw["v"] = kw["v"] * 1e-12
    kw["queue_j"] = kw["queue_j"] * 1e-12
    blocks["tiny_scale"] = kw
    # theta = c B / f > tau0: computing the full model alone misses the deadline
    blocks["theta_gt_tau0"] = _mnist(rng, n, cpu_hz=_loguniform(rng, 2e8, 1.2e9, n))
    # huge S: A = 2^(uS/(W Dt)) - 1 overflows for most u
    blocks["huge_s"] = _mnist(rng, n, model_bits=_loguniform(rng, 1e11, 1e13, n))
    # tiny H: deep shadowing, success only for tiny payloads
    blocks["tiny_h"] = _mnist(rng, n, mean_gain=_gain(rng, n) * _loguniform(rng, 1e-9, 1e-4, n))
    params = _concat(*blocks.values())
    sizes = [len(b["v"]) for b in blocks.values()]
    edges = np.cumsum([0, *sizes])
    masks = {}
    for (name, _), a, b in zip(blocks.items(), edges[:-1], edges[1:], strict=True):
        m = np.zeros(edges[-1], dtype=bool)
        m[a:b] = True
        masks[name] = m
    return params, masks


def _grid() -> np.ndarray:
    """>= 2,000 gamma values: 2,001 equispaced plus 1,000 geometric in u = 1 - gamma near 1."""
    return np.unique(
        np.concatenate([np.linspace(0.0, 1.0, 2001), 1.0 - np.geomspace(1e-12, 1.0, 1000)])
    )


@pytest.fixture(scope="module")
def regimes():
    """Instances, their regime masks, the MM solution and the dense-grid costs (computed once)."""
    params, masks = _regime_instances()
    res = solve_gamma(params)
    grid = _grid()
    z_grid = expected_cost(grid[:, None], params)  # (G, N)
    return params, masks, res, grid, z_grid


def _single(params: ControllerParams, i: int) -> ControllerParams:
    return ControllerParams(**{f: getattr(params, f)[i : i + 1] for f in FIELDS})


# --------------------------------------------------------------------------------------------
# per frame: MM against a dense grid
# --------------------------------------------------------------------------------------------


def test_instances_span_all_regimes(regimes):
    """The random instance set covers every regime the solver must handle."""
    params, masks, res, _, _ = regimes
    i_val = params.net_value
    gam = truncation_gamma(params)
    inside = (gam > 0.0) & (gam < 1.0)
    assert params.n_devices >= 500
    assert np.sum(i_val <= 0.0) >= 20
    assert np.sum((params.queue_j == 0.0) & (i_val > 0.0)) >= 20
    assert np.sum((i_val > 0.0) & (params.queue_j > 0.0) & (gam <= 0.0)) >= 20
    assert np.sum(inside & (res.gamma < res.Gamma)) >= 20  # optimum on the truncated piece
    assert np.sum(inside & (res.gamma > res.Gamma)) >= 20  # optimum on the untruncated piece
    assert np.sum(params.theta_s > params.deadline_s) >= 20
    assert np.sum(masks["tiny_scale"] & (res.cost < 0.0) & (np.abs(res.cost) < 1e-9)) >= 10


def test_mm_never_worse_than_dense_grid(regimes):
    """MM's cost is within 1e-6 (relative to |grid min|) of the dense-grid minimum on every instance."""
    params, _, res, grid, z_grid = regimes
    z_min = z_grid.min(axis=0)
    scale = np.maximum(np.abs(z_min), 1e-300)
    gap = (res.cost - z_min) / scale
    worst = int(np.argmax(gap))
    assert gap.max() <= REL_GAP, (
        f"instance {worst}: MM {res.cost[worst]!r} vs grid {z_min[worst]!r}"
    )


def test_mm_outputs_are_finite(regimes):
    """No NaN or inf in any output of solve_gamma, nor in Z on the grid."""
    _, _, res, _, z_grid = regimes
    for name in ("gamma", "cost", "p_max_w", "Gamma"):
        assert np.all(np.isfinite(getattr(res, name))), name
    assert np.all(np.isfinite(z_grid))
    assert np.all((res.gamma >= 0.0) & (res.gamma <= 1.0))
    assert np.all((res.Gamma >= 0.0) & (res.Gamma <= 1.0))


def test_mm_converges_on_every_instance(regimes):
    """The scale-free stopping rule is met before the iteration cap on every instance."""
    _, _, res, _, _ = regimes
    assert res.converged.all()
    assert res.iterations.max() < 2 * 200


def test_mm_result_matches_reported_cost(regimes):
    """The reported cost is Z at the reported gamma, and p_max is Prop. 1's threshold there."""
    params, _, res, _, _ = regimes
    np.testing.assert_array_equal(res.cost, expected_cost(res.gamma, params))
    p_max = max_tx_power_w(
        params.queue_j,
        params.net_value,
        1.0 - res.gamma,
        params.deadline_s,
        params.theta_s,
        params.peak_power_w,
    )
    np.testing.assert_array_equal(res.p_max_w, p_max)


def test_mm_never_worse_than_endpoints(regimes):
    """The result is never worse than gamma = 0, Gamma and 1."""
    params, _, res, _, _ = regimes
    for g in (np.zeros(params.n_devices), res.Gamma, np.ones(params.n_devices)):
        assert np.all(res.cost <= expected_cost(g, params))


def test_mm_single_iteration_still_improves_on_endpoints(regimes):
    """With max_iter = 1 the output is finite and still no worse than the endpoints."""
    params, _, _, _, _ = regimes
    res = solve_gamma(params, max_iter=1)
    assert np.all(np.isfinite(res.cost)) and np.all(np.isfinite(res.gamma))
    for g in (np.zeros(params.n_devices), res.Gamma, np.ones(params.n_devices)):
        assert np.all(res.cost <= expected_cost(g, params))


def test_mm_devices_are_independent(regimes):
    """Solving a permuted subset gives bit-identical per-device results (no cross-device coupling)."""
    params, _, res, _, _ = regimes
    idx = np.random.default_rng(0).permutation(params.n_devices)[:97]
    sub = ControllerParams(**{f: getattr(params, f)[idx] for f in FIELDS})
    res_sub = solve_gamma(sub)
    np.testing.assert_array_equal(res_sub.gamma, res.gamma[idx])
    np.testing.assert_array_equal(res_sub.cost, res.cost[idx])


def test_mm_is_scale_free():
    """Scaling V and Q by the same factor scales Z and leaves gamma unchanged."""
    kw = _mnist(np.random.default_rng(3), 200)
    base = solve_gamma(_concat(kw))
    for s in (1e-15, 1e12):
        scaled = solve_gamma(_concat({**kw, "v": kw["v"] * s, "queue_j": kw["queue_j"] * s}))
        np.testing.assert_allclose(scaled.gamma, base.gamma, rtol=0, atol=1e-7)
        np.testing.assert_allclose(scaled.cost, base.cost * s, rtol=1e-9, atol=0)


def test_mm_handles_ten_thousand_devices():
    """N = 10,000 devices solve in one vectorised call, finite and converged."""
    rng = np.random.default_rng(5)
    params = _concat(_mnist(rng, 5000), _randomised(rng, 5000))
    t0 = time.perf_counter()
    res = solve_gamma(params)
    elapsed = time.perf_counter() - t0
    assert np.all(np.isfinite(res.cost)) and res.converged.all()
    assert elapsed < 20.0  # ~0.5 s on one core; generous for slow CI


_LOG10_RANGES = {
    "model_bits": (3.0, 13.0),
    "bandwidth_hz": (4.0, 9.0),
    "noise_w": (-20.0, -8.0),
    "mean_gain": (-20.0, -2.0),
    "deadline_s": (-3.0, 1.0),
    "cycles_per_sample": (0.0, 8.0),
    "batch_size": (0.0, 4.0),
    "cpu_hz": (6.0, 10.0),
    "capacitance": (-40.0, -25.0),
    "peak_power_w": (-3.0, 2.0),
    "queue_j": (-6.0, 6.0),
    "v": (-6.0, 8.0),
    "lam": (-8.0, 0.0),
}


@settings(max_examples=150, deadline=None)
@given(
    st.fixed_dictionaries({k: st.floats(lo, hi) for k, (lo, hi) in _LOG10_RANGES.items()}),
    st.booleans(),
)
def test_mm_never_worse_than_grid_at_extreme_scales(log10, q_zero):
    """For any parameter scales (13 constants over 5-15 decades) MM is finite and beats the grid."""
    kw = {k: 10.0**v for k, v in log10.items()}
    if q_zero:
        kw["queue_j"] = 0.0
    params = ControllerParams(**kw)
    res = solve_gamma(params)
    assert all(np.all(np.isfinite(getattr(res, f))) for f in ("gamma", "cost", "p_max_w", "Gamma"))
    z_min = expected_cost(_grid()[:, None], params).min()
    assert res.cost[0] <= z_min + REL_GAP * max(abs(z_min), 1e-300)


def test_mm_rejects_bad_options():
    """Non-positive tol, max_iter < 1 and n_scan < 2 raise ValueError."""
    params = _concat(_mnist(np.random.default_rng(0), 3))
    with pytest.raises(ValueError, match="tol"):
        solve_gamma(params, tol=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        solve_gamma(params, max_iter=0)
    with pytest.raises(ValueError, match="n_scan"):
        solve_gamma(params, n_scan=1)


# --------------------------------------------------------------------------------------------
# per frame: Z and Z'
# --------------------------------------------------------------------------------------------


def _x_and_c(
    gamma: np.ndarray, params: ControllerParams
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Independent ``x = h_min / H``, ``C = Q Dt p_max`` and ``u`` from physics + Prop. 1."""
    u = 1.0 - gamma
    tau_cmp = ph.compute_time_s(
        1.0 - gamma, params.cycles_per_sample, params.batch_size, params.cpu_hz
    )
    n0_a = rt.min_tx_power_w(
        u * params.model_bits, 1.0, params.bandwidth_hz, params.noise_w, params.deadline_s, tau_cmp
    )
    p_max = max_tx_power_w(
        params.queue_j, params.net_value, u, params.deadline_s, params.theta_s, params.peak_power_w
    )
    with np.errstate(divide="ignore"):
        x = n0_a / (p_max * params.mean_gain)
    return x, params.queue_j * (params.deadline_s - tau_cmp) * p_max, u


def test_expected_cost_matches_monte_carlo():
    """Z(gamma) equals the Monte-Carlo mean of the per-slot cost within 4 standard errors."""
    rng = np.random.default_rng(1234)
    n = 24
    q = np.where(rng.random(n) < 0.25, 0.0, rng.uniform(0.0, 20.0, n))
    kw = _mnist(
        rng, n, mean_gain=_gain(rng, n, 200.0, 1000.0), v=_loguniform(rng, 300.0, 1e4, n), queue_j=q
    )
    params = _concat(kw)
    # a third at random, a third at the MM optimum, a third where the success probability e^-x
    # is closest to 1/2 (so that the outage branch is exercised)
    gamma = rng.uniform(0.05, 0.95, params.n_devices)
    gamma[1::3] = solve_gamma(params).gamma[1::3]
    g_grid = np.linspace(0.0, 0.999, 1000)[:, None]
    x_grid = _x_and_c(np.broadcast_to(g_grid, (1000, params.n_devices)), params)[0]
    gamma[2::3] = g_grid[np.argmin(np.abs(np.exp(-x_grid) - 0.5), axis=0), 0][2::3]
    u = 1.0 - gamma
    n_slots = 100_000
    p_max = max_tx_power_w(
        params.queue_j, params.net_value, u, params.deadline_s, params.theta_s, params.peak_power_w
    )
    h = params.mean_gain * rng.exponential(1.0, (n_slots, params.n_devices))
    dec = prop1(h, np.broadcast_to(gamma, h.shape), np.broadcast_to(p_max, h.shape), params)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = rt.rate_bps(dec.tx_power_w, h, params.bandwidth_hz, params.noise_w)
        t_com = rt.upload_time_s(u * params.model_bits, rate)
        e_com = rt.upload_energy_j(dec.tx_power_w, np.where(dec.transmit, t_com, 0.0))
    t_cmp = ph.compute_time_s(
        1.0 - gamma, params.cycles_per_sample, params.batch_size, params.cpu_hz
    )
    e_cmp = ph.compute_energy_j(
        1.0 - gamma, params.cycles_per_sample, params.batch_size, params.cpu_hz, params.capacitance
    )
    in_time = dec.transmit & (t_cmp + t_com <= params.deadline_s * (1.0 + 1e-9))
    assert np.array_equal(in_time, dec.transmit)  # p_min meets the deadline (to rounding)
    x_err = np.where(in_time, params.lam * params.batch_size * (gamma - 1.0), 0.0)
    energy = np.where(dec.transmit, e_cmp + e_com, 0.0)
    z = params.v * x_err + params.queue_j * energy
    # exact standard error: E[z^2] = I^2 u^2 e^-x - 2 I u C x E1(x) + C^2 x E2(x)
    x, c, _ = _x_and_c(gamma, params)
    i_u = params.net_value * u
    with np.errstate(invalid="ignore"):
        second = i_u**2 * np.exp(-x) - 2.0 * i_u * c * x * exp1(x) + c**2 * x * expn(2, x)
    second = np.where(np.isfinite(x), second, 0.0)  # p_max = 0: never transmits, z = 0
    z_exact = expected_cost(gamma, params)
    se = np.sqrt(np.maximum(second - z_exact**2, 0.0) / n_slots)
    informative = (np.exp(-x) > 0.05) & (np.exp(-x) < 0.95)
    assert informative.sum() >= 6  # the check is not vacuous
    assert np.all(np.abs(z.mean(axis=0) - z_exact) <= 4.0 * se + 1e-12 * np.abs(i_u))


def test_expected_cost_matches_closed_form():
    """Z equals -I u e^-x + C x E1(x) computed independently from physics and Prop. 1."""
    params, _ = _regime_instances(seed=7)
    rng = np.random.default_rng(8)
    gamma = rng.uniform(0.0, 1.0, params.n_devices)
    x, c, u = _x_and_c(gamma, params)
    sel = np.isfinite(x) & (x < 600.0) & (params.net_value > 0.0) & (u > 0.0)
    x, c, u = x[sel], c[sel], u[sel]
    ref = -params.net_value[sel] * u * np.exp(-x) + c * x * exp1(x)
    np.testing.assert_allclose(expected_cost(gamma, params)[sel], ref, rtol=1e-9, atol=0)


def test_derivative_matches_finite_differences():
    """Analytic Z' agrees with central differences of Z away from Gamma."""
    params, _ = _regime_instances(seed=11)
    rng = np.random.default_rng(12)
    gamma = rng.uniform(0.01, 0.99, params.n_devices)
    gam = truncation_gamma(params)
    z = expected_cost(gamma, params)
    u = 1.0 - gamma
    # away from the kink in Z'' and where Z is not astronomically small (x moderate)
    sel = (np.abs(gamma - gam) > 1e-4) & (np.abs(z) > 1e-6 * np.abs(params.net_value) * u)
    assert sel.sum() >= 300
    h = 1e-6
    fd = (expected_cost(gamma + h, params) - expected_cost(gamma - h, params)) / (2.0 * h)
    an = expected_cost_derivative(gamma, params)
    scale = np.maximum(np.abs(an), np.abs(fd))
    assert np.all(np.abs(an - fd)[sel] <= 1e-5 * scale[sel] + 1e-9 * np.abs(z[sel]))


def test_cost_is_c1_at_gamma():
    """Z' is continuous at the truncation point Gamma (left and right derivatives agree)."""
    params, _ = _regime_instances(seed=13)
    gam = truncation_gamma(params)
    z_gam = expected_cost(np.clip(gam, 0.0, 1.0), params)
    # Gamma inside (0, 1), where Z is not astronomically small (x moderate)
    sel = (gam > 0.02) & (gam < 0.98) & (np.abs(z_gam) > 1e-6 * params.net_value * (1.0 - gam))
    assert sel.sum() >= 50
    sub = ControllerParams(**{f: getattr(params, f)[sel] for f in FIELDS})
    g0 = gam[sel]
    # one-sided limits of Z' by linear extrapolation from each side (error O(eps^2 Z'''))
    eps = 1e-7

    def dz(g: np.ndarray) -> np.ndarray:
        return expected_cost_derivative(g, sub)

    left = 2.0 * dz(g0 - eps) - dz(g0 - 2.0 * eps)
    right = 2.0 * dz(g0 + eps) - dz(g0 + 2.0 * eps)
    np.testing.assert_allclose(left, right, rtol=1e-6, atol=1e-300)
    # one-sided difference quotients of Z itself
    h = 1e-7
    z0 = expected_cost(g0, sub)
    fd_left = (z0 - expected_cost(g0 - h, sub)) / h
    fd_right = (expected_cost(g0 + h, sub) - z0) / h
    scale = np.abs(expected_cost_derivative(g0, sub)) + np.abs(z0)
    assert np.all(np.abs(fd_left - fd_right) <= 1e-4 * scale)


def test_gamma_one_limit_is_finite_and_exact():
    """At gamma = 1: Z = 0 and Z' = I Psi(x0) (Q > 0) or I (Q = 0), the limit from below."""
    kw = _mnist(np.random.default_rng(21), 200, q_zero=0.3)
    params = _concat(kw)
    part = params.net_value > 0.0
    ones = np.ones(params.n_devices)
    np.testing.assert_array_equal(expected_cost(ones, params), 0.0)
    dz1 = expected_cost_derivative(ones, params)
    i_val = params.net_value
    with np.errstate(divide="ignore", invalid="ignore"):
        x0 = (
            params.queue_j
            * params.noise_w
            * np.log(2)
            * params.model_bits
            / (i_val * params.bandwidth_hz * params.mean_gain)
        )
        psi = np.exp(-x0) - x0 * exp1(x0)
    expect = np.where(params.queue_j > 0.0, i_val * psi, i_val)
    np.testing.assert_allclose(dz1[part], expect[part], rtol=1e-10)
    np.testing.assert_array_equal(dz1[~part], 0.0)
    np.testing.assert_allclose(
        expected_cost_derivative(ones - 1e-9, params)[part], dz1[part], rtol=1e-5
    )


def test_q_zero_cost_and_solution():
    """Q = 0: p_max = P_bar, Z = -I u e^-x with x = N0 A / (P_bar H), Gamma = 1."""
    rng = np.random.default_rng(31)
    params = _concat(_mnist(rng, 100, queue_j=np.zeros(100)))
    gamma = rng.uniform(0.0, 1.0, 100)
    u = 1.0 - gamma
    tau_cmp = ph.compute_time_s(
        1.0 - gamma, params.cycles_per_sample, params.batch_size, params.cpu_hz
    )
    x = (
        rt.min_tx_power_w(
            u * params.model_bits,
            params.mean_gain,
            params.bandwidth_hz,
            params.noise_w,
            params.deadline_s,
            tau_cmp,
        )
        / params.peak_power_w
    )
    np.testing.assert_allclose(
        expected_cost(gamma, params), -params.net_value * u * np.exp(-x), rtol=1e-12
    )
    res = solve_gamma(params)
    np.testing.assert_array_equal(
        res.p_max_w[res.gamma < 1.0], params.peak_power_w[res.gamma < 1.0]
    )
    np.testing.assert_array_equal(res.Gamma, 1.0)
    assert np.all(res.cost < 0.0)


def test_nonpositive_i_quits_the_frame():
    """I <= 0: Z = Z' = 0 everywhere; the solver returns gamma = 1, cost 0, p_max 0."""
    rng = np.random.default_rng(41)
    kw = _mnist(rng, 50, queue_j=rng.uniform(10.0, 50.0, 50))
    kw["v"] = 30.0 * kw["queue_j"] * _e_cmp(kw) * rng.uniform(0.0, 1.0, 50)
    params = _concat(kw)
    assert np.all(params.net_value <= 0.0)
    g = np.linspace(0.0, 1.0, 101)[:, None]
    np.testing.assert_array_equal(expected_cost(g, params), 0.0)
    np.testing.assert_array_equal(expected_cost_derivative(g, params), 0.0)
    res = solve_gamma(params)
    np.testing.assert_array_equal(res.gamma, 1.0)
    np.testing.assert_array_equal(res.cost, 0.0)
    np.testing.assert_array_equal(res.p_max_w, 0.0)
    assert res.converged.all() and np.all(res.iterations == 0)


def test_infeasible_regions_cost_zero():
    """Dt <= 0 or an overflowing A gives Z = Z' = 0 (no transmission possible), without NaN."""
    n = 20
    rng = np.random.default_rng(51)
    params = _concat(_mnist(rng, n, cpu_hz=np.full(n, 5e8), model_bits=np.full(n, 1e15)))
    g = np.linspace(0.0, 0.5, 51)[:, None]  # theta = 2.048 s > tau0: Dt <= 0 for u >= 0.39
    z = expected_cost(g, params)
    dz = expected_cost_derivative(g, params)
    assert np.all(np.isfinite(z)) and np.all(np.isfinite(dz))
    np.testing.assert_array_equal(z, 0.0)
    np.testing.assert_array_equal(dz, 0.0)


def test_paper_curvature_bound_fails_on_truncated_piece():
    """The paper's M (eq. "M value") is below max Z'' on [0, Gamma] at MNIST scale."""
    d_m = 37.0
    params = ControllerParams(
        **MNIST, mean_gain=ph.large_scale_gain(ph.path_loss_db(d_m)), queue_j=24.0, v=1814.0
    )
    gam = float(truncation_gamma(params)[0])
    assert 0.5 < gam < 0.9
    m_trunc, m_untrunc = paper_curvature_bound(params)
    g = np.linspace(0.0, gam, 4001)
    z = expected_cost(g, params)
    z2 = np.diff(z, 2) / (g[1] - g[0]) ** 2  # second differences of Z itself
    assert z2.max() > 1.3 * m_trunc[0]
    # the solver does not rely on it: still at least as good as the grid
    assert solve_gamma(params).cost[0] <= z.min()


# --------------------------------------------------------------------------------------------
# per slot: Proposition 1
# --------------------------------------------------------------------------------------------


def test_proposition1_matches_dense_power_grid():
    """Prop. 1's cost equals the minimum of V X + Q E over a dense power grid on [0, P_bar]."""
    rng = np.random.default_rng(61)
    kw = {
        k: np.concatenate([a, b])
        for (k, a), b in zip(_mnist(rng, 150).items(), _randomised(rng, 150).values(), strict=True)
    }
    params = _concat(kw)
    n = params.n_devices
    gamma = rng.uniform(0.0, 1.0, n)
    gamma[:10] = 1.0
    u = 1.0 - gamma
    h = params.mean_gain * rng.exponential(1.0, n)
    p_max = max_tx_power_w(
        params.queue_j, params.net_value, u, params.deadline_s, params.theta_s, params.peak_power_w
    )
    dec = prop1(h, gamma, p_max, params)
    t_cmp = ph.compute_time_s(
        1.0 - gamma, params.cycles_per_sample, params.batch_size, params.cpu_hz
    )
    e_cmp = ph.compute_energy_j(
        1.0 - gamma, params.cycles_per_sample, params.batch_size, params.cpu_hz, params.capacitance
    )
    x_ok = params.lam * params.batch_size * (gamma - 1.0)

    def slot_cost(p: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            t_com = rt.upload_time_s(
                u * params.model_bits, rt.rate_bps(p, h, params.bandwidth_hz, params.noise_w)
            )
            energy = np.where(p > 0.0, e_cmp + p * t_com, 0.0)
        success = (p > 0.0) & (t_cmp + t_com <= params.deadline_s * (1.0 + 1e-12))
        return params.v * np.where(success, x_ok, 0.0) + params.queue_j * energy

    n_grid = 20001
    p_grid = np.linspace(0.0, 1.0, n_grid)[:, None] * params.peak_power_w
    grid_min = slot_cost(p_grid).min(axis=0)
    prop = np.where(dec.transmit, slot_cost(dec.tx_power_w), 0.0)
    scale = params.v * params.lam * params.batch_size + params.queue_j * (
        e_cmp + params.peak_power_w * params.deadline_s
    )
    dp = params.peak_power_w / (n_grid - 1)
    slack = params.queue_j * params.deadline_s * 2.0 * dp  # grid resolution: d(p tau_com)/dp <= Dt
    assert np.all(prop <= grid_min + 1e-12 * scale)
    assert np.all(grid_min <= prop + slack + 1e-12 * scale)
    assert 20 <= dec.transmit.sum() <= n - 20  # both decisions occur


def test_slot_decision_transmits_at_min_power_and_meets_deadline():
    """Transmitting devices use p_min <= p_max and finish exactly at the deadline; others use 0 W."""
    rng = np.random.default_rng(71)
    params = _concat(_mnist(rng, 400))
    gamma = rng.uniform(0.0, 1.0, 400)
    u = 1.0 - gamma
    p_max = max_tx_power_w(
        params.queue_j, params.net_value, u, params.deadline_s, params.theta_s, params.peak_power_w
    )
    h = params.mean_gain * rng.exponential(1.0, 400)
    dec = prop1(h, gamma, p_max, params)
    t = dec.transmit
    assert t.any() and (~t).any()
    np.testing.assert_array_equal(dec.tx_power_w[~t], 0.0)
    assert np.all(dec.tx_power_w[t] <= p_max[t])
    rate = rt.rate_bps(dec.tx_power_w[t], h[t], params.bandwidth_hz[t], params.noise_w[t])
    finish = params.theta_s[t] * u[t] + u[t] * params.model_bits[t] / rate
    np.testing.assert_allclose(finish, params.deadline_s[t], rtol=1e-9)


@pytest.mark.parametrize(
    ("queue", "i_val", "u", "theta", "expected"),
    [
        (0.0, 5.0, 0.5, 0.5, 2.0),  # Q = 0, I > 0: P_bar
        (0.0, -1.0, 0.5, 0.5, 0.0),  # Q = 0, I <= 0: quits
        (3.0, 5.0, 0.0, 0.5, 0.0),  # u = 0: nothing to send
        (3.0, 5.0, 0.9, 1.0, 0.0),  # Dt = 0.8 - 0.9 < 0: infeasible
        (3.0, -5.0, 0.5, 0.5, 0.0),  # I < 0: clipped to 0
        (3.0, 1.0, 0.5, 0.5, 1.0 * 0.5 / (3.0 * (0.8 - 0.25))),  # interior
        (1e-3, 5.0, 0.5, 0.5, 2.0),  # clipped at P_bar
    ],
)
def test_max_tx_power_cases(queue, i_val, u, theta, expected):
    """p_max follows eq. "max transmit power" and its documented special cases."""
    got = max_tx_power_w(queue, i_val, u, 0.8, theta, 2.0)
    np.testing.assert_allclose(got, expected, rtol=1e-15)


# --------------------------------------------------------------------------------------------
# queue, lambda, validation
# --------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 1e3, allow_nan=False), st.floats(0.0, 1e3, allow_nan=False)),
        min_size=1,
        max_size=50,
    ),
    st.floats(0.0, 1e3, allow_nan=False),
)
def test_queue_update_follows_recursion(steps, q0):
    """Q stays >= 0 and equals the recursion Q <- max(Q + E - E_bar, 0) step by step."""
    q = np.array([q0])
    q_ref = q0
    for energy, budget in steps:
        q = queue_update_j(q, energy, budget)
        q_ref = max(q_ref + energy - budget, 0.0)
        assert q[0] >= 0.0
        assert q[0] == q_ref


def test_default_lambda_is_inverse_total_batch():
    """default_lambda returns 1 / sum(B_n)."""
    assert default_lambda(np.full(30, 512)) == 1.0 / (30 * 512)


def test_lambda_from_constants_formula():
    """lambda_from_constants = max(6 L^2 sigma^2, 9 xi1) / ((1 - 9 xi2) B)."""
    assert lambda_from_constants(2.0, 0.5, 1.0, 0.1, 100.0) == pytest.approx(12.0 / (0.1 * 100.0))
    assert lambda_from_constants(0.1, 0.5, 1.0, 0.0, 10.0) == pytest.approx(9.0 / 10.0)


def test_with_queue_replaces_only_the_queue():
    """with_queue returns params with the new Q (and I updated), all else unchanged."""
    params = _concat(_mnist(np.random.default_rng(2), 5))
    new = params.with_queue(np.full(5, 7.0))
    np.testing.assert_array_equal(new.queue_j, 7.0)
    np.testing.assert_array_equal(new.mean_gain, params.mean_gain)
    np.testing.assert_allclose(
        new.net_value, params.v * params.batch_size * params.lam - 7.0 * params.e_cmp_j
    )


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: lambda_from_constants(1.0, 1.0, 1.0, 1.0 / 9.0, 10.0), "xi2"),
        (lambda: lambda_from_constants(1.0, -1.0, 1.0, 0.0, 10.0), "sigma2"),
        (lambda: lambda_from_constants(1.0, 1.0, 1.0, 0.0, 0.0), "batch_total"),
        (lambda: queue_update_j([1.0], [1.0], [-0.5]), "budget_j"),
        (lambda: queue_update_j([-1.0], [1.0], [0.5]), "queue_j"),
        (lambda: queue_update_j([1.0], [np.nan], [0.5]), "energy_j"),
        (lambda: default_lambda([512, 0]), "batch_sizes"),
        (
            lambda: ControllerParams(
                **{**MNIST, "bandwidth_hz": -1.0}, mean_gain=1e-9, queue_j=0.0, v=1.0
            ),
            "bandwidth_hz",
        ),
        (lambda: ControllerParams(**MNIST, mean_gain=1e-9, queue_j=-1.0, v=1.0), "queue_j"),
        (lambda: ControllerParams(**MNIST, mean_gain=np.inf, queue_j=0.0, v=1.0), "mean_gain"),
        (
            lambda: ControllerParams(
                **MNIST, mean_gain=[1e-9, 1e-9], queue_j=[0.0, 0.0, 0.0], v=1.0
            ),
            "broadcast",
        ),
        (
            lambda: expected_cost(
                1.5, ControllerParams(**MNIST, mean_gain=1e-9, queue_j=0.0, v=1.0)
            ),
            "gamma",
        ),
        (lambda: max_tx_power_w(1.0, 1.0, -0.1, 0.8, 0.5, 1.0), "u"),
        (lambda: slot_power_decision(-1.0, 1.0, 1e6), "min_tx_power_w"),
        (lambda: slot_power_decision(np.nan, 1.0, 1e6), "min_tx_power_w"),
        (lambda: slot_power_decision(0.5, -1.0, 1e6), "p_max_w"),
        (lambda: slot_power_decision(0.5, 1.0, -1.0), "payload_bits"),
    ],
)
def test_bad_inputs_raise_value_error_naming_field(call, field):
    """Invalid inputs raise ValueError whose message names the offending field."""
    with pytest.raises(ValueError, match=field):
        call()


def test_threshold_for_a_cost_model_equals_the_papers_under_freezing():
    """With compute fraction u (freezing), the cost-model threshold equals I u / (Q Dt) clipped."""
    rng = np.random.default_rng(81)
    params = _concat(_mnist(rng, 300), _randomised(rng, 300))
    u = rng.uniform(0.0, 1.0, params.n_devices)
    u[:5] = 0.0
    ref = max_tx_power_w(
        params.queue_j, params.net_value, u, params.deadline_s, params.theta_s, params.peak_power_w
    )
    got = max_tx_power_for_cost_w(
        params.queue_j,
        params.v * params.lam * params.batch_size * u,
        params.e_cmp_j * u,
        params.deadline_s - params.theta_s * u,
        params.peak_power_w,
    )
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("compute", ["full", "half_of_u"])
def test_threshold_for_a_cost_model_minimises_the_slot_cost(compute):
    """For a baseline's own cost model (full compute, or a sub-model computing u/2), transmitting
    at p_min iff p_min <= p_max gives the minimum of V X + Q E over a dense power grid."""
    rng = np.random.default_rng(83 if compute == "full" else 84)
    params = _concat(_mnist(rng, 200), _randomised(rng, 200))
    n = params.n_devices
    u = rng.uniform(0.05, 1.0, n)  # value (payload) fraction
    c = np.ones(n) if compute == "full" else 0.5 * u  # compute fraction
    t_cmp = params.theta_s * c
    e_cmp = params.e_cmp_j * c
    dt = params.deadline_s - t_cmp
    bits = u * params.model_bits
    h = params.mean_gain * rng.exponential(1.0, n)
    p_max = max_tx_power_for_cost_w(
        params.queue_j,
        params.v * params.lam * params.batch_size * u,
        e_cmp,
        dt,
        params.peak_power_w,
    )
    p_min = rt.min_tx_power_w(
        bits, h, params.bandwidth_hz, params.noise_w, params.deadline_s, t_cmp
    )
    dec = slot_power_decision(p_min, p_max, bits)
    x_ok = params.lam * params.batch_size * (-u)

    def slot_cost(p: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            t_com = rt.upload_time_s(bits, rt.rate_bps(p, h, params.bandwidth_hz, params.noise_w))
            energy = np.where(p > 0.0, e_cmp + p * t_com, 0.0)
        success = (p > 0.0) & (t_cmp + t_com <= params.deadline_s * (1.0 + 1e-12))
        return params.v * np.where(success, x_ok, 0.0) + params.queue_j * energy

    n_grid = 20001
    p_grid = np.linspace(0.0, 1.0, n_grid)[:, None] * params.peak_power_w
    grid_min = slot_cost(p_grid).min(axis=0)
    prop = np.where(dec.transmit, slot_cost(dec.tx_power_w), 0.0)
    scale = params.v * params.lam * params.batch_size + params.queue_j * (
        params.e_cmp_j + params.peak_power_w * params.deadline_s
    )
    slack = params.queue_j * params.deadline_s * 2.0 * params.peak_power_w / (n_grid - 1)
    assert np.all(prop <= grid_min + 1e-12 * scale)
    assert np.all(grid_min <= prop + slack + 1e-12 * scale)
    assert 20 <= dec.transmit.sum() <= n - 20  # both decisions occur


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.floats(-1.0, 800.0),
            st.sampled_from([0.0, 1e-2, 30.0, np.inf, np.nan, 1e-300]),
        ),
        min_size=1,
        max_size=64,
    )
)
def test_branchwise_log_phi_equals_both_branch_form(values):
    """log phi and its derivative, computed branch by branch, equal the two-branch np.where form bit for bit."""
    from wflsim.sim.schemes import phi as ctl

    k = np.asarray(values, dtype=np.float64).reshape(1, -1)
    with np.errstate(all="ignore"):
        ks = np.where(k > 0.0, k, 1.0)
        kb = np.where(ks > 30.0, ks, 1.0)
        both = np.where(
            ks > 30.0,
            kb + np.log1p(-np.exp(-kb)) - np.log(kb),
            np.log(np.expm1(np.minimum(ks, 30.0)) / np.minimum(ks, 30.0)),
        )
        ref_log = np.where(k > 0.0, both, 0.0)
        small = k < 1e-2
        kc = np.where(small, 1.0, k)
        ref_dlog = np.where(small, 0.5 + k / 12.0 - k**3 / 720.0, 1.0 / (-np.expm1(-kc)) - 1.0 / kc)
        got_log, got_dlog = ctl._log_phi(k), ctl._dlog_phi(k)
    assert got_log.tobytes() == ref_log.tobytes()
    assert got_dlog.tobytes() == ref_dlog.tobytes()


# --------------------------------------------------------------------------------------------
# the compiled loops of Z and Z' (controller_compiled) against the numpy expressions
# --------------------------------------------------------------------------------------------


def _both_paths(gamma: np.ndarray, params: ControllerParams):
    """``(Z, Z')`` by the compiled loops and by numpy's expressions (the loops must be taken)."""
    from wflsim.sim.schemes import controller as ctl

    d = params._derived
    compiled = ctl._compiled_loops(gamma, d)
    assert compiled is not None, "the compiled loops were not taken"
    return compiled, ctl._z_and_dz_numpy(gamma, d)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_compiled_cost_equals_numpy_on_every_regime(regimes):
    """The compiled Z and Z' equal numpy's bit for bit over a dense grid on every regime's instance."""
    params, _, res, grid, _ = regimes
    # every 7th grid point, the endpoints, each instance's Gamma and its MM optimum
    gam = np.clip(truncation_gamma(params), 0.0, 1.0)
    rows = np.vstack([grid[::7, None] * np.ones(params.n_devices), gam, res.gamma])
    (z_c, dz_c), (z_n, dz_n) = _both_paths(rows, params)
    assert _same_bits(z_c, z_n)
    assert _same_bits(dz_c, dz_n)


def test_compiled_cost_equals_numpy_on_a_frame_of_pieces(regimes):
    """One row of gamma per instance (an MM iteration's shape) gives numpy's bits too."""
    params, _, res, _, _ = regimes
    tiled = ControllerParams(**{f: np.tile(getattr(params, f), 4) for f in FIELDS})
    gamma = np.tile(res.gamma, 4)
    (z_c, dz_c), (z_n, dz_n) = _both_paths(gamma, tiled)
    assert _same_bits(z_c, z_n) and _same_bits(dz_c, dz_n)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.floats(0.0, 1.0),
            st.sampled_from([0.0, 1.0, 5e-324, 1e-300, 1e-12, 1.0 - 2.0**-53, 0.5]),
        ),
        min_size=3,
        max_size=8,
    )
)
def test_compiled_cost_equals_numpy_at_any_gamma(regimes, values):
    """At any gamma in [0, 1] (edges and subnormals included) the compiled Z, Z' equal numpy's."""
    params = regimes[0]
    gamma = np.asarray(values, dtype=np.float64)[:, None]  # (G, 1) against (N,)
    (z_c, dz_c), (z_n, dz_n) = _both_paths(gamma, params)
    assert _same_bits(z_c, z_n) and _same_bits(dz_c, dz_n)


def test_compiled_cost_follows_fmath_and_shares_its_thresholds():
    """The loops are skipped where fmath goes element by element, and use the module's thresholds."""
    from wflsim.sim import fmath
    from wflsim.sim.schemes import controller as ctl
    from wflsim.sim.schemes import controller_compiled as cc

    assert (cc.K_MAX, cc.X_MAX, cc.X_MIN) == (ctl._K_MAX, ctl._X_MAX, ctl._X_MIN)
    params, _ = _regime_instances()
    gamma = np.full((4, params.n_devices), 0.5)
    try:
        fmath.use_compiled(False)
        assert ctl._compiled_loops(gamma, params._derived) is None
        z_off = expected_cost(gamma, params)
    finally:
        fmath.use_compiled(None)
    assert _same_bits(z_off, expected_cost(gamma, params))
