"""Convert a public device-availability trace into wflsim's availability file.

wflsim reads online intervals, one row per interval: ``device, start_s, end_s`` (CSV or
Parquet; ``[availability] model = "trace"``, docs/scenario.md). Two inputs are understood:

* ``fedscale-json``: FedScale's client behaviour trace as JSON, ``{client_id: {"active": [...],
  "inactive": [...], "finish_time": T, ...}}``: client ``c`` is online on ``[active[i],
  inactive[i])`` and the pattern repeats every ``finish_time`` seconds (FedScale takes the time
  modulo ``finish_time``). FedScale ships this trace as a Python pickle; loading a pickle runs
  code, so this script does not read one: export it to JSON once, yourself, from a copy you
  trust (docs/scenario.md, "[availability]").
* ``state-changes``: a CSV of ``device, time_s, online`` rows (``online`` 1 or 0), each device's
  state from that time on; the mapping of FLASH's state traces (screen, charging, network
  messages per user) to such rows is in docs/scenario.md.

Clients are taken in ascending id order (numeric ids numerically), skipping clients that are
never online, from ``--first`` on, and renumbered ``0 .. --devices - 1``; ``--time-scale``
multiplies every time (e.g. to compress a day into a simulated hour); ``--until-s`` repeats a
FedScale pattern up to that time (default: one period).

Usage::

    python scenarios/churn/convert_availability.py fedscale-json client_behave_trace.json \\
        availability.csv --devices 100 --until-s 86400
    python scenarios/churn/convert_availability.py state-changes states.csv availability.csv \\
        --devices 50

Nothing is written if the input is malformed; the error names the input and exits with code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: Largest input this script reads (the FedScale trace is about 100 MB as JSON).
MAX_INPUT_BYTES = 2 * 1024**3


class ConvertError(ValueError):
    """A malformed input (printed as one line, exit code 2)."""


def _sort_key(client: str) -> tuple[int, float, str]:
    try:
        return (0, float(client), client)
    except ValueError:
        return (1, 0.0, client)


def fedscale_intervals(
    trace: dict[str, Any], until_s: float | None = None
) -> dict[str, list[tuple[float, float]]]:
    """Each client's online intervals from FedScale's layout, repeated every ``finish_time`` up
    to ``until_s`` (default: one period), s."""
    out: dict[str, list[tuple[float, float]]] = {}
    for client, entry in trace.items():
        if not isinstance(entry, dict):
            raise ConvertError(f"client {client!r}: expected an object with active/inactive")
        try:
            active = [float(x) for x in entry["active"]]
            inactive = [float(x) for x in entry["inactive"]]
            period = float(entry.get("finish_time", max(inactive, default=0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConvertError(f"client {client!r}: active/inactive/finish_time: {exc}") from None
        if len(inactive) < len(active):  # FedScale ends an open last period at finish_time
            inactive = inactive + [period] * (len(active) - len(inactive))
        pieces = [(a, b) for a, b in zip(active, inactive, strict=False) if b > a]
        if any(not (math.isfinite(a) and math.isfinite(b)) for a, b in pieces):
            raise ConvertError(f"client {client!r}: times must be finite")
        horizon = period if until_s is None else until_s
        repeated: list[tuple[float, float]] = []
        if pieces and period > 0:
            for k in range(int(math.ceil(horizon / period))):
                for a, b in pieces:
                    start, end = a + k * period, min(b + k * period, horizon)
                    if start < horizon and end > start:
                        repeated.append((start, end))
        out[str(client)] = _merged(repeated)
    return out


def state_change_intervals(frame: pd.DataFrame) -> dict[str, list[tuple[float, float]]]:
    """Each device's online intervals from ``device, time_s, online`` rows (the last state lasts
    for ever)."""
    missing = [c for c in ("device", "time_s", "online") if c not in frame.columns]
    if missing:
        raise ConvertError(f"state changes lack column(s) {', '.join(missing)}")
    times = pd.to_numeric(frame["time_s"], errors="coerce")
    online = pd.to_numeric(frame["online"], errors="coerce")
    if times.isna().any() or online.isna().any() or not online.isin([0, 1]).all():
        raise ConvertError("state changes: time_s must be numbers and online 0 or 1")
    df = pd.DataFrame(
        {"device": frame["device"].astype(str), "t": times.astype(float), "on": online == 1}
    )
    out: dict[str, list[tuple[float, float]]] = {}
    for device, rows in df.sort_values(["device", "t"], kind="stable").groupby("device"):
        pieces, since = [], None
        for t, on in zip(rows["t"], rows["on"], strict=True):
            if on and since is None:
                since = t
            elif not on and since is not None:
                pieces.append((since, t))
                since = None
        if since is not None:
            pieces.append((since, math.inf))
        out[str(device)] = _merged([(a, b) for a, b in pieces if b > a])
    return out


def _merged(pieces: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted intervals with overlapping and touching ones merged."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(pieces):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def to_table(
    intervals: dict[str, list[tuple[float, float]]],
    devices: int,
    first: int = 0,
    time_scale: float = 1.0,
) -> pd.DataFrame:
    """The availability table of ``devices`` clients with intervals, from the ``first``-th on
    (ascending ids), renumbered ``0 .. devices - 1``, times multiplied by ``time_scale``."""
    clients = [c for c in sorted(intervals, key=_sort_key) if intervals[c]][first:]
    if len(clients) < devices:
        raise ConvertError(
            f"the input has {len(clients)} clients with an online interval from --first {first}; "
            f"--devices asks for {devices}"
        )
    rows = [
        (i, a * time_scale, b * time_scale)
        for i, c in enumerate(clients[:devices])
        for a, b in intervals[c]
    ]
    return pd.DataFrame(rows, columns=["device", "start_s", "end_s"]).astype(
        {"device": np.int64, "start_s": np.float64, "end_s": np.float64}
    )


def _read_input(kind: str, path: Path) -> dict[str, list[tuple[float, float]]]:
    if not path.is_file():
        raise ConvertError(f"{path} is not a file")
    if path.stat().st_size > MAX_INPUT_BYTES:
        raise ConvertError(f"{path} is larger than {MAX_INPUT_BYTES} bytes")
    if kind == "fedscale-json":
        try:
            trace = json.loads(path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConvertError(f"{path} is not JSON ({type(exc).__name__})") from None
        if not isinstance(trace, dict):
            raise ConvertError(f"{path}: expected an object of clients")
        return trace  # type: ignore[return-value]
    try:
        return state_change_intervals(pd.read_csv(path, skipinitialspace=True))
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise ConvertError(f"cannot read {path} as CSV ({type(exc).__name__})") from None


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["fedscale-json", "state-changes"])
    parser.add_argument("input", type=Path)
    parser.add_argument("output", type=Path, help="a .csv or .parquet file")
    parser.add_argument("--devices", type=int, required=True, help="devices to keep")
    parser.add_argument("--first", type=int, default=0, help="skip this many clients first")
    parser.add_argument("--time-scale", type=float, default=1.0, help="multiply every time")
    parser.add_argument("--until-s", type=float, default=None, help="repeat FedScale's pattern")
    args = parser.parse_args(argv)
    try:
        if args.devices < 1 or args.first < 0:
            raise ConvertError("--devices must be >= 1 and --first >= 0")
        if not (math.isfinite(args.time_scale) and args.time_scale > 0):
            raise ConvertError("--time-scale must be a positive number")
        if args.until_s is not None and not (math.isfinite(args.until_s) and args.until_s > 0):
            raise ConvertError("--until-s must be a positive number")
        if args.output.suffix not in (".csv", ".parquet"):
            raise ConvertError(f"{args.output}: the output must end in .csv or .parquet")
        raw = _read_input(args.kind, args.input)
        intervals = (
            fedscale_intervals(raw, args.until_s) if args.kind == "fedscale-json" else raw  # type: ignore[arg-type]
        )
        table = to_table(intervals, args.devices, args.first, args.time_scale)
    except ConvertError as err:
        print(f"convert_availability: {err}", file=sys.stderr)
        return 2
    if args.output.suffix == ".csv":
        table.to_csv(args.output, index=False)
    else:
        table.to_parquet(args.output, index=False)
    print(f"{len(table)} intervals of {args.devices} devices -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
