"""benchmarks/pfl_compare.py, wflsim against pfl-research: its scenario file, the cohorts and
minibatches it hands the pfl side, and its smoke test without pfl."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from types import ModuleType

import numpy as np
import pytest
import torch

from conftest import REPO, benchmark_module

BENCH = REPO / "benchmarks"


def compare_module() -> ModuleType:
    """The benchmark module, loaded from its file."""
    return benchmark_module("pfl_compare")


def test_the_scenario_file_reads_back_as_the_workload():
    """The written TOML parses back to the table: 100 devices, ideal, uniform k = 10, E = 5."""
    from wflsim.sim.config.loading import scenario_text

    mod = compare_module()
    table = mod.scenario_table(100, 10, 20, 0)
    back = tomllib.loads(scenario_text(table))
    assert back == table
    assert back["network"]["num_devices"] == 100
    assert back["scheme"] == {"name": "ideal"}
    assert back["strategy"]["selection"] == {"rule": "uniform", "k": 10}
    assert (back["learning"]["local_steps"], back["devices"]["batch_size"]) == (5, 32)
    assert (back["run"]["frames"], back["run"]["slots_per_frame"]) == (1, 20)


def test_the_scenario_file_is_a_valid_scenario():
    """wflsim's validator accepts the benchmark's scenario at both presets."""
    from wflsim.app.scenario import validate_scenario
    from wflsim.sim.config.loading import scenario_text

    mod = compare_module()
    for users, cohort, rounds in mod.PRESETS.values():
        sc = validate_scenario(
            tomllib.loads(scenario_text(mod.scenario_table(users, cohort, rounds, 0)))
        )
        assert sc.network.num_devices == users


def test_the_schedule_is_distinct_cohorts_of_own_samples():
    """Each round: `cohort` distinct users, each with 5 x 32 samples of its own part, no sample
    twice within a step (parts of 60 samples, as at 1,000 users)."""
    mod = compare_module()
    parts = [np.arange(60 * n, 60 * (n + 1)) for n in range(50)]
    cohorts, batches = mod.schedule(parts, 7, 3, seed=0)
    assert len(cohorts) == len(batches) == 3
    for ids, rows in zip(cohorts, batches, strict=True):
        assert ids.size == np.unique(ids).size == 7
        assert rows.shape == (7, 5 * 32)
        for n, row in zip(ids, rows, strict=True):
            assert np.isin(row, parts[n]).all()
            for step in row.reshape(5, 32):
                assert np.unique(step).size == 32


def test_the_schedule_is_what_wflsims_learner_draws():
    """The parent's minibatches are the ones wflsim's LocalData draws for the same devices
    and slot (its own sampler, E = 5, B = 32)."""
    from wflsim.models.learner.sampling import LocalData
    from wflsim.sim.rng import Streams

    mod = compare_module()
    parts = [np.arange(60 * n, 60 * (n + 1)) for n in range(20)]
    cohorts, batches = mod.schedule(parts, 4, 2, seed=3)
    x, y = torch.zeros(1200, 1), torch.zeros(1200, dtype=torch.int64)
    data = LocalData(x, y, parts, np.full(20, 32), torch.device("cpu"), None, Streams(3))
    for r, (ids, rows) in enumerate(zip(cohorts, batches, strict=True)):
        drawn = data.draw_steps(r, ids, np.full(ids.size, 5))
        steps = [np.stack(b.samples) for b in drawn]
        assert np.array_equal(np.concatenate(steps, axis=1), rows)


@pytest.mark.parametrize(
    "argv, field",
    [
        (["--users", "5", "--cohort", "9"], "--cohort"),
        (["--threads", "1,x"], "--threads"),
        (["--threads", "0"], "--threads"),
        (["--rounds", "0"], "--rounds"),
        (["--data-dir", "/nonexistent-mnist-folder"], "--data-dir"),
    ],
)
def test_bad_options_exit_2_naming_the_option(capsys, argv, field):
    """An impossible option is refused with exit code 2 and a message naming it."""
    mod = compare_module()
    with pytest.raises(SystemExit) as info:
        mod.parse_args(argv)
    assert info.value.code == 2
    assert field in capsys.readouterr().err


@pytest.mark.slow  # two fresh interpreters and an MNIST run: 40-60 s on 2 cores
def test_quick_without_pfl_prints_wflsim_and_its_split(tmp_path):
    """`--quick --pfl-python /nonexistent` exits 0, says pfl is skipped and prints wflsim's
    seconds per round, accuracy and the split into learning, radio, trace and evaluation."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, str(BENCH / "pfl_compare.py"), "--quick", "--pfl-python", "/nonexistent"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "pfl part SKIPPED" in out
    assert "wflsim/1t  per round" in out
    assert "final test accuracy" in out
    split = next(line for line in out.splitlines() if line.strip().startswith("1 thread(s):"))
    for phase in ("learning", "radio", "trace", "evaluation", "setup"):
        assert f"{phase} " in split
    assert "pfl/wflsim" not in out
