"""Peak memory of a 30-device CIFAR-10 MobileNetV2 learner with freezing active.

Workload (defaults = the paper's CIFAR-10 setting): ``--devices`` 30 devices x ``--batch`` 512
samples per slot, ``build_model("mobilenet_v2", "cifar10")`` (502,538 parameters + BatchNorm
buffers), CPU, synthetic CIFAR-shaped data as large as the real set (50,000 x 3 x 32 x 32
training and 10,000 test images, uniform random pixels, uniform labels), stored as the learner
stores the real set (``--storage uint8``: ``wflsim.models.data.CompactImages``, 184 MB, normalised
per batch; ``--storage float32``: the whole set normalised up front, 737 MB), IID shards. Each
configuration runs in a FRESH subprocess that does:

1. build data, model and ``TorchLearner`` (``vmap_chunk_samples = --chunk``);
2. frame 0 (nothing frozen): ``--slots`` x (``compute(all)`` + ``apply(all)``);
3. the frame boundary: ``evaluate()`` (as the engine does every 20 slots), ``end_frame(0)``,
   ``begin_frame(1, frozen_count = rint(gamma D))`` with ``gamma = --gamma`` (every device freezes 30 % of its parameters, so each
   has its own parameter copy and the ``vmap`` runs over per-device parameters);
4. frame 1: ``--slots`` x (``compute(all)`` + ``apply(all)``), ``end_frame(1)``.

Measured inside the child: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (the peak resident set
size) and ``VmHWM`` of ``/proc/self/status`` (the same peak, per address space; the two agree
unless the parent was larger than the child, which it never is here: the parent imports neither
torch nor the data). A ``baseline`` child stops after step 1 (data + model + learner, no
gradient), to show how much of the peak is the data. The configurations and repetitions are
interleaved. Target: peak < 4 GB (GB = 1e9 bytes) for the default configuration.

    python benchmarks/peak_memory_cifar.py                     # full size: 30 x 512, chunk auto (512 on CPU)
    python benchmarks/peak_memory_cifar.py --chunk auto 8192 none   # compare chunk sizes
    python benchmarks/peak_memory_cifar.py --quick             # smoke test: 4 x 16, 5,000 samples
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _common

GB = 1e9


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=2,
        threads=True,
        quick={
            "devices": 4,
            "batch": 16,
            "slots": 1,
            "reps": 1,
            "train_samples": 5000,
            "test_samples": 1000,
        },
    )
    p.add_argument("--devices", type=int, default=30, help="devices (default 30)")
    p.add_argument(
        "--batch", type=int, default=512, help="samples per device and slot (default 512)"
    )
    p.add_argument(
        "--chunk",
        nargs="+",
        default=["auto"],
        help="vmap_chunk_samples value(s), one configuration each; 'auto' = the learner's default, 'none' = no bound (default auto)",
    )
    p.add_argument(
        "--slots", type=int, default=2, help="slots in each of the two frames (default 2)"
    )
    p.add_argument(
        "--gamma", type=float, default=0.3, help="freezing fraction in frame 1 (default 0.3)"
    )
    p.add_argument(
        "--train-samples", type=int, default=50_000, help="training set size (default 50,000)"
    )
    p.add_argument(
        "--test-samples", type=int, default=10_000, help="test set size (default 10,000)"
    )
    p.add_argument(
        "--storage",
        choices=["uint8", "float32"],
        default="uint8",
        help="image storage: uint8 pixels normalised per batch (what the learner loads, default) "
        "or the whole set normalised to float32 (what wflsim did before)",
    )
    p.add_argument("--no-baseline", action="store_true", help="skip the no-gradient baseline child")
    p.add_argument("--child", choices=["baseline", "run"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    return args


# ---------------------------------------------------------------------------- child


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return -1


def child(args: argparse.Namespace) -> None:
    import numpy as np
    import torch

    from wflsim.models.data import partition
    from wflsim.models.nets import build_model

    _common.set_threads(args.threads)
    phases: list[dict] = []
    t_start = time.perf_counter()

    def mark(name: str) -> None:
        phases.append(
            {
                "phase": name,
                "rss_gb": _status_kb("VmRSS") * 1024 / GB,
                "hwm_gb": _status_kb("VmHWM") * 1024 / GB,
                "t_s": time.perf_counter() - t_start,
            }
        )

    mark("start (torch imported)")
    c0 = args.chunk[0].lower()
    chunk = None if c0 == "none" else ("auto" if c0 == "auto" else int(c0))
    g = torch.Generator().manual_seed(args.seed)
    from wflsim.models.data import _CIFAR_MEAN, _CIFAR_STD, CompactImages

    def images(m: int) -> CompactImages | torch.Tensor:
        raw = torch.randint(0, 256, (m, 3, 32, 32), dtype=torch.uint8, generator=g)
        x = CompactImages(
            raw,
            torch.tensor(_CIFAR_MEAN).view(1, 3, 1, 1),
            torch.tensor(_CIFAR_STD).view(1, 3, 1, 1),
        )
        return x if args.storage == "uint8" else x.materialise()

    x_tr = images(args.train_samples)
    y_tr = torch.randint(0, 10, (args.train_samples,), generator=g)
    x_te = images(args.test_samples)
    y_te = torch.randint(0, 10, (args.test_samples,), generator=g)
    n, b = args.devices, args.batch
    parts = partition(y_tr.numpy(), n, "iid", 1.0, np.random.default_rng(args.seed))
    torch.manual_seed(args.seed)
    learner = _common.torch_learner(
        build_model("mobilenet_v2", "cifar10"),
        (x_tr, y_tr, x_te, y_te),
        parts,
        b,
        0.05,
        lr_schedule="half_life",
        total_slots=400,
        sampling_rngs=[np.random.default_rng([args.seed, i]) for i in range(n)],
        vmap_chunk_samples=chunk,
    )
    mark("data + model + learner built")
    ids = np.arange(n, dtype=np.int64)
    frozen = 0.0
    if args.child == "run":
        t = 0
        learner.begin_frame(0, _common.nothing_frozen(n))
        for _ in range(args.slots):
            learner.compute(t, ids)
            learner.apply(t, ids)
            t += 1
        mark("frame 0 slots (no freezing)")
        learner.evaluate()
        learner.end_frame(0)
        learner.begin_frame(1, _common.frozen_counts(learner, n, args.gamma))
        frozen = float(learner.rule.frozen_fraction().mean())
        mark("frame boundary (evaluate, end_frame, begin_frame gamma)")
        for _ in range(args.slots):
            learner.compute(t, ids)
            learner.apply(t, ids)
            t += 1
        learner.end_frame(1)
        mark("frame 1 slots (freezing active)")
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    out = {
        "maxrss_gb": ru * 1024 / GB,
        "hwm_gb": _status_kb("VmHWM") * 1024 / GB,
        "frozen_fraction": frozen,
        "num_params": learner.num_params,
        "phases": phases,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "wall_s": time.perf_counter() - t_start,
    }
    print("RESULT " + json.dumps(out), flush=True)


# ---------------------------------------------------------------------------- parent


def child_cmd(args: argparse.Namespace, kind: str, chunk: str) -> list[str]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        kind,
        "--devices",
        str(args.devices),
        "--batch",
        str(args.batch),
        "--chunk",
        chunk,
        "--slots",
        str(args.slots),
        "--gamma",
        str(args.gamma),
        "--train-samples",
        str(args.train_samples),
        "--test-samples",
        str(args.test_samples),
        "--seed",
        str(args.seed),
        "--storage",
        args.storage,
    ]
    if args.threads is not None:
        cmd += ["--threads", str(args.threads)]
    return cmd


def run_child(cmd: list[str]) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
    raise RuntimeError(f"child failed (exit {proc.returncode}): {' '.join(cmd)}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        child(args)
        return
    _common.print_header(
        "peak_memory_cifar: MobileNetV2 learner, 30 devices, freezing active",
        packages=("torch", "torchvision", "numpy"),
    )
    n, b = args.devices, args.batch
    x_gb = (
        (args.train_samples + args.test_samples)
        * 3
        * 32
        * 32
        * (1 if args.storage == "uint8" else 4)
        / GB
    )
    print(
        f"workload: {n} devices x {b} samples, mobilenet_v2 (cifar10), synthetic data "
        f"{args.train_samples:,} + {args.test_samples:,} x 3 x 32 x 32 {args.storage} ({x_gb:.2f} GB); "
        f"{args.slots} slot(s) in frame 0, boundary, {args.slots} slot(s) in frame 1 "
        f"(gamma {args.gamma})"
    )
    configs = [("run", c) for c in args.chunk]
    if not args.no_baseline:
        configs.append(("baseline", args.chunk[0]))
    print(
        f"configurations: {configs}; {args.reps} repetition(s), interleaved; one fresh child each"
    )
    print(f"child command (first): {' '.join(child_cmd(args, *configs[0]))}\n")

    results: dict[tuple[str, str], list[dict]] = {c: [] for c in configs}
    for r in range(args.reps):
        for cfg in configs:
            res = run_child(child_cmd(args, *cfg))
            results[cfg].append(res)
            print(
                f"  rep {r + 1}/{args.reps} {cfg[0]:8s} chunk {cfg[1]:>6s}: peak "
                f"{res['maxrss_gb']:.3f} GB (VmHWM {res['hwm_gb']:.3f} GB), "
                f"child wall {res['wall_s']:.1f} s",
                flush=True,
            )
    first = next(iter(results.values()))[0]
    print(f"\nchild environment: torch {first['torch']}, {first['threads']} intra-op threads")
    print("peak resident set size (ru_maxrss, GB = 1e9 bytes):")
    for cfg, rs in results.items():
        peaks = [x["maxrss_gb"] for x in rs]
        med = statistics.median(peaks)
        target = "  target < 4 GB" if cfg[0] == "run" else ""
        print(
            f"  {cfg[0]:8s} chunk {cfg[1]:>6s}: median {med:.3f} GB  [min {min(peaks):.3f}, "
            f"max {max(peaks):.3f}]  (n={len(peaks)}){target}"
        )
        if cfg[0] == "run":
            print(f"    frozen fraction in frame 1: {rs[-1]['frozen_fraction']:.3f}")
    print("\nphases of the last repetition (current RSS / high-water mark so far, GB):")
    for cfg, rs in results.items():
        print(f"  {cfg[0]} chunk {cfg[1]}:")
        for ph in rs[-1]["phases"]:
            print(
                f"    {ph['phase']:58s} rss {ph['rss_gb']:.3f}  hwm {ph['hwm_gb']:.3f}  "
                f"t {ph['t_s']:.1f} s"
            )
    main_cfg = ("run", args.chunk[0])
    _common.headline(
        f"peak RSS, chunk {args.chunk[0]}",
        [x["maxrss_gb"] for x in results[main_cfg]],
        target="< 4 GB",
        unit=" GB",
    )
    base = results.get(("baseline", args.chunk[0]))
    if base:
        bmed = statistics.median(x["maxrss_gb"] for x in base)
        for cfg, rs in results.items():
            if cfg[0] == "run":
                med = statistics.median(x["maxrss_gb"] for x in rs)
                print(
                    f"\npeak over baseline (what training adds), chunk {cfg[1]}: "
                    f"{med - bmed:.3f} GB; run/baseline = {med / bmed:.2f}"
                )
    print(
        f"\nparent process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB:.3f} GB"
    )
    if os.environ.get("OMP_NUM_THREADS"):
        print(f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")


if __name__ == "__main__":
    main()
