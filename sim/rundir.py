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
host is taken over; a live one, or one of another host, is refused with one line.
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import os
import shutil
import socket
from pathlib import Path
from typing import Any

from wflsim.sim.errors import ScenarioError
from wflsim.sim.trace import EVENTS_DIR, fsync_dir, part_frame

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

    def __init__(self, folder: Path, option: str = "--out") -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK
        self.option = option
        self._fd: int | None = None

    def _refuse(self, owner: dict[str, Any], why: str, fix: str) -> ScenarioError:
        return ScenarioError(
            self.option,
            f"{str(self.folder)!r} is {why} (wflsim pid {owner.get('pid', '?')} on host "
            f"{owner.get('host', '?')}, since {owner.get('since', '?')})",
            fix,
        )

    def acquire(self) -> None:
        """Take the lock or raise :class:`ScenarioError` (one line, exit 2)."""
        for _ in range(20):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                locked = self._flock(fd)
                owner = self._read(fd)
                if not locked:
                    raise self._refuse(
                        owner,
                        "in use by another run",
                        "wait for that run to finish, or choose another --out",
                    )
                try:
                    same_file = os.fstat(fd).st_ino == os.stat(self.path).st_ino
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
                        owner, "in use by another run", "wait for it, or choose another --out"
                    )
                self._write(fd)
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
    def _write(fd: int) -> None:
        data = json.dumps({**writer_identity(), "since": now_iso()}).encode()
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
    """Whether ``folder`` carries the marker a wflsim run writes."""
    return (Path(folder) / MARKER).is_file()


def require_run_folder(folder: Path, option: str = "--resume") -> None:
    """Raise :class:`ScenarioError` unless ``folder`` carries a wflsim run's marker."""
    if not is_run_folder(folder):
        raise ScenarioError(
            option,
            f"{str(folder)!r} is not a wflsim run folder (no {MARKER} marker)",
            "give the --out folder of a run made by wflsim 0.3 or later",
        )


def write_marker(folder: Path, version: str) -> None:
    """Mark ``folder`` as a wflsim run's (what ``--overwrite`` looks for)."""
    from wflsim.sim.trace import write_json_atomic

    write_json_atomic(folder / MARKER, {"wflsim_run": 1, "created_by": version})


#: The files and folders of a run that ``--overwrite`` removes (nothing else is ever deleted).
#: The folder of a run folder that holds the channel table's parts (``[channel] record``).
CHANNEL_DIR = "channel"

RUN_ENTRIES = (EVENTS_DIR, CHANNEL_DIR, MANIFEST, CHECKPOINT, LEGACY_EVENTS, MARKER)


def _is_leftover(p: Path) -> bool:
    """The lock, or a hidden temporary file of an atomic write (``.NAME.PID.tmp``): what a run
    killed before it began leaves in its folder."""
    if p.name == LOCK:
        return True
    return p.name.startswith(".") and p.name.endswith(".tmp") and p.is_file()


def never_started(folder: Path) -> bool:
    """Whether ``folder`` is empty or holds only what a run killed before it wrote its marker
    leaves (its lock, a temporary file of the marker): nothing to keep or resume."""
    return all(_is_leftover(p) for p in Path(folder).iterdir())


def check_out_dir(out: Path, overwrite: bool) -> None:
    """An existing non-empty output folder is an error unless ``overwrite``; even then only a
    folder carrying the marker of a wflsim run (:data:`MARKER`) may be replaced.

    Raises:
        ScenarioError: on ``--out`` with the fix.
    """
    if not out.exists():
        return
    if not out.is_dir():
        raise ScenarioError(
            "--out", f"{str(out)!r} exists and is not a directory", "choose another --out"
        )
    if never_started(out):
        return  # empty, or only the lock of a run killed before it wrote anything
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
        if p.name.startswith(".") and p.name.endswith(".tmp") and p.is_file():
            p.unlink()
    fsync_dir(out)


def remove_parts_from(events_dir: Path, frame: int) -> list[int]:
    """Delete the parts of frames ``>= frame`` and any temporary file in ``events_dir``;
    returns the frames removed."""
    removed: list[int] = []
    if not events_dir.is_dir():
        return removed
    for p in events_dir.iterdir():
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
    """The folder's manifest, or None when absent or unreadable."""
    try:
        m = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) else None
