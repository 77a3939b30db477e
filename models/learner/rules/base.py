"""The update-rule protocol and the defaults most rules share.

A rule is named by the scheme (``wflsim.sim.updates.UpdateRuleSpec``) and gets its per-frame inputs,
the rule's typed record of :mod:`wflsim.sim.updates`, from the scheme's frame plan. Notation: ``N``
devices, ``D`` parameters, ``w`` the global model ``(D,)``, ``ids`` the devices of a call (``int64``
numpy), ``n`` their number.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

from wflsim.sim.updates import UpdateInputs

from .. import aggregate

AGGREGATIONS = ("weighted", "per_coordinate")


class UpdateRule(Protocol):
    """The learner-side part of a scheme (see the module docstring)."""

    def begin_frame(self, frame: int, w: torch.Tensor, update: UpdateInputs) -> None:
        """Open frame ``frame`` at global model ``w`` with the scheme's per-device inputs."""
        ...

    def local_params(self, w: torch.Tensor, ids: np.ndarray) -> torch.Tensor:
        """Where devices ``ids`` compute their gradients: ``(D,)`` shared or ``(n, D)``."""
        ...

    def trained(self, ids: np.ndarray) -> torch.Tensor | None:
        """Where devices ``ids`` train, ``(n, D)`` bool (None: everywhere), after
        :meth:`local_params` for the same devices: local steps (``wflsim.models.learner.local``)
        give the other coordinates no gradient at any step."""
        ...

    def uploads(self, grads: torch.Tensor, ids: np.ndarray, slot: int) -> torch.Tensor:
        """What devices ``ids`` send in slot ``slot``, from their gradients ``(n, D)`` (after
        local steps: their pseudo-gradients); ``(n, D)``."""
        ...

    def aggregate(
        self, uploads: torch.Tensor, ok: np.ndarray, weights: torch.Tensor
    ) -> torch.Tensor:
        """The server's gradient estimate ``(D,)`` from the uploads ``(k, D)`` that arrived
        (devices ``ok``, weights ``B_n``)."""
        ...

    def settle(self, ok: np.ndarray) -> None:
        """The slot is over: of the devices of the last :meth:`uploads`, ``ok`` arrived (the
        others' uploads are lost: outages)."""
        ...

    def local_buffers(
        self, buffers: dict[str, torch.Tensor], ids: np.ndarray
    ) -> dict[str, torch.Tensor] | None:
        """Per-device starting buffers ``{name: (n, ...)}`` of ``ids`` (None: each device starts
        from a copy of the global ``buffers``)."""
        ...

    def aggregate_buffers(
        self,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor],
        rows: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """New global buffers (BatchNorm statistics) from the successful devices' copies
        (``device_buffers`` ``{name: (n, ...)}``, successful rows ``rows``)."""
        ...

    def after_step(self, w_t: torch.Tensor, w_next: torch.Tensor) -> None:
        """The global model moved from ``w_t`` to ``w_next`` (every slot, also without a step)."""
        ...

    def end_frame(self) -> None:
        """Close the frame."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The rule's state at a frame boundary (numpy arrays, numbers)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        ...


class PlainRule:
    """Defaults: no per-slot bookkeeping, no state carried by the global step, no frame state,
    BatchNorm statistics averaged over the successful devices (integer counters: max)."""

    def settle(self, ok: np.ndarray) -> None:
        """Nothing to do."""

    def trained(self, ids: np.ndarray) -> torch.Tensor | None:
        """Every device trains every parameter."""
        return None

    def local_buffers(
        self, buffers: dict[str, torch.Tensor], ids: np.ndarray
    ) -> dict[str, torch.Tensor] | None:
        """Every device starts from the global buffers."""
        return None

    def after_step(self, w_t: torch.Tensor, w_next: torch.Tensor) -> None:
        """Nothing to do."""

    def end_frame(self) -> None:
        """Nothing to do."""

    def aggregate_buffers(
        self,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor],
        rows: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """``buffers`` with every per-device buffer averaged over ``rows``."""
        out = dict(buffers)
        out.update(aggregate.average_buffers(device_buffers, rows))
        return out


def check_counts(name: str, values: Any, num_devices: int, upper: int) -> np.ndarray:
    """A per-device integer frame input ``(N,)`` in ``[0, upper]``, else ValueError naming it."""
    arr = np.asarray(values)
    if arr.shape != (num_devices,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be ({num_devices},) integers")
    if (arr < 0).any() or (arr > upper).any():
        raise ValueError(f"{name} must lie in [0, {upper}]")
    return arr.astype(np.int64)
