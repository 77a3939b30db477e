"""The practical limit of a network-only run in Python, timed interleaved against wflsim.

``limit`` is an independent numpy + pyarrow implementation of the same network-only slots,
written from ``docs/trace.md`` and ``docs/scenario.md`` and sharing no code with ``sim/``: the
paper's MNIST scenario (``scenarios/paper/mnist_iid.toml``, read with ``tomllib``: 1000 m disc,
log-distance path loss 128.1 + 37.6 log10(d / 1 km) dB, Rayleigh fading, W = 10 MHz, N0 = -104 dBm,
P_bar = 1 W, c = 2e6 cycles per sample, f = 2 GHz, alpha = 2e-28, B = 512, tau_0 = 0.8 s,
budgets U[0.30, 0.45] J, V = 100) scaled to ``--devices`` devices x ``--slots`` slots (frames of
20), network only with the CNN's payload D = 440,812 x 32 bits. Per slot, vectorised over
devices: the channel draw (numpy's PCG64, one generator per slot), the scheme's decision, the
compute and upload times, the outcome against the deadline, energy, queues and the
drift-plus-penalty cost; the rows of every event wflsim's trace has at that level (``events``:
``slot_start``, ``decision``, ``compute_start``, ``compute_end``, ``upload_start``,
``upload_end``, ``deadline``, ``aggregate``, ``energy``, the device events in time order;
``device_slots``: one ``device_slot`` row per device and slot) with the columns wflsim fills for
them (``tests/test_network_limit.py`` checks the sets against a wflsim run), in the schema of
``docs/trace.md`` (its column table: names and types, the same order; ``event`` dictionary
encoded), each column handed to Arrow as one numpy buffer with a numpy-packed validity bitmap;
one Parquet file per frame (a row group per slot, encoded by a background thread while the next
slot is computed), lz4, dictionaries only on frame, slot and event and statistics only on the
keys. No crash safety (no
fsync, no checkpoint, no manifest), no channel streams keyed per device, and the frame's plan
needs no optimisation: ``fixed_power`` sends at P_bar, ``two_timescale``'s limit plans every
frame as the controller's first frame (gamma = 0, p_max = P_bar) and sends at the
Proposition-1 power ``p_min``, so the controller's per-frame MM solve is work only wflsim does,
and from the second frame on the two do not write the same rows (wflsim's controller picks
``gamma`` and ``p_max`` per device: different devices take part); both counts are printed.

``wflsim``: ``wflsim.app.runner.execute`` into a run folder on the same scenario (its
closed-form kernel, the trace at ``--level``, a checkpoint and a manifest per frame, the keyed
draws and the controller's cost on their compiled loops, loaded before the clock starts; as
``benchmarks/network_throughput.py`` times it), the scenario prepared before the clock starts. Both write into a fresh temporary folder per repetition.

    python benchmarks/network_limit.py --devices 100000 --slots 20
    python benchmarks/network_limit.py --devices 10000 --slots 100 --level device_slots
    python benchmarks/network_limit.py --quick      # smoke test
"""

from __future__ import annotations

import math
import queue
import re
import shutil
import tempfile
import threading
import time
import tomllib
import warnings
from pathlib import Path
from typing import Any

import _common
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _common import headline, interleaved, print_header, ratio_line

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "paper" / "mnist_iid.toml"
TRACE_DOC = REPO / "docs" / "trace.md"
NUM_PARAMS = 440_812
BITS_PER_PARAM = 32
SLOTS_PER_FRAME = 20

#: docs/trace.md's type names -> Arrow types (``event`` is dictionary encoded)
_TYPES = {
    "double": pa.float64(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "bool": pa.bool_(),
    "string": pa.string(),
}

#: the columns each event fills beyond time_s, frame, slot, device and event (docs/trace.md)
DECISION = (
    "distance_m large_scale_gain channel_gain seen_channel_gain gamma payload_bits "
    "min_tx_power_w tx_power_w participating compute_s upload_s"
).split()
ENERGY = (
    "tx_power_w participating upload_s energy_compute_j energy_upload_j energy_j "
    "wasted_energy_j success queue_j conv_error cost"
).split()
DEVICE_SLOT = [
    *DECISION,
    "upload_planned_s",
    *"energy_compute_j energy_upload_j energy_j wasted_energy_j success queue_j".split(),
    "conv_error",
    "cost",
]
CONFIG = "energy_budget_j cpu_hz cycles_per_sample capacitance batch_size peak_power_w".split()
POSITION = "x_m y_m distance_m large_scale_gain".split()
FREEZE = "gamma compute_fraction sent_values bits_per_value queue_j".split()
#: ``two_timescale`` fills these as well (the controller's threshold and state)
CONTROLLER = {
    "decision": ["max_tx_power_w"],
    "device_slot": ["max_tx_power_w"],
    "freeze": ["max_tx_power_w", "expected_cost", "iterations"],
}


def trace_schema() -> pa.Schema:
    """The trace's schema from docs/trace.md's column table (names, types, order)."""
    text = TRACE_DOC.read_text()
    table = text[text.index("## Columns") :]
    fields = []
    for name, kind in re.findall(r"^\| `([a-z_0-9]+)` \| ([a-z0-9]+) \|", table, re.M):
        typ = pa.dictionary(pa.int8(), pa.string()) if name == "event" else _TYPES[kind]
        fields.append(pa.field(name, typ))
    return pa.schema(fields)


class Frame:
    """A block of rows (a frame's head, one slot): per column a list of chunks."""

    def __init__(self, schema: pa.Schema, events: list[str]) -> None:
        self.schema = schema
        self.codes = {e: i for i, e in enumerate(events)}
        self.events = events
        #: per column: (start row, values, valid rows or None for all)
        self.chunks: dict[str, list[tuple[int, np.ndarray, np.ndarray | None]]] = {
            f.name: [] for f in schema
        }
        self.rows = 0

    def add(self, event: str | np.ndarray, n: int, **cols: Any) -> None:
        """``n`` rows of ``event`` (a name, or int8 codes per row); each column a scalar, an
        ``(n,)`` array or a masked array (masked rows null)."""
        if n == 0:
            return
        code = np.full(n, self.codes[event], np.int8) if isinstance(event, str) else event
        self.chunks["event"].append((self.rows, code, None))
        for name, v in cols.items():
            if isinstance(v, np.ma.MaskedArray):
                self.chunks[name].append((self.rows, v.data, ~np.ma.getmaskarray(v)))
                continue
            arr = np.asarray(v)
            values = np.broadcast_to(arr, (n,)) if arr.ndim == 0 else arr
            self.chunks[name].append((self.rows, values, None))
        self.rows += n

    def table(self) -> pa.Table:
        """The block's table: each column one array, null where no chunk wrote."""
        n = self.rows
        arrays = []
        for f in self.schema:
            chunks = self.chunks[f.name]
            if f.name == "event":
                codes = np.concatenate([c for _, c, _ in chunks])
                arrays.append(
                    pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(self.events))
                )
                continue
            typ = f.type
            if not chunks:
                arrays.append(pa.nulls(n, typ))
                continue
            dtype = typ.to_pandas_dtype()
            values = np.zeros(n, dtype=dtype)
            valid = np.zeros(n, dtype=bool)
            for start, c, ok in chunks:
                values[start : start + c.size] = c
                valid[start : start + c.size] = True if ok is None else ok
            arrays.append(arrow_array(values, valid, typ))
        return pa.Table.from_arrays(arrays, schema=self.schema)


def arrow_array(values: np.ndarray, valid: np.ndarray, typ: pa.DataType) -> pa.Array:
    """``values`` as an Arrow array of ``typ`` without a copy of the values, null where not
    ``valid`` (the validity bitmap and booleans packed by numpy, least significant bit first)."""
    n = values.size
    if pa.types.is_boolean(typ):
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        data = pa.py_buffer(np.ascontiguousarray(values))
    nulls = n - int(np.count_nonzero(valid))
    validity = None if nulls == 0 else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(typ, n, [validity, data], null_count=nulls)


#: The encoding a careful writer of this trace picks (docs/decisions.md on the trace's parts):
#: lz4; dictionaries only where a row group holds few distinct values (frame, slot, event), not
#: over float columns of distinct values; statistics only on the keys readers filter on; values
#: handed to the encoder in batches of 65,536 (Arrow's default of 1,024 costs about 7 % more
#: encoding time for the same bytes).
PARQUET: dict[str, Any] = {
    "compression": "lz4",
    "use_dictionary": ["frame", "slot", "event"],
    "write_statistics": ["time_s", "frame", "slot", "device"],
    "write_batch_size": 65536,
}


class Writer:
    """Parquet parts, one per frame, lz4: each slot's rows appended as a row group by a
    background thread while the next slot is computed."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=4)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        out: pq.ParquetWriter | None = None
        while True:
            kind, item = self.queue.get()
            if kind == "open":
                k, schema = item
                out = pq.ParquetWriter(self.folder / f"part-{k:06d}.parquet", schema, **PARQUET)
            elif kind == "rows":
                assert out is not None
                out.write_table(item)
            elif kind == "close":
                assert out is not None
                out.close()
                out = None
            else:
                return

    def open(self, k: int, schema: pa.Schema) -> None:
        self.queue.put(("open", (k, schema)))

    def rows(self, table: pa.Table) -> None:
        self.queue.put(("rows", table))

    def close_part(self) -> None:
        self.queue.put(("close", None))

    def close(self) -> None:
        self.queue.put(("stop", None))
        self.thread.join()


def scenario_constants() -> dict[str, float]:
    """The scenario's numbers (mnist_iid.toml; the documented defaults where it is silent)."""
    with SCENARIO.open("rb") as fh:
        sc = tomllib.load(fh)
    net, dev = sc["network"], sc["devices"]
    return {
        "radius_m": net["cell_radius_m"],
        "min_m": net["min_distance_m"],
        "bandwidth_hz": net["bandwidth_hz"],
        "noise_w": 10 ** ((net["noise_dbm"] - 30) / 10),
        "cpu_hz": dev["cpu_hz"],
        "cycles": dev["cycles_per_sample"],
        "alpha": dev["capacitance"],
        "batch": dev["batch_size"],
        "p_bar": dev["peak_power_w"],
        "budget_lo": dev["energy_budget_j"]["low"],
        "budget_hi": dev["energy_budget_j"]["high"],
        "tau0": sc["run"]["deadline_s"],
        "V": sc["scheme"]["V"],
    }


def run_limit(folder: Path, n: int, slots: int, scheme: str, level: str, seed: int = 0) -> None:
    """The limit's run of ``n`` devices x ``slots`` slots into ``folder`` (module docstring)."""
    c = scenario_constants()
    schema = trace_schema()
    events = list(EVENT_ORDER)
    rng = np.random.default_rng(seed)
    r = np.sqrt(rng.uniform(c["min_m"] ** 2, c["radius_m"] ** 2, n))
    ang = rng.uniform(0.0, 2.0 * math.pi, n)
    x, y = r * np.cos(ang), r * np.sin(ang)
    big_h = 10 ** (-(128.1 + 37.6 * np.log10(np.maximum(r, c["min_m"]) / 1000.0)) / 10)
    budget = rng.uniform(c["budget_lo"], c["budget_hi"], n)
    ids = np.arange(n, dtype=np.int32)
    w, n0 = c["bandwidth_hz"], c["noise_w"]
    tau0, p_bar = c["tau0"], c["p_bar"]
    cb = c["cycles"] * c["batch"]
    compute_s = np.full(n, cb / c["cpu_hz"])
    e_cmp = np.full(n, 0.5 * c["alpha"] * cb * c["cpu_hz"] ** 2)
    payload = float(NUM_PARAMS * BITS_PER_PARAM)
    queue_j = np.zeros(n)
    ctl = scheme == "two_timescale"
    writer = Writer(folder)
    frames = max(1, slots // SLOTS_PER_FRAME)
    for k in range(frames):
        writer.open(k, schema)
        fr = Frame(schema, events)
        t0 = k * SLOTS_PER_FRAME * tau0
        if k == 0:
            fr.add(
                "device_config", n, time_s=0.0, frame=0, slot=-1, device=ids,
                energy_budget_j=budget, cpu_hz=c["cpu_hz"], cycles_per_sample=c["cycles"],
                capacitance=c["alpha"], batch_size=np.int64(c["batch"]), peak_power_w=p_bar,
            )  # fmt: skip
        fr.add("frame_start", 1, time_s=t0, frame=k, slot=k * SLOTS_PER_FRAME)
        fr.add(
            "position", n, time_s=t0, frame=k, slot=k * SLOTS_PER_FRAME, device=ids,
            x_m=x, y_m=y, distance_m=r, large_scale_gain=big_h,
        )  # fmt: skip
        freeze: dict[str, Any] = {
            "gamma": 0.0, "compute_fraction": 1.0, "sent_values": np.int64(NUM_PARAMS),
            "bits_per_value": np.int64(BITS_PER_PARAM), "queue_j": queue_j.copy(),
        }  # fmt: skip
        if ctl:
            freeze.update(max_tx_power_w=p_bar, expected_cost=0.0, iterations=np.int64(0))
        fr.add("freeze", n, time_s=t0, frame=k, slot=k * SLOTS_PER_FRAME, device=ids, **freeze)
        for t in range(k * SLOTS_PER_FRAME, min((k + 1) * SLOTS_PER_FRAME, slots)):
            s0 = t * tau0
            h = big_h * np.random.default_rng([seed, t]).standard_exponential(n)
            left = tau0 - compute_s
            p_min = (np.exp2(payload / (w * left)) - 1.0) * n0 / h
            if ctl:
                part = p_min <= p_bar
                p = np.where(part, p_min, 0.0)
            else:
                part = np.ones(n, dtype=bool)
                p = np.full(n, p_bar)
            with np.errstate(divide="ignore"):
                rate = w * np.log2(1.0 + p * h / n0)
                up_full = np.where(part, payload / rate, 0.0)
            sent = np.minimum(up_full, np.maximum(left, 0.0))
            ok = part & (up_full <= left * (1 + 1e-9))
            e_c = np.where(part, e_cmp, 0.0)
            e_u = p * sent
            e = e_c + e_u
            wasted = np.where(part & ~ok, e, 0.0)
            queue_j = np.maximum(queue_j + e - budget, 0.0)
            conv = np.where(ok, 0.0, 1.0)
            cost = c["V"] * conv + queue_j * e
            comp = np.where(part, compute_s, 0.0)
            dec: dict[str, Any] = {
                "distance_m": r, "large_scale_gain": big_h, "channel_gain": h,
                "seen_channel_gain": h, "gamma": 0.0, "payload_bits": payload,
                "min_tx_power_w": p_min, "tx_power_w": p, "participating": part,
                "compute_s": comp, "upload_s": up_full,
            }  # fmt: skip
            if ctl:
                dec["max_tx_power_w"] = p_bar
            writer.rows(fr.table())  # the rows so far (the frame's head, the last slot)
            fr = Frame(schema, events)
            fr.add("slot_start", 1, time_s=s0, frame=k, slot=t)
            if level == "device_slots":
                fr.add(
                    "device_slot", n, time_s=s0, frame=k, slot=t, device=ids, **dec,
                    upload_planned_s=up_full, energy_compute_j=e_c, energy_upload_j=e_u,
                    energy_j=e, wasted_energy_j=wasted, success=ok, queue_j=queue_j,
                    conv_error=conv, cost=cost,
                )  # fmt: skip
            else:
                fr.add("decision", n, time_s=s0, frame=k, slot=t, device=ids, **dec)
                who = np.flatnonzero(part)
                m = who.size
                fr.add("compute_start", m, time_s=s0, frame=k, slot=t, device=ids[who])
                # compute_end and upload_start at the compute's end, upload_end at its end: the
                # device events after the compute starts, in time order (ties: the device)
                t_ce = s0 + compute_s[who]
                t_ue = t_ce + sent[who]
                times = np.concatenate([t_ce, t_ce, t_ue])
                kind = np.repeat(np.array([0, 1, 2], np.int8), m)
                dev3 = np.tile(ids[who], 3)
                order = np.lexsort((kind, dev3, times))
                codes = np.array(
                    [fr.codes["compute_end"], fr.codes["upload_start"], fr.codes["upload_end"]],
                    np.int8,
                )[kind[order]]
                src = np.tile(who, 3)[order]
                ko = kind[order]
                not_end, not_ce = ko != 2, ko != 0
                fr.add(
                    codes, 3 * m, time_s=times[order], frame=k, slot=t, device=dev3[order],
                    compute_s=np.ma.MaskedArray(comp[src], mask=not_ce),
                    tx_power_w=np.ma.MaskedArray(p[src], mask=ko == 0),
                    upload_s=np.ma.MaskedArray(sent[src], mask=not_end),
                    energy_upload_j=np.ma.MaskedArray(e_u[src], mask=not_end),
                    success=np.ma.MaskedArray(ok[src], mask=not_end),
                )  # fmt: skip
            fr.add("deadline", 1, time_s=s0 + tau0, frame=k, slot=t)
            fr.add(
                "aggregate", 1, time_s=s0 + tau0, frame=k, slot=t,
                n_participants=np.int64(part.sum()), n_success=np.int64(ok.sum()),
                slot_duration_s=tau0,
            )  # fmt: skip
            if level == "events":
                fr.add(
                    "energy", n, time_s=s0 + tau0, frame=k, slot=t, device=ids, tx_power_w=p,
                    participating=part, upload_s=sent, energy_compute_j=e_c,
                    energy_upload_j=e_u, energy_j=e, wasted_energy_j=wasted, success=ok,
                    queue_j=queue_j, conv_error=conv, cost=cost,
                )  # fmt: skip
        fr.add("frame_end", 1, time_s=(k + 1) * SLOTS_PER_FRAME * tau0, frame=k, slot=t)
        writer.rows(fr.table())
        writer.close_part()
    writer.close()


#: the events the limit writes, in docs/trace.md's order (the dictionary's values)
EVENT_ORDER = (
    "device_config frame_start position freeze slot_start decision compute_start compute_end "
    "upload_start upload_end deadline aggregate energy eval frame_end device_slot"
).split()


def trace_rows(folder: Path) -> int:
    """Rows in the Parquet files of ``folder`` (their footers only: a few milliseconds)."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in sorted(folder.glob("*.parquet")))


def wflsim_table(n: int, slots: int, scheme: str, level: str) -> dict[str, Any]:
    """The same scenario as a wflsim scenario table."""
    with SCENARIO.open("rb") as fh:
        data = tomllib.load(fh)
    data["network"]["num_devices"] = n
    data["run"] = {
        **data["run"],
        "frames": max(1, slots // SLOTS_PER_FRAME),
        "slots_per_frame": SLOTS_PER_FRAME,
    }
    data["learning"] = {"enabled": False, "num_params": NUM_PARAMS}
    data["scheme"] = {**data["scheme"], "name": scheme}
    data["trace"] = {"level": level}
    return data


def warm_controller() -> None:
    """Load the controller's compiled cost loops (numba's cache, about 0.1 s; a compile the first
    time) before the clock starts, as the keyed draws' are: one solve at the size that takes them.
    Paid once per process, like the limit's imports."""
    from wflsim.sim.schemes import controller

    n = 4096
    controller.solve_gamma(
        controller.ControllerParams(
            model_bits=NUM_PARAMS * BITS_PER_PARAM,
            bandwidth_hz=1e7,
            noise_w=4e-14,
            mean_gain=np.geomspace(1e-13, 1e-9, n),
            deadline_s=0.8,
            cycles_per_sample=2e6,
            batch_size=512.0,
            cpu_hz=2e9,
            capacitance=2e-28,
            peak_power_w=1.0,
            queue_j=np.linspace(0.0, 5.0, n),
            v=100.0,
            lam=1.0 / (512.0 * n),
        )  # fmt: skip
    )


def main(argv: list[str] | None = None) -> None:
    p = _common.parser(
        __doc__, reps=None, seed=False, quick={"devices": 2000, "slots": 20, "rounds": 1}
    )
    p.add_argument("--devices", type=int, default=100_000)
    p.add_argument("--slots", type=int, default=20)
    p.add_argument("--schemes", default="fixed_power,two_timescale")
    p.add_argument("--level", default="events", choices=["events", "device_slots"])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    import wflsim
    from wflsim.app.runner import execute
    from wflsim.sim import rng
    from wflsim.sim.learner import NullLearner

    # the keyed draws on their compiled loops from the first slot: under the default ``auto`` a
    # process switches to them (importing numba, about 1 s) once past ``AUTO_SWITCH_WORDS``
    # words, which here would fall inside one timed repetition; paid once per process, as the
    # limit's imports are, it is not part of a run's throughput
    rng.set_backend("compiled")
    rng.backend()
    warm_controller()

    print_header("network_limit")
    device_slots = args.devices * args.slots
    for scheme in [s.strip() for s in args.schemes.split(",") if s.strip()]:
        print(f"\n== {scheme}, {args.devices} devices x {args.slots} slots, level {args.level}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prep = wflsim.prepare(wflsim_table(args.devices, args.slots, scheme, args.level))

        rows: dict[str, int] = {}

        def limit(scheme: str = scheme, rows: dict[str, int] = rows) -> None:
            folder = Path(tempfile.mkdtemp(prefix="limit-"))
            try:
                run_limit(folder, args.devices, args.slots, scheme, args.level)
                rows["limit"] = trace_rows(folder)
            finally:
                shutil.rmtree(folder, ignore_errors=True)

        def ours(prep: Any = prep, rows: dict[str, int] = rows) -> None:
            folder = Path(tempfile.mkdtemp(prefix="wflsim-"))
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    execute(prep, NullLearner(NUM_PARAMS), folder / "run")
                rows["wflsim"] = trace_rows(folder / "run" / "events")
            finally:
                shutil.rmtree(folder, ignore_errors=True)

        times = interleaved({"limit": limit, "wflsim": ours}, args.rounds, 1)
        for k, v in times.items():
            rate = [device_slots / s / 1e6 for s in v]
            print(
                f"  {k:7s} "
                + ", ".join(
                    f"{s:.2f} s ({r:.2f} M device-slots/s)" for s, r in zip(v, rate, strict=True)
                )
            )
        print(
            f"  rows written: limit {rows['limit']:,}, wflsim {rows['wflsim']:,} "
            f"(wflsim/limit {rows['wflsim'] / max(rows['limit'], 1):.3f})"
        )
        print(
            "  "
            + ratio_line(
                "limit/wflsim (wflsim's share of the limit)",
                times["limit"],
                times["wflsim"],
                ">= 0.9",
            )
        )
        headline(f"limit/wflsim, {scheme}", times["limit"], times["wflsim"], ">= 0.9")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"\n  total {time.perf_counter() - t:.0f} s")
