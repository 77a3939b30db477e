"""What the report says of the study itself: what it varies (:func:`study_axes`,
:func:`axes_table`) and which of the paper's claims apply to it (:func:`paper_verdicts`); its own
claims are :mod:`wflsim.analysis.hypotheses`'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .. import claims, hypotheses


def paper_verdicts(
    summary: pd.DataFrame, slots: pd.DataFrame, evaluations: pd.DataFrame
) -> tuple[list[tuple[claims.Claim, claims.Verdict]], str]:
    """The paper's claims with their verdicts where its configurations are in the study (a run
    of its scheme, ``two_timescale``), and a sentence on those left out: none at all without
    such a run, else those that need runs the study lacks (``not measurable here``)."""
    if "scheme" not in summary or not (summary["scheme"] == claims.PROPOSED).any():
        return [], (
            "The paper's claims compare its scheme (two_timescale) with its benchmarks; no run "
            "of this study uses that scheme, so none of them is checked here."
        )
    verdicts = claims.check_all(summary, slots, evaluations)
    unmeasured = [c.key for c, v in verdicts if v.status == claims.NOT_MEASURABLE]
    if not unmeasured:
        return verdicts, ""
    return verdicts, (
        f"{len(unmeasured)} of the paper's {len(verdicts)} claims need runs this study does "
        f"not have and are left out here ({', '.join(unmeasured)}); claims.csv gives each "
        "with the reason."
    )


def _shown(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True)
    return "(unset)" if v is None else str(v)


def study_axes(
    fields: Mapping[str, Mapping[str, Any]], summary: pd.DataFrame
) -> list[tuple[str, list[str]]]:
    """The fields the study's runs vary, each with its values (numbers in order)."""
    runs = [r for r in summary["run"].astype(str) if r in fields]
    out = []
    for key in hypotheses.varying_fields(runs, fields):
        values = {json.dumps(fields[r].get(key), sort_keys=True): fields[r].get(key) for r in runs}
        plain: list[Any] = list(values.values())
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in plain)
        ordered = sorted(plain, key=float) if numeric else sorted(plain, key=_shown)
        out.append((key, [_shown(v) for v in ordered]))
    return out


def axes_table(summary: pd.DataFrame, fields: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The summary with a column ``axis:<field>`` per field the runs vary (each run's value as
    text), the table of :func:`wflsim.analysis.figures.axes_figure`; empty when no field varies."""
    from ..figures import AXIS_PREFIX

    axes = study_axes(fields, summary)
    if not axes:
        return pd.DataFrame()
    out = summary[summary["run"].astype(str).isin(list(fields))].copy()
    for key, _ in axes:
        out[AXIS_PREFIX + key] = [_shown(fields[str(r)].get(key)) for r in out["run"]]
    return out


__all__ = ["axes_table", "paper_verdicts", "study_axes"]
