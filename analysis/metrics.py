"""Metrics of one run or many, computed from traces alone.

``python -m analysis.metrics RUN_DIR [RUN_DIR ...]`` prints the summary table in Markdown.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.io import load_events, read_metadata


def _float(df: pd.DataFrame, col: str) -> pd.Series:
    return df[col].astype("float64")


def run_summary(run: str | Path) -> dict[str, float | str | int]:
    """One row of per-run metrics.

    Energy, cost, queue and convergence-error figures are averages over devices and slots
    (per device-slot); ``final_accuracy`` is the last evaluation of the global model.
    """
    meta = read_metadata(run)
    resolved = json.loads(meta["wflsim.scenario_resolved"])
    e = load_events(run, events=["energy"])
    fr = load_events(run, events=["freeze"])
    ev = load_events(run, events=["eval"])
    agg = load_events(run, events=["aggregate"])
    part = e["participating"].astype(bool)
    succ = e["success"].astype(bool)
    row: dict[str, float | str | int] = {
        "run": str(run),
        "scheme": resolved["scheme"]["name"],
        "V": float(resolved["scheme"].get("V", np.nan)),
        "seed": int(resolved["seed"]),
        "slots": int(len(agg)),
        "energy_per_slot_j": float(_float(e, "energy_j").mean()),
        "cost_per_slot": float(_float(e, "cost").mean())
        if e["cost"].notna().any()
        else float("nan"),
        "conv_error_per_slot": float(_float(e, "conv_error").mean())
        if e["conv_error"].notna().any()
        else float("nan"),
        "queue_j": float(_float(e, "queue_j").mean()),
        "mean_gamma": float(_float(fr, "gamma").mean()),
        "participation": float(part.mean()),
        "success_rate": float(succ.mean()),
        "outage_rate": float((part & ~succ).sum() / max(int(part.sum()), 1)),
        "total_latency_s": float(_float(agg, "slot_duration_s").sum()),
        "final_accuracy": float(_float(ev, "accuracy").iloc[-1]) if len(ev) else float("nan"),
    }
    return row


def summary_table(runs: list[str | Path]) -> pd.DataFrame:
    """:func:`run_summary` of each run, one row per run."""
    return pd.DataFrame([run_summary(r) for r in runs])


def running_averages(run: str | Path) -> pd.DataFrame:
    """Per slot: the running time-average (from slot 0) of the per-device energy and cost.

    Columns: ``slot``, ``energy_j`` (mean over devices of that slot), ``avg_energy_j`` (running
    average up to the slot), ``cost``, ``avg_cost`` — the quantities of the paper's Figs. 3-4.
    """
    e = load_events(run, events=["energy"])
    per_slot = (
        e.groupby("slot")
        .agg(energy_j=("energy_j", "mean"), cost=("cost", "mean"))
        .astype("float64")
    )
    per_slot["avg_energy_j"] = per_slot["energy_j"].expanding().mean()
    per_slot["avg_cost"] = per_slot["cost"].expanding().mean()
    return per_slot.reset_index()


def budget_compliance(run: str | Path) -> pd.DataFrame:
    """Per device: average energy per slot, its budget, and their ratio."""
    cfg = load_events(run, events=["device_config"]).set_index("device")
    e = load_events(run, events=["energy"])
    avg = e.groupby("device")["energy_j"].mean().astype("float64")
    out = pd.DataFrame({"avg_energy_j": avg, "budget_j": cfg["energy_budget_j"].astype("float64")})
    out["ratio"] = out["avg_energy_j"] / out["budget_j"]
    return out


def to_markdown(df: pd.DataFrame, digits: int = 4) -> str:
    """A DataFrame as a Markdown table (numbers to ``digits`` significant digits)."""

    def fmt(v: object) -> str:
        if isinstance(v, float | np.floating):
            return f"{v:.{digits}g}"
        return str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m analysis.metrics RUN_DIR [RUN_DIR ...]", file=sys.stderr)
        return 2
    table = summary_table(args).drop(columns=["run"])
    print(to_markdown(table))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
