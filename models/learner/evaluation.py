"""Evaluation of the global model on the test split."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import functional_call

from .. import data as _data
from .flat import FlatModel
from .gradients import autocast_for


def evaluate(
    net: FlatModel,
    w: torch.Tensor,
    buffers: dict[str, torch.Tensor],
    x_test: torch.Tensor | _data.CompactImages,
    y_test: torch.Tensor,
    *,
    max_samples: int | None = None,
    batch_size: int = 2048,
    precision: str = "float32",
) -> tuple[float, float]:
    """``(mean cross-entropy, accuracy)`` of the model with flat parameters ``w`` and
    ``buffers`` (eval mode: BatchNorm uses its running statistics) on the first ``max_samples``
    test samples (all when None), in batches of ``batch_size``, the forward passes in
    ``precision`` (``learning.precision``: float32, or bfloat16 under autocast)."""
    m = x_test.shape[0]
    if max_samples is not None:
        m = min(m, max_samples)
    model = net.model
    params = {**net.param_dict(w), **net.fixed}
    loss_sum, correct = 0.0, 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), autocast_for(precision, w.device):
            for start in range(0, m, batch_size):
                stop = min(m, start + batch_size)
                xb = net.input_layout(x_test[start:stop])
                logits = functional_call(model, (params, buffers), (xb,))
                y = y_test[start:stop]
                loss_sum += float(F.cross_entropy(logits.float(), y, reduction="sum"))
                correct += int((logits.argmax(dim=1) == y).sum())
    finally:
        model.train(was_training)
    return loss_sum / m, correct / m
