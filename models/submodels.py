"""FjORD sub-models (ordered dropout) on the torch side: parameter masks and narrow copies.

The width-``p`` sub-model is described torch-free by :mod:`wflsim.sim.config.architectures` (one
:class:`~wflsim.sim.config.architectures.Layer` per ``Conv2d`` / ``Linear`` / ``BatchNorm2d``, and
the rule :func:`~wflsim.sim.config.architectures.kept`). This module turns a table and a width into

* :func:`width_masks` / :func:`flat_width_mask`: which entries of each parameter (of the flat
  ``(D,)`` vector of :class:`wflsim.models.learner.flat.FlatModel`) the sub-model keeps;
* :func:`narrow_model`: a real narrow network (sliced layers, depthwise ``groups`` narrowed,
  BatchNorm running statistics sliced), for checks and for evaluating a tier on its own.

**The masked full model.** The width-``p`` sub-model *is* the full network evaluated at
``theta * mask`` (the dropped parameters set to 0). For ``mlp``, the CNNs and MobileNetV2 that
is exactly the narrow network: a dropped hidden channel is 0 after its layer (its weights and
bias are 0; BatchNorm's weight and bias are 0 too, so the channel is ``0 * x_hat + 0 = 0`` in
train and eval mode), and the next layer reads it only through dropped (zero) weights.

**ResNet-20.** The option-A shortcut of a block from ``C_in`` to ``C_out`` channels places the
(strided) input at channel offset ``(C_out - C_in) // 2`` (8, then 16). We define width-``p``
ResNet-20 as the masked full model, so its shortcuts keep *the full model's* offsets; a narrow
copy with its own offsets (``(kept(C_out) - kept(C_in)) // 2``) would be a different network.
:func:`narrow_model` therefore replaces each block by :class:`NarrowBasicBlock`, whose shortcut
puts kept input channel ``j`` at channel ``offset + j`` of its ``kept(C_out)`` outputs and drops
those that fall beyond them. Its outputs (and the gradients of the kept coordinates) equal the
masked full model's. Consequences for the masked full model, at widths where
``offset + kept(C_in) != kept(C_out)``:

* ``p < 1/2`` (``offset + kept(C_in) > kept(C_out)``): the shortcut writes kept channels into
  *dropped* channels of the next stage ("leaked" activations). They reach the output only
  through dropped (zero) weights, so the forward pass is unaffected, but the gradient of the
  dropped weights that read them (the kept rows of ``conv1`` of the blocks after a transition
  and the columns of ``fc``) is not zero. **Learners must multiply gradients by the mask** (the
  upload is the slice anyway).
* ``p > 1/2`` (``offset + kept(C_in) < kept(C_out)``): kept output channels receive *dropped*
  input channels through the shortcut. These are 0 in the masked model, so nothing changes, but
  a dropped BatchNorm shift that writes them (``bn`` and the ``bn2`` of the blocks before a
  transition) would reach the output through the ReLU if it were not 0; torch's gradient there
  is 0 only by the convention ``relu'(0) = 0``.

At ``p = 1/2`` (and 1) the offsets line up and neither happens.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import skip_init

from wflsim.sim.config.architectures import Layer

from .nets import _BasicBlock

__all__ = ["NarrowBasicBlock", "flat_width_mask", "narrow_model", "width_masks"]


def _matches(module: nn.Module, layer: Layer) -> bool:
    """Whether ``module`` is the layer the table describes (type, channels, kernel, groups)."""
    if isinstance(module, nn.Conv2d):
        return layer.kind == "conv" and (
            module.in_channels,
            module.out_channels,
            module.kernel_size,
            module.groups,
            module.bias is not None,
        ) == (
            layer.in_channels,
            layer.out_channels,
            (layer.kernel, layer.kernel),
            layer.groups,
            layer.bias,
        )
    if isinstance(module, nn.Linear):
        return layer.kind == "linear" and (
            module.in_features,
            module.out_features,
            module.bias is not None,
        ) == (layer.in_channels, layer.out_channels, layer.bias)
    if isinstance(module, nn.BatchNorm2d):
        return (
            layer.kind == "batchnorm"
            and module.affine
            and module.num_features == layer.out_channels
        )
    return False


def _check_width(width: float) -> None:
    if not 0.0 < float(width) <= 1.0:  # also refuses NaN
        raise ValueError(f"width must lie in (0, 1]; got {width!r}")


def _check_table(model: nn.Module, table: Sequence[Layer]) -> None:
    """Raise ``ValueError`` unless ``table`` lists exactly ``model``'s layers with parameters,
    in order, and covers every trainable parameter."""
    found = [
        name
        for name, m in model.named_modules()
        if isinstance(m, nn.Conv2d | nn.Linear | nn.BatchNorm2d)
        and any(True for _ in m.parameters(recurse=False))
    ]
    if found != [layer.name for layer in table]:
        raise ValueError("table does not list the model's Conv2d/Linear/BatchNorm2d layers")
    for layer in table:
        if not _matches(model.get_submodule(layer.name), layer):
            raise ValueError(f"table entry {layer.name!r} does not match the model's layer")
    covered = {n for layer in table for n in layer.param_names}
    missing = [k for k, p in model.named_parameters() if p.requires_grad and k not in covered]
    if missing:
        raise ValueError(f"trainable parameters outside the table: {missing}")


def width_masks(model: nn.Module, table: Sequence[Layer], width: float) -> dict[str, torch.Tensor]:
    """Which entries of each parameter the width-``width`` sub-model keeps.

    Args:
        model: the full network (``wflsim.models.nets.build_model``); only its structure is read.
        table: ``sim.config.architectures.layers(model_name, dataset)``.
        width: ``p`` in ``(0, 1]``.

    Returns:
        ``{parameter name: bool tensor of the parameter's shape}`` (on its device), for every
        parameter of the table, in ``named_parameters`` order. Conv weights ``(out, in/groups,
        k, k)`` keep ``[:kept_out, :kept_in]`` (depthwise ``[:kept_out]``), linear weights
        ``[:kept_out, :kept_in]``, biases and BatchNorm ``[:kept_out]``.

    Raises:
        ValueError: ``width`` outside ``(0, 1]``; a table that does not describe ``model``.
    """
    _check_width(width)
    _check_table(model, table)
    params = dict(model.named_parameters())
    masks: dict[str, torch.Tensor] = {}
    by_param = {n: layer for layer in table for n in layer.param_names}
    for name, p in params.items():
        layer = by_param.get(name)
        if layer is None:
            continue
        mask = torch.zeros(p.shape, dtype=torch.bool, device=p.device)
        k_out = layer.kept_out(width)
        if name.endswith(".weight") and layer.kind != "batchnorm":
            mask[:k_out, : layer.kept_in(width) // layer.kept_groups(width)] = True
        else:
            mask[:k_out] = True
        masks[name] = mask
    return masks


def flat_width_mask(model: nn.Module, table: Sequence[Layer], width: float) -> torch.Tensor:
    """The sub-model's kept coordinates of the flat parameter vector: bool ``(D,)`` in
    :class:`~wflsim.models.learner.flat.FlatModel` order (trainable parameters, ``named_parameters``
    order). ``theta * mask`` is the width-``width`` sub-model; ``mask.sum()`` its size.

    Raises:
        ValueError: as :func:`width_masks`.
    """
    masks = width_masks(model, table, width)
    trainable = [k for k, p in model.named_parameters() if p.requires_grad]
    return torch.cat([masks[k].reshape(-1) for k in trainable])


class NarrowBasicBlock(nn.Module):
    """A ResNet-20 basic block of a narrow copy whose option-A shortcut keeps the full model's
    channel offset: kept input channel ``j`` goes to output channel ``offset + j`` when that is
    below ``out_channels`` (the kept outputs), and is dropped otherwise.

    Input ``(B, in, H, W)`` -> ``(B, out, H / stride, W / stride)``.
    """

    def __init__(self, block: _BasicBlock, offset: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = block.conv1, block.bn1
        self.conv2, self.bn2 = block.conv2, block.bn2
        self.stride, self.offset = block.stride, offset
        self.identity = block.stride == 1 and block.pad == 0
        self.out_channels = int(self.conv2.out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x
        if not self.identity:
            c_out = self.out_channels
            lo = min(self.offset, c_out)
            n = max(0, min(x.shape[1], c_out - self.offset))
            short = x[:, :n, :: self.stride, :: self.stride]
            short = F.pad(short, (0, 0, 0, 0, lo, c_out - lo - n))
        return F.relu(out + short)


def _narrow_layer(module: nn.Module, layer: Layer, width: float) -> nn.Module:
    """A sliced copy of one layer (built uninitialised, then filled: no random draws)."""
    k_out, k_in, groups = layer.kept_out(width), layer.kept_in(width), layer.kept_groups(width)
    new: nn.Conv2d | nn.Linear | nn.BatchNorm2d
    if isinstance(module, nn.Conv2d):
        new = skip_init(
            nn.Conv2d,
            k_in,
            k_out,
            module.kernel_size,
            stride=module.stride,
            padding=module.padding,
            dilation=module.dilation,
            groups=groups,
            bias=module.bias is not None,
            padding_mode=module.padding_mode,
            device=module.weight.device,
            dtype=module.weight.dtype,
        )
        weight = module.weight[:k_out, : k_in // groups]
    elif isinstance(module, nn.Linear):
        new = skip_init(
            nn.Linear,
            k_in,
            k_out,
            bias=module.bias is not None,
            device=module.weight.device,
            dtype=module.weight.dtype,
        )
        weight = module.weight[:k_out, :k_in]
    elif isinstance(module, nn.BatchNorm2d):
        bn: nn.BatchNorm2d = skip_init(
            nn.BatchNorm2d,
            k_out,
            eps=module.eps,
            momentum=module.momentum,
            affine=True,
            track_running_stats=module.track_running_stats,
            device=module.weight.device,
            dtype=module.weight.dtype,
        )
        weight = module.weight[:k_out]
        with torch.no_grad():
            if module.running_mean is not None and bn.running_mean is not None:
                bn.running_mean.copy_(module.running_mean[:k_out])
            if module.running_var is not None and bn.running_var is not None:
                bn.running_var.copy_(module.running_var[:k_out])
            if module.num_batches_tracked is not None and bn.num_batches_tracked is not None:
                bn.num_batches_tracked.copy_(module.num_batches_tracked)
        new = bn
    else:
        raise ValueError(f"{layer.name}: not a Conv2d, Linear or BatchNorm2d")
    with torch.no_grad():
        new.weight.copy_(weight)
        if module.bias is not None and new.bias is not None:
            new.bias.copy_(module.bias[:k_out])
    new.weight.requires_grad_(module.weight.requires_grad)
    if module.bias is not None and new.bias is not None:
        new.bias.requires_grad_(module.bias.requires_grad)
    new.train(module.training)
    return new


def _replace(root: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, attr = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, attr, module)


def narrow_model(model: nn.Module, table: Sequence[Layer], width: float) -> nn.Module:
    """A narrow copy of ``model``: the width-``width`` sub-model as a network of its own.

    Every ``Conv2d`` / ``Linear`` / ``BatchNorm2d`` of the table is replaced by a sliced module
    (``kept_out`` x ``kept_in`` channels; depthwise convolutions get ``groups = kept(C)``), with
    the kept weights and BatchNorm running statistics copied; ResNet-20's blocks become
    :class:`NarrowBasicBlock` with the full model's shortcut offsets (see the module docstring).
    Parameter names are those of ``model``; ``model`` is not changed.

    Its outputs equal those of ``model`` with the dropped parameters set to 0 (up to float
    rounding), in train and eval mode.

    Raises:
        ValueError: ``width`` outside ``(0, 1]``; a table that does not describe ``model``.
    """
    _check_width(width)
    _check_table(model, table)
    new = copy.deepcopy(model)
    for layer in table:
        _replace(new, layer.name, _narrow_layer(new.get_submodule(layer.name), layer, width))
    for name, m in list(new.named_modules()):
        if isinstance(m, _BasicBlock):
            block = NarrowBasicBlock(m, offset=m.pad // 2)
            block.train(m.training)
            _replace(new, name, block)
    return new
