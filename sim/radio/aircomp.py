"""Over-the-air aggregation (AirComp), ``[uplink] mode = "aircomp"`` (:class:`AirComp`): the
physics as pure, vectorised functions (docs/aircomp.md).

The devices of a slot transmit their (normalised) updates at once on the same symbols; the base
station receives their sum through the channel plus noise. Per real symbol (one entry of every
update, after phase pre-compensation with the device's CSI, so each device's effective gain is the
real amplitude ``sqrt(g_n)``, ``g_n = |h_n|^2``):

    y = sum_n sqrt(p_n g_n) x_n + z,        z ~ N(0, N0),

with ``x_n`` the device's update normalised to zero mean and unit variance (its mean and standard
deviation go to the server as side information, as in the papers), ``p_n`` its transmit power
(W) and ``N0`` the noise power over the band (W). The server estimates the target
``s = sum_n a_n x_n`` (``a_n``: the aggregation weights, ``B_n / sum B`` for the paper's eq. 3) as
``s_hat = y / sqrt(eta)`` with the denoising factor ``eta > 0``. With independent unit-variance
entries the mean squared error per entry is

    MSE = sum_n (sqrt(p_n g_n / eta) - a_n)^2 + N0 / eta                    (Cao et al., eq. 8)

Two power-control rules:

* **Truncated channel inversion** (Zhu, Wang, Huang, "Broadband Analog Aggregation for Low-Latency
  Federated Edge Learning", IEEE TWC 2020): a device whose gain is at least ``g_th`` inverts its
  channel, ``p_n = eta a_n^2 / g_n`` (it arrives with the amplitude ``a_n sqrt(eta)``), the others
  stay silent; the MSE is ``sum over the truncated a_n^2 + N0 / eta``. Under Rayleigh fading with
  mean gain ``H_n`` a device is aligned with probability ``exp(-g_th / H_n)``.
* **The MSE-optimal policy** (Cao, Zhu, Xu, Huang, "Optimized Power Control for Over-the-Air
  Computation in Fading Channels", IEEE TWC 2020): for a given ``eta``, ``p_n = min(P_n, eta a_n^2
  / g_n)`` (channel inversion where the peak power allows it, full power below the threshold);
  the best ``eta`` minimises the MSE over the intervals between the devices' quality indicators
  ``q_n = P_n g_n / a_n^2`` (:func:`optimal_eta`).

The transmission time of ``D`` parameters is ``ceil(D / v) / W`` (``v`` real values per symbol:
1 for BAA's real analog symbols, 2 with I and Q; ``W`` symbols per second over the band;
:func:`~wflsim.sim.radio.rates.aircomp_latency_s`) and a device's energy is ``p_n`` times it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import fmath
from ..world.system import SystemConstants
from .base import UplinkMode
from .cells.component import Cells
from .shared import SharedUplink
from .spec import UplinkSpec

F64 = NDArray[np.float64]
B8 = NDArray[np.bool_]
I64 = NDArray[np.int64]


def aircomp_energy_j(tx_power_w: ArrayLike, latency_s: float) -> F64:
    """Each device's energy for one over-the-air transmission, J: ``p_n T`` (``(n,)``)."""
    return np.asarray(tx_power_w, dtype=np.float64) * float(latency_s)


def _check(gain: ArrayLike, weights: ArrayLike) -> tuple[F64, F64]:
    g = np.asarray(gain, dtype=np.float64)
    a = np.asarray(weights, dtype=np.float64)
    if g.ndim != 1 or a.shape != g.shape:
        raise ValueError(
            f"gain and weights must be (n,) arrays of one shape, got {g.shape}, {a.shape}"
        )
    if not (
        np.isfinite(g).all() and (g >= 0.0).all() and np.isfinite(a).all() and (a >= 0.0).all()
    ):
        raise ValueError("gains and weights must be finite and >= 0")
    return g, a


def aircomp_mse(
    gain: ArrayLike, tx_power_w: ArrayLike, weights: ArrayLike, eta: float, noise_w: float
) -> float:
    """The aggregate's mean squared error per entry (Cao et al., eq. 8):
    ``sum_n (sqrt(p_n g_n / eta) - a_n)^2 + N0 / eta``.

    Args:
        gain: ``(n,)`` channel power gains ``g_n``, linear.
        tx_power_w: ``(n,)`` transmit powers, W (per unit-variance symbol).
        weights: ``(n,)`` the target's weights ``a_n``.
        eta: the receiver's denoising factor, > 0.
        noise_w: ``N0``, the noise power per symbol, W.
    """
    g, a = _check(gain, weights)
    p = np.asarray(tx_power_w, dtype=np.float64)
    if not eta > 0.0:
        raise ValueError(f"eta must be > 0, got {eta!r}")
    return float(np.sum((np.sqrt(p * g / eta) - a) ** 2) + noise_w / eta)


def truncated_inversion(
    gain: ArrayLike, weights: ArrayLike, eta: float, threshold_gain: float
) -> tuple[F64, B8]:
    """Truncated channel inversion (BAA): ``p_n = eta a_n^2 / g_n`` where ``g_n >= g_th``, else 0.

    Returns:
        ``(tx_power_w, aligned)``: ``(n,)`` powers, W, and the aligned devices.
    """
    g, a = _check(gain, weights)
    aligned = (g >= threshold_gain) & (g > 0.0)
    with np.errstate(divide="ignore"):
        p = np.where(aligned, eta * a * a / np.where(aligned, g, 1.0), 0.0)
    return p, aligned


def truncation_mse(weights: ArrayLike, aligned: ArrayLike, eta: float, noise_w: float) -> float:
    """The MSE of truncated channel inversion: ``sum over the truncated a_n^2 + N0 / eta``."""
    a = np.asarray(weights, dtype=np.float64)
    on = np.asarray(aligned, dtype=bool)
    return float(np.sum(a[~on] ** 2) + noise_w / eta)


def expected_aligned(large_scale_gain: ArrayLike, threshold_gain: float) -> F64:
    """Each device's probability of being aligned under Rayleigh fading with mean gain ``H_n``:
    ``P(g_n >= g_th) = exp(-g_th / H_n)`` (``(n,)``; 0 where ``H_n = 0``)."""
    h = np.asarray(large_scale_gain, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(h > 0.0, fmath.exp(-threshold_gain / np.where(h > 0.0, h, 1.0)), 0.0)


def optimal_powers(gain: ArrayLike, weights: ArrayLike, peak_power_w: ArrayLike, eta: float) -> F64:
    """Cao et al.'s optimal powers for a given ``eta``: ``p_n = min(P_n, eta a_n^2 / g_n)``
    (``(n,)``, W; 0 for a device with ``a_n = 0`` or no channel)."""
    g, a = _check(gain, weights)
    peak = np.broadcast_to(np.asarray(peak_power_w, dtype=np.float64), g.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(g > 0.0, eta * a * a / np.where(g > 0.0, g, 1.0), 0.0)
    return np.where(a > 0.0, np.minimum(peak, inv), 0.0)


def optimal_eta(
    gain: ArrayLike, weights: ArrayLike, peak_power_w: ArrayLike, noise_w: float
) -> tuple[float, F64, float]:
    """The denoising factor minimising the MSE under peak powers, with its powers and MSE.

    With quality indicators ``q_n = P_n g_n / a_n^2`` sorted ascending, for ``eta`` between two
    consecutive ones the devices with ``q_n < eta`` send at full power and the others invert
    their channel (zero error), so with ``t = 1 / sqrt(eta)``
    ``MSE = sum over q_n < eta of a_n^2 (sqrt(q_n) t - 1)^2 + N0 t^2``: a quadratic in ``t``,
    minimised at ``t = sum a_n^2 sqrt(q_n) / (sum a_n^2 q_n + N0)`` and clipped to the interval;
    the best of the intervals is the optimum (Cao et al., Theorem 1). Devices with ``a_n = 0``
    or no channel take no part. Every interval at once (prefix sums over the sorted devices):
    no Python loop over devices.

    Returns:
        ``(eta, tx_power_w, mse)``.
    """
    g, a = _check(gain, weights)
    peak = np.broadcast_to(np.asarray(peak_power_w, dtype=np.float64), g.shape)
    live = (a > 0.0) & (g > 0.0) & (peak > 0.0)
    if not live.any():
        raise ValueError("no device can transmit (all weights, gains or powers are 0)")
    if not noise_w > 0.0:
        raise ValueError(f"noise_w must be > 0, got {noise_w!r}")
    quality = peak[live] * g[live] / (a[live] ** 2)
    order = np.argsort(quality, kind="stable")
    q, w2 = quality[order], (a[live] ** 2)[order]
    zero = np.zeros(1)
    # interval k: eta in (bounds[k], bounds[k + 1]], the k weakest devices at full power
    s0 = np.concatenate((zero, np.cumsum(w2)))
    s1 = np.concatenate((zero, np.cumsum(w2 * np.sqrt(q))))
    s2 = np.concatenate((zero, np.cumsum(w2 * q)))
    lo = np.concatenate((zero, q))
    hi = np.concatenate((q, [np.inf]))
    with np.errstate(divide="ignore"):
        t_min = np.where(np.isfinite(hi), 1.0 / np.sqrt(hi), 0.0)  # t = 1 / sqrt(eta)
        t_max = np.where(lo > 0.0, 1.0 / np.sqrt(np.where(lo > 0.0, lo, 1.0)), np.inf)
    t = np.clip(s1 / (s2 + noise_w), t_min, t_max)
    mse = t * t * s2 - 2.0 * t * s1 + s0 + noise_w * t * t
    mse = np.where((hi > lo) & (t > 0.0), mse, np.inf)
    k = int(np.argmin(mse))
    if not np.isfinite(mse[k]):
        raise ValueError("no interval of eta gives a finite MSE")
    eta = 1.0 / float(t[k]) ** 2
    p = optimal_powers(g, a, peak, eta)
    return eta, p, aircomp_mse(g, p, a, eta, noise_w)


def received_aggregate(
    updates: ArrayLike,
    gain: ArrayLike,
    tx_power_w: ArrayLike,
    eta: float,
    noise_w: float,
    rng: np.random.Generator,
) -> F64:
    """One over-the-air aggregation of normalised updates: ``(y) / sqrt(eta)`` with
    ``y = sum_n sqrt(p_n g_n) x_n + z`` per entry (``x``: ``(n, D)``; ``z ~ N(0, N0)`` drawn from
    ``rng``); ``(D,)``."""
    x = np.asarray(updates, dtype=np.float64)
    amp = np.sqrt(np.asarray(tx_power_w, dtype=np.float64) * np.asarray(gain, dtype=np.float64))
    y = amp @ x + rng.normal(0.0, math.sqrt(noise_w), size=x.shape[1])
    return np.asarray(y / math.sqrt(eta), dtype=np.float64)


def normalise(updates: ArrayLike) -> tuple[F64, F64, F64]:
    """Each update (row) to zero mean and unit variance, with its mean and standard deviation
    (the side information): ``(x, mean, std)``; a constant row has std 1 (sent as its mean)."""
    u = np.asarray(updates, dtype=np.float64)
    mean = u.mean(axis=1)
    std = u.std(axis=1)
    std = np.where(std > 0.0, std, 1.0)
    return (u - mean[:, None]) / std[:, None], mean, std


# ----------------------------------------------------------------------------- one slot

#: The power-control rules of ``[uplink] mode = "aircomp"`` (``[uplink] power_control``).
POWER_RULES = ("truncated_inversion", "optimal", "controller")


# ------------------------------------------------------------- the receiver's noise as privacy


def air_multipliers(received_power_w: ArrayLike, noise_w: ArrayLike, clip_values: int) -> F64:
    """Each device's noise multiplier over the air (docs/privacy.md, "Over the air"), its own
    received SNR per symbol: ``z_n = sqrt(N / (p_n g_n D_min))`` (``(n,)``; inf where nothing of
    it arrives).

    A device sends its clipped update scaled by the public ``sqrt(D_min) / C``, so its L2 norm
    is at most ``sqrt(D_min)`` and the sum carries it with amplitude ``sqrt(p_n g_n)``; the noise
    ``N`` per symbol is the same on every entry: the multiplier is the noise's standard deviation
    over the device's L2 sensitivity in the received sum, whatever the receiver's scaling
    ``eta`` and normalisation (post-processing).

    Args:
        received_power_w: ``p_n g_n`` with the true gain, W (``eta c_n^2``).
        noise_w: ``N``, the Gaussian noise per symbol that counts (thermal, plus any added), W;
            a number or ``(n,)``.
        clip_values: ``D_min``, the fewest values any device of the slot sends.
    """
    rx = np.asarray(received_power_w, dtype=np.float64)
    n = np.broadcast_to(np.asarray(noise_w, dtype=np.float64), rx.shape)
    with np.errstate(divide="ignore"):
        return np.where(rx > 0.0, np.sqrt(n / (np.where(rx > 0.0, rx, 1.0) * clip_values)), np.inf)


def air_fill_w(
    strongest_w: ArrayLike, noise_w: ArrayLike, noise_multiplier: float, clip_values: int
) -> F64:
    """``(G,)`` the noise power per symbol (W, at the receiver) each sum misses for its
    strongest device to reach ``z``: ``max(0, z^2 D_min max_n p_n g_n - N)``.

    Args:
        strongest_w: ``(G,)`` ``max_n p_n g_n`` over each sum's devices, W (0: an empty sum).
        noise_w: ``N``, the Gaussian noise per symbol each sum already has, W.
        noise_multiplier: ``z``.
        clip_values: ``D_min``.
    """
    top = np.asarray(strongest_w, dtype=np.float64)
    need = float(noise_multiplier) ** 2 * clip_values * top - np.asarray(noise_w, dtype=np.float64)
    return np.asarray(np.where(top > 0.0, np.maximum(need, 0.0), 0.0), dtype=np.float64)


def strongest_w(received_power_w: ArrayLike, group: ArrayLike, num_groups: int) -> F64:
    """``(G,)`` the largest received power per symbol ``p_n g_n`` in each sum, W (0: empty)."""
    top = np.zeros(num_groups)
    np.maximum.at(top, np.asarray(group, dtype=np.int64), np.asarray(received_power_w))
    return top


def privacy_received_w(thermal_w: float, noise_multiplier: float, clip_values: int) -> float:
    """``R = N0 / (z^2 D_min)``, W: the largest received power per symbol ``p_n g_n`` at which
    the thermal noise ``N0`` alone gives a device the multiplier ``z``."""
    return float(thermal_w) / (float(noise_multiplier) ** 2 * clip_values)


def privacy_peak_w(peak_power_w: ArrayLike, seen_gain: ArrayLike, received_w: float) -> F64:
    """``air_power = "privacy"`` for truncated inversion and the optimal powers: the peak
    powers lowered to ``min(P_n, R / g_n)`` (on the gain the device sees), so that the rule's
    powers, recomputed under them, give no device more than ``R`` at the receiver (``(n,)``,
    W; ``P_n`` where ``g_n = 0``)."""
    peak = np.asarray(peak_power_w, dtype=np.float64)
    g = np.asarray(seen_gain, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(g > 0.0, np.minimum(peak, received_w / np.where(g > 0.0, g, 1.0)), peak)


def device_noise_split(
    fill_w: ArrayLike, headroom_w: ArrayLike, seen_gain: ArrayLike, group: ArrayLike
) -> tuple[F64, B8]:
    """``air_noise = "devices"``: each sum's devices add the noise ``A_s`` (W at the receiver)
    together, each the same fraction ``f_s`` of its power headroom ``P_n - p_n``:
    ``q_n = f_s (P_n - p_n)`` with ``f_s = A_s / sum_n (P_n - p_n) g_n`` over the sum (independent
    noises add in power at the receiver, each through its channel).

    Returns:
        ``(q_w, reached)``: ``(n,)`` each device's noise power, W, and ``(G,)`` whether the
        headroom reaches ``A_s`` (``f_s <= 1``; where not, ``q`` is 0 for the sum).
    """
    need = np.asarray(fill_w, dtype=np.float64)
    room = np.maximum(np.asarray(headroom_w, dtype=np.float64), 0.0)
    grp = np.asarray(group, dtype=np.int64)
    reach = np.bincount(grp, weights=room * np.asarray(seen_gain), minlength=need.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(need > 0.0, need / reach, 0.0)
    reached = np.isfinite(frac) & (frac <= 1.0)
    frac = np.where(reached, frac, 0.0)
    return frac[grp] * room, reached


@dataclass(frozen=True)
class AirPrivacy:
    """``[privacy] mechanism = "over_the_air"`` for one slot's plan (docs/privacy.md)."""

    noise_multiplier: float | None  #: ``z``, the update's (None: channel_only, measured)
    clip_values: int  #: ``D_min``: the devices send ``clip(u) sqrt(D_min) / C``
    thermal_w: float  #: ``N0``, W: the only noise that counts (interference does not)
    added_w: F64  #: ``(N,)`` ``q_n``: the noise power each device adds (air_noise = "devices"), W
    added_rx_w: F64  #: ``(N,)`` ``q_n g_n``: that noise at the receiver (true gains), W


@dataclass(frozen=True)
class AirCompPlan:
    """One slot's over-the-air transmissions, decided at the slot's start: ``(N,)`` arrays over
    devices and ``(G,)`` over the sums (one per cell; one without ``[cells]``)."""

    aligned: B8  #: transmits in its sum
    truncated: B8  #: asked to take part, silent: its gain is below the threshold
    tx_power_w: F64  #: W per unit-variance symbol (0 when silent)
    #: ``a_n``: the target weights, ``B_n`` over the aligned of its sum (each sum's add to 1)
    weights: F64
    #: ``c_n = sqrt(p_n g_n / eta)`` with the true gain: the weight the sum actually gives
    coefficient: F64
    group: I64  #: each device's sum (its cell)
    eta: F64  #: ``(G,)`` each receiver's denoising factor, W (0: nobody transmits)
    noise_w: F64  #: ``(G,)`` the noise each sum was planned on, W
    latency_s: float  #: ``T``: the transmission window of a sum, s
    #: over-the-air privacy (None: none); ``tx_power_w`` then includes the devices' added noise
    privacy: AirPrivacy | None = None

    def mse(self, noise_w: F64 | None = None, arrived: B8 | None = None) -> F64:
        """``(G,)`` the closed-form MSE per entry of each sum the server reconstructs, for
        unit-variance updates, with the true gains and the noise ``noise_w`` (default: the
        planned): over the devices that made it into the sum (``arrived``; default: every
        aligned one), renormalised by the weight ``s`` they carry,
        ``sum_n ((c_n - a_n) / s)^2 + N0 / (eta s^2)`` (Cao et al., eq. 8, for ``s = 1``);
        NaN where nobody made it."""
        noise = self.noise_w if noise_w is None else np.asarray(noise_w, dtype=np.float64)
        num = self.eta.shape[0]
        on = self.aligned if arrived is None else np.asarray(arrived, dtype=bool) & self.aligned
        carried = np.bincount(self.group[on], weights=self.weights[on], minlength=num)
        bias = np.bincount(
            self.group[on], weights=(self.coefficient[on] - self.weights[on]) ** 2, minlength=num
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(
                (self.eta > 0.0) & (carried > 0.0),
                (bias + noise / self.eta) / (carried * carried),
                np.nan,
            )


def _plan_one(
    part: B8,
    b: F64,
    seen: F64,
    true: F64,
    peak: F64,
    noise_w: float,
    rule: str,
    threshold_gain: float,
) -> tuple[B8, F64, F64, F64, float]:
    """One sum's plan over its devices: ``(aligned, tx_power_w, weights, coefficient, eta)``."""
    can = part & (seen > 0.0) & (peak > 0.0)
    aligned = can & (seen >= threshold_gain) if rule == "truncated_inversion" else can
    zeros = np.zeros(part.shape, dtype=np.float64)
    if not aligned.any():
        return aligned, zeros, zeros, zeros, 0.0
    a = np.where(aligned, b, 0.0)
    a = a / a.sum()
    safe = np.where(aligned, seen, 1.0)
    if rule == "truncated_inversion":
        eta = float(np.min((peak * safe / np.where(aligned, a * a, 1.0))[aligned]))
        p = np.where(aligned, np.minimum(peak, eta * a * a / safe), 0.0)
    else:
        eta, p, _ = optimal_eta(np.where(aligned, seen, 0.0), a, peak, noise_w)
        p = np.where(aligned, p, 0.0)
    c = np.where(aligned, np.sqrt(p * true / eta), 0.0)
    return aligned, p, a, c, eta


def plan_aircomp(
    participating: ArrayLike,
    batch_size: ArrayLike,
    seen_gain: ArrayLike,
    true_gain: ArrayLike,
    peak_power_w: ArrayLike,
    noise_w: ArrayLike,
    rule: str,
    threshold_gain: float,
    latency_s: float,
    group: ArrayLike | None = None,
    num_groups: int | None = None,
    tx_power_w: ArrayLike | None = None,
    eta_w: float | None = None,
) -> AirCompPlan:
    """A slot's over-the-air plan: who transmits in which sum at which power, each receiver's
    ``eta`` and what the sums will give; ``(N,)`` arrays in, one :class:`AirCompPlan` out.

    The powers come from the gains the devices see (``seen_gain``: their CSI); the sum is made
    by the true ones (``true_gain``): with imperfect CSI ``c_n != a_n`` (misalignment). Each
    sum (``group``: a device's cell; None: one sum) is planned on its own:

    * ``truncated_inversion`` (BAA): a participant with ``g_seen >= threshold_gain`` inverts its
      channel at ``eta = min over the aligned of P_n g_n / a_n^2`` (the largest ``eta`` every
      aligned device reaches within its peak power); the others stay silent.
    * ``optimal`` (Cao et al.): every participant, ``eta`` and powers from :func:`optimal_eta`.

    Args:
        participating: ``(N,)`` bool: the devices the scheme lets take part.
        batch_size: ``B_n`` ``(N,)``: the target weights are ``B_n / sum B`` over the aligned.
        seen_gain, true_gain: ``(N,)`` linear channel power gains (to the device's own site).
        peak_power_w: ``P_n`` ``(N,)``, W.
        noise_w: ``N0`` each sum is planned on, W: a number, or ``(G,)``.
        rule: one of :data:`POWER_RULES`.
        threshold_gain: ``g_th``, linear (truncated inversion; ignored by ``optimal``).
        latency_s: ``T`` (:func:`~wflsim.sim.radio.rates.aircomp_latency_s`), s.
        group: ``(N,)`` each device's sum, ``0 .. G - 1`` (None: all in sum 0).
        num_groups: ``G`` (None: one more than the largest ``group``); a sum nobody is in has
            ``eta = 0``.
        tx_power_w, eta_w: ``controller`` only: the scheme's powers (``eta a_n^2 / g_seen`` with
            ``a_n = B_n / sum B`` over all devices, :func:`controller_frame`) and the receiver's
            fixed ``eta`` (:func:`planned_eta`); each sum is then renormalised by the weight its
            devices carry, ``s``: its weights ``a_n / s``, coefficients ``c_n / s``, ``eta s^2``.

    * ``controller`` (the paper's controller adapted): the scheme's participants transmit at
      its powers; nobody else is truncated.
    """
    if rule not in POWER_RULES:
        raise ValueError(f"unknown AirComp power rule {rule!r}; known: {', '.join(POWER_RULES)}")
    part = np.asarray(participating, dtype=bool)
    n = part.shape[0]
    grp = np.zeros(n, dtype=np.int64) if group is None else np.asarray(group, dtype=np.int64)
    num = num_groups if num_groups is not None else (int(grp.max()) + 1 if n else 1)
    noise = np.broadcast_to(np.asarray(noise_w, dtype=np.float64), (num,)).copy()
    seen = np.asarray(seen_gain, dtype=np.float64)
    true = np.asarray(true_gain, dtype=np.float64)
    peak = np.broadcast_to(np.asarray(peak_power_w, dtype=np.float64), part.shape)
    b = np.broadcast_to(np.asarray(batch_size, dtype=np.float64), part.shape)
    if rule == "controller":
        if tx_power_w is None or eta_w is None:
            raise ValueError("the controller rule needs the scheme's powers and eta")
        given = np.asarray(tx_power_w, dtype=np.float64)
        a_full = b / b.sum()
        on = part & (seen > 0.0) & (given > 0.0) & (eta_w > 0.0)
        p = np.where(on, np.minimum(peak, given), 0.0)
        c_full = np.where(on, np.sqrt(p * true / eta_w) if eta_w > 0 else 0.0, 0.0)
        carried = np.bincount(grp[on], weights=a_full[on], minlength=num)
        scale = np.where(on, carried[grp], 1.0)
        eta = np.where(carried > 0.0, eta_w * carried * carried, 0.0)
        a = np.where(on, a_full / scale, 0.0)
        c = np.where(on, c_full / scale, 0.0)
        return AirCompPlan(on, part & ~on, p, a, c, grp, eta, noise, latency_s)
    aligned = np.zeros(n, dtype=bool)
    p, a, c = np.zeros(n), np.zeros(n), np.zeros(n)
    eta = np.zeros(num)
    for g in range(num):  # one sum per cell: a loop over cells, vectorised over their devices
        on = grp == g
        al, pg, ag, cg, eta[g] = _plan_one(
            part & on, b, seen, true, peak, float(noise[g]), rule, threshold_gain
        )
        aligned |= al
        p, a, c = np.where(on, pg, p), np.where(on, ag, a), np.where(on, cg, c)
    return AirCompPlan(aligned, part & ~aligned, p, a, c, grp, eta, noise, latency_s)


def aircomp_transmission(
    compute_s: ArrayLike,
    aligned: ArrayLike,
    latency_s: float,
    deadline_s: float,
    closes_at: str,
    group: ArrayLike | None = None,
    num_groups: int | None = None,
) -> tuple[F64, F64, B8]:
    """When each device's sum starts transmitting (s after the slot's start), how long each
    device transmits and whether its update is in its sum, ``(N,)`` each.

    Under ``closes_at = "deadline"`` every sum is the slot's last ``T``: it starts at
    ``tau_0 - T``, and an aligned device still computing then is not in it (an outage); under
    ``"last_upload"`` a sum (``group``: the devices' cells) starts when its last aligned device
    has computed. Nobody transmits when ``T > tau_0`` under a deadline (start < 0).
    """
    c = np.asarray(compute_s, dtype=np.float64)
    on = np.asarray(aligned, dtype=bool)
    n = c.shape[0]
    grp = np.zeros(n, dtype=np.int64) if group is None else np.asarray(group, dtype=np.int64)
    if closes_at == "deadline":
        start = np.full(n, deadline_s - latency_s)
        ready = on & (c <= start * (1.0 + 1e-9)) & (start >= 0.0)
    else:
        last = np.zeros(num_groups if num_groups is not None else (int(grp.max()) + 1 if n else 1))
        np.maximum.at(last, grp[on], c[on])
        start = last[grp]
        ready = on.copy()
    return start, np.where(ready, latency_s, 0.0), ready


def interference_w(
    plan: AirCompPlan,
    transmitted_s: ArrayLike,
    start_s: ArrayLike,
    gain_to_site: ArrayLike,
    co_band: ArrayLike,
) -> F64:
    """``(G,)`` the interference each sum's receiver hears from the other sums' devices on its
    band: ``sum_m p_m g[m, v] d_m f_mv`` over the devices ``m`` transmitting in a co-band cell,
    ``d_m`` the share of its window's symbols ``m`` transmits on (its own coordinates, or until
    it went offline) and ``f_mv`` the fraction of ``v``'s window that ``m``'s sum overlaps (1 when
    both end at the deadline): the mean power per symbol of ``v``'s window. An over-the-air
    symbol occupies the whole band, so nothing is spread.

    Args:
        plan: the slot's plan (``group``: each device's cell).
        transmitted_s: ``(N,)`` how long each device transmitted in its sum's window, s.
        start_s: ``(N,)`` its sum's start, s (:func:`aircomp_transmission`).
        gain_to_site: ``(N, G)`` each device's gain to every site, linear.
        co_band: ``(G, G)`` bool, ``co_band[a, v]``: cell ``a``'s transmissions reach ``v``'s.
    """
    sent_s = np.asarray(transmitted_s, dtype=np.float64)
    tx = sent_s > 0.0
    duty = np.clip(sent_s / plan.latency_s, 0.0, 1.0) if plan.latency_s > 0 else tx * 1.0
    g_all = np.asarray(gain_to_site, dtype=np.float64)
    num = plan.eta.shape[0]
    starts = np.zeros(num)
    starts[plan.group[tx]] = np.asarray(start_s, dtype=np.float64)[tx]
    t = plan.latency_s
    lo = np.maximum(starts[:, None], starts[None, :])
    hi = np.minimum(starts[:, None], starts[None, :]) + t
    overlap = np.clip((hi - lo) / t, 0.0, 1.0) if t > 0 else np.ones((num, num))
    # received[m, v]: device m's power at site v, only for transmitting devices
    received = np.where(tx[:, None], (plan.tx_power_w * duty)[:, None] * g_all, 0.0)
    per_cell = np.zeros((num, num))  # [a, v]: cell a's total received power at site v
    np.add.at(per_cell, plan.group[tx], received[tx])
    hits = (
        np.asarray(co_band, dtype=bool) & (np.bincount(plan.group[tx], minlength=num) > 0)[:, None]
    )
    return np.asarray((per_cell * overlap * hits).sum(axis=0), dtype=np.float64)


# ------------------------------------------------------------- the paper's controller, adapted


def planned_eta(peak_power_w: ArrayLike, mean_gain: ArrayLike, batch_size: ArrayLike) -> float:
    """The receiver's scaling under ``power_control = "controller"``, W: the largest ``eta`` at
    which every device, at its mean gain, inverts its channel within its peak power,
    ``min_n P_n H_n / a_n^2`` with ``a_n = B_n / sum B`` over all devices (fixed for a frame, so
    that a device's power does not depend on who else takes part)."""
    p = np.asarray(peak_power_w, dtype=np.float64)
    h = np.asarray(mean_gain, dtype=np.float64)
    b = np.asarray(batch_size, dtype=np.float64)
    a = b / b.sum()
    live = (p > 0) & (h > 0) & (a > 0)
    if not live.any():
        return 0.0
    return float(np.min((p * h / (a * a))[live]))


def controller_frame(
    net_value: ArrayLike,
    queue_j: ArrayLike,
    theta_s: ArrayLike,
    deadline_s: float,
    window_s: float,
    upload_full_s: float,
    peak_power_w: ArrayLike,
    mean_gain: ArrayLike,
    eta_w: float,
    weights: ArrayLike,
) -> tuple[F64, F64, F64, F64]:
    """The paper's per-frame problem (P4) over the air, in closed form: ``(gamma, p_max, cost,
    K)``, ``(N,)`` each (``K``: the expected cost per unit of ``u``) (docs/aircomp.md, "The paper's controller under AirComp").

    A device that takes part at ``u = 1 - gamma`` inverts its channel, ``p = eta a^2 / h``, for
    ``u T_full`` (its share ``u D`` of the window's symbols; ``T_full``: the whole model's
    transmission, ``upload_full_s``): the drift-plus-penalty of taking part is
    ``-I u + Q eta a^2 u T_full / h``, so it takes part iff ``p <= p_max`` with
    ``p_max = min(P, I / (Q T_full))`` (``P`` where ``Q = 0``; 0 where ``I <= 0``): Proposition 1's
    threshold, now independent of ``u``. With ``h ~ Exp(H)`` and ``x = eta a^2 / (p_max H)`` the
    expected cost is ``Z(u) = u K``, ``K = -I e^{-x} + Q eta a^2 T_full E1(x) / H`` (Theorem 2's
    form with ``e_com = eta a^2 u T_full``): linear in ``u``, so the minimum is at an end of the
    feasible range: ``u = min(1, (tau_0 - T) / theta)`` (the computation must end before the
    window ``T = window_s`` opens) where ``K < 0``, else ``u = 0`` (the device sits the frame out,
    ``gamma = 1``). No MM iteration is needed.

    Args:
        net_value: ``I = V B lam - Q e_cmp`` per unit of ``u``, ``(N,)``.
        queue_j: ``Q``, J, ``(N,)``.
        theta_s: ``theta = c B / f``, the full computation, s, ``(N,)``.
        deadline_s: ``tau_0``, s.
        window_s: ``T``, the sum's window, s.
        upload_full_s: ``T_full``, the whole model's symbols, s (``window_s``; a device sends
            ``u`` of them).
        peak_power_w: ``P``, W, ``(N,)``.
        mean_gain: ``H``, linear, ``(N,)``.
        eta_w: the receiver's ``eta`` (:func:`planned_eta`), W.
        weights: ``a_n = B_n / sum B`` over all devices, ``(N,)``.
    """
    from scipy.special import exp1

    i_val = np.asarray(net_value, dtype=np.float64)
    q = np.asarray(queue_j, dtype=np.float64)
    theta = np.asarray(theta_s, dtype=np.float64)
    peak = np.asarray(peak_power_w, dtype=np.float64)
    h = np.asarray(mean_gain, dtype=np.float64)
    a = np.asarray(weights, dtype=np.float64)
    n = i_val.shape[0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # tiny Q: p_max = P
        p_max = np.where(q > 0.0, np.minimum(peak, i_val / (q * upload_full_s)), peak)
        p_max = np.where((i_val > 0.0) & (eta_w > 0.0), p_max, 0.0)
        x_raw = np.where(p_max > 0.0, eta_w * a * a / (p_max * h), np.inf)
        x = np.clip(x_raw, 1e-300, 700.0)
        k = -i_val * fmath.exp(-x) + q * eta_w * a * a * upload_full_s * exp1(x) / h
        k = np.where(x_raw > 700.0, 0.0, k)  # takes part with probability < e^-700: never
        u_max = np.clip((deadline_s - window_s) / theta, 0.0, 1.0)
    go = (p_max > 0.0) & (k < 0.0) & (u_max > 0.0)
    u = np.where(go, u_max, 0.0)
    cost = np.where(go, u * k, 0.0)
    slope = np.where(p_max > 0.0, k, 0.0)
    return (
        np.asarray(1.0 - u, dtype=np.float64),
        np.where(go, p_max, 0.0),
        cost.reshape(n),
        np.asarray(slope, dtype=np.float64).reshape(n),
    )


class AirComp(UplinkMode):
    """``[uplink] mode = "aircomp"``: every participant of a slot sends its update at once on
    the band and the server receives their noisy, power-controlled sum (the module docstring;
    the slot is one closed form for every kernel, :meth:`wflsim.sim.kernels.SlotKernel.play_aircomp`)."""

    name: ClassVar[str] = "aircomp"
    over_the_air: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "every participant sends its update at once on W, the server receives their sum "
        "(over-the-air aggregation)"
    )

    def differences(self, spec: UplinkSpec, server_mode: str) -> list[str]:
        """The sum's window replaces the digital upload; the powers are the rule's."""
        if spec.power_control == "controller":
            return [
                "AirComp: the participants send their updates at once on the band W and the "
                "server receives their sum with noise; the transmission takes ceil(D / v) / W "
                "whatever the number of devices; the controller is adapted to it (Proposition 1 "
                "as a gain threshold against the frame's receiver scaling, Theorem 2 in closed "
                "form: docs/aircomp.md)"
            ]
        return [
            "AirComp: the participants send their updates at once on the band W and the "
            "server receives their sum with noise; the transmission takes ceil(D' / v) / W "
            f"whatever the number of devices, at the powers of {spec.power_control} (not "
            "the scheme's): the scheme's p_min and the controller's upload costs are the "
            'digital model\'s (power_control = "controller" adapts them)'
        ]

    def details(self, spec: UplinkSpec) -> dict[str, Any]:
        """The power rule, its threshold and the values per symbol."""
        return {
            "aircomp": {
                "power_control": spec.power_control,
                "threshold_gain_db": (
                    float(10.0 * fmath.log10(spec.threshold_gain))
                    if spec.threshold_gain > 0
                    else None
                ),
                "values_per_symbol": spec.values_per_symbol,
            }
        }

    def build(
        self,
        spec: UplinkSpec,
        system: SystemConstants,
        upload_start: int,
        upload_end: int,
        cells: Cells | None = None,
    ) -> SharedUplink | None:
        """None: one common transmission, a closed form for every kernel."""
        return None
