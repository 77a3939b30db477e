"""benchmarks/network_limit.py, the independent limit of a network-only run: it writes wflsim's
schema, the same events at each trace level and, per event, the columns wflsim's trace fills."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import wflsim
from conftest import benchmark_module
from wflsim.sim.trace import SCHEMA


def limit_module():
    """The benchmark module, loaded from its file (benchmarks/ is not a package)."""
    return benchmark_module("network_limit")


def filled(events: pd.DataFrame) -> dict[str, set[str]]:
    """Per event, the columns that are not null in some row (beyond the key columns)."""
    keys = {"time_s", "frame", "slot", "device", "event"}
    return {
        str(e): {c for c in g.columns if c not in keys and g[c].notna().any()}
        for e, g in events.groupby("event", observed=True)
    }


def test_the_limit_writes_the_documented_schema():
    """The schema read from docs/trace.md is wflsim's trace schema, field for field."""
    assert limit_module().trace_schema().equals(SCHEMA)


@pytest.mark.parametrize("scheme", ["fixed_power", "two_timescale"])
@pytest.mark.parametrize("level", ["events", "device_slots"])
def test_the_limit_fills_the_columns_wflsim_fills(tmp_path: Path, scheme: str, level: str):
    """200 devices x 20 slots: the same events, and per event the same non-null columns."""
    mod = limit_module()
    mod.run_limit(tmp_path, 200, 20, scheme, level)
    limit = pq.read_table(tmp_path).to_pandas()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = wflsim.run(mod.wflsim_table(200, 20, scheme, level), progress=False).events
    assert filled(limit) == filled(ours)
