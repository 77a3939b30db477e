"""The report's HTML writer: one self-contained page of a :class:`~wflsim.analysis.report.page.Page`
(figures as base64 PNG data URIs, tables as HTML, the style inline), with unique element ids
(:func:`anchor`) that every in-page link points to.
"""

from __future__ import annotations

import base64
import html
import re

import pandas as pd

from .. import claims
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


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _html_table(df: pd.DataFrame) -> str:
    return df.to_html(
        index=False, border=0, classes="tbl", na_rep="-", float_format=lambda v: f"{v:.4g}"
    )


_VERDICT_CLASS = {
    claims.HOLDS: "ok",
    claims.INCONCLUSIVE: "maybe",
    claims.FAILS: "no",
    claims.NOT_MEASURABLE: "na",
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
        '<p class="meta">Contents: '
        + " &middot; ".join(
            f'<a href="#{ids(key, text)}">{esc(text)}</a>'
            for key, text in (
                ("study", "The study"),
                ("glance", "Claims at a glance"),
                ("diagnostics", "Run diagnostics"),
                ("tables", "Tables"),
            )
        )
        + "</p>",
        "<h2>How these runs were made</h2>",
        f"<pre>{esc(commands)}</pre>",
        f'<h2 id="{ids("study")}">The study</h2>',
        f"<p>{esc(page.axes_sentence())}</p>",
        *([_html_figure(page, "study_axes", ids)] if "study_axes" in page.made else []),
        f'<h2 id="{ids("glance")}">Claims at a glance</h2>',
        f"<p>{esc(page.counts())}. {esc(VERDICT_RULE)}</p>",
    ]
    if page.paper_note:
        parts.append(f'<p class="meta">{esc(page.paper_note)}</p>')
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
    parts.append(f'<h2 id="{ids("diagnostics")}">Run diagnostics</h2>')
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
    if page.privacy is not None:
        parts.append(f'<h2 id="{ids("privacy")}">Privacy</h2>')
        parts.append(f'<p class="meta">{esc(PRIVACY_SENTENCE)}</p>')
        for slug in PRIVACY_FIGURES:
            if slug in page.made or slug in page.skipped:
                parts.append(_html_figure(page, slug, ids, heading=True))
        parts.append(f'<div class="scroll">{_html_table(_privacy_shown(page.privacy))}</div>')
    others = page.other_figures()
    if others:
        parts.append("<h2>Other figures</h2>")
        for spec in others:
            parts.append(_html_figure(page, spec.slug, ids, heading=True))
    parts.append(f'<h2 id="{ids("tables")}">Tables</h2>')
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
