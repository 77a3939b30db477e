"""Server strategies: how the server turns a step's aggregated uploads into a new model, without
torch.

A scenario's ``[strategy]`` table names a strategy (``name``) and gives its parameters (the
table's other fields). This module holds what validation, the engine and a network-only run need
of a strategy: its entry in :data:`wflsim.sim.registry.STRATEGIES` (:class:`StrategyInfo`: a
strict pydantic model of its parameters and a one-line description with its equation), and the
record the engine hands the learner (:class:`StrategySpec`: the name and the parameters). The
learner side implements each strategy under the same name (``wflsim.models.learner.strategies``:
a ``Strategy`` class with ``server_step(w, g, lr)``; its builders are
``wflsim.models.registry.STRATEGY_BUILDERS``).

The built-in strategies are FedAvg and the server optimisers of Reddi et al., "Adaptive Federated
Optimization" (ICLR 2021), Algorithm 2. With ``g`` the step's aggregated pseudo-gradient (the
update rule's aggregate) and ``lr`` the step's rate, the server's move is ``Delta = -lr g``
(FedAvg's); the optimisers treat ``Delta`` as a gradient step to take with momentum or adaptive
per-coordinate rates. A step with no upload leaves the model and the optimiser's state as they
are.

Client-side strategies change what a device computes in its local steps and what it uploads
(``fedprox``: Li et al., "Federated Optimization in Heterogeneous Networks", MLSys 2020). What
that costs the device is declared here, without torch (:class:`StrategyCosts`: extra CPU cycles
per local step and a factor on the upload's payload); the network side charges it with the same
physics as the gradient's cycles and the model's bits (``wflsim.app.prepare.resolve_system``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from .registry_base import Registry


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


class FedProxParams(StrategyParams):
    """``fedprox``: a proximal term in the devices' local objective."""

    mu: _Float = Field(
        0.01,
        ge=0,
        le=1e6,
        description="proximal weight mu: each local step's gradient gets mu (w_e - w_0) added "
        "(0: FedAvg)",
    )


@dataclass(frozen=True)
class StrategyCosts:
    """What a strategy costs a device beyond FedAvg's local steps and upload, without torch.

    ``cycles_per_param``: extra CPU cycles per local step per model parameter (the step's extra
    cycles are ``cycles_per_param D`` on the full model, scaled like the gradient's ``c B`` by the
    compute fraction ``u`` a scheme plans: the extra arithmetic runs on the coordinates the
    device trains). ``upload_factor``: what the upload's payload bits are multiplied by (2: a
    second ``D``-vector sent with the model's, compressed as it is).
    ``cycles_per_param_per_update``: extra CPU cycles per model parameter once per update
    (SCAFFOLD's control-variate arithmetic), charged as ``cycles_per_param_per_update D / E_n``
    per local step. The defaults cost nothing and leave every number as it is.
    """

    cycles_per_param: float = 0.0
    upload_factor: float = 1.0
    cycles_per_param_per_update: float = 0.0

    def __post_init__(self) -> None:
        for what in ("cycles_per_param", "cycles_per_param_per_update"):
            if not (0.0 <= getattr(self, what) < float("inf")):
                raise ValueError(f"{what} must be finite and >= 0")
        if not (1.0 <= self.upload_factor < float("inf")):
            raise ValueError("upload_factor must be finite and >= 1")

    def extra_cycles_per_step(self, num_params: int, local_steps: Any = 1) -> Any:
        """The extra CPU cycles of one local step on a model of ``D = num_params`` parameters:
        ``cycles_per_param D`` plus the update's ``cycles_per_param_per_update D`` spread over
        its ``E_n = local_steps`` steps (a float for a scalar ``local_steps``, else ``(N,)``)."""
        per_step = self.cycles_per_param * float(num_params)
        if not self.cycles_per_param_per_update:
            return per_step
        steps = np.asarray(local_steps, dtype=np.float64)
        out = per_step + self.cycles_per_param_per_update * float(num_params) / steps
        return float(out) if out.ndim == 0 else out


#: FedAvg's costs: nothing beyond its local steps and the model's upload.
NO_EXTRA_COSTS = StrategyCosts()


@dataclass(frozen=True)
class StrategyInfo:
    """What a scenario may ask of a server strategy under one name."""

    #: the strict pydantic model of its ``[strategy]`` parameters
    params: type[BaseModel]
    #: one line: what it does, with its equation
    description: str
    #: what it costs a device beyond FedAvg (none for server-side strategies)
    costs: StrategyCosts = NO_EXTRA_COSTS


def builtin_strategies() -> dict[str, StrategyInfo]:
    """The built-in entries of :data:`wflsim.sim.registry.STRATEGIES` (implemented in
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
        # client side (wflsim.models.learner.strategies_client)
        "fedprox": StrategyInfo(
            FedProxParams,
            "FedProx: local steps on F_n(w) + (mu / 2) |w - w_0|^2, g_e = grad F_n(w_e) + "
            "mu (w_e - w_0); server step as FedAvg",
            # per trained coordinate and step: w_e - w_0 (one subtraction), then
            # g + mu * diff (one fused multiply-add)
            StrategyCosts(cycles_per_param=2.0),
        ),
        "scaffold": StrategyInfo(
            NoParams,
            "SCAFFOLD (Karimireddy et al. 2020, option II): local steps on g_e + c - c_i; "
            "dc_i = upload / E_i - c is sent with the upload (payload x2); on arrival "
            "c_i += dc_i, c += sum dc_i / N; server step as FedAvg",
            # per trained coordinate: g + (c - c_i) each step (one add); per update
            # c - c_i (one subtraction), upload / E - c (a multiply and a subtraction) and
            # c_i + dc_i (one add); the control-variate update goes with the model's
            StrategyCosts(cycles_per_param=1.0, upload_factor=2.0, cycles_per_param_per_update=4.0),
        ),
    }


#: The strategy of a scenario without a ``[strategy]`` table.
DEFAULT = "fedavg"


@dataclass(frozen=True)
class StrategySpec:
    """A server strategy as the engine hands it to the learner: its name (a key of the table of
    strategies, :data:`wflsim.sim.registry.STRATEGIES`) and its parameters (validated by the
    strategy's parameter model). Checked against that table where a run starts
    (:meth:`entry`)."""

    name: str = DEFAULT
    params: Mapping[str, Any] = field(default_factory=dict)

    def entry(self, strategies: Registry[StrategyInfo]) -> StrategyInfo:
        """This strategy's entry in ``strategies`` (the table of strategies).

        Raises:
            ValueError: a name ``strategies`` does not hold.
        """
        if self.name not in strategies:
            raise ValueError(
                f"unknown strategy {self.name!r}; known: {', '.join(strategies.names())}"
            )
        return strategies[self.name]

    def validated(self, strategies: Registry[StrategyInfo]) -> BaseModel:
        """The parameters as the strategy's parameter model in ``strategies`` (strict: unknown
        fields, wrong types and values out of range raise pydantic's ValidationError)."""
        return self.entry(strategies).params.model_validate(dict(self.params), strict=True)
