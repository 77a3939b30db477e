"""The run folder's format: its names, its manifest reader, whether its writer lives, and the
refusal of symbolic links inside it. Like :mod:`wflsim.sim.trace` for the events, this module is
what a run folder's writer (the application, :mod:`wflsim.app.folders` and
:mod:`wflsim.app.recorder`) and its readers (:mod:`wflsim.analysis`, the API) share; it writes
nothing.

A run folder holds::

    .wflsim-run          marker: this folder was made by a wflsim run (``--overwrite`` needs it)
    wflsim.lock          the writer's lock (pid, host) while a run writes the folder
    manifest.json        scenario, fingerprint, status, the parts written, heartbeat, summary
    events/part-NNNNNN.parquet   one complete Parquet file per completed frame (the trace)
    checkpoint.npz       the state of every component after the last checkpointed frame

One writer per folder: it holds an exclusive ``flock`` on ``wflsim.lock`` for its lifetime
(:class:`wflsim.app.folders.RunLock`) and records its pid, host and process start time in the
lock and in the manifest's ``writer``; a running writer refreshes the manifest's
``heartbeat_at`` every :data:`HEARTBEAT_S` seconds. From these a reader tells a live run from a
crashed one (:func:`liveness`). A sweep folder has the same lock, held by the sweep.

Nothing is read, written or deleted through a symbolic link inside a run folder: a link in place
of one of the entries above (or of a file in ``events/`` or ``channel/``) is refused with one line
(:func:`check_no_links`), and the lock and the manifest are opened with ``O_NOFOLLOW``. The run
folder itself (the ``--out`` a user gives) may be a link to a directory.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

from .errors import ScenarioError
from .trace import EVENTS_DIR

MARKER = ".wflsim-run"
LOCK = "wflsim.lock"
MANIFEST = "manifest.json"
CHECKPOINT = "checkpoint.npz"
LEGACY_EVENTS = "events.parquet"
#: The folder of a run folder that holds the channel table's parts (``[channel] record``).
CHANNEL_DIR = "channel"
#: The files and folders of a run that ``--overwrite`` removes (nothing else is ever deleted).
RUN_ENTRIES = (EVENTS_DIR, CHANNEL_DIR, MANIFEST, CHECKPOINT, LEGACY_EVENTS, MARKER)
#: Seconds between two heartbeats of a running run's manifest.
HEARTBEAT_S = 30.0
#: A running run of another host whose heartbeat is older than this is taken for dead by readers.
STALE_AFTER_S = 10 * HEARTBEAT_S

#: ``open`` flags that refuse a symbolic link as the last component (0 where unsupported).
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


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


def is_temporary(name: str) -> bool:
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
        if is_temporary(p.name) and p.is_symlink():
            raise link_error(p, option)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's manifest, or None when absent, unreadable or a link (never followed)."""
    return read_json(Path(folder) / MANIFEST)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object in a regular file (a run's manifest, a sweep's ``sweep.json``), or None
    when absent, unreadable, not an object or a link (never followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            m = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return m if isinstance(m, dict) else None
