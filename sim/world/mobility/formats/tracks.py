"""What a converted trace is (:class:`Tracks`: samples and presence per device) and the choices
applied to it: the first N devices, where the server stands, resampling on a grid."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ....config.limits import shorten
from ....errors import ScenarioError
from ...availability import AVAILABILITY_COLUMNS
from ..base import F64
from ..config import MAX_POSITION_M
from ..trace import TRACE_COLUMNS
from .reading import I64, MAX_SAMPLES, MAX_TIME_S, first_true


@dataclass(frozen=True)
class Tracks:
    """Devices' positions over time and their presence, in wflsim's terms.

    Devices are numbered ``0..N-1`` (each reader states its order). Samples are sorted by device,
    then time; each device's times strictly increase.

    Attributes:
        fmt: the format read (:data:`~wflsim.sim.world.mobility.formats.FORMATS`).
        kinds: per device, what the file calls it (``"vehicle"``, ``"person"``, ``"node"``).
        ids: per device, its id in the file (SUMO id, ns-2 node number, BonnMotion node index).
        time_s: sample times, s, ``(M,)``.
        device: sample devices, ``(M,)``.
        x_m: sample x positions, m, ``(M,)``.
        y_m: sample y positions, m, ``(M,)``.
        present_device: the device of each presence interval, ``(K,)``.
        start_s: presence interval starts, s, ``(K,)``.
        end_s: presence interval ends, s (exclusive; ``inf``: present to the end), ``(K,)``.
        time_origin_s: the file's time that is ``t = 0`` here, s.
    """

    fmt: str
    kinds: tuple[str, ...]
    ids: tuple[str, ...]
    time_s: F64
    device: I64
    x_m: F64
    y_m: F64
    present_device: I64
    start_s: F64
    end_s: F64
    time_origin_s: float = 0.0

    @property
    def num_devices(self) -> int:
        """``N``."""
        return len(self.ids)

    @property
    def rows(self) -> int:
        """Samples ``M``."""
        return int(self.time_s.shape[0])

    def comes_and_goes(self) -> bool:
        """Whether some device is absent for part of the time: it appears after the first
        sample, leaves before the end, or leaves and returns."""
        first = float(self.time_s.min())
        single = np.bincount(self.present_device, minlength=self.num_devices) == 1
        return not (
            bool(single.all())
            and bool(np.isinf(self.end_s).all())
            and bool((self.start_s <= first).all())
        )

    def trace_frame(self) -> pd.DataFrame:
        """The mobility trace: columns ``time_s, device, x_m, y_m``
        (``[mobility] model = "trace"``)."""
        return pd.DataFrame(
            dict(zip(TRACE_COLUMNS, (self.time_s, self.device, self.x_m, self.y_m), strict=True))
        )

    def availability_frame(self) -> pd.DataFrame:
        """The presence intervals as an availability trace: columns ``device, start_s, end_s``
        (``[availability] model = "trace"``)."""
        values = (self.present_device, self.start_s, self.end_s)
        return pd.DataFrame(dict(zip(AVAILABILITY_COLUMNS, values, strict=True)))

    def ids_frame(self) -> pd.DataFrame:
        """Which device is which: columns ``device, kind, id``."""
        return pd.DataFrame(
            {"device": np.arange(self.num_devices), "kind": self.kinds, "id": self.ids}
        )


def first_devices(tracks: Tracks, count: int) -> Tracks:
    """The first ``count`` devices of ``tracks`` (in its numbering).

    Raises:
        ScenarioError: ``--devices`` beyond the number of devices.
    """
    if not 1 <= count <= tracks.num_devices:
        raise ScenarioError(
            "--devices",
            f"asks for {count} devices; the trace has {tracks.num_devices}",
            f"give --devices in [1, {tracks.num_devices}]",
        )
    keep = tracks.device < count
    stay = tracks.present_device < count
    return replace(
        tracks,
        kinds=tracks.kinds[:count],
        ids=tracks.ids[:count],
        time_s=tracks.time_s[keep],
        device=tracks.device[keep],
        x_m=tracks.x_m[keep],
        y_m=tracks.y_m[keep],
        present_device=tracks.present_device[stay],
        start_s=tracks.start_s[stay],
        end_s=tracks.end_s[stay],
    )


def center_of(tracks: Tracks) -> tuple[float, float]:
    """The centre of the bounding box of every sample, m."""
    return (
        0.5 * (float(tracks.x_m.min()) + float(tracks.x_m.max())),
        0.5 * (float(tracks.y_m.min()) + float(tracks.y_m.max())),
    )


def shifted(tracks: Tracks, origin_m: tuple[float, float]) -> Tracks:
    """``tracks`` with the point ``origin_m`` of the file's coordinates (m) moved to the
    server at ``(0, 0)``.

    Raises:
        ScenarioError: a position then farther than ``MAX_POSITION_M`` from the server on an
            axis (on ``--origin``, with the fix).
    """
    x = tracks.x_m - origin_m[0]
    y = tracks.y_m - origin_m[1]
    i = first_true(np.maximum(np.abs(x), np.abs(y)) > MAX_POSITION_M)
    if i is not None:
        d = int(tracks.device[i])
        raise ScenarioError(
            "--origin",
            f"device {d} ({tracks.kinds[d]} {shorten(tracks.ids[d], 30)!r}) is at "
            f"({x[i]:.6g}, {y[i]:.6g}) m from the server at {tracks.time_s[i]:g} s; positions "
            f"must lie within {MAX_POSITION_M:g} m of it on each axis",
            "place the server with --origin X,Y (in the file's coordinates) or --center",
        )
    return replace(tracks, x_m=x, y_m=y)


def resampled(tracks: Tracks, step_s: float) -> Tracks:
    """Each device's path (linear between its samples) sampled at the multiples of ``step_s``
    (s) within its own time span, plus its first and last samples.

    Raises:
        ScenarioError: ``--step-s`` not a positive number, or making more than
            :data:`MAX_SAMPLES` rows.
    """
    if not (math.isfinite(step_s) and 0.0 < step_s <= MAX_TIME_S):
        raise ScenarioError(
            "--step-s", f"must be a number of seconds in (0, {MAX_TIME_S:g}]; got {step_s:g}"
        )
    bounds = np.searchsorted(tracks.device, np.arange(tracks.num_devices + 1))
    lo, hi = tracks.time_s[bounds[:-1]], tracks.time_s[bounds[1:] - 1]
    with np.errstate(over="ignore", invalid="ignore"):  # a step so short is refused below
        k_lo, k_hi = np.ceil(lo / step_s), np.floor(hi / step_s)
        rows = float(np.maximum(k_hi - k_lo + 1, 0).sum()) + 2 * tracks.num_devices
    if not rows <= MAX_SAMPLES:  # NaN too: a step so short that the grid overflows
        many = f"{rows:,.0f}" if rows < 1e15 else "more than 1e15"
        raise ScenarioError(
            "--step-s",
            f"{step_s:g} s makes {many} rows; at most {MAX_SAMPLES:,} are written",
            "give a longer step",
        )
    columns: tuple[list[F64], list[I64], list[F64], list[F64]] = ([], [], [], [])
    for d in range(tracks.num_devices):
        a, b = bounds[d], bounds[d + 1]
        t, x, y = tracks.time_s[a:b], tracks.x_m[a:b], tracks.y_m[a:b]
        grid = np.arange(k_lo[d], k_hi[d] + 1) * step_s
        grid = np.unique(np.concatenate(([t[0]], grid[(grid >= t[0]) & (grid <= t[-1])], [t[-1]])))
        columns[0].append(grid)
        columns[1].append(np.full(grid.shape[0], d, dtype=np.int64))
        columns[2].append(np.interp(grid, t, x))
        columns[3].append(np.interp(grid, t, y))
    return replace(
        tracks,
        time_s=np.concatenate(columns[0]),
        device=np.concatenate(columns[1]),
        x_m=np.concatenate(columns[2]),
        y_m=np.concatenate(columns[3]),
    )
