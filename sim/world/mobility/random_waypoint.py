"""Random waypoint mobility in a disc, exact in continuous time."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ... import fmath
from .base import F64, Mobility, as_positions, check_time

#: Legs drawn at a time per device by :class:`RandomWaypoint`. The paths do not depend on it
#: (draws and time sums are sequential), it only trades memory for Python overhead.
_LEGS_PER_BLOCK = 32


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
        pos = as_positions(initial_positions_m, "initial_positions_m")
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
        t0 = check_time(start_time_s)

        self.num_devices = n
        self.radius_m = float(radius_m)
        self.speed_range_mps = (lo, hi)
        self.pause_s = float(pause_s)
        self._rngs = list(rngs)
        self._k = int(legs_per_block)
        self._last_time_s = t0

        # Per-device leg blocks: start/end points (K, 2), start/end times (K,), move times (K,).
        self._blocks: list[dict[str, F64]] = []
        # Where each device's current block came from (its state): the generator state before
        # the block was drawn, the block's start point and start time.
        self._block_rng: list[dict[str, Any]] = [{} for _ in range(n)]
        self._block_start_m = np.empty((n, 2))
        self._block_start_s = np.empty(n)
        self._block_start_odo_m = np.empty(n)
        # Current leg of every device, gathered for the vectorised evaluation.
        self._from = np.empty((n, 2))
        self._to = np.empty((n, 2))
        self._t_start = np.empty(n)
        self._t_move = np.empty(n)
        self._t_end = np.empty(n)
        self._speed = np.empty(n)  # the leg's walking speed, m/s
        self._odo_start = np.empty(n)  # odometer at the leg's start, m
        self._length = np.empty(n)  # the leg's length, m
        self._leg = np.zeros(n, dtype=np.int64)
        for d in range(n):
            self._blocks.append(self._new_block(d, pos[d], t0, 0.0))
            self._set_current(d, 0)

    # -- internals ---------------------------------------------------------------------------

    def _new_block(
        self, device: int, start_m: F64, start_time_s: float, start_odometer_m: float
    ) -> dict[str, F64]:
        """The next ``K`` legs of ``device``, starting at ``start_m`` at ``start_time_s`` with
        ``start_odometer_m`` metres walked before."""
        self._block_rng[device] = dict(self._rngs[device].bit_generator.state)
        self._block_start_m[device] = start_m
        self._block_start_s[device] = start_time_s
        self._block_start_odo_m[device] = start_odometer_m
        u = self._rngs[device].random((self._k, 3))
        r = self.radius_m * np.sqrt(u[:, 0])
        ang = 2.0 * np.pi * u[:, 1]
        to = np.column_stack((r * fmath.cos(ang), r * fmath.sin(ang)))
        lo, hi = self.speed_range_mps
        speed = lo + (hi - lo) * u[:, 2]
        frm = np.vstack((np.asarray(start_m, dtype=np.float64)[None, :], to[:-1]))
        length = np.hypot(to[:, 0] - frm[:, 0], to[:, 1] - frm[:, 1])
        with np.errstate(over="ignore"):  # a speed so low that the leg never ends: inf
            t_move = length / speed
        # Sequential accumulation (np.cumsum is a running sum), so block boundaries do not
        # change the end times (nor the odometer).
        t_end = np.cumsum(np.concatenate(([start_time_s], t_move + self.pause_s)))
        odo = np.cumsum(np.concatenate(([start_odometer_m], length)))
        return {
            "from": frm,
            "to": to,
            "t_start": t_end[:-1],
            "t_move": t_move,
            "t_end": t_end[1:],
            "speed": speed,
            "length": length,
            "odo_start": odo[:-1],
            "odo_end": odo[1:],
        }

    def _set_current(self, device: int, leg: int) -> None:
        b = self._blocks[device]
        self._leg[device] = leg
        self._from[device] = b["from"][leg]
        self._to[device] = b["to"][leg]
        self._t_start[device] = b["t_start"][leg]
        self._t_move[device] = b["t_move"][leg]
        self._t_end[device] = b["t_end"][leg]
        self._speed[device] = b["speed"][leg]
        self._odo_start[device] = b["odo_start"][leg]
        self._length[device] = b["length"][leg]

    def _next_leg(self, device: int) -> None:
        """Make the leg after the current one current (drawing the next block if needed)."""
        leg = int(self._leg[device]) + 1
        b = self._blocks[device]
        if leg == b["t_end"].shape[0]:
            self._blocks[device] = self._new_block(
                device, b["to"][-1], float(b["t_end"][-1]), float(b["odo_end"][-1])
            )
            leg = 0
        self._set_current(device, leg)

    def _seek(self, device: int, time_s: float) -> None:
        """Make the current leg of ``device`` the one with ``t_start < time_s <= t_end``."""
        b = self._blocks[device]
        while time_s > b["t_end"][-1]:
            b = self._new_block(device, b["to"][-1], float(b["t_end"][-1]), float(b["odo_end"][-1]))
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
        t = self._advance(time_s)
        frac = self._fraction(t)
        moving = self._from + frac[:, None] * (self._to - self._from)
        return np.where(frac[:, None] >= 1.0, self._to, moving)

    def speed_mps(self, time_s: float) -> F64:
        """The speed each device walks on with from ``time_s``, ``(N,)``, m/s: its leg's speed
        while it walks, 0 while it pauses at a waypoint; a device whose pause (or leg, without
        pauses) ends exactly at ``time_s`` is on its next leg.

        Raises:
            ValueError: ``time_s`` is NaN or earlier than the previous query.
        """
        t = self._advance(time_s)
        for d in np.flatnonzero(t >= self._t_end):  # the current leg ends now: the next one
            self._next_leg(int(d))
        walking = (self._t_start <= t) & (t < self._t_start + self._t_move)
        return np.where(walking, self._speed, 0.0)

    def odometer_m(self, time_s: float) -> F64:
        """Path length walked from the start to ``time_s``, ``(N,)``, metres: the legs before the
        current one plus the walked part of the current leg.

        Raises:
            ValueError: ``time_s`` is NaN or earlier than the previous query.
        """
        t = self._advance(time_s)
        frac = self._fraction(t)
        return np.where(
            frac >= 1.0, self._odo_start + self._length, self._odo_start + frac * self._length
        )

    def _advance(self, time_s: float) -> float:
        """Check ``time_s`` and make every device's current leg the one that holds it."""
        t = check_time(time_s)
        if t < self._last_time_s:
            raise ValueError(
                f"RandomWaypoint queried at {t} s after {self._last_time_s} s; "
                "query times must be non-decreasing"
            )
        self._last_time_s = t
        for d in np.flatnonzero(t > self._t_end):
            self._seek(int(d), t)
        return t

    def _fraction(self, t: float) -> F64:
        """How much of its current leg each device has walked at ``t``, in ``[0, 1]``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = (t - self._t_start) / self._t_move
        return np.where(self._t_move > 0.0, np.clip(frac, 0.0, 1.0), 1.0)

    # -- state -------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Per device: the generator state before its current block of legs was drawn, the
        block's start point (m), time (s) and odometer (m), and the current leg; plus the last
        query time."""
        states = [s["state"] for s in self._block_rng]
        return {
            "last_time_s": self._last_time_s,
            "leg": self._leg.copy(),
            "block_start_m": self._block_start_m.copy(),
            "block_start_s": self._block_start_s.copy(),
            "block_start_odometer_m": self._block_start_odo_m.copy(),
            "rng_state": _split128([s["state"] for s in states]),
            "rng_inc": _split128([s["inc"] for s in states]),
            "rng_has_uint32": np.array([s["has_uint32"] for s in self._block_rng], np.int64),
            "rng_uinteger": np.array([s["uinteger"] for s in self._block_rng], np.uint64),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Redraw every device's current block from its saved generator state and origin."""
        n = self.num_devices
        leg = np.asarray(state["leg"], dtype=np.int64)
        if leg.shape != (n,):
            raise ValueError(f"mobility state is for {leg.shape[0]} devices, this model has {n}")
        st, inc = _join128(state["rng_state"]), _join128(state["rng_inc"])
        start_m = np.asarray(state["block_start_m"], dtype=np.float64)
        start_s = np.asarray(state["block_start_s"], dtype=np.float64)
        start_odo = np.asarray(state["block_start_odometer_m"], dtype=np.float64)
        for d in range(n):
            self._rngs[d].bit_generator.state = {
                "bit_generator": "PCG64",
                "state": {"state": st[d], "inc": inc[d]},
                "has_uint32": int(state["rng_has_uint32"][d]),
                "uinteger": int(state["rng_uinteger"][d]),
            }
            self._blocks[d] = self._new_block(d, start_m[d], float(start_s[d]), float(start_odo[d]))
            self._set_current(d, int(leg[d]))
        self._last_time_s = float(state["last_time_s"])


def _split128(values: list[int]) -> NDArray[np.uint64]:
    """128-bit integers as ``(N, 2)`` ``uint64`` words (high, low)."""
    return np.array([[v >> 64, v & (2**64 - 1)] for v in values], dtype=np.uint64).reshape(-1, 2)


def _join128(words: ArrayLike) -> list[int]:
    """Inverse of :func:`_split128`."""
    return [(int(hi) << 64) | int(lo) for hi, lo in np.asarray(words, dtype=np.uint64)]
