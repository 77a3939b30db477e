"""The keyed draws' compiled backend against the pure-numpy one (issue 36, part 2).

Three parts (``--parts``, default all):

* ``draws``: ``KeyedStream`` calls on ``--devices`` devices (default 100,000), each variant one
  batch of ``--calls`` calls of every method the simulator uses (``raw``, ``uniforms`` with one
  and with two subs, ``standard_exponential``, ``standard_complex_normal``), with the backend
  ``compiled`` or ``numpy`` (``rng.set_backend``), plus ``numpy*``, numpy again: an A/A control
  whose ratio to ``numpy`` is the noise of a pair. Reported per variant and batch; the ratios
  numpy/compiled of the whole batch and of each method alone (medians of ``--reps`` rounds).
* ``load``: what the compiled backend costs once per process, in fresh interpreters: importing
  numba and loading the loops from numba's cache (``rng.backend()`` with ``compiled`` asked), and
  compiling them (the same with ``NUMBA_CACHE_DIR`` an empty temporary folder).
* ``run``: the network-only run of ``network_throughput.py`` (the paper's MNIST network,
  closed-form kernel, full trace written) at ``--devices`` x ``--slots`` (default 100,000 x 20,
  frames of 20) for each scheme of ``--schemes`` and trace level of ``--levels``, with the keyed
  words on each backend and the A/A ``numpy*``; the compiled loops are loaded before the clock
  (the ``load`` part gives that cost). Timed from ``execute`` to its return.

Every part interleaves its variants (order rotating per round, ``_common.interleaved``) and
prints the ratios of medians and the per-round ratios. Nothing is asserted.

    python benchmarks/keyed_draws.py --parts draws load
    python benchmarks/keyed_draws.py --parts run --schemes fixed_power --levels events
    python benchmarks/keyed_draws.py --quick
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common
import numpy as np

from wflsim.sim import rng
from wflsim.sim.rng import Streams

PACKAGES = ("numpy", "numba", "llvmlite", "simpy", "pyarrow")
BACKENDS = {"compiled": "compiled", "numpy": "numpy", "numpy*": "numpy"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=None,
        reps_help="rounds (draws 10, load 3, run 3)",
        warmup=1,
        seed=False,
        quick={"devices": 10_000, "reps": 2, "calls": 3},
    )
    p.add_argument("--parts", nargs="+", default=["draws", "load", "run"],
                   choices=["draws", "load", "run"])  # fmt: skip
    p.add_argument("--devices", type=int, default=100_000, help="devices (default 100,000)")
    p.add_argument("--slots", type=int, default=20, help="slots of a run (default 20)")
    p.add_argument("--calls", type=int, default=10, help="calls per method and batch (10)")
    p.add_argument("--schemes", nargs="+", default=["fixed_power", "two_timescale"])
    p.add_argument("--levels", nargs="+", default=["events", "device_slots"],
                   choices=["events", "device_slots"])  # fmt: skip
    args = p.parse_args(argv)
    return args


def _methods(n: int) -> dict[str, object]:
    k = Streams(0).keyed("fading")
    ids = np.arange(n)
    return {
        "raw": lambda t: k.raw(ids, t),
        "uniforms(0)": lambda t: k.uniforms(ids, t, 0, (0,)),
        "uniforms(0,1)": lambda t: k.uniforms(ids, t, 0, (0, 1)),
        "standard_exponential": lambda t: k.standard_exponential(ids, t),
        "standard_complex_normal": lambda t: k.standard_complex_normal(ids, t),
    }


def part_draws(args: argparse.Namespace) -> None:
    reps = args.reps or 10
    print(f"-- draws: {args.devices:,} devices, {args.calls} calls per method and batch")
    methods = _methods(args.devices)
    per: dict[str, dict[str, list[float]]] = {v: {m: [] for m in methods} for v in BACKENDS}

    def batch(variant: str) -> float:
        rng.set_backend(BACKENDS[variant])
        rng.backend()  # loads the compiled loops outside the clock
        total = 0.0
        for name, f in methods.items():
            t0 = time.perf_counter()
            for t in range(args.calls):
                f(t)  # type: ignore[operator]
            dt = time.perf_counter() - t0
            per[variant][name].append(dt / args.calls)
            total += dt
        return total

    times = _common.interleaved({v: (lambda v=v: batch(v)) for v in BACKENDS}, reps, args.warmup)
    for v in BACKENDS:
        print(f"  {v:9s} batch seconds: {_common.Stats(times[v]).fmt(unit=' s')}")
    print(f"  {_common.ratio_line('batch numpy/compiled', times['numpy'], times['compiled'], '-')}")
    print(
        f"  {_common.ratio_line('batch numpy*/numpy (A/A)', times['numpy*'], times['numpy'], '~1')}"
    )
    _common.headline("draws batch numpy/compiled", times["numpy"], times["compiled"])
    print("  per method (ms per call, medians; ratios of the recorded rounds):")
    for name in methods:
        c, a, b = (per[v][name][-reps:] for v in BACKENDS)
        line = _common.ratio_line(f"numpy/compiled {name}", a, c, "-")
        aa = np.median(np.array(b) / np.array(a))
        print(
            f"    {name:24s} compiled {np.median(c) * 1e3:7.3f}  numpy {np.median(a) * 1e3:7.3f}"
            f"  A/A {aa:.3f}   {line}"
        )
    print()


_LOAD = (
    "import time; t0 = time.perf_counter(); from wflsim.sim import rng; t1 = time.perf_counter();"
    " rng.set_backend('compiled'); rng.backend(); t2 = time.perf_counter();"
    " print(f'{t1 - t0} {t2 - t1}')"
)


def part_load(args: argparse.Namespace) -> None:
    reps = args.reps or 3
    print("-- load: fresh interpreters, `from wflsim.sim import rng` then rng.backend() compiled")
    env = {**os.environ, "PYTHONPATH": str(_common.REPO)}
    for label, cache in (("cached", None), ("compiling", "empty")):
        out = []
        for _ in range(reps):
            with tempfile.TemporaryDirectory() as tmp:
                e = env if cache is None else {**env, "NUMBA_CACHE_DIR": tmp}
                got = subprocess.run(
                    [sys.executable, "-c", _LOAD], env=e, capture_output=True, text=True, check=True
                )
                out.append([float(x) for x in got.stdout.split()])
        imp = _common.Stats([o[0] for o in out])
        load = _common.Stats([o[1] for o in out])
        print(f"  {label:9s} import rng: {imp.fmt(unit=' s')}")
        print(f"  {label:9s} numba + loops: {load.fmt(unit=' s')}")
    print()


def part_run(args: argparse.Namespace) -> None:
    import network_throughput as nt

    reps = args.reps or 3
    spf = min(20, args.slots)
    nt_args = nt.parse_args(
        ["--devices", str(args.devices), "--slots", str(args.slots), "--slots-per-frame", str(spf)]
    )
    ds = args.devices * args.slots
    print(f"-- run: network only, {args.devices:,} devices x {args.slots} slots, closed form")
    root = Path(tempfile.mkdtemp(prefix="wflsim-keyed-"))
    count = {"i": 0}
    try:
        for scheme in args.schemes:
            for level in args.levels:
                print(f"  scheme {scheme}, trace level {level}")

                def one(
                    variant: str, scheme: str = scheme, level: str = level, count: dict = count
                ) -> float:
                    rng.set_backend(BACKENDS[variant])
                    rng.backend()
                    count["i"] += 1
                    dt, out = nt.run_wflsim(
                        nt_args, scheme, root, f"{variant}-{count['i']}", "closed_form", level
                    )
                    shutil.rmtree(out)
                    return dt

                runs = {v: (lambda v=v: one(v)) for v in BACKENDS}
                times = _common.interleaved(runs, reps, args.warmup)
                for v in BACKENDS:
                    s = _common.Stats(times[v])
                    print(
                        f"    {v:9s} seconds: {s.fmt(unit=' s')}  ({ds / s.median:,.0f} device-slots/s)"
                    )
                for label, a, b in (
                    ("numpy/compiled", "numpy", "compiled"),
                    ("numpy*/numpy (A/A)", "numpy*", "numpy"),
                ):
                    print(f"    {_common.ratio_line(label, times[a], times[b], '-')}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        rng.set_backend(None)
    print()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.print_header("keyed draws: compiled vs numpy backend", PACKAGES)
    for part in args.parts:
        {"draws": part_draws, "load": part_load, "run": part_run}[part](args)


if __name__ == "__main__":
    main()
