"""Golden traces: every scheme's events on short runs equal the recorded ones on any machine.

Network-side columns must be bit-identical (hashes); the training columns (loss, accuracy)
must agree within tolerances measured across CPUs (tests/golden_runs.py)."""

from __future__ import annotations

import json

import pytest

from conftest import HAS_MNIST
from golden_runs import GOLDEN_FILE, compare, golden_record, golden_runs, run_table

_RECORD = json.loads(GOLDEN_FILE.read_text()) if GOLDEN_FILE.is_file() else None


@pytest.mark.parametrize("name", sorted(golden_runs()))
def test_golden_trace_is_unchanged(name):
    """The run's network-side columns hash to the recorded values and its training columns agree within tolerance."""
    assert _RECORD is not None, f"{GOLDEN_FILE} is missing; record it (see tests/golden_runs.py)"
    scenario, needs_mnist = golden_runs()[name]
    if needs_mnist and not HAS_MNIST:
        pytest.skip("needs MNIST (set WFLSIM_DATA_DIR)")
    problems = compare(_RECORD["runs"][name], golden_record(run_table(scenario)))
    assert not problems, f"{name}: " + "; ".join(problems)
