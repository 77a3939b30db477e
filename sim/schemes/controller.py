"""The paper's online two-timescale Lyapunov controller: pure, vectorised numpy/scipy functions.

Equation labels refer to the paper in ``../shared/paper/two-timescale-wireless-fl.tex``. Every
function works on arrays of shape ``(N,)`` (one entry per device) and loops over MM iterations,
never over devices.

Symbols (per device)::

    u       = 1 - gamma                    unfrozen fraction (gamma: freezing percentage), [-]
    theta   = c B / f                      full-model computation time, [s]
    Dt(u)   = tau0 - theta u               time left for the upload after computing, [s]
    k(u)    = ln2 u S / (W Dt)             exponent (nats) of the minimum-power formula, [-]
    A(u)    = 2^(u S / (W Dt)) - 1 = expm1(k)
    e_cmp   = (alpha / 2) c B f^2          full-model computation energy, eq. (cmp_energy), [J]
    e_com   = N0 Dt A                      upload energy times channel gain, [J] (x linear gain)
    I       = V B lam - Q e_cmp            net value of participating per unit of u, [cost]
    H       mean channel gain (h ~ Exp(mean H), Rayleigh block fading), [-]
    P_bar   peak transmit power, [W];  Q: energy-deficit queue, [J]

"[cost]" is the unit of the per-slot drift-plus-penalty cost ``z = V X + Q E`` (``Q E`` is J^2 when
``Q`` is in J; ``V`` carries whatever converts ``X`` to that unit). Only the product ``V lam``
matters.

Per slot (Proposition 1, eq. "optimal power"): transmit at ``p_min = N0 A / h`` iff
``p_max > 0`` and ``p_min <= p_max``, where ``p_max`` is fixed per frame (eq. "max transmit
power"); otherwise drop out (no compute, no upload, no energy). Transmitting costs
``z = V lam B (gamma - 1) + Q (e_cmp u + p_min Dt) = -I u + Q p_min Dt``; dropping out costs 0.

Per frame (Theorem 2, eq. "expected cost 2"): with ``x = h_min / H`` and ``h_min = N0 A / p_max``
(eq. "the minimum channel gain")::

    Z(gamma) = -I u e^{-x} + Q e_com E1(x) / H = -I u e^{-x} + C x E1(x),   C = Q Dt p_max,

so ``Z = -I u Psi(x)`` with ``Psi(x) = e^{-x} - x E1(x)`` where ``p_max < P_bar`` (the paper's
Appendix, Case 1) and ``C = Q P_bar Dt`` where ``p_max = P_bar`` (Case 2). ``Z <= 0`` everywhere
(``x E1(x) < e^{-x}``) and ``Z(1) = 0``; ``Z`` is C^1 at the truncation point ``Gamma``, only
``Z''`` jumps. The per-frame problem (P4) ``min_{gamma in [0, 1]} Z`` is solved by
majorization-minimization (eq. "surrogate function") on ``[0, Gamma]`` and ``[Gamma, 1]``; see
:func:`solve_gamma` for how the curvature ``M`` is chosen (the paper's eq. "M value" is not a valid
bound in general; :func:`paper_curvature_bound` reproduces it for diagnostics only).

Conventions the paper leaves open:

* ``I <= 0`` (the queue price of computing exceeds the value of the update; Lemma "range of gamma",
  Case 1): ``p_max = 0``, the device quits the frame, ``Z = 0`` for every ``gamma``; the solver
  returns ``gamma = 1`` (freeze everything, nothing to compute or send).
* ``u = 0`` (``gamma = 1``): nothing to send, ``p_max = 0``, no participation, ``Z = 0``.
* ``Dt <= 0`` (computing alone misses the deadline) or an overflowing ``A`` (``k > 700``) or
  ``x > 700``: no transmission is possible (or happens with probability ``< e^-700``): ``Z = Z' = 0``.
* Ties in the per-frame cost are broken towards the larger ``gamma`` (less participation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import exp1

from .. import fmath
from ..world.physics import compute_energy_j, compute_time_s
from .phi import _d2phi, _dphi, _dphi_series, _inv_log_phi, _log_phi

F64 = NDArray[np.float64]

__all__ = [
    "ControllerParams",
    "GammaResult",
    "SlotDecision",
    "default_lambda",
    "expected_cost",
    "expected_cost_derivative",
    "lambda_from_constants",
    "max_tx_power_for_cost_w",
    "max_tx_power_w",
    "paper_curvature_bound",
    "slot_power_decision",
    "solve_gamma",
    "truncation_gamma",
]

_LN2 = float(fmath.log(2.0))
#: Above this exponent ``k`` (nats), ``A = e^k - 1`` is treated as overflowing: infeasible.
_K_MAX = 700.0
#: Above this ``x = h_min / H`` the success probability ``e^-x`` is treated as 0 (``e^-700 ~ 1e-304``).
_X_MAX = 700.0
#: Smallest ``x`` passed to ``E1`` (``E1(0) = inf``); only reached where ``C = 0`` or ``u = 0``.
_X_MIN = 1e-300
_EPS = float(np.finfo(np.float64).eps)
_TINY = float(np.finfo(np.float64).smallest_subnormal)
_HUGE = float(np.finfo(np.float64).max) / 8.0


# --------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------


def _checked(name: str, value: ArrayLike, *, positive: bool = False, nonneg: bool = False) -> F64:
    """Return ``value`` as a float64 array; raise ``ValueError`` naming ``name`` if it is bad."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric, got {value!r}") from exc
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (got NaN or inf)")
    if positive and np.any(arr <= 0.0):
        raise ValueError(f"{name} must be > 0 (min {arr.min()!r})")
    if nonneg and np.any(arr < 0.0):
        raise ValueError(f"{name} must be >= 0 (min {arr.min()!r})")
    return arr


def _checked_gamma(gamma: ArrayLike, name: str = "gamma") -> F64:
    g = _checked(name, gamma)
    if np.any((g < 0.0) | (g > 1.0)):
        raise ValueError(f"{name} must lie in [0, 1]")
    return g


# --------------------------------------------------------------------------------------------
# multiplier (the queue update is sim.slot.queue_update_j: one source for every scheme)
# --------------------------------------------------------------------------------------------


def default_lambda(batch_sizes: ArrayLike) -> float:
    """Default convergence-error weight ``lam = 1 / sum_n B_n`` (DESIGN, "The controller").

    Args:
        batch_sizes: ``B_n``, shape ``(N,)``, samples, all ``> 0``.

    Returns:
        ``lam``, 1/sample.
    """
    b = _checked("batch_sizes", batch_sizes, positive=True)
    if b.size == 0:
        raise ValueError("batch_sizes must not be empty")
    return float(1.0 / b.sum())


def lambda_from_constants(
    L: float,
    sigma2: float,
    xi1: float,
    xi2: float,
    batch_total: float,
) -> float:
    """``lam = max(6 L^2 sigma^2, 9 xi1) / ((1 - 9 xi2) B)`` (paper, Sec. III-B, below ``X^t``).

    Args:
        L: smoothness constant (Assumption 1), ``>= 0``.
        sigma2: stochastic-gradient variance bound ``sigma^2``, ``>= 0``.
        xi1, xi2: gradient-divergence constants (Assumption 3), ``>= 0``, ``9 xi2 < 1``.
        batch_total: total batch size ``B = sum_n B_n``, samples, ``> 0``.

    Returns:
        ``lam`` (``>= 0``).

    Raises:
        ValueError: naming the offending field (``xi2`` when ``9 xi2 >= 1``).
    """
    L_ = float(_checked("L", L, nonneg=True))
    s2 = float(_checked("sigma2", sigma2, nonneg=True))
    x1 = float(_checked("xi1", xi1, nonneg=True))
    x2 = float(_checked("xi2", xi2, nonneg=True))
    bt = float(_checked("batch_total", batch_total, positive=True))
    if 9.0 * x2 >= 1.0:
        raise ValueError(f"xi2 must satisfy 9 * xi2 < 1 (got xi2 = {x2!r})")
    return max(6.0 * L_**2 * s2, 9.0 * x1) / ((1.0 - 9.0 * x2) * bt)


# --------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ControllerParams:
    """Per-device inputs of the per-frame problem (P4), all broadcast to shape ``(N,)`` float64.

    Fields (units): ``model_bits`` ``S`` (bits, full gradient), ``bandwidth_hz`` ``W`` (Hz),
    ``noise_w`` ``N0`` (W, total over ``W``), ``mean_gain`` ``H`` (linear, mean of ``h``),
    ``deadline_s`` ``tau0`` (s), ``cycles_per_sample`` ``c``, ``batch_size`` ``B`` (samples),
    ``cpu_hz`` ``f`` (cycles/s), ``capacitance`` ``alpha`` (effective switched capacitance),
    ``peak_power_w`` ``P_bar`` (W), ``queue_j`` ``Q`` (J, the frame-start queue ``Q^{kT}``),
    ``v`` (Lyapunov weight ``V``), ``lam`` (``lambda``, see :func:`default_lambda`),
    ``min_gamma`` (the least ``gamma`` the solver may return, in ``[0, 1]``; 0 by default: a
    rate model's highest efficiency makes smaller ones infeasible).

    Raises:
        ValueError: naming the field, if a value is non-finite, not positive where it must be
            (``S, W, N0, H, tau0, c, B, f, P_bar``) or negative (``alpha, Q, V, lam``), or if
            the shapes do not broadcast to one dimension.
    """

    model_bits: F64
    bandwidth_hz: F64
    noise_w: F64
    mean_gain: F64
    deadline_s: F64
    cycles_per_sample: F64
    batch_size: F64
    cpu_hz: F64
    capacitance: F64
    peak_power_w: F64
    queue_j: F64
    v: F64
    lam: F64
    min_gamma: F64 = field(default_factory=lambda: np.zeros(1))

    _POSITIVE = (
        "model_bits",
        "bandwidth_hz",
        "noise_w",
        "mean_gain",
        "deadline_s",
        "cycles_per_sample",
        "batch_size",
        "cpu_hz",
        "peak_power_w",
    )
    _NONNEG = ("capacitance", "queue_j", "v", "lam", "min_gamma")

    def __post_init__(self) -> None:
        names = self._POSITIVE + self._NONNEG
        arrs = {
            n: _checked(n, getattr(self, n), positive=n in self._POSITIVE, nonneg=n in self._NONNEG)
            for n in names
        }
        try:
            shape = np.broadcast_shapes(*(a.shape for a in arrs.values()))
        except ValueError as exc:
            raise ValueError(f"ControllerParams fields do not broadcast: {exc}") from exc
        if len(shape) > 1:
            raise ValueError(f"ControllerParams fields must be scalars or 1-D, got shape {shape}")
        for n, a in arrs.items():
            b = np.array(np.broadcast_to(a, shape if shape else (1,)), dtype=np.float64)
            b.setflags(write=False)
            object.__setattr__(self, n, b)

    @cached_property
    def _derived(self) -> _Derived:
        """Per-device constants of ``Z`` (computed once; the fields are read-only)."""
        return _derive(self)

    @property
    def n_devices(self) -> int:
        """Number of devices ``N``."""
        return int(self.model_bits.shape[0])

    @property
    def theta_s(self) -> F64:
        """``theta = c B / f``: full-model computation time, eq. (cmp_time) at ``u = 1``, s."""
        return compute_time_s(1.0, self.cycles_per_sample, self.batch_size, self.cpu_hz)

    @property
    def e_cmp_j(self) -> F64:
        """``e_cmp = (alpha/2) c B f^2``: full-model computation energy, eq. (cmp_energy), J."""
        return compute_energy_j(
            1.0, self.cycles_per_sample, self.batch_size, self.cpu_hz, self.capacitance
        )

    @property
    def net_value(self) -> F64:
        """``I = V B lam - Q e_cmp`` (Prop. 1 / eq. "M value"), cost units per unit of ``u``."""
        return self.v * self.batch_size * self.lam - self.queue_j * self.e_cmp_j

    def with_queue(self, queue_j: ArrayLike) -> ControllerParams:
        """A copy with a new frame-start queue ``Q`` (J); everything else unchanged."""
        kw = {n: getattr(self, n) for n in self._POSITIVE + self._NONNEG}
        kw["queue_j"] = queue_j
        return ControllerParams(**kw)


class _Derived(NamedTuple):
    """Per-device constants of ``Z`` (internal), all shape ``(N,)``."""

    net_value: F64  # I, cost
    queue_j: F64  # Q, J
    peak_power_w: F64  # P_bar, W
    deadline_s: F64  # tau0, s
    theta_s: F64  # theta, s
    b_s: F64  # ln2 S / W, s  (k = b u / Dt)
    a_clip: F64  # N0 / (P_bar H): x = a_clip A on the truncated piece
    x_unclip: F64  # Q N0 b / (I H): x = x_unclip phi(k) on the untruncated piece
    u_trunc: F64  # u_Gamma = 1 - Gamma; p_max = P_bar iff u >= u_trunc (> 1: never)
    participating: NDArray[np.bool_]  # I > 0

    def take(self, idx: NDArray[np.intp]) -> _Derived:
        return _Derived._make(a[idx] for a in self)

    def tile(self, reps: int) -> _Derived:
        return _Derived._make(np.tile(a, reps) for a in self)


def _derive(p: ControllerParams) -> _Derived:
    i_val = p.net_value
    q = p.queue_j
    pp = p.peak_power_w
    theta = p.theta_s
    b = _LN2 * p.model_bits / p.bandwidth_hz
    part = i_val > 0.0
    i_safe = np.where(part, i_val, 1.0)
    qp = q * pp
    with np.errstate(over="ignore"):
        u_trunc = np.where(part, qp * p.deadline_s / (i_safe + qp * theta), 2.0)
        x_unclip = np.where(part, q * p.noise_w * b / (i_safe * p.mean_gain), np.inf)
        a_clip = p.noise_w / (pp * p.mean_gain)
    return _Derived(i_val, q, pp, p.deadline_s, theta, b, a_clip, x_unclip, u_trunc, part)


def truncation_gamma(params: ControllerParams) -> F64:
    """The paper's truncation point ``Gamma = 1 - P_bar Q tau0 / (I + P_bar Q theta)``.

    Lemma "range of gamma": ``p_max = P_bar`` for ``gamma <= Gamma`` and ``p_max < P_bar`` above.
    Raw value, shape ``(N,)``: ``1`` when ``Q = 0`` (never truncated below ``P_bar``), ``<= 0``
    in Case 2 (``p_max < P_bar`` on all of ``[0, 1]``), ``-inf`` when ``I <= 0`` (``p_max = 0``).
    """
    d = params._derived
    return np.where(d.participating, 1.0 - d.u_trunc, -np.inf)


# --------------------------------------------------------------------------------------------
# per slot: Proposition 1
# --------------------------------------------------------------------------------------------


def max_tx_power_w(
    queue_j: ArrayLike,
    net_value: ArrayLike,
    u: ArrayLike,
    deadline_s: ArrayLike,
    theta_s: ArrayLike,
    peak_power_w: ArrayLike,
) -> F64:
    """Per-frame power threshold ``p_max = [I u / (Q Dt)]_0^{P_bar}`` (eq. "max transmit power").

    Args:
        queue_j: frame-start queue ``Q``, J, ``>= 0``, shape ``(N,)``.
        net_value: ``I = V B lam - Q e_cmp`` (see :attr:`ControllerParams.net_value`), cost.
        u: unfrozen fraction ``1 - gamma`` in ``[0, 1]``.
        deadline_s: ``tau0``, s, ``> 0``.
        theta_s: ``c B / f``, s, ``>= 0``.
        peak_power_w: ``P_bar``, W, ``>= 0``.

    Returns:
        ``p_max`` in W, shape ``(N,)``. Special cases: ``Q = 0`` gives ``P_bar`` if ``I > 0``
        else 0 (the device quits); ``u = 0`` (nothing to send) and ``Dt = tau0 - theta u <= 0``
        (the deadline cannot be met) give 0.
    """
    q = _checked("queue_j", queue_j, nonneg=True)
    i_val = _checked("net_value", net_value)
    uu = _checked("u", u)
    if np.any((uu < 0.0) | (uu > 1.0)):
        raise ValueError("u must lie in [0, 1]")
    tau0 = _checked("deadline_s", deadline_s, positive=True)
    theta = _checked("theta_s", theta_s, nonneg=True)
    pbar = _checked("peak_power_w", peak_power_w, nonneg=True)
    dt = tau0 - theta * uu
    qdt = q * dt
    with np.errstate(over="ignore"):
        raw = np.where(
            qdt > 0.0,
            i_val * uu / np.where(qdt > 0.0, qdt, 1.0),
            np.where(i_val > 0.0, np.inf, 0.0),
        )
    p = np.where(q > 0.0, np.clip(raw, 0.0, pbar), np.where(i_val > 0.0, pbar, 0.0))
    return np.where((uu <= 0.0) | (dt <= 0.0), 0.0, p).astype(np.float64)


def max_tx_power_for_cost_w(
    queue_j: ArrayLike,
    value: ArrayLike,
    compute_energy_j: ArrayLike,
    upload_window_s: ArrayLike,
    peak_power_w: ArrayLike,
) -> F64:
    """Proposition 1's threshold for any cost model: transmit at ``p_min`` iff ``p_min <= p_max``.

    A device that participates costs ``z = -value + Q (E_cmp + p_min Dt)`` (drift-plus-penalty
    with ``X = lam B (gamma - 1)``, its upload landing at the deadline after ``Dt`` seconds of
    transmission); dropping out costs 0. So it participates iff
    ``p_min < (value - Q E_cmp) / (Q Dt)``, clipped to ``[0, P_bar]``. For freezing (compute
    fraction ``u = 1 - gamma``: ``value = V lam B u``, ``E_cmp = u e_cmp``, ``Dt = tau0 - theta u``)
    this is :func:`max_tx_power_w`'s ``I u / (Q Dt)``; a baseline with another cost model (full
    compute, a sub-model's FLOPs) passes its own energy and upload window.

    Args:
        queue_j: frame-start queue ``Q``, J, ``>= 0``, shape ``(N,)``.
        value: ``V lam B u``, the drift-plus-penalty value of an arrived upload, cost, ``>= 0``.
        compute_energy_j: the device's compute energy in this frame ``E_cmp``, J, ``>= 0``.
        upload_window_s: ``Dt = tau0 - tau_cmp``, s (``<= 0``: the deadline cannot be met).
        peak_power_w: ``P_bar``, W, ``>= 0``.

    Returns:
        ``p_max`` in W, shape ``(N,)``: ``Q = 0`` gives ``P_bar`` if ``value > 0`` else 0;
        ``value = 0`` (nothing to send) or ``Dt <= 0`` give 0.
    """
    q = _checked("queue_j", queue_j, nonneg=True)
    val = _checked("value", value, nonneg=True)
    e_cmp = _checked("compute_energy_j", compute_energy_j, nonneg=True)
    dt = _checked("upload_window_s", upload_window_s)
    pbar = _checked("peak_power_w", peak_power_w, nonneg=True)
    net = val - q * e_cmp
    qdt = q * dt
    with np.errstate(over="ignore"):
        raw = np.where(qdt > 0.0, net / np.where(qdt > 0.0, qdt, 1.0), 0.0)
    p = np.where(q > 0.0, np.clip(raw, 0.0, pbar), np.where(net > 0.0, pbar, 0.0))
    return np.where((val <= 0.0) | (dt <= 0.0), 0.0, p).astype(np.float64)


class SlotDecision(NamedTuple):
    """Per-slot decision of Proposition 1 (arrays of shape ``(N,)``)."""

    tx_power_w: F64  #: transmit power, W (``p_min`` if transmitting, else 0)
    transmit: NDArray[np.bool_]  #: compute and upload this slot (False: drop out, no energy)


def slot_power_decision(
    min_tx_power_w: ArrayLike, p_max_w: ArrayLike, payload_bits: ArrayLike
) -> SlotDecision:
    """Optimal per-slot power, Proposition 1 (eq. "optimal power").

    Transmit at ``p_min`` iff ``p_max > 0``, there is something to send and ``p_min <= p_max``;
    else ``p = 0`` and the device drops out (no compute, no energy).

    Args:
        min_tx_power_w: this slot's ``p_min = N0 / h (2^(u S / (W (tau0 - tau_cmp))) - 1)``
            (eq. "min transmit power"), W, shape ``(N,)``, ``>= 0``, ``inf`` where no power meets
            the deadline; computed once per slot by :func:`wflsim.sim.slot.min_tx_power_w`.
        p_max_w: the frame's threshold (e.g. :attr:`GammaResult.p_max_w`), W, ``>= 0``.
        payload_bits: the upload payload ``u S``, bits, ``>= 0`` (0: nothing to send).

    Returns:
        :class:`SlotDecision` ``(tx_power_w, transmit)``.
    """
    p_min = np.asarray(min_tx_power_w, dtype=np.float64)
    if np.any(np.isnan(p_min)) or np.any(p_min < 0.0):
        raise ValueError("min_tx_power_w must be >= 0 (inf allowed), not NaN")
    pmax = _checked("p_max_w", p_max_w, nonneg=True)
    bits = _checked("payload_bits", payload_bits, nonneg=True)
    transmit = (pmax > 0.0) & (bits > 0.0) & (p_min <= pmax)
    return SlotDecision(np.where(transmit, p_min, 0.0), transmit)


# --------------------------------------------------------------------------------------------
# per frame: expected cost (Theorem 2) and its derivative
# --------------------------------------------------------------------------------------------


def _z_and_dz(gamma: F64, d: _Derived) -> tuple[F64, F64]:
    """``Z(gamma)`` and ``dZ/dgamma`` (broadcasting ``gamma`` against ``d``); see module doc.

    On either piece ``Z = -I u e^{-x} + C x E1(x)`` with
    ``(x, C) = (a_clip A, Q P_bar Dt)`` where ``u >= u_Gamma`` and ``(x_unclip phi(k), I u)`` below,
    and, using ``d/dx e^{-x} = -e^{-x}``, ``d/dx [x E1(x)] = E1(x) - e^{-x}``::

        dZ/du = -I e^{-x} + I u e^{-x} x' + C' x E1(x) + C (E1(x) - e^{-x}) x'.
    """
    compiled = _compiled_loops(gamma, d)
    return compiled if compiled is not None else _z_and_dz_numpy(gamma, d)


def _z_and_dz_numpy(gamma: F64, d: _Derived) -> tuple[F64, F64]:
    """:func:`_z_and_dz` in numpy expressions (the reference of the compiled loops)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        u = np.clip(1.0 - gamma, 0.0, 1.0)
        dt = d.deadline_s - d.theta_s * u
        dt_ok = dt > 0.0
        dts = np.where(dt_ok, dt, 1.0)
        k = d.b_s * u / dts
        k_ok = dt_ok & (k <= _K_MAX)
        ks = np.where(k_ok, k, 0.0)
        kp = d.b_s * d.deadline_s / (dts * dts)  # dk/du
        # e^k and expm1(k) once for both pieces and for phi, phi' (the same values, element by
        # element, as _phi(ks) and _dphi(ks) compute)
        ek = fmath.exp(ks)
        em1 = fmath.expm1(ks)
        trunc = u >= d.u_trunc
        pos = ks > 0.0
        phi = np.where(pos, em1 / np.where(pos, ks, 1.0), 1.0)
        small = ks < 1e-2
        k_c = np.where(small, 1.0, ks)
        dphi = np.where(small, _dphi_series(ks), (k_c * ek - em1) / (k_c * k_c))
        x = np.where(trunc, d.a_clip * em1, d.x_unclip * phi)
        xp = np.where(trunc, d.a_clip * ek * kp, d.x_unclip * dphi * kp)  # dx/du
        qp = d.queue_j * d.peak_power_w
        c = np.where(trunc, qp * dt, d.net_value * u)
        cp = np.where(trunc, -qp * d.theta_s, d.net_value)  # dC/du
        live = k_ok & d.participating & (x <= _X_MAX) & np.isfinite(xp)
        xs = np.clip(np.where(live, x, 1.0), _X_MIN, _X_MAX)
        xps = np.where(live, xp, 0.0)
        ex = fmath.exp(-xs)
        # E1 (the costliest function here) only where the cost is live: elsewhere Z = Z' = 0
        e1 = np.zeros_like(xs)
        e1[live] = exp1(xs[live])
        xe1 = xs * e1
        i_val = d.net_value
        z = -i_val * u * ex + c * xe1
        dz_du = -i_val * ex + i_val * u * ex * xps + cp * xe1 + c * (e1 - ex) * xps
    z = np.where(live, z, 0.0)
    dz = np.where(live, -dz_du, 0.0)
    return z, dz


def _compiled_loops(gamma: F64, d: _Derived) -> tuple[F64, F64] | None:
    """:func:`_z_and_dz` by :mod:`wflsim.sim.schemes.controller_compiled`'s loops (the same bits), or None where
    :mod:`wflsim.sim.fmath` computes an array of this size element by element (a small one, or
    no numba) or ``gamma`` does not broadcast to ``(m,)`` or ``(G, m)`` against ``d``."""
    m = d.net_value.shape[0]
    try:
        shape = np.broadcast_shapes(np.shape(gamma), (m,))
    except ValueError:
        return None
    size = int(np.prod(shape))
    if len(shape) > 2 or not fmath.uses_compiled(size):
        return None
    try:
        from . import controller_compiled as cc
    except Exception:  # numba cannot compile here: numpy's path, the same bits
        return None

    g = np.ascontiguousarray(np.broadcast_to(gamma, shape), dtype=np.float64).reshape(-1, m)
    xs, xps = np.empty(g.shape), np.empty(g.shape)
    live = np.empty(g.shape, dtype=np.bool_)
    cc.x_terms(g, d.deadline_s, d.theta_s, d.b_s, d.u_trunc, d.a_clip, d.x_unclip,
               d.participating, xs, xps, live)  # fmt: skip
    # E1 (scipy's, the costliest function here) only where the cost is live, as numpy's path
    if live.all():  # the start scan's usual case: no gather and scatter
        e1 = exp1(xs)
    else:
        e1 = np.zeros(g.shape)
        e1[live] = exp1(xs[live])
    z, dz = np.empty(g.shape), np.empty(g.shape)
    cc.cost_terms(g, d.deadline_s, d.theta_s, d.u_trunc, d.queue_j, d.peak_power_w,
                  d.net_value, xs, xps, live, e1, z, dz)  # fmt: skip
    return z.reshape(shape), dz.reshape(shape)


def expected_cost(gamma: ArrayLike, params: ControllerParams) -> F64:
    """Expected per-slot cost ``Z(gamma)`` of Theorem 2, eq. "expected cost 2".

    ``Z = -I u e^{-x} + Q e_com E1(x) / H`` with ``x = h_min / H``, ``h_min = N0 A / p_max``.
    Exact limits: ``u -> 0`` gives 0, ``x -> inf`` (infeasible deadline, overflowing ``A``,
    tiny ``H``) gives 0, ``I <= 0`` gives 0, ``Q = 0`` gives ``-I u e^{-x}``.

    Args:
        gamma: freezing percentage in ``[0, 1]``; any shape that broadcasts against ``(N,)``
            (e.g. ``(G, 1)`` for a grid of ``G`` values per device).
        params: per-device parameters.

    Returns:
        ``Z`` in cost units (``<= 0``), the broadcast shape; never NaN or inf.
    """
    g = _checked_gamma(gamma)
    return _z_and_dz(g, params._derived)[0]


def expected_cost_derivative(gamma: ArrayLike, params: ControllerParams) -> F64:
    """Analytic ``dZ/dgamma`` of eq. "expected cost 2" (continuous, also at ``Gamma``).

    Same arguments and shapes as :func:`expected_cost`. At ``gamma = 1`` it is the one-sided
    limit ``I Psi(x0)`` with ``x0 = Q N0 ln2 S / (I W H)`` (``I`` when ``Q = 0``).
    """
    g = _checked_gamma(gamma)
    return _z_and_dz(g, params._derived)[1]


def paper_curvature_bound(params: ControllerParams) -> tuple[F64, F64]:
    """The paper's curvature constant ``M`` (eq. "M value"), for diagnostics only.

    Returns ``(M_trunc, M_untrunc)``, shape ``(N,)`` each: the paper's ``M`` for the piece
    ``[0, Gamma]`` (``p_max = P_bar``; only meaningful when ``Gamma > 0``) and for
    ``[max(Gamma, 0), 1]`` (``I G(1) Y(max(Gamma, 0))``). Entries are ``inf`` where the
    formula is undefined (``I <= 0``, ``Q = 0`` for the second, ``tau0 <= theta`` or an
    overflowing exponent at ``gamma = 0``). :func:`solve_gamma` does not rely on these: the
    paper's ``M`` is not an upper bound of ``Z''`` in general (see the tests).
    """
    d = params._derived
    h_mean = params.mean_gain
    n0 = params.noise_w
    pbar = d.peak_power_w
    i_val = d.net_value
    q = d.queue_j
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # derivatives in gamma of h_min(u); d/dgamma = -d/du, d2/dgamma2 = d2/du2

        def kfun(u: F64) -> tuple[F64, F64, F64]:
            dt = d.deadline_s - d.theta_s * u
            k = d.b_s * u / dt
            kp = d.b_s * d.deadline_s / dt**2
            kpp = 2.0 * d.b_s * d.deadline_s * d.theta_s / fmath.power(dt, 3.0)
            return k, kp, kpp

        u_g = np.clip(d.u_trunc, 0.0, 1.0)  # u at max(Gamma, 0)
        # untruncated form h = (Q N0 b / I) phi(k)
        coef = q * n0 * d.b_s / np.where(d.participating, i_val, np.nan)
        h1 = coef  # h_min at gamma = 1 (u = 0): phi(0) = 1
        g1 = fmath.exp(-h1 / h_mean) / h1
        k, kp, kpp = kfun(u_g)
        dh = -coef * _dphi(k) * kp
        d2h = coef * (_d2phi(k) * kp**2 + _dphi(k) * kpp)
        y = -2.0 * dh + u_g * d2h
        m_untrunc = i_val * g1 * y
        # truncated form h = (N0 / P_bar) expm1(k), derivatives at gamma = 0 (u = 1)
        k0, kp0, kpp0 = kfun(np.ones_like(u_g))
        dh0 = -(n0 / pbar) * fmath.exp(k0) * kp0
        d2h0 = (n0 / pbar) * fmath.exp(k0) * (kp0**2 + kpp0)
        k_g, _, _ = kfun(u_g)
        h_gam = (n0 / pbar) * fmath.expm1(k_g)
        m_trunc = fmath.exp(-h_gam / h_mean) * (
            (2.0 * i_val + pbar * q * d.theta_s) * (-dh0) / h_mean + i_val * d2h0 / h_mean
        )
    bad_k0 = (d.deadline_s <= d.theta_s) | ~np.isfinite(k0) | (k0 > _K_MAX)
    m_trunc = np.where(d.participating & ~bad_k0 & np.isfinite(m_trunc), m_trunc, np.inf)
    m_untrunc = np.where(d.participating & (q > 0.0) & np.isfinite(m_untrunc), m_untrunc, np.inf)
    return m_trunc, m_untrunc


# --------------------------------------------------------------------------------------------
# per frame: MM solver
# --------------------------------------------------------------------------------------------


#: Increments of ``x = h_min / H`` above the piece's small-``u`` end used by the start scan.
_X_EXCESS = np.geomspace(1e-12, 100.0, 29)


def _gamma_at_x_excess(excess: F64, lo: F64, hi: F64, d: _Derived) -> F64:
    """``gamma`` in ``[lo, hi]`` where ``x`` exceeds its value at ``gamma = hi`` by ``excess``.

    ``x`` increases with ``u`` on both pieces; each piece uses its own formula, chosen by the
    piece's midpoint. Scan points only: any finite ``gamma`` in the piece is acceptable.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        u_a = 1.0 - hi
        trunc = (1.0 - 0.5 * (lo + hi)) >= d.u_trunc
        dt_a = d.deadline_s - d.theta_s * u_a
        k_a = np.where(dt_a > 0.0, d.b_s * u_a / dt_a, np.inf)
        # each piece (column) by its own formula only
        tc, uc = np.flatnonzero(trunc), np.flatnonzero(~trunc)
        k = np.empty(np.broadcast_shapes(np.shape(excess), lo.shape))
        # truncated piece: x = a expm1(k) -> k = log1p(x / a)
        x_a = d.a_clip[tc] * fmath.expm1(np.minimum(k_a[tc], _K_MAX))
        k[..., tc] = fmath.log1p((x_a + excess) / d.a_clip[tc])
        # untruncated piece: x = x0 phi(k) -> log phi(k) = log(phi(k_a) + excess / x0)
        lp = fmath.log(fmath.exp(_log_phi(np.minimum(k_a[uc], _K_MAX))) + excess / d.x_unclip[uc])
        k[..., uc] = _inv_log_phi(np.clip(np.where(np.isfinite(lp), lp, 0.0), 0.0, _K_MAX))
        u = k * d.deadline_s / (d.b_s + d.theta_s * k)
        g = np.clip(1.0 - u, lo, hi)
    return np.where(np.isfinite(g), g, hi)


class GammaResult(NamedTuple):
    """Per-frame decision of :func:`solve_gamma` (arrays of shape ``(N,)``, never NaN/inf)."""

    gamma: F64  #: optimal freezing percentage in [0, 1]
    cost: F64  #: Z(gamma), cost units (<= 0)
    #: MM iterations (trial points, rejected ones included) summed over the pieces; the start
    #: scan (``n_scan + 29`` points per piece) is not counted
    iterations: NDArray[np.int64]
    p_max_w: F64  #: Prop. 1 threshold for the frame at ``gamma``, W
    Gamma: F64  #: truncation point clipped to [0, 1] (0: never P_bar, 1: always P_bar)
    converged: NDArray[np.bool_]  #: stopping rule met on every piece before ``max_iter``


def _mm_pieces(
    dd: _Derived, lo: F64, hi: F64, tol: float, max_iter: int, n_scan: int
) -> tuple[F64, F64, NDArray[np.int64], NDArray[np.bool_]]:
    """MM on independent pieces ``[lo, hi]`` (one per column of ``dd``); see :func:`solve_gamma`."""
    m = lo.shape[0]
    cols = np.arange(m)
    # ---- start scan: n_scan equispaced points plus points equispaced in x = h_min / H (where
    # the cost varies: a basin can be arbitrarily narrow in gamma when S/W is large or H tiny)
    t = np.linspace(0.0, 1.0, n_scan)[:, None]
    g_uni = lo + (hi - lo) * t
    g_uni[0], g_uni[-1] = lo, hi
    g_x = _gamma_at_x_excess(_X_EXCESS[:, None], lo, hi, dd)
    gs = np.sort(np.concatenate([g_uni, g_x], axis=0), axis=0)[::-1]  # descending: ties -> larger
    zs, dzs = _z_and_dz(gs, dd)
    j = np.argmin(zs, axis=0)
    g = gs[j, cols]
    zg = zs[j, cols]
    dzg = dzs[j, cols]
    # initial curvature: largest |secant of Z'| over the scan intervals adjacent to the start
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sec = np.abs(np.diff(dzs, axis=0) / np.diff(gs, axis=0))
    sec = np.where(np.isfinite(sec), sec, 0.0)
    ns = gs.shape[0]
    sec_l = sec[np.clip(j - 1, 0, ns - 2), cols]
    sec_r = sec[np.clip(j, 0, ns - 2), cols]
    mcur = np.maximum(np.maximum(sec_l, sec_r), np.abs(dzg) / (hi - lo))
    mcur = np.clip(mcur, _TINY, _HUGE)

    iters = np.zeros(m, dtype=np.int64)
    active = np.ones(m, dtype=bool)
    conv = np.zeros(m, dtype=bool)
    for _ in range(max_iter):
        act = np.flatnonzero(active)
        if act.size == 0:
            break
        g_a, z_a, dz_a, m_a = g[act], zg[act], dzg[act], mcur[act]
        with np.errstate(over="ignore"):
            cand = np.clip(g_a - dz_a / m_a, lo[act], hi[act])
        step = cand - g_a
        zc, dzc = _z_and_dz(cand, dd.take(act))
        quad = 0.5 * m_a * step * step
        sur = z_a + dz_a * step + quad  # the surrogate at the trial point
        slack = 8.0 * _EPS * (np.abs(z_a) + np.abs(dz_a * step) + quad)  # rounding allowance
        # accept a trial where the surrogate majorizes Z (the MM step proper) or, failing that,
        # where Z strictly decreases anyway: either way Z(g_{l+1}) <= Z(g_l) (monotone)
        majorized = (zc <= sur + slack) & (zc <= z_a)
        ok = majorized | (zc < z_a)
        iters[act] += 1
        small = np.abs(step) <= np.maximum(tol * (1.0 - g_a), 4.0 * _EPS)
        dz_rel_small = np.abs(zc - z_a) <= tol * np.maximum(np.abs(zc), np.abs(z_a))
        done = np.where(ok, small & dz_rel_small, small)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            secant = (dzc - dz_a) / step  # curvature of Z over the step
            m_need = 2.0 * (zc - z_a - dz_a * step) / (step * step)  # M that would touch Z(g+)
        secant = np.where(np.isfinite(secant), secant, 0.0)
        m_need = np.where(np.isfinite(m_need), m_need, _HUGE)
        # accepted: M <- the secant curvature (a quasi-Newton step next), kept within
        # [M/16, 4M] so that one step across a cliff of Z cannot freeze the iteration; M/2 where
        # the secant is <= 0 (concave: larger steps are safe to try)
        m_acc = np.where(secant > 0.0, np.clip(secant, m_a / 16.0, 4.0 * m_a), 0.5 * m_a)
        # ... and small enough that the next trial step is >= 1e-3 of this one: after crossing a
        # cliff (|Z'| dropping by orders of magnitude) M must follow, or the iteration freezes
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            m_cap = 1e3 * np.abs(dzc) / np.abs(step)
        m_acc = np.where(np.isfinite(m_cap) & (m_cap > 0.0), np.minimum(m_acc, m_cap), m_acc)
        # rejected (backtracking): M <- the curvature the surrogate needed to majorize Z at the
        # trial (or the secant, if larger), kept within [1.25M, 16M]: geometric growth, so the
        # backtracking terminates, and a quadratic interpolation of Z as the next trial
        with np.errstate(over="ignore"):  # clipped to [_TINY, _HUGE] below
            m_rej = np.clip(np.maximum(m_need, secant), 1.25 * m_a, 16.0 * m_a)
        mcur[act] = np.clip(np.where(ok, m_acc, m_rej), _TINY, _HUGE)
        acc = act[ok]
        g[acc], zg[acc], dzg[acc] = cand[ok], zc[ok], dzc[ok]
        conv[act[done]] = True
        active[act[done]] = False
    return g, zg, iters, conv


def solve_gamma(
    params: ControllerParams,
    *,
    tol: float = 1e-9,
    max_iter: int = 200,
    n_scan: int = 17,
) -> GammaResult:
    """Solve the per-frame problem (P4) ``min_{gamma in [0,1]} Z(gamma)`` by MM, per device.

    The paper's MM (eq. "surrogate function"): on each piece ``[0, Gamma]`` (``p_max = P_bar``)
    and ``[Gamma, 1]`` (``p_max < P_bar``), or ``[0, 1]`` when ``Gamma`` is outside ``(0, 1)``,
    iterate ``g <- clip(g - Z'(g) / M, lo, hi)``, the closed-form minimiser over the piece of
    ``Z(g_l) + Z'(g_l)(g - g_l) + M/2 (g - g_l)^2``; keep the better piece. Vectorised: the
    loop runs over iterations, on the (device, piece) pairs still active.

    Curvature ``M`` and safeguard. The paper's ``M`` (eq. "M value") is not an upper bound of
    ``Z''`` on ``[0, Gamma]`` in general, and on ``[Gamma, 1]`` it is valid but typically
    10^3-10^6 times too large (linear convergence at rate ``1 - Z''/M``: thousands of
    iterations). A global bound that is both valid and tight is not available in closed form, so
    ``M`` is adaptive, with the majorization checked where it matters, at the trial point:

    * a trial ``g+`` is accepted if the surrogate majorizes ``Z`` there,
      ``Z(g+) <= Z~(g+ | g_l)`` (then ``Z(g+) <= Z~(g+) <= Z~(g_l) = Z(g_l)``), or if ``Z``
      strictly decreases anyway; so ``Z(g_l)`` never increases (monotone);
    * after an accepted step, ``M`` becomes the secant curvature ``(Z'(g+) - Z'(g))/(g+ - g)``
      (a quasi-Newton step next), kept in ``[M/16, 4M]`` and small enough for the next step to
      be at least 1e-3 of this one (``Z'`` can drop by 10 orders of magnitude across the cliff
      where ``x`` explodes); ``M/2`` where the secant is ``<= 0``;
    * after a rejected trial (backtracking), ``M`` becomes the curvature the surrogate needed to
      pass through ``Z(g+)`` (a quadratic interpolation of ``Z``) or the secant if larger,
      kept in ``[1.25M, 16M]``: geometric growth, so backtracking terminates.
    * initial ``M``: the largest ``|secant of Z'|`` over the start-scan intervals next to the
      start, or ``|Z'| / (piece width)`` if larger.

    Start (the paper leaves ``gamma^0`` open): the best of ``n_scan`` equispaced points per
    piece (endpoints ``0, Gamma, 1`` included, so the result is never worse than them) and 29
    points where ``x`` exceeds its value at the piece's upper end by ``1e-12 .. 100``
    (geometric). The latter matter: where ``x >> 1`` the cost is flat (``Z ~ Z' ~ 0``) and an
    MM started there stalls, while the basin can be arbitrarily narrow in ``gamma`` (large
    ``S / W``, tiny ``H``, ``theta >> tau0``).

    Stopping (scale-free): an accepted step with ``|dgamma| <= tol u`` (relative to
    ``u = 1 - gamma``, the payload fraction; at least 4 ulp) and
    ``|dZ| <= tol max(|Z(g)|, |Z(g+)|)``, or a rejected trial with ``|dgamma| <= tol u``; at
    most ``max_iter`` iterations per piece (then ``converged`` is False; the point is still no
    worse than the start).

    Args:
        params: per-device parameters (``N`` devices).
        tol: relative tolerance on ``u`` and on the cost.
        max_iter: iteration cap per piece.
        n_scan: equispaced start-scan points per piece (``>= 2``).

    Returns:
        :class:`GammaResult`. ``I <= 0``: ``gamma = 1``, cost 0, ``p_max = 0`` (the device quits).
    """
    if not (np.isfinite(tol) and tol > 0.0):
        raise ValueError("tol must be > 0")
    if int(max_iter) < 1:
        raise ValueError("max_iter must be >= 1")
    if int(n_scan) < 2:
        raise ValueError("n_scan must be >= 2")
    d = params._derived
    n = params.n_devices
    part = d.participating
    gam_c = np.clip(1.0 - d.u_trunc, 0.0, 1.0)  # (N,), 0 for I <= 0 (u_trunc = 2)
    # pieces, stacked: [0, N) truncated piece [0, Gamma], [N, 2N) untruncated piece [Gamma, 1],
    # each cut to [min_gamma, 1]
    floor = np.tile(np.clip(params.min_gamma, 0.0, 1.0), 2)
    lo_all = np.maximum(np.concatenate([np.zeros(n), gam_c]), floor)
    hi_all = np.maximum(np.concatenate([gam_c, np.ones(n)]), floor)
    valid = np.concatenate([part & (gam_c > 0.0), part & (gam_c < 1.0)])
    # the working set: pieces of positive width (a zero-width piece is its single endpoint)
    cols = np.flatnonzero(valid & (hi_all > lo_all))
    g_all = hi_all.copy()
    z_all = _z_and_dz(hi_all, d.tile(2))[0]
    iters = np.zeros(2 * n, dtype=np.int64)
    conv = np.ones(2 * n, dtype=bool)
    if cols.size:
        g_ws, z_ws, it_ws, conv_ws = _mm_pieces(
            d.tile(2).take(cols), lo_all[cols], hi_all[cols], tol, int(max_iter), int(n_scan)
        )
        g_all[cols], z_all[cols], iters[cols], conv[cols] = g_ws, z_ws, it_ws, conv_ws
    zg, g = z_all, g_all

    # ---- pick the better piece; ties -> the larger gamma (the untruncated piece lies above)
    z2 = np.where(valid, zg, np.inf).reshape(2, n)
    g2 = g.reshape(2, n)
    pick = (z2[1] <= z2[0]).astype(np.intp)
    idx = np.arange(n)
    gamma = np.where(part, g2[pick, idx], 1.0)
    cost = np.where(part, z2[pick, idx], 0.0)
    it = iters.reshape(2, n).sum(axis=0)
    converged = np.asarray(conv.reshape(2, n).all(axis=0), dtype=bool)
    u = 1.0 - gamma
    pmax = max_tx_power_w(d.queue_j, d.net_value, u, d.deadline_s, d.theta_s, d.peak_power_w)
    return GammaResult(gamma, cost, it, pmax, np.where(part, gam_c, 0.0), converged)
