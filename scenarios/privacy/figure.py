"""The privacy study (run_study.sh) in two panels, one colour per configuration: the final test
accuracy against the final epsilon (largest over the devices, at delta 1e-5, log scale; a
configuration without privacy is a horizontal line at its accuracy; configurations at the same
epsilon are spread sideways, 4 % apart, drawn at epsilon times 1.04^k) and against the devices'
total energy; mean over the seeds with its 95 % Student-t interval on both axes.

    python scenarios/privacy/figure.py runs/privacy-study --out runs/privacy-study/report/privacy_study.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from wflsim.analysis.figures import save_study_figure  # noqa: E402
from wflsim.analysis.stats import t_interval  # noqa: E402

MEASURES = ("final_accuracy", "total_energy_j", "epsilon_max")


def per_run(root: Path) -> pd.DataFrame:
    """One row per completed run of every sweep folder under ``root``: its configuration (the
    folder's name) and :data:`MEASURES` from its manifest's summary (epsilon NaN without
    privacy)."""
    rows = []
    for folder in sorted(p for p in root.iterdir() if (p / "sweep.json").is_file()):
        for manifest in sorted(folder.glob("*/manifest.json")):
            summary = json.loads(manifest.read_text()).get("summary") or {}
            if "final_accuracy" not in summary:
                continue
            row = {m: float(summary.get(m) or np.nan) for m in MEASURES}
            rows.append({"configuration": folder.name, **row})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the output folder of run_study.sh")
    p.add_argument("--out", required=True, help="the figure's file (.png, .pdf, .svg)")
    args = p.parse_args(argv)
    runs = per_run(Path(args.folder))
    if runs.empty:
        p.error(f"no completed runs in {args.folder}")
    configs = list(dict.fromkeys(runs["configuration"]))
    cmap = plt.get_cmap("tab20")  # 20 distinct colours, indexed by integer
    same_epsilon: dict[float, int] = {}
    fig, (ax_eps, ax_energy) = plt.subplots(1, 2, figsize=(12, 5.5), sharey=True)
    for i, name in enumerate(configs):
        colour = cmap(i % cmap.N)
        group = runs[runs["configuration"] == name]
        stats = {m: t_interval(group[m].to_numpy()) for m in MEASURES}

        def err(m: str, scale: float = 1.0, stats: dict = stats) -> list[list[float]] | None:
            mean, _, low, high, _ = stats[m]
            if not np.isfinite(low):
                return None
            if m == "final_accuracy":  # an accuracy lies in [0, 1]: the interval is cut there
                low, high = max(low, 0.0), min(high, 1.0)
            return [[scale * (mean - low)], [scale * (high - mean)]]

        acc = stats["final_accuracy"][0] * 100
        style = {
            "color": colour,
            "marker": "s" if "ideal" in name or "opt" in name else "o",
            "capsize": 3,
            "ls": "none",
        }
        if np.isfinite(stats["epsilon_max"][0]):
            key = round(float(stats["epsilon_max"][0]), 1)
            same_epsilon[key] = same_epsilon.get(key, -1) + 1
            x = stats["epsilon_max"][0] * 1.04 ** same_epsilon[key]
            yerr, xerr = err("final_accuracy", 100.0), err("epsilon_max")
            ax_eps.errorbar(x, acc, yerr=yerr, xerr=xerr, **style)
        else:
            ax_eps.axhline(acc, color=colour, ls=":", lw=1.5)
        yerr, xerr = err("final_accuracy", 100.0), err("total_energy_j")
        ax_energy.errorbar(
            stats["total_energy_j"][0], acc, yerr=yerr, xerr=xerr, label=name, **style
        )
    ax_eps.set_xscale("log")
    ax_eps.set_xlabel("final epsilon, largest over the devices (delta 1e-5, log scale)")
    ax_eps.set_ylabel("final test accuracy (%)")
    ax_eps.set_title(
        "accuracy against privacy (dotted: no privacy;\nequal epsilons spread sideways)"
    )
    ax_energy.set_xlabel("devices' total energy (J)")
    ax_energy.set_title("accuracy against energy")
    for ax in (ax_eps, ax_energy):
        ax.grid(alpha=0.3)
    ax_energy.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    save_study_figure(
        fig,
        args.out,
        "Privacy on the radio: digits MLP, 30 devices, 80 slots (mean and 95 % interval, 3 seeds)",
        rect=(0.0, 0.0, 1.0, 0.94),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
