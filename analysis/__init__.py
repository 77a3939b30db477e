"""Reading and analysing wflsim traces (pandas, DuckDB).

``wflsim.analysis.tidy``: tidy tables of one run or many (and a DuckDB view);
``wflsim.analysis.stats``: metrics on them; ``wflsim.analysis.figures``: the paper's figures
(matplotlib); ``wflsim.analysis.report``: ``write_report(run_or_sweep_dir, out_dir)``, one
self-contained HTML page with tables.
"""

from .io import load_events, load_manifest, read_metadata
from .tidy import (
    device_slots,
    duckdb_view,
    evaluations,
    find_runs,
    frames,
    load,
    runs_table,
    slots,
    updates,
)

__all__ = [
    "device_slots",
    "duckdb_view",
    "evaluations",
    "find_runs",
    "frames",
    "load",
    "load_events",
    "load_manifest",
    "read_metadata",
    "runs_table",
    "slots",
    "updates",
]
