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
``cifar10``         (3, 32, 32)   50000/10000  torchvision ``CIFAR10`` (``cifar-10-batches-py``);
                                               per-channel mean/std of the training set
==================  ============  ===========  ==============================================

The data directory is the folder that *contains* ``MNIST/raw/``, ``FashionMNIST/raw/`` or
``cifar-10-batches-py/`` (torchvision's layout). ``data_dir=None`` means the environment variable
``WFLSIM_DATA_DIR``, else ``./data``. Nothing is ever downloaded.

``partition`` is pure numpy so that it is cheap to test.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sim.config.catalogue import DATASET_FILES, DATASETS, INPUT_SHAPES, NORMALISATION, NUM_CLASSES

__all__ = ["DATASETS", "INPUT_SHAPES", "NUM_CLASSES"]

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
        ds = cls(root=str(root), train=train, download=False)
        raw = ds.data.to(torch.uint8).unsqueeze(1).contiguous()
        out += [CompactImages(raw, mean, std), ds.targets.to(torch.int64)]
    return out[0], out[1], out[2], out[3]  # type: ignore[return-value]


def _cifar10_class() -> type:
    from torchvision.datasets import CIFAR10

    class _CIFAR10(CIFAR10):
        """torchvision's reader with a presence check instead of the md5 check.

        The pickle layout and the parsing are torchvision's; only the checksums are skipped, so a
        re-packed copy (or the tiny file set the tests write) loads too.
        """

        def _check_integrity(self) -> bool:
            base = Path(self.root) / self.base_folder
            return all((base / f).is_file() for f, _ in self.train_list + self.test_list)

        def _load_meta(self) -> None:
            import pickle

            with open(Path(self.root) / self.base_folder / self.meta["filename"], "rb") as f:
                self.classes = pickle.load(f, encoding="latin1")[self.meta["key"]]
            self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    return _CIFAR10


def _load_cifar10(root: Path) -> CompactSet:
    cls = _cifar10_class()
    mean = torch.tensor(_CIFAR_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(_CIFAR_STD).view(1, 3, 1, 1)
    out: list[CompactImages | torch.Tensor] = []
    for train in (True, False):
        ds = cls(root=str(root), train=train, download=False)
        raw = torch.from_numpy(np.ascontiguousarray(ds.data)).permute(0, 3, 1, 2)  # NHWC -> NCHW
        out += [
            CompactImages(raw.contiguous(), mean, std),
            torch.as_tensor(np.asarray(ds.targets), dtype=torch.int64),
        ]
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
