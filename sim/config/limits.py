"""Limits on what a scenario, a sweep or a command line may ask for, and checks of the texts
that become file names: one place for the caps that keep absurd input from turning into
unbounded work or an unreadable error (``docs/scenario.md`` gives each bound with its field).
"""

from __future__ import annotations

import os
from pathlib import Path

#: Most devices a scenario may have (``network.num_devices``, per-device lists, positions).
MAX_DEVICES = 1_000_000
#: Most slots a run may have (``run.frames`` x ``run.slots_per_frame``); the paper runs 4,000.
MAX_SLOTS = 100_000_000
#: Most runs a sweep may have (grid points x seeds).
MAX_SWEEP_POINTS = 10_000
#: Largest seed (a signed 64-bit integer: seeds are stored in int64 columns and metadata).
MAX_SEED = 2**63 - 1
#: Longest scenario ``name`` (it becomes part of the default output folder's name).
MAX_NAME_CHARS = 100
#: Longest scenario ``description`` (it is copied into every trace part's metadata).
MAX_DESCRIPTION_CHARS = 10_000
#: Longest path a field or an option may hold (Linux's PATH_MAX is 4096 bytes).
MAX_PATH_BYTES = 4096
#: Longest file or folder name in a path (most file systems allow 255 bytes).
MAX_NAME_BYTES = 255
#: Longest sweep point folder name, in UTF-8 bytes (longer names are cut and end with a hash).
MAX_POINT_NAME_BYTES = 160
#: Most parallel runs of a sweep.
MAX_WORKERS = 1024
#: Longest a slot may wait for its last upload, s (about 31.7 years of simulated time), under a
#: scheme that closes the slot when the last upload arrives (``ideal``, ``only_pf``): a scenario
#: whose device at the cell edge would need longer is refused before the run
#: (:func:`wflsim.sim.config.derived.check_slot_wait`), and a slot that still would (a deep
#: fade) stops the run (:class:`wflsim.sim.errors.SlotTooLong`). Far above any slot of a
#: plausible scenario (the paper's deepest fades make slots of hours), it keeps what follows the
#: slot in simulated time (random-waypoint legs walked, availability changes) bounded.
MAX_SLOT_WAIT_S = 1e9
#: Most events one wait of the simulated clock (a slot that waits for its last upload, a cloud
#: round the synchronous edges wait for) may cause on average, all devices together: the
#: availability changes of ``markov`` availability and, with ``mobility.clock = "simulated"``,
#: the random-waypoint legs walked over it (each change is a trace row). Where they come often,
#: a wait may last at most this many of them (:func:`wflsim.sim.config.derived.longest_wait_s`):
#: about 20 s of CPU and a million trace rows for availability changes, 3 s for legs.
MAX_WAIT_EVENTS = 1_000_000


def shorten(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters (with ``...`` where it was cut), for error messages
    that quote what the user wrote."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def path_problem(text: str) -> str | None:
    """What makes ``text`` unusable as a path on this system (None if nothing): empty, a NUL
    or other control character, longer than :data:`MAX_PATH_BYTES`, or a component longer than
    :data:`MAX_NAME_BYTES`."""
    if not text.strip():
        return "is empty"
    if any(not c.isprintable() for c in text):
        return "holds a control character (a line break, tab, NUL, ...)"
    try:
        raw = os.fsencode(text)
    except UnicodeError:
        return "cannot be encoded as a file name on this system"
    if len(raw) > MAX_PATH_BYTES:
        return f"is {len(raw):,} bytes long; paths may have at most {MAX_PATH_BYTES:,}"
    for part in raw.split(b"/"):
        if len(part) > MAX_NAME_BYTES:
            return (
                f"has a file or folder name of {len(part):,} bytes; "
                f"names may have at most {MAX_NAME_BYTES}"
            )
    return None


def out_path_problem(out: Path, room: int = 64) -> str | None:
    """What keeps a run or sweep folder from being created at ``out`` (None if nothing): a bad
    path (:func:`path_problem`), too long to hold paths ``room`` bytes longer (the files in
    it), a parent that is a file, or a parent folder this process may not write in. Nothing is
    created."""
    problem = path_problem(str(out))
    if problem is not None:
        return problem
    parent = out.absolute()
    if len(os.fsencode(str(parent))) + room > MAX_PATH_BYTES:
        return (
            f"is too long to hold the files written in it (paths may have {MAX_PATH_BYTES} bytes)"
        )
    try:
        while not parent.exists():  # the nearest existing folder above (or at) out
            if parent.parent == parent:
                break
            parent = parent.parent
        if parent == out.absolute():
            return None  # out exists: check_out_dir decides whether it may be used
        if not parent.is_dir():
            return f"cannot be created: {str(parent)!r} is a file, not a folder"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"cannot be created: no permission to write in {str(parent)!r}"
    except OSError as err:
        return f"cannot be checked ({err.strerror or type(err).__name__})"
    return None
