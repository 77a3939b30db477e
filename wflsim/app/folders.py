"""Writing run and sweep folders: the writer's lock, its identity, creating, clearing and
resuming a run folder, and the hashes a manifest records. The folder's format (its names, the
manifest reader, liveness, the refusal of links) is :mod:`wflsim.sim.rundir`.

One writer per folder: :class:`RunLock` holds an exclusive ``flock`` on ``wflsim.lock`` for the
writer's lifetime (the kernel releases it when the process dies, however it dies) and records
the writer's pid, host and process start time in it. A lock whose ``flock`` is free is taken
over, whatever process now has the pid it names (a pid is reused); one held, or one of another
host, is refused with one line. Only where the file system has no ``flock`` does the recorded
pid decide, and then a pid whose process cannot be told from the writer (no start time to
compare) is refused with the command that clears it. A sweep folder has the same lock, held by
the sweep.
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from wflsim.sim.errors import ScenarioError
from wflsim.sim.files import NOFOLLOW
from wflsim.sim.rundir import (
    CHANNEL_DIR,
    LOCK,
    MANIFEST,
    MARKER,
    RUN_ENTRIES,
    check_no_links,
    file_digest,
    file_sha256,
    hostname,
    is_run_folder,
    is_temporary,
    link_error,
    pid_alive,
    process_name,
    process_start_ticks,
)
from wflsim.sim.trace import EVENTS_DIR, fsync_dir, part_frame, write_json_atomic

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def writer_identity() -> dict[str, Any]:
    """pid, host and process start time of this process (recorded in the lock and manifest)."""
    pid = os.getpid()
    return {"pid": pid, "host": hostname(), "start_ticks": process_start_ticks(pid)}


class RunLock:
    """The exclusive lock of one run folder (see the module docstring).

    Raises on :meth:`acquire`:
        ScenarioError: the folder is being written by a live wflsim process (or by one on
            another host, which cannot be checked from here).
    """

    def __init__(self, folder: Path, option: str = "--out", kind: str = "run") -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK
        self.option = option
        #: what holds the lock: ``run`` or ``sweep`` (recorded in the lock, named in refusals)
        self.kind = kind
        self._fd: int | None = None

    def _refuse(self, owner: dict[str, Any], why: str, fix: str) -> ScenarioError:
        return ScenarioError(
            self.option,
            f"{str(self.folder)!r} is {why} (wflsim pid {owner.get('pid', '?')} on host "
            f"{owner.get('host', '?')}, since {owner.get('since', '?')})",
            fix,
        )

    def _open(self) -> int:
        """Open (create) the lock file without following a link; refuse anything but a file."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as err:
            if self.path.is_symlink():
                raise link_error(self.path, self.option) from None
            raise ScenarioError(
                self.option,
                f"cannot open the lock {str(self.path)!r} ({err.strerror})",
                "choose another folder, or make it writable",
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ScenarioError(
                self.option,
                f"{str(self.path)!r} is not a regular file",
                f"remove it, or choose another {self.option}",
            )
        return fd

    def acquire(self) -> None:
        """Take the lock or raise :class:`ScenarioError` (one line, exit 2)."""
        for _ in range(20):
            fd = self._open()
            try:
                locked = self._flock(fd)
                owner = self._read(fd)
                holder = str(owner.get("kind") or "run")
                if locked is False:
                    raise self._refuse(
                        owner,
                        f"in use by another {holder}",
                        f"wait for that {holder} to finish, or choose another {self.option}",
                    )
                try:
                    same_file = os.fstat(fd).st_ino == os.lstat(self.path).st_ino
                except FileNotFoundError:
                    same_file = False
                if not same_file:  # the previous holder removed the file meanwhile: retry
                    os.close(fd)
                    continue
                if owner and owner.get("host") != hostname():
                    raise self._refuse(
                        owner,
                        "locked by a run on another host",
                        f"if that run is dead, delete {self.path}",
                    )
                if locked is None and owner and owner.get("pid") != os.getpid():
                    self._check_pid(owner, holder)  # no flock here: the recorded pid decides
                self._write(fd, self.kind)
            except BaseException:
                if self._fd != fd:
                    os.close(fd)
                raise
            self._fd = fd
            return
        raise ScenarioError(self.option, f"cannot lock {str(self.path)!r}", "try again")

    def _check_pid(self, owner: dict[str, Any], holder: str) -> None:
        """Without ``flock``: refuse a lock whose recorded writer may still run. A process
        that started at another time than the recorded one reuses the pid and is not the writer;
        one whose start cannot be compared (a lock without it, no ``/proc``) is refused with the
        command that clears the lock, naming what runs under that pid now."""
        try:
            pid = int(owner.get("pid", -1))
        except (TypeError, ValueError):
            return  # no pid to check: nothing to wait for
        start = owner.get("start_ticks")
        if not pid_alive(pid, start if isinstance(start, int) else None):
            return
        now = process_start_ticks(pid)
        if isinstance(start, int) and now is not None:  # the very writer: alive
            raise self._refuse(
                owner,
                f"in use by another {holder}",
                f"wait for that {holder} to finish, or choose another {self.option}",
            )
        raise ScenarioError(
            self.option,
            f"{str(self.folder)!r} is locked by pid {pid}, which runs "
            f"({process_name(pid) or 'program unknown'}) but cannot be told from a wflsim writer "
            "here (this file system has no flock and the lock records no start time)",
            f"if no wflsim run or sweep is writing this folder, delete {self.path}",
        )

    @staticmethod
    def _flock(fd: int) -> bool | None:
        """Take the ``flock``: True, False (held by a live process), or None where the file
        system has no ``flock`` (the recorded pid then decides: :meth:`_check_pid`)."""
        if fcntl is None:  # pragma: no cover
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as err:  # no flock on this file system: fall back to the pid check
            if err.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return None
            raise
        return True

    @staticmethod
    def _read(fd: int) -> dict[str, Any]:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            raw = os.read(fd, 4096)
            info = json.loads(raw.decode("utf-8")) if raw.strip() else {}
        except (OSError, UnicodeDecodeError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    @staticmethod
    def _write(fd: int, kind: str = "run") -> None:
        data = json.dumps({**writer_identity(), "kind": kind, "since": now_iso()}).encode()
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)
        os.fsync(fd)

    def release(self) -> None:
        """Remove the lock file and release the lock (idempotent)."""
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def write_marker(folder: Path, version: str) -> None:
    """Mark ``folder`` as a wflsim run's (what ``--overwrite`` looks for)."""
    write_json_atomic(folder / MARKER, {"wflsim_run": 1, "created_by": version})


def _is_leftover(p: Path) -> bool:
    """What a run stopped before its first manifest leaves in its folder: the lock, the marker,
    a hidden temporary file of an atomic write (``.NAME.PID.tmp``), an ``events/`` or
    ``channel/`` folder holding no part (at most temporaries). Never a link."""
    if p.is_symlink():
        return False
    if p.name == LOCK:
        return True
    if p.name == MARKER or is_temporary(p.name):
        return p.is_file()
    if p.name in (EVENTS_DIR, CHANNEL_DIR) and p.is_dir():
        return all(is_temporary(q.name) and q.is_file() and not q.is_symlink() for q in p.iterdir())
    return False


def never_started(folder: Path) -> bool:
    """Whether ``folder`` holds no completed frame and nothing else: it is empty, or holds only
    what a run stopped (killed, a full disk) before it wrote its first manifest leaves (its lock,
    its marker, empty ``events/`` and ``channel/`` folders, temporary files). Such a folder takes
    a new run without ``--overwrite``, and ``--resume`` starts it from frame 0."""
    folder = Path(folder)
    if (folder / MANIFEST).exists() or (folder / MANIFEST).is_symlink():
        return False
    return all(_is_leftover(p) for p in folder.iterdir())


def check_out_dir(out: Path, overwrite: bool) -> None:
    """An existing non-empty output folder is an error unless ``overwrite``; even then only a
    folder carrying the marker of a wflsim run (:data:`MARKER`) may be replaced.

    Raises:
        ScenarioError: on ``--out`` with the fix.
    """
    if not out.exists():
        if out.is_symlink():
            raise ScenarioError(
                "--out", f"{str(out)!r} is a link to nothing", "choose another --out"
            )
        return
    if not out.is_dir():
        raise ScenarioError(
            "--out", f"{str(out)!r} exists and is not a directory", "choose another --out"
        )
    check_no_links(out, "--out")
    if never_started(out):
        return  # empty, or what a run stopped before its first manifest leaves
    if not overwrite:
        raise ScenarioError(
            "--out",
            f"{str(out)!r} already exists and is not empty",
            "choose another --out, pass --overwrite to replace a previous run, or --resume it",
        )
    if not is_run_folder(out):
        raise ScenarioError(
            "--out",
            f"{str(out)!r} was not made by a wflsim run (no {MARKER} marker); --overwrite only "
            "replaces run folders",
            "choose another --out (or delete the folder yourself)",
        )


def clear_run_files(out: Path) -> None:
    """Remove a previous run's files from ``out`` (:data:`RUN_ENTRIES` and stray temporary
    files of this layout); anything else in the folder is left alone."""
    for name in RUN_ENTRIES:
        p = out / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)
    for p in out.iterdir():
        if is_temporary(p.name) and (p.is_file() or p.is_symlink()):
            p.unlink()  # a link is removed, never followed
    fsync_dir(out)


def remove_parts_from(events_dir: Path, frame: int) -> list[int]:
    """Delete the parts of frames ``>= frame`` and any temporary file in ``events_dir``;
    returns the frames removed."""
    removed: list[int] = []
    if events_dir.is_symlink():
        raise link_error(events_dir, "--resume")
    if not events_dir.is_dir():
        return removed
    for p in events_dir.iterdir():
        if p.is_symlink():
            raise link_error(p, "--resume")
        f = part_frame(p.name)
        if f is not None and f >= frame:
            p.unlink()
            removed.append(f)
        elif f is None and is_temporary(p.name):
            p.unlink()
    fsync_dir(events_dir)
    return sorted(removed)


def sha256_file(path: Path) -> str:
    """The SHA-256 of a regular file's bytes (hex), following a link
    (:func:`wflsim.sim.rundir.file_sha256`; a ScenarioError for anything but a regular file)."""
    return file_sha256(path, follow_links=True)


def digest_file(path: Path, algorithm: str) -> str:
    """The hash ``algorithm`` (a key of :data:`wflsim.sim.rundir.DIGESTS`) of a regular file's
    bytes (hex), following a link (:func:`wflsim.sim.rundir.file_digest`)."""
    return file_digest(path, algorithm, follow_links=True)


def sha256_text(text: str) -> str:
    """The SHA-256 of a text's UTF-8 bytes (hex)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
