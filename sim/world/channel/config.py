"""The ``[channel]`` table of a scenario: path loss, shadowing, small-scale fading, CSI, and
recording or replaying the channel.

Each model is a table with a ``model`` key; a bare string names a model with its default
parameters (``fading = "rayleigh"`` is ``fading = { model = "rayleigh" }``). Defaults are the
paper's channel: ``128.1 + 37.6 log10(d[km])`` path loss, no shadowing, Rayleigh block fading
i.i.d. per slot, perfect CSI. Units are in the field names; ``docs/scenario.md`` documents every
field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from ...config.limits import path_problem, shorten
from ...radio.rates import SHANNON, TRUNCATED_DEFAULTS, RateModel

#: TR 38.901's UT height range for UMa is 1.5 .. 22.5 m, but above 13 m its breakpoint distance
#: uses a random effective environment height (Table 7.4.1-1, note 1), which wflsim does not
#: draw: UMa accepts 1.5 .. 13 m, where that height is 1 m with probability 1.
UMA_MAX_UT_HEIGHT_M = 13.0
#: The log-distance model's ranges (docs/scenario.md): intercept, dB; slope, dB per decade
#: (10 x the path-loss exponent, which is 2 to 6 in practice); reference distance, m.
LOG_DISTANCE_RANGES = {
    "intercept_db": (-100.0, 300.0),
    "slope_db": (0.0, 200.0),
    "reference_distance_m": (1e-3, 1e6),
}
#: Longest shadowing decorrelation distance, m (measured ones are 10 to 100 m).
MAX_DECORRELATION_M = 1e6


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _named(value: Any) -> Any:
    """A bare model name stands for ``{model = name}``."""
    return {"model": value} if isinstance(value, str) else value


# ------------------------------------------------------------------------------ path loss


class LogDistanceConfig(_Strict):
    """``PL[dB] = intercept_db + slope_db log10(d / reference_distance_m)``, d clipped below at
    ``network.min_distance_m``. The defaults are the paper's ``128.1 + 37.6 log10(d[km])``."""

    model: Literal["log_distance"] = "log_distance"
    intercept_db: float = Field(128.1, allow_inf_nan=False, description="PL at d_ref, dB")
    slope_db: float = Field(
        37.6, gt=0, allow_inf_nan=False, description="dB per decade (10 x exponent)"
    )
    reference_distance_m: float = Field(1000.0, gt=0, allow_inf_nan=False)


class UmaConfig(_Strict):
    """3GPP TR 38.901 urban macro (UMa) path loss, Table 7.4.1-1: base station at 25 m, the
    LOS, NLOS or probabilistic (Table 7.4.2-1) state, at ``carrier_ghz``."""

    model: Literal["uma"] = "uma"
    carrier_ghz: float = Field(3.5, ge=0.5, le=100.0, description="carrier frequency f_c, GHz")
    los: Literal["los", "nlos", "probabilistic"] = "probabilistic"
    ut_height_m: float = Field(1.5, ge=1.5, le=UMA_MAX_UT_HEIGHT_M, description="UT height, m")


class UmiConfig(_Strict):
    """3GPP TR 38.901 urban micro street canyon (UMi) path loss, Table 7.4.1-1: base station at
    10 m, the LOS, NLOS or probabilistic (Table 7.4.2-1) state, at ``carrier_ghz``."""

    model: Literal["umi"] = "umi"
    carrier_ghz: float = Field(3.5, ge=0.5, le=100.0, description="carrier frequency f_c, GHz")
    los: Literal["los", "nlos", "probabilistic"] = "probabilistic"
    ut_height_m: float = Field(1.5, ge=1.5, le=22.5, description="UT height, m")


PathLossConfig = Annotated[
    LogDistanceConfig | UmaConfig | UmiConfig,
    BeforeValidator(_named),
    Field(discriminator="model"),
]

# ------------------------------------------------------------------------------ shadowing


class ShadowingConfig(_Strict):
    """Log-normal shadowing: a zero-mean Gaussian in dB added to the path loss, per device and
    frame, correlated along each device's path by Gudmundson's ``exp(-d / decorrelation_m)``.
    ``"3gpp"`` takes TR 38.901's values for the path-loss model and each device's LOS state
    (sigma: Table 7.4.1-1; decorrelation distance: Table 7.5-6)."""

    sigma_db: float | Literal["3gpp"] = Field(
        8.0, description="standard deviation of the shadowing, dB, in [0, 30], or '3gpp'"
    )
    decorrelation_m: float | Literal["3gpp"] = Field(
        50.0, description="Gudmundson decorrelation distance, m, > 0, or '3gpp'"
    )

    @model_validator(mode="after")
    def _ranges(self) -> ShadowingConfig:
        s, d = self.sigma_db, self.decorrelation_m
        if isinstance(s, float) and not 0.0 <= s <= 30.0:
            raise ValueError(f"sigma_db must be in [0, 30] dB or '3gpp'; got {s}")
        if isinstance(d, float) and not (0.0 < d <= MAX_DECORRELATION_M):
            raise ValueError(
                f"decorrelation_m must be a distance in (0, {MAX_DECORRELATION_M:g}] m or "
                f"'3gpp'; got {d}"
            )
        return self

    @property
    def uses_3gpp(self) -> bool:
        """Whether a parameter is taken from TR 38.901 (needs a 3GPP path-loss model)."""
        return self.sigma_db == "3gpp" or self.decorrelation_m == "3gpp"


# ------------------------------------------------------------------------------ fading


class IidConfig(_Strict):
    """Independent small-scale fading in every slot (block fading)."""

    model: Literal["iid"] = "iid"


class GaussMarkovConfig(_Strict):
    """First-order Gauss-Markov fading: ``x_t = rho x_{t-1} + sqrt(1 - rho^2) w_t`` with
    ``rho = J0(2 pi f_d tau_0)`` per device and frame, ``f_d = v f_c / c`` from the device's
    speed at the frame start. ``carrier_ghz`` defaults to the path-loss model's carrier."""

    model: Literal["gauss_markov"] = "gauss_markov"
    carrier_ghz: float | None = Field(
        None, ge=0.1, le=100.0, description="carrier frequency for the Doppler shift, GHz"
    )


CorrelationConfig = Annotated[
    IidConfig | GaussMarkovConfig, BeforeValidator(_named), Field(discriminator="model")
]


class RayleighConfig(_Strict):
    """Rayleigh fading: ``h = g H`` with ``g ~ Exp(1)``; i.i.d. per device and slot by default."""

    model: Literal["rayleigh"] = "rayleigh"
    correlation: CorrelationConfig = Field(default_factory=IidConfig)


class RicianConfig(_Strict):
    """Rician fading with K factor ``k_db``: ``c = sqrt(K/(K+1)) + x / sqrt(K+1)``,
    ``x ~ CN(0, 1)``, ``g = |c|^2`` (unit mean)."""

    model: Literal["rician"] = "rician"
    k_db: float = Field(ge=-30.0, le=40.0, description="Rician K factor, dB")
    correlation: CorrelationConfig = Field(default_factory=IidConfig)


class NakagamiConfig(_Strict):
    """Nakagami-m fading: ``g ~ Gamma(m, 1/m)`` (unit mean); ``m = 1`` is Rayleigh."""

    model: Literal["nakagami"] = "nakagami"
    m: float = Field(ge=0.5, le=100.0, description="Nakagami shape m (>= 1/2)")
    correlation: CorrelationConfig = Field(default_factory=IidConfig)


class NoFadingConfig(_Strict):
    """No small-scale fading: ``h = H`` in every slot."""

    model: Literal["none"] = "none"


FadingConfig = Annotated[
    RayleighConfig | RicianConfig | NakagamiConfig | NoFadingConfig,
    BeforeValidator(_named),
    Field(discriminator="model"),
]

# ------------------------------------------------------------------------------ CSI


class CsiConfig(_Strict):
    """Imperfect CSI: the scheme decides on ``h_hat = H |c_hat|^2`` with
    ``c_hat = sqrt(1 - e2) c_{t-D} + sqrt(e2) w``, ``w ~ CN(0, 1)``, where ``c`` is the
    small-scale coefficient, ``e2 = error_variance`` and ``D = delay_slots``."""

    error_variance: float = Field(
        0.0, ge=0.0, le=1.0, description="normalised estimation error variance e2"
    )
    delay_slots: int = Field(0, ge=0, le=100_000, description="CSI delay D, slots")


# ------------------------------------------------------------------------------ the table


class TruncatedShannonConfig(_Strict):
    """``[channel.truncated_shannon]``: the attenuated and truncated Shannon bound of 3GPP TR
    36.942, Annex A.2 (defaults: its fit to ns-3's LTE uplink, docs/ns3.md)."""

    alpha: float = Field(TRUNCATED_DEFAULTS["alpha"], gt=0.0, le=1.0, allow_inf_nan=False)
    snr_min_db: float = Field(
        TRUNCATED_DEFAULTS["snr_min_db"], ge=-50.0, le=50.0, allow_inf_nan=False
    )
    se_max: float = Field(TRUNCATED_DEFAULTS["se_max"], gt=0.0, le=30.0, allow_inf_nan=False)


class ChannelConfig(_Strict):
    """The ``[channel]`` table."""

    pathloss: PathLossConfig = Field(default_factory=LogDistanceConfig)
    shadowing: ShadowingConfig | None = None
    fading: FadingConfig = Field(default_factory=RayleighConfig)
    csi: CsiConfig | None = None
    record: bool = False
    replay: str | None = None
    rate_model: Literal["shannon", "truncated_shannon"] = "shannon"
    truncated_shannon: TruncatedShannonConfig | None = None

    @field_validator("pathloss")
    @classmethod
    def _log_distance_ranges(cls, value: Any) -> Any:
        """The log-distance parameters in their ranges (reported on ``channel.pathloss``)."""
        if isinstance(value, LogDistanceConfig):
            for name, (lo, hi) in LOG_DISTANCE_RANGES.items():
                x = getattr(value, name)
                ok = (lo < x if name == "slope_db" else lo <= x) and x <= hi
                if not ok:
                    bracket = "(" if name == "slope_db" else "["
                    raise ValueError(f"{name} must be in {bracket}{lo:g}, {hi:g}]; got {x:g}")
        return value

    @field_validator("replay")
    @classmethod
    def _replay_path(cls, value: str | None) -> str | None:
        problem = None if value is None or not value.strip() else path_problem(value)
        if problem is not None:
            raise ValueError(f"replay {problem} (got {shorten(str(value))!r})")
        return value

    @model_validator(mode="after")
    def _combinations(self) -> ChannelConfig:
        pl = self.pathloss
        carrier = getattr(pl, "carrier_ghz", None)
        if self.shadowing is not None and self.shadowing.uses_3gpp and carrier is None:
            raise ValueError(
                "shadowing = '3gpp' takes TR 38.901's values, which need pathloss "
                "'uma' or 'umi'; give sigma_db and decorrelation_m in dB and m instead"
            )
        corr = getattr(self.fading, "correlation", None)
        if isinstance(corr, GaussMarkovConfig):
            if corr.carrier_ghz is None and carrier is None:
                raise ValueError(
                    "fading.correlation.carrier_ghz is needed for the Doppler shift "
                    "(the log_distance path loss has no carrier frequency), e.g. 2.0"
                )
            if corr.carrier_ghz is not None and carrier is not None and corr.carrier_ghz != carrier:
                raise ValueError(
                    f"fading.correlation.carrier_ghz ({corr.carrier_ghz}) differs from "
                    f"pathloss.carrier_ghz ({carrier}); remove one of them"
                )
        if self.replay is not None and not self.replay.strip():
            raise ValueError("replay must be a non-empty path to a channel .parquet table")
        if self.truncated_shannon is not None and self.rate_model != "truncated_shannon":
            raise ValueError(
                'truncated_shannon sets rate_model = "truncated_shannon"\'s parameters: remove '
                '[channel.truncated_shannon], or set rate_model = "truncated_shannon"'
            )
        return self

    def rate(self) -> RateModel:
        """The resolved rate model (:class:`~wflsim.sim.radio.rates.RateModel`)."""
        if self.rate_model == "shannon":
            return SHANNON
        t = self.truncated_shannon or TruncatedShannonConfig()
        return RateModel("truncated_shannon", t.alpha, 10.0 ** (t.snr_min_db / 10.0), t.se_max)

    @property
    def carrier_ghz(self) -> float | None:
        """The carrier frequency of the Doppler shift, GHz (None without time correlation)."""
        corr = getattr(self.fading, "correlation", None)
        if not isinstance(corr, GaussMarkovConfig):
            return None
        return corr.carrier_ghz if corr.carrier_ghz is not None else self.pathloss_carrier_ghz

    @property
    def pathloss_carrier_ghz(self) -> float | None:
        """The path-loss model's carrier frequency, GHz (None for log-distance)."""
        return getattr(self.pathloss, "carrier_ghz", None)
