"""``wflsim convert-mobility``: a SUMO, ns-2 or BonnMotion mobility trace as wflsim's trace
files (``docs/mobility.md``); ``wflsim convert-availability``: FedScale's client behaviour trace
(JSON) or device state changes (CSV) as an availability trace (``docs/scenario.md``,
"[availability]").

The input is read and converted completely (``wflsim.sim.world.mobility.formats``,
``wflsim.sim.world.availability_formats``) before anything is written; each output is then
written atomically (a hidden temporary file in its folder, fsync, rename), so bad input writes
nothing and an interrupted write leaves no half file. An existing output is replaced only with
``--overwrite``.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from wflsim.sim.config.limits import MAX_DEVICES, path_problem, shorten
from wflsim.sim.errors import ScenarioError
from wflsim.sim.trace import write_atomic
from wflsim.sim.world.availability_formats import FORMATS as AVAILABILITY_FORMATS
from wflsim.sim.world.availability_formats import TIME_SCALE_RANGE, convert_availability
from wflsim.sim.world.mobility.formats import (
    FORMATS,
    MAX_COORDINATE_M,
    Tracks,
    convert_mobility,
)

#: Suffixes an output may have.
_SUFFIXES = (".csv", ".parquet")
#: The fix of an output the system does not let us write.
_ELSEWHERE = "give a path in a folder you may write in"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``convert-mobility`` command to the ``wflsim`` parser's subcommands."""
    p = sub.add_parser(
        "convert-mobility",
        help="convert a SUMO, ns-2 or BonnMotion mobility trace into wflsim's trace files",
        description="Convert a SUMO FCD, ns-2 movement or BonnMotion .movements file into a "
        'mobility trace ([mobility] model = "trace") and, with --availability, an availability '
        'trace ([availability] model = "trace"); docs/mobility.md.',
    )
    p.add_argument("input", metavar="IN", help="the trace to read (plain or gzip)")
    p.add_argument("--format", required=True, choices=FORMATS, help="the input's format")
    p.add_argument("--out", required=True, help="the mobility trace to write (.csv or .parquet)")
    p.add_argument(
        "--availability",
        default=None,
        metavar="OUT_AV",
        help="also write each device's presence as an availability trace (.csv or .parquet)",
    )
    p.add_argument(
        "--ids",
        default=None,
        metavar="OUT_IDS",
        help="also write which device is which (device, kind, id; .csv or .parquet)",
    )
    p.add_argument(
        "--origin",
        default=None,
        metavar="X,Y",
        help="the server's position in the file's coordinates, m (default 0,0: coordinates "
        "kept; negative values as --origin=-5,10)",
    )
    p.add_argument(
        "--center",
        action="store_true",
        help="place the server at the centre of the bounding box of all positions",
    )
    p.add_argument(
        "--step-s",
        default=None,
        metavar="DT",
        help="resample every device at the multiples of DT seconds (default: the file's own "
        "timesteps or waypoints)",
    )
    p.add_argument(
        "--devices", default=None, metavar="N", help="keep the first N devices (default: all)"
    )
    p.add_argument(
        "--dims",
        default=None,
        choices=["2", "3"],
        help="bonnmotion: 2D (t x y) or 3D (t x y z) waypoints (default: from the .params "
        "file beside the input, or from the values per line)",
    )
    p.add_argument(
        "--keep-time",
        action="store_true",
        help="keep the file's times (default: its first time is t = 0)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")


def add_availability_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``convert-availability`` command to the ``wflsim`` parser's subcommands."""
    lo, hi = TIME_SCALE_RANGE
    p = sub.add_parser(
        "convert-availability",
        help="convert FedScale's client behaviour trace or device state changes into an "
        "availability trace",
        description="Convert FedScale's client behaviour trace (exported to JSON) or a CSV of "
        "device state changes (device, time_s, online) into an availability trace "
        '([availability] model = "trace"); docs/scenario.md, [availability].',
    )
    p.add_argument("input", metavar="IN", help="the trace to read")
    p.add_argument(
        "--format", required=True, choices=AVAILABILITY_FORMATS, help="the input's format"
    )
    p.add_argument(
        "--out", required=True, help="the availability trace to write (.csv or .parquet)"
    )
    p.add_argument(
        "--devices",
        required=True,
        metavar="N",
        help="keep N clients that are ever online (in id order, numeric ids numerically), "
        "renumbered 0..N-1",
    )
    p.add_argument(
        "--first", default=None, metavar="K", help="skip the first K such clients (default 0)"
    )
    p.add_argument(
        "--time-scale",
        default=None,
        metavar="S",
        help=f"multiply every time by S, in [{lo:g}, {hi:g}] (e.g. 0.0417 puts a day into an hour)",
    )
    p.add_argument(
        "--until-s",
        default=None,
        metavar="T",
        help="fedscale-json: repeat each client's pattern every finish_time up to T seconds "
        "(default: one period)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")


def _check_path(text: str, flag: str) -> Path:
    problem = path_problem(text)
    if problem is not None:
        raise ScenarioError(flag, f"{problem} (got {shorten(text)!r})", "give a usable path")
    return Path(text)


def _outputs(
    args: argparse.Namespace, source: Path, named: list[tuple[str, str | None]] | None = None
) -> list[tuple[str, Path]]:
    """The output files as ``(flag, path)`` (default: those of ``convert-mobility``), checked:
    a known suffix, distinct, not the input, in an existing folder, and absent unless
    ``--overwrite``."""
    if named is None:
        named = [("--out", args.out), ("--availability", args.availability), ("--ids", args.ids)]
    outputs = [(flag, _check_path(text, flag)) for flag, text in named if text is not None]
    seen = {source.resolve(): "IN"}
    for flag, path in outputs:
        key = path.resolve()
        if key in seen:
            raise ScenarioError(flag, f"is the same file as {seen[key]}", "give another path")
        seen[key] = flag
        if path.suffix.lower() not in _SUFFIXES:
            raise ScenarioError(
                flag, f"{shorten(str(path))!r} must end in .csv or .parquet", "rename it"
            )
        if path.is_dir():
            raise ScenarioError(flag, f"{shorten(str(path))!r} is a folder", "give a file name")
        if path.exists() and not args.overwrite:
            raise ScenarioError(
                flag,
                f"{shorten(str(path))!r} exists",
                "give --overwrite to replace it, or another path",
            )
        if not path.absolute().parent.is_dir():
            raise ScenarioError(
                flag, f"the folder of {shorten(str(path))!r} does not exist", "create it first"
            )
        if not os.access(path.absolute().parent, os.W_OK | os.X_OK):
            raise ScenarioError(
                flag, f"no permission to write in the folder of {shorten(str(path))!r}", _ELSEWHERE
            )
    return outputs


def _origin(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    parts = text.split(",")
    try:
        x, y = (float(p) for p in parts)
    except ValueError:
        x = y = float("nan")
    if not (abs(x) <= MAX_COORDINATE_M and abs(y) <= MAX_COORDINATE_M):
        raise ScenarioError(
            "--origin",
            f"must be two numbers X,Y of metres within {MAX_COORDINATE_M:g} "
            f"(got {shorten(text, 30)!r})",
            "e.g. --origin 500,250 (or --origin=-500,250)",
        )
    return x, y


def _whole(text: str | None, flag: str, default: int) -> int:
    """A whole number ``>= 0`` given as text (``default`` when not given)."""
    if text is None:
        return default
    value = text.strip()
    if not (value.isascii() and value.isdigit() and len(value) <= 12):
        raise ScenarioError(flag, f"must be a whole number >= 0 (got {shorten(text, 30)!r})")
    return int(value)


def _number(text: str | None, flag: str) -> float | None:
    """A finite number given as text (None when not given; its range is checked by the
    converter)."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ScenarioError(flag, f"must be a finite number (got {shorten(text, 30)!r})")
    return value


def _positive(text: str | None, flag: str, kind: type[int] | type[float]) -> float | None:
    if text is None:
        return None
    try:
        value = kind(text)
    except ValueError:
        value = -1
    if not value > 0:
        raise ScenarioError(
            flag, f"must be a positive {'whole ' if kind is int else ''}number (got {text!r})"
        )
    return value


def _write_all(payloads: list[tuple[str, Path, bytes]]) -> None:
    """Write each ``(flag, path, data)`` atomically; a write the system refuses (a read-only
    folder, a full disk, ``/proc``) is the flag's one-line error, and the files this call
    created before it are removed (those it replaced cannot be restored).

    Raises:
        ScenarioError: naming the flag of the file that could not be written.
    """
    created: list[Path] = []
    for flag, path, data in payloads:
        existed = path.exists()
        try:
            write_atomic(path, data)
        except OSError as err:
            for done in created:
                done.unlink(missing_ok=True)
            raise ScenarioError(
                flag,
                f"{shorten(str(path))!r} cannot be written ({err.strerror or type(err).__name__})",
                _ELSEWHERE,
            ) from None
        if not existed:
            created.append(path)


def _encoded(frame: pd.DataFrame, path: Path) -> bytes:
    """``frame`` as the bytes of a CSV (full float precision) or Parquet file."""
    if path.suffix.lower() == ".csv":
        return frame.to_csv(index=False).encode("utf-8")
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def _summary(args: argparse.Namespace, tracks: Tracks) -> str:
    kinds = pd.Series(tracks.kinds).value_counts()
    of = ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in kinds.items())
    n = tracks.num_devices
    line = (
        f"wflsim: {args.format} {args.input} -> {args.out}: {n} device{'s' if n > 1 else ''} "
        f"({of}), {tracks.rows:,} rows, {float(tracks.time_s.min()):g} to "
        f"{float(tracks.time_s.max()):g} s"
    )
    if tracks.time_origin_s != 0.0:
        line += f" (the file's {tracks.time_origin_s:g} s is t = 0)"
    if args.availability is not None:
        line += f"; availability -> {args.availability}: {tracks.start_s.shape[0]:,} intervals"
    if args.ids is not None:
        line += f"; ids -> {args.ids}"
    return line


def convert_command(args: argparse.Namespace) -> int:
    """Run ``wflsim convert-mobility`` (see the module docstring)."""
    source = _check_path(args.input, "IN")
    outputs = _outputs(args, source)
    devices = _positive(args.devices, "--devices", int)
    if devices is not None and devices > MAX_DEVICES:
        raise ScenarioError("--devices", f"must be at most {MAX_DEVICES:,}")
    tracks = convert_mobility(
        source,
        args.format,
        dims=None if args.dims is None else int(args.dims),
        keep_time=args.keep_time,
        devices=None if devices is None else int(devices),
        origin_m=_origin(args.origin),
        center=args.center,
        step_s=_positive(args.step_s, "--step-s", float),
    )
    frames = {
        "--out": tracks.trace_frame,
        "--availability": tracks.availability_frame,
        "--ids": tracks.ids_frame,
    }
    _write_all([(flag, path, _encoded(frames[flag](), path)) for flag, path in outputs])
    print(_summary(args, tracks))
    if args.availability is None and tracks.comes_and_goes():
        print(
            "wflsim: note: some devices enter or leave during the trace; --availability "
            "OUT_AV.csv writes when each is present, so that a run treats it as offline outside",
            file=sys.stderr,
        )
    return 0


def convert_availability_command(args: argparse.Namespace) -> int:
    """Run ``wflsim convert-availability`` (see the module docstring)."""
    source = _check_path(args.input, "IN")
    outputs = _outputs(args, source, [("--out", args.out)])
    devices = _whole(args.devices, "--devices", 0)
    scale = _number(args.time_scale, "--time-scale")
    table = convert_availability(
        source,
        args.format,
        devices=devices,
        first=_whole(args.first, "--first", 0),
        time_scale=1.0 if scale is None else scale,
        until_s=_number(args.until_s, "--until-s"),
    )
    _write_all([(flag, path, _encoded(table, path)) for flag, path in outputs])
    end = table["end_s"].to_numpy()
    finite = end[np.isfinite(end)]
    last = f", the last ending at {float(finite.max()):g} s" if finite.size else ""
    print(
        f"wflsim: {args.format} {args.input} -> {args.out}: {devices} device"
        f"{'s' if devices > 1 else ''}, {len(table):,} interval{'s' if len(table) != 1 else ''}"
        f"{last}"
    )
    return 0
