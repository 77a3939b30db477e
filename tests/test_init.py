"""``wflsim init``: a study folder from the shipped template, that runs as written."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

import wflsim
from conftest import REPO
from test_notebooks import execute_notebook, figure_cells_without_image
from wflsim.app.cli import main

TEMPLATE = REPO / "wflsim" / "templates" / "study"
FILES = {"scenario.toml", "README.md", "analysis.ipynb"}


def _listing(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else b""
        for p in folder.rglob("*")
    }


def _readme_commands(study: Path) -> list[list[str]]:
    """The ``wflsim`` commands of the study's README (its bash block), comments cut."""
    readme = (study / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    return [shlex.split(line.split("#")[0]) for line in block.splitlines() if line.strip()]


def test_init_creates_the_template_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """`wflsim init NAME` writes scenario.toml, README.md and analysis.ipynb, named after NAME."""
    assert main(["init", str(tmp_path / "my-study")]) == 0
    study = tmp_path / "my-study"
    assert {p.name for p in study.iterdir()} == FILES
    assert tomllib.loads((study / "scenario.toml").read_text())["name"] == "my-study"
    assert (study / "README.md").read_text().startswith("# my-study\n")
    assert (study / "analysis.ipynb").read_bytes() == (TEMPLATE / "analysis.ipynb").read_bytes()
    assert "wflsim sweep scenario.toml" in capsys.readouterr().out


def test_init_fills_an_existing_empty_folder(tmp_path: Path):
    """An existing empty folder is filled without --force."""
    assert main(["init", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} == FILES


def test_init_refuses_a_non_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A non-empty folder is refused with one line (exit 2), nothing written."""
    (tmp_path / "notes.txt").write_text("mine")
    before = _listing(tmp_path)
    assert main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "NAME:" in err and "--force" in err
    assert _listing(tmp_path) == before


def test_init_force_writes_the_template_and_keeps_other_files(tmp_path: Path):
    """--force replaces the template's files in a non-empty folder and keeps the others."""
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "scenario.toml").write_text("old")
    assert main(["init", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert tomllib.loads((tmp_path / "scenario.toml").read_text())["name"] == tmp_path.name


@pytest.mark.parametrize(
    "name",
    ['quote"d', "line\nbreak", "x" * 101, "file.txt/study", "."],
    ids=["quote", "control", "long", "file-in-the-way", "dot"],
)
def test_init_refuses_a_bad_name(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """A name that cannot be a study folder is one line naming NAME (exit 2), nothing written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "a").write_text("a")
    if name == ".":
        monkeypatch.chdir(tmp_path / "keep")
    before = _listing(tmp_path)
    assert main(["init", name]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wflsim: error: NAME: ") and err.count("\n") == 1
    assert _listing(tmp_path) == before


def test_template_scenario_validates_as_written(tmp_path: Path):
    """The template's scenario passes `wflsim validate` as written (it names no file)."""
    assert main(["init", str(tmp_path / "s")]) == 0
    assert main(["validate", str(tmp_path / "s" / "scenario.toml"), "--strict"]) == 0


@pytest.mark.slow  # CI runs it (pytest -m slow); seconds of kernel or process start each
def test_template_study_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The README's sweep command runs in the new folder (one seed, one frame) and the
    notebook then executes against that sweep, drawing its figure and showing it as a PNG."""
    assert main(["init", str(tmp_path / "study")]) == 0
    study = tmp_path / "study"
    monkeypatch.chdir(study)
    commands = _readme_commands(study)
    assert [c[:2] for c in commands] == [["wflsim", "sweep"], ["wflsim", "report"]]
    tiny = ["--seeds", "0", "--set", "run.frames=1", "--workers", "1", "--quiet"]
    assert main([*commands[0][1:], *tiny]) == 0
    assert commands[1][2] == "runs/sweep" and (study / "runs" / "sweep" / "sweep.json").is_file()
    book = execute_notebook(study / "analysis.ipynb", study)
    assert (study / "accuracy_energy.png").stat().st_size > 0
    assert figure_cells_without_image(book) == []


def test_template_schemes_differ(tmp_path: Path):
    """In the template's setting the paper's scheme freezes and Only-PC does not: their energy
    and participation differ, and Ideal FL (which waits at up to 1 W) spends the most energy."""
    assert main(["init", str(tmp_path / "s")]) == 0
    scenario = tmp_path / "s" / "scenario.toml"
    schemes = tomllib.loads(scenario.read_text())["sweep"]["grid"]["scheme.name"]
    # The network side of the sweep alone (the controller never reads the learner's numbers):
    # the MLP's D = 9,610 parameters, frame 0 (no freezing) and frame 1 (the controller's).
    network = {"learning.enabled": False, "learning.num_params": 9610, "run.frames": 2}
    slots = {
        name: wflsim.run(scenario, overrides={**network, "scheme.name": name}, seed=0).slots
        for name in schemes
    }
    frame1 = {name: s[s["frame"] == 1] for name, s in slots.items()}
    assert frame1["two_timescale"]["mean_gamma"].mean() > 0.1
    assert (frame1["only_pc"]["mean_gamma"] == 0).all()
    assert (
        frame1["two_timescale"]["participation"].mean() > frame1["only_pc"]["participation"].mean()
    )
    energy_j = {name: s["mean_energy_j"].mean() for name, s in frame1.items()}
    assert abs(energy_j["two_timescale"] - energy_j["only_pc"]) > 0.1 * energy_j["only_pc"]
    assert energy_j["ideal"] > max(energy_j["two_timescale"], energy_j["only_pc"])


def test_template_states_claims_about_its_own_schemes(tmp_path: Path):
    """The template states [[claims]] (validated with the scenario), each comparing two of the
    schemes its sweep runs, so the first report opens with the study's own verdicts."""
    from wflsim.analysis.hypotheses import claims_from_text

    assert main(["init", str(tmp_path / "s")]) == 0
    text = (tmp_path / "s" / "scenario.toml").read_text()
    schemes = set(tomllib.loads(text)["sweep"]["grid"]["scheme.name"])
    stated = claims_from_text(text)
    assert len(stated) >= 2
    for c in stated:
        assert {c.a["scheme.name"], c.b["scheme.name"]} <= schemes
