"""Downloading a dataset into the data directory: ``wflsim data fetch`` and ``--download``.

The files, their mirrors and their MD5 checksums are torchvision's own (the class attributes of
``torchvision.datasets.MNIST``, ``FashionMNIST`` and ``CIFAR10``, read when a download starts),
and torchvision's ``download_url`` / ``extract_archive`` fetch, check and unpack them. Everything is
downloaded and unpacked into a temporary folder inside the data directory and moved into place,
file by file, only once every archive has passed its checksum: a download that fails or does not
match leaves nothing behind. torch and torchvision are imported only when a download runs.
"""

from __future__ import annotations

import http.client
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from wflsim.sim.config.catalogue import DATASET_FILES
from wflsim.sim.config.limits import out_path_problem, shorten
from wflsim.sim.errors import ScenarioError

log = logging.getLogger(__name__)

#: The datasets ``wflsim data fetch`` downloads: every file-based dataset of the catalogue.
FETCHABLE: tuple[str, ...] = tuple(DATASET_FILES)


@dataclass(frozen=True)
class Archive:
    """One file to download: the URLs to try in order, its name, torchvision's MD5 of it, and
    the folder (relative to the data directory) it is unpacked into."""

    urls: tuple[str, ...]
    filename: str
    md5: str
    extract_to: str


def archives(name: str) -> list[Archive]:
    """The archives of dataset ``name`` as torchvision lists them (mirrors, file names, MD5s)."""
    from torchvision import datasets

    if name == "cifar10":
        c = datasets.CIFAR10
        return [Archive((c.url,), c.filename, c.tgz_md5, ".")]
    cls = datasets.MNIST if name == "mnist" else datasets.FashionMNIST
    return [
        Archive(
            tuple(f"{mirror}{filename}" for mirror in cls.mirrors),
            filename,
            md5,
            f"{cls.__name__}/raw",
        )
        for filename, md5 in cls.resources
    ]


def dataset_folder(name: str, data_dir: Path) -> Path:
    """The folder of ``name``'s files below ``data_dir`` (``MNIST/raw``, ``cifar-10-batches-py``)."""
    return data_dir / Path(DATASET_FILES[name][0]).parent


def is_complete(name: str, data_dir: Path) -> bool:
    """Whether every file that wflsim reads of ``name`` is in ``data_dir``."""
    return all((data_dir / f).is_file() for f in DATASET_FILES[name])


def copy_fix(name: str, data_dir: Path) -> str:
    """The fix for a download that cannot be made: where to copy the files by hand."""
    files = ", ".join(Path(f).name for f in DATASET_FILES[name])
    return (
        f"connect to the internet and repeat the command, or copy the files into "
        f"{dataset_folder(name, data_dir)}/ in torchvision's layout ({files})"
    )


def fetch_dataset(name: str, data_dir: Path, field: str = "--dir") -> bool:
    """Download dataset ``name`` into ``data_dir`` in torchvision's layout, unless every file
    is already there. Returns whether it downloaded. Progress goes to stderr (a line, then
    torchvision's progress bars).

    Args:
        name: one of :data:`FETCHABLE`.
        data_dir: the data directory (created if missing).
        field: the option or field that named ``data_dir``, for an error about the folder.

    Raises:
        ScenarioError: an unknown dataset; a folder that cannot be written (on ``field``); a
            download that fails on every mirror or does not match its checksum (naming the
            dataset and the URLs tried). Nothing is left in ``data_dir`` then.
    """
    if name not in FETCHABLE:
        raise ScenarioError(
            "DATASET",
            f"{shorten(name)!r} cannot be downloaded",
            f"use one of {', '.join(FETCHABLE)}",
        )
    if is_complete(name, data_dir):
        return False
    problem = out_path_problem(data_dir, room=64)
    if problem is not None:
        raise ScenarioError(
            field, f"{shorten(str(data_dir))!r} {problem}", f"choose another {field}"
        )
    print(
        f"wflsim: downloading {name} with torchvision's mirrors and checksums into "
        f"{dataset_folder(name, data_dir)}",
        file=sys.stderr,
    )
    created = _missing_ancestors(data_dir)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".fetch-{name}-", dir=data_dir))
    except OSError as err:
        raise ScenarioError(
            field,
            f"cannot write into {shorten(str(data_dir))!r} ({err.strerror or type(err).__name__})",
            f"choose another {field}",
        ) from None
    try:
        for archive in archives(name):
            _download(name, archive, tmp, data_dir)
        _move_into_place(name, tmp, data_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in created:  # the folders this call made, deepest first, if still empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    shutil.rmtree(tmp, ignore_errors=True)
    return True


def _missing_ancestors(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, deepest first."""
    out = []
    p = folder.absolute()
    while not p.exists() and p.parent != p:
        out.append(p)
        p = p.parent
    return out


def _download(name: str, archive: Archive, tmp: Path, data_dir: Path) -> None:
    """Download ``archive`` into ``tmp`` from its first mirror that serves it with the right
    checksum, and unpack it there, in ``tmp / archive.extract_to``."""
    from torchvision.datasets.utils import download_url, extract_archive

    folder = tmp / archive.extract_to
    path = folder / archive.filename
    tried: list[str] = []
    corrupt = False
    for url in archive.urls:
        log.info("downloading %s", url)
        try:
            download_url(url, str(folder), archive.filename, archive.md5)
        except RuntimeError:  # torchvision: "File not found or corrupted." (the MD5 differs)
            corrupt = True
            tried.append(f"{url} (does not match torchvision's MD5 checksum {archive.md5})")
            path.unlink(missing_ok=True)
            continue
        except (OSError, http.client.HTTPException) as err:  # URLError, HTTPError, refused, cut
            reason = getattr(err, "reason", None) or getattr(err, "strerror", None)
            reason = reason or type(err).__name__
            tried.append(f"{url} ({' '.join(str(reason).split())})")
            path.unlink(missing_ok=True)
            continue
        break
    else:
        what = "a damaged or altered download, refused" if corrupt else "cannot download"
        raise ScenarioError(
            f"fetching {name}",
            f"{what}: tried {'; '.join(tried)}; nothing was written to {data_dir}",
            copy_fix(name, data_dir),
        )
    try:
        extract_archive(str(path), str(folder))
    except Exception as err:  # an archive that passed its checksum but does not unpack
        raise ScenarioError(
            f"fetching {name}",
            f"{archive.filename} cannot be unpacked ({type(err).__name__}); nothing was written "
            f"to {data_dir}",
            copy_fix(name, data_dir),
        ) from None
    path.unlink(missing_ok=True)


def _move_into_place(name: str, tmp: Path, data_dir: Path) -> None:
    """Move every file wflsim reads of ``name`` from ``tmp`` to its place in ``data_dir``
    (replacing an incomplete earlier copy), after checking that the archives held them all."""
    missing = [f for f in DATASET_FILES[name] if not (tmp / f).is_file()]
    if missing:
        raise ScenarioError(
            f"fetching {name}",
            f"the downloaded archives lack {missing[0]}; nothing was written to {data_dir}",
            copy_fix(name, data_dir),
        )
    for f in DATASET_FILES[name]:
        dst = data_dir / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / f, dst)
