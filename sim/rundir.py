"""The run folder's format: its names, its manifest reader, whether its writer lives, and the
refusal of symbolic links inside it. Like :mod:`wflsim.sim.trace` for the events, this module is
what a run folder's writer (the application, :mod:`wflsim.app.folders` and
:mod:`wflsim.app.recorder`) and its readers (:mod:`wflsim.analysis`, the API) share; it writes
nothing.

A run folder holds::

    .wflsim-run          marker: this folder was made by a wflsim run (``--overwrite`` needs it)
    wflsim.lock          the writer's lock (pid, host) while a run writes the folder
    manifest.json        scenario, fingerprint, status, the parts written, heartbeat, summary
    events/part-NNNNNN.parquet   one complete Parquet file per completed frame (the trace), or
    events/part-NNNNNN-SS.parquet  the shards of a frame of many rows (contiguous runs of slots)
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

The manifest vouches for the trace: readers and ``--resume`` read exactly the parts it lists,
each checked against the row count and the hash recorded when it was written
(:func:`checked_parts`); a part missing, damaged, replaced or added is refused with one line
(:class:`RunFolderError`) naming the file and the fix. The hash of a part or checkpoint entry is
named by its key: ``"blake3"`` (BLAKE3, what this version writes, :data:`DIGEST`) or
``"sha256"`` (SHA-256, what wflsim wrote before issue 49; such folders still verify and resume).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import blake3

from .errors import ScenarioError
from .files import open_regular, read_capped
from .trace import EVENTS_DIR, MAX_SHARDS, list_parts, part_name, shard_name

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
#: Largest manifest or ``sweep.json`` read, bytes (a manifest lists about 200 bytes per frame:
#: a million frames take about 200 MB).
MAX_MANIFEST_BYTES = 512 * 1024**2


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


def process_name(pid: int) -> str | None:
    """The program name of process ``pid`` (Linux ``/proc/PID/comm``: at most 15 characters, no
    arguments), to name it in a message; None where unknown."""
    try:
        raw = Path(f"/proc/{pid}/comm").read_bytes()
    except OSError:
        return None
    name = "".join(c if c.isprintable() else "?" for c in raw.decode("utf-8", "replace").strip())
    return name or None


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
    when absent, unreadable, larger than :data:`MAX_MANIFEST_BYTES`, not an object or a link
    (never followed)."""
    try:
        raw = read_capped(path, str(path), MAX_MANIFEST_BYTES, "JSON", follow_links=False)
        m = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # ScenarioError (not a regular file, too large) too
        return None
    return m if isinstance(m, dict) else None


# ---------------------------------------------------------------------- the manifest's parts


class RunFolderError(ScenarioError):
    """A run folder whose files disagree with its manifest: a part missing, damaged, replaced by
    another run's or added, or a manifest that is missing, truncated or edited. ``field`` is the
    file; the message says what is wrong and the fix (the CLI prints it as one line, exit 2)."""

    def __init__(self, path: Path, problem: str, fix: str) -> None:
        self.path = Path(path)
        super().__init__(str(path), problem, fix)


def recompute_fix(folder: Path) -> str:
    """The fix for a run folder whose files can no longer be trusted: compute the run again."""
    return f"restore it from a copy of the run, or compute the run again: wflsim run SCENARIO --out {folder} --overwrite"


def unreadable_manifest(folder: Path, fix: str | None = None) -> RunFolderError:
    """The refusal of a run folder's ``manifest.json`` that exists but does not parse as a JSON
    object (truncated by a copy, edited, or a link); ``fix``: default, compute the run again."""
    return RunFolderError(
        Path(folder) / MANIFEST,
        "is not readable: not a JSON object (truncated, edited, or a link)",
        fix or recompute_fix(Path(folder)),
    )


# ---------------------------------------------------------------------- the files' hashes

#: The hash new run folders record for their parts and checkpoints (the key of their entries):
#: BLAKE3, a cryptographic hash (256-bit output, like SHA-256) several times faster in software.
DIGEST = "blake3"
#: The hashes a part or checkpoint entry may carry, by the key that names each in the entry,
#: with the name a message gives it; an entry carries exactly one of them.
DIGESTS = {"blake3": "BLAKE3", "sha256": "SHA-256"}


class Hasher(Protocol):
    """An incremental hash (``hashlib``'s interface, which ``blake3`` shares)."""

    def update(self, data: Any, /) -> Any: ...

    def hexdigest(self) -> str: ...


def _sha256() -> Hasher:
    return hashlib.sha256()


def _blake3() -> Hasher:
    # one thread: the writer's other threads already use the cores
    return blake3.blake3(max_threads=1)


_HASHERS: dict[str, Callable[[], Hasher]] = {"blake3": _blake3, "sha256": _sha256}


def new_hasher(algorithm: str = DIGEST) -> Hasher:
    """A fresh incremental hash of ``algorithm`` (a key of :data:`DIGESTS`)."""
    return _HASHERS[algorithm]()


def digest_bytes(data: bytes, algorithm: str = DIGEST) -> str:
    """The hash of ``data`` (hex)."""
    h = new_hasher(algorithm)
    h.update(data)
    return h.hexdigest()


def entry_digest(entry: Any) -> tuple[str, str] | None:
    """The ``(algorithm, hex digest)`` a part or checkpoint entry records, or None when it carries
    none, several, or one that is not a string (an edited or damaged manifest)."""
    if not isinstance(entry, dict):
        return None
    found = [(k, entry[k]) for k in DIGESTS if k in entry]
    if len(found) != 1 or not isinstance(found[0][1], str):
        return None
    return found[0]


@dataclass(frozen=True)
class Part:
    """One part a manifest lists: its frame, its file and what was recorded when it was written
    (its rows and its hash: ``algorithm``, a key of :data:`DIGESTS`, and the hex ``digest``)."""

    frame: int
    path: Path
    rows: int
    digest: str
    algorithm: str = DIGEST


#: One file of a part entry: its name (in the part's folder), its rows, and its hash
#: (algorithm, a key of :data:`DIGESTS`, and hex digest).
PartFile = tuple[str, int, str, str]


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def entry_files(entry: Any, sub: str, frame: int) -> list[PartFile] | None:
    """The files a manifest's part entry for frame ``frame`` records, in row order, or None when
    it is not one: ``{"file": "sub/part-NNNNNN.parquet", "frame", "rows", <hash>}`` (one file per
    frame) or ``{"frame", "rows", "files": [{"file": "sub/part-NNNNNN-SS.parquet", "rows",
    <hash>}, ...]}`` (the frame's shards ``00, 01, ...``, whose rows add up to the entry's)."""
    if not (
        isinstance(entry, dict)
        and entry.get("frame") == frame
        and not isinstance(entry.get("frame"), bool)
        and _is_count(entry.get("rows"))
    ):
        return None
    if "files" not in entry:
        recorded = entry_digest(entry)
        if entry.get("file") != f"{sub}/{part_name(frame)}" or recorded is None:
            return None
        return [(part_name(frame), entry["rows"], *recorded)]
    files = entry["files"]
    if "file" in entry or not isinstance(files, list) or not 1 <= len(files) <= MAX_SHARDS:
        return None
    out: list[PartFile] = []
    for s, f in enumerate(files):
        recorded = entry_digest(f)
        name = shard_name(frame, s)
        if recorded is None or f.get("file") != f"{sub}/{name}" or not _is_count(f.get("rows")):
            return None
        out.append((name, f["rows"], *recorded))
    return out if sum(f[1] for f in out) == entry["rows"] else None


def part_entry(sub: str, frame: int, files: list[PartFile]) -> dict[str, Any]:
    """The manifest entry of frame ``frame``'s part written as ``files`` (in ``sub``): one file
    named :func:`~wflsim.sim.trace.part_name` gives the entry of one file per frame, as before
    shards existed; shards give an entry listing them (:func:`entry_files` reads both)."""
    rows = sum(f[1] for f in files)
    if len(files) == 1 and files[0][0] == part_name(frame):
        name, _, algorithm, digest = files[0]
        return {"file": f"{sub}/{name}", "frame": frame, "rows": rows, algorithm: digest}
    return {
        "frame": frame,
        "rows": rows,
        "files": [
            {"file": f"{sub}/{name}", "rows": n, algorithm: digest}
            for name, n, algorithm, digest in files
        ],
    }


def listed_parts(
    folder: Path, manifest: dict[str, Any], sub: str = EVENTS_DIR, key: str = "parts"
) -> list[Part]:
    """The part files ``manifest[key]`` lists (in ``folder/sub``), in row order (a sharded
    frame gives one :class:`Part` per shard).

    Raises:
        RunFolderError: the list is not one entry per frame ``0, 1, ...`` in order, each with its
            file name (``sub/part-NNNNNN.parquet``, or its shards'), a row count and one hash of
            :data:`DIGESTS` (an edited or damaged manifest).
    """
    folder = Path(folder)
    entries = manifest.get(key)
    where = folder / MANIFEST
    if not isinstance(entries, list):
        raise RunFolderError(
            where, f"has no list of parts ({key!r}): edited or damaged", recompute_fix(folder)
        )
    parts = []
    for i, e in enumerate(entries):
        files = entry_files(e, sub, i)
        if files is None:
            raise RunFolderError(
                where,
                f"entry {i} of its {key!r} is not frame {i}'s part with its rows and one hash "
                f"({' or '.join(DIGESTS)}; edited or damaged)",
                recompute_fix(folder),
            )
        for name, rows, algorithm, digest in files:
            parts.append(Part(i, folder / sub / name, rows, digest, algorithm))
    return parts


#: Hashes of files already hashed in this process, by algorithm and what identifies their
#: content on disk: (device, inode, size, modification and change time in ns); a changed file
#: changes its key.
_DIGESTS: dict[tuple[str, int, int, int, int, int], str] = {}
_DIGESTS_MAX = 65536


def file_digest(path: Path, algorithm: str = DIGEST, *, follow_links: bool = False) -> str:
    """The hash (``algorithm``, a key of :data:`DIGESTS`) of a regular file's bytes (hex), opened
    without following a link (unless ``follow_links``); a file hashed before in this process and
    unchanged since (same inode, size, mtime and ctime) is not read again.

    Raises:
        ScenarioError: the file is missing, not a regular file or a link (:func:`open_regular`).
        OSError: the file cannot be read.
    """
    f = open_regular(path, str(path), "input", follow_links=follow_links)
    with f:
        st = os.fstat(f.fileno())
        key = (algorithm, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        known = _DIGESTS.get(key)
        if known is not None:
            return known
        h = new_hasher(algorithm)
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    digest = h.hexdigest()
    if len(_DIGESTS) >= _DIGESTS_MAX:
        _DIGESTS.clear()
    _DIGESTS[key] = digest
    return digest


def file_sha256(path: Path, *, follow_links: bool = False) -> str:
    """The SHA-256 of a regular file's bytes (hex): :func:`file_digest` with ``"sha256"`` (the
    fingerprint of an input file, which stays SHA-256)."""
    return file_digest(path, "sha256", follow_links=follow_links)


def check_part(part: Part, folder: Path, *, digest: bool = True, fix: str | None = None) -> None:
    """Refuse (:class:`RunFolderError`) a listed part that is missing, a link or not a regular
    file, or whose bytes are not those the manifest recorded: their hash (``digest``: the
    algorithm the entry names), else only the row count of the file's footer (the cheaper check
    a reader may choose)."""
    fix = fix or recompute_fix(folder)
    p = part.path
    if not p.exists() and not p.is_symlink():
        raise RunFolderError(p, "is listed in manifest.json but missing", fix)
    if p.is_symlink() or not p.is_file():
        raise RunFolderError(p, "is a link or not a regular file; a part must be a file", fix)
    if digest:
        try:
            got = file_digest(p, part.algorithm)
        except ScenarioError as err:
            raise RunFolderError(p, err.problem, fix) from None
        except OSError as err:
            raise RunFolderError(p, f"cannot be read ({err.strerror or err})", fix) from None
        if got != part.digest:
            raise RunFolderError(
                p,
                f"does not match the {DIGESTS[part.algorithm]} hash that manifest.json records "
                "for it (damaged, edited or replaced by another run's part)",
                fix,
            )
        return
    import pyarrow.parquet as pq

    try:
        rows = pq.ParquetFile(p).metadata.num_rows
    except Exception:  # a damaged file: its footer does not parse
        raise RunFolderError(p, "is not a readable Parquet file (damaged)", fix) from None
    if rows != part.rows:
        raise RunFolderError(
            p,
            f"holds {rows} rows where manifest.json records {part.rows} (damaged or replaced)",
            fix,
        )


def unlisted_parts(
    folder: Path, listed: int, status: str, sub: str = EVENTS_DIR, names: set[str] | None = None
) -> tuple[list[Path], list[Path]]:
    """The part files (and shards) in ``folder/sub`` that the manifest (listing frames
    ``0 .. listed-1``, whose files are ``names``; None: not checked) does not list, as
    ``(foreign, in_flight)``. In flight: the part or shards of frame ``listed`` of a run that
    did not complete (written just before the run stopped, or, while it runs, before its
    manifest named it) and, while it runs (``status`` ``running``), any later one. Foreign:
    every other (copied in by hand, or a shard beside a listed frame's files), which readers
    and ``--resume`` refuse."""
    foreign, in_flight = [], []
    for f, p in list_parts(Path(folder) / sub):
        if f < listed:
            if names is not None and p.name not in names:
                foreign.append(p)
            continue
        if status != "completed" and (f == listed or status == "running"):
            in_flight.append(p)
        else:
            foreign.append(p)
    return foreign, in_flight


def foreign_part_error(path: Path) -> RunFolderError:
    """The refusal of a part file the manifest does not list."""
    return RunFolderError(
        path,
        "is not listed in manifest.json: it is no part of this run (copied in by hand?)",
        f"move it out of {path.parent}",
    )


def checked_parts(
    folder: Path,
    manifest: dict[str, Any],
    *,
    digest: bool = True,
    sub: str = EVENTS_DIR,
    key: str = "parts",
) -> list[Path]:
    """The files of the parts ``manifest`` lists, in frame order, each checked
    (:func:`check_part`), after refusing a part on disk that it does not list (except one in
    flight: :func:`unlisted_parts`, which is not read) and, for a completed run, a list that
    does not cover every frame of its ``frames_completed`` and the rows of its summary.

    Raises:
        RunFolderError: the files and the manifest disagree (one line: the file and the fix).
    """
    folder = Path(folder)
    parts = listed_parts(folder, manifest, sub, key)
    status = liveness(manifest)
    completed = status == "completed"
    fix = (
        recompute_fix(folder)
        if completed
        else (
            f"continue the run with wflsim run --resume {folder}, or compute it again with --overwrite"
        )
    )
    listed = parts[-1].frame + 1 if parts else 0
    foreign, _ = unlisted_parts(folder, listed, status, sub, {p.path.name for p in parts})
    if foreign:
        raise foreign_part_error(foreign[0])
    if completed and key == "parts":
        done = manifest.get("frames_completed")
        summary = manifest.get("summary")
        rows = summary.get("trace_rows") if isinstance(summary, dict) else None
        if isinstance(done, int) and done != listed:
            raise RunFolderError(
                folder / MANIFEST,
                f"lists {listed} parts but says {done} frames were completed (edited)",
                fix,
            )
        if isinstance(rows, int) and rows != sum(p.rows for p in parts):
            raise RunFolderError(
                folder / MANIFEST,
                f"lists parts of {sum(p.rows for p in parts)} rows but its summary counts "
                f"{rows} (edited)",
                fix,
            )
    for part in parts:
        check_part(part, folder, digest=digest, fix=fix)
    return [p.path for p in parts]
