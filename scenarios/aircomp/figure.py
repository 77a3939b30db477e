"""Issue 38's study as one figure: test accuracy against simulated time (left) and against the
devices' energy (right), one row per number of devices (10, 30, 100), one colour per uplink
(digital OFDMA, AirComp with truncated channel inversion, AirComp with Cao et al.'s optimal
powers). At each evaluation the mean over seeds with its 95 % Student-t interval on the accuracy
(band) and the mean time or energy (x).

    bash scenarios/aircomp/run_studies.sh runs/aircomp-mnist DATA_DIR
    python scenarios/aircomp/figure.py runs/aircomp-mnist --out runs/aircomp-mnist/accuracy.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from wflsim.analysis import tidy  # noqa: E402
from wflsim.analysis.figures import save_study_figure  # noqa: E402
from wflsim.analysis.stats import over_seeds  # noqa: E402

#: The uplinks of run_studies.sh: sweep prefix -> (label, colour, line style).
UPLINKS = {
    "ofdma": ("digital OFDMA", "#1f77b4", "-"),
    "aircomp-trunc": ("AirComp, truncated inversion (-125 dB)", "#d62728", "--"),
    "aircomp-opt": ("AirComp, optimal powers (Cao et al.)", "#2ca02c", ":"),
}
DEVICES = (10, 30, 100)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the output folder of run_studies.sh")
    p.add_argument("--out", required=True, help="the PNG to write")
    args = p.parse_args(argv)
    root = Path(args.folder)
    fig, axes = plt.subplots(len(DEVICES), 2, figsize=(11, 11), sharey=True)
    seeds = set()
    for row, n in enumerate(DEVICES):
        ax_t, ax_e = axes[row]
        for key, (label, color, style) in UPLINKS.items():
            folder = root / f"{key}-n{n}"
            if not folder.is_dir():
                continue
            ev = tidy.evaluations(folder)
            seeds.add(int(ev["seed"].nunique()))
            stats = over_seeds(ev, by=["slot"], value_cols=["accuracy", "time_s", "cum_energy_j"])
            stats = stats.sort_values("slot")
            for ax, x in ((ax_t, stats["time_s"]), (ax_e, stats["cum_energy_j"])):
                ax.plot(x, 100 * stats["accuracy"], color=color, ls=style, lw=1.6, label=label)
                ax.fill_between(x, 100 * stats["accuracy_ci_low"],
                                100 * stats["accuracy_ci_high"], color=color, alpha=0.15,
                                lw=0)  # fmt: skip
        ax_t.set_title(f"{n} devices: against simulated time", fontsize=10)
        ax_e.set_title(f"{n} devices: against the devices' energy", fontsize=10)
        ax_t.set_ylabel("test accuracy (%)")
        ax_t.set_xlabel("simulated time (s)")
        ax_e.set_xlabel("energy of all devices (J)")
        for ax in (ax_t, ax_e):
            ax.grid(alpha=0.3)
        if ax_t.get_legend_handles_labels()[0]:
            ax_t.legend(loc="lower right", fontsize=8)
    n_seeds = ", ".join(str(s) for s in sorted(seeds))
    title = f"MNIST non-IID, CNN, Ideal FL; mean and 95 % interval over {n_seeds} seeds"
    print(f"wrote {save_study_figure(fig, args.out, title, rect=(0.0, 0.0, 1.0, 0.985))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
