"""The noise multiplier that meets a target epsilon over a run (``privacy.target_epsilon``),
calibrated before the run with the run's accountant (docs/privacy.md, "Accounting")."""

from __future__ import annotations

import math

import numpy as np

from .accounting import (
    AccountantKind,
    check_sampling_probability,
    event_rdp,
    pld_epsilon,
    rdp_epsilon,
)
from .config import MAX_NOISE_MULTIPLIER
from .mechanism import combined_multiplier, update_noise_multiplier

#: The bracket's lower end: a multiplier below it protects nothing worth accounting.
MIN_NOISE_MULTIPLIER = 1e-2
#: The calibrated multiplier is within this relative distance above the smallest that meets the
#: target.
RELATIVE_TOLERANCE = 1e-3
#: The calibrated multiplier meets the target with this relative margin, so that a run's
#: accountant, which sums its events one by one (rounding in the last bits), stays within it.
_MARGIN = 1e-9


def run_epsilon(
    noise_multiplier: float,
    delta: float,
    steps: int,
    kind: AccountantKind,
    sampling_probability: float | None = None,
    clipped_count_std: float | None = None,
) -> float:
    """Epsilon at ``delta`` of one device after ``steps`` updates at the noise multiplier ``z``
    (the multiplier the device of the largest weight is accounted at: under adaptive clipping
    :func:`~wflsim.sim.privacy.mechanism.combined_multiplier` of the update's ``z_delta`` and
    the clipped count's ``sigma_b``), each Poisson-subsampled with ``sampling_probability`` when
    given."""
    z_update = update_noise_multiplier(noise_multiplier, clipped_count_std)
    z = float(combined_multiplier(np.array([z_update]), clipped_count_std)[0])
    q = check_sampling_probability(sampling_probability)
    if kind == "rdp":
        return rdp_epsilon(steps * event_rdp(z, q), delta)
    if q is None:
        return pld_epsilon(steps / (z * z), (), delta)
    return pld_epsilon(0.0, ((q, z, int(steps)),), delta)


def _ceil_significant(value: float, digits: int = 4) -> float:
    """``value`` rounded up to ``digits`` significant digits."""
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return math.ceil(value / scale - 1e-9) * scale


def calibrate_noise_multiplier(
    target_epsilon: float,
    delta: float,
    steps: int,
    kind: AccountantKind,
    sampling_probability: float | None = None,
    clipped_count_std: float | None = None,
) -> float:
    """The smallest noise multiplier ``z`` (to a relative :data:`RELATIVE_TOLERANCE`, rounded up
    so that the target holds) such that ``steps`` updates of a device (:func:`run_epsilon`) give
    epsilon <= ``target_epsilon`` at ``delta``: bisection on ``log z`` over
    [:data:`MIN_NOISE_MULTIPLIER`, :data:`~wflsim.sim.privacy.config.MAX_NOISE_MULTIPLIER`]
    (under adaptive clipping ``z`` stays below ``2 sigma_b``, where the clipped count alone
    spends the budget), then rounded up to 4 significant digits.

    Args:
        target_epsilon: the epsilon no device may exceed over the run, > 0.
        delta: in (0, 1).
        steps: the most updates a device can take part in, >= 1.
        kind: the run's accountant, ``"rdp"`` or ``"pld"``.
        sampling_probability: ``q`` under amplification by uniform selection.
        clipped_count_std: ``sigma_b`` under adaptive clipping.

    Raises:
        ValueError: ``privacy.target_epsilon: ...`` when no ``z`` in the bracket meets it.
    """
    if not target_epsilon > 0.0:
        raise ValueError(f"privacy.target_epsilon: must be > 0, got {target_epsilon!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"privacy.delta: must be in (0, 1), got {delta!r}")
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    steps = int(steps)
    upper = MAX_NOISE_MULTIPLIER
    if clipped_count_std is not None:
        # z must stay below 2 sigma_b (update_noise_multiplier); 1 - 1e-6 keeps z_delta finite.
        upper = min(upper, 2.0 * clipped_count_std * (1.0 - 1e-6))

    def meets(z: float) -> bool:
        eps = run_epsilon(z, delta, steps, kind, sampling_probability, clipped_count_std)
        return eps <= target_epsilon * (1.0 - _MARGIN)

    lo = MIN_NOISE_MULTIPLIER
    if lo >= upper or not meets(upper):
        limit = (
            f"the largest noise multiplier {MAX_NOISE_MULTIPLIER:g}"
            if upper == MAX_NOISE_MULTIPLIER
            else f"the largest noise multiplier below 2 * privacy.clipped_count_std = "
            f"{2.0 * float(clipped_count_std or 0.0):g} (the clipped count's own noise)"
        )
        raise ValueError(
            f"privacy.target_epsilon: {target_epsilon:g} at delta {delta:g} cannot be met over "
            f"{steps} updates of a device even at {limit}: raise target_epsilon, run fewer "
            "frames or slots, or give a larger delta"
            + (" or a larger clipped_count_std" if clipped_count_std is not None else "")
        )
    hi = upper
    # invariant: hi meets, lo fails (the bracket's lower end is tried last: at a tiny z the
    # subsampled PLD is the slowest to build)
    while hi / lo > 1.0 + RELATIVE_TOLERANCE:
        mid = math.sqrt(lo * hi)
        if meets(mid):
            hi = mid
        else:
            lo = mid
    if lo == MIN_NOISE_MULTIPLIER and meets(lo):
        return lo
    rounded = _ceil_significant(hi)
    return rounded if rounded <= upper and meets(rounded) else hi
