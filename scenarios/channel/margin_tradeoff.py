"""The outage-energy trade-off of the CSI margin as one figure: per scheme and CSI error variance,
the outage rate against the energy per device-slot of the paper's rule (Proposition 1 on the
estimate) and of the margin at each target outage q, means over seeds with 95 % Student-t
intervals on both axes.

    wflsim sweep scenarios/channel/csi_margin.toml --out runs/channel/csi_margin
    wflsim sweep scenarios/channel/csi_error.toml --out runs/channel/csi_margin_paper \
        --grid scheme.name=two_timescale,only_pc --grid channel.csi.error_variance=0.01,0.1,0.4
    python scenarios/channel/margin_tradeoff.py runs/channel/csi_margin \
        runs/channel/csi_margin_paper --out runs/channel/figures/csi_margin_tradeoff.png
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from wflsim.analysis import channel  # noqa: E402
from wflsim.analysis.figures import save_study_figure, scheme_color  # noqa: E402

X, Y = "energy_per_device_slot_j", "outage_rate"
MARKERS = {0.01: "v", 0.05: "o", 0.2: "^"}  # target outage q -> marker; the paper's rule: "s"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="the two sweep folders (margin, paper's rule)")
    p.add_argument("--out", required=True, help="the PNG to write")
    args = p.parse_args(argv)
    table = channel.outcomes(args.runs)
    by = ["scheme", "csi_error_variance", "csi_target_outage"]
    s = channel.over_seeds(table, by, [X, Y])
    variances = sorted(s["csi_error_variance"].unique())
    fig, axes = plt.subplots(1, len(variances), figsize=(4.2 * len(variances), 3.8), sharey=True)
    for ax, e2 in zip(np.atleast_1d(axes), variances, strict=True):
        for _, row in s[s["csi_error_variance"] == e2].iterrows():
            q = row["csi_target_outage"]
            paper = bool(np.isnan(q))
            ax.errorbar(
                row[X],
                row[Y],
                xerr=[[row[X] - row[f"{X}_ci_low"]], [row[f"{X}_ci_high"] - row[X]]],
                yerr=[[row[Y] - row[f"{Y}_ci_low"]], [row[f"{Y}_ci_high"] - row[Y]]],
                marker="s" if paper else MARKERS.get(q, "o"),
                markersize=7,
                color=scheme_color(row["scheme"]),
                mfc="white" if paper else scheme_color(row["scheme"]),
                capsize=2,
                linestyle="none",
            )
            if paper:
                ax.annotate("paper's rule", (row[X], row[Y]), textcoords="offset points",
                            xytext=(5, 4), fontsize=7)  # fmt: skip
        ax.set_yscale("log")
        ax.set_title(f"CSI error variance e2 = {e2:g}", fontsize=10)
        ax.set_xlabel("energy per device-slot (J)")
        ax.grid(True, alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("outage rate (fraction of uploads, log scale)")
    handles = [
        plt.Line2D([], [], color=scheme_color(sch), marker="o", linestyle="none", label=sch)
        for sch in sorted(s["scheme"].unique())
    ]
    handles.append(plt.Line2D([], [], color="k", marker="s", mfc="white", linestyle="none",
                              label="paper's rule (Proposition 1 on the estimate)"))  # fmt: skip
    handles += [
        plt.Line2D([], [], color="k", marker=m, linestyle="none", label=f"margin, q = {q:g}")
        for q, m in MARKERS.items()
    ]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    title = "CSI margin: outage against energy (means over seeds, 95 % intervals)"
    out = save_study_figure(fig, args.out, title, rect=(0, 0, 0.78, 0.95), dpi=130)
    print(f"figure: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
