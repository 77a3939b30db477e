"""Hierarchical aggregation (``[server.hierarchy]``, docs/cells.md): the base stations of
``[cells]`` are edge servers, a cloud server combines their models every ``k2`` slots over a
backhaul with its own latency, rate and energy per bit (client-edge-cloud FL, HierFAVG: Liu,
Zhang, Song, Letaief, ICC 2020).

* **Edge tier**: each edge server is the FL server of its cell, in the run's server mode: it
  aggregates its devices' uploads (every slot under ``sync``; as ``semi_sync`` / ``async`` do
  under stale updates) with the run's ``[strategy]`` and update rule, on its own model. A device
  trains on its edge's model (one round of ``learning.local_steps`` steps: HierFAVG's ``k1``).
* **Cloud tier**, every ``cloud_every_slots`` (``k2``) slots, at the slot's end: every edge
  sends its model to the cloud (``latency + S / rate`` each, in parallel), the cloud averages
  them weighted by the data weight each edge aggregated since the last cloud round (the sum of
  its applied uploads' ``B_n``; an edge that aggregated nothing has weight 0: its model is the
  last cloud model), and sends the average back (``latency + S / rate`` each). An edge adopts
  it on arrival, with the updates it applied since it sent its model:
  ``w_c <- w_cloud + (w_c - w_c_sent)``.

  Under ``sync`` the edges wait for it: the next slot starts when the cloud model reaches the
  last edge (HierFAVG); with ``k2 = 1`` the cloud model is flat FedSGD's over the union of the
  cells' uploads (the weighted average of the edges' steps is the step on the weighted average).
  Under ``semi_sync`` / ``async`` the slots keep their grid and the edges keep serving their
  devices while the models travel; a round is in flight across the boundary it started at (and
  across a checkpoint), and must end before the next one starts (a scenario whose round trip
  can last ``k2 tau_0`` or more is refused).

The backhaul's energy (``energy_j_per_bit`` per bit sent, both ways) is the network's, not the
devices': it is a ``cloud_round`` row and the run's ``backhaul_energy_j``, outside the devices'
budgets and queues.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field, field_validator

from ..config.distributions import Choice, LogUniform, Strict, Uniform, draw

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Longest one-way backhaul latency, s (a day; every value a distribution can draw too).
MAX_LATENCY_S = 86_400.0

#: A backhaul latency: fixed (s) or drawn per edge and direction of each round.
LatencySpec = float | Annotated[Uniform | LogUniform | Choice, Field(discriminator="dist")]


class HierarchyConfig(Strict):
    """``[server.hierarchy]``: edge servers at the base stations, a cloud every ``k2`` slots."""

    cloud_every_slots: int = Field(
        1, ge=1, le=1_000_000, description="k2: slots (edge rounds) between two cloud rounds"
    )
    backhaul_latency_s: LatencySpec = Field(
        0.0,
        description="one-way latency of an edge-cloud transfer, s: a number, or a distribution "
        "(uniform, loguniform, choice) drawn per edge and direction of each round",
    )
    backhaul_rate_bps: float = Field(
        1e9, gt=0.0, le=1e15, allow_inf_nan=False, description="backhaul rate, bit/s"
    )
    backhaul_energy_j_per_bit: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="energy per bit sent over the backhaul (either way), J/bit",
    )

    @field_validator("backhaul_latency_s")
    @classmethod
    def _latency(cls, lat: Any) -> Any:
        """Every latency the spec can give (a number; a distribution's ``low`` and ``high``, a
        choice's every value) in ``[0, MAX_LATENCY_S]``."""
        if isinstance(lat, Choice):
            drawn = [float(v) for v in lat.values]
        elif isinstance(lat, Uniform | LogUniform):
            drawn = [float(lat.low), float(lat.high)]
        else:
            drawn = [float(lat)]
        bad = [v for v in drawn if not (np.isfinite(v) and 0.0 <= v <= MAX_LATENCY_S)]
        if bad:
            raise ValueError(
                f"backhaul_latency_s must be in [0, {MAX_LATENCY_S:g}] s, every value a "
                f"distribution can draw too (got {bad[0]:g})"
            )
        return lat

    def max_latency_s(self) -> float:
        """The longest latency the spec can give, s."""
        lat = self.backhaul_latency_s
        if isinstance(lat, float | int):
            return float(lat)
        if isinstance(lat, Choice):
            return float(max(lat.values))
        return float(lat.high)

    def max_round_s(self, model_bits: float) -> float:
        """The longest a cloud round can last, s: both ways at the longest latency."""
        return 2.0 * (self.max_latency_s() + model_bits / self.backhaul_rate_bps)


def round_trip_s(
    up_latency_s: F64, down_latency_s: F64, model_bits: float, rate_bps: float
) -> float:
    """A cloud round's duration, s: the edges send in parallel (``latency + S / rate`` each);
    the cloud averages once the last has arrived and sends back in parallel; the round ends
    when the last edge has the cloud model:
    ``max_c(up_c + S / R) + max_c(down_c + S / R)``.

    Args:
        up_latency_s, down_latency_s: ``(C,)`` each edge's one-way latencies, s.
        model_bits: ``S``, the model's size, bit.
        rate_bps: ``R``, bit/s.
    """
    transfer = model_bits / rate_bps
    return float(np.max(up_latency_s) + transfer + np.max(down_latency_s) + transfer)


def round_energy_j(num_edges: int, model_bits: float, energy_j_per_bit: float) -> float:
    """A cloud round's backhaul energy, J: ``C`` models up and ``C`` down."""
    return 2.0 * num_edges * model_bits * energy_j_per_bit


class CloudRounds:
    """The cloud tier of a run: when a round is due, its latencies (drawn per round from the
    run's ``backhaul`` stream, keyed by the round), its duration and energy, and a round in
    flight under stale updates (its due time: the engine's state)."""

    def __init__(
        self, cfg: HierarchyConfig, num_edges: int, model_bits: float, rng_of_round: Any
    ) -> None:
        self.cfg = cfg
        self.num_edges = int(num_edges)
        self.model_bits = float(model_bits)
        self._rng_of_round = rng_of_round
        #: rounds taken so far (the key of the next round's draws)
        self.rounds = 0
        #: when the round in flight reaches the last edge (absolute, s; None: none in flight)
        self.due_s: float | None = None
        #: per edge, since the last round: the data weight it aggregated (sum of its applied
        #: uploads' B_n, samples) and the uploads it applied (the trace's ``edge_model`` rows)
        self.data_weight = np.zeros(self.num_edges)
        self.applied = np.zeros(self.num_edges, dtype=np.int64)
        #: the last round's one-way latencies per edge, up and down, s (``(C,)`` each)
        self.up_latency_s = np.zeros(self.num_edges)
        self.down_latency_s = np.zeros(self.num_edges)

    def aggregated(self, edge: ArrayLike, batch_size: ArrayLike) -> None:
        """The edges ``edge`` (one per upload) applied uploads of ``batch_size`` samples each."""
        e = np.asarray(edge, dtype=np.int64)
        b = np.asarray(batch_size, dtype=np.float64)
        self.data_weight += np.bincount(e, weights=b, minlength=self.num_edges)
        self.applied += np.bincount(e, minlength=self.num_edges)

    def take_weights(self) -> tuple[F64, I64]:
        """Each edge's data weight and uploads applied since the last round (then zeroed)."""
        out = (self.data_weight.copy(), self.applied.copy())
        self.data_weight[:] = 0.0
        self.applied[:] = 0
        return out

    def due(self, slot: int) -> bool:
        """Whether a cloud round follows slot ``slot`` (0-based, global)."""
        return (slot + 1) % self.cfg.cloud_every_slots == 0

    def next_round(self) -> tuple[float, float]:
        """The next round's ``(duration_s, energy_j)`` (advances :attr:`rounds`)."""
        lat = self.cfg.backhaul_latency_s
        c = self.num_edges
        if isinstance(lat, float | int):
            up = down = np.full(c, float(lat))
        else:
            rng = self._rng_of_round(self.rounds)
            up = np.array([draw(lat, rng) for _ in range(c)])
            down = np.array([draw(lat, rng) for _ in range(c)])
        self.rounds += 1
        self.up_latency_s, self.down_latency_s = up, down
        duration = round_trip_s(up, down, self.model_bits, self.cfg.backhaul_rate_bps)
        return duration, round_energy_j(c, self.model_bits, self.cfg.backhaul_energy_j_per_bit)

    def state_dict(self) -> dict[str, Any]:
        """Rounds taken, the due time of the one in flight (NaN: none) and what each edge
        aggregated since the last round."""
        return {
            "rounds": self.rounds,
            "due_s": np.nan if self.due_s is None else self.due_s,
            "data_weight": self.data_weight.copy(),
            "applied": self.applied.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.rounds = int(state["rounds"])
        due = float(state["due_s"])
        self.due_s = None if np.isnan(due) else due
        if "data_weight" in state:  # a checkpoint of a version that kept them
            self.data_weight = np.asarray(state["data_weight"], dtype=np.float64).copy()
            self.applied = np.asarray(state["applied"], dtype=np.int64).copy()
