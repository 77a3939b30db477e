"""Datasets (as normalised tensors) and their partition across devices.

Every loader returns ``(x_train, y_train, x_test, y_test)``: images ``float32`` of shape
``(N, C, H, W)``, labels ``int64`` of shape ``(N,)``, 10 classes, all on the CPU (the learner moves
them to its device). Nothing is read per item (no PIL, no transforms): whole arrays are converted
once. ``load_dataset(..., compact=True)`` (what the learner uses) keeps the ``uint8`` pixels
instead and normalises the samples it is asked for (:class:`CompactImages`: bit-identical values,
a quarter of the memory).

==================  ============  ===========  ==============================================
name                shape         train/test   source and normalisation
==================  ============  ===========  ==============================================
``digits``          (1, 8, 8)     1437 / 360   ``sklearn.datasets.load_digits``, pixels / 16
                                               (values in [0, 1]); stratified 80/20 split with
                                               ``random_state=0`` (same split in every run)
``mnist``           (1, 28, 28)   60000/10000  torchvision ``MNIST`` raw files;
                                               ``(x/255 - 0.1307) / 0.3081``
``fashion_mnist``   (1, 28, 28)   60000/10000  torchvision ``FashionMNIST`` raw files;
                                               ``(x/255 - 0.2860) / 0.3530``
``cifar10``         (3, 32, 32)   50000/10000  ``cifar-10-batches-py`` (torchvision's layout),
                                               read by :func:`read_cifar_batch` (no code runs);
                                               per-channel mean/std of the training set
==================  ============  ===========  ==============================================

The data directory is the folder that *contains* ``MNIST/raw/``, ``FashionMNIST/raw/`` or
``cifar-10-batches-py/`` (torchvision's layout). ``data_dir=None`` means the environment variable
``WFLSIM_DATA_DIR``, else ``./data``. Nothing is ever downloaded.

``partition`` is pure numpy so that it is cheap to test.

Dataset files are input like any other: a damaged or foreign file is a
:class:`sim.config.catalogue.DatasetError` naming ``learning.data_dir`` (exit 2 on the command
line), never a traceback, and no message quotes a file's contents. CIFAR-10's files are Python
pickles; they are read by a restricted unpickler that builds only the plain data the format holds
(dicts, lists, strings, numbers and numpy arrays), so a crafted file cannot run code.
"""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from wflsim.sim.config.catalogue import (
    DATASET_FILES,
    DATASETS,
    INPUT_SHAPES,
    NORMALISATION,
    NUM_CLASSES,
    DatasetError,
)

try:  # numpy >= 2 (pickles written by numpy 2 name numpy._core; older ones numpy.core)
    from numpy._core.multiarray import _reconstruct
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]

__all__ = ["DATASETS", "INPUT_SHAPES", "NUM_CLASSES"]

log = logging.getLogger(__name__)

_MNIST_STATS = {
    k: (NORMALISATION[k][0][0], NORMALISATION[k][1][0]) for k in ("mnist", "fashion_mnist")
}
_CIFAR_MEAN, _CIFAR_STD = NORMALISATION["cifar10"]
_FIX = (
    "point learning.data_dir / --data-dir / WFLSIM_DATA_DIR at a folder with "
    "MNIST/raw/..., FashionMNIST/raw/... or cifar-10-batches-py/... (torchvision's layout)"
)

Tensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


class CompactImages:
    """Images stored as their ``uint8`` source pixels, normalised to ``float32`` when indexed.

    ``images[idx]`` returns ``(x/255 - mean) / std`` of the selected samples, computed by the
    same function (same operations, same order) that :func:`load_dataset` uses to normalise a
    whole dataset, so it is bit-identical to indexing the normalised ``float32`` array, at a
    quarter of the memory (CIFAR-10: 184 MB instead of 737 MB; MNIST: 55 MB instead of 220 MB).

    Args:
        raw: ``uint8`` ``(M, C, H, W)`` pixels.
        mean, std: per-channel statistics in ``[0, 1]`` units: Python floats (one channel) or
            ``float32`` tensors of shape ``(1, C, 1, 1)``.
    """

    def __init__(
        self, raw: torch.Tensor, mean: float | torch.Tensor, std: float | torch.Tensor
    ) -> None:
        if raw.dtype != torch.uint8 or raw.dim() != 4:
            raise ValueError(f"raw images must be uint8 (M, C, H, W), got {raw.dtype} {raw.shape}")
        self.raw, self.mean, self.std = raw, mean, std

    @property
    def shape(self) -> torch.Size:
        """``(M, C, H, W)``."""
        return self.raw.shape

    def __len__(self) -> int:
        return self.raw.shape[0]

    def __getitem__(self, idx: Any) -> torch.Tensor:
        """Normalised ``float32`` images ``raw[idx]`` (any index ``torch`` accepts)."""
        return _normalise(self.raw[idx], self.mean, self.std)

    def to(self, device: torch.device | str) -> CompactImages:
        """The same images on ``device``."""
        move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
        return CompactImages(self.raw.to(device), move(self.mean), move(self.std))

    def materialise(self) -> torch.Tensor:
        """All images, normalised, as one ``float32`` ``(M, C, H, W)`` tensor."""
        return self[:].contiguous()


#: ``(x_train, y_train, x_test, y_test)`` with compact images.
CompactSet = tuple[CompactImages, torch.Tensor, CompactImages, torch.Tensor]


def _normalise(
    raw: torch.Tensor, mean: float | torch.Tensor, std: float | torch.Tensor
) -> torch.Tensor:
    """``(raw/255 - mean) / std`` in ``float32``: THE normalisation of every image dataset."""
    return raw.to(torch.float32).div_(255.0).sub_(mean).div_(std)


class DatasetNotFoundError(FileNotFoundError):
    """The files of a dataset are not in the data directory (nothing is downloaded)."""


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    """The data directory: ``data_dir``, else ``$WFLSIM_DATA_DIR``, else ``./data``."""
    if data_dir is None or str(data_dir) == "":
        data_dir = os.environ.get("WFLSIM_DATA_DIR") or "data"
    return Path(data_dir).expanduser()


def dataset_available(name: str, data_dir: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``load_dataset(name, data_dir)`` would find its files (digits: always)."""
    root = resolve_data_dir(data_dir)
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {list(DATASETS)}")
    return all((root / f).is_file() for f in DATASET_FILES.get(name, ()))


def load_dataset(
    name: str, data_dir: str | os.PathLike[str] | None = None, *, compact: bool = False
) -> Tensors | CompactSet:
    """Load dataset ``name`` as normalised tensors (see the module docstring for the table).

    Returns ``(x_train, y_train, x_test, y_test)``: ``x`` float32 ``(N, C, H, W)``, ``y`` int64
    ``(N,)``. With ``compact=True`` the images of MNIST, Fashion-MNIST and CIFAR-10 come as
    :class:`CompactImages` (``uint8`` pixels, normalised when indexed; the same values at a
    quarter of the memory); ``digits`` is always ``float32`` (it is tiny).
    Raises :class:`DatasetNotFoundError` when the files are missing and ``ValueError``
    for an unknown name. ``data_dir`` is ignored for ``digits``.
    """
    if name not in INPUT_SHAPES:
        raise ValueError(f"unknown dataset {name!r}; known: {list(DATASETS)}")
    if name == "digits":
        return _load_digits()
    root = resolve_data_dir(data_dir)
    if not dataset_available(name, root):
        where = (
            f"{root}/cifar-10-batches-py/"
            if name == "cifar10"
            else f"{root}/{'MNIST' if name == 'mnist' else 'FashionMNIST'}/raw/"
        )
        raise DatasetNotFoundError(
            f"dataset {name!r} not found: no complete set of files in {where} "
            f"(searched data directory {root.resolve()}); {_FIX}"
        )
    c_tr, y_tr, c_te, y_te = (
        _load_cifar10(root) if name == "cifar10" else _load_mnist_like(name, root)
    )
    log.debug("dataset %s: %d training, %d test images from %s", name, len(y_tr), len(y_te), root)
    if not compact:
        return c_tr.materialise(), y_tr, c_te.materialise(), y_te
    return c_tr, y_tr, c_te, y_te


def _load_digits() -> Tensors:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = (bunch.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = bunch.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    return (
        torch.from_numpy(np.ascontiguousarray(x_tr)),
        torch.from_numpy(np.ascontiguousarray(y_tr)),
        torch.from_numpy(np.ascontiguousarray(x_te)),
        torch.from_numpy(np.ascontiguousarray(y_te)),
    )


def _load_mnist_like(name: str, root: Path) -> CompactSet:
    from torchvision.datasets import MNIST, FashionMNIST

    cls = MNIST if name == "mnist" else FashionMNIST
    mean, std = _MNIST_STATS[name]
    out: list[CompactImages | torch.Tensor] = []
    for train in (True, False):
        try:  # torchvision parses the IDX files (no pickle); a damaged file fails here
            ds = cls(root=str(root), train=train, download=False)
            raw = ds.data.to(torch.uint8).unsqueeze(1).contiguous()
            targets = ds.targets.to(torch.int64)
        except Exception as err:  # any parser failure: the file is not what it should be
            raise DatasetError(
                "learning.data_dir",
                f"the {name} files in {str(root)!r} are damaged or not {name} "
                f"({type(err).__name__})",
                "replace them with the original files",
            ) from None
        if raw.shape[1:] != (1, 28, 28) or targets.shape != (raw.shape[0],):
            raise DatasetError(
                "learning.data_dir",
                f"the {name} files in {str(root)!r} do not hold 28x28 images with one label each",
                "replace them with the original files",
            )
        if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= NUM_CLASSES):
            raise DatasetError(
                "learning.data_dir",
                f"the {name} labels in {str(root)!r} are not in 0..{NUM_CLASSES - 1}",
                "replace them with the original files",
            )
        out += [CompactImages(raw, mean, std), targets]
    return out[0], out[1], out[2], out[3]  # type: ignore[return-value]


#: The only globals a CIFAR-10 batch file may name: what pickled numpy arrays are made of.
_CIFAR_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}
_CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
_CIFAR_TEST = ("test_batch",)


class _RefusedGlobal(pickle.UnpicklingError):
    """A pickle named a global that is not on the list."""


class _PlainDataUnpickler(pickle.Unpickler):
    """An unpickler that builds plain data only: dicts, lists, tuples, strings, bytes, numbers
    and numpy arrays (:data:`_CIFAR_GLOBALS`). Any other global a pickle names (a function to
    call, a class to build) is refused before anything of it runs."""

    def find_class(self, module: str, name: str) -> Any:
        """Admit exactly the numpy array constructors; refuse everything else."""
        obj = _CIFAR_GLOBALS.get((module, name))
        if obj is None:
            raise _RefusedGlobal("the file names a Python object that is not plain data")
        return obj


def _unpickle_plain(f: BinaryIO) -> Any:
    """Load a pickle with :class:`_PlainDataUnpickler` (Python 2 strings read as latin-1, as
    CIFAR-10's files need)."""
    return _PlainDataUnpickler(f, encoding="latin1").load()


def read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One ``cifar-10-batches-py`` batch file: ``(images uint8 (M, 3, 32, 32), labels int64 (M,))``.

    The file is a pickle of ``{"data": uint8 (M, 3072), "labels": [M ints], ...}`` (CIFAR-100's
    ``fine_labels`` is accepted too), as torchvision reads it, but loaded by a restricted
    unpickler (:class:`_PlainDataUnpickler`): no code in the file runs.

    Raises:
        DatasetError: the file cannot be read, is not plain data, or is not a CIFAR-10 batch
            (on ``learning.data_dir``; the message names the file, never its contents).
    """
    fix = "replace it with the original cifar-10-batches-py file"
    try:
        with open(path, "rb") as f:
            entry = _unpickle_plain(f)
    except _RefusedGlobal as err:
        raise DatasetError(
            "learning.data_dir", f"refused {str(path)!r}: {err}; nothing in it was run", fix
        ) from None
    except Exception as err:  # truncated, garbage, unreadable: the file is not a batch
        raise DatasetError(
            "learning.data_dir",
            f"{str(path)!r} is not a readable CIFAR-10 batch ({type(err).__name__})",
            fix,
        ) from None
    data = entry.get("data") if isinstance(entry, dict) else None
    labels = entry.get("labels", entry.get("fine_labels")) if isinstance(entry, dict) else None
    if (
        not isinstance(data, np.ndarray)
        or data.dtype != np.uint8
        or data.ndim != 2
        or data.shape[1] != 3 * 32 * 32
        or not isinstance(labels, list | np.ndarray)
        or len(labels) != data.shape[0]
    ):
        raise DatasetError(
            "learning.data_dir",
            f"{str(path)!r} is not a CIFAR-10 batch (a dict with uint8 data of shape (M, 3072) "
            "and M labels)",
            fix,
        )
    try:
        y = np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        y = np.full(1, -1, dtype=np.int64)
    if y.ndim != 1 or (y.size and (y.min() < 0 or y.max() >= NUM_CLASSES)):
        raise DatasetError(
            "learning.data_dir",
            f"{str(path)!r} has labels outside 0..{NUM_CLASSES - 1}",
            fix,
        )
    return data.reshape(-1, 3, 32, 32), y


def _load_cifar10(root: Path) -> CompactSet:
    base = root / "cifar-10-batches-py"
    mean = torch.tensor(_CIFAR_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(_CIFAR_STD).view(1, 3, 1, 1)
    out: list[CompactImages | torch.Tensor] = []
    for names in (_CIFAR_TRAIN, _CIFAR_TEST):
        batches = [read_cifar_batch(base / n) for n in names]
        x = np.ascontiguousarray(np.concatenate([b[0] for b in batches]))
        y = np.concatenate([b[1] for b in batches])
        out += [CompactImages(torch.from_numpy(x), mean, std), torch.from_numpy(y)]
    return out[0], out[1], out[2], out[3]  # type: ignore[return-value]


def partition(
    labels: np.ndarray,
    num_devices: int,
    kind: str,
    alpha: float,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Split sample indices ``0..len(labels)-1`` across ``num_devices`` devices.

    * ``"iid"``: one random permutation cut into ``num_devices`` contiguous pieces
      (``np.array_split``): sizes differ by at most 1.
    * ``"dirichlet"``: label skew. For every class ``c`` independently, proportions
      ``p ~ Dir(alpha * 1_N)`` split that class's (shuffled) indices among the devices
      (cut points ``floor(cumsum(p) * n_c)``). Small ``alpha`` gives each device few classes,
      large ``alpha`` approaches IID. A device left empty then receives one sample moved from the
      device that holds the most (repeated until no device is empty; deterministic given ``rng``),
      so every device holds at least one sample.

    Args:
        labels: integer class labels, shape ``(M,)``, ``M >= num_devices``.
        num_devices: ``N >= 1``.
        kind: ``"iid"`` or ``"dirichlet"``.
        alpha: Dirichlet concentration ``> 0`` (ignored for IID).
        rng: the generator (the learner passes ``streams.global_("partition")``).

    Returns:
        ``N`` sorted ``int64`` index arrays: a disjoint cover of ``range(M)``, none empty.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    m = labels.shape[0]
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1, got {num_devices}")
    if m < num_devices:
        raise ValueError(f"cannot give {num_devices} devices at least one of {m} samples each")
    if kind == "iid":
        parts = np.array_split(rng.permutation(m), num_devices)
    elif kind == "dirichlet":
        if not alpha > 0:
            raise ValueError(f"dirichlet alpha must be > 0, got {alpha}")
        buckets: list[list[np.ndarray]] = [[] for _ in range(num_devices)]
        for c in np.unique(labels):
            idx = rng.permutation(np.flatnonzero(labels == c))
            p = rng.dirichlet(np.full(num_devices, float(alpha)))
            if not np.all(np.isfinite(p)):  # alpha so small that the sampler underflows
                p = np.zeros(num_devices)
                p[rng.integers(num_devices)] = 1.0
            cuts = np.floor(np.cumsum(p)[:-1] * idx.size).astype(np.int64)
            for n, piece in enumerate(np.split(idx, np.clip(cuts, 0, idx.size))):
                buckets[n].append(piece)
        parts = [np.concatenate(b) if b else np.empty(0, np.int64) for b in buckets]
        sizes = np.array([p.size for p in parts], dtype=np.int64)
        for empty in np.flatnonzero(sizes == 0):
            donor = int(np.argmax(sizes))
            j = int(rng.integers(sizes[donor]))
            parts[empty] = parts[donor][j : j + 1]
            parts[donor] = np.delete(parts[donor], j)
            sizes[empty], sizes[donor] = 1, sizes[donor] - 1
    else:
        raise ValueError(f"unknown partition kind {kind!r}; known: 'iid', 'dirichlet'")
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
