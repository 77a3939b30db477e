"""What an update rule of one's own is written against: the learner side of a scheme.

A rule says what devices train, what they upload and how the server aggregates the uploads that
arrived (:class:`UpdateRule`; :class:`PlainRule` gives the defaults most rules share). Register
its builder, ``builder(params, settings) -> rule`` with :class:`RuleSettings` as ``settings``,
with :func:`wflsim.register_update_rule`; a scheme names it with
:class:`wflsim.schemes.UpdateRuleSpec` (``docs/api.md``, "Your own scheme and update rule")::

    import wflsim
    from wflsim.rules import PlainRule, weighted_mean

Shapes: ``N`` devices, ``D`` parameters, uploads ``(k, D)``, weights ``(k,)`` (the devices'
batch sizes ``B_n``). Importing this module loads torch.
"""

from __future__ import annotations

from wflsim.models.learner.aggregate import per_coordinate_mean, weighted_mean
from wflsim.models.learner.rules import PlainRule, RuleSettings, UpdateRule

__all__ = ["PlainRule", "RuleSettings", "UpdateRule", "per_coordinate_mean", "weighted_mean"]
