"""Load a run's trace and manifest.

A run folder written by wflsim 0.3 or later holds its trace as one Parquet file per completed
frame in ``events/`` (``events/part-000000.parquet``, ...), and ``manifest.json`` lists them with
the row count and SHA-256 of each, recorded as it was written. The readers here read exactly
the parts the manifest lists, each checked against its SHA-256 (or, with ``verify=False``, its
row count), and refuse a part that is missing, damaged, replaced or not listed
(:class:`wflsim.sim.rundir.RunFolderError`, one line naming the file and the fix).
``pd.read_parquet(run / "events")`` and DuckDB's ``read_parquet('run/events/*.parquet')`` read
the same table from an intact folder, without these checks. Earlier versions wrote one file,
``events.parquet``, read as it is (nothing recorded to check it against).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from wflsim.sim.rundir import (
    MANIFEST,
    RunFolderError,
    checked_parts,
    is_run_folder,
    read_manifest,
    recompute_fix,
    unreadable_manifest,
)

#: The trace inside a run folder: a folder of parts (current) or one file (before 0.3).
EVENTS_DIR = "events"
LEGACY_EVENTS = "events.parquet"


def events_files(run: str | Path, *, verify: bool = True) -> list[Path]:
    """The Parquet files of a run's trace, in frame order.

    ``run`` is a run folder, its ``events/`` folder, or a single Parquet file (read as it is).
    Of a run folder, exactly the parts its ``manifest.json`` lists, each checked against the
    SHA-256 recorded when it was written (``verify=False``: against its row count only, which
    reads only the file's footer); a part on disk that the manifest does not list is refused,
    except the part of the frame in flight when an unfinished run stopped (or, while the run
    writes, any newer one), which is not read. A run killed before its first frame completed
    has none. Read as they are, with nothing to check them against: ``events.parquet`` of
    wflsim before 0.3, and a folder of parts with neither a manifest nor the run marker (parts
    written by hand). ``run`` itself may be a link (the user names it); a trace file inside it
    must be a regular file, not a link: a copied or hostile folder could otherwise make the
    reader open anything on the machine (a device that never ends, a file elsewhere).

    Raises:
        FileNotFoundError: ``run`` holds no trace.
        TraceFileError: a trace file of ``run`` is a link or not a regular file.
        RunFolderError: the parts and the manifest disagree (a part missing, damaged, replaced
            or not listed), or the manifest of a run folder is missing, truncated or edited.
    """
    p = Path(run)
    if p.is_file():
        return [p]
    if p.name == EVENTS_DIR and not (p / EVENTS_DIR).exists():
        folder, run_dir = p, p.parent
    else:
        folder, run_dir = p / EVENTS_DIR, p
    if folder.is_dir():
        parts = sorted(
            q for q in folder.iterdir() if q.name.startswith("part-") and q.suffix == ".parquet"
        )
        for q in parts:
            _check_regular(q)
        manifest = _manifest_of(run_dir, bool(parts))
        if manifest is None:
            return parts  # not a wflsim run folder: nothing to check the parts against
        return checked_parts(run_dir, manifest, digest=verify)
    legacy = p / LEGACY_EVENTS
    if legacy.is_symlink():
        _check_regular(legacy)
    if legacy.is_file():
        return [legacy]
    raise FileNotFoundError(f"no trace in {p} (neither {EVENTS_DIR}/ nor {LEGACY_EVENTS})")


def _manifest_of(run_dir: Path, has_parts: bool) -> dict[str, Any] | None:
    """The manifest that vouches for the parts of ``run_dir`` (None: a folder of parts that is no
    wflsim run folder, read as it is).

    Raises:
        RunFolderError: a run folder's manifest is missing (with parts to vouch for), unreadable
            (truncated, edited, a link) or lists no parts.
    """
    path = run_dir / MANIFEST
    marked = is_run_folder(run_dir)
    if not path.exists() and not path.is_symlink():
        if marked and has_parts:
            raise RunFolderError(
                path, "is missing, so the trace's parts cannot be checked", recompute_fix(run_dir)
            )
        return None
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise unreadable_manifest(run_dir)
    if "parts" not in manifest and not (marked and has_parts):
        return None  # a folder of parts written by hand beside some other manifest
    return manifest


class TraceFileError(ValueError):
    """A run's trace file that must not be read: a link, or not a regular file."""


def _check_regular(path: Path) -> None:
    """Refuse a trace file that is a link or not a regular file (:class:`TraceFileError`)."""
    if path.is_symlink() or not path.is_file():
        what = "a link" if path.is_symlink() else "not a regular file"
        raise TraceFileError(f"{path} is {what}; a run's trace files must be regular files")


def trace_path(run: str | Path) -> Path:
    """Where a run folder's trace is: its ``events/`` folder, or ``events.parquet`` (before 0.3)."""
    p = Path(run)
    return p / EVENTS_DIR if (p / EVENTS_DIR).is_dir() else p / LEGACY_EVENTS


def has_trace(run: str | Path) -> bool:
    """Whether ``run`` is a run folder with a trace (of either layout)."""
    p = Path(run)
    return (p / EVENTS_DIR).is_dir() or (p / LEGACY_EVENTS).is_file()


def _first_file(run: str | Path) -> Path:
    files = events_files(run)
    if not files:
        raise FileNotFoundError(f"the trace of {run} has no completed frame yet")
    return files[0]


def events_frame(table: pa.Table) -> pd.DataFrame:
    """An events table (Arrow) as the DataFrame :func:`load_events` returns: nullable dtypes
    (an int32 column with nulls stays integer), ``event`` categorical (its categories the event
    names present, sorted)."""
    df = table.drop_columns(["event"]).to_pandas(types_mapper=pd.ArrowDtype)
    if len(df.index) != table.num_rows:  # no other column: pandas gave no rows
        df = pd.DataFrame(index=pd.RangeIndex(table.num_rows))
    df.insert(table.schema.get_field_index("event"), "event", event_categorical(table["event"]))
    return df


def event_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str]]:
    """The ``event`` column (a dictionary, as the trace stores it, or strings) as integer codes
    per row and the names they index (``names[codes[i]]`` is row ``i``'s event), without a
    Python string per row."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    if isinstance(column, pa.ChunkedArray):
        column = (
            column.unify_dictionaries().combine_chunks()
            if column.num_chunks
            else pa.DictionaryArray.from_arrays(pa.array([], pa.int8()), pa.array([], pa.string()))
        )
    codes = column.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return codes, [str(n) for n in column.dictionary.to_pylist()]


def event_categorical(column: pa.ChunkedArray | pa.Array) -> pd.Categorical:
    """The ``event`` column as a pandas categorical whose categories are the names present,
    sorted (what ``astype(str).astype("category")`` gives), built from :func:`event_codes`."""
    codes, listed = event_codes(column)
    names = np.asarray(listed, dtype=object)
    used = np.flatnonzero(np.bincount(codes, minlength=len(names)))
    order = used[np.argsort(names[used].astype(str), kind="stable")]
    remap = np.full(len(names), -1, dtype=np.int64)
    remap[order] = np.arange(order.size)
    return pd.Categorical.from_codes(remap[codes], categories=list(names[order]))


def load_events(
    run: str | Path,
    events: list[str] | None = None,
    columns: list[str] | None = None,
    *,
    verify: bool = True,
) -> pd.DataFrame:
    """The events of a run as a DataFrame with nullable dtypes (nulls stay nulls).

    Args:
        run: a run directory (holding ``events/`` or ``events.parquet``) or a Parquet file.
        events: keep only these event names (filtered while reading).
        columns: read only these columns (``event`` is always read). A column the file does not
            have (a trace written by an older wflsim) comes back as all-null ``float64``.
        verify: check every part's SHA-256 against the manifest (False: its row count only;
            :func:`events_files`).

    Raises:
        RunFolderError: the parts and the manifest disagree (:func:`events_files`).
    """
    table, missing = load_events_table(run, events, columns, verify=verify)
    df = events_frame(table)
    for c in missing:
        df[c] = pd.Series(pd.NA, index=df.index, dtype=pd.ArrowDtype(pa.float64()))
    return df


def load_events_table(
    run: str | Path,
    events: list[str] | None = None,
    columns: list[str] | None = None,
    *,
    verify: bool = True,
) -> tuple[pa.Table, list[str]]:
    """:func:`load_events`'s rows as one Arrow table, and the asked columns the trace does not
    have (which :func:`load_events` adds as all-null). Same arguments and errors."""
    files = events_files(run, verify=verify)
    if not files:
        raise FileNotFoundError(f"the trace of {run} has no completed frame yet")
    missing: list[str] = []
    cols = None
    if columns is not None:
        have = set(pq.read_schema(files[0]).names)
        wanted = list(dict.fromkeys(["event", *columns]))
        cols = [c for c in wanted if c in have]
        missing = [c for c in wanted if c not in have]
    filters = None if events is None else [("event", "in", list(events))]
    tables = [pq.read_table(f, columns=cols, filters=filters) for f in files]
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    return table, missing


def load_manifest(run: str | Path) -> dict[str, Any]:
    """The run's ``manifest.json``.

    Raises:
        FileNotFoundError: ``run`` holds no ``manifest.json``.
        RunFolderError: it is not readable as a JSON object (truncated, edited, a link).
    """
    path = Path(run) / MANIFEST
    if not path.exists() and not path.is_symlink():
        raise FileNotFoundError(f"no {MANIFEST} in {run}")
    manifest = read_manifest(Path(run))
    if manifest is None:
        raise unreadable_manifest(Path(run))
    return manifest


def read_metadata(run: str | Path) -> dict[str, str]:
    """The key-value metadata stored in the trace (scenario, seed, versions)."""
    meta = pq.read_schema(_first_file(run)).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items()}
