"""The Python examples of README.md and docs/ (its folders too) use public names only and run as plain scripts.

Each example runs as ``python example.py`` in a fresh process, in a folder with the repository's
``scenarios/`` (and, for the examples that read one, a small run folder), as a user pasting it into
a file would run it: worker processes of a sweep import the script again, so a missing
``if __name__ == "__main__":`` guard fails here.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import wflsim
from conftest import REPO, doc_pages

#: The public modules: an example may import these and, but for ``wflsim`` itself, their
#: submodules (``wflsim.analysis.tidy``); everything else of the package is internal.
PUBLIC_MODULES = ("wflsim", "wflsim.schemes", "wflsim.rules", "wflsim.analysis")
#: The documents whose Python examples are held to public names and run as scripts.
DOCS = (REPO / "README.md", *doc_pages())
#: A first line that marks an example as code of the package itself (a contributor's change,
#: e.g. a new server beside the built-in ones), where internal imports are right.
PACKAGE_CODE = "# package code:"
#: The run folders an example may read, made for it (a short network-only quick-start run).
READ_RUNS = ("runs/mnist-try", "runs/quickstart")
#: Seconds one example may take as a script.
TIMEOUT_S = 180


def _examples() -> list[tuple[str, str]]:
    """``(doc:line, code)`` of every Python example."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
            line = text.count("\n", 0, m.start()) + 2
            found.append((f"{doc.relative_to(REPO)}:{line}", m.group(1)))
    return found


EXAMPLES = _examples()


def _private(name: str) -> bool:
    """A name starting with ``_`` that is not a dunder (``__version__`` is public)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_public(module: str) -> bool:
    """A module of the package an example may import (any other module is not ours)."""
    if module.split(".")[0] != "wflsim":
        return True
    if any(map(_private, module.split("."))):
        return False
    return module in PUBLIC_MODULES or any(
        module.startswith(f"{p}.") for p in PUBLIC_MODULES if p != "wflsim"
    )


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` of an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def internal_names(code: str) -> list[str]:
    """The internal or private modules and names ``code`` imports or reaches as
    ``wflsim.x.y`` (empty: public names only)."""
    bad: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if not _is_public(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if not _is_public(node.module):
                bad.append(node.module)
            elif node.module.split(".")[0] == "wflsim":
                bad += [f"{node.module}.{a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute):
            parts = (_dotted(node) or "").split(".")
            if parts[0] == "wflsim" and len(parts) > 1:
                top = f"wflsim.{parts[1]}"
                is_module = importlib.util.find_spec(top) is not None
                if (is_module and not _is_public(top)) or any(map(_private, parts)):
                    bad.append(".".join(parts))
    return sorted(set(bad))


def test_the_checker_flags_internal_and_private_imports():
    """internal_names flags wflsim.sim/models/app imports, attribute paths and `_` names."""
    code = (
        "import wflsim.app.cli\n"
        "from wflsim.sim.schemes.common import FreezingScheme\n"
        "from wflsim import _version\n"
        "import wflsim\n"
        "x = wflsim.models.registry.RULE_BUILDERS\n"
    )
    found = internal_names(code)
    assert "wflsim.app.cli" in found and "wflsim.sim.schemes.common" in found
    assert "wflsim._version" in found and any(n.startswith("wflsim.models") for n in found)


def test_the_checker_passes_public_imports():
    """internal_names accepts wflsim, wflsim.schemes, wflsim.rules and wflsim.analysis.*."""
    code = (
        "import numpy as np\nimport wflsim\nfrom wflsim.schemes import FreezingScheme\n"
        "from wflsim.rules import PlainRule\nfrom wflsim.analysis.tidy import load\n"
        "wflsim.run\nwflsim.schemes.FramePlan\nprint(wflsim.__version__)\n"
    )
    assert internal_names(code) == []


def test_docs_examples_use_public_names_only():
    """No Python example of README.md or docs/ imports an internal or private module (but code
    marked as the package's own)."""
    assert len(EXAMPLES) >= 10
    found = {
        where: internal_names(code) for where, code in EXAMPLES if not code.startswith(PACKAGE_CODE)
    }
    assert not {w: bad for w, bad in found.items() if bad}


def test_the_public_names_table_lists_the_public_modules():
    """docs/api.md's "Public names" table has one row per public module, and nothing else."""
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## Public names", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)`", section, flags=re.M)
    assert tuple(rows) == PUBLIC_MODULES


@pytest.mark.parametrize("module", ["wflsim.schemes", "wflsim.rules"])
def test_every_public_extension_name_is_documented(module):
    """Each name of wflsim.schemes / wflsim.rules has a docstring and a place in docs/api.md's table."""
    mod = importlib.import_module(module)
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith(f"| `{module}` |"))
    for name in mod.__all__:
        obj = getattr(mod, name)
        doc = inspect.getdoc(obj) or ""
        assert doc and not doc.startswith(f"{name}("), name  # not a dataclass's signature
        assert f"`{name}`" in row, name


@pytest.fixture(scope="module")
def read_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short network-only run folder of the quick start, for the examples that read one."""
    out = tmp_path_factory.mktemp("read-run") / "run"
    wflsim.run(
        REPO / "scenarios" / "quickstart.toml",
        overrides={"run.frames": 2, "learning.enabled": False},
        out=out,
        progress=False,
    )
    return out


def _example_folder(tmp_path: Path, code: str, read_run: Path) -> Path:
    """A folder with the repository's scenarios and the run folders ``code`` reads."""
    os.symlink(REPO / "scenarios", tmp_path / "scenarios")
    for name in READ_RUNS:
        if name in code:
            (tmp_path / name).parent.mkdir(exist_ok=True)
            os.symlink(read_run, tmp_path / name)
    return tmp_path


def _needs(code: str) -> str | None:
    """The optional package a ``# requires: NAME`` example needs that is not installed."""
    needs = re.search(r"^# requires: (\w+)", code, flags=re.M)
    if needs and importlib.util.find_spec(needs.group(1)) is None:
        return needs.group(1)
    return None


def _run_script(folder: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``python example.py`` of ``code`` in ``folder``, with this tree first on the path."""
    (folder / "example.py").write_text(code, encoding="utf-8")
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "example.py"],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def script_runs(
    tmp_path_factory: pytest.TempPathFactory, read_run: Path
) -> Iterator[dict[str, tuple[Path, Future[subprocess.CompletedProcess[str]]]]]:
    """Every example started as a script, two at a time (each in its own process and folder):
    its folder and the future of its finished process, by ``doc:line``."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {}
        for where, code in EXAMPLES:
            if _needs(code) is None:
                folder = tmp_path_factory.mktemp("example")
                _example_folder(folder, code, read_run)
                runs[where] = (folder, pool.submit(_run_script, folder, code))
        yield runs


@pytest.mark.slow  # CI runs it (pytest -m slow); seconds of kernel or process start each
@pytest.mark.parametrize(("where", "code"), EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_docs_example_runs_as_a_script(where, code, script_runs):
    """The example runs as `python example.py` in a fresh process; its sweeps complete."""
    if _needs(code):
        pytest.skip(f"needs {_needs(code)}")
    folder, future = script_runs[where]
    res = future.result()
    assert res.returncode == 0, res.stderr[-3000:]
    workers = re.search(r"workers=(\d+)", code)
    for path in folder.glob("runs/*/sweep.json"):
        manifest = json.loads(path.read_text())
        assert {p["status"] for p in manifest["points"].values()} == {"completed"}, path
        assert workers is None or manifest["workers"] == int(workers.group(1)), path


def test_the_plain_pandas_one_liner_gives_the_documented_types(read_run, tmp_path, monkeypatch):
    """docs/trace.md's plain-pandas read gives `device` as int32 (nulls kept) and `event` as string."""
    text = (REPO / "docs" / "trace.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, flags=re.S)
    assert code is not None
    monkeypatch.chdir(_example_folder(tmp_path, code.group(1), read_run))
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "docs/trace.md", "exec"), namespace)  # noqa: S102
    ev = namespace["ev"]
    assert isinstance(ev, pd.DataFrame)
    assert ev["device"].dtype == pd.ArrowDtype(pa.int32()) and ev["device"].isna().any()
    assert pd.api.types.is_string_dtype(ev["event"]) and "energy" in set(ev["event"])
