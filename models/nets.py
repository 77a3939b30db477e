"""The networks, built for a dataset's input shape, all with 10 outputs (logits).

==================  =====================================================  ===================
name                architecture                                           parameters
==================  =====================================================  ===================
``mlp``             flatten, Linear(in, 128), ReLU, Linear(128, 10);       digits 9,610;
                    ``in`` = 64 / 784 / 3072                               MNIST 101,770;
                                                                           CIFAR-10 394,634
``cnn_mnist``       the paper's text: conv5x5-20, ReLU, maxpool2,          440,812 (28x28)
                    conv5x5-50, ReLU, maxpool2, flatten (4*4*50),
                    FC 512, ReLU, FC 10
``cnn_mnist_small`` conv3x3-32 pad 1, ReLU, maxpool2, conv3x3-64 pad 1,    421,642 (28x28;
                    ReLU, maxpool2, FC 128, ReLU, FC 10                    the paper's count)
``mobilenet_v2``    torchvision MobileNetV2, width 0.4, stride-1 stem,     502,538 (+ BatchNorm
                    no dropout (see below)                                 buffers)
``resnet20``        He et al.'s CIFAR ResNet-20 (3 stages x 3 basic        269,722 (+ BatchNorm
                    blocks, 16/32/64 channels, option-A shortcuts)         buffers)
==================  =====================================================  ===================

The paper reports 543,050 parameters for its MobileNetV2; no width/stem configuration of
torchvision's MobileNetV2 gives that number, so we use width 0.4 (502,538) and say so.

Every model is ``vmap``-friendly: no in-place activations, no dropout (the classifier dropout of
MobileNetV2 is removed: under ``vmap`` it would need the global torch RNG, which the simulator
never touches). BatchNorm models run under ``torch.func`` with per-device batch statistics; their
running statistics are buffers (not trainable, not counted by :func:`num_params`).

The CNNs adapt their flatten size to the input shape and raise ``ValueError`` when the input is
too small for them (e.g. ``cnn_mnist`` on 8x8 digits).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from wflsim.sim.config.catalogue import INPUT_SHAPES, MODELS, NUM_CLASSES

__all__ = ["MODELS", "build_model", "count_params", "input_shape", "num_params"]


def input_shape(dataset: str) -> tuple[int, int, int]:
    """Per-sample input shape ``(C, H, W)`` of ``dataset``."""
    try:
        return INPUT_SHAPES[dataset]
    except KeyError:
        raise ValueError(f"unknown dataset {dataset!r}; known: {list(INPUT_SHAPES)}") from None


def _conv_out(size: int, kernel: int, pad: int = 0) -> int:
    return size + 2 * pad - kernel + 1


def _cnn(
    shape: tuple[int, int, int], channels: tuple[int, int], kernel: int, pad: int, hidden: int
) -> nn.Module:
    c, h, w = shape
    for _ in range(2):
        h, w = _conv_out(h, kernel, pad) // 2, _conv_out(w, kernel, pad) // 2
    if h < 1 or w < 1:
        raise ValueError(f"input {shape} is too small for this CNN")
    return nn.Sequential(
        nn.Conv2d(c, channels[0], kernel, padding=pad),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(channels[0], channels[1], kernel, padding=pad),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(channels[1] * h * w, hidden),
        nn.ReLU(),
        nn.Linear(hidden, NUM_CLASSES),
    )


def _mobilenet_v2(shape: tuple[int, int, int]) -> nn.Module:
    from torchvision.models import mobilenet_v2

    model = mobilenet_v2(width_mult=0.4, num_classes=NUM_CLASSES)
    stem = model.features[0][0]
    if shape[0] != stem.in_channels:
        raise ValueError(f"mobilenet_v2 expects {stem.in_channels}-channel input, got {shape}")
    stem.stride = (1, 1)  # 32x32 input: keep the resolution in the stem
    model.classifier = nn.Sequential(nn.Linear(model.last_channel, NUM_CLASSES))  # no dropout
    for m in model.modules():  # torchvision's ReLU6 layers are in-place
        if isinstance(m, nn.ReLU6 | nn.ReLU):
            m.inplace = False
    return model


class _BasicBlock(nn.Module):
    """ResNet basic block with the parameter-free option-A shortcut (stride + zero padding)."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.stride, self.pad = stride, c_out - c_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x
        if self.stride != 1 or self.pad:
            short = x[:, :, :: self.stride, :: self.stride]
            short = F.pad(short, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return F.relu(out + short)


class ResNet20(nn.Module):
    """He et al. (2016) CIFAR ResNet-20: 3x3 conv-16, 3 stages of 3 basic blocks, GAP, FC 10."""

    def __init__(self, in_channels: int = 3, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        blocks: list[nn.Module] = []
        c_in = 16
        for c_out, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                blocks.append(_BasicBlock(c_in, c_out, stride if i == 0 else 1))
                c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.blocks(F.relu(self.bn(self.conv(x))))
        return self.fc(out.mean(dim=(2, 3)))


def build_model(name: str, dataset: str) -> nn.Module:
    """Build the catalogue's model ``name`` for ``dataset``'s input shape; input ``(B, C, H, W)``
    -> ``(B, 10)`` (a model registered from Python: :func:`wflsim.models.registry.build_model`).

    Initialisation uses the global torch RNG (PyTorch defaults): callers that need determinism
    (the learner) build it inside ``torch.random.fork_rng()`` with their own seed.
    """
    shape = input_shape(dataset)
    if name == "mlp":
        c, h, w = shape
        return nn.Sequential(
            nn.Flatten(), nn.Linear(c * h * w, 128), nn.ReLU(), nn.Linear(128, NUM_CLASSES)
        )
    if name == "cnn_mnist":
        return _cnn(shape, (20, 50), kernel=5, pad=0, hidden=512)
    if name == "cnn_mnist_small":
        return _cnn(shape, (32, 64), kernel=3, pad=1, hidden=128)
    if name == "mobilenet_v2":
        return _mobilenet_v2(shape)
    if name == "resnet20":
        return ResNet20(in_channels=shape[0])
    raise ValueError(f"unknown model {name!r}; known: {list(MODELS)}")


def count_params(model: nn.Module) -> int:
    """Number of trainable parameters of ``model`` (buffers such as BatchNorm stats excluded)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def num_params(name: str, dataset: str) -> int:
    """Trainable parameter count ``D`` of ``build_model(name, dataset)``."""
    with torch.device("meta"):
        model = build_model(name, dataset)
    return count_params(model)
