"""The Python-native API: overrides as dicts, sweeps from tables, compare(), progress bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wflsim
from conftest import base_scenario
from wflsim.app.inputs import overrides_of as _overrides
from wflsim.app.run import ScenarioSource
from wflsim.sim.config.loading import Override, apply_overrides, parse_override, parse_scenario_text
from wflsim.sim.errors import ScenarioError

TINY = base_scenario(
    run={"frames": 1, "slots_per_frame": 3, "deadline_s": 0.8},
    network={"num_devices": 5, "cell_radius_m": 300.0},
    learning={"enabled": False, "num_params": 20_000},
    scheme={"name": "two_timescale", "V": 10.0},
)


def test_dotted_nested_and_string_overrides_give_the_same_run():
    """{"a.b": v}, {"a": {"b": v}} and "a.b=v" override a scenario identically."""
    as_text = wflsim.run(TINY, overrides=["scheme.V=100", "run.slots_per_frame=2"], progress=False)
    dotted = wflsim.run(TINY, overrides={"scheme.V": 100, "run.slots_per_frame": 2}, progress=False)
    nested = wflsim.run(
        TINY, overrides={"scheme": {"V": 100}, "run": {"slots_per_frame": 2}}, progress=False
    )
    pd.testing.assert_frame_equal(as_text.events, dotted.events)
    pd.testing.assert_frame_equal(as_text.events, nested.events)
    assert dotted.scenario["scheme"]["V"] == 100.0 and len(dotted.slots) == 2


def test_a_table_valued_override_sets_the_whole_field():
    """A dict value replaces the field (a jitter model), as --set with an inline table does."""
    ovr = _overrides({"compute": {"jitter": {"model": "throttling", "sigma": 0.3}}})
    assert [o.text for o in ovr] == ['compute.jitter={ model = "throttling", sigma = 0.3 }']
    table = apply_overrides(TINY, ovr)
    assert table["compute"]["jitter"] == {"model": "throttling", "sigma": 0.3}


def test_numpy_values_in_overrides_count_as_python_values():
    """np.int64 and np.float64 override values act as int and float."""
    ovr = _overrides({"run.frames": np.int64(2), "scheme.V": np.float64(1.5)})
    assert [(o.value, type(o.value)) for o in ovr] == [(2, int), (1.5, float)]
    assert [o.text for o in ovr] == ["run.frames=2", "scheme.V=1.5"]


@pytest.mark.parametrize(
    "bad, field",
    [({"run.frames": None}, "run.frames"), ({3: 1}, "overrides"), ([3], "overrides")],
)
def test_bad_overrides_raise_scenario_errors(bad, field):
    """None values, non-text keys and non-text list items are refused, naming the field."""
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(TINY, overrides=bad)
    assert err.value.field == field


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["scheme.V", "network.cell_radius_m", "learning.lr"]),
        st.floats(min_value=1.0, max_value=1e3, allow_nan=False),
        min_size=1,
    )
)
def test_dict_overrides_round_trip_to_the_values_given(values):
    """Every value of a dict override reaches the table exactly, and so does the --set text the
    run records of it (a run continued from its folder applies that text)."""
    ovr = _overrides(values)
    table = apply_overrides(TINY, ovr)
    recorded = apply_overrides(TINY, [o.text for o in ovr])
    for key, v in values.items():
        section, field = key.split(".")
        assert table[section][field] == v and recorded[section][field] == v


_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
).filter(lambda v: v is not None)


def _no_none_in_lists(value):
    if isinstance(value, list):
        return all(v is not None and _no_none_in_lists(v) for v in value)
    if isinstance(value, dict):
        return all(_no_none_in_lists(v) for v in value.values())
    return True


@settings(max_examples=200, deadline=None)
@given(_VALUES.filter(_no_none_in_lists))
def test_an_override_value_is_set_as_given_and_its_text_reads_back_the_same(value):
    """Override.of sets the Python value itself; the --set text it records parses back to the
    same value (None inside a table is left out, as a file leaves it out)."""
    o = Override.of("x.y", value)
    assert o.value == value and o.path == ("x", "y")

    def without_nones(v):
        if isinstance(v, dict):
            return {k: without_nones(i) for k, i in v.items() if i is not None}
        return [without_nones(i) for i in v] if isinstance(v, list) else v

    assert parse_override(o.text) == (["x", "y"], without_nones(value))


def test_a_table_source_keeps_the_values_given():
    """A scenario table from Python is prepared from its values (a copy, not text read back),
    and its recorded text reads back as the same table."""
    table = {"seed": 3, "run": {"frames": 2, "deadline_s": 0.1}, "channel": {"shadowing": None}}
    source = ScenarioSource.from_table(table)
    got = source.table()
    assert got == {"seed": 3, "run": {"frames": 2, "deadline_s": 0.1}, "channel": {}}
    got["run"]["frames"] = 9  # a copy: the source is unchanged
    assert source.table()["run"]["frames"] == 2
    assert parse_scenario_text(source.text) == source.table()


def test_sweep_from_a_dict_runs_relative_paths_from_the_working_directory(tmp_path, monkeypatch):
    """wflsim.sweep takes a scenario dict; its relative mobility trace is read from the working
    directory, and its points equal wflsim.run of the same point."""
    monkeypatch.chdir(tmp_path)
    rows = ["time_s,device,x_m,y_m"] + [f"0,{n},{50 + 40 * n},0" for n in range(5)]
    (tmp_path / "trace.csv").write_text("\n".join(rows) + "\n")
    table = {**TINY, "mobility": {"model": "trace", "file": "trace.csv"}}
    sw = wflsim.sweep(table, {"scheme.V": [1.0, 100.0]}, seeds=range(2), out="sw", progress=False)
    assert len(sw.points) == 4
    assert all(p["status"] == "completed" for p in sw.points.values())
    assert sw.manifest["scenario_file"] is None
    one = sw.run("V=100.0__seed=1")
    positions = one.events[one.events["event"] == "position"]
    assert sorted(positions["x_m"].unique()) == [50.0, 90.0, 130.0, 170.0, 210.0]
    again = wflsim.run(table, overrides={"scheme.V": 100.0}, seed=1, progress=False)
    pd.testing.assert_frame_equal(one.events, again.events)


def test_compare_pairs_variants_by_seed_and_gives_t_intervals(tmp_path):
    """compare(): one row per variant and metric; the mean and interval are Student-t over the
    seeds, and the difference to the reference is the paired one (scipy's paired t-test)."""
    from scipy import stats

    variants = {"V10": {"scheme.V": 10.0}, "ideal": {"scheme.name": "ideal"}}
    df = wflsim.compare(
        TINY, variants, seeds=[0, 1, 2, 3], reference="V10", out=tmp_path / "c", progress=False
    )
    runs = df.attrs["runs"]
    assert len(runs) == 8 and set(df["variant"]) == set(variants)
    ideal = runs[runs["variant"] == "ideal"].set_index("seed")["total_energy_j"]
    ref = runs[runs["variant"] == "V10"].set_index("seed")["total_energy_j"]
    row = df[(df["variant"] == "ideal") & (df["metric"] == "total_energy_j")].iloc[0]
    lo, hi = stats.t.interval(0.95, 3, loc=ideal.mean(), scale=stats.sem(ideal))
    assert np.isclose(row["mean"], ideal.mean()) and np.allclose(
        [row["ci_low"], row["ci_high"]], [lo, hi]
    )
    d = ideal - ref
    test = stats.ttest_rel(ideal, ref)
    dlo, dhi = test.confidence_interval(0.95)
    assert np.isclose(row["diff"], d.mean()) and np.allclose(
        [row["diff_ci_low"], row["diff_ci_high"]], [dlo, dhi]
    )
    assert row["diff_n"] == 4
    assert "final_accuracy" not in set(df["metric"])  # not measured in a network-only run
    assert (tmp_path / "c" / "sweep.json").is_file()


def test_compare_cuts_a_rate_interval_at_zero_and_says_so(tmp_path):
    """compare(): seeds of outage rate 0 but one give a Student-t interval below 0; compare's
    stops at 0 (its upper end scipy's) and says it was cut."""
    from scipy import stats

    variants = {"tight": {"scheme.name": "fixed_power", "run.deadline_s": 0.16}}
    df = wflsim.compare(
        TINY, variants, seeds=range(6), metrics=["outage_rate"], out=tmp_path / "c", progress=False
    )
    x = df.attrs["runs"]["outage_rate"]
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert lo < 0.0  # the seeds are such: one with late uploads, the others none
    row = df.iloc[0]
    assert row["ci_low"] == 0.0 and np.isclose(row["ci_high"], hi) and bool(row["ci_clipped"])


def test_compare_applies_a_variant_as_written():
    """A variant's field that its scheme does not take is refused, as wflsim.run refuses it."""
    with pytest.raises(ScenarioError) as err:
        wflsim.compare(
            TINY,
            {"a": {}, "b": {"scheme.name": "ideal", "scheme.tol": 1e-9}},
            seeds=[0],
            progress=False,
        )
    assert "tol" in err.value.field


def test_compare_refuses_an_unknown_reference_before_running(tmp_path):
    """A reference that is not a variant: ScenarioError on 'reference', nothing written."""
    with pytest.raises(ScenarioError) as err:
        wflsim.compare(TINY, {"a": {}}, reference="b", out=tmp_path / "c")
    assert err.value.field == "reference" and not (tmp_path / "c").exists()


def test_progress_true_draws_a_bar_on_stderr(capsys):
    """progress=True shows a tqdm bar with one step a slot; progress=False draws nothing."""
    wflsim.run(TINY, progress=True)
    assert "3/3" in capsys.readouterr().err
    wflsim.run(TINY, progress=False)
    assert capsys.readouterr().err == ""


def test_a_repeated_sweep_reports_every_point_to_its_progress(tmp_path):
    """Repeating a sweep reports each point once to the progress callback, also the points it
    skips as completed (a bar then reaches its total)."""
    from wflsim.app.run import ScenarioSource
    from wflsim.app.sweep import plan_sweep, run_sweep

    plan = plan_sweep(ScenarioSource.from_table(TINY), ["scheme.V=1,10"], "0-1")
    for _ in range(2):
        seen: list[str] = []
        run_sweep(plan, tmp_path / "sw", progress=lambda name, result, seen=seen: seen.append(name))
        assert sorted(seen) == sorted(p.name for p in plan.points)


# ------------------------------------------------------------------ hostile input (issue 33)


def test_a_registered_model_with_the_wrong_output_shape_is_named_before_training(tmp_path):
    """A registered model that maps digits to 5 logits (10 classes): a ScenarioError on
    learning.model naming the model and the shape it needs, before anything is written (it
    was torch's IndexError from inside training)."""
    from torch import nn

    wflsim.register_model("five", lambda shape, k: nn.Sequential(nn.Flatten(), nn.Linear(64, 5)))
    try:
        table = {**TINY, "learning": {"dataset": "digits", "model": "five"}}
        with pytest.raises(ScenarioError) as err:
            wflsim.run(table, out=tmp_path / "r", progress=False)
    finally:
        wflsim.unregister("model", "five")
    assert err.value.field == "learning.model" and "'five'" in err.value.problem
    assert "(2, 5)" in err.value.problem and "(2, 10)" in err.value.problem
    assert not (tmp_path / "r").exists()


def test_the_output_shape_check_leaves_the_model_as_the_factory_built_it():
    """The probe batch runs in eval mode without gradients: training mode, BatchNorm
    statistics and the parameters are as the factory left them."""
    import torch
    from torch import nn

    from wflsim.models.registry import build_model

    built = []

    def factory(shape, k):
        net = nn.Sequential(nn.Flatten(), nn.Linear(64, 8), nn.BatchNorm1d(8), nn.Linear(8, k))
        built.append(net)
        return net

    wflsim.register_model("bn", factory)
    try:
        net = build_model("bn", "digits")
    finally:
        wflsim.unregister("model", "bn")
    fresh = factory((1, 8, 8), 10)
    assert net.training and all(m.training for m in net.modules())
    assert torch.equal(net[2].running_mean, fresh[2].running_mean)
    assert int(net[2].num_batches_tracked) == 0


def test_a_sweep_over_a_trillion_seeds_is_refused_without_listing_them():
    """seeds=range(10**12) is refused from its length (it built a trillion-item list first);
    an iterator is read only up to the cap."""
    with pytest.raises(ScenarioError) as err:
        wflsim.sweep(TINY, seeds=range(10**12), out="never")
    assert err.value.field == "seeds" and "10,000" in err.value.problem

    def endless():
        n = 0
        while True:
            yield n
            n += 1

    with pytest.raises(ScenarioError) as err:
        wflsim.sweep(TINY, seeds=endless(), out="never")
    assert err.value.field == "seeds"


def test_a_grid_over_a_trillion_values_is_refused_without_listing_them():
    """A grid entry of range(10**30) (longer than len() can count) is refused on its field."""
    with pytest.raises(ScenarioError) as err:
        wflsim.sweep(TINY, grid={"scheme.V": range(1, 10**30)}, out="never")
    assert err.value.field == "grid scheme.V"


@pytest.mark.parametrize("out", [None, 5, ["runs"]])
def test_a_sweep_without_a_folder_is_a_scenario_error(out, tmp_path, monkeypatch):
    """sweep(out=None) (or a number, a list) names `out` (it was a raw TypeError)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioError) as err:
        wflsim.sweep(TINY, seeds=[0], out=out)
    assert err.value.field == "out"
    assert list(tmp_path.iterdir()) == []


def test_overrides_that_set_one_field_twice_are_refused_naming_both_keys():
    """{"run": {"frames": 1}, "run.frames": 2} kept the later value silently: refused, naming
    both keys."""
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(TINY, overrides={"run": {"frames": 1}, "run.frames": 2})
    assert err.value.field == "overrides"
    assert "'run'" in err.value.problem and "'run.frames'" in err.value.problem


def test_a_scenario_table_with_a_section_and_its_dotted_key_is_refused_naming_both():
    """{"run": {...}, "run.frames": 2} in a scenario table names the dotted key and its
    section."""
    table = {**TINY, "run.frames": 2}
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(table)
    assert err.value.field == "run.frames" and "'run'" in err.value.problem


def test_none_in_a_scenario_table_is_refused_not_read_as_the_default():
    """run.frames = None ran 20 frames (the default): refused, naming the field, with the fix
    of leaving the key out."""
    table = {**TINY, "run": {**TINY["run"], "frames": None}}
    with pytest.raises(ScenarioError) as err:
        wflsim.run(table, progress=False)
    assert err.value.field == "run.frames" and "leave the key out" in (err.value.fix or "")


def test_none_where_it_is_the_default_is_taken_as_the_default():
    """channel.shadowing = None (no shadowing, its default), as a run's resolved scenario holds
    it, prepares as if the key were left out; scheme.V = None (a parameter left out) does not."""
    table = {**TINY, "channel": {"shadowing": None}}
    assert wflsim.prepare(table).scenario.channel.shadowing is None
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare({**TINY, "scheme": {**TINY["scheme"], "V": None}})
    assert err.value.field == "scheme.V"


@settings(max_examples=40, deadline=None)
@given(
    key=st.integers() | st.floats(allow_nan=False) | st.tuples(st.integers()) | st.none(),
    where=st.sampled_from(["", "run", "scheme"]),
)
def test_a_key_that_is_not_text_is_a_scenario_error(key, where):
    """{5: 1} at any level of a scenario table is a ScenarioError naming where (it was a raw
    TypeError)."""
    table = {k: dict(v) if isinstance(v, dict) else v for k, v in TINY.items()}
    (table[where] if where else table)[key] = 1
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(table)
    assert err.value.field == (where or "(top level)") and "text" in err.value.problem


class _Huge(list):
    """A list that says it holds ten million items and fails if any is read."""

    def __len__(self) -> int:
        return 10_000_000

    def __iter__(self):
        raise AssertionError("an item was read")

    def __getitem__(self, i):
        raise AssertionError("an item was read")


def test_a_ten_million_item_list_is_refused_from_its_length():
    """A per-device list of 10,000,000 items is refused from len() before any item is read (it
    took 46 s and 1.2 GB before the 1,000,000-item cap refused it)."""
    table = {**TINY, "devices": {"cpu_hz": _Huge()}}
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(table)
    assert err.value.field == "devices.cpu_hz" and "1,000,000" in err.value.problem
