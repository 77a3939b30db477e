"""The cost of an update under asynchronous FL: wflsim's event clock, and training per update.

Two parts, each timed in one run, variants interleaved (``_common.interleaved``):

* ``clock`` -- the simulator's own cost per update, training excluded: the paper's MNIST
  network (``scenarios/paper/mnist_iid.toml``: 1000 m disc, tau_0 = 0.8 s, the CNN's payload,
  B = 512) with ``--devices`` devices (default 30, 100 and 1000), network only, the ``ideal``
  scheme (every device takes part, no outage), ``[server] mode = "async"`` with
  ``buffer_size`` ``--buffer`` (default 10: FedBuff), ``--slots`` slots. Timed: ``execute`` into
  a real run folder (channels, the scheme's plans, the event clock, the server's buffer and
  steps, energy and queues, the full trace written to Parquet, a checkpoint per frame). Cost per
  update = wall time / upload cycles that ended (applied, too stale or dropped).

  The peer: APPFL 1.12's virtual-time simulator with FedBuff (``benchmarks/_appfl_vsim.py``,
  run with ``--appfl-python``, an interpreter of a separate virtual environment with APPFL;
  skipped with a message without one): the same number of clients, a tiny model and local
  training stubbed out, so that only its simulation machinery is timed, for exactly as many
  updates as wflsim's run completes. Per device count, wflsim and APPFL run interleaved
  (``_common.interleaved``: one unrecorded warm-up round, then ``--reps`` rounds, the order
  rotating); in the warm-up round wflsim runs first, and each APPFL run is given the update
  count of wflsim's latest run. APPFL runs as a child process of its own interpreter and
  reports the wall time of its simulation alone (``AsyncSimDriver.run()``; start-up, imports
  and set-up excluded), which is what is recorded for it. Printed: both per-update costs per
  round, wflsim/APPFL per round and ``ratio_line`` (target <= 1; issue 36 asks for no worse
  than 0.58-0.81).

* ``train`` -- training included: the same scenario with learning (``cnn_mnist`` on MNIST,
  ``--data-dir``, else a synthetic MNIST written to a temporary folder), 30 devices, in three
  modes over the same simulated time (``--train-slots`` slots): ``sync`` (the paper's rounds,
  the ideal scheme), ``fedbuff`` (async, buffer 10) and ``fedasync`` (async, buffer 1,
  ``server_lr`` 1/30), B = ``--batch`` (default 512, the paper's). Cost per update = wall time /
  updates applied (sync: uploads aggregated); the two evaluations use 500 test samples. Printed: fedbuff/sync and fedasync/sync per update (target <= 1.2: the learner
  batches the gradients of updates across model versions, ``models/learner/stale.py``).

Nothing is asserted; run on a quiet machine.

    python benchmarks/async_overhead.py --appfl-python /tmp/appfl-venv/bin/python
    python benchmarks/async_overhead.py --parts clock --devices 30 100 1000 --reps 3 \\
        --appfl-python /tmp/appfl-venv/bin/python
    python benchmarks/async_overhead.py --quick
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common
from _common import headline, interleaved, print_header, ratio_line
from flower_compare import write_synthetic_mnist

from wflsim.app.run import execute, make_learner, prepare_scenario
from wflsim.sim.config.loading import read_scenario_file, validate_scenario

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "paper" / "mnist_iid.toml"
HERE = Path(__file__).resolve().parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=3,
        seed=False,
        data_dir="real MNIST (torchvision layout)",
        full_help=True,
        quick={"devices": [30], "slots": 20, "train_slots": 2, "reps": 1},
    )
    p.add_argument("--devices", type=int, nargs="+", default=[30, 100, 1000])
    p.add_argument("--slots", type=int, default=100, help="clock part: slots (frames of 20)")
    p.add_argument("--buffer", type=int, default=10)
    p.add_argument("--train-slots", type=int, default=6, help="train part: slots (one frame)")
    p.add_argument("--batch", type=int, default=512, help="train part: B per device")
    p.add_argument("--parts", nargs="+", default=["clock", "train"], choices=["clock", "train"])
    p.add_argument("--appfl-python", default=None, help="an interpreter that imports appfl")
    args = p.parse_args(argv)
    return args


def scenario(
    devices: int,
    slots: int,
    server: dict[str, Any],
    learning: dict[str, Any],
    batch: int | None = None,
) -> Any:
    """The MNIST scenario with ``devices`` devices, ``slots`` slots (frames of at most 20), the
    ideal scheme, the ``[server]`` table ``server``, the ``[learning]`` changes and ``batch``
    samples per device (None: the paper's 512)."""
    text, data = read_scenario_file(SCENARIO)
    per = min(20, slots)
    data["run"] = {**data["run"], "frames": max(1, slots // per), "slots_per_frame": per}
    data["network"] = {**data["network"], "num_devices": devices}
    if batch is not None:
        data["devices"] = {**data["devices"], "batch_size": batch}
    data["learning"] = {**data["learning"], **learning}
    data["scheme"] = {"name": "ideal"}
    data["server"] = server
    return prepare_scenario(validate_scenario(data), text=text, path=SCENARIO)


def timed_run(prep: Any, out: Path) -> tuple[float, dict[str, Any]]:
    """Wall time of ``execute`` into ``out`` and the run's summary."""
    learner = make_learner(prep)
    t0 = time.perf_counter()
    stats = execute(prep, learner, out, overwrite=True)
    return time.perf_counter() - t0, stats.as_dict()


def cycles_ended(summary: dict[str, Any]) -> int:
    """Upload cycles that ended: applied, discarded as too stale, or dropped."""
    return int(summary["updates_applied"] + summary["stale_discarded"] + summary["drops"])


def part_clock(args: argparse.Namespace, root: Path) -> None:
    print("== clock: network-only async runs (FedBuff), cost per update, training excluded")
    if not args.appfl_python:
        print("  (APPFL skipped: no --appfl-python)")
    for n in args.devices:
        prep = scenario(
            n,
            args.slots,
            {"mode": "async", "buffer_size": args.buffer},
            {"enabled": False, "num_params": 440812},
        )
        name_w, name_a = f"wflsim-{n}", f"appfl-{n}"
        # updates per run, one entry per call (warm-up included): wflsim's upload cycles that
        # ended, and the updates APPFL's server processed
        counts: dict[str, list[int]] = {name_w: [], name_a: []}

        def run_wflsim(prep: Any = prep, n: int = n, counts: list[int] = counts[name_w]) -> float:
            wall, summary = timed_run(prep, root / f"clock-{n}")
            counts.append(cycles_ended(summary))
            return wall

        def run_appfl(
            n: int = n, mine: list[int] = counts[name_a], theirs: list[int] = counts[name_w]
        ) -> float:
            # as many updates as wflsim's latest run completed (wflsim runs first in the
            # warm-up round, so there is one)
            wall, updates = appfl(args.appfl_python, n, theirs[-1])
            mine.append(updates)
            return wall

        variants: dict[str, Callable[[], float | None]] = {name_w: run_wflsim}
        if args.appfl_python:
            variants[name_a] = run_appfl
        walls = interleaved(variants, args.reps, warmup=1)
        per = {k: [w / c for w, c in zip(walls[k], counts[k][1:], strict=True)] for k in walls}
        print(
            f"  {n} devices: {counts[name_w][-1]} updates per wflsim run; per update, "
            f"wflsim median {1e3 * statistics.median(per[name_w]):.3f} ms "
            f"(min {1e3 * min(per[name_w]):.3f}, max {1e3 * max(per[name_w]):.3f})"
        )
        if name_a not in per:
            continue
        if set(counts[name_w]) != set(counts[name_a]):
            print(
                f"  NOTE: the update counts differ between runs: wflsim {counts[name_w]}, "
                f"APPFL {counts[name_a]}"
            )
        print(f"  APPFL 1.12 vsim FedBuff, {n} clients, tiny model, training stubbed; per update:")
        for i, (pw, pa) in enumerate(zip(per[name_w], per[name_a], strict=True)):
            print(
                f"    rep {i + 1}/{args.reps}: wflsim {1e3 * pw:.3f} ms "
                f"({counts[name_w][i + 1]} updates), APPFL {1e3 * pa:.3f} ms "
                f"({counts[name_a][i + 1]} updates), wflsim/APPFL {pw / pa:.3f}"
            )
        print(
            "  "
            + ratio_line(
                f"wflsim/APPFL per update, {n} devices",
                per[name_w],
                per[name_a],
                "<= 1 (issue 36: no worse than 0.58-0.81)",
            )
        )
        headline(f"wflsim/APPFL per update, {n} devices", per[name_w], per[name_a], "<= 1")


def appfl(python: str, clients: int, updates: int) -> tuple[float, int]:
    """One run of ``_appfl_vsim.py`` with ``python`` for ``updates`` updates: the wall time of
    the simulation alone as the child measured it (``driver.run()``; interpreter start-up,
    imports and set-up excluded) and the updates its server processed."""
    cmd = [python, str(HERE / "_appfl_vsim.py"), "--clients", str(clients)]
    cmd += ["--updates", str(updates), "--model", "tiny", "--train", "stub"]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode or not lines:
        raise SystemExit(f"APPFL failed ({res.returncode}): {res.stderr.strip()[-2000:]}")
    got = json.loads(lines[-1])
    if int(got["updates"]) != updates or not got["checks_ok"]:
        raise SystemExit(f"APPFL ran {got['updates']} of {updates} updates: {got}")
    return float(got["wall_s"]), int(got["updates"])


def part_train(args: argparse.Namespace, root: Path) -> None:
    print("== train: cnn_mnist on MNIST, 30 devices, cost per update applied")
    data_dir = args.data_dir
    if data_dir is None:
        data_dir = str(root / "data")
        write_synthetic_mnist(Path(data_dir), 0)
        print(f"  data: synthetic MNIST in {data_dir}")
    # the two evaluations (before and after) on 500 test samples: a fixed cost, kept small
    learning = {"data_dir": data_dir, "eval_every_slots": 10_000, "eval_max_samples": 500}
    modes = {
        "sync": {"mode": "sync"},
        "fedbuff": {"mode": "async", "buffer_size": 10},
        "fedasync": {"mode": "async", "buffer_size": 1, "server_lr": 1 / 30},
    }
    preps = {
        k: scenario(30, args.train_slots, v, learning, batch=args.batch) for k, v in modes.items()
    }
    counts: dict[str, list[int]] = {k: [] for k in modes}

    def runner(k: str) -> Any:
        def one() -> float:
            wall, summary = timed_run(preps[k], root / f"train-{k}")
            counts[k].append(
                int(summary.get("updates_applied", 0))
                if k != "sync"
                else int(
                    round(
                        (1 - summary["dropout_rate"])
                        * (1 - summary["outage_rate"])
                        * summary["slots"]
                        * 30
                    )
                )
            )
            return wall

        return one

    walls = interleaved({k: runner(k) for k in modes}, args.reps)
    per = {
        k: [w / c for w, c in zip(walls[k], counts[k][-args.reps :], strict=True)] for k in modes
    }
    for k in modes:
        print(
            f"  {k}: {counts[k][-1]} updates, per update median "
            f"{1e3 * statistics.median(per[k]):.1f} ms"
        )
    for k in ("fedbuff", "fedasync"):
        print("  " + ratio_line(f"{k}/sync per update", per[k], per["sync"], "<= 1.2"))
    headline("fedbuff/sync per update", per["fedbuff"], per["sync"], "<= 1.2")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print_header("async_overhead", ("numpy", "simpy", "pyarrow", "torch"))
    with tempfile.TemporaryDirectory(prefix="wflsim-async-") as tmp:
        root = Path(tmp)
        if "clock" in args.parts:
            part_clock(args, root)
        if "train" in args.parts:
            part_train(args, root)


if __name__ == "__main__":
    sys.exit(main())
