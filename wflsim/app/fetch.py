"""Downloading a dataset into the data directory: ``wflsim data fetch`` and ``--download``.

The files, their mirrors and their MD5 checksums are torchvision's own (the class attributes of
``torchvision.datasets.MNIST``, ``FashionMNIST`` and ``CIFAR10``, read when a download starts);
torchvision's ``extract_archive`` unpacks them. Everything is downloaded and unpacked into a
temporary folder ``.fetch-*`` inside the data directory and moved into place, file by file, only
once every archive has passed its checksum: a download that fails or does not match leaves
nothing behind. torch and torchvision are imported only when a download runs.

A server is not trusted (docs/decisions.md, "Hostile inputs on every read"):

* each file is read as it arrives, its MD5 computed on the way, and refused as soon as it
  grows beyond its known size (:data:`KNOWN_BYTES`; :data:`MAX_DOWNLOAD_BYTES` for a file of
  unknown size), or at once when its ``Content-Length`` announces more;
* a read that waits more than :data:`READ_TIMEOUT_S` for a byte ends the attempt, and so does a
  transfer slower than :data:`MIN_RATE_BYTES_S` on average once :data:`GRACE_S` have passed (a
  file therefore takes at most ``GRACE_S + size / MIN_RATE_BYTES_S``: about an hour for
  CIFAR-10's 170 MB);
* only ``https`` mirrors are used (a redirect to plain ``http`` is refused), except on the
  loopback interface or with ``allow_http`` (``wflsim data fetch --allow-http``);
* SIGTERM and SIGHUP stop a download like Ctrl-C: the temporary folder is removed and the
  command ends with one line and exit code 130; a temporary folder left by a fetch killed with
  SIGKILL (its owner, recorded in it, is no longer running) is removed by the next fetch into
  the same data directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import ipaddress
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wflsim.sim.config.catalogue import DATASET_FILES
from wflsim.sim.config.limits import out_path_problem, shorten
from wflsim.sim.errors import ScenarioError
from wflsim.sim.rundir import hostname, process_start_ticks, read_json, writer_alive

log = logging.getLogger(__name__)

#: The datasets ``wflsim data fetch`` downloads: every file-based dataset of the catalogue.
FETCHABLE: tuple[str, ...] = tuple(DATASET_FILES)

#: The size in bytes of each file torchvision lists, by its MD5: a download is refused as soon
#: as it goes beyond.
KNOWN_BYTES: dict[str, int] = {
    # MNIST
    "f68b3c2dcbeaaa9fbdd348bbdeb94873": 9_912_422,
    "d53e105ee54ea40749a09fcbcd1e9432": 28_881,
    "9fb629c4189551a2d022fa330f9573f3": 1_648_877,
    "ec29112dd5afa0611ce80d1b7f02629c": 4_542,
    # Fashion-MNIST
    "8d4fb7e6c68d591d4c3dfef9ec88bf0d": 26_421_880,
    "25c81989df183df01b3e8a0aad5dffbe": 29_515,
    "bef4ecab320f06d8554ea6380940ec79": 4_422_102,
    "bb300cfdad3c16e7a12a480ee83cd310": 5_148,
    # CIFAR-10
    "c58f30108f718f92721af3b95e74349a": 170_498_071,
}
#: The most bytes read of a file whose size is not known (above CIFAR-10's 170 MB).
MAX_DOWNLOAD_BYTES = 256 * 1024**2
#: Longest wait for the connection or for the next bytes of a response, s.
READ_TIMEOUT_S = 30.0
#: Slowest average transfer accepted once :data:`GRACE_S` have passed, bytes/s.
MIN_RATE_BYTES_S = 50_000
#: Seconds a download may take before its average rate is checked.
GRACE_S = 30.0
#: Bytes asked of the connection at a time.
_CHUNK = 64 * 1024
#: The prefix of the temporary folders of a fetch, and the file in one that names its owner.
TMP_PREFIX = ".fetch-"
_OWNER = "owner.json"
#: A temporary folder without an owner file (killed as it was made) is removed when older, s.
_ORPHAN_AGE_S = 3600.0


@dataclass(frozen=True)
class Archive:
    """One file to download: the URLs to try in order, its name, torchvision's MD5 of it, and
    the folder (relative to the data directory) it is unpacked into."""

    urls: tuple[str, ...]
    filename: str
    md5: str
    extract_to: str

    @property
    def max_bytes(self) -> int:
        """The most bytes read of this file: its known size, else :data:`MAX_DOWNLOAD_BYTES`."""
        return KNOWN_BYTES.get(self.md5, MAX_DOWNLOAD_BYTES)


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


def fetch_dataset(
    name: str, data_dir: Path, field: str = "--dir", *, allow_http: bool = False
) -> bool:
    """Download dataset ``name`` into ``data_dir`` in torchvision's layout, unless every file
    is already there. Returns whether it downloaded. Progress goes to stderr.

    Args:
        name: one of :data:`FETCHABLE`.
        data_dir: the data directory (created if missing).
        field: the option or field that named ``data_dir``, for an error about the folder.
        allow_http: use plain ``http`` mirrors too (default: ``https`` only, and loopback).

    Raises:
        ScenarioError: an unknown dataset; a folder that cannot be written (on ``field``); a
            download that fails on every mirror, is too large, too slow, or does not match its
            checksum (naming the dataset and the URLs tried). Nothing is left in ``data_dir``
            then.
        KeyboardInterrupt: Ctrl-C, SIGTERM or SIGHUP (in the main thread); nothing is left.
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
    with _signals_interrupt():
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            remove_stale_folders(data_dir)
            tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{name}-", dir=data_dir))
        except OSError as err:
            raise ScenarioError(
                field,
                f"cannot write into {shorten(str(data_dir))!r} "
                f"({err.strerror or type(err).__name__})",
                f"choose another {field}",
            ) from None
        try:
            _write_owner(tmp)
            for archive in archives(name):
                _download(name, archive, tmp, data_dir, allow_http)
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


class _Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP during a download: stops it as Ctrl-C does."""


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`_Interrupted` while the block runs (as SIGINT raises
    KeyboardInterrupt), so that the temporary folder is removed; the previous handlers are put
    back after. Outside the main thread (where no handler can be set) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: object) -> None:
        raise _Interrupted(signal.Signals(signum).name)

    wanted = [signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]
    previous = {s: signal.signal(s, _raise) for s in wanted}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _write_owner(tmp: Path) -> None:
    """Record this process (pid, host, start time) in the temporary folder ``tmp``."""
    owner = {
        "pid": os.getpid(),
        "host": hostname(),
        "start_ticks": process_start_ticks(os.getpid()),
    }
    (tmp / _OWNER).write_text(json.dumps(owner), encoding="utf-8")


def remove_stale_folders(data_dir: Path) -> list[Path]:
    """Remove the temporary folders of fetches into ``data_dir`` that were killed (SIGKILL, a
    crash): those whose owner (recorded in them) is a process of this host that no longer runs,
    and those older than :data:`_ORPHAN_AGE_S` without an owner. A folder of a fetch still
    running (here or on another host sharing the folder) is kept. Returns those removed."""
    removed = []
    for p in data_dir.glob(f"{TMP_PREFIX}*"):
        if p.is_symlink() or not p.is_dir():
            continue
        owner: dict[str, Any] | None = read_json(p / _OWNER)
        try:
            age_s = time.time() - p.stat().st_mtime
        except OSError:
            continue
        if owner is None and age_s < _ORPHAN_AGE_S:
            continue  # being made, or of unknown owner
        if owner is not None and writer_alive(owner) is not False:
            continue
        log.info("removing %s, left by a fetch that was killed", p)
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def _missing_ancestors(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, deepest first."""
    out = []
    p = folder.absolute()
    while not p.exists() and p.parent != p:
        out.append(p)
        p = p.parent
    return out


def _download(name: str, archive: Archive, tmp: Path, data_dir: Path, allow_http: bool) -> None:
    """Download ``archive`` into ``tmp`` from its first mirror that serves it whole, in time and
    with the right checksum (:func:`_get`), and unpack it there, in ``tmp / archive.extract_to``."""
    from torchvision.datasets.utils import extract_archive

    folder = tmp / archive.extract_to
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / archive.filename
    tried: list[str] = []
    corrupt = False
    for url in archive.urls:
        if not _secure(url, allow_http):
            tried.append(f"{url} (plain http, not used: wflsim data fetch --allow-http uses it)")
            continue
        log.info("downloading %s", url)
        print(f"wflsim: {url}", file=sys.stderr)
        try:
            _get(url, path, archive, allow_http)
        except _BadBody as err:
            corrupt = corrupt or err.checksum
            tried.append(f"{url} ({err})")
            path.unlink(missing_ok=True)
            continue
        except (OSError, http.client.HTTPException) as err:  # URLError, HTTPError, refused, cut
            reason = getattr(err, "reason", None) or getattr(err, "strerror", None)
            if isinstance(err, TimeoutError) or isinstance(reason, TimeoutError):
                reason = f"no answer within {READ_TIMEOUT_S:g} s"
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


class _BadBody(Exception):
    """A response refused while it arrived: too large, too slow, or not the file (``checksum``)."""

    def __init__(self, problem: str, checksum: bool = False) -> None:
        super().__init__(problem)
        self.checksum = checksum


def _secure(url: str, allow_http: bool) -> bool:
    """Whether ``url`` may be fetched: ``https``, or ``http`` to the loopback interface or with
    ``allow_http``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        return True
    if parts.scheme != "http":
        return False
    if allow_http or parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname or "").is_loopback
    except ValueError:
        return False


def _opener(allow_http: bool) -> urllib.request.OpenerDirector:
    """An opener whose redirects keep to :func:`_secure` URLs."""

    class Redirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
            if not _secure(newurl, allow_http):
                raise _BadBody(f"redirected to {shorten(newurl)}, not https")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return urllib.request.build_opener(Redirects)


def _get(url: str, path: Path, archive: Archive, allow_http: bool) -> None:
    """Write the body of ``url`` to ``path``, checking it as it arrives: at most
    ``archive.max_bytes`` bytes, each read within :data:`READ_TIMEOUT_S`, on average at least
    :data:`MIN_RATE_BYTES_S` after :data:`GRACE_S`, and the MD5 of ``archive`` at its end.

    Raises:
        _BadBody: too large, too slow, or another MD5.
        OSError, http.client.HTTPException: the server cannot be reached, answers an error,
            stalls (a timeout) or cuts the connection.
    """
    cap = archive.max_bytes
    md5 = hashlib.md5(usedforsecurity=False)
    got = 0
    started = time.monotonic()
    request = urllib.request.Request(url, headers={"User-Agent": "wflsim"})
    with _opener(allow_http).open(request, timeout=READ_TIMEOUT_S) as response:
        announced = response.headers.get("Content-Length", "")
        if announced.strip().isdigit() and int(announced) > cap:
            raise _BadBody(f"announces {int(announced):,} bytes; the file has {cap:,}")
        with open(path, "xb") as out:
            while block := response.read1(_CHUNK):
                got += len(block)
                if got > cap:
                    raise _BadBody(f"sends more than the file's {cap:,} bytes")
                md5.update(block)
                out.write(block)
                elapsed_s = time.monotonic() - started
                if elapsed_s > GRACE_S and got < MIN_RATE_BYTES_S * elapsed_s:
                    raise _BadBody(
                        f"too slow: {got:,} bytes in {elapsed_s:.0f} s, below "
                        f"{MIN_RATE_BYTES_S:,} bytes/s"
                    )
    if md5.hexdigest() != archive.md5:
        raise _BadBody(f"does not match torchvision's MD5 checksum {archive.md5}", checksum=True)


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
