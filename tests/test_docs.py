"""The documentation stays true to the code."""

from __future__ import annotations

import re
import typing

import pytest

from conftest import REPO, doc_pages
from wflsim.sim.config.schema import Scenario
from wflsim.sim.trace import markdown_doc


def test_trace_doc_is_generated_from_the_schema():
    """docs/trace.md is exactly what `python -m wflsim.sim.trace` prints."""
    assert (REPO / "docs" / "trace.md").read_text() == markdown_doc()


def test_trace_doc_documents_what_a_real_run_writes():
    """Every column and event name a real run writes has a row with a type and unit in
    docs/trace.md (read from the file, not from the generator)."""
    from conftest import base_scenario, run_in_memory

    doc = (REPO / "docs" / "trace.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_0-9]+)` \| (.+) \|$", doc, flags=re.M))
    table, _ = run_in_memory(base_scenario(scheme={"name": "two_timescale"}))
    for name in table.column_names:
        assert name in rows, name
        typ, unit, meaning = (c.strip() for c in rows[name].split(" | ", 2))
        assert typ and unit and meaning, name
    written = set(table.column("event").combine_chunks().dictionary.to_pylist())
    used = set(table.column("event").to_pandas().astype(str))
    assert used <= written
    for event in used:
        assert f"| `{event}` |" in doc, event


def test_scenario_doc_lists_every_field():
    """Every field of every scenario section is documented in docs/scenario.md."""
    doc = (REPO / "docs" / "scenario.md").read_text()
    documented = set(re.findall(r"^\| `([a-z_0-9]+)` \|", doc, flags=re.M))
    for name, info in Scenario.model_fields.items():
        annotation = info.annotation
        if typing.get_origin(annotation) is list:  # an array of tables ([[claims]])
            annotation = typing.get_args(annotation)[0]
        sub = getattr(annotation, "model_fields", None)
        if sub is None:  # a table that is one of several models (its members' fields)
            members = [m for m in _union_members(annotation) if hasattr(m, "model_fields")]
            sub = {f: None for m in members for f in m.model_fields}
        if not sub:
            assert name in documented, name
            continue
        for field in sub:
            assert field in documented, f"{name}.{field}"


def _union_members(annotation: object) -> list[object]:
    """The types of an ``Annotated[A | B, ...]`` or ``A | B`` annotation (itself otherwise)."""
    import typing

    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        return _union_members(args[0])
    if args and typing.get_origin(annotation) in (typing.Union, __import__("types").UnionType):
        return [m for a in args for m in _union_members(a)]
    return [annotation]


def test_scheme_doc_lists_every_scheme_and_parameter():
    """Every registered scheme and every scheme parameter appears in docs/scenario.md."""
    from wflsim.sim.registry import SCHEMES

    doc = (REPO / "docs" / "scenario.md").read_text()
    for name, cls in SCHEMES.items():
        assert f"`{name}`" in doc, name
        for field in cls.Params.model_fields:
            assert f"| `{field}` |" in doc, (name, field)


def test_readme_and_docs_commands_name_existing_scenarios():
    """Every scenarios/*.toml path mentioned in README.md and the pages of docs/ exists."""
    named = {
        path
        for doc in [REPO / "README.md", *doc_pages()]
        for path in re.findall(r"scenarios/[\w/]+\.toml", doc.read_text())
    }
    assert "scenarios/quickstart.toml" in named
    missing = sorted(path for path in named if not (REPO / path).is_file())
    assert not missing, missing


def test_channel_models_are_documented():
    """Every channel model and each of its parameters appears in docs/scenario.md."""
    from wflsim.sim.world.channel import config

    doc = (REPO / "docs" / "scenario.md").read_text()
    models = (
        config.LogDistanceConfig,
        config.UmaConfig,
        config.UmiConfig,
        config.RayleighConfig,
        config.RicianConfig,
        config.NakagamiConfig,
        config.NoFadingConfig,
        config.IidConfig,
        config.GaussMarkovConfig,
    )
    for cls in (*models, config.ShadowingConfig, config.CsiConfig):
        if "model" in cls.model_fields:
            assert f'"{cls.model_fields["model"].default}"' in doc, cls.__name__
        for field in cls.model_fields:
            if field != "model":
                assert f"| `{field}` |" in doc, (cls.__name__, field)


def test_channel_table_layout_is_documented():
    """docs/scenario.md's channel-table section is the layout sim.world.channel.record defines."""
    from wflsim.sim.world.channel.record import markdown_table

    doc = (REPO / "docs" / "scenario.md").read_text()
    assert markdown_table() in doc


def test_docs_name_existing_source_files():
    """Every source file path (sim/..., wflsim/app/..., tests/...) named in README.md, docs/ (its
    folders too) and benchmarks/README.md exists."""
    docs = [REPO / "README.md", REPO / "benchmarks" / "README.md", *doc_pages()]
    pattern = r"\b((?:sim|models|analysis|wflsim|tests|benchmarks)/[\w/]+\.py)\b"
    named = {path for doc in docs for path in re.findall(pattern, doc.read_text())}
    assert named
    missing = sorted(path for path in named if not (REPO / path).is_file())
    assert not missing, missing


def test_docs_name_no_path_outside_the_project():
    """README.md, docs/ (its folders too), benchmarks/README.md and scenarios/ name no path above the project
    (``../``) and no machine's shared folder: data comes from ``wflsim data fetch``."""
    files = [
        REPO / "README.md",
        REPO / "benchmarks" / "README.md",
        *doc_pages(),
        *(p for p in (REPO / "scenarios").rglob("*") if p.suffix in (".md", ".toml", ".sh", ".py")),
    ]
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"(?<![\w.])\.\./|shared/datasets|DESIGN\.md|/work/", line)
    ]
    assert not found, found


@pytest.mark.parametrize("doc", ["README.md", "docs/guide/usage.md"])
def test_readme_fetches_mnist_before_its_mnist_commands(doc):
    """The first command of README.md (and of the guide's "Using it") that reads MNIST is
    preceded by `wflsim data fetch mnist`."""
    text = (REPO / doc).read_text()
    assert text.index("wflsim data fetch mnist") < text.index("mnist_ideal.toml")


def test_readme_links_resolve():
    """Every relative Markdown link of README.md (its map of the site's pages) names a file of
    the repository (README.md is not a page of the site, whose build checks its own links)."""
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10
    missing = [link for link in local if not (REPO / link.split("#")[0]).is_file()]
    assert not missing, missing
