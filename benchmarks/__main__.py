"""``python -m benchmarks``: list the benchmarks; ``python -m benchmarks NAME [ARGS...]``: run one.

A benchmark is a script ``benchmarks/NAME.py`` (names starting with ``_`` are helpers); it runs
here as ``python benchmarks/NAME.py ARGS...`` would, so ``NAME --help`` prints its own options.
An unknown name is refused with the list (exit code 2).
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
sys.path.insert(0, str(FOLDER))
import _common  # noqa: E402

USAGE = "usage: python -m benchmarks [NAME [ARGS...]]  (NAME --help: its options)"


def catalogue() -> dict[str, str]:
    """Every benchmark's name and the first sentence of its docstring, read without importing it."""
    out: dict[str, str] = {}
    for path in sorted(FOLDER.glob("*.py")):
        if not path.name.startswith("_"):
            out[path.stem] = _common.summary(ast.get_docstring(ast.parse(path.read_text())))
    return out


def listing() -> str:
    """The benchmarks, one a line: name and description."""
    names = catalogue()
    width = max(map(len, names))
    return "\n".join(f"  {name:{width}s}  {text}" for name, text in names.items())


def main(argv: list[str]) -> int:
    """List (no argument, ``-h``, ``--help``, ``list``) or run ``argv[0]`` with ``argv[1:]``."""
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(f"{USAGE}\n\nbenchmarks:\n{listing()}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in catalogue():
        known = ", ".join(catalogue())
        print(f"benchmarks: unknown benchmark {name!r}; choose one of: {known}", file=sys.stderr)
        return 2
    path = FOLDER / f"{name}.py"
    sys.argv = [str(path), *rest]
    runpy.run_path(str(path), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
