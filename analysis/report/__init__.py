"""A report of one run or a sweep: figures (PNG, and PDF or SVG on request), tables (CSV and
Markdown) and one HTML page.

``python -m wflsim.analysis.report RUN_OR_SWEEP_DIR OUT_DIR`` writes it and prints the page's path.

The HTML page is self-contained (figures embedded as base64 PNG data URIs, tables as HTML, the
style inline): it opens from disk with no server and can be mailed as one file. Every element id
of the page is unique and every in-page link points to one of them.

The package, by concern: :mod:`wflsim.analysis.report.write` (:func:`write_report`, the figures,
the tables and files), :mod:`wflsim.analysis.report.page` (the page model and its sections),
:mod:`wflsim.analysis.report.html_writer` and :mod:`wflsim.analysis.report.markdown_writer`
(the page as HTML and as Markdown); every public name is importable from
``wflsim.analysis.report`` itself.
"""

from .html_writer import anchor
from .page import (
    BAND,
    BARS,
    DIAGNOSTIC_COLUMNS,
    FIGURES,
    SHOWN_METRICS,
    VERDICT_RULE,
    Drawn,
    FigureSpec,
    Page,
    diagnostics_table,
    run_commands,
)
from .write import (
    DEFAULT_DPI,
    DEFAULT_FORMATS,
    DPI_RANGE,
    FORMATS,
    SEED_MEAN_COLUMNS,
    check_dpi,
    check_formats,
    draw_figures,
    main,
    report_figures,
    write_report,
)

__all__ = [
    "BAND",
    "BARS",
    "DEFAULT_DPI",
    "DEFAULT_FORMATS",
    "DIAGNOSTIC_COLUMNS",
    "DPI_RANGE",
    "FIGURES",
    "FORMATS",
    "SEED_MEAN_COLUMNS",
    "SHOWN_METRICS",
    "VERDICT_RULE",
    "Drawn",
    "FigureSpec",
    "Page",
    "anchor",
    "check_dpi",
    "check_formats",
    "diagnostics_table",
    "draw_figures",
    "main",
    "report_figures",
    "run_commands",
    "write_report",
]
