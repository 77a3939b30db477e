"""Evaluation of the global model on the test split."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import functional_call

from .. import data as _data
from .flat import FlatModel
from .gradients import autocast_for

#: ``eval_batch_size="auto"`` per torch device type. On a CPU a batch of 512 test images keeps the
#: activations in cache: the paper's ``cnn_mnist`` evaluated MNIST's 10,000 test images in half
#: the time of batches of 2,048 (one torch thread, issue 49); a GPU keeps 2,048.
AUTO_EVAL_BATCH: dict[str, int] = {"cpu": 512, "cuda": 2048}


def eval_batch_for(eval_batch_size: int | str, device: torch.device) -> int:
    """Test images per forward pass: ``eval_batch_size``, or :data:`AUTO_EVAL_BATCH` of
    ``device``'s type for ``"auto"`` (2,048 for another type); a ``ValueError`` naming the field
    for anything but ``"auto"`` or an integer >= 1."""
    if eval_batch_size == "auto":
        return AUTO_EVAL_BATCH.get(device.type, 2048)
    if isinstance(eval_batch_size, str | bool) or eval_batch_size < 1:
        raise ValueError(f"eval_batch_size must be 'auto' or >= 1, got {eval_batch_size!r}")
    return int(eval_batch_size)


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
