"""Where the trace writer's time goes, and what hashing a part costs with each algorithm.

* ``--part hash``: seconds to hash ``--mb`` MB (default 154, the part of a 100,000 x 20
  ``device_slots`` run) of seeded random bytes with SHA-256 and BLAKE2b (``hashlib``) and BLAKE3
  (the ``blake3`` package, one thread), interleaved, ``--reps`` rounds after a warm-up.
* ``--part run``: a closed-form network-only run (``scenarios/paper/mnist_iid.toml`` scaled to
  ``--devices`` x ``--slots``, as ``benchmarks/network_limit.py`` builds it) into a run folder,
  ``--reps`` rounds after a warm-up, with the writer's steps timed (wall seconds summed over the
  run, from ``time.perf_counter`` around each call): the rows turned into Arrow tables
  (``to_table``, simulation's thread), the row groups encoded (``encode``, writer thread), the
  part completed (``finish``: footer, fsync, hash's end, rename), the manifest written, and the
  simulation's thread waiting for the writer (``wait``: a slot's or frame's previous write, or
  a shard's backlog, with the hand-over of a frame in shards: ``encode`` then sums the shards'
  encoders);
  with the run's wall and process CPU seconds and the part's size.

Nothing is asserted.

    python benchmarks/trace_writer.py --part hash
    python benchmarks/trace_writer.py --part run --devices 50000 --level device_slots
    python benchmarks/trace_writer.py --quick          # smoke test: 16 MB, 2,000 devices
"""

from __future__ import annotations

import collections
import hashlib
import resource
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common
import blake3
import numpy as np
from _common import headline, print_header


def hash_part(mb: int, reps: int) -> None:
    """Seconds per algorithm to hash ``mb`` MB, interleaved."""
    data = np.random.default_rng(0).bytes(mb * 10**6)
    algos: dict[str, Callable[[bytes], str]] = {
        "sha256": lambda b: hashlib.sha256(b).hexdigest(),
        "blake2b": lambda b: hashlib.blake2b(b).hexdigest(),
        "blake3": lambda b: blake3.blake3(b, max_threads=1).hexdigest(),
    }
    times: dict[str, list[float]] = {k: [] for k in algos}
    for r in range(reps + 1):
        for name, f in algos.items():
            t = time.perf_counter()
            f(data)
            if r:  # round 0 is the warm-up
                times[name].append(time.perf_counter() - t)
    print(f"\n== hashing {mb} MB, {reps} rounds")
    for name, v in times.items():
        print(
            f"  {name:8s} median {statistics.median(v):.3f} s  ({', '.join(f'{s:.3f}' for s in v)})"
        )
    ref = statistics.median(times["blake3"])
    print(f"  sha256/blake3 {statistics.median(times['sha256']) / ref:.2f}x")
    headline(f"sha256/blake3 hashing {mb} MB", times["sha256"], times["blake3"])


def run_part(devices: int, slots: int, level: str, scheme: str, reps: int) -> None:
    """A run into a run folder with the writer's steps timed (module docstring)."""
    import network_limit as nl

    import wflsim
    from wflsim.app import recorder
    from wflsim.app.runner import execute
    from wflsim.sim import rng, trace
    from wflsim.sim.learner import NullLearner

    rng.set_backend("compiled")
    rng.backend()
    spent: dict[str, float] = collections.defaultdict(float)

    def timed(owner: Any, name: str, key: str) -> None:
        f = getattr(owner, name)

        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                spent[key] += time.perf_counter() - t

        setattr(owner, name, wrapper)

    timed(trace.TraceBuffer, "to_table", "to_table")
    timed(recorder.PartWriter, "write", "encode")
    timed(recorder.PartWriter, "finish", "finish")
    timed(recorder.RunRecorder, "write_manifest", "manifest")
    timed(recorder.RunRecorder, "_wait_slot", "wait")
    timed(recorder.RunRecorder, "_wait", "wait")
    if hasattr(recorder, "ShardedPart"):  # a frame in shards: the hand-over waits for a backlog
        timed(recorder.ShardedPart, "write", "wait")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prep = wflsim.prepare(nl.wflsim_table(devices, slots, scheme, level))
    print(f"\n== {scheme}, {devices} devices x {slots} slots, level {level}")
    for r in range(reps + 1):
        spent.clear()
        folder = Path(tempfile.mkdtemp(prefix="writer-"))
        try:
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                execute(prep, NullLearner(nl.NUM_PARAMS), folder / "run")
            wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
            size = sum(p.stat().st_size for p in (folder / "run" / "events").iterdir())
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
        steps = "  ".join(f"{k} {v:.3f}" for k, v in sorted(spent.items()))
        label = "warm-up" if r == 0 else f"rep {r}/{reps}"
        print(f"  {label}: wall {wall:.3f} s, cpu {cpu:.3f} s, {size / 1e6:.0f} MB;  {steps}")


def main(argv: list[str] | None = None) -> None:
    p = _common.parser(__doc__, reps=3, seed=False, quick={"mb": 16, "devices": 2000, "reps": 1})
    p.add_argument("--part", default="both", choices=["hash", "run", "both"])
    p.add_argument("--mb", type=int, default=154, help="MB hashed (default 154)")
    p.add_argument("--devices", type=int, default=50_000, help="devices (default 50,000)")
    p.add_argument("--slots", type=int, default=20, help="slots (default 20: one frame)")
    p.add_argument("--level", default="device_slots", choices=["events", "device_slots"])
    p.add_argument("--scheme", default="fixed_power")
    args = p.parse_args(argv)
    print_header("trace_writer", ("numpy", "pyarrow", "blake3"))
    if args.part in ("hash", "both"):
        hash_part(args.mb, args.reps)
    if args.part in ("run", "both"):
        run_part(args.devices, args.slots, args.level, args.scheme, args.reps)


if __name__ == "__main__":
    main()
