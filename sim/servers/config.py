"""The server's aggregation mode (``[server]``) and the staleness weights of late updates.

* ``sync`` (default, the paper's): slots of length ``tau_0``; the server aggregates at each
  slot's end the uploads that arrived in it; a late upload is an outage (:mod:`wflsim.sim.engine`).
* ``semi_sync``: the same slots, but an upload that misses its slot's end is not lost: it
  arrives in a later slot and is aggregated at that slot's end as a stale update.
* ``async`` (FedAsync with ``buffer_size = 1``, FedBuff with ``buffer_size > 1``): no global
  round; each device downloads the current model, computes and uploads, and starts again; the
  server applies its buffer every ``buffer_size`` arrivals (:mod:`wflsim.sim.servers.stale`).

An update computed on model version ``v`` that the server applies when the model is at version
``V`` has staleness ``s = V - v`` (server steps it missed) and enters the aggregate with the
weight :func:`staleness_weight` (Xie et al., "Asynchronous federated optimization", 2019;
Nguyen et al., "Federated learning with buffered asynchronous aggregation", 2022):

* ``constant``: ``1``;
* ``polynomial``: ``(1 + s)^(-a)``;
* ``hinge``: ``1`` for ``s <= b``, else ``1 / (a (s - b) + 1)``.

The server step is ``w <- w - eta_t eta_g sum_i w(s_i) B_i g_i / sum_i B_i`` over the applied
updates ``i`` (``eta_g``: ``server_lr``; with every ``s_i = 0`` and ``eta_g = 1``, the paper's
eqs. 3-4). An update with ``s > max_staleness`` is discarded (and, as it can only grow older,
as soon as the server passes that version: its gradient is never computed).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field, model_validator

from .. import fmath
from ..config.distributions import Strict
from ..config.limits import MAX_DEVICES
from .hierarchy import HierarchyConfig

F64 = NDArray[np.float64]

ServerMode = Literal["sync", "semi_sync", "async"]
SERVER_MODES: tuple[str, ...] = ("sync", "semi_sync", "async")
StalenessFunction = Literal["constant", "polynomial", "hinge"]


#: The ``[server]`` fields that apply to some modes only (:class:`ServerConfig` refuses a value
#: other than the default under the others): field -> those modes. A sweep over ``server.mode``
#: leaves a grid value of such a field out at the points of the other modes
#: (:mod:`wflsim.app.sweep_modes`).
SERVER_MODE_FIELDS: dict[str, frozenset[str]] = {
    "buffer_size": frozenset({"async"}),
    "staleness": frozenset({"semi_sync", "async"}),
    "server_lr": frozenset({"semi_sync", "async"}),
    "max_staleness": frozenset({"semi_sync", "async"}),
}


class StalenessConfig(Strict):
    """``[server.staleness]``: the weight of an update of staleness ``s`` (module docstring)."""

    function: StalenessFunction = Field(
        "constant",
        description="constant: 1; polynomial: (1 + s)^-a; hinge: 1 up to s = b, then "
        "1 / (a (s - b) + 1)",
    )
    a: float = Field(
        0.5, ge=0.0, le=1e3, allow_inf_nan=False, description="exponent (polynomial) or slope"
    )
    b: int = Field(4, ge=0, le=1_000_000, description="hinge: staleness served at full weight")


class ServerConfig(Strict):
    """``[server]``: how the server aggregates (module docstring)."""

    mode: ServerMode = Field(
        "sync",
        description="sync: rounds of tau_0, late uploads lost (the paper's); semi_sync: rounds "
        "of tau_0, late uploads arrive in a later round as stale updates; async: no rounds, "
        "the server applies every buffer_size arrivals",
    )
    buffer_size: int = Field(
        1,
        ge=1,
        le=MAX_DEVICES,
        description="async: arrivals per server step (1: FedAsync; > 1: FedBuff)",
    )
    staleness: StalenessConfig = Field(default_factory=StalenessConfig)
    server_lr: float = Field(
        1.0,
        gt=0.0,
        le=1e6,
        allow_inf_nan=False,
        description="server learning rate eta_g, multiplies learning.lr in a server step",
    )
    #: edge servers at the cells' base stations and a cloud (:mod:`wflsim.sim.servers.hierarchy`;
    #: None: one server, flat aggregation)
    hierarchy: HierarchyConfig | None = None
    max_staleness: int | None = Field(
        None,
        ge=0,
        le=1_000_000_000,
        description="discard updates older than this many server steps (None: keep all)",
    )

    @model_validator(mode="after")
    def _fields_of_mode(self) -> ServerConfig:
        if self.mode != "async" and self.buffer_size != 1:
            raise ValueError(
                f"buffer_size applies to mode = 'async' (mode is {self.mode!r}); remove it or "
                "set mode = 'async'"
            )
        if self.mode == "sync":
            changed = [
                name
                for name, default in (
                    ("max_staleness", None),
                    ("server_lr", 1.0),
                    ("staleness", StalenessConfig()),
                )
                if getattr(self, name) != default
            ]
            if changed:
                raise ValueError(
                    f"{', '.join(changed)} apply to stale updates, which mode = 'sync' does not "
                    "have; remove them or set mode = 'semi_sync' or 'async'"
                )
        return self

    @property
    def stale(self) -> bool:
        """Whether updates may be stale (``semi_sync`` or ``async``)."""
        return self.mode != "sync"

    def step_ratio(self, devices_cycling: float) -> float:
        """The server's step per applied update over the synchronous server's (dimensionless).

        The synchronous server moves the model by ``eta_t`` per round of ``N`` updates (their
        weighted mean), i.e. ``eta_t / N`` per update. ``semi_sync`` applies one step of
        ``eta_t eta_g`` per slot (a weighted mean too): ``eta_g`` times the synchronous step.
        ``async`` applies a step of ``eta_t eta_g`` every ``buffer_size`` arrivals while
        ``devices_cycling`` devices keep arriving: ``eta_g N / buffer_size`` times the
        synchronous step per update (FedBuff with ``eta_g = buffer_size / N`` matches it).

        Args:
            devices_cycling: ``N``, the devices taking part (the scenario's number, or the
                mean number online).
        """
        if self.mode == "sync":
            return 1.0
        if self.mode == "semi_sync":
            return float(self.server_lr)
        return float(self.server_lr) * float(devices_cycling) / float(self.buffer_size)

    def weight(self, staleness: ArrayLike) -> F64:
        """:func:`staleness_weight` with this server's function."""
        s = self.staleness
        return staleness_weight(staleness, s.function, s.a, s.b)

    def weight_of(self, staleness: int) -> float:
        """:meth:`weight` of one update, bit for bit (it runs once per arrival: the constant and
        the hinge in Python floats, the same IEEE operations without NumPy's per-call cost; the
        polynomial through NumPy, whose power may round differently from the C library's)."""
        if staleness < 0:
            raise ValueError("staleness must be finite and >= 0")
        s = self.staleness
        if s.function == "constant":
            return 1.0
        if s.function == "hinge":
            return 1.0 / (float(s.a) * max(float(staleness) - s.b, 0.0) + 1.0)
        return float(self.weight(staleness))


def staleness_weight(
    staleness: ArrayLike, function: StalenessFunction, a: float = 0.5, b: int = 4
) -> F64:
    """The aggregation weight of updates of staleness ``s`` (module docstring), in ``(0, 1]``.

    Args:
        staleness: ``s``, server steps since the update's model version, integers ``>= 0``,
            any shape.
        function: ``"constant"``, ``"polynomial"`` or ``"hinge"``.
        a: the polynomial's exponent or the hinge's slope, ``>= 0``.
        b: the hinge's knee, ``>= 0``.

    Returns:
        the weights, float64, the shape of ``staleness``.

    Raises:
        ValueError: a negative staleness or an unknown function.
    """
    s = np.asarray(staleness, dtype=np.float64)
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError("staleness must be finite and >= 0")
    if function == "constant":
        return np.ones_like(s)
    if function == "polynomial":
        return np.asarray(fmath.power(1.0 + s, -float(a)), dtype=np.float64)
    if function == "hinge":
        return 1.0 / (float(a) * np.maximum(s - b, 0.0) + 1.0)
    raise ValueError(f"unknown staleness function {function!r}")
