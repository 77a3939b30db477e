"""Reading and analysing wflsim traces (pandas, DuckDB)."""

from analysis.io import load_events, load_manifest, read_metadata

__all__ = ["load_events", "load_manifest", "read_metadata"]
