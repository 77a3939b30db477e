"""The report: a self-contained HTML page, PNG figures and CSV / Markdown tables."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest

from conftest import base_scenario
from test_tidy import write_synthetic_run
from wflsim.analysis.io import load_events
from wflsim.analysis.report import FIGURES, write_report
from wflsim.app.run import execute, make_learner, prepare_scenario
from wflsim.sim.config.loading import validate_scenario


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A sweep folder with two tiny network-only runs (two schemes, same seed)."""
    root = tmp_path_factory.mktemp("sweep")
    for scheme in ("two_timescale", "fixed_power"):
        sc = base_scenario(
            run={"frames": 2, "slots_per_frame": 3, "deadline_s": 0.8},
            network={"num_devices": 3},
            scheme={"name": scheme},
        )
        prep = prepare_scenario(validate_scenario(sc))
        execute(prep, make_learner(prep), root / scheme)
    return root


@pytest.fixture(scope="module")
def report(two_runs, tmp_path_factory):
    """The report of the two-run folder."""
    out = tmp_path_factory.mktemp("report")
    return write_report(two_runs, out)


@pytest.fixture(scope="module")
def full_report(tmp_path_factory):
    """The report of a hand-built sweep rich enough for every figure."""
    root = tmp_path_factory.mktemp("fullsweep")
    for name, kw in {
        "tt10": {"V": 10.0},
        "tt100": {"V": 100.0},
        "tt100_b": {"V": 100.0, "budget": 0.5, "scale": 1.5},
        "ideal": {"scheme": "ideal", "scale": 2.0},
        "tt_dir": {"partition": "dirichlet"},
    }.items():
        write_synthetic_run(root / name, **kw)
    return write_report(root, tmp_path_factory.mktemp("fullreport"))


def test_report_html_embeds_images(report):
    """report.html exists and embeds at least one PNG as a base64 data URI."""
    text = report.read_text(encoding="utf-8")
    assert report.name == "report.html"
    assert len(re.findall(r'src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"', text)) >= 1


def test_report_is_self_contained(report):
    """The page references no external file or server (no http, no relative image paths)."""
    text = report.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text
    assert not re.search(r'src="(?!data:)', text)


def test_report_writes_csv_and_markdown_tables(report):
    """summary.csv has one row per run; each CSV table has its Markdown twin."""
    out = report.parent
    summary = pd.read_csv(out / "summary.csv")
    assert sorted(summary["scheme"]) == ["fixed_power", "two_timescale"]
    for name in ("runs", "summary", "energy_per_device"):
        assert (out / f"{name}.csv").is_file()
        assert (out / f"{name}.md").read_text(encoding="utf-8").startswith("| run |")


def test_report_tables_match_the_traces(report, two_runs):
    """The summary's total energy equals each run's manifest total."""
    import json

    summary = pd.read_csv(report.parent / "summary.csv").set_index("run")
    for run in ("two_timescale", "fixed_power"):
        manifest = json.loads((two_runs / run / "manifest.json").read_text(encoding="utf-8"))
        total = manifest["summary"]["total_energy_j"]
        assert summary.loc[run, "total_energy_j"] == pytest.approx(total, rel=1e-9)


def test_report_notes_skipped_figures(report):
    """Figures the runs cannot make (one V, no evaluations) are skipped with a note."""
    text = report.read_text(encoding="utf-8")
    assert "Impact of V: skipped" in text
    assert "Test accuracy vs total energy: skipped" in text
    assert (report.parent / "figures" / "time_evolution.png").is_file()
    assert not (report.parent / "figures" / "impact_of_v.png").exists()


def test_full_report_makes_every_figure(full_report):
    """A sweep with V values, budgets, partitions and evaluations yields every figure (but the
    one of stale updates: its runs are synchronous)."""
    made = {p.stem for p in (full_report.parent / "figures").glob("*.png")}
    assert made == {spec.slug for spec in FIGURES if spec.table != "updates"}
    assert "skipped" not in full_report.read_text(encoding="utf-8")


def test_report_of_a_single_run(two_runs, tmp_path):
    """A run directory on its own is a valid source."""
    page = write_report(two_runs / "fixed_power", tmp_path / "one")
    assert len(pd.read_csv(page.parent / "summary.csv")) == 1


def test_unreadable_run_is_skipped_with_a_note(tmp_path):
    """A run whose events.parquet is not readable (still being written) is noted, not fatal."""
    write_synthetic_run(tmp_path / "src" / "good")
    bad = tmp_path / "src" / "bad"
    bad.mkdir()
    (bad / "events.parquet").write_bytes(b"PAR1 not yet")
    page = write_report(tmp_path / "src", tmp_path / "out")
    assert "bad" in page.read_text(encoding="utf-8") and "not readable" in page.read_text(
        encoding="utf-8"
    )
    assert len(pd.read_csv(page.parent / "summary.csv")) == 1


def test_no_runs_is_an_error(tmp_path):
    """A folder without runs raises FileNotFoundError."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        write_report(tmp_path / "empty", tmp_path / "out")


def test_run_failed_before_its_first_slot_is_listed(tmp_path):
    """A failed run with no slot appears in the summary with 0 slots and a status note."""
    import json

    import numpy as np

    from conftest import write_legacy_trace
    from wflsim.sim.trace import TraceBuffer

    write_synthetic_run(tmp_path / "src" / "ok")
    dead = tmp_path / "src" / "dead"
    dead.mkdir()
    resolved = validate_scenario(base_scenario()).model_dump(mode="json")
    meta = {"wflsim.scenario_resolved": json.dumps(resolved)}
    buf = TraceBuffer()
    buf.add("device_config", 0.0, 0, -1, np.arange(2, dtype=np.int32), energy_budget_j=0.3)
    write_legacy_trace(dead / "events.parquet", buf, meta)
    (dead / "manifest.json").write_text(json.dumps({"status": "failed"}), encoding="utf-8")
    page = write_report(tmp_path / "src", tmp_path / "out")
    summary = pd.read_csv(page.parent / "summary.csv").set_index("run")
    assert summary.loc["dead", "slots"] == 0 and summary.loc["ok", "slots"] == 4
    assert "run dead: status failed" in page.read_text(encoding="utf-8")


def test_summary_agrees_with_raw_events(report, two_runs):
    """The report's per-run summary equals figures computed directly from each raw trace."""
    summary = pd.read_csv(report.parent / "summary.csv").set_index("run")
    for run in ("two_timescale", "fixed_power"):
        df = load_events(two_runs / run)
        e = df[df.event == "energy"]
        part = e["participating"].astype(bool)
        late = part & ~e["success"].astype(bool)
        row = summary.loc[run]
        assert row["energy_per_device_slot_j"] == pytest.approx(float(e["energy_j"].mean()))
        assert row["mean_queue_j"] == pytest.approx(float(e["queue_j"].mean()))
        gamma = df[df.event == "freeze"]["gamma"].astype(float).mean()
        assert row["mean_gamma"] == pytest.approx(gamma, abs=1e-12)
        assert row["participation"] == pytest.approx(float(part.mean()))
        assert row["outage_rate"] == pytest.approx(late.sum() / max(int(part.sum()), 1))
        agg = df[df.event == "aggregate"]["slot_duration_s"].astype(float).sum()
        assert row["total_latency_s"] == pytest.approx(agg)


def _chromium(playwright):
    """Chromium for Playwright: the system's (chromium, google-chrome) or Playwright's own."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        exe = shutil.which(name)
        if exe:
            return playwright.chromium.launch(executable_path=exe, args=["--no-sandbox"])
    try:
        return playwright.chromium.launch()
    except Exception as err:  # no browser installed
        pytest.skip(f"no Chromium for the headless check ({type(err).__name__})")


@pytest.mark.parametrize("which", ["report", "full_report"])
def test_report_loads_in_headless_chromium(which, request):
    """In headless Chromium the page loads every image, logs no console error, and every
    in-page link and CSV link points at something that exists."""
    sync_api = pytest.importorskip("playwright.sync_api")
    page_path = request.getfixturevalue(which)
    with sync_api.sync_playwright() as p:
        browser = _chromium(p)
        try:
            page = browser.new_page()
            problems: list[str] = []
            page.on(
                "console",
                lambda m: problems.append(m.text) if m.type in ("error", "warning") else None,
            )
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(page_path.resolve().as_uri(), wait_until="load")
            images = page.evaluate(
                "Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0])"
            )
            anchors = page.evaluate(
                "Array.from(document.querySelectorAll('a[href^=\"#\"]'))"
                ".map(a => [a.getAttribute('href'), !!document.getElementById(a.getAttribute('href').slice(1))])"
            )
            files = page.evaluate(
                "Array.from(document.querySelectorAll('a[href$=\".csv\"]')).map(a => a.getAttribute('href'))"
            )
        finally:
            browser.close()
    assert images and all(ok for _, ok in images), images
    assert anchors and all(ok for _, ok in anchors), anchors
    assert files and all((page_path.parent / f).is_file() for f in files), files
    assert not problems, problems
