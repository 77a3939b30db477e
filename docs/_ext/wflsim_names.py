"""What a dotted name in a docstring's cross-reference names, found without Sphinx.

One resolver for two readers: the site's extension (``wflsim_site.py``: a reference Sphinx did
not find becomes a link or code, or fails the build) and ``tests/test_docstring_refs.py`` (every
reference of the package's docstrings resolves). The extension also accepts a name that a
module imports for its type hints only (``type_imports=True``); the test does not.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from typing import Any

#: What the resolver returns for a name that names nothing.
MISSING: Any = object()


def declares(cls: type, name: str) -> bool:
    """``cls`` (or a base) annotates ``name`` or assigns ``self.name`` in its source."""
    for base in cls.__mro__:
        if name in inspect.get_annotations(base):
            return True
        try:
            source = inspect.getsource(base)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{re.escape(name)}\b\s*(?::[^=\n]+)?=", source):
            return True
    return False


def getattr_chain(start: Any, parts: list[str], *, type_imports: bool = False) -> Any:
    """``start.parts[0].parts[1]...``, or :data:`MISSING`. A class's annotated field or
    ``self.name`` attribute resolves to ``None`` (nothing goes further); with
    ``type_imports``, so does a name a module imports under ``if TYPE_CHECKING:`` (to the object
    it imports)."""
    obj = start
    for part in parts:
        value = getattr(obj, part, MISSING)
        if value is MISSING and inspect.isclass(obj) and declares(obj, part):
            value = None
        if value is MISSING and type_imports and inspect.ismodule(obj):
            value = imported_for_types(obj, part)
        if value is MISSING:
            return MISSING
        obj = value
    return obj


def imported_for_types(module: Any, name: str) -> Any:
    """``name`` as ``module`` imports it in its source (for its annotations only, under
    ``if TYPE_CHECKING:``), or :data:`MISSING`."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return MISSING
    pattern = rf"^\s*from ([\w.]+) import (?:\([^)]*?|[^\n(]*?)\b{re.escape(name)}\b"
    for found in re.finditer(pattern, source, flags=re.M):
        home = importlib.util.resolve_name(found.group(1), module.__package__)
        obj = import_object(f"{home}.{name}", type_imports=True)
        if obj is not MISSING:
            return obj
    return MISSING


def import_object(name: str, *, type_imports: bool = False) -> Any:
    """The object ``name`` names (the longest prefix that imports as a module, then
    attributes), or :data:`MISSING`."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except (ImportError, ValueError, TypeError):
            continue
        return getattr_chain(module, parts[cut:], type_imports=type_imports)
    return MISSING
