"""``wflsim init NAME``: a new study folder from the template the package ships
(``wflsim/templates/study/``): a small scenario with its sweep's grid and seeds, a README with the
sweep and report commands, and an analysis notebook that reads the sweep.

Every check comes before anything is written; a new folder is filled under a hidden name next to
it and renamed into place, and each file of a forced init is written atomically, so bad input or
an interrupted init leaves no half study.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
from importlib import resources
from pathlib import Path

from wflsim.sim.config.limits import MAX_NAME_CHARS, out_path_problem, shorten
from wflsim.sim.errors import ScenarioError
from wflsim.sim.trace import write_atomic

#: The template's files, in the package (``wflsim/templates/study/``).
TEMPLATE_FILES = ("scenario.toml", "README.md", "analysis.ipynb")
#: The files whose ``{{name}}`` is the study's name.
_NAMED = ("scenario.toml", "README.md")
_PLACEHOLDER = "{{name}}"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``init`` command to the ``wflsim`` parser's subcommands."""
    p = sub.add_parser(
        "init",
        help="start a new study folder from a template (scenario, sweep command, notebook)",
        description="Create the folder NAME with scenario.toml, README.md (the sweep and report "
        "commands) and analysis.ipynb; an existing non-empty folder is refused unless --force.",
    )
    p.add_argument("name", metavar="NAME", help="the study folder to create")
    p.add_argument(
        "--force",
        action="store_true",
        help="write the template's files into an existing non-empty folder (replacing files of "
        "the same names, keeping the others)",
    )


def template_files(name: str) -> dict[str, bytes]:
    """The template's files by name, with ``name`` as the study's name."""
    folder = resources.files("wflsim") / "templates" / "study"
    files = {}
    for fname in TEMPLATE_FILES:
        data = (folder / fname).read_bytes()
        if fname in _NAMED:
            data = data.replace(_PLACEHOLDER.encode(), name.encode())
        files[fname] = data
    return files


def _check_name(text: str) -> str:
    """The study's name (the folder's last component), or a ``NAME`` error."""
    problem = out_path_problem(Path(text), room=64)
    if problem is not None:
        raise ScenarioError("NAME", f"{shorten(text)!r} {problem}", "choose another folder name")
    name = Path(text).name
    if name in ("", ".", ".."):
        raise ScenarioError(
            "NAME", f"{shorten(text)!r} names no new folder", "give a folder name, e.g. my-study"
        )
    if len(name) > MAX_NAME_CHARS:
        raise ScenarioError(
            "NAME",
            f"the folder name has {len(name)} characters; a scenario name may have at most "
            f"{MAX_NAME_CHARS}",
            "choose a shorter name",
        )
    bad = sorted({c for c in name if c in '"\\'})
    if bad:
        raise ScenarioError(
            "NAME",
            f"the folder name holds {' '.join(bad)}, which a scenario name cannot quote",
            "use letters, digits, '-' and '_'",
        )
    return name


def init_study(target: str | os.PathLike[str], force: bool = False) -> Path:
    """Create the study folder ``target`` from the template; returns its path.

    Raises:
        ScenarioError: a bad name, an existing non-empty folder without ``force``, a file in
            the way, or a link where a file would be written (nothing written).
    """
    text = os.fspath(target)
    name = _check_name(text)
    out = Path(text)
    files = template_files(name)
    if out.is_symlink() and not out.is_dir():
        raise ScenarioError("NAME", f"{shorten(text)!r} is a link to nothing", "choose another")
    if out.exists():
        if not out.is_dir():
            raise ScenarioError(
                "NAME", f"{shorten(text)!r} exists and is not a folder", "choose another name"
            )
        if any(out.iterdir()) and not force:
            raise ScenarioError(
                "NAME",
                f"{shorten(text)!r} already exists and is not empty",
                "choose another name, or --force to write the template's files into it",
            )
        for fname in files:
            path = out / fname
            if path.is_symlink() or (path.exists() and not path.is_file()):
                raise ScenarioError(
                    "NAME",
                    f"{shorten(str(path))!r} is a link or a folder",
                    "remove it or choose another name",
                )
        for fname, data in files.items():
            write_atomic(out / fname, data)
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".wflsim-init-{os.getpid()}"
    try:
        tmp.mkdir()
        for fname, data in files.items():
            (tmp / fname).write_bytes(data)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out


def init_command(args: argparse.Namespace) -> int:
    """``wflsim init``: create the study folder and say what to run next (the folder quoted for
    a POSIX shell, so that pasting the command runs nothing its name holds: ``x;touch y``)."""
    out = init_study(args.name, force=args.force)
    print(
        f"wflsim: study -> {out}: scenario.toml, README.md, analysis.ipynb; next: "
        f"cd {shlex.quote(str(out))} && wflsim sweep scenario.toml --out runs/sweep --workers 2"
    )
    return 0
