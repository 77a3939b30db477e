"""Learner-side update rules: their names, parameters and frame inputs, without torch.

A scheme names the rule it needs (:class:`UpdateRuleSpec`: a name of
:data:`wflsim.sim.registry.UPDATE_RULES` and its parameters) and, in every frame plan, hands the
rule its inputs for the frame as the rule's own typed record (:attr:`UpdateRule.inputs`: e.g.
:class:`FreezingInputs`), which the learner receives in ``begin_frame``. That table's built-in
entries are :func:`builtin_update_rules`; the registry module imports this one, never the other
way round (a spec is handed the table it is checked against: :meth:`UpdateRuleSpec.entry`). The
learner side implements each rule under the same name (``wflsim.models.registry.RULE_BUILDERS``;
a test holds the two registries to one set of names and input types). Everything here is
torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from .registry_base import Registry


@dataclass(frozen=True)
class FreezingInputs:
    """``freezing``: each device freezes ``frozen_count[n]`` parameters for the frame, ``(N,)``
    integers in ``[0, D]`` (chosen by the paper's stability criterion, or at random)."""

    frozen_count: npt.NDArray[np.int64]


@dataclass(frozen=True)
class TopKInputs:
    """``topk_ef``: each device sends the ``k[n]`` entries of largest ``|residual + gradient|``,
    ``(N,)`` integers in ``[0, D]``."""

    k: npt.NDArray[np.int64]


@dataclass(frozen=True)
class PruningInputs:
    """``pruning``: each device trains and sends the ``kept[n]`` entries of largest
    ``(g_prev w)^2``, ``(N,)`` integers in ``[0, D]``."""

    kept: npt.NDArray[np.int64]


@dataclass(frozen=True)
class QuantisationInputs:
    """``quantisation``: each device quantises its update at ``bits[n]`` bits per coordinate,
    ``(N,)`` integers in ``[0, 64]``."""

    bits: npt.NDArray[np.int64]


@dataclass(frozen=True)
class OrderedDropoutInputs:
    """``ordered_dropout``: each device trains the sub-model of width ``width[n]``, ``(N,)`` in
    ``(0, 1]``."""

    width: npt.NDArray[np.float64]


#: Any rule's frame inputs.
UpdateInputs = (
    FreezingInputs | TopKInputs | PruningInputs | QuantisationInputs | OrderedDropoutInputs
)


@dataclass(frozen=True)
class UpdateRule:
    """What a scheme may ask of the learner under one rule name."""

    params: tuple[str, ...]  #: the parameters the rule takes
    inputs: type  #: the record of its frame inputs (its docstring says what the rule does)
    #: why the learner cannot compute the rule's updates when they are stale (``[server]``
    #: ``semi_sync`` / ``async``: computed when applied, at the version and frame state the
    #: device downloaded); None: it can (every built-in rule; a rule registered from Python may
    #: say why it cannot)
    no_stale_updates: str | None = None


def builtin_update_rules() -> dict[str, UpdateRule]:
    """The built-in rules' entries of :data:`wflsim.sim.registry.UPDATE_RULES` (implemented in
    ``wflsim.models.learner.rules``)."""
    return {
        "freezing": UpdateRule(("selection",), FreezingInputs),
        "topk_ef": UpdateRule((), TopKInputs),
        "pruning": UpdateRule(("aggregation",), PruningInputs),
        "quantisation": UpdateRule((), QuantisationInputs),
        "ordered_dropout": UpdateRule(("bn_tiers",), OrderedDropoutInputs),
    }


@dataclass(frozen=True)
class UpdateRuleSpec:
    """A learner-side update rule: its name (a key of the table of update rules,
    :data:`wflsim.sim.registry.UPDATE_RULES`) and parameters. Checked against that table where a
    scheme is built and where a run starts (:meth:`entry`)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def entry(self, rules: Registry[UpdateRule]) -> UpdateRule:
        """This rule's entry in ``rules`` (the table of update rules).

        Raises:
            ValueError: a name ``rules`` does not hold, or parameters the rule does not take.
        """
        if self.name not in rules:
            raise ValueError(f"unknown update rule {self.name!r}; known: {sorted(rules)}")
        rule = rules[self.name]
        unknown = set(self.params) - set(rule.params)
        if unknown:
            raise ValueError(f"update rule {self.name!r} has no parameter(s) {sorted(unknown)}")
        return rule

    def check_inputs(self, inputs: object, rules: Registry[UpdateRule]) -> None:
        """Refuse frame inputs that are not this rule's record in ``rules`` (a scheme's
        mistake)."""
        want = rules[self.name].inputs
        if not isinstance(inputs, want):
            raise TypeError(
                f"update rule {self.name!r} takes {want.__name__} as its frame inputs, "
                f"got {type(inputs).__name__}"
            )


_I = TypeVar("_I")


def expect_inputs(inputs: object, kind: type[_I]) -> _I:
    """``inputs`` if it is a ``kind`` record, else TypeError naming both (for rule code)."""
    if not isinstance(inputs, kind):
        raise TypeError(f"this update rule takes {kind.__name__}, got {type(inputs).__name__}")
    return inputs


@dataclass(frozen=True)
class OverTheAir:
    """A slot's over-the-air sums as the learner applies them (``[uplink] mode = "aircomp"``,
    docs/aircomp.md). For the ``k`` devices in the sums (the ``success_ids`` of the ``apply``
    that follows, ascending), each in its sum ``group_n`` (its cell; 0 with one cell):

    ``g_hat = sum_n w_n (mu_n + ratio_n (u_n - mu_n)) + sigma_bar sum_s W_s noise_std_s e_s``

    with ``w_n = B_n / sum B`` over them (the rule's weights), ``u_n`` the device's upload,
    ``mu_n`` its mean (side information), ``W_s`` the weight of sum ``s``'s devices,
    ``sigma_bar`` the largest of their standard deviations (the common scale the devices
    normalise by) and ``e_s`` independent standard normals per entry keyed by
    ``(seed, stream_index)``; ``ratio_n = 1`` and ``noise_std = 0`` give the digital aggregate.
    A rule that averages each entry over the devices that sent it divides the entry's noise by
    their weight share. Under over-the-air privacy (``clip_scale_values`` set) ``mu_n = 0`` and
    ``sigma_bar = C / sqrt(D_min)``: a public scale (docs/privacy.md, "Over the air").
    """

    slot: int  #: the slot
    ratio: np.ndarray  #: ``c_n / a_n`` per device in the sums, ``(k,)``: 1 = perfectly aligned
    #: ``(G,)`` per sum ``sqrt(noise / eta) / (sum of a_n over its devices in it)``: its noise
    #: per entry of a unit-variance update, rescaled like the sum (a number: one sum)
    noise_std: np.ndarray | float
    group: np.ndarray | None = None  #: ``(k,)`` each device's sum (None: all in sum 0)
    stream_index: int | None = None  #: the noise's key (None: the slot)
    #: ``D_min`` under ``[privacy] mechanism = "over_the_air"``: the devices send
    #: ``u_n sqrt(D_min) / C`` (a public scale: no mean, no side information), so ``sigma_bar``
    #: is ``C / sqrt(D_min)`` and ``mu_n`` is 0 (None: the side information's scale)
    clip_scale_values: int | None = None
    #: ``(k,)`` each device's update noise multiplier in its sum this slot (over-the-air
    #: privacy; for the privacy ledger), None without
    privacy_multipliers: np.ndarray | None = None

    @property
    def groups(self) -> np.ndarray:
        """``(k,)`` each device's sum."""
        if self.group is None:
            return np.zeros(self.ratio.shape[0], dtype=np.int64)
        return np.asarray(self.group, dtype=np.int64)

    @property
    def noise_stds(self) -> np.ndarray:
        """``(G,)`` the noise of each sum."""
        return np.atleast_1d(np.asarray(self.noise_std, dtype=np.float64))
