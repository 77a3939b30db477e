"""The Gaussian mechanism's closed forms for client-level DP (docs/privacy.md), vectorised over
the updates of one server step. Units: an update's norm and the clip ``C`` are in update units
(the gradient's); a noise multiplier ``z`` is a noise standard deviation over the L2 sensitivity
of what it protects (dimensionless).

Adjacency: add or remove one device's data (its update replaced by nothing), so a device's
sensitivity in a step is its clipped update's weight in the step times ``C``. Who takes part is
not protected unless ``privacy.amplification`` says otherwise (docs/decisions.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .config import AirNoise, AirPower, Mechanism, PrivacyConfig

F64 = NDArray[np.float64]


def update_noise_multiplier(noise_multiplier: float, clipped_count_std: float | None) -> float:
    """The noise multiplier of the update itself, ``z_delta``, so that the update and the noised
    count of unclipped updates together are the Gaussian mechanism of ``z`` (Andrew et al.,
    NeurIPS 2021, Theorem 1): ``z_delta = (z^-2 - (2 sigma_b)^-2)^(-1/2)``; ``z`` itself under
    fixed clipping (``clipped_count_std`` None).

    Raises:
        ValueError: ``2 sigma_b <= z``: the count alone would spend the whole budget.
    """
    z = float(noise_multiplier)
    if clipped_count_std is None:
        return z
    two_b = 2.0 * float(clipped_count_std)
    if not two_b > z:
        raise ValueError(
            f"the clipped count's noise 2 sigma_b = {two_b:g} must exceed the noise multiplier "
            f"z = {z:g}: the count's release would spend the whole budget"
        )
    return 1.0 / math.sqrt(z**-2 - two_b**-2)


def combined_multiplier(
    update_multiplier: ArrayLike, clipped_count_std: float | None, updates: ArrayLike = 1
) -> F64:
    """The multiplier a device's step is accounted at: its update's ``z_n`` composed with the
    noised count of unclipped updates (adaptive clipping, where the device's indicator minus
    1/2 has sensitivity 1/2 under noise ``sigma_b``): ``(z_n^-2 + (2 sigma_b)^-2)^(-1/2)``
    (Andrew et al., Theorem 1); ``z_n`` under fixed clipping. ``updates`` ``(k,)`` or scalar:
    how many of the step's updates are the device's (``m`` indicators move the count by
    ``m / 2``, so the count's multiplier is ``2 sigma_b / m``). ``(k,)``."""
    z = np.asarray(update_multiplier, dtype=np.float64)
    if clipped_count_std is None:
        return z.astype(np.float64, copy=True)
    two_b = 2.0 * float(clipped_count_std) / np.asarray(updates, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.asarray(1.0 / np.sqrt(1.0 / (z * z) + 1.0 / (two_b * two_b)), dtype=np.float64)


def _weights(weights: ArrayLike) -> F64:
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or not (np.isfinite(w).all() and (w >= 0.0).all()):
        raise ValueError("weights must be a (k,) array of finite values >= 0")
    return w


def central_noise_std(noise_multiplier: float, clip_norm: float, weights: ArrayLike) -> float:
    """Central DP: the standard deviation per entry of the noise the server adds to a step's
    aggregate ``sum_n w_n u_n / sum_n w_n``, update units: ``z C max_n w_n / sum_n w_n`` (so that
    the device of the largest weight gets exactly ``z``; 0 for an empty step).

    Args:
        noise_multiplier: ``z`` (the update's: :func:`update_noise_multiplier`).
        clip_norm: ``C``, update units.
        weights: ``(k,)`` the step's aggregation weights of its updates (``B_n`` under eq. 3,
            times a staleness discount under stale updates).
    """
    w = _weights(weights)
    total = float(w.sum())
    if total <= 0.0:
        return 0.0
    return float(noise_multiplier) * float(clip_norm) * float(w.max()) / total


def central_multipliers(noise_multiplier: float, weights: ArrayLike) -> F64:
    """Central DP: each update's own noise multiplier in a step, ``z max_m w_m / w_n``
    (``(k,)``; its sensitivity is ``w_n C / sum w``, the noise :func:`central_noise_std`; inf
    for an update of weight 0, which the step does not release)."""
    w = _weights(weights)
    if w.size == 0:
        return np.empty(0)
    with np.errstate(divide="ignore"):
        return np.where(w > 0.0, float(noise_multiplier) * float(w.max()) / w, np.inf)


def local_noise_std(noise_multiplier: float, clip_norm: float) -> float:
    """Local DP: the standard deviation per entry of the noise a device adds to its clipped
    update before sending it, update units: ``z C`` (its multiplier is ``z`` whatever the step)."""
    return float(noise_multiplier) * float(clip_norm)


def local_aggregate_std(noise_multiplier: float, clip_norm: float, weights: ArrayLike) -> float:
    """Local DP: the standard deviation per entry of the noise a step's aggregate carries,
    ``z C sqrt(sum w_n^2) / sum w_n`` (independent noises, one per update; 0 for an empty step)."""
    w = _weights(weights)
    total = float(w.sum())
    if total <= 0.0:
        return 0.0
    return float(noise_multiplier) * float(clip_norm) * math.sqrt(float(np.sum(w * w))) / total


def clip_scale(update_norm: ArrayLike, clip_norm: float) -> F64:
    """The factor each update is multiplied by, ``min(1, C / |u|)`` (``(k,)``; 1 for a zero
    update)."""
    norm = np.asarray(update_norm, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(norm > clip_norm, float(clip_norm) / np.where(norm > 0, norm, 1.0), 1.0)


def adaptive_clip(
    clip_norm: float, unclipped_fraction: float, target_quantile: float, learning_rate: float
) -> float:
    """Andrew et al.'s geometric update of the clip after a step: ``C exp(-eta_C (b - gamma))``
    with ``b`` the noised fraction of the step's updates that were not clipped."""
    return float(clip_norm) * math.exp(
        -float(learning_rate) * (unclipped_fraction - target_quantile)
    )


@dataclass(frozen=True)
class PrivacySpec:
    """``[privacy]`` resolved for a run (the learner's and the accountant's view): the noise
    multiplier calibrated, the clipped count's noise given its default."""

    mechanism: Mechanism
    clip_norm: float  #: ``C`` (the initial one under adaptive clipping), update units
    adaptive: bool
    target_quantile: float
    clip_learning_rate: float
    #: ``sigma_b`` (adaptive clipping; None under fixed)
    clipped_count_std: float | None
    #: ``z``: the target every applied update's noise reaches (None: over the air,
    #: channel_only: measured only)
    noise_multiplier: float | None
    delta: float
    accountant: str
    #: the epsilon past which a device stops (None: never)
    epsilon_budget: float | None
    amplification: str
    air_noise: AirNoise | None
    air_power: AirPower | None

    @property
    def update_multiplier(self) -> float | None:
        """``z_delta``: the noise multiplier the update itself gets
        (:func:`update_noise_multiplier`; None when ``z`` is)."""
        if self.noise_multiplier is None:
            return None
        return update_noise_multiplier(self.noise_multiplier, self.clipped_count_std)

    @classmethod
    def from_config(
        cls, cfg: PrivacyConfig, num_devices: int, noise_multiplier: float | None = None
    ) -> PrivacySpec:
        """``cfg`` resolved for ``num_devices`` devices; ``noise_multiplier`` the calibrated
        ``z`` when ``cfg`` gives ``target_epsilon`` (else ``cfg.noise_multiplier``)."""
        adaptive = cfg.clipping == "adaptive"
        count_std = cfg.clipped_count_std
        if adaptive and count_std is None:
            count_std = num_devices / 20.0
        over_air = cfg.mechanism == "over_the_air"
        return cls(
            mechanism=cfg.mechanism,
            clip_norm=cfg.clip_norm,
            adaptive=adaptive,
            target_quantile=cfg.target_quantile,
            clip_learning_rate=cfg.clip_learning_rate,
            clipped_count_std=count_std if adaptive else None,
            noise_multiplier=(
                noise_multiplier if noise_multiplier is not None else cfg.noise_multiplier
            ),
            delta=cfg.delta,
            accountant=cfg.accountant,
            epsilon_budget=cfg.budget,
            amplification=cfg.amplification,
            air_noise=(cfg.air_noise or "receiver") if over_air else None,
            air_power=(cfg.air_power or "scheme") if over_air else None,
        )
