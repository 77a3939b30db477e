"""The uplink's rates: pure, vectorised functions over numpy arrays, SI units in the names.

An upload of ``S`` bits at power ``p`` on a channel of power gain ``h`` over a band ``W`` with
noise power ``N0`` takes ``S / r`` seconds at Shannon's rate ``r = W log2(1 + p h / N0)`` (the
paper's eq. 9) and costs ``p S / r`` joules (eq. 11); Proposition 1's minimum power inverts it.
On a share ``b`` of a band the noise is that of the share (``N0' b``, :func:`shared_rate_bps`).
Every uplink mode of :mod:`wflsim.sim.radio` computes its rates here.

The rate model (``[channel] rate_model``, :class:`RateModel`): Shannon's ``log2(1 + SNR)`` bit/s
per Hz (the paper's, the default), or the attenuated and truncated Shannon bound of 3GPP TR
36.942, Annex A.2: ``0`` below ``SNR_min``, ``alpha log2(1 + SNR)`` above it, at most
``SE_max`` (a real link's MCS table and overheads, its lowest and its highest MCS). Every function
here takes it (``model``, default Shannon: the same floating-point operations as without it). Equation numbers refer to
the paper in ``docs/decisions.md``'s references ("A Two-Timescale Approach for Wireless
Federated Learning with Parameter Freezing and Power Control").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import fmath

F64 = NDArray[np.float64]

_LN2 = math.log(2.0)


@dataclass(frozen=True)
class RateModel:
    """How an SNR becomes a spectral efficiency, bit/s/Hz (the rate is it times the band).

    Attributes:
        name: ``"shannon"`` (``log2(1 + SNR)``; the other fields unused) or
            ``"truncated_shannon"`` (3GPP TR 36.942, Annex A.2).
        alpha: the attenuation ``alpha`` in ``(0, 1]``: the efficiency is ``alpha log2(1 +
            SNR)`` between the bounds.
        snr_min: the SNR below which nothing gets through, linear.
        se_max: the highest efficiency (the highest MCS), bit/s/Hz.
    """

    name: Literal["shannon", "truncated_shannon"] = "shannon"
    alpha: float = 1.0
    snr_min: float = 0.0
    se_max: float = math.inf

    @property
    def is_shannon(self) -> bool:
        """Whether this is Shannon's bound itself."""
        return self.name == "shannon"

    def efficiency(self, snr: ArrayLike) -> F64:
        """Spectral efficiency at ``snr`` (linear, ``>= 0``), bit/s/Hz."""
        x = np.asarray(snr, dtype=np.float64)
        shannon = fmath.log1p(x) / _LN2
        if self.is_shannon:
            return np.asarray(shannon, dtype=np.float64)
        se = np.minimum(self.alpha * shannon, self.se_max)
        return np.where(x >= self.snr_min, se, 0.0)

    def required_snr(self, efficiency: ArrayLike) -> F64:
        """The least SNR (linear) giving ``efficiency`` bit/s/Hz: 0 for 0; ``inf`` above
        ``se_max``; at least ``snr_min`` (the lowest MCS) for anything above 0."""
        e = np.asarray(efficiency, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            if self.is_shannon:
                return fmath.expm1(e * _LN2)
            snr = np.maximum(fmath.expm1(e / self.alpha * _LN2), self.snr_min)
        snr = np.where(e > self.se_max, np.inf, snr)
        return np.where(e <= 0.0, 0.0, snr)

    def describe(self) -> dict[str, Any]:
        """The model for the run's manifest."""
        if self.is_shannon:
            return {"name": "shannon"}
        return {
            "name": self.name,
            "alpha": self.alpha,
            "snr_min_db": float(10.0 * fmath.log10(self.snr_min)) if self.snr_min > 0 else None,
            "se_max_bps_per_hz": self.se_max,
        }


#: Shannon's bound, the paper's model (the default).
SHANNON = RateModel()

#: ``[channel.truncated_shannon]``'s defaults: the fit to ns-3 3.37's LTE uplink (one device
#: alone on 50 resource blocks, UDP, efficiency = goodput / W against wflsim's SNR ``p h / N0``;
#: ``python scenarios/ns3/fit_rate_model.py``, docs/ns3.md). TR 36.942's own uplink values are
#: ``alpha = 0.4``, ``SNR_min = -10 dB``, ``SE_max = 2.0`` (SNR_max 15 dB).
TRUNCATED_DEFAULTS = {"alpha": 0.369, "snr_min_db": -2.95, "se_max": 3.56}


def rate_bps(
    tx_power_w: ArrayLike,
    channel_gain: ArrayLike,
    bandwidth_hz: ArrayLike,
    noise_w: ArrayLike,
    model: RateModel = SHANNON,
) -> F64:
    """Shannon rate ``r = W log2(1 + p h / N0)`` (paper eq. 9), or ``W`` times ``model``'s
    efficiency at the SNR ``p h / N0``.

    Args:
        tx_power_w: transmit power ``p``, W.
        channel_gain: ``h``, linear.
        bandwidth_hz: ``W``, Hz.
        noise_w: total noise power ``N0`` over the band, W.
        model: the rate model (:class:`RateModel`).

    Returns:
        rate, bit/s (0 where ``p = 0``).
    """
    snr = (
        np.asarray(tx_power_w, dtype=np.float64)
        * np.asarray(channel_gain, dtype=np.float64)
        / np.asarray(noise_w, dtype=np.float64)
    )
    w = np.asarray(bandwidth_hz, dtype=np.float64)
    if not model.is_shannon:
        return w * model.efficiency(snr)
    return w * fmath.log1p(snr) / fmath.log(2.0)


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
    model: RateModel = SHANNON,
) -> F64:
    """Minimum power that meets the deadline, ``p_min = N0/h (2^(uS / (W (tau0 - tau_cmp))) - 1)``.

    Paper eq. (min transmit power), Proposition 1. Setting ``tau_cmp + tau_com = tau0`` and
    solving for ``p``; under another rate model ``N0 / h`` times the least SNR that gives the
    efficiency ``uS / (W (tau0 - tau_cmp))`` (:meth:`RateModel.required_snr`: at least its
    lowest MCS's, the upload then ending before the deadline; ``inf`` above its highest).

    Args:
        payload_bits: ``(1 - gamma) S``, bits.
        channel_gain: ``h``, linear.
        bandwidth_hz: ``W``, Hz.
        noise_w: ``N0``, W.
        deadline_s: per-round latency ``tau0``, s.
        compute_time_s: ``tau_cmp``, s.
        model: the rate model (:class:`RateModel`).

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
        per_gain = np.asarray(noise_w, dtype=np.float64) / np.asarray(
            channel_gain, dtype=np.float64
        )
        if model.is_shannon:
            p = per_gain * fmath.expm1(exponent * fmath.log(2.0))
        else:
            p = per_gain * model.required_snr(exponent)
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
    model: RateModel = SHANNON,
) -> F64:
    """Shannon rate on an allocated band, ``r = b log2(1 + p h / (N0' b))`` (eq. 9 with the noise
    power of the band ``b`` it uses), or ``b`` times ``model``'s efficiency at that SNR.

    Args:
        tx_power_w: transmit power ``p``, W, broadcast (typically ``(k,)``).
        channel_gain: ``h``, linear.
        band_hz: allocated band ``b``, Hz (``W / k`` under OFDMA with ``k`` uploads in flight).
        noise_psd_w_per_hz: ``N0'``, W/Hz.
        model: the rate model (:class:`RateModel`).

    Returns:
        rate, bit/s (0 where ``b = 0`` or ``p h = 0``).
    """
    b = np.asarray(band_hz, dtype=np.float64)
    signal = np.asarray(tx_power_w, dtype=np.float64) * np.asarray(channel_gain, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        snr = signal / (np.asarray(noise_psd_w_per_hz, dtype=np.float64) * b)
        if model.is_shannon:
            rate = b * fmath.log1p(snr) / fmath.log(2.0)
        else:
            rate = b * model.efficiency(snr)
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
