"""Device mobility: where every device is at a given simulated time.

Devices live in a disc of radius ``cell_radius_m`` around the server at ``(0, 0)``; positions are
in metres, times in seconds. The engine asks for positions at frame boundaries only (distances and
large-scale gains change at frame boundaries), with non-decreasing times.

Models (``[mobility]`` table of a scenario, :class:`MobilityConfig`):

* ``static``: devices never move (:class:`StaticMobility`).
* ``random_waypoint``: each device walks in straight lines to waypoints drawn uniformly (by area)
  in the disc, at a speed drawn uniformly in ``speed_mps`` for each leg, and pauses ``pause_s`` at
  each waypoint (:class:`RandomWaypoint`). Exact in continuous time.
* ``trace``: positions read from a CSV or Parquet file with columns ``time_s, device, x_m, y_m``,
  linearly interpolated in time per device and held at the first / last sample outside the
  recorded range (:class:`TraceMobility`).

Initial positions (``static`` and ``random_waypoint``) are either uniform by area in the annulus
``[min_distance_m, cell_radius_m]`` (:func:`uniform_disc_positions_m`) or given explicitly.

Randomness (see :mod:`sim.rng`): device ``n`` draws its initial position from
``streams.device("placement", n)`` and its waypoints from ``streams.device("mobility", n)``, so
adding a device never changes the positions or paths of the others.

Waypoints are *not* kept out of the inner ``min_distance_m`` disc: a device may walk close to (or
through) the server; the path-loss function clips distances below ``min_distance_m``
(:func:`sim.physics.path_loss_db`). Explicit positions and trace positions closer than
``min_distance_m`` are accepted for the same reason.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from sim.errors import ScenarioError
from sim.rng import Streams

F64 = NDArray[np.float64]

#: Relative slack when checking that a position lies inside the cell (absorbs float rounding of
#: positions written with a few digits, e.g. a device exactly on the cell edge).
_CELL_EDGE_RTOL = 1e-9

#: Columns a trace file must have.
TRACE_COLUMNS: tuple[str, ...] = ("time_s", "device", "x_m", "y_m")

#: Legs drawn at a time per device by :class:`RandomWaypoint`. The paths do not depend on it
#: (draws and time sums are sequential), it only trades memory for Python overhead.
_LEGS_PER_BLOCK = 32


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


class MobilityConfig(BaseModel):
    """The ``[mobility]`` table of a scenario.

    Attributes:
        model: ``"static"``, ``"random_waypoint"`` or ``"trace"``.
        placement: initial positions for ``static`` and ``random_waypoint``: ``"uniform_disc"``
            (uniform by area in the annulus ``[min_distance_m, cell_radius_m]``) or ``"explicit"``
            (``positions_m``). Not used by ``trace`` (which must keep ``"uniform_disc"``, the
            default).
        positions_m: explicit initial positions ``[[x, y], ...]`` in metres, one per device
            (required iff ``placement = "explicit"``; the count is checked against the number of
            devices by :func:`build_mobility`).
        speed_mps: random waypoint: ``(lo, hi)`` in m/s, ``0 < lo <= hi``; each leg's speed is
            uniform in ``[lo, hi]``.
        pause_s: random waypoint: pause at each waypoint, seconds, ``>= 0``.
        clock: when positions are read at frame ``k``: ``"nominal"`` at ``k T tau_0`` (the same
            instant for every scheme, so schemes compare on the same channels even when some
            stretch their slots), or ``"simulated"`` at the frame's actual start time.
        file: trace: path of a ``.csv`` or ``.parquet`` file with columns
            ``time_s, device, x_m, y_m`` (required iff ``model = "trace"``); a relative path is
            resolved against the scenario file's folder.
    """

    model_config = ConfigDict(extra="forbid")

    model: Literal["static", "random_waypoint", "trace"] = "static"
    placement: Literal["uniform_disc", "explicit"] = "uniform_disc"
    positions_m: list[tuple[float, float]] | None = None
    speed_mps: tuple[float, float] = (0.5, 1.5)
    pause_s: float = 0.0
    file: str | None = None
    clock: Literal["nominal", "simulated"] = "nominal"

    @field_validator("speed_mps")
    @classmethod
    def _check_speed(cls, value: tuple[float, float]) -> tuple[float, float]:
        lo, hi = value
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"speed_mps must be finite (lo, hi) in m/s; got ({lo}, {hi})")
        if not 0.0 < lo <= hi:
            raise ValueError(
                f"speed_mps must be (lo, hi) with 0 < lo <= hi, in m/s; got ({lo}, {hi})"
            )
        return value

    @field_validator("pause_s")
    @classmethod
    def _check_pause(cls, value: float) -> float:
        if not (math.isfinite(value) and value >= 0.0):
            raise ValueError(f"pause_s must be a finite number of seconds >= 0; got {value}")
        return value

    @field_validator("positions_m")
    @classmethod
    def _check_positions(
        cls, value: list[tuple[float, float]] | None
    ) -> list[tuple[float, float]] | None:
        if value is None:
            return value
        if len(value) == 0:
            raise ValueError("positions_m must list one [x, y] pair (metres) per device; got []")
        for i, (x, y) in enumerate(value):
            if not (math.isfinite(x) and math.isfinite(y)):
                raise ValueError(f"positions_m[{i}] must be finite metres; got [{x}, {y}]")
        return value

    @field_validator("file")
    @classmethod
    def _check_file(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("file must be a non-empty path to a .csv or .parquet trace")
        return value

    @model_validator(mode="after")
    def _check_combinations(self) -> MobilityConfig:
        if self.placement == "explicit" and self.positions_m is None:
            raise ValueError(
                'placement = "explicit" needs positions_m = [[x, y], ...] (metres, one per device)'
            )
        if self.placement != "explicit" and self.positions_m is not None:
            raise ValueError(
                f'positions_m is given but placement = "{self.placement}"; '
                'set placement = "explicit" or remove positions_m'
            )
        if self.model == "trace" and self.file is None:
            raise ValueError('model = "trace" needs file = "<path to a .csv or .parquet trace>"')
        if self.model != "trace" and self.file is not None:
            raise ValueError(
                f'file is given but model = "{self.model}"; set model = "trace" or remove file'
            )
        if self.model == "trace" and self.placement == "explicit":
            raise ValueError(
                'placement = "explicit" has no effect with model = "trace" (the trace gives the '
                "positions); remove placement and positions_m"
            )
        return self


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class Mobility(ABC):
    """Positions of ``num_devices`` devices as a function of simulated time.

    Callers query with non-decreasing times (the engine does, at frame boundaries).
    :class:`StaticMobility` and :class:`TraceMobility` accept any order;
    :class:`RandomWaypoint` raises ``ValueError`` when time goes backwards.
    """

    num_devices: int

    @abstractmethod
    def positions_m(self, time_s: float) -> F64:
        """Device positions at ``time_s`` (seconds).

        Returns:
            a new array of shape ``(num_devices, 2)``, ``float64``, metres; row ``n`` is device
            ``n``'s ``(x, y)`` relative to the server at ``(0, 0)``.
        """


def _as_positions(positions_m: ArrayLike, what: str = "positions_m") -> F64:
    pos = np.array(positions_m, dtype=np.float64)
    if pos.ndim != 2 or pos.shape[1] != 2 or pos.shape[0] < 1:
        raise ValueError(f"{what} must have shape (N, 2) with N >= 1; got {pos.shape}")
    if not np.isfinite(pos).all():
        raise ValueError(f"{what} must be finite")
    return pos


def _check_time(time_s: float) -> float:
    t = float(time_s)
    if math.isnan(t):
        raise ValueError("time_s must not be NaN")
    return t


class StaticMobility(Mobility):
    """Devices that never move.

    Args:
        positions_m: shape ``(N, 2)``, metres.
    """

    def __init__(self, positions_m: ArrayLike) -> None:
        self._pos = _as_positions(positions_m)
        self._pos.setflags(write=False)
        self.num_devices = int(self._pos.shape[0])

    def positions_m(self, time_s: float) -> F64:
        """The fixed positions, shape ``(N, 2)``, metres (``time_s`` is ignored)."""
        _check_time(time_s)
        return self._pos.copy()


class RandomWaypoint(Mobility):
    """Random waypoint model in a disc, exact in continuous time.

    Each device walks legs one after another, starting at ``start_time_s`` from its initial
    position (no initial pause). A leg is: draw a waypoint uniformly (by area) in the disc of
    radius ``radius_m``, walk to it in a straight line at a constant speed drawn uniformly in
    ``[speed_lo, speed_hi]``, then stand still for ``pause_s``. The next leg starts at the end of
    the pause.

    Draws (the reproducibility contract; never reorder): each leg takes three consecutive
    ``rng.random()`` doubles ``u0, u1, u2`` from the device's generator; waypoint
    ``R sqrt(u0) (cos 2 pi u1, sin 2 pi u1)``, speed ``lo + (hi - lo) u2``.

    Time advances from the last queried time to the new one: positions are evaluated for all
    devices at once; only devices whose current leg ends within the interval enter a Python loop,
    which jumps over any number of legs (legs are generated per device in blocks, their end times
    accumulated sequentially, and the block holding the query time found by binary search). The
    result depends only on the generators and the query time, never on how often or at which
    earlier times the model was queried.

    Args:
        initial_positions_m: shape ``(N, 2)``, metres (inside the disc).
        radius_m: disc radius ``R``, metres, ``> 0``.
        speed_mps: ``(lo, hi)``, m/s, ``0 < lo <= hi``.
        pause_s: pause at each waypoint, seconds, ``>= 0``.
        rngs: one generator per device (``streams.device("mobility", n)``); consumed.
        start_time_s: time at which the devices start walking, seconds.
    """

    def __init__(
        self,
        initial_positions_m: ArrayLike,
        radius_m: float,
        speed_mps: tuple[float, float],
        pause_s: float,
        rngs: Sequence[np.random.Generator],
        *,
        start_time_s: float = 0.0,
        legs_per_block: int = _LEGS_PER_BLOCK,
    ) -> None:
        pos = _as_positions(initial_positions_m, "initial_positions_m")
        n = int(pos.shape[0])
        if len(rngs) != n:
            raise ValueError(f"need one generator per device: {n} devices, {len(rngs)} generators")
        if not (math.isfinite(radius_m) and radius_m > 0.0):
            raise ValueError(f"radius_m must be finite and > 0; got {radius_m}")
        lo, hi = float(speed_mps[0]), float(speed_mps[1])
        if not (math.isfinite(hi) and 0.0 < lo <= hi):
            raise ValueError(f"speed_mps must satisfy 0 < lo <= hi < inf; got ({lo}, {hi})")
        if not (math.isfinite(pause_s) and pause_s >= 0.0):
            raise ValueError(f"pause_s must be finite and >= 0; got {pause_s}")
        if legs_per_block < 1:
            raise ValueError("legs_per_block must be >= 1")
        t0 = _check_time(start_time_s)

        self.num_devices = n
        self.radius_m = float(radius_m)
        self.speed_mps = (lo, hi)
        self.pause_s = float(pause_s)
        self._rngs = list(rngs)
        self._k = int(legs_per_block)
        self._last_time_s = t0

        # Per-device leg blocks: start/end points (K, 2), start/end times (K,), move times (K,).
        self._blocks: list[dict[str, F64]] = []
        # Current leg of every device, gathered for the vectorised evaluation.
        self._from = np.empty((n, 2))
        self._to = np.empty((n, 2))
        self._t_start = np.empty(n)
        self._t_move = np.empty(n)
        self._t_end = np.empty(n)
        self._leg = np.zeros(n, dtype=np.int64)
        for d in range(n):
            self._blocks.append(self._new_block(d, pos[d], t0))
            self._set_current(d, 0)

    # -- internals ---------------------------------------------------------------------------

    def _new_block(self, device: int, start_m: F64, start_time_s: float) -> dict[str, F64]:
        """The next ``K`` legs of ``device``, starting at ``start_m`` at ``start_time_s``."""
        u = self._rngs[device].random((self._k, 3))
        r = self.radius_m * np.sqrt(u[:, 0])
        ang = 2.0 * np.pi * u[:, 1]
        to = np.column_stack((r * np.cos(ang), r * np.sin(ang)))
        lo, hi = self.speed_mps
        speed = lo + (hi - lo) * u[:, 2]
        frm = np.vstack((np.asarray(start_m, dtype=np.float64)[None, :], to[:-1]))
        t_move = np.hypot(to[:, 0] - frm[:, 0], to[:, 1] - frm[:, 1]) / speed
        # Sequential accumulation (np.cumsum is a running sum), so block boundaries do not
        # change the end times.
        t_end = np.cumsum(np.concatenate(([start_time_s], t_move + self.pause_s)))
        return {
            "from": frm,
            "to": to,
            "t_start": t_end[:-1],
            "t_move": t_move,
            "t_end": t_end[1:],
        }

    def _set_current(self, device: int, leg: int) -> None:
        b = self._blocks[device]
        self._leg[device] = leg
        self._from[device] = b["from"][leg]
        self._to[device] = b["to"][leg]
        self._t_start[device] = b["t_start"][leg]
        self._t_move[device] = b["t_move"][leg]
        self._t_end[device] = b["t_end"][leg]

    def _seek(self, device: int, time_s: float) -> None:
        """Make the current leg of ``device`` the one with ``t_start < time_s <= t_end``."""
        b = self._blocks[device]
        while time_s > b["t_end"][-1]:
            b = self._new_block(device, b["to"][-1], float(b["t_end"][-1]))
            self._blocks[device] = b
        leg = int(np.searchsorted(b["t_end"], time_s, side="left"))
        self._set_current(device, leg)

    # -- public ------------------------------------------------------------------------------

    def positions_m(self, time_s: float) -> F64:
        """Positions at ``time_s`` (seconds, ``>=`` the previous query and the start time).

        Returns:
            shape ``(N, 2)``, metres.

        Raises:
            ValueError: ``time_s`` is NaN or earlier than the previous query.
        """
        t = _check_time(time_s)
        if t < self._last_time_s:
            raise ValueError(
                f"RandomWaypoint queried at {t} s after {self._last_time_s} s; "
                "query times must be non-decreasing"
            )
        self._last_time_s = t
        for d in np.flatnonzero(t > self._t_end):
            self._seek(int(d), t)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = (t - self._t_start) / self._t_move
        frac = np.where(self._t_move > 0.0, np.clip(frac, 0.0, 1.0), 1.0)
        moving = self._from + frac[:, None] * (self._to - self._from)
        return np.where(frac[:, None] >= 1.0, self._to, moving)


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
            p = _as_positions(p, f"positions_m[{d}]")
            if t.shape[0] != p.shape[0] or t.shape[0] < 1:
                raise ValueError(f"device {d}: {t.shape[0]} times but {p.shape[0]} positions")
            if not np.isfinite(t).all() or (np.diff(t) <= 0.0).any():
                raise ValueError(f"device {d}: sample times must be finite and strictly increasing")
            self._t.append(t)
            self._p.append(p)
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
        missing = [c for c in TRACE_COLUMNS if c not in frame.columns]
        if missing:
            raise ScenarioError(
                field,
                f"trace {source} lacks column(s) {', '.join(missing)}; "
                f"found {', '.join(map(str, frame.columns)) or 'none'}",
                f"give the trace the columns {', '.join(TRACE_COLUMNS)}",
            )
        if len(frame) == 0:
            raise ScenarioError(field, f"trace {source} has no rows")
        cols: dict[str, F64] = {}
        for c in TRACE_COLUMNS:
            values = pd.to_numeric(frame[c], errors="coerce").to_numpy(
                dtype=np.float64, na_value=np.nan
            )
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                raise ScenarioError(
                    field,
                    f"trace {source}: column {c} has a missing, non-numeric or infinite value "
                    f"in row {int(bad[0])} ({frame[c].iloc[int(bad[0])]!r})",
                )
            cols[c] = values
        dev_f = cols["device"]
        nonint = np.flatnonzero(dev_f != np.round(dev_f))
        if nonint.size:
            raise ScenarioError(
                field,
                f"trace {source}: device ids must be integers; row {int(nonint[0])} has "
                f"{dev_f[nonint[0]]}",
            )
        dev = dev_f.astype(np.int64)
        present = np.unique(dev)
        unknown = present[(present < 0) | (present >= num_devices)]
        if unknown.size:
            raise ScenarioError(
                field,
                f"trace {source} has device(s) {_id_list(unknown)} but the scenario has "
                f"{num_devices} devices, numbered 0..{num_devices - 1}",
                "renumber the trace's devices 0..N-1 or change the number of devices",
            )
        absent = np.setdiff1d(np.arange(num_devices), present)
        if absent.size:
            raise ScenarioError(
                field,
                f"trace {source} has no samples for device(s) {_id_list(absent)} "
                f"(the scenario has {num_devices} devices, numbered 0..{num_devices - 1})",
                "add at least one row per device or reduce the number of devices",
            )
        t, x, y = cols["time_s"], cols["x_m"], cols["y_m"]
        if cell_radius_m is not None:
            outside = np.flatnonzero(np.hypot(x, y) > cell_radius_m * (1.0 + _CELL_EDGE_RTOL))
            if outside.size:
                i = int(outside[0])
                raise ScenarioError(
                    field,
                    f"trace {source}: device {dev[i]} at t = {t[i]} s is at ({x[i]}, {y[i]}) m, "
                    f"{math.hypot(x[i], y[i]):.6g} m from the server, outside the cell of radius "
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
                f"trace {source}: device {dev[i]} has two samples at t = {t[i]} s",
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
        t = _check_time(time_s)
        out = np.empty((self.num_devices, 2))
        for d, (td, pd_) in enumerate(zip(self._t, self._p, strict=True)):
            out[d, 0] = np.interp(t, td, pd_[:, 0])
            out[d, 1] = np.interp(t, td, pd_[:, 1])
        return out


def _id_list(ids: ArrayLike, limit: int = 20) -> str:
    ids = [int(i) for i in np.asarray(ids).reshape(-1)]
    text = ", ".join(map(str, ids[:limit]))
    if len(ids) > limit:
        text += f", ... ({len(ids)} in all)"
    return text


def read_trace(path: str | Path, *, field: str = "mobility.file") -> pd.DataFrame:
    """Read a trace file (``.csv`` or ``.parquet``) into a DataFrame, unvalidated.

    CSV headers may have spaces after the commas (``time_s, device, x_m, y_m``).

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
    if not p.is_file():
        raise ScenarioError(field, f"trace path {p} is not a file")
    suffix = p.suffix.lower()
    try:
        if suffix == ".csv":
            return pd.read_csv(p, skipinitialspace=True)
        if suffix == ".parquet":
            return pd.read_parquet(p)
    except Exception as exc:  # any parser failure is the user's file
        raise ScenarioError(
            field,
            f"cannot read trace file {p}: {type(exc).__name__}: {exc}",
            "give a valid CSV or Parquet file with columns time_s, device, x_m, y_m",
        ) from exc
    raise ScenarioError(
        field,
        f"trace file {p} has suffix {p.suffix!r}; expected .csv or .parquet",
        "convert the trace to CSV or Parquet",
    )


# --------------------------------------------------------------------------------------------
# Placement and construction
# --------------------------------------------------------------------------------------------


def uniform_disc_positions_m(
    num_devices: int,
    radius_m: float,
    min_distance_m: float,
    rngs: Sequence[np.random.Generator],
) -> F64:
    """Positions uniform by area in the annulus ``min_distance_m <= r <= radius_m``.

    Device ``n`` uses only ``rngs[n]`` (``streams.device("placement", n)``): two doubles
    ``u0, u1``; radius ``sqrt(r_min^2 + u0 (R^2 - r_min^2))`` (radial CDF
    ``(r^2 - r_min^2) / (R^2 - r_min^2)``), angle ``2 pi u1``.

    Args:
        num_devices: ``N >= 1``.
        radius_m: outer radius ``R``, metres.
        min_distance_m: inner radius ``r_min``, metres, ``0 <= r_min <= R``.
        rngs: ``N`` generators, one per device.

    Returns:
        shape ``(N, 2)``, ``float64``, metres.
    """
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1; got {num_devices}")
    if len(rngs) != num_devices:
        raise ValueError(f"need one generator per device: {num_devices} devices, {len(rngs)}")
    if not (0.0 <= min_distance_m <= radius_m and math.isfinite(radius_m)):
        raise ValueError(
            f"need 0 <= min_distance_m <= radius_m < inf; got {min_distance_m}, {radius_m}"
        )
    u = np.array([rng.random(2) for rng in rngs], dtype=np.float64).reshape(num_devices, 2)
    r2_min = min_distance_m * min_distance_m
    r = np.sqrt(r2_min + u[:, 0] * (radius_m * radius_m - r2_min))
    r = np.clip(r, min_distance_m, radius_m)  # guard against rounding at the edges
    ang = 2.0 * np.pi * u[:, 1]
    return np.column_stack((r * np.cos(ang), r * np.sin(ang)))


def _initial_positions(
    cfg: MobilityConfig,
    *,
    num_devices: int,
    cell_radius_m: float,
    min_distance_m: float,
    streams: Streams,
) -> F64:
    if cfg.placement == "explicit":
        assert cfg.positions_m is not None  # guaranteed by MobilityConfig
        if len(cfg.positions_m) != num_devices:
            raise ScenarioError(
                "mobility.positions_m",
                f"{len(cfg.positions_m)} positions given for {num_devices} devices",
                "give exactly one [x, y] pair (metres) per device",
            )
        pos = np.asarray(cfg.positions_m, dtype=np.float64).reshape(num_devices, 2)
        dist = np.hypot(pos[:, 0], pos[:, 1])
        outside = np.flatnonzero(dist > cell_radius_m * (1.0 + _CELL_EDGE_RTOL))
        if outside.size:
            i = int(outside[0])
            raise ScenarioError(
                "mobility.positions_m",
                f"device(s) {_id_list(outside)} lie outside the cell of radius {cell_radius_m} m "
                f"(device {i} at ({pos[i, 0]}, {pos[i, 1]}) m is {dist[i]:.6g} m from the server)",
                "move them inside the cell or increase the cell radius",
            )
        return pos
    if min_distance_m >= cell_radius_m:
        raise ScenarioError(
            "mobility.placement",
            f'placement = "uniform_disc" needs the cell radius ({cell_radius_m} m) to exceed the '
            f"minimum distance ({min_distance_m} m)",
            "increase the cell radius or decrease the minimum distance",
        )
    return uniform_disc_positions_m(
        num_devices, cell_radius_m, min_distance_m, streams.devices("placement", num_devices)
    )


def build_mobility(
    cfg: MobilityConfig,
    *,
    num_devices: int,
    cell_radius_m: float,
    min_distance_m: float,
    streams: Streams,
    base_dir: Path | None = None,
) -> Mobility:
    """Build the mobility model of a scenario, validating everything up front.

    Args:
        cfg: the ``[mobility]`` table.
        num_devices: ``N >= 1``.
        cell_radius_m: cell radius ``R``, metres, ``> 0``.
        min_distance_m: minimum device-server distance, metres, ``>= 0`` (inner radius of the
            uniform placement; waypoints and explicit / trace positions may be closer).
        streams: the run's random streams (``"placement"`` and ``"mobility"``, per device).
        base_dir: folder against which a relative ``cfg.file`` is resolved (the scenario file's
            folder); ``None``: the current directory.

    Returns:
        a :class:`StaticMobility`, :class:`RandomWaypoint` or :class:`TraceMobility`.

    Raises:
        ScenarioError: with field ``mobility.positions_m`` (wrong count, outside the cell),
            ``mobility.placement`` (cell radius not above the minimum distance) or
            ``mobility.file`` (missing / unreadable file, missing columns, bad values, devices
            missing from or unknown to the scenario, duplicate samples, samples outside the cell).
        ValueError: ``num_devices``, ``cell_radius_m`` or ``min_distance_m`` out of range (the
            scenario schema owns and validates those fields).
    """
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1; got {num_devices}")
    if not (math.isfinite(cell_radius_m) and cell_radius_m > 0.0):
        raise ValueError(f"cell_radius_m must be finite and > 0; got {cell_radius_m}")
    if not (math.isfinite(min_distance_m) and min_distance_m >= 0.0):
        raise ValueError(f"min_distance_m must be finite and >= 0; got {min_distance_m}")

    if cfg.model == "trace":
        assert cfg.file is not None  # guaranteed by MobilityConfig
        path = Path(cfg.file).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        return TraceMobility.from_file(
            path, num_devices=num_devices, cell_radius_m=cell_radius_m, field="mobility.file"
        )

    pos = _initial_positions(
        cfg,
        num_devices=num_devices,
        cell_radius_m=cell_radius_m,
        min_distance_m=min_distance_m,
        streams=streams,
    )
    if cfg.model == "static":
        return StaticMobility(pos)
    return RandomWaypoint(
        pos,
        cell_radius_m,
        cfg.speed_mps,
        cfg.pause_s,
        streams.devices("mobility", num_devices),
    )
