"""Public device-availability traces read into wflsim's availability trace
(``wflsim convert-availability``; ``[availability] model = "trace"``, ``docs/scenario.md``).

Two inputs:

* ``fedscale-json``: FedScale's client behaviour trace as JSON, ``{client_id: {"active": [...],
  "inactive": [...], "finish_time": T, ...}}``: client ``c`` is online on ``[active[i],
  inactive[i])`` and the pattern repeats every ``finish_time`` seconds (FedScale takes the time
  modulo ``finish_time``; without it, the period is the last ``inactive`` time). An ``active``
  list longer than ``inactive`` is refused (FedScale cannot play it either); ``inactive``
  entries past the ``active`` ones are ignored (as FedScale does); a pair that does not end
  after it starts is no online time. FedScale ships the trace as a Python pickle; loading a
  pickle runs code, so only JSON is read (``docs/scenario.md``, "[availability]").
* ``state-changes``: a CSV of ``device, time_s, online`` rows (``online`` 1 or 0), each device's
  state from that time on (the last state lasts for ever); the mapping of FLASH's state traces
  to such rows is in ``docs/scenario.md``.

Clients are taken in ascending id order (numeric ids numerically), skipping clients that are
never online, from ``first`` on, and renumbered ``0 .. devices - 1``; ``time_scale`` multiplies
every time; ``until_s`` repeats a FedScale pattern up to that time (default: one period).
Overlapping or touching intervals of a device are joined.

Hostile files: regular files only, at most :data:`MAX_JSON_BYTES` of JSON or
:data:`MAX_INPUT_BYTES` of CSV, JSON nested at most as deep as Python's parser goes (deeper is
an error, not a ``RecursionError``), every time a finite number of at most :data:`MAX_TIME_S`
in magnitude (``NaN``, ``Infinity`` and integers too large for a float are refused), at most
:data:`MAX_ROWS` input rows and :data:`MAX_INTERVALS` output intervals (a repetition that would
make more is refused before it is made), ids of at most :data:`MAX_ID_CHARS` characters. Every
problem is a :class:`~wflsim.sim.errors.ScenarioError` naming the file (or the option) and the
fix; errors never quote the file beyond a shortened id.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ..config.limits import MAX_DEVICES, shorten
from ..errors import ScenarioError
from ..files import read_capped
from .availability import TraceAvailability
from .mobility.formats.reading import MAX_INPUT_BYTES, MAX_TIME_S, within

F64 = NDArray[np.float64]

#: The inputs read, as ``wflsim convert-availability --format`` names them.
FORMATS: tuple[str, ...] = ("fedscale-json", "state-changes")
#: Largest JSON input read, bytes (FedScale's trace is about 100 MB as JSON; parsed, JSON takes
#: several times its size in memory).
MAX_JSON_BYTES = 512 * 1024**2
#: What to do about an input beyond its cap.
_SPLIT = "split it into several files"
#: Most rows (``state-changes``) or online periods (``fedscale-json``) read.
MAX_ROWS = 20_000_000
#: Most intervals written (with FedScale's pattern repeated up to ``until_s``).
MAX_INTERVALS = 20_000_000
#: Longest client or device id, characters.
MAX_ID_CHARS = 256
#: The range of ``--time-scale``.
TIME_SCALE_RANGE = (1e-9, 1e9)
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class Intervals:
    """Each client's online intervals, s: ``starts[c]``, ``ends[c]`` sorted, disjoint, not
    touching (``inf``: online to the end)."""

    starts: dict[str, F64]
    ends: dict[str, F64]

    @property
    def count(self) -> int:
        """Intervals in all."""
        return sum(int(a.shape[0]) for a in self.starts.values())


def _time(value: Any, what: str, source: str) -> float:
    """``value`` (a JSON number) as a time, s, finite and at most :data:`MAX_TIME_S`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(
            source, f"{what} is not a number (got {shorten(repr(value), 30)})", "write seconds"
        )
    return within(float(value), what, source, MAX_TIME_S, "s")


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not a time")


def _merged(starts: F64, ends: F64) -> tuple[F64, F64]:
    """Intervals with overlapping and touching ones joined, sorted; empty ones dropped."""
    keep = ends > starts
    a, b = starts[keep], ends[keep]
    if a.shape[0] == 0:
        return a, b
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    reach = np.maximum.accumulate(b)  # the furthest end so far
    new = np.ones(a.shape[0], dtype=bool)
    new[1:] = a[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], a.shape[0]) - 1
    return a[first], reach[last]


def read_fedscale_json(
    path: str | Path, *, until_s: float | None = None, clients: int | None = None, first: int = 0
) -> Intervals:
    """FedScale's client behaviour trace (JSON) as online intervals (the module docstring),
    repeated every ``finish_time`` up to ``until_s`` (default: one period). Only the clients
    taken (``clients`` from the ``first``-th of those ever online, in id order; None: all) are
    repeated.

    Raises:
        ScenarioError: an unreadable or malformed file, a bad time, or more intervals than
            :data:`MAX_INTERVALS`.
    """
    p = Path(path)
    source = str(path)
    raw = read_capped(p, source, MAX_JSON_BYTES, fix=_SPLIT)
    try:
        trace = json.loads(
            raw.decode("utf-8-sig"),
            parse_int=float,  # 10**400 becomes inf (refused as a time), not an OverflowError
            parse_float=float,
            parse_constant=_no_constant,
        )
    except UnicodeDecodeError:
        raise ScenarioError(source, "is not UTF-8 text", "export the trace as JSON") from None
    except RecursionError:
        raise ScenarioError(
            source,
            "holds arrays or objects nested too deeply to read",
            "give FedScale's layout: {client: {active, inactive, finish_time}}",
        ) from None
    except ValueError as err:  # json.JSONDecodeError, or NaN / Infinity
        what = "NaN or Infinity" if "not a time" in str(err) else "not valid JSON"
        raise ScenarioError(
            source, f"is {what}", "export the trace as JSON with finite numbers"
        ) from None
    if not isinstance(trace, dict):
        raise ScenarioError(
            source, "is not a JSON object of clients", "give {client: {active, inactive, ...}}"
        )
    if len(trace) > MAX_ROWS:
        raise ScenarioError(source, f"has more than {MAX_ROWS:,} clients", "split the trace")
    periods: dict[str, tuple[F64, F64, float]] = {}
    pieces = 0
    for client, entry in trace.items():
        if len(client) > MAX_ID_CHARS:
            raise ScenarioError(
                source, f"a client id is longer than {MAX_ID_CHARS} characters", "shorten the ids"
            )
        where = f"client {shorten(client, 30)!r}"
        if not isinstance(entry, dict):
            raise ScenarioError(
                source, f"{where} is not an object", "give {active: [...], inactive: [...]}"
            )
        active, inactive = entry.get("active"), entry.get("inactive")
        if not isinstance(active, list) or not isinstance(inactive, list):
            raise ScenarioError(
                source, f"{where} lacks the lists active and inactive", "give both, as lists"
            )
        if len(active) > len(inactive):
            raise ScenarioError(
                source,
                f"{where} has {len(active)} active times but {len(inactive)} inactive ones; "
                "every online period needs its end",
                "give an inactive time for every active one",
            )
        pieces += len(active)
        if pieces > MAX_ROWS:
            raise ScenarioError(
                source, f"has more than {MAX_ROWS:,} online periods", "split the trace"
            )
        a = np.array([_time(v, f"{where}: active[{i}]", source) for i, v in enumerate(active)])
        b = np.array([_time(v, f"{where}: inactive[{i}]", source) for i, v in enumerate(inactive)])[
            : len(active)
        ]
        if "finish_time" in entry:
            period = _time(entry["finish_time"], f"{where}: finish_time", source)
        else:
            period = float(max(b, default=0.0))
        periods[str(client)] = (a.astype(np.float64), b.astype(np.float64), period)
    horizon = {c: (period if until_s is None else until_s) for c, (_, _, period) in periods.items()}

    def ever_online(c: str) -> bool:
        a, b, _ = periods[c]
        return bool(np.any((b > a) & (a < horizon[c])))

    taken = [c for c in sorted(periods, key=id_order) if ever_online(c)][first:]
    if clients is not None:
        taken = taken[:clients]
    starts: dict[str, F64] = {}
    ends: dict[str, F64] = {}
    total = 0.0
    for c in taken:
        a, b, period = periods[c]
        keep = (b > a) & (a < horizon[c])
        a, b = a[keep], b[keep]
        if not period > 0.0:
            raise ScenarioError(
                source,
                f"client {shorten(c, 30)!r} has finish_time {period:g} s; its pattern repeats "
                "every finish_time seconds, which must be > 0",
                "give a positive finish_time",
            )
        cycles = horizon[c] / period  # inf for a period too short to count
        total += (math.ceil(cycles) if math.isfinite(cycles) else math.inf) * a.shape[0]
        if not total <= MAX_INTERVALS:
            raise ScenarioError(
                "--until-s" if until_s is not None else source,
                f"repeating the clients' patterns (client {shorten(c, 30)!r}: every "
                f"{period:g} s) up to {horizon[c]:g} s makes more than {MAX_INTERVALS:,} "
                "intervals",
                "give a shorter --until-s, or fewer --devices",
            )
        shift = np.arange(math.ceil(cycles), dtype=np.float64)[:, None] * period
        rep_a = (a[None, :] + shift).ravel()
        rep_b = np.minimum(b[None, :] + shift, horizon[c]).ravel()
        inside = rep_a < horizon[c]
        starts[c], ends[c] = _merged(rep_a[inside], rep_b[inside])
    return Intervals(starts, ends)


def read_state_changes(
    path: str | Path, *, clients: int | None = None, first: int = 0
) -> Intervals:
    """``device, time_s, online`` rows (CSV) as online intervals: a device is online from a row
    with ``online = 1`` (when it was offline) to the next row with ``online = 0``; the last
    state lasts for ever. Only the devices taken (as :func:`read_fedscale_json`) are kept.

    Raises:
        ScenarioError: an unreadable file, missing columns, a bad time or state, too many rows.
    """
    p = Path(path)
    source = str(path)
    raw = read_capped(p, source, MAX_INPUT_BYTES, fix=_SPLIT)
    try:
        frame = pd.read_csv(io.BytesIO(raw), skipinitialspace=True, dtype=str, encoding="utf-8")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise ScenarioError(
            source,
            f"cannot be read as CSV ({type(exc).__name__})",
            "give a CSV with columns device, time_s, online",
        ) from None
    del raw
    missing = [c for c in ("device", "time_s", "online") if c not in frame.columns]
    if missing:
        raise ScenarioError(
            source,
            f"lacks column(s) {', '.join(missing)}",
            "give a CSV with columns device, time_s, online",
        )
    if len(frame) > MAX_ROWS:
        raise ScenarioError(source, f"has more than {MAX_ROWS:,} rows", "split the trace")
    times = pd.to_numeric(frame["time_s"], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    bad = np.flatnonzero(~(np.abs(times) <= MAX_TIME_S))
    if bad.size:
        raise ScenarioError(
            source,
            f"row {int(bad[0]) + 1}: time_s is not a number of at most {MAX_TIME_S:g} s "
            f"({bad.size} such row(s))",
            "write each time as a number of seconds",
        )
    online = pd.to_numeric(frame["online"], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    bad = np.flatnonzero((online != 0.0) & (online != 1.0))
    if bad.size:
        raise ScenarioError(
            source,
            f"row {int(bad[0]) + 1}: online is not 0 or 1 ({bad.size} such row(s))",
            "write online as 1 (online from then on) or 0 (offline)",
        )
    ids = frame["device"].fillna("").str.strip()
    bad = np.flatnonzero(((ids == "") | (ids.str.len() > MAX_ID_CHARS)).to_numpy())
    if bad.size:
        raise ScenarioError(
            source,
            f"row {int(bad[0]) + 1}: the device id is empty or longer than {MAX_ID_CHARS} "
            "characters",
            "give every row a device id",
        )
    rows = pd.DataFrame({"device": ids, "t": times, "on": online == 1.0})
    rows = rows.sort_values(["device", "t"], kind="stable")  # at one time: in the file's order
    dev = rows["device"].to_numpy(dtype=object)
    times, on = rows["t"].to_numpy(np.float64), rows["on"].to_numpy(bool)
    new_device = np.ones(dev.shape[0], dtype=bool)
    new_device[1:] = dev[1:] != dev[:-1]
    bounds = np.append(np.flatnonzero(new_device), dev.shape[0])
    devices = {
        str(dev[lo]): (int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    }
    was_on = np.zeros(on.shape[0], dtype=bool)
    was_on[1:] = on[:-1]
    was_on[new_device] = False
    rising = on & ~was_on
    falling = ~on & was_on

    def intervals(device: str) -> tuple[F64, F64]:
        lo, hi = devices[device]
        t = times[lo:hi]
        up, down = t[rising[lo:hi]], t[falling[lo:hi]]
        if down.shape[0] < up.shape[0]:  # online at the last row: for ever
            down = np.append(down, np.inf)
        return _merged(up, down)

    starts: dict[str, F64] = {}
    ends: dict[str, F64] = {}
    skipped = 0
    for device in sorted(devices, key=id_order):
        if clients is not None and len(starts) >= clients:
            break
        a, b = intervals(device)
        if a.shape[0] == 0:
            continue
        if skipped < first:
            skipped += 1
            continue
        starts[device], ends[device] = a, b
    return Intervals(starts, ends)


def id_order(client: str) -> tuple[int, float, str]:
    """The order clients are taken in: numeric ids numerically (finite decimals), then the
    others as text."""
    text = client.strip()
    if len(text) <= 64 and _DECIMAL.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return (0, value, client)
    return (1, 0.0, client)


def availability_table(
    intervals: Intervals, devices: int, first: int = 0, time_scale: float = 1.0
) -> pd.DataFrame:
    """The availability table (``device, start_s, end_s``) of the first ``devices`` clients of
    ``intervals`` (in the order they hold them; the readers take from ``first`` on), renumbered
    ``0 .. devices - 1``, times multiplied by ``time_scale``; checked as a run reads it
    (:meth:`wflsim.sim.world.availability.TraceAvailability.from_frame`).

    Raises:
        ScenarioError: fewer clients with an online interval than ``devices``, or a table wflsim
            would not read.
    """
    clients = list(intervals.starts)[:devices]
    if len(clients) < devices:
        raise ScenarioError(
            "--devices",
            f"the input has {len(clients)} client(s) with an online interval from --first "
            f"{first}; --devices asks for {devices}",
            "give a smaller --devices or --first",
        )
    count = sum(int(intervals.starts[c].shape[0]) for c in clients)
    if count > MAX_INTERVALS:
        raise ScenarioError(
            "--devices", f"the devices have more than {MAX_INTERVALS:,} intervals", "give fewer"
        )
    device = np.concatenate(
        [np.full(intervals.starts[c].shape[0], i, dtype=np.int64) for i, c in enumerate(clients)]
    )
    with np.errstate(over="ignore"):  # the scale is bounded: times stay finite
        start = np.concatenate([intervals.starts[c] for c in clients]) * time_scale
        end = np.concatenate([intervals.ends[c] for c in clients]) * time_scale
    times = np.concatenate((start, end))
    finite = np.abs(times[np.isfinite(times)])
    if finite.size and float(finite.max()) > MAX_TIME_S:
        largest = float(finite.max()) / time_scale
        raise ScenarioError(
            "--time-scale",
            f"{time_scale:g} makes the time {largest:g} s of the input {largest * time_scale:g} "
            f"s; times may be at most {MAX_TIME_S:g} s (about 317 years)",
            f"give a --time-scale of at most {MAX_TIME_S / largest:.3g}",
        )
    table = pd.DataFrame({"device": device, "start_s": start, "end_s": end})
    TraceAvailability.from_frame(table, num_devices=devices, field="IN", source="(converted)")
    return table


def convert_availability(
    path: str | Path,
    fmt: str,
    *,
    devices: int,
    first: int = 0,
    time_scale: float = 1.0,
    until_s: float | None = None,
) -> pd.DataFrame:
    """Read ``path`` in format ``fmt`` (:data:`FORMATS`) and make the availability table of
    ``wflsim convert-availability`` (:func:`availability_table`).

    Raises:
        ScenarioError: a bad option (naming it) or the reader's errors.
    """
    if fmt not in FORMATS:
        raise ScenarioError(
            "--format", f"unknown format {shorten(fmt, 30)!r}", "give one of " + ", ".join(FORMATS)
        )
    if not 1 <= devices <= MAX_DEVICES:
        raise ScenarioError("--devices", f"must be a whole number in [1, {MAX_DEVICES:,}]")
    if not 0 <= first <= MAX_ROWS:
        raise ScenarioError("--first", f"must be a whole number in [0, {MAX_ROWS:,}]")
    lo, hi = TIME_SCALE_RANGE
    if not (math.isfinite(time_scale) and lo <= time_scale <= hi):
        raise ScenarioError("--time-scale", f"must be a number in [{lo:g}, {hi:g}]")
    if until_s is not None:
        if fmt != "fedscale-json":
            raise ScenarioError(
                "--until-s", "repeats FedScale's pattern: only with --format fedscale-json"
            )
        if not (math.isfinite(until_s) and 0.0 < until_s <= MAX_TIME_S):
            raise ScenarioError("--until-s", f"must be a number of seconds in (0, {MAX_TIME_S:g}]")
    if fmt == "fedscale-json":
        intervals = read_fedscale_json(path, until_s=until_s, clients=devices, first=first)
    else:
        intervals = read_state_changes(path, clients=devices, first=first)
    return availability_table(intervals, devices, first, time_scale)


__all__ = [
    "FORMATS",
    "MAX_ID_CHARS",
    "MAX_INTERVALS",
    "MAX_JSON_BYTES",
    "MAX_ROWS",
    "Intervals",
    "availability_table",
    "convert_availability",
    "id_order",
    "read_fedscale_json",
    "read_state_changes",
]
