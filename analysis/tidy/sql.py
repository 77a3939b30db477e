"""DuckDB over the runs' trace files, for traces too large for memory: :func:`duckdb_view`
puts a view with the runs' identifying columns over every listed Parquet file, each named
literally (:func:`duckdb_literal`), never by a pattern built from a folder's name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ..io import events_files
from .runs import ID_COLUMNS, RunsArg, _runs_info

if TYPE_CHECKING:
    import duckdb

# --------------------------------------------------------------------------- DuckDB

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def duckdb_view(
    con: duckdb.DuckDBPyConnection, runs: RunsArg, name: str = "events", *, verify: bool = True
) -> pd.DataFrame:
    """Create (or replace) a DuckDB view ``name`` over the runs' trace files.

    The view has every trace column plus :data:`ID_COLUMNS` (``run``, ``scheme``, ``V``, ...),
    read lazily with ``read_parquet([...], filename = true)``: queries stream over the files and
    need not fit in memory. A table ``{name}_runs`` holds
    :func:`~wflsim.analysis.tidy.runs_table` (one row per run). The view names each trace file
    literally (:func:`duckdb_literal`), never by a pattern built from a folder's name, so a run
    folder named ``exp[1]`` is read, not ``exp1``.

    Args:
        con: a ``duckdb.DuckDBPyConnection``.
        runs: run or sweep directories or a glob (see :mod:`wflsim.analysis.tidy`).
        name: the view's name (an SQL identifier).
        verify: check each listed part's SHA-256 before the view is made (False: its row count;
            :func:`wflsim.analysis.io.events_files`).

    Returns:
        The runs table.

    Raises:
        RunFolderError: a run's parts and its manifest disagree (nothing is created).
    """
    if not _IDENT.match(name):
        raise ValueError(f"view name {name!r} is not a plain SQL identifier")
    info, found = _runs_info(runs)
    if info.empty:
        raise FileNotFoundError(f"no runs (events.parquet) found in {runs!r}")
    paths = _parquet_paths(con, info["run_dir"], verify)  # literal paths, a shared run's once
    tmp = f"__{name}_runs_df"
    con.register(tmp, info)
    try:
        con.execute(f"create or replace table {name}_runs as select * from {tmp}")
    finally:
        con.unregister(tmp)
    files = _sql_list(p for d in paths for p in paths[d])
    ids = ", ".join(f'r."{c}"' for c in ID_COLUMNS)
    # a part events/part-N.parquet or a file events.parquet belongs to the folder above it
    run_of = "regexp_replace({}.filename, '/events(/[^/]*|[.]parquet)$', '')"
    columns, queues = "e.* exclude (filename)", ""
    recost = [i for i, r in enumerate(found) if r.cost_v is not None]
    if recost:  # points sharing a run at another V: the cost at theirs (r.V), as with_cost_at
        points = _sql_list(info["run"].iloc[recost])
        columns += (
            f" replace (case when r.run in ({points}) and e.cost is not null then "
            "r.V * e.conv_error + q.queue_j * e.energy_j else e.cost end as cost)"
        )
        shared = dict.fromkeys(info["run_dir"].iloc[recost])
        queues = (
            f" left join (select {run_of.format('f')} as folder, frame, device, queue_j "
            f"from read_parquet([{_sql_list(p for d in shared for p in paths[d])}], "
            "filename = true, union_by_name = true) f where event = 'freeze') q "
            "on q.folder = r.run_dir_posix and q.frame = e.frame and q.device = e.device"
        )
    con.execute(
        f"create or replace view {name} as "
        f"select {ids}, {columns} "
        f"from read_parquet([{files}], filename = true, union_by_name = true) e "
        f"join {name}_runs r on {run_of.format('e')} = r.run_dir_posix{queues}"
    )
    return info


#: The characters DuckDB's ``read_parquet`` expands in every path it is given (glob syntax).
_GLOB_CHARS = re.compile(r"[*?\[]")


def duckdb_literal(path: str | os.PathLike[str]) -> str:
    """A file's path as DuckDB's ``read_parquet`` reads that file and no other: DuckDB expands
    ``*``, ``?`` and ``[...]`` in every path, also in a list of files, so each of these characters
    becomes a class that matches only itself (``[*]``, ``[?]``, ``[[]``)."""
    return _GLOB_CHARS.sub(lambda m: f"[{m.group()}]", Path(path).as_posix())


def _parquet_paths(
    con: duckdb.DuckDBPyConnection, run_dirs: Iterable[str], verify: bool = True
) -> dict[str, list[str]]:
    """Each run folder's trace files as literal DuckDB paths (:func:`duckdb_literal`), each
    checked to name exactly its file (DuckDB's ``glob``), never a pattern built from a folder.

    Raises:
        FileNotFoundError: none of the runs has a completed frame.
        ValueError: DuckDB would read another file than the one named.
    """
    out: dict[str, list[str]] = {}
    for d in dict.fromkeys(run_dirs):
        out[d] = []
        for f in events_files(d, verify=verify):
            literal = duckdb_literal(f)
            if literal != f.as_posix():
                matched = [
                    r[0] for r in con.execute("select file from glob(?)", [literal]).fetchall()
                ]
                if matched != [f.as_posix()]:
                    raise ValueError(f"DuckDB cannot name {f} literally (it matches {matched})")
            out[d].append(literal)
    if not any(out.values()):
        raise FileNotFoundError("no completed frame in the runs' traces")
    return out


def _sql_list(texts: Iterable[str]) -> str:
    """Texts as a comma-separated list of SQL string literals."""
    return ", ".join("'" + str(t).replace("'", "''") + "'" for t in texts)
