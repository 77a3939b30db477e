"""Positions replayed from a recorded trace file (CSV or Parquet)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ...errors import ScenarioError
from ...files import open_regular
from .base import (
    CELL_EDGE_RTOL,
    F64,
    Mobility,
    as_positions,
    check_time,
    id_list,
)

#: Columns a trace file must have.
TRACE_COLUMNS: tuple[str, ...] = ("time_s", "device", "x_m", "y_m")


class TraceMobility(Mobility):
    """Positions replayed from a recorded trace.

    Between two samples of a device its position is linearly interpolated in time. Outside the
    recorded range of a device it is **clamped**: before its first sample the device stands at its
    first position, after its last sample at its last position. A device with a single sample
    never moves. Devices may be sampled at different times.

    Args:
        times_s: per device, sample times, shape ``(K_n,)``, seconds, strictly increasing.
        positions_m: per device, positions at those times, shape ``(K_n, 2)``, metres.
    """

    def __init__(self, times_s: Sequence[ArrayLike], positions_m: Sequence[ArrayLike]) -> None:
        if len(times_s) != len(positions_m) or len(times_s) < 1:
            raise ValueError("times_s and positions_m need one entry per device (N >= 1)")
        self._t: list[F64] = []
        self._p: list[F64] = []
        for d, (t, p) in enumerate(zip(times_s, positions_m, strict=True)):
            t = np.asarray(t, dtype=np.float64).reshape(-1)
            p = as_positions(p, f"positions_m[{d}]")
            if t.shape[0] != p.shape[0] or t.shape[0] < 1:
                raise ValueError(f"device {d}: {t.shape[0]} times but {p.shape[0]} positions")
            if not np.isfinite(t).all() or (np.diff(t) <= 0.0).any():
                raise ValueError(f"device {d}: sample times must be finite and strictly increasing")
            self._t.append(t)
            self._p.append(p)
        # per device: path length at each sample (cumulative segment lengths), m
        self._odo = [
            np.concatenate(([0.0], np.cumsum(np.hypot(*np.diff(p, axis=0).T)))) for p in self._p
        ]
        self.num_devices = len(self._t)

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        num_devices: int,
        cell_radius_m: float | None = None,
        field: str = "mobility.file",
    ) -> TraceMobility:
        """Read and validate a trace file (see :func:`read_trace`, :meth:`from_frame`)."""
        return cls.from_frame(
            read_trace(path, field=field),
            num_devices=num_devices,
            cell_radius_m=cell_radius_m,
            field=field,
            source=str(path),
        )

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        num_devices: int,
        cell_radius_m: float | None = None,
        field: str = "mobility.file",
        source: str = "trace",
    ) -> TraceMobility:
        """Validate a trace table and build the model.

        Args:
            frame: columns ``time_s`` (s), ``device`` (integer id in ``0..N-1``), ``x_m``, ``y_m``
                (m); extra columns are ignored; rows in any order.
            num_devices: ``N``; every device ``0..N-1`` must have at least one sample and no
                other id may appear.
            cell_radius_m: if given, every sample must lie within this distance of the server.
            field: dotted scenario field named in errors.
            source: how errors name the trace (its path).

        Raises:
            ScenarioError: missing columns, non-numeric / non-finite values, non-integer or
                unknown device ids, devices without samples, two samples of a device at the same
                time, or samples outside the cell.
        """
        cols, dev = device_table(
            frame, TRACE_COLUMNS, num_devices=num_devices, field=field, source=source
        )
        t, x, y = cols["time_s"], cols["x_m"], cols["y_m"]
        if cell_radius_m is not None:
            outside = np.flatnonzero(np.hypot(x, y) > cell_radius_m * (1.0 + CELL_EDGE_RTOL))
            if outside.size:
                i = int(outside[0])
                raise ScenarioError(
                    field,
                    f"trace {source}: row {i} places its device outside the cell of radius "
                    f"{cell_radius_m} m ({outside.size} sample(s) outside)",
                    "increase the cell radius or fix the trace",
                )
        order = np.lexsort((t, dev))
        dev, t, x, y = dev[order], t[order], x[order], y[order]
        dup = np.flatnonzero((np.diff(dev) == 0) & (np.diff(t) == 0.0))
        if dup.size:
            i = int(dup[0])
            raise ScenarioError(
                field,
                f"trace {source}: rows {int(order[i])} and {int(order[i + 1])} give one device "
                f"two samples at the same time ({dup.size} such pair(s))",
                "keep one sample per device and time",
            )
        bounds = np.searchsorted(dev, np.arange(num_devices + 1))
        times = [t[bounds[d] : bounds[d + 1]] for d in range(num_devices)]
        pos = [
            np.column_stack((x[bounds[d] : bounds[d + 1]], y[bounds[d] : bounds[d + 1]]))
            for d in range(num_devices)
        ]
        return cls(times, pos)

    def positions_m(self, time_s: float) -> F64:
        """Interpolated (clamped outside each device's range) positions, shape ``(N, 2)``, m.

        Cost: ``O(N log K)`` per query (one ``np.interp`` pair per device).
        """
        t = check_time(time_s)
        out = np.empty((self.num_devices, 2))
        for d, (td, pd_) in enumerate(zip(self._t, self._p, strict=True)):
            out[d, 0] = np.interp(t, td, pd_[:, 0])
            out[d, 1] = np.interp(t, td, pd_[:, 1])
        return out

    def speed_mps(self, time_s: float) -> F64:
        """Speed on the segment that starts at or before ``time_s`` and ends after it
        (segment length over its duration), 0 outside each device's recorded range, ``(N,)``, m/s.
        """
        t = check_time(time_s)
        out = np.zeros(self.num_devices)
        for d, (td, pd_) in enumerate(zip(self._t, self._p, strict=True)):
            i = int(np.searchsorted(td, t, side="right")) - 1
            if 0 <= i < td.shape[0] - 1:
                step = pd_[i + 1] - pd_[i]
                out[d] = math.hypot(step[0], step[1]) / (td[i + 1] - td[i])
        return out

    def odometer_m(self, time_s: float) -> F64:
        """Path length along the interpolated (piecewise linear) path from each device's first
        sample to ``time_s`` (0 before it, the whole path after its last sample), ``(N,)``, m."""
        t = check_time(time_s)
        return np.array([np.interp(t, td, od) for td, od in zip(self._t, self._odo, strict=True)])

    def state_dict(self) -> dict[str, Any]:
        """Positions are a function of time only: no state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""


def read_trace(
    path: str | Path, *, field: str = "mobility.file", columns: tuple[str, ...] = TRACE_COLUMNS
) -> pd.DataFrame:
    """Read a trace file (``.csv`` or ``.parquet``) into a DataFrame, unvalidated.

    CSV headers may have spaces after the commas (``time_s, device, x_m, y_m``); ``columns``:
    the columns the trace should have (named in the error for a file that cannot be parsed).

    Raises:
        ScenarioError: the file does not exist, is not a regular file, has another suffix, or
            cannot be parsed.
    """
    p = Path(path)
    if not p.exists():
        raise ScenarioError(
            field,
            f"trace file {p} does not exist",
            "give a path relative to the scenario file's folder, or an absolute path",
        )
    suffix = p.suffix.lower()
    try:
        if suffix == ".csv":
            with open_regular(p, field, "trace", name=True) as f:
                return pd.read_csv(f, skipinitialspace=True)
        if suffix == ".parquet":
            with open_regular(p, field, "trace", name=True) as f:
                return pd.read_parquet(f)
    except ScenarioError:
        raise
    except Exception as exc:  # any parser failure is the user's file
        raise ScenarioError(  # the parser's message may quote the file: only its type is given
            field,
            f"cannot read trace file {p} ({type(exc).__name__})",
            f"give a valid CSV or Parquet file with columns {', '.join(columns)}",
        ) from exc
    raise ScenarioError(
        field,
        f"trace file {p} has suffix {p.suffix!r}; expected .csv or .parquet",
        "convert the trace to CSV or Parquet",
    )


def device_table(
    frame: pd.DataFrame,
    columns: tuple[str, ...],
    *,
    num_devices: int,
    field: str,
    source: str,
    what: str = "trace",
    rows_are: str = "samples",
    may_be_inf: tuple[str, ...] = (),
    renumber_fix: str = "renumber the trace's devices 0..N-1 or change the number of devices",
) -> tuple[dict[str, F64], NDArray[np.int64]]:
    """The checks every per-device trace file gets (mobility and availability traces): the
    columns are there, there are rows, every value of ``columns`` is a number (finite, except
    ``inf`` in ``may_be_inf``; a column of dates or durations is refused, not read as the
    nanoseconds it stores), ``device`` holds integer ids in ``0..num_devices - 1`` and every
    device has a row.

    Args:
        frame: the table as read (:func:`read_trace`).
        columns: the columns required, ``device`` among them.
        num_devices: ``N``.
        field: dotted scenario field named in errors.
        source: how errors name the trace (its path).
        what: how errors call the file (``"trace"``, ``"availability trace"``).
        rows_are: what a row is, for the error of a device without one (``"samples"``).
        may_be_inf: columns that may hold ``inf`` (never NaN).
        renumber_fix: the fix of an unknown device id.

    Returns:
        each column as float64, and the device ids as int64 (row order kept).

    Raises:
        ScenarioError: naming ``field``, the row and the problem.
    """
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ScenarioError(
            field,
            f"{what} {source} lacks column(s) {', '.join(missing)}",
            f"give the trace the columns {', '.join(columns)}",
        )
    if len(frame) == 0:
        raise ScenarioError(field, f"{what} {source} has no rows")
    cols: dict[str, F64] = {}
    for c in columns:
        kind = frame[c].dtype
        if pd.api.types.is_datetime64_any_dtype(kind) or pd.api.types.is_timedelta64_dtype(kind):
            held = "durations" if pd.api.types.is_timedelta64_dtype(kind) else "dates"
            unit = ", e.g. seconds since the trace starts" if c.endswith("_s") else ""
            raise ScenarioError(
                field,
                f"{what} {source}: column {c} holds {held} ({kind}), not numbers",
                f"write {c} as plain numbers{unit}",
            )
        values = pd.to_numeric(frame[c], errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan
        )
        inf_ok = c in may_be_inf
        bad = np.flatnonzero(np.isnan(values) if inf_ok else ~np.isfinite(values))
        if bad.size:
            raise ScenarioError(
                field,
                f"{what} {source}: column {c} has a missing, non-numeric"
                f"{'' if inf_ok else ' or infinite'} value in row {int(bad[0])} "
                f"({bad.size} such row(s))",
            )
        cols[c] = values
    dev_f = cols["device"]
    nonint = np.flatnonzero(dev_f != np.round(dev_f))
    if nonint.size:
        raise ScenarioError(
            field,
            f"{what} {source}: device ids must be integers; row {int(nonint[0])} is not "
            f"({nonint.size} such row(s))",
        )
    dev = dev_f.astype(np.int64)
    present = np.unique(dev)
    unknown = present[(present < 0) | (present >= num_devices)]
    if unknown.size:
        row = int(np.flatnonzero((dev < 0) | (dev >= num_devices))[0])
        raise ScenarioError(
            field,
            f"{what} {source} has {unknown.size} device id(s) outside 0..{num_devices - 1} "
            f"(the scenario's {num_devices} devices), the first in row {row}",
            renumber_fix,
        )
    absent = np.setdiff1d(np.arange(num_devices), present)
    if absent.size:
        raise ScenarioError(
            field,
            f"{what} {source} has no {rows_are} for device(s) {id_list(absent)} "
            f"(the scenario has {num_devices} devices, numbered 0..{num_devices - 1})",
            "add at least one row per device or reduce the number of devices",
        )
    return cols, dev
