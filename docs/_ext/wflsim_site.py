"""The site's own Sphinx extension: what the pages need from outside docs/.

* The notebooks of ``examples/`` are copied into ``docs/examples/`` (gitignored) when the build
  starts, next to a link ``docs/scenarios`` to the project's ``scenarios/``, so that myst-nb runs
  them as a user does, from ``examples/`` with ``../scenarios/...`` (their ``runs/`` are removed
  first: a sweep's folder from an earlier execution is not reused).
* The study template of ``wflsim init`` is written into ``docs/study/`` (gitignored; its README
  and its notebook are pages) and, when
  myst-nb has no cached execution of its notebook, its sweep is run small (one seed) so that the
  notebook has a sweep to read.
* A cross-reference in a docstring to a name of wflsim that has no page of its own (an internal
  class such as ``wflsim.sim.engine.Engine``) links to the page of the same object where it has
  one under a public name, and is shown as code otherwise; a reference that names nothing
  (it does not import, from the docstring's module) still warns, and fails the build.
* The role ``{source}`\\`sim/engine.py\\``` links a source file of the project to its page of
  highlighted source (sphinx.ext.viewcode's ``_modules/``), or shows it as code when the module
  has no documented object.

docs/decisions.md, "The documentation site (issue 50)", says why.
"""

from __future__ import annotations

import builtins
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util import logging
from wflsim_names import MISSING as _MISSING
from wflsim_names import getattr_chain, import_object

logger = logging.getLogger(__name__)

#: The study's sweep for its notebook: the template's grid, one seed (the full study: 3 seeds).
STUDY_SWEEP_ARGS = ["--seeds", "0", "--workers", "1", "--quiet"]


def _sync(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` unless ``dst`` has the same bytes (an unchanged page keeps its
    time stamp, so Sphinx does not read it again)."""
    if dst.is_file() and filecmp.cmp(src, dst, shallow=False):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def _link(link: Path, target: str) -> None:
    """The relative symbolic link ``link -> target`` (made once)."""
    if link.is_symlink() and os.readlink(link) == target:
        return
    if link.is_symlink():
        link.unlink()
    link.symlink_to(target, target_is_directory=True)


def bring_in_examples(docs: Path, repo: Path) -> None:
    """``examples/*.ipynb`` into ``docs/examples/`` with ``docs/scenarios`` beside it."""
    out = docs / "examples"
    out.mkdir(exist_ok=True)
    names = set()
    for notebook in sorted((repo / "examples").glob("*.ipynb")):
        _sync(notebook, out / notebook.name)
        names.add(notebook.name)
    for stale in out.glob("*.ipynb"):  # a notebook since removed from examples/
        if stale.name not in names:
            stale.unlink()
    shutil.rmtree(out / "runs", ignore_errors=True)
    _link(docs / "scenarios", "../scenarios")


def _subprocess_env(repo: Path) -> dict[str, str]:
    """The environment of a ``python -m wflsim`` run on this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    return env


def _is_cached(notebook: Path, cache_path: str) -> bool:
    """Whether myst-nb's cache holds an execution of ``notebook`` as it is now."""
    import nbformat
    from jupyter_cache import get_cache

    if not Path(cache_path).exists():
        return False
    try:
        get_cache(cache_path).match_cache_notebook(nbformat.read(notebook, as_version=4))
    except KeyError:
        return False
    return True


def bring_in_study(docs: Path, repo: Path, cache_path: str) -> None:
    """``wflsim init``'s study into ``docs/study/``, with a small sweep when its notebook is to be
    executed."""
    study = docs / "study"
    env = _subprocess_env(repo)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "my_study"  # the study's name, in its README and scenario
        subprocess.run(
            [sys.executable, "-m", "wflsim", "init", str(fresh)],
            check=True,
            capture_output=True,
            env=env,
        )
        for path in fresh.iterdir():
            _sync(path, study / path.name)
    if _is_cached(study / "analysis.ipynb", cache_path):
        return
    logger.info("[wflsim_site] running the study template's sweep for its notebook")
    shutil.rmtree(study / "runs", ignore_errors=True)
    done = subprocess.run(
        [sys.executable, "-m", "wflsim", "sweep", "scenario.toml", "--out", "runs/sweep"]
        + STUDY_SWEEP_ARGS,
        cwd=study,
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the study template's sweep failed:\n{done.stderr}")


def on_config_inited(app: Sphinx, config: Config) -> None:
    """Bring the notebooks in before Sphinx looks for its source files."""
    docs = Path(app.srcdir)
    repo = docs.parent
    bring_in_examples(docs, repo)
    bring_in_study(docs, repo, config.nb_execution_cache_path)


#: The pages whose autosummary tables show the docstrings' first lines: Sphinx does not note
#: the modules they come from, so they are read again at every build (a page, seconds).
SUMMARY_PAGES = ["reference"]


def on_env_get_outdated(
    app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]
) -> list[str]:
    """Read the reference's summary tables again, so that a changed docstring shows there too."""
    return [page for page in SUMMARY_PAGES if page in env.found_docs]


def source_role(
    name: str,
    rawtext: str,
    text: str,
    lineno: int,
    inliner: Any,
    options: dict[str, Any] | None = None,
    content: list[str] | None = None,
) -> tuple[list[nodes.Node], list[nodes.system_message]]:
    """``{source}`path.py``` : the path as code, linked to its module's highlighted source."""
    path = text.strip()
    module = "wflsim." + path.removesuffix(".py").replace("/", ".").removeprefix("wflsim.")
    module = module.removesuffix(".__init__")
    literal = nodes.literal(rawtext, path)
    ref = addnodes.pending_xref(
        rawtext,
        refdoc=inliner.document.settings.env.docname,
        refdomain="",
        reftype="wflsim-source",
        reftarget=module,
        refexplicit=True,
        refwarn=False,
    )
    ref += literal
    return [ref], []


def resolve_source(app: Sphinx, env: Any, node: nodes.Element, contnode: nodes.Node) -> Any:
    """The link of a ``{source}`` role: the viewcode page of its module when there is one."""
    if node.get("reftype") != "wflsim-source":
        return None
    module = node["reftarget"]
    modules = getattr(env, "_viewcode_modules", {})
    if not modules.get(module):
        return contnode
    fromdoc = node.get("refdoc", "")
    target = "_modules/" + module.replace(".", "/")
    uri = app.builder.get_relative_uri(fromdoc, target)
    return nodes.reference("", "", contnode, internal=True, refuri=uri)


def _import_object(name: str) -> Any:
    """The object ``name`` names, a name imported for type hints only included, or
    ``_MISSING``."""
    return import_object(name, type_imports=True)


def _getattr_chain(start: Any, parts: list[str]) -> Any:
    """``start.parts[0]...`` as a reference means it (``wflsim_names.getattr_chain``)."""
    return getattr_chain(start, parts, type_imports=True)


def _contexts(node: nodes.Element) -> list[Any]:
    """Where a relative name of ``node`` is looked up: the module and class the reference sits
    in, the module of the docstring it comes from, and of the page's object."""
    names = [
        node.get("py:module"),
        node.get("py:class") and f"{node.get('py:module')}.{node.get('py:class')}",
    ]
    source = re.search(r"docstring of ([\w.]+)", node.source or "")
    if source:
        names.append(source.group(1))
    names.append(Path(node.get("refdoc", "")).name)  # _autosummary/wflsim.sweep
    found: list[Any] = []
    module = sys.modules.get(node.get("py:module") or "")
    if module is not None:  # a summary table's line: the modules of the names it lists
        names += [f"{module.__name__}.{n}" for n in getattr(module, "__all__", ())]
    for name in filter(None, names):
        obj = _import_object(name)
        if obj is _MISSING or obj is None:
            continue
        found.append(obj)
        home = sys.modules.get(getattr(obj, "__module__", "") or "")
        if home is not None:
            found.append(home)
    return found


def _pages(env: Any) -> dict[int, str]:
    """The objects that have a page of their own (by identity) and their documented names."""
    pages: dict[int, str] = {}
    for name in env.get_domain("py").objects:
        obj = _import_object(name)
        if obj is not _MISSING and obj is not None:
            pages.setdefault(id(obj), name)
    return pages


def resolve_wflsim_name(app: Sphinx, env: Any, node: nodes.Element, contnode: nodes.Node) -> Any:
    """A Python reference Sphinx did not find: the page of the same object under its public
    name, or the name as code when it names an object of wflsim (or of a library) without a page;
    ``None`` (a warning) when it names nothing."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.").removesuffix("()")
    obj = _import_object(target) if "." in target else _MISSING
    if obj is _MISSING:
        parts = target.split(".")
        for context in _contexts(node):
            obj = _getattr_chain(context, parts)
            if obj is not _MISSING:
                break
        else:
            if len(parts) == 1 and hasattr(builtins, target):
                obj = getattr(builtins, target)
    if obj is _MISSING:
        return None
    if obj is not None and not isinstance(obj, (int, float, str)):
        pages = env.__dict__.setdefault("_wflsim_pages", None) or _pages(env)
        env._wflsim_pages = pages
        name = pages.get(id(obj))
        if name is not None:
            found = env.get_domain("py").resolve_any_xref(
                env, node.get("refdoc", ""), app.builder, name, node, contnode
            )
            if found:
                return found[0][1]
    return contnode


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the hooks and the role."""
    app.connect("config-inited", on_config_inited)
    app.connect("env-get-outdated", on_env_get_outdated)
    app.add_role("source", source_role)
    app.connect("missing-reference", resolve_source)
    app.connect("missing-reference", resolve_wflsim_name)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
