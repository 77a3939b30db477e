"""Imperfect channel state information: what the scheme sees is not what the world applies.

The scheme decides on ``h_hat = H |c_hat|^2``, the world applies ``h = H |c_t|^2``, with ``c``
the small-scale complex coefficient of the fading model
(:class:`~wflsim.sim.world.channel.base.SmallScale`) and

    ``c_hat = sqrt(1 - e2) c_{t-D} + sqrt(e2) w_t``,  ``w_t ~ CN(0, 1)``,

``e2`` the normalised estimation-error variance and ``D`` the CSI delay in slots. For unit-power
``c`` the estimate has unit power too, ``E[c_t conj(c_hat)] = sqrt(1 - e2) E[c_t conj(c_{t-D})]``,
and for Rayleigh fading without delay the powers ``|c|^2`` and ``|c_hat|^2`` have correlation
``1 - e2``. The delay makes the estimate as old as the fading model says it is: with i.i.d.
slots the outdated coefficient is independent of the current one, with Gauss-Markov fading its
correlation is ``rho^D``. The large-scale gain ``H`` (path loss and shadowing) is known exactly:
it changes per frame and is averaged over many measurements. Errors ``w_t`` are keyed by
``(device, slot)`` (stream ``"csi"``). Before slot ``D`` the delayed coefficients are those of
slots ``-D .. -1``, drawn from the fading model's own law
(:meth:`~wflsim.sim.world.channel.base.FadingModel.history`).

**What the estimate says about the channel** (:class:`CsiPosterior`, used by a scheme's CSI
margin, :mod:`wflsim.sim.schemes.csi_margin`). Where the fading coefficient is an affine map of a
unit complex Gaussian, ``c = a + b x`` with ``x ~ CN(0, 1)`` (Rayleigh: ``(0, 1)``; Rician with
factor ``K``: ``(sqrt(K/(K+1)), 1/sqrt(K+1))``; no fading: ``(1, 0)``), and ``x`` has the lag
correlation ``kappa = E[x_t conj(x_{t-D})]`` (1 for ``D = 0``; 0 for i.i.d. slots and ``D > 0``;
``rho^D`` for Gauss-Markov fading at the frame's ``rho``), the true coefficient and the estimate
are jointly circularly-symmetric Gaussian around their means. With ``s = sqrt(1 - e2)``::

    E[c_t] = a,   E[c_hat] = s a,   Var[c_t] = b^2,   Var[c_hat] = s^2 b^2 + e2,
    Cov[c_t, c_hat] = E[(c_t - a) conj(c_hat - s a)] = s b^2 kappa,

so, conditioning a complex Gaussian vector::

    c_t | c_hat ~ CN(mu, v),   mu = a + beta (c_hat - s a),   beta = s b^2 kappa / (s^2 b^2 + e2),
                               v  = b^2 - beta s b^2 kappa     (beta = 0 where s^2 b^2 + e2 = 0).

Rayleigh without delay: ``mu = sqrt(1 - e2) c_hat``, ``v = e2``. The true power given the estimate
is then a scaled noncentral chi-square with two degrees of freedom (the Rician law):
``|c_t|^2 = (v / 2) X``, ``X ~ chi'^2_2(lambda)``, ``lambda = 2 |mu|^2 / v``, so::

    P(|c_t|^2 >= g | c_hat) = Q_1(sqrt(lambda), sqrt(2 g / v))        (Marcum Q),

and the power exceeded with probability ``1 - q`` is the quantile
``g_q = (v / 2) F^-1_{chi'^2_2(lambda)}(q)`` (:meth:`CsiPosterior.power_quantile`); ``g_q = |mu|^2``
where ``v = 0`` (the estimate determines the channel). Nakagami-m fading with ``m != 1`` maps
``x`` nonlinearly: it has no such closed form (:meth:`Csi.posterior` is not defined for it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...rng import KeyedStream
from .gains import C128, F64, NONCENTRALITY_ASYMPTOTIC, CsiPosterior

__all__ = ["NONCENTRALITY_ASYMPTOTIC", "Csi", "CsiPosterior", "estimate"]


def estimate(coefficient: C128, error_variance: float, error: C128) -> C128:
    """``c_hat = sqrt(1 - e2) c + sqrt(e2) w`` (arrays of one shape, complex)."""
    e2 = float(error_variance)
    return np.sqrt(1.0 - e2) * coefficient + np.sqrt(e2) * error


class Csi:
    """Estimation error and delay of the CSI a scheme decides on.

    Args:
        error_variance: ``e2`` in ``[0, 1]``.
        delay_slots: ``D >= 0``.
        stream: the run's keyed ``"csi"`` stream.
        num_devices: ``N``.
    """

    def __init__(
        self, error_variance: float, delay_slots: int, stream: KeyedStream, num_devices: int
    ) -> None:
        if not 0.0 <= error_variance <= 1.0:
            raise ValueError(f"error_variance must be in [0, 1], got {error_variance}")
        if delay_slots < 0:
            raise ValueError(f"delay_slots must be >= 0, got {delay_slots}")
        self.error_variance = float(error_variance)
        self.delay_slots = int(delay_slots)
        self.stream = stream
        self.num_devices = int(num_devices)
        self._ids = np.arange(self.num_devices, dtype=np.int64)
        #: the last D coefficients, row ``s mod D`` holds slot ``s`` (None before slot 0)
        self._buffer: C128 | None = None

    def seen_coefficient(self, slot: int, coefficient: C128, history: Callable[[], C128]) -> C128:
        """``c_hat`` of every device in ``slot`` (slots in order), ``(N,)``.

        Args:
            slot: the slot.
            coefficient: the slot's true small-scale coefficients ``c_t``, ``(N,)``.
            history: gives the coefficients of slots ``-1 .. -D`` (``(D, N)``, row ``j - 1``
                slot ``-j``); called once, at the run's first slot.
        """
        measured = coefficient
        d = self.delay_slots
        if d > 0:
            if self._buffer is None:
                if slot != 0:
                    raise RuntimeError("outdated CSI starts at slot 0 (or from a saved state)")
                past = history()
                buf = np.empty((d, self.num_devices), dtype=np.complex128)
                for j in range(1, d + 1):
                    buf[(-j) % d] = past[j - 1]
                self._buffer = buf
            row = slot % d
            measured = self._buffer[row].copy()
            self._buffer[row] = coefficient
        if self.error_variance > 0.0:
            w = self.stream.standard_complex_normal(self._ids, slot)
            measured = estimate(measured, self.error_variance, w)
        return measured

    def posterior(
        self, seen: C128, coefficient_map: tuple[float, float], lag_correlation: F64
    ) -> CsiPosterior:
        """``c_t | c_hat ~ CN(mu, v)`` of every device (the module docstring's formulas).

        Args:
            seen: the estimates ``c_hat``, ``(N,)`` (:meth:`seen_coefficient`).
            coefficient_map: ``(a, b)`` of the fading family, ``c = a + b x``.
            lag_correlation: ``kappa = E[x_t conj(x_{t-D})]`` of each device, ``(N,)``.
        """
        a, b = coefficient_map
        s = float(np.sqrt(1.0 - self.error_variance))
        b2 = b * b
        var_seen = s * s * b2 + self.error_variance
        cov = s * b2 * np.asarray(lag_correlation, dtype=np.float64)
        beta = cov / var_seen if var_seen > 0.0 else np.zeros_like(cov)
        mu = a + beta * (seen - s * a)
        return CsiPosterior(
            mean_power=mu.real * mu.real + mu.imag * mu.imag,
            variance=np.maximum(b2 - beta * cov, 0.0),
        )

    def describe(self) -> dict[str, Any]:
        """Parameters and the model."""
        return {
            "error_variance": self.error_variance,
            "delay_slots": self.delay_slots,
            "model": "c_hat = sqrt(1 - e2) c_{t-D} + sqrt(e2) w, w ~ CN(0, 1); h_hat = H |c_hat|^2",
        }

    def state_dict(self) -> dict[str, Any]:
        """The last ``D`` coefficients (None before the first slot or without delay)."""
        return {"buffer": None if self._buffer is None else self._buffer.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        buf = state["buffer"]
        if buf is not None:
            buf = np.array(buf, dtype=np.complex128)
            if buf.shape != (self.delay_slots, self.num_devices):
                raise ValueError(
                    f"CSI state has shape {buf.shape}, this run needs "
                    f"{(self.delay_slots, self.num_devices)}"
                )
        self._buffer = buf
