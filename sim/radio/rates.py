"""The uplink's rates: pure, vectorised functions over numpy arrays, SI units in the names.

An upload of ``S`` bits at power ``p`` on a channel of power gain ``h`` over a band ``W`` with
noise power ``N0`` takes ``S / r`` seconds at Shannon's rate ``r = W log2(1 + p h / N0)`` (the
paper's eq. 9) and costs ``p S / r`` joules (eq. 11); Proposition 1's minimum power inverts it.
On a share ``b`` of a band the noise is that of the share (``N0' b``, :func:`shared_rate_bps`).
Every uplink mode of :mod:`wflsim.sim.radio` computes its rates here. Equation numbers refer to
the paper in ``docs/decisions.md``'s references ("A Two-Timescale Approach for Wireless
Federated Learning with Parameter Freezing and Power Control").
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import fmath

F64 = NDArray[np.float64]


def rate_bps(
    tx_power_w: ArrayLike, channel_gain: ArrayLike, bandwidth_hz: ArrayLike, noise_w: ArrayLike
) -> F64:
    """Shannon rate ``r = W log2(1 + p h / N0)`` (paper eq. 9).

    Args:
        tx_power_w: transmit power ``p``, W.
        channel_gain: ``h``, linear.
        bandwidth_hz: ``W``, Hz.
        noise_w: total noise power ``N0`` over the band, W.

    Returns:
        rate, bit/s (0 where ``p = 0``).
    """
    snr = (
        np.asarray(tx_power_w, dtype=np.float64)
        * np.asarray(channel_gain, dtype=np.float64)
        / np.asarray(noise_w, dtype=np.float64)
    )
    return np.asarray(bandwidth_hz, dtype=np.float64) * fmath.log1p(snr) / fmath.log(2.0)


def upload_time_s(payload_bits: ArrayLike, rate_bps: ArrayLike) -> F64:
    """Upload latency ``tau_com = (1 - gamma) S / r`` (paper eq. 10), seconds.

    A zero payload takes 0 s; a positive payload at rate 0 takes ``inf``.
    """
    bits = np.asarray(payload_bits, dtype=np.float64)
    r = np.asarray(rate_bps, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a rate ~ 0: inf
        t = bits / r
    return np.where(bits <= 0.0, 0.0, t)


def upload_energy_j(tx_power_w: ArrayLike, upload_time_s: ArrayLike) -> F64:
    """Upload energy ``E_com = p tau_com`` (paper eq. 11), joules (0 where ``p = 0``)."""
    p = np.asarray(tx_power_w, dtype=np.float64)
    t = np.asarray(upload_time_s, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(p > 0.0, p * t, 0.0)


def min_tx_power_w(
    payload_bits: ArrayLike,
    channel_gain: ArrayLike,
    bandwidth_hz: ArrayLike,
    noise_w: ArrayLike,
    deadline_s: ArrayLike,
    compute_time_s: ArrayLike,
) -> F64:
    """Minimum power that meets the deadline, ``p_min = N0/h (2^(uS / (W (tau0 - tau_cmp))) - 1)``.

    Paper eq. (min transmit power), Proposition 1. Setting ``tau_cmp + tau_com = tau0`` and
    solving for ``p``.

    Args:
        payload_bits: ``(1 - gamma) S``, bits.
        channel_gain: ``h``, linear.
        bandwidth_hz: ``W``, Hz.
        noise_w: ``N0``, W.
        deadline_s: per-round latency ``tau0``, s.
        compute_time_s: ``tau_cmp``, s.

    Returns:
        ``p_min`` in W: 0 for an empty payload, ``inf`` when no power meets the deadline
        (``tau_cmp >= tau0`` with a positive payload, or an overflowing exponent).
    """
    bits = np.asarray(payload_bits, dtype=np.float64)
    slack_s = np.asarray(deadline_s, dtype=np.float64) - np.asarray(
        compute_time_s, dtype=np.float64
    )
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exponent = bits / (np.asarray(bandwidth_hz, dtype=np.float64) * slack_s)
        p = (
            np.asarray(noise_w, dtype=np.float64)
            / np.asarray(channel_gain, dtype=np.float64)
            * fmath.expm1(exponent * fmath.log(2.0))
        )
    p = np.where(slack_s > 0.0, p, np.inf)
    return np.where(bits <= 0.0, 0.0, p)


def outage_probability(min_channel_gain: ArrayLike, large_scale_gain: ArrayLike) -> F64:
    """Outage probability under Rayleigh fading, ``q = Pr{h < h_min} = 1 - exp(-h_min / H)``.

    Corollary 2 of the paper; ``h ~ Exp(mean H)``.
    """
    x = np.asarray(min_channel_gain, dtype=np.float64) / np.asarray(
        large_scale_gain, dtype=np.float64
    )
    return -fmath.expm1(-x)


def noise_psd_w_per_hz(noise_w: ArrayLike, bandwidth_hz: ArrayLike) -> F64:
    """Noise power spectral density ``N0' = N0 / W``, W/Hz, from the noise power ``N0`` (W) over
    the band ``W`` (Hz): -104 dBm over 10 MHz is -174 dBm/Hz."""
    return np.asarray(noise_w, dtype=np.float64) / np.asarray(bandwidth_hz, dtype=np.float64)


def shared_rate_bps(
    tx_power_w: ArrayLike,
    channel_gain: ArrayLike,
    band_hz: ArrayLike,
    noise_psd_w_per_hz: ArrayLike,
) -> F64:
    """Shannon rate on an allocated band, ``r = b log2(1 + p h / (N0' b))`` (eq. 9 with the noise
    power of the band ``b`` it uses).

    Args:
        tx_power_w: transmit power ``p``, W, broadcast (typically ``(k,)``).
        channel_gain: ``h``, linear.
        band_hz: allocated band ``b``, Hz (``W / k`` under OFDMA with ``k`` uploads in flight).
        noise_psd_w_per_hz: ``N0'``, W/Hz.

    Returns:
        rate, bit/s (0 where ``b = 0`` or ``p h = 0``).
    """
    b = np.asarray(band_hz, dtype=np.float64)
    signal = np.asarray(tx_power_w, dtype=np.float64) * np.asarray(channel_gain, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        snr = signal / (np.asarray(noise_psd_w_per_hz, dtype=np.float64) * b)
        rate = b * fmath.log1p(snr) / fmath.log(2.0)
    return np.where((b > 0.0) & (signal > 0.0), rate, 0.0)


def equal_share_hz(total_hz: float, in_flight: int) -> float:
    """Processor sharing's band per upload, ``W / k`` (Hz) for ``k >= 1`` uploads in flight."""
    return total_hz / in_flight


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
