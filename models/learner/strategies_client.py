"""Client-side strategies: what a device computes in its local steps (``[strategy]``,
:mod:`wflsim.sim.strategies`), through the hooks of
:class:`~wflsim.models.learner.strategies.Strategy` on the devices' side.

* ``fedprox`` (:class:`FedProx`; Li et al., "Federated Optimization in Heterogeneous Networks",
  MLSys 2020): device ``n`` minimises ``F_n(w) + (mu / 2) |w - w_0|^2`` from the model ``w_0`` it
  started from (the update rule's local parameters), so each local step's gradient on the
  coordinates it trains is ``grad F_n(w_e) + mu (w_e - w_0)``. The upload is the pseudo-gradient
  ``(w_0 - w_E) / lr`` of those steps, and the server steps as FedAvg. With ``E_n = 1`` (or
  ``mu = 0``) it is FedAvg: the proximal term vanishes at ``w_e = w_0``.

What these strategies cost a device beyond FedAvg (extra cycles per local step, a larger upload)
is declared torch-free on their entries in :mod:`wflsim.sim.strategies` and charged by the
network side.
"""

from __future__ import annotations

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


#: The client-side strategies' classes, by name (the names of ``wflsim.sim.strategies``).
CLIENT_BUILT_IN: dict[str, type[Strategy]] = {cls.name: cls for cls in (FedProx,)}
