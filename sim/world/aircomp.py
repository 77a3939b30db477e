"""Over-the-air aggregation (AirComp): the physics as pure, vectorised functions (groundwork of
issue 38; not wired into a run yet: docs/aircomp.md).

The devices of a slot transmit their (normalised) updates at once on the same symbols; the base
station receives their sum through the channel plus noise. Per real symbol (one entry of every
update, after phase pre-compensation with the device's CSI, so each device's effective gain is the
real amplitude ``sqrt(g_n)``, ``g_n = |h_n|^2``):

    y = sum_n sqrt(p_n g_n) x_n + z,        z ~ N(0, N0),

with ``x_n`` the device's update normalised to zero mean and unit variance (its mean and standard
deviation go to the server as side information, as in the papers), ``p_n`` its transmit power
(W) and ``N0`` the noise power over the band (W). The server estimates the target
``s = sum_n a_n x_n`` (``a_n``: the aggregation weights, ``B_n / sum B`` for the paper's eq. 3) as
``s_hat = y / sqrt(eta)`` with the denoising factor ``eta > 0``. With independent unit-variance
entries the mean squared error per entry is

    MSE = sum_n (sqrt(p_n g_n / eta) - a_n)^2 + N0 / eta                    (Cao et al., eq. 8)

Two power-control rules:

* **Truncated channel inversion** (Zhu, Wang, Huang, "Broadband Analog Aggregation for Low-Latency
  Federated Edge Learning", IEEE TWC 2020): a device whose gain is at least ``g_th`` inverts its
  channel, ``p_n = eta a_n^2 / g_n`` (it arrives with the amplitude ``a_n sqrt(eta)``), the others
  stay silent; the MSE is ``sum over the truncated a_n^2 + N0 / eta``. Under Rayleigh fading with
  mean gain ``H_n`` a device is aligned with probability ``exp(-g_th / H_n)``.
* **The MSE-optimal policy** (Cao, Zhu, Xu, Huang, "Optimized Power Control for Over-the-Air
  Computation in Fading Channels", IEEE TWC 2020): for a given ``eta``, ``p_n = min(P_n, eta a_n^2
  / g_n)`` (channel inversion where the peak power allows it, full power below the threshold);
  the best ``eta`` minimises the MSE over the intervals between the devices' quality indicators
  ``q_n = P_n g_n / a_n^2`` (:func:`optimal_eta`).

The transmission time of ``D`` parameters is ``ceil(D / v) / W`` (``v`` real values per symbol:
1 for BAA's real analog symbols, 2 with I and Q; ``W`` symbols per second over the band) and a
device's energy is ``p_n`` times it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

F64 = NDArray[np.float64]
B8 = NDArray[np.bool_]


def aircomp_latency_s(num_params: int, bandwidth_hz: float, values_per_symbol: int = 1) -> float:
    """The time to send ``D`` parameters over the air, s: ``ceil(D / v) / W``.

    Args:
        num_params: ``D``, parameters per update (>= 1).
        bandwidth_hz: ``W``, Hz: the band carries ``W`` symbols per second.
        values_per_symbol: ``v``, real values per symbol (1: BAA's real symbols; 2: I and Q).
    """
    if num_params < 1 or values_per_symbol < 1:
        raise ValueError("num_params and values_per_symbol must be >= 1")
    if not (math.isfinite(bandwidth_hz) and bandwidth_hz > 0.0):
        raise ValueError(f"bandwidth_hz must be finite and > 0, got {bandwidth_hz!r}")
    return math.ceil(num_params / values_per_symbol) / float(bandwidth_hz)


def aircomp_energy_j(tx_power_w: ArrayLike, latency_s: float) -> F64:
    """Each device's energy for one over-the-air transmission, J: ``p_n T`` (``(n,)``)."""
    return np.asarray(tx_power_w, dtype=np.float64) * float(latency_s)


def _check(gain: ArrayLike, weights: ArrayLike) -> tuple[F64, F64]:
    g = np.asarray(gain, dtype=np.float64)
    a = np.asarray(weights, dtype=np.float64)
    if g.ndim != 1 or a.shape != g.shape:
        raise ValueError(
            f"gain and weights must be (n,) arrays of one shape, got {g.shape}, {a.shape}"
        )
    if not (
        np.isfinite(g).all() and (g >= 0.0).all() and np.isfinite(a).all() and (a >= 0.0).all()
    ):
        raise ValueError("gains and weights must be finite and >= 0")
    return g, a


def aircomp_mse(
    gain: ArrayLike, tx_power_w: ArrayLike, weights: ArrayLike, eta: float, noise_w: float
) -> float:
    """The aggregate's mean squared error per entry (Cao et al., eq. 8):
    ``sum_n (sqrt(p_n g_n / eta) - a_n)^2 + N0 / eta``.

    Args:
        gain: ``(n,)`` channel power gains ``g_n``, linear.
        tx_power_w: ``(n,)`` transmit powers, W (per unit-variance symbol).
        weights: ``(n,)`` the target's weights ``a_n``.
        eta: the receiver's denoising factor, > 0.
        noise_w: ``N0``, the noise power per symbol, W.
    """
    g, a = _check(gain, weights)
    p = np.asarray(tx_power_w, dtype=np.float64)
    if not eta > 0.0:
        raise ValueError(f"eta must be > 0, got {eta!r}")
    return float(np.sum((np.sqrt(p * g / eta) - a) ** 2) + noise_w / eta)


def truncated_inversion(
    gain: ArrayLike, weights: ArrayLike, eta: float, threshold_gain: float
) -> tuple[F64, B8]:
    """Truncated channel inversion (BAA): ``p_n = eta a_n^2 / g_n`` where ``g_n >= g_th``, else 0.

    Returns:
        ``(tx_power_w, aligned)``: ``(n,)`` powers, W, and the aligned devices.
    """
    g, a = _check(gain, weights)
    aligned = (g >= threshold_gain) & (g > 0.0)
    with np.errstate(divide="ignore"):
        p = np.where(aligned, eta * a * a / np.where(aligned, g, 1.0), 0.0)
    return p, aligned


def truncation_mse(weights: ArrayLike, aligned: ArrayLike, eta: float, noise_w: float) -> float:
    """The MSE of truncated channel inversion: ``sum over the truncated a_n^2 + N0 / eta``."""
    a = np.asarray(weights, dtype=np.float64)
    on = np.asarray(aligned, dtype=bool)
    return float(np.sum(a[~on] ** 2) + noise_w / eta)


def expected_aligned(large_scale_gain: ArrayLike, threshold_gain: float) -> F64:
    """Each device's probability of being aligned under Rayleigh fading with mean gain ``H_n``:
    ``P(g_n >= g_th) = exp(-g_th / H_n)`` (``(n,)``; 0 where ``H_n = 0``)."""
    h = np.asarray(large_scale_gain, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(h > 0.0, np.exp(-threshold_gain / np.where(h > 0.0, h, 1.0)), 0.0)


def optimal_powers(gain: ArrayLike, weights: ArrayLike, peak_power_w: ArrayLike, eta: float) -> F64:
    """Cao et al.'s optimal powers for a given ``eta``: ``p_n = min(P_n, eta a_n^2 / g_n)``
    (``(n,)``, W; 0 for a device with ``a_n = 0`` or no channel)."""
    g, a = _check(gain, weights)
    peak = np.broadcast_to(np.asarray(peak_power_w, dtype=np.float64), g.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(g > 0.0, eta * a * a / np.where(g > 0.0, g, 1.0), 0.0)
    return np.where(a > 0.0, np.minimum(peak, inv), 0.0)


def optimal_eta(
    gain: ArrayLike, weights: ArrayLike, peak_power_w: ArrayLike, noise_w: float
) -> tuple[float, F64, float]:
    """The denoising factor minimising the MSE under peak powers, with its powers and MSE.

    With quality indicators ``q_n = P_n g_n / a_n^2`` sorted ascending, for ``eta`` between two
    consecutive ones the devices with ``q_n < eta`` send at full power and the others invert
    their channel (zero error), so with ``t = 1 / sqrt(eta)``
    ``MSE = sum over q_n < eta of a_n^2 (sqrt(q_n) t - 1)^2 + N0 t^2``: a quadratic in ``t``,
    minimised at ``t = sum a_n^2 sqrt(q_n) / (sum a_n^2 q_n + N0)`` and clipped to the interval;
    the best of the intervals is the optimum (Cao et al., Theorem 1). Devices with ``a_n = 0``
    or no channel take no part.

    Returns:
        ``(eta, tx_power_w, mse)``.
    """
    g, a = _check(gain, weights)
    peak = np.broadcast_to(np.asarray(peak_power_w, dtype=np.float64), g.shape)
    live = (a > 0.0) & (g > 0.0) & (peak > 0.0)
    if not live.any():
        raise ValueError("no device can transmit (all weights, gains or powers are 0)")
    if not noise_w > 0.0:
        raise ValueError(f"noise_w must be > 0, got {noise_w!r}")
    quality = peak[live] * g[live] / (a[live] ** 2)
    order = np.argsort(quality, kind="stable")
    q, w2 = quality[order], (a[live] ** 2)[order]
    bounds = np.concatenate(([0.0], q, [np.inf]))
    best = (math.inf, 0.0)
    for k in range(
        q.shape[0] + 1
    ):  # eta in (bounds[k], bounds[k + 1]]: the k weakest at full power
        lo, hi = float(bounds[k]), float(bounds[k + 1])
        if hi <= lo:
            continue
        t_min = 1.0 / math.sqrt(hi) if math.isfinite(hi) else 0.0  # t = 1 / sqrt(eta)
        t_max = 1.0 / math.sqrt(lo) if lo > 0.0 else math.inf
        sq, ww = np.sqrt(q[:k]), w2[:k]
        t = float(np.sum(ww * sq)) / (float(np.sum(ww * q[:k])) + noise_w)
        t = min(max(t, t_min), t_max)
        if not t > 0.0:
            continue
        mse = float(np.sum(ww * (sq * t - 1.0) ** 2)) + noise_w * t * t
        if mse < best[0]:
            best = (mse, 1.0 / (t * t))
    eta = best[1]
    p = optimal_powers(g, a, peak, eta)
    return eta, p, aircomp_mse(g, p, a, eta, noise_w)


def received_aggregate(
    updates: ArrayLike,
    gain: ArrayLike,
    tx_power_w: ArrayLike,
    eta: float,
    noise_w: float,
    rng: np.random.Generator,
) -> F64:
    """One over-the-air aggregation of normalised updates: ``(y) / sqrt(eta)`` with
    ``y = sum_n sqrt(p_n g_n) x_n + z`` per entry (``x``: ``(n, D)``; ``z ~ N(0, N0)`` drawn from
    ``rng``); ``(D,)``."""
    x = np.asarray(updates, dtype=np.float64)
    amp = np.sqrt(np.asarray(tx_power_w, dtype=np.float64) * np.asarray(gain, dtype=np.float64))
    y = amp @ x + rng.normal(0.0, math.sqrt(noise_w), size=x.shape[1])
    return np.asarray(y / math.sqrt(eta), dtype=np.float64)


def normalise(updates: ArrayLike) -> tuple[F64, F64, F64]:
    """Each update (row) to zero mean and unit variance, with its mean and standard deviation
    (the side information): ``(x, mean, std)``; a constant row has std 1 (sent as its mean)."""
    u = np.asarray(updates, dtype=np.float64)
    mean = u.mean(axis=1)
    std = u.std(axis=1)
    std = np.where(std > 0.0, std, 1.0)
    return (u - mean[:, None]) / std[:, None], mean, std
