"""MNIST's IDX files read without torchvision (models.data.read_idx)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import HAS_MNIST
from wflsim.models.data import load_dataset, read_idx


def idx_bytes(values: np.ndarray) -> bytes:
    """An IDX file of unsigned bytes written by hand from its definition."""
    header = bytes([0, 0, 0x08, values.ndim]) + np.asarray(values.shape, ">i4").tobytes()
    return header + values.astype(np.uint8).tobytes()


def test_an_idx_file_reads_as_its_values(tmp_path: Path) -> None:
    """A (3, 2, 4) array written as IDX by hand reads back with its shape and values."""
    values = np.arange(24, dtype=np.uint8).reshape(3, 2, 4)
    (tmp_path / "f").write_bytes(idx_bytes(values))
    got = read_idx(tmp_path / "f")
    assert got.shape == (3, 2, 4)
    np.testing.assert_array_equal(got, values)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"secret-content-not-idx",
        bytes([0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0]),  # float type code
        bytes([0, 0, 0x08, 2, 0, 0, 0, 3]),  # header cut short
        bytes([0, 0, 0x08, 1, 0, 0, 0, 5, 1, 2]),  # fewer values than its header says
        bytes([0, 0, 0x08, 1, 0, 0, 0, 1, 1, 2]),  # more values than its header says
    ],
)
def test_a_file_that_is_not_idx_is_refused(tmp_path: Path, content: bytes) -> None:
    """Empty, foreign, wrong type code, cut-short header, too few or too many values: ValueError."""
    (tmp_path / "f").write_bytes(content)
    with pytest.raises(ValueError):
        read_idx(tmp_path / "f")


@pytest.mark.skipif(not HAS_MNIST, reason="needs MNIST (set WFLSIM_DATA_DIR)")
def test_mnist_loads_as_torchvision_reads_it(data_dir: Path) -> None:
    """The images and labels of both splits equal torchvision's MNIST, bit for bit."""
    datasets = pytest.importorskip("torchvision.datasets")
    x_tr, y_tr, x_te, y_te = load_dataset("mnist", data_dir, compact=True)
    for train, x, y in ((True, x_tr, y_tr), (False, x_te, y_te)):
        ds = datasets.MNIST(str(data_dir), train=train, download=False)
        assert torch.equal(x.raw, ds.data.unsqueeze(1))
        assert torch.equal(y, ds.targets.to(torch.int64))
