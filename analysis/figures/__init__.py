"""Figures of the paper's experimental section (and a few more), from the tidy tables.

Every function takes DataFrames (from :mod:`wflsim.analysis.tidy` / :mod:`wflsim.analysis.stats`,
never paths) and returns a :class:`DataFigure`, a :class:`matplotlib.figure.Figure` built without
pyplot (no global state, no backend needed: ``fig.savefig("x.png")`` renders with Agg; a notebook
draws it as a PNG when it is a cell's value, pyplot imported or not) that keeps
what it plots: ``fig.intervals`` (every band and set of error bars with the seeds' values behind it),
``fig.outliers`` (the outlier seeds it marks) and ``fig.notes`` (the lines that coincide, the
outlier seeds, the panels left out). Lines are *series*: runs with the same scheme and,
where they differ between the runs given, the same ``V``, dataset, partition, energy budget and
``variant``; runs of one series that differ only in their seed are averaged.

Conventions (the same in every figure):

* one colour and one marker per scheme, fixed (:data:`SCHEME_COLORS`, :data:`SCHEME_MARKERS`),
  whatever the figure or the runs given; the second variable (``V``, budget, partition,
  strategy, uplink, ...) is a line style and a lighter shade of the scheme's colour
  (:func:`series_colors`, the legend's title says so), or a facet; series all of one scheme
  get distinct colours; the proposed scheme is drawn on top, the paper's benchmarks next;
* markers sit on about 8 points of a long line, each scheme's shifted along it, so that the
  markers of coinciding lines do not cover each other; two series whose lines coincide (within
  0.5 % of the panel's height, over the same x range) are said so in the panel's title ("Only-PC
  coincides with Proposed") and the lower line is drawn wider, an outline around the upper one;
* figures over time facet by ``V`` (one column per value) when it takes several values; schemes
  whose decisions ignore ``V`` (:data:`V_FREE_SCHEMES`, e.g. Ideal FL) are drawn once, not once
  per ``V`` (in the ``V`` figure: a horizontal line over the ``V`` range); panels that compare
  schemes side by side share their y axis;
* an axis where one series dwarfs another (10 times or more) is logarithmic (symmetric-log,
  linear near 0, where a value can be negative or 0); its label says so. The scale is chosen
  before anything is drawn, so that lines and bands are computed in it;
* with several seeds: the mean over seeds in the axis' scale (the geometric mean on a log axis)
  and its 95 % Student-t band or error bars, computed in that scale and cut to the range of the
  seeds' values (:func:`wflsim.analysis.stats.seed_intervals`): a band never reaches beyond the
  seeds, so the y range shows it whole; one seed: the line alone;
* an outlier seed (:func:`outlier_runs`, the rule of the claims' verdicts, from five seeds on:
  :data:`wflsim.analysis.stats.OUTLIER_MIN_SEEDS`) whose line lies
  visibly apart from the other seeds' (:data:`OUTLIER_VISIBLE`) is drawn as its own thin dashed
  line, named at its end and in the legend ("Ideal FL: seed 1 (outlier)"); the mean and the band
  keep it, and :attr:`DataFigure.outliers` and the notes list it;
* the slot latency, whose per-frame means coincide in synchronous runs, is drawn as its ECDF
  over every slot of every seed;
* no text collides: the title is centred over the panels and wrapped to their width (a figure
  legend that still meets it goes below), colliding tick labels are thinned (``_finish``);
* no offset or scientific-offset tick notation; every axis says its unit (those of
  ``docs/trace.md``; ``V`` and the cost in J^2);
* a metric with nothing to draw (no outage at all, no cost logged) gets no panel: the title
  and the notes say why.

A function raises :class:`InsufficientData` when the tables cannot make its figure (e.g. a single
``V`` for the impact of ``V``); :func:`wflsim.analysis.report.write_report` turns that into a note.

The modules: :mod:`~wflsim.analysis.figures.common` (colours, markers and styles, series,
:class:`DataFigure` and the records it keeps, scales), :mod:`~wflsim.analysis.figures.bands`
(bands, error bars, outlier seeds, coinciding lines, the legend), and one per family of figures:
:mod:`~wflsim.analysis.figures.over_time`, :mod:`~wflsim.analysis.figures.impact` (``V`` and the
energy budget), :mod:`~wflsim.analysis.figures.accuracy` and
:mod:`~wflsim.analysis.figures.stale_updates`, :mod:`~wflsim.analysis.figures.privacy` (runs with
``[privacy]``: accuracy against epsilon and energy, epsilon over time) and :mod:`~wflsim.analysis.figures.study` (a study's
own claims). The public names are all importable from here.
"""

from __future__ import annotations

from .accuracy import accuracy_late, accuracy_vs_energy, accuracy_vs_latency
from .bands import OUTLIER_VISIBLE, outlier_runs
from .common import (
    SCHEME_COLORS,
    SCHEME_MARKERS,
    SERIES_COLUMNS,
    V_FREE_SCHEMES,
    V_UNIT,
    DataFigure,
    InsufficientData,
    Interval,
    Outlier,
    iter_series,
    save_study_figure,
    say_empty,
    scheme_color,
    scheme_marker,
    series_colors,
    series_columns,
    shade,
)
from .impact import energy_budget_per_device, impact_of_energy_budget, impact_of_v
from .over_time import (
    gamma_evolution,
    participation_and_latency,
    queue_evolution,
    stable_parameters,
    time_evolution,
)
from .privacy import epsilon_evolution, privacy_tradeoffs
from .stale_updates import staleness
from .study import AXIS_PREFIX, VERDICT_COLORS, axes_figure, claims_figure

__all__ = [
    "AXIS_PREFIX",
    "VERDICT_COLORS",
    "axes_figure",
    "claims_figure",
    "OUTLIER_VISIBLE",
    "SCHEME_COLORS",
    "SCHEME_MARKERS",
    "SERIES_COLUMNS",
    "V_FREE_SCHEMES",
    "V_UNIT",
    "DataFigure",
    "InsufficientData",
    "Interval",
    "Outlier",
    "accuracy_late",
    "accuracy_vs_energy",
    "accuracy_vs_latency",
    "energy_budget_per_device",
    "epsilon_evolution",
    "gamma_evolution",
    "impact_of_energy_budget",
    "impact_of_v",
    "iter_series",
    "outlier_runs",
    "participation_and_latency",
    "privacy_tradeoffs",
    "queue_evolution",
    "save_study_figure",
    "say_empty",
    "scheme_color",
    "scheme_marker",
    "series_colors",
    "series_columns",
    "shade",
    "stable_parameters",
    "staleness",
    "time_evolution",
]
