"""What the report says of the study itself: its own claims (from ``--claims``, the sweep's
scenario or the runs' scenarios), what it varies, and which of the paper's claims apply to it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from wflsim.sim.config.claims import ClaimConfig
from wflsim.sim.errors import ScenarioError
from wflsim.sim.rundir import read_json, read_manifest

from .. import claims, hypotheses

#: What ``write_report(claims=...)`` takes: a claims or scenario file, or the claims themselves.
ClaimsArg = str | os.PathLike[str] | Sequence[ClaimConfig | Mapping[str, Any]] | None


def _from_file(path: str | os.PathLike[str]) -> list[ClaimConfig]:
    from wflsim.sim.config.loading import read_scenario_file

    text, _ = read_scenario_file(os.fspath(path))
    found = hypotheses.claims_from_text(text)
    if not found:
        raise ScenarioError(
            "--claims", f"{path} states no [[claims]]", "add [[claims]] tables (docs/scenario.md)"
        )
    return found


def _from_text(text: object) -> list[ClaimConfig]:
    if not isinstance(text, str):
        return []
    return hypotheses.claims_from_text(text)


def study_claims_of(source: Path, dirs: Sequence[Path], given: ClaimsArg) -> list[ClaimConfig]:
    """The study's claims: ``given`` (a file holding ``[[claims]]``, or claims as tables or
    :class:`ClaimConfig`), else those of the sweep's scenario (``sweep.json``'s
    ``scenario_text``), else those the runs' scenarios state (the same claims once).

    Raises:
        ScenarioError: a bad claim (naming it and its field), a claims file without claims, or
            runs whose scenarios state different claims under one name.
    """
    from wflsim.sim.config.loading import parse_claims

    if isinstance(given, str | os.PathLike):
        return _from_file(given)
    if given is not None:
        tables = [c.model_dump() if isinstance(c, ClaimConfig) else dict(c) for c in given]
        return parse_claims({"claims": tables})
    sweep = read_json(source / "sweep.json") if source.is_dir() else None
    if isinstance(sweep, dict) and "scenario_text" in sweep:
        return _from_text(sweep.get("scenario_text"))
    seen: dict[str, ClaimConfig] = {}
    for d in dirs:
        for c in _from_text((read_manifest(d) or {}).get("scenario_text")):
            if c.name in seen and seen[c.name] != c:
                raise ScenarioError(
                    "claims",
                    f"the runs state different claims named {c.name!r}",
                    "give the study's claims with wflsim report --claims FILE",
                )
            seen.setdefault(c.name, c)
    return list(seen.values())


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


__all__ = ["ClaimsArg", "paper_verdicts", "study_axes", "study_claims_of"]
