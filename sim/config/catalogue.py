"""The catalogue of datasets and models, without torch: the one place that names them.

The scenario schema validates against it, a network-only run takes the model size ``D`` from it,
and :mod:`wflsim.models.data` / :mod:`wflsim.models.nets` build what it lists (``tests/test_scenario.py`` checks
every parameter count against the real networks). The built-in datasets, models and partitions
are the built-in entries of :data:`wflsim.sim.registry.DATASETS`, :data:`~wflsim.sim.registry.MODELS` and
:data:`~wflsim.sim.registry.PARTITIONS` (:func:`builtin_datasets`, ...), which also hold those registered
from Python; the lookups that read those registries (:func:`wflsim.sim.registry.model_num_params`, ...)
are in :mod:`wflsim.sim.registry`, which imports this module (never the other way round).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Dataset name -> per-sample input shape ``(C, H, W)``.
INPUT_SHAPES: dict[str, tuple[int, int, int]] = {
    "digits": (1, 8, 8),
    "mnist": (1, 28, 28),
    "fashion_mnist": (1, 28, 28),
    "cifar10": (3, 32, 32),
}
DATASETS: tuple[str, ...] = tuple(INPUT_SHAPES)
NUM_CLASSES = 10
#: Dataset name -> training samples ``M`` (``wflsim.models.data.load_dataset``'s training split).
TRAIN_SAMPLES: dict[str, int] = {
    "digits": 1437,
    "mnist": 60_000,
    "fashion_mnist": 60_000,
    "cifar10": 50_000,
}

MODELS: tuple[str, ...] = ("mlp", "cnn_mnist", "cnn_mnist_small", "mobilenet_v2", "resnet20")

#: The datasets each model is built for.
MODEL_DATASETS: dict[str, tuple[str, ...]] = {
    "mlp": DATASETS,
    "cnn_mnist": ("mnist", "fashion_mnist"),
    "cnn_mnist_small": ("mnist", "fashion_mnist"),
    "mobilenet_v2": ("cifar10",),
    "resnet20": ("cifar10",),
}

_MNIST_RAW = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)

#: Files each file-based dataset needs below the data directory (torchvision's layout).
DATASET_FILES: dict[str, tuple[str, ...]] = {
    "mnist": tuple(f"MNIST/raw/{f}" for f in _MNIST_RAW),
    "fashion_mnist": tuple(f"FashionMNIST/raw/{f}" for f in _MNIST_RAW),
    "cifar10": tuple(
        f"cifar-10-batches-py/{f}"
        for f in (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta")
    ),
}

#: Per-channel normalisation ``(mean, std)`` of each image dataset, in ``[0, 1]`` pixel units
#: (``digits`` is scaled to ``[0, 1]`` only). MNIST / Fashion-MNIST: the usual constants;
#: CIFAR-10: the training set's per-channel statistics.
NORMALISATION: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion_mnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
}


class DatasetError(ValueError):
    """A dataset cannot serve a scenario: its files are damaged, unsafe or not the dataset, or
    it has too few samples. ``field`` names the scenario field to fix; messages never quote the
    files' contents. (The CLI reports it as one line with exit code 2.)"""

    def __init__(self, field: str, problem: str, fix: str | None = None) -> None:
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}")


_FIXED_COUNTS = {
    "cnn_mnist": 440_812,
    "cnn_mnist_small": 421_642,
    "mobilenet_v2": 502_538,
    "resnet20": 269_722,
}


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset of :data:`wflsim.sim.registry.DATASETS` (built-in, or registered from Python with
    ``wflsim.register_dataset``): what validation and a network-only run need."""

    input_shape: tuple[int, ...]  #: per-sample input shape
    num_classes: int
    num_train: int  #: training samples


@dataclass(frozen=True)
class ModelInfo:
    """A model of :data:`wflsim.sim.registry.MODELS` (built-in, or registered from Python with
    ``wflsim.register_model``): what validation and a network-only run need."""

    datasets: tuple[str, ...] | None  #: the datasets it is built for (None: every dataset)
    count: Callable[[str], int]  #: its trainable parameters when built for a dataset


@dataclass(frozen=True)
class PartitionInfo:
    """A partition of :data:`wflsim.sim.registry.PARTITIONS` (built-in, or registered from Python with
    ``wflsim.register_partition``; its function lives on the learner side)."""

    description: str


#: The partitions every run knows.
PARTITIONS: tuple[str, ...] = ("iid", "dirichlet")


def _mlp_count(dataset: str) -> int:
    c, h, w = INPUT_SHAPES[dataset]
    return c * h * w * 128 + 128 + 128 * NUM_CLASSES + NUM_CLASSES


def _fixed_count(count: int) -> Callable[[str], int]:
    return lambda dataset: count


def builtin_datasets() -> dict[str, DatasetInfo]:
    """The built-in datasets' entries of :data:`wflsim.sim.registry.DATASETS`."""
    return {d: DatasetInfo(INPUT_SHAPES[d], NUM_CLASSES, TRAIN_SAMPLES[d]) for d in DATASETS}


def builtin_models() -> dict[str, ModelInfo]:
    """The built-in models' entries of :data:`wflsim.sim.registry.MODELS`."""
    return {
        m: ModelInfo(
            MODEL_DATASETS[m], _mlp_count if m == "mlp" else _fixed_count(_FIXED_COUNTS[m])
        )
        for m in MODELS
    }


def builtin_partitions() -> dict[str, PartitionInfo]:
    """The built-in partitions' entries of :data:`wflsim.sim.registry.PARTITIONS`."""
    described = (
        "one permutation cut into N contiguous pieces",
        "per class, Dirichlet(alpha) shares of its samples",
    )
    return {p: PartitionInfo(d) for p, d in zip(PARTITIONS, described, strict=True)}


def iid_partition_sizes(num_samples: int, num_devices: int) -> np.ndarray:
    """Local data sizes ``D_n`` of the IID partition of ``num_samples`` training samples over
    ``num_devices`` devices, ``(N,)`` int64: one permutation cut into ``N`` contiguous pieces
    (``np.array_split``; the first ``M mod N`` devices hold one sample more), whatever the
    permutation (``wflsim.models.data.partition``)."""
    m, n = int(num_samples), int(num_devices)
    if n < 1 or m < n:
        raise ValueError(f"cannot give {n} devices at least one of {m} samples each")
    sizes = np.full(n, m // n, dtype=np.int64)
    sizes[: m % n] += 1
    return sizes


def epoch_steps(local_epochs: int, num_samples: np.ndarray, batch_size: np.ndarray) -> np.ndarray:
    """Local SGD steps of ``k`` local epochs: ``E_n = k ceil(D_n / B_n)``, ``(N,)`` int64.

    Args:
        local_epochs: ``k >= 1``, passes over the device's data.
        num_samples: ``D_n``, samples each device holds, ``(N,)`` ints ``>= 1``.
        batch_size: ``B_n``, samples per step, ``(N,)`` ints ``>= 1``.
    """
    d = np.asarray(num_samples, dtype=np.int64)
    b = np.asarray(batch_size, dtype=np.int64)
    return int(local_epochs) * -(-d // b)
