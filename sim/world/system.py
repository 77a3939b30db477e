"""The resolved physical system: per-device hardware and the radio constants of a run.

:func:`wflsim.sim.config.resolve.resolve_devices` turns a scenario's ``[devices]`` table into
:class:`DeviceArrays`; :func:`wflsim.app.run.resolve_system` adds the radio constants and the model size.
Schemes, the slot resolution and the engine read these records and never the scenario.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..radio.rates import SHANNON, RateModel
from . import physics


@dataclass(frozen=True)
class DeviceArrays:
    """Per-device values resolved for ``N`` devices; every array has shape ``(N,)``.

    ``cpu_hz`` ``f`` (cycles/s), ``cycles_per_sample`` ``c`` (cycles), ``capacitance`` ``alpha``,
    ``batch_size`` ``B`` (samples, int64), ``peak_power_w`` ``P_bar`` (W), ``energy_budget_j``
    ``E_bar`` (J per slot), ``local_steps`` ``E_n`` (local SGD steps per update, int64; not
    given: 1 for every device, FedSGD), ``extra_cycles_per_step`` ``X`` (CPU cycles a local step
    runs beyond the gradient's ``c B``: the server strategy's, ``[strategy]``; not given: 0).
    """

    cpu_hz: np.ndarray
    cycles_per_sample: np.ndarray
    capacitance: np.ndarray
    batch_size: np.ndarray
    peak_power_w: np.ndarray
    energy_budget_j: np.ndarray
    local_steps: np.ndarray = field(default_factory=lambda: np.ones(0, dtype=np.int64))
    extra_cycles_per_step: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        steps = np.asarray(self.local_steps, dtype=np.int64)
        if steps.size == 0:  # not given: FedSGD
            steps = np.ones(self.num_devices, dtype=np.int64)
        if steps.shape != (self.num_devices,) or (steps < 1).any():
            raise ValueError(f"local_steps must be ({self.num_devices},) integers >= 1")
        object.__setattr__(self, "local_steps", steps)
        extra = np.asarray(self.extra_cycles_per_step, dtype=np.float64)
        if extra.size == 0:  # not given: FedAvg's steps
            extra = np.zeros(self.num_devices)
        if extra.shape != (self.num_devices,) or not (np.isfinite(extra) & (extra >= 0)).all():
            raise ValueError(f"extra_cycles_per_step must be ({self.num_devices},) finite >= 0")
        object.__setattr__(self, "extra_cycles_per_step", extra)

    @property
    def num_devices(self) -> int:
        """``N``."""
        return int(self.cpu_hz.shape[0])

    def with_local_steps(self, local_steps: np.ndarray) -> DeviceArrays:
        """A copy with ``E_n`` replaced, ``(N,)`` ints ``>= 1``."""
        return replace(self, local_steps=local_steps)

    def with_extra_cycles(self, extra_cycles_per_step: np.ndarray) -> DeviceArrays:
        """A copy with ``X`` replaced, ``(N,)`` cycles ``>= 0``."""
        return replace(self, extra_cycles_per_step=extra_cycles_per_step)

    @property
    def step_cycles_per_sample(self) -> np.ndarray:
        """``c' = c + X / B``: the cycles per sample of a local step, the strategy's extra ``X``
        cycles spread over its ``B`` samples (so that every formula in ``c B`` charges them:
        eqs. 12-13, the controller's ``theta`` and ``e_cmp``); ``c`` itself when ``X = 0``."""
        return self.cycles_per_sample + self.extra_cycles_per_step / self.batch_size

    def full_compute_time_s(self) -> np.ndarray:
        """Compute time of a full local update, ``c' B E / f`` (eq. 12 at ``gamma = 0``, ``E``
        local steps, :attr:`step_cycles_per_sample`), seconds."""
        return physics.compute_time_s(
            1.0, self.step_cycles_per_sample, self.batch_size, self.cpu_hz, self.local_steps
        )

    def full_compute_energy_j(self) -> np.ndarray:
        """Compute energy of a full local update, ``(alpha / 2) c' B E f^2`` (eq. 13 at
        ``gamma = 0``), joules."""
        return physics.compute_energy_j(
            1.0,
            self.step_cycles_per_sample,
            self.batch_size,
            self.cpu_hz,
            self.capacitance,
            self.local_steps,
        )


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
    #: what the server strategy multiplies each upload's payload by (``[strategy]``: 2 when a
    #: device sends a second ``D``-vector with its model's; 1: the model's payload alone)
    upload_factor: float = 1.0
    #: ``[uplink] power_control = "controller"`` over the air: the sum's window ``T`` and the
    #: whole model's transmission, s (None: the digital model;
    #: :meth:`~wflsim.sim.radio.spec.UplinkSpec.planned_system`)
    aircomp_window_s: float | None = None
    #: how an SNR becomes a rate (``[channel] rate_model``): Shannon's, or the truncated bound
    rate_model: RateModel = SHANNON

    @property
    def num_devices(self) -> int:
        """``N``."""
        return self.devices.num_devices

    @property
    def full_payload_bits(self) -> float:
        """``S = bits_per_param * D`` times the strategy's :attr:`upload_factor`, bits."""
        return float(self.bits_per_param) * float(self.num_params) * self.upload_factor
