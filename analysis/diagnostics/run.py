"""The run the diagnostics read (:mod:`wflsim.analysis.diagnostics`): its events, device-slot
table, scenario and summary (:class:`_Run`), the events and trace columns the checks read, and
the device-slot outcomes built from a trace (pandas) or a run folder's table (Arrow)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..io import event_codes
from ..tidy import plain_dtypes


@dataclass(frozen=True)
class _Server:
    """The ``[server]`` fields the checks read, from the trace's resolved scenario (defaults as
    ``docs/scenario.md`` gives them)."""

    mode: str = "sync"
    buffer_size: int = 1
    server_lr: float = 1.0

    @classmethod
    def of(cls, table: Mapping[str, Any]) -> _Server:
        return cls(
            str(table.get("mode", "sync")),
            int(table.get("buffer_size", 1)),
            float(table.get("server_lr", 1.0)),
        )

    def step_ratio(self, devices_cycling: float) -> float:
        """The step per applied update over the synchronous server's: 1 (``sync``),
        ``server_lr`` (``semi_sync``), ``server_lr N / buffer_size`` (``async``); the closed form
        ``ServerConfig.step_ratio`` derives (a test checks the two agree)."""
        if self.mode == "sync":
            return 1.0
        if self.mode == "semi_sync":
            return self.server_lr
        return self.server_lr * float(devices_cycling) / float(self.buffer_size)


@dataclass
class _Run:
    """What the checks read: the run's events, device-slot table, scenario and summary."""

    events: pd.DataFrame
    device_slots: pd.DataFrame
    scenario: Mapping[str, Any]
    summary: Mapping[str, Any]

    def get(self, dotted: str, default: Any = None) -> Any:
        """The scenario's value at ``dotted`` (``default`` if absent)."""
        value: Any = self.scenario
        for part in dotted.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return default
            value = value[part]
        return value

    @property
    def server(self) -> _Server:
        return _Server.of(self.get("server", {}) or {})

    @property
    def num_devices(self) -> int:
        return int(self.get("network.num_devices", 0) or 0)

    def rows(self, *names: str) -> pd.DataFrame:
        ev = self.events
        return ev[ev["event"].isin(names).to_numpy()]

    @property
    def learning(self) -> bool:
        return bool(self.get("learning.enabled", True))

    @property
    def uplink_mode(self) -> str:
        return str(self.get("uplink.mode", "dedicated") or "dedicated")

    @property
    def planned_k(self) -> int:
        return int(self.get("uplink.planned_concurrent_uploads", 1) or 1)

    @property
    def deadline_s(self) -> float:
        return float(self.get("run.deadline_s", 0.0) or 0.0)

    def co_band_on_noise(self) -> bool:
        """Whether cells share a band while the plan sees the noise alone (``cells.plan_on =
        "noise"``, the default): the interference of the co-band cells is left out of every
        required power, so uploads planned to end at the deadline end after it."""
        cells = self.get("cells")
        if not isinstance(cells, Mapping) or cells.get("plan_on", "noise") != "noise":
            return False
        return _co_band(cells)


def _co_band(cells: Mapping[str, Any]) -> bool:
    """Whether two cells of a ``[cells]`` table share a band: explicit ``bands`` with a repeat;
    else more cells than the reuse factor's bands (the hexagonal layouts: ``1 + 3 R (R + 1)``
    cells of ``R`` rings, or the ``sites_m`` given)."""
    bands = cells.get("bands")
    if bands:
        return len(set(bands)) < len(bands)
    sites = cells.get("sites_m")
    if sites:
        count = len(sites)
    else:
        rings = int(cells.get("rings") or 0)
        count = 1 + 3 * rings * (rings + 1)
    return count > int(cells.get("reuse_factor", 1) or 1)


def _uploads(run: _Run) -> tuple[int, int]:
    """``(uploads, arrived)``: participations not lost to a drop, and those that succeeded."""
    ds = run.device_slots
    tried = ds["participating"] & ~ds["dropped"]
    return int(tried.sum()), int((tried & ds["success"]).sum())


def _online_fraction(run: _Run) -> float:
    value = run.summary.get("available_fraction") if run.summary else None
    try:
        return float(value) if value is not None else 1.0
    except (TypeError, ValueError):
        return 1.0


#: The events the checks read (a run folder is read filtered to them).
DIAGNOSED_EVENTS = (
    "device_config",
    "decision",
    "energy",
    "device_slot",
    "aggregate",
    "flush",
    "eval",
    "compute_end",
    "upload_start",
    "upload_end",
    "dropped",
)


#: The trace columns the checks read (a run folder is read with only these).
DIAGNOSED_COLUMNS = (
    "time_s",
    "slot",
    "device",
    "participating",
    "success",
    "dropped",
    "available",
    "n_success",
    "loss",
    "accuracy",
    "gamma",
    "min_tx_power_w",
    "max_tx_power_w",
    "peak_power_w",
    "cycles_per_sample",
    "batch_size",
    "cpu_hz",
    "num_samples",
    "ns3_tx_dbm",
    "ns3_loss_db",
)


def device_slot_outcomes(events: pd.DataFrame) -> pd.DataFrame:
    """One row per device and slot: ``slot``, ``device``, ``participating``, ``success``,
    ``dropped`` (from the ``energy`` rows, or the ``device_slot`` rows of ``[trace] level =
    "device_slots"``) and ``available`` (from the slot's first ``decision`` row, or its
    ``device_slot`` row; True where the trace has none: always online). Bools, no nulls."""
    ev = events
    name = "device_slot" if bool((ev["event"] == "device_slot").any()) else "energy"
    cols = ["slot", "device", "participating", "success", "dropped"]
    out = plain_dtypes(ev.loc[(ev["event"] == name).to_numpy(), cols + ["available"]])
    if name == "energy":
        dec = plain_dtypes(
            ev.loc[(ev["event"] == "decision").to_numpy(), ["slot", "device", "available"]]
        )
        dec = dec.drop_duplicates(["slot", "device"], keep="first")
        out = out[cols].merge(dec, on=["slot", "device"], how="left")
    for c, default in (
        ("participating", False),
        ("success", False),
        ("dropped", False),
        ("available", True),
    ):
        out[c] = out[c].astype("boolean").fillna(default).astype(bool)
    return out.reset_index(drop=True)


#: The events whose rows :func:`device_slot_outcomes` reads (one per device and slot or more).
_PER_DEVICE_EVENTS = ("decision", "energy", "device_slot")
#: The decision rows are looked up in a dense (slot, device) grid when it has at most this many
#: cells per row read (else by sorting their keys).
_DENSE_FACTOR = 4
#: The events only the shared-uplink check reads.
_UPLOAD_EVENTS = ("compute_end", "upload_start", "upload_end")


def device_slot_outcomes_arrow(
    table: pa.Table, codes: tuple[np.ndarray, list[str]] | None = None
) -> pd.DataFrame:
    """:func:`device_slot_outcomes` of an events table (Arrow) holding at least the
    ``device_slot`` rows, or the ``energy`` and ``decision`` rows: the same DataFrame (the
    rows of the ``device_slot`` or ``energy`` events in trace order), built with numpy.
    ``codes``: the table's :func:`~wflsim.analysis.io.event_codes`, if already computed."""
    code, names = codes if codes is not None else event_codes(table["event"])

    def rows(which: str, cols: list[str]) -> pa.Table:
        mask = code == (names.index(which) if which in names else -1)
        return table.select([c for c in cols if c in table.column_names]).filter(pa.array(mask))

    def ints(t: pa.Table, c: str) -> np.ndarray:
        return t[c].to_numpy().astype(np.int64, copy=False)

    def flags(t: pa.Table, c: str, default: bool) -> np.ndarray:
        if c not in t.column_names:
            return np.full(t.num_rows, default)
        return pc.fill_null(t[c], default).to_numpy().astype(bool, copy=False)

    name = (
        "device_slot"
        if "device_slot" in names and bool((code == names.index("device_slot")).any())
        else "energy"
    )
    main = rows(name, ["slot", "device", "participating", "success", "dropped", "available"])
    slot, device = ints(main, "slot"), ints(main, "device")
    out = {
        "slot": slot,
        "device": device,
        "participating": flags(main, "participating", False),
        "success": flags(main, "success", False),
        "dropped": flags(main, "dropped", False),
    }
    if name == "device_slot":
        available = flags(main, "available", True)
    else:  # the slot's first decision row of the device; True where there is none
        dec = rows("decision", ["slot", "device", "available"])
        d_slot, d_dev = ints(dec, "slot"), ints(dec, "device")
        available = np.ones(slot.shape, dtype=bool)
        if d_slot.size and slot.size:
            lo = int(min(slot.min(), d_slot.min()))
            span = int(max(device.max(), d_dev.max())) + 1
            size = (int(max(slot.max(), d_slot.max())) - lo + 1) * span
            d_key = (d_slot - lo) * span + d_dev
            key = (slot - lo) * span + device
            d_avail = flags(dec, "available", True)
            if size <= _DENSE_FACTOR * (slot.size + d_slot.size):  # a (slot, device) grid
                first = np.full(size, d_slot.size, dtype=np.int64)
                np.minimum.at(first, d_key, np.arange(d_slot.size))
                at = first[key]
                hit = at < d_slot.size
                available[hit] = d_avail[at[hit]]
            else:
                keys, first_at = np.unique(d_key, return_index=True)
                pos = np.minimum(np.searchsorted(keys, key), keys.size - 1)
                hit = keys[pos] == key
                available[hit] = d_avail[first_at[pos[hit]]]
    out["available"] = np.asarray(available, dtype=bool)
    return pd.DataFrame(out)
