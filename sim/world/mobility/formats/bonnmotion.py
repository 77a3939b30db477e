"""BonnMotion's native ``.movements`` files (and the ``.params`` file beside them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ....config.limits import MAX_DEVICES, shorten
from ....errors import ScenarioError
from ....files import read_capped
from ..base import F64
from .reading import (
    MAX_COORDINATE_M,
    MAX_NUMBER_CHARS,
    MAX_PARAMS_BYTES,
    MAX_SAMPLES,
    MAX_TIME_S,
    NUMBER,
    decode_line,
    first_true,
    text_lines,
)
from .tracks import Tracks


def bonnmotion_params_path(path: Path) -> Path | None:
    """The ``.params`` file beside a ``NAME.movements`` or ``NAME.movements.gz`` file (None for
    another name)."""
    name = path.name.removesuffix(".gz")
    if not name.endswith(".movements"):
        return None
    return path.with_name(name.removesuffix(".movements") + ".params")


def read_bonnmotion_params(path: Path) -> dict[str, str]:
    """The ``key=value`` lines of a BonnMotion ``.params`` file (at most
    :data:`MAX_PARAMS_BYTES`; other lines ignored)."""
    source = str(path)
    raw = read_capped(
        path,
        source,
        MAX_PARAMS_BYTES,
        "BonnMotion parameter",
        fix="give the .params file BonnMotion wrote",
    )
    params: dict[str, str] = {}
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        key, sep, value = decode_line(line, lineno, source).partition("=")
        if sep:
            params[key.strip()] = value.strip()
    return params


def _fits(values: F64, width: int) -> bool:
    """Whether a node line reads as whole waypoints of ``width`` values whose times never
    decrease."""
    if values.shape[0] % width:
        return False
    times = values[::width]
    return bool((times[1:] >= times[:-1]).all())


def _bonnmotion_dims(
    params: dict[str, str] | None, node_values: list[F64], lines: list[int], source: str
) -> int:
    """2 or 3, from the ``.params`` file (``J=3D``/``J=2D``, else 3 where it gives ``z``), or
    else the layout every node line fits (whole waypoints, times that never decrease; refused
    where both fit; 2D where neither does, whose check then names the line)."""
    if params is not None:
        dim = params.get("J", "").upper()
        if dim in ("2D", "3D"):
            return int(dim[0])
        return 3 if "z" in params else 2
    fits = {dims: all(_fits(v, dims + 1) for v in node_values) for dims in (2, 3)}
    if fits[2] and fits[3]:
        raise ScenarioError(
            source,
            "2D (t x y) and 3D (t x y z) waypoints both fit every node line, and no .params "
            "file says which",
            "give --dims 2 or --dims 3 (or put the .params file beside it)",
        )
    return 3 if fits[3] else 2  # neither: the line's check names the problem


def _waypoint_rows(values: F64, width: int, lineno: int, source: str) -> F64:
    """One node line's waypoints ``(K, width)`` checked: finite, within bounds, times not
    decreasing; repeats of a waypoint dropped (same time, same place)."""
    where = f"line {lineno}"
    if values.shape[0] % width:
        raise ScenarioError(
            source,
            f"{where} holds {values.shape[0]} values, not whole waypoints of {width} "
            f"({'t x y z' if width == 4 else 't x y'})",
            "give the file BonnMotion wrote, with --dims matching it",
        )
    rows = values.reshape(-1, width)
    bound = np.array([MAX_TIME_S] + [MAX_COORDINATE_M] * (width - 1))
    k = first_true(~(np.abs(rows) <= bound).all(axis=1))
    if k is not None:
        raise ScenarioError(
            source,
            f"{where}, waypoint {k + 1}: a value is not finite or beyond the bounds "
            f"({MAX_TIME_S:g} s, {MAX_COORDINATE_M:g} m)",
            "check the file",
        )
    dt = np.diff(rows[:, 0])
    k = first_true(dt < 0.0)
    if k is not None:
        raise ScenarioError(
            source,
            f"{where}, waypoint {k + 2}: its time {rows[k + 1, 0]:g} s is before the previous "
            f"waypoint's ({rows[k, 0]:g} s)",
            "give each node's waypoints in increasing time",
        )
    same = np.flatnonzero(dt == 0.0)
    jump = first_true((rows[same, 1:] != rows[same + 1, 1:]).any(axis=1))
    if jump is not None:
        k = int(same[jump])
        raise ScenarioError(
            source,
            f"{where}, waypoint {k + 2}: a second position at {rows[k, 0]:g} s (the node jumps)",
            "give each time one position",
        )
    return np.delete(rows, same + 1, axis=0)


def _parse_values(text: str, lineno: int, source: str) -> F64:
    """A line of whitespace-separated decimal numbers."""
    try:
        return np.fromstring(text, dtype=np.float64, sep=" ")
    except ValueError:
        pass
    for i, token in enumerate(text.split()):
        if len(token) > MAX_NUMBER_CHARS or NUMBER.fullmatch(token) is None:
            raise ScenarioError(
                source,
                f"line {lineno}, value {i + 1} is not a decimal number "
                f"(got {shorten(token, 20)!r})",
                "give the file BonnMotion wrote",
            ) from None
    raise ScenarioError(source, f"line {lineno} is not a list of numbers", "check the file")


def read_bonnmotion(
    path: str | Path, *, dims: int | None = None, keep_time: bool = False
) -> Tracks:
    """Read a BonnMotion ``.movements`` file (plain or gzip, as BonnMotion writes it).

    Read: every line that is not blank and does not start with ``#`` is a node (node ``i`` is
    the ``i``-th such line, device ``i``), a sequence of waypoints ``t x y`` (s, m, m), or
    ``t x y z`` in 3D (``z`` is ignored), between which the node moves in a straight line at
    constant speed; after its last waypoint it stands there. A waypoint repeated (same time and
    place) is dropped. Each node is present from its first waypoint to the end.

    Args:
        path: the file.
        dims: 2 or 3; None: from the ``.params`` file beside it (``NAME.params`` for
            ``NAME.movements[.gz]``: ``J=3D`` or ``J=2D``, else 3D where it gives ``z``), or
            without one from the number of values per line (refused where both fit).
        keep_time: keep BonnMotion's times; by default the earliest waypoint is ``t = 0``
            (BonnMotion's files start at 0: nothing changes).

    Raises:
        ScenarioError: a value that is not a decimal number, finite and within the bounds, a
            line that is not whole waypoints, times that decrease, two positions at one time, a
            ``.params`` file for a model with extra columns (``DisasterArea``) or whose ``nn``
            differs from the number of node lines, too many nodes or waypoints, an unreadable
            or too large file.
    """
    source = str(path)
    p = Path(path)
    params_path = bonnmotion_params_path(p)
    params = (
        read_bonnmotion_params(params_path)
        if dims is None and params_path is not None and params_path.is_file()
        else None
    )
    if params is not None and params.get("model") == "DisasterArea":
        raise ScenarioError(
            source,
            "the DisasterArea model writes a status column wflsim does not read",
            "convert the scenario to another format with BonnMotion first (e.g. its ns-2 export)",
        )
    node_values: list[F64] = []
    node_lines: list[int] = []
    total = 0
    for lineno, line in text_lines(p, source):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        values = _parse_values(text, lineno, source)
        total += values.shape[0]
        if total > 3 * MAX_SAMPLES or len(node_values) >= MAX_DEVICES:
            raise ScenarioError(
                source,
                f"line {lineno}: more than {MAX_DEVICES:,} nodes or {3 * MAX_SAMPLES:,} values "
                f"({MAX_SAMPLES:,} waypoints t x y)",
                "convert a part of the trace",
            )
        node_values.append(values)
        node_lines.append(lineno)
    if not node_values:
        raise ScenarioError(source, "holds no node line", "give the file BonnMotion wrote")
    nn = "" if params is None else params.get("nn", "")
    if params is not None and nn.isascii() and nn.isdigit():
        if int(params["nn"]) != len(node_values):
            raise ScenarioError(
                source,
                f"holds {len(node_values)} node lines, its .params file nn={params['nn']}",
                "give the .movements and .params files of one scenario",
            )
    width = 1 + (
        dims if dims is not None else _bonnmotion_dims(params, node_values, node_lines, source)
    )
    rows = [
        _waypoint_rows(v, width, n, source) for v, n in zip(node_values, node_lines, strict=True)
    ]
    count = len(rows)
    first = np.array([r[0, 0] for r in rows])
    origin = 0.0 if keep_time else float(first.min())
    time_s = np.concatenate([r[:, 0] for r in rows]) - origin
    return Tracks(
        "bonnmotion",
        ("node",) * count,
        tuple(str(i) for i in range(count)),
        time_s,
        np.repeat(np.arange(count, dtype=np.int64), [r.shape[0] for r in rows]),
        np.concatenate([r[:, 1] for r in rows]),
        np.concatenate([r[:, 2] for r in rows]),
        np.arange(count, dtype=np.int64),
        first - origin,
        np.full(count, np.inf),
        origin,
    )
