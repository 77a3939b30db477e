"""Transcendental functions that give the same bits on every CPU: the C library's, not numpy's.

numpy computes ``log10``, ``exp``, ``power``, ``log1p``, ``sin`` and their kin in float64 with
code it picks for the CPU at import: Intel's SVML (or its own AVX-512 kernels) where the CPU has
AVX-512, the C library's ``libm`` elsewhere. The two differ in the last bits of some results
(both are within a few ulp of the true value), so a network-side trace computed on an AVX-512
machine differed from one computed on an AVX2 machine (the golden traces of ``tests/`` caught it:
docs/decisions.md, "The same bits on every CPU"). Every transcendental function the simulation
side applies to float64 arrays goes through this module instead, which calls the C library's
functions (glibc's ``log10``, ``exp``, ``pow``, ...) on every machine:

* element by element through Python's :mod:`math` (which calls libm), with the special values
  numpy gives (``log(0) = -inf``, ``exp(1000) = inf``, ``log(-1) = nan``, ...) instead of its
  exceptions, about 0.2 us an element;
* through numba ufuncs that call the same libm functions (compiled on first use and cached on
  disk), at numpy's speed: for arrays of more than :data:`SMALL` elements, and for every array
  once the process has gone :data:`SWITCH_ELEMENTS` elements element by element (about 0.4 s,
  what importing numba and loading the ufuncs costs), so that a run of a few devices never loads
  numba and a long one loses at most that time; where numba cannot be imported, element by
  element always (slower, the same bits).

``tests/test_fmath.py`` holds both paths to the same bits, and each function to numpy's within
a few ulp. Arithmetic (``+ - * /``), ``sqrt``, ``floor`` and comparisons are exact in IEEE 754
and stay numpy's; ``x ** 2`` too (numpy squares). Every function takes array-likes or scalars and
returns a float64 array (a numpy float64 for a scalar), like the numpy function it replaces; none
warns (numpy's ``divide by zero`` and ``invalid value`` warnings are not raised).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

F64 = NDArray[np.float64]

#: Arrays with more elements than this go through the compiled ufuncs (numba is imported then).
SMALL = 2048
#: After this many elements computed element by element, every array goes through the ufuncs.
SWITCH_ELEMENTS = 2_000_000

_INF = math.inf
_NAN = math.nan
_EPS = 2.0**-52


# ----------------------------------------------------------------------------- scalar libm
# Python's math module calls libm but raises where C returns a special value; these return it.


def _log(v: float) -> float:
    if v > 0.0:
        return math.log(v)
    return -_INF if v == 0.0 else _NAN


def _log10(v: float) -> float:
    if v > 0.0:
        return math.log10(v)
    return -_INF if v == 0.0 else _NAN


def _log2(v: float) -> float:
    if v > 0.0:
        return math.log2(v)
    return -_INF if v == 0.0 else _NAN


def _log1p(v: float) -> float:
    if v > -1.0:
        return math.log1p(v)
    return -_INF if v == -1.0 else _NAN


def _exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return _INF


def _expm1(v: float) -> float:
    try:
        return math.expm1(v)
    except OverflowError:
        return _INF


def _sin(v: float) -> float:
    return math.sin(v) if math.isfinite(v) else _NAN


def _cos(v: float) -> float:
    return math.cos(v) if math.isfinite(v) else _NAN


def _pow(x: float, y: float) -> float:
    try:
        return math.pow(x, y)
    except OverflowError:
        # |result| too large: the sign of x ** y for a negative x and an odd integer y
        neg = x < 0.0 and y == math.floor(y) and math.fmod(y, 2.0) != 0.0
        return -_INF if neg else _INF
    except ValueError:
        if x == 0.0 and y < 0.0:  # C: pole error, +-inf
            odd = y == math.floor(y) and math.fmod(y, 2.0) != 0.0
            return math.copysign(_INF, x) if odd else _INF
        return _NAN  # a negative base to a non-integer power


_SCALAR: dict[str, Callable[..., float]] = {
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

# ----------------------------------------------------------------------------- compiled ufuncs


class _Compiled:
    """The numba ufuncs, built on first need (None until then; ``failed``: numba is missing or
    switched off), and the elements computed element by element so far."""

    ufuncs: dict[str, Any] | None = None
    failed = False
    elements = 0


_compiled = _Compiled()


def _load_compiled() -> dict[str, Any] | None:
    if _compiled.ufuncs is None and not _compiled.failed:
        try:
            from wflsim.sim import fmath_compiled

            _compiled.ufuncs = fmath_compiled.UFUNCS
        except Exception:  # no numba (or it cannot compile here): element by element
            _compiled.failed = True
    return _compiled.ufuncs


def use_compiled(enabled: bool | None) -> None:
    """``False``: element by element always; ``True`` or ``None``: the module's rule (the
    compiled ufuncs where numba can be imported); the count of elements starts again (tests)."""
    _compiled.failed = enabled is False
    _compiled.elements = 0
    if enabled is False:
        _compiled.ufuncs = None


def uses_compiled(size: int) -> bool:
    """Whether an array of ``size`` elements goes through the compiled ufuncs (loading them if
    it does): what other compiled loops of the same functions (the controller's cost) follow, so
    that a small run and a process without numba never load numba."""
    if _compiled.failed:
        return False
    if size > SMALL or (_compiled.ufuncs is not None and size > 1):
        return _load_compiled() is not None
    if _compiled.elements > SWITCH_ELEMENTS:
        return _load_compiled() is not None
    return False


def _ufunc(name: str, size: int) -> Any:
    """The compiled ufunc for an array of ``size`` elements, or None: go element by element."""
    if uses_compiled(size):
        return _compiled.ufuncs[name]  # type: ignore[index]
    if not _compiled.failed:
        _compiled.elements += size
    return None


# ----------------------------------------------------------------------------- the functions


def _shaped(out: F64, shape: tuple[int, ...]) -> F64:
    """``out`` in ``shape``; a numpy float64 scalar for a scalar input, as a ufunc gives."""
    if not shape:
        return out.reshape(())[()]
    return out.reshape(shape)


def _unary(name: str, x: ArrayLike) -> F64:
    a = np.asarray(x, dtype=np.float64)
    ufunc = _ufunc(name, a.size)
    if ufunc is not None:
        with np.errstate(all="ignore"):
            return _shaped(np.asarray(ufunc(a), dtype=np.float64), a.shape)
    f = _SCALAR[name]
    return _shaped(np.array([f(v) for v in a.ravel().tolist()], dtype=np.float64), a.shape)


def _binary(name: str, x: ArrayLike, y: ArrayLike) -> F64:
    a, b = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    ufunc = _ufunc(name, a.size)
    if ufunc is not None:
        with np.errstate(all="ignore"):
            return _shaped(np.asarray(ufunc(a, b), dtype=np.float64), a.shape)
    f = _SCALAR[name]
    out = [f(u, v) for u, v in zip(a.ravel().tolist(), b.ravel().tolist(), strict=True)]
    return _shaped(np.array(out, dtype=np.float64), a.shape)


def log(x: ArrayLike) -> F64:
    """The natural logarithm, elementwise (libm's ``log``)."""
    return _unary("log", x)


def log10(x: ArrayLike) -> F64:
    """The base-10 logarithm, elementwise (libm's ``log10``)."""
    return _unary("log10", x)


def log2(x: ArrayLike) -> F64:
    """The base-2 logarithm, elementwise (libm's ``log2``)."""
    return _unary("log2", x)


def log1p(x: ArrayLike) -> F64:
    """``log(1 + x)``, elementwise (libm's ``log1p``)."""
    return _unary("log1p", x)


def exp(x: ArrayLike) -> F64:
    """``e ** x``, elementwise (libm's ``exp``)."""
    return _unary("exp", x)


def expm1(x: ArrayLike) -> F64:
    """``e ** x - 1``, elementwise (libm's ``expm1``)."""
    return _unary("expm1", x)


def sin(x: ArrayLike) -> F64:
    """The sine of radians, elementwise (libm's ``sin``)."""
    return _unary("sin", x)


def cos(x: ArrayLike) -> F64:
    """The cosine of radians, elementwise (libm's ``cos``)."""
    return _unary("cos", x)


def power(x: ArrayLike, y: ArrayLike) -> F64:
    """``x ** y``, elementwise with broadcasting (libm's ``pow``)."""
    return _binary("power", x, y)


def db_to_linear(value_db: ArrayLike) -> F64:
    """``10 ** (x / 10)``: a power ratio in dB to a linear one."""
    return power(10.0, np.asarray(value_db, dtype=np.float64) / 10.0)


def linear_to_db(value: ArrayLike) -> F64:
    """``10 log10(x)``: a linear power ratio to dB (``-inf`` for 0)."""
    return 10.0 * log10(value)


def gauss_legendre(order: int) -> tuple[F64, F64]:
    """The nodes and weights of ``order``-point Gauss-Legendre quadrature on ``[-1, 1]``,
    ascending: Newton's iteration on the Legendre polynomial from the usual initial guesses, in
    scalar float64 arithmetic (numpy's ``leggauss`` solves an eigenproblem with LAPACK, whose
    kernels, picked per CPU, differ in the last bits). Agrees with ``leggauss`` to a few ulp."""
    if order < 1:
        raise ValueError(f"order must be >= 1, got {order}")
    nodes = [0.0] * order
    weights = [0.0] * order
    for i in range((order + 1) // 2):
        x = math.cos(math.pi * (i + 0.75) / (order + 0.5))
        dp = 1.0
        for _ in range(100):
            p0, p1 = 1.0, x  # P_0, P_1; the recurrence up to P_order
            for j in range(2, order + 1):
                p0, p1 = p1, ((2 * j - 1) * x * p1 - (j - 1) * p0) / j
            dp = order * (x * p1 - p0) / (x * x - 1.0)
            step = p1 / dp
            x -= step
            if abs(step) <= 4.0 * _EPS * abs(x):
                break
        p0, p1 = 1.0, x
        for j in range(2, order + 1):
            p0, p1 = p1, ((2 * j - 1) * x * p1 - (j - 1) * p0) / j
        dp = order * (x * p1 - p0) / (x * x - 1.0)
        w = 2.0 / ((1.0 - x * x) * dp * dp)
        nodes[i], nodes[order - 1 - i] = -x, x
        weights[i] = weights[order - 1 - i] = w
    if order % 2:
        nodes[order // 2] = 0.0
    return np.array(nodes), np.array(weights)


__all__ = [
    "SMALL",
    "SWITCH_ELEMENTS",
    "gauss_legendre",
    "cos",
    "db_to_linear",
    "exp",
    "expm1",
    "linear_to_db",
    "log",
    "log10",
    "log1p",
    "log2",
    "power",
    "sin",
    "use_compiled",
]
