"""Networks (models.nets): parameter counts, shapes, vmap compatibility."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from wflsim.models.nets import MODELS, build_model, count_params, input_shape, num_params


@pytest.mark.parametrize(
    ("name", "dataset", "expected"),
    [
        ("cnn_mnist", "mnist", 440_812),
        ("cnn_mnist", "fashion_mnist", 440_812),
        ("cnn_mnist_small", "mnist", 421_642),
        ("mlp", "digits", 64 * 128 + 128 + 128 * 10 + 10),
        ("mlp", "mnist", 784 * 128 + 128 + 128 * 10 + 10),
        ("mlp", "cifar10", 3072 * 128 + 128 + 128 * 10 + 10),
        ("mobilenet_v2", "cifar10", 502_538),
        ("resnet20", "cifar10", 269_722),
    ],
)
def test_parameter_counts(name: str, dataset: str, expected: int) -> None:
    """num_params gives the documented trainable-parameter count."""
    assert num_params(name, dataset) == expected


@pytest.mark.parametrize("name", MODELS)
def test_forward_shape_and_count_agree(name: str) -> None:
    """A built model maps (B, C, H, W) to (B, 10) logits and has num_params parameters."""
    dataset = "digits" if name == "mlp" else ("mnist" if "mnist" in name else "cifar10")
    torch.manual_seed(0)
    model = build_model(name, dataset).eval()
    with torch.no_grad():
        out = model(torch.randn(2, *input_shape(dataset)))
    assert out.shape == (2, 10)
    assert count_params(model) == num_params(name, dataset)


def test_batchnorm_buffers_are_not_counted() -> None:
    """BatchNorm running statistics are buffers, not counted as parameters."""
    model = build_model("resnet20", "cifar10")
    n_buffers = sum(b.numel() for b in model.buffers())
    assert n_buffers > 0
    assert count_params(model) == sum(p.numel() for p in model.parameters())


def test_no_inplace_activations() -> None:
    """No module runs in place (in-place ops can break torch.func transforms)."""
    for name in MODELS:
        dataset = "cifar10" if name in ("mobilenet_v2", "resnet20") else "mnist"
        for m in build_model(name, dataset).modules():
            assert not getattr(m, "inplace", False), (name, m)
            assert not isinstance(m, nn.Dropout), (name, m)


def test_cnn_too_small_input_and_unknown_names_raise() -> None:
    """cnn_mnist on 8x8 digits, unknown model and unknown dataset are ValueErrors."""
    with pytest.raises(ValueError, match="too small"):
        build_model("cnn_mnist", "digits")
    with pytest.raises(ValueError, match="unknown model"):
        build_model("vgg", "mnist")
    with pytest.raises(ValueError, match="unknown dataset"):
        num_params("mlp", "svhn")


@pytest.mark.parametrize("name", ["mlp", "cnn_mnist", "cnn_mnist_small"])
def test_per_sample_grads_under_vmap_match_autograd(name: str) -> None:
    """vmap(grad(loss)) over samples equals plain autograd per sample."""
    torch.manual_seed(0)
    model = build_model(name, "mnist")
    params = {k: p.detach() for k, p in model.named_parameters()}
    x, y = torch.randn(3, 1, 28, 28), torch.tensor([1, 7, 3])

    def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(model, p, (xi[None],)), yi[None])

    batched = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    for i in range(3):
        model.zero_grad()
        F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).backward()
        for k, p in model.named_parameters():
            torch.testing.assert_close(batched[k][i], p.grad, rtol=1e-4, atol=1e-6)
