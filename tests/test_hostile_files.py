"""Hostile files where a user names a file: a FIFO, a device (``/dev/zero``), a folder, or a file
beyond its cap. Every reader refuses them with one line naming the field, before reading a byte
of a non-regular file (a FIFO never blocks, a device is never read into memory)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import REPO
from wflsim.app.cli import main
from wflsim.sim.errors import ScenarioError
from wflsim.sim.files import read_capped


def _fifo(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


def _zero(tmp_path: Path, name: str) -> Path:
    """A link named ``name`` to ``/dev/zero`` (a device that never ends)."""
    path = tmp_path / name
    path.symlink_to("/dev/zero")
    return path


def _folder(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


HOSTILE = {"fifo": _fifo, "dev_zero": _zero, "folder": _folder}


def _sites(path: Path) -> object:
    from wflsim.sim.radio.cells.config import read_sites_file

    return read_sites_file(path)


def _scenario(path: Path) -> object:
    from wflsim.sim.config.loading import read_scenario_file

    return read_scenario_file(path)


def _fedscale(path: Path) -> object:
    from wflsim.sim.world.availability_formats import read_fedscale_json

    return read_fedscale_json(path)


def _mobility(path: Path) -> object:
    from wflsim.sim.world.mobility.trace import read_trace

    return read_trace(path)


def _channel(path: Path) -> object:
    from wflsim.sim.world.channel.replay import read_channel_table

    return read_channel_table(path, num_devices=1, frames=1, slots_per_frame=1)


def _checkpoint(path: Path) -> object:
    from wflsim.sim.state import load

    return load(path)


def _cifar(path: Path) -> object:
    from wflsim.models.data import read_cifar_batch

    return read_cifar_batch(path)


#: Each reader of a file a user names: (reader, the file's name, the error's type).
READERS: dict[str, tuple[Callable[[Path], object], str, type[Exception]]] = {
    "sites_file": (_sites, "sites.csv", ScenarioError),
    "scenario": (_scenario, "s.toml", ScenarioError),
    "availability": (_fedscale, "trace.json", ScenarioError),
    "mobility": (_mobility, "trace.csv", ScenarioError),
    "channel_replay": (_channel, "table.parquet", ScenarioError),
    "checkpoint": (_checkpoint, "checkpoint.npz", ValueError),
    "cifar_batch": (_cifar, "data_batch_1", ValueError),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_non_regular_file_is_refused_by_every_reader(tmp_path, reader, kind):
    """A FIFO, /dev/zero or a folder where a reader expects a file: one error, nothing read."""
    read, name, error = READERS[reader]
    if kind == "folder" and reader == "channel_replay":
        pytest.skip("a folder of parts is what channel.replay may name")
    path = HOSTILE[kind](tmp_path, name)
    with pytest.raises(error) as err:
        read(path)
    text = str(err.value)
    assert "\n" not in text
    assert "not a regular file" in text or "not a file" in text, text


def test_a_sites_file_on_dev_zero_is_one_line_exit_2(tmp_path, capsys):
    """[cells] sites_file = "/dev/zero": one line naming cells.sites_file, exit 2."""
    scenario = tmp_path / "s.toml"
    text = (REPO / "scenarios" / "cells" / "mnist.toml").read_text(encoding="utf-8")
    scenario.write_text(text + '\n[cells]\nsites_file = "/dev/zero"\n', encoding="utf-8")
    code = main(["validate", str(scenario)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "cells.sites_file" in err and "not a regular file" in err


def test_a_file_beyond_the_cap_is_refused_after_reading_one_byte_more(tmp_path):
    """read_capped refuses a file of cap + 1 bytes and returns one of cap bytes whole."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 11)
    with pytest.raises(ScenarioError, match="larger than 10 bytes") as err:
        read_capped(path, "some.field", 10)
    assert err.value.field == "some.field"
    path.write_bytes(b"x" * 10)
    assert read_capped(path, "some.field", 10) == b"x" * 10


def test_a_link_is_refused_where_links_are_not_followed(tmp_path):
    """A link to a regular file is refused by a reader that does not follow links."""
    (tmp_path / "real.json").write_text("{}", encoding="utf-8")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    with pytest.raises(ScenarioError, match="not a regular file"):
        read_capped(tmp_path / "link.json", "manifest", 100, follow_links=False)


def test_a_fifo_in_place_of_sweep_json_is_refused(tmp_path):
    """load_sweep of a folder whose sweep.json is a FIFO: one error naming it, no hang."""
    from wflsim.api import load_sweep

    os.mkfifo(tmp_path / "sweep.json")
    with pytest.raises(ScenarioError, match="sweep.json"):
        load_sweep(tmp_path)


def test_a_fifo_in_place_of_a_manifest_reads_as_no_manifest(tmp_path):
    """The run tables' manifest reader takes a FIFO manifest.json for none, without blocking."""
    from wflsim.sim.rundir import read_json

    os.mkfifo(tmp_path / "manifest.json")
    assert read_json(tmp_path / "manifest.json") is None


def test_an_oversized_manifest_reads_as_unreadable(tmp_path, monkeypatch):
    """A manifest.json beyond the manifest cap reads as unreadable (None), not into memory."""
    from wflsim.sim import rundir

    monkeypatch.setattr(rundir, "MAX_MANIFEST_BYTES", 64)
    (tmp_path / "manifest.json").write_text(json.dumps({"x": "y" * 100}), encoding="utf-8")
    assert rundir.read_json(tmp_path / "manifest.json") is None
