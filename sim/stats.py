"""The running totals of a simulation (what the CLI's summary prints and ``manifest.json``
holds); a server may count more (:meth:`wflsim.sim.servers.base.Server.new_stats`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The totals only some runs keep (None otherwise; left out of their checkpoints).
_OPTIONAL = (
    "handovers",
    "cloud_rounds",
    "backhaul_energy_j",
    "air_aligned",
    "air_asked",
    "air_mse_total",
    "air_mse_count",
    "epsilon_max",
    "epsilon_mean",
    "dp_noise_multiplier",
    "dp_stopped_devices",
)


@dataclass
class RunStats:
    """Running totals of a simulation (what the CLI's summary prints)."""

    slots: int = 0
    device_slots: int = 0
    participations: int = 0
    successes: int = 0
    energy_j: float = 0.0
    wasted_energy_j: float = 0.0
    last_loss: float = float("nan")
    last_accuracy: float = float("nan")
    first_accuracy: float = float("nan")
    simulated_time_s: float = 0.0
    #: device-slots in which the device was online at the slot's start (all without
    #: ``[availability]``)
    available_device_slots: int = 0
    drops: int = 0  #: participations lost because the device went offline
    wall_time_s: float = 0.0
    rows: int = 0
    energy_per_device_j: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: ``{"frame", "reason"}`` of a run ended before its last frame (:meth:`Engine.request_stop`)
    stopped_early: dict[str, Any] | None = None
    #: devices that changed cell at a frame start (``[cells]`` only; None: one cell)
    handovers: int | None = None
    #: cloud rounds taken and their backhaul energy, J (``[server.hierarchy]`` only; None: flat)
    cloud_rounds: int | None = None
    backhaul_energy_j: float | None = None
    #: over the air (``[uplink] mode = "aircomp"`` only; None: digital): devices the power
    #: rule let into the sums and devices the scheme asked, over the run; the sum and count
    #: of the measured aggregation errors (training runs)
    air_aligned: int | None = None
    air_asked: int | None = None
    air_mse_total: float | None = None
    air_mse_count: int | None = None
    #: ``[privacy]`` only (None: no privacy): the largest and the mean epsilon over every device
    #: (at the run's delta, at the last frame boundary), the noise multiplier ``z`` (None over
    #: the air with ``air_noise = "channel_only"``) and the devices stopped by their budget
    epsilon_max: float | None = None
    epsilon_mean: float | None = None
    dp_noise_multiplier: float | None = None
    dp_stopped_devices: int | None = None

    @property
    def outage_rate(self) -> float:
        """Uploads that missed the deadline, per participation (participations lost because
        the device went offline are :attr:`drops`, not outages)."""
        return (
            (self.participations - self.successes - self.drops) / self.participations
            if self.participations
            else 0.0
        )

    @property
    def dropout_rate(self) -> float:
        """Device-slots in which the device did not participate, per device-slot."""
        return 1.0 - self.participations / self.device_slots if self.device_slots else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The summary written to ``manifest.json``."""
        return (
            {
                "slots": self.slots,
                "final_accuracy": self.last_accuracy,
                "initial_accuracy": self.first_accuracy,
                "final_loss": self.last_loss,
                "total_energy_j": self.energy_j,
                "wasted_energy_j": self.wasted_energy_j,
                "mean_energy_per_device_slot_j": self.energy_j / self.device_slots
                if self.device_slots
                else 0.0,
                "outage_rate": self.outage_rate,
                "dropout_rate": self.dropout_rate,
                "available_fraction": self.available_device_slots / self.device_slots
                if self.device_slots
                else 1.0,
                "drops": self.drops,
                "simulated_time_s": self.simulated_time_s,
                "wall_time_s": self.wall_time_s,
                "trace_rows": self.rows,
            }
            | ({} if self.stopped_early is None else {"stopped_early": dict(self.stopped_early)})
            | ({} if self.handovers is None else {"handovers": self.handovers})
            | (
                {}
                if self.cloud_rounds is None
                else {
                    "cloud_rounds": self.cloud_rounds,
                    "backhaul_energy_j": self.backhaul_energy_j,
                }
            )
            | ({} if self.air_aligned is None else self._air_summary())
            | (
                {}
                if self.epsilon_max is None
                else {
                    "epsilon_max": self.epsilon_max,
                    "epsilon_mean": self.epsilon_mean,
                    "dp_noise_multiplier": self.dp_noise_multiplier,
                    "dp_stopped_devices": self.dp_stopped_devices,
                }
            )
        )

    def _air_summary(self) -> dict[str, Any]:
        """The over-the-air totals: the share of the asked devices in the sums and the mean
        measured aggregation error (None without training)."""
        asked, count = self.air_asked or 0, self.air_mse_count or 0
        return {
            "aircomp_aligned_share": (self.air_aligned or 0) / asked if asked else None,
            "aircomp_mean_aggregation_mse": (self.air_mse_total or 0.0) / count if count else None,
        }

    def state_dict(self) -> dict[str, Any]:
        """Every field (for checkpoints)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["energy_per_device_j"] = self.energy_per_device_j.copy()
        if self.stopped_early is None:
            del out["stopped_early"]  # the checkpoints of every run that is not stopped early
        for k in _OPTIONAL:
            if out[k] is None:
                del out[k]  # one cell, flat, digital: the checkpoint as before
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        for k in self.__dataclass_fields__:
            if k == "stopped_early" or k in _OPTIONAL:
                setattr(self, k, state.get(k))
                continue
            v = state.get(k, 0) if k in ("available_device_slots", "drops") else state[k]
            setattr(self, k, np.array(v, dtype=np.float64) if k == "energy_per_device_j" else v)
