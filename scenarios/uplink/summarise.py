"""Print the shared-uplink study's table (docs/results.md, "A shared uplink").

Usage: python scenarios/uplink/summarise.py SWEEP_DIR [SWEEP_DIR ...]

One row per (uplink.mode, uplink.planned_concurrent_uploads): mean ± standard deviation over
the seeds of each run's outage rate, energy per device-slot, participation, wasted share of the
energy (from manifest.json's summary) and mean freezing fraction gamma (the trace's freeze rows).
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds


def run_row(run: Path) -> tuple[tuple[str, int], list[float]]:
    """A run folder's grid point and its five numbers."""
    manifest = json.loads((run / "manifest.json").read_text())
    s, up = manifest["summary"], manifest["scenario_resolved"]["uplink"]
    trace = ds.dataset(run / "events").to_table(columns=["event", "gamma"]).to_pandas()
    gamma = float(trace.loc[trace["event"] == "freeze", "gamma"].mean())
    wasted = s["wasted_energy_j"] / s["total_energy_j"] if s["total_energy_j"] else 0.0
    numbers = [
        s["outage_rate"],
        s["mean_energy_per_device_slot_j"],
        1.0 - s["dropout_rate"],
        wasted,
        gamma,
    ]
    return (up["mode"], up["planned_concurrent_uploads"]), numbers


def main(folders: list[str]) -> None:
    rows: dict[tuple[str, int], list[list[float]]] = collections.defaultdict(list)
    for folder in folders:
        for manifest in sorted(Path(folder).glob("*/manifest.json")):
            key, numbers = run_row(manifest.parent)
            rows[key].append(numbers)
    print(
        "| uplink | planned k | seeds | outage rate | energy per device-slot (J) "
        "| participation | wasted share of energy | mean gamma |"
    )
    print("|---|---|---|---|---|---|---|---|")
    digits = [3, 4, 3, 3, 3]
    for (mode, k), values in rows.items():
        a = np.array(values)
        mean, sd = a.mean(axis=0), a.std(axis=0, ddof=1)
        cells = " | ".join(
            f"{m:.{d}f} ± {e:.{d}f}" for m, e, d in zip(mean, sd, digits, strict=True)
        )
        print(f"| {mode} | {k} | {len(values)} | {cells} |")


if __name__ == "__main__":
    main(sys.argv[1:])
