"""Checkpoints: the state of every component of a run at a frame boundary, saved and restored.

Components with state each have ``state_dict()`` / ``load_state_dict()``: the engine (clock,
next frame, queues, totals), the scheme, the channel, the mobility model and the learner (with its
update rule) and, where devices come and go, the availability model; with several cells
(``[cells]``), the association and the fading of the links to the other sites. Random streams need no state: every draw is keyed by the run's seed and the
device, slot or frame it belongs to (:mod:`wflsim.sim.rng`). A state is a nested ``dict`` whose
leaves are numpy arrays, numbers, strings, booleans or None.

On disk a checkpoint is one ``.npz`` file read with ``allow_pickle=False``: the arrays as its
members and the rest as a JSON document in member ``__tree__`` (non-finite floats spelled out),
so loading a checkpoint never executes code. :func:`save` writes a temporary file, fsyncs it and
renames it over the target: a crash leaves the previous checkpoint or the new one, never half.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .files import open_regular
from .trace import write_atomic

if TYPE_CHECKING:
    from .engine import Engine

#: Version of the checkpoint layout; a checkpoint of another version is refused. Version 2: the
#: channel's models with memory, the random-waypoint odometer, the wasted-energy total.
CHECKPOINT_VERSION = 2
_TREE = "__tree__"


def run_state(engine: Engine) -> dict[str, Any]:
    """The state of every component of ``engine``'s run at a frame boundary."""
    return {
        "version": CHECKPOINT_VERSION,
        "engine": engine.state_dict(),
        "scheme": engine.scheme.state_dict(),
        "channel": engine.channel.state_dict(),
        "mobility": engine.mobility.state_dict(),
        "learner": engine.learner.state_dict(),
        "availability": None if engine.availability is None else engine.availability.state_dict(),
    } | ({} if engine.cells is None else {"cells": engine.cells.state_dict()})


def load_run_state(engine: Engine, state: dict[str, Any]) -> None:
    """Restore :func:`run_state` into ``engine``, built afresh from the same scenario and seed.

    Raises:
        ValueError: a state of another checkpoint version or of another run's shape.
    """
    if state.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"checkpoint version {state.get('version')!r}; this wflsim reads version "
            f"{CHECKPOINT_VERSION}"
        )
    engine.load_state_dict(state["engine"])
    engine.scheme.load_state_dict(state["scheme"])
    engine.channel.load_state_dict(state["channel"])
    engine.mobility.load_state_dict(state["mobility"])
    engine.learner.load_state_dict(state["learner"])
    avail = state.get("availability")
    if (avail is None) != (engine.availability is None):
        raise ValueError(
            "checkpoint and run differ in [availability] (one has devices that come and go)"
        )
    if engine.availability is not None and avail is not None:
        engine.availability.load_state_dict(avail)
    cells = state.get("cells")
    if (cells is None) != (engine.cells is None):
        raise ValueError("checkpoint and run differ in [cells] (one has several cells)")
    if engine.cells is not None and cells is not None:
        engine.cells.load_state_dict(cells)


def _encode(node: Any, path: str, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if not isinstance(k, str) or "/" in k:
                raise TypeError(f"state keys must be strings without '/', got {k!r} at {path!r}")
            out[k] = _encode(v, f"{path}/{k}", arrays)
        return out
    if isinstance(node, list | tuple):
        return [_encode(v, f"{path}/{i}", arrays) for i, v in enumerate(node)]
    if isinstance(node, np.ndarray):
        if node.dtype == object:
            raise TypeError(f"object arrays cannot be saved ({path!r})")
        arrays[path] = node
        return {"__array__": path}
    if isinstance(node, np.generic):
        node = node.item()
    if isinstance(node, float) and not math.isfinite(node):
        return {"__float__": repr(node)}
    if node is None or isinstance(node, bool | int | float | str):
        return node
    raise TypeError(f"cannot save a {type(node).__name__} in a state ({path!r})")


def _decode(node: Any, arrays: Any) -> Any:
    if isinstance(node, dict):
        if set(node) == {"__array__"}:
            return np.array(arrays[node["__array__"]])
        if set(node) == {"__float__"}:
            return float(node["__float__"])
        return {k: _decode(v, arrays) for k, v in node.items()}
    if isinstance(node, list):
        return [_decode(v, arrays) for v in node]
    return node


def dumps(state: dict[str, Any]) -> bytes:
    """``state`` as the bytes of a checkpoint file (a copy: the state may change afterwards)."""
    arrays: dict[str, np.ndarray] = {}
    tree = _encode(state, "", arrays)
    doc = json.dumps(tree, allow_nan=False).encode()
    members = {k.lstrip("/"): v for k, v in arrays.items()}
    payload: dict[str, Any] = {_TREE: np.frombuffer(doc, dtype=np.uint8), **members}
    buf = io.BytesIO()
    np.savez(buf, **payload)
    return buf.getvalue()


def save(path: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` (``.npz``) atomically: temporary file, fsync, rename."""
    write_atomic(Path(path), dumps(state))


def load(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save` (no pickle: nothing in it can run code).

    Raises:
        ValueError: the file is not a wflsim checkpoint (or is damaged).
    """
    path = Path(path)
    f = open_regular(path, str(path), "checkpoint")  # a ScenarioError (a ValueError) if not
    try:
        with f, np.load(f, allow_pickle=False) as npz:
            members = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise ValueError(f"{path} is not a readable checkpoint ({type(err).__name__})") from None
    if _TREE not in members:
        raise ValueError(f"{path} is not a wflsim checkpoint (no {_TREE})")
    try:
        tree = json.loads(io.BytesIO(members.pop(_TREE).tobytes()).read().decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{path} is not a wflsim checkpoint (damaged {_TREE})") from None
    arrays = {"/" + k: v for k, v in members.items()}
    try:
        state = _decode(tree, arrays)
    except KeyError as err:
        raise ValueError(f"{path} is damaged: missing array {err}") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path} is not a wflsim checkpoint")
    return state
