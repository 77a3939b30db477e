"""The documentation site's sources (no build): the API reference lists every public name."""

from __future__ import annotations

import importlib
import re

import pytest

from conftest import REPO

#: The modules whose ``__all__`` is the public API, each with a section of docs/reference.md.
PUBLIC_MODULES = ("wflsim", "wflsim.schemes", "wflsim.rules")


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
