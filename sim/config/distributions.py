"""Per-device values of a scenario: one number, a list of ``num_devices`` numbers, or a
distribution table such as ``{ dist = "uniform", low = 0.30, high = 0.45 }``.

Each device draws each distributed field from its own random stream
(``streams.device("device_params", n, field_index)``), so adding a device never changes the
values of the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .. import fmath
from ..errors import ScenarioError
from ..rng import Streams
from .limits import MAX_DEVICES

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


def _whole_number(value: Any) -> Any:
    """Refuse ``true``/``false`` and floats where a field takes whole numbers: pydantic's
    ``Literal[1, 2]`` takes ``True`` for 1 and ``2.0`` for 2, even in strict mode."""
    if isinstance(value, bool | float):
        raise PydanticCustomError(
            "int_type", "must be a whole number, not {got}", {"got": repr(value).lower()}
        )
    return value


#: On a ``Literal`` of integers (``Annotated[Literal[1, 3, 7], WHOLE_NUMBER]``): take only ints,
#: as strict validation does for ``int`` fields (types refused, never converted).
WHOLE_NUMBER = BeforeValidator(_whole_number)


class Strict(BaseModel):
    """Base of the scenario's tables: unknown fields are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Uniform(Strict):
    """Uniform on ``[low, high]``."""

    dist: Literal["uniform"]
    low: float = Field(allow_inf_nan=False)
    high: float = Field(allow_inf_nan=False)

    @model_validator(mode="after")
    def _order(self) -> Uniform:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) must be >= low ({self.low})")
        return self


class LogUniform(Strict):
    """Log-uniform on ``[low, high]`` (both > 0)."""

    dist: Literal["loguniform"]
    low: PositiveFloat
    high: PositiveFloat

    @model_validator(mode="after")
    def _order(self) -> LogUniform:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) must be >= low ({self.low})")
        return self


class Normal(Strict):
    """Normal ``N(mean, std^2)`` clipped to ``[low, high]`` when given."""

    dist: Literal["normal"]
    mean: float = Field(allow_inf_nan=False)
    std: NonNegFloat
    low: float | None = Field(None, allow_inf_nan=False)
    high: float | None = Field(None, allow_inf_nan=False)

    @model_validator(mode="after")
    def _order(self) -> Normal:
        if self.low is not None and self.high is not None and self.high < self.low:
            raise ValueError(f"high ({self.high}) must be >= low ({self.low})")
        return self


class Choice(Strict):
    """One of ``values``, with probabilities ``probs`` (uniform when omitted)."""

    dist: Literal["choice"]
    values: list[float] = Field(min_length=1, max_length=MAX_DEVICES)
    probs: list[float] | None = Field(None, max_length=MAX_DEVICES)

    @model_validator(mode="after")
    def _probs(self) -> Choice:
        if self.probs is not None:
            if len(self.probs) != len(self.values):
                raise ValueError("probs must have as many entries as values")
            if any(p < 0 for p in self.probs) or not np.isclose(sum(self.probs), 1.0):
                raise ValueError("probs must be >= 0 and sum to 1")
        return self


Distribution = Annotated[Uniform | LogUniform | Normal | Choice, Field(discriminator="dist")]
_DIST: TypeAdapter[Any] = TypeAdapter(Distribution)
_FLOATS: TypeAdapter[list[float]] = TypeAdapter(
    Annotated[list[Annotated[float, Field(allow_inf_nan=False)]], Field(max_length=MAX_DEVICES)]
)
_FLOAT: TypeAdapter[float] = TypeAdapter(Annotated[float, Field(allow_inf_nan=False)])


def _per_device(value: Any) -> Any:
    """Dispatch on the input's shape so that errors speak of the form the user wrote. Strict:
    a number is an int or a float (not a bool, not text), a list is a list of numbers."""
    adapter = _DIST if isinstance(value, dict) else _FLOATS if isinstance(value, list) else _FLOAT
    try:
        return adapter.validate_python(value, strict=True)
    except ValidationError as err:
        e = err.errors(include_url=False)[0]
        where = ".".join(
            str(x) for x in e["loc"] if x not in ("uniform", "loguniform", "normal", "choice")
        )
        msg = e["msg"].removeprefix("Value error, ")
        raise ValueError(f"{where + ': ' if where else ''}{msg}") from None


#: A per-device value: one number, a list of num_devices numbers, or a distribution table.
PerDevice = Annotated[
    float | list[float] | Uniform | LogUniform | Normal | Choice,
    PlainValidator(_per_device),
    PlainSerializer(lambda v: v.model_dump() if isinstance(v, BaseModel) else v),
]


@dataclass(frozen=True)
class Bounds:
    """The range of a per-device field: ``[low, high]`` (``(low, high]`` with ``open_low``)."""

    low: float
    high: float
    unit: str
    open_low: bool = False

    def contains(self, x: float) -> bool:
        """Whether ``x`` is finite and in the range."""
        above = self.low < x if self.open_low else self.low <= x
        return math.isfinite(x) and above and x <= self.high

    def text(self) -> str:
        """``in [low, high] unit``."""
        unit = f" {self.unit}" if self.unit else ""
        return f"in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}]{unit}"


#: The range of every per-device field (docs/scenario.md, [devices], says why each): a value,
#: every value of a list, and every parameter of a distribution must lie in it; values drawn
#: from a normal distribution are checked per device when they are drawn.
DEVICE_BOUNDS: dict[str, Bounds] = {
    "cpu_hz": Bounds(1e3, 1e12, "cycle/s"),
    "cycles_per_sample": Bounds(0.0, 1e15, "cycles", open_low=True),
    "capacitance": Bounds(0.0, 1e-15, ""),
    "batch_size": Bounds(0.0, 1e7, "samples", open_low=True),
    "peak_power_w": Bounds(1e-9, 1e4, "W"),
    "energy_budget_j": Bounds(0.0, 1e6, "J"),
}


def check_bounds(spec: float | list[float] | BaseModel, bounds: Bounds) -> None:
    """Check that a validated per-device value lies in ``bounds``: the number, every number of
    the list, every parameter of the distribution (a normal's ``std`` at most the range's width).

    Raises:
        ValueError: naming the part out of range (``low must be in [...] (got ...)``).
    """

    def need(x: float, what: str) -> None:
        if not bounds.contains(x):
            raise ValueError(f"{what}must be {bounds.text()} (got {x:g})")

    if isinstance(spec, list):
        for i, x in enumerate(spec):
            need(x, f"[{i}] ")
    elif isinstance(spec, Uniform | LogUniform):
        need(spec.low, "low ")
        need(spec.high, "high ")
    elif isinstance(spec, Normal):
        need(spec.mean, "mean ")
        width = bounds.high - bounds.low
        if spec.std > width:
            raise ValueError(f"std must be at most {width:g} (got {spec.std:g})")
        for what, clip in (("low ", spec.low), ("high ", spec.high)):
            if clip is not None:
                need(clip, what)
    elif isinstance(spec, Choice):
        for i, value in enumerate(spec.values):
            need(value, f"values[{i}] ")
    elif isinstance(spec, int | float):
        need(float(spec), "")


def from_uniform(dist: Uniform | LogUniform | Choice, u: np.ndarray) -> np.ndarray:
    """The values :func:`draw` gives for generators whose next uniform double is ``u``, ``(N,)``:
    ``Generator.uniform(a, b)`` is ``a + (b - a) u`` and ``Generator.choice(values, p=probs)``
    searches ``u`` in the normalised cumulative ``probs``, each from one double, so that the
    values of a million devices are computed at once, bit for bit (``tests/test_rng.py``)."""
    if isinstance(dist, Uniform):
        return dist.low + (dist.high - dist.low) * u
    if isinstance(dist, LogUniform):
        lo, hi = fmath.log(dist.low), fmath.log(dist.high)
        return fmath.exp(lo + (hi - lo) * u)
    if dist.probs is None:
        raise ValueError("a choice without probs draws a bounded integer, not a double")
    probs = np.asarray(dist.probs, dtype=np.float64)
    cdf = probs.cumsum()
    cdf /= cdf[-1]
    idx = cdf.searchsorted(u, side="right")
    return np.asarray(dist.values, dtype=np.float64)[idx]


def draw(dist: Uniform | LogUniform | Normal | Choice, rng: np.random.Generator) -> float:
    if isinstance(dist, Uniform):
        return float(rng.uniform(dist.low, dist.high))
    if isinstance(dist, LogUniform):
        return float(fmath.exp(rng.uniform(fmath.log(dist.low), fmath.log(dist.high))))
    if isinstance(dist, Normal):
        x = float(rng.normal(dist.mean, dist.std))
        lo = -np.inf if dist.low is None else dist.low
        hi = np.inf if dist.high is None else dist.high
        return float(np.clip(x, lo, hi))
    return float(rng.choice(np.asarray(dist.values), p=dist.probs))


def per_device_values(
    spec: float | list[float] | BaseModel,
    num_devices: int,
    streams: Streams,
    index: int,
    field: str,
    bounds: Bounds,
    integer: bool = False,
) -> np.ndarray:
    """A validated per-device value resolved to ``num_devices`` values, ``(N,)``: the number
    for every device, the list, or a draw per device from stream ``device_params`` with index
    ``index`` (one index per field: its own independent draws; device ``n``'s value depends on
    the seed and ``n`` only).

    Raises:
        ScenarioError: naming ``field``: a list of the wrong length, a value that is not finite
            or out of ``bounds``.
    """
    if isinstance(spec, list):
        if len(spec) != num_devices:
            raise ScenarioError(
                field,
                f"has {len(spec)} values but network.num_devices is {num_devices}",
                "give one value, a list of num_devices values, or a distribution",
            )
        values = np.asarray(spec, dtype=np.float64)
    elif isinstance(spec, int | float):
        values = np.full(num_devices, float(spec))
    elif isinstance(spec, Uniform | LogUniform) or (
        isinstance(spec, Choice) and spec.probs is not None
    ):
        # each device's first uniform double, vectorised (bit for bit ``draw``'s)
        u = streams.device_uniforms("device_params", num_devices, 1, index)[:, 0]
        values = from_uniform(spec, u)
    else:  # normal (a ziggurat) and choice without probs (bounded integers): device by device
        assert isinstance(spec, Normal | Choice)
        values = np.array(
            [draw(spec, streams.device("device_params", n, index)) for n in range(num_devices)]
        )
    if not np.all(np.isfinite(values)):
        raise ScenarioError(field, "must be finite")
    if integer:
        values = np.rint(values)
    low_ok = values > bounds.low if bounds.open_low else values >= bounds.low
    bad = ~(low_ok & (values <= bounds.high))
    if np.any(bad):
        n = int(np.argmax(bad))
        raise ScenarioError(
            field,
            f"must be {bounds.text()} for every device (device {n} has {values[n]:g})",
            "use a value (or distribution) in the field's range (docs/scenario.md)",
        )
    return values


def lists_as_pairs(value: Any) -> Any:
    """A file's ``[[x, y], ...]`` holds lists: take them as the pairs (a ``before`` validator
    of a ``list[tuple[float, float]]`` field, also in strict validation)."""
    if isinstance(value, list):
        return [tuple(v) if isinstance(v, list) else v for v in value]
    return value
