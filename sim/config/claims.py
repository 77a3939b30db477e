"""A study's own claims: the ``[[claims]]`` tables of a scenario or sweep file.

A claim is a hypothesis the study states before it looks at the results: configuration ``a``
has a higher (or lower) ``metric`` than configuration ``b``, by more than ``margin``. The
report, ``claims.csv`` and :func:`wflsim.compare` give each the paper's three-valued verdict
(:mod:`wflsim.analysis.hypotheses`). Claims never change a run: they are not part of the
resolved scenario (nor of a run's fingerprint), so they can be added or edited after the runs
(``wflsim report DIR --claims FILE``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from ..errors import ScenarioError
from .distributions import Strict
from .errors import scenario_error
from .limits import MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS

#: The run measures a claim can compare: the columns of the report's summary table
#: (:func:`wflsim.analysis.stats.summary`, one value per run) with their units.
SUMMARY_METRICS: dict[str, str] = {
    "total_energy_j": "energy of all devices over the run (J)",
    "energy_per_device_slot_j": "mean energy per device and slot, E_av (J)",
    "mean_queue_j": "mean virtual queue, Q_av (J)",
    "final_queue_j": "mean virtual queue after the last slot (J)",
    "max_budget_ratio": "the worst device's mean energy per slot over its budget (ratio)",
    "mean_conv_error": "mean convergence error, X_av",
    "mean_cost": "mean cost z_av = V X + Q E",
    "mean_gamma": "mean fraction of parameters frozen",
    "participation": "participating device-slots per device-slot (fraction)",
    "dropout_rate": "1 - participation (fraction)",
    "outage_rate": "late uploads per participation (fraction)",
    "available_rate": "device-slots online at the slot's start (fraction)",
    "drop_rate": "participations lost to a device going offline (fraction)",
    "mean_slot_s": "mean slot (round) duration (s)",
    "total_latency_s": "sum of the slot durations (s)",
    "final_stable_fraction": "stable fraction of the parameters at the last slot",
    "final_accuracy": "test accuracy at the last evaluation (fraction)",
    "best_accuracy": "best test accuracy of the run (fraction)",
    "epsilon_max": "[privacy] runs: the final epsilon, largest over the devices, at the run's delta",
    "epsilon_mean": "[privacy] runs: the final epsilon, mean over all devices, at the run's delta",
    "dp_clipped_fraction": "[privacy] runs: the applied updates that were clipped (fraction)",
    "dp_noise_std": "[privacy] runs: mean noise std per entry on the applied updates (update units)",
    "dp_stopped_devices": "[privacy] runs: devices stopped for their spent epsilon budget",
}
#: The metrics measured only in runs with ``[privacy]``.
PRIVACY_METRICS = (
    "epsilon_max",
    "epsilon_mean",
    "dp_clipped_fraction",
    "dp_noise_std",
    "dp_stopped_devices",
)

#: Measures read from the runs' evaluations, compared seed by seed.
DERIVED_METRICS: dict[str, str] = {
    "accuracy_at_same_energy": (
        "test accuracy at the largest total energy both runs of a seed reached (fraction)"
    ),
    "accuracy_at_same_time": (
        "test accuracy at the largest total latency both runs of a seed reached (fraction)"
    ),
    "time_to_accuracy": "total latency when the accuracy first reaches `target` (s)",
    "energy_to_accuracy": "total energy when the accuracy first reaches `target` (J)",
}

#: Every metric a claim may name.
CLAIM_METRICS: dict[str, str] = {**SUMMARY_METRICS, **DERIVED_METRICS}
#: The metrics that need ``target``.
TARGET_METRICS = ("time_to_accuracy", "energy_to_accuracy")
#: The most claims one file may state.
MAX_CLAIMS = 200
#: The selector key that names a :func:`wflsim.compare` variant (its label).
VARIANT_KEY = "variant"
#: Fields a selector may not name: they tell seeds apart, not configurations.
_NOT_SELECTABLE = ("seed", "name", "description")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

#: A selector's value: one scalar (text, number or true/false).
Scalar = str | bool | int | float
Selector = Annotated[dict[str, Scalar], Field(min_length=1, max_length=50)]


def _check_selector(v: dict[str, Any], which: str) -> dict[str, Any]:
    for key, value in v.items():
        if not _FIELD.fullmatch(key) or len(key) > MAX_NAME_CHARS:
            raise ValueError(f'{which}: {key!r} is not a dotted field name (e.g. "strategy.name")')
        if key in _NOT_SELECTABLE:
            raise ValueError(
                f"{which}: {key!r} cannot select a configuration (claims are paired by seed)"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{which}: {key} must be finite")
        if isinstance(value, str) and len(value) > MAX_NAME_CHARS:
            raise ValueError(f"{which}: {key} is longer than {MAX_NAME_CHARS} characters")
    return v


class ClaimConfig(Strict):
    """One claim: ``a`` has a ``better`` (higher or lower) ``metric`` than ``b``."""

    name: str = Field("", max_length=MAX_NAME_CHARS, description="a short key (default: claim N)")
    text: str = Field(
        "",
        max_length=MAX_DESCRIPTION_CHARS,
        description="the claim in words (default: made from the other fields)",
    )
    metric: str = Field(description="what is compared: one of CLAIM_METRICS")
    better: Literal["higher", "lower"] = Field(description="the direction a claims over b")
    a: Selector = Field(description="field -> value: the runs of the claimed configuration")
    b: Selector = Field(description="field -> value: the runs it is compared with")
    where: dict[str, Scalar] = Field(
        default_factory=dict,
        max_length=50,
        description="field -> value: only runs with these values (both sides)",
    )
    margin: Annotated[float, Field(ge=0, allow_inf_nan=False)] = Field(
        0.0, description="the difference must exceed this, in the metric's unit"
    )
    target: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = Field(
        None, description="the accuracy of time_to_accuracy and energy_to_accuracy (fraction)"
    )

    @field_validator("name", "text")
    @classmethod
    def _printable(cls, v: str) -> str:
        if v and not v.replace("\n", " ").isprintable():
            raise ValueError("must be text without control characters")
        return v

    @field_validator("metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        if v not in CLAIM_METRICS:
            raise ValueError(f"unknown metric {v!r}; one of: {', '.join(CLAIM_METRICS)}")
        return v

    @field_validator("a", "b", "where")
    @classmethod
    def _selector(cls, v: dict[str, Any], info: Any) -> dict[str, Any]:
        return _check_selector(v, info.field_name)

    @model_validator(mode="after")
    def _combination(self) -> ClaimConfig:
        if self.metric in TARGET_METRICS and self.target is None:
            raise ValueError(f"metric {self.metric} needs target (an accuracy, e.g. 0.9)")
        if self.metric not in TARGET_METRICS and self.target is not None:
            raise ValueError(f"target is only for {' and '.join(TARGET_METRICS)}")
        if self.a == self.b:
            raise ValueError("a and b select the same runs: make them differ in a field")
        shared = set(self.where) & (set(self.a) | set(self.b))
        if shared:
            raise ValueError(f"where and a/b both set {sorted(shared)[0]}: set it in one place")
        return self


def named_claims(claims: list[ClaimConfig]) -> list[ClaimConfig]:
    """The claims with their names (``claim N`` for the N-th unnamed one).

    Raises:
        ValueError: two claims have the same name.
    """
    names = [c.name or f"claim {i + 1}" for i, c in enumerate(claims)]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ValueError(f"two claims are named {name!r}: give each its own name")
    return [
        c if c.name else c.model_copy(update={"name": n})
        for c, n in zip(claims, names, strict=True)
    ]


class _ClaimsOnly(Strict):
    """The ``[[claims]]`` of a scenario or claims file (other tables are left to the scenario)."""

    claims: list[ClaimConfig] = Field(default_factory=list, max_length=MAX_CLAIMS)

    @field_validator("claims")
    @classmethod
    def _names(cls, v: list[ClaimConfig]) -> list[ClaimConfig]:
        return named_claims(v)


def parse_claims(table: Mapping[str, Any]) -> list[ClaimConfig]:
    """The ``[[claims]]`` of a raw scenario (or claims-only) table, validated as the scenario's
    validation validates them, each with its name (``claim N`` by default).

    Raises:
        ScenarioError: naming the claim and field (``claims[0].metric``).
    """
    if not isinstance(table, Mapping):
        raise ScenarioError("claims", "must be given in a table", 'e.g. {"claims": [...]}')
    part = {"claims": table["claims"]} if "claims" in table else {}
    try:
        got = _ClaimsOnly.model_validate(part)
    except ValidationError as err:
        raise scenario_error(err) from None
    return list(got.claims)


def claim_label(selector: dict[str, Any]) -> str:
    """A side of a claim in a few words: its values, or ``field=value`` where a value alone
    would not say which field (a number or true/false)."""
    parts = []
    for key, value in selector.items():
        if isinstance(value, str) and (key == VARIANT_KEY or key.endswith((".name", ".mode"))):
            parts.append(value)
        else:
            shown = f"{value:g}" if isinstance(value, float) else str(value).lower()
            shown = value if isinstance(value, str) else shown
            parts.append(f"{key}={shown}")
    return ", ".join(parts)


def claim_text(claim: ClaimConfig) -> str:
    """The claim in words: its ``text``, or one made from its fields."""
    if claim.text:
        return claim.text
    what = claim.metric if claim.target is None else f"{claim.metric} ({claim.target:g})"
    by = f" by more than {claim.margin:g}" if claim.margin else ""
    where = f" (where {claim_label(claim.where)})" if claim.where else ""
    return (
        f"{claim_label(claim.a)} has a {claim.better} {what} than {claim_label(claim.b)}"
        f"{by}{where}."
    )
