"""Per-device privacy accounting of heterogeneous Gaussian events, on Google's ``dp-accounting``
(docs/privacy.md, "Accounting").

Each applied update a device takes part in is one Gaussian event of its noise multiplier ``z``
(a noise standard deviation over the L2 sensitivity of what it protects; dimensionless), under
add/remove-one-device adjacency. A device's epsilon depends on its own events only, and not on
their order (beyond rounding in the last bits).

Two accountants (``kind``):

* ``"rdp"``: Renyi DP (Mironov 2017). RDP is additive, so the state is one ``(N, orders)``
  float64 array at :data:`RDP_ORDERS` (dp-accounting's default grid); a Gaussian event adds
  ``alpha / (2 z^2)``, a Poisson-subsampled one dp-accounting's own RDP of the subsampled Gaussian
  (cached per ``(q, z)``). Epsilon at ``delta`` from dp-accounting's conversion
  (:func:`dp_accounting.rdp.compute_epsilon`, the one its ``RdpAccountant`` uses).
* ``"pld"``: privacy loss distributions (Koskela et al. 2020; Doroshenko et al. 2022). The
  unsampled Gaussian events of a device compose exactly into one Gaussian of
  ``z_eff = (sum_i z_i^-2)^(-1/2)`` (the privacy loss of a Gaussian of ``z`` is N(mu, 2 mu) with
  ``mu = 1 / (2 z^2)``, and independent normal losses add), whose epsilon is the analytic
  Gaussian mechanism's (Balle and Wang 2018; :func:`dp_accounting.get_epsilon_gaussian`: no
  discretisation error), so the state keeps ``sum_i z_i^-2`` per device (an ``(N,)`` array: a
  device's multipliers may differ at every event, as over the air). Poisson-subsampled events are
  kept as a per-device histogram ``{(q, z): count}`` (exact floats) and get dp-accounting's PLD
  of the subsampled Gaussian (connect-the-dots, pessimistic, value discretisation
  :data:`PLD_VALUE_DISCRETIZATION`), self-composed per entry and composed in the histogram's
  sorted order, so that a device's epsilon is a function of its state alone: the same after a
  checkpoint's reload, bit for bit.

Amplification by subsampling (``sampling_probability = q``) composes the Poisson-subsampled
Gaussian ``PoissonSampledDpEvent(q, GaussianDpEvent(z))`` for every device of the run in every
server step: a device not picked spent the sampled event all the same, so the caller passes all
devices. This assumes that each device is in a step independently with probability ``q``
(uniform selection), that the selection depends neither on any device's data nor on the channel,
and that who took part is hidden from whoever sees the models, so that only the noise the server
adds to the aggregate (central noise) protects it (docs/decisions.md).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import dp_accounting
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from numpy.typing import ArrayLike, NDArray

from .. import fmath

F64 = NDArray[np.float64]
AccountantKind = Literal["rdp", "pld"]

#: The RDP orders alpha: dp-accounting's default grid (1.1 to 10.9 by 0.1, 11 to 63, 128, 256,
#: 512, 1024), the one its ``RdpAccountant`` uses, chosen there to cover the Gaussian mechanism's
#: optimal orders for epsilon from about 0.01 to several hundred.
RDP_ORDERS: F64 = np.asarray(rdp_lib.DEFAULT_RDP_ORDERS, dtype=np.float64)

#: The PLD's value discretisation interval (privacy loss units, nats) for subsampled events: each
#: composed event's loss is rounded up by less than this (pessimistic, so epsilon is an upper
#: bound). dp-accounting's default is 1e-4; 1e-3 is ten times faster and moved epsilon by 0.4 %
#: for DP-SGD's MNIST setting (q = 256/60000, z = 1.1, 14,063 steps, docs/privacy.md).
PLD_VALUE_DISCRETIZATION = 1e-3

_KINDS = ("rdp", "pld")
_STATE_VERSION = 1


def check_sampling_probability(sampling_probability: float | None) -> float | None:
    """``q`` validated; None for no sampling (``q = 1`` is the plain Gaussian)."""
    if sampling_probability is None:
        return None
    q = float(sampling_probability)
    if not 0.0 < q <= 1.0:
        raise ValueError(f"sampling_probability must be in (0, 1], got {q!r}")
    return None if q == 1.0 else q


def _check_multipliers(multipliers: ArrayLike, size: int) -> F64:
    z = np.asarray(multipliers, dtype=np.float64).reshape(-1)
    if z.size == 1 and size != 1:
        z = np.full(size, float(z[0]))
    if z.shape != (size,):
        raise ValueError(f"multipliers must have one value per device id ({size}), got {z.size}")
    if np.isnan(z).any() or (z < 0.0).any():
        raise ValueError("noise multipliers must be >= 0 (inf: an event that releases nothing)")
    return z


#: Entries the module's caches keep, cleared when full (a cache never changes a value): the
#: subsampled RDP of a ``(q, z)`` (156 floats) and its PLD (about 10^4 to 10^5 floats at
#: 1e-3), one per distinct multiplier of a run's devices.
_RDP_CACHE_SIZE = 4096
_PLD_CACHE_SIZE = 256
_SAMPLED_RDP: dict[tuple[float, float], F64] = {}


def _sampled_rdp(q: float, z: float) -> F64:
    """dp-accounting's RDP at :data:`RDP_ORDERS` of one Poisson-subsampled Gaussian event."""
    key = (q, z)
    rdp = _SAMPLED_RDP.get(key)
    if rdp is None:
        acc = dp_accounting.rdp.RdpAccountant(orders=list(RDP_ORDERS))
        acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)))
        rdp = acc.rdp
        rdp.setflags(write=False)
        if len(_SAMPLED_RDP) >= _RDP_CACHE_SIZE:
            _SAMPLED_RDP.clear()
        _SAMPLED_RDP[key] = rdp
    return rdp


def event_rdp(multiplier: float, sampling_probability: float | None = None) -> F64:
    """The RDP at :data:`RDP_ORDERS` of one Gaussian event of noise multiplier ``multiplier``
    (Poisson-subsampled with probability ``sampling_probability`` when given): ``alpha / (2 z^2)``
    unsampled; inf for ``z = 0``, 0 for ``z = inf``."""
    z = float(multiplier)
    q = check_sampling_probability(sampling_probability)
    if math.isinf(z):
        return np.zeros_like(RDP_ORDERS)
    if q is None:
        with np.errstate(divide="ignore"):
            return np.asarray(RDP_ORDERS / (2.0 * z * z), dtype=np.float64)
    if z == 0.0:
        return np.full_like(RDP_ORDERS, np.inf)
    return _sampled_rdp(q, z).copy()


def rdp_epsilons(rdp: ArrayLike, delta: float) -> F64:
    """``(k,)`` epsilon at ``delta`` of each row of ``rdp`` (``(k, orders)`` RDP values at
    :data:`RDP_ORDERS`): dp-accounting's conversion (:func:`dp_accounting.rdp.compute_epsilon`,
    the one its ``RdpAccountant.get_epsilon`` uses: Canonne, Kamath and Steinke 2020, Prop. 12),
    vectorised over the rows with its per-order terms computed as it computes them."""
    r = np.asarray(rdp, dtype=np.float64).reshape(-1, RDP_ORDERS.size)
    with np.errstate(invalid="ignore"):
        eps = (r + _LOG1P_TERM) - _log_delta_term(delta)
        # the KL bound gives 0 where delta^2 + expm1(-r) > 0; negative RDP (numerical) gives 0
        eps = np.where((delta * delta + fmath.expm1(-r) > 0.0) | (r < 0.0), 0.0, eps)
    eps = np.where(RDP_ORDERS > 1.01, eps, np.inf)
    return np.maximum(eps.min(axis=1), 0.0)


def _log_delta_term(delta: float) -> F64:
    """``log(delta a) / (a - 1)`` per order, with Python's math as dp-accounting computes it."""
    return np.array([math.log(delta * a) / (a - 1.0) for a in RDP_ORDERS.tolist()])


#: ``log1p(-1 / a)`` per order, with Python's math as dp-accounting computes it.
_LOG1P_TERM: F64 = np.array([math.log1p(-1.0 / a) for a in RDP_ORDERS.tolist()])


def rdp_epsilon(rdp: ArrayLike, delta: float) -> float:
    """Epsilon at ``delta`` of one device's RDP values at :data:`RDP_ORDERS`
    (:func:`rdp_epsilons`)."""
    return float(rdp_epsilons(rdp, delta)[0])


#: A device's subsampled events as a canonical key: ``((q, z, count), ...)`` sorted.
SampledKey = tuple[tuple[float, float, int], ...]

_BASE_PLD: dict[tuple[float, float, float], Any] = {}


def _base_pld(q: float, z: float, interval: float) -> Any:
    key = (q, z, interval)
    pld = _BASE_PLD.get(key)
    if pld is None:
        pld = pld_lib.from_gaussian_mechanism(
            standard_deviation=z, sampling_prob=q, value_discretization_interval=interval
        )
        if len(_BASE_PLD) >= _PLD_CACHE_SIZE:
            _BASE_PLD.clear()
        _BASE_PLD[key] = pld
    return pld


def pld_epsilon(
    inverse_variance: float,
    sampled: SampledKey,
    delta: float,
    interval: float = PLD_VALUE_DISCRETIZATION,
) -> float:
    """Epsilon at ``delta`` of a device whose unsampled Gaussian events sum to
    ``inverse_variance`` ``= sum_i z_i^-2`` (one Gaussian of ``z_eff = inverse_variance^-1/2``,
    exact; inf after an event without noise) and whose subsampled events are ``sampled``
    (``(q, z, count)`` each): the Gaussian's analytic epsilon alone, else its PLD composed with
    dp-accounting's PLD of each subsampled entry, self-composed, in ``sampled``'s order."""
    parts = [(q, z, c) for q, z, c in sampled if c > 0 and not math.isinf(z)]
    if math.isinf(inverse_variance) or any(z == 0.0 for _, z, _ in parts):
        return math.inf
    if not parts:
        if inverse_variance <= 0.0:
            return 0.0
        sigma = 1.0 / math.sqrt(inverse_variance)
        return float(dp_accounting.get_epsilon_gaussian(sigma, delta))
    pld: Any = None
    if inverse_variance > 0.0:
        pld = pld_lib.from_gaussian_mechanism(
            standard_deviation=1.0 / math.sqrt(inverse_variance),
            value_discretization_interval=interval,
        )
    for q, z, count in parts:
        part = _base_pld(q, z, interval).self_compose(count)
        pld = part if pld is None else pld.compose(part)
    return float(pld.get_epsilon_for_delta(delta))


def _sampled_key(sampled: dict[tuple[float, float], int]) -> SampledKey:
    return tuple((q, z, c) for (q, z), c in sorted(sampled.items()))


class DeviceAccountant:
    """The privacy each of ``num_devices`` devices has spent, at ``delta`` (module docstring).

    Args:
        num_devices: ``N``.
        delta: the ``delta`` of (epsilon, delta)-DP each device's epsilon is for, in (0, 1).
        kind: ``"rdp"`` or ``"pld"``.
    """

    def __init__(self, num_devices: int, delta: float, kind: AccountantKind = "rdp") -> None:
        if int(num_devices) != num_devices or num_devices < 1:
            raise ValueError(f"num_devices must be an integer >= 1, got {num_devices!r}")
        if not 0.0 < float(delta) < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
        self.num_devices = int(num_devices)
        self.delta = float(delta)
        self.kind: AccountantKind = kind
        self._rdp = np.zeros((self.num_devices, RDP_ORDERS.size)) if kind == "rdp" else None
        #: pld: each device's sum of z^-2 over its unsampled events, and its subsampled events
        self._inv_var = np.zeros(self.num_devices)
        self._sampled: list[dict[tuple[float, float], int]] = (
            [{} for _ in range(self.num_devices)] if kind == "pld" else []
        )
        self._eps = np.zeros(self.num_devices)
        self._dirty = np.zeros(self.num_devices, dtype=bool)
        self._pld_cache: dict[tuple[float, SampledKey], float] = {}

    # -- composing -----------------------------------------------------------------------

    def _ids(self, device_ids: ArrayLike) -> NDArray[np.int64]:
        ids = np.asarray(device_ids).reshape(-1)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise ValueError("device_ids must be integers")
        ids = ids.astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_devices):
            raise ValueError(f"device_ids must be in [0, {self.num_devices}), got {ids.tolist()}")
        return ids

    def compose(
        self,
        device_ids: ArrayLike,
        multipliers: ArrayLike,
        sampling_probability: float | None = None,
    ) -> None:
        """One Gaussian event for each device in ``device_ids`` (``(k,)`` int, each at most once
        per call) of its noise multiplier in ``multipliers`` (``(k,)``, or one for all; 0: no
        noise, epsilon inf; inf: nothing released), Poisson-subsampled with probability
        ``sampling_probability`` when given (module docstring: what that assumes)."""
        ids = self._ids(device_ids)
        z = _check_multipliers(multipliers, ids.size)
        q = check_sampling_probability(sampling_probability)
        if ids.size == 0:
            return
        if np.unique(ids).size != ids.size:
            raise ValueError("device_ids must not repeat within one compose (one event each)")
        if self._rdp is not None:
            if q is None:
                with np.errstate(divide="ignore"):
                    self._rdp[ids] += RDP_ORDERS[None, :] / (2.0 * z * z)[:, None]
            else:
                for zi in np.unique(z).tolist():
                    self._rdp[ids[z == zi]] += event_rdp(zi, q)
        elif q is None:
            with np.errstate(divide="ignore"):
                self._inv_var[ids] += 1.0 / (z * z)
        else:
            for i, zi in zip(ids.tolist(), z.tolist(), strict=True):
                sampled = self._sampled[i]
                sampled[(q, zi)] = sampled.get((q, zi), 0) + 1
        self._dirty[ids] = True

    # -- epsilon ---------------------------------------------------------------------------

    def _pld_eps(self, inverse_variance: float, sampled: SampledKey) -> float:
        key = (inverse_variance, sampled)
        eps = self._pld_cache.get(key)
        if eps is None:
            eps = pld_epsilon(inverse_variance, sampled, self.delta)
            if len(self._pld_cache) > 65536:
                self._pld_cache.clear()
            self._pld_cache[key] = eps
        return eps

    def epsilon(self) -> F64:
        """``(N,)`` each device's epsilon at ``delta`` so far (0: never composed; inf: an event
        without noise)."""
        dirty = np.flatnonzero(self._dirty)
        if dirty.size:
            if self._rdp is not None:
                self._eps[dirty] = rdp_epsilons(self._rdp[dirty], self.delta)
            else:
                for i in dirty.tolist():
                    sampled = _sampled_key(self._sampled[i])
                    self._eps[i] = self._pld_eps(float(self._inv_var[i]), sampled)
            self._dirty[dirty] = False
        return self._eps.copy()

    def epsilon_if(
        self,
        device_ids: ArrayLike,
        multiplier: float,
        sampling_probability: float | None = None,
    ) -> F64:
        """``(k,)`` each device's epsilon after one more event of ``multiplier`` (sampled with
        ``sampling_probability`` when given), the state unchanged (the budget's check)."""
        ids = self._ids(device_ids)
        z = float(_check_multipliers([multiplier], 1)[0])
        q = check_sampling_probability(sampling_probability)
        if self._rdp is not None:
            return rdp_epsilons(self._rdp[ids] + event_rdp(z, q), self.delta)
        out = np.empty(ids.size)
        for j, i in enumerate(ids.tolist()):
            inv_var = float(self._inv_var[i])
            sampled = dict(self._sampled[i])
            if q is None:
                with np.errstate(divide="ignore"):
                    inv_var = float(np.float64(inv_var) + 1.0 / np.float64(z * z))
            else:
                sampled[(q, z)] = sampled.get((q, z), 0) + 1
            out[j] = self._pld_eps(inv_var, _sampled_key(sampled))
        return out

    # -- checkpoint ------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The state (numpy arrays and builtins only)."""
        state: dict[str, Any] = {
            "version": _STATE_VERSION,
            "kind": self.kind,
            "num_devices": self.num_devices,
            "delta": self.delta,
        }
        if self._rdp is not None:
            state["orders"] = RDP_ORDERS.copy()
            state["rdp"] = self._rdp.copy()
        else:
            state["pld_inverse_variance"] = self._inv_var.copy()
            rows = [
                (i, q, z, c)
                for i, sampled in enumerate(self._sampled)
                for (q, z), c in sorted(sampled.items())
            ]
            state["pld_device"] = np.array([r[0] for r in rows], dtype=np.int64)
            state["pld_sampling_probability"] = np.array([r[1] for r in rows], dtype=np.float64)
            state["pld_multiplier"] = np.array([r[2] for r in rows], dtype=np.float64)
            state["pld_count"] = np.array([r[3] for r in rows], dtype=np.int64)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` of an accountant of the same ``num_devices``,
        ``delta`` and ``kind`` (else ValueError, the state unchanged)."""
        for name, mine in (
            ("kind", self.kind),
            ("num_devices", self.num_devices),
            ("delta", self.delta),
        ):
            theirs = state.get(name)
            if theirs != mine:
                raise ValueError(
                    f"privacy accountant state is for {name} = {theirs!r}, this run has "
                    f"{mine!r}: resume with the scenario the checkpoint was written by"
                )
        if state.get("version") != _STATE_VERSION:
            raise ValueError(
                f"privacy accountant state version {state.get('version')!r} is not "
                f"{_STATE_VERSION}: the checkpoint was written by another wflsim"
            )
        if self._rdp is not None:
            orders = np.asarray(state["orders"], dtype=np.float64)
            rdp = np.asarray(state["rdp"], dtype=np.float64)
            if not np.array_equal(orders, RDP_ORDERS) or rdp.shape != self._rdp.shape:
                raise ValueError(
                    "privacy accountant state has other RDP orders: the checkpoint was written "
                    "by another wflsim"
                )
            self._rdp = rdp.copy()
        else:
            inv_var = np.asarray(state["pld_inverse_variance"], dtype=np.float64)
            if inv_var.shape != self._inv_var.shape:
                raise ValueError(
                    "privacy accountant state has another number of devices: the checkpoint "
                    "was written by another wflsim"
                )
            hists: list[dict[tuple[float, float], int]] = [{} for _ in range(self.num_devices)]
            for i, q, z, c in zip(
                np.asarray(state["pld_device"]).tolist(),
                np.asarray(state["pld_sampling_probability"]).tolist(),
                np.asarray(state["pld_multiplier"]).tolist(),
                np.asarray(state["pld_count"]).tolist(),
                strict=True,
            ):
                hists[int(i)][(float(q), float(z))] = int(c)
            self._inv_var = inv_var.copy()
            self._sampled = hists
        self._dirty[:] = True
