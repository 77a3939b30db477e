"""The ns-3 study's tables and figures (scenarios/ns3/run_study.sh; docs/results.md, "The uplink
played by ns-3").

Outcomes per uplink model and scheme, over the seeds (mean and 95 % Student-t interval): the
outage rate (uploads sent that missed the deadline), the devices' energy per device-slot, the
participation (device-slots with an upload) and the final test accuracy.

Per upload, each abstraction against ns-3 on the same upload: every upload of the ns-3 runs is
replayed, with the start times, payloads, powers and gains ns-3 played it with, on
(a) a dedicated band W (the paper's model: its time alone, the decision row's ``upload_s``),
(b) Shannon OFDMA and (c) OFDMA under the truncated Shannon bound (processor sharing of the
slot's uploads, wflsim's own OfdmaUplink on a fresh clock, cut at the deadline). Where both
ns-3 and an abstraction deliver an upload, the time ratio (abstraction / ns-3); over all
uploads, how often the abstraction says "arrived" where ns-3 says "missed" and the reverse.
By the upload's SNR over W (``p h / N0``) and by the number of uploads that shared the cell with
it (time-averaged over its life in ns-3, itself included).

    python scenarios/ns3/compare.py OUT            # OUT/compare/{outcomes,uploads}.csv, *.md, *.png
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import simpy

from wflsim.analysis.figures.common import scheme_color, scheme_marker
from wflsim.analysis.io import load_events
from wflsim.analysis.stats import t_interval, to_markdown
from wflsim.sim.radio.ofdma import OfdmaUplink
from wflsim.sim.radio.rates import SHANNON, RateModel
from wflsim.sim.world.channel.config import TruncatedShannonConfig

MODELS = ("ofdma-shannon", "ofdma-truncated", "ns3-plan-shannon", "ns3-plan-truncated")
LABELS = {
    "ofdma-shannon": "Shannon OFDMA",
    "ofdma-truncated": "truncated OFDMA",
    "ns3-plan-shannon": "ns-3 LTE (plans Shannon)",
    "ns3-plan-truncated": "ns-3 LTE (plans truncated)",
}
SCHEMES = ("two_timescale", "only_pc", "fixed_power")
ABSTRACTIONS = {
    "dedicated": ("Shannon alone on W (the paper)", "#7f7f7f"),
    "dedicated_trunc": ("truncated alone on W (the fit's setting)", "#8c564b"),
    "ofdma": ("Shannon OFDMA", "#17becf"),
    "truncated": ("truncated OFDMA", "#bcbd22"),
}


def runs_of(root: Path) -> list[tuple[str, Path]]:
    """``(model, run folder)`` of every run under the study's folder."""
    out = []
    for model in MODELS:
        folder = root / model
        if not folder.is_dir():
            continue
        for manifest in sorted(folder.rglob("manifest.json")):
            out.append((model, manifest.parent))
    return out


def outcomes(runs: list[tuple[str, Path]]) -> pd.DataFrame:
    """One row per run: its model, scheme, seed and outcomes."""
    rows = []
    for model, run in runs:
        m = json.loads((run / "manifest.json").read_text())
        s = m["summary"] or {}
        ev = load_events(run, ["eval", "energy"], ["accuracy", "participating", "success"])
        energy = ev[ev.event == "energy"]
        acc = ev[ev.event == "eval"]["accuracy"].astype(float)
        part = energy["participating"].astype(bool)
        rows.append(
            {
                "model": model,
                "scheme": m["scenario_resolved"]["scheme"]["name"],
                "seed": int(m["seed"]),
                "status": m["status"],
                "outage_rate": float(s.get("outage_rate", np.nan)),
                "energy_per_device_slot_j": float(s.get("total_energy_j", np.nan)) / len(energy),
                "participation": float(part.mean()),
                "final_accuracy": float(acc.iloc[-1]) if len(acc) else np.nan,
            }
        )
    return pd.DataFrame(rows)


def over_seeds(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Mean and 95 % interval of ``cols`` per model and scheme."""
    rows = []
    for (model, scheme), g in df.groupby(["model", "scheme"], sort=False):
        row: dict[str, object] = {"model": model, "scheme": scheme, "seeds": len(g)}
        for c in cols:
            mean, _, lo, hi, _ = t_interval(g[c].to_numpy(dtype=float))
            row[c], row[f"{c}_lo"], row[f"{c}_hi"] = mean, lo, hi
        rows.append(row)
    return pd.DataFrame(rows)


def _replay(
    slot: pd.DataFrame, deadline_s: float, w: float, n0: float, model: RateModel
) -> pd.Series:
    """Each upload's time and arrival on OFDMA (processor sharing, cut at the deadline), from the
    slot's start, with the uploads' ns-3 start times."""
    env = simpy.Environment()
    n = int(slot.device.max()) + 1
    p, h, bits = np.zeros(n), np.zeros(n), np.zeros(n)
    dev = slot.device.to_numpy(dtype=int)
    p[dev], h[dev], bits[dev] = slot.tx_power_w, slot.channel_gain, slot.payload_bits
    link = OfdmaUplink(w, n0, 0, 1)
    link.rate_model = model
    full = np.full(n, 1.0)  # finite: every upload enters the sharing
    link.open_slot(
        env,
        deadline_s=deadline_s,
        closes_at="deadline",
        tx_power_w=p,
        channel_gain=h,
        payload_bits=bits,
        upload_full_s=full,
        log=lambda _e: None,
        on_end=lambda _d: None,
    )
    start = float(slot.slot_start_s.iloc[0])

    def submit(d: int) -> Callable[[simpy.Event], None]:
        return lambda _e: link.submit(d)

    for d, t in zip(dev.tolist(), (slot.start_s - start).tolist(), strict=True):
        env.timeout(max(t, 0.0)).callbacks.append(submit(d))
    env.timeout(deadline_s).callbacks.append(lambda _e: link.close(everything=True))
    env.run()
    return pd.Series(
        {d: (float(link.transmitted_s[d]), bool(link.arrived[d])) for d in dev.tolist()}
    )


def uploads(runs: list[tuple[str, Path]], truncated: RateModel) -> pd.DataFrame:
    """One row per upload of the ns-3 runs, with each abstraction's time and arrival."""
    rows = []
    for model, run in runs:
        if not model.startswith("ns3"):
            continue
        m = json.loads((run / "manifest.json").read_text())
        sc = m["scenario_resolved"]
        w = float(sc["network"]["bandwidth_hz"])
        n0 = 10 ** ((float(sc["network"]["noise_dbm"]) - 30.0) / 10.0)
        tau0 = float(sc["run"]["deadline_s"])
        ev = load_events(
            run,
            ["slot_start", "decision", "upload_start", "upload_end"],
            [
                "slot",
                "device",
                "time_s",
                "channel_gain",
                "tx_power_w",
                "payload_bits",
                "upload_s",
                "success",
                "ns3_bytes",
            ],
        )
        starts = ev[ev.event == "slot_start"].set_index("slot").time_s.rename("slot_start_s")
        dec = ev[ev.event == "decision"][["slot", "device", "channel_gain", "payload_bits"]]
        up0 = ev[ev.event == "upload_start"][["slot", "device", "time_s", "tx_power_w"]].rename(
            columns={"time_s": "start_s"}
        )
        up1 = ev[ev.event == "upload_end"][["slot", "device", "time_s", "upload_s", "success"]]
        up1 = up1.rename(columns={"time_s": "end_s", "upload_s": "ns3_s", "success": "ns3_arrived"})
        u = up0.merge(up1, on=["slot", "device"]).merge(dec, on=["slot", "device"])
        u = u.join(starts, on="slot")
        u["ns3_arrived"] = u.ns3_arrived.astype(bool)
        for name, rate in (("ofdma", SHANNON), ("truncated", truncated)):
            got = []
            for _, slot in u.groupby("slot", sort=True):
                rep = _replay(slot, tau0, w, n0, rate)
                got += [rep[d] for d in slot.device.astype(int)]
            u[f"{name}_s"] = [g[0] for g in got]
            u[f"{name}_arrived"] = [g[1] for g in got]
        snr = u.tx_power_w * u.channel_gain / n0
        left = tau0 * (1 + 1e-9) - (u.start_s - u.slot_start_s)
        for key, rate in (("dedicated", SHANNON), ("dedicated_trunc", truncated)):
            with np.errstate(divide="ignore"):
                t = u.payload_bits / (w * rate.efficiency(snr.to_numpy()))
            u[f"{key}_s"] = t
            u[f"{key}_arrived"] = t <= left
        u["snr_db"] = 10 * np.log10(snr)
        u["sharing"] = _sharing(u)
        u["model"] = model
        u["scheme"] = sc["scheme"]["name"]
        u["seed"] = int(m["seed"])
        rows.append(u)
    if not rows:
        return pd.DataFrame()
    # a scheme whose decisions do not read the planning model (fixed_power) plays the same
    # uploads in both ns-3 configurations: each upload once
    every = pd.concat(rows, ignore_index=True)
    same = ["seed", "slot", "device", "start_s", "tx_power_w", "payload_bits"]
    return every.drop_duplicates(subset=same).reset_index(drop=True)


def _sharing(u: pd.DataFrame) -> np.ndarray:
    """Each upload's time-averaged number of uploads in flight with it in ns-3 (itself
    included), over its life there."""
    out = np.ones(len(u))
    for _, g in u.groupby("slot"):
        s = g.start_s.to_numpy()
        e = g.end_s.to_numpy()
        for i, idx in enumerate(g.index):
            life = e[i] - s[i]
            if life <= 0:
                continue
            overlap = np.clip(np.minimum(e, e[i]) - np.maximum(s, s[i]), 0.0, None)
            out[u.index.get_loc(idx)] = overlap.sum() / life
    return out


def upload_tables(u: pd.DataFrame) -> pd.DataFrame:
    """Per abstraction: uploads compared, median and quartiles of the time ratio where both
    delivered, and the arrival disagreements."""
    rows = []
    for key, (label, _) in ABSTRACTIONS.items():
        both = u[u.ns3_arrived & u[f"{key}_arrived"]]
        ratio = both[f"{key}_s"] / both.ns3_s
        rows.append(
            {
                "abstraction": label,
                "uploads": len(u),
                "both_arrived": len(both),
                "ratio_median": float(ratio.median()) if len(both) else np.nan,
                "ratio_q25": float(ratio.quantile(0.25)) if len(both) else np.nan,
                "ratio_q75": float(ratio.quantile(0.75)) if len(both) else np.nan,
                "says_arrived_ns3_missed": float((u[f"{key}_arrived"] & ~u.ns3_arrived).mean()),
                "says_missed_ns3_arrived": float((~u[f"{key}_arrived"] & u.ns3_arrived).mean()),
            }
        )
    return pd.DataFrame(rows)


def figure_uploads(u: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12.0, 8.6), layout="constrained")
    ax = axes[0, 0]
    for key, (label, color) in ABSTRACTIONS.items():
        both = u[u.ns3_arrived & u[f"{key}_arrived"]]
        r = np.sort((both[f"{key}_s"] / both.ns3_s).to_numpy())
        if r.size:
            ax.step(r, np.arange(1, r.size + 1) / r.size, where="post", color=color, label=label)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("upload time, abstraction / ns-3 (log)")
    ax.set_ylabel("fraction of the uploads both delivered")
    ax.set_title("(a) the time of one upload")
    ax.legend(fontsize=8, loc="upper left")
    edges_snr = np.arange(-25.0, 45.0, 5.0)
    panels = [
        (axes[0, 1], "snr_db", edges_snr, "SNR p h / N0 over W (dB)", "(b) by SNR"),
        (
            axes[1, 0],
            "sharing",
            np.array([0.5, 1.5, 3.0, 5.0, 8.0, 12.0, 16.0]),
            "uploads sharing the cell (time-averaged, itself included)",
            "(c) by sharing",
        ),
    ]
    for ax, col, edges, xlabel, title in panels:
        centers = (edges[:-1] + edges[1:]) / 2
        for key, (label, color) in ABSTRACTIONS.items():
            both = u[u.ns3_arrived & u[f"{key}_arrived"]]
            ratio = both[f"{key}_s"] / both.ns3_s
            binned = pd.cut(both[col], edges)
            med = ratio.groupby(binned, observed=False).median().to_numpy()
            q1 = ratio.groupby(binned, observed=False).quantile(0.25).to_numpy()
            q3 = ratio.groupby(binned, observed=False).quantile(0.75).to_numpy()
            ok = np.isfinite(med)
            ax.errorbar(
                centers[ok],
                med[ok],
                yerr=[med[ok] - q1[ok], q3[ok] - med[ok]],
                color=color,
                marker="o",
                ms=4,
                capsize=3,
                label=label,
            )
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("time ratio, abstraction / ns-3 (log)")
        ax.set_title(f"{title}: median, quartiles, uploads both delivered")
    ax = axes[1, 1]
    centers = (edges_snr[:-1] + edges_snr[1:]) / 2
    binned = pd.cut(u.snr_db, edges_snr)
    ax.plot(
        centers,
        u.ns3_arrived.groupby(binned, observed=False).mean().to_numpy(),
        color="k",
        marker="s",
        ms=5,
        label="ns-3 LTE",
    )
    for key, (label, color) in ABSTRACTIONS.items():
        rate = u[f"{key}_arrived"].groupby(binned, observed=False).mean().to_numpy()
        ax.plot(centers, rate, color=color, marker="o", ms=4, label=label)
    ax.set_xlabel("SNR p h / N0 over W (dB)")
    ax.set_ylabel("fraction of the uploads delivered by the deadline")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title("(d) delivered by the deadline, by SNR (every upload)")
    ax.legend(fontsize=8, loc="center right")
    fig.suptitle(
        "Each abstraction replayed on ns-3's own uploads (start, payload, power, gain), "
        f"{len(u):,} uploads of the ns-3 runs"
    )
    fig.savefig(path, dpi=150)
    plt.close(fig)


def figure_outcomes(t: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measures = [
        ("outage_rate", "outage rate (uploads sent that missed tau_0)"),
        ("energy_per_device_slot_j", "energy per device-slot (J)"),
        ("final_accuracy", "final test accuracy"),
    ]
    models = [m for m in MODELS if m in set(t.model)]  # the uplink models that were run
    fig, axes = plt.subplots(1, 3, figsize=(14.0, 4.3), layout="constrained")
    x = np.arange(len(models))
    width = 0.25
    for ax, (col, ylabel) in zip(axes, measures, strict=True):
        for i, scheme in enumerate(SCHEMES):
            rows = t[t.scheme == scheme].set_index("model").reindex(models)
            mean = rows[col].to_numpy(dtype=float)
            lo = rows[f"{col}_lo"].to_numpy(dtype=float)
            hi = rows[f"{col}_hi"].to_numpy(dtype=float)
            if col != "energy_per_device_slot_j":  # rates and accuracies lie in [0, 1]
                lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
            ax.errorbar(
                x + (i - 1) * width,
                mean,
                yerr=[mean - lo, hi - mean],
                fmt=scheme_marker(scheme),
                color=scheme_color(scheme),
                capsize=3,
                label=scheme,
            )
        ax.set_xticks(x, [LABELS[m].replace(" (", "\n(") for m in models], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    seeds = int(t.seeds.max())
    fig.suptitle(
        f"Outcomes over {len(models)} uplink models, same channel draws "
        f"(mean, 95 % interval over {seeds} seeds)"
    )
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the output folder of run_study.sh")
    args = parser.parse_args(argv)
    runs = runs_of(args.folder)
    if not runs:
        print(f"compare.py: no runs under {args.folder}", file=sys.stderr)
        return 2
    out = args.folder / "compare"
    out.mkdir(exist_ok=True)
    per_run = outcomes(runs)
    per_run.to_csv(out / "runs.csv", index=False)
    cols = ["outage_rate", "energy_per_device_slot_j", "participation", "final_accuracy"]
    table = over_seeds(per_run, cols)
    table.to_csv(out / "outcomes.csv", index=False)
    t = TruncatedShannonConfig()
    truncated = RateModel("truncated_shannon", t.alpha, 10 ** (t.snr_min_db / 10), t.se_max)
    u = uploads(runs, truncated)
    u.to_csv(out / "uploads.csv", index=False)
    ut = upload_tables(u)
    (out / "tables.md").write_text(
        "## Outcomes\n\n" + to_markdown(table, 4) + "\n\n## Uploads\n\n" + to_markdown(ut, 4) + "\n"
    )
    figure_outcomes(table, out / "outcomes.png")
    figure_uploads(u, out / "uploads.png")
    print((out / "tables.md").read_text())
    failed = int((per_run.status != "completed").sum())
    if failed:
        print(f"compare.py: {failed} runs did not complete", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
