"""Reading a trace file safely: regular files only, bounded sizes (decompressed ones too), lines
of UTF-8 text, and numbers that are finite decimals within bounds; every problem a
:class:`~wflsim.sim.errors.ScenarioError` naming the file and the line."""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ....config.limits import shorten
from ....errors import ScenarioError
from ....files import open_regular
from ..base import F64

I64 = NDArray[np.int64]

#: Largest input read, bytes (after decompression for gzip files): a SUMO trace of 1,000
#: vehicles sampled every second for 4 hours is about 1.5 GB of XML.
MAX_INPUT_BYTES = 2 * 1024**3
#: Most samples (rows of the converted trace) a file may give: 20 million rows are about 700 MB
#: of CSV.
MAX_SAMPLES = 20_000_000
#: Longest SUMO id, characters.
MAX_ID_CHARS = 256
#: Largest time, s, in magnitude (about 317 years).
MAX_TIME_S = 1e10
#: Largest coordinate in a file, m, in magnitude (projected coordinates, such as UTM's, are
#: below 1e7 m); converted positions must lie within ``MAX_POSITION_M`` of the server.
MAX_COORDINATE_M = 1e9
#: Largest BonnMotion ``.params`` file read, bytes.
MAX_PARAMS_BYTES = 1024**2
#: Longest number read, characters.
MAX_NUMBER_CHARS = 64
_CHUNK_BYTES = 1024**2
#: Longest line read, bytes (a BonnMotion line holds all of a node's waypoints: about 8 million
#: of them at 32 bytes each).
MAX_LINE_BYTES = 256 * 1024**2
_GZIP_MAGIC = b"\x1f\x8b"
#: A decimal number (what SUMO, ns-2 and BonnMotion write; no nan, inf, hex or underscores).
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?")


def chunks(path: Path, source: str) -> Iterator[bytes]:
    """The file's bytes (decompressed if it is gzip), in chunks, at most
    :data:`MAX_INPUT_BYTES` of them."""
    limit = f"at most {MAX_INPUT_BYTES:,} bytes are read"
    with open_regular(path, source, "trace") as f:
        if os.fstat(f.fileno()).st_size > MAX_INPUT_BYTES:
            raise ScenarioError(source, f"the trace is too large ({limit})", "split the trace")
        gz = f.peek(2)[:2] == _GZIP_MAGIC  # type: ignore[attr-defined]
        stream: BinaryIO = gzip.GzipFile(fileobj=f, mode="rb") if gz else f  # type: ignore[assignment]
        total = 0
        while True:
            try:
                chunk = stream.read(_CHUNK_BYTES)
            except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
                raise ScenarioError(
                    source,
                    f"cannot be read ({type(exc).__name__}: a damaged or truncated "
                    f"{'gzip ' if gz else ''}file)",
                    "give the file as the tool wrote it",
                ) from None
            if not chunk:
                return
            total += len(chunk)
            if total > MAX_INPUT_BYTES:
                raise ScenarioError(
                    source, f"the trace decompresses to too many bytes ({limit})", "split the trace"
                )
            yield chunk


def decode_line(raw: bytes, lineno: int, source: str) -> str:
    """Line ``lineno`` of ``source`` as text (UTF-8; a byte-order mark and a trailing carriage
    return removed)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(
            source, f"line {lineno} is not UTF-8 text", "save the file as UTF-8 (or ASCII) text"
        ) from None
    if lineno == 1:
        text = text.removeprefix("\ufeff")
    return text.removesuffix("\r")


def text_lines(path: Path, source: str) -> Iterator[tuple[int, str]]:
    """The file's lines with their numbers (from 1), decoded as UTF-8."""
    pending: list[bytes] = []  # the line in progress (a long line spans chunks)
    pending_bytes = 0
    lineno = 0
    for chunk in chunks(path, source):
        parts = chunk.split(b"\n")
        if len(parts) == 1:
            pending.append(chunk)
            pending_bytes += len(chunk)
            if pending_bytes > MAX_LINE_BYTES:
                raise ScenarioError(
                    source,
                    f"line {lineno + 1} is longer than {MAX_LINE_BYTES:,} bytes",
                    "give the trace in its documented format (docs/mobility.md)",
                )
            continue
        pending.append(parts[0])
        complete = [b"".join(pending), *parts[1:-1]]
        pending = [parts[-1]]
        pending_bytes = len(parts[-1])
        for raw in complete:
            lineno += 1
            yield lineno, decode_line(raw, lineno, source)
    rest = b"".join(pending)
    if rest:
        lineno += 1
        yield lineno, decode_line(rest, lineno, source)


def decimal(text: str, what: str, where: str, source: str, bound: float, unit: str) -> float:
    """``text`` as a decimal number in ``[-bound, bound]``.

    Raises:
        ScenarioError: ``where: what ...`` otherwise.
    """
    value = text.strip()
    if len(value) > MAX_NUMBER_CHARS or NUMBER.fullmatch(value) is None:
        raise ScenarioError(
            source,
            f"{where}: {what} is not a decimal number (got {shorten(text, 20)!r})",
            f"write {what} as a decimal number of {unit}",
        )
    return within(float(value), f"{where}: {what}", source, bound, unit)


def within(number: float, what: str, source: str, bound: float, unit: str) -> float:
    """``number`` if it is at most ``bound`` in magnitude (so not NaN or infinite).

    Raises:
        ScenarioError: ``what is ... unit; at most bound ...`` otherwise.
    """
    if not abs(number) <= bound:
        raise ScenarioError(
            source,
            f"{what} is {number:g} {unit}; at most {bound:g} in magnitude is read",
            "check the file (a unit or a column mixed up?)",
        )
    return number


def time_value(text: str, where: str, source: str) -> float:
    """``text`` as a time, s, at most :data:`MAX_TIME_S` in magnitude (:func:`decimal`)."""
    return decimal(text, "the time", where, source, MAX_TIME_S, "s")


def coordinate(text: str, what: str, where: str, source: str) -> float:
    """``text`` as a coordinate, m, at most :data:`MAX_COORDINATE_M` in magnitude
    (:func:`decimal`)."""
    return decimal(text, what, where, source, MAX_COORDINATE_M, "m")


def first_true(mask: ArrayLike) -> int | None:
    """The index of the first true entry of ``mask`` (None if none)."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


def sorted_samples(time_s: F64, device: I64, x_m: F64, y_m: F64) -> tuple[F64, I64, F64, F64]:
    """The samples in device, then time order."""
    order = np.lexsort((time_s, device))
    return time_s[order], device[order], x_m[order], y_m[order]
