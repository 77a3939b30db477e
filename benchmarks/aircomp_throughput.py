"""Network-only throughput of over-the-air slots (``[uplink] mode = "aircomp"``) against the
paper's dedicated bands, on the same work.

Workload: the paper's MNIST scenario (``scenarios/paper/mnist_iid.toml``: tau_0 = 0.8 s,
B = 512, payload D = 440,812) with ``--devices`` N devices (default 10,000) and ``--slots`` slots
(default 20, one frame), network only, scheme ``--scheme`` (default ``ideal``: every device takes
part in every slot, so every slot's sum has N devices), the closed-form kernel, the trace
written at ``--level`` (default ``events``) to a real run folder in a temporary folder
(``wflsim.app.run.execute``: Parquet parts, checkpoints and manifest). Variants, interleaved:

* ``dedicated``: the scenario as it is (each upload on its own band: the closed form);
* ``aircomp_trunc``: ``[uplink] mode = "aircomp"``, truncated channel inversion at
  ``--threshold-db`` (default -125 dB): the power rule, the common transmission and the
  ``aircomp`` row per slot;
* ``aircomp_opt``: ``power_control = "optimal"`` (Cao et al.'s interval search per slot).

Reported: seconds and device-slots/s of each, and aircomp/dedicated throughput (target: an
AirComp slot costs no per-device Python loop, so within 2x of dedicated, >= 0.5).

    python benchmarks/aircomp_throughput.py                 # 10,000 devices x 20 slots
    python benchmarks/aircomp_throughput.py --quick     # smoke test: 1,000 devices, 2 reps
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import _common

from wflsim.app.run import prepare_scenario
from wflsim.app.scenario import validate_scenario
from wflsim.sim.config.loading import read_scenario_file
from wflsim.sim.learner import NullLearner

NUM_PARAMS = 440_812


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__, reps=3, warmup=1, tmp_dir=True, quick={"devices": 1000, "reps": 2, "warmup": 0}
    )
    scenario = _common.REPO / "scenarios" / "paper" / "mnist_iid.toml"
    p.add_argument("--scenario", default=str(scenario))
    p.add_argument("--devices", type=int, default=10_000)
    p.add_argument("--slots", type=int, default=20)
    p.add_argument("--scheme", default="ideal")
    p.add_argument("--threshold-db", type=float, default=-125.0)
    p.add_argument("--level", choices=["events", "device_slots"], default="events")
    return p.parse_args(argv)


def prepared(args: argparse.Namespace, uplink: dict[str, Any] | None) -> Any:
    """The scenario, network only, ``--devices`` x ``--slots``, over ``uplink``."""
    text, data = read_scenario_file(args.scenario)
    data["seed"] = args.seed
    data["run"] = {**data.get("run", {}), "frames": 1, "slots_per_frame": args.slots}
    data["run"]["kernel"] = "closed_form"
    data["network"] = {**data.get("network", {}), "num_devices": args.devices}
    data["learning"] = {**data.get("learning", {}), "enabled": False, "num_params": NUM_PARAMS}
    data["scheme"] = {"name": args.scheme}
    data["trace"] = {**data.get("trace", {}), "level": args.level}
    if uplink is not None:
        data["uplink"] = uplink
    return prepare_scenario(validate_scenario(data), text=text, path=Path(args.scenario))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.print_header("aircomp_throughput: over-the-air slots vs dedicated bands")
    ds = args.devices * args.slots
    variants: dict[str, dict[str, Any] | None] = {
        "dedicated": None,
        "aircomp_trunc": {"mode": "aircomp", "threshold_gain_db": args.threshold_db},
        "aircomp_opt": {"mode": "aircomp", "power_control": "optimal"},
    }
    print(
        f"workload: {args.devices:,} devices x {args.slots} slots = {ds:,} device-slots; "
        f"scheme {args.scheme}; closed-form kernel; trace level {args.level}; D = {NUM_PARAMS:,}"
    )
    with _common.scratch("wflsim-aircomp-", args.tmp_dir) as root:
        runs = _common.execute_variants(
            root,
            list(variants),
            lambda k: prepared(args, variants[k]),
            lambda: NullLearner(NUM_PARAMS),
        )
        times = _common.interleaved(runs, args.reps, args.warmup)
    for k in variants:
        rate = ds / _common.Stats(times[k]).median
        print(f"  {k:14s} {_common.Stats(times[k]).fmt(unit=' s')}   {rate:,.0f} device-slots/s")
    for k in ("aircomp_trunc", "aircomp_opt"):
        line = _common.ratio_line(
            f"throughput {k}/dedicated", times["dedicated"], times[k], ">= 0.5"
        )
        print(f"  {line}")
    _common.headline(
        "throughput aircomp_trunc/dedicated", times["dedicated"], times["aircomp_trunc"], ">= 0.5"
    )


if __name__ == "__main__":
    main()
