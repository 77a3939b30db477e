"""The documentation site in headless Chromium: every page reachable from ``index.html`` by
internal links loads without a console or page error, its internal links resolve (the file, and
the anchor in the target page), its images load, and every notebook of ``examples/`` has a page
that shows its figures.

The site is the build of ``docs/`` (README.md, "The documentation site"); the test of the real
site skips where it is not built, but fails under ``WFLSIM_NO_SKIP=1`` (CI builds it before the
tests). The checks themselves are shown to catch each fault on small sites of plain HTML files.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from conftest import REPO, doc_pages, launch_chromium, playwright_api

#: The built site (``python -m sphinx -W --keep-going -b html docs docs/_build/html``).
SITE = REPO / "docs" / "_build" / "html"

#: Pages of the site a reader reaches without a link (the search box, the theme's index link).
SPECIAL_PAGES = ("search.html", "genindex.html")

#: What the browser reports of one page once loaded, with its images waited for (lazy ones too):
#: every element id and anchor name, every link's resolved URL, every image's source and whether
#: it loaded, and the loaded images inside notebook cells' outputs (myst-nb's ``div.cell``).
_READ_PAGE = """async () => {
  const images = Array.from(document.images);
  await Promise.all(images.map(i => {
    i.loading = "eager";
    return i.complete ? null : new Promise(done => { i.onload = i.onerror = done; });
  }));
  const loaded = i => i.complete && i.naturalWidth > 0;
  return {
    ids: Array.from(document.querySelectorAll("[id]")).map(e => e.id)
      .concat(Array.from(document.querySelectorAll("a[name]")).map(a => a.name)),
    links: Array.from(document.querySelectorAll("a[href]")).map(a => a.href),
    images: images.map(i => [i.getAttribute("src") || "", loaded(i)]),
    cells: document.querySelectorAll("div.cell").length,
    cellImages: Array.from(document.querySelectorAll("div.cell img")).filter(loaded).length,
  };
}"""


@dataclass
class Page:
    """What one visited page holds."""

    ids: set[str]
    links: list[str]
    images: list[tuple[str, bool]]
    cells: int
    cell_images: int
    errors: list[str] = field(default_factory=list)


def _local(url: str, root: Path) -> tuple[Path, str] | None:
    """The file and anchor a ``file://`` URL points at; None for any other scheme."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        return None
    return Path(unquote(parts.path)), unquote(parts.fragment)


def crawl(index: Path, browser: Any, also: tuple[str, ...] = ()) -> dict[Path, Page]:
    """Every HTML page reachable from ``index`` (and from the pages ``also`` names, relative to
    its folder, where they exist) by internal links, visited in one tab."""
    root = index.parent.resolve()
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    pages: dict[Path, Page] = {}
    todo = [index.resolve(), *(p for p in (root / name for name in also) if p.is_file())]
    while todo:
        path = todo.pop()
        if path in pages:
            continue
        errors.clear()
        tab.goto(path.as_uri(), wait_until="load")
        seen = tab.evaluate(_READ_PAGE)
        pages[path] = page = Page(
            ids=set(seen["ids"]),
            links=seen["links"],
            images=[(src, ok) for src, ok in seen["images"]],
            cells=seen["cells"],
            cell_images=seen["cellImages"],
            errors=list(errors),
        )
        for url in page.links:
            target = _local(url, root)
            if target is None:
                continue
            file = target[0]
            if file.suffix == ".html" and file.is_file() and file.is_relative_to(root):
                todo.append(file)
    tab.close()
    return pages


def problems(pages: dict[Path, Page], root: Path) -> list[str]:
    """Every fault of the crawled site, one line each naming the page: a console or page error,
    an image that did not load, an internal link to a missing file, a file outside the site or an
    anchor its target page does not have."""
    root = root.resolve()
    found: list[str] = []
    for path, page in sorted(pages.items()):
        name = path.relative_to(root).as_posix()
        found += [f"{name}: {e}" for e in page.errors]
        found += [f"{name}: image {src!r} does not load" for src, ok in page.images if not ok]
        for url in page.links:
            target = _local(url, root)
            if target is None:
                continue
            file, anchor = target
            if file.is_dir():
                file = file / "index.html"
            if not file.is_relative_to(root):
                found.append(f"{name}: link {url} leaves the site")
            elif not file.is_file():
                found.append(f"{name}: link {url}: no such file")
            elif anchor and file in pages and anchor not in pages[file].ids:
                found.append(f"{name}: link {url}: no #{anchor} in its page")
    return found


def notebook_pages_without_figures(pages: dict[Path, Page], notebooks: list[Path]) -> list[str]:
    """The notebooks without a page of their name (``quickstart.ipynb``: ``quickstart.html``)
    that holds notebook cells and at least one loaded image in them."""
    missing = []
    for notebook in notebooks:
        shown = [p for path, p in pages.items() if path.stem == notebook.stem and p.cells]
        if not shown:
            missing.append(f"{notebook.name}: no page of its cells")
        elif not any(p.cell_images for p in shown):
            missing.append(f"{notebook.name}: its page shows no figure")
    return missing


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium, one for the module (skipped without Playwright or a Chromium, unless
    ``WFLSIM_NO_SKIP=1``)."""
    sync_api = playwright_api()
    with sync_api.sync_playwright() as p:
        chromium = launch_chromium(p)
        try:
            yield chromium
        finally:
            chromium.close()


# ------------------------------------------------------------------ the checks, on small sites


def _png(width: int = 2, height: int = 2) -> bytes:
    """A valid grey PNG image of ``width`` x ``height`` pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _html(body: str) -> str:
    """A complete HTML page around ``body``."""
    return f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head><body>{body}</body></html>'


def _site(folder: Path, **changes: str) -> Path:
    """A sound small site: ``index.html`` links to ``guide/page.html#part`` (which links back and
    shows an image) and to a notebook page whose cell output shows a figure. ``changes`` replaces
    the body of a page by its name (``page``, ``index``, ``nb``). Returns the index."""
    (folder / "guide").mkdir()
    (folder / "_images").mkdir()
    (folder / "_images" / "fig.png").write_bytes(_png())
    bodies = {
        "index": '<a href="guide/page.html#part">page</a> <a href="nb.html">notebook</a>'
        ' <a href="https://example.org/">outside, not checked</a>',
        "page": '<h1 id="part">Part</h1><img src="../_images/fig.png" alt="fig">'
        ' <a href="../index.html">back</a> <a href="#part">here</a>',
        "nb": '<div class="cell"><div class="cell_output"><img src="_images/fig.png" alt="out"></div></div>',
    }
    bodies.update(changes)
    (folder / "index.html").write_text(_html(bodies["index"]))
    (folder / "guide" / "page.html").write_text(_html(bodies["page"]))
    (folder / "nb.html").write_text(_html(bodies["nb"]))
    return folder / "index.html"


def test_a_sound_site_passes_every_check(tmp_path, browser):
    """A small site whose links, anchors, images and notebook figure are all there has no
    problem, and the crawl reaches every page by its links (and no page that none reaches)."""
    index = _site(tmp_path)
    (tmp_path / "orphan.html").write_text(_html("<script>console.error('never visited')</script>"))
    pages = crawl(index, browser)
    assert {p.relative_to(tmp_path).as_posix() for p in pages} == {
        "index.html",
        "guide/page.html",
        "nb.html",
    }
    assert problems(pages, tmp_path) == []
    assert notebook_pages_without_figures(pages, [Path("examples/nb.ipynb")]) == []


def test_a_link_to_a_missing_page_is_caught(tmp_path, browser):
    """A link to a page that does not exist, on a page reached through another, is named."""
    index = _site(tmp_path, page='<h1 id="part">Part</h1><a href="gone.html">gone</a>')
    found = problems(crawl(index, browser), tmp_path)
    assert len(found) == 1 and found[0].startswith("guide/page.html: link ")
    assert found[0].endswith("guide/gone.html: no such file"), found


def test_a_link_to_a_missing_anchor_is_caught(tmp_path, browser):
    """A link to an anchor its target page does not have is named, with the anchor."""
    index = _site(tmp_path, index='<a href="guide/page.html#nowhere">page</a>')
    found = problems(crawl(index, browser), tmp_path)
    assert found == [
        f"index.html: link {(tmp_path / 'guide/page.html').as_uri()}#nowhere: no #nowhere in its page"
    ]


def test_a_link_out_of_the_site_is_caught(tmp_path, browser):
    """A relative link to a file above the site's folder (it exists, but not in the site) is named."""
    site = tmp_path / "html"
    site.mkdir()
    (tmp_path / "engine.py").write_text("")
    index = _site(site, index='<a href="../engine.py">source</a>')
    found = problems(crawl(index, browser), site)
    assert len(found) == 1 and found[0].endswith("engine.py leaves the site"), found


def test_a_missing_image_is_caught(tmp_path, browser):
    """An image whose file is missing is named (the browser's failed load counts too)."""
    index = _site(
        tmp_path, page='<h1 id="part">Part</h1><img src="../_images/gone.png" alt="gone">'
    )
    found = problems(crawl(index, browser), tmp_path)
    assert "guide/page.html: image '../_images/gone.png' does not load" in found, found


def test_a_broken_image_file_is_caught(tmp_path, browser):
    """An image file that is there but is not an image does not load, and is named."""
    (tmp_path / "bad.png").write_bytes(b"not a png")
    index = _site(tmp_path, index='<img src="bad.png" alt="bad">')
    found = problems(crawl(index, browser), tmp_path)
    assert "index.html: image 'bad.png' does not load" in found, found


def test_a_console_error_is_caught(tmp_path, browser):
    """A script's console.error on a page reached by a link is named with its text."""
    index = _site(tmp_path, nb='<script>console.error("boom")</script>')
    found = problems(crawl(index, browser), tmp_path)
    assert found == ["nb.html: console: boom"], found


def test_an_uncaught_exception_is_caught(tmp_path, browser):
    """A script's uncaught exception is named as a page error."""
    index = _site(tmp_path, index='<script>throw new Error("kaboom")</script>')
    found = problems(crawl(index, browser), tmp_path)
    assert (
        len(found) == 1 and found[0].startswith("index.html: page error: ") and "kaboom" in found[0]
    )


def test_a_notebook_page_without_a_figure_is_caught(tmp_path, browser):
    """A notebook page whose cells show no image (not executed, or its figure lost) is named,
    and so is a notebook without a page."""
    index = _site(tmp_path, nb='<div class="cell"><div class="cell_input">plt.plot()</div></div>')
    pages = crawl(index, browser)
    assert problems(pages, tmp_path) == []
    notebooks = [Path("examples/nb.ipynb"), Path("examples/other.ipynb")]
    assert notebook_pages_without_figures(pages, notebooks) == [
        "nb.ipynb: its page shows no figure",
        "other.ipynb: no page of its cells",
    ]


# ------------------------------------------------------------------------------ the real site


@pytest.fixture(scope="module")
def site_pages(browser: Any) -> dict[Path, Page]:
    """Every page of the built site reachable from its index (skipped where it is not built,
    unless ``WFLSIM_NO_SKIP=1``: CI builds it before the tests)."""
    index = SITE / "index.html"
    if not index.is_file():
        reason = f"the site is not built ({index.relative_to(REPO)} is missing: README.md, 'The documentation site')"
        if os.environ.get("WFLSIM_NO_SKIP") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return crawl(index, browser, also=SPECIAL_PAGES)


@pytest.mark.slow  # every page of the site in a browser
def test_the_site_has_no_broken_link_image_or_console_error(site_pages):
    """Every page reachable from the site's index loads without a console or page error, its
    images load, and its internal links reach a file of the site and an anchor that exists."""
    assert len(site_pages) > 1
    found = problems(site_pages, SITE)
    assert not found, "\n".join(found)


@pytest.mark.slow  # every page of the site in a browser
def test_every_docs_page_is_reachable_in_the_site(site_pages):
    """Every Markdown page of docs/ (its folders too) is a page of the site reached by links from
    its index."""
    reached = {p.relative_to(SITE.resolve()).with_suffix("").as_posix() for p in site_pages}
    docs = REPO / "docs"
    expected = {p.relative_to(docs).with_suffix("").as_posix() for p in doc_pages()}
    assert not expected - reached, sorted(expected - reached)


@pytest.mark.slow  # every page of the site in a browser
def test_every_notebook_page_shows_its_figures(site_pages):
    """Every notebook of examples/ has a page in the site with its cells and at least one figure
    among their outputs (the build executes the notebooks)."""
    notebooks = sorted((REPO / "examples").glob("*.ipynb"))
    assert notebooks
    missing = notebook_pages_without_figures(site_pages, notebooks)
    assert not missing, missing
