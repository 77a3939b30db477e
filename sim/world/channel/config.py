"""The ``[channel]`` table of a scenario: path-loss model and small-scale fading model.

Each model is a table with a ``model`` key; a bare string names a model with its default
parameters (``fading = "rayleigh"`` is ``fading = { model = "rayleigh" }``). Defaults are the
paper's channel: ``128.1 + 37.6 log10(d[km])`` path loss and Rayleigh block fading.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _named(value: Any) -> Any:
    """A bare model name stands for ``{model = name}``."""
    return {"model": value} if isinstance(value, str) else value


class LogDistanceConfig(_Strict):
    """``PL[dB] = intercept_db + slope_db log10(d / reference_distance_m)``, d clipped below at
    ``network.min_distance_m``. The defaults are the paper's ``128.1 + 37.6 log10(d[km])``."""

    model: Literal["log_distance"] = "log_distance"
    intercept_db: float = Field(128.1, allow_inf_nan=False, description="PL at d_ref, dB")
    slope_db: float = Field(
        37.6, gt=0, allow_inf_nan=False, description="dB per decade (10 x exponent)"
    )
    reference_distance_m: float = Field(1000.0, gt=0, allow_inf_nan=False)


class RayleighConfig(_Strict):
    """Rayleigh block fading: ``h = g H`` with ``g ~ Exp(1)`` i.i.d. per device and slot."""

    model: Literal["rayleigh"] = "rayleigh"


class NoFadingConfig(_Strict):
    """No small-scale fading: ``h = H`` in every slot."""

    model: Literal["none"] = "none"


PathLossConfig = Annotated[LogDistanceConfig, BeforeValidator(_named), Field(discriminator="model")]
FadingConfig = Annotated[
    RayleighConfig | NoFadingConfig, BeforeValidator(_named), Field(discriminator="model")
]


class ChannelConfig(_Strict):
    """The ``[channel]`` table: ``pathloss`` and ``fading`` models."""

    pathloss: PathLossConfig = Field(default_factory=LogDistanceConfig)
    fading: FadingConfig = Field(default_factory=RayleighConfig)
