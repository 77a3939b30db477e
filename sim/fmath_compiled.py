"""The compiled ufuncs of :mod:`wflsim.sim.fmath`: numba ufuncs that call the C library's
functions, the same bits as Python's :mod:`math` (and as numpy's own loops on CPUs without
AVX-512), for arrays too large to go element by element.

:mod:`wflsim.sim.fmath` imports this module only for an array of more than
:data:`wflsim.sim.fmath.SMALL` elements. The ufuncs are compiled on first use and cached on
disk (``cache=True``). ``fastmath`` is off (numba's default): no contraction into fused
multiply-adds and no vector library, so each element is one call of the C library's function.
"""

from __future__ import annotations

import math
from typing import Any

import numba

_SIG1 = ["float64(float64)"]
_SIG2 = ["float64(float64, float64)"]


@numba.vectorize(_SIG1, cache=True)
def _log(v: float) -> float:
    return math.log(v)


@numba.vectorize(_SIG1, cache=True)
def _log10(v: float) -> float:
    return math.log10(v)


@numba.vectorize(_SIG1, cache=True)
def _log2(v: float) -> float:
    return math.log2(v)


@numba.vectorize(_SIG1, cache=True)
def _log1p(v: float) -> float:
    return math.log1p(v)


@numba.vectorize(_SIG1, cache=True)
def _exp(v: float) -> float:
    return math.exp(v)


@numba.vectorize(_SIG1, cache=True)
def _expm1(v: float) -> float:
    return math.expm1(v)


@numba.vectorize(_SIG1, cache=True)
def _sin(v: float) -> float:
    return math.sin(v)


@numba.vectorize(_SIG1, cache=True)
def _cos(v: float) -> float:
    return math.cos(v)


@numba.vectorize(_SIG2, cache=True)
def _pow(x: float, y: float) -> float:
    return math.pow(x, y)


#: The ufuncs by :mod:`wflsim.sim.fmath`'s names.
UFUNCS: dict[str, Any] = {
    "log": _log,
    "log10": _log10,
    "log2": _log2,
    "log1p": _log1p,
    "exp": _exp,
    "expm1": _expm1,
    "sin": _sin,
    "cos": _cos,
    "power": _pow,
}
