"""The run's privacy ledger (docs/privacy.md, "In a run"): every device's privacy spent,
composed at each applied update, sim-side (no torch), in every server mode.

At each server step the server hands the ledger the devices of the step and the Gaussian
event each of them got (:meth:`PrivacyLedger.account`): one event per device and step, at its
combined noise multiplier (:func:`step_multipliers` for digital noise, the radio's for over the
air). The ledger composes them on a :class:`~wflsim.sim.privacy.accounting.DeviceAccountant` and writes one
``privacy`` row per device (its multiplier and its epsilon after the step, at the run's delta).

The budget (``spec.epsilon_budget``): a device whose next update could take its epsilon past the
budget (one more event at the floor ``z``; every applied update gets at least ``z``) stops taking
part: :meth:`PrivacyLedger.blocked` is then true for it (the engine takes it out of every slot's
candidates, as a device offline), and one ``dp_budget_spent`` row says when.

Amplification (``amplification = "uniform_selection"``): every step composes the sampled
Gaussian at the floor ``z`` for every device, with the selection's probability ``q = k / N``
(docs/decisions.md says what is assumed).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..trace import TraceBuffer
from .accounting import AccountantKind, DeviceAccountant
from .mechanism import PrivacySpec, central_multipliers, combined_multiplier

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def step_multipliers(
    spec: PrivacySpec,
    devices: ArrayLike,
    weights: ArrayLike,
    groups: ArrayLike | None = None,
) -> tuple[I64, F64]:
    """The devices of a digital server step and the combined multiplier each is accounted at
    (``(m,)`` ascending device numbers, ``(m,)`` multipliers).

    Args:
        spec: the run's privacy (central or local noise, ``z`` given).
        devices: ``(k,)`` the device of each update the step applies (a device may appear more
            than once: an ``async`` buffer with two of its updates).
        weights: ``(k,)`` each update's aggregation weight (``B_n``, times its staleness
            weight under stale updates).
        groups: ``(k,)`` the aggregate each update goes into (the edge, under a hierarchy: each
            edge noises its own aggregate); None: one aggregate.

    Central noise: each update's multiplier in its aggregate is
    :func:`~wflsim.sim.privacy.mechanism.central_multipliers`; a device with several updates in one aggregate is one
    release whose sensitivity is the sum of theirs, so its multiplier is ``1 / sum_i (1 / z_i)``.
    Local noise: every update is its own release at ``z_delta``; a device with several updates
    in the step gets them composed into one event of multiplier ``z_delta / sqrt(m)`` (``m``
    Gaussian releases of equal multiplier compose as one of ``z / sqrt(m)``, exact under RDP).
    Then :func:`~wflsim.sim.privacy.mechanism.combined_multiplier` with the clipped count's noise (adaptive:
    a device with ``m`` updates in the step moves the count by ``m / 2``).
    """
    dev = np.asarray(devices, dtype=np.int64).reshape(-1)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    z_delta = spec.update_multiplier
    assert z_delta is not None, "digital noise has a noise multiplier"
    if dev.size == 0:
        return dev, np.empty(0)
    ids, inverse = np.unique(dev, return_inverse=True)
    count = np.bincount(inverse, minlength=ids.size).astype(np.float64)
    if spec.mechanism == "local":
        per_device = z_delta / np.sqrt(count)
    else:
        grp = np.zeros(dev.size, dtype=np.int64) if groups is None else np.asarray(groups)
        per_update = np.empty(dev.size)
        for g in np.unique(grp).tolist():
            mine = grp == g
            per_update[mine] = central_multipliers(z_delta, w[mine])
        with np.errstate(divide="ignore"):
            inv = np.bincount(inverse, weights=1.0 / per_update, minlength=ids.size)
            per_device = np.where(inv > 0.0, 1.0 / np.where(inv > 0.0, inv, 1.0), np.inf)
    return ids, combined_multiplier(per_device, spec.clipped_count_std, count)


class PrivacyLedger:
    """Every device's privacy spent over a run (the module docstring).

    Args:
        spec: the run's resolved ``[privacy]``.
        num_devices: ``N``.
        buffer: where its ``privacy`` and ``dp_budget_spent`` rows go (the engine's).
        sampling_probability: ``q = k / N`` under ``amplification = "uniform_selection"``
            (None: no amplification).
    """

    def __init__(
        self,
        spec: PrivacySpec,
        num_devices: int,
        buffer: TraceBuffer,
        sampling_probability: float | None = None,
    ) -> None:
        self.spec = spec
        self.num_devices = int(num_devices)
        self.buffer = buffer
        self.sampling_probability = sampling_probability
        kind: AccountantKind = "pld" if spec.accountant == "pld" else "rdp"
        self.accountant = DeviceAccountant(self.num_devices, spec.delta, kind)
        self._ids = np.arange(self.num_devices, dtype=np.int64)
        self._stopped = np.zeros(self.num_devices, dtype=bool)
        self._checked = False  # the budget checked once before the first step

    @property
    def noise_multiplier(self) -> float | None:
        """``z``, the floor every applied update's multiplier reaches (None: measured only)."""
        return self.spec.noise_multiplier

    def blocked(self) -> NDArray[np.bool_]:
        """``(N,)``: the devices that take part no more (their budget spent)."""
        return self._stopped.copy()

    def is_stopped(self, device: int) -> bool:
        """Whether device ``device`` takes part no more."""
        return bool(self._stopped[int(device)])

    @property
    def any_blocked(self) -> bool:
        """Whether a device has stopped."""
        return bool(self._stopped.any())

    def epsilon(self) -> F64:
        """Every device's epsilon now, at the run's delta, ``(N,)``."""
        return np.asarray(self.accountant.epsilon(), dtype=np.float64)

    def check_budget(
        self, now_s: float, frame: int, slot: int, device_ids: ArrayLike | None = None
    ) -> None:
        """Stop the devices ``device_ids`` (None: all) whose next update could take their
        epsilon past the budget, one ``dp_budget_spent`` row each (once per device)."""
        budget, z = self.spec.epsilon_budget, self.spec.noise_multiplier
        self._checked = True
        if budget is None or z is None:
            return
        ids = self._ids if device_ids is None else np.asarray(device_ids, dtype=np.int64)
        ids = ids[~self._stopped[ids]]
        if ids.size == 0:
            return
        q = self.sampling_probability  # the next event is the sampled one under amplification
        nxt = np.asarray(self.accountant.epsilon_if(ids, z, q), dtype=np.float64)
        over = ids[~(nxt <= budget)]
        if over.size == 0:
            return
        self._stopped[over] = True
        eps = self.epsilon()[over]
        self.buffer.add(
            "dp_budget_spent", now_s, frame, slot, over.astype(np.int32), dp_epsilon=eps
        )

    def start(self, now_s: float) -> None:
        """Before the run's first slot: devices whose first update would pass the budget stop."""
        if not self._checked:
            self.check_budget(now_s, 0, -1)

    def admit(self, device_ids: ArrayLike, multipliers: ArrayLike) -> NDArray[np.bool_]:
        """``(k,)``: which devices of a step may take it at ``multipliers`` without passing the
        budget (all without one). A server whose steps may hold a device more than once (stale
        updates) drops the updates of the others."""
        ids = np.asarray(device_ids, dtype=np.int64)
        budget = self.spec.epsilon_budget
        ok = ~self._stopped[ids]
        if budget is None or ids.size == 0:
            return ok
        mult = np.asarray(multipliers, dtype=np.float64)
        nxt = np.full(ids.size, np.inf)
        for z in np.unique(mult[ok]).tolist():  # the accountant takes one multiplier a call
            mine = ok & (mult == z)
            nxt[mine] = self.accountant.epsilon_if(ids[mine], z)
        return ok & (nxt <= budget)

    def admitted(
        self, devices: ArrayLike, weights: ArrayLike, groups: ArrayLike | None = None
    ) -> NDArray[np.bool_]:
        """``(k,)``: which updates of a digital step (:func:`step_multipliers`' arguments) may be
        applied without taking their device past the budget: the devices :meth:`admit` refuses
        lose all their updates, then the rest is checked again (dropping an update may lower
        the others' multipliers), until every device left is within."""
        dev = np.asarray(devices, dtype=np.int64).reshape(-1)
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        grp = None if groups is None else np.asarray(groups).reshape(-1)
        keep = np.ones(dev.size, dtype=bool)
        if self.spec.mechanism == "over_the_air":
            return keep  # over the air has no stale steps (refused: no common transmission)
        while keep.any():
            ids, mult = step_multipliers(
                self.spec, dev[keep], w[keep], None if grp is None else grp[keep]
            )
            ok = self.admit(ids, mult)
            if ok.all():
                break
            keep &= ~np.isin(dev, ids[~ok])
        return keep

    def account(
        self, now_s: float, frame: int, slot: int, device_ids: ArrayLike, multipliers: ArrayLike
    ) -> None:
        """A server step at ``now_s`` applied the updates of ``device_ids`` (``(k,)``, each once),
        each at its combined noise multiplier ``multipliers`` (``(k,)``): compose them, write
        their ``privacy`` rows, stop the devices whose budget is now spent. Under amplification
        every device composes the sampled event at the floor ``z`` instead."""
        ids = np.asarray(device_ids, dtype=np.int64).reshape(-1)
        mult = np.asarray(multipliers, dtype=np.float64).reshape(-1)
        q = self.sampling_probability
        if q is not None:
            z = self.spec.noise_multiplier
            assert z is not None
            ids, mult = self._ids, np.full(self.num_devices, float(z))
        if ids.size == 0:
            return
        self.accountant.compose(ids, mult, sampling_probability=q)
        eps = self.epsilon()[ids]
        self.buffer.add(
            "privacy",
            now_s,
            frame,
            slot,
            ids.astype(np.int32),
            dp_noise_multiplier=mult,
            dp_epsilon=eps,
        )
        self.check_budget(now_s, frame, slot, ids)

    def summary(self) -> dict[str, Any]:
        """The run's privacy totals: ``epsilon_max``, ``epsilon_mean`` (over every device),
        ``dp_noise_multiplier`` (``z``), ``dp_stopped_devices``."""
        eps = self.epsilon()
        return {
            "epsilon_max": float(eps.max()) if eps.size else 0.0,
            "epsilon_mean": float(eps.mean()) if eps.size else 0.0,
            "dp_noise_multiplier": self.spec.noise_multiplier,
            "dp_stopped_devices": int(self._stopped.sum()),
        }

    def state_dict(self) -> dict[str, Any]:
        """The accountant's state and the stopped devices (numpy and builtins only)."""
        return {
            "accountant": self.accountant.state_dict(),
            "stopped": self._stopped.copy(),
            "checked": self._checked,
            "noise_multiplier": self.spec.noise_multiplier,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` (a ledger of the same scenario and ``z``).

        Raises:
            ValueError: the state is for another number of devices or another ``z`` (a run
                must not continue with a noise multiplier calibrated differently).
        """
        stopped = np.array(state["stopped"], dtype=bool)
        if stopped.shape != (self.num_devices,):
            raise ValueError("privacy state is for another number of devices")
        z = state.get("noise_multiplier")
        if z != self.spec.noise_multiplier:
            raise ValueError(
                f"the checkpoint's noise multiplier {z!r} differs from this run's "
                f"{self.spec.noise_multiplier!r}: privacy.noise_multiplier / target_epsilon "
                "must be the run's"
            )
        self.accountant.load_state_dict(state["accountant"])
        self._stopped = stopped
        self._checked = bool(state.get("checked", True))
