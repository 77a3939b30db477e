"""Scenario validation, overrides and per-device resolution."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO, base_scenario
from wflsim.app.scenario import load_scenario, validate_scenario
from wflsim.sim.config.loading import apply_overrides, parse_override
from wflsim.sim.config.resolve import check_deadline, resolve_devices
from wflsim.sim.config.schema import DevicesConfig
from wflsim.sim.errors import ScenarioError
from wflsim.sim.registry import model_num_params
from wflsim.sim.rng import Streams


def _field_of(data: dict) -> str:
    with pytest.raises(ScenarioError) as info:
        validate_scenario(data)
    return info.value.field


def test_shipped_scenarios_validate():
    """Every scenario file in scenarios/ is valid."""
    files = sorted((REPO / "scenarios").rglob("*.toml"))
    assert files
    for f in files:
        load_scenario(f)


def test_absurd_device_count_is_rejected():
    """num_devices above one million is an error on network.num_devices, not a MemoryError."""
    assert _field_of(base_scenario(network={"num_devices": 3626517551068})) == "network.num_devices"


def test_negative_bandwidth_names_the_field():
    """A negative bandwidth is reported on network.bandwidth_hz."""
    assert _field_of(base_scenario(network={"bandwidth_hz": -1.0})) == "network.bandwidth_hz"


def test_unknown_field_is_rejected():
    """A misspelt field is an error, not silently ignored."""
    with pytest.raises(ScenarioError, match="unknown field") as info:
        validate_scenario(base_scenario(network={"bandwith_hz": 1e6}))
    assert info.value.field == "network.bandwith_hz"


def test_wrong_type_names_the_field():
    """A string where an integer belongs is reported on that field."""
    assert _field_of(base_scenario(run={"frames": "ten"})) == "run.frames"


def test_unknown_scheme_is_rejected():
    """scheme.name must be a registered scheme."""
    assert _field_of(base_scenario(scheme={"name": "magic"})) == "scheme.name"


def test_unknown_scheme_parameter_is_rejected():
    """A scheme rejects parameters it does not have."""
    assert _field_of(base_scenario(scheme={"name": "ideal", "bogus": 3})) == "scheme.bogus"


#: A scenario whose scheme has a parameter it does not know.
BAD_SCHEME = base_scenario(scheme={"name": "ideal", "bogus": 3})


def _refuse_bad_scheme(entry: str, tmp_path) -> None:
    """Hand :data:`BAD_SCHEME` to one entry point (raises its ScenarioError)."""
    import wflsim
    from wflsim.app.run import prepare, prepare_from_manifest, prepare_scenario
    from wflsim.app.sweep import plan_sweep
    from wflsim.sim.config import loading

    path = tmp_path / "bad.toml"
    path.write_text(loading.scenario_text(BAD_SCHEME))
    if entry == "file":
        prepare(path)
    elif entry == "api":
        wflsim.prepare(BAD_SCHEME)
    elif entry == "sweep":
        plan_sweep(path, [], "0")
    elif entry == "resume":
        prepare_from_manifest({"scenario_text": path.read_text(), "overrides": []})
    elif entry == "library_scenario":  # validated by sim.config alone, then prepared
        prepare_scenario(loading.validate_scenario(BAD_SCHEME))


@pytest.mark.parametrize("entry", ["file", "api", "sweep", "resume", "library_scenario"])
def test_every_entry_point_refuses_a_bad_scheme_parameter_in_one_line(entry, tmp_path):
    """A scheme parameter the scheme does not have is the same ScenarioError from a file, the
    API, a sweep (which names the grid point too), a resume and a Scenario that only sim.config
    validated."""
    with pytest.raises(ScenarioError) as info:
        _refuse_bad_scheme(entry, tmp_path)
    err = info.value
    assert err.field == "scheme.bogus" and err.problem.startswith("unknown field")
    assert err.fix == "remove it or check its spelling against docs/scenario.md"


def test_sim_config_leaves_the_scheme_parameters_to_the_application():
    """sim.config.loading validates [scheme] as a name and a table; the registry check is the
    application's (wflsim.app.scenario)."""
    from wflsim.sim.config import loading

    assert loading.validate_scenario(BAD_SCHEME).scheme.params == {"bogus": 3}


def test_model_must_fit_dataset():
    """The MNIST CNN cannot take the 8x8 digits: the error names learning.model."""
    data = base_scenario(learning={"enabled": True, "dataset": "digits", "model": "cnn_mnist"})
    assert _field_of(data) == "learning.model"


def test_distribution_with_inverted_bounds_is_rejected():
    """uniform with high < low is reported on the per-device field."""
    data = base_scenario(devices={"energy_budget_j": {"dist": "uniform", "low": 1.0, "high": 0.5}})
    with pytest.raises(ScenarioError, match="must be >= low") as info:
        validate_scenario(data)
    assert info.value.field == "devices.energy_budget_j"


def test_deadline_below_compute_time_is_rejected():
    """tau_0 below c B / f is impossible and names run.deadline_s with the slowest device's time."""
    sc = validate_scenario(base_scenario(run={"deadline_s": 0.1}, devices={"batch_size": 512}))
    devices = resolve_devices(sc.devices, 6, Streams(0))
    with pytest.raises(ScenarioError, match="0.512") as info:
        check_deadline(sc.run, devices)
    assert info.value.field == "run.deadline_s"


def test_list_of_wrong_length_is_rejected():
    """A per-device list must have num_devices entries."""
    cfg = DevicesConfig(cpu_hz=[1e9, 2e9])
    with pytest.raises(ScenarioError, match="has 2 values") as info:
        resolve_devices(cfg, 3, Streams(0))
    assert info.value.field == "devices.cpu_hz"


def test_per_device_forms_resolve():
    """A scalar broadcasts, a list is taken as is, a distribution is drawn within its bounds."""
    cfg = DevicesConfig(
        cpu_hz=1e9,
        peak_power_w=[0.5, 1.0, 2.0],
        energy_budget_j={"dist": "uniform", "low": 0.3, "high": 0.45},
    )
    dev = resolve_devices(cfg, 3, Streams(0))
    np.testing.assert_array_equal(dev.cpu_hz, [1e9] * 3)
    np.testing.assert_array_equal(dev.peak_power_w, [0.5, 1.0, 2.0])
    assert ((dev.energy_budget_j >= 0.3) & (dev.energy_budget_j <= 0.45)).all()
    assert len(set(dev.energy_budget_j)) == 3


def test_adding_a_device_keeps_the_others_drawn_values():
    """Per-device streams: the first N devices keep their drawn budgets when one is added."""
    cfg = DevicesConfig(energy_budget_j={"dist": "normal", "mean": 1.0, "std": 0.1})
    a = resolve_devices(cfg, 5, Streams(3)).energy_budget_j
    b = resolve_devices(cfg, 6, Streams(3)).energy_budget_j
    np.testing.assert_array_equal(a, b[:5])


def test_override_parses_toml_values():
    """--set values are TOML: numbers, booleans, tables; anything else stays a string."""
    assert parse_override("learning.lr=0.01") == (["learning", "lr"], 0.01)
    assert parse_override("learning.enabled=false") == (["learning", "enabled"], False)
    assert parse_override("scheme.name=ideal") == (["scheme", "name"], "ideal")
    assert parse_override('d.x={dist="uniform",low=1,high=2}')[1] == {
        "dist": "uniform",
        "low": 1,
        "high": 2,
    }


def test_override_changes_the_validated_scenario():
    """apply_overrides writes into nested tables and creates missing ones."""
    data = apply_overrides(base_scenario(), ["run.frames=7", "trace.late_upload_energy=full"])
    sc = validate_scenario(data)
    assert sc.run.frames == 7
    assert sc.trace.late_upload_energy == "full"


def test_override_through_a_value_is_rejected():
    """--set cannot descend into a scalar."""
    with pytest.raises(ScenarioError, match="not a table"):
        apply_overrides(base_scenario(), ["seed.x=1"])


def test_catalogue_parameter_counts_match_the_networks():
    """The torch-free catalogue's D equals the real network's count for every model and dataset."""
    nets = pytest.importorskip("wflsim.models.nets")
    from wflsim.sim.config.catalogue import MODEL_DATASETS

    for model, datasets in MODEL_DATASETS.items():
        for dataset in datasets:
            assert model_num_params(model, dataset) == nets.num_params(model, dataset)


def test_moved_network_fields_name_their_new_place():
    """network.fading (moved to [channel]) is refused with a message that says where it went."""
    with pytest.raises(ScenarioError, match=r"\[channel\]") as info:
        validate_scenario(base_scenario(network={"fading": "none"}))
    assert info.value.field == "network"


def test_channel_table_accepts_a_bare_model_name():
    """channel.fading = "none" is the table {model = "none"}; an unknown model names the field."""
    sc = validate_scenario(base_scenario(channel={"fading": "none"}))
    assert sc.channel.fading.model == "none"
    with pytest.raises(ScenarioError) as info:
        validate_scenario(base_scenario(channel={"fading": "weibull"}))
    assert info.value.field.startswith("channel.fading")
    assert "weibull" in info.value.one_line()


_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=5),
    st.floats(allow_nan=True),
    st.integers(-5, 0),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    section=st.sampled_from(["run", "network", "devices", "learning"]),
    key=st.sampled_from(
        [
            "frames",
            "deadline_s",
            "num_devices",
            "bandwidth_hz",
            "cpu_hz",
            "batch_size",
            "lr",
            "dataset",
        ]
    ),
    value=_junk,
)
def test_bad_values_raise_scenario_error_or_validate(section, key, value):
    """Junk anywhere either prepares fine or raises ScenarioError naming a field; never another exception."""
    from wflsim.app.run import prepare_scenario

    data = base_scenario(**{section: {key: value}})
    try:
        prepare_scenario(validate_scenario(data))
    except ScenarioError as err:
        assert err.field
        assert "\n" not in err.one_line()
