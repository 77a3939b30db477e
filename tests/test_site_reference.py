"""The documentation site's sources (no build): the API reference lists every public name, and
the site's extension resolves the docstrings' references to wflsim's names."""

from __future__ import annotations

import importlib
import importlib.util
import re
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from conftest import REPO, docs_extension

#: The modules whose ``__all__`` is the public API, each with a section of docs/reference.md.
PUBLIC_MODULES = ("wflsim", "wflsim.schemes", "wflsim.rules", "wflsim.analysis")


def reference_entries(text: str) -> dict[str, list[str]]:
    """The names each ``autosummary`` of a reference page lists, by its ``currentmodule``."""
    entries: dict[str, list[str]] = {}
    for chunk in text.split(".. currentmodule:: ")[1:]:
        module, _, body = chunk.partition("\n")
        block = body.split("```")[0]
        names = re.findall(r"^ {3}([\w.]+)\s*$", block, flags=re.M)
        entries.setdefault(module.strip(), []).extend(names)
    return entries


def test_reference_entries_are_read_from_autosummary_blocks():
    """The reader takes the listed names under their module and skips the directive's options."""
    text = (
        "```{eval-rst}\n.. currentmodule:: pkg\n\n.. autosummary::\n   :toctree: _autosummary\n"
        "   :nosignatures:\n\n   run\n   Thing\n```\nprose\n"
    )
    assert reference_entries(text) == {"pkg": ["run", "Thing"]}


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_reference_lists_every_public_name(module: str):
    """docs/reference.md lists exactly the names of the module's ``__all__``, each once, so
    that every public name has a generated page and a new one without a page fails here."""
    listed = reference_entries((REPO / "docs" / "reference.md").read_text()).get(module, [])
    public = importlib.import_module(module).__all__
    assert sorted(listed) == sorted(set(listed))
    assert set(listed) == set(public)


def _site_extension() -> ModuleType:
    """docs/_ext/wflsim_site.py, the site's own Sphinx extension (skipped without Sphinx)."""
    pytest.importorskip("sphinx")
    return docs_extension("wflsim_site")


def _reference(target: str, source: str = "", module: str = "wflsim") -> Any:
    """A Python cross-reference to ``target`` written in the docstring named by ``source``."""
    from sphinx import addnodes

    node = addnodes.pending_xref("", refdomain="py", reftype="class", reftarget=target)
    node["py:module"] = module
    node.source = source
    return node


def _no_pages() -> SimpleNamespace:
    """A build environment whose Python domain documents nothing."""
    domain = SimpleNamespace(objects={}, resolve_any_xref=lambda *args: [])
    return SimpleNamespace(get_domain=lambda name: domain)


def test_a_reference_that_names_nothing_still_warns():
    """A docstring's reference to a name of wflsim that does not exist is left to Sphinx's
    warning (the build fails under -W)."""
    site = _site_extension()
    node = _reference("wflsim.sim.engine.NoSuchEngine", "docstring of wflsim.api.run")
    assert site.resolve_wflsim_name(None, _no_pages(), node, object()) is None


def test_a_name_imported_for_type_hints_only_resolves_as_code():
    """A relative name the docstring's module imports under ``if TYPE_CHECKING:`` (CsiPosterior
    in sim/schemes/base.py) is shown as the code it is, without a page to link."""
    from wflsim.sim.schemes.base import SlotContext

    assert "CsiPosterior" not in vars(importlib.import_module(SlotContext.__module__))
    site = _site_extension()
    node = _reference("CsiPosterior", f"docstring of {SlotContext.__module__}.SlotContext")
    code = object()
    assert site.resolve_wflsim_name(None, _no_pages(), node, code) is code
