"""The privacy study's script (scenarios/privacy/run_study.sh, docs/results.md "Privacy on the
radio (issue 48)") end to end on a few slots, so that it cannot rot."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scenarios" / "privacy" / "run_study.sh"
CONFIGURATIONS = 17


@pytest.mark.slow
def test_the_privacy_study_runs_end_to_end_and_reports_every_configuration(tmp_path):
    """run_study.sh on one seed and two slots: every configuration completes, the report has
    the privacy table of the 15 private ones, the summary one row per configuration and the
    figure is drawn."""
    out = tmp_path / "study"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        ["bash", str(SCRIPT), str(out), "--", "--seeds", "0"]
        + ["--set", "run.frames=1", "--set", "run.slots_per_frame=2"]
        + ["--set", "learning.eval_every_slots=2"],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    folders = sorted(p.name for p in out.iterdir() if (p / "sweep.json").is_file())
    assert len(folders) == CONFIGURATIONS
    privacy = pd.read_csv(out / "report" / "privacy.csv")
    assert len(privacy) == CONFIGURATIONS - 2  # all but the two without [privacy]
    runs = pd.read_csv(out / "report" / "runs.csv")
    assert sorted(runs["configuration"]) == folders
    assert (runs["completed"] == 1.0).all()
    assert (out / "report" / "report.html").is_file()
    assert (out / "report" / "privacy_study.png").is_file()
    assert "final_accuracy" in (out / "report" / "summary.md").read_text()
