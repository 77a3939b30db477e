"""Client-side strategies: what a device computes in its local steps (``[strategy]``,
:mod:`wflsim.sim.strategies`), through the hooks of
:class:`~wflsim.models.learner.strategies.Strategy` on the devices' side.

* ``fedprox`` (:class:`FedProx`; Li et al., "Federated Optimization in Heterogeneous Networks",
  MLSys 2020): device ``n`` minimises ``F_n(w) + (mu / 2) |w - w_0|^2`` from the model ``w_0`` it
  started from (the update rule's local parameters), so each local step's gradient on the
  coordinates it trains is ``grad F_n(w_e) + mu (w_e - w_0)``. The upload is the pseudo-gradient
  ``(w_0 - w_E) / lr`` of those steps, and the server steps as FedAvg. With ``E_n = 1`` (or
  ``mu = 0``) it is FedAvg: the proximal term vanishes at ``w_e = w_0``.

* ``scaffold`` (:class:`Scaffold`; Karimireddy et al., "SCAFFOLD: Stochastic Controlled
  Averaging for Federated Learning", ICML 2020, Algorithm 1 with option II): the server keeps a
  control variate ``c`` and device ``i`` its own ``c_i`` (both 0 at the start). Each local step
  takes ``g_e = grad F_i(w_e) + c - c_i`` (``c`` as downloaded with the model, ``c_i`` as the
  update started), on the coordinates the device trains. With the upload ``u_i`` the
  pseudo-gradient ``sum_e g_e = (w_0 - w_E) / lr`` as the update rule forms it, the device's
  control-variate update is ``dc_i = u_i / E_i - c`` (option II's ``c_i+ - c_i``, zero on the
  coordinates it does not train) and is sent with the upload. When the upload arrives (the
  server's step that applies it), ``c_i <- c_i + dc_i`` and ``c <- c + sum_i dc_i / N`` (``N``
  devices), so ``c`` stays the mean of the ``c_i``; an upload that never arrives changes
  neither (the device keeps ``c_i`` until the server acknowledges it). The model's step is
  FedAvg's (eq. 4: ``eta_g = 1`` on the rule's aggregate).

What these strategies cost a device beyond FedAvg (extra cycles per local step, a larger upload)
is declared torch-free on their entries in :mod:`wflsim.sim.strategies` and charged by the
network side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel

from wflsim.sim.strategies import FedProxParams

from .strategies import Strategy, StrategySettings


class FedProx(Strategy):
    """``fedprox``: local steps on ``F_n(w) + (mu / 2) |w - w_0|^2``, i.e. the gradient plus
    ``mu (w_e - w_0)``; the server step is FedAvg's."""

    name = "fedprox"
    params: FedProxParams

    def __init__(self, params: BaseModel, settings: StrategySettings) -> None:
        super().__init__(params, settings)
        self.mu = float(self.params.mu)

    def local_correction(self, w_e: torch.Tensor, w_0: torch.Tensor) -> torch.Tensor | None:
        """The proximal term's gradient ``mu (w_e - w_0)`` (None for ``mu = 0``: FedAvg)."""
        if self.mu == 0.0:
            return None
        return self.mu * (w_e - w_0)

    def step_columns(self, uploads: torch.Tensor, local_lr: np.ndarray) -> dict[str, np.ndarray]:
        """``prox_term``: the proximal term at the end of each update's local steps,
        ``(mu / 2) |w_E - w_0|^2 = (mu / 2) lr^2 |u|^2`` (``u`` the upload as formed)."""
        sq = (uploads.to(torch.float64) ** 2).sum(dim=1).cpu().numpy()
        return {"prox_term": 0.5 * self.mu * np.asarray(local_lr, dtype=np.float64) ** 2 * sq}


class Scaffold(Strategy):
    """``scaffold``: control variates correct the devices' drift (the module docstring)."""

    name = "scaffold"
    device_vectors = True

    def __init__(self, params: BaseModel, settings: StrategySettings) -> None:
        super().__init__(params, settings)
        if settings.num_devices is None:
            raise ValueError("scaffold needs the number of devices (StrategySettings.num_devices)")
        self.num_devices = int(settings.num_devices)
        #: the server's control variate ``c`` ``(D,)``: replaced at each step, never changed in
        #: place (versions hold it)
        self.c = self.zeros()
        #: the devices' ``c_i`` ``(N, D)``, changed in place (rows of arrived uploads)
        self.c_dev = torch.zeros(
            (self.num_devices, self.num_params), dtype=torch.float32, device=self.device
        )
        #: which devices' ``c_i`` ever changed (checkpoints save only those rows)
        self.touched = np.zeros(self.num_devices, dtype=bool)

    def version_state(self) -> Any:
        """The server's ``c`` (the tensor itself: it is replaced, never changed in place)."""
        return self.c

    def version_state_dict(self, at: Any) -> dict[str, Any]:
        """``c`` at a version."""
        return {"c": at.cpu().numpy()}

    def version_state_from(self, state: Mapping[str, Any]) -> Any:
        """``c`` at a version, restored."""
        return self.tensor_from(state["c"], "c")

    def device_rows(self, devices: np.ndarray) -> torch.Tensor | None:
        """The devices' ``c_i`` now, ``(n, D)`` (a copy)."""
        return self.c_dev[torch.as_tensor(devices, dtype=torch.long, device=self.device)]

    def _c_of(self, at: Sequence[Any]) -> torch.Tensor:
        """The downloaded ``c`` of each update, ``(n, D)`` (a broadcast view when all share one)."""
        first = at[0]
        if all(a is first for a in at):
            return first.expand(len(at), -1)
        return torch.stack(list(at))

    def local_drift(
        self, devices: np.ndarray, at: Sequence[Any], rows: torch.Tensor | None
    ) -> torch.Tensor | None:
        """``c - c_i`` per device (None before any upload arrived: every ``c`` and ``c_i`` is
        still 0, and the steps are FedAvg's)."""
        if not self.touched.any():
            return None
        if rows is None:
            rows = self.device_rows(devices)
        assert rows is not None
        return self._c_of(at) - rows

    def arrived(
        self,
        devices: np.ndarray,
        uploads: torch.Tensor,
        steps: np.ndarray,
        trained: torch.Tensor | None,
        at: Sequence[Any],
        rows: torch.Tensor | None = None,
    ) -> None:
        """``dc_i = u_i / E_i - c`` (0 where not trained); device ``i``'s control variate
        becomes ``c_i+ = c_i + dc_i`` with ``c_i`` as its update started (``rows``; None: as now),
        replacing the one it has now, and ``c`` moves by ``(c_i+ - c_i now) / N`` (so that it
        stays the mean of the ``c_i``; the same as ``sum dc_i / N`` unless an update of the
        device was applied after this one started)."""
        e = torch.as_tensor(np.asarray(steps), dtype=uploads.dtype, device=uploads.device)
        dc = uploads / e.view(-1, 1) - self._c_of(at)
        if trained is not None:
            dc = dc.masked_fill(~trained, 0.0)
        self._dc_norm = torch.linalg.vector_norm(dc.to(torch.float64), dim=1).cpu().numpy()
        dev = np.asarray(devices, dtype=np.int64)
        ids = torch.as_tensor(dev, dtype=torch.long, device=self.device)
        self.touched[dev] = True
        if rows is None:  # every update started from its device's c_i of now: c_i += dc_i
            self.c_dev.index_add_(0, ids, dc)
            self.c = self.c + dc.sum(dim=0) / self.num_devices
            return
        new = rows + dc
        if np.unique(dev).size == dev.size:
            change = new - self.c_dev[ids]
            self.c_dev[ids] = new
        else:  # two updates of one device in a step: replaced in the order they are applied
            change = torch.empty_like(new)
            for r, n in enumerate(dev.tolist()):
                change[r] = new[r] - self.c_dev[n]
                self.c_dev[n] = new[r]
        self.c = self.c + change.sum(dim=0) / self.num_devices

    def step_columns(self, uploads: torch.Tensor, local_lr: np.ndarray) -> dict[str, np.ndarray]:
        """``control_update_norm``: ``|dc_i|_2`` of each upload of the step."""
        return {"control_update_norm": self._dc_norm}

    def state_dict(self) -> dict[str, Any]:
        """``c``, and ``c_i`` of the devices whose control variate ever changed."""
        ids = np.flatnonzero(self.touched)
        rows = self.c_dev[torch.as_tensor(ids, dtype=torch.long, device=self.device)]
        return {"c": self.c.cpu().numpy(), "devices": ids, "c_dev": rows.cpu().numpy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore ``c`` and the devices' ``c_i``."""
        self.c = self.tensor_from(state["c"], "c")
        ids = np.asarray(state["devices"], dtype=np.int64).reshape(-1)
        rows = np.asarray(state["c_dev"], dtype=np.float32)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_devices):
            raise ValueError(f"saved scaffold state names devices outside [0, {self.num_devices})")
        if rows.shape != (ids.size, self.num_params):
            raise ValueError(
                f"saved scaffold state 'c_dev' has shape {rows.shape}, expected "
                f"({ids.size}, {self.num_params})"
            )
        self.c_dev.zero_()
        self.c_dev[torch.as_tensor(ids, dtype=torch.long, device=self.device)] = torch.as_tensor(
            rows, device=self.device
        )
        self.touched[:] = False
        self.touched[ids] = True


#: The client-side strategies' classes, by name (the names of ``wflsim.sim.strategies``).
CLIENT_BUILT_IN: dict[str, type[Strategy]] = {cls.name: cls for cls in (FedProx, Scaffold)}
