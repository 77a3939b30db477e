"""Every Sphinx cross reference in the package's docstrings names something that exists.

What is read: the docstrings of every module of ``wflsim`` (``pkgutil.walk_packages``, the
linked ``wflsim.sim``, ``wflsim.models`` and ``wflsim.analysis`` included), of the classes a
module defines (nested classes too), and of their functions, methods and properties. A reference
is a role ``:mod:``, ``:class:``, ``:func:``, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:`` or
``:obj:`` (``:py:`` prefix allowed) with its target in single backquotes; text in double
backquotes is plain code and is not read. The target is taken as Sphinx does: a leading ``~`` or
``.`` and trailing ``()`` are dropped, and ``title <target>`` reads ``target``.

How a target resolves:

* ``wflsim.a.b.C.m`` (absolute): the longest prefix that imports as a module, then ``getattr``
  along the rest.
* a name under an external library (``numpy.``, ``torch.``, ...; :data:`EXTERNAL`): the same,
  in that library.
* anything else is relative (``run``, ``Engine``, ``Engine.run``): a ``getattr`` chain from the
  docstring's module (its own and imported names), from the class that owns the docstring, or
  from any class of that module; or a builtin (``ValueError``, ``int``).

A name found on a class counts when it is a class attribute (``getattr``), an annotated field
(dataclasses, pydantic models: ``__annotations__`` along the MRO) or an instance attribute the
class assigns as ``self.name = ...`` in its source.

The modules of :data:`PENDING` (none today) are skipped.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import pkgutil
import re
import textwrap
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import wflsim
from conftest import docs_extension

#: Modules whose unresolved references are allowed for now (the whole module is skipped; none
#: today); a module listed here that no longer exists fails test_pending_names_existing_modules.
PENDING: set[str] = set()

#: Libraries whose names a reference may use absolutely (it must import).
EXTERNAL = ("numpy", "torch", "simpy", "pandas", "pyarrow", "scipy", "pydantic", "matplotlib")

ROLES = ("mod", "class", "func", "meth", "attr", "data", "exc", "obj")
#: A role with its target; group 1 the target as written.
REFERENCE = re.compile(r":(?:py:)?(?:" + "|".join(ROLES) + r"):`([^`]+)`")
#: Plain code in double backquotes (not read).
LITERAL = re.compile(r"``.+?``", flags=re.S)

#: docs/_ext/wflsim_names.py: the resolver the site's build uses too (without type-only imports)
NAMES = docs_extension("wflsim_names")


def _modules() -> list[ModuleType]:
    """Every module of the package, imported."""
    found = [wflsim]
    for info in pkgutil.walk_packages(wflsim.__path__, "wflsim."):
        found.append(importlib.import_module(info.name))
    return found


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """The functions, methods, properties and nested classes ``cls`` defines itself."""
    for name, value in vars(cls).items():
        if isinstance(value, staticmethod | classmethod):
            value = value.__func__
        elif isinstance(value, property):
            value = value.fget
        if inspect.isfunction(value) or inspect.isclass(value):
            yield name, value


def _docstrings(module: ModuleType) -> Iterator[tuple[str, type | None, str]]:
    """``(where, owning class, docstring)`` for the module and everything it defines."""
    if module.__doc__:
        yield module.__name__, None, module.__doc__

    def of_class(cls: type, where: str) -> Iterator[tuple[str, type | None, str]]:
        doc = vars(cls).get("__doc__")
        if isinstance(doc, str):
            yield where, cls, doc
        for name, value in _members(cls):
            if inspect.isclass(value):
                if value.__qualname__ == f"{cls.__qualname__}.{name}":
                    yield from of_class(value, f"{where}.{name}")
            elif value.__doc__:
                yield f"{where}.{name}", cls, value.__doc__

    for name, value in list(vars(module).items()):  # resolving a lazy name caches it here
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(value) and value.__name__ == name:
            yield from of_class(value, f"{module.__name__}.{name}")
        elif inspect.isfunction(value) and value.__doc__:
            yield f"{module.__name__}.{name}", None, value.__doc__


def references(doc: str) -> list[str]:
    """The targets of the cross references of ``doc``, as Sphinx reads them."""
    found = []
    for raw in REFERENCE.findall(LITERAL.sub("", doc)):
        target = raw.strip()
        titled = re.fullmatch(r".*<(.+)>", target, flags=re.S)
        if titled:
            target = titled.group(1).strip()
        found.append(target.lstrip("~.").removesuffix("()"))
    return found


def _absolute(target: str) -> bool:
    """``target`` imports: the longest module prefix, then attributes."""
    return NAMES.import_object(target) is not NAMES.MISSING


def resolves(target: str, module: ModuleType, owner: type | None) -> bool:
    """``target``, read in a docstring of ``module`` (of the class ``owner``), names something."""
    root = target.split(".")[0]
    if root == "wflsim" or root in EXTERNAL:
        return _absolute(target)
    parts = target.split(".")
    classes = [v for v in list(vars(module).values()) if inspect.isclass(v)]
    starts = [module, *([owner] if owner else []), *classes]
    if any(NAMES.getattr_chain(start, parts) is not NAMES.MISSING for start in starts):
        return True
    return len(parts) == 1 and hasattr(builtins, target)


def _failures() -> list[str]:
    """``"where: target"`` for every reference that does not resolve, outside PENDING."""
    failures = []
    for module in _modules():
        if module.__name__ in PENDING:
            continue
        for where, owner, doc in _docstrings(module):
            for target in references(doc):
                if not resolves(target, module, owner):
                    failures.append(f"{where}: {target}")
    return failures


def test_every_module_of_the_package_imports():
    """pkgutil finds the package's modules (sim, models, analysis, app) and each imports."""
    names = {m.__name__ for m in _modules()}
    assert {"wflsim.sim.slot", "wflsim.models.nets", "wflsim.analysis.tidy", "wflsim.app.cli"} <= (
        names
    )


def test_pending_names_existing_modules():
    """Every module of PENDING exists (a renamed module leaves no stale exemption)."""
    names = {m.__name__ for m in _modules()}
    assert PENDING <= names, PENDING - names


def test_references_are_read_as_sphinx_reads_them():
    """The reader drops ``~``, leading dots and ``()``, reads ``title <target>``, skips other roles."""
    doc = textwrap.dedent(
        """\
        :class:`~wflsim.sim.slot.SlotOutcome`, :meth:`.advance`, :func:`settle_slot()`,
        :py:attr:`the end <Availability.segment_end_s>`, :ref:`not-a-role`.
        """
    )
    expected = [
        "wflsim.sim.slot.SlotOutcome",
        "advance",
        "settle_slot",
        "Availability.segment_end_s",
    ]
    assert references(doc) == expected


def test_double_backquoted_code_is_not_read():
    """A role written inside double backquotes is plain code, not a reference."""
    assert references("``:mod:`sim.kernels` `` and ``x`` then :mod:`wflsim.sim`") == ["wflsim.sim"]


def test_absolute_names_resolve_by_import_then_getattr():
    """A ``wflsim.`` name resolves when its module imports and its attributes exist."""
    slot = importlib.import_module("wflsim.sim.slot")
    assert resolves("wflsim.sim.rng", slot, None)
    assert resolves("wflsim.sim.slot.SlotOutcome", slot, None)
    assert not resolves("wflsim.sim.slot.no_such_name", slot, None)


def test_names_of_the_old_top_level_packages_do_not_resolve():
    """``sim.slot``, ``models.nets`` and ``analysis.tidy`` (the pre-package names) fail."""
    slot = importlib.import_module("wflsim.sim.slot")
    for old in ("sim.slot", "models.nets", "analysis.tidy"):
        assert not resolves(old, slot, None), old


def test_external_library_names_resolve_when_they_import():
    """A name under an external library resolves only if it imports from that library."""
    slot = importlib.import_module("wflsim.sim.slot")
    assert resolves("numpy.random.Generator", slot, None)
    assert not resolves("numpy.no_such_name", slot, None)


def test_relative_names_resolve_in_the_module_and_its_classes():
    """``build_availability``, ``Availability.advance`` and a method of the owner resolve."""
    module = importlib.import_module("wflsim.sim.world.availability")
    assert resolves("build_availability", module, None)
    assert resolves("Availability.advance", module, None)
    assert resolves("advance", module, module.Availability)
    assert not resolves("no_such_name", module, module.Availability)


def test_fields_and_instance_attributes_resolve():
    """Annotated fields and ``self.name = ...`` attributes count as a class's attributes."""
    module = importlib.import_module("wflsim.sim.world.availability")
    assert resolves("Changes.time_s", module, None)
    assert resolves("Availability.segment_end_s", module, None)
    assert not resolves("Availability.no_such_attribute", module, None)


def test_builtin_names_resolve():
    """A bare builtin (``ValueError``, ``int``) resolves anywhere."""
    slot = importlib.import_module("wflsim.sim.slot")
    assert resolves("ValueError", slot, None)
    assert resolves("int", slot, None)


def test_every_docstring_reference_resolves():
    """Every cross reference of every docstring of the package names something that exists."""
    failures = _failures()
    assert not failures, f"{len(failures)} unresolved references:\n" + "\n".join(failures)
