"""The benchmark suite's entry point (``python -m benchmarks``) and its shared harness
(benchmarks/_common.py): the listing, running one benchmark, refusing an unknown name, and the
one headline line every script prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPO, benchmark_module

BENCH = REPO / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if not p.name.startswith("_"))
#: ``headline: <what> = <value> (<min>-<max> over N reps) [target ...|no target]``
HEADLINE = re.compile(
    r"^headline: (?P<what>.+) = (?P<value>[-\d.e+]+)(?P<unit>[^(]*) "
    r"\((?P<lo>[-\d.e+]+)-(?P<hi>[-\d.e+]+)[^ ]* over (?P<n>\d+) reps?\) "
    r"\[(?:target (?P<target>.+)|no target)\]$"
)


def suite(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks ARGS`` from the repository root, this tree first on the path."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def common():
    """benchmarks/_common.py, loaded from its file."""
    return benchmark_module("_common")


def test_listing_names_every_script_with_its_description():
    """``python -m benchmarks`` lists every script of benchmarks/ with a one-line description."""
    proc = suite()
    assert proc.returncode == 0, proc.stderr
    rows = dict(
        re.match(r"^  (\w+)\s+(.+)$", line).groups()  # type: ignore[union-attr]
        for line in proc.stdout.splitlines()
        if re.match(r"^  \w+\s+\S", line)
    )
    assert sorted(rows) == SCRIPTS
    assert all(len(text) > 20 for text in rows.values()), rows


def test_unknown_name_is_refused_with_the_list():
    """An unknown benchmark: exit code 2, one line on stderr naming the benchmarks, no traceback."""
    proc = suite("no_such_benchmark")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no_such_benchmark" in lines[0], proc.stderr
    assert all(name in lines[0] for name in SCRIPTS)
    assert proc.stdout == ""


def test_help_is_the_benchmarks_own():
    """``python -m benchmarks NAME --help`` prints the script's options and runs nothing."""
    proc = suite("fmath_cost", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--reps" in proc.stdout and "--quick" in proc.stdout
    assert "headline:" not in proc.stdout


def test_a_quick_benchmark_runs_through_the_entry_point():
    """fmath_cost's smoke test runs through ``python -m benchmarks`` and prints its headline."""
    proc = suite("fmath_cost", "--quick")
    assert proc.returncode == 0, proc.stderr[-2000:]
    heads = [line for line in proc.stdout.splitlines() if line.startswith("headline: ")]
    assert len(heads) == 1, proc.stdout[-2000:]
    m = HEADLINE.match(heads[0])
    assert m is not None, heads[0]
    assert m["what"] == "fmath/numpy, n = 1,000" and m["n"] == "2"


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_prints_a_headline(name: str):
    """Every benchmark states its result through the shared headline helper."""
    text = (BENCH / f"{name}.py").read_text()
    assert re.search(r"\bheadline\(", text), name


def test_headline_of_a_ratio():
    """A ratio: median(num)/median(den), then the min and max of the per-round ratios."""
    # medians 4 and 2: ratio 2; per-round ratios 2, 2, 3
    line = common().headline("a/b", [2.0, 4.0, 6.0], [1.0, 2.0, 2.0], ">= 1")
    assert line == "headline: a/b = 2.000 (2.000-3.000 over 3 reps) [target >= 1]"


def test_headline_of_a_value_without_target():
    """A value: its median and min-max in its unit; no target says so; one rep is singular."""
    c = common()
    assert c.headline("peak", [3.5, 1.25, 2.0], unit=" GB") == (
        "headline: peak = 2 GB (1.25-3.5 GB over 3 reps) [no target]"
    )
    assert c.headline("t", [13.5], target="< 60 s", unit=" s") == (
        "headline: t = 13.5 s (13.5-13.5 s over 1 rep) [target < 60 s]"
    )


@given(st.lists(st.tuples(st.floats(0.001, 1e3), st.floats(0.001, 1e3)), min_size=1, max_size=12))
def test_headline_ratio_lies_within_its_spread(pairs: list[tuple[float, float]]):
    """Any timings: the line parses, and min <= max of the per-round ratios over N reps."""
    num, den = [a for a, _ in pairs], [b for _, b in pairs]
    m = HEADLINE.match(common().headline("x/y", num, den, "<= 1"))
    assert m is not None
    assert float(m["lo"]) <= float(m["hi"]) and int(m["n"]) == len(pairs)
    assert m["target"] == "<= 1"


def test_quick_preset_sets_the_options():
    """``--quick`` gives the options the preset's values, and its help names them; without it
    the defaults hold."""
    p = common().parser("Doc. More.", reps=5, warmup=1, quick={"devices": 4, "reps": 2})
    p.add_argument("--devices", type=int, default=30)
    assert p.parse_args(["--quick"]).devices == 4
    args = p.parse_args([])
    assert (args.devices, args.reps, args.warmup, args.seed) == (30, 5, 1, 0)
    assert p.description == "Doc."
    assert "smoke test: --devices 4 --reps 2" in p.format_help()


def test_performance_summary_names_every_benchmark():
    """docs/performance.md's summary table gives the entry point's command of every benchmark."""
    text = (REPO / "docs" / "performance.md").read_text()
    table = text[text.index("| what | target |") : text.index("## The pages")]
    missing = [n for n in SCRIPTS if f"python -m benchmarks {n}" not in table]
    assert not missing, missing


def test_performance_pages_are_in_the_toctree():
    """Every page of docs/performance/ is in the first page's toctree, and nothing else."""
    text = (REPO / "docs" / "performance.md").read_text()
    toc = text[text.index("```{toctree}") :].split("```")[1]
    listed = {line.strip() for line in toc.splitlines()[1:] if line.strip() and ":" not in line}
    pages = {f"performance/{p.stem}" for p in (REPO / "docs" / "performance").glob("*.md")}
    assert listed == pages
