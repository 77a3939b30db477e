"""The channel drawn from models: path loss (with a LOS state), shadowing, fading, CSI."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import physics
from .base import (
    B8,
    CONTROLLER_ASSUMPTION,
    F64,
    Channel,
    FadingModel,
    LargeScale,
    PathLossModel,
    SlotChannel,
)
from .csi import Csi
from .shadowing import LosState, Shadowing

if TYPE_CHECKING:
    from ..mobility.base import Kinematics


class DrawnChannel(Channel):
    """The radio channel of a run, drawn from its models.

    Per frame: distances, the LOS state (a fixed one, or TR 38.901's spatially consistent one),
    the path loss, the shadowing along each device's path, ``H = 10^(-(PL + S)/10)``. Per slot:
    the fading ``g`` (and its complex coefficient when the CSI model needs it), ``h = g H``, and
    the gain the scheme sees: ``h`` under perfect CSI, else ``H |c_hat|^2``
    (:class:`~wflsim.sim.world.channel.csi.Csi`) with the law of the true coefficient given
    ``c_hat`` (:class:`~wflsim.sim.world.channel.csi.CsiPosterior`, for a Gaussian coefficient).

    Args:
        pathloss: distance (and LOS state) to path loss.
        fading: the small-scale fading per slot.
        num_devices: ``N``.
        shadowing: log-normal shadowing (None: none).
        los_state: the LOS-state process (needed iff the path loss is probabilistic).
        csi: imperfect CSI (None: perfect).
    """

    def __init__(
        self,
        pathloss: PathLossModel,
        fading: FadingModel,
        num_devices: int,
        *,
        shadowing: Shadowing | None = None,
        los_state: LosState | None = None,
        csi: Csi | None = None,
    ) -> None:
        if num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, got {num_devices}")
        if (pathloss.los_mode == "probabilistic") != (los_state is not None):
            raise ValueError("a LOS-state process is needed iff the path loss is probabilistic")
        if shadowing is not None and shadowing.by_state and pathloss.los_mode is None:
            raise ValueError("shadowing by LOS state needs a path-loss model with a LOS state")
        self.pathloss = pathloss
        self.fading = fading
        self.num_devices = int(num_devices)
        self.shadowing = shadowing
        self.los_state = los_state
        self.csi = csi
        self._odometer_m: F64 | None = None  # odometer at the previous frame start

    @property
    def has_shadowing(self) -> bool:
        """Whether there is shadowing."""
        return self.shadowing is not None

    @property
    def has_los(self) -> bool:
        """Whether the path loss has a LOS state."""
        return self.pathloss.los_mode is not None

    def large_scale(self, frame: int, motion: Kinematics) -> LargeScale:
        """The frame's large-scale channel (frames in order)."""
        dist = physics.distance_m(motion.positions_m)
        odo = np.asarray(motion.odometer_m, dtype=np.float64)
        travelled = np.zeros_like(odo) if self._odometer_m is None else odo - self._odometer_m
        self._odometer_m = odo.copy()
        los: B8 | None = None
        mode = self.pathloss.los_mode
        if mode == "probabilistic":
            assert self.los_state is not None
            los = self.los_state.frame(frame, travelled, dist)
        elif mode is not None:
            los = np.full(self.num_devices, mode == "los")
        pl = self.pathloss.path_loss_db(dist, los)
        speed = np.asarray(motion.speed_mps, dtype=np.float64)
        if self.shadowing is None:
            return LargeScale(dist, pl, physics.large_scale_gain(pl), speed, None, los)
        sf = self.shadowing.frame(frame, travelled, los)
        return LargeScale(dist, pl, physics.large_scale_gain(pl + sf), speed, sf, los)

    def median_gain(self, distance_m: F64) -> F64:
        """Path-loss gain at ``distance_m`` (the lower of LOS / NLOS with a LOS state)."""
        d = np.asarray(distance_m, dtype=np.float64)
        if self.pathloss.los_mode is None:
            return physics.large_scale_gain(self.pathloss.path_loss_db(d, None))
        worst = np.maximum(
            self.pathloss.path_loss_db(d, np.ones(d.shape, dtype=bool)),
            self.pathloss.path_loss_db(d, np.zeros(d.shape, dtype=bool)),
        )
        return physics.large_scale_gain(worst)

    def _slot(self, slot: int, large: LargeScale) -> SlotChannel:
        """``h = g H``; the scheme sees ``h`` or, with imperfect CSI, ``H |c_hat|^2``."""
        small = self.fading.draw(slot, large.speed_mps, coefficient=self.csi is not None)
        h = physics.channel_power_gain(large.gain, small.power)
        if self.csi is None:
            return SlotChannel(gain=h, seen_gain=h)
        assert small.coefficient is not None
        depth = self.csi.delay_slots
        c_hat = self.csi.seen_coefficient(
            slot, small.coefficient, lambda: self.fading.history(depth, large.speed_mps)
        )
        seen = c_hat.real * c_hat.real + c_hat.imag * c_hat.imag
        posterior = None
        cmap = self.fading.coefficient_map()
        if cmap is not None:
            kappa = self.fading.lag_correlation(large.speed_mps, depth)
            posterior = self.csi.posterior(c_hat, cmap, kappa)
        return SlotChannel(
            gain=h, seen_gain=physics.channel_power_gain(large.gain, seen), posterior=posterior
        )

    def describe(self) -> dict[str, Any]:
        """Models, parameters and what the controller assumes (for the run's metadata)."""
        return {
            "pathloss": self.pathloss.describe(),
            "shadowing": "none" if self.shadowing is None else self.shadowing.describe(),
            "fading": self.fading.describe(),
            "csi": "perfect" if self.csi is None else self.csi.describe(),
            "controller_assumption": self.controller_assumption(),
        }

    def controller_assumption(self) -> dict[str, Any]:
        """Whether this channel is what Theorem 2's closed forms assume, and each difference."""
        fam = self.fading.describe()
        differences: list[str] = []
        notes: list[str] = []
        model = fam["model"]
        if model == "rician":
            differences.append(
                f"small-scale power is Rician (K = {fam['k_db']} dB: 2 (K+1) g is noncentral "
                "chi-square with 2 degrees of freedom), not Exp(1): the closed forms' outage "
                "probability 1 - exp(-h_min/H) and energy expectations are Rayleigh's"
            )
        elif model == "nakagami" and not self.fading.rayleigh:
            differences.append(
                f"small-scale power is Gamma(m = {fam['m']}, 1/m) (Nakagami-m), not Exp(1): the "
                "closed forms' outage probability and energy expectations are Rayleigh's"
            )
        elif model == "nakagami":
            notes.append("Nakagami-m with m = 1 is Rayleigh fading")
        elif model == "none":
            differences.append("no small-scale fading: h = H in every slot, not Exp(mean H)")
        if self.fading.correlated:
            notes.append(
                "fading is correlated in time (Gauss-Markov); each slot's marginal law is "
                "unchanged, and the expected per-slot cost the controller minimises depends only "
                "on the marginal (linearity of expectation), so correlation alone does not bias "
                "it; realised costs and queues vary more from frame to frame"
            )
        if self.shadowing is not None:
            notes.append("shadowing is part of the large-scale gain H, known at each frame start")
        if self.pathloss.los_mode is not None:
            notes.append("the LOS state enters the path loss, hence H, known at each frame start")
        if self.csi is not None and self.csi.error_variance > 0.0:
            differences.append(
                f"imperfect CSI: the scheme decides on an estimate with error variance "
                f"{self.csi.error_variance}; p_min is computed on h_hat while success follows h, "
                "so uploads with h < h_hat miss the deadline (outages the closed forms exclude)"
            )
        if self.csi is not None and self.csi.delay_slots > 0:
            differences.append(
                f"outdated CSI: the scheme sees the fading of {self.csi.delay_slots} slot(s) "
                "before; p_min is computed on it while success follows the current h"
            )
        return {
            "assumption": CONTROLLER_ASSUMPTION,
            "matches": not differences,
            "differences": differences,
            "notes": notes,
        }

    def state_dict(self) -> dict[str, Any]:
        """The state of the models with memory (fading, shadowing, LOS state, CSI) and the
        odometer reading of the last frame start."""
        return {
            "odometer_m": None if self._odometer_m is None else self._odometer_m.copy(),
            "fading": self.fading.state_dict(),
            "shadowing": None if self.shadowing is None else self.shadowing.state_dict(),
            "los_state": None if self.los_state is None else self.los_state.state_dict(),
            "csi": None if self.csi is None else self.csi.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        odo = state["odometer_m"]
        if odo is not None:
            odo = np.array(odo, dtype=np.float64)
            if odo.shape != (self.num_devices,):
                raise ValueError(
                    f"channel state is for {odo.shape[0]} devices, this run has {self.num_devices}"
                )
        self._odometer_m = odo
        self.fading.load_state_dict(state["fading"])
        for name in ("shadowing", "los_state", "csi"):
            part = getattr(self, name)
            if (part is None) != (state[name] is None):
                raise ValueError(f"channel state and this run disagree on {name}")
            if part is not None:
                part.load_state_dict(state[name])
