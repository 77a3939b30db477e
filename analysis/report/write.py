"""Writing the report: :func:`write_report` reads the runs, computes the tables and the
claims' verdicts, draws and saves the figures (:func:`draw_figures`, in the formats and
resolution checked by :func:`check_formats` and :func:`check_dpi`), writes the CSV and
Markdown tables, the HTML page and ``report.md``, never through a symbolic link;
:func:`report_figures` draws the figures without writing anything, and :func:`main` is
``python -m wflsim.analysis.report``.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from matplotlib import rc_context
from matplotlib.figure import Figure

from wflsim.sim.errors import ScenarioError
from wflsim.sim.rundir import RunFolderError, link_error

from .. import figures as F
from .. import hypotheses, privacy, stats, tidy
from ..hypotheses import ClaimsArg, study_claims_of
from ..io import read_metadata
from ..stats import to_markdown
from .html_writer import _html
from .markdown_writer import _markdown
from .page import (
    _SPECS,
    FIGURES,
    Drawn,
    Page,
    _narrow_tables,
    diagnostics_table,
    privacy_table,
    run_commands,
)
from .study import axes_table, paper_verdicts, study_axes

#: Figure file formats ``write_report`` can write (``--format``), and the default.
FORMATS: tuple[str, ...] = ("png", "pdf", "svg")
DEFAULT_FORMATS: tuple[str, ...] = ("png",)
#: Resolution of the PNG figures (dots per inch, ``--dpi``): the default suits a paper's
#: two-column figure; the range keeps a 12-panel figure's PNG under about 100 megapixels.
DEFAULT_DPI = 200
DPI_RANGE: tuple[int, int] = (50, 600)


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
    claims: ClaimsArg = None,
) -> Path:
    """Write the report of a run or a sweep into ``out_dir``; returns the path of ``report.html``.

    The report is a study's document: what the study varies, then its own claims
    (``claims``: a file with ``[[claims]]``, or the claims; by default those of the
    sweep's scenario file or the runs' scenarios), each with its verdict (holds / inconclusive /
    does not hold / not measurable here, with the numbers and the outlier seeds:
    :mod:`wflsim.analysis.hypotheses`) and their figure; then, where the study has runs of the
    paper's scheme, a section per claim of the paper's Section VI that its runs can test (Fig. 1
    to the state-of-the-art comparison: :mod:`wflsim.analysis.claims`) with its figure and
    verdict, the others named in one sentence; the commands that made the runs and the report;
    a "Privacy" section where runs have ``[privacy]`` (accuracy against epsilon and energy,
    epsilon over time, the privacy table: :mod:`wflsim.analysis.privacy`); the figures no claim
    uses, and narrow tables (the full tables as CSV).

    ``run_or_sweep_dir`` is a run directory (``events/`` or ``events.parquet`` inside), a sweep
    directory (run directories anywhere below it) or a glob. ``out_dir`` receives ``report.html``
    (everything embedded), ``report.md``, ``figures/<name>.<format>`` (``formats``: any of
    :data:`FORMATS`, PNG at ``dpi`` dots per inch), ``claims.csv`` and the tables
    ``runs``, ``summary``, ``by_config`` (when a configuration has several runs: per
    configuration the mean, standard error and 95 % Student-t interval over its seeds) and
    ``energy_per_device`` and, where runs have ``[privacy]``, ``privacy`` (per configuration with
    privacy: epsilon, clipped share, noise, accuracy and energy over its seeds), each as ``.csv``
    and ``.md``. A figure the runs cannot make (one V
    only, no evaluations, ...) is skipped with a note; an unreadable trace (a run still being
    written) is skipped with a note. Nothing is written through a symbolic link.

    Raises:
        FileNotFoundError: ``run_or_sweep_dir`` does not exist or holds no readable run.
        RunFolderError: a run's trace disagrees with its manifest (a part missing, damaged,
            replaced or not listed: :func:`wflsim.analysis.io.events_files`; nothing written).
        ScenarioError: a symbolic link where the report writes, an unknown format or a ``dpi``
            out of :data:`DPI_RANGE`, a bad claim or claims file (nothing written).
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
    summary = stats.summary(
        data.device_slots, data.slots, data.evaluations, runs=data.runs, privacy=data.privacy
    )
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
    dp_table = privacy_table(summary)
    if dp_table is not None:
        tables["privacy"] = dp_table
    fields = tidy.run_fields(dirs)
    study_claims = study_claims_of(source, dirs, claims)
    study, measured = hypotheses.check_claims(study_claims, summary, data.evaluations, fields)
    paper, paper_shown, paper_note = paper_verdicts(summary, data.slots, data.evaluations)
    tables["claims"] = hypotheses.claims_table(study + paper)
    verdicts = study + paper_shown

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
            md = stats.format_over_seeds(df) if name in ("by_config", "privacy") else df
            _write(out / f"{name}.md", to_markdown(md) + "\n")
    _write(out / "diagnostics.csv", diagnostics.to_csv(index=False))

    sources = _sources(data, summary, tables["energy_per_device"], dirs)
    sources["claims_measured"] = pd.DataFrame([asdict(m) for m in measured])
    sources["axes"] = axes_table(summary, fields)
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
        axes=study_axes(fields, summary),
        seeds=[str(x) for x in sorted(summary["seed"].dropna().unique())],
        paper_note=paper_note,
        privacy=dp_table,
    )
    _write(out / "report.html", _html(page))
    _write(out / "report.md", _markdown(page))
    return out / "report.html"


def _sources(
    data: tidy.Tidy, summary: pd.DataFrame, per_device: pd.DataFrame, dirs: Sequence[Path]
) -> dict[str, pd.DataFrame]:
    """The tables the figures are drawn from, by
    :attr:`~wflsim.analysis.report.FigureSpec.table`."""
    return {
        "summary": summary,
        "slots": data.slots,
        "frames": data.frames,
        "evaluations": data.evaluations,
        "energy_per_device": per_device,
        "updates": tidy.updates(list(dirs)) if _any_stale(data.runs) else pd.DataFrame(),
        "claims_measured": pd.DataFrame(),
        "axes": pd.DataFrame(),
        "privacy": summary if privacy.private_runs(data.runs) else pd.DataFrame(),
        "epsilon": privacy.epsilon_over_time(data.privacy.steps, data.slots, data.runs),
    }


def draw_figures(
    sources: Mapping[str, pd.DataFrame],
    only: Sequence[str] | None = None,
) -> tuple[dict[str, Figure], dict[str, str]]:
    """The report's figures (:data:`FIGURES`, or those of them whose slug is in ``only``) drawn
    from ``sources`` (tables by :attr:`~wflsim.analysis.report.FigureSpec.table`): ``(slug ->
    figure, slug -> why it was not drawn)``. A figure of stale updates without such runs is
    neither (it does not apply)."""
    made: dict[str, Figure] = {}
    skipped: dict[str, str] = {}
    for spec in FIGURES:
        if only is not None and spec.slug not in only:
            continue
        if spec.table in _OPTIONAL and sources.get(spec.table, pd.DataFrame()).empty:
            continue  # no stale updates, no claims of the study: it does not apply (not skipped)
        try:
            made[spec.slug] = spec.make(sources[spec.table])
        except F.InsufficientData as err:
            skipped[spec.slug] = f"skipped ({err})"
        except Exception as err:  # a report never dies on one figure
            warnings.warn(f"figure {spec.slug} failed: {err!r}", stacklevel=2)
            skipped[spec.slug] = f"failed ({type(err).__name__}: {err})"
    return made, skipped


def report_figures(
    run_or_sweep_dir: str | Path, only: Sequence[str] | None = None
) -> dict[str, Figure]:
    """The figures :func:`write_report` draws for the runs under ``run_or_sweep_dir``, by file
    name (those the runs cannot make are left out; with ``only``, just the figures of these
    slugs); nothing is written."""
    dirs, _ = _readable(tidy.find_runs(run_or_sweep_dir))
    if not dirs:
        raise FileNotFoundError(f"no readable runs under {run_or_sweep_dir}")
    data = tidy.load(dirs)
    summary = stats.summary(
        data.device_slots, data.slots, data.evaluations, runs=data.runs, privacy=data.privacy
    )
    per_device = stats.energy_per_device(data.device_slots)
    sources = _sources(data, summary, per_device, dirs)
    sources["axes"] = axes_table(summary, tidy.run_fields(dirs))
    return draw_figures(sources, only)[0]


#: Tables whose figure does not apply (rather than is skipped) when they are empty.
_OPTIONAL = ("updates", "claims_measured", "axes", "privacy", "epsilon")


def _any_stale(runs: pd.DataFrame) -> bool:
    """Whether any run has stale updates (``[server] mode`` other than ``sync``)."""
    return bool((runs.get("server_mode", pd.Series(dtype=str)) != "sync").any())


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
