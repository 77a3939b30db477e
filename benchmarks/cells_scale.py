"""Several cells (``[cells]``) at scale, and the cells' interference uplink against bare SimPy.

Two parts (``--parts scale interference``):

``scale``: the network-only throughput of seven cells against one. Workload: the paper's MNIST
scenario (``scenarios/paper/mnist_iid.toml``: tau_0 = 0.8 s, B = 512, payload D = 440,812) with
``--devices`` N devices (default 10,000) and ``--slots`` slots (default 20, one frame), network
only (``learning.enabled = false``), scheme ``--scheme`` (default ``two_timescale``, the paper's
scheme, its parameters kept), the closed-form kernel, the trace written at ``--level`` (default
``events``) to a real run folder in a temporary folder (``wflsim.app.run.execute``, as
``network_throughput.py`` does: Parquet parts, checkpoints and manifest per frame). Two
variants, interleaved:

* ``one``: the scenario as it is, one cell (the 1000 m disc);
* ``seven``: ``[cells] rings = 1, reuse_factor = 7``: seven hexagonal cells of circumradius
  1000 m, every cell on its own band with dedicated uplinks, so nothing interacts and the closed
  form plays every slot; the same N devices placed in the layout's area (the disc of radius
  farthest site + 1000 m), associated at the frame start.

Reported: seconds and device-slots/s of each and seven/one throughput (target: within 2x of the
one-cell figure, i.e. >= 0.5). Reuse 3 over seven cells puts ring cells on one band (they
interfere), so it needs the event kernel and is not part of this closed-form comparison.

``interference``: the cells' interference uplink (wflsim's event kernel with
``CellularUplink``) against a bare SimPy model of the same events. Scenario: the same base, 7
cells (``rings = 1``), ``reuse_factor = 1`` (every cell on one band), dedicated uplinks, network
only, ``--int-scheme`` (default ``fixed_power``: every device uploads in every slot, all
uploads interfere), ``--devices-int`` N (default 300 and 1000), ``--int-slots`` slots (default 4).
(Under ``two_timescale`` the scheme plans on the noise alone, ``plan_on = "noise"``, and with
reuse 1 every upload misses its deadline and is cut there: the check then compares only the
cut.)

1. A capture run (the event kernel, in memory) with ``CellularUplink.open_slot`` and
   ``submit`` wrapped (for this run only) records per slot what the uplink was given: the
   power, gain, payload and time on the whole band of every device, the cells' serving cell,
   ``(N, C)`` slot gains and load, the layout's bands and uplink modes, W and N0, the slot's
   start, deadline and ``closes_at``, and each submit's time. The compute times come from the
   trace's decision rows; the upload ends and arrived flags from its ``upload_end`` rows.
2. The bare model, written here from scratch (nothing of ``sim/radio/cells/uplink.py`` or
   ``sharing.py`` is used): a SimPy server process per slot (wake the participants, a deadline
   timeout that cuts what is in flight when the slot closes at the deadline, wait for the
   deadline and the last report) and one process per device (wait to be woken, a compute
   timeout, then join a processor-sharing server). The server keeps the uploads in flight as
   numpy arrays; on every start or end it advances every upload's bits left at its old rate,
   recomputes every rate from the set in flight, ``r = b log2(1 + p h / ((N0' + I') b))``
   with ``b = W`` (dedicated; ``W / k_c`` for an OFDMA cell) and ``I'`` at the upload's site the
   sum over uploads ``m`` in flight in other co-band cells ``a`` of ``p_m g[m, site] / B_a``
   (``B_a = load_a W`` for a dedicated cell, ``W`` for OFDMA), and schedules ONE completion
   timeout (a stale one is ignored by its generation number); uploads within 1e-9 of their
   bits end with it. At the deadline an upload in flight is cut and arrives iff its projected
   end is within tau_0 (1 + 1e-9); an upload that ends arrives iff it ends within that.
   It is checked first: upload ends and arrived flags of every upload of every slot against
   wflsim's trace (the largest relative difference of the time from the slot's start is
   printed).
3. Timing, interleaved: ``wflsim`` is the engine's run of the whole scenario (``engine.run()``
   on an engine built before the clock: channels, association, the scheme, the event kernel,
   energy, the in-memory trace); inside it the time spent in the event kernel's ``play_slot``
   (from the slot's start to its last event: the device processes, the uplink, the deadline:
   the same scope as the bare model) is measured too (a wrapper of ``perf_counter`` calls
   around each slot's generator). ``bare`` is the bare model replaying the captured slots
   (inputs turned into Python lists and numpy arrays before the clock). Reported: the
   ratios wflsim slot play / bare and wflsim whole run / bare, per round and of the medians.
   The bare model's processor sharing is vectorised with numpy like wflsim's, so the ratio is
   the cost of wflsim's structure (kernel, uplink class, trace log), not of a pure-Python loop.

    python benchmarks/cells_scale.py                       # both parts, full size
    python benchmarks/cells_scale.py --parts interference  # 300 and 1000 devices
    python benchmarks/cells_scale.py --quick               # smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _common
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import simpy

import wflsim
from wflsim.app.run import build_engine, make_learner, prepare_scenario
from wflsim.app.scenario import validate_scenario
from wflsim.sim.config.loading import read_scenario_file
from wflsim.sim.kernels import EventKernel
from wflsim.sim.learner import NullLearner
from wflsim.sim.radio.cells.config import CellsConfig
from wflsim.sim.radio.cells.layout import build_layout
from wflsim.sim.radio.cells.uplink import CellularUplink
from wflsim.sim.registry import SCHEMES

SCENARIO = _common.REPO / "scenarios" / "paper" / "mnist_iid.toml"
NUM_PARAMS = 440_812
#: the timing rule's relative tolerance (an upload ending within tau_0 (1 + this) arrives)
DEADLINE_TOL = 1e-9
#: an upload with less than this share of its bits left ends with the completion that fires
DONE_TOL = 1e-9


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=3,
        warmup=1,
        tmp_dir=True,
        quick={"devices": 1_000, "slots": 4, "reps": 2, "devices_int": [100], "int_slots": 2},
    )
    p.add_argument(
        "--parts", nargs="+", default=["scale", "interference"], choices=["scale", "interference"]
    )
    p.add_argument("--devices", type=int, default=10_000, help="scale: devices (10,000)")
    p.add_argument("--slots", type=int, default=20, help="scale: slots, one frame (20)")
    p.add_argument(
        "--scheme", default="two_timescale", choices=sorted(SCHEMES), help="scale: scheme"
    )
    p.add_argument(
        "--level", default="events", choices=["events", "device_slots"], help="scale: trace level"
    )
    p.add_argument(
        "--devices-int",
        type=int,
        nargs="+",
        default=[300, 1000],
        help="interference: device counts (300 1000)",
    )
    p.add_argument("--int-slots", type=int, default=4, help="interference: slots (4)")
    p.add_argument(
        "--int-scheme",
        default="fixed_power",
        choices=sorted(SCHEMES),
        help="interference: scheme (fixed_power)",
    )
    p.add_argument("--scenario", default=str(SCENARIO), help="base scenario file")
    args = p.parse_args(argv)
    return args


def base_table(args: argparse.Namespace, n: int, slots: int, scheme: str) -> tuple[str, dict]:
    """The base scenario, network only, ``n`` devices, one frame of ``slots`` slots."""
    text, data = read_scenario_file(args.scenario)
    data["seed"] = args.seed
    data["run"] = {**data.get("run", {}), "frames": 1, "slots_per_frame": slots}
    data["network"] = {**data.get("network", {}), "num_devices": n}
    data["learning"] = {**data.get("learning", {}), "enabled": False, "num_params": NUM_PARAMS}
    old = data.get("scheme", {})
    data["scheme"] = {**(old if old.get("name") == scheme else {}), "name": scheme}
    return text, data


# ---------------------------------------------------------------------------------- scale


def scale_prepared(args: argparse.Namespace, cells: dict | None) -> Any:
    text, data = base_table(args, args.devices, args.slots, args.scheme)
    data["run"]["kernel"] = "closed_form"
    data["trace"] = {**data.get("trace", {}), "level": args.level}
    if cells is not None:
        data["cells"] = cells
    return prepare_scenario(validate_scenario(data), text=text, path=Path(args.scenario))


def participations(out: Path) -> int:
    """Participating device-slots in a run folder's trace (``energy`` rows at level
    ``events``, ``device_slot`` rows at level ``device_slots``)."""
    import pyarrow.parquet as pq

    files = sorted((out / "events").glob("part-*.parquet"))
    tab = pa.concat_tables([pq.read_table(f, columns=["event", "participating"]) for f in files])
    ev = pc.cast(tab["event"], "string")
    sub = tab.filter(pc.is_in(ev, pa.array(["energy", "device_slot"])))
    return int(pc.sum(sub["participating"]).as_py() or 0)


def part_scale(args: argparse.Namespace) -> None:
    n, slots = args.devices, args.slots
    ds = n * slots
    seven = {"rings": 1, "reuse_factor": 7}
    print("-- part scale: one cell vs seven cells (reuse 7, dedicated), closed-form kernel")
    print(
        f"workload: {n:,} devices x {slots} slots = {ds:,} device-slots; base {args.scenario}; "
        f"scheme {args.scheme}; trace level {args.level}; payload D = {NUM_PARAMS:,}"
    )
    lay7 = build_layout(CellsConfig(rings=1, reuse_factor=7), 1000.0, "dedicated")
    lay3 = build_layout(CellsConfig(rings=1, reuse_factor=3), 1000.0, "dedicated")
    print(
        f"seven cells: bands {lay7.band.tolist()} (interacting: {lay7.interacts}), area radius "
        f"{lay7.area_radius_m:.0f} m; reuse 3 over the same 7 cells: bands "
        f"{lay3.band.tolist()}, co-band ring cells (interacting: {lay3.interacts}), so it needs "
        "the event kernel and is not part of this closed-form comparison"
    )
    variants = {"one": None, "seven": seven}
    preps = {k: scale_prepared(args, c) for k, c in variants.items()}
    for k, prep in preps.items():
        assert prep.scenario.run.kernel == "closed_form", k
    parts: dict[str, int] = {}

    def count(name: str, prep: Any, out: Path) -> None:
        if name not in parts:
            parts[name] = participations(out)

    with _common.scratch("wflsim-cells-", args.tmp_dir) as root:
        runs = _common.execute_variants(
            root,
            list(variants),
            lambda k: scale_prepared(args, variants[k]),
            lambda: NullLearner(NUM_PARAMS),
            count,
        )
        times = _common.interleaved(runs, args.reps, args.warmup)
    for k in variants:
        print(
            f"  {k:6s} seconds: {_common.Stats(times[k]).fmt(unit=' s')}; participations "
            f"{parts[k]:,} of {ds:,} ({parts[k] / ds:.1%})"
        )
    rates = {k: ds / _common.Stats(times[k]).median for k in variants}
    print(
        "  throughput (device-slots/s, from medians): "
        + ", ".join(f"{k} {r:,.0f}" for k, r in rates.items())
    )
    line = _common.ratio_line(
        "throughput seven/one", times["one"], times["seven"], ">= 0.5 (within 2x of one cell)"
    )
    print(f"  {line}\n")
    _common.headline("throughput seven/one cells", times["one"], times["seven"], ">= 0.5")


# ---------------------------------------------------------------------------- interference


def interference_table(args: argparse.Namespace, n: int) -> dict:
    _, data = base_table(args, n, args.int_slots, args.int_scheme)
    data["run"]["kernel"] = "event"
    data["uplink"] = {**data.get("uplink", {}), "mode": "dedicated"}
    data["cells"] = {"rings": 1, "reuse_factor": 1}
    return data


@contextlib.contextmanager
def capturing(slots: list[dict]) -> Iterator[None]:
    """Wrap ``CellularUplink.open_slot`` and ``submit`` (for the ``with`` block only) to record
    per slot what the uplink was given (see the module docstring)."""
    orig_open, orig_submit = CellularUplink.open_slot, CellularUplink.submit

    def open_slot(self: CellularUplink, env: simpy.Environment, **kw: Any) -> None:
        cells = self.cells
        lay = cells.layout
        slots.append(
            {
                "start_s": float(env.now),
                "deadline_s": float(kw["deadline_s"]),
                "closes_at": kw["closes_at"],
                "p": np.array(kw["tx_power_w"], dtype=np.float64),
                "h": np.array(kw["channel_gain"], dtype=np.float64),
                "bits": np.array(kw["payload_bits"], dtype=np.float64),
                "full_s": np.array(kw["upload_full_s"], dtype=np.float64),
                "serving": cells.serving.copy(),
                "slot_gain": cells.slot_gain.copy(),
                "load": cells.load.copy(),
                "band": lay.band.copy(),
                "modes": tuple(lay.modes),
                "bandwidth_hz": self.bandwidth_hz,
                "noise_w": self.noise_w,
                "submit_s": {},
            }
        )
        orig_open(self, env, **kw)

    def submit(self: CellularUplink, device: int) -> None:
        assert self.env is not None
        slots[-1]["submit_s"][int(device)] = float(self.env.now)
        orig_submit(self, device)

    CellularUplink.open_slot = open_slot  # type: ignore[method-assign,assignment]
    CellularUplink.submit = submit  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        CellularUplink.open_slot = orig_open  # type: ignore[method-assign]
        CellularUplink.submit = orig_submit  # type: ignore[method-assign]


@contextlib.contextmanager
def timing_play(acc: list[float]) -> Iterator[None]:
    """Add each slot's time in ``EventKernel.play_slot`` (first step to return) to ``acc[0]``."""
    orig = EventKernel.play_slot

    def play_slot(self: EventKernel, *a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        got = yield from orig(self, *a, **kw)
        acc[0] += time.perf_counter() - t0
        return got

    EventKernel.play_slot = play_slot  # type: ignore[method-assign]
    try:
        yield
    finally:
        EventKernel.play_slot = orig  # type: ignore[method-assign]


def trace_grids(table: pa.Table, n: int, slots: int) -> dict[str, np.ndarray]:
    """From wflsim's trace: per (slot, device) the compute time (decision rows), whether it
    participates, and the upload's end time and success (``upload_end`` rows; NaN: none)."""
    ev = pc.cast(table["event"], "string")

    def rows(name: str) -> pa.Table:
        return table.filter(pc.equal(ev, name))

    dec = rows("decision")
    comp = np.zeros((slots, n))
    part = np.zeros((slots, n), dtype=bool)
    s, d = dec["slot"].to_numpy(), dec["device"].to_numpy()
    comp[s, d] = dec["compute_s"].to_numpy(zero_copy_only=False)
    part[s, d] = dec["participating"].to_numpy(zero_copy_only=False)
    up = rows("upload_end")
    end = np.full((slots, n), np.nan)
    ok = np.zeros((slots, n), dtype=bool)
    s, d = up["slot"].to_numpy(), up["device"].to_numpy()
    end[s, d] = up["time_s"].to_numpy(zero_copy_only=False)
    ok[s, d] = up["success"].to_numpy(zero_copy_only=False)
    return {"compute_s": comp, "part": part, "end_s": end, "success": ok}


def capture(data: dict, n: int, slots: int) -> tuple[list[dict], dict[str, np.ndarray]]:
    """One wflsim run with the uplink's inputs recorded; its trace's grids."""
    rec: list[dict] = []
    prep = wflsim.prepare(copy.deepcopy(data))
    engine = build_engine(prep, make_learner(prep))
    with capturing(rec):
        engine.run()
    grids = trace_grids(engine.table(), n, slots)
    if len(rec) != slots:
        raise SystemExit(f"captured {len(rec)} slots of {slots}: the cells' uplink was not used")
    return rec, grids


class BareSlots:
    """The bare SimPy model of the captured slots (the module docstring), from scratch."""

    def __init__(self, rec: list[dict], grids: dict[str, np.ndarray]) -> None:
        self.n = int(rec[0]["p"].shape[0])
        self.slots = []
        for t, r in enumerate(rec):
            who = np.flatnonzero(grids["part"][t])
            w = float(r["bandwidth_hz"])
            c = int(r["band"].shape[0])
            mode = np.array([{"dedicated": 0, "ofdma": 1}[m] for m in r["modes"]])
            co = (r["band"][:, None] == r["band"][None, :]) & ~np.eye(c, dtype=bool)
            spread = np.where(mode == 0, np.maximum(r["load"], 1) * w, w)
            self.slots.append(
                {
                    "who": who.tolist(),
                    "compute_s": grids["compute_s"][t].tolist(),
                    "start_s": r["start_s"],
                    "deadline_s": r["deadline_s"],
                    "cut": r["closes_at"] == "deadline",
                    "can": ((r["p"] * r["h"] > 0.0) & np.isfinite(r["full_s"])).tolist(),
                    "p": r["p"],
                    "h": r["h"],
                    "bits": r["bits"],
                    "cell": r["serving"],
                    "g": r["slot_gain"],
                    "co": co.astype(np.float64),
                    "spread": spread,
                    "mode": mode,
                    "w": w,
                    "psd": float(r["noise_w"]) / w,
                    "c": c,
                }
            )

    def run(self) -> tuple[float, np.ndarray, np.ndarray]:
        """Play every slot; (seconds, end times (slots, N), arrived (slots, N))."""
        n, slots = self.n, self.slots
        end_s = np.full((len(slots), n), np.nan)
        arrived = np.zeros((len(slots), n), dtype=bool)
        t0 = time.perf_counter()
        env = simpy.Environment()
        wake: list[Any] = [None] * n
        log2 = math.log(2.0)
        st: dict[str, Any] = {}
        ps: dict[str, Any] = {}

        def reset_ps() -> None:
            ps["jobs"] = np.zeros(0, dtype=np.int64)
            ps["size"], ps["left"], ps["rate"] = np.zeros(0), np.zeros(0), np.zeros(0)
            ps["since"], ps["gen"], ps["next"] = env.now, 0, -1

        def finish(d: int, ok: bool) -> None:
            end_s[st["t"], d] = env.now
            arrived[st["t"], d] = ok
            st["remaining"] -= 1
            if st["remaining"] == 0:
                st["done"].succeed()

        def in_time(at: float) -> bool:
            return not st["cut"] or at - st["start"] <= st["deadline"] * (1.0 + DEADLINE_TOL)

        def advance() -> None:
            if ps["jobs"].shape[0]:
                ps["left"] = ps["left"] - ps["rate"] * (env.now - ps["since"])
            ps["since"] = env.now

        def rates(jobs: np.ndarray) -> np.ndarray:
            s = st["s"]
            cell = s["cell"][jobs]
            # interference density at every site: co-band uploads spread over their cell's band
            rx = s["p"][jobs, None] * s["g"][jobs] * (s["co"][cell] / s["spread"][cell, None])
            psd = s["psd"] + rx.sum(axis=0)[cell]
            band = np.full(jobs.shape[0], s["w"])
            ofdma = s["mode"][cell] == 1
            if ofdma.any():
                k = np.bincount(cell, minlength=s["c"])
                band[ofdma] = s["w"] / k[cell[ofdma]]
            snr = s["p"][jobs] * s["h"][jobs] / (psd * band)
            return np.asarray(band * np.log1p(snr) / log2)

        def reschedule() -> None:
            ps["gen"] += 1
            jobs = ps["jobs"]
            if not jobs.shape[0]:
                return
            ps["rate"] = rates(jobs)
            left = np.maximum(ps["left"], 0.0) / ps["rate"]
            i = int(np.argmin(left))
            ps["next"] = int(jobs[i])
            gen = ps["gen"]
            env.timeout(float(left[i])).callbacks.append(lambda _e: complete(gen))

        def complete(gen: int) -> None:
            if gen != ps["gen"]:
                return  # stale: the set in flight changed since
            advance()
            done = (ps["left"] <= DONE_TOL * ps["size"]) | (ps["jobs"] == ps["next"])
            ended = ps["jobs"][done].tolist()
            keep = ~done
            ps["jobs"], ps["size"], ps["left"] = (
                ps["jobs"][keep],
                ps["size"][keep],
                ps["left"][keep],
            )
            reschedule()
            for d in ended:
                finish(d, in_time(env.now))

        def join(d: int) -> None:
            advance()
            bits = float(st["s"]["bits"][d])
            ps["jobs"] = np.append(ps["jobs"], d)
            ps["size"] = np.append(ps["size"], bits)
            ps["left"] = np.append(ps["left"], bits)
            reschedule()

        def at_deadline(_e: simpy.Event) -> None:
            st["past"] = True
            for d in st["held"]:
                finish(d, False)
            st["held"] = []
            if not st["cut"]:
                return
            st["closed"] = True
            advance()
            with np.errstate(divide="ignore", invalid="ignore"):
                proj = ps["since"] + np.where(ps["left"] > 0.0, ps["left"] / ps["rate"], 0.0)
            jobs = ps["jobs"].tolist()
            reset_ps()
            for d, at in zip(jobs, proj.tolist(), strict=True):
                finish(d, in_time(at))

        def device(d: int) -> Any:
            while True:
                ev = env.event()
                wake[d] = ev
                yield ev
                yield env.timeout(st["compute"][d])
                if st["closed"] or (st["past"] and not st["can"][d]):
                    finish(d, False)
                elif not st["can"][d]:
                    st["held"].append(d)  # transmits until the deadline, fails
                else:
                    join(d)

        def server() -> Any:
            for t, s in enumerate(slots):
                if s["start_s"] > env.now:
                    yield env.timeout(s["start_s"] - env.now)
                st.update(
                    t=t, s=s, compute=s["compute_s"], can=s["can"], cut=s["cut"], held=[],
                    start=env.now, deadline=s["deadline_s"], closed=False, past=False,
                    remaining=len(s["who"]), done=env.event(),
                )  # fmt: skip
                reset_ps()
                for d in s["who"]:
                    wake[d].succeed()
                deadline = env.timeout(s["deadline_s"])
                deadline.callbacks.append(at_deadline)
                yield _common.slot_end(env, deadline, st["done"], bool(s["who"]))

        _common.run_bare(env, n, device, server)
        return time.perf_counter() - t0, end_s, arrived


def check_bare(
    rec: list[dict], grids: dict[str, np.ndarray], end_s: np.ndarray, ok: np.ndarray
) -> float:
    """Compare the bare model's ends and arrived flags with wflsim's trace; print and return
    the largest relative difference of the time from the slot's start."""
    starts = np.array([r["start_s"] for r in rec])[:, None]
    part = grids["part"]
    submits = sum(len(r["submit_s"]) for r in rec)
    sub_diff = max(
        (
            abs(s - (r["start_s"] + grids["compute_s"][t, d]))
            for t, r in enumerate(rec)
            for d, s in r["submit_s"].items()
        ),
        default=0.0,
    )
    have_w, have_b = ~np.isnan(grids["end_s"]), ~np.isnan(end_s)
    same_rows = bool((have_w == part).all() and (have_b == part).all())
    w_rel = grids["end_s"] - starts
    b_rel = end_s - starts
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(b_rel - w_rel) / np.abs(w_rel)
        abs_rel = np.abs(end_s - grids["end_s"]) / np.abs(grids["end_s"])
    rel = np.where(part, rel, 0.0)
    abs_rel = np.where(part, abs_rel, 0.0)
    flags = int((ok != grids["success"])[part].sum())
    n_up = int(part.sum())
    worst = np.unravel_index(int(np.nanargmax(rel)), rel.shape) if n_up else (0, 0)
    deadline = np.array([r["start_s"] + r["deadline_s"] for r in rec])[:, None]
    before = int((part & (grids["end_s"] < deadline)).sum())
    print(
        f"  check: {n_up:,} uploads ({submits:,} submits, submit time = start + compute_s to "
        f"{sub_diff:.3g} s), {before:,} of them ended before the deadline (the rest were cut "
        f"there); one upload_end per participant on both sides: {same_rows}"
    )
    print(
        f"  check: max relative difference of upload_end - slot start {float(np.nanmax(rel)):.3g} "
        f"(slot {worst[0]}, device {worst[1]}); of the absolute upload_end time "
        f"{float(np.nanmax(abs_rel)):.3g}; arrived flags that differ: {flags} of {n_up:,}; "
        f"arrived: wflsim {int(grids['success'][part].sum()):,}, bare {int(ok[part].sum()):,}"
    )
    return float(np.nanmax(rel)) if flags == 0 and same_rows else math.inf


def part_interference(args: argparse.Namespace) -> None:
    print(
        "-- part interference: wflsim's event kernel with CellularUplink vs a bare SimPy model; "
        f"7 cells (rings 1), reuse 1, dedicated uplinks, scheme {args.int_scheme}, "
        f"{args.int_slots} slots"
    )
    for n in args.devices_int:
        data = interference_table(args, n)
        slots = args.int_slots
        print(f"-- {n:,} devices x {slots} slots")
        rec, grids = capture(data, n, slots)
        r0 = rec[0]
        print(
            f"  captured: {len(rec)} slots, closes_at {r0['closes_at']}, deadline "
            f"{r0['deadline_s']} s, W {r0['bandwidth_hz']:.3g} Hz, N0 {r0['noise_w']:.3g} W, "
            f"bands {r0['band'].tolist()}, uplinks {sorted(set(r0['modes']))}, load "
            f"{r0['load'].tolist()}"
        )
        bare = BareSlots(rec, grids)
        _, end_s, ok = bare.run()
        worst = check_bare(rec, grids, end_s, ok)
        print(
            "  the bare model "
            + ("MATCHES" if worst <= 1e-9 else "DOES NOT MATCH")
            + " wflsim (tolerance 1e-9)"
        )
        play: list[float] = [0.0]
        plays: list[float] = []

        def wfl(data: dict = data, play: list[float] = play, plays: list[float] = plays) -> float:
            prep = wflsim.prepare(copy.deepcopy(data))
            engine = build_engine(prep, make_learner(prep))
            play[0] = 0.0
            with timing_play(play):
                t0 = time.perf_counter()
                engine.run()
                dt = time.perf_counter() - t0
            plays.append(play[0])
            return dt

        def bare_run(bare: BareSlots = bare) -> float:
            return bare.run()[0]

        times = _common.interleaved({"wflsim": wfl, "bare": bare_run}, args.reps, args.warmup)
        plays = plays[len(plays) - args.reps :]  # the warm-up rounds' are dropped
        print(f"  wflsim whole run  seconds: {_common.Stats(times['wflsim']).fmt(unit=' s')}")
        print(f"  wflsim slot play  seconds: {_common.Stats(plays).fmt(unit=' s')}")
        print(f"  bare SimPy        seconds: {_common.Stats(times['bare']).fmt(unit=' s')}")
        print(f"  {_common.ratio_line('wflsim slot play / bare', plays, times['bare'], '-')}")
        _common.headline(f"interference slot play wflsim/bare, {n} devices", plays, times["bare"])
        print(
            f"  {_common.ratio_line('wflsim whole run / bare', times['wflsim'], times['bare'], '-')}"
        )
        print()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.print_header("cells_scale: seven cells vs one; the interference uplink vs bare SimPy")
    print(f"rounds: {args.warmup} warm-up + {args.reps} recorded, order rotating\n")
    parts: dict[str, Callable[[argparse.Namespace], None]] = {
        "scale": part_scale,
        "interference": part_interference,
    }
    for name in args.parts:
        parts[name](args)


if __name__ == "__main__":
    main()
