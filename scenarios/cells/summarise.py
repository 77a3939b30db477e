"""Issue 37's study as one table: per configuration (a sweep folder of run_studies.sh), over the
seeds (mean and 95 % Student-t interval): final test accuracy, the simulated time and the
devices' energy to first reach a target accuracy (over the seeds that reach it; ``reached``: the
share that do), the devices' total energy, the outage rate (uploads that missed their deadline,
per participation), handovers, cloud rounds and the backhaul's energy.

    python scenarios/cells/summarise.py runs/cells-mnist --target 0.8
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from wflsim.analysis import tidy
from wflsim.analysis.stats import first_reach, format_over_seeds, over_seeds, to_markdown


def per_run(root: Path, target: float) -> pd.DataFrame:
    """One row per run of every sweep folder under ``root``."""
    rows = []
    for folder in sorted(p for p in root.iterdir() if (p / "sweep.json").is_file()):
        data = tidy.load(folder, ["evaluations"])
        for _, r in data.runs.iterrows():
            ev = data.evaluations[data.evaluations["run"] == r["run"]].sort_values("time_s")
            summary = json.loads((Path(r["run_dir"]) / "manifest.json").read_text())["summary"]
            rows.append(
                {
                    "configuration": folder.name,
                    "seed": r["seed"],
                    "final_accuracy": float(ev["accuracy"].iloc[-1]),
                    "reached": float((ev["accuracy"] >= target).any()),
                    f"time_to_{target:g}_s": first_reach(ev, target, "time_s"),
                    f"energy_to_{target:g}_j": first_reach(ev, target, "cum_energy_j"),
                    "total_energy_j": float(summary["total_energy_j"]),
                    "outage_rate": float(summary["outage_rate"]),
                    "handovers": float(summary.get("handovers", 0)),
                    "cloud_rounds": float(summary.get("cloud_rounds", 0)),
                    "backhaul_energy_j": float(summary.get("backhaul_energy_j", 0.0)),
                    "simulated_s": float(summary["simulated_time_s"]),
                }
            )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the output folder of run_studies.sh")
    p.add_argument("--target", type=float, default=0.8, help="target test accuracy (fraction)")
    p.add_argument("--columns", nargs="+", default=None, help="the measures to print (all)")
    args = p.parse_args(argv)
    runs = per_run(Path(args.folder), args.target)
    if runs.empty:
        p.error(f"no sweep folders under {args.folder}")
    values = [c for c in runs.columns if c not in ("configuration", "seed")]
    if args.columns:
        values = [c for c in args.columns if c in values]
    table = over_seeds(runs, by=["configuration"], value_cols=values)
    print(to_markdown(format_over_seeds(table, digits=3)[["configuration", "n", *values]]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
