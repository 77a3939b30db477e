"""The two gradient paths: many devices in one ``vmap(grad)`` call, or plain autograd per device.

Both compute, for every device in a slot, the gradient of its mean cross-entropy over its own
``B_n`` samples at its own local parameters (eq. 2), BatchNorm with the device's own batch
statistics and its own copy of the running statistics. :meth:`GradientPaths.compute` picks the
path: when fewer than two devices fit a chunk of ``chunk_samples`` samples (on a CPU: any
``B_n > 256``, e.g. the paper's 512), a vmap would run over one device at a time, i.e. a loop
with functorch's overhead (MobileNetV2, 512 CIFAR images: 1.4x the time and 1.7x the activation
memory of plain autograd), so each device gets one plain autograd pass instead.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from .. import data as _data
from .flat import FlatModel
from .sampling import Batch

#: ``(uploads (n, D), losses (n,), per-device buffers {name: (n, ...)})``
Grads = tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]


class GradientPaths:
    """Per-device gradients of a slot's devices.

    Args:
        net: the flat view of the model.
        x_train, y_train: the training set on the learner's device.
        chunk_samples: at most about this many samples (devices x padded batch) go through the
            network at once (``vmap`` ``chunk_size``); ``None``: no bound. A model without
            BatchNorm splits a batch larger than it into micro-batches on the per-device path
            (exact: the loss is a weighted sum over samples).
        device: the torch device.
    """

    def __init__(
        self,
        net: FlatModel,
        x_train: torch.Tensor | _data.CompactImages,
        y_train: torch.Tensor,
        chunk_samples: int | None,
        device: torch.device,
    ) -> None:
        self.net = net
        self.x_train = x_train
        self.y_train = y_train
        self.chunk_samples = chunk_samples
        self.device = device
        #: the arithmetic of the forward and backward passes (``learning.precision``):
        #: ``"float32"`` (exact, the default) or ``"bfloat16"`` (autocast: matrix products and
        #: convolutions in bfloat16, the parameters, gradients and losses in float32)
        self.precision = "float32"

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The context of the passes: torch's autocast to bfloat16 under ``"bfloat16"``,
        nothing under ``"float32"``."""
        return autocast_for(self.precision, self.device)

    def compute(
        self,
        params: torch.Tensor,
        batch: Batch,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor] | None = None,
    ) -> Grads:
        """The devices' gradients at ``params`` (``(D,)`` shared or ``(n, D)`` per device).

        Each device starts from a copy of ``buffers`` (BatchNorm running statistics), or from
        its own row of ``device_buffers`` ``{name: (n, ...)}`` when given.
        """
        cap = self.chunk_samples
        b = batch.sizes
        with self.autocast():
            if cap is not None and cap < 2 * int(b.max()):
                return self.per_device_grads(params, batch.idx, b, buffers, device_buffers)
            return self.vmap_grads(params, batch.idx, batch.weights, b, buffers, device_buffers)

    @property
    def steps_per_device(self) -> bool:
        """Whether :meth:`compute_diverged` runs one autograd pass per device (on a CPU), so
        that the local steps after the first go device after device
        (:mod:`wflsim.models.learner.local`)."""
        return self.device.type == "cpu"

    def compute_diverged(
        self,
        params: torch.Tensor,
        batch: Batch,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor] | None = None,
    ) -> Grads:
        """:meth:`compute` at ``(n, D)`` parameters that differ in every coordinate (the local
        steps after the first): on a CPU one autograd pass per device, since a ``vmap`` over
        per-device weights runs grouped convolutions, slower than the devices one by one
        (``benchmarks/fedavg_local_steps.py``); elsewhere as :meth:`compute`."""
        if self.device.type == "cpu":
            with self.autocast():
                return self.per_device_grads(
                    params, batch.idx, batch.sizes, buffers, device_buffers
                )
        return self.compute(params, batch, buffers, device_buffers)

    def vmap_grads(
        self,
        params: torch.Tensor,
        idx: np.ndarray,
        wts: np.ndarray,
        b: np.ndarray,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor] | None = None,
    ) -> Grads:
        """Uploads of ``n`` devices by :meth:`batched_grads` (one call per distinct ``B_n`` for a
        BatchNorm model with unequal batches, where padding would leak into the batch statistics).

        ``params`` ``(D,)`` shared or ``(n, D)``; ``idx``, ``wts`` ``(n, max B_n)`` padded sample
        indices and weights; ``b`` ``(n,)``. Returns ``(n, D)``, ``(n,)`` and ``{name: (n, ...)}``.
        """
        n, dev = b.size, self.device
        per_row = params.dim() == 2
        idx_t = torch.as_tensor(idx, device=dev)
        wts_t = torch.as_tensor(wts, device=dev)
        if self.net.has_batchnorm and (b != b.max()).any():
            groups = [np.flatnonzero(b == v) for v in np.unique(b)]
        else:
            groups = [np.arange(n)]
        grads = torch.empty(n, self.net.num_params, device=dev)
        losses = torch.empty(n, device=dev)
        new_bufs: dict[str, torch.Tensor] = {}
        cap = self.chunk_samples
        if len(groups) == 1 and (cap is None or cap // int(b.max()) >= n):  # one vmap call
            sel = idx_t[:, : int(b.max())]
            return self.batched_grads(
                params,
                self.x_train[sel],
                self.y_train[sel],
                wts_t[:, : int(b.max())],
                buffers,
                device_buffers,
            )
        for group in groups:
            width = int(b[group].max())
            # the chunks vmap's chunk_size would make, each written into its rows of ``grads``
            # as it comes (no (n, D) list of chunks, no concatenation of them)
            size = group.size if cap is None else max(1, cap // width)
            for g in np.split(group, range(size, group.size, size)):
                g_t = torch.as_tensor(g, device=dev)
                sel = idx_t[g_t, :width]
                gr, ls, bufs = self.batched_grads(
                    params[g_t] if per_row else params,
                    self.x_train[sel],
                    self.y_train[sel],
                    wts_t[g_t, :width],
                    buffers,
                    None
                    if device_buffers is None
                    else {k: v[g_t] for k, v in device_buffers.items()},
                )
                grads[g_t] = gr
                losses[g_t] = ls
                for k, v in bufs.items():
                    if k not in new_bufs:
                        new_bufs[k] = torch.empty(n, *v.shape[1:], dtype=v.dtype, device=v.device)
                    new_bufs[k][g_t] = v
        return grads, losses, new_bufs

    def per_device_grads(
        self,
        params: torch.Tensor,
        idx: np.ndarray,
        b: np.ndarray,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor] | None = None,
    ) -> Grads:
        """Uploads of ``n`` devices, one plain autograd pass per device (same maths as
        :meth:`batched_grads`). A model without BatchNorm splits a batch larger than
        ``chunk_samples`` into micro-batches whose weighted-sum losses and gradients add up
        exactly. Arguments and returns as :meth:`vmap_grads`.
        """
        n, dev = b.size, self.device
        net = self.net
        grads = torch.empty(n, net.num_params, device=dev)
        losses = torch.empty(n, device=dev)
        new_bufs = {
            k: torch.empty(n, *v.shape, dtype=v.dtype, device=dev) for k, v in buffers.items()
        }
        idx_t = torch.as_tensor(idx, device=dev)
        shared = params.dim() == 1
        if shared:  # nothing frozen: one leaf (and one parameter dict) serves every device
            leaf, pdict = self.leaf(params)
        net.model.train()
        for row in range(n):
            if not shared:
                leaf, pdict = self.leaf(params[row])
            if device_buffers is None:
                bufs = {k: v.clone() for k, v in buffers.items()}
            else:
                bufs = {k: v[row].clone() for k, v in device_buffers.items()}
            grads[row], losses[row] = self.device_grad(leaf, pdict, idx_t[row], int(b[row]), bufs)
            for k, v in bufs.items():
                new_bufs[k][row] = v
        return grads, losses, new_bufs

    def leaf(self, params: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """A leaf sharing the storage of one device's ``(D,)`` parameters and the parameter
        dict (views of it, and the fixed parameters) :meth:`device_grad` runs the model on."""
        leaf = params.detach().requires_grad_(True)
        return leaf, {**self.net.param_dict(leaf), **self.net.fixed}

    def device_grad(
        self,
        leaf: torch.Tensor,
        pdict: dict[str, torch.Tensor],
        idx: torch.Tensor,
        b_n: int,
        bufs: dict[str, torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One device's gradient ``(D,)`` (a fresh tensor) and loss ``()``: its mean
        cross-entropy over the samples ``idx[:b_n]`` at :meth:`leaf`'s parameters, one plain
        autograd pass (micro-batches of ``chunk_samples`` for a model without BatchNorm, whose
        weighted-sum losses and gradients add up exactly); its BatchNorm statistics ``bufs``
        are updated in place (model in train mode, in the caller's autocast)."""
        net, cap = self.net, self.chunk_samples
        step = b_n if (net.has_batchnorm or cap is None) else cap
        total = loss_sum = torch.empty(0)
        for start in range(0, b_n, step):
            sel = idx[start : min(b_n, start + step)]
            logits = functional_call(
                net.model, (pdict, bufs), (net.input_layout(self.x_train[sel], training=True),)
            )
            loss = F.cross_entropy(logits, self.y_train[sel], reduction="sum") / b_n
            (g,) = torch.autograd.grad(loss, leaf)
            if start == 0:
                total, loss_sum = g, loss.detach()
            else:
                total += g
                loss_sum = loss_sum + loss.detach()
        return total, loss_sum

    def batched_grads(
        self,
        params: torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        wts: torch.Tensor,
        buffers: dict[str, torch.Tensor],
        device_buffers: dict[str, torch.Tensor] | None = None,
    ) -> Grads:
        """One ``vmap(grad)`` call over devices.

        ``params`` ``(D,)`` shared (``in_dims=None``) or ``(n, D)`` per device; ``x``
        ``(n, B, ...)``, ``y`` ``(n, B)``, ``wts`` ``(n, B)``. Returns ``(n, D)`` gradients,
        ``(n,)`` losses and the per-device updated buffers ``{name: (n, ...)}``.
        """
        net = self.net
        model, fixed = net.model, net.fixed
        n, width = x.shape[0], x.shape[1]
        p_dim = 0 if params.dim() == 2 else None
        pdict = net.param_dict(params)
        if device_buffers is None:
            bufs = {k: v.expand(n, *v.shape).clone() for k, v in buffers.items()}
        else:
            bufs = {k: v.clone() for k, v in device_buffers.items()}

        def loss_fn(p: Any, b: Any, xb: Any, yb: Any, wb: Any) -> Any:
            logits = functional_call(model, ({**p, **fixed}, b), (xb,))
            loss = (F.cross_entropy(logits, yb, reduction="none") * wb).sum()
            return loss, (loss.detach(), b)

        cap = self.chunk_samples
        chunk = None
        if cap is not None:
            chunk = max(1, cap // width)
            chunk = None if chunk >= n else chunk
        model.train()
        g, (loss, new_b) = vmap(
            grad(loss_fn, has_aux=True),
            in_dims=(p_dim, 0 if bufs else None, 0, 0, 0),
            chunk_size=chunk,
        )(pdict, bufs, x, y, wts)
        flat = torch.cat([g[k].reshape(n, -1) for k in net.names], dim=1)
        return flat, loss, new_b

    def losses(
        self, params: torch.Tensor, batch: Batch, buffers: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """Each device's mean cross-entropy over its batch at the shared ``params`` ``(D,)``, a
        forward pass only (a loss probe), ``(n,)``: one ``vmap`` over devices (one call per
        distinct ``B_n`` for a BatchNorm model with unequal batches, as :meth:`vmap_grads`),
        BatchNorm on each device's batch statistics, as its gradient sees them, from a copy of
        ``buffers`` that is discarded (nothing of the model changes)."""
        net, dev, b = self.net, self.device, batch.sizes
        model, fixed = net.model, net.fixed
        pdict = {**net.param_dict(params.detach()), **fixed}
        idx_t = torch.as_tensor(batch.idx, device=dev)
        wts_t = torch.as_tensor(batch.weights, device=dev)
        if net.has_batchnorm and (b != b.max()).any():
            groups = [np.flatnonzero(b == v) for v in np.unique(b)]
        else:
            groups = [np.arange(b.size)]

        def loss_fn(bufs: Any, xb: Any, yb: Any, wb: Any) -> Any:
            logits = functional_call(model, (pdict, bufs), (xb,))
            return (F.cross_entropy(logits, yb, reduction="none") * wb).sum()

        out = torch.empty(b.size, device=dev)
        model.train()
        with torch.no_grad(), self.autocast():
            for g in groups:
                g_t = torch.as_tensor(g, device=dev)
                width = int(b[g].max())
                sel = idx_t[g_t, :width]
                bufs = {k: v.expand(g.size, *v.shape).clone() for k, v in buffers.items()}
                cap = self.chunk_samples
                chunk = None if cap is None else max(1, cap // width)
                out[g_t] = vmap(
                    loss_fn,
                    in_dims=(0 if bufs else None, 0, 0, 0),
                    chunk_size=None if chunk is None or chunk >= g.size else chunk,
                )(bufs, self.x_train[sel], self.y_train[sel], wts_t[g_t, :width])
        return out


#: ``learning.precision``'s values: the arithmetic of the learner's passes.
PRECISIONS = ("float32", "bfloat16")


def autocast_for(precision: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """torch's autocast to bfloat16 on ``device`` under ``precision = "bfloat16"``, a context
    that does nothing under ``"float32"``."""
    if precision == "float32":
        return contextlib.nullcontext()
    if precision == "bfloat16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    raise ValueError(f"unknown precision {precision!r}; known: {list(PRECISIONS)}")
