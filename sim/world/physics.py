"""Physical models: pure, vectorised functions over numpy arrays, SI units in the names.

Every function broadcasts over its array arguments (shape ``(N,)`` for N devices is typical) and
returns ``float64`` arrays. Equation numbers refer to the paper in ``../shared/paper`` ("A
Two-Timescale Approach for Wireless Federated Learning with Parameter Freezing and Power Control").

Decisions the paper leaves open (see ``docs/decisions.md``):

* The path-loss formula ``128.1 + 37.6 log10(d)`` takes ``d`` in **kilometres** (with metres the
  SNRs would be -65 to -117 dB). Positions are in metres; distances are clipped below at a
  minimum distance (default 10 m).
* ``N0`` is the total noise power over a device's band ``W`` (not a density).

The uplink's rates (Shannon's on a device's band or a share of it, the upload's time and
energy, Proposition 1's minimum power, the outage probability) are the radio's:
:mod:`wflsim.sim.radio.rates`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import fmath

F64 = NDArray[np.float64]

#: 3GPP-style macro-cell path loss ``PL[dB] = 128.1 + 37.6 log10(d[km])`` (paper, Sec. VI).
PATHLOSS_INTERCEPT_DB = 128.1
PATHLOSS_SLOPE_DB = 37.6


def dbm_to_w(power_dbm: ArrayLike) -> F64:
    """Convert a power in dBm to watts: ``P[W] = 10^((P[dBm] - 30) / 10)``."""
    with np.errstate(over="ignore"):  # absurd powers become inf; sim.config.derived refuses them
        return fmath.power(10.0, (np.asarray(power_dbm, dtype=np.float64) - 30.0) / 10.0)


def db_to_linear(gain_db: ArrayLike) -> F64:
    """Convert a gain in dB to a linear power ratio: ``10^(g/10)``."""
    return fmath.power(10.0, np.asarray(gain_db, dtype=np.float64) / 10.0)


def distance_m(positions_m: ArrayLike, server_m: ArrayLike = (0.0, 0.0)) -> F64:
    """Euclidean distance to the server.

    Args:
        positions_m: device positions, shape ``(N, 2)``, metres.
        server_m: server position, shape ``(2,)``, metres.

    Returns:
        distances, shape ``(N,)``, metres.
    """
    pos = np.asarray(positions_m, dtype=np.float64)
    srv = np.asarray(server_m, dtype=np.float64)
    return np.hypot(pos[..., 0] - srv[0], pos[..., 1] - srv[1])


def path_loss_db(
    distance_m: ArrayLike,
    min_distance_m: float = 10.0,
    intercept_db: float = PATHLOSS_INTERCEPT_DB,
    slope_db: float = PATHLOSS_SLOPE_DB,
    reference_distance_m: float = 1000.0,
) -> F64:
    """Log-distance path loss ``PL[dB] = intercept + slope * log10(d / d_ref)``.

    With the defaults it is the paper's ``128.1 + 37.6 log10(d[km])`` (Sec. VI; ``d_ref`` = 1 km).

    Args:
        distance_m: device-server distances, any shape, metres. Values below ``min_distance_m``
            are clipped to it (the formula diverges at 0).
        min_distance_m: minimum distance, metres.
        intercept_db: path loss at the reference distance, dB (default 128.1).
        slope_db: dB per decade of distance, ``10 n`` for a path-loss exponent ``n``
            (default 37.6).
        reference_distance_m: ``d_ref``, metres (default 1000).

    Returns:
        path loss, same shape, dB (positive: a loss).
    """
    d_rel = (
        np.maximum(np.asarray(distance_m, dtype=np.float64), min_distance_m) / reference_distance_m
    )
    return intercept_db + slope_db * fmath.log10(d_rel)


def large_scale_gain(path_loss_db: ArrayLike) -> F64:
    """Large-scale channel power gain ``H = 10^(-PL/10)`` (linear, dimensionless)."""
    return fmath.power(10.0, -np.asarray(path_loss_db, dtype=np.float64) / 10.0)


def channel_power_gain(large_scale_gain: ArrayLike, small_scale_gain: ArrayLike) -> F64:
    """Channel power gain ``h = g H`` (paper, Sec. VI): large-scale gain ``H`` (path loss and
    shadowing) times the small-scale fading power ``g`` (unit mean), linear, broadcast."""
    return np.asarray(large_scale_gain, dtype=np.float64) * np.asarray(
        small_scale_gain, dtype=np.float64
    )


def rayleigh_channel_gain(large_scale_gain: ArrayLike, fading_draw: ArrayLike) -> F64:
    """Block-fading channel power gain ``h = g H`` with ``g ~ Exp(1)`` (paper, Sec. VI).

    Args:
        large_scale_gain: ``H``, linear, shape ``(N,)``.
        fading_draw: ``g``, unit-mean exponential draws, same shape.

    Returns:
        ``h``, linear power gain (mean ``H``).
    """
    return np.asarray(large_scale_gain, dtype=np.float64) * np.asarray(
        fading_draw, dtype=np.float64
    )


def payload_bits(num_params: int, gamma: ArrayLike, bits_per_param: int = 32) -> F64:
    """Upload payload of a freezing scheme, ``(1 - gamma) S`` with ``S = bits_per_param * D``.

    Paper eq. 10. Args: ``num_params`` ``D``; ``gamma`` the frozen fraction in ``[0, 1]``;
    ``bits_per_param`` bits per value. Returns bits (shape of ``gamma``).
    """
    return (1.0 - np.asarray(gamma, dtype=np.float64)) * float(bits_per_param) * float(num_params)


def compute_time_s(
    compute_fraction: ArrayLike,
    cycles_per_sample: ArrayLike,
    batch_size: ArrayLike,
    cpu_hz: ArrayLike,
    local_steps: ArrayLike = 1,
) -> F64:
    """Computation latency ``tau_cmp = u c B E / f``, seconds (paper eq. 12 with ``u = 1 - gamma``,
    times the local steps ``E``: ``E = 1`` is the paper's single gradient).

    Args:
        compute_fraction: ``u``, the share of a full local gradient's ``c B`` cycles the device
            runs, in ``[0, 1]`` (``1 - gamma`` under freezing; a scheme's cost model gives it).
        cycles_per_sample: ``c``, cycles per sample.
        batch_size: ``B``, samples per step.
        cpu_hz: ``f``, cycles per second.
        local_steps: ``E``, local SGD steps per update (``learning.local_steps``; 1: FedSGD).

    Returns:
        ``tau_cmp``, seconds (broadcast shape, typically ``(N,)``).
    """
    u = np.asarray(compute_fraction, dtype=np.float64)
    return (
        u
        * np.asarray(cycles_per_sample, dtype=np.float64)
        * np.asarray(batch_size, dtype=np.float64)
        * np.asarray(local_steps, dtype=np.float64)
        / np.asarray(cpu_hz, dtype=np.float64)
    )


def compute_energy_j(
    compute_fraction: ArrayLike,
    cycles_per_sample: ArrayLike,
    batch_size: ArrayLike,
    cpu_hz: ArrayLike,
    capacitance: ArrayLike,
    local_steps: ArrayLike = 1,
) -> F64:
    """Computation energy ``E_cmp = (alpha / 2) u c B E f^2``, joules (paper eq. 13,
    ``u = 1 - gamma``, times the local steps ``E``).

    Args:
        compute_fraction: ``u`` in ``[0, 1]`` (see :func:`compute_time_s`).
        cycles_per_sample, batch_size, cpu_hz: ``c``, ``B`` (samples per step), ``f`` (cycles/s).
        capacitance: ``alpha``, the effective switched capacitance.
        local_steps: ``E``, local SGD steps per update (1: FedSGD).

    Returns:
        ``E_cmp``, joules.
    """
    u = np.asarray(compute_fraction, dtype=np.float64)
    f = np.asarray(cpu_hz, dtype=np.float64)
    return (
        0.5
        * np.asarray(capacitance, dtype=np.float64)
        * u
        * np.asarray(cycles_per_sample, dtype=np.float64)
        * np.asarray(batch_size, dtype=np.float64)
        * np.asarray(local_steps, dtype=np.float64)
        * f
        * f
    )


def slowed_compute_time_s(compute_time_s: ArrayLike, slowdown: ArrayLike) -> F64:
    """Compute latency under a slowdown, ``s tau_cmp``, seconds (``sim/world/compute.py``).

    Args:
        compute_time_s: nominal ``tau_cmp`` (eq. 12), seconds.
        slowdown: ``s >= 1``: the device runs its cycles at the clock ``f / s`` or gets the
            share ``1 / s`` of its CPU; either way the same cycles take ``s`` times as long.
    """
    return np.asarray(compute_time_s, dtype=np.float64) * np.asarray(slowdown, dtype=np.float64)


def throttled_compute_energy_j(compute_energy_j: ArrayLike, slowdown: ArrayLike) -> F64:
    """Compute energy of the same cycles at the lowered clock ``f' = f / s``, joules:
    ``(alpha / 2) u c B f'^2 = E_cmp / s^2`` (eq. 13 at ``f'``).

    Args:
        compute_energy_j: ``E_cmp`` at the nominal clock ``f`` (eq. 13), joules.
        slowdown: ``s >= 1``, the clock's reduction factor.
    """
    s = np.asarray(slowdown, dtype=np.float64)
    return np.asarray(compute_energy_j, dtype=np.float64) / (s * s)
