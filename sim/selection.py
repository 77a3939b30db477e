"""Device selection: which of the devices a slot's plan lets take part the server asks, without
torch (``[strategy.selection]``).

The scheme's slot plan decides who *may* take part in a slot (online at its start, a feasible
power, something to send: the **candidates**); the selection rule decides who the server *asks*.
A device the rule does not ask neither computes nor uploads in the slot: it is not
``participating``, and its ``decision`` row says ``selected = false`` (``selected`` is null for a
device that was no candidate, and in every row under the rule ``all``).

Rules (each picks at most ``limit`` of the candidates, all of them when fewer; vectorised over
devices):

* ``all``: every candidate (the default; the run is what it was without a selection);
* ``uniform``: ``limit`` candidates drawn uniformly without replacement: each device gets the
  keyed uniform of the stream ``selection`` for ``(device, slot)`` and the candidates with the
  smallest ones are picked (a uniformly random order of the candidates, keyed by slot: no
  generator state, the same picks after a resume);
* ``rate_per_joule``: the candidates with the highest expected upload rate per joule of the
  slot, ``r_n / E_n`` with ``r_n = W log2(1 + p_n h_n / N0)`` (eq. 9 on the gain the scheme sees,
  at the planned power capped at ``P_bar``) and ``E_n = E_cmp,n + p_n L_n / r_n`` (the planned
  computation energy, eq. 13, plus the upload's, eq. 11, for the payload ``L_n``);
* ``queue_slack``: the candidates with the smallest energy-deficit queue ``Q_n`` at the slot's
  start;
* ``power_of_choice`` (Cho, Wang and Joshi, AISTATS 2022, "pow-d"): ``d`` candidates drawn
  uniformly without replacement (the keyed uniforms of the stream ``selection_pool`` for
  ``(device, slot)``, the ``d`` smallest), each of which computes its local loss on the current
  global model over a minibatch of its own data (a **loss probe**, one forward pass: the
  learner's ``probe_losses``, :class:`wflsim.sim.learner.ProbingLearner`); the ``limit`` with
  the highest loss are asked. A probe costs the device ``c B_n / 3`` CPU cycles (a forward pass,
  a third of a gradient's ``c B_n``) at the energy of eq. 13, :func:`probe_energy_j`, charged in
  the slot (docs/decisions.md, "Power-of-choice selection"). No probe runs when the draw has no
  choice to make (``limit`` or fewer candidates drawn: all of them are asked).

Ties go to the lower device index. ``limit`` is ``k`` in ``sync`` and ``semi_sync`` (devices asked
per slot); in ``async`` it is ``k`` minus the devices in upload cycles at the slot's start (``k``
is the concurrency: FedBuff's, Nguyen et al. 2022, clients training at once), see
docs/scenario.md, ``[strategy.selection]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from .radio import rates
from .radio.rates import SHANNON, RateModel
from .rng import Streams
from .world import physics
from .world.system import DeviceArrays

SelectionRule = Literal["all", "uniform", "rate_per_joule", "queue_slack", "power_of_choice"]
#: The selection rules, in the order docs/scenario.md lists them.
SELECTION_RULES: tuple[str, ...] = (
    "all",
    "uniform",
    "rate_per_joule",
    "queue_slack",
    "power_of_choice",
)

#: The keyed stream of ``uniform`` (:data:`wflsim.sim.rng.STREAM_IDS`).
STREAM = "selection"
#: The keyed stream of ``power_of_choice``'s draw of ``d`` candidates.
POOL_STREAM = "selection_pool"
#: A loss probe's cycles as a share of a gradient's ``c B_n``: one forward pass of the
#: forward-and-backward pass a gradient takes, about a third of it.
PROBE_FRACTION = 1.0 / 3.0

#: ``probe(slot, device_ids) -> (n,) float64``: the devices' loss probes (the learner's
#: ``probe_losses``).
ProbeFn = Callable[[int, NDArray[np.int64]], NDArray[np.float64]]


class SelectionConfig(BaseModel):
    """``[strategy.selection]``: which candidates of a slot the server asks."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    rule: SelectionRule = Field(
        "all",
        description="all, uniform, rate_per_joule, queue_slack or power_of_choice (module "
        "docstring)",
    )
    k: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="devices asked per slot (async: devices in cycles at once); needed by every "
        "rule but all, which ignores it",
    )

    d: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="power_of_choice: candidates drawn and probed per slot, >= k (default 2 k)",
    )

    @model_validator(mode="after")
    def _needs_k(self) -> SelectionConfig:
        """A rule other than ``all`` needs ``k``; ``d`` is power_of_choice's, at least ``k``."""
        if self.rule != "all" and self.k is None:
            raise ValueError(f"selection rule {self.rule!r} needs k (an integer >= 1)")
        if self.d is not None:
            if self.rule != "power_of_choice":
                raise ValueError(
                    f"d is the candidates power_of_choice probes; rule {self.rule!r} takes none"
                )
            assert self.k is not None
            if self.d < self.k:
                raise ValueError(
                    f"power_of_choice asks the k = {self.k} highest losses of d = {self.d} "
                    "probed candidates: d must be >= k"
                )
        return self

    @property
    def probe_size(self) -> int | None:
        """``d`` of ``power_of_choice`` (default ``2 k``; None under another rule)."""
        if self.rule != "power_of_choice":
            return None
        assert self.k is not None
        return self.d if self.d is not None else 2 * self.k


@dataclass(frozen=True)
class SelectionInputs:
    """What the rules read of a slot, ``(N,)`` each (only the rule's own are used)."""

    tx_power_w: NDArray[np.float64]  #: the planned power, capped at ``P_bar``, W
    seen_gain: NDArray[np.float64]  #: the gain the scheme sees, linear
    payload_bits: NDArray[np.float64]  #: the upload's payload, bits
    compute_energy_j: NDArray[np.float64]  #: the planned computation energy, J
    queue_j: NDArray[np.float64]  #: the energy-deficit queues at the slot's start, J
    bandwidth_hz: float  #: ``W``
    noise_w: float  #: ``N0`` over the band, W
    #: how the SNR becomes a rate (``[channel] rate_model``)
    rate_model: RateModel = SHANNON


def rate_per_joule(x: SelectionInputs) -> NDArray[np.float64]:
    """``r / E`` per device, bit/s per J (module docstring; 0 where nothing is sent)."""
    p = x.tx_power_w
    rate = rates.rate_bps(p, x.seen_gain, x.bandwidth_hz, x.noise_w, x.rate_model)
    with np.errstate(divide="ignore", invalid="ignore"):
        upload_j = np.where(rate > 0, p * x.payload_bits / rate, np.inf)
        score = rate / (x.compute_energy_j + upload_j)
    return np.where(np.isnan(score), 0.0, score)


def probe_energy_j(devices: DeviceArrays) -> NDArray[np.float64]:
    """A loss probe's energy per device, J, ``(N,)``: eq. 13's ``(alpha / 2) x f^2`` per cycle
    for ``x = c B_n / 3`` cycles (:data:`PROBE_FRACTION`; the device's own ``c``, no strategy's
    extra cycles: a forward pass takes no local step)."""
    return physics.compute_energy_j(
        PROBE_FRACTION,
        devices.cycles_per_sample,
        devices.batch_size,
        devices.cpu_hz,
        devices.capacitance,
    )


def probe_time_s(devices: DeviceArrays) -> NDArray[np.float64]:
    """A loss probe's computation time per device, s, ``(N,)``: eq. 12's ``x / f`` for the
    probe's ``x = c B_n / 3`` cycles (as :func:`probe_energy_j`)."""
    return physics.compute_time_s(
        PROBE_FRACTION, devices.cycles_per_sample, devices.batch_size, devices.cpu_hz
    )


@dataclass(frozen=True)
class Choice:
    """What a rule decided in a slot, ``(N,)`` each."""

    chosen: NDArray[np.bool_]  #: the candidates asked
    probed: NDArray[np.bool_]  #: the devices that ran a loss probe (power_of_choice)
    probe_loss: NDArray[np.float64]  #: each probed device's loss (NaN where not probed)


def smallest(
    candidates: NDArray[np.bool_], keys: NDArray[np.float64], count: int
) -> NDArray[np.bool_]:
    """The ``count`` candidates with the smallest ``keys`` (ties: the lower index), as a mask
    (every candidate when there are fewer)."""
    out = np.zeros(candidates.shape, dtype=bool)
    if count <= 0:
        return out
    cand = np.flatnonzero(candidates)
    out[cand[np.argsort(keys[cand], kind="stable")[:count]]] = True
    return out


class Selection:
    """A run's selection rule (:class:`SelectionConfig`) with the run's random streams.

    Args:
        config: the rule and ``k`` (default: ``all``).
        streams: the run's streams (``uniform`` draws from the keyed stream ``selection``,
            ``power_of_choice`` from ``selection_pool``; None: seed 0).
    """

    def __init__(self, config: SelectionConfig | None = None, streams: Streams | None = None):
        self.config = config if config is not None else SelectionConfig()
        streams = streams if streams is not None else Streams(0)
        self._keyed = streams.keyed(STREAM)
        self._pool = streams.keyed(POOL_STREAM)

    @property
    def active(self) -> bool:
        """Whether the rule can leave a candidate out (any rule but ``all``)."""
        return self.config.rule != "all"

    @property
    def k(self) -> int | None:
        """The rule's ``k`` (None under ``all``)."""
        return self.config.k if self.active else None

    @property
    def probes(self) -> bool:
        """Whether the rule ranks by the learner's loss probes (``power_of_choice``)."""
        return self.config.rule == "power_of_choice"

    def pool(self, slot: int, candidates: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """``power_of_choice``'s draw: ``d`` of the candidates uniformly without replacement
        (the ``d`` smallest keyed uniforms of ``selection_pool`` for ``(device, slot)``), all of
        them when fewer, ``(N,)`` bool."""
        size = self.config.probe_size
        assert size is not None
        cand = np.asarray(candidates, dtype=bool)
        return smallest(cand, self._pool.uniform(np.arange(cand.size), int(slot)), size)

    def decide(
        self,
        slot: int,
        candidates: NDArray[np.bool_],
        limit: int,
        inputs: SelectionInputs,
        probe: ProbeFn | None = None,
    ) -> Choice:
        """:meth:`choose`, with the loss probes ``power_of_choice`` ran (``probe``: the
        learner's ``probe_losses``, needed by that rule)."""
        cand = np.asarray(candidates, dtype=bool)
        probed = np.zeros(cand.shape, dtype=bool)
        loss = np.full(cand.shape, np.nan)
        if not self.probes:
            return Choice(self.choose(slot, cand, limit, inputs), probed, loss)
        if limit <= 0:
            return Choice(probed.copy(), probed, loss)
        drawn = self.pool(slot, cand)
        if drawn.sum() <= limit:  # nothing to rank: every device drawn is asked, none probed
            return Choice(drawn, probed, loss)
        if probe is None:
            raise ValueError("power_of_choice needs the learner's loss probes")
        ids = np.flatnonzero(drawn).astype(np.int64)
        values = np.asarray(probe(int(slot), ids), dtype=np.float64)
        if values.shape != ids.shape:
            raise ValueError(f"{ids.size} devices probed but {values.shape} losses returned")
        loss[ids] = values
        # the highest losses first (a NaN loss last), ties to the lower index
        keys = np.where(np.isnan(loss), np.inf, -loss)
        return Choice(smallest(drawn, keys, int(limit)), drawn, loss)

    def choose(
        self, slot: int, candidates: NDArray[np.bool_], limit: int, inputs: SelectionInputs
    ) -> NDArray[np.bool_]:
        """The candidates the server asks in slot ``slot``: at most ``limit`` of them, ``(N,)``
        bool (a subset of ``candidates``; ``power_of_choice`` through :meth:`decide`)."""
        cand = np.asarray(candidates, dtype=bool)
        rule = self.config.rule
        if rule == "all":
            return cand.copy()
        if rule == "power_of_choice":
            raise ValueError("power_of_choice decides on loss probes: call decide")
        if rule == "uniform":
            keys = self._keyed.uniform(np.arange(cand.size), int(slot))
        elif rule == "rate_per_joule":
            keys = -rate_per_joule(inputs)
        else:  # queue_slack
            keys = np.asarray(inputs.queue_j, dtype=np.float64)
        return smallest(cand, keys, int(limit))
