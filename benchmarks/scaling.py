"""How a network-only run scales with the number of devices: time and peak memory.

Workload: the paper's MNIST scenario (``scenarios/paper/mnist_iid.toml``) network only
(``learning.enabled = false``, ``learning.num_params = 440812``), ``--slots`` slots in one frame,
scaled to each of ``--devices`` (default 1,000, 10,000, 100,000 and 1,000,000), with the full
``events`` trace written to a real run folder. Each size runs as its own ``wflsim run`` process
(``python -m wflsim``), one after the other, on the slot kernel ``--kernel``.

Per size it prints:

* ``run s``: the run's own wall time from its manifest (``summary.wall_time_s``: frames, slots,
  trace writing; interpreter start-up, imports and scenario preparation excluded);
* ``process s``: the whole process, start-up and preparation (resolving every device, drawing
  positions) included;
* device-slots per second of both;
* the process's peak resident memory (``ru_maxrss`` of the finished child), and per device-slot.

Targets (issue 20): 1,000,000 devices x 10 slots in under 60 s and under 8 GB peak.
Nothing is asserted.

    python benchmarks/scaling.py                         # 1k, 10k, 100k, 1M devices x 10 slots
    python benchmarks/scaling.py --quick                 # 1k and 10k devices x 10 slots
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import _common

SCENARIO = _common.REPO / "scenarios" / "paper" / "mnist_iid.toml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(__doc__, reps=None, tmp_dir=True, quick={"devices": [1_000, 10_000]})
    p.add_argument(
        "--devices",
        type=int,
        nargs="+",
        default=[1_000, 10_000, 100_000, 1_000_000],
        help="device counts (default 1,000 10,000 100,000 1,000,000)",
    )
    p.add_argument("--slots", type=int, default=10, help="slots, one frame (default 10)")
    p.add_argument("--scheme", default="two_timescale", help="scheme (default two_timescale)")
    p.add_argument(
        "--kernel", default="closed_form", choices=["closed_form", "event"], help="slot kernel"
    )
    args = p.parse_args(argv)
    return args


def run_one(args: argparse.Namespace, n: int, out: Path) -> dict[str, float]:
    """One ``wflsim run`` process of ``n`` devices: its times and peak memory."""
    cmd = [
        sys.executable,
        "-m",
        "wflsim",
        "run",
        str(SCENARIO),
        *("--set", f"network.num_devices={n}"),
        *("--set", "run.frames=1", "--set", f"run.slots_per_frame={args.slots}"),
        *("--set", "learning.enabled=false", "--set", "learning.num_params=440812"),
        *("--set", f'scheme.name="{args.scheme}"', "--set", f'run.kernel="{args.kernel}"'),
        *("--seed", str(args.seed), "--out", str(out), "--quiet"),
    ]
    child = _common.run_child(cmd, out, f"{n:,} devices")
    summary = child["manifest"]["summary"]
    return {
        "run_s": float(summary["wall_time_s"]),
        "process_s": child["process_s"],
        "peak_bytes": child["peak_bytes"],
        "rows": float(summary["trace_rows"]),
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.print_header("scaling: network-only run time and peak memory vs devices")
    print(
        f"workload: {args.slots} slots (one frame), scheme {args.scheme}, kernel {args.kernel}, "
        f"full events trace; base scenario {SCENARIO}\n"
    )
    head = (
        f"{'devices':>10s} {'trace rows':>12s} {'run s':>8s} {'process s':>10s} "
        f"{'run dev-slots/s':>16s} {'process dev-slots/s':>20s} {'peak RSS':>10s} "
        f"{'bytes/dev-slot':>15s}"
    )
    print(head)
    with tempfile.TemporaryDirectory(prefix="wflsim-scaling-", dir=args.tmp_dir) as tmp:
        for n in args.devices:
            r = run_one(args, n, Path(tmp) / f"n{n}")
            ds = n * args.slots
            print(
                f"{n:>10,d} {r['rows']:>12,.0f} {r['run_s']:>8.2f} {r['process_s']:>10.2f} "
                f"{ds / r['run_s']:>16,.0f} {ds / r['process_s']:>20,.0f} "
                f"{r['peak_bytes'] / 2**30:>8.2f} GiB {r['peak_bytes'] / ds:>15,.0f}",
                flush=True,
            )
    target = "< 60 s" if n >= 1_000_000 else None
    _common.headline(
        f"run time at {n:,} devices x {args.slots} slots", [r["run_s"]], None, target, " s"
    )


if __name__ == "__main__":
    main()
