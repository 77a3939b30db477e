"""Compute that fluctuates: a per-device, per-slot slowdown ``s >= 1`` of local computation.

The ``[compute]`` table's ``jitter`` names one model (``docs/scenario.md``, ``[compute]``):

* ``none`` (the default): ``s = 1`` in every slot; every device computes in its nominal time
  ``tau_cmp = u c B / f`` (eq. 12), the paper's model.
* ``throttling``: the device's clock drops to ``f / s`` for the slot (thermal throttling, power
  saving), ``ln s = sigma |Z|``, ``Z ~ N(0, 1)``: ``ln s`` is half-normal with scale ``sigma``,
  ``P(s <= x) = 2 Phi(ln x / sigma) - 1`` for ``x >= 1``. The same cycles ``u c B`` run at the
  lower clock: time ``s tau_cmp``, energy ``(alpha / 2) u c B (f / s)^2 = E_cmp / s^2``
  (:func:`wflsim.sim.world.physics.throttled_compute_energy_j`).
* ``background_load``: with probability ``probability`` the device shares its CPU with
  background work in the slot; the gradient then gets the share ``1 / s`` of the CPU time, with
  ``s = 1 + X``, ``X ~ Exp(mean mean_extra)`` (the shifted-exponential straggler model); an
  unloaded device has ``s = 1``. The gradient's cycles ``u c B`` run at the full clock ``f``:
  time ``s tau_cmp``, energy ``E_cmp`` unchanged (the background work's cycles are the
  background task's, not the learning's).

``s`` never goes below 1: ``devices.cpu_hz`` is the device's full speed, and the nominal compute
time is its fastest. Draws are keyed by ``(device, slot)`` on the stream ``"compute_jitter"``
(:meth:`wflsim.sim.rng.Streams.keyed`): the same scenario and seed give the same slowdowns in every
run, after a resume, for every scheme, and adding a device changes no other device's draws. Each
model maps the keyed uniforms by inversion (one uniform per variate, no rejection), so the draws
have exactly the stated law.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BeforeValidator, Field
from scipy import special

from .. import fmath
from ..config.distributions import Strict
from ..rng import KeyedStream, Streams

F64 = NDArray[np.float64]

#: Keyed draw index of a slot's slowdown uniforms (stream ``"compute_jitter"``): ``sub = 0`` is
#: the throttling draw and the background-load "loaded?" draw, ``sub = 1`` the load's size.
_DRAW_SLOT = 0
_DRAW_CYCLE = 1  # per device and upload cycle (server.mode = "async")
#: Largest ``sigma`` of ``throttling`` (``s`` up to ``exp(5 x 8.3)``: finite in every unit).
MAX_SIGMA = 5.0
#: Largest ``mean_extra`` of ``background_load`` (a loaded device 1000 times slower on average).
MAX_MEAN_EXTRA = 1000.0


def _named(value: Any) -> Any:
    """A bare model name stands for ``{model = name}``."""
    return {"model": value} if isinstance(value, str) else value


class NoJitterConfig(Strict):
    """No slowdown: ``s = 1`` (the paper's deterministic compute)."""

    model: Literal["none"] = "none"


class _JitterBase(Strict):
    known: bool = Field(
        False,
        description="whether the scheme plans the slot on the slowed compute time (true) or on "
        "the nominal one (false: it learns the slowdown only from the outcome)",
    )


class ThrottlingConfig(_JitterBase):
    """The clock drops to ``f / s``, ``ln s = sigma |Z|`` (half-normal), ``Z ~ N(0, 1)``."""

    model: Literal["throttling"] = "throttling"
    sigma: float = Field(
        ge=0.0, le=MAX_SIGMA, allow_inf_nan=False, description="scale of ln s (half-normal)"
    )


class BackgroundLoadConfig(_JitterBase):
    """With probability ``probability`` the CPU is shared: ``s = 1 + X``,
    ``X ~ Exp(mean mean_extra)``; else ``s = 1``."""

    model: Literal["background_load"] = "background_load"
    probability: float = Field(
        ge=0.0, le=1.0, allow_inf_nan=False, description="chance a device is loaded in a slot"
    )
    mean_extra: float = Field(
        ge=0.0,
        le=MAX_MEAN_EXTRA,
        allow_inf_nan=False,
        description="mean extra compute time of a loaded device, in nominal compute times",
    )


JitterConfig = Annotated[
    NoJitterConfig | ThrottlingConfig | BackgroundLoadConfig,
    BeforeValidator(_named),
    Field(discriminator="model"),
]


class ComputeConfig(Strict):
    """The ``[compute]`` table: how local computation fluctuates from slot to slot."""

    jitter: JitterConfig = Field(default_factory=NoJitterConfig)


class ComputeJitter(ABC):
    """A slowdown model: ``s >= 1`` per device and slot from keyed uniforms (the module's
    docstring). Stateless: a slot's slowdowns are a pure function of seed, device and slot.

    Args:
        stream: the run's keyed stream ``"compute_jitter"``.
        num_devices: ``N``.
        known: whether the scheme plans on the slowed compute time.
    """

    name: ClassVar[str]
    #: True: the slowdown lowers the clock (energy ``E_cmp / s^2``); False: it shares the CPU
    #: at the full clock (energy ``E_cmp``)
    scales_clock: ClassVar[bool]

    def __init__(self, stream: KeyedStream, num_devices: int, known: bool) -> None:
        self.stream = stream
        self.devices = np.arange(num_devices, dtype=np.int64)
        self.known = bool(known)

    def slowdown(self, slot: int) -> F64:
        """Every device's ``s`` in slot ``slot``, ``(N,)``, each ``>= 1``."""
        u = self.stream.uniforms(self.devices, slot, _DRAW_SLOT, (0, 1))
        return self.from_uniforms(u[0], u[1])

    def cycle_slowdown(self, device: int, cycle: int) -> float:
        """Device ``device``'s ``s`` in its upload cycle ``cycle`` (``server.mode = "async"``,
        where a device's cycles are not slots), ``>= 1``; a draw of its own."""
        u = self.stream.uniforms(np.array([device], dtype=np.int64), cycle, _DRAW_CYCLE, (0, 1))
        return float(self.from_uniforms(u[0], u[1])[0])

    @abstractmethod
    def from_uniforms(self, u0: F64, u1: F64) -> F64:
        """``s`` of the keyed uniforms ``u0`` (``sub = 0``) and ``u1`` (``sub = 1``), in
        ``[0, 1)``, ``(N,)``."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """``{"model": ..., parameters, "known": ...}``."""


class Throttling(ComputeJitter):
    """``s = exp(sigma |Z|)`` with ``|Z| = sqrt(2) erfinv(u0)`` (the half-normal quantile);
    the clock is ``f / s``."""

    name = "throttling"
    scales_clock = True

    def __init__(self, stream: KeyedStream, num_devices: int, known: bool, sigma: float) -> None:
        super().__init__(stream, num_devices, known)
        self.sigma = float(sigma)

    def from_uniforms(self, u0: F64, u1: F64) -> F64:
        """``exp(sigma sqrt(2) erfinv(u0))``; ``u1`` is not used."""
        z_abs = np.sqrt(2.0) * special.erfinv(u0)
        return np.asarray(fmath.exp(self.sigma * z_abs), dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        """``{"model": "throttling", "sigma": ..., "known": ...}``."""
        return {"model": self.name, "sigma": self.sigma, "known": self.known}


class BackgroundLoad(ComputeJitter):
    """Loaded iff ``u0 < probability``; then ``s = 1 - mean_extra ln(1 - u1)``, else 1; the
    clock stays ``f``."""

    name = "background_load"
    scales_clock = False

    def __init__(
        self,
        stream: KeyedStream,
        num_devices: int,
        known: bool,
        probability: float,
        mean_extra: float,
    ) -> None:
        super().__init__(stream, num_devices, known)
        self.probability = float(probability)
        self.mean_extra = float(mean_extra)

    def from_uniforms(self, u0: F64, u1: F64) -> F64:
        """``1 + X`` where loaded, ``X = -mean_extra log1p(-u1) ~ Exp(mean mean_extra)``."""
        extra = -self.mean_extra * fmath.log1p(-u1)
        return np.where(u0 < self.probability, 1.0 + extra, 1.0)

    def describe(self) -> dict[str, Any]:
        """``{"model": "background_load", "probability": ..., "mean_extra": ..., "known": ...}``."""
        return {
            "model": self.name,
            "probability": self.probability,
            "mean_extra": self.mean_extra,
            "known": self.known,
        }


def build_jitter(config: ComputeConfig, num_devices: int, streams: Streams) -> ComputeJitter | None:
    """The slowdown model of a ``[compute]`` table; None for ``jitter = "none"``."""
    cfg = config.jitter
    if isinstance(cfg, NoJitterConfig):
        return None
    stream = streams.keyed("compute_jitter")
    if isinstance(cfg, ThrottlingConfig):
        return Throttling(stream, num_devices, cfg.known, cfg.sigma)
    return BackgroundLoad(stream, num_devices, cfg.known, cfg.probability, cfg.mean_extra)
