"""The scenario's ``[privacy]`` table: client-level differential privacy for every update a
device sends (docs/privacy.md). Without the table a run is exactly what it was."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ..config.distributions import Strict

_Float = Annotated[float, Field(allow_inf_nan=False)]

#: Where the Gaussian noise is added (``privacy.mechanism``).
Mechanism = Literal["central", "local", "over_the_air"]
#: The accountants (``privacy.accountant``): Renyi DP, or privacy loss distributions.
AccountantName = Literal["rdp", "pld"]
#: Over the air, who adds the noise the receiver's own does not reach (``privacy.air_noise``).
AirNoise = Literal["receiver", "devices", "channel_only"]
#: Over the air, how the powers meet the target (``privacy.air_power``).
AirPower = Literal["scheme", "privacy"]

#: The largest noise multiplier a calibration may choose: noise this far above the clip leaves
#: the update no signal (an aggregate of 1,000 updates at z = 1e4 has an SNR of 1e-5).
MAX_NOISE_MULTIPLIER = 1e4


class PrivacyConfig(Strict):
    """Client-level DP: each update a device sends is clipped to ``clip_norm`` (L2, update
    units) and gets Gaussian noise of standard deviation ``z C`` (``z``: the noise multiplier)
    where ``mechanism`` says; every device's privacy spent is accounted per applied update."""

    mechanism: Mechanism = Field(
        description="central: the server adds the noise to the aggregate (a trusted server); "
        "local: each device adds it to its update before sending (no trusted party); "
        'over_the_air: [uplink] mode = "aircomp" only, the receiver\'s noise counts toward the '
        "mechanism and only what is missing is added (air_noise)",
    )
    clip_norm: _Float = Field(
        gt=0.0,
        le=1e12,
        description="C: the L2 norm every sent update is clipped to, in update units (the "
        "gradient's, or the pseudo-gradient's after local steps); under clipping = "
        '"adaptive" the initial clip',
    )
    clipping: Literal["fixed", "adaptive"] = Field(
        "fixed",
        description="fixed: C throughout; adaptive: C follows the target_quantile of the update "
        "norms, geometric update with a noised clipped count (Andrew et al., NeurIPS 2021)",
    )
    target_quantile: _Float = Field(
        0.5,
        gt=0.0,
        lt=1.0,
        description="adaptive: gamma, the fraction of updates that should be unclipped",
    )
    clip_learning_rate: _Float = Field(
        0.2,
        gt=0.0,
        le=10.0,
        description="adaptive: eta_C, C <- C exp(-eta_C (b - gamma)) after each server step",
    )
    clipped_count_std: _Float | None = Field(
        None,
        gt=0.0,
        description="adaptive: sigma_b, the noise on the count of unclipped updates (default: "
        "the number of devices / 20, Andrew et al.'s choice); part of the privacy budget",
    )
    noise_multiplier: _Float | None = Field(
        None,
        gt=0.0,
        le=MAX_NOISE_MULTIPLIER,
        description="z: every applied update gets noise of standard deviation at least z C "
        "(over the air: the target the receiver's noise and the added noise reach); give it or "
        "target_epsilon",
    )
    target_epsilon: _Float | None = Field(
        None,
        gt=0.0,
        le=1e6,
        description="instead of noise_multiplier: the epsilon no device may exceed over the run, "
        "at delta; z is calibrated before the run for the most updates a device can take part "
        "in",
    )
    delta: _Float = Field(
        1e-5, gt=0.0, lt=1.0, description="delta of (epsilon, delta)-DP, per device"
    )
    accountant: AccountantName = Field(
        "rdp",
        description="rdp: Renyi DP (Mironov 2017) converted to (epsilon, delta); pld: privacy "
        "loss distributions (tighter, slower); both from Google's dp-accounting",
    )
    epsilon_budget: _Float | None = Field(
        None,
        gt=0.0,
        le=1e6,
        description="stop a device before an update would take its epsilon past this (it takes "
        "part no more, as a device offline); default: target_epsilon when given, else none",
    )
    amplification: Literal["none", "uniform_selection"] = Field(
        "none",
        description="none: every update a device takes part in counts in full; "
        'uniform_selection: amplification by subsampling, [strategy.selection] rule = "uniform" '
        "with central noise only (docs/decisions.md says what is assumed)",
    )
    air_noise: AirNoise | None = Field(
        None,
        description="over_the_air only: who adds the noise the receiver's own does not reach: "
        "receiver (the default), devices (each its share, its energy charged) or channel_only "
        "(nothing added: the receiver's noise is the mechanism, its epsilon measured)",
    )
    air_power: AirPower | None = Field(
        None,
        description="over_the_air only: scheme (the power rule's powers; the default) or "
        "privacy (every power scaled down until the receiver's noise alone meets z, Liu and "
        "Simeone 2021: nothing added, energy saved)",
    )

    @model_validator(mode="after")
    def _combinations(self) -> PrivacyConfig:
        over_air = self.mechanism == "over_the_air"
        measured = over_air and self.air_noise == "channel_only"
        if self.noise_multiplier is not None and self.target_epsilon is not None:
            raise ValueError(
                "give noise_multiplier or target_epsilon, not both: target_epsilon calibrates "
                "the noise multiplier before the run"
            )
        if self.noise_multiplier is None and self.target_epsilon is None and not measured:
            raise ValueError(
                "the mechanism needs noise_multiplier (z, the noise's standard deviation over "
                "the clip) or target_epsilon (z calibrated before the run): add one"
            )
        if measured and (self.noise_multiplier is not None or self.target_epsilon is not None):
            raise ValueError(
                'air_noise = "channel_only" adds nothing: the receiver\'s noise is what it is '
                "and each device's epsilon is measured; remove noise_multiplier / "
                'target_epsilon, or let the receiver fill the gap (air_noise = "receiver")'
            )
        if not over_air:
            for name in ("air_noise", "air_power"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f'{name} applies to mechanism = "over_the_air", not to "{self.mechanism}"'
                        ": remove it"
                    )
        if measured and self.air_power == "privacy":
            raise ValueError(
                'air_power = "privacy" scales the powers to meet z, which air_noise = '
                '"channel_only" does not have: use air_noise = "receiver" with noise_multiplier '
                "or target_epsilon"
            )
        if over_air and self.clipping == "adaptive":
            raise ValueError(
                'clipping = "adaptive" needs the noised count of unclipped updates, a second '
                "release with its own noise: over the air it would be one more symbol in the sum "
                "at the receiver's noise, which the radio does not send; use clipping = "
                '"fixed" (or mechanism = "central" / "local")'
            )
        if self.clipping == "fixed":
            for name in ("target_quantile", "clip_learning_rate", "clipped_count_std"):
                if name in self.model_fields_set:
                    raise ValueError(
                        f'{name} applies to clipping = "adaptive", not "fixed": remove it'
                    )
        if self.amplification == "uniform_selection" and self.mechanism != "central":
            raise ValueError(
                'amplification = "uniform_selection" hides who took part, which only central '
                f'noise does: under "{self.mechanism}" the receiver sees every sender: use '
                'amplification = "none"'
            )
        if (
            self.epsilon_budget is not None
            and self.target_epsilon is not None
            and self.epsilon_budget > self.target_epsilon
        ):
            raise ValueError(
                f"epsilon_budget {self.epsilon_budget:g} exceeds target_epsilon "
                f"{self.target_epsilon:g}, which the run is calibrated not to pass: lower it or "
                "remove it (it defaults to target_epsilon)"
            )
        return self

    @property
    def budget(self) -> float | None:
        """The epsilon past which a device stops (``epsilon_budget``, else ``target_epsilon``)."""
        return self.epsilon_budget if self.epsilon_budget is not None else self.target_epsilon
