"""``wflsim data fetch`` and ``--download``, offline: torchvision's mirror lists point at a local
HTTP server that serves small files written by the test (never the real mirrors)."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO
from wflsim.app.cli import main
from wflsim.sim.config.catalogue import DATASET_FILES
from wflsim.sim.config.resolve import check_data_dir
from wflsim.sim.errors import ScenarioError

torchvision = pytest.importorskip("torchvision")

TRAIN, TEST = 40, 20


def _idx_images(n: int, seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    return struct.pack(">IIII", 0x803, n, 28, 28) + pixels.tobytes()


def _idx_labels(n: int) -> bytes:
    return struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n))


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _mnist_files() -> dict[str, bytes]:
    """A tiny MNIST in the IDX format, gzipped as the mirrors serve it."""
    raw = {
        "train-images-idx3-ubyte": _idx_images(TRAIN, 0),
        "train-labels-idx1-ubyte": _idx_labels(TRAIN),
        "t10k-images-idx3-ubyte": _idx_images(TEST, 1),
        "t10k-labels-idx1-ubyte": _idx_labels(TEST),
    }
    return {f"{k}.gz": gzip.compress(v, mtime=0) for k, v in raw.items()}


def _cifar_archive() -> bytes:
    """A tar.gz shaped like CIFAR-10's (its files' contents are not read by the fetch)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for f in DATASET_FILES["cifar10"]:
            data = f.encode()
            info = tarfile.TarInfo(f)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class _Server:
    """A local HTTP server over a folder, counting the requests it answers."""

    def __init__(self, root: Path) -> None:
        self.requests: list[str] = []
        seen = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self):
                seen.append(self.path)
                super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _dead_url() -> str:
    """A local address where nothing listens (a server that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Every mirror of every dataset points at a dead local address unless a test serves it."""
    dead = _dead_url()
    for cls in (torchvision.datasets.MNIST, torchvision.datasets.FashionMNIST):
        monkeypatch.setattr(cls, "mirrors", [dead])
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "url", f"{dead}cifar-10-python.tar.gz")


@pytest.fixture
def server(tmp_path) -> Iterator[tuple[_Server, Path]]:
    """A running local server and the folder it serves."""
    root = tmp_path / "served"
    root.mkdir()
    srv = _Server(root)
    yield srv, root
    srv.close()


def _serve_mnist(monkeypatch, srv: _Server, root: Path, md5s: dict[str, str] | None = None):
    files = _mnist_files()
    for name, data in files.items():
        (root / name).write_bytes(data)
    md5s = md5s or {name: _md5(data) for name, data in files.items()}
    monkeypatch.setattr(torchvision.datasets.MNIST, "mirrors", [srv.url])
    monkeypatch.setattr(torchvision.datasets.MNIST, "resources", list(md5s.items()))


def _error(err: str) -> str:
    """The one error line of a command's stderr (above it: the progress of the download)."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and lines[0].startswith("wflsim: error: ")
    return lines[0]


def _fetch(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(["data", "fetch", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_fetch_writes_torchvision_layout_that_wflsim_reads(tmp_path, monkeypatch, server, capsys):
    """A fetch from the mirror writes MNIST/raw/ in torchvision's layout, which check_data_dir and
    the loader accept, and leaves no temporary folder."""
    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    data = tmp_path / "data"
    code, out, err = _fetch(["mnist", "--dir", str(data)], capsys)
    assert code == 0 and "MNIST" in out, err
    check_data_dir("mnist", data)
    assert sorted(p.name for p in data.iterdir()) == ["MNIST"]
    from wflsim.models.data import load_dataset

    x_tr, y_tr, x_te, _ = load_dataset("mnist", data)
    assert tuple(x_tr.shape) == (TRAIN, 1, 28, 28) and len(y_tr) == TRAIN and len(x_te) == TEST


def test_fetch_default_dir_is_wflsim_data_dir(tmp_path, monkeypatch, server, capsys):
    """Without --dir the data goes to $WFLSIM_DATA_DIR, where runs look."""
    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    monkeypatch.setenv("WFLSIM_DATA_DIR", str(tmp_path / "env-data"))
    assert _fetch(["mnist"], capsys)[0] == 0
    check_data_dir("mnist", tmp_path / "env-data")


def test_fetch_default_dir_is_dot_data(tmp_path, monkeypatch, server, capsys):
    """Without --dir and $WFLSIM_DATA_DIR the data goes to ./data."""
    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    monkeypatch.delenv("WFLSIM_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert _fetch(["mnist"], capsys)[0] == 0
    check_data_dir("mnist", tmp_path / "data")


def test_corrupt_download_is_refused_and_leaves_nothing(tmp_path, monkeypatch, server, capsys):
    """A file whose MD5 differs from the listed one is refused: exit 2, one line, no dataset
    and no temporary folder left (not even the data folder it created)."""
    srv, root = server
    md5s = {name: _md5(data) for name, data in _mnist_files().items()}
    md5s["t10k-images-idx3-ubyte.gz"] = "0" * 32  # the last file served does not match
    _serve_mnist(monkeypatch, srv, root, md5s)
    data = tmp_path / "data"
    code, _, err = _fetch(["mnist", "--dir", str(data)], capsys)
    line = _error(err)
    assert code == 2
    assert "mnist" in line and "MD5" in line and "t10k-images-idx3-ubyte.gz" in line
    assert not data.exists()


def test_corrupt_download_keeps_an_existing_folder_untouched(tmp_path, monkeypatch, server, capsys):
    """A refused download into an existing data folder leaves that folder as it was."""
    srv, root = server
    md5s = {name: "f" * 32 for name in _mnist_files()}
    _serve_mnist(monkeypatch, srv, root, md5s)
    data = tmp_path / "data"
    data.mkdir()
    (data / "keep.txt").write_text("x")
    assert _fetch(["mnist", "--dir", str(data)], capsys)[0] == 2
    assert sorted(p.name for p in data.iterdir()) == ["keep.txt"]


def test_server_down_is_one_line_exit_2(tmp_path, capsys):
    """No server at the mirror: exit 2, one line naming the dataset, the URL and the fix."""
    data = tmp_path / "data"
    code, _, err = _fetch(["fashion_mnist", "--dir", str(data)], capsys)
    dead = torchvision.datasets.FashionMNIST.mirrors[0]
    assert code == 2
    line = _error(err)
    assert "fashion_mnist" in line and f"{dead}train-images-idx3-ubyte.gz" in line
    assert "copy the files into" in line and "FashionMNIST/raw" in line
    assert not data.exists()


def test_missing_file_on_the_server_is_one_line_exit_2(tmp_path, monkeypatch, server, capsys):
    """A mirror that answers 404: exit 2, one line naming the URL."""
    srv, _ = server
    monkeypatch.setattr(torchvision.datasets.MNIST, "mirrors", [srv.url])
    code, _, err = _fetch(["mnist", "--dir", str(tmp_path / "data")], capsys)
    assert code == 2 and f"{srv.url}train-images-idx3-ubyte.gz" in _error(err)


def test_already_present_downloads_nothing(tmp_path, monkeypatch, server, capsys):
    """A complete dataset in the folder: the command says so and makes no request."""
    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    data = tmp_path / "data"
    for f in DATASET_FILES["mnist"]:
        (data / f).parent.mkdir(parents=True, exist_ok=True)
        (data / f).write_bytes(b"kept")
    code, out, _ = _fetch(["mnist", "--dir", str(data)], capsys)
    assert code == 0 and "already" in out and "nothing downloaded" in out
    assert srv.requests == []
    assert all((data / f).read_bytes() == b"kept" for f in DATASET_FILES["mnist"])


def test_incomplete_dataset_is_completed(tmp_path, monkeypatch, server, capsys):
    """A folder holding only some of the files: the fetch writes the full set."""
    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    data = tmp_path / "data"
    first = data / DATASET_FILES["mnist"][0]
    first.parent.mkdir(parents=True)
    first.write_bytes(b"partial")
    assert _fetch(["mnist", "--dir", str(data)], capsys)[0] == 0
    check_data_dir("mnist", data)
    assert first.read_bytes() != b"partial"


def test_cifar10_archive_is_unpacked_into_its_layout(tmp_path, monkeypatch, server, capsys):
    """CIFAR-10's one archive is checked and unpacked into cifar-10-batches-py/."""
    srv, root = server
    archive = _cifar_archive()
    (root / "cifar-10-python.tar.gz").write_bytes(archive)
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "url", f"{srv.url}cifar-10-python.tar.gz")
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "tgz_md5", _md5(archive))
    data = tmp_path / "data"
    assert _fetch(["cifar10", "--dir", str(data)], capsys)[0] == 0
    check_data_dir("cifar10", data)
    assert sorted(p.name for p in data.iterdir()) == ["cifar-10-batches-py"]


def test_bad_dir_is_one_line_exit_2(tmp_path, capsys):
    """A --dir below a file: exit 2 naming --dir, nothing downloaded."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = _fetch(["mnist", "--dir", str(blocker / "data")], capsys)
    assert code == 2 and _error(err).startswith("wflsim: error: --dir")


def test_missing_dataset_error_names_the_fetch_command(tmp_path):
    """The "dataset not found" error names wflsim data fetch and --download."""
    with pytest.raises(ScenarioError) as err:
        check_data_dir("mnist", tmp_path)
    assert "wflsim data fetch mnist" in err.value.one_line() and "--download" in str(err.value)


def _mnist_scenario(tmp_path: Path, data: Path) -> Path:
    path = tmp_path / "mnist.toml"
    path.write_text(
        'name = "tiny"\nseed = 1\n'
        "[run]\nframes = 1\nslots_per_frame = 2\ndeadline_s = 0.8\n"
        "[network]\nnum_devices = 2\n"
        "[devices]\nbatch_size = 4\n"
        f'[learning]\ndataset = "mnist"\nmodel = "mlp"\ndata_dir = "{data.as_posix()}"\n'
        "eval_every_slots = 2\n"
        '[scheme]\nname = "ideal"\n'
    )
    return path


def test_run_download_fetches_a_missing_dataset(tmp_path, monkeypatch, server, capsys):
    """wflsim run --download fetches the scenario's missing MNIST into its data folder and runs."""
    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    data = tmp_path / "data"
    scenario = _mnist_scenario(tmp_path, data)
    out = tmp_path / "run"
    code = main(["run", str(scenario), "--download", "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    check_data_dir("mnist", data)
    assert (out / "manifest.json").is_file()


def test_run_without_download_refuses_the_missing_dataset(tmp_path, server, capsys):
    """Without --download a missing dataset is refused and nothing is fetched or written."""
    srv, _ = server
    data = tmp_path / "data"
    out = tmp_path / "run"
    code = main(["run", str(_mnist_scenario(tmp_path, data)), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "wflsim data fetch mnist" in err
    assert not data.exists() and not out.exists() and srv.requests == []


def test_validate_download_fetches_a_missing_dataset(tmp_path, monkeypatch, server, capsys):
    """wflsim validate --download fetches the missing dataset, then validates."""
    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    data = tmp_path / "data"
    code = main(["validate", str(_mnist_scenario(tmp_path, data)), "--download"])
    assert code == 0, capsys.readouterr().err
    check_data_dir("mnist", data)


def test_download_of_a_bad_scenario_fetches_nothing(tmp_path, server, capsys):
    """A scenario refused for another field downloads nothing, even with --download."""
    srv, _ = server
    data = tmp_path / "data"
    scenario = _mnist_scenario(tmp_path, data)
    code = main(["validate", str(scenario), "--download", "--set", "network.bandwidth_hz=-5"])
    assert code == 2 and "network.bandwidth_hz" in capsys.readouterr().err
    assert srv.requests == [] and not data.exists()


def test_sweep_download_fetches_a_missing_dataset_once(tmp_path, monkeypatch, server, capsys):
    """wflsim sweep --download over two points that read MNIST fetches it once, then runs both."""
    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    data = tmp_path / "data"
    out = tmp_path / "sweep"
    scenario = _mnist_scenario(tmp_path, data)
    code = main(
        ["sweep", str(scenario), "--seeds", "0-1", "--download", "--out", str(out), "--quiet"]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert err.count("wflsim: downloading mnist") == 1
    assert set(srv.requests) == {f"/{name}" for name in _mnist_files()}
    points = json.loads((out / "sweep.json").read_text())["points"]
    assert len(points) == 2 and all(p["status"] == "completed" for p in points.values())


def test_sweep_download_offline_fails_and_writes_no_sweep_folder(tmp_path, capsys):
    """Offline, wflsim sweep --download exits 2 with one line and writes no sweep folder."""
    data = tmp_path / "data"
    out = tmp_path / "sweep"
    scenario = _mnist_scenario(tmp_path, data)
    code = main(
        ["sweep", str(scenario), "--seeds", "0-1", "--download", "--out", str(out), "--quiet"]
    )
    line = _error(capsys.readouterr().err)
    assert code == 2 and "mnist" in line and "copy the files into" in line
    assert not out.exists() and not data.exists()


def test_api_run_download_fetches_a_missing_dataset(tmp_path, monkeypatch, server):
    """wflsim.run(..., download=True) fetches the missing dataset before the run."""
    import wflsim

    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    data = tmp_path / "data"
    result = wflsim.run(_mnist_scenario(tmp_path, data), download=True, progress=False)
    assert len(result.events) and (data / DATASET_FILES["mnist"][0]).is_file()


def _run_then_lose_the_data(tmp_path, monkeypatch, server, capsys) -> tuple[Path, Path]:
    """A completed run of the MNIST scenario (fetched with --download), whose data folder is
    then removed: (run folder, data folder)."""
    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    data = tmp_path / "data"
    out = tmp_path / "run"
    code = main(
        ["run", str(_mnist_scenario(tmp_path, data)), "--download", "--out", str(out), "--quiet"]
    )
    assert code == 0, capsys.readouterr().err
    shutil.rmtree(data)
    return out, data


def test_resume_download_fetches_the_runs_missing_dataset(tmp_path, monkeypatch, server, capsys):
    """wflsim run --resume DIR --download fetches the run's dataset into the folder its
    manifest names, where plain --resume refuses it (exit 2, naming the fetch command)."""
    out, data = _run_then_lose_the_data(tmp_path, monkeypatch, server, capsys)
    assert main(["run", "--resume", str(out), "--quiet"]) == 2
    assert "wflsim data fetch mnist" in capsys.readouterr().err
    assert main(["run", "--resume", str(out), "--download", "--quiet"]) == 0
    check_data_dir("mnist", data)


def test_api_resume_download_fetches_the_runs_missing_dataset(
    tmp_path, monkeypatch, server, capsys
):
    """wflsim.resume(DIR, download=True) fetches the run's missing dataset first."""
    import wflsim

    out, data = _run_then_lose_the_data(tmp_path, monkeypatch, server, capsys)
    result = wflsim.resume(out, download=True, progress=False)
    assert result.status == "completed"
    check_data_dir("mnist", data)


def test_the_module_imports_no_torch_until_a_download():
    """Importing the fetch module (as the CLI does) loads no torch or torchvision."""
    import subprocess
    import sys

    code = (
        "import sys, wflsim.app.fetch, wflsim.app.cli; "
        "sys.exit(any(m.split('.')[0] in ('torch', 'torchvision') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


# ---------------------------------------------------------------- hostile servers


class _Hostile:
    """A local HTTP server whose every answer misbehaves as ``behaviour`` says: ``endless`` (a
    body without Content-Length that never ends), ``announced`` (a Content-Length of 2 GB),
    ``stall`` (headers, then silence), ``drip`` (a byte at a time, slowly). ``asked`` is set
    when a request arrives; ``stop`` ends every answer."""

    def __init__(self, behaviour: str) -> None:
        self.asked = threading.Event()
        self.stop = threading.Event()
        asked, stop = self.asked, self.stop

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self):
                self.send_response(200)
                if behaviour == "announced":
                    self.send_header("Content-Length", str(2 * 1024**3))
                self.end_headers()
                self.wfile.flush()
                asked.set()
                block = b"\0" * 65536 if behaviour == "endless" else b"\0"
                try:
                    while not stop.is_set():
                        if behaviour == "stall":
                            stop.wait(0.05)
                            continue
                        self.wfile.write(block)
                        if behaviour in ("drip", "announced"):
                            stop.wait(0.02)
                except OSError:  # the client went away
                    pass

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def hostile(monkeypatch):
    """Make a hostile server (:class:`_Hostile`) MNIST's only mirror; small limits for fast
    tests (a file of unknown size: 1 MiB; a read: 0.5 s; the rate: 10 kB/s after 0.2 s)."""
    from wflsim.app import fetch

    limits = {"MAX_DOWNLOAD_BYTES": 1024**2, "READ_TIMEOUT_S": 0.5, "GRACE_S": 0.2}
    for name, value in {**limits, "MIN_RATE_BYTES_S": 10_000}.items():
        monkeypatch.setattr(fetch, name, value, raising=False)
    made: list[_Hostile] = []

    def serve(behaviour: str) -> _Hostile:
        srv = _Hostile(behaviour)
        made.append(srv)
        monkeypatch.setattr(torchvision.datasets.MNIST, "mirrors", [srv.url])
        # a file of unknown size: MAX_DOWNLOAD_BYTES bounds it
        monkeypatch.setattr(torchvision.datasets.MNIST, "resources", [("a.gz", "0" * 32)])
        return srv

    yield serve
    for srv in made:
        srv.close()


@pytest.mark.parametrize(
    ("behaviour", "said"),
    [
        ("endless", "more than the file's 1,048,576 bytes"),
        ("announced", "announces 2,147,483,648 bytes"),
        ("stall", "no answer within 0.5 s"),
        ("drip", "too slow"),
    ],
)
def test_a_hostile_server_ends_the_fetch_with_one_line(tmp_path, hostile, capsys, behaviour, said):
    """An endless, oversized, stalled or dripping body: one line saying why, exit 2, nothing left."""
    hostile(behaviour)
    data = tmp_path / "data"
    code, _, err = _fetch(["mnist", "--dir", str(data)], capsys)
    line = _error(err)
    assert code == 2 and said in line, line
    assert not data.exists()


def test_a_body_beyond_the_known_size_is_cut_there(tmp_path, hostile, monkeypatch, capsys):
    """A file of known size (torchvision's MD5 of it) is refused one chunk past that size."""
    from wflsim.app import fetch

    hostile("endless")
    monkeypatch.setattr(torchvision.datasets.MNIST, "resources", [("x.gz", "a" * 32)])
    monkeypatch.setattr(fetch, "KNOWN_BYTES", {"a" * 32: 100_000}, raising=False)
    code, _, err = _fetch(["mnist", "--dir", str(tmp_path / "data")], capsys)
    assert code == 2 and "more than the file's 100,000 bytes" in _error(err)


def test_a_plain_http_mirror_is_not_used(tmp_path, monkeypatch, capsys):
    """A plain-http mirror off this machine is not contacted: the line names it and the option."""
    monkeypatch.setattr(torchvision.datasets.MNIST, "mirrors", ["http://192.0.2.1/"])
    code, _, err = _fetch(["mnist", "--dir", str(tmp_path / "data")], capsys)
    line = _error(err)
    assert code == 2 and "http://192.0.2.1/train-images-idx3-ubyte.gz (plain http" in line
    assert "--allow-http" in line


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_the_download_removes_its_folder(
    tmp_path, hostile, monkeypatch, capsys, signum
):
    """SIGTERM or SIGHUP while a file arrives: exit 130, one line, no temporary folder left."""
    from wflsim.app import fetch

    srv = hostile("stall")
    monkeypatch.setattr(fetch, "READ_TIMEOUT_S", 30.0, raising=False)  # the signal ends it
    data = tmp_path / "data"
    data.mkdir()

    def kill():
        srv.asked.wait(30)
        os.kill(os.getpid(), signum)

    threading.Thread(target=kill, daemon=True).start()
    code, _, err = _fetch(["mnist", "--dir", str(data)], capsys)
    assert code == 130 and "interrupted" in _error(err)
    assert list(data.iterdir()) == []


def test_a_folder_left_by_a_killed_fetch_is_removed_by_the_next(
    tmp_path, monkeypatch, server, capsys
):
    """The next fetch removes a .fetch-* folder whose owner is dead, and keeps a live one's."""
    from wflsim.sim.rundir import hostname

    srv, root = server
    _serve_mnist(monkeypatch, srv, root)
    data = tmp_path / "data"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for name, pid in (("dead", dead.pid), ("alive", os.getpid())):
        folder = data / f".fetch-mnist-{name}"
        folder.mkdir(parents=True)
        (folder / "owner.json").write_text(json.dumps({"pid": pid, "host": hostname()}))
    assert _fetch(["mnist", "--dir", str(data)], capsys)[0] == 0
    assert sorted(p.name for p in data.iterdir()) == [".fetch-mnist-alive", "MNIST"]
