"""The torch side of datasets, models and partitions registered from Python: their types and
checks.

``wflsim.register_dataset`` / ``register_model`` / ``register_partition``
(:mod:`wflsim.app.extensions`) call :func:`wflsim.models.registry.add_dataset`,
:func:`~wflsim.models.registry.add_model` and :func:`~wflsim.models.registry.add_partition`, which
check the objects here (:func:`checked_dataset`, :func:`model_info`) and register them in
:mod:`wflsim.models.registry`, and what validation needs (input shapes, class counts, parameter
counts) in :mod:`wflsim.sim.registry`, so that scenarios name them like the built-in ones;
:func:`wflsim.models.data.load_dataset`, :func:`wflsim.models.data.partition` and
:func:`wflsim.models.registry.build_model` look in :mod:`wflsim.models.registry` first and hand
what they find to :func:`build` and :func:`partition` here. This module sits below the registry:
it never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from wflsim.sim import registry
from wflsim.sim.config.catalogue import DatasetError, DatasetInfo, ModelInfo

#: ``factory(input_shape, num_classes) -> nn.Module``: a model for inputs of ``input_shape``
#: (one sample's, e.g. ``(1, 28, 28)``) with ``num_classes`` outputs (logits).
ModelFactory = Callable[[tuple[int, ...], int], nn.Module]
#: ``fn(labels, num_devices, rng) -> index lists``: ``labels`` ``(M,)`` int64, one sequence of
#: training-sample indices per device; ``rng`` is the run's keyed ``numpy`` generator.
PartitionFn = Callable[[np.ndarray, int, np.random.Generator], Sequence[Any]]
Tensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]

#: Largest dataset object read item by item (a torchvision-style dataset).
MAX_ITEMS = 10_000_000


def _pair(data: Any, which: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` tensors from a pair of arrays / tensors or a torchvision-style dataset (a
    ``len()`` and items ``(x, y)``)."""
    if isinstance(data, tuple | list) and len(data) == 2:
        x, y = data
    elif hasattr(data, "__len__") and hasattr(data, "__getitem__"):
        n = len(data)
        if not 0 < n <= MAX_ITEMS:
            raise ValueError(f"{which}: a dataset of {n} items (give 1 to {MAX_ITEMS:,})")
        items = [data[i] for i in range(n)]
        if not all(isinstance(it, tuple | list) and len(it) == 2 for it in items):
            raise ValueError(f"{which}: every item must be a pair (x, y)")
        x = torch.stack([torch.as_tensor(np.asarray(it[0])) for it in items])
        y = torch.as_tensor(np.asarray([int(it[1]) for it in items]))
    else:
        raise ValueError(
            f"{which}: give a pair (x, y) of arrays or tensors, or a dataset with len() and "
            f"items (x, y); got a {type(data).__name__}"
        )
    x = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    y = torch.as_tensor(np.asarray(y) if not isinstance(y, torch.Tensor) else y)
    if x.ndim < 2 or y.ndim != 1 or x.shape[0] != y.shape[0] or y.shape[0] == 0:
        raise ValueError(
            f"{which}: x must be (M, ...) and y (M,) with the same M >= 1; got x "
            f"{tuple(x.shape)} and y {tuple(y.shape)}"
        )
    if y.dtype.is_floating_point or y.dtype.is_complex or y.dtype == torch.bool:
        if not torch.equal(y, y.round()):
            raise ValueError(f"{which}: the labels y must be whole numbers (class indices)")
    x = x.to(torch.float32)
    if not torch.isfinite(x).all():
        raise ValueError(f"{which}: x holds NaN or infinite values")
    return x.contiguous(), y.to(torch.int64)


def checked_dataset(
    train: Any, test: Any, num_classes: int | None = None
) -> tuple[Tensors, DatasetInfo]:
    """A dataset's tensors ``(x_train, y_train, x_test, y_test)`` and what validation needs of
    it (see :func:`wflsim.register_dataset`).

    Raises:
        ValueError: data that cannot be a classification dataset (the message says which).
    """
    x_tr, y_tr = _pair(train, "train")
    x_te, y_te = _pair(test, "test")
    if x_tr.shape[1:] != x_te.shape[1:]:
        raise ValueError(
            f"train samples are {tuple(x_tr.shape[1:])} but test samples {tuple(x_te.shape[1:])}"
        )
    top = int(max(y_tr.max(), y_te.max())) + 1
    classes = top if num_classes is None else int(num_classes)
    if int(min(y_tr.min(), y_te.min())) < 0 or top > classes or classes < 2:
        raise ValueError(f"labels must lie in [0, num_classes) with num_classes >= 2 ({classes})")
    info = DatasetInfo(tuple(int(d) for d in x_tr.shape[1:]), classes, len(y_tr))
    return (x_tr, y_tr, x_te, y_te), info


def dataset_spec(name: str) -> tuple[tuple[int, ...], int]:
    """``(input_shape, num_classes)`` of a built-in or registered dataset."""
    info = registry.DATASETS[name]
    return info.input_shape, info.num_classes


def model_info(name: str, factory: ModelFactory, datasets: tuple[str, ...] | None) -> ModelInfo:
    """What validation needs of a model factory (see :func:`wflsim.register_model`): the datasets
    it fits and its parameter count, computed on first need, per dataset, from a model it
    builds."""
    counts: dict[tuple[tuple[int, ...], int], int] = {}

    def count(dataset_name: str) -> int:
        key = dataset_spec(dataset_name)  # a dataset registered again may change its shape
        if key not in counts:
            with torch.random.fork_rng(devices=[]):
                torch.default_generator.manual_seed(0)
                try:  # on the meta device: counted without allocating (a model too large for
                    # memory is then refused before it is built: wflsim.app.prepare)
                    with torch.device("meta"):
                        net = build(name, factory, dataset_name)
                except DatasetError:  # a factory that needs real tensors: built for real
                    net = build(name, factory, dataset_name)
            counts[key] = sum(p.numel() for p in net.parameters() if p.requires_grad)
        return counts[key]

    return ModelInfo(datasets, count)


def build(name: str, factory: ModelFactory, dataset_name: str) -> nn.Module:
    """The model ``name`` that ``factory`` builds for ``dataset_name`` (with the global torch RNG,
    as :func:`wflsim.models.nets.build_model`), checked.

    Raises:
        DatasetError: the factory failed or did not return a module with parameters.
    """
    shape, classes = dataset_spec(dataset_name)
    try:
        net = factory(shape, classes)
    except Exception as err:
        raise DatasetError(
            "learning.model",
            f"the factory of model {name!r} failed for dataset {dataset_name!r}: "
            f"{type(err).__name__}: {err}",
            "make it build a torch.nn.Module from (input_shape, num_classes)",
        ) from err
    if not isinstance(net, nn.Module) or not any(p.requires_grad for p in net.parameters()):
        raise DatasetError(
            "learning.model",
            f"the factory of model {name!r} returned a {type(net).__name__} without trainable "
            "parameters",
            "return a torch.nn.Module with parameters",
        )
    _probe(net, name, dataset_name, shape, classes)
    return net


#: Samples in the batch a registered model is checked on when it is built.
PROBE_BATCH = 2


def _probe(
    net: nn.Module, name: str, dataset_name: str, shape: tuple[int, ...], classes: int
) -> None:
    """Check once, when the model is built, that it maps a batch ``(B, *shape)`` of zeros to
    logits ``(B, classes)``: a wrong output shape would otherwise fail inside training with
    torch's own error, which does not name the model. The module runs in eval mode without
    gradients (no BatchNorm statistics or dropout draws change) and gets its modes back; a
    model built on the meta device (only counted) is not run.

    Raises:
        DatasetError: on ``learning.model``, naming the model, the shapes and the dataset.
    """
    params = list(net.parameters())
    if any(p.is_meta for p in params):
        return
    batch = (PROBE_BATCH, *shape)
    x = torch.zeros(batch, dtype=torch.float32, device=params[0].device)
    fix = "make the module map a batch (B, *input_shape) to logits (B, num_classes)"
    modes = [(m, m.training) for m in net.modules()]
    net.eval()
    try:
        with torch.no_grad():
            out = net(x)
    except Exception as err:
        raise DatasetError(
            "learning.model",
            f"model {name!r} fails on a batch of shape {batch} of dataset {dataset_name!r}: "
            f"{type(err).__name__}: {' '.join(str(err).split())[:200]}",
            fix,
        ) from err
    finally:
        for module, training in modes:
            module.training = training
    want = (PROBE_BATCH, classes)
    got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
    if got != want:
        raise DatasetError(
            "learning.model",
            f"model {name!r} maps a batch of shape {batch} to {got}; dataset "
            f"{dataset_name!r} needs {want}: one logit per class for each sample",
            fix,
        )


def partition(
    name: str, fn: PartitionFn, labels: np.ndarray, num_devices: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """The index lists of partition ``name`` (its function ``fn``), checked: ``num_devices``
    lists of indices into ``labels``, none empty (sorted ``int64``; a sample may be given to
    several devices).

    Raises:
        DatasetError: on ``learning.partition``, naming what is wrong.
    """

    def bad(problem: str) -> DatasetError:
        return DatasetError(
            "learning.partition",
            f"partition {name!r} {problem}",
            "return one non-empty list of sample indices per device",
        )

    try:
        parts = list(fn(np.asarray(labels).copy(), num_devices, rng))
    except Exception as err:
        raise bad(f"failed: {type(err).__name__}: {err}") from err
    if len(parts) != num_devices:
        raise bad(f"gave {len(parts)} index lists for {num_devices} devices")
    out = []
    for n, part in enumerate(parts):
        idx = np.asarray(part)
        if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
            raise bad(f"gave device {n} no samples, or not a 1-D list of whole numbers")
        if idx.min() < 0 or idx.max() >= len(labels):
            raise bad(f"gave device {n} an index outside [0, {len(labels)})")
        out.append(np.sort(idx.astype(np.int64)))
    return out
