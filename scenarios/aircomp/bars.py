"""Issue 38's study in three bar charts from summarise.py's per-run rows (``--csv``): the latency
per round, the simulated time and the devices' energy to first reach the target accuracy, per
number of devices and uplink (one colour per uplink, as in figure.py), mean over seeds with its
95 % Student-t interval; logarithmic axes (OFDMA and AirComp differ by orders of magnitude).

    python scenarios/aircomp/summarise.py runs/aircomp-mnist --csv runs/aircomp-mnist/runs.csv
    python scenarios/aircomp/bars.py runs/aircomp-mnist/runs.csv --out runs/aircomp-mnist/bars.png
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from figure import DEVICES, UPLINKS  # noqa: E402

from wflsim.analysis.figures import save_study_figure  # noqa: E402
from wflsim.analysis.stats import over_seeds  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", help="summarise.py's per-run CSV (--csv)")
    p.add_argument("--out", required=True, help="the PNG to write")
    args = p.parse_args(argv)
    runs = pd.read_csv(args.runs)
    time_col = next(c for c in runs.columns if c.startswith("time_to_"))
    energy_col = next(c for c in runs.columns if c.startswith("energy_to_"))
    target = time_col.removeprefix("time_to_").removesuffix("_s")
    panels = [
        ("round_latency_s", "latency per round (s)"),
        (time_col, f"simulated time to {float(target):.0%} accuracy (s)"),
        (energy_col, f"devices' energy to {float(target):.0%} accuracy (J)"),
    ]
    stats = over_seeds(runs, by=["configuration"], value_cols=[c for c, _ in panels])
    stats = stats.set_index("configuration")
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    width = 0.8 / len(UPLINKS)
    x = np.arange(len(DEVICES))
    for ax, (col, label) in zip(axes, panels, strict=True):
        for i, (key, (name, color, _)) in enumerate(UPLINKS.items()):
            rows = [f"{key}-n{n}" for n in DEVICES]
            mean = np.array([stats[col].get(r, np.nan) for r in rows], dtype=float)
            lo = np.array([stats[f"{col}_ci_low"].get(r, np.nan) for r in rows], dtype=float)
            hi = np.array([stats[f"{col}_ci_high"].get(r, np.nan) for r in rows], dtype=float)
            lo = np.where(np.isfinite(lo) & (lo > 0), lo, mean)  # a log axis: no bar below 0
            err = np.vstack([mean - lo, np.where(np.isfinite(hi), hi, mean) - mean])
            ax.bar(x + (i - 1) * width, mean, width, color=color, label=name,
                   yerr=err, capsize=3, error_kw={"lw": 1})  # fmt: skip
        ax.set_yscale("log")
        ax.set_xticks(x, [f"{n} devices" for n in DEVICES])
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3, which="both")
    axes[0].legend(fontsize=8, loc="upper left")
    n = int(runs.groupby("configuration")["seed"].nunique().min())
    title = (
        f"MNIST non-IID, CNN, Ideal FL: digital OFDMA vs AirComp; mean and 95 % interval over {n} "
        "seeds (intervals cut at the axis where they reach 0)"
    )
    print(f"wrote {save_study_figure(fig, args.out, title, fontsize=10)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
