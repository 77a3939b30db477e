"""A report of one run or a sweep: figures (PNG, and PDF or SVG on request), tables (CSV and
Markdown) and one HTML page.

``python -m wflsim.analysis.report RUN_OR_SWEEP_DIR OUT_DIR`` writes it and prints the page's path.

The HTML page is self-contained (figures embedded as base64 PNG data URIs, tables as HTML, the
style inline): it opens from disk with no server and can be mailed as one file. Every element id
of the page is unique and every in-page link points to one of them.
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
import shlex
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from matplotlib import rc_context
from matplotlib.figure import Figure

from wflsim.sim.errors import ScenarioError
from wflsim.sim.rundir import RunFolderError, link_error, read_manifest

from . import claims, stats, tidy
from . import figures as F
from .io import read_metadata
from .stats import md_escape, to_markdown

#: Figure file formats ``write_report`` can write (``--format``), and the default.
FORMATS: tuple[str, ...] = ("png", "pdf", "svg")
DEFAULT_FORMATS: tuple[str, ...] = ("png",)
#: Resolution of the PNG figures (dots per inch, ``--dpi``): the default suits a paper's
#: two-column figure; the range keeps a 12-panel figure's PNG under about 100 megapixels.
DEFAULT_DPI = 200
DPI_RANGE: tuple[int, int] = (50, 600)

#: What the bands and bars of the figures are (every caption says it).
BAND = (
    "Lines: the mean over seeds in the axis' scale (the geometric mean on a log axis); band: "
    "its 95 % Student-t interval over the seeds, computed in that scale and cut to the range of "
    "the seeds' values at each point (with 2 or 3 seeds it is mostly that range). A dashed line "
    "is an outlier seed, named (it alone makes most of the seeds' spread; it stays in the mean "
    "and the band)."
)
BARS = (
    "Points: the mean over seeds in the axis' scale; bars: its 95 % Student-t interval, "
    "computed in that scale and cut to the range of the seeds' values."
)


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the report: file stem, heading, the table it is drawn from, the function."""

    slug: str
    title: str
    table: str  # "summary", "slots", "frames", "evaluations", "energy_per_device" or "updates"
    make: Callable[[pd.DataFrame], Figure]
    caption: str


#: The report's figures, in order (the paper's first).
FIGURES: list[FigureSpec] = [
    FigureSpec(
        "stable_parameters",
        "Percentage of stable parameters",
        "slots",
        F.stable_parameters,
        "Parameters of the global model that moved less than 0.5 % of their total absolute update "
        "over the last 10 updates (paper Fig. 1). " + BAND,
    ),
    FigureSpec(
        "impact_of_v",
        "Impact of V",
        "summary",
        F.impact_of_v,
        "Average convergence error, energy and queue length against the Lyapunov weight V "
        "(paper, Impact of V); a scheme that ignores V is a thick horizontal line (and band), and "
        "an outlier seed of it a dashed one, named. " + BARS,
    ),
    FigureSpec(
        "time_evolution",
        "Time evolution of energy and cost",
        "slots",
        F.time_evolution,
        "Running time-average of the energy per device-slot and of the cost z = V X + Q E "
        "(paper Figs. 3-4), one column per V. " + BAND,
    ),
    FigureSpec(
        "accuracy_vs_energy",
        "Test accuracy vs total energy",
        "evaluations",
        F.accuracy_vs_energy,
        "Test accuracy against the energy spent by all devices so far (x: its mean over seeds). "
        + BAND,
    ),
    FigureSpec(
        "accuracy_vs_latency",
        "Test accuracy vs total latency",
        "evaluations",
        F.accuracy_vs_latency,
        "Test accuracy against the total latency (sum of the slot durations; x: its mean over "
        "seeds). " + BAND,
    ),
    FigureSpec(
        "accuracy_late",
        "Test accuracy in the second half of training",
        "evaluations",
        F.accuracy_late,
        "Test accuracy from half of the runs' slots on, against the total energy (left) and the "
        "total latency (right); the accuracy axis spans only these values, so that the late "
        "differences the state-of-the-art claims (paper Figs. 9-10) are read at can be seen. "
        + BAND,
    ),
    FigureSpec(
        "staleness",
        "Staleness of the updates",
        "updates",
        F.staleness,
        "Runs with stale updates ([server] mode semi_sync or async): the share of applied updates "
        "of each staleness (server steps between the model version an update was computed on and "
        "the step that applied it), and what became of the uploads. " + BAND,
    ),
    FigureSpec(
        "impact_of_energy_budget",
        "Impact of the energy budget",
        "summary",
        F.impact_of_energy_budget,
        "Average energy and queue length against the energy budget E_bar (paper, Impact of E_n). "
        + BARS,
    ),
    FigureSpec(
        "energy_budget_per_device",
        "Energy and queue against each device's budget",
        "energy_per_device",
        F.energy_budget_per_device,
        "Each device's average energy and queue length against its own budget E_bar_n, one point "
        "per device and run, one row per scheme and V (the impact of the energy budget within a "
        "configuration); each column has one y axis for all rows.",
    ),
    FigureSpec(
        "gamma_evolution",
        "Freezing fraction over frames",
        "frames",
        F.gamma_evolution,
        "Mean fraction of parameters frozen per frame. " + BAND,
    ),
    FigureSpec(
        "queue_evolution",
        "Energy-deficit queue over time",
        "slots",
        F.queue_evolution,
        "Mean virtual queue Q over devices after each slot. " + BAND,
    ),
    FigureSpec(
        "participation_and_latency",
        "Latency, participation and outages",
        "slots",
        F.participation_and_latency,
        "Per frame: mean slot latency, participating devices and outages among them. " + BAND,
    ),
]

#: Summary columns averaged over seeds in the ``by_config`` table (mean, standard error and a 95 %
#: Student-t interval over the seeds of each configuration,
#: :func:`wflsim.analysis.stats.over_seeds`).
SEED_MEAN_COLUMNS: list[str] = [
    "energy_per_device_slot_j",
    "mean_queue_j",
    "mean_conv_error",
    "mean_cost",
    "mean_gamma",
    "participation",
    "outage_rate",
    "total_latency_s",
    "final_accuracy",
]

_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1300px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
.scroll { overflow-x: auto; }
table.tbl { border-collapse: collapse; font-size: 0.82em; }
table.tbl th, table.tbl td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; }
table.tbl th { background: #f4f4f4; }
.notes li { color: #7a4b00; } .meta { color: #555; font-size: 0.9em; }
pre { background: #f6f6f6; padding: 0.6em; white-space: pre-wrap; font-size: 0.85em; }
table.claims td { text-align: left; max-width: 40em; }
ul.claims li { margin: 0.5em 0; }
.ok { color: #1b6e20; font-weight: bold; } .no { color: #a31515; font-weight: bold; }
.maybe { color: #8a5300; font-weight: bold; }
.na { color: #666; font-weight: bold; }
.warn { color: #8a5300; background: #fff4db; padding: 0 0.3em; font-weight: normal; }
"""

_HTML_MAX_ROWS = 200


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _html_table(df: pd.DataFrame) -> str:
    return df.to_html(
        index=False, border=0, classes="tbl", na_rep="-", float_format=lambda v: f"{v:.4g}"
    )


@dataclass
class Drawn:
    """A figure as the report keeps it: the PNG the page embeds, the files written (relative to
    the report folder, one per format) and what the figure says about coinciding lines."""

    png: bytes
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _render(fig: Figure, out: Path, slug: str, dpi: int, formats: Sequence[str]) -> Drawn:
    """``fig`` as ``figures/<slug>.<format>`` for each of ``formats`` (``dpi`` for PNG) and as the
    PNG the page embeds (rendered once when PNG is a format)."""
    drawn = Drawn(b"", notes=list(getattr(fig, "notes", [])))
    for fmt in ("png", *[f for f in formats if f != "png"]):
        buf = io.BytesIO()
        with rc_context({"svg.hashsalt": "wflsim"}):  # SVG ids from a fixed salt, not uuid4
            fig.savefig(buf, format=fmt, dpi=dpi, metadata=_FILE_METADATA.get(fmt))
        if fmt == "png":
            drawn.png = buf.getvalue()
        if fmt in formats:
            name = f"figures/{slug}.{fmt}"
            _write(out / name, buf.getvalue())
            drawn.files.append(name)
    return drawn


#: No creation date in the PDF and SVG files (and fixed SVG ids): the same runs give the same
#: files.
_FILE_METADATA: dict[str, dict[str, None]] = {
    "pdf": {"CreationDate": None},
    "svg": {"Date": None},
}


def check_formats(formats: str | Sequence[str], name: str = "--format") -> tuple[str, ...]:
    """The figure formats of ``formats`` ("png,pdf" or a sequence), in the order given, once
    each.

    Raises:
        ScenarioError: on ``name``: an empty list or an unknown format.
    """
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    wanted = [str(f).strip().lower().lstrip(".") for f in items]
    fix = f"give one or more of {', '.join(FORMATS)}, comma-separated, e.g. png,pdf"
    if not wanted or "" in wanted:
        raise ScenarioError(name, "an empty format in the list", fix)
    unknown = [f for f in wanted if f not in FORMATS]
    if unknown:
        raise ScenarioError(name, f"unknown format {unknown[0][:20]!r}", fix)
    return tuple(dict.fromkeys(wanted))


def check_dpi(dpi: object, name: str = "--dpi") -> int:
    """``dpi`` as an integer in :data:`DPI_RANGE` (a string of digits is accepted).

    Raises:
        ScenarioError: on ``name``: not an integer, or out of range.
    """
    lo, hi = DPI_RANGE
    fix = f"give a whole number of dots per inch from {lo} to {hi}; the default is {DEFAULT_DPI}"
    text = str(dpi).strip()
    if isinstance(dpi, bool) or not re.fullmatch(r"\+?[0-9]{1,6}", text):
        raise ScenarioError(name, f"{text[:40]!r} is not a whole number", fix)
    value = int(text)
    if not lo <= value <= hi:
        raise ScenarioError(name, f"{value} is out of range", fix)
    return value


def _write(path: Path, data: bytes | str) -> None:
    """Write a report file, never through a symbolic link (``O_NOFOLLOW``: a link is refused)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        if path.is_symlink():
            raise link_error(path) from None
        raise
    with os.fdopen(fd, "wb") as f:
        f.write(raw)


def _check_no_links(source: Path, out: Path, targets: list[Path]) -> None:
    """Refuse (:class:`ScenarioError`, before anything is written) a symbolic link where the
    report writes: a file of ``targets``, its ``figures/`` folder, or the report folder itself
    when it lies inside the run or sweep folder ``source`` (``DIRECTORY/report``); a report
    folder given elsewhere may be a link to a directory."""
    if out.is_symlink() and out.parent.resolve().is_relative_to(source.resolve()):
        raise link_error(out)
    for path in [out / "figures", *targets]:
        if path.is_symlink():
            raise link_error(path)


def _readable(dirs: list[Path]) -> tuple[list[Path], list[str]]:
    """The runs whose trace can be read, and a note for each that cannot (skipped). A run whose
    files disagree with its manifest (:class:`RunFolderError`) is not skipped but refused: a
    report without it, or with a damaged trace, would mislead."""
    ok, notes = [], []
    for d in dirs:
        try:
            read_metadata(d)
            ok.append(d)
        except RunFolderError:
            raise
        except Exception as err:  # any other unreadable trace is skipped with a note
            status = tidy.run_status(d)
            why = "still running" if status == "running" else f"manifest status: {status}"
            notes.append(f"run {d}: skipped, its trace is not readable ({why}; {err})")
    return ok, notes


def write_report(
    run_or_sweep_dir: str | Path,
    out_dir: str | Path,
    *,
    dpi: int = DEFAULT_DPI,
    title: str | None = None,
    formats: str | Sequence[str] = DEFAULT_FORMATS,
) -> Path:
    """Write the report of a run or a sweep into ``out_dir``; returns the path of ``report.html``.

    The report is a reproduction document: a section per claim of the paper's Section VI (Fig. 1
    to the state-of-the-art comparison), each with its figure, the paper's claim in one line, the
    verdict measured on these runs (holds / inconclusive / does not hold / not measurable here,
    with the numbers and the outlier seeds: :mod:`wflsim.analysis.claims`) and the commands that made the runs and the report; then
    the figures no claim uses, and narrow tables (the full tables as CSV).

    ``run_or_sweep_dir`` is a run directory (``events/`` or ``events.parquet`` inside), a sweep
    directory (run directories anywhere below it) or a glob. ``out_dir`` receives ``report.html``
    (everything embedded), ``report.md``, ``figures/<name>.<format>`` (``formats``: any of
    :data:`FORMATS`, PNG at ``dpi`` dots per inch), ``claims.csv`` and the tables
    ``runs``, ``summary``, ``by_config`` (when a configuration has several runs: per
    configuration the mean, standard error and 95 % Student-t interval over its seeds) and
    ``energy_per_device``, each as ``.csv`` and ``.md``. A figure the runs cannot make (one V
    only, no evaluations, ...) is skipped with a note; an unreadable trace (a run still being
    written) is skipped with a note. Nothing is written through a symbolic link.

    Raises:
        FileNotFoundError: ``run_or_sweep_dir`` does not exist or holds no readable run.
        RunFolderError: a run's trace disagrees with its manifest (a part missing, damaged,
            replaced or not listed: :func:`wflsim.analysis.io.events_files`; nothing written).
        ScenarioError: a symbolic link where the report writes, an unknown format or a ``dpi``
            out of :data:`DPI_RANGE` (nothing written).
    """
    formats = check_formats(formats, "formats")
    dpi = check_dpi(dpi, "dpi")
    source = Path(run_or_sweep_dir)
    out = Path(out_dir)
    dirs = tidy.find_runs(run_or_sweep_dir)
    dirs, notes = _readable(dirs)
    if not dirs:
        raise FileNotFoundError(
            f"no readable runs (a trace in events/ or events.parquet) under {source}"
        )
    data = tidy.load(dirs)
    summary = stats.summary(data.device_slots, data.slots, data.evaluations, runs=data.runs)
    runs = data.runs[
        [c for c in tidy.ID_COLUMNS if c != "variant"]
        + [
            "status",
            "wall_time_s",
            "learning",
            "num_devices",
            "frames",
            "slots_per_frame",
            "deadline_s",
            "variant",
        ]
    ]
    for _, r in runs.iterrows():
        if r["status"] not in ("completed", "unknown"):
            notes.append(f"run {r['run']}: status {r['status']} (its trace may stop early)")
    tables: dict[str, pd.DataFrame] = {"runs": runs, "summary": summary}
    seed_cols = [c for c in SEED_MEAN_COLUMNS if summary[c].notna().any()]
    by_config = stats.over_seeds(summary, value_cols=seed_cols)
    if (by_config["n"] > 1).any():
        tables["by_config"] = by_config
    tables["energy_per_device"] = stats.energy_per_device(data.device_slots)
    verdicts = claims.check_all(summary, data.slots, data.evaluations)
    tables["claims"] = pd.DataFrame(
        [
            {
                "section": c.section,
                "claim": c.text,
                "verdict": v.status,
                "outliers": ", ".join(v.outliers),
                "warning": v.warning,
                "evidence": v.evidence,
            }
            for c, v in verdicts
        ]
    )

    diagnostics = diagnostics_table(dirs)

    fig_dir = out / "figures"
    _check_no_links(
        source,
        out,
        [out / f"{name}.{ext}" for name in tables for ext in ("csv", "md")]
        + [out / "diagnostics.csv"]
        + [fig_dir / f"{spec.slug}.{fmt}" for spec in FIGURES for fmt in formats]
        + [out / "report.html", out / "report.md"],
    )
    out.mkdir(parents=True, exist_ok=True)
    fig_dir.mkdir(exist_ok=True)
    for name, df in tables.items():
        _write(out / f"{name}.csv", df.to_csv(index=False))
        if name != "claims":
            md = stats.format_over_seeds(df) if name == "by_config" else df
            _write(out / f"{name}.md", to_markdown(md) + "\n")
    _write(out / "diagnostics.csv", diagnostics.to_csv(index=False))

    sources = _sources(data, summary, tables["energy_per_device"], dirs)
    figures, skipped = draw_figures(sources)
    notes += [f"{_SPECS[slug].title}: {why}" for slug, why in skipped.items()]
    made = {slug: _render(fig, out, slug, dpi, formats) for slug, fig in figures.items()}
    options = [] if formats == DEFAULT_FORMATS else ["--format", ",".join(formats)]
    options += [] if dpi == DEFAULT_DPI else ["--dpi", str(dpi)]

    page = Page(
        title=title or f"wflsim report: {source.name or source}",
        stamp=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        source=source,
        runs=data.runs,
        commands=run_commands(data.runs)
        + [shlex.join(["wflsim", "report", str(source), "--out", str(out), *options])],
        verdicts=verdicts,
        made=made,
        dpi=dpi,
        skipped=skipped,
        tables=_narrow_tables(tables, by_config),
        notes=notes,
        diagnostics=diagnostics,
    )
    _write(out / "report.html", _html(page))
    _write(out / "report.md", _markdown(page))
    return out / "report.html"


#: The columns of ``diagnostics.csv``: the run (its folder's label), then the finding.
DIAGNOSTIC_COLUMNS = ["run", "code", "field", "problem", "fix"]


def diagnostics_table(dirs: Sequence[Path]) -> pd.DataFrame:
    """The diagnostics of every run (``docs/diagnostics.md``), one row per finding
    (:data:`DIAGNOSTIC_COLUMNS`); a run without a manifest (a trace of an older wflsim) is
    left out."""
    from .diagnostics import diagnose_folder

    labels = tidy.run_labels(dirs)
    rows = []
    for label, folder in zip(labels, dirs, strict=True):
        if not (folder / "manifest.json").is_file():
            continue
        rows += [{"run": label, **d.as_dict()} for d in diagnose_folder(folder)]
    return pd.DataFrame(rows, columns=DIAGNOSTIC_COLUMNS)


def _diagnostics_sentence(page: Page) -> str:
    d = page.diagnostics
    if len(d) == 0:
        return (
            f"No run has a diagnostic (every upload lost, no learning progress, ...: "
            f"docs/diagnostics.md lists what is checked) among {len(page.runs)} run(s)."
        )
    return (
        f"{d['run'].nunique()} of {len(page.runs)} run(s) have diagnostics, computed from "
        "their traces (docs/diagnostics.md), each with the field to change. All rows: "
    )


def _sources(
    data: tidy.Tidy, summary: pd.DataFrame, per_device: pd.DataFrame, dirs: Sequence[Path]
) -> dict[str, pd.DataFrame]:
    """The tables the figures are drawn from, by :attr:`FigureSpec.table`."""
    return {
        "summary": summary,
        "slots": data.slots,
        "frames": data.frames,
        "evaluations": data.evaluations,
        "energy_per_device": per_device,
        "updates": tidy.updates(list(dirs)) if _any_stale(data.runs) else pd.DataFrame(),
    }


def draw_figures(
    sources: Mapping[str, pd.DataFrame],
) -> tuple[dict[str, Figure], dict[str, str]]:
    """The report's figures (:data:`FIGURES`) drawn from ``sources`` (tables by
    :attr:`FigureSpec.table`): ``(slug -> figure, slug -> why it was not drawn)``. A figure of
    stale updates without such runs is neither (it does not apply)."""
    made: dict[str, Figure] = {}
    skipped: dict[str, str] = {}
    for spec in FIGURES:
        if spec.table == "updates" and sources["updates"].empty:
            continue  # no run with stale updates: the figure does not apply (not "skipped")
        try:
            made[spec.slug] = spec.make(sources[spec.table])
        except F.InsufficientData as err:
            skipped[spec.slug] = f"skipped ({err})"
        except Exception as err:  # a report never dies on one figure
            warnings.warn(f"figure {spec.slug} failed: {err!r}", stacklevel=2)
            skipped[spec.slug] = f"failed ({type(err).__name__}: {err})"
    return made, skipped


def report_figures(run_or_sweep_dir: str | Path) -> dict[str, Figure]:
    """The figures :func:`write_report` draws for the runs under ``run_or_sweep_dir``, by file
    name (those the runs cannot make are left out); nothing is written."""
    dirs, _ = _readable(tidy.find_runs(run_or_sweep_dir))
    if not dirs:
        raise FileNotFoundError(f"no readable runs under {run_or_sweep_dir}")
    data = tidy.load(dirs)
    summary = stats.summary(data.device_slots, data.slots, data.evaluations, runs=data.runs)
    per_device = stats.energy_per_device(data.device_slots)
    return draw_figures(_sources(data, summary, per_device, dirs))[0]


def _any_stale(runs: pd.DataFrame) -> bool:
    """Whether any run has stale updates (``[server] mode`` other than ``sync``)."""
    return bool((runs.get("server_mode", pd.Series(dtype=str)) != "sync").any())


def run_commands(runs: pd.DataFrame) -> list[str]:
    """The distinct commands that made the runs (from their manifests), in a form anyone can
    rerun: the program's path shortened to ``wflsim`` (or ``python``)."""
    seen: list[str] = []
    for d in runs["run_dir"]:
        argv = (read_manifest(Path(d)) or {}).get("command")
        if not isinstance(argv, list) or not argv:
            continue
        path = Path(str(argv[0]))
        prog = path.name
        if prog == "__main__.py" and path.parent.name == "wflsim":
            prog = "wflsim"  # python -m wflsim
        prog = "wflsim" if prog == "wflsim" else ("python" if prog.startswith("python") else prog)
        cmd = shlex.join([prog, *map(str, argv[1:])])
        if cmd not in seen:
            seen.append(cmd)
    return seen


#: The columns of the summary shown in the page (all are in ``summary.csv``).
SHOWN_METRICS: list[str] = [
    "energy_per_device_slot_j",
    "mean_queue_j",
    "mean_conv_error",
    "mean_cost",
    "participation",
    "final_accuracy",
]


def _constant_ids(df: pd.DataFrame) -> list[str]:
    return [
        c
        for c in tidy.ID_COLUMNS
        if c in df.columns and c != "run" and df[c].astype(str).nunique() <= 1
    ]


def _narrow_tables(
    tables: dict[str, pd.DataFrame], by_config: pd.DataFrame
) -> list[tuple[str, str, pd.DataFrame | None]]:
    """The tables as the page shows them: ``(name, sentence, narrow table or None)``: columns
    that are equal in every row are said once, the summary keeps its headline metrics, the
    per-device table is a link only; the full tables are the CSV files."""
    out: list[tuple[str, str, pd.DataFrame | None]] = []
    for name, df in tables.items():
        if name == "claims":
            continue
        const = _constant_ids(df)
        said = ", ".join(f"{c} = {df[c].iloc[0]}" for c in const if len(df) and str(df[c].iloc[0]))
        sentence = f"In every row: {said}. " if said else ""
        metrics = [c for c in SHOWN_METRICS if c in df.columns and df[c].notna().any()]
        if name == "runs":
            keep = [c for c in df.columns if c not in const]
            shown: pd.DataFrame | None = df[keep]
        elif name == "summary":
            shown = df[[c for c in tidy.ID_COLUMNS if c in df.columns and c not in const] + metrics]
        elif name == "by_config":
            ids = [c for c in stats.CONFIG_COLUMNS if c in df.columns and c not in const]
            shown = stats.format_over_seeds(by_config)[ids + ["n"] + metrics]
            sentence += "Each value: mean [95 % interval] over the seeds of the configuration. "
        else:
            shown = None
            sentence += f"{len(df)} rows (one per device and run). "
        out.append((name, sentence, shown))
    return out


@dataclass
class Page:
    """What the HTML page and the Markdown report show."""

    title: str
    stamp: str
    source: Path
    runs: pd.DataFrame
    commands: list[str]
    verdicts: list[tuple[claims.Claim, claims.Verdict]]
    made: dict[str, Drawn]
    dpi: int
    skipped: dict[str, str]
    tables: list[tuple[str, str, pd.DataFrame | None]]
    notes: list[str]
    diagnostics: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=DIAGNOSTIC_COLUMNS)
    )

    def sections(self) -> list[tuple[str, str, list[tuple[claims.Claim, claims.Verdict]]]]:
        """``(section, figure slug, its claims)`` in the paper's order."""
        out: list[tuple[str, str, list[tuple[claims.Claim, claims.Verdict]]]] = []
        for c, v in self.verdicts:
            if out and out[-1][0] == c.section:
                out[-1][2].append((c, v))
            else:
                out.append((c.section, c.figure, [(c, v)]))
        return out

    def other_figures(self) -> list[FigureSpec]:
        used = {c.figure for c, _ in self.verdicts}
        return [f for f in FIGURES if f.slug not in used and f.slug in self.made]

    def counts(self) -> str:
        n = {s: sum(v.status == s for _, v in self.verdicts) for s in _VERDICT_ORDER}
        return ", ".join(f"{k}: {n[k]}" for k in _VERDICT_ORDER)


_VERDICT_ORDER = list(claims.VERDICTS)
_VERDICT_CLASS = {
    claims.HOLDS: "ok",
    claims.INCONCLUSIVE: "maybe",
    claims.FAILS: "no",
    claims.NOT_MEASURABLE: "na",
}
#: The verdicts' rule in a few sentences (the page and report.md; the rule in full:
#: docs/decisions.md, "Verdicts and outlier seeds").
VERDICT_RULE = (
    "Each verdict reads the 95 % Student-t interval of the difference paired by seed: holds "
    "when it lies on the claimed side of zero, does not hold when it lies on the other side (or "
    "a trend has a step that goes significantly the other way), inconclusive when it straddles "
    "zero (the evidence says how many seeds point each way and how many seeds the observed "
    "spread would need to exclude zero). A claim of several comparisons does not hold when one "
    "does not, is inconclusive when one is and none fails. With one seed the direction alone "
    "decides, with a warning. An outlier seed (left out, the other seeds' standard deviation "
    "falls below a third of all seeds') is named next to the verdict and in the figures, and "
    "kept in the mean and the interval."
)
_SPECS = {f.slug: f for f in FIGURES}
_TABLE_TITLES = {
    "runs": "Runs",
    "summary": "Summary (one row per run)",
    "by_config": "Mean over seeds with a 95 % interval (one row per configuration)",
    "energy_per_device": "Energy per device",
}


def anchor(text: str) -> str:
    """An HTML id from ``text``: lower case, runs of other characters than letters and digits
    as one hyphen ("Fig. 5: test accuracy" -> "fig-5-test-accuracy")."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


class _Ids:
    """Unique element ids for one page: the same ``key`` gets the same id, a new key whose
    text is taken gets a numbered one ("-2", "-3", ...)."""

    def __init__(self) -> None:
        self._by_key: dict[str, str] = {}
        self._taken: set[str] = set()

    def has(self, key: str) -> bool:
        """Whether ``key`` already has its id (its element is on the page)."""
        return key in self._by_key

    def __call__(self, key: str, text: str | None = None) -> str:
        if key not in self._by_key:  # a new element
            base = anchor(text or key)
            new, k = base, 1
            while new in self._taken:
                k += 1
                new = f"{base}-{k}"
            self._taken.add(new)
            self._by_key[key] = new
        return self._by_key[key]


def _outliers_text(v: claims.Verdict) -> str:
    """The outlier seeds next to a verdict (" (outlier: seed 1)"; "" for none)."""
    if not v.outliers:
        return ""
    return f" ({'outliers' if len(v.outliers) > 1 else 'outlier'}: {', '.join(v.outliers)})"


def _warning_html(v: claims.Verdict) -> str:
    esc = html.escape
    return f' <span class="warn">&#9888; {esc(v.warning)}</span>' if v.warning else ""


def _html(page: Page) -> str:
    esc = html.escape
    ids = _Ids()
    schemes = ", ".join(sorted(page.runs["scheme_label"].unique()))
    commands = "\n".join(page.commands)
    sections = page.sections()
    section_id = {
        section: ids("section:" + section, "claim " + section) for section, _, _ in sections
    }
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(page.title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{esc(page.title)}</h1>",
        f'<p class="meta">Source: <code>{esc(str(page.source))}</code> &middot; '
        f"{len(page.runs)} run(s) &middot; schemes: {esc(schemes)} &middot; generated "
        f"{esc(page.stamp)}</p>",
        "<h2>How these runs were made</h2>",
        f"<pre>{esc(commands)}</pre>",
        "<h2>The paper's claims at a glance</h2>",
        f"<p>{esc(page.counts())}. {esc(VERDICT_RULE)}</p>",
    ]
    said = " ".join(v.warning for _, v in page.verdicts)
    short = sorted(set(re.findall(r"drawn from [^;]+; the paper's are [^)]+\)", said)))
    if short:
        parts.append(
            '<p class="warn">&#9888; Verdicts marked so are drawn from runs shorter than the '
            f"paper's ({esc('; '.join(short))}): a trend that needs the paper's length to show "
            "may not show here.</p>"
        )
    if claims.ONE_SEED_WARNING in said:
        parts.append(
            '<p class="warn">&#9888; Verdicts marked so are drawn from one seed: there is no '
            "interval, the direction alone decides; run more seeds to see whether it is "
            "within the seed noise.</p>"
        )
    parts.append('<table class="tbl claims"><tr><th>figure</th><th>claim</th><th>verdict</th></tr>')
    for c, v in page.verdicts:
        parts.append(
            f'<tr><td><a href="#{section_id[c.section]}">{esc(c.section)}</a></td>'
            f"<td>{esc(c.text)}</td>"
            f'<td><span class="{_VERDICT_CLASS[v.status]}">{esc(v.status)}</span>'
            f"{esc(_outliers_text(v))}{_warning_html(v)}</td></tr>"
        )
    parts.append("</table>")
    if page.notes:
        parts.append('<h2>Notes</h2><ul class="notes">')
        parts += [f"<li>{esc(n)}</li>" for n in page.notes]
        parts.append("</ul>")
    parts.append(f'<h2 id="{ids("diagnostics", "run diagnostics")}">Run diagnostics</h2>')
    sentence = _diagnostics_sentence(page)
    if len(page.diagnostics):
        sentence_html = f'{esc(sentence)}<a href="diagnostics.csv">diagnostics.csv</a>.'
        shown = page.diagnostics.head(_HTML_MAX_ROWS)
        parts += [f"<p>{sentence_html}</p>", _html_table(shown)]
    else:
        parts.append(f"<p>{esc(sentence)}</p>")
    for section, slug, items in sections:
        parts.append(f'<h2 id="{section_id[section]}">{esc(section)}</h2>')
        parts.append(_html_figure(page, slug, ids))
        parts.append('<ul class="claims">')
        for c, v in items:
            parts.append(
                f'<li><b>Claim:</b> {esc(c.text)}<br><span class="{_VERDICT_CLASS[v.status]}">'
                f"{esc(v.status)}</span>{esc(_outliers_text(v))}{_warning_html(v)}: "
                f"{esc(v.evidence)}</li>"
            )
        parts.append("</ul>")
        parts.append(f'<p class="meta">Made by:</p><pre>{esc(commands)}</pre>')
    others = page.other_figures()
    if others:
        parts.append("<h2>Other figures</h2>")
        for spec in others:
            parts.append(_html_figure(page, spec.slug, ids, heading=True))
    parts.append("<h2>Tables</h2>")
    for name, sentence, df in page.tables:
        parts.append(f'<h3 id="{ids("table:" + name, "table " + name)}">')
        parts[-1] += f"{esc(_TABLE_TITLES.get(name, name))}</h3>"
        parts.append(
            f'<p class="meta">{esc(sentence)}All columns: <a href="{name}.csv">{name}.csv</a>.</p>'
        )
        if df is not None:
            if len(df) > _HTML_MAX_ROWS:
                parts.append(f"<p>The first {_HTML_MAX_ROWS} of {len(df)} rows.</p>")
                df = df.head(_HTML_MAX_ROWS)
            parts.append(f'<div class="scroll">{_html_table(df)}</div>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _html_figure(page: Page, slug: str, ids: _Ids, heading: bool = False) -> str:
    """The figure ``slug`` (embedded PNG, caption, links to its files) the first time; a link
    to it after that; a note when it was not drawn."""
    esc = html.escape
    spec = _SPECS[slug]
    key = "figure:" + slug
    if ids.has(key):
        return f'<p class="meta">Figure: <a href="#{ids(key)}">{esc(spec.title)}</a> (above).</p>'
    if slug not in page.made:
        why = page.skipped.get(slug, "not made")
        return f'<p class="meta">Figure {esc(spec.title)}: {esc(why)}.</p>'
    drawn = page.made[slug]
    b64 = base64.b64encode(drawn.png).decode("ascii")
    # shown at 100 CSS pixels per inch of the figure, whatever its dpi (sharp on dense screens)
    width = int.from_bytes(drawn.png[16:20], "big") * 100 // max(1, page.dpi)
    head = f"<h3>{esc(spec.title)}</h3>" if heading else ""
    links = ", ".join(f'<a href="{esc(f)}">{esc(f)}</a>' for f in drawn.files)
    notes = f" In this figure: {esc('; '.join(drawn.notes))}." if drawn.notes else ""
    return (
        f'<figure id="{ids(key, "figure " + slug)}">{head}'
        f'<img alt="{esc(spec.title)}" width="{width}" src="data:image/png;base64,{b64}">'
        f"<figcaption>{esc(spec.caption)}{notes}"
        f"{f' Files: {links}.' if links else ''}</figcaption></figure>"
    )


def _markdown(page: Page) -> str:
    """The report as Markdown: every text that comes from the runs (names, paths, notes,
    evidence) escaped (:func:`md_escape`), the commands in a fence no command can close."""
    esc = md_escape
    fence = "`" * max(
        3, 1 + max((len(r) for c in page.commands for r in re.findall("`+", c)), default=0)
    )
    lines = [
        f"# {esc(page.title)}",
        "",
        f"Source: {esc(page.source)}, {len(page.runs)} run(s), generated {page.stamp}.",
        "",
        "## How these runs were made",
        "",
        f"{fence}bash",
        *(" ".join(c.splitlines()) for c in page.commands),
        fence,
        "",
        "## The paper's claims at a glance",
        "",
        f"{page.counts()}. {VERDICT_RULE}",
        "",
        "| figure | claim | verdict |",
        "|---|---|---|",
    ]
    lines += [
        f"| {esc(c.section)} | {esc(c.text)} | {v.status}{esc(_outliers_text(v))}{_warning_md(v)} |"
        for c, v in page.verdicts
    ]
    lines.append("")
    if page.notes:
        lines += ["## Notes", ""] + [f"- {esc(n)}" for n in page.notes] + [""]
    lines += ["## Run diagnostics", ""]
    if len(page.diagnostics):
        lines += [f"{_diagnostics_sentence(page)}`diagnostics.csv`.", ""]
        lines += [to_markdown(page.diagnostics.head(_HTML_MAX_ROWS)), ""]
    else:
        lines += [_diagnostics_sentence(page), ""]
    drawn: set[str] = set()
    for section, slug, items in page.sections():
        lines += [f"## {esc(section)}", ""]
        if slug in page.made and slug not in drawn:
            drawn.add(slug)
            lines += _markdown_figure(page, slug)
        elif slug not in page.made:
            why = page.skipped.get(slug, "not made")
            lines += [f"Figure {esc(_SPECS[slug].title)}: {esc(why)}.", ""]
        for c, v in items:
            lines += [
                f"- **Claim:** {esc(c.text)} **{v.status}**{esc(_outliers_text(v))}"
                f"{_warning_md(v)}: {esc(v.evidence)}"
            ]
        lines.append("")
    others = page.other_figures()
    if others:
        lines += ["## Other figures", ""]
        for spec in others:
            lines += [f"### {esc(spec.title)}", "", *_markdown_figure(page, spec.slug)]
    lines += ["## Tables", ""]
    for name, sentence, df in page.tables:
        lines += [
            f"### {esc(_TABLE_TITLES.get(name, name))}",
            "",
            f"{esc(sentence)}All columns: `{name}.csv`.",
            "",
        ]
        if df is not None and len(df) <= _HTML_MAX_ROWS:
            lines += [to_markdown(df), ""]
    return "\n".join(lines)


def _warning_md(v: claims.Verdict) -> str:
    return f" (warning: {md_escape(v.warning)})" if v.warning else ""


def _markdown_figure(page: Page, slug: str) -> list[str]:
    """The figure as an image (its PNG or SVG file) or, with PDF only, a link; its caption."""
    spec, drawn = _SPECS[slug], page.made[slug]
    images = [f for f in drawn.files if f.endswith((".png", ".svg"))]
    shown = f"![{md_escape(spec.title)}]({images[0]})" if images else ""
    shown = shown or ", ".join(f"[{f}]({f})" for f in drawn.files)
    notes = f" In this figure: {'; '.join(drawn.notes)}." if drawn.notes else ""
    caption = md_escape(spec.caption + notes)
    return [shown, "", caption, ""] if shown else [caption, ""]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m wflsim.analysis.report RUN_OR_SWEEP_DIR OUT_DIR", file=sys.stderr)
        return 2
    try:
        print(write_report(args[0], args[1]))
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ScenarioError as err:
        print(f"error: {err.one_line()}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
