"""Mobility traces of other tools, read into wflsim's trace (``docs/mobility.md``).

Three formats:

* ``sumo``: SUMO's floating car data (``sumo --fcd-output``): ``<fcd-export>`` holding
  ``<timestep time="...">`` elements, each holding a ``<vehicle id x y .../>`` or
  ``<person id x y .../>`` per traffic participant present at that instant
  (:func:`read_sumo_fcd`);
* ``ns2``: ns-2 movement files (``setdest``'s output, BonnMotion's and SUMO's ns-2 exports):
  initial positions ``$node_(i) set X_ x`` / ``set Y_ y`` and timed moves
  ``$ns_ at t "$node_(i) setdest x y speed"`` (:func:`read_ns2`);
* ``bonnmotion``: BonnMotion's native ``.movements`` files (plain or gzip): one line per node of
  ``t x y`` (or ``t x y z``) waypoints (:func:`read_bonnmotion`).

Each reader returns :class:`Tracks`: per device its samples, at the file's own timesteps or
waypoints, or at the exact breakpoints of ns-2's piecewise-linear motion, so that the linear
interpolation of :class:`~wflsim.sim.world.mobility.trace.TraceMobility` reproduces the motion; and
the intervals in which the device is present (a SUMO vehicle between its departure and its arrival;
an ns-2 or BonnMotion node from its first time on), which become an availability trace
(``[availability] model = "trace"``). :func:`convert_mobility` applies the choices of
``wflsim convert-mobility`` (time origin, coordinate origin, resampling, the first N devices).

Hostile files: the readers take only regular files (never a FIFO or a device), read at most
:data:`MAX_INPUT_BYTES` (of decompressed data for gzip), keep at most :data:`MAX_SAMPLES`
samples and :data:`~wflsim.sim.config.limits.MAX_DEVICES` devices, take every number as a decimal
that must be finite and within :data:`MAX_COORDINATE_M` or :data:`MAX_TIME_S`, and parse XML
with expat refusing any document type declaration (so no entity is ever declared or expanded,
and no external entity or DTD is fetched). Every problem is a
:class:`~wflsim.sim.errors.ScenarioError` naming the file, the line (and element or value) and the
fix; errors never quote the file's text beyond a shortened id.
"""

from __future__ import annotations

from pathlib import Path

from ....config.limits import shorten
from ....errors import ScenarioError
from .bonnmotion import read_bonnmotion
from .ns2 import read_ns2
from .reading import MAX_COORDINATE_M, MAX_INPUT_BYTES, MAX_SAMPLES, MAX_TIME_S
from .sumo import read_sumo_fcd
from .tracks import Tracks, center_of, first_devices, resampled, shifted

#: The formats read, as ``wflsim convert-mobility --format`` names them.
FORMATS: tuple[str, ...] = ("sumo", "ns2", "bonnmotion")


def read_mobility(
    path: str | Path, fmt: str, *, dims: int | None = None, keep_time: bool = False
) -> Tracks:
    """Read ``path`` in format ``fmt`` (:data:`FORMATS`).

    Raises:
        ScenarioError: an unknown format, ``dims`` with another format than ``bonnmotion`` or
            not 2 or 3, or the reader's errors.
    """
    if fmt not in FORMATS:
        raise ScenarioError(
            "--format", f"unknown format {shorten(fmt, 30)!r}", "give one of " + ", ".join(FORMATS)
        )
    if dims is not None and (fmt != "bonnmotion" or dims not in (2, 3)):
        raise ScenarioError("--dims", "is 2 or 3, for --format bonnmotion only", "remove it")
    if fmt == "sumo":
        return read_sumo_fcd(path, keep_time=keep_time)
    if fmt == "ns2":
        return read_ns2(path)
    return read_bonnmotion(path, dims=dims, keep_time=keep_time)


def convert_mobility(
    path: str | Path,
    fmt: str,
    *,
    dims: int | None = None,
    keep_time: bool = False,
    devices: int | None = None,
    origin_m: tuple[float, float] | None = None,
    center: bool = False,
    step_s: float | None = None,
) -> Tracks:
    """Read a trace and apply ``wflsim convert-mobility``'s choices, in this order: the first
    ``devices`` devices; the server at ``origin_m`` (the file's coordinates, m; default
    ``(0, 0)``: coordinates kept) or at the centre of the bounding box (``center``); the
    resampling every ``step_s`` seconds (default: the file's own samples).

    Raises:
        ScenarioError: the reader's errors; ``origin_m`` with ``center``; positions too far from
            the server; the resampling's.
    """
    if origin_m is not None and center:
        raise ScenarioError("--origin", "and --center both place the server", "give one of them")
    tracks = read_mobility(path, fmt, dims=dims, keep_time=keep_time)
    if devices is not None:
        tracks = first_devices(tracks, devices)
    origin = center_of(tracks) if center else (origin_m or (0.0, 0.0))
    tracks = shifted(tracks, origin)
    if step_s is not None:
        tracks = resampled(tracks, step_s)
    return tracks


__all__ = [
    "FORMATS",
    "MAX_COORDINATE_M",
    "MAX_INPUT_BYTES",
    "MAX_SAMPLES",
    "MAX_TIME_S",
    "Tracks",
    "center_of",
    "convert_mobility",
    "first_devices",
    "read_bonnmotion",
    "read_mobility",
    "read_ns2",
    "read_sumo_fcd",
    "resampled",
    "shifted",
]
