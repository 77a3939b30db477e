"""A scenario as the application takes it: validated by :mod:`wflsim.sim.config.loading` (types,
ranges, unknown fields, the work a mobility model makes), then its ``[scheme]`` table against the
scheme registry (the scheme's name and its own parameters, and a CSI margin against the channel),
its ``[strategy]`` table against the strategy registry (:func:`check_strategy`), and the
plausibility of its values (:func:`report_implausible`: warnings, or errors when strict).

``wflsim.sim.config`` knows nothing of the schemes (they are built on it), nor of the strategies,
so the checks that need both the scenario and a registry live here. Every entry point validates through this module: the
command line, the API, a sweep's points and a resume (through :mod:`wflsim.app.run`, whose
:func:`~wflsim.app.run.prepare_scenario` also checks a ``Scenario`` validated elsewhere). Every
problem is a one-line :class:`wflsim.sim.errors.ScenarioError` naming the field and the fix.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wflsim.sim.config import loading
from wflsim.sim.config.limits import shorten
from wflsim.sim.config.plausibility import Finding, findings
from wflsim.sim.config.schema import Scenario
from wflsim.sim.errors import PlausibilityWarning, ScenarioError
from wflsim.sim.registry import SCHEMES, STRATEGIES
from wflsim.sim.world.channel.config import NakagamiConfig


def check_scheme(scenario: Scenario) -> None:
    """Check ``scheme.name`` against the registry and the scheme's parameters against its own
    parameter model (strictly, as every other field).

    Raises:
        ScenarioError: an unknown scheme (on ``scheme.name``, listing the known ones), a bad
            parameter (on ``scheme.<parameter>``) or a CSI margin the channel cannot serve
            (:func:`check_csi_margin`).
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
    check_csi_margin(scenario)


def check_strategy(scenario: Scenario) -> None:
    """Check ``strategy.name`` against the strategy registry and the strategy's parameters
    against its own parameter model (strictly, as every other field).

    Raises:
        ScenarioError: an unknown strategy (on ``strategy.name``, listing the known ones), a
            bad parameter (on ``strategy.<parameter>``) or a selection the run cannot make
            (:func:`check_selection`).
    """
    name = scenario.strategy.name
    if name not in STRATEGIES:
        raise ScenarioError(
            "strategy.name",
            f"unknown strategy {shorten(name)!r}; known: {', '.join(STRATEGIES.names())}",
            "see docs/scenario.md, [strategy]",
        )
    model = STRATEGIES[name].params
    known = {*model.model_fields, *(f.alias for f in model.model_fields.values() if f.alias)}
    unknown = sorted(set(scenario.strategy.params) - known)
    if unknown:  # also where a model registered from Python would allow extra fields
        raise ScenarioError(
            f"strategy.{shorten(unknown[0])}",
            f"unknown field (strategy {name!r} takes: {', '.join(sorted(known)) or 'none'})",
            "remove it or check its spelling against docs/scenario.md, [strategy]",
        )
    try:
        model.model_validate(scenario.strategy.params, strict=True)
    except ValidationError as err:
        e = loading.scenario_error(err)
        raise ScenarioError(f"strategy.{e.field}", e.problem, e.fix) from None
    check_selection(scenario)


def check_selection(scenario: Scenario) -> None:
    """``power_of_choice`` ranks devices by loss probes, which only a run that learns computes.

    Raises:
        ScenarioError: on ``strategy.selection.rule`` in a network-only run.
    """
    if scenario.strategy.selection.rule == "power_of_choice" and not scenario.learning.enabled:
        raise ScenarioError(
            "strategy.selection.rule",
            "power_of_choice ranks devices by their local loss, which a network-only run does "
            "not compute",
            'set learning.enabled = true, or use rule "uniform", "rate_per_joule" or "queue_slack"',
        )


def check_csi_margin(scenario: Scenario) -> None:
    """A scheme's CSI margin needs the law of the true channel given the estimate: a drawn channel
    (a replayed table has no CSI model) whose fading coefficient is Gaussian (not Nakagami-m with
    m != 1).

    Raises:
        ScenarioError: on ``scheme.csi_margin``.
    """
    if scenario.scheme.params.get("csi_margin") is None:
        return
    ch = scenario.channel
    fix = "remove scheme.csi_margin (Proposition 1 on the estimate) or "
    if ch.replay is not None:
        raise ScenarioError(
            "scheme.csi_margin",
            "a replayed channel table gives the estimate but no model of its error, which the "
            "margin's quantile needs",
            fix + "remove channel.replay",
        )
    if isinstance(ch.fading, NakagamiConfig) and ch.fading.m != 1.0:
        raise ScenarioError(
            "scheme.csi_margin",
            f"the margin's quantile is in closed form for a Gaussian fading coefficient "
            f"(Rayleigh, Rician, none); Nakagami-m with m = {ch.fading.m:g} has none",
            fix + 'use fading "rayleigh" or "rician"',
        )


def check_nones(table: Mapping[str, Any]) -> None:
    """Refuse a ``None`` in a scenario table given from Python unless it is what the field is
    when left out. TOML has no ``None``: a table is written as a file without its ``None``
    values, so a ``None`` means "the default". That is right for a field whose default is
    ``None`` (``channel.shadowing``: no shadowing; a run's resolved scenario holds such
    ``None``s and runs again as it is), and silently wrong for any other (``run.frames =
    None`` ran the default 20 frames).

    Raises:
        ScenarioError: naming the first such field (and its value when left out).
    """
    paths = loading.check_table(table)
    if not paths:
        return
    try:
        resolved = validate_scenario(
            loading.parse_scenario_text(loading.scenario_text(loading.plain_value(table)))
        ).model_dump(mode="json")
    except ScenarioError:
        resolved = {}  # the table has another problem, which its validation reports
    for path in paths:
        node: Any = resolved
        for key in path:
            node = node.get(key, _ABSENT) if isinstance(node, dict) else _ABSENT
        if node is None:
            continue
        field = ".".join(shorten(k, 40) for k in path)
        left_out = "" if node is _ABSENT else f"; left out, it is {shorten(repr(node), 40)}"
        raise ScenarioError(
            field,
            f"is None, which a scenario cannot hold{left_out}",
            "leave the key out to use the default, or give a value",
        )


#: A path the resolved scenario does not have.
_ABSENT = object()


def validate_scenario(data: Mapping[str, Any]) -> Scenario:
    """Validate a raw scenario table fully: :func:`wflsim.sim.config.loading.validate_scenario`,
    then :func:`check_scheme` and :func:`check_strategy`."""
    scenario = loading.validate_scenario(data)
    check_scheme(scenario)
    check_strategy(scenario)
    return scenario


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> tuple[Scenario, str]:
    """Read, override and validate a scenario file fully: ``(scenario, original_text)``."""
    scenario, text = loading.load_scenario(path, overrides)
    check_scheme(scenario)
    check_strategy(scenario)
    return scenario, text


def report_implausible(
    scenario: Scenario, *, strict: bool = False, reported: set[str] | None = None
) -> None:
    """Report the values of ``scenario`` that are implausible for their unit
    (:func:`wflsim.sim.config.plausibility.findings`): each as a :class:`PlausibilityWarning`, or
    with ``strict`` the first as an error.

    Args:
        reported: the findings already reported (their one-line texts; this call adds its own):
            a finding in it is not warned again (a sweep reports each distinct finding once).

    Raises:
        ScenarioError: with ``strict``, on the first finding's field, with its problem and fix.
    """
    report_findings(findings(scenario), strict=strict, reported=reported)


def report_findings(
    found: list[Finding], *, strict: bool = False, reported: set[str] | None = None
) -> None:
    """Report ``found`` as :func:`report_implausible` does (warnings; with ``strict`` the first
    is an error; ``reported``: findings already reported, skipped)."""
    for finding in found:
        if strict:
            raise ScenarioError(finding.field, finding.problem, finding.fix)
        line = finding.one_line()
        if reported is not None:
            if line in reported:
                continue
            reported.add(line)
        warnings.warn(
            PlausibilityWarning(finding.field, finding.problem, finding.fix), stacklevel=3
        )
