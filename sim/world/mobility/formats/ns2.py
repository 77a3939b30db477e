"""ns-2 movement files: initial positions and ``setdest`` moves, turned into the exact
breakpoints of each node's piecewise-linear path."""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ....config.limits import MAX_DEVICES
from ....errors import ScenarioError
from ..config import MAX_SPEED_MPS
from .reading import MAX_SAMPLES, MAX_TIME_S, coordinate, decimal, text_lines, time_value
from .tracks import Tracks

_NODE = r"\$node_\((\d+)\)"
_NS2_INITIAL = re.compile(rf"{_NODE}\s+set\s+([XYZ])_\s+(\S+)\s*;?\s*(?:#.*)?")
_NS2_AT = re.compile(r'\$ns_\s+at\s+(\S+)\s+"([^"]*)"\s*(?:;.*)?')
_NS2_SETDEST = re.compile(rf"\s*{_NODE}\s+setdest\s+(\S+)\s+(\S+)\s+(\S+)\s*")
_NS2_TIMED_SET = re.compile(rf"\s*{_NODE}\s+set\s+[XYZ]_\s")
#: Most digits of an ns-2 node number.
_MAX_NODE_DIGITS = 9


def _node_number(text: str, where: str, source: str) -> int:
    if len(text) > _MAX_NODE_DIGITS:
        raise ScenarioError(
            source,
            f"{where}: a node number of more than {_MAX_NODE_DIGITS} digits",
            "number the nodes 0, 1, 2, ...",
        )
    return int(text)


def _mention(first_line: dict[int, int], node: int, lineno: int, source: str) -> None:
    """Record the first line naming ``node`` (at most ``MAX_DEVICES`` nodes)."""
    if node not in first_line:
        if len(first_line) >= MAX_DEVICES:
            raise ScenarioError(
                source,
                f"line {lineno}: more than {MAX_DEVICES:,} nodes",
                "convert a part of the trace",
            )
        first_line[node] = lineno


def _setdest_path(
    start: tuple[float, float],
    events: Sequence[tuple[float, float, float, float, int]],
    source: str,
) -> tuple[list[float], list[float], list[float]]:
    """The breakpoints of one ns-2 node's piecewise-linear path.

    The node stands at ``start`` from ``t = 0``; each event ``(t, x, y, speed, line)`` (sorted
    by time, ties in file order) starts a straight leg from where the node is at ``t`` towards
    ``(x, y)`` at ``speed`` m/s, which ends on arrival (the node then stands there) or when the
    next event starts another leg; speed 0 (or a destination where it stands) stops it there.

    Returns:
        times (s, strictly increasing, from 0), x and y (m) of the breakpoints: linear
        interpolation between them is the path, and the last position is held.
    """
    times, xs, ys = [0.0], [start[0]], [start[1]]
    sx, sy, s_t = start[0], start[1], 0.0  # the current leg starts here, at s_t
    ex, ey, e_t = start[0], start[1], 0.0  # and ends there, at e_t (s_t == e_t: standing)
    for t, dx, dy, speed, line in events:
        if times[-1] < e_t < t:  # the leg ended before this event: its end is a breakpoint
            times.append(e_t)
            xs.append(ex)
            ys.append(ey)
        if t >= e_t:
            px, py = ex, ey
        else:
            f = (t - s_t) / (e_t - s_t)
            px, py = sx + f * (ex - sx), sy + f * (ey - sy)
        if t > times[-1]:
            times.append(t)
            xs.append(px)
            ys.append(py)
        sx, sy, s_t = px, py, t
        dist = math.hypot(dx - px, dy - py)
        if speed == 0.0 or dist == 0.0:
            ex, ey, e_t = px, py, t
            continue
        ex, ey, e_t = dx, dy, t + dist / speed
        if not e_t <= MAX_TIME_S:
            raise ScenarioError(
                source,
                f"line {line}: this leg would end at {e_t:g} s; at most {MAX_TIME_S:g} s is read",
                "give the leg a higher speed",
            )
    if e_t > times[-1]:
        times.append(e_t)
        xs.append(ex)
        ys.append(ey)
    return times, xs, ys


def read_ns2(path: str | Path) -> Tracks:
    """Read an ns-2 movement file (``setdest``'s output; BonnMotion's and SUMO's ns-2 exports).

    Read: initial positions ``$node_(i) set X_ x`` and ``set Y_ y`` (m; at ``t = 0`` wherever
    they stand in the file, as Tcl runs them when the script is loaded; the last one wins;
    ``set Z_`` is checked and ignored) and moves ``$ns_ at t "$node_(i) setdest x y speed"``
    (s, m, m/s): from ``t`` the node goes in a straight line from where it is towards ``(x, y)``
    at ``speed``, arrives at ``t + distance / speed`` and stands there; a later ``setdest``
    interrupts the leg at its own time; ``speed = 0`` stops the node where it is. Events at the
    same time take effect in file order. Ignored: blank lines, ``#`` comments and every other
    command (``$god_ ...``, ``$ns_ at t "$god_ ..."``, ``set opt(...)``).
    Devices are the nodes in ascending node number (numbered ``0..N-1`` with gaps closed);
    each is present from ``t = 0`` to the end. Times are kept (ns-2 starts at 0).

    Raises:
        ScenarioError: a line on a node that is none of these (a timed ``set X_``, a jump, is
            not supported), a node moved without an initial position, a negative time or speed,
            a speed above 1000 m/s, a number that is not a finite decimal within the bounds,
            a leg that would end after ``MAX_TIME_S``, too many nodes or moves, an unreadable
            or too large file.
    """
    source = str(path)
    initial: dict[int, list[float | None]] = {}
    first_line: dict[int, int] = {}
    ev_node, ev_line = array("q"), array("q")
    ev_t, ev_x, ev_y, ev_v = array("d"), array("d"), array("d"), array("d")
    for lineno, line in text_lines(Path(path), source):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"line {lineno}"
        m = _NS2_INITIAL.fullmatch(text)
        if m:
            node = _node_number(m[1], where, source)
            _mention(first_line, node, lineno, source)
            value = coordinate(m[3], f"{m[2]}_", where, source)
            if m[2] != "Z":
                initial.setdefault(node, [None, None])["XY".index(m[2])] = value
            continue
        m = _NS2_AT.fullmatch(text)
        if m:
            move = _NS2_SETDEST.fullmatch(m[2])
            if move:
                t = time_value(m[1], where, source)
                if t < 0.0:
                    raise ScenarioError(
                        source, f"{where}: the time is negative ({t:g} s)", "give times >= 0"
                    )
                node = _node_number(move[1], where, source)
                _mention(first_line, node, lineno, source)
                speed = decimal(move[4], "the speed", where, source, MAX_SPEED_MPS, "m/s")
                if speed < 0.0:
                    raise ScenarioError(
                        source,
                        f"{where}: the speed is negative ({speed:g} m/s)",
                        "give speeds >= 0 m/s (0 stops the node)",
                    )
                ev_node.append(node)
                ev_line.append(lineno)
                ev_t.append(t)
                ev_x.append(coordinate(move[2], "the destination x", where, source))
                ev_y.append(coordinate(move[3], "the destination y", where, source))
                ev_v.append(speed)
                if len(ev_t) > MAX_SAMPLES // 2:
                    raise ScenarioError(
                        source,
                        f"{where}: more than {MAX_SAMPLES // 2:,} setdest moves",
                        "convert a part of the trace",
                    )
                continue
            if _NS2_TIMED_SET.match(m[2]):
                raise ScenarioError(
                    source,
                    f"{where}: a timed set X_/Y_/Z_ (the node jumps) is not supported",
                    "give initial positions without $ns_ at, and moves with setdest",
                )
            if "$node_(" in m[2]:
                raise ScenarioError(
                    source,
                    f"{where}: a timed node command other than setdest",
                    'give moves as $ns_ at T "$node_(I) setdest X Y SPEED"',
                )
            continue
        if "$node_(" in text:
            raise ScenarioError(
                source,
                f"{where}: a node command wflsim does not read",
                "give initial positions as $node_(I) set X_ X (and Y_) and moves with setdest",
            )
    nodes = sorted(first_line)
    if not nodes:
        raise ScenarioError(
            source, "holds no node ($node_(i) set X_ ... or setdest)", "give an ns-2 movement file"
        )
    for node in nodes:
        xy = initial.get(node, [None, None])
        if xy[0] is None or xy[1] is None:
            raise ScenarioError(
                source,
                f"node {node} (line {first_line[node]}) has no initial position",
                f"give $node_({node}) set X_ X and $node_({node}) set Y_ Y lines",
            )
    node_arr = np.frombuffer(ev_node, dtype=np.int64)
    t_arr = np.frombuffer(ev_t, dtype=np.float64)
    order = np.lexsort((np.frombuffer(ev_line, dtype=np.int64), t_arr, node_arr))
    bounds = np.searchsorted(node_arr[order], nodes + [nodes[-1] + 1])
    columns: tuple[list[float], list[int], list[float], list[float]] = ([], [], [], [])
    for d, node in enumerate(nodes):
        idx = order[bounds[d] : bounds[d + 1]]
        events = list(
            zip(
                t_arr[idx].tolist(),
                np.frombuffer(ev_x, dtype=np.float64)[idx].tolist(),
                np.frombuffer(ev_y, dtype=np.float64)[idx].tolist(),
                np.frombuffer(ev_v, dtype=np.float64)[idx].tolist(),
                np.frombuffer(ev_line, dtype=np.int64)[idx].tolist(),
                strict=True,
            )
        )
        x0, y0 = initial[node]
        assert x0 is not None and y0 is not None
        times, xs, ys = _setdest_path((x0, y0), events, source)
        columns[0].extend(times)
        columns[1].extend([d] * len(times))
        columns[2].extend(xs)
        columns[3].extend(ys)
    n = len(nodes)
    return Tracks(
        "ns2",
        ("node",) * n,
        tuple(str(node) for node in nodes),
        np.array(columns[0]),
        np.array(columns[1], dtype=np.int64),
        np.array(columns[2]),
        np.array(columns[3]),
        np.arange(n, dtype=np.int64),
        np.zeros(n),
        np.full(n, np.inf),
    )
