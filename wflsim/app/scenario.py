"""A scenario as the application takes it: validated by :mod:`sim.config.loading` (types, ranges,
unknown fields, the work a mobility model makes), then its ``[scheme]`` table against the scheme
registry (the scheme's name and its own parameters).

``sim.config`` knows nothing of the schemes (they are built on it), so the check that needs both
the scenario and the registry lives here. Every entry point validates through this module: the
command line, the API, a sweep's points and a resume (through :mod:`wflsim.app.run`, whose
:func:`~wflsim.app.run.prepare_scenario` also checks a ``Scenario`` validated elsewhere). Every
problem is a one-line :class:`sim.errors.ScenarioError` naming the field and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wflsim.sim.config import loading
from wflsim.sim.config.limits import shorten
from wflsim.sim.config.schema import Scenario
from wflsim.sim.errors import ScenarioError
from wflsim.sim.schemes import SCHEMES


def check_scheme(scenario: Scenario) -> None:
    """Check ``scheme.name`` against the registry and the scheme's parameters against its own
    parameter model (strictly, as every other field).

    Raises:
        ScenarioError: an unknown scheme (on ``scheme.name``, listing the known ones) or a bad
            parameter (on ``scheme.<parameter>``).
    """
    name = scenario.scheme.name
    if name not in SCHEMES:
        raise ScenarioError(
            "scheme.name",
            f"unknown scheme {shorten(name)!r}; known: {', '.join(sorted(SCHEMES))}",
            "see docs/scenario.md, [scheme]",
        )
    try:
        SCHEMES[name].Params.model_validate(scenario.scheme.params, strict=True)
    except ValidationError as err:
        e = loading.scenario_error(err)
        raise ScenarioError(f"scheme.{e.field}", e.problem, e.fix) from None


def validate_scenario(data: Mapping[str, Any]) -> Scenario:
    """Validate a raw scenario table fully: :func:`sim.config.loading.validate_scenario`, then
    :func:`check_scheme`."""
    scenario = loading.validate_scenario(data)
    check_scheme(scenario)
    return scenario


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> tuple[Scenario, str]:
    """Read, override and validate a scenario file fully: ``(scenario, original_text)``."""
    scenario, text = loading.load_scenario(path, overrides)
    check_scheme(scenario)
    return scenario, text
