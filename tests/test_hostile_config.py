"""Hostile scenario values and command lines: wrong types are refused (not converted), absurd
numbers and sizes are refused before anything runs, and every refusal is one line with exit
code 2 that names the field, the same in ``wflsim run``, ``wflsim sweep`` and the Python API."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from wflsim.app.cli import main
from wflsim.sim.errors import ScenarioError

S = REPO / "scenarios" / "paper" / "mnist_noniid.toml"
#: A network-only run of S that takes a fraction of a second.
N = [
    "--set",
    "learning.enabled=false",
    "--set",
    "learning.num_params=440812",
    "--set",
    "run.frames=1",
    "--set",
    "run.slots_per_frame=2",
]
NETWORK_ONLY = ["learning.enabled=false", "learning.num_params=440812", "run.frames=1"]


def _cli(args: list[str]) -> tuple[int, str]:
    """Run the wflsim command in this process: (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    return code, err.getvalue().strip()


def _refused(args: list[str], field: str, out: Path | None = None) -> str:
    """Assert exit 2, one line naming ``field``, no traceback, nothing at ``out``."""
    code, err = _cli(args)
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"error: {field}" in err, err
    if out is not None:
        assert not out.exists()
    return err


def _validate_refuses(override: str, field: str) -> str:
    return _refused(["validate", str(S), *N, "--set", override], field)


def _scenario_file(tmp_path: Path, head: str = "", tail: str = "") -> Path:
    """S with ``head`` lines first (replacing its ``seed``) and ``tail`` lines last."""
    lines = S.read_text().splitlines()
    if "seed" in head:
        lines = [x for x in lines if not x.startswith("seed")]
    path = tmp_path / "s.toml"
    path.write_text(head + "\n" + "\n".join(lines) + "\n" + tail + "\n")
    return path


# ------------------------------------------------------------------ 1. strict types


@pytest.mark.parametrize("field", ["network.num_devices", "learning.num_params"])
def test_a_bool_is_not_an_integer(field):
    """`true` for an integer field is refused, not read as 1."""
    err = _validate_refuses(f"{field}=true", field)
    assert "whole number" in err


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ('learning.enabled="false"', "learning.enabled"),
        ('run.frames="3"', "run.frames"),
        ('scheme.V="1e3"', "scheme.V"),
        ('channel.record="yes"', "channel.record"),
    ],
)
def test_text_is_not_a_number_or_a_bool(override, field):
    """Quoted text for a number or bool field is refused, not converted."""
    _validate_refuses(override, field)


def test_a_float_is_not_an_integer():
    """`run.frames = 3.0` is refused (an integer field takes an integer)."""
    _validate_refuses("run.frames=3.0", "run.frames")


def test_an_integer_stands_for_a_float():
    """`scheme.V = 100` (an integer for a float field) is valid, as TOML users write it."""
    code, err = _cli(["validate", str(S), *N, "--set", "scheme.V=100"])
    assert code == 0, err


def test_sweep_refuses_a_float_seed_as_run_does(tmp_path):
    """`seed = 1.5`: `wflsim sweep` exits 2 naming `seed` (it ran seed 1) and writes nothing."""
    path = _scenario_file(tmp_path, head="seed = 1.5")
    assert _cli(["validate", str(path), *N])[0] == 2
    out = tmp_path / "sweep"
    _refused(["sweep", str(path), *N, "--out", str(out), "--quiet"], "seed", out)


#: Fields of each kind and values of the wrong type for them.
_WRONG = {
    "int": (["run.frames", "network.num_devices", "learning.num_params"], [True, "3", 3.0]),
    "float": (["scheme.V", "run.deadline_s", "network.bandwidth_hz"], [True, False, "1.0"]),
    "bool": (["learning.enabled", "channel.record"], [0, 1, "true", 1.0]),
}
_FIELD_AND_WRONG_VALUE = st.sampled_from(sorted(_WRONG)).flatmap(
    lambda kind: st.tuples(st.sampled_from(_WRONG[kind][0]), st.sampled_from(_WRONG[kind][1]))
)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f'"{value}"' if isinstance(value, str) else repr(value)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_FIELD_AND_WRONG_VALUE)
def test_run_sweep_and_api_refuse_the_same_wrong_types(tmp_path_factory, case):
    """A wrong type is refused naming the field by `validate`, by a sweep's grid and by the API."""
    import wflsim
    from wflsim.app.sweep import plan_sweep

    field, value = case
    override = f"{field}={_toml(value)}"
    _validate_refuses(override, field)
    with pytest.raises(ScenarioError) as err:
        plan_sweep(S, [override], "0", extra_overrides=NETWORK_ONLY)
    assert err.value.field == field
    section, name = field.split(".")
    table = {"learning": {"enabled": False, "num_params": 1000}, section: {name: value}}
    if section == "learning":
        table["learning"] = {"enabled": False, "num_params": 1000, name: value}
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(table)
    assert err.value.field == field


# ------------------------------------------------------------------ 2. exit 2, not exit 1


def test_a_deeply_nested_toml_file_is_exit_2(tmp_path):
    """A 100,000-deep TOML array is a one-line exit 2 (it was a RecursionError)."""
    path = tmp_path / "deep.toml"
    path.write_text("v = " + "[" * 100_000 + "]" * 100_000 + "\n")
    _refused(["validate", str(path)], str(path))


def test_a_deeply_nested_set_value_is_exit_2():
    """A 5,000-deep `--set` value is a one-line exit 2 naming the field."""
    _validate_refuses("scheme.V=" + "[" * 5000 + "]" * 5000, "scheme.V")


def test_a_nested_table_from_python_is_refused_before_it_is_copied():
    """A scenario dict nested 5,000 levels deep is a ScenarioError (not a RecursionError)."""
    import wflsim

    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ScenarioError, match="nested"):
        wflsim.prepare({"description": deep})


def test_a_uniform_over_the_whole_float_range_is_exit_2():
    """`cpu_hz = uniform(-1e308, 1e308)` is exit 2 naming the field (it was an OverflowError)."""
    err = _validate_refuses(
        'devices.cpu_hz={dist="uniform",low=-1e308,high=1e308}', "devices.cpu_hz"
    )
    assert "low" in err


def test_an_out_with_a_300_character_name_is_exit_2(tmp_path):
    """`--out` whose folder name is 300 characters: exit 2 naming --out, nothing created."""
    out = tmp_path / ("a" * 300)
    _refused(["run", str(S), *N, "--out", str(out), "--quiet"], "--out")


def test_a_300_character_name_is_exit_2(tmp_path, monkeypatch):
    """A 300-character scenario name (the default output folder's name): exit 2, no runs/."""
    monkeypatch.chdir(tmp_path)
    _refused(["run", str(S), *N, "--set", f'name="{"a" * 300}"', "--quiet"], "name")
    assert not (tmp_path / "runs").exists()


def test_an_out_under_a_file_is_exit_2_naming_no_manifest(tmp_path):
    """`--out FILE/x`: exit 2 naming --out (it was exit 1 pointing at a manifest never written)."""
    parent = tmp_path / "file"
    parent.write_text("not a folder")
    out = parent / "x"
    err = _refused(["run", str(S), *N, "--out", str(out), "--quiet"], "--out")
    assert "manifest" not in err and "is a file" in err


def test_a_sweep_out_under_a_file_is_exit_2(tmp_path):
    """`wflsim sweep --out FILE/x`: exit 2 naming --out (it was an internal error)."""
    parent = tmp_path / "file"
    parent.write_text("not a folder")
    _refused(["sweep", str(S), *N, "--out", str(parent / "x"), "--quiet"], "--out")


def test_an_api_out_under_a_file_raises_a_scenario_error(tmp_path):
    """`wflsim.run(..., out=FILE/x)` raises ScenarioError on `out` before running."""
    import wflsim

    parent = tmp_path / "file"
    parent.write_text("not a folder")
    with pytest.raises(ScenarioError) as err:
        wflsim.run(_api_table(), out=parent / "x")
    assert err.value.field == "out"


def test_seed_ranges_over_the_cap_are_refused_without_building_them():
    """`--seeds` over 10,000 seeds is refused from the range's ends, not by listing it."""
    from wflsim.app.sweep import parse_seeds

    with pytest.raises(ScenarioError):  # a small case first: the old code would list it
        parse_seeds("0-20000")
    with pytest.raises(ScenarioError) as err:
        parse_seeds("0-1000000000")
    assert err.value.field == "--seeds"


def test_a_billion_seeds_on_the_command_line_is_exit_2(tmp_path):
    """`wflsim sweep --seeds 0-1000000000`: exit 2 naming --seeds (it was a MemoryError)."""
    from wflsim.app.sweep import parse_seeds

    with pytest.raises(ScenarioError):  # the cap exists (else the command would eat memory)
        parse_seeds("0-20000")
    out = tmp_path / "sweep"
    _refused(["sweep", str(S), *N, "--seeds", "0-1000000000", "--out", str(out)], "--seeds", out)


@pytest.mark.parametrize(
    ("head", "tail", "field"),
    [
        ("", "[sweep]\ngrid = 5", "sweep.grid"),
        ("", "[sweep]\nseeds = 5", "sweep.seeds"),
        ('seed = "x"', "", "seed"),
        ("seed = [1]", "", "seed"),
    ],
)
def test_bad_sweep_defaults_are_exit_2(tmp_path, head, tail, field):
    """A malformed `[sweep]` table or seed is exit 2 naming it (they were internal errors)."""
    path = _scenario_file(tmp_path, head=head, tail=tail)
    out = tmp_path / "sweep"
    _refused(["sweep", str(path), *N, "--out", str(out), "--quiet"], field, out)


# ------------------------------------------------------------------ 3. validate = run


def test_a_huge_lyapunov_weight_is_refused_by_validate():
    """`scheme.V = 1e308` fails `validate` (it passed, then the run failed after writing)."""
    _validate_refuses("scheme.V=1e308", "scheme.V")


def test_absurd_walking_speeds_are_refused_by_validate():
    """Random waypoint at 1e308 m/s is refused by `validate` (the run hung)."""
    _refused(
        [
            "validate",
            str(S),
            *N,
            "--set",
            'mobility.model="random_waypoint"',
            "--set",
            "mobility.speed_mps=[1e308,1e308]",
        ],
        "mobility.speed_mps",
    )


def test_walkers_that_cross_a_tiny_cell_every_instant_are_refused():
    """In-range speeds that cross the cell 10,000 times per slot are refused naming the speed."""
    _refused(
        [
            "validate",
            str(S),
            *N,
            "--set",
            'mobility.model="random_waypoint"',
            "--set",
            "mobility.speed_mps=[999,1000]",
            "--set",
            "network.cell_radius_m=1",
            "--set",
            "network.min_distance_m=0.5",
            "--set",
            "run.deadline_s=10",
        ],
        "mobility.speed_mps",
    )


#: The hang of issue 33: in-range values with which Ideal's slots would wait 4.6e34 s.
HANG = [
    "--set",
    'scheme.name="ideal"',
    "--set",
    "devices.peak_power_w=1e-9",
    "--set",
    "network.noise_dbm=100",
    "--set",
    "network.cell_radius_m=1e5",
    "--set",
    'mobility={ model = "random_waypoint", clock = "simulated" }',
]


def test_a_slot_that_would_wait_for_ever_is_refused_by_validate():
    """Ideal at 1e-9 W over 100 dBm of noise in a 100 km cell (frame 0 ended at 5.5e37 s and
    frame 1 never started): `validate` refuses it in one line naming the fields."""
    err = _refused(["validate", str(S), *N, *HANG], "network.noise_dbm")
    for name in ("devices.peak_power_w", "network.cell_radius_m", "network.bandwidth_hz"):
        assert name in err, err
    assert "at most 1e+09 s" in err, err


def test_a_slot_that_would_wait_for_ever_is_refused_before_a_run_writes(tmp_path):
    """`wflsim run` of the same scenario: exit 2, nothing written."""
    out = tmp_path / "run"
    _refused(["run", str(S), *N, *HANG, "--out", str(out), "--quiet"], "network.noise_dbm", out)


@given(
    power=st.floats(1e-9, 1e4),
    noise=st.floats(-250.0, 100.0),
    radius=st.floats(20.0, 1e5),
    scheme=st.sampled_from(["ideal", "only_pf", "fixed_power"]),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_validate_refuses_exactly_the_waits_over_the_cap(power, noise, radius, scheme):
    """For any power, noise and cell: `validate` refuses iff the scheme waits for the last
    upload and the cell-edge device would take longer than the cap, naming a field."""
    import wflsim
    from wflsim.sim.config.derived import edge_wait_s
    from wflsim.sim.config.limits import MAX_SLOT_WAIT_S

    table = {
        "run": {"frames": 1, "slots_per_frame": 2, "deadline_s": 1.0},
        "network": {"num_devices": 2, "cell_radius_m": radius, "noise_dbm": noise},
        "devices": {"peak_power_w": power},
        "learning": {"enabled": False, "num_params": 10_000},
        "scheme": {"name": scheme},
    }
    try:
        prep = wflsim.prepare(table)
    except ScenarioError as err:
        assert scheme != "fixed_power" and "a slot may wait at most" in err.problem, err
        return
    edge = float(prep.channel.median_gain(np.array([radius]))[0])
    assert scheme == "fixed_power" or edge_wait_s(prep.system, edge)[0] <= MAX_SLOT_WAIT_S


def test_a_slot_that_still_waits_too_long_stops_the_run_naming_it(tmp_path):
    """A deep fade the pre-run check cannot see (a replayed gain of 1e-40 in slot 1): the run
    stops at that slot with one line naming it and the device (exit 1, status failed), and
    never goes on to slots that start 8.8e25 s later."""
    import json

    import pandas as pd

    rows = [(s, d, 1e-40 if (s, d) == (1, 0) else 1e-9) for s in range(4) for d in range(2)]
    table = pd.DataFrame(rows, columns=["slot", "device", "gain"])
    table.astype({"slot": "int64", "device": "int32"}).to_parquet(tmp_path / "fade.parquet")
    out = tmp_path / "run"
    code, err = _cli(
        [
            "run",
            str(S),
            *N,
            "--set",
            "run.slots_per_frame=2",
            "--set",
            "run.frames=2",
            "--set",
            "network.num_devices=2",
            "--set",
            'scheme.name="ideal"',
            "--set",
            f'channel.replay="{tmp_path / "fade.parquet"}"',
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 1 and len(err.splitlines()) == 1, err
    assert "SlotTooLong: slot 1 waited" in err and "device 0" in err, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "slot 1" in manifest["error"]


def test_a_bad_seed_option_is_one_line_exit_2():
    """`--seed abc` (or -1, 3.5, 2^64) is the command's one-line error with exit 2, not
    argparse's usage block."""
    for seed in ("abc", "-1", "3.5", str(2**64)):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stop:
            main(["validate", str(S), "--seed", seed])
        assert stop.value.code == 2
        text = err.getvalue().strip()
        assert len(text.splitlines()) == 1 and text.startswith("wflsim: error:"), text
        assert "--seed" in text and "usage" not in text, text


def test_an_overflowing_compute_time_blames_its_own_field():
    """`cycles_per_sample = 1e308` names that field (not `run.deadline_s` 'above inf s')."""
    err = _validate_refuses("devices.cycles_per_sample=1e308", "devices.cycles_per_sample")
    assert "inf" not in err


#: Numeric fields of a network-only scenario and the field an error names.
NUMERIC_FIELDS = {
    "run.deadline_s": "run.deadline_s",
    "network.cell_radius_m": "network.cell_radius_m",
    "network.bandwidth_hz": "network.bandwidth_hz",
    "network.noise_dbm": "network.noise_dbm",
    "uplink.noise_psd_dbm_hz": "uplink.noise_psd_dbm_hz",
    "uplink.planned_concurrent_uploads": "uplink.planned_concurrent_uploads",
    "devices.cpu_hz": "devices.cpu_hz",
    "devices.cycles_per_sample": "devices.cycles_per_sample",
    "devices.capacitance": "devices.capacitance",
    "devices.batch_size": "devices.batch_size",
    "devices.peak_power_w": "devices.peak_power_w",
    "devices.energy_budget_j": "devices.energy_budget_j",
    "learning.lr": "learning.lr",
    "learning.dirichlet_alpha": "learning.dirichlet_alpha",
    "scheme.V": "scheme.V",
    "scheme.lam": "scheme.lam",
    "mobility.pause_s": "mobility.pause_s",
}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    field=st.sampled_from(sorted(NUMERIC_FIELDS)),
    value=st.floats(min_value=1e16, max_value=1e308),
)
def test_every_numeric_field_has_an_upper_bound(field, value):
    """Any value from 1e16 to 1e308 in a numeric field is refused by `validate`, naming it."""
    _validate_refuses(f"{field}={value!r}", NUMERIC_FIELDS[field])


@pytest.mark.parametrize(
    "spec",
    [
        '{dist="uniform",low=0.3,high=1e300}',
        '{dist="loguniform",low=0.3,high=1e300}',
        '{dist="normal",mean=0.3,std=0.1,low=0.5,high=0.2}',
        '{dist="normal",mean=0.3,std=1e300,low=0}',
        '{dist="choice",values=[0.3,1e300]}',
        "[" + "0.3," * 29 + "1e300]",
    ],
)
def test_distribution_parameters_are_bounded_and_ordered(spec):
    """Every parameter of a per-device distribution (or list) lies in the field's range."""
    _validate_refuses(f"devices.energy_budget_j={spec}", "devices.energy_budget_j")


# ------------------------------------------------------------------ 4. caps on work


def test_a_grid_over_the_cap_is_refused_before_planning():
    """A grid of 101 x 100 points is refused (a sweep has at most 10,000 runs)."""
    from wflsim.app.sweep import expand, parse_grid

    values = ",".join(str(v) for v in range(1, 102))
    grid = parse_grid([f"scheme.V={values}", f"scheme.max_iter={values[: values.index(',101')]}"])
    with pytest.raises(ScenarioError) as err:
        expand(grid, [0])
    assert err.value.field == "--grid" and "10,000" in err.value.problem


def test_a_2000_by_2000_grid_is_exit_2_at_once(tmp_path):
    """`--grid` of 2000 x 2000 values is exit 2 without planning 4,000,000 points."""
    from wflsim.app.sweep import expand, parse_grid

    with pytest.raises(ScenarioError):  # the cap exists (else planning would take minutes)
        expand(parse_grid(["scheme.V=" + ",".join(str(v) for v in range(10_001))]), [0])
    values = ",".join(str(v) for v in range(1, 2001))
    out = tmp_path / "sweep"
    args = ["sweep", str(S), *N, "--grid", f"scheme.V={values}", "--grid", f"scheme.lam={values}"]
    _refused([*args, "--out", str(out)], "--grid", out)


def test_a_long_description_is_refused():
    """A description over 10,000 characters is refused (it is copied into every trace part)."""
    _validate_refuses(f'description="{"x" * 20_000}"', "description")


def test_a_name_over_100_characters_is_refused():
    """A name of 101 characters is refused."""
    _validate_refuses(f'name="{"n" * 101}"', "name")


def test_the_number_of_slots_is_capped():
    """1,000,000 frames x 1,000 slots (10^9 slots) is refused naming the slots."""
    _refused(
        [
            "validate",
            str(S),
            *N,
            "--set",
            "run.frames=100000",
            "--set",
            "run.slots_per_frame=10000",
        ],
        "run.slots_per_frame",
    )


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("network.num_devices=1000001", "network.num_devices"),
        ("run.frames=1000001", "run.frames"),
        ("run.slots_per_frame=1000001", "run.slots_per_frame"),
        ("learning.num_params=1000000000001", "learning.num_params"),
        ("scheme.max_iter=100001", "scheme.max_iter"),
    ],
)
def test_sizes_that_make_work_are_capped(override, field):
    """Device, frame, slot, payload and iteration counts above their caps are refused."""
    _validate_refuses(override, field)


# ------------------------------------------------------------------ 5. the Python API


def _api_table(**network: object) -> dict:
    """A tiny network-only scenario table of plain Python values (``network`` added)."""
    return {
        "name": "api",
        "seed": 1,
        "run": {"frames": 1, "slots_per_frame": 2, "deadline_s": 0.8},
        "network": {"num_devices": 4, **network},
        "learning": {"enabled": False, "num_params": 1000},
        "scheme": {"name": "fixed_power", "V": 10.0},
    }


def test_the_api_accepts_numpy_scalars():
    """`np.int64`, `np.int32`, `np.float64` and `np.bool_` values count as Python values."""
    import wflsim

    table = _api_table(bandwidth_hz=np.float64(5e6))
    table["run"].update(frames=np.int64(1), slots_per_frame=np.int32(2))
    table["network"]["num_devices"] = np.int64(4)
    table["learning"].update(enabled=np.bool_(False), num_params=np.int64(1000))
    table["scheme"]["V"] = np.float64(10.0)
    sc = wflsim.prepare(table).scenario
    assert sc.network.num_devices == 4 and sc.run.slots_per_frame == 2
    assert sc.learning.enabled is False and sc.network.bandwidth_hz == 5e6


def test_the_api_takes_a_numpy_bool_as_a_bool_only():
    """`np.bool_(True)` for an integer field is refused like `True`."""
    import wflsim

    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(_api_table(num_devices=np.bool_(True)))
    assert err.value.field == "network.num_devices" and "integer" in err.value.problem


def test_the_api_takes_a_numpy_seed():
    """`seed=np.int64(3)` is seed 3."""
    import wflsim

    assert wflsim.prepare(_api_table(), seed=np.int64(3)).scenario.seed == 3


@pytest.mark.parametrize("seed", [1.5, True, "3"])
def test_the_api_refuses_a_seed_that_is_not_an_integer(seed):
    """`seed=1.5` (or a bool, or text) is refused, not truncated to 1."""
    import wflsim

    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(_api_table(), seed=seed)
    assert err.value.field == "seed"


def test_the_api_takes_a_single_override_string():
    """`overrides="run.frames=3"` is one override (it was read one character at a time)."""
    import wflsim

    prep = wflsim.prepare(REPO / "scenarios" / "quickstart.toml", overrides="run.frames=3")
    assert prep.scenario.run.frames == 3
    prep = wflsim.prepare(_api_table(), overrides="run.frames=2")
    assert prep.scenario.run.frames == 2
