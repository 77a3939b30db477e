"""Per-device values of a scenario: one number, a list of ``num_devices`` numbers, or a
distribution table such as ``{ dist = "uniform", low = 0.30, high = 0.45 }``.

Each device draws each distributed field from its own random stream
(``streams.device("device_params", n, field_index)``), so adding a device never changes the
values of the others.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    model_validator,
)

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


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
    low: float | None = None
    high: float | None = None


class Choice(Strict):
    """One of ``values``, with probabilities ``probs`` (uniform when omitted)."""

    dist: Literal["choice"]
    values: list[float] = Field(min_length=1)
    probs: list[float] | None = None

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
_FLOATS = TypeAdapter(list[Annotated[float, Field(allow_inf_nan=False)]])
_FLOAT: TypeAdapter[float] = TypeAdapter(Annotated[float, Field(allow_inf_nan=False)])


def _per_device(value: Any) -> Any:
    """Dispatch on the input's shape so that errors speak of the form the user wrote."""
    adapter = _DIST if isinstance(value, dict) else _FLOATS if isinstance(value, list) else _FLOAT
    try:
        return adapter.validate_python(value)
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


def draw(dist: Uniform | LogUniform | Normal | Choice, rng: np.random.Generator) -> float:
    if isinstance(dist, Uniform):
        return float(rng.uniform(dist.low, dist.high))
    if isinstance(dist, LogUniform):
        return float(np.exp(rng.uniform(np.log(dist.low), np.log(dist.high))))
    if isinstance(dist, Normal):
        x = float(rng.normal(dist.mean, dist.std))
        lo = -np.inf if dist.low is None else dist.low
        hi = np.inf if dist.high is None else dist.high
        return float(np.clip(x, lo, hi))
    return float(rng.choice(np.asarray(dist.values), p=dist.probs))
