"""The run folder: what a run writes, who may write it, and whether its writer is alive.

A run folder holds::

    .wflsim-run          marker: this folder was made by a wflsim run (``--overwrite`` needs it)
    wflsim.lock          the writer's lock (pid, host) while a run writes the folder
    manifest.json        scenario, fingerprint, status, the parts written, heartbeat, summary
    events/part-NNNNNN.parquet   one complete Parquet file per completed frame (the trace)
    checkpoint.npz       the state of every component after the last checkpointed frame

One writer per folder: :class:`RunLock` holds an exclusive ``flock`` on ``wflsim.lock`` for the
writer's lifetime (the kernel releases it when the process dies, however it dies) and records
the writer's pid, host and process start time in it. A lock left behind by a dead process on this
host is taken over; a live one, or one of another host, is refused with one line. A sweep
folder has the same lock, held by the sweep.

Nothing is read, written or deleted through a symbolic link inside a run folder: a link in place
of one of the entries above (or of a file in ``events/`` or ``channel/``) is refused with one line
(:func:`check_no_links`), and the lock and the manifest are opened with ``O_NOFOLLOW``. The run
folder itself (the ``--out`` a user gives) may be a link to a directory.
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import os
import shutil
import socket
import stat
from pathlib import Path
from typing import Any

from .errors import ScenarioError
from .trace import EVENTS_DIR, fsync_dir, part_frame

MARKER = ".wflsim-run"
LOCK = "wflsim.lock"
MANIFEST = "manifest.json"
CHECKPOINT = "checkpoint.npz"
LEGACY_EVENTS = "events.parquet"
#: Seconds between two heartbeats of a running run's manifest.
HEARTBEAT_S = 30.0
#: A running run of another host whose heartbeat is older than this is taken for dead by readers.
STALE_AFTER_S = 10 * HEARTBEAT_S

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: ``open`` flags that refuse a symbolic link as the last component (0 where unsupported).
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def hostname() -> str:
    """This machine's host name."""
    return socket.gethostname()


def process_start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, Linux), to tell a reused pid from
    the original; None where unknown."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:  # the command name (field 2) may hold spaces and parentheses: split after the last ')'
        return int(text.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int, start_ticks: int | None = None) -> bool:
    """Whether process ``pid`` of this host runs (and, if given, started at ``start_ticks``)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    if start_ticks is not None:
        now = process_start_ticks(pid)
        if now is not None and now != start_ticks:
            return False  # the pid was reused by another process
    return True


def writer_identity() -> dict[str, Any]:
    """pid, host and process start time of this process (recorded in the lock and manifest)."""
    pid = os.getpid()
    return {"pid": pid, "host": hostname(), "start_ticks": process_start_ticks(pid)}


def writer_alive(info: dict[str, Any], heartbeat_at: str | None = None) -> bool | None:
    """Whether the writer described by ``info`` (pid, host, start_ticks) is alive: exactly on
    this host; from the heartbeat on another (None when it cannot be told)."""
    try:
        pid = int(info.get("pid", -1))
    except (TypeError, ValueError):
        return None
    if info.get("host") == hostname():
        return pid_alive(pid, info.get("start_ticks"))
    if heartbeat_at:
        try:
            beat = _dt.datetime.fromisoformat(heartbeat_at)
        except ValueError:
            return None
        age = (_dt.datetime.now(_dt.UTC) - beat).total_seconds()
        return age < STALE_AFTER_S
    return None


def liveness(manifest: dict[str, Any]) -> str:
    """A run's state from its manifest: its ``status`` (``completed``, ``failed``,
    ``interrupted``), ``running`` while its writer is alive, ``crashed`` when the manifest says
    running but the writer is dead (killed, out of memory, power loss; ``--resume`` continues it).
    """
    status = str(manifest.get("status", "unknown"))
    if status != "running":
        return status
    alive = writer_alive(manifest.get("writer") or {}, manifest.get("heartbeat_at"))
    return "crashed" if alive is False else "running"


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
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | _NOFOLLOW | os.O_NONBLOCK, 0o644)
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
                if not locked:
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
                if owner and writer_alive(owner) and owner.get("pid") != os.getpid():
                    # flock said free but the recorded writer lives (a file system without
                    # working flock): trust the pid
                    raise self._refuse(
                        owner,
                        f"in use by another {holder}",
                        f"wait for it, or choose another {self.option}",
                    )
                self._write(fd, self.kind)
            except BaseException:
                if self._fd != fd:
                    os.close(fd)
                raise
            self._fd = fd
            return
        raise ScenarioError(self.option, f"cannot lock {str(self.path)!r}", "try again")

    @staticmethod
    def _flock(fd: int) -> bool:
        if fcntl is None:  # pragma: no cover
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as err:  # no flock on this file system: fall back to the pid check
            if err.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return True
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


# ---------------------------------------------------------------------- the folder's content


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` carries the marker a wflsim run writes (a file, not a link)."""
    marker = Path(folder) / MARKER
    return marker.is_file() and not marker.is_symlink()


def require_run_folder(folder: Path, option: str = "--resume") -> None:
    """Raise :class:`ScenarioError` unless ``folder`` carries a wflsim run's marker and no
    symbolic link in place of a run's entry (:func:`check_no_links`)."""
    check_no_links(folder, option)
    if not is_run_folder(folder):
        raise ScenarioError(
            option,
            f"{str(folder)!r} is not a wflsim run folder (no {MARKER} marker)",
            "give the --out folder of a run made by wflsim 0.3 or later",
        )


def link_error(path: Path, option: str = "--out") -> ScenarioError:
    """The one-line refusal of a symbolic link where a run or sweep folder's entry belongs."""
    return ScenarioError(
        option,
        f"{str(path)!r} is a symbolic link; wflsim never reads, writes or deletes through a link "
        "inside a run or sweep folder",
        "remove the link, or put the real file or folder in its place",
    )


def _is_temporary(name: str) -> bool:
    """A hidden temporary file name of an atomic write (``.NAME.PID.tmp``)."""
    return name.startswith(".") and name.endswith(".tmp")


def check_no_links(folder: Path, option: str = "--out") -> None:
    """Refuse (:class:`ScenarioError`) a symbolic link in ``folder`` in place of an entry a
    run reads, writes or deletes: the lock, the marker, the manifest, the checkpoint, the trace
    (``events/``, ``events.parquet``), ``channel/``, a file inside ``events/`` or ``channel/``,
    or a temporary file of an atomic write. ``folder`` itself may be a link (a user's
    ``--out``); one that does not exist has nothing to check."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for name in (LOCK, *RUN_ENTRIES):
        if (folder / name).is_symlink():
            raise link_error(folder / name, option)
    for sub in (EVENTS_DIR, CHANNEL_DIR):
        if (folder / sub).is_dir():
            for p in (folder / sub).iterdir():
                if p.is_symlink():
                    raise link_error(p, option)
    for p in folder.iterdir():
        if _is_temporary(p.name) and p.is_symlink():
            raise link_error(p, option)


def write_marker(folder: Path, version: str) -> None:
    """Mark ``folder`` as a wflsim run's (what ``--overwrite`` looks for)."""
    from .trace import write_json_atomic

    write_json_atomic(folder / MARKER, {"wflsim_run": 1, "created_by": version})


#: The files and folders of a run that ``--overwrite`` removes (nothing else is ever deleted).
#: The folder of a run folder that holds the channel table's parts (``[channel] record``).
CHANNEL_DIR = "channel"

RUN_ENTRIES = (EVENTS_DIR, CHANNEL_DIR, MANIFEST, CHECKPOINT, LEGACY_EVENTS, MARKER)


def _is_leftover(p: Path) -> bool:
    """What a run stopped before its first manifest leaves in its folder: the lock, the marker,
    a hidden temporary file of an atomic write (``.NAME.PID.tmp``), an ``events/`` or
    ``channel/`` folder holding no part (at most temporaries). Never a link."""
    if p.is_symlink():
        return False
    if p.name == LOCK:
        return True
    if p.name == MARKER or _is_temporary(p.name):
        return p.is_file()
    if p.name in (EVENTS_DIR, CHANNEL_DIR) and p.is_dir():
        return all(
            _is_temporary(q.name) and q.is_file() and not q.is_symlink() for q in p.iterdir()
        )
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
        if _is_temporary(p.name) and (p.is_file() or p.is_symlink()):
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
        elif f is None and p.name.startswith(".") and p.name.endswith(".tmp"):
            p.unlink()
    fsync_dir(events_dir)
    return sorted(removed)


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_text(text: str) -> str:
    """The SHA-256 of a text's UTF-8 bytes (hex)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's manifest, or None when absent, unreadable or a link (never followed)."""
    try:
        fd = os.open(Path(folder) / MANIFEST, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            m = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) else None
