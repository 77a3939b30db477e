"""What a channel gives: the large-scale gains of a frame, the gains of a slot, the small-scale
fading of a slot, and what a CSI estimate says about the true coefficient.

The values below the channel's models (:mod:`~wflsim.sim.world.channel.base`), the CSI model
(:mod:`~wflsim.sim.world.channel.csi`, which derives :class:`CsiPosterior`) and the recorder
(:mod:`~wflsim.sim.world.channel.record`): each of them imports this module, and it imports none of
them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

F64 = NDArray[np.float64]
C128 = NDArray[np.complex128]
B8 = NDArray[np.bool_]

#: Above this noncentrality ``lambda``, :meth:`CsiPosterior.power_quantile` uses the large-
#: ``lambda`` form of the Rician law (scipy's noncentral chi-square quantile returns NaN from
#: about 1e10 on; at 1e8 the two agree to 1e-11 relative for ``q >= 1e-9``).
NONCENTRALITY_ASYMPTOTIC = 1e8


@dataclass(frozen=True)
class CsiPosterior:
    """The law of every device's true small-scale coefficient given its estimate,
    ``c_t | c_hat ~ CN(mu, v)`` (see :mod:`wflsim.sim.world.channel.csi`), ``(N,)`` arrays."""

    mean_power: F64  #: ``|mu|^2``
    variance: F64  #: ``v >= 0``

    def power_quantile(self, q: float) -> F64:
        """``g_q`` with ``P(|c_t|^2 < g_q | c_hat) = q``, ``q`` in ``(0, 1)``, ``(N,)``.

        ``g_q = (v/2) F^-1(q)`` of ``chi'^2_2(2 |mu|^2 / v)`` (``scipy.stats.ncx2``); above
        :data:`NONCENTRALITY_ASYMPTOTIC` the amplitude ``|c_t|`` is Gaussian to first order,
        ``g_q = (|mu| + sqrt(v/2) z_q)^2 + v/2`` (``z_q`` the standard normal quantile; the
        ``v/2`` is the power of the noise component across ``mu``); ``|mu|^2`` where ``v = 0``.
        """
        if not 0.0 < q < 1.0:
            raise ValueError(f"the quantile's probability must be in (0, 1), got {q}")
        m2 = np.asarray(self.mean_power, dtype=np.float64)
        half = 0.5 * np.asarray(self.variance, dtype=np.float64)
        spread = half > 0.0
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            nc = np.where(spread, m2 / np.where(spread, half, 1.0), np.inf)
        exact = nc <= NONCENTRALITY_ASYMPTOTIC
        chi = stats.ncx2.ppf(q, 2.0, np.where(exact, nc, 0.0))
        large = (np.sqrt(m2) + np.sqrt(half) * stats.norm.ppf(q)) ** 2 + half
        return np.asarray(
            np.where(exact, half * chi, np.where(spread, large, m2)), dtype=np.float64
        )


@dataclass(frozen=True)
class LargeScale:
    """Large-scale channel of every device for one frame, arrays of shape ``(N,)``."""

    distance_m: F64  #: device-server distance (unclipped), m
    path_loss_db: F64  #: path loss without shadowing, dB
    gain: F64  #: large-scale power gain ``H = 10^(-(PL + S)/10)``, linear (S: shadowing, dB)
    speed_mps: F64  #: speed at the frame start, m/s (drives the Doppler of correlated fading)
    shadowing_db: F64 | None = None  #: shadowing ``S``, dB (None: no shadowing)
    los: B8 | None = None  #: LOS state (None: the path-loss model has none)


@dataclass(frozen=True)
class SlotChannel:
    """Channel power gains of every device in one slot, arrays of shape ``(N,)``, linear."""

    gain: F64  #: ``h`` the world applies: rate, success, energy follow it
    seen_gain: F64  #: ``h`` the scheme decides on (equal to ``gain`` under perfect CSI)
    #: what the estimate says about the true small-scale coefficient under the CSI model (None:
    #: perfect CSI, a replayed table, or a fading family whose coefficient is not Gaussian)
    posterior: CsiPosterior | None = None


@dataclass(frozen=True)
class SmallScale:
    """Small-scale fading of every device in one slot, ``(N,)`` each."""

    power: F64  #: ``g``, unit mean: ``h = g H``
    coefficient: C128 | None = None  #: complex ``c`` with ``|c|^2 = g`` (when asked for)
