"""Strategies against FedAvg: the wall time per slot of the same learning run under each strategy.

Workload (defaults): the paper's MNIST scenario (``scenarios/paper/mnist_iid.toml``: 30 devices
in a 1000 m disc, the ``two_timescale`` scheme, ``cnn_mnist`` with D = 440,812, lr 0.05) with
``--batch`` B = 128 samples per device (the paper's 512 makes a run too long for 3 rounds of 6
variants), ``--frames`` 2 frames of ``--slots-per-frame`` 2 slots, the server of ``--mode`` (``sync``;
``semi_sync``; ``async``: FedBuff with ``--buffer`` 10 and ``server_lr`` = buffer / devices),
``--local-steps`` E local steps per device and slot, the two evaluations (before and after) on
500 test samples. Data: the real MNIST from ``--data-dir`` (default ``$WFLSIM_DATA_DIR``);
without it, scikit-learn's ``digits`` with the ``mlp`` model. Only the ``[strategy]`` table
differs between the variants (each strategy's defaults; ``krum`` with f = 0, m = 1), plus
``fedavg*``: FedAvg again, an A/A control whose ratio to ``fedavg`` is the noise of a pair.

Part ``learn``: each variant is prepared (``wflsim.prepare``) and its learner built (the data
loaded, the model made) before the clock starts; timed is what ``wflsim.run(...,
progress=False)`` does after that: the engine built and run in memory (channels, the scheme's
decisions, the SimPy slots, the learner's local steps, aggregation and server step, energy,
queues, the trace table). One round runs every variant once, the order rotating from round to
round (``_common.interleaved``); every repetition is printed, then per variant seconds per slot,
and per strategy its ratio to ``fedavg`` per round, their median and the ratio of the medians.

Part ``network``: the same scenario network-only (``learning.enabled = false``, payload D) at
``--net-devices`` 2,000 devices x ``--net-slots`` 40 slots, in memory, per strategy: what the
strategy seam costs the network side (a client-side strategy's extra cycles and upload factor are
charged there, ``wflsim.StrategyCosts``), without training noise. A per-device Python loop per
slot would show here as a ratio well above 1.

A strategy that changes the payload (``scaffold``: twice the bits) changes whom the controller
admits, so its runs compute another number of local updates than FedAvg's; the learn part then
also prints each variant's updates and its ratio to ``fedavg`` per computed update (the same
work).

Printed at the end: whether ``fedadam``/``fedavg`` (learn and network) is within the noise,
taken as the larger of |fedavg*/fedavg - 1| and the spread of the per-round ratios. Nothing is
asserted; run on a quiet machine.

    python benchmarks/strategy_overhead.py --mode sync
    python benchmarks/strategy_overhead.py --mode async
    python benchmarks/strategy_overhead.py --local-steps 3 --strategies fedavg,fedprox
    python benchmarks/strategy_overhead.py --local-steps 2 --strategies fedavg,fedadam,scaffold,krum
    python benchmarks/strategy_overhead.py --quick          # smoke test (digits, tiny)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import _common
from _common import Stats, headline, interleaved, print_header, ratio_line

import wflsim
from wflsim.app.assemble import build_engine, make_learner
from wflsim.sim.config.loading import read_scenario_file

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "paper" / "mnist_iid.toml"
CONTROL = "fedavg*"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=None,
        warmup=0,
        seed=False,
        data_dir="MNIST in torchvision's layout (default $WFLSIM_DATA_DIR)",
        data_dir_default=os.environ.get("WFLSIM_DATA_DIR"),
        full_help=True,
        quick_help="no --data-dir: scikit-learn's digits",
        quick={
            "data_dir": None,
            "devices": 10,
            "frames": 1,
            "slots_per_frame": 3,
            "rounds": 1,
            "net_devices": 200,
            "net_slots": 10,
            "net_rounds": 1,
        },
    )
    p.add_argument("--strategies", default="fedavg,fedadam,fedprox,fedmedian,krum")
    p.add_argument("--mode", default="sync", choices=["sync", "semi_sync", "async"])
    p.add_argument("--local-steps", type=int, default=1, help="E (FedProx differs from E = 2 on)")
    p.add_argument("--rounds", type=int, default=3, help="recorded rounds (default 3)")
    p.add_argument("--devices", type=int, default=30)
    p.add_argument("--frames", type=int, default=2)
    p.add_argument("--slots-per-frame", type=int, default=2)
    p.add_argument("--batch", type=int, default=128, help="B per device (default 128)")
    p.add_argument("--buffer", type=int, default=10, help="async: FedBuff's buffer")
    p.add_argument("--no-control", action="store_true", help="leave out the fedavg* A/A control")
    p.add_argument("--parts", nargs="+", default=["learn", "network"], choices=["learn", "network"])
    p.add_argument("--net-devices", type=int, default=2000)
    p.add_argument("--net-slots", type=int, default=40)
    p.add_argument("--net-rounds", type=int, default=3)
    args = p.parse_args(argv)
    return args


def scenario_table(args: argparse.Namespace, learn: bool) -> dict[str, Any]:
    """The scenario as a table (the file's values changed as the module docstring says)."""
    _, data = read_scenario_file(SCENARIO)
    devices = args.devices if learn else args.net_devices
    if learn:
        slots, per = args.frames * args.slots_per_frame, args.slots_per_frame
    else:
        per = min(20, args.net_slots)
        slots = args.net_slots
    data["run"] = {**data["run"], "frames": max(1, slots // per), "slots_per_frame": per}
    data["network"] = {**data["network"], "num_devices": devices}
    data["devices"] = {**data["devices"], "batch_size": args.batch}
    learning = dict(data["learning"])
    if learn:
        learning.update(eval_every_slots=10_000, eval_max_samples=500)
        if args.local_steps != 1:
            learning["local_steps"] = args.local_steps
        if args.data_dir:
            learning["data_dir"] = str(args.data_dir)
        else:
            learning.update(dataset="digits", model="mlp")
    else:
        learning = {"enabled": False, "num_params": 440_812}
        if args.local_steps != 1:
            learning["local_steps"] = args.local_steps
    data["learning"] = learning
    if args.mode == "async":
        data["server"] = {
            "mode": "async",
            "buffer_size": args.buffer,
            "server_lr": args.buffer / devices,
        }
    elif args.mode == "semi_sync":
        data["server"] = {"mode": "semi_sync"}
    return data


def cache_datasets() -> None:
    """Load each dataset once per process (the learners of every variant share the tensors;
    loading is not timed, this only shortens the benchmark)."""
    import wflsim.models.data as data

    load = data.load_dataset
    seen: dict[tuple[Any, ...], Any] = {}

    def cached(*a: Any, **kw: Any) -> Any:
        key = (*a, *sorted(kw.items()))
        if key not in seen:
            seen[key] = load(*a, **kw)
        return seen[key]

    data.load_dataset = cached  # type: ignore[assignment]


def prepared(
    args: argparse.Namespace, learn: bool, strategy: str, more: dict[str, Any] | None = None
) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", wflsim.PlausibilityWarning)
        return wflsim.prepare(
            scenario_table(args, learn), overrides={"strategy": {"name": strategy}, **(more or {})}
        )


#: per variant, the local updates its run computed (device-slots participating; the same in every
#: round: the runs are deterministic on the network side)
UPDATES: dict[str, int] = {}


def variant(prep: Any, slots: int, learn: bool, name: str = "") -> Any:
    """A variant of the interleaving: its learner built untimed, then the engine timed."""

    def one() -> float:
        learner = make_learner(prep)
        t0 = time.perf_counter()
        engine = build_engine(prep, learner)
        engine.run()
        engine.table()
        elapsed = time.perf_counter() - t0
        if name:
            UPDATES[name] = int(engine.stats.participations)
        return elapsed / slots

    return one


def report(
    label: str,
    times: dict[str, list[float]],
    strategies: list[str],
    control: bool,
) -> dict[str, float]:
    """Per-slot times, every per-round ratio to fedavg and their median; the noise."""
    print(f"\n{label}: seconds per slot")
    for k, v in times.items():
        print(f"  {k:12s} {Stats(v).fmt(scale=1e3, unit=' ms')}")
    base = times["fedavg"]
    print(f"\n{label}: ratio to fedavg per round (then: median of the per-round ratios)")
    medians: dict[str, float] = {}
    for k in times:
        if k == "fedavg":
            continue
        per = [a / b for a, b in zip(times[k], base, strict=True)]
        medians[k] = statistics.median(per)
        print(f"  {k}/fedavg: " + ", ".join(f"{r:.3f}" for r in per) + f"  median {medians[k]:.3f}")
    print()
    for k in times:
        if k != "fedavg":
            print("  " + ratio_line(f"{k}/fedavg", times[k], base, "within noise"))
    if "fedadam" in times:
        headline(f"{label} fedadam/fedavg per slot", times["fedadam"], base, "within noise")
    noise = 0.0
    if control:
        aa = [a / b for a, b in zip(times[CONTROL], base, strict=True)]
        noise = max(abs(r - 1) for r in aa)
    if all(k in UPDATES for k in times) and any(UPDATES[k] != UPDATES["fedavg"] for k in times):
        # a strategy that changes the payload (SCAFFOLD's x2) changes who the controller admits:
        # per computed update compares the same work
        print(
            f"\n  {label}: local updates computed per run: "
            + ", ".join(f"{k} {UPDATES[k]}" for k in times)
        )
        for k in times:
            if k == "fedavg" or not UPDATES[k]:
                continue
            scale = UPDATES["fedavg"] / UPDATES[k]
            per = sorted(a / b * scale for a, b in zip(times[k], base, strict=True))
            print(
                f"  {k}/fedavg per computed update: "
                + ", ".join(f"{r:.3f}" for r in per)
                + f"  median {statistics.median(per):.3f}"
            )
    if "fedadam" in times:
        per = [a / b for a, b in zip(times["fedadam"], base, strict=True)]
        band = max(noise, (max(per) - min(per)) / 2)
        dev = abs(medians["fedadam"] - 1)
        verdict = "within" if dev <= band else ("above" if medians["fedadam"] > 1 else "below")
        print(
            f"\n  {label}: fedadam/fedavg median {medians['fedadam']:.3f}: {verdict} the noise "
            f"(+-{band:.3f}: the larger of the A/A control's largest deviation {noise:.3f} and "
            "half the spread of the per-round ratios)"
        )
    return medians


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print_header("strategy_overhead", ("numpy", "simpy", "pyarrow", "torch"))
    cache_datasets()
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    if "fedavg" not in strategies:
        strategies.insert(0, "fedavg")
    control = not args.no_control
    names = [*strategies, *([CONTROL] if control else [])]
    if "learn" in args.parts:
        data = f"MNIST from {args.data_dir}" if args.data_dir else "digits (scikit-learn), mlp"
        slots = args.frames * args.slots_per_frame
        print(
            f"== learn: {args.devices} devices, two_timescale, server {args.mode}, "
            f"{args.frames} x {args.slots_per_frame} slots, B = {args.batch}, "
            f"E = {args.local_steps}, {data}"
        )
        print(f"   rounds: {args.warmup} warm-up + {args.rounds} recorded, order rotating\n")
        preps = {k: prepared(args, True, k.rstrip("*")) for k in names}
        # torch's first calls (threads, kernels) in a one-slot FedAvg run, untimed
        short = prepared(args, True, "fedavg", {"run": {"frames": 1, "slots_per_frame": 1}})
        variant(short, 1, True)()
        times = interleaved(
            {k: variant(p, slots, True, k) for k, p in preps.items()}, args.rounds, args.warmup
        )
        report("learn", times, strategies, control)
    if "network" in args.parts:
        print(
            f"\n== network: network-only, {args.net_devices} devices x {args.net_slots} slots, "
            f"two_timescale, server {args.mode}, E = {args.local_steps}\n"
        )
        preps = {k: prepared(args, False, k.rstrip("*")) for k in names}
        UPDATES.clear()  # per slot only: no training to compare per update
        times = interleaved(
            {k: variant(p, args.net_slots, False) for k, p in preps.items()},
            args.net_rounds,
            1,
        )
        report("network", times, strategies, control)


if __name__ == "__main__":
    main()
