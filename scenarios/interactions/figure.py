"""Accuracy when events interact, as one figure: test accuracy against simulated time, one panel
per condition (the paper's model, devices that come and go, stragglers, a shared OFDMA uplink),
one colour per scheme; at each evaluation the mean over seeds with its 95 % Student-t interval
on the accuracy (band) and the mean simulated time (x).

    bash scenarios/interactions/accuracy.sh runs/interactions/accuracy
    python scenarios/interactions/figure.py runs/interactions/accuracy \
        --out runs/interactions/accuracy/accuracy_vs_time.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from wflsim.analysis import tidy  # noqa: E402
from wflsim.analysis.figures import scheme_color  # noqa: E402
from wflsim.analysis.stats import over_seeds  # noqa: E402

#: The sweeps of scenarios/interactions/accuracy.sh, in panel order, with their titles.
CONDITIONS = {
    "paper": "paper's model",
    "churn": "devices come and go",
    "stragglers": "stragglers (background load)",
    "ofdma": "shared OFDMA uplink (planned W/30)",
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the output folder of accuracy.sh (one sweep per condition)")
    p.add_argument("--out", required=True, help="the PNG to write")
    args = p.parse_args(argv)
    root = Path(args.folder)
    present = [c for c in CONDITIONS if (root / c).is_dir()]
    if not present:
        p.error(f"{root} holds none of the sweeps {', '.join(CONDITIONS)}")
    fig, axes = plt.subplots(
        1, len(present), figsize=(3.6 * len(present), 3.4), sharey=True, squeeze=False
    )
    for ax, cond in zip(axes[0], present, strict=True):
        ev = tidy.evaluations(root / cond)
        stats = over_seeds(ev, by=["scheme", "slot"], value_cols=["accuracy", "time_s"])
        for scheme, rows in stats.groupby("scheme"):
            rows = rows.sort_values("slot")
            color = scheme_color(str(scheme))
            x = rows["time_s"]
            ax.plot(x, 100 * rows["accuracy"], color=color, lw=1.6,
                    label=tidy.SCHEME_LABELS.get(str(scheme), str(scheme)))  # fmt: skip
            ax.fill_between(x, 100 * rows["accuracy_ci_low"], 100 * rows["accuracy_ci_high"],
                            color=color, alpha=0.2, lw=0)  # fmt: skip
        n = int(ev.groupby("scheme")["seed"].nunique().min())
        ax.set_title(f"{CONDITIONS[cond]}\n({n} seeds)", fontsize=9)
        ax.set_xlabel("simulated time (s)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy (%)")
    axes[0][0].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
