"""Which update rules, server strategies and clippings compose with each noise placement of
``[privacy]`` (docs/privacy.md, "The learner"): the one place that says so, without torch.

The scenario's resolution (``wflsim.app.prepare``) refuses a combination here before anything
is written; the learner (``wflsim.models.learner.privacy``) calls the same function when it is
given the spec, so a learner built by hand refuses what a scenario would.

What a device sends must be the Gaussian mechanism's output or post-processing of it:

* ``local``: the noised, clipped update itself leaves the device, so a rule whose message shows
  more of the raw update (Top-K's indices and its residual built from the raw update; the
  quantiser's norm and relative error of the raw update) is refused; masks from the global model
  and the controller (freezing, FjORD's widths, pruning's importance from the global model and
  the server's noised gradient) are public. Robust aggregators and FedNova post-process the
  noised updates: fine.
* ``central`` and ``over_the_air``: the noise is calibrated on the weighted mean's sensitivity
  ``w_n C / sum w``; an aggregate with another sensitivity (order statistics, Krum's choice,
  FedNova's ``tau_eff / E_n``, the quantiser's weights ``B_n / (1 + e_n)`` from the raw
  update's error) is refused.
* SCAFFOLD's control variates are a second data-dependent message no accounting here covers:
  refused under every mechanism.
* Adaptive clipping under ``local``: the server sees each device's unclipped indicator, which
  would need noise ``sigma_b`` each (the accounted count's), leaving the fraction's estimate
  with noise ``sigma_b / sqrt(k)``; refused (docs/decisions.md).

Rules and strategies registered from Python are not listed: they compose, and what they send is
their registrant's to answer for (the learner still refuses a strategy with device vectors under
any mechanism and one with its own aggregate under central noise).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..errors import ScenarioError

#: Update rules refused per mechanism, with the reason.
_RULES: dict[str, dict[str, str]] = {
    "local": {
        "topk_ef": "Top-K sends the indices of the largest entries of the raw update (and keeps "
        "an error-feedback residual built from it), which the noise does not cover",
        "quantisation": "the quantiser's scale is the raw update's norm and its relative error "
        "e_n travels with the upload, side information the noise does not cover",
    },
    "central": {
        "quantisation": "the server weighs each upload by B_n / (1 + e_n), e_n the raw "
        "update's quantisation error: a data-dependent weight, so a device's sensitivity is not "
        "the weighted mean's w_n C / sum w the noise is calibrated on",
    },
}

_ROBUST = (
    "its aggregate (an order statistic or Krum's choice of updates) has a sensitivity that is "
    "not the weighted mean's w_n C / sum w the noise is calibrated on"
)
_FEDNOVA = (
    "its aggregate scales each update by tau_eff / E_n, so a device's sensitivity is not the "
    "weighted mean's w_n C / sum w the noise is calibrated on"
)
_SCAFFOLD = (
    "its control variates are a second data-dependent message per update that no noise here "
    "covers and the accounting does not count"
)

#: Strategies refused per mechanism, with the reason.
_STRATEGIES: dict[str, dict[str, str]] = {
    "central": {
        "fedmedian": _ROBUST,
        "fedtrimmedavg": _ROBUST,
        "krum": _ROBUST,
        "fednova": _FEDNOVA,
        "scaffold": _SCAFFOLD,
    },
    "over_the_air": {
        "fedmedian": _ROBUST,
        "fedtrimmedavg": _ROBUST,
        "krum": _ROBUST,
        "fednova": _FEDNOVA,
        "scaffold": _SCAFFOLD,
    },
    "local": {"scaffold": _SCAFFOLD},
}


class Refusal(NamedTuple):
    """Why a combination is refused: the scenario field to change, the reason, the fix."""

    field: str
    problem: str
    fix: str

    def line(self) -> str:
        """The refusal as one line (the learner's ``ValueError``)."""
        return f"{self.field}: {self.problem}; {self.fix}"


def refusal(
    mechanism: str,
    *,
    rule: str | None = None,
    strategy: str | None = None,
    adaptive: bool = False,
    scheme: str | None = None,
) -> Refusal | None:
    """The first reason ``mechanism`` (``privacy.mechanism``) does not compose with the update
    rule ``rule`` (of scheme ``scheme``), the server strategy ``strategy`` or adaptive clipping;
    None when it does (the module docstring)."""
    by = f"scheme {scheme!r}'s update rule" if scheme is not None else "update rule"
    if rule is not None and rule in _RULES.get(mechanism, {}):
        return Refusal(
            "privacy.mechanism",
            f'"{mechanism}" noise with {by} {rule!r}: {_RULES[mechanism][rule]}',
            "use another mechanism or a scheme whose update rule sends the clipped update "
            "itself (docs/privacy.md, The learner)",
        )
    if strategy is not None and strategy in _STRATEGIES.get(mechanism, {}):
        return Refusal(
            "privacy.mechanism",
            f'"{mechanism}" noise with strategy {strategy!r}: {_STRATEGIES[mechanism][strategy]}',
            "use another strategy.name (fedavg, fedavgm, fedadam, fedyogi, fedadagrad, fedprox) "
            "or another mechanism (docs/privacy.md, The learner)",
        )
    if adaptive and mechanism == "local":
        return Refusal(
            "privacy.clipping",
            '"adaptive" under local noise: the server would see each device\'s unclipped '
            "indicator, which needs the clipped count's noise sigma_b on every device and "
            "leaves the fraction's estimate with noise sigma_b / sqrt(k), no signal at "
            "Andrew et al.'s sigma_b",
            'use clipping = "fixed", or mechanism = "central"',
        )
    return None


def check_scenario(scenario: Any, rule: str) -> None:
    """A scenario's ``[privacy]`` against its scheme's update rule ``rule``, its strategy and its
    clipping (nothing without ``[privacy]``): the refusals of :func:`refusal`,
    as a scenario error (network-only runs too: the accounting assumes the mechanism is sound).

    Raises:
        ScenarioError: on ``privacy.mechanism`` or ``privacy.clipping``, with the reason.
    """
    cfg = getattr(scenario, "privacy", None)
    if cfg is None:
        return
    found = refusal(
        cfg.mechanism,
        rule=rule,
        strategy=scenario.strategy.name,
        adaptive=cfg.clipping == "adaptive",
        scheme=scenario.scheme.name,
    )
    if found is not None:
        raise ScenarioError(found.field, found.problem, found.fix)
