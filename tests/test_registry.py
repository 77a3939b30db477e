"""The registries: one generic Registry class, one registry per kind in sim.registry (and the
learner side's in models.registry), built-in entries apart from those registered from Python."""

from __future__ import annotations

import ast

import pytest

from conftest import REPO
from wflsim.sim.registry import REGISTRIES, Registry, UnknownNameError


def _fruit() -> Registry[int]:
    """A registry of kind "fruit" with the built-ins apple and pear."""
    return Registry("fruit", builtins=lambda: {"apple": 1, "pear": 2})


def test_a_taken_name_is_refused_naming_the_kind_and_the_fix():
    """Registering a name twice without replace is a ValueError naming the kind and replace=True."""
    reg = _fruit()
    reg.register("plum", 3)
    with pytest.raises(ValueError, match=r"fruit 'plum' is already registered; pass replace=True"):
        reg.register("plum", 4)
    assert reg["plum"] == 3


def test_replace_takes_the_new_entry_in_the_old_place():
    """replace=True swaps the entry and keeps the name's position."""
    reg = _fruit()
    reg.register("plum", 3)
    reg.register("fig", 5)
    reg.register("plum", 4, replace=True)
    assert reg.items() == (("apple", 1), ("pear", 2), ("plum", 4), ("fig", 5))


def test_an_unknown_name_lists_the_known_ones():
    """get() of an unknown name raises an error that is a KeyError and a ValueError and lists
    every known name."""
    reg = _fruit()
    reg.register("plum", 3)
    with pytest.raises(UnknownNameError) as err:
        reg.get("kiwi")
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    assert str(err.value) == "unknown fruit 'kiwi'; known: apple, pear, plum"


def test_a_built_in_cannot_be_unregistered_or_replaced():
    """unregister() and register(replace=True) of a built-in name raise ValueError; it stays."""
    reg = _fruit()
    with pytest.raises(ValueError, match="built-in fruit and cannot be unregistered"):
        reg.unregister("apple")
    with pytest.raises(ValueError, match="'apple' is a built-in fruit; choose another name"):
        reg.register("apple", 9, replace=True)
    assert reg["apple"] == 1


def test_unregister_forgets_a_registered_entry():
    """unregister() removes a registered entry and returns it; a second time is an error."""
    reg = _fruit()
    reg.register("plum", 3)
    assert reg.unregister("plum") == 3
    assert "plum" not in reg
    with pytest.raises(UnknownNameError):
        reg.unregister("plum")


def test_built_ins_come_first_and_apart_from_registered_names():
    """names() lists the built-ins, then registered names in order; user_names() only those."""
    reg = _fruit()
    reg.register("plum", 3)
    reg.register("fig", 5)
    assert reg.names() == ("apple", "pear", "plum", "fig") == tuple(reg)
    assert reg.builtin_names() == ("apple", "pear")
    assert reg.user_names() == ("plum", "fig")
    assert reg.is_builtin("apple") and not reg.is_builtin("plum")


def test_a_malformed_name_is_refused():
    """A name that is not 1 to 64 letters, digits or _.- starting with a letter is refused."""
    reg = _fruit()
    for bad in ("", "no spaces", "1st", "x" * 65, None):
        with pytest.raises(ValueError, match="a fruit name must be 1 to 64 letters"):
            reg.register(bad, 0)
    assert reg.user_names() == ()


def test_the_kind_check_refuses_bad_entries():
    """An entry the kind's check refuses is not registered."""

    def positive(name: str, entry: int) -> None:
        if entry <= 0:
            raise ValueError(f"{name} must be positive")

    reg = Registry("count", check=positive)
    with pytest.raises(ValueError, match="must be positive"):
        reg.register("none", 0)
    assert "none" not in reg and len(reg) == 0


def test_a_scheme_class_without_params_is_refused():
    """The scheme registry refuses a class whose Params is not a pydantic model."""
    from wflsim.sim.registry import SCHEMES
    from wflsim.sim.registry import register_scheme as register

    class NoParams:
        name = "no_params"

    with pytest.raises(ValueError, match="needs a pydantic model as its Params attribute"):
        register(NoParams)
    assert "no_params" not in SCHEMES


def test_built_in_schemes_take_the_way_in_of_registered_ones():
    """sim.schemes.BUILT_IN are the scheme registry's built-ins; a scheme registered with
    sim.registry.register_scheme is a registration from Python, which a sweep would ship."""
    from wflsim.app import extensions
    from wflsim.sim.registry import SCHEMES
    from wflsim.sim.registry import register_scheme as register
    from wflsim.sim.schemes import BUILT_IN
    from wflsim.sim.schemes.fixed_power import FixedPower

    assert SCHEMES.builtin_names() == tuple(cls.name for cls in BUILT_IN)

    class Peak(FixedPower):
        name = "peak_registered_in_sim"

    register(Peak)
    try:
        assert extensions.registered()["scheme"] == ["peak_registered_in_sim"]
        assert extensions.records() == [(("scheme", "peak_registered_in_sim"), ((Peak,), {}))]
    finally:
        extensions.unregister("scheme", "peak_registered_in_sim")
    assert "peak_registered_in_sim" not in SCHEMES


def test_every_kind_registered_from_python_has_one_registry():
    """sim.registry has one registry per kind that wflsim.register_* takes (and the servers), named by the kind; models.registry implements a subset of those kinds."""
    from wflsim.app.extensions import KINDS
    from wflsim.models.registry import REGISTRIES as LEARNER_SIDE

    assert tuple(k for k in REGISTRIES if k != "server") == KINDS
    assert all(reg.kind == kind for kind, reg in REGISTRIES.items())
    assert set(LEARNER_SIDE) <= set(REGISTRIES)
    assert all(reg.kind == kind for kind, reg in LEARNER_SIDE.items())


def test_the_old_tables_are_gone_and_every_registry_name_is_the_registry_modules():
    """No module keeps its own table of extensions: the tables that register_* and unregister
    kept in step are gone (the rules package's RULES too: models.registry.RULE_BUILDERS is the one),
    and the modules that list built-ins hold no registry."""
    from wflsim.app import extensions
    from wflsim.models import extensions as learner_extensions
    from wflsim.models.learner import rules
    from wflsim.sim import schemes, servers, strategies, updates
    from wflsim.sim.config import catalogue

    gone = {
        catalogue: ("USER_DATASETS", "USER_MODELS", "USER_PARTITIONS"),
        learner_extensions: ("_DATASETS", "_MODELS", "_PARTITIONS"),
        extensions: ("_RECORDS", "_BUILT_IN"),
        rules: ("RULES",),
        schemes: ("SCHEMES",),
        updates: ("UPDATE_RULES",),
        strategies: ("STRATEGIES",),
        servers: ("SERVERS",),
    }
    left = {m.__name__: [n for n in names if hasattr(m, n)] for m, names in gone.items()}
    assert left == {m.__name__: [] for m in gone}


def test_registries_are_made_only_in_the_two_registry_modules():
    """No module of sim or models but sim/registry.py and models/registry.py makes a Registry."""
    found = set()
    for path in [*(REPO / "sim").rglob("*.py"), *(REPO / "models").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and "Registry" in (
                getattr(node.func, "id", None),
                getattr(getattr(node.func, "value", None), "id", None),
            ):
                found.add(path.relative_to(REPO).as_posix())
    assert found == {"sim/registry.py", "models/registry.py"}
