"""The ns-3 co-simulation's cost (``[uplink] mode = "ns3_lte"``): wall time per simulated slot
beside the closed form, and the co-simulation's overhead against ns-3 alone on the same traffic.

Workload: scenarios/ns3/study.toml network only (tau_0 = 0.5 s, the digits MLP's payload, a 10 MHz
LTE cell), ``fixed_power`` (every device uploads every slot at 1 W), ``--frames`` x
``--slots`` slots, N = ``--devices`` (default 10, 30, 100), the trace at level ``events`` into
a real run folder. Interleaved, ``--reps`` times each:

* ``closed_form``: the same scenario on dedicated bands (``uplink.mode = "dedicated"``: the
  paper's model, the closed-form kernel);
* ``ns3``: the co-simulation (``uplink.mode = "ns3_lte"``): wflsim's engine, the conservative
  stepping, one ns-3 process per frame;
* ``ns3_alone``: ns-3 by itself on the same traffic: the commands the co-simulation sent (the
  slots' losses, each upload's power and start, the deadline's stops), read back from its trace,
  all given in advance to one process per frame, which runs each frame to its end in one go
  (``runall``): no Python engine, no stepping.

Reported: seconds of each, seconds per simulated slot, ns3 / closed_form, and ns3 / ns3_alone
(the co-simulation's overhead; target within 1.2x).

    python benchmarks/ns3_cosim.py                              # N = 10, 30, 100
    python benchmarks/ns3_cosim.py --quick                      # smoke test: N = 10
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import _common

from wflsim.analysis.io import load_events
from wflsim.app.run import prepare_scenario
from wflsim.app.scenario import validate_scenario
from wflsim.sim.config.loading import read_scenario_file
from wflsim.sim.learner import NullLearner
from wflsim.sim.radio.ns3.build import ensure_program
from wflsim.sim.radio.ns3.process import Ns3Process
from wflsim.sim.radio.ns3.uplink import loss_db, noise_figure_db

NUM_PARAMS = 9_610


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=3,
        warmup=1,
        seed=False,
        tmp_dir=True,
        quick={"devices": [10], "reps": 2, "warmup": 0},
    )
    scenario = _common.REPO / "scenarios" / "ns3" / "study.toml"
    p.add_argument("--scenario", default=str(scenario))
    p.add_argument("--devices", type=int, nargs="+", default=[10, 30, 100])
    p.add_argument("--frames", type=int, default=2)
    p.add_argument("--slots", type=int, default=5, help="slots per frame")
    return p.parse_args(argv)


def prepared(args: argparse.Namespace, n: int, mode: str) -> Any:
    """The scenario, network only, N devices, ``fixed_power``, over ``mode``."""
    text, data = read_scenario_file(args.scenario)
    data.pop("sweep", None)
    data["run"] = {**data["run"], "frames": args.frames, "slots_per_frame": args.slots}
    data["network"] = {**data["network"], "num_devices": n}
    data["learning"] = {"enabled": False, "num_params": NUM_PARAMS}
    data["scheme"] = {"name": "fixed_power"}
    data["uplink"] = {"mode": mode}
    return prepare_scenario(validate_scenario(data), text=text, path=Path(args.scenario))


def traffic(run: Path, prep: Any) -> list[tuple[list[str], int]]:
    """Per frame, the commands the co-simulation gave ns-3 (times from the frame's origin)
    and the frame's end, ns: what ns-3 alone replays."""
    ev = load_events(
        run,
        ["frame_start", "slot_start", "decision", "upload_start", "upload_end", "frame_end"],
        [
            "frame",
            "slot",
            "device",
            "time_s",
            "channel_gain",
            "payload_bits",
            "tx_power_w",
            "success",
        ],
    )
    sc = prep.scenario
    n = sc.network.num_devices
    nf = noise_figure_db(prep.system.noise_w, prep.system.bandwidth_hz)
    frames = []
    for k, fr in ev.groupby("frame", sort=True):
        origin = float(fr[fr.event == "slot_start"].time_s.min())

        def ns(t: float, origin: float = origin) -> int:
            return int(round((t - origin) * 1e9))

        cmds = [
            f"config ues={n} enbs=1 rbs=50 seed={prep.streams.ns3_seed()} run={int(k)} "
            f"transport=tcp noise_figure_db={nf!r} warmup_ms=200 backhaul_delay_us=1000 "
            "tcp_segment=1400 scheduler=pf",
            *[f"attach {u} 0" for u in range(n)],
            "ready",
        ]
        timed: list[tuple[int, int, str]] = []
        dec = fr[fr.event == "decision"]
        for _, s in dec.groupby("slot", sort=True):
            t = ns(float(s.time_s.iloc[0]))
            gains = s.sort_values("device").channel_gain.to_numpy(dtype=float)
            losses = " ".join(repr(v) for v in loss_db(gains).tolist())
            timed.append((t, 0, f"gains {t} {losses}"))
        bits = dec.set_index(["slot", "device"]).payload_bits
        for _, r in fr[fr.event == "upload_start"].iterrows():
            t = ns(float(r.time_s))
            d = int(r.device)
            size = math.ceil(float(bits[(r.slot, r.device)]) / 8.0)
            dbm = 10.0 * math.log10(float(r.tx_power_w)) + 30.0
            timed.append((t, 1, f"power {t} {d} {dbm!r}"))
            timed.append((t, 2, f"start {t} {d} {size}"))
        ends = fr[fr.event == "upload_end"]
        for _, r in ends[~ends.success.astype(bool)].iterrows():
            t = ns(float(r.time_s))
            timed.append((t, 3, f"stop {t} {int(r.device)}"))
        timed.sort(key=lambda x: (x[0], x[1]))
        end = ns(float(fr[fr.event == "frame_end"].time_s.iloc[0]))
        frames.append((cmds + [c for _, _, c in timed], end))
    return frames


def alone(program: Path, frames: list[tuple[list[str], int]]) -> int:
    """ns-3 by itself on the traffic: one process per frame, every command in advance, one
    run to the frame's end. Returns the completions it reported."""
    ends = 0
    for cmds, end in frames:
        proc = Ns3Process(program, 600.0)
        try:
            proc.request(cmds)
            lines = proc.request([f"runall {end}"])[0]
            ends += sum(1 for ln in lines if ln.startswith("end "))
        finally:
            proc.close()
    return ends


def measure(args: argparse.Namespace, n: int, program: Path, root: Path) -> None:
    """The three variants at N = ``n`` devices, interleaved, and their ratios."""
    kept: dict[str, Any] = {}

    def keep(mode: str, prep: Any, out: Path) -> None:
        if mode == "ns3_lte" and "frames" not in kept:
            kept["frames"] = traffic(out, prep)

    runs = _common.execute_variants(
        root,
        ["dedicated", "ns3_lte"],
        lambda mode: prepared(args, n, mode),
        lambda: NullLearner(NUM_PARAMS),
        keep,
    )

    def plain() -> float:
        if "frames" not in kept:
            runs["ns3_lte"]()
        t0 = time.perf_counter()
        kept["ends"] = alone(program, kept["frames"])
        return time.perf_counter() - t0

    times = _common.interleaved(
        {
            "closed_form": runs["dedicated"],
            "ns3": runs["ns3_lte"],
            "ns3_alone": plain,
        },
        args.reps,
        args.warmup,
    )
    slots = args.frames * args.slots
    print(f"N = {n} devices, {slots} slots:")
    for k, v in times.items():
        st = _common.Stats(v)
        print(f"  {k:12s} {st.fmt(unit=' s')}   {st.median / slots:.4f} s per slot")
    print(
        f"  {_common.ratio_line('ns3/closed_form', times['ns3'], times['closed_form'], 'report')}"
    )
    print(f"  {_common.ratio_line('ns3/ns3_alone', times['ns3'], times['ns3_alone'], '<= 1.2')}")
    _common.headline(f"ns3/ns3_alone, {n} devices", times["ns3"], times["ns3_alone"], "<= 1.2")
    print(f"  completions ns-3 alone reported: {kept.get('ends')}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.print_header("ns3_cosim: the co-simulation against the closed form and ns-3 alone")
    program = ensure_program()
    print(
        f"workload: fixed_power, {args.frames} frames x {args.slots} slots of 0.5 s, D = "
        f"{NUM_PARAMS:,} (38 kB uploads), one 10 MHz LTE cell, trace level events"
    )
    with _common.scratch("wflsim-ns3-", args.tmp_dir) as root:
        for n in args.devices:
            measure(args, n, program, root)


if __name__ == "__main__":
    main()
