"""The package layout keeps its promises: sim is torch-free, and no module-level import cycles."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import REPO

PACKAGES = ("sim", "models", "analysis")
#: What models may import of sim: the torch-free catalogue data (datasets, models, layer tables).
ALLOWED_SIM = {
    "wflsim.sim",
    "wflsim.sim.config",
    "wflsim.sim.config.catalogue",
    "wflsim.sim.config.architectures",
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(("wflsim", *parts))


def _module_level_imports(path: Path, modules: set[str]) -> set[str]:
    """Modules imported at module level (not inside functions or ``if TYPE_CHECKING:``);
    ``from pkg import sub`` counts as an import of the module ``pkg.sub`` where there is one."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    package = (
        _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    )

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1] + [base]
                    ).strip(".")
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    found.add(sub if sub in modules else base)
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(tree.body)
    return found


def _graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")]
    modules = {_module_name(p): p for p in files}
    graph = {}
    for name, path in modules.items():
        deps = _module_level_imports(path, set(modules))
        graph[name] = {m for m in deps if m in modules and m != name}
    return graph


def test_sim_never_imports_torch_models_or_analysis():
    """Importing every sim module (and running a network-only scenario) loads no torch, models or analysis."""
    modules = sorted(m for m in _graph() if m.split(".")[1] == "sim")
    code = (
        "import importlib, sys; sys.path.insert(0, 'tests');"
        f"[importlib.import_module(m) for m in {modules!r}];"
        "from conftest import base_scenario, run_in_memory; run_in_memory(base_scenario());"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'torch' or m.startswith(('wflsim.models', 'wflsim.analysis')));"
        "assert not bad, bad"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_no_module_level_import_cycles():
    """The module-level import graph of sim, models and analysis has no cycle."""
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def dfs(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                dfs(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            dfs(node)
    assert not cycles, cycles


def test_models_depend_on_sim_only_through_the_catalogue():
    """models imports nothing of sim at module level but the torch-free catalogue and layer
    tables (sim.config.catalogue, sim.config.architectures)."""
    for name, deps in _graph().items():
        if name.split(".")[1] == "models":
            sim_deps = {d for d in deps if d.split(".")[1] == "sim"}
            assert sim_deps <= ALLOWED_SIM, (name, sim_deps)
