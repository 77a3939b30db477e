"""``phi(k) = expm1(k) / k`` and the functions of it the controller's cost needs (pure,
vectorised, float64 in and out, any shape; ``k >= 0`` is the dimensionless exponent
``k = ln2 u S / (W Dt)`` of the minimum transmit power, see :mod:`wflsim.sim.schemes.controller`).

``phi`` and its derivatives give ``x = h_min / H`` on the untruncated piece of the expected cost
(Theorem 2) and its slope; ``log phi``, its derivative and its inverse give the start scan's
points where ``x`` exceeds its piece-end value by a set amount.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .. import fmath

F64 = NDArray[np.float64]


def _phi(k: F64) -> F64:
    """``phi(k) = expm1(k) / k`` (``phi(0) = 1``)."""
    ks = np.where(k > 0.0, k, 1.0)
    return np.where(k > 0.0, fmath.expm1(ks) / ks, 1.0)


def _dphi(k: F64) -> F64:
    """``phi'(k) = (k e^k - expm1(k)) / k^2``; a series below ``k = 1e-2`` (no cancellation)."""
    small = k < 1e-2
    ks = np.where(small, 1.0, k)
    closed = (ks * fmath.exp(ks) - fmath.expm1(ks)) / (ks * ks)
    return np.where(small, _dphi_series(k), closed)


def _dphi_series(k: F64) -> F64:
    """``phi'(k)``'s Taylor series (used below ``k = 1e-2``)."""
    return 0.5 + k * (1 / 3 + k * (1 / 8 + k * (1 / 30 + k * (1 / 144 + k / 840))))


def _d2phi(k: F64) -> F64:
    """``phi''(k) = (e^k (k^2 - 2k + 2) - 2) / k^3``; a series below ``k = 0.1``."""
    small = k < 0.1
    ks = np.where(small, 1.0, k)
    closed = (fmath.exp(ks) * (ks * ks - 2.0 * ks + 2.0) - 2.0) / fmath.power(ks, 3.0)
    series = 1 / 3 + k * (1 / 4 + k * (1 / 10 + k * (1 / 36 + k * (1 / 168 + k / 960))))
    return np.where(small, series, closed)


def _log_phi(k: F64) -> F64:
    """``log(expm1(k) / k)`` without overflow (``0`` at ``k = 0``).

    Each element is computed by its own branch only (boolean indexing, not ``np.where`` over
    both branches): the same values at a fraction of the cost in the start scan's Newton."""
    k = np.asarray(k, dtype=np.float64)
    out = np.zeros(k.shape)
    big = k > 30.0
    mid = (k > 0.0) & ~big
    kb = k[big]
    out[big] = kb + fmath.log1p(-fmath.exp(-kb)) - fmath.log(kb)
    km = k[mid]
    out[mid] = fmath.log(fmath.expm1(km) / km)
    return out


def _dlog_phi(k: F64) -> F64:
    """``d/dk log phi(k) = 1 / (1 - e^-k) - 1 / k`` (in ``[1/2, 1)``); a series below 1e-2
    (each element by its own branch, as in :func:`_log_phi`)."""
    k = np.asarray(k, dtype=np.float64)
    out = np.empty(k.shape)
    small = k < 1e-2
    ks = k[small]
    out[small] = 0.5 + ks / 12.0 - fmath.power(ks, 3.0) / 720.0
    closed = ~small
    kc = k[closed]
    out[closed] = 1.0 / (-fmath.expm1(-kc)) - 1.0 / kc
    return out


def _inv_log_phi(target: F64) -> F64:
    """Approximately solve ``log phi(k) = target >= 0`` for ``k >= 0`` (scan points only).

    Newton from ``2 target``, which lies above the root because ``log phi`` is convex with slope
    in ``[1/2, 1)``: the iterates decrease monotonically to the root; 6 steps leave a relative
    error far below what a scan point needs.
    """
    k = 2.0 * target
    for _ in range(6):
        k = np.maximum(k - (_log_phi(k) - target) / _dlog_phi(k), 0.0)
    return k
