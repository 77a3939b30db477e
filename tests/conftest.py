"""Shared fixtures: the data directory, small scenarios, and a helper that runs one in memory."""

from __future__ import annotations

import importlib.util
import os
import pickle
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[1]


def doc_pages() -> list[Path]:
    """Every Markdown page of ``docs/`` and its folders (``docs/guide/``, ...) that the project
    wrote, sorted: not what the site's build makes or brings in (folders starting with ``_``, the
    ``docs/`` entries of ``.gitignore``) and nothing behind a link (``docs/scenarios``)."""
    ignored = {
        line.strip().rstrip("/")
        for line in (REPO / ".gitignore").read_text().splitlines()
        if line.strip().startswith("docs/")
    }
    pages = []
    for folder, subfolders, files in os.walk(REPO / "docs"):  # links to folders not followed
        here = Path(folder)
        subfolders[:] = [
            name
            for name in subfolders
            if not name.startswith("_")
            and (here / name).relative_to(REPO).as_posix() not in ignored
        ]
        pages += [here / name for name in files if name.endswith(".md")]
    return sorted(p for p in pages if p.relative_to(REPO).as_posix() not in ignored)


def data_folders(env: str | None, cwd: Path, repo: Path = REPO) -> list[Path]:
    """The folders the tests look in for datasets, in order: ``$WFLSIM_DATA_DIR`` (``env``),
    ``./data`` (where ``wflsim data fetch`` puts them by default, ``cwd`` the current
    directory), then ``../shared/datasets`` beside the repository; each once."""
    found: list[Path] = []
    for folder in ([Path(env).expanduser()] if env else []) + [
        cwd / "data",
        repo.parent / "shared" / "datasets",
    ]:
        if folder not in found:
            found.append(folder)
    return found


def find_dataset(name: str, folders: list[Path]) -> Path | None:
    """The first of ``folders`` that holds dataset ``name``, or None."""
    from wflsim.app.fetch import is_complete

    return next((folder for folder in folders if is_complete(name, folder)), None)


DATA_FOLDERS = data_folders(os.environ.get("WFLSIM_DATA_DIR"), Path.cwd())
#: Where the tests looked, for a skipped test's reason.
LOOKED = ", ".join(str(folder) for folder in DATA_FOLDERS)
_MNIST = find_dataset("mnist", DATA_FOLDERS)
HAS_MNIST = _MNIST is not None
DATA_DIR = _MNIST or DATA_FOLDERS[0]
if HAS_MNIST:  # runs that name no data folder (golden traces, subprocesses) find it too
    os.environ["WFLSIM_DATA_DIR"] = str(DATA_DIR)


def dataset_folder_or_skip(name: str) -> Path:
    """The first data folder that holds dataset ``name``; skips the test, naming where it
    looked, when none does."""
    folder = find_dataset(name, DATA_FOLDERS)
    if folder is None:
        pytest.skip(
            f"{name} not found in {LOOKED} (set WFLSIM_DATA_DIR, or run "
            f"`wflsim data fetch {name}` here)"
        )
    return folder


@pytest.fixture
def data_dir() -> Path:
    """The MNIST folder; skips the test, naming where it looked, when it is absent."""
    return dataset_folder_or_skip("mnist")


def base_scenario(**sections: dict[str, Any]) -> dict[str, Any]:
    """A small network-only scenario table; keyword arguments update its sections."""
    data: dict[str, Any] = {
        "name": "test",
        "seed": 1,
        "run": {"frames": 2, "slots_per_frame": 5, "deadline_s": 0.8},
        "network": {"num_devices": 6, "cell_radius_m": 500.0},
        "mobility": {"model": "static"},
        "devices": {"batch_size": 128},
        "learning": {"enabled": False, "num_params": 100_000},
        "scheme": {"name": "fixed_power"},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


def network_only(**sections: dict[str, Any]) -> dict[str, Any]:
    """:func:`base_scenario` with the MNIST CNN's D, network only (FjORD needs the architecture)."""
    data = base_scenario(**sections)
    data["learning"] = {"enabled": False, "dataset": "mnist", "model": "cnn_mnist"}
    return data


#: 5 devices at the same distance, no fading, equal hardware: every device's upload takes the same
#: time; digits MLP, two_timescale (Proposition 1 lands every upload on the deadline).
LOCKSTEP: dict[str, Any] = {
    "name": "lockstep",
    "seed": 3,
    "run": {"frames": 3, "slots_per_frame": 4, "deadline_s": 0.1},
    "network": {"num_devices": 5, "cell_radius_m": 500.0},
    "channel": {"fading": "none"},
    "mobility": {
        "model": "static",
        "placement": "explicit",
        "positions_m": [[200.0, 0.0], [0.0, 200.0], [-200.0, 0.0], [0.0, -200.0], [120.0, 160.0]],
    },
    "devices": {
        "batch_size": 16,
        "cpu_hz": 2e9,
        "cycles_per_sample": 2e6,
        "energy_budget_j": 0.04,
    },
    "learning": {"dataset": "digits", "model": "mlp", "lr": 0.3, "eval_every_slots": 4},
    "scheme": {"name": "two_timescale", "V": 50.0},
}


def failing_at_frame(frame: int, exc: type[BaseException] = RuntimeError) -> Any:
    """Engine hooks (:class:`wflsim.Hooks`) that raise ``exc("injected")`` as frame ``frame``
    starts: a run that fails there, its earlier frames complete."""
    from wflsim import Hooks

    def frame_start(engine: Any, k: int) -> None:
        if k == frame:
            raise exc("injected")

    return Hooks(frame_start=frame_start)


def assert_same_but_strategy_rows(events: Any, plain: Any) -> None:
    """``events`` equal ``plain`` once their ``strategy`` rows are left out (a strategy other
    than fedavg writes them; fedavg none), and they have at least one such row."""
    import pandas as pd

    mine = events.event == "strategy"
    assert mine.any() and not plain.event.eq("strategy").any()
    rest = events[~mine].reset_index(drop=True)
    pd.testing.assert_frame_equal(
        rest.astype({"event": str}), plain.astype({"event": str}), check_dtype=False
    )


def assert_resume_equals_whole(data: dict[str, Any], out: Path) -> None:
    """A learning run of ``data`` failed as frame 2 starts (into ``out``) and resumed from its
    checkpoint: its events and final model equal the uninterrupted run's."""
    import pandas as pd

    import wflsim

    final: dict[str, Any] = {}

    def keep(name: str) -> Any:
        return wflsim.Callbacks(on_frame_end=lambda v: final.__setitem__(name, v.params()))

    whole = wflsim.run(data, callbacks=keep("whole"), progress=False)
    with pytest.raises(RuntimeError, match="injected"):
        wflsim.run(data, out=out, hooks=failing_at_frame(2), progress=False)
    assert wflsim.load_run(out).status == "failed"
    resumed = wflsim.resume(out, callbacks=keep("resumed"), progress=False)
    assert resumed.status == "completed"
    pd.testing.assert_frame_equal(resumed.events, whole.events)
    np.testing.assert_array_equal(final["resumed"], final["whole"])


def run_in_memory(data: dict[str, Any], learner=None) -> tuple[pa.Table, Any]:
    """Validate, prepare and run a scenario table without writing files: (trace, stats).

    ``wflsim.run(data)`` gives the same events as a DataFrame; the tests want the Arrow table
    and the engine's totals."""
    import wflsim
    from wflsim.app.run import build_engine, make_learner

    prep = wflsim.prepare(data)
    engine = build_engine(prep, learner if learner is not None else make_learner(prep))
    stats = engine.run()
    return engine.table(), stats


def with_kernel(data: dict[str, Any], kernel: str) -> dict[str, Any]:
    """A copy of a scenario table with ``[run] kernel`` set."""
    import copy

    out = copy.deepcopy(data)
    out.setdefault("run", {})["kernel"] = kernel
    return out


def on_both_kernels(data: dict[str, Any]) -> tuple[pa.Table, pa.Table]:
    """The events of a scenario on the closed-form and on the event kernel."""
    closed, _ = run_in_memory(with_kernel(data, "closed_form"))
    event, _ = run_in_memory(with_kernel(data, "event"))
    return closed, event


def saved_and_continued(data: dict[str, Any], stop_frame: int, path: Path) -> pa.Table:
    """The events of a scenario run to ``stop_frame``, saved to ``path`` and continued to the
    end in freshly built objects."""
    from wflsim.app.run import build_engine, make_learner, prepare_scenario
    from wflsim.sim import state
    from wflsim.sim.config.loading import validate_scenario

    def engine():
        prep = prepare_scenario(validate_scenario(data))
        return build_engine(prep, make_learner(prep))

    first = engine()
    first.run(stop_frame=stop_frame)
    state.save(path, state.run_state(first))
    second = engine()
    state.load_run_state(second, state.load(path))
    second.run()
    return pa.concat_tables([first.table(), second.table()])


def events(table: pa.Table, name: str):
    """Rows of one event as a pandas DataFrame."""
    df = table.to_pandas()
    return df[df["event"] == name].reset_index(drop=True)


class Py2Array:
    """Pickles a numpy array as Python 2's cPickle did in the real CIFAR-10 files: numpy's
    ``_reconstruct``, ``ndarray`` and ``dtype``, the pixels as a (latin-1) string."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = np.ascontiguousarray(array)

    def __reduce__(self):
        from numpy._core.multiarray import _reconstruct

        a = self.array
        state = (1, a.shape, a.dtype, False, a.tobytes().decode("latin1"))
        return (_reconstruct, (np.ndarray, (0,), "b"), state)


def write_fake_cifar(root: Path, per_batch: int, rng: np.random.Generator) -> None:
    """Write a tiny CIFAR-10 set in the cifar-10-batches-py pickle layout under ``root``
    (protocol 2, arrays pickled the way the real files hold them)."""
    base = root / "cifar-10-batches-py"
    base.mkdir(parents=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for i, name in enumerate(names):
        entry = {
            "batch_label": name,
            "labels": [int(v) for v in (np.arange(per_batch) + i) % 10],
            "data": Py2Array(rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)),
            "filenames": [f"{name}_{j}.png" for j in range(per_batch)],
        }
        with open(base / name, "wb") as f:
            pickle.dump(entry, f, protocol=2)
    with open(base / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [f"c{j}" for j in range(10)], "num_vis": 3072}, f, protocol=2)


def write_legacy_trace(path: Path, buffer: Any, metadata: dict[str, str]) -> None:
    """Write a trace buffer as one ``events.parquet`` file (the layout of wflsim before 0.3)."""
    import pyarrow.parquet as pq

    from wflsim.sim.trace import trace_metadata

    table = buffer.to_table().replace_schema_metadata(trace_metadata(metadata))
    pq.write_table(table, path)


def playwright_api() -> Any:
    """Playwright's sync API, for the tests that open a page in headless Chromium (the report, the
    documentation site); skipped when it is not installed, unless ``WFLSIM_NO_SKIP=1`` (CI, which
    installs it: the tests must run there, not skip)."""
    if os.environ.get("WFLSIM_NO_SKIP") == "1":
        import playwright.sync_api

        return playwright.sync_api
    return pytest.importorskip("playwright.sync_api")


def launch_chromium(playwright: Any) -> Any:
    """Chromium for Playwright: the system's (chromium, google-chrome) or Playwright's own;
    skipped when there is none, unless ``WFLSIM_NO_SKIP=1``."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        exe = shutil.which(name)
        if exe:
            return playwright.chromium.launch(executable_path=exe, args=["--no-sandbox"])
    try:
        return playwright.chromium.launch()
    except Exception as err:  # no browser installed
        if os.environ.get("WFLSIM_NO_SKIP") == "1":
            raise
        pytest.skip(f"no Chromium for the headless check ({type(err).__name__})")


@pytest.fixture(scope="session")
def ns3() -> Path:
    """wflsim's ns-3 program, built once per session: the tests of ``[uplink] mode = "ns3_lte"``
    skip where ns-3 is not installed (``pkg-config`` finds no ``ns3-lte``), unless
    ``WFLSIM_NO_SKIP=1`` (CI installs it: there they must run)."""
    from wflsim.sim.errors import Ns3Unavailable
    from wflsim.sim.radio.ns3.build import ensure_program

    try:
        return ensure_program()
    except Ns3Unavailable as err:
        if os.environ.get("WFLSIM_NO_SKIP") == "1":
            raise
        pytest.skip(f"ns-3 is not available: {err.problem}")


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed-seed generator for test data."""
    return np.random.default_rng(12345)


@pytest.fixture()
def forget_registrations():
    """The test ends with nothing registered from Python (a test module that registers names
    uses it for every test: ``pytestmark = pytest.mark.usefixtures("forget_registrations")``)."""
    from wflsim.app import extensions

    yield
    for kind, names in extensions.registered().items():
        for name in names:
            extensions.unregister(kind, name)


def tiny_learning_scenario() -> dict[str, Any]:
    """3 devices learning the digits MLP, 2 frames of 3 slots (the strategies' tests' run)."""
    table = base_scenario(
        run={"frames": 2, "slots_per_frame": 3, "deadline_s": 0.8},
        network={"num_devices": 3, "cell_radius_m": 300.0},
        devices={"batch_size": 16},
        scheme={"name": "ideal"},
    )
    table["learning"] = {
        "enabled": True,
        "dataset": "digits",
        "model": "mlp",
        "eval_every_slots": 3,
    }
    return table


def _module_from(folder: Path, name: str) -> ModuleType:
    """The file ``<folder>/<name>.py`` loaded as the module ``name``, with ``folder`` on
    ``sys.path`` while it loads (for the imports of its neighbours)."""
    sys.path.insert(0, str(folder))
    try:
        spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(folder))


def benchmark_module(name: str) -> ModuleType:
    """The script ``benchmarks/<name>.py`` loaded as a module (its ``_common`` import found)."""
    return _module_from(REPO / "benchmarks", name)


def docs_extension(name: str) -> ModuleType:
    """The module ``docs/_ext/<name>.py`` of the documentation site's build, loaded as a module
    (its neighbours' imports found); an extension that imports Sphinx needs it installed."""
    return _module_from(REPO / "docs" / "_ext", name)
