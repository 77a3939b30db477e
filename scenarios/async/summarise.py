"""The stale-update study as one table: per scheme and server mode (``--by``: any of scheme,
strategy, server and uplink), over the seeds (mean and 95 % Student-t interval): final test
accuracy, the simulated time and the energy to first reach a target accuracy (over the seeds
that reach it; ``reached``: the share that do), total energy, the mean energy-deficit queue,
updates applied, their mean staleness, the share of uploads lost to drops (of the uploads that
ended) and the run's outage rate (synchronous: the uploads that missed their slot's deadline;
stale updates: the cycles whose upload arrived but was not applied).

    bash scenarios/async/run_studies.sh digits runs/async-digits
    python scenarios/async/summarise.py runs/async-digits --target 0.9
    python scenarios/async/summarise.py runs/strategies-mnist --by strategy server uplink
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from wflsim.analysis import tidy
from wflsim.analysis.stats import first_reach, over_seeds

ORDER = ["sync", "semi_sync", "FedAsync", "FedBuff-5", "FedBuff-10"]
#: The columns that name a configuration (``--by`` picks among them); the others are measures.
KEYS = ["scheme", "strategy", "server", "uplink"]


def per_run(folder: Path, target: float) -> pd.DataFrame:
    """One row per run: its configuration and measures."""
    data = tidy.load(folder, ["slots", "evaluations"])
    rows = []
    for _, r in data.runs.iterrows():
        ev = data.evaluations[data.evaluations["run"] == r["run"]].sort_values("time_s")
        sl = data.slots[data.slots["run"] == r["run"]]
        summary = json.loads((Path(r["run_dir"]) / "manifest.json").read_text())["summary"]
        ended = float(sl["n_participants"].sum())  # uploads that ended (arrived or dropped)
        rows.append(
            {
                "scheme": r["scheme_label"],
                "server": r["server"].split(" (")[0],
                "strategy": r["strategy"].split(" (")[0],
                "uplink": r["uplink"].split(" (")[0],
                "seed": r["seed"],
                "final_accuracy": float(ev["accuracy"].iloc[-1]),
                "reached": float((ev["accuracy"] >= target).any()),
                f"time_to_{target:g}_s": first_reach(ev, target, "time_s"),
                f"energy_to_{target:g}_j": first_reach(ev, target, "cum_energy_j"),
                "total_energy_j": float(sl["energy_j"].sum()),
                "simulated_s": float(summary["simulated_time_s"]),
                "mean_queue_j": float(sl["mean_queue_j"].mean()),
                "updates": float(sl["n_success"].sum()),
                "mean_staleness": float(summary.get("mean_staleness", np.nan)),
                "dropped_share": summary.get("drops", 0) / ended if ended else np.nan,
                "outage_rate": float(summary.get("outage_rate", np.nan)),
            }
        )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the output folder of run_studies.sh")
    p.add_argument("--target", type=float, default=0.9, help="target test accuracy (fraction)")
    p.add_argument("--columns", nargs="+", default=None, help="the measures to print (all)")
    p.add_argument(
        "--by", nargs="+", default=["scheme", "server"], choices=KEYS, help="one row per these"
    )
    args = p.parse_args(argv)
    runs = per_run(Path(args.folder), args.target)
    values = [c for c in runs.columns if c not in (*KEYS, "seed")]
    if args.columns:
        values = [c for c in args.columns if c in values]
    table = over_seeds(runs, by=args.by, value_cols=values)
    if "server" in args.by:
        table["server"] = pd.Categorical(
            table["server"], [s for s in ORDER if s in set(table["server"])]
        )
    table = table.sort_values(args.by)
    cols = [*args.by, "n"]
    print("| " + " | ".join(cols + values) + " |")
    print("|" + "---|" * (len(cols) + len(values)))
    for _, r in table.iterrows():
        cells = [*(str(r[c]) for c in args.by), str(int(r["n"]))]
        for v in values:
            lo, hi = r[f"{v}_ci_low"], r[f"{v}_ci_high"]
            cells.append(f"{r[v]:.3g} [{lo:.3g}, {hi:.3g}]" if np.isfinite(lo) else f"{r[v]:.3g}")
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
