"""The report: a self-contained HTML page, PNG figures and CSV / Markdown tables."""

from __future__ import annotations

import html
import io
import re
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection

from conftest import REPO, base_scenario, launch_chromium, playwright_api
from test_tidy import write_synthetic_run
from wflsim.analysis import claims, tidy
from wflsim.analysis.io import load_events
from wflsim.analysis.report import FIGURES, report_figures, write_report
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
        "topk": {"scheme": "topk_ef", "scale": 1.2},
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
    one of stale updates, its runs being synchronous, the study's claims: it states none, and
    the privacy figures: it has no [privacy] runs)."""
    made = {p.stem for p in (full_report.parent / "figures").glob("*.png")}
    absent = ("updates", "claims_measured", "privacy", "epsilon")
    assert made == {s.slug for s in FIGURES if s.table not in absent}
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


@pytest.mark.parametrize("which", ["report", "full_report"])
def test_report_loads_in_headless_chromium(which, request):
    """In headless Chromium the page loads every image, logs no console error, its element ids
    are unique, every in-page link and CSV link points at something that exists, and its first
    screen is not blank."""
    sync_api = playwright_api()
    page_path = request.getfixturevalue(which)
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
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
            ids = page.evaluate("Array.from(document.querySelectorAll('[id]')).map(e => e.id)")
            shot = page.screenshot()  # the first screen (the viewport), PNG
        finally:
            browser.close()
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    assert ids and not duplicated, duplicated
    pixels = plt.imread(io.BytesIO(shot), format="png")[..., :3]
    inked = float((pixels.min(axis=-1) < 0.9).mean())  # share of pixels darker than near-white
    assert inked > 0.01, f"the first screen is blank ({inked:.4f} of its pixels inked)"
    assert images and all(ok for _, ok in images), images
    assert anchors and all(ok for _, ok in anchors), anchors
    assert files and all((page_path.parent / f).is_file() for f in files), files
    assert not problems, problems


# ------------------------------------------------------------------ a sweep of the paper's schemes


class _Anchors(HTMLParser):
    """Every element id of a page, its in-page links and its links to files."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "a" and a.get("href"):
            self.hrefs.append(str(a["href"]))


def _anchors(page: Path) -> _Anchors:
    parser = _Anchors()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def paper_sweep(tmp_path_factory):
    """Network-only runs of the paper's four schemes x V = 1, 10, 100 x seeds 0-2 (36 tiny runs
    of the MNIST scenario: 3 devices, 2 frames of 3 slots)."""
    import wflsim

    root = tmp_path_factory.mktemp("papersweep")
    result = wflsim.sweep(
        REPO / "scenarios" / "paper" / "mnist_iid.toml",
        {"scheme.name": ["two_timescale", "only_pc", "only_pf", "ideal"], "scheme.V": [1, 10, 100]},
        [0, 1, 2],
        out=root,
        overrides=[
            "learning.enabled=false",
            "run.frames=2",
            "run.slots_per_frame=3",
            "network.num_devices=3",
        ],
    )
    assert [p["status"] for p in result.points.values()] == ["completed"] * 36
    return root


@pytest.fixture(scope="module")
def paper_report(paper_sweep, tmp_path_factory):
    """The report of the paper sweep (small PNGs: the test reads the page, not the pixels)."""
    return write_report(paper_sweep, tmp_path_factory.mktemp("paperreport"), dpi=50)


@pytest.mark.slow  # the paper sweep's report: about 50 s of the default run's 15 minutes
def test_paper_sweep_bands_stay_within_the_seeds(paper_sweep):
    """Every band of every figure of the sweep's report lies within the seeds' values at its x
    and within the panel; the figures' own record of those values (min, max over the seeds)
    agrees with the tidy table for the queue figure."""
    figs = report_figures(paper_sweep)
    assert {"time_evolution", "queue_evolution", "impact_of_v"} <= set(figs)
    bands = 0
    for fig in figs.values():
        for ax in fig.axes:
            ylo, yhi = sorted(ax.get_ylim())
            for poly in [c for c in ax.collections if isinstance(c, PolyCollection)]:
                (iv,) = [i for i in fig.intervals if i.artist is poly]
                for x, y in np.concatenate([p.vertices for p in poly.get_paths()]):
                    k = int(np.argmin(np.abs(iv.x - x)))
                    assert iv.x[k] == pytest.approx(x)
                    tol = 1e-9 * max(1.0, abs(iv.seed_max[k]))
                    assert iv.seed_min[k] - tol <= y <= iv.seed_max[k] + tol
                    assert ylo - tol <= y <= yhi + tol
                bands += 1
    assert bands >= 20
    slots = tidy.slots(paper_sweep)
    for iv in figs["queue_evolution"].intervals:
        if not iv.label.startswith(("Proposed", "Only-PC", "Only-PF")):
            continue
        v = float(iv.axes.get_title().splitlines()[0].split("V = ")[1])
        scheme = {"Proposed": "two_timescale", "Only-PC": "only_pc", "Only-PF": "only_pf"}
        rows = slots[(slots["scheme"] == scheme[iv.label]) & (slots["V"] == v)]
        q = rows.pivot_table(index="slot", columns="run", values="mean_queue_j")
        assert iv.x == pytest.approx(q.index.to_numpy(dtype=float))
        assert iv.seed_min == pytest.approx(q.min(axis=1).to_numpy())
        assert iv.seed_max == pytest.approx(q.max(axis=1).to_numpy())


@pytest.mark.slow  # the paper sweep's report: about 50 s of the default run's 15 minutes
def test_paper_sweep_page_ids_are_unique_and_links_resolve(paper_report):
    """The page's ids are unique; every href="#..." names one; every file link exists."""
    page = _anchors(paper_report)
    assert len(page.ids) == len(set(page.ids))
    internal = [h[1:] for h in page.hrefs if h.startswith("#")]
    table = pd.read_csv(paper_report.parent / "claims.csv")
    assert len(internal) >= (table["verdict"] != claims.NOT_MEASURABLE).sum() >= 4
    assert set(internal) <= set(page.ids)
    files = [h for h in page.hrefs if not h.startswith("#")]
    assert any(f.startswith("figures/") for f in files)
    assert all((paper_report.parent / f).is_file() for f in files)


def test_full_report_sections_of_one_figure_have_their_own_anchors(full_report):
    """Figs. 9 and 10 (one figure, two sections) link to two different sections, the second
    section to the figure drawn in the first."""
    page = _anchors(full_report)
    text = full_report.read_text(encoding="utf-8")
    fig9 = re.search(r'<a href="#([^"]+)">Fig\. 9:', text)
    fig10 = re.search(r'<a href="#([^"]+)">Fig\. 10:', text)
    assert fig9 and fig10 and fig9.group(1) != fig10.group(1)
    assert len(page.ids) == len(set(page.ids))
    assert {h[1:] for h in page.hrefs if h.startswith("#")} <= set(page.ids)
    assert 'href="#figure-accuracy-late"' in text


@pytest.mark.slow  # the paper sweep's report: about 50 s of the default run's 15 minutes
def test_verdicts_from_short_runs_carry_the_warning(paper_report):
    """The sweep's runs have 6 slots: each verdict drawn from them says so in the page (in the
    claims table and in its section), in report.md and in claims.csv."""
    warning = "drawn from 6-slot runs; the paper's are 400 slots (20 frames x 20 slots)"
    table = pd.read_csv(paper_report.parent / "claims.csv").fillna("")
    drawn = table[table["verdict"] != claims.NOT_MEASURABLE]
    assert len(drawn) >= 4
    assert (drawn["warning"] == warning).all()
    assert (table.loc[table["verdict"] == claims.NOT_MEASURABLE, "warning"] == "").all()
    text = paper_report.read_text(encoding="utf-8")
    assert text.count(html.escape(warning)) >= 2 * len(drawn)
    md = (paper_report.parent / "report.md").read_text(encoding="utf-8")
    assert md.count(f"(warning: {warning})") == 2 * len(drawn)


@pytest.mark.slow  # the paper sweep's report: about 50 s of the default run's 15 minutes
def test_claims_csv_page_and_markdown_give_the_same_verdicts(paper_report):
    """Each measured claim's verdict word and outlier seeds read the same in claims.csv, in the
    page's claims table and in report.md's; the words are the four of claims.VERDICTS, and the
    page states the rule."""
    table = pd.read_csv(paper_report.parent / "claims.csv").fillna("")
    assert list(table.columns[:6]) == ["source", "key", "section", "claim", "verdict", "outliers"]
    assert set(table["verdict"]) <= set(claims.VERDICTS)
    page = paper_report.read_text(encoding="utf-8")
    md = (paper_report.parent / "report.md").read_text(encoding="utf-8")
    for _, row in table[table["verdict"] != claims.NOT_MEASURABLE].iterrows():
        seeds = row["outliers"]
        named = f" (outlier{'s' if ',' in seeds else ''}: {seeds})" if seeds else ""
        assert f"| {row['claim']} | {row['verdict']}{named}" in md
        cell = re.search(
            re.escape(f"<td>{html.escape(row['claim'])}</td>") + r'<td><span class="\w+">([^<]+)'
            r"</span>([^<]*)",
            page,
        )
        assert cell and cell.group(1) == row["verdict"]
        assert html.unescape(cell.group(2)).startswith(named)
    assert (
        "inconclusive when it straddles zero" in page
        and "inconclusive when it straddles zero" in md
    )


def test_report_defaults_to_png_at_200_dpi(report):
    """By default the figures are PNG files of 200 dots per inch, and only PNG."""
    from PIL import Image

    files = list((report.parent / "figures").iterdir())
    assert files and {f.suffix for f in files} == {".png"}
    with Image.open(files[0]) as im:
        assert im.info["dpi"] == pytest.approx((200, 200), abs=0.5)


@pytest.mark.slow  # PNG, PDF and SVG drawn: about 6 s
def test_report_writes_each_format_asked(two_runs, tmp_path):
    """formats png, pdf, svg at 72 dpi: three files per figure, each what it says it is; the
    page embeds the PNG and links every file."""
    from PIL import Image

    page = write_report(two_runs, tmp_path / "r", formats="png,pdf,svg", dpi=72)
    fig = page.parent / "figures" / "time_evolution"
    assert fig.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert fig.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"
    assert b"<svg" in fig.with_suffix(".svg").read_bytes()[:2000]
    with Image.open(fig.with_suffix(".png")) as im:
        assert im.info["dpi"] == pytest.approx((72, 72), abs=0.5)
    text = page.read_text(encoding="utf-8")
    for ext in ("png", "pdf", "svg"):
        assert f'href="figures/time_evolution.{ext}"' in text
    assert "--format png,pdf,svg --dpi 72" in text  # the command that made the report


@pytest.mark.slow  # about 5 s
def test_report_in_pdf_only_still_embeds_a_png(two_runs, tmp_path):
    """formats = pdf: no PNG file, yet the page shows the figure (an embedded PNG) and the
    Markdown report links the PDF."""
    page = write_report(two_runs, tmp_path / "r", formats=["pdf"])
    assert not list((page.parent / "figures").glob("*.png"))
    assert re.search(r'src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"', page.read_text())
    md = (page.parent / "report.md").read_text(encoding="utf-8")
    assert "[figures/time_evolution.pdf](figures/time_evolution.pdf)" in md


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--format", "gif"], "--format"),
        (["--format", "png,,pdf"], "--format"),
        (["--dpi", "many"], "--dpi"),
        (["--dpi", "5000"], "--dpi"),
        (["--dpi", "0"], "--dpi"),
    ],
)
def test_report_command_refuses_bad_format_or_dpi(two_runs, tmp_path, capsys, flags, field):
    """A bad --format or --dpi: exit code 2, one line naming the option and the fix, nothing
    written."""
    from wflsim.app.cli import main

    out = tmp_path / "r"
    assert main(["report", str(two_runs), "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"wflsim: error: {field}:") and "fix:" in err
    assert not out.exists()


@pytest.mark.slow  # three formats drawn twice: about 13 s
def test_pdf_and_svg_figures_are_reproducible(two_runs, tmp_path):
    """The same runs give byte-identical PDF and SVG figures (no date, no random ids)."""
    a = write_report(two_runs, tmp_path / "a", formats="pdf,svg").parent / "figures"
    b = write_report(two_runs, tmp_path / "b", formats="pdf,svg").parent / "figures"
    names = sorted(p.name for p in a.iterdir())
    assert names and names == sorted(p.name for p in b.iterdir())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_command_of_python_m_wflsim_is_shown_as_wflsim(tmp_path):
    """A run made by ``python -m wflsim`` (argv[0] .../wflsim/__main__.py) is listed as the
    ``wflsim`` command anyone can rerun; another script keeps its name."""
    import json

    from wflsim.analysis.report import run_commands

    for name, prog in (("a", "/env/lib/wflsim/__main__.py"), ("b", "/home/x/other/__main__.py")):
        write_synthetic_run(tmp_path / name, seed=ord(name))
        manifest = {"status": "completed", "command": [prog, "run", f"{name}.toml"]}
        (tmp_path / name / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    runs = tidy.runs_table(tmp_path)
    assert sorted(run_commands(runs)) == ["__main__.py run b.toml", "wflsim run a.toml"]


def test_markdown_report_shows_a_run_named_like_markup_as_text(tmp_path):
    """A run folder named <script>alert(1)|x: report.md and the tables' .md files show the name
    as escaped text (no raw tag, no extra table cell)."""
    write_synthetic_run(tmp_path / "src" / "<script>alert(1)|x")
    page = write_report(tmp_path / "src", tmp_path / "out")
    for md in [page.parent / "report.md", *page.parent.glob("*.md")]:
        text = md.read_text(encoding="utf-8")
        assert "<script" not in text, md.name
    assert "&lt;script&gt;alert(1)\\|x" in (page.parent / "report.md").read_text(encoding="utf-8")


def test_both_writers_escape_a_skipped_runs_name_and_error(tmp_path):
    """A damaged run named like markup: its note (name and error) is escaped text in both writers."""
    name = "<img src=x onerror=alert(1)>"
    write_synthetic_run(tmp_path / "src" / "ok")
    bad = write_synthetic_run(tmp_path / "src" / name, seed=1)
    for part in bad.rglob("*.parquet"):
        part.write_bytes(b"<script>alert(2)</script>")
    page = write_report(tmp_path / "src", tmp_path / "out")
    for f in (page, page.parent / "report.md"):
        text = f.read_text(encoding="utf-8")
        assert "&lt;img src=x onerror=alert(1)&gt;" in text, f.name
        assert "<img src=x" not in text and "<script" not in text, f.name


def test_draw_figures_only_draws_the_figures_named() -> None:
    """draw_figures(only=[slug]) tries that figure alone (here skipped: the tables are empty)."""
    from wflsim.analysis.report.write import draw_figures

    made, skipped = draw_figures({s.table: pd.DataFrame() for s in FIGURES}, only=["impact_of_v"])
    assert (made, list(skipped)) == ({}, ["impact_of_v"])
