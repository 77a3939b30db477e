"""Issue 37's study as one figure: test accuracy against simulated time (left) and against the
devices' energy (right). Rows: the paper's controller in one cell and in 7 cells (reuse 1, 3, 7;
planning on the noise, solid, or on the mean interference, dashed); Ideal FL in the same layouts;
then flat against hierarchical aggregation (a cloud every k2 = 1, 5, 20 slots) on 7 cells under
reuse 1, for the controller (planning on the mean interference) and for Ideal FL. At each
evaluation the mean over seeds with its 95 % Student-t interval on the accuracy (band) and the
mean time or energy (x). One colour per layout and per k2 in every panel; the reference (one
cell, flat) is drawn wide and pale under the others, so that a line that coincides with it shows
as a line with a halo.

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
from wflsim.analysis.figures import save_study_figure  # noqa: E402
from wflsim.analysis.stats import over_seeds  # noqa: E402

#: The layouts of run_studies.sh: sweep suffix -> (label, colour, line style).
LAYOUTS = {
    "one": ("one cell", "#000000", "-"),
    "reuse1": ("7 cells, reuse 1", "#d62728", "-"),
    "reuse1-mean": ("7 cells, reuse 1, plan on mean I", "#d62728", "--"),
    "reuse3": ("7 cells, reuse 3", "#1f77b4", "-"),
    "reuse3-mean": ("7 cells, reuse 3, plan on mean I", "#1f77b4", "--"),
    "reuse7": ("7 cells, reuse 7", "#2ca02c", ":"),
}
#: The hierarchy's sweeps: k2 -> (label, colour, line style).
K2 = {"flat": ("flat", "#7f7f7f", "-"), "1": ("k2 = 1", "#9467bd", "--"),
      "5": ("k2 = 5", "#8c564b", ":"), "20": ("k2 = 20", "#e377c2", "-")}  # fmt: skip
SCHEMES = {"two_timescale": "Proposed (two_timescale)", "ideal": "Ideal FL"}


def _curve(
    ax_t: Axes,
    ax_e: Axes,
    folder: Path,
    label: str,
    color: str,
    style: str = "-",
    reference: bool = False,
) -> int:
    """Plot one sweep's mean accuracy against time and energy (the reference wide and pale);
    returns its number of seeds."""
    ev = tidy.evaluations(folder)
    stats = over_seeds(ev, by=["slot"], value_cols=["accuracy", "time_s", "cum_energy_j"])
    stats = stats.sort_values("slot")
    lw, alpha = (4.5, 0.35) if reference else (1.5, 1.0)
    for ax, x in ((ax_t, stats["time_s"]), (ax_e, stats["cum_energy_j"])):
        ax.plot(x, 100 * stats["accuracy"], color=color, ls=style, lw=lw, alpha=alpha,
                label=label)  # fmt: skip
        ax.fill_between(x, 100 * stats["accuracy_ci_low"], 100 * stats["accuracy_ci_high"],
                        color=color, alpha=0.15, lw=0)  # fmt: skip
    return int(ev["seed"].nunique())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the output folder of run_studies.sh")
    p.add_argument("--out", required=True, help="the PNG to write")
    args = p.parse_args(argv)
    root = Path(args.folder)
    fig, axes = plt.subplots(4, 2, figsize=(11, 15), sharey=True)
    seeds = set()
    for row, scheme in enumerate(SCHEMES):
        for key, (label, color, style) in LAYOUTS.items():
            folder = root / f"{scheme}-{key}"
            if folder.is_dir():
                ref = key == "one"
                seeds.add(_curve(axes[row][0], axes[row][1], folder, label, color, style, ref))
        axes[row][0].set_title(f"{SCHEMES[scheme]}: one cell and 7 cells", fontsize=10)
        axes[row][1].set_title(f"{SCHEMES[scheme]}: against the devices' energy", fontsize=10)
    for row, (scheme, flat) in enumerate((("two_timescale", "reuse1-mean"), ("ideal", "reuse1"))):
        for k2, (label, color, style) in K2.items():
            suffix = flat if k2 == "flat" else f"{flat}-k{k2}"
            folder = root / f"{scheme}-{suffix}"
            if folder.is_dir():
                ax_t, ax_e = axes[2 + row][0], axes[2 + row][1]
                seeds.add(_curve(ax_t, ax_e, folder, label, color, style, k2 == "flat"))
        plan = ", plan on mean I" if scheme == "two_timescale" else ""
        axes[2 + row][0].set_title(
            f"{SCHEMES[scheme]}, 7 cells, reuse 1{plan}:\nflat vs a cloud every k2 slots",
            fontsize=10,
        )
        axes[2 + row][1].set_title(
            f"{SCHEMES[scheme]}, hierarchical: against the devices' energy", fontsize=10
        )
    for row in axes:
        row[0].set_ylabel("test accuracy (%)")
        row[0].set_xlabel("simulated time (s)")
        row[1].set_xlabel("energy of all devices (J)")
        for ax in row:
            ax.grid(alpha=0.3)
        row[0].legend(loc="lower right", fontsize=7.5)
    n = ", ".join(str(s) for s in sorted(seeds))
    title = f"MNIST non-IID, 35 devices, MLP; mean and 95 % interval over {n} seeds"
    print(f"wrote {save_study_figure(fig, args.out, title, rect=(0.0, 0.0, 1.0, 0.985))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
