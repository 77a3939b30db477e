"""The controller's expected cost ``Z`` and its slope in compiled code (numba), bit for bit those
of :func:`wflsim.sim.schemes.controller._z_and_dz`'s numpy expressions.

:mod:`wflsim.sim.schemes.controller` uses these loops where :mod:`wflsim.sim.fmath` sends an
array of the same size through its compiled ufuncs (numba imported and loaded), so a small run
and a process without numba stay on numpy. numpy evaluates every expression of ``Z`` over whole
arrays, both pieces' formulas and all the temporaries included (about 40 arrays per call, the
per-frame start scan's ``(46, pieces)`` grid the largest); these loops evaluate each element's
own piece only, in one pass, with the same operations in the same order: ``+ - * /`` are exact
in IEEE 754, ``fastmath`` is off (no fused multiply-adds, no vector library), and ``exp`` and
``expm1`` are the C library's, as :mod:`wflsim.sim.fmath_compiled`'s ufuncs call them. ``E1``
stays scipy's (:func:`scipy.special.exp1`, applied by the caller between the two passes), so
the values are the same whichever path computed them (``tests/test_controller.py`` compares
both bit for bit).

The functions are compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numpy.typing import NDArray

#: The thresholds of :mod:`wflsim.sim.schemes.controller` (``_K_MAX``, ``_X_MAX``, ``_X_MIN``);
#: the tests check that both modules hold the same values.
K_MAX = 700.0
X_MAX = 700.0
X_MIN = 1e-300


# One signature per loop, inputs read-only in any layout (a writable array converts to it), so
# that numba compiles each loop once (about 1-2 s, then cached) rather than once per mix of
# read-only and writable inputs (ControllerParams's fields are read-only, derived ones not).
_IN2 = types.Array(types.float64, 2, "A", readonly=True)
_IN1 = types.Array(types.float64, 1, "A", readonly=True)
_IN1B = types.Array(types.boolean, 1, "A", readonly=True)
_OUT2 = types.Array(types.float64, 2, "C")
_OUT2B = types.Array(types.boolean, 2, "C")


@numba.njit(cache=True, nogil=True)
def _unfrozen(g: float) -> float:
    """``u = clip(1 - gamma, 0, 1)`` (NaN stays NaN, as ``np.clip`` gives)."""
    u = 1.0 - g
    if u < 0.0:
        return 0.0
    if u > 1.0:
        return 1.0
    return u


@numba.njit(
    types.void(_IN2, _IN1, _IN1, _IN1, _IN1, _IN1, _IN1, _IN1B, _OUT2, _OUT2, _OUT2B),
    cache=True,
    nogil=True,
)
def x_terms(
    gamma: NDArray[np.float64],
    deadline_s: NDArray[np.float64],
    theta_s: NDArray[np.float64],
    b_s: NDArray[np.float64],
    u_trunc: NDArray[np.float64],
    a_clip: NDArray[np.float64],
    x_unclip: NDArray[np.float64],
    participating: NDArray[np.bool_],
    xs_out: NDArray[np.float64],
    xps_out: NDArray[np.float64],
    live_out: NDArray[np.bool_],
) -> None:
    """First pass over ``gamma`` ``(G, m)`` (the per-piece constants ``(m,)``): ``x = h_min / H``
    clipped to ``[X_MIN, X_MAX]`` (1 where the cost is not live), ``dx/du`` (0 there) and
    whether the cost is live, into the ``(G, m)`` outputs."""
    rows, m = gamma.shape
    for i in range(rows):
        for j in range(m):
            u = _unfrozen(gamma[i, j])
            dt = deadline_s[j] - theta_s[j] * u
            dt_ok = dt > 0.0
            dts = dt if dt_ok else 1.0
            k = b_s[j] * u / dts
            k_ok = dt_ok and (k <= K_MAX)
            ks = k if k_ok else 0.0
            kp = b_s[j] * deadline_s[j] / (dts * dts)
            ek = math.exp(ks)
            em1 = math.expm1(ks)
            if u >= u_trunc[j]:
                x = a_clip[j] * em1
                xp = a_clip[j] * ek * kp
            else:
                phi = em1 / ks if ks > 0.0 else 1.0
                if ks < 1e-2:  # phi' by its series (phi._dphi_series)
                    dphi = 0.5 + ks * (
                        1 / 3 + ks * (1 / 8 + ks * (1 / 30 + ks * (1 / 144 + ks / 840)))
                    )
                else:
                    dphi = (ks * ek - em1) / (ks * ks)
                x = x_unclip[j] * phi
                xp = x_unclip[j] * dphi * kp
            live = k_ok and participating[j] and (x <= X_MAX) and math.isfinite(xp)
            if live:
                xs_out[i, j] = x if x >= X_MIN else X_MIN
                xps_out[i, j] = xp
            else:
                xs_out[i, j] = 1.0
                xps_out[i, j] = 0.0
            live_out[i, j] = live


@numba.njit(
    types.void(
        _IN2, _IN1, _IN1, _IN1, _IN1, _IN1, _IN1, _IN2, _IN2,
        types.Array(types.boolean, 2, "A", readonly=True), _IN2, _OUT2, _OUT2,
    ),
    cache=True,
    nogil=True,
)  # fmt: skip
def cost_terms(
    gamma: NDArray[np.float64],
    deadline_s: NDArray[np.float64],
    theta_s: NDArray[np.float64],
    u_trunc: NDArray[np.float64],
    queue_j: NDArray[np.float64],
    peak_power_w: NDArray[np.float64],
    net_value: NDArray[np.float64],
    xs: NDArray[np.float64],
    xps: NDArray[np.float64],
    live: NDArray[np.bool_],
    e1: NDArray[np.float64],
    z_out: NDArray[np.float64],
    dz_out: NDArray[np.float64],
) -> None:
    """Second pass: ``Z`` and ``dZ/dgamma`` (0 where not live) from the first pass's ``x``,
    ``dx/du`` and ``E1(x)``, into the ``(G, m)`` outputs."""
    rows, m = gamma.shape
    for i in range(rows):
        for j in range(m):
            if not live[i, j]:
                z_out[i, j] = 0.0
                dz_out[i, j] = 0.0
                continue
            u = _unfrozen(gamma[i, j])
            i_val = net_value[j]
            qp = queue_j[j] * peak_power_w[j]
            if u >= u_trunc[j]:
                c = qp * (deadline_s[j] - theta_s[j] * u)
                cp = -qp * theta_s[j]
            else:
                c = i_val * u
                cp = i_val
            x = xs[i, j]
            xp = xps[i, j]
            e = e1[i, j]
            ex = math.exp(-x)
            xe1 = x * e
            z_out[i, j] = -i_val * u * ex + c * xe1
            dz_out[i, j] = -(-i_val * ex + i_val * u * ex * xp + cp * xe1 + c * (e - ex) * xp)
