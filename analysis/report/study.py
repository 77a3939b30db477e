"""What the report says of the study itself: what it varies (:func:`study_axes`,
:func:`axes_table`) and which of the paper's claims apply to it (:func:`paper_verdicts`); its own
claims are :mod:`wflsim.analysis.hypotheses`'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .. import claims, hypotheses, tidy

#: The paper's schemes: its own and its benchmarks (Section VI).
PAPER_SCHEMES = (claims.PROPOSED, *claims.HEURISTIC, *claims.SOTA)


def paper_verdicts(
    summary: pd.DataFrame, slots: pd.DataFrame, evaluations: pd.DataFrame
) -> tuple[
    list[tuple[claims.Claim, claims.Verdict]], list[tuple[claims.Claim, claims.Verdict]], str
]:
    """Every claim of the paper with its verdict (for ``claims.csv``), those the page shows,
    and a sentence on those it leaves out. The page shows the paper's claims where its
    configurations are in the study (a run of its scheme, ``two_timescale``, or of two of its
    schemes and benchmarks), and of those the ones the runs can test."""
    verdicts = claims.check_all(summary, slots, evaluations)
    schemes = set(summary["scheme"].astype(str)) if "scheme" in summary else set()
    paper = schemes & set(PAPER_SCHEMES)
    if claims.PROPOSED not in schemes and len(paper) < 2:
        return (
            verdicts,
            [],
            (
                "The paper's claims compare its scheme (two_timescale) with its benchmarks; this "
                "study has no run of that scheme nor of two of them, so the page checks none of "
                "them (claims.csv gives each with its verdict on these runs)."
            ),
        )
    shown = [(c, v) for c, v in verdicts if v.status != claims.NOT_MEASURABLE]
    unmeasured = [c.key for c, v in verdicts if v.status == claims.NOT_MEASURABLE]
    if not unmeasured:
        return verdicts, shown, ""
    return (
        verdicts,
        shown,
        (
            f"{len(unmeasured)} of the paper's {len(verdicts)} claims need runs this study does "
            f"not have and are left out here ({', '.join(unmeasured)}); claims.csv gives each "
            "with the reason."
        ),
    )


def _shown(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True)
    return "(unset)" if v is None else str(v)


#: The table whose fields the study's axes fold into one value each, its label
#: (:func:`wflsim.analysis.tidy.privacy_label`): a study of runs with and without ``[privacy]``
#: varies the mechanism, not each of its dozen fields (every one unset in the runs without it).
_FOLDED_AXES = {"privacy": tidy.privacy_label}


def _folded(fields: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``fields`` with the fields of each table of :data:`_FOLDED_AXES` replaced by one field,
    the table's label."""
    out: dict[str, dict[str, Any]] = {}
    for run, flat in fields.items():
        mine = dict(flat)
        for table, label in _FOLDED_AXES.items():
            prefix = table + "."
            part = {k[len(prefix) :]: v for k, v in flat.items() if k.startswith(prefix)}
            for k in part:
                del mine[prefix + k]
            given = {k: v for k, v in part.items() if v is not None}
            mine[table] = label(given or flat.get(table) or None)
        out[run] = mine
    return out


def study_axes(
    fields: Mapping[str, Mapping[str, Any]], summary: pd.DataFrame
) -> list[tuple[str, list[str]]]:
    """The fields the study's runs vary, each with its values (numbers in order); the fields
    of ``[privacy]`` as one, the run's privacy label."""
    fields = _folded(fields)
    runs = [r for r in summary["run"].astype(str) if r in fields]
    out = []
    for key in hypotheses.varying_fields(runs, fields):
        values = {hypotheses.value_key(fields[r].get(key)): fields[r].get(key) for r in runs}
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
    fields = _folded(fields)
    if not axes:
        return pd.DataFrame()
    out = summary[summary["run"].astype(str).isin(list(fields))].copy()
    for key, _ in axes:
        out[AXIS_PREFIX + key] = [_shown(fields[str(r)].get(key)) for r in out["run"]]
    return out


__all__ = ["PAPER_SCHEMES", "axes_table", "paper_verdicts", "study_axes"]
