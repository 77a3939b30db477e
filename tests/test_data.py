"""Datasets and partitions (models.data)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import conftest
from conftest import data_folders, dataset_folder_or_skip, find_dataset, write_fake_cifar
from wflsim.models.data import (
    CompactImages,
    DatasetNotFoundError,
    load_dataset,
    partition,
    resolve_data_dir,
)
from wflsim.sim.config.catalogue import DATASET_FILES

# ----------------------------------------------------------------------------- loaders


def test_digits_shapes_dtypes_and_split() -> None:
    """Digits: (N,1,8,8) float32 in [0,1], int64 labels, stratified 1437/360 split."""
    x_tr, y_tr, x_te, y_te = load_dataset("digits", None)
    assert x_tr.shape == (1437, 1, 8, 8) and x_te.shape == (360, 1, 8, 8)
    assert x_tr.dtype == torch.float32 and y_tr.dtype == torch.int64
    assert float(x_tr.min()) >= 0.0 and float(x_tr.max()) == 1.0
    counts_tr = np.bincount(y_tr.numpy(), minlength=10)
    counts_te = np.bincount(y_te.numpy(), minlength=10)
    assert np.all(np.abs(counts_te / counts_tr - 0.25) < 0.02)  # stratified 80/20


def test_digits_split_is_deterministic() -> None:
    """Two loads of digits give the same split."""
    a, b = load_dataset("digits", None), load_dataset("digits", "/nonexistent")
    for u, v in zip(a, b, strict=True):
        assert torch.equal(u, v)


def test_unknown_dataset_raises_value_error() -> None:
    """An unknown dataset name is a ValueError naming the known ones."""
    with pytest.raises(ValueError, match="known"):
        load_dataset("imagenet", None)


def test_missing_files_raise_dataset_not_found(tmp_path: Path) -> None:
    """Missing MNIST files: DatasetNotFoundError (a FileNotFoundError) naming dataset, dir, fix."""
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("mnist", tmp_path)
    msg = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert "'mnist'" in msg and str(tmp_path) in msg and "WFLSIM_DATA_DIR" in msg
    assert "\n" not in msg


def test_data_dir_defaults_to_env_then_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """data_dir=None resolves to $WFLSIM_DATA_DIR, else ./data."""
    monkeypatch.setenv("WFLSIM_DATA_DIR", "/some/where")
    assert resolve_data_dir(None) == Path("/some/where")
    monkeypatch.delenv("WFLSIM_DATA_DIR")
    assert resolve_data_dir(None) == Path("data")
    assert resolve_data_dir("x/y") == Path("x/y")


def _touch_dataset(name: str, folder: Path) -> None:
    for f in DATASET_FILES[name]:
        (folder / f).parent.mkdir(parents=True, exist_ok=True)
        (folder / f).write_bytes(b"")


def test_tests_look_in_env_then_fetch_folder_then_shared(tmp_path: Path) -> None:
    """The tests' data folders: $WFLSIM_DATA_DIR, ./data (data fetch's default), ../shared."""
    repo = tmp_path / "repo"
    assert data_folders("/e", tmp_path, repo) == [
        Path("/e"),
        tmp_path / "data",
        tmp_path / "shared" / "datasets",
    ]
    assert data_folders(None, tmp_path, repo) == [
        tmp_path / "data",
        tmp_path / "shared" / "datasets",
    ]


def test_tests_find_mnist_in_the_fetch_folder(tmp_path: Path) -> None:
    """MNIST in ./data is found when $WFLSIM_DATA_DIR's folder lacks it, before ../shared."""
    for folder in (tmp_path / "data", tmp_path / "shared" / "datasets"):
        _touch_dataset("mnist", folder)
    (tmp_path / "env").mkdir()
    folders = data_folders(str(tmp_path / "env"), tmp_path, tmp_path / "repo")
    assert find_dataset("mnist", folders) == tmp_path / "data"
    _touch_dataset("mnist", tmp_path / "env")
    assert find_dataset("mnist", folders) == tmp_path / "env"


def test_skipped_data_test_names_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test skipped for want of a dataset says every folder it looked in."""
    folders = data_folders(str(tmp_path / "env"), tmp_path, tmp_path / "repo")
    monkeypatch.setattr(conftest, "DATA_FOLDERS", folders)
    monkeypatch.setattr(conftest, "LOOKED", ", ".join(map(str, folders)))
    with pytest.raises(pytest.skip.Exception) as skipped:
        dataset_folder_or_skip("mnist")
    assert all(str(folder) in str(skipped.value) for folder in folders)


@pytest.mark.mnist
@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_mnist_like_loads_normalised(name: str) -> None:
    """(Fashion-)MNIST: 60000/10000 images (N,1,28,28), normalised to mean ~0, std ~1."""
    folder = dataset_folder_or_skip(name)
    x_tr, y_tr, x_te, y_te = load_dataset(name, folder)
    assert x_tr.shape == (60000, 1, 28, 28) and x_te.shape == (10000, 1, 28, 28)
    assert y_tr.dtype == torch.int64 and set(np.unique(y_te.numpy())) == set(range(10))
    assert abs(float(x_tr.mean())) < 1e-3 and abs(float(x_tr.std()) - 1.0) < 1e-3


def test_cifar10_reads_the_pickle_layout(tmp_path: Path) -> None:
    """CIFAR-10 loads a (fake) cifar-10-batches-py set: NCHW order, labels, normalisation."""
    rng = np.random.default_rng(0)
    write_fake_cifar(tmp_path, per_batch=4, rng=rng)
    x_tr, y_tr, x_te, y_te = load_dataset("cifar10", tmp_path)
    assert x_tr.shape == (20, 3, 32, 32) and x_te.shape == (4, 3, 32, 32)
    assert y_tr.tolist()[:5] == [0, 1, 2, 3, 1] and y_te.tolist() == [5, 6, 7, 8]
    with open(tmp_path / "cifar-10-batches-py" / "test_batch", "rb") as f:
        raw = pickle.load(f)["data"][0].reshape(3, 32, 32)  # channel-major rows of 1024
    expected = (raw[1].astype(np.float32) / 255.0 - 0.4822) / 0.2435  # green channel
    np.testing.assert_allclose(x_te[0, 1].numpy(), expected, rtol=1e-5, atol=1e-5)


def test_compact_cifar10_indexes_to_the_same_floats(tmp_path: Path) -> None:
    """compact=True keeps uint8 pixels whose indexed batches equal the float32 set bit for bit."""
    write_fake_cifar(tmp_path, per_batch=4, rng=np.random.default_rng(1))
    x_tr, y_tr, x_te, _ = load_dataset("cifar10", tmp_path)
    c_tr, c_y, c_te, _ = load_dataset("cifar10", tmp_path, compact=True)
    assert isinstance(c_tr, CompactImages) and c_tr.raw.dtype == torch.uint8
    assert c_tr.shape == x_tr.shape and len(c_te) == x_te.shape[0]
    idx = torch.tensor([[3, 0, 19], [7, 7, 12]])
    assert torch.equal(c_tr[idx], x_tr[idx]) and torch.equal(c_y, y_tr)
    assert torch.equal(c_te[1:3], x_te[1:3]) and torch.equal(c_te.materialise(), x_te)


@pytest.mark.mnist
def test_compact_mnist_indexes_to_the_same_floats() -> None:
    """MNIST with compact=True: a quarter of the bytes, the same normalised values when indexed."""
    folder = dataset_folder_or_skip("mnist")
    x_tr = load_dataset("mnist", folder)[0]
    c_tr = load_dataset("mnist", folder, compact=True)[0]
    idx = torch.as_tensor(np.random.default_rng(0).integers(0, 60000, (4, 256)))
    assert torch.equal(c_tr[idx], x_tr[idx])
    assert c_tr.raw.numel() * c_tr.raw.element_size() * 4 == x_tr.numel() * x_tr.element_size()


def test_compact_images_refuse_non_uint8() -> None:
    """CompactImages holds uint8 (M, C, H, W) pixels only."""
    with pytest.raises(ValueError, match="uint8"):
        CompactImages(torch.zeros(2, 1, 4, 4), 0.5, 0.25)
    with pytest.raises(ValueError, match="uint8"):
        CompactImages(torch.zeros(2, 4, 4, dtype=torch.uint8), 0.5, 0.25)


def test_cifar10_missing_is_dataset_not_found(tmp_path: Path) -> None:
    """An incomplete CIFAR-10 folder raises DatasetNotFoundError."""
    (tmp_path / "cifar-10-batches-py").mkdir()
    with pytest.raises(DatasetNotFoundError, match="cifar10"):
        load_dataset("cifar10", tmp_path)


# ----------------------------------------------------------------------------- partitions


def _label_skew(labels: np.ndarray, parts: list[np.ndarray]) -> float:
    """Mean over devices of the total-variation distance to the global label histogram."""
    glob = np.bincount(labels, minlength=10) / labels.size
    tv = [0.5 * np.abs(np.bincount(labels[p], minlength=10) / p.size - glob).sum() for p in parts]
    return float(np.mean(tv))


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 400),
    n=st.integers(1, 40),
    kind=st.sampled_from(["iid", "dirichlet"]),
    alpha=st.sampled_from([0.01, 0.3, 10.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_partition_is_disjoint_cover_without_empty_devices(
    m: int, n: int, kind: str, alpha: float, seed: int
) -> None:
    """Any partition is a disjoint cover of range(M) in N non-empty sorted int64 pieces."""
    if n > m:
        n = m
    labels = np.random.default_rng(seed).integers(0, 10, m)
    parts = partition(labels, n, kind, alpha, np.random.default_rng(seed))
    assert len(parts) == n
    assert all(p.size >= 1 and p.dtype == np.int64 and np.all(np.diff(p) > 0) for p in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(m))


def test_iid_sizes_differ_by_at_most_one() -> None:
    """IID pieces have sizes floor(M/N) or ceil(M/N)."""
    parts = partition(np.zeros(1003, dtype=np.int64), 30, "iid", 1.0, np.random.default_rng(1))
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 1003


def test_dirichlet_small_alpha_is_skewed_large_alpha_is_not() -> None:
    """Label skew (mean TV distance to the global histogram): > 0.5 at alpha=0.1, < 0.1 at 1000.

    5000 labels, 10 balanced classes, 20 devices, seed 0 (measured over seeds 0-4: 0.66-0.71 and
    about 0.013; an IID split of this size gives about 0.07).
    """
    labels = np.repeat(np.arange(10), 500)
    skew = {
        a: _label_skew(labels, partition(labels, 20, "dirichlet", a, np.random.default_rng(0)))
        for a in (0.1, 1000.0)
    }
    assert skew[0.1] > 0.5
    assert skew[1000.0] < 0.1


def test_partition_is_deterministic_given_seed() -> None:
    """Same generator seed => same partition; another seed => another one."""
    labels = np.random.default_rng(3).integers(0, 10, 500)
    for kind in ("iid", "dirichlet"):
        a = partition(labels, 7, kind, 0.5, np.random.default_rng(11))
        b = partition(labels, 7, kind, 0.5, np.random.default_rng(11))
        c = partition(labels, 7, kind, 0.5, np.random.default_rng(12))
        assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))
        assert not all(np.array_equal(u, v) for u, v in zip(a, c, strict=True))


def test_dirichlet_gives_every_device_a_sample_when_tight() -> None:
    """Tiny alpha with as many devices as samples still leaves no device empty."""
    labels = np.repeat(np.arange(10), 3)
    parts = partition(labels, 30, "dirichlet", 0.001, np.random.default_rng(0))
    assert [p.size for p in parts] == [1] * 30


def test_partition_rejects_bad_arguments() -> None:
    """Unknown kind, alpha <= 0 and more devices than samples are ValueErrors."""
    labels = np.zeros(10, dtype=np.int64)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="kind"):
        partition(labels, 2, "shards", 1.0, rng)
    with pytest.raises(ValueError, match="alpha"):
        partition(labels, 2, "dirichlet", 0.0, rng)
    with pytest.raises(ValueError, match="at least one"):
        partition(labels, 11, "iid", 1.0, rng)
