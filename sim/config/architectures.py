"""The catalogue's networks layer by layer, without torch: FjORD sub-model sizes and costs.

FjORD (Horvath et al., NeurIPS 2021) trains nested sub-models by *ordered dropout*. The sub-model
of width ``p`` in ``(0, 1]`` keeps, in every hidden layer, the first :func:`kept` ``(C_out, p)``
output channels (units); each layer's input is whatever its producer kept; the first layer keeps
all input (data) channels and the classifier keeps all classes. Depthwise convolutions keep
``groups = in = out = kept(C, p)``; BatchNorm keeps the affine parameters of the kept channels.
A ``Linear`` fed by a flattened ``(C, H, W)`` feature map keeps the first ``kept(C, p) * H * W``
inputs (flattening is channel-major, so the kept channels are a prefix).

This module describes every network of :mod:`wflsim.sim.config.catalogue` as a tuple of
:class:`Layer` records (generated from the construction rules of :mod:`wflsim.models.nets`, not
stored as data) and counts, for any width, the sub-model's trainable parameters (the payload of a
network-only run) and its multiply-accumulates (its compute relative to the full model). The
torch side (:mod:`wflsim.models.submodels`) uses the same records to mask the flat parameter vector
and to build narrow copies; ``tests/test_submodels.py`` checks both against the real networks.

MACs count one multiply-accumulate per weight tap per output position, for convolutions
(``out_pixels * C_out * (C_in / groups) * k^2``) and linear layers (``in * out``), per sample;
biases, BatchNorm, activations, pooling and residual additions are not counted. This is exactly
half of what ``torch.utils.flop_counter.FlopCounterMode`` reports for these networks.

Numpy only; no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np

from .catalogue import INPUT_SHAPES, MODEL_DATASETS, MODELS, NUM_CLASSES

__all__ = [
    "KEPT_EPS",
    "Layer",
    "kept",
    "layers",
    "submodel_macs",
    "submodel_params",
    "width_costs",
]

#: Slack subtracted from ``p * C`` before rounding up in :func:`kept`, so that float noise
#: above an integer (``0.07 * 100 == 7.000000000000001``) does not keep one channel too many.
KEPT_EPS = 1e-9

LayerKind = Literal["conv", "linear", "batchnorm"]


def _check_width(width: float) -> float:
    w = float(width)
    if not 0.0 < w <= 1.0:  # also refuses NaN
        raise ValueError(f"width must lie in (0, 1]; got {width!r}")
    return w


def kept(channels: int, width: float) -> int:
    """Channels (units) of a ``channels``-wide layer that the width-``width`` sub-model keeps.

    ``kept(C, p) = max(1, ceil(p * C - 1e-9))`` for ``0 < p <= 1``: the first ``ceil(p C)``
    channels, at least one; the ``1e-9`` (:data:`KEPT_EPS`) absorbs float noise, e.g.
    ``kept(100, 0.07) == 7`` although ``0.07 * 100 == 7.000000000000001``.

    Raises:
        ValueError: ``channels`` not a positive integer, or ``width`` outside ``(0, 1]``.
    """
    if isinstance(channels, bool) or not isinstance(channels, int | np.integer) or channels < 1:
        raise ValueError(f"channels must be a positive integer; got {channels!r}")
    w = _check_width(width)
    return max(1, math.ceil(w * int(channels) - KEPT_EPS))


@dataclass(frozen=True)
class Layer:
    """One layer with trainable parameters (``Conv2d``, ``Linear`` or ``BatchNorm2d``).

    Attributes:
        name: qualified name of the torch module in ``models.nets.build_model(model, dataset)``,
            e.g. ``"features.1.conv.0.0"``; its parameters are ``name + ".weight"`` (and
            ``".bias"``).
        kind: ``"conv"``, ``"linear"`` or ``"batchnorm"``.
        in_channels, out_channels: input and output channels (features for ``Linear``;
            ``in == out == num_features`` for BatchNorm).
        kernel: kernel side (square kernels); 1 for linear and batchnorm.
        groups: 1 for dense layers (and linear, batchnorm); ``== in_channels == out_channels``
            for depthwise convolutions. Other grouped convolutions do not occur.
        bias: whether the layer has a bias (always for batchnorm: its affine shift).
        out_pixels: ``H_out * W_out`` of the output for conv and batchnorm; 1 for linear.
        scales_in: False only where the input channels are the data's (the first layer).
        scales_out: False only for the classifier (the classes).
        in_pixels: input features per input channel: ``H * W`` for a ``Linear`` fed by a
            flattened ``(C, H, W)`` map (``in_channels == C * H * W``), else 1. The sub-model
            keeps ``kept(in_channels // in_pixels, p) * in_pixels`` inputs of a scaled layer.
            The last field, with a default, so that ``Layer(...)`` calls without it still work.
    """

    name: str
    kind: LayerKind
    in_channels: int
    out_channels: int
    kernel: int
    groups: int
    bias: bool
    out_pixels: int
    scales_in: bool
    scales_out: bool
    in_pixels: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("conv", "linear", "batchnorm"):
            raise ValueError(f"kind must be conv, linear or batchnorm; got {self.kind!r}")
        if self.in_channels % self.in_pixels:
            raise ValueError(f"{self.name}: in_channels is not a multiple of in_pixels")
        if self.groups != 1 and not (self.groups == self.in_channels == self.out_channels):
            raise ValueError(f"{self.name}: only dense or depthwise convolutions are supported")
        if self.kind == "batchnorm" and self.in_channels != self.out_channels:
            raise ValueError(f"{self.name}: batchnorm has in_channels == out_channels")

    @property
    def depthwise(self) -> bool:
        """A depthwise convolution (``groups == in == out > 1``)."""
        return self.groups > 1

    @property
    def param_names(self) -> tuple[str, ...]:
        """Qualified names of the layer's parameters, in ``named_parameters`` order."""
        suffixes = ("weight", "bias") if self.bias else ("weight",)
        return tuple(f"{self.name}.{s}" for s in suffixes)

    def kept_out(self, width: float) -> int:
        """Output channels (units) of the width-``width`` sub-model."""
        return kept(self.out_channels, width) if self.scales_out else self.out_channels

    def kept_in(self, width: float) -> int:
        """Input channels (features) of the width-``width`` sub-model; for depthwise layers and
        batchnorm the same as :meth:`kept_out`."""
        if self.kind == "batchnorm" or self.depthwise:
            return self.kept_out(width)
        if not self.scales_in:
            return self.in_channels
        return kept(self.in_channels // self.in_pixels, width) * self.in_pixels

    def kept_groups(self, width: float) -> int:
        """Groups of the width-``width`` sub-model's layer: ``kept_out`` if depthwise, else 1."""
        return self.kept_out(width) if self.depthwise else 1

    def num_params(self, width: float) -> int:
        """Trainable parameters of the layer in the width-``width`` sub-model."""
        k_out = self.kept_out(width)
        if self.kind == "batchnorm":
            return 2 * k_out
        weight = k_out * (self.kept_in(width) // self.kept_groups(width)) * self.kernel**2
        return weight + (k_out if self.bias else 0)

    def macs(self, width: float) -> int:
        """Multiply-accumulates of the layer for one sample in the width-``width`` sub-model
        (0 for batchnorm)."""
        if self.kind == "batchnorm":
            return 0
        k_in = self.kept_in(width) // self.kept_groups(width)
        return self.out_pixels * self.kept_out(width) * k_in * self.kernel**2


# --- the networks, built by the rules of models.nets ------------------------------------------


def _conv_out(size: int, kernel: int, stride: int, pad: int) -> int:
    """Output side of a convolution (dilation 1)."""
    return (size + 2 * pad - kernel) // stride + 1


class _Builder:
    """Appends conv (+ batchnorm) layers while tracking the feature map's ``(H, W)``."""

    def __init__(self, h: int, w: int) -> None:
        self.h, self.w = h, w
        self.out: list[Layer] = []

    def conv(
        self,
        name: str,
        c_in: int,
        c_out: int,
        kernel: int,
        stride: int = 1,
        pad: int = 0,
        groups: int = 1,
        bias: bool = False,
        first: bool = False,
    ) -> None:
        self.h = _conv_out(self.h, kernel, stride, pad)
        self.w = _conv_out(self.w, kernel, stride, pad)
        self.out.append(
            Layer(name, "conv", c_in, c_out, kernel, groups, bias, self.h * self.w, not first, True)
        )

    def bn(self, name: str, channels: int) -> None:
        self.out.append(
            Layer(name, "batchnorm", channels, channels, 1, 1, True, self.h * self.w, True, True)
        )

    def pool(self, factor: int) -> None:
        self.h, self.w = self.h // factor, self.w // factor

    def linear(
        self, name: str, n_in: int, n_out: int, in_pixels: int, first: bool, last: bool
    ) -> None:
        self.out.append(
            Layer(name, "linear", n_in, n_out, 1, 1, True, 1, not first, not last, in_pixels)
        )


def _mlp(shape: tuple[int, int, int]) -> list[Layer]:
    """``nn.Sequential(Flatten, Linear(C*H*W, 128), ReLU, Linear(128, 10))``."""
    c, h, w = shape
    b = _Builder(h, w)
    b.linear("1", c * h * w, 128, h * w, first=True, last=False)
    b.linear("3", 128, NUM_CLASSES, 1, first=False, last=True)
    return b.out


def _cnn(
    shape: tuple[int, int, int], channels: tuple[int, int], kernel: int, pad: int, hidden: int
) -> list[Layer]:
    """``wflsim.models.nets._cnn``: conv, ReLU, maxpool2, conv, ReLU, maxpool2, flatten, FC,
    ReLU, FC."""
    c, h, w = shape
    b = _Builder(h, w)
    b.conv("0", c, channels[0], kernel, pad=pad, bias=True, first=True)
    b.pool(2)
    b.conv("3", channels[0], channels[1], kernel, pad=pad, bias=True)
    b.pool(2)
    if b.h < 1 or b.w < 1:
        raise ValueError(f"input {shape} is too small for this CNN")
    pixels = b.h * b.w
    b.linear("7", channels[1] * pixels, hidden, pixels, first=False, last=False)
    b.linear("9", hidden, NUM_CLASSES, 1, first=False, last=True)
    return b.out


# torchvision's MobileNetV2 as models.nets builds it: width 0.4, stride-1 stem, no dropout.
_MBV2_WIDTH = 0.4
_MBV2_ROUND = 8
_MBV2_STEM = 32
_MBV2_LAST = 1280
#: The inverted-residual settings ``(t, c, n, s)`` (expansion, channels, repeats, stride).
_MBV2_SETTINGS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _make_divisible(v: float, divisor: int) -> int:
    """torchvision's ``_make_divisible`` (min value ``divisor``): round ``v`` to a multiple of
    ``divisor``, never more than 10 % down."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _mobilenet_v2(shape: tuple[int, int, int]) -> list[Layer]:
    c, h, w = shape
    b = _Builder(h, w)
    c_in = _make_divisible(_MBV2_STEM * _MBV2_WIDTH, _MBV2_ROUND)
    last = _make_divisible(_MBV2_LAST * max(1.0, _MBV2_WIDTH), _MBV2_ROUND)
    b.conv("features.0.0", c, c_in, 3, stride=1, pad=1, first=True)  # stride-1 stem
    b.bn("features.0.1", c_in)
    index = 1
    for t, ch, n, s in _MBV2_SETTINGS:
        c_out = _make_divisible(ch * _MBV2_WIDTH, _MBV2_ROUND)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = int(round(c_in * t))
            p = f"features.{index}.conv"
            j = 0
            if t != 1:  # pointwise expansion
                b.conv(f"{p}.0.0", c_in, hidden, 1)
                b.bn(f"{p}.0.1", hidden)
                j = 1
            b.conv(f"{p}.{j}.0", hidden, hidden, 3, stride=stride, pad=1, groups=hidden)
            b.bn(f"{p}.{j}.1", hidden)
            b.conv(f"{p}.{j + 1}", hidden, c_out, 1)  # pointwise linear
            b.bn(f"{p}.{j + 2}", c_out)
            c_in = c_out
            index += 1
    b.conv(f"features.{index}.0", c_in, last, 1)
    b.bn(f"features.{index}.1", last)
    b.linear("classifier.0", last, NUM_CLASSES, 1, first=False, last=True)  # after global pool
    return b.out


def _resnet20(shape: tuple[int, int, int]) -> list[Layer]:
    c, h, w = shape
    b = _Builder(h, w)
    b.conv("conv", c, 16, 3, pad=1, first=True)
    b.bn("bn", 16)
    c_in, index = 16, 0
    for c_out, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(3):
            p = f"blocks.{index}"
            b.conv(f"{p}.conv1", c_in, c_out, 3, stride=stride if i == 0 else 1, pad=1)
            b.bn(f"{p}.bn1", c_out)
            b.conv(f"{p}.conv2", c_out, c_out, 3, pad=1)
            b.bn(f"{p}.bn2", c_out)
            c_in, index = c_out, index + 1
    b.linear("fc", 64, NUM_CLASSES, 1, first=False, last=True)  # after global average pooling
    return b.out


_BUILDERS = {
    "mlp": _mlp,
    "cnn_mnist": lambda s: _cnn(s, (20, 50), kernel=5, pad=0, hidden=512),
    "cnn_mnist_small": lambda s: _cnn(s, (32, 64), kernel=3, pad=1, hidden=128),
    "mobilenet_v2": _mobilenet_v2,
    "resnet20": _resnet20,
}


def _check_model(model: str, dataset: str) -> None:
    if model not in MODEL_DATASETS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}; got {model!r}")
    if dataset not in INPUT_SHAPES:
        raise ValueError(f"dataset must be one of {', '.join(INPUT_SHAPES)}; got {dataset!r}")
    if dataset not in MODEL_DATASETS[model]:
        raise ValueError(f"dataset {dataset!r} does not fit model {model!r}")


@cache
def layers(model: str, dataset: str) -> tuple[Layer, ...]:
    """Every ``Conv2d``, ``Linear`` and ``BatchNorm2d`` with trainable parameters of
    ``models.nets.build_model(model, dataset)``, in ``named_parameters`` order.

    Raises:
        ValueError: an unknown ``model`` or ``dataset``, or a pair the catalogue does not list.
    """
    _check_model(model, dataset)
    return tuple(_BUILDERS[model](INPUT_SHAPES[dataset]))


def submodel_params(model: str, dataset: str, width: float) -> int:
    """Trainable parameters of the width-``width`` sub-model (``D`` of the catalogue at 1).

    Raises:
        ValueError: unknown ``model`` / ``dataset``, ``width`` outside ``(0, 1]``.
    """
    table = layers(model, dataset)
    w = _check_width(width)
    return sum(layer.num_params(w) for layer in table)


def submodel_macs(model: str, dataset: str, width: float) -> int:
    """Multiply-accumulates of the conv and linear layers of the width-``width`` sub-model for
    one sample (see the module docstring for what is counted).

    Raises:
        ValueError: unknown ``model`` / ``dataset``, ``width`` outside ``(0, 1]``.
    """
    table = layers(model, dataset)
    w = _check_width(width)
    return sum(layer.macs(w) for layer in table)


@cache
def _layer_arrays(model: str, dataset: str) -> dict[str, np.ndarray]:
    """Per-layer columns ``(L, 1)`` of the table, for broadcasting against widths ``(1, N)``."""
    table = layers(model, dataset)

    def col(values: list[int] | list[bool], dtype: type) -> np.ndarray:
        out: np.ndarray = np.asarray(values, dtype=dtype)[:, None]
        out.setflags(write=False)
        return out

    return {
        "in_units": col([t.in_channels // t.in_pixels for t in table], np.int64),
        "in_pixels": col([t.in_pixels for t in table], np.int64),
        "in_channels": col([t.in_channels for t in table], np.int64),
        "out_channels": col([t.out_channels for t in table], np.int64),
        "k2": col([t.kernel**2 for t in table], np.int64),
        "out_pixels": col([t.out_pixels for t in table], np.int64),
        "bias": col([t.bias for t in table], np.int64),
        "scales_in": col([t.scales_in for t in table], bool),
        "scales_out": col([t.scales_out for t in table], bool),
        "tied": col([t.kind == "batchnorm" or t.depthwise for t in table], bool),
        "bn": col([t.kind == "batchnorm" for t in table], bool),
    }


def _kept_array(channels: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """:func:`kept` broadcast over ``channels (L, 1)`` and ``widths (1, N)``: int64 ``(L, N)``."""
    return np.maximum(1, np.ceil(widths * channels - KEPT_EPS)).astype(np.int64)


def width_costs(model: str, dataset: str, widths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-device cost of the sub-models of widths ``widths`` (vectorised over devices).

    Args:
        widths: ``(N,)`` widths in ``[0, 1]``; 0 means no sub-model (a device that sits out).

    Returns:
        ``(params, macs_fraction)``: int64 ``(N,)`` trainable parameters of each sub-model
        (:func:`submodel_params`; 0 at width 0), and float64 ``(N,)`` its MACs over the full
        model's, ``submodel_macs(p) / submodel_macs(1)`` (0.0 at width 0).

    Raises:
        ValueError: unknown ``model`` / ``dataset``; ``widths`` not one-dimensional, or with a
            value outside ``[0, 1]`` (or NaN).
    """
    a = _layer_arrays(model, dataset)
    w = np.asarray(widths, dtype=np.float64)
    if w.ndim != 1:
        raise ValueError(f"widths must be one-dimensional (N,); got shape {w.shape}")
    if not np.all((w >= 0.0) & (w <= 1.0)):  # also refuses NaN
        raise ValueError(f"widths must lie in [0, 1]; got {w[~((w >= 0.0) & (w <= 1.0))]}")
    row = w[None, :]
    k_out = np.where(a["scales_out"], _kept_array(a["out_channels"], row), a["out_channels"])
    k_in = np.where(
        a["scales_in"], _kept_array(a["in_units"], row) * a["in_pixels"], a["in_channels"]
    )
    k_in = np.where(a["tied"], 1, k_in)  # depthwise: one input per group; batchnorm: per channel
    weights = k_out * k_in * a["k2"]
    params = np.where(a["bn"], 2 * k_out, weights + a["bias"] * k_out).sum(axis=0)
    macs = np.where(a["bn"], 0, a["out_pixels"] * weights).sum(axis=0)
    full = submodel_macs(model, dataset, 1.0)
    active = w > 0.0
    return (
        np.where(active, params, 0).astype(np.int64),
        np.where(active, macs / full, 0.0).astype(np.float64),
    )
