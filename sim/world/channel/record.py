"""The channel table: every device's channel in every slot, written by a run with
``[channel] record = true`` (``channel/part-NNNNNN.parquet`` in the run folder, one file per
frame next to the events' parts) and read back by ``[channel] replay = "..."``
(:mod:`wflsim.sim.world.channel.replay`), which takes such a folder, a run folder or one Parquet
file.

One row per slot and device. :data:`COLUMNS` is the single source of truth of the layout
(``docs/scenario.md`` documents it; a test checks the two agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from .gains import LargeScale, SlotChannel

#: Version of the table's layout (in the file's metadata, ``wflsim.channel_table_version``).
TABLE_VERSION = "1"

#: name -> (arrow type, unit, required on replay, meaning)
COLUMNS: dict[str, tuple[pa.DataType, str, bool, str]] = {
    "slot": (
        pa.int64(),
        "-",
        True,
        "global slot index t (0-based): frame k holds slots kT .. kT+T-1",
    ),
    "device": (pa.int32(), "-", True, "device index n (0-based)"),
    "large_scale_gain": (
        pa.float64(),
        "linear",
        False,
        "H = 10^(-(PL + S)/10) of the slot's frame (the same in every slot of a frame); replay "
        "without it: H from the scenario's path-loss model at the devices' positions",
    ),
    "shadowing_db": (
        pa.float64(),
        "dB",
        False,
        "shadowing S of the slot's frame (recorded when the channel has shadowing; informative)",
    ),
    "los": (
        pa.bool_(),
        "-",
        False,
        "LOS state of the slot's frame (recorded when the path loss has one; informative)",
    ),
    "gain": (pa.float64(), "linear", True, "channel power gain h the world applies (> 0)"),
    "seen_gain": (
        pa.float64(),
        "linear",
        False,
        "channel power gain the scheme decides on (> 0); replay without it: = gain (perfect CSI)",
    ),
}


def schema(*, shadowing: bool, los: bool) -> pa.Schema:
    """The recorded table's schema: every column, ``shadowing_db`` and ``los`` when present."""
    skip = {n for n, on in (("shadowing_db", shadowing), ("los", los)) if not on}
    return pa.schema([pa.field(n, c[0]) for n, c in COLUMNS.items() if n not in skip])


class ChannelRecorder:
    """Gathers the channel of every slot of a frame; the run folder's writer takes each frame's
    rows as one table (:meth:`take_frame`) and writes it as ``channel/part-NNNNNN.parquet``,
    next to the frame's events part, so the channel table is as crash-safe as the trace.

    Args:
        num_devices: ``N``.
        shadowing: whether to write ``shadowing_db``.
        los: whether to write ``los``.
        metadata: key-value metadata of every part (the channel's description, the seed).
    """

    def __init__(
        self,
        num_devices: int,
        *,
        shadowing: bool,
        los: bool,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        meta = {k.encode(): v.encode() for k, v in (metadata or {}).items()}
        meta[b"wflsim.channel_table_version"] = TABLE_VERSION.encode()
        self.schema = schema(shadowing=shadowing, los=los).with_metadata(meta)
        self._ids = np.arange(int(num_devices), dtype=np.int32)
        self._parts: dict[str, list[np.ndarray]] = {n: [] for n in self.schema.names}

    def add(self, slot: int, large: LargeScale, gains: SlotChannel) -> None:
        """Buffer one slot's rows (``N`` rows, devices in order)."""
        n = self._ids.shape[0]
        values: dict[str, Any] = {
            "slot": np.full(n, slot, dtype=np.int64),
            "device": self._ids,
            "large_scale_gain": large.gain,
            "shadowing_db": large.shadowing_db,
            "los": large.los,
            "gain": gains.gain,
            "seen_gain": gains.seen_gain,
        }
        for name, parts in self._parts.items():
            parts.append(np.asarray(values[name]))

    def take_frame(self) -> pa.Table:
        """The rows buffered since the last call (one frame's slots) as a table; empties the
        buffer."""
        arrays = [
            pa.array(
                np.concatenate(self._parts[f.name])
                if self._parts[f.name]
                else np.empty(0, f.type.to_pandas_dtype()),
                f.type,
            )
            for f in self.schema
        ]
        self._parts = {n: [] for n in self.schema.names}
        return pa.Table.from_arrays(arrays, schema=self.schema)


def markdown_table() -> str:
    """The column table of ``docs/scenario.md``'s channel-table section."""
    lines = ["| column | type | unit | on replay | meaning |", "|---|---|---|---|---|"]
    for name, (typ, unit, required, meaning) in COLUMNS.items():
        need = "required" if required else "optional"
        lines.append(f"| `{name}` | {typ} | {unit} | {need} | {meaning} |")
    return "\n".join(lines)
