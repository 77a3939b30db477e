"""The report's page model: the figures it draws (:data:`FIGURES`, each a :class:`FigureSpec`
with its caption), a figure as drawn (:class:`Drawn`), and :class:`Page`, everything the HTML
page and the Markdown report show, with the parts both writers share: the claims section by
section, the verdicts' rule, the narrow tables, the run diagnostics and the commands that made
the runs.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from wflsim.sim.rundir import read_manifest

from .. import claims, stats, tidy
from .. import figures as F

#: What the bands and bars of the figures are (every caption says it).
BAND = (
    "Lines: the mean over seeds in the axis' scale (the geometric mean on a log axis); band: "
    "its 95 % Student-t interval over the seeds, computed in that scale and cut to the range of "
    "the seeds' values at each point (with 2 or 3 seeds it is mostly that range). A dashed line "
    "is an outlier seed, named (it alone makes most of the seeds' spread; it stays in the mean "
    "and the band; named from 5 seeds on)."
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


#: The report's figures, in order (the study's own claims first, then the paper's).
FIGURES: list[FigureSpec] = [
    FigureSpec(
        "study_axes",
        "What the study varies",
        "axes",
        F.axes_figure,
        "Each field the runs vary (rows) against the headline metrics (columns): per value, the "
        "mean over seeds of each combination of the other varied fields (a colour, dodged along "
        "x) and its 95 % Student-t interval, cut to the range of the seeds' values.",
    ),
    FigureSpec(
        "study_claims",
        "The study's claims",
        "claims_measured",
        F.claims_figure,
        "Each claim of the study ([[claims]]), per context (the values of the other fields the "
        "study varies): the difference a - b paired by seed, its mean (point) and 95 % Student-t "
        "interval over the seeds (bar; none with one seed), the margin dashed with the claimed "
        "side shaded; green: holds, red: does not hold, amber: inconclusive.",
    ),
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
        "privacy_tradeoffs",
        "Accuracy against privacy and energy",
        "privacy",
        F.privacy_tradeoffs,
        "Runs with [privacy]: the final test accuracy against the epsilon spent (the largest "
        "over the devices, at the run's delta; left) and against the total energy of all "
        "devices (right), one point per configuration; a configuration without [privacy] is a "
        "dotted line on the left (the accuracy without privacy) and a point on the right. "
        + BARS
        + " Bars on both axes.",
    ),
    FigureSpec(
        "epsilon_evolution",
        "Privacy spent over simulated time",
        "epsilon",
        F.epsilon_evolution,
        "Runs with [privacy]: each device's epsilon after each slot (0 before its first "
        "accounted update), the largest over the devices (left) and their mean (right), against "
        "the slot's end in simulated time (x: its mean over seeds). " + BAND,
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
        "configuration); each column has one y axis for all rows. Other settings (strategy, "
        "uplink, ...) have their own colour and hollow marker; coinciding points show nested.",
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
        "Slot latency: its distribution (ECDF over every slot of every seed); per frame: "
        "participating devices and outages among them. " + BAND,
    ),
]


#: The figures of the report's "Privacy" section (studies with [privacy] runs).
PRIVACY_FIGURES = ("privacy_tradeoffs", "epsilon_evolution")
#: The columns of the privacy table, per configuration with [privacy] (mean over seeds).
PRIVACY_TABLE_COLUMNS: list[str] = [
    "epsilon_max",
    "epsilon_mean",
    "dp_clipped_fraction",
    "dp_noise_std",
    "dp_stopped_devices",
    "final_accuracy",
    "total_energy_j",
]
#: The sentence that opens the "Privacy" section.
PRIVACY_SENTENCE = (
    "Client-level differential privacy of the runs with [privacy] (docs/privacy.md): epsilon "
    "at each run's delta, the largest and the mean over its devices at the end of the run (a "
    "device that never took part at 0); the share of the applied updates that were clipped; "
    "the noise's standard deviation per entry on them (update units, mean over the updates); "
    "the devices stopped for their spent budget. Each value: mean [95 % interval] over the "
    "seeds of the configuration. All columns: privacy.csv."
)

_HTML_MAX_ROWS = 200


@dataclass
class Drawn:
    """A figure as the report keeps it: the PNG the page embeds, the files written (relative to
    the report folder, one per format) and what the figure says about coinciding lines."""

    png: bytes
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


#: The columns of ``diagnostics.csv``: the run (its folder's label), then the finding.
DIAGNOSTIC_COLUMNS = ["run", "code", "field", "problem", "fix"]


def diagnostics_table(dirs: Sequence[Path]) -> pd.DataFrame:
    """The diagnostics of every run (``docs/diagnostics.md``), one row per finding
    (:data:`DIAGNOSTIC_COLUMNS`); a run without a manifest (a trace of an older wflsim) is
    left out."""
    from ..diagnostics import diagnose_folder

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
    "epsilon_max",
]


def privacy_table(summary: pd.DataFrame) -> pd.DataFrame | None:
    """Per configuration with ``[privacy]`` (those whose runs have an ``epsilon_max``): the
    mean over its seeds and 95 % interval of :data:`PRIVACY_TABLE_COLUMNS`
    (:func:`wflsim.analysis.stats.over_seeds`); ``None`` where no run has ``[privacy]``."""
    if "epsilon_max" not in summary.columns or summary["epsilon_max"].isna().all():
        return None
    private = summary[summary["epsilon_max"].notna()]
    values = [c for c in PRIVACY_TABLE_COLUMNS if c in private and private[c].notna().any()]
    return stats.over_seeds(private, value_cols=values)


def _privacy_shown(table: pd.DataFrame) -> pd.DataFrame:
    """The privacy table as the page shows it: the columns that tell configurations apart, the
    seeds and each value as "mean [interval]"."""
    ids = [
        c
        for c in stats.CONFIG_COLUMNS
        if c in table.columns and (c == "scheme" or table[c].astype(str).nunique() > 1)
    ]
    values = [c for c in PRIVACY_TABLE_COLUMNS if c in table.columns]
    return stats.format_over_seeds(table)[ids + ["n"] + values]


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
        if name in ("claims", "privacy"):  # the privacy table is the "Privacy" section's
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
            sentence += (
                "Each value: mean [95 % interval] over the seeds of the configuration (an "
                "interval reaching below 0, or a rate's above 1, is cut there). "
            )
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
    #: what the study varies: ``(field, its values)``, and its seeds
    axes: list[tuple[str, list[str]]] = field(default_factory=list)
    seeds: list[str] = field(default_factory=list)
    #: why the paper's claims are not shown, or which of them need runs the study lacks
    paper_note: str = ""
    #: the privacy table (:func:`privacy_table`; ``None``: no run has [privacy], no section)
    privacy: pd.DataFrame | None = None

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
        used = {c.figure for c, _ in self.verdicts} | {"study_axes", *PRIVACY_FIGURES}
        return [f for f in FIGURES if f.slug not in used and f.slug in self.made]

    def counts(self) -> str:
        """The verdicts counted, the study's claims and the paper's apart ("The study's
        claims: holds: 1, ...; the paper's claims: ...")."""
        out = []
        for name, mine in (("The study's claims", True), ("the paper's claims", False)):
            verdicts = [v for c, v in self.verdicts if _is_study(c) == mine]
            if verdicts:
                n = {s: sum(v.status == s for v in verdicts) for s in _VERDICT_ORDER}
                out.append(f"{name}: " + ", ".join(f"{k}: {n[k]}" for k in _VERDICT_ORDER if n[k]))
        if not any(_is_study(c) for c, _ in self.verdicts):
            out.insert(0, f"The study states no claims of its own ({CLAIMS_HINT})")
        return "; ".join(out) if out else "No claim"

    def axes_sentence(self) -> str:
        """What the study varies, in one sentence."""
        seeds = f"seeds {', '.join(self.seeds)}" if self.seeds else "one seed"
        if not self.axes:
            return f"The runs differ only in their seed ({seeds})."
        parts = [f"{name} ({', '.join(values)})" for name, values in self.axes[:MAX_AXES_SHOWN]]
        more = len(self.axes) - MAX_AXES_SHOWN
        tail = f" and {more} more fields (runs.csv)" if more > 0 else ""
        return f"The study varies {'; '.join(parts)}{tail}, over {seeds}."


_VERDICT_ORDER = list(claims.VERDICTS)
#: How a study states its claims (the report says it where a study has none).
CLAIMS_HINT = (
    "state them as [[claims]] in the scenario file, or give a claims file to "
    "wflsim report --claims; docs/scenario.md"
)
#: The most varied fields the page names in its sentence (runs.csv has all).
MAX_AXES_SHOWN = 8


def _is_study(c: claims.Claim) -> bool:
    from ..hypotheses import SECTION

    return c.section == SECTION


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
    "falls below a third of all seeds'; from 5 seeds on) is named next to the verdict and in "
    "the figures, and kept in the mean and the interval."
)
_SPECS = {f.slug: f for f in FIGURES}
_TABLE_TITLES = {
    "runs": "Runs",
    "summary": "Summary (one row per run)",
    "by_config": "Mean over seeds with a 95 % interval (one row per configuration)",
    "energy_per_device": "Energy per device",
}


def _outliers_text(v: claims.Verdict) -> str:
    """The outlier seeds next to a verdict (" (outlier: seed 1)"; "" for none)."""
    if not v.outliers:
        return ""
    return f" ({'outliers' if len(v.outliers) > 1 else 'outlier'}: {', '.join(v.outliers)})"
