"""Issue 37's study as one figure: test accuracy against simulated time (left) and against the
devices' energy (right); top, the paper's controller in one cell and in 7 cells (reuse 1, 3, 7;
planning on the noise or on the mean interference); middle, Ideal FL in the same layouts;
bottom, flat against hierarchical aggregation (k2 = 1, 5, 20) on 7 cells under reuse 1 (solid:
the controller planning on the mean interference; dashed: Ideal FL). At each evaluation the mean
over seeds with its 95 % Student-t interval on the accuracy (band) and the mean time or energy
(x). One colour per layout (and per k2) in every panel.

    bash scenarios/cells/run_studies.sh runs/cells-mnist DATA_DIR
    python scenarios/cells/figure.py runs/cells-mnist --out runs/cells-mnist/accuracy.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from wflsim.analysis import tidy  # noqa: E402
from wflsim.analysis.stats import over_seeds  # noqa: E402

#: The layouts of run_studies.sh: sweep suffix -> (label, colour).
LAYOUTS = {
    "one": ("one cell", "#000000"),
    "reuse1": ("7 cells, reuse 1", "#d62728"),
    "reuse1-mean": ("7 cells, reuse 1, plan on mean I", "#ff7f0e"),
    "reuse3": ("7 cells, reuse 3", "#1f77b4"),
    "reuse3-mean": ("7 cells, reuse 3, plan on mean I", "#17becf"),
    "reuse7": ("7 cells, reuse 7", "#2ca02c"),
}
#: The hierarchy's sweeps: k2 -> colour (flat: the layout's own colour, grey here).
K2 = {"flat": ("flat", "#7f7f7f"), "1": ("k2 = 1", "#9467bd"), "5": ("k2 = 5", "#8c564b"),
      "20": ("k2 = 20", "#e377c2")}  # fmt: skip
SCHEMES = {"two_timescale": "Proposed (two_timescale)", "ideal": "Ideal FL"}


def _curve(ax_t: Axes, ax_e: Axes, folder: Path, label: str, color: str, style: str = "-") -> int:
    """Plot one sweep's mean accuracy against time and energy; returns its number of seeds."""
    ev = tidy.evaluations(folder)
    stats = over_seeds(ev, by=["slot"], value_cols=["accuracy", "time_s", "cum_energy_j"])
    stats = stats.sort_values("slot")
    for ax, x in ((ax_t, stats["time_s"]), (ax_e, stats["cum_energy_j"])):
        ax.plot(x, 100 * stats["accuracy"], color=color, ls=style, lw=1.5, label=label)
        ax.fill_between(x, 100 * stats["accuracy_ci_low"], 100 * stats["accuracy_ci_high"],
                        color=color, alpha=0.15, lw=0)  # fmt: skip
    return int(ev["seed"].nunique())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the output folder of run_studies.sh")
    p.add_argument("--out", required=True, help="the PNG to write")
    args = p.parse_args(argv)
    root = Path(args.folder)
    fig, axes = plt.subplots(3, 2, figsize=(11, 11.5), sharey=True)
    seeds = set()
    for row, scheme in enumerate(SCHEMES):
        for key, (label, color) in LAYOUTS.items():
            folder = root / f"{scheme}-{key}"
            if folder.is_dir():
                seeds.add(_curve(axes[row][0], axes[row][1], folder, label, color))
        axes[row][0].set_title(f"{SCHEMES[scheme]}: one cell and 7 cells", fontsize=10)
        axes[row][1].set_title(f"{SCHEMES[scheme]}: against the devices' energy", fontsize=10)
    for scheme, style, flat in (("two_timescale", "-", "reuse1-mean"), ("ideal", "--", "reuse1")):
        for k2, (label, color) in K2.items():
            suffix = flat if k2 == "flat" else f"{flat}-k{k2}"
            folder = root / f"{scheme}-{suffix}"
            if folder.is_dir():
                name = f"{label} ({'Proposed' if scheme == 'two_timescale' else 'Ideal FL'})"
                seeds.add(_curve(axes[2][0], axes[2][1], folder, name, color, style))
    axes[2][0].set_title("7 cells, reuse 1: flat vs hierarchical (cloud every k2 slots)",
                         fontsize=10)  # fmt: skip
    axes[2][1].set_title("hierarchical: against the devices' energy", fontsize=10)
    for row in axes:
        row[0].set_ylabel("test accuracy (%)")
        row[0].set_xlabel("simulated time (s)")
        row[1].set_xlabel("energy of all devices (J)")
        for ax in row:
            ax.grid(alpha=0.3)
        row[0].legend(loc="lower right", fontsize=7.5)
    n = ", ".join(str(s) for s in sorted(seeds))
    fig.suptitle(f"MNIST non-IID, 35 devices, MLP; mean and 95 % interval over {n} seeds",
                 fontsize=11)  # fmt: skip
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
