"""Availability: when each device is online (the scenario's ``[availability]``).

A device's time line is a sequence of alternating online and offline *segments*; a device is
online at time ``t`` iff ``t`` lies in one of its online segments ``[a, b)`` (a change at exactly
``t`` has happened by ``t``). Three models (``docs/scenario.md``, ``[availability]``):

* ``always`` (the default): every device is online all the time (the paper's model); no
  component is built and nothing changes.
* ``markov``: each device alternates online and offline periods whose lengths are independent
  draws from ``online_s`` and ``offline_s`` (a number: fixed seconds; or an ``exponential``,
  ``uniform``, ``loguniform`` or ``weibull`` law): an alternating renewal process, a two-state
  continuous-time Markov chain when both laws are exponential. Its long-run online fraction is
  ``E[on] / (E[on] + E[off])``. The initial state is ``online`` or ``offline`` (every device, a
  full first period) or ``stationary``: online with that probability, and the rest of the
  period in progress drawn from the residual (equilibrium) law of its length, ``F_e(x) = (1 /
  mu) integral_0^x (1 - F)``, so that the process is stationary from ``t = 0`` (for exponential
  periods the residual law is the law itself; a fixed length's is uniform on ``[0, length]``).
* ``trace``: online intervals read from a file of rows ``device, start_s, end_s`` (CSV or
  Parquet), validated like mobility traces; outside its intervals a device is offline (before
  the first, between two, after the last).

Randomness: period ``i`` of device ``d`` takes its length from the keyed uniform
``(d, i, draw 0)`` of the stream ``"availability"``, its initial state from ``(d, 0, draw 1)``
(:meth:`wflsim.sim.rng.Streams.keyed`), by inversion: the same seed gives the same time lines in
every run, for every scheme and after a resume, and adding a device changes no other device's.

What the engine does with it (:class:`wflsim.sim.engine.Engine`): at a slot's start only online
devices take part; a participant whose online segment ends before its work does (compute and upload)
is *dropped* at that instant by the event kernel (a SimPy interrupt, :mod:`wflsim.sim.kernels`): its
work is lost and the energy it spent until then is counted. Every change of state is a trace row
(``online``, ``offline``), as is every drop (``dropped``).

State: per device the end of its current segment, whether it is online and how many segments it
has passed (:meth:`Availability.state_dict`); the draws need none.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from pydantic import BeforeValidator, Field, field_validator, model_validator
from scipy import special

from .. import fmath
from ..config.distributions import Bounds, PerDevice, Strict, check_bounds, per_device_values
from ..config.limits import path_problem, shorten
from ..errors import ScenarioError
from ..rng import KeyedStream, Streams
from .mobility.trace import device_table, read_trace

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
B8 = NDArray[np.bool_]

#: Columns an availability trace must have.
AVAILABILITY_COLUMNS: tuple[str, ...] = ("device", "start_s", "end_s")
#: Keyed draw indices (stream ``"availability"``): a period's length, the initial state.
_DRAW_LENGTH, _DRAW_INITIAL = 0, 1
#: Longest period length a law may give on average, s (about 317 years).
MAX_PERIOD_S = 1e10
#: Most state changes a device may make per slot: on average for ``markov``; in any slot-long
#: window ``[k tau_0, (k + 1) tau_0)`` of a ``trace`` file (keeps absurd input bounded).
MAX_CHANGES_PER_SLOT = 100.0
#: The range of a device's period scale (``online_scale``, ``offline_scale``).
SCALE_BOUNDS = Bounds(0.0, 1e6, "", open_low=True)
#: Stream indices of the scales' per-device draws (``device_params``, after the ``[devices]``
#: fields 0-5: :data:`wflsim.sim.config.resolve._DEVICE_FIELDS`).
_SCALE_INDEX = {"online_scale": 6, "offline_scale": 7}


# ------------------------------------------------------------------------- period laws


class Exponential(Strict):
    """``Exp(mean)``: ``-mean ln(1 - u)``."""

    dist: Literal["exponential"]
    mean: float = Field(gt=0.0, le=MAX_PERIOD_S, allow_inf_nan=False, description="s")

    def expected_s(self) -> float:
        """The mean length, s."""
        return self.mean

    def from_uniform(self, u: F64) -> F64:
        """Lengths of uniforms ``u`` in ``[0, 1)``, s."""
        return np.asarray(-self.mean * fmath.log1p(-u), dtype=np.float64)

    def residual_from_uniform(self, u: F64) -> F64:
        """The residual law is the law itself (memorylessness), s."""
        return self.from_uniform(u)


class _PeriodRange(Strict):
    """A law on ``[low, high]``, s."""

    low: float = Field(ge=0.0, le=MAX_PERIOD_S, allow_inf_nan=False, description="s")
    high: float = Field(gt=0.0, le=MAX_PERIOD_S, allow_inf_nan=False, description="s")

    @model_validator(mode="after")
    def _order(self) -> _PeriodRange:
        if self.high < self.low:
            raise ValueError(f"high ({self.high:g}) must be >= low ({self.low:g})")
        return self


class UniformPeriod(_PeriodRange):
    """Uniform on ``[low, high]``: ``low + (high - low) u``."""

    dist: Literal["uniform"]

    def expected_s(self) -> float:
        """The mean length, s."""
        return 0.5 * (self.low + self.high)

    def from_uniform(self, u: F64) -> F64:
        """Lengths of uniforms ``u`` in ``[0, 1)``, s."""
        return np.asarray(self.low + (self.high - self.low) * u, dtype=np.float64)

    def residual_from_uniform(self, u: F64) -> F64:
        """The residual law's quantile, s: ``F_e(x) = x / mu`` below ``low``, then
        ``(x - (x - low)^2 / (2 w)) / mu`` (``w = high - low``), inverted in closed form."""
        a, w, mu = self.low, self.high - self.low, self.expected_s()
        target = np.asarray(u, dtype=np.float64) * mu
        if w == 0.0:
            return target
        y = w - np.sqrt(np.maximum(w * w - 2.0 * w * (target - a), 0.0))
        return np.where(target <= a, target, a + y)


class LogUniformPeriod(_PeriodRange):
    """Log-uniform on ``[low, high]``, both > 0."""

    dist: Literal["loguniform"]
    low: float = Field(gt=0.0, le=MAX_PERIOD_S, allow_inf_nan=False, description="s")

    def expected_s(self) -> float:
        """The mean length, ``(high - low) / ln(high / low)`` (``low`` if equal), s."""
        if self.high == self.low:
            return self.low
        return (self.high - self.low) / math.log(self.high / self.low)

    def from_uniform(self, u: F64) -> F64:
        """Lengths of uniforms ``u`` in ``[0, 1)``, s."""
        lo, hi = math.log(self.low), math.log(self.high)
        return np.asarray(fmath.exp(lo + (hi - lo) * u), dtype=np.float64)

    def residual_from_uniform(self, u: F64) -> F64:
        """The residual law's quantile, s: ``mu F_e(x) = x`` below ``low``, then
        ``low + (x ln(high / x) + x - low ln(high / low) - low) / ln(high / low)``, inverted by
        bisection to machine precision (it is increasing)."""
        a, b = self.low, self.high
        target = np.asarray(u, dtype=np.float64) * self.expected_s()
        if a == b:
            return target

        def cdf_times_mu(x: F64) -> F64:
            span = math.log(b / a)
            x = np.maximum(x, a)
            return a + (x * fmath.log(b / x) + x - a * span - a) / span

        lo, hi = np.full(target.shape, a), np.full(target.shape, b)
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            below = cdf_times_mu(mid) < target
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return np.where(target <= a, target, 0.5 * (lo + hi))


class Weibull(Strict):
    """Weibull with ``shape`` k and ``scale`` lambda: ``lambda (-ln(1 - u))^(1/k)`` (k < 1:
    heavy-tailed sessions, as measured on phones; k = 1: exponential)."""

    dist: Literal["weibull"]
    shape: float = Field(ge=0.1, le=100.0, allow_inf_nan=False, description="k, -")
    scale: float = Field(gt=0.0, le=MAX_PERIOD_S, allow_inf_nan=False, description="lambda, s")

    def expected_s(self) -> float:
        """The mean length, ``lambda Gamma(1 + 1/k)``, s."""
        return self.scale * math.gamma(1.0 + 1.0 / self.shape)

    def from_uniform(self, u: F64) -> F64:
        """Lengths of uniforms ``u`` in ``[0, 1)``, s."""
        return np.asarray(
            self.scale * fmath.power(-fmath.log1p(-u), 1.0 / self.shape), dtype=np.float64
        )

    def residual_from_uniform(self, u: F64) -> F64:
        """The residual law's quantile, s: ``F_e(x) = P(1/k, (x / lambda)^k)`` (the regularised
        lower incomplete gamma function), so ``x = lambda P^-1(1/k, u)^(1/k)``."""
        k = self.shape
        g = special.gammaincinv(1.0 / k, np.asarray(u, dtype=np.float64))
        return np.asarray(self.scale * fmath.power(g, 1.0 / k), dtype=np.float64)


class Fixed(Strict):
    """Every period lasts ``value`` seconds (a bare number in a scenario)."""

    dist: Literal["fixed"]
    value: float = Field(gt=0.0, le=MAX_PERIOD_S, allow_inf_nan=False, description="s")

    def expected_s(self) -> float:
        """The length, s."""
        return self.value

    def from_uniform(self, u: F64) -> F64:
        """``value`` for every uniform, s."""
        return np.full(np.shape(u), self.value)

    def residual_from_uniform(self, u: F64) -> F64:
        """The residual of a fixed length is uniform on ``[0, value]``, s."""
        return np.asarray(self.value * np.asarray(u, dtype=np.float64), dtype=np.float64)


def _period_law(value: Any) -> Any:
    """A bare number stands for ``{dist = "fixed", value = ...}``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"dist": "fixed", "value": value}
    return value


PeriodLaw = Annotated[
    Exponential | UniformPeriod | LogUniformPeriod | Weibull | Fixed,
    BeforeValidator(_period_law),
    Field(discriminator="dist"),
]


# ------------------------------------------------------------------------- the table


class AlwaysConfig(Strict):
    """Every device is online all the time (the paper's model)."""

    model: Literal["always"] = "always"


class MarkovConfig(Strict):
    """Alternating online and offline periods per device."""

    model: Literal["markov"] = "markov"
    online_s: PeriodLaw = Field(description="length of an online period, s")
    offline_s: PeriodLaw = Field(description="length of an offline period, s")
    initial: Literal["stationary", "online", "offline"] = Field(
        "stationary",
        description="state at t = 0: online with probability E[on] / (E[on] + E[off]) "
        "(stationary), or every device online, or every device offline",
    )
    online_scale: PerDevice = Field(
        1.0,
        description="per device, a factor on its online periods' lengths (a value, a list of "
        "num_devices values or a distribution drawn once per device): heterogeneous devices",
    )
    offline_scale: PerDevice = Field(1.0, description="as online_scale, for offline periods")

    @field_validator("online_scale", "offline_scale")
    @classmethod
    def _scale_range(cls, value: Any) -> Any:
        check_bounds(value, SCALE_BOUNDS)
        return value

    def online_fraction(self) -> float:
        """The long-run share of time online of a device with both scales 1,
        ``E[on] / (E[on] + E[off])``."""
        on, off = self.online_s.expected_s(), self.offline_s.expected_s()
        return on / (on + off)


class TraceAvailabilityConfig(Strict):
    """Online intervals read from a file (``model = "trace"``; not the ``[trace]`` table, which is
    :class:`wflsim.sim.config.schema.TraceConfig`)."""

    model: Literal["trace"] = "trace"
    file: str = Field(
        description="a .csv or .parquet file with columns device, start_s, end_s (relative "
        "paths: to the scenario file's folder)"
    )

    @field_validator("file")
    @classmethod
    def _check_file(cls, value: str) -> str:
        problem = path_problem(value)
        if problem is not None:
            raise ValueError(f"file {problem} (got {shorten(value)!r})")
        return value


#: The former name of :class:`TraceAvailabilityConfig`, kept so that code and pickles naming it
#: still work (it shared its name with the ``[trace]`` table's
#: :class:`wflsim.sim.config.schema.TraceConfig`).
TraceConfig = TraceAvailabilityConfig


def _named(value: Any) -> Any:
    """A bare model name stands for ``{model = name}``."""
    return {"model": value} if isinstance(value, str) else value


AvailabilityConfig = Annotated[
    AlwaysConfig | MarkovConfig | TraceAvailabilityConfig,
    BeforeValidator(_named),
    Field(discriminator="model"),
]


# ------------------------------------------------------------------------- the models


@dataclass(frozen=True)
class Changes:
    """State changes, in the order they happened (time, then device), ``(M,)`` each."""

    time_s: F64  #: s
    device: I64
    online: B8  #: the state after the change

    @classmethod
    def empty(cls) -> Changes:
        """No change."""
        return cls(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))

    def __len__(self) -> int:
        return int(self.time_s.shape[0])


class Availability(ABC):
    """A model of when devices are online: per device its current segment (the module's
    docstring), advanced through time by :meth:`advance`.

    Args:
        num_devices: ``N``.
    """

    name: ClassVar[str]

    def __init__(self, num_devices: int) -> None:
        self.num_devices = int(num_devices)
        self._devices = np.arange(self.num_devices, dtype=np.int64)
        #: the time the model has been advanced to, s
        self.time_s = 0.0
        self.online = np.zeros(self.num_devices, dtype=bool)  #: state now, ``(N,)``
        #: end of each device's current segment (its next change), s, ``(N,)`` (``inf``: none)
        self.segment_end_s = np.zeros(self.num_devices)
        #: segments each device has passed since t = 0, ``(N,)``
        self.segments = np.zeros(self.num_devices, dtype=np.int64)

    def reset(self) -> Changes:
        """Put every device at ``t = 0`` and return its state there (after any change at 0) as
        one change at 0 per device, in device order, for the trace."""
        self.time_s = 0.0
        self.segments = np.zeros(self.num_devices, dtype=np.int64)
        self._initial()
        self.advance(0.0)  # a trace interval that starts at 0, a period of length 0
        return Changes(np.zeros(self.num_devices), self._devices.copy(), self.online.copy())

    @abstractmethod
    def _initial(self) -> None:
        """Set ``online`` and ``segment_end_s`` at ``t = 0``."""

    @abstractmethod
    def _next_segment(self, devices: I64) -> None:
        """Move ``devices`` (whose segments ended) into their next segments: ``online``,
        ``segment_end_s`` and ``segments`` updated."""

    def advance(self, time_s: float) -> Changes:
        """Every change at a time ``<= time_s`` not yet made, in order; the state is then the
        state at ``time_s``. Times must not decrease."""
        t = float(time_s)
        if t < self.time_s:
            raise ValueError(f"availability advanced to {t} s after {self.time_s} s")
        self.time_s = t
        times: list[F64] = []
        devs: list[I64] = []
        states: list[B8] = []
        while True:
            due = np.flatnonzero(self.segment_end_s <= t)
            if due.size == 0:
                break
            times.append(self.segment_end_s[due].copy())
            self._next_segment(due)
            devs.append(due)
            states.append(self.online[due].copy())
        if not times:
            return Changes.empty()
        time_c, dev_c, on_c = np.concatenate(times), np.concatenate(devs), np.concatenate(states)
        order = np.lexsort((np.arange(time_c.shape[0]), dev_c, time_c))
        return Changes(time_c[order], dev_c[order], on_c[order])

    def online_until_s(self) -> F64:
        """Each device's next change if it is online now, else ``inf``, s, ``(N,)``."""
        return np.where(self.online, self.segment_end_s, np.inf)

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """The model and its parameters (the run manifest's ``availability``)."""

    def state_dict(self) -> dict[str, Any]:
        """The current segments (for checkpoints)."""
        return {
            "time_s": self.time_s,
            "online": self.online.copy(),
            "segment_end_s": self.segment_end_s.copy(),
            "segments": self.segments.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        online = np.array(state["online"], dtype=bool)
        if online.shape != (self.num_devices,):
            raise ValueError(
                f"availability state is for {online.shape[0]} devices, this run has "
                f"{self.num_devices}"
            )
        self.time_s = float(state["time_s"])
        self.online = online
        self.segment_end_s = np.array(state["segment_end_s"], dtype=np.float64)
        self.segments = np.array(state["segments"], dtype=np.int64)


class MarkovAvailability(Availability):
    """Alternating online and offline periods from keyed draws (the module's docstring).

    Args:
        config: the ``[availability]`` table.
        stream: the run's keyed stream ``"availability"``.
        num_devices: ``N``.
    """

    name = "markov"

    def __init__(
        self,
        config: MarkovConfig,
        stream: KeyedStream,
        num_devices: int,
        online_scale: ArrayLike = 1.0,
        offline_scale: ArrayLike = 1.0,
    ) -> None:
        super().__init__(num_devices)
        self.config = config
        self.stream = stream
        #: per device, the factors on its online and offline periods, ``(N,)``
        self.online_scale = np.broadcast_to(
            np.asarray(online_scale, dtype=np.float64), (num_devices,)
        ).copy()
        self.offline_scale = np.broadcast_to(
            np.asarray(offline_scale, dtype=np.float64), (num_devices,)
        ).copy()
        self.reset()

    def online_fractions(self) -> F64:
        """Each device's long-run share of time online,
        ``a E[on] / (a E[on] + b E[off])`` with its scales ``a``, ``b``, ``(N,)``."""
        on = self.online_scale * self.config.online_s.expected_s()
        off = self.offline_scale * self.config.offline_s.expected_s()
        return np.asarray(on / (on + off), dtype=np.float64)

    def _length_s(self, devices: I64, period: I64 | int, online: B8) -> F64:
        """Lengths of period(s) ``period`` of ``devices`` (online or offline ones), s."""
        periods = np.broadcast_to(np.asarray(period, dtype=np.int64), devices.shape)
        u = np.empty(devices.shape[0])
        for i in np.unique(periods).tolist():  # one keyed evaluation per period index
            sel = periods == i
            u[sel] = self.stream.uniform(devices[sel], int(i), _DRAW_LENGTH)
        return np.where(
            online,
            self.online_scale[devices] * self.config.online_s.from_uniform(u),
            self.offline_scale[devices] * self.config.offline_s.from_uniform(u),
        )

    def _initial(self) -> None:
        cfg = self.config
        if cfg.initial != "stationary":
            self.online = np.full(self.num_devices, cfg.initial == "online")
            self.segment_end_s = self._length_s(self._devices, 0, self.online)
            return
        # the stationary start: the state with its long-run probability, and what is left of
        # the period in progress from the residual (equilibrium) law of its length
        u_state = self.stream.uniform(self._devices, 0, _DRAW_INITIAL)
        self.online = u_state < self.online_fractions()
        u = self.stream.uniform(self._devices, 0, _DRAW_LENGTH)
        self.segment_end_s = np.where(
            self.online,
            self.online_scale * cfg.online_s.residual_from_uniform(u),
            self.offline_scale * cfg.offline_s.residual_from_uniform(u),
        )

    def _next_segment(self, devices: I64) -> None:
        self.segments[devices] += 1
        self.online[devices] = ~self.online[devices]
        lengths = self._length_s(devices, self.segments[devices], self.online[devices])
        self.segment_end_s[devices] = self.segment_end_s[devices] + lengths

    def describe(self) -> dict[str, Any]:
        """``{"model": "markov", "online_s": ..., "offline_s": ..., "initial": ...,
        "online_fraction": ...}``."""
        cfg = self.config
        fractions = self.online_fractions()
        return {
            "model": self.name,
            "online_s": cfg.online_s.model_dump(),
            "offline_s": cfg.offline_s.model_dump(),
            "initial": cfg.initial,
            "online_fraction": float(fractions.mean()),
            "online_fraction_range": [float(fractions.min()), float(fractions.max())],
        }


class TraceAvailability(Availability):
    """Online intervals of a trace: per device its sorted change times ``a0, b0, a1, b1, ...``
    (online on ``[a_j, b_j)``; touching intervals merged).

    Args:
        starts_s, ends_s: per device, its intervals' starts and ends, s, sorted and disjoint
            (:meth:`from_frame` validates and sorts a table).
        source: how the manifest names the trace.
    """

    name = "trace"

    def __init__(self, starts_s: list[F64], ends_s: list[F64], source: str = "trace") -> None:
        super().__init__(len(starts_s))
        self.source = source
        edges: list[F64] = []
        for a, b in zip(starts_s, ends_s, strict=True):
            keep_a = np.ones(a.shape[0], dtype=bool)
            keep_b = np.ones(b.shape[0], dtype=bool)
            touching = b[:-1] == a[1:]  # [a0, b0) + [b0, b1) = [a0, b1)
            keep_b[:-1] &= ~touching
            keep_a[1:] &= ~touching
            e = np.empty(int(keep_a.sum()) * 2)
            e[0::2], e[1::2] = a[keep_a], b[keep_b]
            edges.append(e)
        self._offsets = np.concatenate([[0], np.cumsum([e.shape[0] for e in edges])]).astype(
            np.int64
        )
        self._edges = np.concatenate(edges + [np.zeros(0)])
        self.intervals = int(self._edges.shape[0] // 2)
        self.reset()

    def _edge(self, devices: I64, index: I64) -> F64:
        """Change ``index`` of each device (``inf`` past its last), s."""
        count = self._offsets[devices + 1] - self._offsets[devices]
        flat = np.minimum(self._offsets[devices] + index, self._edges.shape[0] - 1)
        return np.where(index < count, self._edges[flat], np.inf)

    def _initial(self) -> None:
        # change 0 of every device is the start of its first interval: offline until then
        self.online = np.zeros(self.num_devices, dtype=bool)
        self.segment_end_s = self._edge(self._devices, self.segments)

    def _next_segment(self, devices: I64) -> None:
        self.segments[devices] += 1
        self.online[devices] = self.segments[devices] % 2 == 1
        self.segment_end_s[devices] = self._edge(devices, self.segments[devices])

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        num_devices: int,
        field: str = "availability.file",
        deadline_s: float | None = None,
    ) -> TraceAvailability:
        """Read and validate an availability trace (:meth:`from_frame`)."""
        frame = read_trace(path, field=field, columns=AVAILABILITY_COLUMNS)
        return cls.from_frame(
            frame, num_devices=num_devices, field=field, source=str(path), deadline_s=deadline_s
        )

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        num_devices: int,
        field: str = "availability.file",
        source: str = "trace",
        deadline_s: float | None = None,
    ) -> TraceAvailability:
        """Validate an availability table and build the model.

        Args:
            frame: columns ``device`` (integer id in ``0..N-1``), ``start_s`` (finite, s),
                ``end_s`` (s, ``> start_s``; ``inf``: online to the end); extra columns are
                ignored; rows in any order.
            num_devices: ``N``; every device ``0..N-1`` must have at least one interval and no
                other id may appear.
            field: dotted scenario field named in errors.
            source: how errors name the trace (its path).
            deadline_s: the slot length ``tau_0``, s: given, a device may change state at most
                :data:`MAX_CHANGES_PER_SLOT` times in any window ``[k tau_0, (k + 1) tau_0)``
                (checked before the model is built).

        Raises:
            ScenarioError: missing columns, an empty table, dates or durations, non-numeric or
                NaN values, an infinite start, non-integer or unknown device ids, devices
                without intervals, an interval that does not end after it starts, two intervals
                of a device that overlap, or more changes in a slot than the cap.
        """
        cols, dev = device_table(
            frame,
            AVAILABILITY_COLUMNS,
            num_devices=num_devices,
            field=field,
            source=source,
            what="availability trace",
            rows_are="interval",
            may_be_inf=("end_s",),
            renumber_fix="renumber the trace's devices 0..N-1 (wflsim convert-availability "
            "--devices N) or change the number of devices",
        )
        start, end = cols["start_s"], cols["end_s"]
        empty = np.flatnonzero(~(end > start))
        if empty.size:
            i = int(empty[0])
            raise ScenarioError(
                field,
                f"availability trace {source}: row {i} ends at {end[i]:g} s, not after its "
                f"start {start[i]:g} s ({empty.size} such row(s))",
                "give every interval end_s > start_s",
            )
        order = np.lexsort((start, dev))
        dev, start, end = dev[order], start[order], end[order]
        overlap = np.flatnonzero((np.diff(dev) == 0) & (start[1:] < end[:-1]))
        if overlap.size:
            i = int(overlap[0])
            raise ScenarioError(
                field,
                f"availability trace {source}: rows {int(order[i])} and {int(order[i + 1])} "
                f"give device {int(dev[i])} overlapping intervals ({overlap.size} such pair(s))",
                "merge overlapping intervals of a device into one",
            )
        if deadline_s is not None:
            _check_change_rate(dev, start, end, deadline_s, field, source)
        bounds = np.searchsorted(dev, np.arange(num_devices + 1))
        return cls(
            [start[bounds[d] : bounds[d + 1]] for d in range(num_devices)],
            [end[bounds[d] : bounds[d + 1]] for d in range(num_devices)],
            source=source,
        )

    def describe(self) -> dict[str, Any]:
        """``{"model": "trace", "file": ..., "intervals": ...}``."""
        return {"model": self.name, "file": self.source, "intervals": self.intervals}


def _check_change_rate(
    dev: I64, start_s: F64, end_s: F64, deadline_s: float, field: str, source: str
) -> None:
    """Refuse a trace in which a device changes state more than :data:`MAX_CHANGES_PER_SLOT`
    times within one slot-long window ``[k tau_0, (k + 1) tau_0)``: each change is a trace row
    and a step of the run, and that many in one slot are no longer a model of availability.
    ``dev``, ``start_s``, ``end_s``: the intervals sorted by device and start, not overlapping
    (intervals that touch are one: their shared end and start are no change)."""
    n = dev.shape[0]
    touching = (dev[1:] == dev[:-1]) & (end_s[:-1] == start_s[1:])
    keep_start = np.ones(n, dtype=bool)
    keep_start[1:] &= ~touching
    keep_end = np.ones(n, dtype=bool)
    keep_end[:-1] &= ~touching
    times = np.concatenate([start_s[keep_start], end_s[keep_end]])
    devices = np.concatenate([dev[keep_start], dev[keep_end]])
    finite = np.isfinite(times)
    window = np.floor(times[finite] / deadline_s)  # beyond 2^53 slots, windows merge: stricter
    devices = devices[finite]
    order = np.lexsort((window, devices))
    window, devices = window[order], devices[order]
    first = np.ones(window.shape[0], dtype=bool)
    first[1:] = (window[1:] != window[:-1]) | (devices[1:] != devices[:-1])
    begins = np.flatnonzero(first)
    counts = np.diff(np.append(begins, window.shape[0]))
    if counts.size == 0 or counts.max() <= MAX_CHANGES_PER_SLOT:
        return
    i = int(np.argmax(counts))
    j = int(begins[i])
    raise ScenarioError(
        field,
        f"availability trace {source}: device {int(devices[j])} changes state "
        f"{int(counts[i]):,} times within one slot (run.deadline_s = {deadline_s:g} s, from "
        f"{window[j] * deadline_s:g} s); at most {MAX_CHANGES_PER_SLOT:g} changes per device "
        "and slot are simulated",
        "join or drop the short intervals, or stretch the trace's times with wflsim "
        "convert-availability --time-scale",
    )


def build_availability(
    config: AlwaysConfig | MarkovConfig | TraceAvailabilityConfig,
    *,
    num_devices: int,
    streams: Streams,
    base_dir: Path | None = None,
    deadline_s: float | None = None,
) -> Availability | None:
    """The availability model of an ``[availability]`` table; None for ``always``.

    Raises:
        ScenarioError: a trace file that is missing, unreadable or invalid
            (``availability.file``); per-device scales out of range, or that make a device
            change state more than :data:`MAX_CHANGES_PER_SLOT` times per slot of
            ``deadline_s`` on average (``availability.online_scale``).
    """
    if isinstance(config, AlwaysConfig):
        return None
    if isinstance(config, MarkovConfig):
        scales = {
            name: per_device_values(
                getattr(config, name),
                num_devices,
                streams,
                index,
                f"availability.{name}",
                SCALE_BOUNDS,
            )
            for name, index in _SCALE_INDEX.items()
        }
        if deadline_s is not None:
            cycle_s = (
                scales["online_scale"] * config.online_s.expected_s()
                + scales["offline_scale"] * config.offline_s.expected_s()
            )
            worst = int(np.argmin(cycle_s))
            changes = 2.0 * deadline_s / float(cycle_s[worst])
            if changes > MAX_CHANGES_PER_SLOT:
                raise ScenarioError(
                    "availability.online_scale",
                    f"device {worst}'s scaled periods make {changes:,.0f} changes per slot "
                    f"(run.deadline_s = {deadline_s:g} s); at most {MAX_CHANGES_PER_SLOT:g} "
                    "are simulated",
                    "raise the smallest scales, or lengthen the periods",
                )
        return MarkovAvailability(
            config,
            streams.keyed("availability"),
            num_devices,
            scales["online_scale"],
            scales["offline_scale"],
        )
    path = Path(config.file).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return TraceAvailability.from_file(path, num_devices=num_devices, deadline_s=deadline_s)


def expected_changes_per_slot(config: MarkovConfig, deadline_s: float) -> float:
    """Average state changes of a device per slot of ``deadline_s``: ``2 tau_0 / (E[on] +
    E[off])`` (two changes per on-off cycle)."""
    cycle = config.online_s.expected_s() + config.offline_s.expected_s()
    return 2.0 * deadline_s / cycle


__all__ = [
    "AVAILABILITY_COLUMNS",
    "AlwaysConfig",
    "Availability",
    "AvailabilityConfig",
    "Changes",
    "MarkovAvailability",
    "MarkovConfig",
    "TraceAvailability",
    "TraceAvailabilityConfig",
    "build_availability",
    "expected_changes_per_slot",
]
