"""Device-slots per second of wflsim's network-only mode against a bare SimPy model.

Workload: the paper's MNIST scenario (``scenarios/paper/mnist_iid.toml``: 1000 m disc, tau_0 =
0.8 s, B = 512, the CNN's payload D = 440,812) scaled to ``--devices`` devices (default 10,000)
and ``--slots`` slots (default 100, frames of 20), network only (``learning.enabled = false``,
``learning.num_params = 440812``), run for each scheme of ``--schemes`` (default
``two_timescale``, the paper's scheme, and ``fixed_power``, where every device participates in
every slot).

* ``wflsim``: ``wflsim.app.run.execute`` on the prepared scenario, once per slot kernel of
  ``--kernels`` (default both: ``closed_form``, every device event in closed form with the SimPy
  server alone; ``event``, one SimPy process per device): channels, the scheme's decisions
  (for ``two_timescale`` the per-frame MM controller, vectorised over devices), the SimPy server
  (and device processes), queues, energy, and the FULL trace written to a real run folder in a
  temporary folder: one fsynced Parquet part per frame, a checkpoint per frame (the default
  ``run.checkpoint_every_frames = 1``) and ``manifest.json`` after each frame. Timed from
  ``execute`` to its return; the scenario is prepared (devices resolved, positions drawn)
  before the clock starts.
* ``bare``: SimPy alone, scheduling exactly what the wflsim run scheduled and nothing else: one
  server process looping over the slots, waking the slot's participants and yielding the deadline
  timeout (together with an all-done event while uploads are out, as the engine does); one
  persistent process per device that waits to be woken, yields a compute timeout and an upload
  timeout, and signals completion. Participants and durations are read from the trace of a warm-up
  wflsim run (same seed, so the same in every repetition): the same number of wake-ups and
  timeouts.

``--uplink ofdma`` or ``tdma`` runs the scenario on that shared uplink (``[uplink] mode``), on the
event kernel only (the closed form cannot play it), against two bare models:

* ``bare``: each upload's realised compute and transmitted times replayed from the trace, without
  the sharing logic (no rate changes, no queue): the same wake-ups and timeouts, a lower bound on
  any SimPy model of the same events;
* ``bare_shared``: the same uplink written directly in SimPy, as one would without wflsim, from
  each participant's compute time, power, gain and payload (the trace's decision rows): OFDMA as
  processor sharing in plain Python (on every start or end, every upload's remaining bits advance
  at its old rate, the rates W/k log2(1 + p h k / (N0 W)) are recomputed, and one completion
  timeout is scheduled, a stale one ignored by its generation number); TDMA as a
  ``simpy.Resource`` of capacity 1 (requests in the order computations end); at the deadline
  every upload still in flight or waiting is cut. Its count of uploads that arrive in time is
  printed next to wflsim's (they agree).

Throughput = devices x slots / wall seconds. Targets: the event kernel >= 0.5 x bare SimPy; the
closed form >= 10 x the event kernel. The ratios are printed, never asserted.

    python benchmarks/network_throughput.py                          # full size, 10,000 x 100
    python benchmarks/network_throughput.py --quick                  # smoke test: 1,000 x 20
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
import time
from pathlib import Path

import _common
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import simpy

from wflsim.app.run import Prepared, execute, prepare_scenario
from wflsim.app.scenario import validate_scenario
from wflsim.sim.config.loading import read_scenario_file
from wflsim.sim.learner import NullLearner
from wflsim.sim.registry import SCHEMES

SCENARIO = _common.REPO / "scenarios" / "paper" / "mnist_iid.toml"
NUM_PARAMS = 440_812


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=5,
        reps_help="recorded rounds per scheme",
        warmup=1,
        tmp_dir=True,
        quick={"devices": 1_000, "slots": 20, "reps": 3},
    )
    p.add_argument("--devices", type=int, default=10_000, help="devices (default 10,000)")
    p.add_argument("--slots", type=int, default=100, help="slots in all (default 100)")
    p.add_argument("--slots-per-frame", type=int, default=20, help="T (default 20)")
    p.add_argument(
        "--schemes",
        nargs="+",
        default=["two_timescale", "fixed_power"],
        choices=sorted(SCHEMES),
        help="schemes to run (default: two_timescale fixed_power)",
    )
    for flag, choices, what in (
        ("--kernels", ["closed_form", "event"], "slot kernels to time (default: both)"),
        ("--levels", ["events", "device_slots"], "trace levels (default both; device_slots: "
         "closed form only)"),
    ):  # fmt: skip
        p.add_argument(flag, nargs="+", default=choices, choices=choices, help=what)
    p.add_argument(
        "--uplink",
        default="dedicated",
        choices=["dedicated", "ofdma", "tdma"],
        help="[uplink] mode (default dedicated; a shared one runs the event kernel only)",
    )
    p.add_argument("--scenario", default=str(SCENARIO), help="base scenario file")
    args = p.parse_args(argv)
    if args.uplink != "dedicated":
        args.kernels = ["event"]
        args.levels = ["events"]
    if args.slots % args.slots_per_frame:
        args.slots_per_frame = args.slots if args.slots < args.slots_per_frame else 1
        print(f"note: --slots not a multiple of T; using T = {args.slots_per_frame}")
    return args


def prepared(
    args: argparse.Namespace, scheme: str, kernel: str = "closed_form", level: str = "events"
) -> Prepared:
    """The base scenario scaled up, network only, with ``scheme`` (its parameters kept if any),
    on the slot kernel ``kernel``, writing the trace at ``level``."""
    text, data = read_scenario_file(args.scenario)
    data["seed"] = args.seed
    data["run"] = {
        **data.get("run", {}),
        "frames": args.slots // args.slots_per_frame,
        "slots_per_frame": args.slots_per_frame,
        "kernel": kernel,
    }
    data["network"] = {**data.get("network", {}), "num_devices": args.devices}
    data["uplink"] = {**data.get("uplink", {}), "mode": args.uplink}
    data["trace"] = {**data.get("trace", {}), "level": level}
    data["learning"] = {**data.get("learning", {}), "enabled": False, "num_params": NUM_PARAMS}
    old = data.get("scheme", {})
    keep = old if old.get("name") == scheme else {}
    data["scheme"] = {**keep, "name": scheme}
    sc = validate_scenario(data)
    return prepare_scenario(sc, text=text, path=Path(args.scenario))


def run_wflsim(
    args: argparse.Namespace,
    scheme: str,
    root: Path,
    tag: str,
    kernel: str = "closed_form",
    level: str = "events",
) -> tuple[float, Path]:
    prep = prepared(args, scheme, kernel, level)
    learner = NullLearner(NUM_PARAMS)
    out = root / tag
    t0 = time.perf_counter()
    execute(prep, learner, out, overwrite=True)
    return time.perf_counter() - t0, out


def plan_from_trace(path: Path, n: int, slots: int) -> dict:
    """Per-slot participants, compute and upload durations the engine scheduled (from the trace:
    a run folder's ``events/`` parts, or an ``events.parquet`` file of wflsim before 0.3)."""
    cols = ["event", "slot", "device", "participating", "compute_s", "upload_s", "success"]
    files = sorted(path.glob("part-*.parquet")) if path.is_dir() else [path]
    tab = pa.concat_tables([pq.read_table(f, columns=cols) for f in files])
    ev = pc.cast(tab["event"], "string")

    def grid(event: str, col: str) -> np.ndarray:
        sub = tab.filter(pc.equal(ev, event))
        slot = sub["slot"].to_numpy()
        dev = sub["device"].to_numpy()
        val = sub[col].to_numpy(zero_copy_only=False)
        out = np.zeros((slots, n), dtype=val.dtype)
        out[slot, dev] = val
        return out

    part = grid("energy", "participating").astype(bool)
    comp = grid("decision", "compute_s")  # 0 for non-participants
    upl = grid("energy", "upload_s")  # time actually transmitted (cut at the deadline)
    n_rows = tab.num_rows
    return {
        "part": part,
        "compute_s": comp,
        "upload_s": upl,
        "rows": n_rows,
        "success": int(grid("energy", "success").sum()),
    }


def shared_inputs(path: Path, n: int, slots: int) -> dict:
    """What a bare shared-uplink model needs per slot and device: power, gain and payload (the
    trace's decision rows; 0 for non-participants)."""
    cols = ["event", "slot", "device", "tx_power_w", "channel_gain", "payload_bits"]
    files = sorted(path.glob("part-*.parquet")) if path.is_dir() else [path]
    tab = pa.concat_tables([pq.read_table(f, columns=cols) for f in files])
    sub = tab.filter(pc.equal(pc.cast(tab["event"], "string"), "decision"))
    slot, dev = sub["slot"].to_numpy(), sub["device"].to_numpy()
    out = {}
    for col, key in (("tx_power_w", "power_w"), ("channel_gain", "gain"), ("payload_bits", "bits")):
        grid = np.zeros((slots, n))
        grid[slot, dev] = sub[col].to_numpy(zero_copy_only=False)
        out[key] = grid
    return out


def bare_simpy(plan: dict, tau0: float) -> tuple[float, dict]:
    """The bare SimPy model (see the module docstring); returns (seconds, counts)."""
    part, comp, upl = plan["part"], plan["compute_s"], plan["upload_s"]
    slots, n = part.shape
    who_per_slot = [np.flatnonzero(part[t]).tolist() for t in range(slots)]
    comp_l = [comp[t].tolist() for t in range(slots)]
    upl_l = [upl[t].tolist() for t in range(slots)]

    t0 = time.perf_counter()
    env = simpy.Environment()
    wake: list = [None] * n
    st = {"remaining": 0, "done": None, "c": None, "u": None, "wakes": 0, "timeouts": 0}

    def device(d: int):
        while True:
            ev = env.event()
            wake[d] = ev
            yield ev
            yield env.timeout(st["c"][d])
            yield env.timeout(st["u"][d])
            st["remaining"] -= 1
            if st["remaining"] == 0:
                st["done"].succeed()

    def server():
        for t in range(slots):
            who = who_per_slot[t]
            st["c"], st["u"] = comp_l[t], upl_l[t]
            st["remaining"] = len(who)
            st["done"] = env.event()
            for d in who:
                wake[d].succeed()
            st["wakes"] += len(who)
            st["timeouts"] += 2 * len(who) + 1
            deadline = env.timeout(tau0)
            yield _common.slot_end(env, deadline, st["done"], bool(who))

    _common.run_bare(env, n, device, server)
    return time.perf_counter() - t0, {"wakes": st["wakes"], "timeouts": st["timeouts"]}


def bare_shared(
    plan: dict, inputs: dict, tau0: float, mode: str, bandwidth_hz: float, noise_w: float
) -> tuple[float, dict]:
    """The shared uplink written directly in SimPy (the module's docstring): returns (seconds,
    counts), ``counts["success"]`` the uploads that arrived by the deadline."""
    part, comp = plan["part"], plan["compute_s"]
    slots, n = part.shape
    who_per_slot = [np.flatnonzero(part[t]).tolist() for t in range(slots)]
    rows = {k: [inputs[k][t].tolist() for t in range(slots)] for k in ("power_w", "gain", "bits")}
    comp_l = [comp[t].tolist() for t in range(slots)]
    psd = noise_w / bandwidth_hz
    log2 = math.log(2.0)

    t0 = time.perf_counter()
    env = simpy.Environment()
    wake: list = [None] * n
    st: dict = {"remaining": 0, "done": None, "success": 0, "closed": False}
    # OFDMA: jobs in flight -> [bits left, rate]; one pending completion (its generation)
    jobs: dict[int, list[float]] = {}
    ps = {"since": 0.0, "gen": 0}
    link = simpy.Resource(env, capacity=1)

    def finish(d: int, arrived: bool) -> None:
        st["success"] += arrived
        st["remaining"] -= 1
        if st["remaining"] == 0:
            st["done"].succeed()

    def advance() -> None:
        dt = env.now - ps["since"]
        for job in jobs.values():
            job[0] -= job[1] * dt
        ps["since"] = env.now

    def reschedule() -> None:
        ps["gen"] += 1
        if not jobs:
            return
        band = bandwidth_hz / len(jobs)
        best, first = math.inf, -1
        for d, job in jobs.items():
            snr = st["p"][d] * st["h"][d] / (psd * band)
            job[1] = band * math.log1p(snr) / log2
            left = job[0] / job[1]
            if left < best:
                best, first = left, d
        gen = ps["gen"]
        env.timeout(best).callbacks.append(lambda _e: complete(gen, first))

    def complete(gen: int, d: int) -> None:
        if gen != ps["gen"]:
            return  # stale: the set in flight changed
        advance()
        del jobs[d]
        reschedule()
        finish(d, True)

    def cut() -> None:  # the deadline: every upload in flight fails
        st["closed"] = True
        advance()
        for d in list(jobs):
            del jobs[d]
            finish(d, False)
        ps["gen"] += 1

    def device(d: int):
        while True:
            ev = env.event()
            wake[d] = ev
            yield ev
            yield env.timeout(st["c"][d])
            if mode == "ofdma":
                if st["closed"]:
                    finish(d, False)
                    continue
                advance()
                jobs[d] = [st["b"][d], 0.0]
                reschedule()
                continue
            with link.request() as req:  # tdma
                got = yield req | st["deadline"]
                if req not in got:
                    finish(d, False)
                    continue
                rate = bandwidth_hz * math.log1p(st["p"][d] * st["h"][d] / noise_w) / log2
                need, left = st["b"][d] / rate, st["end"] - env.now
                yield env.timeout(min(need, max(left, 0.0)))
                finish(d, need <= left + tau0 * 1e-9)  # the timing rule's tolerance

    def server():
        for t in range(slots):
            who = who_per_slot[t]
            st["c"], st["p"], st["h"], st["b"] = (
                comp_l[t], rows["power_w"][t], rows["gain"][t], rows["bits"][t],
            )  # fmt: skip
            st["remaining"], st["done"], st["closed"] = len(who), env.event(), False
            st["end"] = env.now + tau0
            deadline = env.timeout(tau0)
            st["deadline"] = deadline
            if mode == "ofdma":
                deadline.callbacks.append(lambda _e: cut())
            for d in who:
                wake[d].succeed()
            yield _common.slot_end(env, deadline, st["done"], bool(who))

    _common.run_bare(env, n, device, server)
    return time.perf_counter() - t0, {"success": st["success"]}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.print_header("network_throughput: wflsim network-only vs bare SimPy")
    n, slots = args.devices, args.slots
    ds = n * slots
    print(
        f"workload: {n:,} devices x {slots} slots (T = {args.slots_per_frame}) = {ds:,} "
        f"device-slots; base scenario {args.scenario}; payload D = {NUM_PARAMS:,}; "
        f"uplink {args.uplink}"
    )
    print(f"rounds per scheme: {args.warmup} warm-up + {args.reps} recorded, order rotating\n")
    root = Path(tempfile.mkdtemp(prefix="wflsim-bench-", dir=args.tmp_dir))
    summary = []
    try:
        for scheme in args.schemes:
            print(f"-- scheme {scheme}")
            t_warm, out = run_wflsim(args, scheme, root, f"{scheme}-plan", args.kernels[0])
            trace = out / "events" if (out / "events").is_dir() else out / "events.parquet"
            plan = plan_from_trace(trace, n, slots)
            shared = shared_inputs(trace, n, slots) if args.uplink != "dedicated" else None
            system = prepared(args, scheme, args.kernels[0]).system
            files = sorted(trace.glob("*.parquet")) if trace.is_dir() else [trace]
            size_mb = sum(f.stat().st_size for f in files) / 1e6
            tau0 = prepared(args, scheme, args.kernels[0]).scenario.run.deadline_s
            shutil.rmtree(out)
            n_part = int(plan["part"].sum())
            print(
                f"  trace: {plan['rows']:,} rows, {size_mb:.1f} MB Parquet; participations "
                f"{n_part:,} of {ds:,} device-slots ({n_part / ds:.1%}); first wflsim run "
                f"{t_warm:.2f} s (not recorded)"
            )
            counter = {"i": 0}
            counts: dict = {}

            def wfl(kernel: str, level: str, scheme=scheme, counter=counter) -> float:
                counter["i"] += 1
                tag = f"{scheme}-{counter['i']}"
                dt, out = run_wflsim(args, scheme, root, tag, kernel, level)
                shutil.rmtree(out)
                return dt

            def bare(plan=plan, tau0=tau0, counts=counts) -> float:
                dt, c = bare_simpy(plan, tau0)
                counts.update(c)
                return dt

            def bare_link(plan=plan, shared=shared, tau0=tau0, counts=counts, system=system):
                dt, c = bare_shared(
                    plan, shared, tau0, args.uplink, system.bandwidth_hz, system.noise_w
                )
                counts["shared_success"] = c["success"]
                return dt

            configs = [(k, "events") for k in args.kernels if "events" in args.levels]
            if "device_slots" in args.levels and "closed_form" in args.kernels:
                configs.append(("closed_form", "device_slots"))
            labels = {c: c[0] if c[1] == "events" else f"{c[0]}/{c[1]}" for c in configs}
            runs = {labels[c]: (lambda c=c: wfl(*c)) for c in configs}
            bares = {"bare": bare} if shared is None else {"bare": bare, "bare_shared": bare_link}
            times = _common.interleaved({**runs, **bares}, args.reps, args.warmup)
            sb = _common.Stats(times["bare"])
            if shared is not None:
                print(
                    f"  uploads in time: wflsim {plan['success']:,}, bare shared-uplink model "
                    f"{counts['shared_success']:,}"
                )
                ss = _common.Stats(times["bare_shared"])
                print(f"  bare shared-uplink SimPy{'':7s} seconds: {ss.fmt(unit=' s')}")
                for k in runs:
                    line = _common.ratio_line(
                        f"throughput {k}/bare_shared", times["bare_shared"], times[k], "-"
                    )
                    print(f"  {line}")
            print(
                f"  bare model scheduled {counts['wakes']:,} device wake-ups and "
                f"{counts['timeouts']:,} timeouts (event kernel: {n_part:,} participations -> "
                f"{2 * n_part + slots:,} timeouts)"
            )
            for k in runs:
                print(f"  wflsim {k:24s} seconds: {_common.Stats(times[k]).fmt(unit=' s')}")
            print(f"  bare SimPy{'':21s} seconds: {sb.fmt(unit=' s')}")
            rates = {k: ds / _common.Stats(times[k]).median for k in runs}
            print(
                "  throughput (device-slots/s, from medians): "
                + ", ".join(f"{k} {r:,.0f}" for k, r in rates.items())
                + f", bare SimPy {ds / sb.median:,.0f}"
            )
            # throughput ratio a/b = time ratio b/a
            for k in runs:
                target = ">= 0.5" if k == "event" else "-"
                line = _common.ratio_line(f"throughput {k}/bare", times["bare"], times[k], target)
                print(f"  {line}")
            if {"closed_form", "event"} <= set(runs):
                line = _common.ratio_line(
                    "throughput closed_form/event", times["event"], times["closed_form"], ">= 10"
                )
                print(f"  {line}")
            key = "event" if "event" in runs else next(iter(runs))
            _common.headline(
                f"throughput {key}/bare, {scheme}",
                times["bare"],
                times[key],
                ">= 0.5" if key == "event" else None,
            )
            print()
            summary.extend(
                (scheme, k, r, ds / sb.median, sb.median * r / ds) for k, r in rates.items()
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print("summary (device-slots per second, medians):")
    print(
        f"  {'scheme':16s} {'kernel/level':24s} {'wflsim':>12s} {'bare SimPy':>12s} "
        f"{'wflsim/bare':>12s}"
    )
    for scheme, kernel, w, b, r in summary:
        print(f"  {scheme:16s} {kernel:24s} {w:12,.0f} {b:12,.0f} {r:12.3f}")


if __name__ == "__main__":
    main()
