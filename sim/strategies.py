"""Server strategies: how the server turns a step's aggregated uploads into a new model, without
torch.

A scenario's ``[strategy]`` table names a strategy (``name``) and gives its parameters (the
table's other fields). This module holds what validation, the engine and a network-only run need
of a strategy: its entry in :data:`STRATEGIES` (:class:`StrategyInfo`: a strict pydantic model of
its parameters and a one-line description with its equation), and the record the engine hands
the learner (:class:`StrategySpec`: the name and the parameters). The learner side implements each
strategy under the same name (``wflsim.models.learner.strategies``: a ``Strategy`` class with
``server_step(w, g, lr)``; its builders are ``wflsim.models.registry.STRATEGY_BUILDERS``).

The built-in strategies are FedAvg and the server optimisers of Reddi et al., "Adaptive Federated
Optimization" (ICLR 2021), Algorithm 2. With ``g`` the step's aggregated pseudo-gradient (the
update rule's aggregate) and ``lr`` the step's rate, the server's move is ``Delta = -lr g``
(FedAvg's); the optimisers treat ``Delta`` as a gradient step to take with momentum or adaptive
per-coordinate rates. A step with no upload leaves the model and the optimiser's state as they
are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from . import registry


class StrategyParams(BaseModel):
    """Base of a strategy's parameter model: unknown fields are errors (as in every table)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class NoParams(StrategyParams):
    """A strategy without parameters (``fedavg``, and one registered with ``params=None``)."""


#: A finite float (bounds come with each field).
_Float = Annotated[float, Field(allow_inf_nan=False)]


class FedAvgMParams(StrategyParams):
    """``fedavgm``: server momentum."""

    eta: _Float = Field(1.0, gt=0, le=1e6, description="server learning rate eta")
    beta: _Float = Field(0.9, ge=0, lt=1, description="momentum beta (0: FedAvg scaled by eta)")


class FedAdagradParams(StrategyParams):
    """``fedadagrad``: adaptive rates from the sum of squared moves."""

    eta: _Float = Field(0.01, gt=0, le=1e6, description="server learning rate eta")
    b1: _Float = Field(0.9, ge=0, lt=1, description="first-moment decay beta_1")
    tau: _Float = Field(
        1e-3, gt=0, le=1e6, description="adaptivity tau: added to sqrt(v); v starts at tau^2"
    )


class FedAdamParams(FedAdagradParams):
    """``fedadam`` and ``fedyogi``: adaptive rates from a decaying second moment."""

    b2: _Float = Field(0.99, ge=0, lt=1, description="second-moment decay beta_2")


class TrimmedMeanParams(StrategyParams):
    """``fedtrimmedavg``: the coordinate-wise trimmed mean."""

    beta: _Float = Field(
        0.1,
        ge=0,
        lt=0.5,
        description="fraction trimmed at each end: the floor(beta c) largest and smallest of a "
        "coordinate's c values are dropped",
    )


class KrumParams(StrategyParams):
    """``krum``: Krum (``m = 1``) and Multi-Krum (``m > 1``)."""

    f: int = Field(0, ge=0, le=1_000_000, description="Byzantine uploads assumed f")
    m: int = Field(1, ge=1, le=1_000_000, description="uploads kept m (1: Krum; more: Multi-Krum)")


@dataclass(frozen=True)
class StrategyInfo:
    """What a scenario may ask of a server strategy under one name."""

    #: the strict pydantic model of its ``[strategy]`` parameters
    params: type[BaseModel]
    #: one line: what it does, with its equation
    description: str


def builtin_strategies() -> dict[str, StrategyInfo]:
    """The built-in entries of :data:`STRATEGIES` (implemented in
    ``wflsim.models.learner.strategies``)."""
    adaptive = "m = b1 m + (1 - b1) Delta; {v}; w <- w + eta m / (sqrt(v) + tau); v starts at tau^2"
    return {
        "fedavg": StrategyInfo(NoParams, "FedAvg: w <- w - lr g (the paper's eq. 4)"),
        "fedavgm": StrategyInfo(
            FedAvgMParams, "server momentum: m = beta m + Delta; w <- w + eta m"
        ),
        "fedadagrad": StrategyInfo(
            FedAdagradParams, "FedAdagrad: " + adaptive.format(v="v = v + Delta^2")
        ),
        "fedadam": StrategyInfo(
            FedAdamParams,
            "FedAdam: " + adaptive.format(v="v = b2 v + (1 - b2) Delta^2"),
        ),
        "fedyogi": StrategyInfo(
            FedAdamParams,
            "FedYogi: " + adaptive.format(v="v = v - (1 - b2) Delta^2 sign(v - Delta^2)"),
        ),
        "fedmedian": StrategyInfo(
            NoParams, "coordinate-wise median of the uploads (Yin et al. 2018); w <- w - lr g"
        ),
        "fedtrimmedavg": StrategyInfo(
            TrimmedMeanParams,
            "coordinate-wise mean without the floor(beta c) largest and smallest of c values "
            "(Yin et al. 2018); w <- w - lr g",
        ),
        "krum": StrategyInfo(
            KrumParams,
            "(Multi-)Krum (Blanchard et al. 2017): the rule's aggregate of the m uploads whose "
            "k - f - 2 nearest others are closest; w <- w - lr g",
        ),
        "fednova": StrategyInfo(
            NoParams,
            "FedNova (Wang et al. 2020): g = sum_i p_i E_i * rule mean of upload_i / E_i; "
            "w <- w - lr g",
        ),
    }


#: Every server strategy: :data:`wflsim.sim.registry.STRATEGIES`, the built-in ones of
#: :func:`builtin_strategies` and those registered from Python (each implemented under the same
#: name in ``wflsim.models.registry.STRATEGY_BUILDERS``).
STRATEGIES = registry.STRATEGIES

#: The strategy of a scenario without a ``[strategy]`` table.
DEFAULT = "fedavg"


@dataclass(frozen=True)
class StrategySpec:
    """A server strategy as the engine hands it to the learner: its name (a key of
    :data:`STRATEGIES`) and its parameters (validated by the strategy's parameter model)."""

    name: str = DEFAULT
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {self.name!r}; known: {', '.join(STRATEGIES.names())}"
            )

    def validated(self) -> BaseModel:
        """The parameters as the strategy's parameter model (strict: unknown fields, wrong
        types and values out of range raise pydantic's ValidationError)."""
        return STRATEGIES[self.name].params.model_validate(dict(self.params), strict=True)
