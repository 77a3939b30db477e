"""The learner's input layout: channels-last image batches on a CPU, the same values."""

from __future__ import annotations

import torch
from torch import nn

from wflsim.models.learner.flat import FlatModel
from wflsim.models.nets import build_model


def test_a_single_channel_batch_gets_channels_last_strides_on_the_same_memory() -> None:
    """A (B, 1, H, W) batch for a CNN is restrided channels-last without a copy."""
    net = FlatModel(build_model("cnn_mnist", "mnist"))
    x = torch.randn(4, 1, 28, 28)
    y = net.input_layout(x)
    assert y.stride() == (784, 1, 28, 1)
    assert y.data_ptr() == x.data_ptr()
    assert torch.equal(y, x)


def test_a_three_channel_batch_is_copied_channels_last_with_the_same_values() -> None:
    """A (B, 3, H, W) batch for a CNN comes back channels-last contiguous, equal entry by entry."""
    net = FlatModel(build_model("cnn_mnist", "cifar10"))
    x = torch.randn(4, 3, 32, 32)
    y = net.input_layout(x)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(y, x)


def test_a_model_without_convolutions_gets_its_input_unchanged() -> None:
    """The MLP's input is returned as the same tensor object."""
    net = FlatModel(build_model("mlp", "mnist"))
    x = torch.randn(4, 1, 28, 28)
    assert net.input_layout(x) is x


def test_a_batchnorm_model_keeps_the_standard_layout_for_training_passes() -> None:
    """With BatchNorm, a training pass's batch stays as it is; evaluation's goes channels-last."""
    net = FlatModel(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)))
    x = torch.randn(2, 3, 8, 8)
    assert net.input_layout(x, training=True) is x
    assert net.input_layout(x).is_contiguous(memory_format=torch.channels_last)


def test_the_cnns_outputs_agree_in_both_layouts() -> None:
    """cnn_mnist's logits on a channels-last batch equal the standard layout's to float rounding."""
    torch.manual_seed(0)
    model = build_model("cnn_mnist", "mnist")
    net = FlatModel(model)
    x = torch.randn(64, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(model(net.input_layout(x)), model(x), rtol=1e-5, atol=1e-5)
