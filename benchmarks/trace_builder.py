"""The trace builder (``TraceBuffer.to_table``) of this tree against the one of a base commit.

Workload: ``scenarios/paper/mnist_iid.toml`` scaled to ``--devices`` devices (default 100,000)
x ``--slots`` slots (default 20, one frame), network only (``learning.enabled = false``,
``learning.num_params = 440812``), closed-form kernel, the full trace written to a run folder,
for each scheme of ``--schemes`` and trace level of ``--levels``. The previous builder is
``TraceBuffer.to_table`` of ``sim/trace.py`` at ``--base`` (default ``823c0e1``, read with
``git show`` and imported as a module); everything else is this tree's code.

* ``--part table``: the blocks of one ``to_table`` call of a run (the second: a slot, or the
  slots of a row group, without the frame's first rows) are captured, then both builders turn
  them into a table, interleaved, ``--table-reps`` rounds; the two tables are checked equal.
* ``--part run``: the whole run, one child process per run (``execute`` timed, the scenario
  prepared before the clock starts), the previous builder patched in for ``old``; interleaved,
  ``--reps`` rounds after ``--warmup``; each child also reports its total time in ``to_table``.

Reported: each repetition, median and spread per variant, and new/old ratios (of the medians and
per round). Nothing is asserted.

    python benchmarks/trace_builder.py --part table                  # about 1 min per case
    python benchmarks/trace_builder.py --part run --schemes fixed_power --levels events
    python benchmarks/trace_builder.py --quick                       # smoke test: 2,000 x 4
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import _common
import network_throughput as nt

from wflsim.app.run import execute
from wflsim.sim import trace
from wflsim.sim.learner import NullLearner

BASE = "823c0e1"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=3,
        reps_help="recorded rounds of runs",
        warmup=1,
        seed=False,
        tmp_dir=True,
        quick={"devices": 2_000, "slots": 4, "slots_per_frame": 4, "reps": 2, "table_reps": 3},
    )
    p.add_argument("--devices", type=int, default=100_000, help="devices (default 100,000)")
    p.add_argument("--slots", type=int, default=20, help="slots in all (default 20)")
    p.add_argument("--slots-per-frame", type=int, default=20, help="T (default 20)")
    p.add_argument("--schemes", nargs="+", default=["fixed_power", "two_timescale"])
    p.add_argument("--levels", nargs="+", default=["events", "device_slots"],
                   choices=["events", "device_slots"])  # fmt: skip
    p.add_argument("--part", default="both", choices=["table", "run", "both"])
    p.add_argument("--table-reps", type=int, default=15, help="rounds of to_table (default 15)")
    p.add_argument("--base", default=BASE, help=f"commit of the previous builder ({BASE})")
    p.add_argument("--child", choices=["old", "new"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    return args


def previous_builder(commit: str) -> Any:
    """``TraceBuffer.to_table`` of ``sim/trace.py`` at ``commit`` (its schema must be this one's)."""
    source = subprocess.run(
        ["git", "show", f"{commit}:sim/trace.py"],
        cwd=_common.REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType("previous_trace")
    module.__dict__["__name__"] = "previous_trace"
    exec(compile(source, f"{commit}:sim/trace.py", "exec"), module.__dict__)  # noqa: S102
    sys.modules["previous_trace"] = module  # for the dataclass and typing machinery
    if module.SCHEMA != trace.SCHEMA:
        raise SystemExit(f"the trace schema of {commit} is not this tree's")
    return module.TraceBuffer.to_table


def _scenario_args(args: argparse.Namespace) -> argparse.Namespace:
    return nt.parse_args(
        ["--devices", str(args.devices), "--slots", str(args.slots),
         "--slots-per-frame", str(args.slots_per_frame)]
    )  # fmt: skip


def timed_run(args: argparse.Namespace, scheme: str, level: str, builder: Any) -> dict:
    """One run with ``builder`` as ``TraceBuffer.to_table``: wall seconds, seconds in the
    builder, its calls and rows."""
    spent = {"s": 0.0, "calls": 0, "rows": 0}

    def counted(self: trace.TraceBuffer) -> Any:
        t0 = time.perf_counter()
        table = builder(self)
        spent["s"] += time.perf_counter() - t0
        spent["calls"] += 1
        spent["rows"] += table.num_rows
        return table

    trace.TraceBuffer.to_table = counted  # type: ignore[method-assign]
    prep = nt.prepared(_scenario_args(args), scheme, "closed_form", level)
    with tempfile.TemporaryDirectory(dir=args.tmp_dir) as tmp:
        t0 = time.perf_counter()
        execute(prep, NullLearner(nt.NUM_PARAMS), Path(tmp) / "run", overwrite=True)
        wall = time.perf_counter() - t0
    return {"wall_s": wall, "to_table_s": spent["s"], "calls": spent["calls"],
            "rows": spent["rows"]}  # fmt: skip


def captured_blocks(args: argparse.Namespace, scheme: str, level: str) -> tuple[list, int]:
    """The blocks of the second ``to_table`` call of a run (or of the first, if only one)."""
    caught: list[tuple[list, int]] = []
    new = trace.TraceBuffer.to_table

    def capture(self: trace.TraceBuffer) -> Any:
        if len(caught) < 2:
            caught.append((list(self._blocks), self.num_rows))
        return new(self)

    timed_run(args, scheme, level, capture)
    trace.TraceBuffer.to_table = new  # type: ignore[method-assign]
    return caught[-1]


def bench_table(args: argparse.Namespace, old: Any, scheme: str, level: str) -> None:
    blocks, total = captured_blocks(args, scheme, level)
    new = trace.TraceBuffer.to_table
    print(f"-- to_table, {scheme}, {level}: {total:,} rows in {len(blocks)} blocks")
    tables = {}

    def variant(builder: Any, name: str) -> Any:
        def go() -> float:
            buf = trace.TraceBuffer()
            buf._blocks, buf.num_rows = list(blocks), total
            t0 = time.perf_counter()
            tables[name] = builder(buf)
            return time.perf_counter() - t0

        return go

    res = _common.interleaved(
        {"old": variant(old, "old"), "new": variant(new, "new")}, args.table_reps, 2
    )
    same = trace.encode_part(tables["old"], {}) == trace.encode_part(tables["new"], {})
    report(res, "to_table", extra=f"same Parquet bytes: {same}")


def bench_run(args: argparse.Namespace, scheme: str, level: str) -> None:
    print(f"-- whole run, {scheme}, {level}: {args.devices:,} devices x {args.slots} slots")
    inner: dict[str, list[dict]] = {"old": [], "new": []}

    def child(which: str) -> Any:
        def go() -> float:
            cmd = [sys.executable, __file__, "--child", which, "--schemes", scheme,
                   "--levels", level, "--devices", str(args.devices), "--slots", str(args.slots),
                   "--slots-per-frame", str(args.slots_per_frame), "--base", args.base]  # fmt: skip
            if args.tmp_dir:
                cmd += ["--tmp-dir", args.tmp_dir]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            got = json.loads(out.strip().splitlines()[-1])
            inner[which].append(got)
            return float(got["wall_s"])

        return go

    res = _common.interleaved({"old": child("old"), "new": child("new")}, args.reps, args.warmup)
    report(res, "run wall")
    for which in ("old", "new"):
        kept = inner[which][args.warmup :]
        s = _common.Stats([r["to_table_s"] for r in kept])
        print(f"  {which} to_table inside the run: {s.fmt(unit='s')}; "
              f"{kept[-1]['calls']} calls, {kept[-1]['rows']:,} rows")  # fmt: skip
    print(_common.ratio_line("  new/old to_table inside the run",
                             [r["to_table_s"] for r in inner["new"][args.warmup :]],
                             [r["to_table_s"] for r in inner["old"][args.warmup :]], "< 1"))  # fmt: skip


def report(res: dict[str, list[float]], what: str, extra: str = "") -> None:
    for name, values in res.items():
        print(f"  {name} {what}: {_common.Stats(values).fmt(unit='s')}")
    print(_common.ratio_line(f"  new/old {what}", res["new"], res["old"], "< 1"))
    _common.headline(f"new/old {what}", res["new"], res["old"], "< 1")
    if extra:
        print(f"  {extra}")
    print(flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    old = previous_builder(args.base)
    if args.child:
        builder = old if args.child == "old" else trace.TraceBuffer.to_table
        print(json.dumps(timed_run(args, args.schemes[0], args.levels[0], builder)))
        return
    _common.print_header(f"trace builder: this tree vs {args.base}")
    for scheme in args.schemes:
        for level in args.levels:
            if args.part in ("table", "both"):
                bench_table(args, old, scheme, level)
            if args.part in ("run", "both"):
                bench_run(args, scheme, level)


if __name__ == "__main__":
    main()
