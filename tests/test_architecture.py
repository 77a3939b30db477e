"""The package layout keeps its promises: every import points down the layers, sim is torch-free,
and no modules import each other in a circle (imports anywhere count; reported by part).

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

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _paths() -> dict[str, Path]:
    """Module -> its source file, for every module of the package."""
    return {_module_name(p): p for p in _files()}


def _scan(paths: dict[str, Path], everywhere: bool = True) -> dict[str, set[str]]:
    """Module -> the modules of ``paths`` it imports (``everywhere``: wherever the import is;
    else at module level), for the modules ``paths`` names (module -> source file)."""
    modules = set(paths)
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = _imports(path.read_text(), package, modules, everywhere)
        graph[name] = {m for m in deps if m in modules and m != name}
    return graph


def _graph(everywhere: bool = True) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (``everywhere``: wherever the import is;
    else at module level)."""
    return _scan(_paths(), everywhere)


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
    """The module-level scanner leaves out function bodies and TYPE_CHECKING."""
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


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of imports in ``graph`` (module -> the modules it imports): each group of two
    or more modules from which every one of them reaches every other (a strongly connected
    component, Tarjan's algorithm), as one shortest circle through its first module (sorted),
    that module repeated at the end (``[a, b, a]``), then the group's modules off that circle,
    sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, deps = work[-1]
            nxt = next(deps, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(graph.get(nxt, ())))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    found = []
    for group in sorted(groups):
        circle = _shortest_circle(graph, group)
        found.append(circle + [m for m in group if m not in circle])
    return found


def _shortest_circle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """A shortest circle of imports within ``group`` (a strongly connected group) through its
    first module: ``[a, ..., a]`` (breadth first)."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{group} is not a circle")


#: The parts of the package whose import circles are reported apart: each linked folder, and
#: the rest (``wflsim/``'s own modules: the application, the API, the root, the public faces).
PARTS = (*PACKAGES, "rest")


def _part(module: str) -> str:
    """The part of a module (:data:`PARTS`)."""
    layer = _layer(module)
    return layer if layer in PACKAGES else "rest"


def _circles_by_file(graph: dict[str, set[str]], paths: dict[str, Path]) -> list[str]:
    """Each circle of ``graph`` (:func:`_circles`) written with its modules' files."""
    found = []
    for circle in _circles(graph):
        cut = circle.index(circle[0], 1) + 1
        names = [str(paths[m].relative_to(REPO)) for m in circle]
        others = f" (the circle's group also holds {', '.join(names[cut:])})" if names[cut:] else ""
        found.append(" -> ".join(names[:cut]) + others)
    return found


@pytest.mark.parametrize("part", PARTS)
def test_no_import_circle_between_modules(part):
    """No module of the part is in a circle of imports between modules (imports anywhere: in
    functions and under TYPE_CHECKING too), each circle reported by its files."""
    graph, paths = _graph(), _paths()
    circles = [c for c in _circles(graph) if part in {_part(m) for m in c}]
    assert not circles, _circles_by_file({m: graph[m] for c in circles for m in c}, paths)


#: Small packages whose modules import each other in a circle, each module's source by name,
#: and the circle the finder reports (``[a, ..., a]`` then the group's other modules).
CIRCULAR_PACKAGES = {
    "in_a_function": (
        {"a": "def f():\n    from pkg import b\n", "b": "def g():\n    import pkg.a\n"},
        ["pkg.a", "pkg.b", "pkg.a"],
    ),
    "under_type_checking": (
        {
            "a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
            "b": "from . import a\n",
        },
        ["pkg.a", "pkg.b", "pkg.a"],
    ),
    "through_three_modules": (
        {"a": "from .b import x\n", "b": "from .c import y\n", "c": "import pkg.a\n", "d": ""},
        ["pkg.a", "pkg.b", "pkg.c", "pkg.a"],
    ),
    "through_import_module": (
        {"a": "import importlib\nM = importlib.import_module('pkg.b')\n", "b": "from . import a\n"},
        ["pkg.a", "pkg.b", "pkg.a"],
    ),
}


@pytest.mark.parametrize("case", CIRCULAR_PACKAGES)
def test_the_circle_finder_reports_a_circle_written_into_a_package(tmp_path, case):
    """A package written into tmp_path whose modules import each other in a circle (inside a
    function, under TYPE_CHECKING, through three modules, through import_module) is reported."""
    sources, circle = CIRCULAR_PACKAGES[case]
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, source in sources.items():
        (package / f"{name}.py").write_text(source)
    paths = {f"pkg.{p.stem}" if p.stem != "__init__" else "pkg": p for p in package.glob("*.py")}
    assert _circles(_scan(paths)) == [circle]


def test_the_circle_finder_reports_no_circle_in_a_package_that_imports_downwards(tmp_path):
    """Imports that only point one way (a -> b -> c, a -> c) are no circle."""
    package = tmp_path / "pkg"
    package.mkdir()
    sources = {"__init__": "", "a": "from . import b, c\n", "b": "from .c import y\n", "c": ""}
    for name, source in sources.items():
        (package / f"{name}.py").write_text(source)
    paths = {f"pkg.{p.stem}" if p.stem != "__init__" else "pkg": p for p in package.glob("*.py")}
    assert _scan(paths)["pkg.a"] == {"pkg.b", "pkg.c"}
    assert _circles(_scan(paths)) == []


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from("abcdefg"), st.sets(st.sampled_from("abcdefg"), max_size=3), max_size=7
    )
)
def test_the_circle_finder_reports_exactly_the_modules_that_reach_themselves(edges):
    """On any small graph the circles hold exactly the modules from which an import path leads
    back to themselves (the transitive closure, an independent reference), each circle's path
    following the graph's imports."""
    graph = {m: {d for d in deps if d != m} for m, deps in edges.items()}
    for deps in list(graph.values()):
        for d in deps:
            graph.setdefault(d, set())
    reach = {m: set(deps) for m, deps in graph.items()}
    for k in graph:
        for m in graph:
            if k in reach[m]:
                reach[m] |= reach[k]
    circles = _circles(graph)
    assert {m for c in circles for m in c} == {m for m in graph if m in reach[m]}
    for circle in circles:
        cut = circle.index(circle[0], 1)
        assert all(b in graph[a] for a, b in zip(circle[:cut], circle[1 : cut + 1], strict=True))


def test_one_back_edge_added_to_the_package_graph_is_a_reported_circle():
    """Adding to the real graph one import back up (the scheme base importing the registry
    that lists the schemes) makes a circle through both that the finder reports."""
    graph = _graph()
    top, low = "wflsim.sim.registry", "wflsim.sim.schemes.base"
    assert not [c for c in _circles(graph) if top in c or low in c]
    graph[low] = graph[low] | {top}
    circles = [c for c in _circles(graph) if top in c and low in c]
    assert len(circles) == 1


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
