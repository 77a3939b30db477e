"""Mean and standard deviation over seeds of a straggler sweep's run summaries.

Usage: python scenarios/stragglers/summarise.py SWEEP_DIR

Reads every point's manifest.json (its resolved scenario and its summary) and prints one
Markdown row per (jitter model parameters, known): outage rate (failed uploads per
participation), participation (1 - dropout rate), mean energy per device-slot and the share of
the energy wasted on failed uploads, each as mean +- standard deviation over seeds.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def _cell(rows: list[dict], name: str) -> str:
    """``mean ± standard deviation`` of ``name`` over ``rows``."""
    xs = [r[name] for r in rows]
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.mean(xs):.3f} ± {sd:.3f}"


def main(sweep: Path) -> None:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for manifest in sorted(sweep.glob("*/manifest.json")):
        m = json.loads(manifest.read_text())
        if m.get("status") != "completed":
            continue
        jitter = m["scenario_resolved"]["compute"]["jitter"]
        key = tuple(sorted((k, v) for k, v in jitter.items()))
        s = m["summary"]
        groups[key].append(
            {
                "outage": s["outage_rate"],
                "participation": 1.0 - s["dropout_rate"],
                "energy": s["mean_energy_per_device_slot_j"],
                "wasted": s["wasted_energy_j"] / s["total_energy_j"]
                if s["total_energy_j"]
                else 0.0,
            }
        )
    print(
        "| jitter | seeds | outage rate | participation | energy per device-slot (J) | wasted share |"
    )
    print("|---|---|---|---|---|---|")
    for key, rows in sorted(groups.items()):
        label = ", ".join(f"{k} = {v}" for k, v in key if k != "model")

        print(
            f"| {label} | {len(rows)} | {_cell(rows, 'outage')} | {_cell(rows, 'participation')} | "
            f"{_cell(rows, 'energy')} | {_cell(rows, 'wasted')} |"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
