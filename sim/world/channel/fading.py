"""Small-scale fading: the unit-mean power gain ``g`` of ``h = g H`` and its complex coefficient.

A fading model is a *family* (the marginal law of one slot: Rayleigh, Rician, Nakagami-m) on a
*time structure* (independent slots, or first-order Gauss-Markov). Every family is a fixed map
of one unit complex Gaussian ``x ~ CN(0, 1)`` per device and slot:

* Rayleigh: ``c = x``, ``g = |x|^2 ~ Exp(1)`` (the paper's, Theorem 2's assumption);
* Rician, ``K = 10^(k_db/10)``: ``c = sqrt(K/(K+1)) + x / sqrt(K+1)`` (a fixed line-of-sight
  part plus a diffuse part), ``g = |c|^2``, a scaled noncentral chi-square with 2 degrees of
  freedom: ``2 (K+1) g ~ chi'^2_2(2K)``;
* Nakagami-m: ``g = F_Gamma(m, 1/m)^-1(1 - exp(-|x|^2))`` (quantile coupling with the Rayleigh
  power, so ``g ~ Gamma(m, 1/m)``; ``m = 1`` is Rayleigh), ``c = sqrt(g) x / |x|``.

Independent slots draw ``x_t`` afresh (keyed by ``(device, slot)``, stream ``"fading"``, draw 0:
``x = sqrt(E) exp(2 pi i U2)`` with ``E = -log(1 - U1)``, so Rayleigh's ``g`` is exactly the
paper's keyed ``Exp(1)`` draw). Gauss-Markov fading evolves
``x_t = rho x_{t-1} + sqrt(1 - rho^2) w_t`` (``w_t`` the same keyed draws, ``x_0 = w_0``) with
``rho = J0(2 pi f_d tau_0)`` (Clarke / Jakes), ``f_d = v f_c / c`` from each device's speed at
the frame start and ``tau_0`` the nominal slot length: the marginal law of every slot is the
family's, the lag-one correlation of ``x`` is ``J0(2 pi f_d tau_0)`` and the lag-``k``
correlation ``rho^k``. A device that stands still has ``f_d = 0``, ``rho = 1``: its channel is
frozen at its first draw for as long as it does not move.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from ... import fmath
from ...rng import KeyedStream, gamma_from_exponential, gamma_from_uniform
from .base import C128, F64, FadingModel, SmallScale

#: Speed of light in vacuum, m/s (for the Doppler shift).
SPEED_OF_LIGHT_MPS = 299_792_458.0
#: Keyed draw index of the slot innovations ``w_t`` (stream ``"fading"``).
_DRAW_SLOT = 0
#: Keyed draw index of the innovations of the slots before slot 0 (outdated CSI at the start).
_DRAW_HISTORY = 1


def doppler_hz(speed_mps: ArrayLike, carrier_hz: float) -> F64:
    """Maximum Doppler shift ``f_d = v f_c / c``, Hz, shape of ``speed_mps`` (m/s)."""
    return np.asarray(speed_mps, dtype=np.float64) * (float(carrier_hz) / SPEED_OF_LIGHT_MPS)


def jakes_correlation(doppler_hz: ArrayLike, lag_s: float) -> F64:
    """Clarke / Jakes autocorrelation of the complex fading at lag ``lag_s`` (s):
    ``J0(2 pi f_d lag)``, shape of ``doppler_hz`` (Hz). In ``[-0.403, 1]``."""
    return np.asarray(special.j0(2.0 * np.pi * np.asarray(doppler_hz, dtype=np.float64) * lag_s))


def gauss_markov_step(previous: C128, rho: F64, innovation: C128) -> C128:
    """``x_t = rho x_{t-1} + sqrt(1 - rho^2) w_t``: keeps ``CN(0, 1)`` stationary, ``(N,)``."""
    return rho * previous + np.sqrt(np.maximum(1.0 - rho * rho, 0.0)) * innovation


def _phasor(u2: F64) -> C128:
    theta = (2.0 * np.pi) * np.asarray(u2, dtype=np.float64)
    out = np.empty(theta.shape, dtype=np.complex128)
    out.real = fmath.cos(theta)
    out.imag = fmath.sin(theta)
    return out


class Family(ABC):
    """The marginal law of one slot's small-scale fading, as a map of ``x ~ CN(0, 1)``."""

    name: str
    #: whether the power is Theorem 2's ``Exp(1)``
    rayleigh: bool
    #: whether the power needs the phase of ``x`` (not only ``|x|^2``)
    needs_phase: bool = False
    #: ``(a, b)`` when ``c = a + b x`` (None: ``c`` is not an affine map of ``x``)
    affine: tuple[float, float] | None = None

    @abstractmethod
    def from_uniforms(self, u1: F64, u2: F64 | None, coefficient: bool) -> SmallScale:
        """The fading of ``x = sqrt(-log(1 - u1)) exp(2 pi i u2)`` (``u2`` only when
        :attr:`needs_phase` or ``coefficient``)."""

    @abstractmethod
    def from_gaussian(self, x: C128, coefficient: bool) -> SmallScale:
        """The fading of ``x`` (``(N,)`` complex, ``CN(0, 1)`` marginally)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """``{"model": ..., parameters}``."""


class RayleighFamily(Family):
    """``c = x``, ``g = |x|^2 ~ Exp(1)``."""

    name = "rayleigh"
    rayleigh = True
    affine = (0.0, 1.0)

    def from_uniforms(self, u1: F64, u2: F64 | None, coefficient: bool) -> SmallScale:
        """``g = -log(1 - u1)``: exactly :meth:`KeyedStream.standard_exponential`."""
        g = -fmath.log1p(-u1)
        c = np.sqrt(g) * _phasor(u2) if coefficient and u2 is not None else None
        return SmallScale(g, c)

    def from_gaussian(self, x: C128, coefficient: bool) -> SmallScale:
        """``g = |x|^2``."""
        return SmallScale(x.real * x.real + x.imag * x.imag, x if coefficient else None)

    def describe(self) -> dict[str, Any]:
        """``{"model": "rayleigh"}``."""
        return {"model": "rayleigh"}


class RicianFamily(Family):
    """``c = sqrt(K/(K+1)) + x / sqrt(K+1)``, ``g = |c|^2`` (unit mean).

    Args:
        k_db: the K factor (power of the line-of-sight part over the diffuse part), dB.
    """

    name = "rician"
    rayleigh = False
    needs_phase = True

    def __init__(self, k_db: float) -> None:
        self.k_db = float(k_db)
        k = 10.0 ** (self.k_db / 10.0)
        self.k = k
        self._los = float(np.sqrt(k / (k + 1.0)))
        self._diffuse = float(np.sqrt(1.0 / (k + 1.0)))
        self.affine = (self._los, self._diffuse)

    def from_uniforms(self, u1: F64, u2: F64 | None, coefficient: bool) -> SmallScale:
        """The fading of the keyed ``x`` (see :meth:`from_gaussian`)."""
        assert u2 is not None
        return self.from_gaussian(np.sqrt(-fmath.log1p(-u1)) * _phasor(u2), coefficient)

    def from_gaussian(self, x: C128, coefficient: bool) -> SmallScale:
        """``c = sqrt(K/(K+1)) + x / sqrt(K+1)``, ``g = |c|^2``."""
        c = self._los + self._diffuse * x
        return SmallScale(c.real * c.real + c.imag * c.imag, c if coefficient else None)

    def describe(self) -> dict[str, Any]:
        """``{"model": "rician", "k_db": ...}``."""
        return {"model": "rician", "k_db": self.k_db}


class NakagamiFamily(Family):
    """``g ~ Gamma(m, 1/m)`` by quantile coupling with ``|x|^2``; ``c = sqrt(g) x / |x|``.

    Args:
        m: the Nakagami shape, ``>= 1/2``.
    """

    name = "nakagami"

    def __init__(self, m: float) -> None:
        if not 0.5 <= m < float("inf"):
            raise ValueError(f"Nakagami m must be >= 1/2, got {m}")
        self.m = float(m)
        self.rayleigh = self.m == 1.0
        # m = 1: g = |x|^2 and c = x (up to rounding); otherwise g is a nonlinear map of |x|^2
        self.affine = (0.0, 1.0) if self.rayleigh else None

    def from_uniforms(self, u1: F64, u2: F64 | None, coefficient: bool) -> SmallScale:
        """``g = P^-1(m, u1) / m``: :meth:`KeyedStream.gamma` of the same uniform over ``m``."""
        g = gamma_from_uniform(u1, self.m) / self.m
        c = np.sqrt(g) * _phasor(u2) if coefficient and u2 is not None else None
        return SmallScale(g, c)

    def from_gaussian(self, x: C128, coefficient: bool) -> SmallScale:
        """``g = F_Gamma(m, 1/m)^-1(1 - exp(-|x|^2))``."""
        e = x.real * x.real + x.imag * x.imag
        g = gamma_from_exponential(e, self.m) / self.m
        c = None
        if coefficient:
            mod = np.sqrt(e)
            phase = np.where(mod > 0.0, x / np.where(mod > 0.0, mod, 1.0), 1.0 + 0.0j)
            c = np.sqrt(g) * phase
        return SmallScale(g, c)

    def describe(self) -> dict[str, Any]:
        """``{"model": "nakagami", "m": ...}``."""
        return {"model": "nakagami", "m": self.m}


class Fading(FadingModel):
    """A fading family, i.i.d. per slot or time-correlated (first-order Gauss-Markov).

    Args:
        family: the marginal law of one slot.
        stream: the run's keyed ``"fading"`` stream.
        num_devices: ``N``.
        carrier_ghz: carrier frequency of the Doppler shift, GHz; None: i.i.d. slots.
        slot_s: time between two slots for the correlation (the nominal slot length
            ``tau_0``), s; needed with ``carrier_ghz``.
    """

    def __init__(
        self,
        family: Family,
        stream: KeyedStream,
        num_devices: int,
        *,
        carrier_ghz: float | None = None,
        slot_s: float | None = None,
    ) -> None:
        self.family = family
        self.stream = stream
        self.num_devices = int(num_devices)
        self._ids = np.arange(self.num_devices, dtype=np.int64)
        self.rayleigh = family.rayleigh
        self.correlated = carrier_ghz is not None
        if self.correlated and not (slot_s is not None and slot_s > 0.0):
            raise ValueError("time-correlated fading needs the slot length slot_s > 0")
        self.carrier_ghz = carrier_ghz
        self.slot_s = slot_s
        self._x: C128 | None = None  # Gauss-Markov: x of the last slot drawn
        self._next_slot = 0
        self._rho_cache: tuple[F64, F64] | None = None  # (speeds, rho) of the current frame

    def correlation(self, speed_mps: F64) -> F64:
        """Per-slot correlation ``rho = J0(2 pi v f_c / c tau_0)`` of each device, ``(N,)``
        (0 for i.i.d. slots)."""
        if not self.correlated:
            return np.zeros(self.num_devices)
        cache = self._rho_cache
        if cache is not None and cache[0] is speed_mps:  # the frame's speeds, slot after slot
            return cache[1]
        assert self.carrier_ghz is not None and self.slot_s is not None
        rho = jakes_correlation(doppler_hz(speed_mps, self.carrier_ghz * 1e9), self.slot_s)
        self._rho_cache = (speed_mps, rho)
        return rho

    def coefficient_map(self) -> tuple[float, float] | None:
        """The family's ``(a, b)`` of ``c = a + b x`` (None for Nakagami-m with ``m != 1``)."""
        return self.family.affine

    def lag_correlation(self, speed_mps: F64, lag: int) -> F64:
        """``E[x_t conj(x_{t-lag})]``: 1 at lag 0; ``rho^lag`` at the frame's ``rho`` for
        Gauss-Markov fading (exact while the speeds stay those of the frame start), 0 for
        independent slots."""
        if lag == 0 or not self.correlated:
            return super().lag_correlation(speed_mps, lag)
        return np.asarray(fmath.power(self.correlation(speed_mps), lag), dtype=np.float64)

    def draw(self, slot: int, speed_mps: F64, *, coefficient: bool = False) -> SmallScale:
        """The fading of ``slot`` (slots in order for the Gauss-Markov model); ``speed_mps`` is
        the frame's (read-only: the correlation is computed once per frame's array)."""
        if not self.correlated:
            subs = (0, 1) if coefficient or self.family.needs_phase else (0,)
            u = self.stream.uniforms(self._ids, slot, _DRAW_SLOT, subs)
            return self.family.from_uniforms(u[0], u[1] if len(subs) > 1 else None, coefficient)
        if slot != self._next_slot:
            raise RuntimeError(
                f"Gauss-Markov fading is drawn slot after slot: expected slot {self._next_slot}, "
                f"got {slot}"
            )
        w = self.stream.standard_complex_normal(self._ids, slot, _DRAW_SLOT)
        x = w if self._x is None else gauss_markov_step(self._x, self.correlation(speed_mps), w)
        self._x = x
        self._next_slot = slot + 1
        return self.family.from_gaussian(x, coefficient)

    def history(self, depth: int, speed_mps: F64) -> C128:
        """Coefficients of slots ``-1 .. -depth`` (row ``j - 1`` is slot ``-j``): independent
        draws for i.i.d. slots; for Gauss-Markov the process run backwards from slot 0 (a
        stationary Gaussian AR(1) is time-reversible, so ``x_{-j} = rho x_{-j+1} +
        sqrt(1 - rho^2) w'_j`` has the right joint law with slot 0). ``w'_j`` is keyed by
        ``(device, j - 1)`` with its own draw index."""
        out = np.empty((depth, self.num_devices), dtype=np.complex128)
        rho = self.correlation(speed_mps)
        x = self._x
        for j in range(1, depth + 1):
            w = self.stream.standard_complex_normal(self._ids, j - 1, _DRAW_HISTORY)
            if self.correlated:
                if x is None:
                    raise RuntimeError("history() needs slot 0 to have been drawn")
                x = gauss_markov_step(x, rho, w)
                xj = x
            else:
                xj = w
            c = self.family.from_gaussian(xj, True).coefficient
            assert c is not None
            out[j - 1] = c
        return out

    def describe(self) -> dict[str, Any]:
        """The family and the time structure."""
        corr: dict[str, Any] | str = "iid"
        if self.correlated:
            corr = {
                "model": "gauss_markov",
                "carrier_ghz": self.carrier_ghz,
                "slot_s": self.slot_s,
                "rho": "J0(2 pi v f_c / c slot_s) per device and frame, v its speed at the frame "
                "start (static devices: rho = 1, a constant channel)",
            }
        return {**self.family.describe(), "correlation": corr}

    def state_dict(self) -> dict[str, Any]:
        """Gauss-Markov: the last slot's ``x`` and the next slot; i.i.d.: nothing."""
        if not self.correlated:
            return {}
        return {
            "x": None if self._x is None else self._x.copy(),
            "next_slot": self._next_slot,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        if not self.correlated:
            if state:
                raise ValueError(f"i.i.d. fading has no state, got keys {sorted(state)}")
            return
        x = state["x"]
        if x is not None:
            x = np.array(x, dtype=np.complex128)
            if x.shape != (self.num_devices,):
                raise ValueError(
                    f"fading state is for {x.shape[0]} devices, this run has {self.num_devices}"
                )
        self._x = x
        self._next_slot = int(state["next_slot"])


class NoFading(FadingModel):
    """No small-scale fading: ``g = 1``, ``c = 1``, ``h = H`` in every slot (not the
    controller's Rayleigh assumption: the controller still plans as if ``h ~ Exp(mean H)``)."""

    rayleigh = False
    correlated = False

    def __init__(self, num_devices: int) -> None:
        self.num_devices = int(num_devices)

    def coefficient_map(self) -> tuple[float, float]:
        """``c = 1``: ``(a, b) = (1, 0)``."""
        return (1.0, 0.0)

    def draw(self, slot: int, speed_mps: F64, *, coefficient: bool = False) -> SmallScale:
        """Ones, ``(N,)``."""
        ones = np.ones(self.num_devices)
        return SmallScale(ones, ones.astype(np.complex128) if coefficient else None)

    def history(self, depth: int, speed_mps: F64) -> C128:
        """Ones, ``(depth, N)``."""
        return np.ones((depth, self.num_devices), dtype=np.complex128)

    def describe(self) -> dict[str, Any]:
        """``{"model": "none"}``."""
        return {"model": "none"}

    def state_dict(self) -> dict[str, Any]:
        """No state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""
