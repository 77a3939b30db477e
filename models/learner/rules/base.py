"""The update-rule protocol and the defaults most rules share.

A rule is named by the scheme (``wflsim.sim.updates.UpdateRuleSpec``) and gets its per-frame inputs,
the rule's typed record of :mod:`wflsim.sim.updates`, from the scheme's frame plan. Notation: ``N``
devices, ``D`` parameters, ``w`` the global model ``(D,)``, ``ids`` the devices of a call (``int64``
numpy), ``n`` their number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple, Protocol

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


class FrameView:
    """A frame's rule state as an update started in that frame needs it when it is computed
    later (stale updates, ``[server]`` semi_sync / async): replaced, never changed, when the next
    frame begins, so it stays valid for the updates that hold it. ``at`` is the rule's state at
    the model version the update downloaded (:meth:`StaleRule.version_state`). The defaults: a
    device trains everything at the downloaded model, from the downloaded buffers."""

    def local_params(self, w: torch.Tensor, device: int, at: Any = None) -> torch.Tensor:
        """Device ``device``'s local model ``(D,)`` at the downloaded global model ``w``."""
        return w

    def frozen(self, device: int, at: Any = None) -> torch.Tensor | None:
        """Device ``device``'s coordinates not trained and not uploaded ``(D,)`` (None: none)."""
        return None

    def local_buffers(
        self, buffers: dict[str, torch.Tensor], device: int, at: Any = None
    ) -> dict[str, torch.Tensor]:
        """Device ``device``'s starting BatchNorm statistics (the downloaded ``buffers``)."""
        return buffers

    def state_dict(self) -> dict[str, Any]:
        """The view's state (numpy arrays, numbers)."""
        return {}


class StaleUpdate(NamedTuple):
    """An update as a rule sees it when its upload is formed (stale updates)."""

    key: int  #: the server's handle; a device's updates start in increasing key order
    device: int
    sample_key: int  #: its minibatch key (the slot in semi_sync, the device's cycle in async)
    slot: int  #: the slot it started in
    view: Any  #: the rule's :class:`FrameView` of the frame it started in
    at: Any  #: the rule's state at the model version it downloaded


class StaleRule(Protocol):
    """What a rule adds to :class:`UpdateRule` to compute stale updates
    (``wflsim.models.learner.stale``): each update at the model version, the rule's version
    state and the frame view it started with, whenever the learner computes it.
    :class:`PlainRule` gives defaults for all but :meth:`frame_view`, :meth:`view_from_state`
    and :meth:`aggregate_stale`."""

    #: the frame begun last (None before the first): the key of :meth:`frame_view`
    frame: int | None
    #: whether a device's uploads must be formed in the order its updates started (state carried
    #: from one upload of a device to its next, e.g. Top-K's residual): the learner then refuses
    #: to form one while an earlier update of the device is neither applied nor dropped
    ordered_uploads: ClassVar[bool]

    def frame_view(self) -> FrameView:
        """The current frame's view (what updates starting now need of the frame)."""
        ...

    def view_from_state(self, state: dict[str, Any]) -> FrameView:
        """A view saved with :meth:`FrameView.state_dict`."""
        ...

    def version_state(self, w: torch.Tensor) -> Any:
        """The rule's state at the materialised model version ``w`` that updates starting on it
        need (None: nothing), kept with the version while they are not computed."""
        ...

    def version_state_dict(self, at: Any) -> Any:
        """:meth:`version_state` for a checkpoint (numpy arrays, numbers, None)."""
        ...

    def version_state_from(self, state: Any, w: torch.Tensor) -> Any:
        """The version state of :meth:`version_state_dict`, for the version ``w``."""
        ...

    def stale_uploads(
        self, grads: Sequence[torch.Tensor], updates: Sequence[StaleUpdate]
    ) -> tuple[list[torch.Tensor], list[Any]]:
        """What the updates send (each ``(D,)``), from their gradients (frozen entries 0), in
        the order the updates started (increasing ``key``), and one per-update value the server
        receives with the upload (``aux``, e.g. a quantisation error; None: nothing)."""
        ...

    def aggregate_stale(
        self,
        uploads: torch.Tensor,
        frozen: torch.Tensor | None,
        weights: torch.Tensor,
        aux: Sequence[Any],
    ) -> torch.Tensor:
        """The step's gradient estimate ``(D,)`` from its uploads ``(k, D)`` (already scaled by
        their staleness weights), their ``frozen`` coordinates ``(k, D)`` (None: none), weights
        ``B`` and their ``aux`` values."""
        ...

    def aggregate_buffers_stale(
        self,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor],
        rows: torch.Tensor,
        aux: Sequence[Any],
    ) -> dict[str, torch.Tensor]:
        """New global buffers from the step's updates' copies (:meth:`UpdateRule.aggregate_buffers`
        with the updates' ``aux`` values)."""
        ...


class PlainRule:
    """Defaults: no per-slot bookkeeping, no state carried by the global step, no frame state,
    BatchNorm statistics averaged over the successful devices (integer counters: max). For stale
    updates (:class:`StaleRule`): no version state, uploads as computed, buffers averaged as in
    a synchronous slot."""

    ordered_uploads: ClassVar[bool] = False

    def version_state(self, w: torch.Tensor) -> Any:
        """No state per model version."""
        return None

    def version_state_dict(self, at: Any) -> Any:
        """Nothing to save."""
        return None

    def version_state_from(self, state: Any, w: torch.Tensor) -> Any:
        """Nothing to restore."""
        return None

    def stale_uploads(
        self, grads: Sequence[torch.Tensor], updates: Sequence[StaleUpdate]
    ) -> tuple[list[torch.Tensor], list[Any]]:
        """The gradients as they are; nothing sent with them."""
        return list(grads), [None] * len(updates)

    def aggregate_buffers_stale(
        self,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor],
        rows: torch.Tensor,
        aux: Sequence[Any],
    ) -> dict[str, torch.Tensor]:
        """:meth:`aggregate_buffers` over ``rows``."""
        return self.aggregate_buffers(buffers, device_buffers, rows)

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

    def server_gradient(self, g: torch.Tensor) -> None:
        """The step's aggregate ``g`` ``(D,)`` as the server used it (the strategy's: a robust
        aggregate such as the median never calls the rule's own :meth:`aggregate`); an optional
        hook the learner calls after every step with uploads, for a rule that keeps the server's
        gradient (pruning's importance). Nothing to do."""

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
