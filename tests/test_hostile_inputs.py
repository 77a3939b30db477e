"""Hostile inputs: crafted dataset pickles, absurd values, fuzzed scenarios. Never code, never a
traceback: a clean one-line exit 2, or a completed run."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO, Py2Array, write_fake_cifar
from wflsim.app.cli import main
from wflsim.sim.config.catalogue import DatasetError

CIFAR_SCENARIO = REPO / "scenarios" / "paper" / "cifar10_noniid.toml"


class Exploit:
    """A pickle payload whose loading would create ``marker`` (through ``builtins.exec``)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


class ShellExploit(Exploit):
    """The same through ``os.system``."""

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _crafted_batch(path: Path, payload: object) -> None:
    """A CIFAR-10 batch file whose ``data`` is ``payload``."""
    entry = {"data": payload, "labels": [0, 1], "batch_label": "x"}
    path.write_bytes(pickle.dumps(entry, protocol=2))


@pytest.mark.parametrize("kind", [Exploit, ShellExploit])
def test_crafted_cifar_pickle_is_refused_and_runs_nothing(tmp_path, kind):
    """A batch file whose unpickling would run code is refused; the marker file never appears."""
    from wflsim.models.data import read_cifar_batch

    marker = tmp_path / "marker"
    _crafted_batch(tmp_path / "data_batch_1", kind(marker))
    with pytest.raises(DatasetError) as err:
        read_cifar_batch(tmp_path / "data_batch_1")
    assert not marker.exists()
    assert err.value.field == "learning.data_dir" and "nothing in it was run" in err.value.problem


def test_only_numpy_array_constructors_are_admitted(tmp_path):
    """A harmless global outside the list (numpy's protocol-5 _frombuffer) is refused too."""
    from wflsim.models.data import read_cifar_batch

    entry = {"data": np.zeros((2, 3072), np.uint8), "labels": [0, 1]}
    (tmp_path / "b").write_bytes(pickle.dumps(entry, protocol=5))
    with pytest.raises(DatasetError, match="not plain data"):
        read_cifar_batch(tmp_path / "b")
    entry["data"] = Py2Array(entry["data"])
    (tmp_path / "b").write_bytes(pickle.dumps(entry, protocol=2))
    x, y = read_cifar_batch(tmp_path / "b")
    assert x.shape == (2, 3, 32, 32) and y.tolist() == [0, 1]


def test_validate_refuses_a_crafted_cifar_set_without_running_it(tmp_path, capsys):
    """`wflsim validate` on a data folder with a crafted batch: exit 2, one line, no marker."""
    data = tmp_path / "data"
    write_fake_cifar(data, per_batch=2, rng=np.random.default_rng(0))
    marker = tmp_path / "marker"
    _crafted_batch(data / "cifar-10-batches-py" / "data_batch_3", Exploit(marker))
    code = main(["validate", str(CIFAR_SCENARIO), "--data-dir", str(data)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not marker.exists()
    assert len(err.splitlines()) == 1 and "learning.data_dir" in err and "data_batch_3" in err


@pytest.mark.parametrize(
    "content", [b"", b"\x80\x02garbage", b"not a pickle at all", pickle.dumps([1, 2], protocol=2)]
)
def test_damaged_cifar_batch_is_a_one_line_error(tmp_path, content):
    """Truncated, garbage or wrongly shaped batches are DatasetError, quoting nothing of them."""
    from wflsim.models.data import read_cifar_batch

    (tmp_path / "b").write_bytes(content)
    with pytest.raises(DatasetError) as err:
        read_cifar_batch(tmp_path / "b")
    assert "garbage" not in str(err.value) and "pickle at all" not in str(err.value)


def test_damaged_mnist_files_are_exit_2(tmp_path, capsys):
    """MNIST files that are present but not MNIST: `validate` exits 2 in one line."""
    from wflsim.sim.config.catalogue import DATASET_FILES

    for name in DATASET_FILES["mnist"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"secret-content-not-idx")
    code = main(
        ["validate", str(REPO / "scenarios" / "mnist_ideal.toml"), "--data-dir", str(tmp_path)]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "learning.data_dir" in err and "secret-content" not in err


QUICK = REPO / "scenarios" / "quickstart.toml"


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("network.noise_dbm=-1e6", "network.noise_dbm"),
        ("network.noise_dbm=1e6", "network.noise_dbm"),
        ('channel.pathloss={model="log_distance",intercept_db=-1e6}', "channel.pathloss"),
        ("devices.capacitance=1e300", "devices.capacitance"),
        ("devices.cpu_hz=1e300", "devices.cpu_hz"),
        ("scheme.lam=1e308", "scheme.lam"),
        ("devices.batch_size=1e19", "devices.batch_size"),
        ("network.num_devices=3000", "network.num_devices"),
        ("devices.peak_power_w=1e308", "devices.peak_power_w"),
        ("run.frames=3000000000", "run.frames"),
    ],
)
def test_validate_refuses_non_finite_derived_constants(override, field, capsys):
    """Valid-looking values whose derived constants overflow are exit 2 naming the field."""
    code = main(["validate", str(QUICK), "--set", override, "--set", "scheme.V=1e10"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and f"error: {field}:" in err


def test_scenario_file_that_is_not_text_is_exit_2(tmp_path, capsys):
    """A scenario file that is not UTF-8 is a one-line exit 2 (no traceback)."""
    path = tmp_path / "s.toml"
    path.write_bytes(b"name = \xff\xfe\n")
    assert main(["validate", str(path)]) == 2
    assert "UTF-8" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["datetime", "timedelta"])
def test_a_mobility_trace_of_dates_or_durations_is_refused(tmp_path, capsys, kind):
    """A Parquet mobility trace whose time_s holds datetime64 or timedelta64 values is exit 2
    naming the column and asking for seconds (it was read as the nanoseconds it stores)."""
    import pandas as pd

    times = (
        pd.to_datetime(["2024-01-01 00:00", "2024-01-01 00:01"])
        if kind == "datetime"
        else pd.to_timedelta([0, 60], unit="s")
    )
    trace = tmp_path / "mobility.parquet"
    pd.DataFrame(
        {"time_s": times, "device": [0, 0], "x_m": [0.0, 10.0], "y_m": [5.0, 5.0]}
    ).to_parquet(trace)
    args = [
        "--set",
        "network.num_devices=1",
        "--set",
        f'mobility={{ model = "trace", file = "{trace}" }}',
    ]
    code = main(["validate", str(QUICK), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "error: mobility.file:" in err and "column time_s holds" in err and "seconds" in err


# ------------------------------------------------------------------ fuzzing scenario values

#: Fields of a network-only scenario and the kinds of values thrown at them.
NETWORK_FIELDS = [
    "run.frames",
    "run.slots_per_frame",
    "run.deadline_s",
    "run.checkpoint_every_frames",
    "network.num_devices",
    "network.cell_radius_m",
    "network.min_distance_m",
    "network.bandwidth_hz",
    "network.noise_dbm",
    "devices.cpu_hz",
    "devices.cycles_per_sample",
    "devices.capacitance",
    "devices.batch_size",
    "devices.peak_power_w",
    "devices.energy_budget_j",
    "learning.num_params",
    "learning.bits_per_param",
    "channel.fading",
    "channel.pathloss",
    "mobility.model",
    "mobility.speed_mps",
    "mobility.pause_s",
    "scheme.name",
    "scheme.V",
    "scheme.lam",
    "scheme.tol",
    "scheme.max_iter",
    "trace.late_upload_energy",
    "seed",
]

_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 1e-300, 1e300, 1e308, -1e308, 2**31, 2**63, 0.5]),
)
_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


def _toml(value: object) -> str:
    """A value as TOML text (``nan``/``inf`` as TOML spells them; strings quoted)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


#: Fields that set how much work a valid run does: drawn small, or far beyond the scenario's caps
#: (refused), so that no example of the fuzz test below can run long.
SIZE_FIELDS = {
    "run.frames",
    "run.slots_per_frame",
    "run.checkpoint_every_frames",
    "network.num_devices",
}
_SIZES = st.one_of(
    st.integers(min_value=-3, max_value=40),
    st.sampled_from([2**31, 2**63, 10**12, 1e300, 1e308]),
    st.floats(allow_nan=True, allow_infinity=True),
    _TEXT,
    st.booleans(),
)

_VALUES = st.one_of(
    _NUMBERS,
    _TEXT,
    st.booleans(),
    st.lists(_NUMBERS, max_size=3),
    st.fixed_dictionaries(
        {"dist": st.sampled_from(["uniform", "normal", "loguniform", "nope"])},
        optional={"low": _NUMBERS, "high": _NUMBERS, "mean": _NUMBERS, "std": _NUMBERS},
    ),
)

TINY = """
name = "fuzz"
seed = 1
[run]
frames = 2
slots_per_frame = 2
deadline_s = 0.8
[network]
num_devices = 4
[learning]
enabled = false
num_params = 1000
[scheme]
name = "two_timescale"
"""


def _check_clean(code: int, err: str, out: Path) -> None:
    """Exit 0 with a completed, strict-JSON manifest, or exit 2 in one line with nothing written."""
    assert "Traceback" not in err
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err
        assert not out.exists()
        return
    assert code == 0, err

    def refuse(name):
        raise ValueError(name)

    manifest = json.loads((out / "manifest.json").read_text(), parse_constant=refuse)
    assert manifest["status"] == "completed"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fuzzed_network_scenarios_exit_2_or_complete(tmp_path_factory, data):
    """One or two fields of a tiny network-only scenario set to random values: never a traceback."""
    root = tmp_path_factory.mktemp("fuzz")
    path = root / "s.toml"
    path.write_text(TINY)
    fields = data.draw(
        st.lists(st.sampled_from(NETWORK_FIELDS), min_size=1, max_size=2, unique=True)
    )
    sets = []
    for f in fields:
        sets += ["--set", f"{f}={_toml(data.draw(_SIZES if f in SIZE_FIELDS else _VALUES))}"]
    out = root / "out"
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["run", str(path), *sets, "--out", str(out), "--quiet"])
    _check_clean(code, err.getvalue(), out)


LEARNING_FIELDS = {
    "learning.lr": _NUMBERS,
    "learning.eval_every_slots": _NUMBERS,
    "learning.eval_max_samples": _NUMBERS,
    "learning.unmoved_stability": _NUMBERS,
    "learning.dirichlet_alpha": _NUMBERS,
    "learning.partition": st.sampled_from(["iid", "dirichlet", "x"]),
    "network.num_devices": st.integers(min_value=-5, max_value=300),
    "devices.batch_size": st.one_of(_NUMBERS, st.integers(min_value=1, max_value=4000)),
}


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fuzzed_training_scenarios_exit_2_or_complete(tmp_path_factory, data):
    """A learning field of a tiny digits run set to a random value: exit 2, a completed run, or a
    run that stops as diverged (exit 1, status failed), never a traceback."""
    root = tmp_path_factory.mktemp("fuzzl")
    path = root / "s.toml"
    path.write_text(
        TINY.replace(
            "enabled = false\nnum_params = 1000", 'dataset = "digits"\nmodel = "mlp"'
        ).replace(
            "[network]\nnum_devices = 4", "[network]\nnum_devices = 4\n[devices]\nbatch_size = 8"
        )
    )
    field = data.draw(st.sampled_from(sorted(LEARNING_FIELDS)))
    value = data.draw(LEARNING_FIELDS[field])
    out = root / "out"
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(
            ["run", str(path), "--set", f"{field}={_toml(value)}", "--out", str(out), "--quiet"]
        )
    if code == 1:  # only a diverged run may fail, and it says so
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "failed" and "diverged" in manifest["error"], err.getvalue()
        return
    _check_clean(code, err.getvalue(), out)
