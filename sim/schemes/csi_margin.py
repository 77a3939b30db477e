"""A CSI-robust slot power rule for the Proposition-1 schemes: ``[scheme] csi_margin =
{ target_outage = q }``.

Proposition 1 transmits at ``p_min(h_hat) = N0 A / h_hat`` (``A = 2^(u S / (W (tau0 - tau_cmp)))
- 1``), the power that lands the upload exactly on the deadline if the true gain is the one the
scheme sees. An upload at power ``p`` meets the deadline iff ``h >= N0 A / p``, so at ``p_min(h_hat)``
it succeeds iff ``h >= h_hat``: with any estimation error about half of the uploads fail
(``scenarios/channel/README.md``). The margin keeps the rule and replaces the estimate by a
conservative gain ``h_c``:

    h_c = min(h_hat, H g_q),   P(|c_t|^2 < g_q | c_hat) = q,
    p   = p_min(h_c) = N0 A / h_c = p_min(h_hat) h_hat / h_c  >=  p_min(h_hat),

with ``g_q`` the ``q``-quantile of the true small-scale power given the estimate under the channel's
documented CSI model (``c_t | c_hat ~ CN(mu, v)``, a scaled noncentral chi-square power:
:mod:`wflsim.sim.world.channel.csi`,
:meth:`~wflsim.sim.world.channel.csi.CsiPosterior.power_quantile`).
The large-scale gain ``H`` is known at the frame start, so the upload succeeds iff
``h = H |c_t|^2 >= h_c``, and

    P(success | c_hat) = P(|c_t|^2 >= h_c / H | c_hat) >= P(|c_t|^2 >= g_q | c_hat) = 1 - q,

with equality wherever ``H g_q < h_hat`` (almost every device that can afford to transmit);
where the estimate already lies below the quantile (a deep fade in ``c_hat``, which the posterior
pulls towards the mean) the paper's ``p_min`` is kept: the rule only ever adds power. The device
transmits iff ``p <= p_max``, the frame's threshold (else it drops out, as Proposition 1 says),
so ``p <= p_max <= P_bar``. Participation depends on the estimate only, so the outage rate of
the devices that transmit is ``q`` (at most ``q``).

With perfect CSI the channel gives no posterior and the rule is Proposition 1 itself, bit for
bit (the formulas agree: ``v = 0``, ``g_q = |c_hat|^2``, ``h_c = h_hat``). The frame controller
(Theorem 2: ``gamma`` and ``p_max``) is unchanged: its closed forms still plan as if every upload
at ``p_min`` succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .base import F64, SlotContext


class CsiMargin(BaseModel):
    """``target_outage``: the probability ``q`` in ``(0, 1)`` with which an upload may miss the
    deadline given the estimate."""

    model_config = ConfigDict(extra="forbid")
    target_outage: float = Field(
        gt=0.0, lt=1.0, allow_inf_nan=False, description="outage probability q given the estimate"
    )


def margin_power_w(ctx: SlotContext, target_outage: float) -> F64:
    """``p_min(h_c) = p_min(h_hat) h_hat / h_c`` with ``h_c = min(h_hat, H g_q)`` (module
    docstring), W, ``(N,)``: 0 where there is nothing to send, ``inf`` where no power meets the
    deadline or ``h_c = 0``; ``ctx.min_tx_power_w`` unchanged without a posterior (perfect CSI).
    """
    post = ctx.csi_posterior
    p_min = ctx.min_tx_power_w
    if post is None:
        return p_min
    robust = ctx.large_scale_gain * post.power_quantile(target_outage)
    seen = ctx.channel_gain
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        factor = np.where(robust < seen, seen / robust, 1.0)
        return np.where(p_min > 0.0, p_min * factor, p_min)


def slot_power_rule(scheme_params: Mapping[str, Any], perfect_csi: bool) -> str | None:
    """The slot power rule a scheme's ``csi_margin`` sets, in words, for the run's metadata
    (``channel.controller_assumption.slot_power_rule``); None without a margin."""
    raw = scheme_params.get("csi_margin")
    if raw is None:
        return None
    q = CsiMargin.model_validate(raw).target_outage
    if perfect_csi:
        return (
            f"scheme.csi_margin (target_outage = {q:g}) has no effect: the CSI is perfect, "
            "Proposition 1 transmits at p_min on the true gain"
        )
    return (
        f"scheme.csi_margin (target_outage = {q:g}): Proposition 1 on the conservative gain "
        f"h_c = min(h_hat, H g_q), g_q the {q:g}-quantile of |c_t|^2 given the estimate under "
        "the CSI model (c_t | c_hat ~ CN(mu, v), |c_t|^2 = (v/2) chi'^2_2(2 |mu|^2 / v)): "
        "transmit at p_min(h_c) = p_min(h_hat) h_hat / h_c iff it is <= p_max, so an upload "
        f"meets the deadline with probability >= {1.0 - q:g} given the estimate; gamma and "
        "p_max are still planned as if CSI were perfect"
    )
