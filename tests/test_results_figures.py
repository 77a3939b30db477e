"""The figures of docs/results.md (docs/_ext/results_figures.py): every study section shows one
that the docs build makes from small runs, its caption says which, and a build makes it."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results.md"
#: A MyST figure directive and its body (options, blank line, caption) up to the closing fence.
DIRECTIVE = re.compile(r"^```\{figure\} (\S+)\n(.*?)^```$", re.M | re.S)


def extension() -> ModuleType:
    """docs/_ext/results_figures.py, imported as Sphinx does (its folder on ``sys.path``, which
    the worker processes it spawns inherit)."""
    folder = str(REPO / "docs" / "_ext")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("results_figures")


def sections() -> dict[str, str]:
    """The ``##`` sections of results.md: heading -> text up to the next ``##`` heading."""
    parts = re.split(r"^## (.+)$", RESULTS.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def figures_in(text: str) -> list[tuple[str, str]]:
    """``(figure name, directive body)`` of each ``_figures/<name>.png`` directive in ``text``."""
    out = []
    for target, body in DIRECTIVE.findall(text):
        m = re.fullmatch(r"_figures/(\w+)\.png", target)
        out.append((m.group(1) if m else target, body))
    return out


def test_every_study_section_has_a_figure() -> None:
    """Every ## section of results.md but the listed non-study ones has a figure directive."""
    ext = extension()
    missing = [
        h for h, text in sections().items() if h not in ext.NOT_STUDIES and not figures_in(text)
    ]
    assert missing == []


def test_every_directive_names_a_known_figure_of_its_section() -> None:
    """Each figure directive names a figure the extension makes, for the section it sits in."""
    ext = extension()
    for heading, text in sections().items():
        for name, _ in figures_in(text):
            assert name in ext.FIGURES, f"{heading}: {name} is not made by the docs build"
            assert heading.startswith(ext.FIGURES[name].section), (heading, name)


def test_every_known_figure_is_shown() -> None:
    """Every figure the extension makes is shown in results.md (no run made for nothing)."""
    ext = extension()
    shown = {name for text in sections().values() for name, _ in figures_in(text)}
    assert set(ext.FIGURES) - shown == set()


def test_captions_say_the_small_run_and_the_full_study() -> None:
    """Each caption holds its figure's small-run sentence and full-study command verbatim."""
    ext = extension()
    for text in sections().values():
        for name, body in figures_in(text):
            flat = " ".join(body.split())
            assert ext.FIGURES[name].small in flat, name
            assert f"`{ext.FIGURES[name].full}`" in flat, name


def test_sweep_digest_follows_the_sweep_and_the_code() -> None:
    """A sweep's cache key changes with its seeds, its overrides and the code's digest."""
    ext = extension()
    s = ext.Sweep("x", "scenarios/quickstart.toml", (), "0-1", ("run.frames=2",))
    keys = {
        s.digest("code"),
        s.digest("other code"),
        ext.Sweep("x", s.scenario, (), "0-2", s.sets).digest("code"),
        ext.Sweep("x", s.scenario, (), "0-1", ("run.frames=3",)).digest("code"),
    }
    assert len(keys) == 4


@pytest.mark.slow  # 12 network-only runs and the report's figure: about a minute on 2 cores
def test_a_figure_is_made_then_read_from_the_cache(tmp_path: Path) -> None:
    """A figure is drawn into a PNG from its small runs; a second build redraws nothing."""
    ext = extension()
    png = ext.make_figures(["time_evolution"], out_dir=tmp_path, workers=2)["time_evolution"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    stamp = png.stat().st_mtime_ns
    lines: list[str] = []
    ext.make_figures(["time_evolution"], out_dir=tmp_path, workers=2, log=lines.append)
    assert (png.stat().st_mtime_ns, lines) == (stamp, [])


@pytest.mark.slow  # spawns a worker process that imports the package: seconds
def test_a_failing_run_fails_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep whose run cannot be made raises FigureError naming it, and draws nothing."""
    ext = extension()
    bad = ext.ResultFigure(
        "bad",
        "Nowhere",
        (ext.Sweep("x", "scenarios/quickstart.toml", (), "0", ("run.frames=-1",)),),
        ext.report("time_evolution"),
        "small",
        "full",
    )
    monkeypatch.setitem(ext.FIGURES, "bad", bad)
    with pytest.raises(ext.FigureError, match=r"quickstart\.toml \(x\).*run\.frames"):
        ext.make_figures(["bad"], out_dir=tmp_path, workers=1)
    assert not (tmp_path / "bad.png").exists()


@pytest.mark.parametrize("text", ["0", "two", "-1", "1.5"])
def test_bad_worker_count_is_refused(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """WFLSIM_DOCS_WORKERS that is not a whole number >= 1 is refused in one line naming it."""
    ext = extension()
    monkeypatch.setenv("WFLSIM_DOCS_WORKERS", text)
    with pytest.raises(ext.FigureError, match="WFLSIM_DOCS_WORKERS"):
        ext._env_workers()
