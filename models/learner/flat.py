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
