"""The figure of a study's own claims (:mod:`wflsim.analysis.hypotheses`): one row per claim and
context, the mean paired difference ``a - b`` over the seeds with its 95 % Student-t interval,
the claimed side of the margin shaded, the verdict in the row's colour and words."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from .common import DataFigure, _need, _no_offset

#: The colour of each verdict (the report's page uses the same).
VERDICT_COLORS: dict[str, str] = {
    "holds": "#1a7f37",
    "does not hold": "#b42318",
    "inconclusive": "#9a6700",
    "not measurable here": "#6e7781",
}
#: The most rows (claim contexts) the figure draws.
MAX_ROWS = 40
#: The x range of a row whose difference is 0 in every seed (in the metric's unit).
_FLAT_SPAN = 0.02
_COLUMNS = ["claim", "context", "metric", "mean", "low", "high", "n", "status", "margin", "better"]


def _unit(metric: str) -> str:
    from ..hypotheses import metric_unit

    unit = metric_unit(metric)
    return "" if unit in ("", "fraction", "ratio") else f" ({unit})"


def claims_figure(measured: pd.DataFrame) -> DataFigure:
    """One panel per claim and context (rows), each on its own axis in its metric's unit: the
    mean of ``a - b`` over the seeds (point) with its 95 % interval (bar; none with one seed),
    the margin as a dashed line with the claimed side shaded, coloured by the verdict.

    ``measured``: rows of :class:`wflsim.analysis.hypotheses.Measured` (as a table).

    Raises:
        InsufficientData: no claim was measured (no rows).
    """
    _need(measured, _COLUMNS, "the study's claims")
    rows = measured.reset_index(drop=True)
    shown = rows.head(MAX_ROWS)
    n = len(shown)
    fig = DataFigure(figsize=(7.0, 0.5 + 1.05 * n), layout="constrained")
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    fig.suptitle("The study's claims: the difference a - b paired by seed (mean, 95 % interval)")
    if len(rows) > n:
        fig.notes.append(f"the first {n} of {len(rows)} claim contexts are drawn (claims.csv: all)")
    for ax, (_, r) in zip(axes, shown.iterrows(), strict=True):
        color = VERDICT_COLORS.get(str(r["status"]), "#6e7781")
        margin = float(r["margin"]) * (1 if r["better"] == "higher" else -1)
        lo, hi = float(r["low"]), float(r["high"])
        has_bar = int(r["n"]) >= 2 and np.isfinite(lo) and np.isfinite(hi)
        values = [float(r["mean"]), margin, *([lo, hi] if has_bar else [])]
        span = max(values) - min(values)
        if span <= 1e-9 * max(1.0, *map(abs, values)):  # no difference in any seed
            span = max(abs(float(r["mean"])) * 0.1, _FLAT_SPAN)
            values = [values[0] - span / 2, values[0] + span / 2]
        left, right = min(values) - 0.15 * span, max(values) + 0.15 * span
        ax.set_xlim(left, right)
        if r["better"] == "higher":
            ax.axvspan(margin, right, color=color, alpha=0.08, lw=0)
        else:
            ax.axvspan(left, margin, color=color, alpha=0.08, lw=0)
        ax.axvline(margin, color="#444444", lw=0.8, ls="--")
        if has_bar:
            ax.errorbar(
                [float(r["mean"])], [0], xerr=[[float(r["mean"]) - lo], [hi - float(r["mean"])]],
                fmt="o", color=color, capsize=4, ms=6,
            )  # fmt: skip
        else:
            ax.plot([float(r["mean"])], [0], "o", color=color, ms=6)
        ax.set_yticks([])
        ax.set_ylim(-1, 1)
        seeds = f"{int(r['n'])} seed{'s' if int(r['n']) != 1 else ''}"
        head = f"{r['claim']}: {r['status']} ({seeds})"
        if str(r["context"]):
            head += f" | {r['context']}"
        ax.set_title("\n".join(textwrap.wrap(head, 95)), fontsize=8, loc="left", color=color)
        ax.set_xlabel(f"{r['metric']}: {r['a']} - {r['b']}{_unit(str(r['metric']))}", fontsize=8)
        ax.tick_params(labelsize=7)
    return _no_offset(fig)
