"""Sphinx configuration of wflsim's documentation site.

Build it (``pip install -e ".[docs]"`` first) with warnings as errors::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

and open ``docs/_build/html/index.html``. The choices are in docs/decisions.md, "The documentation
site (issue 50)"; the build itself in docs/building.md.

Extending the site: an extension of the project's own is a module in ``docs/_ext/`` (on
``sys.path``), added to ``extensions`` below; a page is a Markdown file in ``docs/`` named in a
toctree (docs/index.md or a page's own).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
# wflsim from this checkout (autodoc imports it), and the site's own extensions
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(DOCS / "_ext"))

from wflsim._version import __version__  # noqa: E402

# -- Project -------------------------------------------------------------------------------------

project = "wflsim"
author = "the wflsim authors"
copyright = "the wflsim authors"
version = release = __version__

# -- Extensions ----------------------------------------------------------------------------------

extensions = [
    # MyST Markdown pages and Jupyter notebooks (myst_nb includes myst_parser)
    "myst_nb",
    # the API reference: pages generated at build time from the docstrings
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    # the source of every documented module, as pages of the site (the "[source]" links)
    "sphinx.ext.viewcode",
    # docs/_ext/wflsim_site.py: the notebooks of examples/ brought in, the source-file role
    "wflsim_site",
    # docs/_ext/results_figures.py: the figures of results.md, made from small runs
    "results_figures",
]

# -- Sources -------------------------------------------------------------------------------------

root_doc = "index"
# .rst first: autosummary writes its generated pages in the first suffix
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = [
    "_build",
    "_ext",
    "Thumbs.db",
    ".DS_Store",
    # the link to the project's scenarios/ the example notebooks read (docs/_ext/wflsim_site.py)
    "scenarios",
    "**/runs",
]
# docs/_templates/autosummary/class.rst: a class page is its autoclass with its members
templates_path = ["_templates"]

# Warnings: every cross-reference to wflsim's own names must resolve (nitpicky); targets in
# third-party libraries that cannot be resolved offline (no intersphinx: the build downloads
# nothing) are ignored by the narrow patterns below (docs/decisions.md).
nitpicky = True
nitpick_ignore_regex = [
    # the libraries' own names in signatures and type hints (numpy.ndarray, torch.Tensor, ...)
    (
        r"py:.*",
        r"(numpy|np|torch|nn|collections\.abc|typing|os|pathlib|pandas|pd|pydantic|pyarrow|pa"
        r"|scipy|simpy|matplotlib|duckdb)\..+",
    ),
    # the same names written short in annotations (``Path``, ``BaseModel``, ``NDArray``)
    (r"py:class", r"Path|BaseModel|NDArray|DataFrame"),
]

# -- MyST and notebooks --------------------------------------------------------------------------

myst_enable_extensions = ["colon_fence", "deflist"]
# "## Heading" anchors, so that links like [scenario.md](scenario.md#cells) resolve
myst_heading_anchors = 4

# The notebooks run at build time (committed without outputs); their outputs are cached under
# docs/_build and kept until the notebook changes; a failing cell fails the build.
nb_execution_mode = "cache"
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# -- API reference -------------------------------------------------------------------------------

autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
# the docstrings are Google style (Args:, Returns:, Raises:, Attributes:); a class's Attributes:
# become a field list, not entries that would repeat the members autodoc documents
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True

# -- HTML ----------------------------------------------------------------------------------------

html_theme = "furo"
html_title = f"wflsim {release}"
html_static_path: list[str] = []
html_last_updated_fmt = None
