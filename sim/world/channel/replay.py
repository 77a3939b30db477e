"""Replaying a channel table instead of drawing: the same realisation for every scheme, bit for
bit, or measured / externally generated gains.

:func:`read_channel_table` reads and validates a table with the layout of
:data:`wflsim.sim.world.channel.record.COLUMNS` against the scenario (devices, slots, finite
positive gains, one large-scale value per device and frame); every problem is a one-line
:class:`~wflsim.sim.errors.ScenarioError` naming ``channel.replay`` that never quotes the file's
values. :class:`ReplayChannel` gives the engine the table's gains.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ... import fmath
from ...errors import ScenarioError
from ...files import open_regular
from .. import physics
from .base import (
    B8,
    CONTROLLER_ASSUMPTION,
    F64,
    Channel,
    LargeScale,
    SlotChannel,
)
from .drawn import DrawnChannel
from .record import COLUMNS

if TYPE_CHECKING:
    from ..mobility.base import Kinematics

FIELD = "channel.replay"
_PANDAS_INDEX = re.compile(r"__index_level_\d+__")
_FIX = "record one with [channel] record = true, or see docs/scenario.md (the channel table)"


@dataclass(frozen=True)
class ChannelTable:
    """A validated channel table, arranged by slot and device (``S = K T`` slots, ``N``
    devices; frame-level columns by frame)."""

    gain: F64  #: ``(S, N)``, linear
    seen_gain: F64  #: ``(S, N)``, linear (= ``gain`` when the table has no ``seen_gain``)
    large_scale_gain: F64 | None  #: ``(K, N)``, linear
    shadowing_db: F64 | None  #: ``(K, N)``, dB
    los: B8 | None  #: ``(K, N)``
    columns: tuple[str, ...]  #: the columns the table had
    metadata: dict[str, str]  #: the file's key-value metadata


def _error(problem: str, fix: str | None = _FIX) -> ScenarioError:
    return ScenarioError(FIELD, problem, fix)


def _numeric(table: pa.Table, name: str, source: str) -> np.ndarray:
    """Column ``name`` as a numpy array; refuses other types and missing values."""
    col = table.column(name)
    typ = col.type
    if name == "los":
        if not (pa.types.is_boolean(typ) or pa.types.is_integer(typ)):
            raise _error(f"{source}: column los must be boolean, not {typ}")
    elif not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
        raise _error(f"{source}: column {name} must be numeric, not {typ}")
    if col.null_count:
        first = int(np.flatnonzero(~np.asarray(col.is_valid().to_numpy(zero_copy_only=False)))[0])
        raise _error(
            f"{source}: column {name} has {col.null_count} missing value(s) (first in row {first})"
        )
    return np.asarray(col.to_numpy())


def _integers(values: np.ndarray, name: str, source: str) -> np.ndarray:
    """Integer-valued column as int64 (floats must be whole; anything beyond 2^53 is refused)."""
    limit = 2.0**53
    if values.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(values) | (values != np.round(values)) | (np.abs(values) > limit)
        rows = np.flatnonzero(bad)
        if rows.size:
            raise _error(
                f"{source}: column {name} must hold integers below 2^53; row {int(rows[0])} does not"
            )
    elif values.dtype.kind == "u" and values.size and values.max() > limit:
        row = int(np.argmax(values > limit))
        raise _error(f"{source}: column {name} must hold integers below 2^53; row {row} does not")
    return values.astype(np.int64)


def _per_frame(
    values: np.ndarray, name: str, frames: int, slots_per_frame: int, source: str
) -> np.ndarray:
    """``(S, N)`` values that must be constant within each frame -> ``(K, N)``."""
    n = values.shape[1]
    by_frame = values.reshape(frames, slots_per_frame, n)
    changes = np.any(by_frame != by_frame[:, :1, :], axis=1)  # (K, N)
    if changes.any():
        k, d = (int(i[0]) for i in np.nonzero(changes))
        raise _error(
            f"{source}: {name} of device {d} changes within frame {k} (slots "
            f"{k * slots_per_frame}..{(k + 1) * slots_per_frame - 1}); it must be one value per "
            "device and frame",
            "check that the table was recorded with the scenario's run.slots_per_frame",
        )
    return np.array(by_frame[:, 0, :])


_PART_FILE = re.compile(r"^part-\d{6,}\.parquet$")


def _table_files(p: Path, source: str) -> list[Path]:
    """The Parquet files of a channel table given as a file, a folder of frame parts
    (``channel/``) or a run folder holding ``channel/``."""
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise _error(f"{source} is not a file or a folder")
    folder = p / "channel" if (p / "channel").is_dir() else p
    parts = sorted(f for f in folder.iterdir() if _PART_FILE.match(f.name) and f.is_file())
    if not parts:
        raise _error(
            f"{source} holds no channel table (no part-NNNNNN.parquet files)",
            "name a run folder recorded with [channel] record = true, its channel/ folder or "
            "a Parquet file",
        )
    return parts


def _read_part(path: Path) -> pa.Table:
    """One Parquet file of a channel table (a regular file: :func:`open_regular`)."""
    with open_regular(path, "channel.replay", "channel table", name=True) as f:
        return pq.read_table(f)


def read_channel_table(
    path: str | Path, *, num_devices: int, frames: int, slots_per_frame: int
) -> ChannelTable:
    """Read and validate a channel table for a scenario with ``num_devices`` devices and
    ``frames`` x ``slots_per_frame`` slots.

    Needs the columns ``slot``, ``device`` and ``gain``; ``seen_gain``, ``large_scale_gain``,
    ``shadowing_db`` and ``los`` are optional; any other column is refused (a misspelt optional
    column would otherwise be ignored silently), except a pandas index stored with the table
    (``__index_level_0__``), which is ignored. Rows may come in any order; rows of slots
    beyond the scenario's are ignored; every (slot, device) pair the scenario needs must appear
    exactly once.

    ``path`` is a Parquet file, a folder of frame parts (a recorded run's ``channel/``) or a
    run folder recorded with ``[channel] record = true``.

    Raises:
        ScenarioError: field ``channel.replay``, naming the problem (never the file's values).
    """
    p = Path(path)
    source = f"channel table {p}"
    if not p.exists():
        raise _error(
            f"{source} does not exist",
            "give a path relative to the scenario file's folder, or an absolute path",
        )
    files = _table_files(p, source)
    try:
        tables = [_read_part(f) for f in files]
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    except ScenarioError:
        raise
    except Exception as exc:  # any parser failure is the user's file
        raise _error(f"cannot read {p} as a Parquet table ({type(exc).__name__})") from None
    # a pandas index written with the table (``to_parquet`` of a reordered frame) is not data
    table = table.select([c for c in table.column_names if not _PANDAS_INDEX.fullmatch(c)])
    names = table.column_names
    unknown = [c for c in names if c not in COLUMNS]
    if unknown:
        raise _error(
            f"{source} has {len(unknown)} column(s) outside the channel-table layout",
            f"keep only the columns {', '.join(COLUMNS)}",
        )
    missing = [c for c, spec in COLUMNS.items() if spec[2] and c not in names]
    if missing:
        raise _error(f"{source} lacks column(s) {', '.join(missing)}")
    if len(set(names)) != len(names):
        raise _error(f"{source} has a column twice")
    n, s = int(num_devices), int(frames) * int(slots_per_frame)
    slot = _integers(_numeric(table, "slot", source), "slot", source)
    device = _integers(_numeric(table, "device", source), "device", source)
    neg = np.flatnonzero(slot < 0)
    if neg.size:
        raise _error(f"{source}: slots must be >= 0; row {int(neg[0])} is not")
    outside = np.flatnonzero((device < 0) | (device >= n))
    if outside.size:
        raise _error(
            f"{source} has {outside.size} row(s) of devices outside 0..{n - 1}, the scenario's "
            f"{n} devices (first in row {int(outside[0])})",
            "renumber the table's devices 0..N-1 or change network.num_devices",
        )
    keep = slot < s
    rows = np.flatnonzero(keep)
    idx = slot[keep] * n + device[keep]
    counts = np.bincount(idx, minlength=s * n)
    if (counts > 1).any():
        first = int(np.flatnonzero(counts > 1)[0])
        raise _error(
            f"{source} has {int((counts > 1).sum())} (slot, device) pair(s) on more than one row, "
            f"e.g. slot {first // n} device {first % n}",
            "keep one row per slot and device",
        )
    if (counts == 0).any():
        first = int(np.flatnonzero(counts == 0)[0])
        raise _error(
            f"{source} lacks {int((counts == 0).sum())} of the {s * n} (slot, device) pairs the "
            f"scenario needs ({frames} frames x {slots_per_frame} slots, {n} devices), e.g. slot "
            f"{first // n} device {first % n}",
            "record the channel with this scenario's run and network sections, or shorten the run",
        )
    order = np.empty(s * n, dtype=np.int64)
    order[idx] = rows  # table row of each (slot, device)

    def grid(name: str, positive: bool) -> F64:
        v = _numeric(table, name, source).astype(np.float64)[order]
        bad = ~np.isfinite(v) | ((v <= 0.0) if positive else False)
        if bad.any():
            what = "finite and > 0" if positive else "finite"
            raise _error(
                f"{source}: column {name} must be {what}; {int(bad.sum())} row(s) are not (first "
                f"in row {int(order[np.flatnonzero(bad)[0]])})"
            )
        return v.reshape(s, n)

    gain = grid("gain", True)
    seen = grid("seen_gain", True) if "seen_gain" in names else gain
    large = shadow = los = None
    if "large_scale_gain" in names:
        large = _per_frame(
            grid("large_scale_gain", True), "large_scale_gain", frames, slots_per_frame, source
        )
    if "shadowing_db" in names:
        shadow = _per_frame(
            grid("shadowing_db", False), "shadowing_db", frames, slots_per_frame, source
        )
    if "los" in names:
        raw = _numeric(table, "los", source)[order]
        if raw.dtype.kind != "b" and not np.isin(raw, (0, 1)).all():
            raise _error(f"{source}: column los must be boolean (or 0 / 1)")
        los = _per_frame(raw.astype(bool).reshape(s, n), "los", frames, slots_per_frame, source)
    meta = {
        k.decode(errors="replace"): v.decode(errors="replace")
        for k, v in (table.schema.metadata or {}).items()
        if k.startswith(b"wflsim.")
    }
    return ChannelTable(gain, seen, large, shadow, los, tuple(names), meta)


class ReplayChannel(Channel):
    """The channel of a recorded (or external) table.

    Args:
        table: the validated table.
        base: the scenario's drawn channel, used for what the table lacks: the large-scale gain
            (path loss, and the LOS state, at the devices' positions) when there is no
            ``large_scale_gain`` column.
        slots_per_frame: ``T``.
        source: the table's path (recorded in the metadata).
    """

    def __init__(
        self, table: ChannelTable, base: DrawnChannel, slots_per_frame: int, source: str
    ) -> None:
        self.table = table
        self.base = base
        self.num_devices = base.num_devices
        self.slots_per_frame = int(slots_per_frame)
        self.source = source

    @property
    def has_shadowing(self) -> bool:
        """Whether the table has ``shadowing_db``."""
        return self.table.shadowing_db is not None

    @property
    def has_los(self) -> bool:
        """Whether the table (or, without ``large_scale_gain``, the path loss) has a LOS state."""
        return self.table.los is not None or (
            self.table.large_scale_gain is None and self.base.has_los
        )

    def large_scale(self, frame: int, motion: Kinematics) -> LargeScale:
        """The table's large-scale gain of the frame (or the path loss at the positions)."""
        t = self.table
        if t.large_scale_gain is None:
            drawn = self.base.large_scale(frame, motion)
            los = drawn.los if t.los is None else t.los[frame]
            shadow = None if t.shadowing_db is None else t.shadowing_db[frame]
            return LargeScale(
                drawn.distance_m, drawn.path_loss_db, drawn.gain, drawn.speed_mps, shadow, los
            )
        dist = physics.distance_m(motion.positions_m)
        gain = t.large_scale_gain[frame]
        shadow = None if t.shadowing_db is None else t.shadowing_db[frame]
        pl = -10.0 * fmath.log10(gain) - (0.0 if shadow is None else shadow)
        return LargeScale(
            dist,
            pl,
            gain,
            np.asarray(motion.speed_mps, dtype=np.float64),
            shadow,
            None if t.los is None else t.los[frame],
        )

    def median_gain(self, distance_m: F64) -> F64:
        """The scenario's path-loss gain (the table's gains are checked when it is read)."""
        return self.base.median_gain(distance_m)

    def _slot(self, slot: int, large: LargeScale) -> SlotChannel:
        """The table's gains of ``slot``."""
        return SlotChannel(gain=self.table.gain[slot], seen_gain=self.table.seen_gain[slot])

    def describe(self) -> dict[str, Any]:
        """The table, its columns, the recorded channel's description when it has one."""
        t = self.table
        out: dict[str, Any] = {
            "replay": {
                "file": self.source,
                "columns": list(t.columns),
                "seen_gain": "from the table"
                if "seen_gain" in t.columns
                else "= gain (perfect CSI)",
                "large_scale_gain": "from the table"
                if t.large_scale_gain is not None
                else "the scenario's path loss at the devices' positions",
            },
        }
        base = self.base.describe()
        replaced = ["fading", "shadowing", "csi"]
        if t.large_scale_gain is None:
            out["pathloss"] = base["pathloss"]
        else:
            replaced.insert(0, "pathloss")
        out["replaced_by_the_table"] = {k: base[k] for k in replaced}
        recorded = t.metadata.get("wflsim.channel")
        if recorded is not None:
            try:
                out["recorded_channel"] = json.loads(recorded)
            except json.JSONDecodeError:
                out["recorded_channel"] = "unreadable"
        out["controller_assumption"] = {
            "assumption": CONTROLLER_ASSUMPTION,
            "matches": None,
            "differences": [
                "gains replayed from a table: their law is whatever produced them "
                "(recorded_channel describes a recorded run's channel)"
            ],
            "notes": [],
        }
        return out

    def state_dict(self) -> dict[str, Any]:
        """The base channel's state (odometer and LOS-state process; the table has none)."""
        return {"base": self.base.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.base.load_state_dict(state["base"])
