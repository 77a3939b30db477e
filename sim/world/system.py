"""The resolved physical system: per-device hardware and the radio constants of a run.

:func:`sim.config.resolve.resolve_devices` turns a scenario's ``[devices]`` table into
:class:`DeviceArrays`; :func:`wflsim.app.run.resolve_system` adds the radio constants and the model size.
Schemes, the slot resolution and the engine read these records and never the scenario.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import physics


@dataclass(frozen=True)
class DeviceArrays:
    """Per-device values resolved for ``N`` devices; every array has shape ``(N,)``.

    ``cpu_hz`` ``f`` (cycles/s), ``cycles_per_sample`` ``c`` (cycles), ``capacitance`` ``alpha``,
    ``batch_size`` ``B`` (samples, int64), ``peak_power_w`` ``P_bar`` (W), ``energy_budget_j``
    ``E_bar`` (J per slot).
    """

    cpu_hz: np.ndarray
    cycles_per_sample: np.ndarray
    capacitance: np.ndarray
    batch_size: np.ndarray
    peak_power_w: np.ndarray
    energy_budget_j: np.ndarray

    @property
    def num_devices(self) -> int:
        """``N``."""
        return int(self.cpu_hz.shape[0])

    def full_compute_time_s(self) -> np.ndarray:
        """Compute time of a full gradient, ``c B / f`` (eq. 12 at ``gamma = 0``), seconds."""
        return physics.compute_time_s(1.0, self.cycles_per_sample, self.batch_size, self.cpu_hz)


@dataclass(frozen=True)
class SystemConstants:
    """The resolved physical system a scheme, the slot resolution and the engine work with."""

    devices: DeviceArrays
    bandwidth_hz: float  # W, Hz
    noise_w: float  # N0, W (total over the band)
    deadline_s: float  # tau_0, s
    num_params: int  # D
    bits_per_param: int
    #: ``(model, dataset)`` of the catalogue network whose ``D`` this is (None: ``D`` was given
    #: directly, e.g. ``learning.num_params`` in a network-only run); cost models that depend on
    #: the architecture (FjORD's sub-models) need it
    architecture: tuple[str, str] | None = None

    @property
    def num_devices(self) -> int:
        """``N``."""
        return self.devices.num_devices

    @property
    def full_payload_bits(self) -> float:
        """``S = bits_per_param * D``, bits."""
        return float(self.bits_per_param) * float(self.num_params)
