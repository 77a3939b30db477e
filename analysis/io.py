"""Load a run's trace and manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


def _events_path(run: str | Path) -> Path:
    p = Path(run)
    return p / "events.parquet" if p.is_dir() else p


def load_events(
    run: str | Path, events: list[str] | None = None, columns: list[str] | None = None
) -> pd.DataFrame:
    """The events of a run as a DataFrame with nullable dtypes (nulls stay nulls).

    Args:
        run: a run directory (holding ``events.parquet``) or the Parquet file itself.
        events: keep only these event names (filtered while reading).
        columns: read only these columns (``event`` is always read). A column the file does not
            have (a trace written by an older wflsim) comes back as all-null ``float64``.
    """
    path = _events_path(run)
    missing: list[str] = []
    cols = None
    if columns is not None:
        have = set(pq.read_schema(path).names)
        wanted = list(dict.fromkeys(["event", *columns]))
        cols = [c for c in wanted if c in have]
        missing = [c for c in wanted if c not in have]
    filters = None if events is None else [("event", "in", list(events))]
    table = pq.read_table(path, columns=cols, filters=filters)
    df = table.to_pandas(types_mapper=pd.ArrowDtype)
    df["event"] = df["event"].astype(str).astype("category")
    for c in missing:
        df[c] = pd.Series(pd.NA, index=df.index, dtype=pd.ArrowDtype(pa.float64()))
    return df


def load_manifest(run: str | Path) -> dict[str, Any]:
    """The run's ``manifest.json``."""
    return json.loads((Path(run) / "manifest.json").read_text(encoding="utf-8"))


def read_metadata(run: str | Path) -> dict[str, str]:
    """The key-value metadata stored in ``events.parquet`` (scenario, seed, versions)."""
    meta = pq.read_schema(_events_path(run)).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items()}
