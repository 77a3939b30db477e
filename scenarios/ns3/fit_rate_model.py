"""Fit the truncated Shannon rate model to ns-3's LTE uplink (docs/ns3.md, "The rate model").

One device alone in a 10 MHz LTE cell (50 resource blocks), on the channel wflsim would give it:
its transmit power p and a loss L such that wflsim's SNR p h / N0 (N0 = -104 dBm over W,
h = 10^(-L/10)) steps from -10 to 40 dB. At each SNR the device sends a long flow over UDP (the
link: what the MAC and PHY carry) and over TCP; the goodput between 0.5 s and 2.0 s of steady
state, over W, is ns-3's spectral efficiency at that SNR. The attenuated and truncated Shannon
bound of 3GPP TR 36.942, Annex A.2 (0 below SNR_min, alpha log2(1 + SNR), at most SE_max) is
fitted to the UDP points by least squares (SNR_min: the threshold that leaves the least error,
on a 0.05 dB grid between the last SNR that carries nothing and the first that carries
something), and its residual stated, over UDP and over TCP.

    python scenarios/ns3/fit_rate_model.py OUT     # writes OUT/efficiency.csv, OUT/fit.json,
                                                   # OUT/efficiency.png; about 3 min

The defaults of ``[channel.truncated_shannon]`` are this fit (wflsim.sim.radio.rates,
TRUNCATED_DEFAULTS); ``--check`` exits 1 if they differ from it by more than rounding.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from wflsim.sim.radio.ns3.build import ensure_program
from wflsim.sim.radio.ns3.process import Ns3Process
from wflsim.sim.radio.rates import TRUNCATED_DEFAULTS, RateModel

W_HZ = 10e6
N0_DBM = -104.0
TX_DBM = 23.0
SNRS_DB = np.arange(-10.0, 40.5, 1.0)
T0_NS, T1_NS = 500_000_000, 2_000_000_000
#: TR 36.942's own uplink parameters (Table A.2), for the figure
TR_UPLINK = RateModel("truncated_shannon", 0.4, 10 ** (-10 / 10), 2.0)


def efficiency(program: Path, snr_db: float, transport: str) -> float:
    """ns-3's goodput over W at wflsim's SNR ``snr_db``, bit/s/Hz."""
    loss = TX_DBM - N0_DBM - snr_db
    proc = Ns3Process(program, 300.0)
    try:
        proc.request(
            [
                f"config ues=1 enbs=1 rbs=50 seed=1 run=0 transport={transport} "
                "noise_figure_db=0 udp_rate_bps=60000000",
                "attach 0 0",
                "ready",
                f"gains 0 {loss!r}",
                f"power 0 0 {TX_DBM!r}",
                "start 0 0 1000000000",
            ]
        )
        delivered = []
        for t in (T0_NS, T1_NS):
            proc.request([f"run {t}"])
            lines = proc.request([f"inflight {t}"])[0]
            got = [int(ln.split()[2]) for ln in lines[:-1]]
            delivered.append(got[0] if got else 0)
    finally:
        proc.close()
    return 8.0 * (delivered[1] - delivered[0]) / ((T1_NS - T0_NS) * 1e-9) / W_HZ


def fit(snr_db: np.ndarray, se: np.ndarray) -> tuple[RateModel, float]:
    """The least-squares truncated bound of the points, and its RMS error (bit/s/Hz)."""
    snr = 10 ** (snr_db / 10)
    zero = snr_db[se <= 0.0]
    some = snr_db[se > 0.0]
    lo = float(zero.max()) if zero.size else float(snr_db.min()) - 1.0
    hi = float(some.min())
    best: tuple[float, RateModel] | None = None
    for thr_db in np.arange(lo + 0.05, hi + 0.025, 0.05):
        thr = 10 ** (thr_db / 10)
        on = snr >= thr

        def residual(x: np.ndarray, on: np.ndarray = on, thr: float = thr) -> np.ndarray:
            m = RateModel("truncated_shannon", float(x[0]), thr, float(x[1]))
            return np.asarray(m.efficiency(snr), dtype=np.float64) - se

        r = least_squares(residual, x0=[0.6, float(se.max())], bounds=([0.01, 0.1], [1.0, 30.0]))
        sse = float(np.sum(r.fun**2))
        if best is None or sse < best[0]:
            best = (sse, RateModel("truncated_shannon", float(r.x[0]), thr, float(r.x[1])))
    assert best is not None
    return best[1], math.sqrt(best[0] / len(se))


def rms(model: RateModel, snr_db: np.ndarray, se: np.ndarray) -> float:
    """RMS error of ``model`` on the points, bit/s/Hz."""
    return float(np.sqrt(np.mean((model.efficiency(10 ** (snr_db / 10)) - se) ** 2)))


def figure(out: Path, snr_db: np.ndarray, udp: np.ndarray, tcp: np.ndarray, m: RateModel) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fine = np.linspace(snr_db.min(), snr_db.max(), 600)
    x = 10 ** (fine / 10)
    fig, ax = plt.subplots(figsize=(7.0, 4.2), layout="constrained")
    ax.plot(fine, np.log2(1 + x), color="0.55", ls="--", label="Shannon, log2(1 + SNR)")
    ax.plot(
        fine,
        TR_UPLINK.efficiency(x),
        color="0.55",
        ls=":",
        label="TR 36.942 uplink (0.4, -10 dB, 2.0)",
    )
    ax.plot(
        fine,
        m.efficiency(x),
        color="tab:red",
        label=f"fit: alpha {m.alpha:.3f}, SNR_min {10 * math.log10(m.snr_min):.2f} dB, "
        f"SE_max {m.se_max:.2f}",
    )
    ax.plot(snr_db, udp, "o", color="tab:blue", ms=4, label="ns-3 LTE, UDP (fitted)")
    ax.plot(snr_db, tcp, "s", mfc="none", color="tab:green", ms=4, label="ns-3 LTE, TCP")
    ax.set_xlabel("SNR p h / N0 over W = 10 MHz (dB)")
    ax.set_ylabel("goodput / W (bit/s/Hz)")
    ax.set_title("ns-3's LTE uplink against the rate models (one device, 50 resource blocks)")
    ax.set_ylim(0, 5.5)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.savefig(out, dpi=150)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out", type=Path, help="folder for efficiency.csv, fit.json, efficiency.png"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the shipped defaults differ from the fit"
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    program = ensure_program()
    udp = np.array([efficiency(program, float(s), "udp") for s in SNRS_DB])
    tcp = np.array([efficiency(program, float(s), "tcp") for s in SNRS_DB])
    with open(args.out / "efficiency.csv", "w") as f:
        f.write("snr_db,udp_bps_per_hz,tcp_bps_per_hz\n")
        for row in zip(SNRS_DB, udp, tcp, strict=True):
            f.write(",".join(f"{v:.6g}" for v in row) + "\n")
    model, err = fit(SNRS_DB, udp)
    above = udp > 0
    result = {
        "alpha": round(model.alpha, 3),
        "snr_min_db": round(10 * math.log10(model.snr_min), 2),
        "se_max": round(model.se_max, 2),
        "rms_udp_bps_per_hz": err,
        "rms_tcp_bps_per_hz": rms(model, SNRS_DB, tcp),
        "max_rel_error_udp_where_positive": float(
            np.max(np.abs(model.efficiency(10 ** (SNRS_DB[above] / 10)) - udp[above]) / udp[above])
        ),
        "shannon_rms_udp_bps_per_hz": rms(RateModel(), SNRS_DB, udp),
    }
    (args.out / "fit.json").write_text(json.dumps(result, indent=2) + "\n")
    figure(args.out / "efficiency.png", SNRS_DB, udp, tcp, model)
    print(json.dumps(result, indent=2))
    if args.check:
        shipped = TRUNCATED_DEFAULTS
        same = all(abs(shipped[k] - result[k]) <= 0.02 * max(1.0, abs(result[k])) for k in shipped)
        if not same:
            print(f"the shipped defaults {shipped} differ from the fit", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
