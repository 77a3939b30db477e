"""The built wheel: one import name, every module shipped and importable, nothing else installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from conftest import REPO

#: The project's source folders and the subpackage of ``wflsim`` each one installs as.
FOLDERS = {"sim": "wflsim/sim", "models": "wflsim/models", "analysis": "wflsim/analysis"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project built as a wheel (no dependencies, no build isolation: the test is offline),
    from a copy of its sources: setuptools' build/ folder in a checkout keeps modules that were
    since moved or deleted, and would ship them."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    # wflsim/sim etc. stay relative links; wflsim/scenarios is scenarios/ (its .toml files ship)
    for name in ("wflsim", "sim", "models", "analysis", "scenarios"):
        shutil.copytree(REPO / name, src / name, symlinks=True, ignore=skip)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(src)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (path,) = out.glob("wflsim-*.whl")
    return path


@pytest.fixture(scope="module")
def unpacked(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel's files, as pip would lay them out in site-packages."""
    out = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(out)
    return out


@pytest.fixture
def user_folder(tmp_path: Path) -> Path:
    """A user's working folder holding its own models.py and analysis/ package that must never be imported."""
    (tmp_path / "models.py").write_text("raise RuntimeError('the user models.py was imported')\n")
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "__init__.py").write_text(
        "raise RuntimeError('the user analysis/ was imported')\n"
    )
    return tmp_path


def _python(code: str, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with the unpacked wheel first on the path, from ``cwd``."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True
    )


def _wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def test_wheel_ships_every_source_file(wheel: Path):
    """Every .py file of sim/, models/, analysis/, wflsim/ and wflsim/app/ is in the wheel under wflsim/."""
    files = _wheel_files(wheel)
    root = REPO / "wflsim"
    own = [p for p in root.rglob("*.py") if p.relative_to(root).parts[0] not in FOLDERS]
    assert any(p.parent.name == "app" for p in own)
    expected = {p.relative_to(REPO).as_posix() for p in own} | {
        f"{FOLDERS[folder]}/{p.relative_to(REPO / folder).as_posix()}"
        for folder in FOLDERS
        for p in (REPO / folder).rglob("*.py")
    }
    missing = sorted(expected - files)
    assert not missing, missing


def test_wheel_installs_only_wflsim_and_its_type_marker(wheel: Path):
    """The wheel's only top-level package is wflsim, and it ships py.typed."""
    files = _wheel_files(wheel)
    top = {f.split("/")[0] for f in files if not f.split("/")[0].endswith(".dist-info")}
    assert top == {"wflsim"}
    assert "wflsim/py.typed" in files


def test_wheel_version_and_entry_point_come_from_the_package(wheel: Path):
    """The wheel's version is wflsim.__version__ and its command is wflsim.app.cli:main."""
    from wflsim import __version__

    with zipfile.ZipFile(wheel) as zf:
        info = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(info).decode())
        entry = zf.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert meta["Version"] == __version__
    assert "wflsim = wflsim.app.cli:main" in entry


def test_every_module_of_the_wheel_imports_from_a_user_folder(unpacked: Path, user_folder: Path):
    """Every module the wheel holds imports, from the wheel, in a folder with its own models.py and analysis/."""
    modules = sorted(
        ".".join(p.relative_to(unpacked).with_suffix("").parts).removesuffix(".__init__")
        for p in (unpacked / "wflsim").rglob("*.py")
        if p.name != "__main__.py"
    )
    code = (
        "import importlib, sys, wflsim\n"
        f"assert wflsim.__file__.startswith({str(unpacked)!r}), wflsim.__file__\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = [m for m in ('models', 'analysis', 'sim') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "print(len(sys.modules))\n"
    )
    res = _python(code, unpacked, user_folder)
    assert res.returncode == 0, res.stderr[-2000:]
    assert len(modules) > 60


@pytest.mark.parametrize("name", ["sim", "models", "analysis"])
def test_no_generic_top_level_name_is_installed(unpacked: Path, tmp_path: Path, name: str):
    """After install, `import sim`, `import models` and `import analysis` fail: only wflsim exists."""
    res = _python(f"import {name}", unpacked, tmp_path)
    assert res.returncode != 0 and "ModuleNotFoundError" in res.stderr


def test_api_runs_from_a_user_folder(unpacked: Path, user_folder: Path):
    """wflsim.run of a scenario table works from a folder with its own models.py and analysis/."""
    code = (
        "import wflsim\n"
        "r = wflsim.run({'name': 't', 'run': {'frames': 1, 'slots_per_frame': 2},"
        " 'network': {'num_devices': 3}, 'learning': {'enabled': False, 'num_params': 1000},"
        " 'scheme': {'name': 'fixed_power'}})\n"
        "assert len(r.events) > 0\n"
    )
    res = _python(code, unpacked, user_folder)
    assert res.returncode == 0, res.stderr[-2000:]


def test_wheel_ships_the_study_template_and_the_example_scenarios(wheel: Path):
    """The wheel holds the template of `wflsim init` and every scenarios/ file, but no script."""
    files = _wheel_files(wheel)
    template = {
        f"wflsim/templates/study/{n}" for n in ("scenario.toml", "README.md", "analysis.ipynb")
    }
    scenarios = {
        f"wflsim/scenarios/{p.relative_to(REPO / 'scenarios').as_posix()}"
        for p in (REPO / "scenarios").rglob("*.toml")
    }
    assert template <= files
    assert "wflsim/scenarios/quickstart.toml" in scenarios and not scenarios - files
    shipped = [f for f in files if f.startswith("wflsim/scenarios/")]
    assert all(f.endswith(".toml") for f in shipped), shipped


def test_init_works_from_the_wheel(unpacked: Path, user_folder: Path):
    """`wflsim init` from the wheel writes the study, whose scenario validates as a shipped one does."""
    code = (
        "import sys\n"
        "from wflsim.app.cli import main\n"
        "assert main(['init', 'study']) == 0\n"
        "from importlib.resources import files\n"
        "quickstart = files('wflsim') / 'scenarios' / 'quickstart.toml'\n"
        "assert main(['validate', str(quickstart)]) == 0\n"
        "import wflsim\n"
        "wflsim.prepare('study/scenario.toml')\n"
    )
    res = _python(code, unpacked, user_folder)
    assert res.returncode == 0, res.stderr[-2000:]
    assert sorted(p.name for p in (user_folder / "study").iterdir()) == [
        "README.md",
        "analysis.ipynb",
        "scenario.toml",
    ]
