"""The report's Markdown writer: ``report.md`` of a :class:`~wflsim.analysis.report.page.Page`,
every text that comes from the runs escaped, the figures as links to their files.
"""

from __future__ import annotations

import re

from .. import claims
from ..stats import md_escape, to_markdown
from .page import (
    _HTML_MAX_ROWS,
    _SPECS,
    _TABLE_TITLES,
    PRIVACY_FIGURES,
    PRIVACY_SENTENCE,
    VERDICT_RULE,
    Page,
    _diagnostics_sentence,
    _outliers_text,
    _privacy_shown,
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
        "## The study",
        "",
        esc(page.axes_sentence()),
        "",
        *(_markdown_figure(page, "study_axes") if "study_axes" in page.made else []),
        "## Claims at a glance",
        "",
        f"{esc(page.counts())}. {VERDICT_RULE}",
        "",
        *([esc(page.paper_note), ""] if page.paper_note else []),
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
    if page.privacy is not None:
        lines += ["## Privacy", "", esc(PRIVACY_SENTENCE), ""]
        for slug in PRIVACY_FIGURES:
            if slug in page.made:
                lines += [f"### {esc(_SPECS[slug].title)}", "", *_markdown_figure(page, slug)]
            elif slug in page.skipped:
                lines += [f"Figure {esc(_SPECS[slug].title)}: {esc(page.skipped[slug])}.", ""]
        lines += [to_markdown(_privacy_shown(page.privacy)), ""]
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
