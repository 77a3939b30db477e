"""FjORD sub-models: the torch-free tables and counts (sim.config.architectures) against the
real networks, and the masks and narrow copies of models.submodels."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from wflsim.models.learner.flat import FlatModel
from wflsim.models.nets import build_model, count_params
from wflsim.models.submodels import flat_width_mask, narrow_model, width_masks
from wflsim.sim.config.architectures import (
    Layer,
    kept,
    layers,
    submodel_macs,
    submodel_params,
    width_costs,
)
from wflsim.sim.config.catalogue import INPUT_SHAPES, MODEL_DATASETS, NUM_CLASSES
from wflsim.sim.registry import model_num_params

PAIRS = [(m, d) for m, datasets in MODEL_DATASETS.items() for d in datasets]
CASES = [
    ("mlp", "mnist"),
    ("cnn_mnist", "mnist"),
    ("cnn_mnist_small", "fashion_mnist"),
    ("mobilenet_v2", "cifar10"),
    ("resnet20", "cifar10"),
]
WIDTHS = (0.25, 0.5, 0.77, 1.0)
CASE_WIDTHS = [(m, d, w) for m, d in CASES for w in WIDTHS]
BATCH = 4

Net = Callable[[str, str], nn.Module]


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    """These models are small: one intra-op thread beats several on a shared, busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _randomise(model: nn.Module, seed: int) -> None:
    """He-scaled weights, small random biases, BatchNorm affine and running statistics away from
    their defaults (so that every parameter matters and outputs are of order 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * math.sqrt(2 / fan_in))
                if m.bias is not None:
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
            elif isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(0.5 + torch.rand(c, generator=g))
                m.bias.copy_(0.1 * torch.randn(c, generator=g))
                m.running_mean.copy_(0.1 * torch.randn(c, generator=g))
                m.running_var.copy_(0.5 + torch.rand(c, generator=g))
                m.num_batches_tracked.zero_()


@pytest.fixture(scope="module")
def net() -> Net:
    """Builds each (model, dataset) once per module, with random parameters; returns copies."""
    cache: dict[tuple[str, str], nn.Module] = {}

    def get(model: str, dataset: str) -> nn.Module:
        if (model, dataset) not in cache:
            with torch.device("meta"):
                built = build_model(model, dataset)
            built = built.to_empty(device="cpu")
            _randomise(built, seed=PAIRS.index((model, dataset)))
            cache[model, dataset] = built
        return copy.deepcopy(cache[model, dataset])

    return get


def _inputs(dataset: str, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn((BATCH, *INPUT_SHAPES[dataset]), generator=g)


def _masked(model: nn.Module, table: tuple[Layer, ...], width: float) -> nn.Module:
    """The full model with the dropped parameters set to 0 (BatchNorm: weight and bias)."""
    out = copy.deepcopy(model)
    masks = width_masks(out, table, width)
    with torch.no_grad():
        for name, p in out.named_parameters():
            p.mul_(masks[name])
    return out


def _flops(model: nn.Module, x: torch.Tensor) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    return int(counter.get_total_flops())


def _run(model: nn.Module, x: torch.Tensor, mode: str) -> torch.Tensor:
    model.train(mode == "train")
    with torch.no_grad():
        return model(x)


def _loss_grads(model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Gradients of a cross-entropy loss with fixed labels, by parameter name (train mode)."""
    model.train()
    labels = torch.arange(BATCH) % NUM_CLASSES
    names, params = zip(*model.named_parameters(), strict=True)
    loss = F.cross_entropy(model(x), labels)
    return dict(zip(names, torch.autograd.grad(loss, params), strict=True))


# --- the torch-free table against the real modules --------------------------------------------


def _torch_layers(model: nn.Module) -> list[tuple[str, str, int, int, int, int, bool]]:
    rows = []
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            assert m.kernel_size[0] == m.kernel_size[1]
            rows.append(
                (
                    name,
                    "conv",
                    m.in_channels,
                    m.out_channels,
                    m.kernel_size[0],
                    m.groups,
                    m.bias is not None,
                )
            )
        elif isinstance(m, nn.Linear):
            rows.append((name, "linear", m.in_features, m.out_features, 1, 1, m.bias is not None))
        elif isinstance(m, nn.BatchNorm2d):
            rows.append((name, "batchnorm", m.num_features, m.num_features, 1, 1, True))
    return rows


@pytest.mark.parametrize(("model", "dataset"), PAIRS)
def test_table_lists_the_torch_layers(model: str, dataset: str) -> None:
    """The table lists the torch conv/linear/BN layers (name, kind, channels, kernel, groups)."""
    with torch.device("meta"):
        torch_model = build_model(model, dataset)
    table = [
        (t.name, t.kind, t.in_channels, t.out_channels, t.kernel, t.groups, t.bias)
        for t in layers(model, dataset)
    ]
    assert table == _torch_layers(torch_model)


@pytest.mark.parametrize(("model", "dataset"), PAIRS)
def test_table_parameters_are_in_named_parameters_order(model: str, dataset: str) -> None:
    """The table's parameter names, in order, are the model's named_parameters."""
    with torch.device("meta"):
        torch_model = build_model(model, dataset)
    names = [n for t in layers(model, dataset) for n in t.param_names]
    assert names == [k for k, _ in torch_model.named_parameters()]


@pytest.mark.parametrize(("model", "dataset"), PAIRS)
def test_table_out_pixels_are_the_torch_output_sizes(model: str, dataset: str) -> None:
    """out_pixels is H_out * W_out of each conv / BN output (1 for linear), seen by hooks."""
    with torch.device("meta"):
        torch_model = build_model(model, dataset)
    seen: dict[str, int] = {}
    for name, m in torch_model.named_modules():
        if isinstance(m, nn.Conv2d | nn.BatchNorm2d | nn.Linear):

            def hook(_m: nn.Module, _i: object, out: torch.Tensor, name: str = name) -> None:
                seen[name] = math.prod(out.shape[2:])  # () for linear -> 1

            m.register_forward_hook(hook)
    torch_model(torch.empty((1, *INPUT_SHAPES[dataset]), device="meta"))
    assert {t.name: t.out_pixels for t in layers(model, dataset)} == seen


@pytest.mark.parametrize(("model", "dataset"), PAIRS)
def test_only_the_first_layer_reads_data_and_only_the_classifier_keeps_its_width(
    model: str, dataset: str
) -> None:
    """Only the first layer (the data's channels) and the classifier (the classes) do not scale."""
    table = layers(model, dataset)
    c, h, w = INPUT_SHAPES[dataset]
    first = table[0]
    assert first.in_channels == (c * h * w if first.kind == "linear" else c)
    assert [t.scales_in for t in table] == [False] + [True] * (len(table) - 1)
    assert [t.scales_out for t in table] == [True] * (len(table) - 1) + [False]
    assert table[-1].out_channels == NUM_CLASSES


@pytest.mark.parametrize(("model", "dataset"), PAIRS)
def test_full_width_params_equal_the_catalogue_and_torch(model: str, dataset: str) -> None:
    """submodel_params(m, d, 1) is the catalogue's D and the torch model's count."""
    with torch.device("meta"):
        torch_model = build_model(model, dataset)
    assert submodel_params(model, dataset, 1.0) == model_num_params(model, dataset)
    assert submodel_params(model, dataset, 1.0) == count_params(torch_model)


# --- MACs against torch's FLOP counter ---------------------------------------------------------


def test_flop_counter_counts_two_per_mac_of_convolutions_and_matmuls_only() -> None:
    """FlopCounterMode counts 2 per MAC of conv and addmm, and nothing else these networks run."""
    # conv: the full kernel at every output pixel (zero-padded taps included), bias not counted;
    # addmm (Linear): 2 m n k, bias not counted; BN, ReLU6, pooling, pad, add, mean: 0.
    with torch.random.fork_rng():  # module initialisation draws from the global generator
        torch.manual_seed(0)
        x, v = torch.randn(2, 4, 6, 6), torch.randn(2, 7)
        conv = nn.Conv2d(4, 5, 3, padding=1, bias=True)  # 36 output pixels, padded taps included
        depthwise = nn.Conv2d(4, 4, 3, stride=2, groups=4, bias=False)  # 2x2 output
        linear = nn.Linear(7, 3)
        free = nn.Sequential(nn.BatchNorm2d(4), nn.ReLU6(), nn.MaxPool2d(2), nn.Flatten())
    assert _flops(conv, x) == 2 * 2 * 36 * 5 * 4 * 9
    assert _flops(depthwise, x) == 2 * 2 * 4 * 4 * 1 * 9
    assert _flops(linear, v) == 2 * 2 * 7 * 3
    assert _flops(free, x) == 0
    with FlopCounterMode(display=False) as counter:
        F.pad(x, (0, 0, 0, 0, 1, 1)).mean(dim=(2, 3)) + 1.0
    assert counter.get_total_flops() == 0


@pytest.mark.parametrize(("model", "dataset"), PAIRS)
def test_full_width_macs_are_half_the_flop_counter(model: str, dataset: str) -> None:
    """submodel_macs(m, d, 1) x 2 x batch is FlopCounterMode's total on the torch model."""
    with torch.device("meta"):  # shapes are all the counter needs
        torch_model = build_model(model, dataset).eval()
        x = torch.empty((2, *INPUT_SHAPES[dataset]))
    assert _flops(torch_model, x) == 2 * 2 * submodel_macs(model, dataset, 1.0)


# --- narrow copies against the counts and the masked full model --------------------------------


@pytest.mark.parametrize(("model", "dataset", "width"), CASE_WIDTHS)
def test_narrow_model_has_the_submodel_parameter_count(
    net: Net, model: str, dataset: str, width: float
) -> None:
    """The narrow copy has submodel_params trainable parameters."""
    narrow = narrow_model(net(model, dataset), layers(model, dataset), width)
    assert count_params(narrow) == submodel_params(model, dataset, width)


@pytest.mark.parametrize(("model", "dataset", "width"), CASE_WIDTHS)
def test_narrow_model_flops_are_twice_the_submodel_macs(
    net: Net, model: str, dataset: str, width: float
) -> None:
    """FlopCounterMode on the narrow copy counts 2 x submodel_macs per sample."""
    narrow = narrow_model(net(model, dataset), layers(model, dataset), width).eval()
    flops = _flops(narrow, _inputs(dataset))
    assert flops == 2 * BATCH * submodel_macs(model, dataset, width)


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize(("model", "dataset", "width"), CASE_WIDTHS)
def test_narrow_model_outputs_equal_the_masked_full_model(
    net: Net, model: str, dataset: str, width: float, mode: str
) -> None:
    """The narrow copy computes what the full model with the dropped parameters zeroed does."""
    full, table, x = net(model, dataset), layers(model, dataset), _inputs(dataset)
    expected = _run(_masked(full, table, width), x, mode)
    got = _run(narrow_model(full, table, width), x, mode)
    assert expected.abs().max() > 0.1  # outputs of order 1: the tolerance means something
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("model", "dataset", "width"), CASE_WIDTHS)
def test_narrow_model_gradients_are_the_masked_models_kept_gradients(
    net: Net, model: str, dataset: str, width: float
) -> None:
    """The narrow copy's gradient is the masked full model's gradient on the kept coordinates."""
    full, table, x = net(model, dataset).double(), layers(model, dataset), _inputs(dataset).double()
    masks = width_masks(full, table, width)
    g_masked = _loss_grads(_masked(full, table, width), x)
    g_narrow = _loss_grads(narrow_model(full, table, width), x)
    assert list(g_narrow) == list(g_masked)
    for name, g in g_narrow.items():  # float64: BN with batch statistics amplifies rounding
        torch.testing.assert_close(
            g.reshape(-1), g_masked[name][masks[name]], rtol=1e-9, atol=1e-12
        )


def test_narrow_mobilenet_depthwise_layers_narrow_their_groups(net: Net) -> None:
    """Depthwise convolutions of the narrow MobileNetV2 have groups = in = out = kept(C)."""
    width = 0.3
    narrow = narrow_model(net("mobilenet_v2", "cifar10"), layers("mobilenet_v2", "cifar10"), width)
    depthwise = [t for t in layers("mobilenet_v2", "cifar10") if t.groups > 1]
    assert len(depthwise) == 17
    for t in depthwise:
        m = narrow.get_submodule(t.name)
        assert isinstance(m, nn.Conv2d)
        c = kept(t.out_channels, width)
        assert (m.groups, m.in_channels, m.out_channels) == (c, c, c)


def test_narrow_model_copies_running_statistics_and_leaves_the_model_alone(net: Net) -> None:
    """BN running statistics of the narrow copy are the kept slices; the full model is unchanged."""
    full = net("resnet20", "cifar10")
    before = copy.deepcopy(full.state_dict())
    narrow = narrow_model(full, layers("resnet20", "cifar10"), 0.5)
    bn_full, bn_narrow = full.get_submodule("blocks.4.bn1"), narrow.get_submodule("blocks.4.bn1")
    assert isinstance(bn_full, nn.BatchNorm2d) and isinstance(bn_narrow, nn.BatchNorm2d)
    assert bn_full.running_mean is not None and bn_narrow.running_mean is not None
    assert bn_full.running_var is not None and bn_narrow.running_var is not None
    assert torch.equal(bn_narrow.running_mean, bn_full.running_mean[:16])
    assert torch.equal(bn_narrow.running_var, bn_full.running_var[:16])
    after = full.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_cnn_mnist_half_width_by_hand() -> None:
    """cnn_mnist at p = 0.5 (conv 20 -> 10, conv 50 -> 25, FC 512 -> 256, FC 10) by hand."""
    # conv1: 1 -> 10 channels, 5x5, 24x24 outputs
    p1, m1 = 10 * 1 * 25 + 10, 24 * 24 * 10 * 1 * 25
    # conv2: 10 -> 25 channels, 5x5, 8x8 outputs (12x12 after pooling, minus 4)
    p2, m2 = 25 * 10 * 25 + 25, 8 * 8 * 25 * 10 * 25
    # FC1: 4*4*25 = 400 -> 256
    p3, m3 = 400 * 256 + 256, 400 * 256
    # FC2: 256 -> 10
    p4, m4 = 256 * 10 + 10, 256 * 10
    assert (p1, p2, p3, p4) == (260, 6_275, 102_656, 2_570)
    assert submodel_params("cnn_mnist", "mnist", 0.5) == p1 + p2 + p3 + p4 == 111_761
    assert submodel_macs("cnn_mnist", "mnist", 0.5) == m1 + m2 + m3 + m4 == 648_960
    full_macs = 24 * 24 * 20 * 25 + 8 * 8 * 50 * 20 * 25 + 800 * 512 + 512 * 10
    assert submodel_macs("cnn_mnist", "mnist", 1.0) == full_macs == 2_302_720


# --- the masked full model: dropped parameters are dead ----------------------------------------


def _reads_dropped_input(layer: Layer, name: str, width: float, shape: torch.Size) -> torch.Tensor:
    """Entries of a parameter that read a dropped input channel: the dropped columns of conv and
    linear weights, every dropped entry of a depthwise weight (its channel's input is dropped)."""
    out = torch.zeros(shape, dtype=torch.bool)
    if name.endswith(".weight") and layer.kind != "batchnorm":
        if layer.depthwise:
            out[kept(layer.out_channels, width) :] = True
        elif layer.scales_in:
            out[:, kept(layer.in_channels // layer.in_pixels, width) * layer.in_pixels :] = True
    return out


def _resnet20_live(width: float) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Dropped coordinates of the masked ResNet-20 that its full-offset shortcuts make live, by
    name: (the weights that read leaked activations, p < 1/2; the BN scales and shifts that
    write dropped channels which the shortcuts carry into kept ones, p > 1/2)."""
    k = {c: kept(c, width) for c in (16, 32, 64)}
    with torch.device("meta"):
        shapes = {n: p.shape for n, p in build_model("resnet20", "cifar10").named_parameters()}
    # channels of each stage's stream that are non-zero in the masked model (offsets 8, 16)
    s1 = set(range(k[16]))
    s2 = set(range(k[32])) | {c + 8 for c in s1}
    s3 = set(range(k[64])) | {c + 16 for c in s2}
    leak2, leak3 = sorted(s2 - set(range(k[32]))), sorted(s3 - set(range(k[64])))
    reads: dict[str, torch.Tensor] = {
        n: torch.zeros(s, dtype=torch.bool) for n, s in shapes.items()
    }
    for block, rows, cols in ((4, 32, leak2), (5, 32, leak2), (6, 64, leak2)):
        reads[f"blocks.{block}.conv1.weight"][: k[rows], cols] = True
    for block in (7, 8):
        reads[f"blocks.{block}.conv1.weight"][: k[64], leak3] = True
    reads["fc.weight"][:, leak3] = True
    # channels of each stage's stream that reach the output (through kept weights or shortcuts)
    r3 = set(range(k[64]))
    r2 = set(range(k[32])) | {c - 16 for c in r3 if 16 <= c < 48}
    r1 = set(range(k[16])) | {c - 8 for c in r2 if 8 <= c < 24}
    writes: dict[str, torch.Tensor] = {
        n: torch.zeros(s, dtype=torch.bool) for n, s in shapes.items()
    }
    for bns, live, c in (
        (["bn", *(f"blocks.{i}.bn2" for i in range(3))], r1, 16),
        ([f"blocks.{i}.bn2" for i in range(3, 6)], r2, 32),
    ):
        channels = sorted(ch for ch in live if k[c] <= ch < c)
        for bn in bns:
            writes[f"{bn}.bias"][channels] = True
            writes[f"{bn}.weight"][channels] = True  # with the dropped conv rows before it
    return reads, writes


def _no_exceptions(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: torch.zeros(p.shape, dtype=torch.bool) for n, p in model.named_parameters()}


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize(("model", "dataset", "width"), CASE_WIDTHS)
def test_dropped_parameters_do_not_change_outputs(
    net: Net, model: str, dataset: str, width: float, mode: str
) -> None:
    """Perturbing dropped parameters that read dropped inputs, or the others, changes nothing."""
    # Both groups at once do change outputs: a dropped unit's output read by a dropped weight.
    # ResNet-20: but for the coordinates its full-offset shortcuts make live (_resnet20_live).
    full, table, x = net(model, dataset), layers(model, dataset), _inputs(dataset)
    masked = _masked(full, table, width)
    masks = width_masks(full, table, width)
    reads, writes = _no_exceptions(full), _no_exceptions(full)
    if model == "resnet20":
        reads, writes = _resnet20_live(width)
    by_param = {n: t for t in table for n in t.param_names}
    expected = _run(masked, x, mode)
    g = torch.Generator().manual_seed(1)
    for group in ("reads dropped inputs", "the others"):
        perturbed = copy.deepcopy(masked)
        count = 0
        with torch.no_grad():
            for name, p in perturbed.named_parameters():
                cols = _reads_dropped_input(by_param[name], name, width, p.shape)
                chosen = ~masks[name] & (cols if group == "reads dropped inputs" else ~cols)
                chosen &= ~(reads[name] | writes[name])
                p[chosen] = torch.randn(int(chosen.sum()), generator=g)
                count += int(chosen.sum())
        assert (count > 0) == (width < 1.0)
        torch.testing.assert_close(_run(perturbed, x, mode), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("model", "dataset", "width"), CASE_WIDTHS)
def test_dropped_gradients_are_exactly_zero(
    net: Net, model: str, dataset: str, width: float
) -> None:
    """The masked model's loss gradient is exactly 0 on dropped coordinates (see ResNet-20)."""
    # ResNet-20 below width 1/2: not on the dropped weights that read leaked activations.
    full, table, x = net(model, dataset), layers(model, dataset), _inputs(dataset)
    masks = width_masks(full, table, width)
    reads = _resnet20_live(width)[0] if model == "resnet20" else _no_exceptions(full)
    grads = _loss_grads(_masked(full, table, width), x)
    for name, grad in grads.items():
        assert grad[~masks[name] & ~reads[name]].count_nonzero() == 0, name
        assert grad[masks[name]].count_nonzero() > 0, name  # the loss does depend on the rest


def test_resnet20_leaked_activations_give_dropped_weights_gradients(net: Net) -> None:
    """At p = 1/4 shortcuts leak kept channels into dropped ones, whose readers get gradients."""
    full, table, x = net("resnet20", "cifar10"), layers("resnet20", "cifar10"), _inputs("cifar10")
    reads, _ = _resnet20_live(0.25)
    assert int(reads["fc.weight"].sum()) == 10 * 12  # channels 16..27 of 64 (k = 16)
    grads = _loss_grads(_masked(full, table, 0.25), x)
    for name in ("blocks.4.conv1.weight", "blocks.6.conv1.weight", "fc.weight"):
        assert grads[name][reads[name]].count_nonzero() > 0, name


def test_resnet20_dropped_shifts_before_a_transition_reach_the_output(net: Net) -> None:
    """At p = 0.77 a positive dropped BN shift before a transition reaches the output."""
    # The shortcut carries dropped stage-1 channels 13..15 into kept stage-2 channels 21..23;
    # torch's gradient of those shifts is 0 only by its convention relu'(0) = 0.
    full, table, x = net("resnet20", "cifar10"), layers("resnet20", "cifar10"), _inputs("cifar10")
    _, writes = _resnet20_live(0.77)
    assert writes["blocks.2.bn2.bias"].nonzero().flatten().tolist() == [13, 14, 15]
    masked = _masked(full, table, 0.77)
    perturbed = copy.deepcopy(masked)
    bias = perturbed.get_submodule("blocks.2.bn2").bias
    with torch.no_grad():
        bias[13:] = 1.0
    assert not torch.allclose(_run(perturbed, x, "train"), _run(masked, x, "train"), atol=1e-3)


# --- the flat mask -------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "dataset", "width"), CASE_WIDTHS)
def test_flat_mask_counts_the_submodel_parameters(
    net: Net, model: str, dataset: str, width: float
) -> None:
    """flat_width_mask is (D,) bool and keeps submodel_params coordinates."""
    full = net(model, dataset)
    mask = flat_width_mask(full, layers(model, dataset), width)
    assert mask.dtype == torch.bool and mask.shape == (count_params(full),)
    assert int(mask.sum()) == submodel_params(model, dataset, width)


@pytest.mark.parametrize(("model", "dataset"), CASES)
def test_flat_mask_is_the_width_masks_in_flat_model_order(
    net: Net, model: str, dataset: str
) -> None:
    """FlatModel's split of flat_width_mask gives width_masks, parameter by parameter."""
    full, table = net(model, dataset), layers(model, dataset)
    flat = FlatModel(full)
    pieces = flat.param_dict(flat_width_mask(full, table, 0.4))
    masks = width_masks(full, table, 0.4)
    assert list(pieces) == list(masks)
    assert all(torch.equal(pieces[k], masks[k]) for k in masks)


def test_flat_mask_skips_frozen_parameters(net: Net) -> None:
    """A parameter with requires_grad=False is not in the flat mask (as in FlatModel)."""
    full, table = net("mlp", "mnist"), layers("mlp", "mnist")
    full.get_submodule("1").bias.requires_grad_(False)
    mask = flat_width_mask(full, table, 0.5)
    assert mask.shape == (FlatModel(full).num_params,)
    assert int(mask.sum()) == submodel_params("mlp", "mnist", 0.5) - 64


def test_a_table_of_another_model_is_refused(net: Net) -> None:
    """width_masks and narrow_model refuse a table that does not describe the model."""
    full = net("cnn_mnist", "mnist")
    with pytest.raises(ValueError, match="table"):
        width_masks(full, layers("cnn_mnist_small", "mnist"), 0.5)
    with pytest.raises(ValueError, match="table"):
        narrow_model(full, layers("mlp", "mnist"), 0.5)
    with pytest.raises(ValueError, match="table"):  # the right layers in the wrong order
        flat_width_mask(full, tuple(reversed(layers("cnn_mnist", "mnist"))), 0.5)


# --- width_costs, kept, validation ---------------------------------------------------------------


@pytest.mark.parametrize(("model", "dataset"), PAIRS)
def test_width_costs_equal_the_scalar_functions(model: str, dataset: str) -> None:
    """width_costs is, device by device, submodel_params and submodel_macs(p) / macs(1)."""
    widths = np.array([0.0, 0.01, 0.07, 0.1, 0.25, 0.3, 1 / 3, 0.5, 0.55, 0.77, 0.9, 0.999, 1.0])
    params, fraction = width_costs(model, dataset, widths)
    assert params.dtype == np.int64 and fraction.dtype == np.float64
    assert params.shape == fraction.shape == widths.shape
    full = submodel_macs(model, dataset, 1.0)
    assert params[0] == 0 and fraction[0] == 0.0
    for p, n, f in zip(widths[1:], params[1:], fraction[1:], strict=True):
        assert n == submodel_params(model, dataset, float(p))
        assert f == submodel_macs(model, dataset, float(p)) / full
    alone = width_costs(model, dataset, widths[3:4])  # the fraction is of the full model's MACs
    assert (alone[0][0], alone[1][0]) == (params[3], fraction[3])


def test_width_costs_of_no_devices_are_empty() -> None:
    """An empty widths array gives empty arrays."""
    params, fraction = width_costs("mlp", "digits", np.array([]))
    assert params.shape == fraction.shape == (0,)


def test_kept_rounds_up_but_absorbs_float_noise() -> None:
    """kept(C, p) = max(1, ceil(p C - 1e-9)): ceil(0.07 * 100) would be 8."""
    assert math.ceil(0.07 * 100) == 8 and math.ceil(0.55 * 100) == 56
    assert kept(100, 0.07) == 7
    assert kept(100, 0.55) == 55
    assert kept(10, 0.3) == 3
    assert kept(16, 0.5) == 8
    assert kept(16, 0.51) == 9
    assert kept(3, 0.01) == 1
    assert kept(100, 0.29) == 29
    assert kept(7, 1.0) == 7


@pytest.mark.parametrize("width", [0.0, -0.1, 1.01, float("nan"), float("inf")])
def test_bad_widths_raise(net: Net, width: float) -> None:
    """Widths outside (0, 1] are a ValueError that names width, everywhere."""
    full, table = net("mlp", "digits"), layers("mlp", "digits")
    calls: list[Callable[[], object]] = [
        lambda: kept(10, width),
        lambda: submodel_params("mlp", "digits", width),
        lambda: submodel_macs("mlp", "digits", width),
        lambda: width_masks(full, table, width),
        lambda: flat_width_mask(full, table, width),
        lambda: narrow_model(full, table, width),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="width"):
            call()
    if width != 0.0:
        with pytest.raises(ValueError, match="widths"):
            width_costs("mlp", "digits", np.array([0.5, width]))


def test_width_costs_refuses_a_matrix() -> None:
    """widths must be one-dimensional."""
    with pytest.raises(ValueError, match="widths"):
        width_costs("mlp", "digits", np.full((2, 2), 0.5))


def test_bad_model_dataset_and_channels_raise() -> None:
    """Unknown model or dataset, an unlisted pair, channels < 1: ValueErrors naming the argument."""
    with pytest.raises(ValueError, match="model"):
        layers("vgg", "mnist")
    with pytest.raises(ValueError, match="dataset"):
        submodel_params("mlp", "svhn", 0.5)
    with pytest.raises(ValueError, match="dataset"):
        width_costs("cnn_mnist", "cifar10", np.array([0.5]))
    with pytest.raises(ValueError, match="channels"):
        kept(0, 0.5)
