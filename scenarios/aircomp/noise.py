"""The second AirComp study (run_controller_study.sh) in four panels against the receiver's noise
N0: final test accuracy, the devices' total energy, the share of device-slots with a device
taking part, and over the air the closed-form error of the received sum for unit-variance updates
(``sum_mse``, against the signal's own variance, shaded); one colour per uplink (the OFDMA and
optimal-powers colours as in figure.py), mean over seeds with its 95 % Student-t interval; a
hollow marker off the line is a configuration whose runs failed (their values cover the slots
they played).

    python scenarios/aircomp/summarise.py runs/aircomp-controller --csv runs/aircomp-controller/runs.csv
    python scenarios/aircomp/noise.py runs/aircomp-controller/runs.csv --out runs/aircomp-controller/noise.png
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from figure import UPLINKS as FIRST_STUDY  # noqa: E402

from wflsim.analysis.figures import save_study_figure  # noqa: E402
from wflsim.analysis.stats import over_seeds  # noqa: E402

#: The uplinks of run_controller_study.sh: sweep prefix -> (label, colour, marker).
UPLINKS = {
    "dedicated": ("dedicated bands, paper's controller", "#ff7f0e", "s"),
    "ofdma": ("digital OFDMA, paper's controller", FIRST_STUDY["ofdma"][1], "o"),
    "aircomp-ctl": ("AirComp, adapted controller", "#9467bd", "^"),
    "aircomp-opt": ("AirComp, optimal powers, Ideal FL", FIRST_STUDY["aircomp-opt"][1], "v"),
}
PANELS = [
    ("final_accuracy", "final test accuracy (fraction)", "linear"),
    ("total_energy_j", "devices' total energy (J)", "linear"),
    ("participation", "device-slots taking part (fraction)", "linear"),
    ("sum_mse", "error of the received sum per entry\n(unit-variance updates, squared)", "log"),
]
DEVICES = 30  #: controller.toml's num_devices (equal batches: every weight a_n = 1 / 30)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", help="summarise.py's per-run CSV (--csv)")
    p.add_argument("--out", required=True, help="the PNG to write")
    args = p.parse_args(argv)
    runs = pd.read_csv(args.runs)
    parts = runs["configuration"].str.extract(r"^(?P<uplink>.+)_n0-(?P<n0>\d+)$")
    if parts.isna().any().any():
        p.error("configurations named <uplink>_n0-<|N0| dBm> expected (run_controller_study.sh)")
    runs = runs.assign(uplink=parts["uplink"], n0_dbm=-parts["n0"].astype(float))
    stats = over_seeds(
        runs, by=["uplink", "n0_dbm"], value_cols=[*(c for c, _, _ in PANELS), "completed"]
    )
    fig, axes = plt.subplots(1, len(PANELS), figsize=(18, 4.6))
    for ax, (col, label, scale) in zip(axes, PANELS, strict=True):
        for key, (name, color, marker) in UPLINKS.items():
            rows = stats[stats["uplink"] == key].sort_values("n0_dbm")
            mean = rows[col].to_numpy(dtype=float)
            if not np.isfinite(mean).any():
                continue  # a digital uplink has no aggregation error
            lo = rows[f"{col}_ci_low"].to_numpy(dtype=float)
            hi = rows[f"{col}_ci_high"].to_numpy(dtype=float)
            if scale == "log":
                lo = np.where(lo > 0, lo, mean)  # a log axis: no interval below 0
            failed = rows["completed"].to_numpy(dtype=float) < 1.0
            done = np.where(failed, np.nan, mean)  # the line joins the completed runs only
            ax.errorbar(rows["n0_dbm"], done, yerr=[done - lo, hi - done], color=color,
                        marker=marker, capsize=3, label=name)  # fmt: skip
            if failed.any():  # their values cover only the slots the runs played
                ax.plot(rows["n0_dbm"][failed], mean[failed], marker, ms=9, mfc="none",
                        color=color, label="runs that failed (diverged): over the slots played")  # fmt: skip
        if col == "sum_mse":  # the signal's variance, from independent to identical updates
            ax.axhspan(1.0 / DEVICES, 1.0, color="0.85", zorder=0,
                       label="the signal: the mean of 30 unit-variance updates,\n"
                       "from independent (1/30) to identical ones (1)")  # fmt: skip
            ax.legend(fontsize=7, loc="upper left")  # fmt: skip
        ax.set_yscale(scale)
        ax.set_xlabel("receiver noise N0 over 10 MHz (dBm)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
    handles, labels = axes[1].get_legend_handles_labels()
    axes[0].legend(handles, labels, fontsize=8, loc="lower left")
    n = int(runs.groupby("configuration")["seed"].nunique().min())
    title = (
        "digits MLP, 30 devices, 200 slots: the paper's controller digital and over the air as "
        f"the SNR falls; mean and 95 % interval over {n} seeds"
    )
    print(f"wrote {save_study_figure(fig, args.out, title, fontsize=10)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
