"""Server strategies, the learner side: how the server turns a step's aggregated uploads into a
new model (``[strategy]``, :mod:`wflsim.sim.strategies`).

A :class:`Strategy` takes the server's step: ``server_step(w, g, lr) -> w_next`` with ``w`` the
global model ``(D,)`` float32, ``g`` the step's aggregated pseudo-gradient ``(D,)`` (the update
rule's aggregate: eq. 3's weighted mean, or the stale server's staleness-weighted one) and ``lr``
the step's scalar rate (``lr_t`` in sync; ``lr_t server_lr`` in semi_sync and async). It keeps
its own state (momenta, second moments) on the learner's torch device and saves it as NumPy
arrays for checkpoints. A step with no upload does not reach it: the learner leaves the model and
the strategy as they are.

The built-in strategies are FedAvg and Algorithm 2 of Reddi et al., "Adaptive Federated
Optimization" (ICLR 2021), with the server's FedAvg move ``Delta = -lr g`` as the pseudo-gradient
step: server momentum (``fedavgm``) and the adaptive ``fedadagrad``, ``fedadam`` and ``fedyogi``
(no bias correction, as in the paper; ``v`` starts at ``tau^2``, the paper's ``v_-1 >= tau^2``).

Before the step, :meth:`Strategy.aggregate` forms ``g`` from the step's uploads; by default it
is the update rule's own aggregate, handed over unchanged (the robust aggregates and FedNova
override it: :mod:`wflsim.models.learner.strategies_aggregation`).

The seam is the class: later strategies that change what devices optimise or send, how the
server aggregates or which devices take part add hooks to :class:`Strategy` with defaults that
leave today's behaviour, so that every strategy here keeps working unchanged. The devices' local
steps have one (:meth:`Strategy.local_correction`: what each step adds to the gradient; the
client-side strategies of ``wflsim.models.learner.strategies_client`` use it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
from pydantic import BaseModel

from wflsim.sim.registry import STRATEGIES
from wflsim.sim.strategies import FedAdagradParams, FedAdamParams, FedAvgMParams


class RuleMean(Protocol):
    """The update rule's aggregate of a subset of a step's uploads (:meth:`Strategy.aggregate`).

    ``rule_mean(rows, values=None) -> g`` ``(D,)``: ``rows`` the uploads' rows (ints, a range,
    an int64 array or tensor; not empty), ``values`` ``(len(rows), D)`` to aggregate in their
    place (None: the uploads themselves). Every row in order and no ``values`` is exactly the
    rule's call without strategies (same tensors), so such a call leaves traces bit for bit.
    """

    def __call__(self, rows: Any, values: torch.Tensor | None = None) -> torch.Tensor: ...


#: ``call(index, values) -> g``: the rule's aggregate of ``values``, the rows ``index`` (None:
#: every row, the step's own tensors) of a step's uploads.
RuleCall = Callable[[np.ndarray | None, torch.Tensor], torch.Tensor]


def rule_mean_over(uploads: torch.Tensor, call: RuleCall) -> RuleMean:
    """The :class:`RuleMean` of a step's ``uploads`` ``(k, D)``: ``call(None, uploads)`` for
    every row in order (the rule's call of today, unchanged), ``call(index, uploads[index])``
    (or ``values``) for a subset."""
    k = int(uploads.shape[0])

    def rule_mean(rows: Any, values: torch.Tensor | None = None) -> torch.Tensor:
        if isinstance(rows, torch.Tensor):
            rows = rows.cpu().numpy()
        index = np.asarray(rows, dtype=np.int64).reshape(-1)
        if index.size == 0:
            raise ValueError("rule_mean needs at least one row")
        if index.min() < 0 or index.max() >= k:
            raise ValueError(f"rows outside [0, {k})")
        if values is not None and values.shape != (index.size, uploads.shape[1]):
            raise ValueError(
                f"values of shape {tuple(values.shape)} for {index.size} rows of "
                f"{uploads.shape[1]} parameters"
            )
        if index.size == k and np.array_equal(index, np.arange(k)):
            return call(None, uploads if values is None else values)
        pick = torch.as_tensor(index, device=uploads.device)
        return call(index, uploads[pick] if values is None else values)

    return rule_mean


def wants_upload_mask(strategy: Strategy, rule: Any) -> bool:
    """Whether ``strategy`` gets the ``uploaded`` masks under ``rule``: it asks for them
    (:attr:`Strategy.needs_upload_mask`) and the rule averages each coordinate over the devices
    that sent it (its ``aggregation`` is ``"per_coordinate"``)."""
    return strategy.needs_upload_mask and getattr(rule, "aggregation", None) == "per_coordinate"


@dataclass(frozen=True)
class StrategySettings:
    """What a strategy is built for: the model's parameter count ``D``, the torch device its
    state lives on and the number of devices ``N`` (None: not known, e.g. a strategy built
    outside a run)."""

    num_params: int
    device: torch.device
    num_devices: int | None = None


class Strategy:
    """How the server turns a step's aggregated uploads into a new model (the module doc).

    Subclass it and override :meth:`server_step`; a strategy with state keeps it in tensors it
    creates in ``__init__`` and overrides :meth:`state_dict` and :meth:`load_state_dict`. Register
    the class with ``wflsim.register_strategy(name, cls, params=Model)``; a scenario then names it
    in ``[strategy] name``, and the learner builds it as ``cls(params, settings)``: ``params`` an
    instance of ``Model`` (the ``[strategy]`` table's other fields, validated), ``settings`` a
    :class:`StrategySettings`.

    Attributes:
        params: the validated ``[strategy]`` parameters.
        num_params: ``D``.
        device: the torch device of the model and of the strategy's state.
    """

    #: the name it is registered under (informative)
    name: ClassVar[str] = ""
    #: whether :meth:`aggregate` wants the ``uploaded`` masks of a per-coordinate rule
    needs_upload_mask: ClassVar[bool] = False
    #: the ``[strategy] name`` it was built for (:func:`build_strategy`; errors name it)
    registered_name: str | None = None

    def __init__(self, params: BaseModel, settings: StrategySettings) -> None:
        self.params = params
        self.num_params = int(settings.num_params)
        self.device = settings.device

    def aggregate(
        self,
        uploads: torch.Tensor,
        weights: torch.Tensor,
        steps: np.ndarray,
        uploaded: torch.Tensor | None,
        rule_mean: RuleMean,
    ) -> torch.Tensor:
        """The step's aggregated pseudo-gradient ``g`` ``(D,)`` that :meth:`server_step` takes:
        the update rule's own aggregate of every upload here (eq. 3, or the stale server's).

        Args:
            uploads: ``(k, D)`` the step's uploads as the update rule forms them (in semi_sync
                and async already scaled by their staleness weights).
            weights: ``(k,)`` float32, the devices' ``B_n``.
            steps: ``(k,)`` int64 numpy, the devices' local steps ``E_n``.
            uploaded: ``(k, D)`` bool, the coordinates each device sent, when the strategy asks
                for them (:attr:`needs_upload_mask`) and the rule averages each coordinate over
                the devices that sent it; None otherwise (every row counts in every coordinate,
                an entry a device did not send as 0).
            rule_mean: ``rule_mean(rows, values=None) -> (D,)``: the rule's aggregate of the
                rows ``rows`` (ints into the ``k`` uploads), of ``values`` ``(len(rows), D)`` in
                their place when given (:class:`RuleMean`).
        """
        return rule_mean(range(uploads.shape[0]))

    def server_step(self, w: torch.Tensor, g: torch.Tensor, lr: float) -> torch.Tensor:
        """The next global model from ``w`` ``(D,)``, the aggregated pseudo-gradient ``g``
        ``(D,)`` and the step's rate ``lr``: FedAvg's ``w - lr g`` here.

        Return a new tensor (``w`` is the current model, which the learner may still hold as
        an older version: never change it in place).
        """
        return w - lr * g

    # -- the devices' local steps (client side)
    def local_correction(self, w_e: torch.Tensor, w_0: torch.Tensor) -> torch.Tensor | None:
        """What each local step adds to the devices' gradients (``wflsim.models.learner.local``):
        ``w_e`` ``(n, D)`` the devices' models at the step, ``w_0`` the models they started from
        (the update rule's local parameters, ``(D,)`` shared or ``(n, D)``); ``(n, D)``, or None
        to add nothing (here: the plain gradient, FedAvg's steps). Applied on the coordinates
        the devices train (the mask comes after); never change ``w_e`` or ``w_0`` in place."""
        return None

    # -- state the devices keep between their updates (SCAFFOLD's control variates)
    #: whether the devices keep a ``(D,)`` vector each between their updates that their local
    #: steps read (:meth:`device_rows`); the learner then calls :meth:`arrived`
    device_vectors: ClassVar[bool] = False

    def version_state(self) -> Any:
        """What a device downloads with the model besides it (None: nothing), taken when a model
        version is materialised and handed back, for each update that started on the version,
        to :meth:`local_drift` and :meth:`arrived`. Never change what it returns later in place
        (replace the tensors, as the learner replaces its model)."""
        return None

    def version_state_dict(self, at: Any) -> dict[str, Any]:
        """:meth:`version_state`'s value ``at`` as NumPy arrays, for a checkpoint of an update
        in flight (nothing here)."""
        return {}

    def version_state_from(self, state: Mapping[str, Any]) -> Any:
        """The value :meth:`version_state_dict` saved (None here)."""
        return None

    def device_rows(self, devices: np.ndarray) -> torch.Tensor | None:
        """The vectors devices ``devices`` keep now, ``(n, D)`` (a copy; None: none kept)."""
        return None

    def local_drift(
        self, devices: np.ndarray, at: Sequence[Any], rows: torch.Tensor | None
    ) -> torch.Tensor | None:
        """A constant each local step of devices ``devices`` adds to its gradient (before the
        update rule's mask), ``(n, D)``, or None to add nothing (here). ``at[i]``: the
        :meth:`version_state` device ``i`` downloaded; ``rows``: its :meth:`device_rows` as
        the update started (None when the strategy keeps none)."""
        return None

    def arrived(
        self,
        devices: np.ndarray,
        uploads: torch.Tensor,
        steps: np.ndarray,
        trained: torch.Tensor | None,
        at: Sequence[Any],
        rows: torch.Tensor | None = None,
    ) -> None:
        """After the server's step with these uploads (devices ``devices``, ``(k,)`` ints; their
        uploads ``(k, D)`` as the update rule formed them, before any staleness weight; their
        local steps ``E`` ``(k,)``; ``trained`` ``(k, D)`` bool, the coordinates each trained,
        None: all; ``at`` the :meth:`version_state` each downloaded; ``rows`` ``(k, D)`` the
        :meth:`device_rows` each update started from, None when they are the rows of now, as in
        ``sync``): only for strategies with :attr:`device_vectors` (nothing here)."""

    # -- what it decided (the trace's strategy rows)
    def step_columns(self, uploads: torch.Tensor, local_lr: np.ndarray) -> dict[str, np.ndarray]:
        """What the strategy decided about each upload of the step just taken, for the trace's
        ``strategy`` rows: trace columns (``kept``, ``prox_term``, ``control_update_norm``;
        ``wflsim.sim.trace``) to ``(k,)`` arrays, in the order of the step's uploads ``(k, D)``
        (as the update rule formed them, before staleness weights) whose local steps ran at
        ``local_lr`` ``(k,)``. Nothing here: the rows then say every upload was kept."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """The strategy's state as NumPy arrays and plain numbers (none here)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (a strategy built with the same parameters and ``D``)."""

    # -- helpers for subclasses
    def zeros(self) -> torch.Tensor:
        """A ``(D,)`` float32 tensor of zeros on :attr:`device`."""
        return torch.zeros(self.num_params, dtype=torch.float32, device=self.device)

    def tensor_from(self, value: Any, what: str) -> torch.Tensor:
        """A saved ``(D,)`` array as a float32 tensor on :attr:`device`.

        Raises:
            ValueError: its shape is not ``(D,)`` (``what`` names it).
        """
        arr = np.asarray(value)
        if arr.shape != (self.num_params,):
            raise ValueError(
                f"saved strategy state {what!r} has shape {arr.shape}, expected "
                f"({self.num_params},)"
            )
        return torch.as_tensor(arr, dtype=torch.float32, device=self.device).clone()


class FedAvg(Strategy):
    """``fedavg``: ``w <- w - lr g`` (the float operations of the learner's step, so traces are
    those of the learner without strategies, bit for bit)."""

    name = "fedavg"


class FedAvgM(Strategy):
    """``fedavgm``: server momentum, ``m = beta m + Delta; w <- w + eta m``."""

    name = "fedavgm"
    params: FedAvgMParams

    def __init__(self, params: BaseModel, settings: StrategySettings) -> None:
        super().__init__(params, settings)
        self.m = self.zeros()

    def server_step(self, w: torch.Tensor, g: torch.Tensor, lr: float) -> torch.Tensor:
        """One momentum step on ``Delta = -lr g``."""
        p = self.params
        delta = -lr * g
        self.m = p.beta * self.m + delta
        return w + p.eta * self.m

    def state_dict(self) -> dict[str, Any]:
        """The momentum ``m``."""
        return {"m": self.m.cpu().numpy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the momentum."""
        self.m = self.tensor_from(state["m"], "m")


class _Adaptive(Strategy):
    """The adaptive server optimisers of Reddi et al.'s Algorithm 2: a first moment ``m`` and a
    second moment ``v`` (rule of the subclass), ``w <- w + eta m / (sqrt(v) + tau)``."""

    params: FedAdagradParams

    def __init__(self, params: BaseModel, settings: StrategySettings) -> None:
        super().__init__(params, settings)
        self.m = self.zeros()
        self.v = torch.full(
            (self.num_params,), self.params.tau**2, dtype=torch.float32, device=self.device
        )

    def second_moment(self, v: torch.Tensor, delta2: torch.Tensor) -> torch.Tensor:
        """The next ``v`` from ``v`` and ``Delta^2``."""
        raise NotImplementedError

    def server_step(self, w: torch.Tensor, g: torch.Tensor, lr: float) -> torch.Tensor:
        """One adaptive step on ``Delta = -lr g``."""
        p = self.params
        delta = -lr * g
        self.m = p.b1 * self.m + (1.0 - p.b1) * delta
        self.v = self.second_moment(self.v, delta * delta)
        return w + p.eta * self.m / (torch.sqrt(self.v) + p.tau)

    def state_dict(self) -> dict[str, Any]:
        """The moments ``m`` and ``v``."""
        return {"m": self.m.cpu().numpy(), "v": self.v.cpu().numpy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the moments."""
        self.m = self.tensor_from(state["m"], "m")
        self.v = self.tensor_from(state["v"], "v")


class FedAdagrad(_Adaptive):
    """``fedadagrad``: ``v = v + Delta^2``."""

    name = "fedadagrad"

    def second_moment(self, v: torch.Tensor, delta2: torch.Tensor) -> torch.Tensor:
        """The sum of squared moves."""
        return v + delta2


class FedAdam(_Adaptive):
    """``fedadam``: ``v = b2 v + (1 - b2) Delta^2``."""

    name = "fedadam"
    params: FedAdamParams

    def second_moment(self, v: torch.Tensor, delta2: torch.Tensor) -> torch.Tensor:
        """An exponential moving average of squared moves."""
        b2 = self.params.b2
        return b2 * v + (1.0 - b2) * delta2


class FedYogi(_Adaptive):
    """``fedyogi``: ``v = v - (1 - b2) Delta^2 sign(v - Delta^2)``."""

    name = "fedyogi"
    params: FedAdamParams

    def second_moment(self, v: torch.Tensor, delta2: torch.Tensor) -> torch.Tensor:
        """Yogi's additive update of the second moment."""
        return v - (1.0 - self.params.b2) * delta2 * torch.sign(v - delta2)


def step_rows(
    strategy: Strategy,
    devices: np.ndarray,
    uploads: torch.Tensor,
    local_lr: np.ndarray,
    w_t: torch.Tensor,
    w_next: torch.Tensor,
) -> dict[str, np.ndarray]:
    """The trace's ``strategy`` rows of a server step with uploads (devices ``devices``
    ``(k,)``, their uploads ``(k, D)`` as formed, their local rates ``(k,)``) from ``w_t`` to
    ``w_next``: ``device``, ``kept`` (all True unless the strategy says), the strategy's
    :meth:`Strategy.step_columns` and ``server_step_norm`` ``|w_next - w_t|_2`` on every row."""
    k = int(devices.size)
    cols = dict(strategy.step_columns(uploads, local_lr))
    norm = float(torch.linalg.vector_norm((w_next - w_t).to(torch.float64)))
    return {
        "device": np.asarray(devices, dtype=np.int64).copy(),
        "kept": np.asarray(cols.pop("kept", np.ones(k, dtype=bool)), dtype=bool).copy(),
        **{name: np.asarray(v, dtype=np.float64).copy() for name, v in cols.items()},
        "server_step_norm": np.full(k, norm),
    }


#: ``builder(params, settings) -> Strategy``: a strategy class, or a function that returns one.
StrategyBuilder = Callable[[BaseModel, StrategySettings], Strategy]

#: The built-in strategies' classes, by name (the names of ``wflsim.sim.strategies``).
BUILT_IN: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (FedAvg, FedAvgM, FedAdagrad, FedAdam, FedYogi)
}


def builtin_strategies() -> dict[str, StrategyBuilder]:
    """The built-in entries of ``wflsim.models.registry.STRATEGY_BUILDERS``: the server-side
    strategies here, the aggregating ones of
    :mod:`wflsim.models.learner.strategies_aggregation` and the client-side ones of
    ``wflsim.models.learner.strategies_client``."""
    from .strategies_aggregation import AGGREGATING
    from .strategies_client import CLIENT_BUILT_IN

    return {**BUILT_IN, **AGGREGATING, **CLIENT_BUILT_IN}


def build_strategy(spec: Any, settings: StrategySettings) -> Strategy:
    """The strategy of ``spec`` (a ``wflsim.sim.strategies.StrategySpec``: its parameters
    validated by the strategy's model) built for ``settings``.

    Raises:
        ValueError: an unknown strategy, bad parameters, or a builder that returns no
            :class:`Strategy`.
    """
    from ..registry import STRATEGY_BUILDERS

    built = STRATEGY_BUILDERS[spec.name](spec.validated(STRATEGIES), settings)
    if not isinstance(built, Strategy):
        raise ValueError(
            f"strategy {spec.name!r}: its builder returned {type(built).__name__}, not a "
            "wflsim.Strategy"
        )
    built.registered_name = spec.name
    return built


class StrategyOutputError(TypeError):
    """A strategy's hook returned something the learner cannot use (not a tensor, or of
    another shape, dtype or device than the model): raised where it returns, naming the
    strategy, the hook, what it returned and what was expected, instead of torch's error
    further on. The run stops (status ``failed``, exit code 1)."""


def checked_vector(strategy: Strategy, hook: str, out: Any, like: torch.Tensor) -> torch.Tensor:
    """``out``, what ``strategy``'s ``hook`` returned, if it is a tensor of ``like``'s shape,
    dtype and device (a ``(D,)`` float32 vector on the learner's device).

    Raises:
        StrategyOutputError: naming the strategy, the hook, what it returned and what was
            expected.
    """
    if (
        isinstance(out, torch.Tensor)
        and out.shape == like.shape
        and out.dtype == like.dtype
        and out.device == like.device
    ):
        return out
    if isinstance(out, torch.Tensor):
        got = f"a {out.dtype} tensor of shape {tuple(out.shape)} on {out.device}"
    else:
        got = f"a {type(out).__name__}"
    name = strategy.registered_name or strategy.name or type(strategy).__name__
    raise StrategyOutputError(
        f"strategy {name!r}: {hook} returned {got}; expected a {like.dtype} tensor of shape "
        f"{tuple(like.shape)} on {like.device} (fix: return a torch tensor like its w argument, "
        'docs/api.md, "Strategies")'
    )
