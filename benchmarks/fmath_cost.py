"""What the C library's transcendental functions (``wflsim.sim.fmath``) cost against numpy's on
the same arrays: ``log10``, ``power(10, x)``, ``exp`` and ``log1p`` of ``n`` elements, the
calls a slot makes per device (path loss, gains, rates, fading).

Variants, interleaved: ``numpy`` (the CPU's own kernels: SVML on AVX-512, the C library
elsewhere), ``fmath`` (the C library on every CPU through its numba ufuncs, the path of arrays of
more than 2,048 elements and of every array once 2,000,000 elements have gone element by element)
and ``fmath_python`` (the C library element by element through Python's math: the path of a
small run's arrays, which never loads numba).

    python benchmarks/fmath_cost.py                  # n = 30, 1,000, 2,048, 100,000
"""

from __future__ import annotations

import functools
import time

import _common
import numpy as np

from wflsim.sim import fmath


def work(lib: str, x: np.ndarray, calls: int) -> float:
    """``calls`` rounds of the four functions on ``x``; seconds."""
    fmath.use_compiled(False if lib == "fmath_python" else None)
    if lib == "fmath":  # the ufuncs loaded: every array of more than one element takes them
        fmath.log10(np.ones(fmath.SMALL + 1))
    log10 = np.log10 if lib == "numpy" else fmath.log10
    exp = np.exp if lib == "numpy" else fmath.exp
    log1p = np.log1p if lib == "numpy" else fmath.log1p
    power = np.power if lib == "numpy" else fmath.power
    t0 = time.perf_counter()
    for _ in range(calls):
        log10(x)
        power(10.0, -x)
        exp(-x)
        log1p(x)
    dt = time.perf_counter() - t0
    fmath.use_compiled(None)
    return dt


def main(argv: list[str] | None = None) -> None:
    p = _common.parser(
        __doc__,
        reps=5,
        warmup=1,
        seed=False,
        quick={"sizes": [1000], "elements": 200_000, "reps": 2},
    )
    p.add_argument("--sizes", type=int, nargs="+", default=[30, 1000, 2048, 100_000])
    p.add_argument("--elements", type=int, default=2_000_000, help="elements per variant and round")
    args = p.parse_args(argv)
    _common.print_header("fmath_cost: the C library's transcendental functions vs numpy's")
    fmath.log10(np.ones(fmath.SMALL + 1))  # load the compiled ufuncs (their cache) up front
    for n in args.sizes:
        x = np.random.default_rng(0).uniform(0.01, 3.0, n)
        calls = max(1, args.elements // (4 * n))
        times = _common.interleaved(
            {k: functools.partial(work, k, x, calls) for k in ("numpy", "fmath", "fmath_python")},
            args.reps,
            args.warmup,
        )
        per = {k: _common.Stats(v).median / (4 * calls * n) * 1e9 for k, v in times.items()}
        print(
            f"n = {n:,}: numpy {per['numpy']:.1f} ns, fmath {per['fmath']:.1f} ns, "
            f"fmath_python {per['fmath_python']:.1f} ns per element"
        )
        print(f"  {_common.ratio_line('fmath/numpy', times['fmath'], times['numpy'], 'report')}")
        line = _common.ratio_line(
            "fmath_python/numpy", times["fmath_python"], times["numpy"], "report"
        )
        print(f"  {line}")
        _common.headline(f"fmath/numpy, n = {n:,}", times["fmath"], times["numpy"])


if __name__ == "__main__":
    main()
