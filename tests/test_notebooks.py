"""The notebooks of examples/: executed top to bottom on their small sizes, committed without
outputs, and written against the public names only."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import REPO

EXAMPLES = sorted((REPO / "examples").glob("*.ipynb"))
TEMPLATE_NOTEBOOK = REPO / "wflsim" / "templates" / "study" / "analysis.ipynb"
#: The longest a cell may take (s): each notebook runs in seconds on 2 CPU cores.
CELL_TIMEOUT_S = 120
#: The modules a notebook may import from wflsim: the public API and the analysis library.
PUBLIC = {"wflsim", "wflsim.analysis"}


def execute_notebook(path: Path, cwd: Path) -> nbformat.NotebookNode:
    """Run the notebook at ``path`` top to bottom with ``cwd`` as its working directory (raises
    ``nbclient.exceptions.CellExecutionError`` on the first cell that fails)."""
    book = nbformat.read(path, as_version=4)
    client = NotebookClient(
        book,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return book


#: A code cell that draws: pyplot, pandas' ``.plot``, or a figure of ``wflsim.analysis``.
_DRAWS = re.compile(r"\bplt\.|\.plot\b|\bfigures\[")


def figure_cells_without_image(book: nbformat.NotebookNode) -> list[str]:
    """The first line of every executed code cell that draws (its source calls a plotting
    function, or an output's text names a figure) but has no ``image/png`` output."""
    missing = []
    for cell in book.cells:
        if cell.cell_type != "code":
            continue
        texts = [str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs]
        draws = _DRAWS.search(cell.source) or any("Figure" in t for t in texts)
        has_png = any("image/png" in o.get("data", {}) for o in cell.outputs)
        if draws and not has_png:
            missing.append(cell.source.splitlines()[0])
    return missing


def _code(path: Path) -> str:
    book = nbformat.read(path, as_version=4)
    return "\n".join(c.source for c in book.cells if c.cell_type == "code")


def test_examples_has_a_notebook_per_topic():
    """examples/ holds the four notebooks: quick start, impact of V, own model, DuckDB."""
    assert [p.stem for p in EXAMPLES] == [
        "01_quickstart",
        "02_impact_of_v",
        "03_own_model_fedavg_churn",
        "04_duckdb",
    ]


@pytest.fixture(scope="module", params=EXAMPLES, ids=lambda p: p.stem)
def executed_example(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> nbformat.NotebookNode:
    """An example notebook executed once, from examples/ of a copy with the project's scenarios."""
    path: Path = request.param
    root = tmp_path_factory.mktemp(path.stem)
    (root / "scenarios").symlink_to(REPO / "scenarios", target_is_directory=True)
    work = root / "examples"
    work.mkdir()
    shutil.copy2(path, work / path.name)
    return execute_notebook(work / path.name, work)


@pytest.mark.slow  # CI runs it (pytest -m slow); seconds of kernel or process start each
def test_example_notebook_runs_top_to_bottom(executed_example: nbformat.NotebookNode):
    """The notebook executes without error from examples/ of a copy with the project's scenarios."""
    book = executed_example
    assert all(c.get("execution_count") for c in book.cells if c.cell_type == "code")


@pytest.mark.slow  # CI runs it (pytest -m slow); seconds of kernel or process start each
def test_example_notebook_figures_render_as_images(executed_example: nbformat.NotebookNode):
    """Every cell of an example notebook that draws a figure shows it as a PNG in a fresh kernel."""
    assert figure_cells_without_image(executed_example) == []


@pytest.mark.parametrize("path", [*EXAMPLES, TEMPLATE_NOTEBOOK], ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path: Path):
    """Every code cell has no outputs and no execution count."""
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


@pytest.mark.parametrize("path", [*EXAMPLES, TEMPLATE_NOTEBOOK], ids=lambda p: p.stem)
def test_notebook_imports_only_public_wflsim_modules(path: Path):
    """A notebook imports wflsim and wflsim.analysis only, never an internal module."""
    code = _code(path)
    modules = re.findall(r"^\s*(?:from|import)\s+(wflsim[\w.]*)", code, flags=re.M)
    assert "wflsim" in modules
    assert set(modules) <= PUBLIC, modules


@pytest.mark.parametrize("path", [*EXAMPLES, TEMPLATE_NOTEBOOK], ids=lambda p: p.stem)
def test_notebook_names_no_path_outside_the_project(path: Path):
    """The only path above examples/ a notebook names is the project's scenarios/."""
    text = path.read_text(encoding="utf-8")
    assert re.findall(r"\.\./(?!scenarios/)", text) == []
    assert "shared/" not in text and "/work/" not in text and "/tmp/" not in text
