"""Golden traces: every scheme's events on short runs equal the recorded ones, column by column."""

from __future__ import annotations

import json

import pytest

from conftest import HAS_MNIST
from golden_runs import GOLDEN_FILE, column_hashes, golden_runs, platform_fingerprint, run_table

_RECORD = json.loads(GOLDEN_FILE.read_text()) if GOLDEN_FILE.is_file() else None


@pytest.mark.parametrize("name", sorted(golden_runs()))
def test_golden_trace_is_unchanged(name):
    """The run's events table hashes, column by column, to the recorded golden values."""
    assert _RECORD is not None, f"{GOLDEN_FILE} is missing; record it (see tests/golden_runs.py)"
    here = platform_fingerprint()
    if here != _RECORD["platform"]:
        pytest.skip(f"golden hashes were recorded on {_RECORD['platform']}, this is {here}")
    scenario, needs_mnist = golden_runs()[name]
    if needs_mnist and not HAS_MNIST:
        pytest.skip("needs MNIST (set WFLSIM_DATA_DIR)")
    expected = _RECORD["runs"][name]
    got = column_hashes(run_table(scenario))
    changed = sorted(k for k in expected if got.get(k) != expected[k])
    assert not changed, f"{name}: columns changed: {changed}"
