"""The vectorised asynchronous clock (issue 36, part 4): a network-only async run in closed
form against the same run on the event path and against the synchronous closed form.

Workload: the paper's MNIST scenario (``scenarios/paper/mnist_iid.toml``) network only
(``learning.enabled = false``, ``learning.num_params = 440812``), its scheme, a dedicated
uplink, one frame of ``--slots`` slots, ``--devices`` devices, the full ``events`` trace written
to a real run folder. Variants, each one ``wflsim run`` process (``python -m wflsim``), run
interleaved (``_common.interleaved``):

* ``sync``: ``[server] mode = "sync"`` on the closed-form kernel;
* ``async``: ``mode = "async"``, ``buffer_size`` ``--buffer`` (FedBuff), ``server_lr``
  ``--server-lr``, on ``run.kernel = "closed_form"`` (the vectorised clock);
* ``async_event`` (with ``--event-slots`` > 0): the same async run on ``run.kernel = "event"``
  (one clock event per device event), and ``async_short``, the closed form, both on
  ``--event-slots`` slots (the event path at the full size takes many minutes).

Per variant: the run's own wall time (``summary.wall_time_s`` of its manifest: frames, slots,
trace writing; start-up and preparation excluded), the whole process's, and its peak resident
memory (``ru_maxrss`` of the child). Printed ratios: async/sync (target <= 3) and
async_event/async_short (target >= 10), per round and of the medians. Nothing is asserted.

    python benchmarks/async_clock.py                     # 100,000 devices x 20 slots, 3 rounds
    python benchmarks/async_clock.py --devices 1000000 --slots 10 --event-slots 0 --reps 1
    python benchmarks/async_clock.py --quick             # 10,000 devices x 5 slots, 1 round
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import _common

SCENARIO = _common.REPO / "scenarios" / "paper" / "mnist_iid.toml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=3,
        seed=False,
        tmp_dir=True,
        quick={"devices": 10_000, "slots": 5, "event_slots": 2, "reps": 1},
    )
    p.add_argument("--devices", type=int, default=100_000)
    p.add_argument("--slots", type=int, default=20, help="slots of sync and async (one frame)")
    p.add_argument(
        "--event-slots", type=int, default=2, help="slots of async_event and async_short (0: skip)"
    )
    p.add_argument("--buffer", type=int, default=10, help="async buffer_size (default 10)")
    p.add_argument("--server-lr", type=float, default=1e-4)
    args = p.parse_args(argv)
    return args


def run_one(args: argparse.Namespace, out: Path, mode: str, kernel: str, slots: int) -> dict:
    """One ``wflsim run`` process: its run time, process time and peak memory."""
    server = ["--set", f'server.mode="{mode}"']
    if mode == "async":
        server += ["--set", f"server.buffer_size={args.buffer}"]
        server += ["--set", f"server.server_lr={args.server_lr}"]
    cmd = [
        sys.executable,
        "-W",
        "ignore",
        "-m",
        "wflsim",
        "run",
        str(SCENARIO),
        *("--set", f"network.num_devices={args.devices}"),
        *("--set", "run.frames=1", "--set", f"run.slots_per_frame={slots}"),
        *("--set", "learning.enabled=false", "--set", "learning.num_params=440812"),
        *("--set", f'run.kernel="{kernel}"', *server),
        *("--out", str(out), "--quiet", "--overwrite"),
    ]
    child = _common.run_child(cmd, out, f"{mode} {kernel} {slots} slots")
    return {
        "run_s": float(child["manifest"]["summary"]["wall_time_s"]),
        "process_s": child["process_s"],
        "peak_gb": child["peak_bytes"] / 2**30,
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.print_header(
        f"async clock: {args.devices:,} devices x {args.slots} slots (event path: "
        f"{args.event_slots} slots), network only, buffer {args.buffer}"
    )
    root = Path(tempfile.mkdtemp(prefix="async-clock-", dir=args.tmp_dir))
    peak: dict[str, list[float]] = {}
    process: dict[str, list[float]] = {}

    def variant(name: str, mode: str, kernel: str, slots: int) -> Any:
        def one() -> float:
            got = run_one(args, root / name, mode, kernel, slots)
            peak.setdefault(name, []).append(got["peak_gb"])
            process.setdefault(name, []).append(got["process_s"])
            return got["run_s"]

        return one

    variants = {
        "sync": variant("sync", "sync", "closed_form", args.slots),
        "async": variant("async", "async", "closed_form", args.slots),
    }
    if args.event_slots > 0:
        variants["async_short"] = variant("async_short", "async", "closed_form", args.event_slots)
        variants["async_event"] = variant("async_event", "async", "event", args.event_slots)
    runs = _common.interleaved(variants, args.reps, warmup=0)
    print()
    for name, walls in runs.items():
        print(f"  {name:12s} run {_common.Stats(walls).fmt(unit=' s')}")
        print(f"  {'':12s} process {_common.Stats(process[name]).fmt(unit=' s')}")
        print(f"  {'':12s} peak RSS {_common.Stats(peak[name]).fmt(unit=' GB')}")
    print()
    print(_common.ratio_line("async/sync (run)", runs["async"], runs["sync"], "<= 3"))
    _common.headline("async/sync (run)", runs["async"], runs["sync"], "<= 3")
    if args.event_slots > 0:
        line = _common.ratio_line(
            "async_event/async_short (run)", runs["async_event"], runs["async_short"], ">= 10"
        )
        print(line)


if __name__ == "__main__":
    main()
