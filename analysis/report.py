"""A report of one run or a sweep: figures (PNG), tables (CSV and Markdown) and one HTML page.

``python -m analysis.report RUN_OR_SWEEP_DIR OUT_DIR`` writes it and prints the page's path.

The HTML page is self-contained (figures embedded as base64 PNG data URIs, tables as HTML, the
style inline): it opens from disk with no server and can be mailed as one file.
"""

from __future__ import annotations

import base64
import html
import io
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from analysis import figures as F
from analysis import stats, tidy
from analysis.io import read_metadata
from analysis.stats import to_markdown


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the report: file stem, heading, the table it is drawn from, the function."""

    slug: str
    title: str
    table: str  # "summary", "slots", "frames", "evaluations" or "energy_per_device"
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
        "over the last 10 updates (paper Fig. 1).",
    ),
    FigureSpec(
        "impact_of_v",
        "Impact of V",
        "summary",
        F.impact_of_v,
        "Average convergence error, energy and queue length against the Lyapunov weight V "
        "(paper, Impact of V); mean over seeds, bars: 95 % interval; a scheme that ignores V is a "
        "thick horizontal line.",
    ),
    FigureSpec(
        "time_evolution",
        "Time evolution of energy and cost",
        "slots",
        F.time_evolution,
        "Running time-average of the energy per device-slot and of the cost z = V X + Q E "
        "(paper Figs. 3-4), one column per V; mean over seeds and 95 % band.",
    ),
    FigureSpec(
        "accuracy_vs_energy",
        "Test accuracy vs total energy",
        "evaluations",
        F.accuracy_vs_energy,
        "Test accuracy against the energy spent by all devices so far.",
    ),
    FigureSpec(
        "accuracy_vs_latency",
        "Test accuracy vs total latency",
        "evaluations",
        F.accuracy_vs_latency,
        "Test accuracy against the total latency (sum of the slot durations).",
    ),
    FigureSpec(
        "impact_of_energy_budget",
        "Impact of the energy budget",
        "summary",
        F.impact_of_energy_budget,
        "Average energy and queue length against the energy budget E_bar (paper, Impact of E_n); "
        "mean over seeds, bars: 95 % interval.",
    ),
    FigureSpec(
        "energy_budget_per_device",
        "Energy and queue against each device's budget",
        "energy_per_device",
        F.energy_budget_per_device,
        "Each device's average energy and queue length against its own budget E_bar_n, one point "
        "per device and run, one column per scheme (the impact of the energy budget within a "
        "configuration).",
    ),
    FigureSpec(
        "gamma_evolution",
        "Freezing fraction over frames",
        "frames",
        F.gamma_evolution,
        "Mean fraction of parameters frozen per frame.",
    ),
    FigureSpec(
        "queue_evolution",
        "Energy-deficit queue over time",
        "slots",
        F.queue_evolution,
        "Mean virtual queue Q over devices after each slot; mean over seeds and 95 % band.",
    ),
    FigureSpec(
        "participation_and_latency",
        "Latency, participation and outages",
        "slots",
        F.participation_and_latency,
        "Per frame: mean slot latency, participating devices and outages among them.",
    ),
]

#: Summary columns averaged over seeds in the ``by_config`` table (mean, standard error and a 95 %
#: Student-t interval over the seeds of each configuration, :func:`analysis.stats.over_seeds`).
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
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
.scroll { overflow-x: auto; }
table.tbl { border-collapse: collapse; font-size: 0.82em; }
table.tbl th, table.tbl td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; }
table.tbl th { background: #f4f4f4; }
.notes li { color: #7a4b00; } .meta { color: #555; font-size: 0.9em; }
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


def _png(fig: Figure, path: Path, dpi: int) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    data = buf.getvalue()
    path.write_bytes(data)
    return data


def _readable(dirs: list[Path]) -> tuple[list[Path], list[str]]:
    ok, notes = [], []
    for d in dirs:
        try:
            read_metadata(d)
            ok.append(d)
        except Exception as err:  # any unreadable trace is skipped with a note
            status = tidy.run_status(d)
            why = "still running" if status == "running" else f"manifest status: {status}"
            notes.append(f"run {d}: skipped, its trace is not readable ({why}; {err})")
    return ok, notes


def write_report(
    run_or_sweep_dir: str | Path, out_dir: str | Path, *, dpi: int = 110, title: str | None = None
) -> Path:
    """Write the report of a run or a sweep into ``out_dir``; returns the path of ``report.html``.

    ``run_or_sweep_dir`` is a run directory (``events/`` or ``events.parquet`` inside), a sweep directory (run
    directories anywhere below it) or a glob. ``out_dir`` receives ``report.html`` (everything
    embedded), ``report.md``, ``figures/*.png`` and the tables ``runs``, ``summary``,
    ``by_config`` (when a configuration has several runs: per configuration the mean, standard
    error and 95 % Student-t interval over its seeds; in the page and the ``.md``, "mean [low,
    high]") and
    ``energy_per_device``, each as ``.csv`` and ``.md``. A figure the runs cannot make (one V
    only, no evaluations, ...) is skipped with a note in the report; an unreadable trace (a run
    still being written) is skipped with a note.

    Raises:
        FileNotFoundError: ``run_or_sweep_dir`` does not exist or holds no readable run.
    """
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
    shown: dict[str, pd.DataFrame] = {}
    if (by_config["n"] > 1).any():
        tables["by_config"] = by_config
        shown["by_config"] = stats.format_over_seeds(by_config)
    tables["energy_per_device"] = stats.energy_per_device(data.device_slots)

    out.mkdir(parents=True, exist_ok=True)
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)
    for name, df in tables.items():
        df.to_csv(out / f"{name}.csv", index=False)
        (out / f"{name}.md").write_text(to_markdown(shown.get(name, df)) + "\n", encoding="utf-8")

    sources = {
        "summary": summary,
        "slots": data.slots,
        "frames": data.frames,
        "evaluations": data.evaluations,
        "energy_per_device": tables["energy_per_device"],
    }
    made: list[tuple[FigureSpec, bytes]] = []
    for spec in FIGURES:
        try:
            fig = spec.make(sources[spec.table])
        except F.InsufficientData as err:
            notes.append(f"{spec.title}: skipped ({err})")
            continue
        except Exception as err:  # a report never dies on one figure
            warnings.warn(f"figure {spec.slug} failed: {err!r}", stacklevel=2)
            notes.append(f"{spec.title}: failed ({type(err).__name__}: {err})")
            continue
        made.append((spec, _png(fig, fig_dir / f"{spec.slug}.png", dpi)))

    title = title or f"wflsim report: {source.name or source}"
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    shown = {name: shown.get(name, df) for name, df in tables.items()}
    _write_html(out / "report.html", title, stamp, source, data.runs, made, shown, notes)
    _write_markdown(out / "report.md", title, stamp, source, made, shown, notes)
    return out / "report.html"


_TABLE_TITLES = {
    "runs": "Runs",
    "summary": "Summary (one row per run)",
    "by_config": "Mean over seeds with a 95 % interval (one row per configuration)",
    "energy_per_device": "Energy per device",
}


def _write_html(
    path: Path,
    title: str,
    stamp: str,
    source: Path,
    runs: pd.DataFrame,
    made: list[tuple[FigureSpec, bytes]],
    tables: dict[str, pd.DataFrame],
    notes: list[str],
) -> None:
    esc = html.escape
    schemes = ", ".join(sorted(runs["scheme_label"].unique()))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">Source: <code>{esc(str(source))}</code> &middot; {len(runs)} run(s) '
        f"&middot; schemes: {esc(schemes)} &middot; generated {esc(stamp)}</p>",
    ]
    if notes:
        parts.append('<h2>Notes</h2><ul class="notes">')
        parts += [f"<li>{esc(n)}</li>" for n in notes]
        parts.append("</ul>")
    parts.append("<h2>Figures</h2>")
    if not made:
        parts.append("<p>No figure could be made from these runs (see the notes).</p>")
    for spec, png in made:
        b64 = base64.b64encode(png).decode("ascii")
        parts.append(
            f'<figure id="{spec.slug}"><h3>{esc(spec.title)}</h3>'
            f'<img alt="{esc(spec.title)}" src="data:image/png;base64,{b64}">'
            f"<figcaption>{esc(spec.caption)}</figcaption></figure>"
        )
    parts.append("<h2>Tables</h2>")
    for name, df in tables.items():
        parts.append(f'<h3 id="{name}">{esc(_TABLE_TITLES.get(name, name))}</h3>')
        if len(df) > _HTML_MAX_ROWS:
            parts.append(
                f"<p>{len(df)} rows: the first {_HTML_MAX_ROWS} shown; all in <code>{name}.csv</code>.</p>"
            )
            df = df.head(_HTML_MAX_ROWS)
        parts.append(f'<div class="scroll">{_html_table(df)}</div>')
    parts.append("</body></html>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


def _write_markdown(
    path: Path,
    title: str,
    stamp: str,
    source: Path,
    made: list[tuple[FigureSpec, bytes]],
    tables: dict[str, pd.DataFrame],
    notes: list[str],
) -> None:
    lines = [f"# {title}", "", f"Source: `{source}`, generated {stamp}.", ""]
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    lines += ["## Figures", ""]
    for spec, _ in made:
        lines += [
            f"### {spec.title}",
            "",
            f"![{spec.title}](figures/{spec.slug}.png)",
            "",
            spec.caption,
            "",
        ]
    lines += ["## Tables", ""]
    for name, df in tables.items():
        lines += [f"### {_TABLE_TITLES.get(name, name)}", ""]
        if len(df) > _HTML_MAX_ROWS:
            lines += [f"{len(df)} rows: see `{name}.csv`.", ""]
        else:
            lines += [to_markdown(df), ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m analysis.report RUN_OR_SWEEP_DIR OUT_DIR", file=sys.stderr)
        return 2
    try:
        print(write_report(args[0], args[1]))
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
