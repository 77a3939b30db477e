"""The package layout keeps its promises: every import points down the layers, sim is torch-free,
and there is no module-level import cycle.

Layers, bottom to top (docs/architecture.md, "Layers"): ``wflsim.sim`` < ``wflsim.models`` and
``wflsim.analysis`` < ``wflsim.app`` < ``wflsim.api`` (and the package root ``wflsim``, which
re-exports the API). The public faces for extensions (``wflsim.schemes``, ``wflsim.rules``)
re-export names of sim and models only. ``wflsim._version`` sits below them all. The layer tests read every import
of every module: at module level, inside functions, under ``if TYPE_CHECKING:`` and as
``importlib.import_module("...")`` with a literal name.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import REPO

#: The top-level folders linked into ``wflsim/`` as its subpackages.
PACKAGES = ("sim", "models", "analysis")
#: What models may import of sim: the torch-free catalogue data (datasets, models, layer tables),
#: the update-rule and strategy records it implements (names, parameters, frame-input records,
#: strategies' parameter models), the registries (sim.registry: the entries it implements and the Registry class of its own)
#: and the reader of files a user names (sim.files, and the error it raises: sim.errors).
MODELS_USE_OF_SIM = {
    "wflsim.sim",
    "wflsim.sim.config",
    "wflsim.sim.errors",
    "wflsim.sim.files",
    "wflsim.sim.config.catalogue",
    "wflsim.sim.config.architectures",
    "wflsim.sim.registry",
    "wflsim.sim.strategies",
    "wflsim.sim.updates",
    # the privacy spec, its closed forms and its composition table (one source per formula:
    # the learner's noise and the ledger's accounting read the same functions)
    "wflsim.sim.privacy",
    "wflsim.sim.privacy.config",
    "wflsim.sim.privacy.mechanism",
    "wflsim.sim.privacy.compose",
}
#: What analysis may import of sim: the one-line error of its refusals and the run folder's
#: format and readers (``read_manifest``, ``liveness``, ``link_error``), and the reader of files a
#: user names (``open_regular``).
ANALYSIS_USE_OF_SIM = {
    "wflsim.sim",
    "wflsim.sim.errors",
    "wflsim.sim.files",
    "wflsim.sim.rundir",
    "wflsim.sim.config.claims",  # the [[claims]] a study's files state
}
#: Every layer of the package, and the package root's modules that are not a layer's.
LAYERS = {"version", "sim", "models", "analysis", "app", "api", "root", "faces"}
#: The public modules that re-export what a scheme or an update rule of one's own needs.
FACES = {"wflsim.schemes", "wflsim.rules"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts if rel.parts[0] == "wflsim" else ("wflsim", *rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _files() -> list[Path]:
    """Every source file of the package: ``wflsim/``'s own (the API, the application, ...) and
    the linked folders' through their real paths."""
    root = REPO / "wflsim"
    own = [p for p in root.rglob("*.py") if p.relative_to(root).parts[0] not in PACKAGES]
    return [*own, *(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))]


def _layer(module: str) -> str:
    """The layer of a module of the package: ``version``, ``sim``, ``models``, ``analysis``,
    ``app``, ``api``, ``root`` (``wflsim`` itself and ``wflsim.__main__``) or ``faces``
    (:data:`FACES`)."""
    if module == "wflsim._version":
        return "version"
    if module in FACES:
        return "faces"
    if module in ("wflsim", "wflsim.__main__"):
        return "root"
    return module.split(".")[1]


def _imported(node: ast.AST, package: str, modules: set[str]) -> set[str]:
    """The modules one statement or call imports; ``from pkg import sub`` counts as an import
    of the module ``pkg.sub`` where there is one, a relative import is resolved in ``package``."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + [base]).strip(".")
        return {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and getattr(node.func, "attr", getattr(node.func, "id", None))
        in ("import_module", "__import__")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return {node.args[0].value}
    return set()


def _imports(source: str, package: str, modules: set[str], everywhere: bool) -> set[str]:
    """Modules ``source`` imports: every import anywhere (``everywhere``), or those run at module
    level only (not inside functions or ``if TYPE_CHECKING:``)."""
    tree = ast.parse(source)
    if everywhere:
        return {m for node in ast.walk(tree) for m in _imported(node, package, modules)}
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            found.update(_imported(node, package, modules))
            if isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(tree.body)
    return found


def _graph(everywhere: bool = True) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (``everywhere``: wherever the import is;
    else at module level)."""
    paths = {_module_name(p): p for p in _files()}
    modules = set(paths)
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = _imports(path.read_text(), package, modules, everywhere)
        graph[name] = {m for m in deps if m in modules and m != name}
    return graph


def _foreign(layer: str) -> dict[str, set[str]]:
    """Each module of ``layer`` -> what it imports of other layers (``wflsim._version`` aside)."""
    return {
        name: {d for d in deps if _layer(d) not in (layer, "version")}
        for name, deps in _graph().items()
        if _layer(name) == layer
    }


def _violations(layer: str, allowed: set[str]) -> dict[str, set[str]]:
    """Modules of ``layer`` that import anything of another layer outside ``allowed``."""
    found = {name: deps - allowed for name, deps in _foreign(layer).items()}
    return {name: deps for name, deps in found.items() if deps}


def test_the_import_graph_holds_every_layer():
    """The graph holds modules of sim, models, analysis, app, the API, the root and the version."""
    assert {_layer(m) for m in _graph()} == LAYERS


def test_the_scanner_sees_imports_inside_functions_type_checking_and_import_module():
    """Imports in a function, under TYPE_CHECKING and through import_module("...") are found."""
    source = (
        "import importlib\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from wflsim.app import run\n"
        "def f():\n    import wflsim.models.learner\n"
        "    return importlib.import_module('wflsim.analysis.tidy')\n"
    )
    modules = {"wflsim.app.run", "wflsim.models.learner", "wflsim.analysis.tidy"}
    assert _imports(source, "wflsim.sim", modules, everywhere=True) >= modules


def test_the_module_level_scanner_skips_functions_and_type_checking():
    """The module-level scanner (of the cycle test) leaves out function bodies and TYPE_CHECKING."""
    source = (
        "from typing import TYPE_CHECKING\nimport wflsim.sim.rng\n"
        "if TYPE_CHECKING:\n    from wflsim.app import run\n"
        "def f():\n    import wflsim.models.learner\n"
    )
    modules = {"wflsim.sim.rng", "wflsim.app.run", "wflsim.models.learner"}
    assert _imports(source, "wflsim.sim", modules, everywhere=False) & modules == {"wflsim.sim.rng"}


def test_sim_imports_nothing_of_models_analysis_app_or_the_api():
    """No sim module imports anything of models, analysis, app, the API or the root, anywhere."""
    assert not _violations("sim", set())


def test_models_imports_of_sim_only_the_catalogue_and_the_registries():
    """models imports of the other layers only sim's catalogue, layer tables, update-rule records
    and registries, anywhere."""
    assert not _violations("models", MODELS_USE_OF_SIM)


def test_analysis_imports_of_sim_only_the_run_folder_format_and_errors():
    """analysis imports of the other layers only the run folder's format (sim.rundir), sim.errors,
    sim.files (reading a file a user names) and the [[claims]] spec (sim.config.claims),
    anywhere."""
    assert not _violations("analysis", ANALYSIS_USE_OF_SIM)


def test_servers_import_nothing_above_them():
    """The servers (wflsim.sim.servers) never import the engine that runs them, the app or the API."""
    above = {"wflsim.sim.engine", "wflsim.sim.rundir", "wflsim.sim.state"}
    found = {
        name: {d for d in deps if d in above or _layer(d) != "sim"}
        for name, deps in _graph().items()
        if name.startswith("wflsim.sim.servers")
    }
    assert found and not any(found.values()), {n: d for n, d in found.items() if d}


def test_app_never_imports_the_api():
    """No app module imports the API or the package root (which re-exports it), anywhere."""
    assert not {
        n: d for n, d in _foreign("app").items() if {_layer(m) for m in d} & {"api", "root"}
    }


def test_the_public_faces_import_only_sim_and_models():
    """wflsim.schemes and wflsim.rules import nothing of analysis, app, the API or the root."""
    found = {
        name: {d for d in deps if _layer(d) not in ("sim", "models")}
        for name, deps in _foreign("faces").items()
    }
    assert set(found) == FACES and not any(found.values()), found


def test_sim_never_names_torch():
    """No sim module imports torch or torchvision, anywhere (not even inside a function)."""
    found = {}
    for path in (REPO / "sim").rglob("*.py"):
        names = _imports(path.read_text(), "wflsim.sim", set(), everywhere=True)
        roots = {m.split(".")[0] for m in names} & {"torch", "torchvision"}
        if roots:
            found[_module_name(path)] = roots
    assert not found


def _loads_none_of(code: str, packages: tuple[str, ...]) -> None:
    """Run ``code`` in a fresh interpreter (in the repository, ``tests/`` on the path); fail if
    it loaded torch or a module of ``packages``."""
    check = (
        "bad = sorted(m for m in sys.modules"
        f" if m.split('.')[0] == 'torch' or m.startswith({packages!r}));"
        "assert not bad, bad"
    )
    full = f"import importlib, sys; sys.path.insert(0, 'tests'); {code}; {check}"
    res = subprocess.run([sys.executable, "-c", full], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_importing_sim_loads_nothing_above_it():
    """Importing every sim module loads no torch, models, analysis, app or API."""
    modules = sorted(m for m in _graph() if _layer(m) == "sim")
    above = ("wflsim.models", "wflsim.analysis", "wflsim.app", "wflsim.api")
    _loads_none_of(f"[importlib.import_module(m) for m in {modules!r}]", above)


def test_importing_the_public_scheme_names_loads_no_torch_or_pandas():
    """import wflsim.schemes loads no torch, pandas, models, analysis, app or API."""
    above = ("pandas", "wflsim.models", "wflsim.analysis", "wflsim.app", "wflsim.api")
    _loads_none_of("import wflsim.schemes", above)


def test_a_network_only_run_loads_no_torch_models_or_analysis():
    """Running a network-only scenario in memory loads no torch, models or analysis."""
    run = "from conftest import base_scenario, run_in_memory; run_in_memory(base_scenario())"
    _loads_none_of(run, ("wflsim.models", "wflsim.analysis"))


def test_no_module_level_import_cycles():
    """The module-level import graph of the package has no cycle."""
    graph = _graph(everywhere=False)
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


#: Most lines a module of the package may have: a room one can still read as a whole. A module
#: that grows past it is split along its seams (docs/architecture.md's layout names them).
MAX_MODULE_LINES = 850


def test_no_module_is_too_large_to_read():
    """Every module of the package has at most MAX_MODULE_LINES lines (the largest named)."""
    sizes = {
        str(p.relative_to(REPO)): len(p.read_text(encoding="utf-8").splitlines()) for p in _files()
    }
    too_large = {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not too_large, f"split along their seams: {too_large}"
