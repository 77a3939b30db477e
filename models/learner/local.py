"""Local SGD steps on the devices (FedAvg): ``E_n`` steps from the downloaded model, one upload.

Device ``n`` starts at its local model ``w_0`` (the rule's: the global model, or eq. 1's
``w_tilde_n`` under freezing) and takes ``E_n`` SGD steps on fresh minibatches of ``B_n`` samples
at the local learning rate ``lr`` (the run's learning rate of the slot),

    g_e = m * (grad F_n(w_e; batch_e) + r(w_e, w_0)),   w_(e+1) = w_e - lr g_e,   e = 0 .. E_n - 1,

with ``m`` the coordinates the device trains (the rule's
:meth:`~wflsim.models.learner.rules.base.UpdateRule.trained` mask: its frozen, pruned or dropped
parameters get no gradient at any step, so they keep their values) and ``r`` the server
strategy's local correction (:meth:`~wflsim.models.learner.strategies.Strategy.local_correction`:
FedProx's ``mu (w_e - w_0)``; plus its constant drift term,
:meth:`~wflsim.models.learner.strategies.Strategy.local_drift`: SCAFFOLD's ``c - c_i``; none for
FedAvg and the server-side strategies, whose steps are the plain gradient's, float for float). Its upload is the
pseudo-gradient ``(w_0 - w_E) / lr``, computed as ``sum_e g_e`` (equal in exact arithmetic; the sum
avoids the cancellation of subtracting two nearby models, and is FedSGD's gradient itself for
``E_n = 1``). The server's step ``w - lr * mean(uploads)`` with the same ``lr`` is then FedAvg's
weighted average of the devices' final models, and every update rule (masks, Top-K, quantisation,
aggregation) applies to the pseudo-gradient unchanged.

The first step runs every device through one :meth:`GradientPaths.compute` call (batched
``vmap`` at the shared model, or plain autograd per device). The later steps, at parameters that
differ per device: on a CPU (:attr:`GradientPaths.steps_per_device`) device after device, each on
one ``(D,)`` model updated in place with its upload accumulated in its own row, so that no
``(n, D)`` buffer beyond the uploads is allocated (the same operations on the same values as the
batched form, float for float); elsewhere every device that has not finished its steps through
one :meth:`GradientPaths.compute_diverged` call per step. BatchNorm running statistics carry
from step to step on each device.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .gradients import GradientPaths, Grads
from .sampling import Batch

#: ``correction(w_e, w_0) -> (n, D) | None``: what a local step adds to the devices' gradients
#: at ``w_e`` ``(n, D)``, started from ``w_0`` (``(D,)`` shared or ``(n, D)``); None: nothing.
Correction = Callable[[torch.Tensor, torch.Tensor], "torch.Tensor | None"]


def local_updates(
    paths: GradientPaths,
    params: torch.Tensor,
    batches: list[Batch],
    steps: np.ndarray,
    lr: np.ndarray,
    trained: torch.Tensor | None,
    buffers: dict[str, torch.Tensor],
    device_buffers: dict[str, torch.Tensor] | None = None,
    correction: Correction | None = None,
    drift: torch.Tensor | None = None,
) -> Grads:
    """The uploads of ``n`` devices after their local steps (module docstring).

    Args:
        paths: the gradient paths.
        params: where the devices start, ``(D,)`` shared or ``(n, D)``.
        batches: :meth:`~wflsim.models.learner.sampling.LocalData.draw_steps`'s minibatches (element
            ``e``: the devices with more than ``e`` steps).
        steps: ``E_n``, ``(n,)`` ints ``>= 1``.
        lr: the local learning rate of each device, ``(n,)``.
        trained: ``(n, D)`` bool, True where a device trains (None: everywhere).
        buffers, device_buffers: the starting BatchNorm statistics, as
            :meth:`GradientPaths.compute`.
        correction: the strategy's local correction ``r`` (module docstring; None: none), added
            to each step's gradient before the mask (at the first step too, at ``w_e = w_0``).
        drift: ``(n, D)``, a constant the strategy adds to each step's gradient of each device
            before the mask (SCAFFOLD's ``c - c_i``; None: nothing).

    Returns:
        ``(n, D)`` pseudo-gradients (for ``E_n = 1`` every device's gradient exactly as
        :meth:`GradientPaths.compute` gives it, unmasked), ``(n,)`` the losses of the first
        step (at the downloaded model) and the buffers after each device's last step
        ``{name: (n, ...)}``.
    """
    # more than one step on a CPU: every step device by device, the first one too (one
    # autograd pass per device instead of a vmap over chunks of devices, whose activations and
    # per-device weight gradients held about 3x the uploads' memory at 100 devices of cnn_mnist)
    by_device = len(batches) > 1 and getattr(paths, "steps_per_device", False)
    compute = paths.compute_diverged if by_device else paths.compute
    first = compute(params, batches[0], buffers, device_buffers)
    w0 = params
    if correction is not None:
        grads, losses, bufs = first
        r = correction(params.expand_as(grads), w0)
        if r is not None:
            first = grads + r, losses, bufs
    if drift is not None:
        grads, losses, bufs = first
        first = grads + drift, losses, bufs
    if len(batches) == 1:
        return first
    grads, losses, bufs = first
    if trained is not None:
        grads = grads.masked_fill(~trained, 0.0)
    rate = torch.as_tensor(np.asarray(lr), dtype=grads.dtype, device=grads.device).view(-1, 1)
    if by_device:  # (a stand-in for the paths without steps_per_device: batched)
        total, bufs = _device_by_device(
            paths, params, grads, batches, steps, rate, trained, bufs, correction, drift
        )
        return total, losses, bufs
    total = grads.clone()
    w = params - rate * grads  # (n, D) also when params is shared
    bufs = {k: v.clone() for k, v in bufs.items()}
    for e in range(1, len(batches)):
        active = np.flatnonzero(steps > e)
        if active.size == len(steps):  # every device still steps: no gathers of (n, D) copies
            g, _, new_bufs = paths.compute_diverged(w, batches[e], buffers, bufs or None)
            if correction is not None:
                r = correction(w, w0)
                if r is not None:
                    g += r
            if drift is not None:
                g += drift
            if trained is not None:
                g.masked_fill_(~trained, 0.0)
            total += g
            w -= rate * g
            bufs.update(new_bufs)
            continue
        rows = torch.as_tensor(active, device=grads.device)
        g, _, new_bufs = paths.compute_diverged(
            w[rows], batches[e], buffers, {k: v[rows] for k, v in bufs.items()} if bufs else None
        )
        if correction is not None:
            r = correction(w[rows], w0 if w0.dim() == 1 else w0[rows])
            if r is not None:
                g = g + r
        if drift is not None:
            g = g + drift[rows]
        if trained is not None:
            g = g.masked_fill(~trained[rows], 0.0)
        total[rows] += g
        w[rows] -= rate[rows] * g
        for k, v in new_bufs.items():
            bufs[k][rows] = v
    return total, losses, bufs


def _device_by_device(
    paths: GradientPaths,
    params: torch.Tensor,
    grads: torch.Tensor,
    batches: list[Batch],
    steps: np.ndarray,
    rate: torch.Tensor,
    trained: torch.Tensor | None,
    bufs: dict[str, torch.Tensor],
    correction: Correction | None,
    drift: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Steps ``1 .. E_n - 1`` of each device in turn (:func:`local_updates`' later steps, the
    same operations on each row as the batched form): ``grads`` ``(n, D)``, the first step's
    (masked) gradients, becomes the uploads in place; one ``(D,)`` model per device at a time.
    Returns the uploads and the buffers after each device's last step."""
    w0 = params
    bufs = {k: v.clone() for k, v in bufs.items()}
    # row of device i in batches[e] (which holds the devices with more than e steps)
    rows_of = [np.cumsum(steps > e) - 1 for e in range(len(batches))]
    with paths.autocast():
        paths.net.model.train()
        for i in np.flatnonzero(steps > 1):
            w = (params if params.dim() == 1 else params[i]) - rate[i] * grads[i]
            own = {k: v[i].clone() for k, v in bufs.items()}
            for e in range(1, int(steps[i])):
                batch, row = batches[e], int(rows_of[e][i])
                leaf, pdict = paths.leaf(w)
                idx = torch.as_tensor(batch.idx[row], device=grads.device)
                g, _ = paths.device_grad(leaf, pdict, idx, int(batch.sizes[row]), own)
                if correction is not None:
                    r = correction(w.unsqueeze(0), w0 if w0.dim() == 1 else w0[i : i + 1])
                    if r is not None:
                        g += r[0]
                if drift is not None:
                    g += drift[i]
                if trained is not None:
                    g.masked_fill_(~trained[i], 0.0)
                grads[i] += g
                w -= rate[i] * g
            for k, v in own.items():
                bufs[k][i] = v
    return grads, bufs
