"""Over-the-air aggregation on the learner's side (``[uplink] mode = "aircomp"``,
docs/aircomp.md; under ``[privacy] mechanism = "over_the_air"`` docs/privacy.md): how the sum
weighs each device's upload, the receiver's noise in update units, and the public scale under
privacy. Pure functions of tensors; :class:`~wflsim.models.learner.core.TorchLearner` applies
them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from wflsim.sim.updates import OverTheAir

from . import aggregate
from .strategies import RuleCall


def noise_gain(
    call: RuleCall,
    sent: torch.Tensor,
    weights: torch.Tensor,
) -> torch.Tensor:
    """``(D,)`` how the rule's normalisation scales an over-the-air sum's noise on each entry:
    the rule's aggregate of the sent indicator ``sent`` ``(k, D)`` over eq. 3's (the sum's own
    normalisation). 1 under eq. 3, ``sum B / sum of B over the senders`` under a per-coordinate
    mean (``aggregation = "per_coordinate"``, FjORD): the receiver divides the entry's sum, and
    its noise, by the weight of those who sent it; 0 where nobody sent it."""
    indicator = sent.to(weights.dtype)
    plain = aggregate.weighted_mean(indicator, weights)
    ruled = call(None, indicator)
    return torch.where(plain > 0, ruled / plain.clamp_min(1e-30), 0.0)


def moments(
    uploads: torch.Tensor, sent: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Over the air, of each upload's sent entries (``uploads``, ``sent``: ``(k, D)``): its mean
    ``mu`` ``(k, 1)``, the entries centred on it (0 where not sent) ``(k, D)`` and their
    standard deviation ``sigma`` ``(k,)``."""
    count = sent.sum(dim=1, keepdim=True).clamp_min(1)
    mu = uploads.sum(dim=1, keepdim=True) / count
    centred = torch.where(sent, uploads - mu, torch.zeros_like(uploads))
    sigma = torch.sqrt((centred * centred).sum(dim=1) / count.squeeze(1))
    return mu, centred, sigma


@dataclass
class AirNoise:
    """An over-the-air aggregate's normalisation and noise, in update units (the trace's
    learner-side ``aircomp`` columns): the common scale ``sigma_bar`` the devices normalised by,
    the standard deviation per entry of the noise drawn (``sigma_bar`` times the sums' noise),
    and the mean and root mean square of the noise the aggregate received on the entries anyone
    sent (after the rule's per-entry normalisation; NaN before :meth:`measure`)."""

    scale: float
    noise_std: float
    noise_mean: float = float("nan")
    noise_rms: float = float("nan")

    def measure(self, added: torch.Tensor) -> None:
        """The noise the aggregate received, on the sent entries (``(m,)``)."""
        if added.numel():
            a = added.double()
            self.noise_mean = float(a.mean())
            self.noise_rms = float(torch.sqrt(torch.mean(a * a)))


def public_scale(
    uploads: torch.Tensor, sent: torch.Tensor, clip: float | None, clip_values: int
) -> tuple[torch.Tensor, float]:
    """Over-the-air privacy: each device sends its sent entries (``(k, D)``, 0 elsewhere)
    times ``sqrt(D_min) / C`` (no mean subtracted, no side information), so the scale is
    ``C / sqrt(D_min)``; an upload above the clip would break the peak power and the
    sensitivity the multipliers assume (ValueError)."""
    if clip is None or not float(clip) > 0.0 or clip_values < 1:
        raise ValueError(
            "an over-the-air sum with a public scale needs the clip norm (set_privacy) and "
            "D_min >= 1"
        )
    values = torch.where(sent, uploads, torch.zeros_like(uploads))
    norm = float(values.double().norm(dim=1).max()) if uploads.shape[0] else 0.0
    if norm > float(clip) * (1.0 + 1e-4):
        raise ValueError(
            f"an over-the-air upload of norm {norm:g} exceeds the clip {float(clip):g}: "
            "uploads must arrive clipped"
        )
    return values, float(clip) / float(np.sqrt(clip_values))


def over_the_air_uploads(
    uploads: torch.Tensor,
    air: OverTheAir,
    weights: torch.Tensor,
    sent: torch.Tensor,
    streams: Any,
    clip: float | None,
) -> tuple[torch.Tensor, torch.Tensor, AirNoise]:
    """The uploads ``(k, D)`` as the sum weighs them, ``mu_n + ratio_n (u_n - mu_n)`` on
    the entries each device sends (``sent``, ``(k, D)``: frozen entries are not sent), the
    receiver's noise ``sigma_bar noise_std e`` on the entries anyone sends, ``(D,)``, and its
    record; ``mu_n`` and ``sigma_n``: the mean and standard deviation of device ``n``'s sent
    entries, ``sigma_bar`` their largest (the common scale the updates are normalised by). Under
    privacy (``air.clip_scale_values``) the scale is the public :func:`public_scale` and no mean
    is sent. ``streams``: the run's streams (the noise's keyed seed; None: a fixed seed per
    slot); ``clip``: the learner's current clip (privacy only)."""
    if air.ratio.shape[0] != uploads.shape[0]:
        raise ValueError(
            f"an over-the-air sum of {air.ratio.shape[0]} devices for {uploads.shape[0]} uploads"
        )
    if air.clip_scale_values is not None:  # privacy: the public scale, no mean
        centred, sigma_bar = public_scale(uploads, sent, clip, air.clip_scale_values)
    else:
        _, centred, sigma = moments(uploads, sent)
        sigma_bar = float(sigma.max()) if uploads.shape[0] else float("nan")
    ratio = torch.as_tensor(air.ratio, dtype=uploads.dtype, device=uploads.device)
    weighed = uploads + (ratio[:, None] - 1.0) * centred
    noise = torch.zeros(uploads.shape[1], dtype=uploads.dtype, device=uploads.device)
    # the sums' noises are independent: the aggregate's is N(0, sum_s (W_s std_s)^2)
    w = weights.detach().cpu().numpy().astype(np.float64)
    share = np.bincount(air.groups, weights=w, minlength=air.noise_stds.size) / w.sum()
    std = float(np.sqrt(np.sum((share * air.noise_stds) ** 2)))
    if std > 0.0 and uploads.shape[0]:
        index = air.slot if air.stream_index is None else air.stream_index
        seed = (
            streams.int_seed("aircomp_noise", index)
            if streams is not None and hasattr(streams, "int_seed")
            else int(np.random.SeedSequence([21, index]).generate_state(1)[0])
        )
        gen = torch.Generator(device="cpu").manual_seed(seed)
        e = torch.randn(uploads.shape[1], generator=gen, dtype=torch.float32)
        scale = sigma_bar * std
        noise = (e.to(uploads.device) * scale) * sent.any(dim=0)
    record = AirNoise(
        scale=sigma_bar,
        noise_std=sigma_bar * std if uploads.shape[0] else 0.0,
    )
    return weighed, noise, record


def privacy_gain(
    rule: Any, call: RuleCall, sent: torch.Tensor | None, weights: torch.Tensor
) -> torch.Tensor | None:
    """Central noise under a per-coordinate mean (the ``rule``'s ``aggregation``): how the
    rule's division scales noise added to the weighted sum on each entry (``(D,)``,
    :func:`noise_gain`'s, 1 where nobody sent the entry: the noise goes on every entry); None
    under eq. 3 or without a sent mask (1 everywhere)."""
    if sent is None or getattr(rule, "aggregation", None) != "per_coordinate":
        return None
    gain = noise_gain(call, sent, weights)
    return torch.where(sent.any(dim=0), gain, torch.ones_like(gain))


def sent_entries(
    rule: Any,
    computed: np.ndarray,
    ok: np.ndarray,
    rows: torch.Tensor,
    trained: torch.Tensor | None,
    uploads: torch.Tensor,
) -> torch.Tensor:
    """``(k, D)`` bool: the entries each device in the sum sends (devices ``ok``, rows ``rows``
    of the slot's ``computed`` devices, their ``uploads``): not frozen by the update ``rule``,
    trained in its sub-model or kept by its pruning mask (``trained``, or the rule's own, still
    there before it settles); every entry otherwise."""
    masks = getattr(rule, "masks", None)
    if callable(masks):
        frozen = masks()[torch.as_tensor(ok)]
        return ~frozen.to(uploads.device)
    if trained is None:
        mine = rule.trained(computed)
        trained = None if mine is None else mine[rows]
    if trained is not None:
        return trained.to(device=uploads.device, dtype=torch.bool)
    return torch.ones_like(uploads, dtype=torch.bool)
