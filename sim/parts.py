"""The names of a run folder's trace files: one part per frame, or a frame's shards.

Pure string and folder-listing helpers, shared by the writer, the readers and the checks
(:mod:`wflsim.sim.trace` re-exports them)."""

from __future__ import annotations

import re
from pathlib import Path

#: The run folder's trace: one Parquet file per completed frame in this sub-folder (or, for a
#: frame of many rows, several shard files, each a contiguous run of the frame's slots).
EVENTS_DIR = "events"
_PART = re.compile(r"^part-(\d{6,})(?:-(\d{2}))?\.parquet$")
#: Most shard files one frame's part may be written as (their index has two digits).
MAX_SHARDS = 16


def part_name(frame: int) -> str:
    """The file name of frame ``frame``'s part: ``part-000012.parquet`` (sorts in frame order)."""
    return f"part-{frame:06d}.parquet"


def shard_name(frame: int, shard: int) -> str:
    """The file name of shard ``shard`` of frame ``frame``'s part: ``part-000012-01.parquet``.

    Names sort in row order: a frame's shards by their index, and all of them after every file of
    an earlier frame and before every file of a later one (``-`` sorts before ``.`` and digits),
    whether those frames are sharded or not."""
    if not 0 <= shard < MAX_SHARDS:
        raise ValueError(f"shard {shard} out of 0..{MAX_SHARDS - 1}")
    return f"part-{frame:06d}-{shard:02d}.parquet"


def part_frame(name: str) -> int | None:
    """The frame of a part (or part shard) file name, or None if ``name`` is not one."""
    m = _PART.match(name)
    return int(m.group(1)) if m else None


def list_parts(events_dir: Path) -> list[tuple[int, Path]]:
    """The complete part files (and part shards) of a run's ``events/`` folder as
    ``(frame, path)``, in row order (by frame, a frame's shards by index).

    Temporary files of a write in progress (hidden, ``.tmp``) are never listed."""
    if not events_dir.is_dir():
        return []
    found = [(part_frame(p.name), p) for p in events_dir.iterdir()]
    return sorted((f, p) for f, p in found if f is not None)


__all__ = ["EVENTS_DIR", "MAX_SHARDS", "list_parts", "part_frame", "part_name", "shard_name"]
