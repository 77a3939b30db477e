"""Spatially correlated large-scale processes along each device's path, per frame: log-normal
shadowing and the LOS state of TR 38.901's path loss.

Both are a standard Gaussian per device, correlated along its path by Gudmundson's model: two
frames ``d`` metres of path apart have correlation ``exp(-d / d_corr)`` (M. Gudmundson,
"Correlation model for shadow fading in mobile radio systems", Electronics Letters 27(23), 1991).
Frame to frame the process is the AR(1) ``z_k = rho z_{k-1} + sqrt(1 - rho^2) w_k`` with
``rho = exp(-d_k / d_corr)`` and ``d_k`` the path walked since the previous frame (the odometer
difference, :class:`wflsim.sim.world.mobility.base.Kinematics`): stationary ``N(0, 1)``, and exactly
the exponential correlation for any sequence of steps, because ``exp(-a) exp(-b) = exp(-(a+b))``.
A device that does not move keeps its value. The innovations ``w_k`` are keyed by
``(device, frame)``.

* Shadowing ``S = sigma z`` dB is added to the path loss. With TR 38.901's parameters
  (``sigma_db = "3gpp"`` or ``decorrelation_m = "3gpp"``) a device has one process for its LOS
  and one for its NLOS condition (each with its scenario's sigma and decorrelation distance) and
  uses the one of its current state, as TR 38.901's spatially consistent procedure generates
  LOS and NLOS large-scale parameters separately (Sec. 7.6.3.1).
* The LOS state (TR 38.901 Sec. 7.6.3.3): LOS iff ``Phi(z) < P_LOS(d_2D)``, ``Phi`` the normal
  CDF (so ``Phi(z)`` is a spatially correlated uniform), with the correlation distance of
  Table 7.6.3.1-2 (50 m for UMa and UMi): at each frame a device is in LOS with probability
  ``P_LOS`` of its distance, and its state changes only as it moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from ... import fmath
from ...rng import KeyedStream
from .base import B8, F64


def gudmundson_correlation(travelled_m: ArrayLike, decorrelation_m: ArrayLike) -> F64:
    """``exp(-d / d_corr)``: correlation of a shadowing process between two points ``d`` metres
    of path apart (both in metres; broadcast)."""
    return fmath.exp(
        -np.asarray(travelled_m, dtype=np.float64) / np.asarray(decorrelation_m, dtype=np.float64)
    )


def ar1_step(previous: F64, rho: F64, innovation: F64) -> F64:
    """``z = rho z_prev + sqrt(1 - rho^2) w``: keeps ``N(0, 1)`` stationary (arrays, broadcast)."""
    return rho * previous + np.sqrt(np.maximum(1.0 - rho * rho, 0.0)) * innovation


class _PathProcesses:
    """``K`` independent standard Gaussian processes per device along its path.

    Args:
        decorrelation_m: the ``K`` decorrelation distances, m.
        stream: keyed stream; process ``i`` of frame ``k`` takes draw ``i`` at "slot" ``k``.
        num_devices: ``N``.
        what: how errors name the process.
    """

    def __init__(
        self, decorrelation_m: Sequence[float], stream: KeyedStream, num_devices: int, what: str
    ) -> None:
        self.decorrelation_m = np.asarray(decorrelation_m, dtype=np.float64).reshape(-1, 1)
        if not np.all(self.decorrelation_m > 0.0):
            raise ValueError(f"{what}: decorrelation distances must be > 0 m")
        self.stream = stream
        self.num_devices = int(num_devices)
        self._ids = np.arange(self.num_devices, dtype=np.int64)
        self.what = what
        self.z: F64 | None = None  # (K, N)
        self.next_frame = 0

    def advance(self, frame: int, travelled_m: F64) -> F64:
        """The processes at frame ``frame`` (frames in order), ``(K, N)``."""
        if frame != self.next_frame:
            raise RuntimeError(
                f"{self.what} is drawn frame after frame: expected frame "
                f"{self.next_frame}, got {frame}"
            )
        k = self.decorrelation_m.shape[0]
        w = np.stack([self.stream.standard_normal(self._ids, frame, i) for i in range(k)])
        if self.z is None:
            z = w
        else:
            rho = gudmundson_correlation(
                np.maximum(travelled_m, 0.0)[None, :], self.decorrelation_m
            )
            z = ar1_step(self.z, rho, w)
        self.z = z
        self.next_frame = frame + 1
        return z

    def state_dict(self) -> dict[str, Any]:
        return {"z": None if self.z is None else self.z.copy(), "next_frame": self.next_frame}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        z = state["z"]
        if z is not None:
            z = np.array(z, dtype=np.float64)
            if z.shape != (self.decorrelation_m.shape[0], self.num_devices):
                raise ValueError(
                    f"{self.what} state has shape {z.shape}, this run needs "
                    f"{(self.decorrelation_m.shape[0], self.num_devices)}"
                )
        self.z = z
        self.next_frame = int(state["next_frame"])


class Shadowing:
    """Log-normal shadowing ``S`` (dB) per device and frame, correlated along each path.

    Args:
        sigma_db: one standard deviation (dB) for every device, or ``(LOS, NLOS)``.
        decorrelation_m: one decorrelation distance (m), or ``(LOS, NLOS)``.
        stream: the run's keyed ``"shadowing"`` stream.
        num_devices: ``N``.
        source: what the parameters are (recorded in the metadata).

    With one value each, every device has one process; with pairs, one process per LOS state
    (and :meth:`frame` needs the LOS states).
    """

    def __init__(
        self,
        sigma_db: Sequence[float],
        decorrelation_m: Sequence[float],
        stream: KeyedStream,
        num_devices: int,
        source: str = "scenario",
    ) -> None:
        self.sigma_db = tuple(float(s) for s in sigma_db)
        self.decorrelation = tuple(float(d) for d in decorrelation_m)
        if len(self.sigma_db) != len(self.decorrelation) or len(self.sigma_db) not in (1, 2):
            raise ValueError("sigma_db and decorrelation_m: one value each, or (LOS, NLOS) pairs")
        if not all(0.0 <= s < float("inf") for s in self.sigma_db):
            raise ValueError("sigma_db must be finite and >= 0")
        self.by_state = len(self.sigma_db) == 2
        self.source = source
        self._proc = _PathProcesses(self.decorrelation, stream, num_devices, "shadowing")

    def frame(self, frame: int, travelled_m: F64, los: B8 | None) -> F64:
        """Shadowing of every device at frame ``frame``, dB, ``(N,)``; ``travelled_m`` the path
        walked since the previous frame (m), ``los`` the LOS states (needed by state)."""
        z = self._proc.advance(frame, travelled_m)
        if not self.by_state:
            return self.sigma_db[0] * z[0]
        if los is None:
            raise ValueError("shadowing by LOS state needs the devices' LOS states")
        return np.where(los, self.sigma_db[0] * z[0], self.sigma_db[1] * z[1])

    def describe(self) -> dict[str, Any]:
        """Parameters (by state when TR 38.901's)."""
        if self.by_state:
            return {
                "sigma_db": {"los": self.sigma_db[0], "nlos": self.sigma_db[1]},
                "decorrelation_m": {"los": self.decorrelation[0], "nlos": self.decorrelation[1]},
                "source": self.source,
                "correlation": "Gudmundson exp(-d / decorrelation_m) along each device's path",
            }
        return {
            "sigma_db": self.sigma_db[0],
            "decorrelation_m": self.decorrelation[0],
            "source": self.source,
            "correlation": "Gudmundson exp(-d / decorrelation_m) along each device's path",
        }

    def state_dict(self) -> dict[str, Any]:
        """The processes' last values and the next frame."""
        return self._proc.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self._proc.load_state_dict(state)


class LosState:
    """The spatially consistent LOS state of TR 38.901 (Sec. 7.6.3.3): LOS iff
    ``Phi(z) < P_LOS(d_2D)`` with ``z`` a Gudmundson process along the device's path.

    Args:
        probability: ``P_LOS`` of 2D distances (m), vectorised.
        decorrelation_m: the LOS-state correlation distance, m.
        stream: the run's keyed ``"los_state"`` stream.
        num_devices: ``N``.
    """

    def __init__(
        self,
        probability: Callable[[F64], F64],
        decorrelation_m: float,
        stream: KeyedStream,
        num_devices: int,
    ) -> None:
        self.probability = probability
        self.decorrelation_m = float(decorrelation_m)
        self._proc = _PathProcesses([decorrelation_m], stream, num_devices, "LOS state")

    def frame(self, frame: int, travelled_m: F64, distance_m: F64) -> B8:
        """LOS (True) or NLOS of every device at frame ``frame``, ``(N,)``."""
        z = self._proc.advance(frame, travelled_m)[0]
        return np.asarray(special.ndtr(z) < self.probability(distance_m), dtype=bool)

    def state_dict(self) -> dict[str, Any]:
        """The process's last value and the next frame."""
        return self._proc.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self._proc.load_state_dict(state)
