"""The simulation side's transcendental functions (wflsim.sim.fmath): the C library's bits on
every CPU, by either path, close to numpy's, and no numpy transcendental ufunc left in sim/."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from wflsim.sim import fmath

UNARY = ("log", "log10", "log2", "log1p", "exp", "expm1", "sin", "cos")
SIM = Path(__file__).resolve().parent.parent / "sim"
EDGES = [0.0, -0.0, -1.0, 1.0, -2.5, math.inf, -math.inf, math.nan, 709.8, -745.2, 1e-320, 1e300]


def _inputs(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    parts = [
        rng.uniform(-5, 5, 3000),
        rng.uniform(-800, 800, 1500),
        10.0 ** rng.uniform(-300, 300, 500),
    ]
    return np.concatenate([*parts, np.array(EDGES)])


@pytest.fixture
def element_by_element():
    """Every array element by element for the test's duration."""
    fmath.use_compiled(False)
    yield
    fmath.use_compiled(None)


@pytest.mark.parametrize("name", UNARY)
def test_both_paths_give_the_same_bits(name: str) -> None:
    """A unary function gives the same bits through numba's ufunc and element by element."""
    x = _inputs(1)
    assert x.size > fmath.SMALL
    compiled = getattr(fmath, name)(x)
    fmath.use_compiled(False)
    try:
        scalar = getattr(fmath, name)(x)
    finally:
        fmath.use_compiled(None)
    assert np.array_equal(compiled, scalar, equal_nan=True)


def test_power_paths_give_the_same_bits(element_by_element: None) -> None:
    """pow gives the same bits element by element as through numba's ufunc, special values too."""
    rng = np.random.default_rng(2)
    base = np.concatenate(
        [rng.uniform(-3, 30, 3000), [0.0, -0.0, -2.0, -2.0, 0.0, 1e300, np.inf, np.nan]]
    )
    expo = np.concatenate(
        [rng.uniform(-40, 40, 3000), [-1.0, -1.0, 0.5, 3.0, -2.0, 3.0, -1.0, 0.0]]
    )
    scalar = fmath.power(base, expo)
    fmath.use_compiled(None)
    compiled = fmath.power(base, expo)
    assert np.array_equal(compiled, scalar, equal_nan=True)


@pytest.mark.parametrize("name", UNARY)
def test_close_to_numpy_with_its_special_values(name: str) -> None:
    """Each function is within 2 ulp of numpy's and has numpy's infinities and NaNs."""
    x = _inputs(3)
    ours = getattr(fmath, name)(x)
    with np.errstate(all="ignore"):
        ref = getattr(np, name)(x)
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    fin = np.isfinite(ref)
    assert np.array_equal(ours[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)])
    ulp = np.spacing(np.abs(ref[fin]))
    assert (np.abs(ours[fin] - ref[fin]) <= 2 * ulp).all()


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.floats(min_value=-1e3, max_value=1e3), st.sampled_from([math.inf, -math.inf, math.nan])
    ),
    st.floats(min_value=-50, max_value=50),
)
@example(x=-math.inf, y=0.5)
def test_power_matches_c_pow(x: float, y: float) -> None:
    """pow of one pair is C's pow (math.pow; numpy's where Python raises, as for a negative base
    and a fractional exponent), special values included (C gives pow(-inf, 0.5) = inf, where
    numpy's own power gives nan)."""
    try:
        ref = np.float64(math.pow(x, y))
    except (ValueError, OverflowError, ZeroDivisionError):
        with np.errstate(all="ignore"):
            ref = np.power(np.float64(x), np.float64(y))
    got = fmath.power(x, y)
    assert isinstance(got, np.float64)
    if math.isnan(ref):
        assert math.isnan(got)
    else:
        assert got == ref or abs(got - ref) <= 2 * np.spacing(abs(ref))


def test_a_scalar_gives_a_numpy_scalar() -> None:
    """A scalar argument gives a numpy float64, as numpy's ufuncs do; an array keeps its shape."""
    assert isinstance(fmath.log10(100.0), np.float64) and fmath.log10(100.0) == 2.0
    assert fmath.exp(np.zeros((2, 3))).shape == (2, 3)
    assert fmath.power(10.0, np.zeros((4, 1))).shape == (4, 1)


def test_no_warning_on_special_values() -> None:
    """log(0), exp(1000) and pow(0, -1) give numpy's special values without a warning."""
    import warnings

    big = np.zeros(fmath.SMALL + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fmath.log(0.0) == -math.inf and fmath.log(big)[0] == -math.inf
        assert fmath.exp(1000.0) == math.inf
        assert fmath.power(0.0, -1.0) == math.inf
        assert math.isnan(fmath.log(-1.0))


@pytest.mark.parametrize("order", [1, 2, 3, 7, 24, 40])
def test_gauss_legendre_integrates_polynomials_exactly(order: int) -> None:
    """n-point Gauss-Legendre integrates x^k over [-1, 1] exactly for k < 2n (to 1e-14)."""
    x, w = fmath.gauss_legendre(order)
    assert np.all(np.diff(x) > 0)
    for k in range(2 * order):
        exact = 0.0 if k % 2 else 2.0 / (k + 1)
        assert abs(float(np.sum(w * x**k)) - exact) <= 1e-14 * max(exact, 1.0)


def test_gauss_legendre_agrees_with_numpy() -> None:
    """The nodes and weights agree with numpy's leggauss (an eigenvalue method) to 1e-12."""
    x, w = fmath.gauss_legendre(24)
    ref_x, ref_w = np.polynomial.legendre.leggauss(24)
    np.testing.assert_allclose(x, ref_x, rtol=0, atol=1e-14)
    np.testing.assert_allclose(w, ref_w, rtol=1e-12)


_BANNED = re.compile(
    r"\bnp\.(log|log10|log2|log1p|exp|expm1|exp2|power|float_power|sin|cos|tan|sinh|cosh|tanh"
    r"|arcsin|arccos|arctan|arctan2|cbrt)\(|\bnp\.polynomial\.legendre\.leggauss\b|\bnp\.dot\("
)


def test_no_numpy_transcendental_in_the_simulation_side() -> None:
    """No module of sim/ calls numpy's float transcendental ufuncs (their bits depend on the CPU)."""
    offenders = []
    for path in sorted(SIM.rglob("*.py")):
        if path.name in ("fmath.py", "fmath_compiled.py"):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _BANNED.search(code):
                offenders.append(f"{path.relative_to(SIM.parent)}:{i}: {line.strip()}")
    assert not offenders, "use wflsim.sim.fmath instead:\n" + "\n".join(offenders)


def test_small_arrays_switch_to_the_compiled_path_after_enough_elements(monkeypatch) -> None:
    """Small arrays go element by element until SWITCH_ELEMENTS, then through the ufuncs, with the
    same bits on both sides of the switch."""
    monkeypatch.setattr(fmath, "SWITCH_ELEMENTS", 50)
    fmath.use_compiled(None)
    monkeypatch.setattr(fmath._compiled, "ufuncs", None)
    x = np.linspace(0.1, 3.0, 40)
    before = fmath.log10(x)
    assert fmath._compiled.ufuncs is None
    fmath.log10(x)
    after = fmath.log10(x)
    assert fmath._compiled.ufuncs is not None
    assert np.array_equal(before, after)
