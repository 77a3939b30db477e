"""Issue 38's studies as one table: per configuration (a sweep folder of run_studies.sh or
run_controller_study.sh: an uplink and a number of devices or a noise level), over the seeds
(mean and 95 % Student-t interval): the latency per round (mean slot length), the devices' energy
per round and in total, the final test accuracy, the simulated time and energy to first reach a
target accuracy (over the seeds that reach it; ``reached``: the share that do), and over the air
the measured aggregation error (mean over slots of the MSE per entry between the received and the
exact aggregate, in the updates' units), the closed-form error of the received sum for
unit-variance updates (``sum_mse``: the plan's, comparable across runs whatever the model learnt)
and the share of the asked devices in the sums; ``participation``: the share of device-slots in
which a device took part; ``completed``: 1 for a run that completed, 0 for one that failed (its
rows cover the slots it played).

    python scenarios/aircomp/summarise.py runs/aircomp-mnist --target 0.8 --csv runs.csv
    python scenarios/aircomp/summarise.py --from-csv runs.csv more.csv   # rows of several runs
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from wflsim.analysis import tidy
from wflsim.analysis.io import load_events
from wflsim.analysis.stats import first_reach, format_over_seeds, over_seeds, to_markdown


def natural_key(name: str) -> tuple[object, ...]:
    """Sort key of a configuration's name with its numbers as numbers, a number after ``-``
    negative: ``n10 < n30 < n100``, ``n0-104 < n0-84`` (N0 in dBm)."""
    parts = re.split(r"(-?\d+)", name)
    return tuple(int(x) if i % 2 else x for i, x in enumerate(parts))


def per_run(root: Path, target: float) -> pd.DataFrame:
    """One row per run of every sweep folder under ``root``."""
    rows = []
    for folder in sorted(p for p in root.iterdir() if (p / "sweep.json").is_file()):
        data = tidy.load(folder, ["evaluations"])
        for _, r in data.runs.iterrows():
            ev = data.evaluations[data.evaluations["run"] == r["run"]].sort_values("time_s")
            run_dir = Path(r["run_dir"])
            summary = json.loads((run_dir / "manifest.json").read_text())["summary"]
            events = load_events(
                run_dir,
                ["aggregate", "aircomp"],
                [
                    "slot",
                    "slot_duration_s",
                    "n_aligned",
                    "n_truncated",
                    "aircomp_mse",
                    "aggregation_mse",
                ],
            )
            agg = events[events["event"] == "aggregate"]
            air = events[events["event"] == "aircomp"]
            slots = len(agg)
            asked = (air["n_aligned"] + air["n_truncated"]).astype(float).sum()
            rows.append(
                {
                    "configuration": folder.name,
                    "seed": r["seed"],
                    "completed": float(r["status"] == "completed"),
                    "round_latency_s": float(agg["slot_duration_s"].astype(float).mean()),
                    "energy_per_round_j": float(summary["total_energy_j"]) / max(slots, 1),
                    "total_energy_j": float(summary["total_energy_j"]),
                    "final_accuracy": float(ev["accuracy"].iloc[-1]),
                    "participation": 1.0 - float(summary["dropout_rate"]),
                    "reached": float((ev["accuracy"] >= target).any()),
                    f"time_to_{target:g}_s": first_reach(ev, target, "time_s"),
                    f"energy_to_{target:g}_j": first_reach(ev, target, "cum_energy_j"),
                    "aggregation_mse": float(air["aggregation_mse"].astype(float).mean())
                    if len(air)
                    else float("nan"),
                    "sum_mse": float(air["aircomp_mse"].astype(float).mean())
                    if len(air)
                    else float("nan"),
                    "aligned_share": float(air["n_aligned"].astype(float).sum() / asked)
                    if asked > 0
                    else float("nan"),
                }
            )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "folder", nargs="?", help="the output folder of run_studies.sh or run_controller_study.sh"
    )
    p.add_argument(
        "--from-csv",
        nargs="+",
        default=None,
        help="read the per-run rows from these CSVs (written by --csv) instead of a folder",
    )
    p.add_argument("--target", type=float, default=0.8, help="target test accuracy (fraction)")
    p.add_argument("--columns", nargs="+", default=None, help="the measures to print (all)")
    p.add_argument("--csv", default=None, help="also write the per-run rows to this CSV")
    args = p.parse_args(argv)
    if args.from_csv:
        runs = pd.concat([pd.read_csv(f) for f in args.from_csv], ignore_index=True)
    elif args.folder:
        runs = per_run(Path(args.folder), args.target)
    else:
        p.error("give the study's folder or --from-csv")
    if runs.empty:
        p.error(f"no runs in {args.folder or args.from_csv}")
    if args.csv:
        runs.to_csv(args.csv, index=False)
    values = [c for c in runs.columns if c not in ("configuration", "seed")]
    if args.columns:
        values = [c for c in args.columns if c in values]
    runs = runs.replace([np.inf, -np.inf], np.nan)
    table = over_seeds(runs, by=["configuration"], value_cols=values)
    table = table.sort_values("configuration", key=lambda c: c.map(natural_key), kind="stable")
    print(to_markdown(format_over_seeds(table, digits=3)[["configuration", "n", *values]]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
