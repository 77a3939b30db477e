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
  start.

Ties go to the lower device index. ``limit`` is ``k`` in ``sync`` and ``semi_sync`` (devices asked
per slot); in ``async`` it is ``k`` minus the devices in upload cycles at the slot's start (``k``
is the concurrency: FedBuff's, Nguyen et al. 2022, clients training at once), see
docs/scenario.md, ``[strategy.selection]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from .rng import Streams
from .world import physics

SelectionRule = Literal["all", "uniform", "rate_per_joule", "queue_slack"]
#: The selection rules, in the order docs/scenario.md lists them.
SELECTION_RULES: tuple[str, ...] = ("all", "uniform", "rate_per_joule", "queue_slack")

#: The keyed stream of ``uniform`` (:data:`wflsim.sim.rng.STREAM_IDS`).
STREAM = "selection"


class SelectionConfig(BaseModel):
    """``[strategy.selection]``: which candidates of a slot the server asks."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    rule: SelectionRule = Field(
        "all", description="all, uniform, rate_per_joule or queue_slack (module docstring)"
    )
    k: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="devices asked per slot (async: devices in cycles at once); needed by every "
        "rule but all, which ignores it",
    )

    @model_validator(mode="after")
    def _needs_k(self) -> SelectionConfig:
        """A rule other than ``all`` needs ``k``."""
        if self.rule != "all" and self.k is None:
            raise ValueError(f"selection rule {self.rule!r} needs k (an integer >= 1)")
        return self


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


def rate_per_joule(x: SelectionInputs) -> NDArray[np.float64]:
    """``r / E`` per device, bit/s per J (module docstring; 0 where nothing is sent)."""
    p = x.tx_power_w
    rate = physics.rate_bps(p, x.seen_gain, x.bandwidth_hz, x.noise_w)
    with np.errstate(divide="ignore", invalid="ignore"):
        upload_j = np.where(rate > 0, p * x.payload_bits / rate, np.inf)
        score = rate / (x.compute_energy_j + upload_j)
    return np.where(np.isnan(score), 0.0, score)


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
        streams: the run's streams (``uniform`` draws from the keyed stream ``selection``;
            None: seed 0).
    """

    def __init__(self, config: SelectionConfig | None = None, streams: Streams | None = None):
        self.config = config if config is not None else SelectionConfig()
        self._keyed = (streams if streams is not None else Streams(0)).keyed(STREAM)

    @property
    def active(self) -> bool:
        """Whether the rule can leave a candidate out (any rule but ``all``)."""
        return self.config.rule != "all"

    @property
    def k(self) -> int | None:
        """The rule's ``k`` (None under ``all``)."""
        return self.config.k if self.active else None

    def choose(
        self, slot: int, candidates: NDArray[np.bool_], limit: int, inputs: SelectionInputs
    ) -> NDArray[np.bool_]:
        """The candidates the server asks in slot ``slot``: at most ``limit`` of them, ``(N,)``
        bool (a subset of ``candidates``)."""
        cand = np.asarray(candidates, dtype=bool)
        rule = self.config.rule
        if rule == "all":
            return cand.copy()
        if rule == "uniform":
            keys = self._keyed.uniform(np.arange(cand.size), int(slot))
        elif rule == "rate_per_joule":
            keys = -rate_per_joule(inputs)
        else:  # queue_slack
            keys = np.asarray(inputs.queue_j, dtype=np.float64)
        return smallest(cand, keys, int(limit))
