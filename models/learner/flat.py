"""A network seen as one flat parameter vector: names, shapes, views, buffers."""

from __future__ import annotations

import torch
from torch import nn


class FlatModel:
    """The trainable parameters of ``model`` as one flat ``(D,)`` vector, in
    ``model.named_parameters()`` order (parameters with ``requires_grad=False`` stay fixed).

    Attributes:
        model: the module (the learner never reads its parameters, only its structure).
        names, shapes, sizes: of the trainable parameters, in order.
        num_params: ``D``.
        fixed: the non-trainable parameters, by name.
        has_batchnorm: whether the model has BatchNorm layers (per-device batch statistics).
        has_conv: whether the model has 2-D convolutions (:meth:`input_layout` then hands a CPU
            its image batches channels-last).
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        named = [(k, p) for k, p in model.named_parameters() if p.requires_grad]
        self.names = [k for k, _ in named]
        self.shapes = [tuple(p.shape) for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.num_params = int(sum(self.sizes))
        self.fixed = {k: p.detach() for k, p in model.named_parameters() if not p.requires_grad}
        self.has_batchnorm = any(
            isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()
        )
        self.has_conv = any(isinstance(m, nn.Conv2d) for m in model.modules())

    def input_layout(self, x: torch.Tensor, *, training: bool = False) -> torch.Tensor:
        """``x`` ``(B, C, H, W)`` in the memory layout this model's passes are fastest in: on a
        CPU, for a model with convolutions, channels-last (oneDNN's convolutions run 1.3-1.7x
        faster on it for the project's CNNs, forward and backward: docs/performance.md); the
        same values, so the same result up to float rounding. A single-channel batch is only
        given channels-last strides (the same memory, no copy). ``training``: a pass whose
        gradients are taken, which keeps the standard layout for a model with BatchNorm (its
        batch statistics over a device's few samples amplify the layouts' different rounding,
        and the gradients of the biases ahead of it are zero up to that rounding). Anything else
        is returned as is."""
        if training and self.has_batchnorm:
            return x
        if not self.has_conv or x.dim() != 4 or x.device.type != "cpu":
            return x
        n, c, h, w = x.shape
        if c == 1 and x.is_contiguous():
            return x.as_strided(x.shape, (h * w, 1, w, 1))
        return x.contiguous(memory_format=torch.channels_last)

    def initial_params(self) -> torch.Tensor:
        """The model's current trainable parameters, flat, float32 ``(D,)``."""
        named = [p for k, p in self.model.named_parameters() if p.requires_grad]
        with torch.no_grad():
            return torch.cat([p.detach().reshape(-1) for p in named]).to(torch.float32)

    def initial_buffers(self) -> dict[str, torch.Tensor]:
        """Copies of the model's buffers (BatchNorm running statistics)."""
        return {k: v.detach().clone() for k, v in self.model.named_buffers()}

    def param_dict(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Split a flat ``(..., D)`` vector into ``{name: (..., *shape)}`` views."""
        lead = flat.shape[:-1]
        pieces = torch.split(flat, self.sizes, dim=-1)
        triples = zip(self.names, pieces, self.shapes, strict=True)
        return {k: p.reshape(*lead, *s) for k, p, s in triples}
