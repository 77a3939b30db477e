"""Plausibility warnings: values inside a field's range that are implausible for its unit."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wflsim
from conftest import REPO, base_scenario
from wflsim.app.cli import main
from wflsim.app.run import prepare_scenario
from wflsim.app.sweep import plan_sweep
from wflsim.app.sweep_plan import _toml_text
from wflsim.sim.config.loading import (
    apply_overrides,
    load_scenario,
    read_scenario_file,
    scenario_text,
    sweep_defaults,
    validate_scenario,
)
from wflsim.sim.config.plausibility import RULES, Finding, Rule, findings, markdown_table
from wflsim.sim.errors import PlausibilityWarning, ScenarioError

SHIPPED = sorted((REPO / "scenarios").rglob("*.toml"))
#: A run.deadline_s that is a unit slip (20 ms), feasible for base_scenario's devices.
SLIP_DEADLINE = "run.deadline_s=20"
SLIP_LINE = (
    "warning: run.deadline_s: 20 s is above 10 s: unusual for a round deadline in wireless FL "
    "(did you give milliseconds? 20 ms is 0.02 s)"
)


def _findings(**sections: Any) -> list[Finding]:
    return findings(validate_scenario(base_scenario(**sections)))


def _table_at(field: str, value: Any) -> dict[str, Any]:
    """base_scenario's sections with ``value`` at the dotted ``field`` (and what it needs to be
    valid and otherwise plausible: a log-distance model, shadowing, random waypoint, radii)."""
    section, name = field.split(".", 1)
    if field == "channel.pathloss.slope_db":
        return {"channel": {"pathloss": {"model": "log_distance", "slope_db": value}}}
    if field == "channel.shadowing.decorrelation_m":
        return {"channel": {"shadowing": {"sigma_db": 8.0, "decorrelation_m": value}}}
    if field == "mobility.speed_mps":
        return {"mobility": {"model": "random_waypoint", "speed_mps": [value, value]}}
    if field == "network.cell_radius_m":
        return {"network": {"cell_radius_m": value, "min_distance_m": 1.0}}
    if field == "network.min_distance_m":
        return {"network": {"min_distance_m": value, "cell_radius_m": 20_000.0}}
    return {section: {name: value}}


# ---- each rule fires on its slip -----------------------------------------------------------

#: (field, value, the field named, the fix): every fix computed by hand.
SLIPS = [
    ("run.deadline_s", 100.0, "run.deadline_s", "did you give milliseconds? 100 ms is 0.1 s"),
    ("run.deadline_s", 5e4, "run.deadline_s", "did you give microseconds? 50000 µs is 0.05 s"),
    ("run.deadline_s", 5e-4, "run.deadline_s", "plausible values are 0.001 to 10 s"),
    ("network.noise_dbm", 1e-13, "network.noise_dbm", "did you give watts? 1e-13 W is -100 dBm"),
    ("network.noise_dbm", -20.0, "network.noise_dbm", "plausible values are -144 to -50 dBm"),
    ("network.noise_dbm", -174.0, "network.noise_dbm", "uplink.noise_psd_dbm_hz"),
    ("uplink.noise_psd_dbm_hz", -104.0, "uplink.noise_psd_dbm_hz", "network.noise_dbm"),
    ("uplink.noise_psd_dbm_hz", -200.0, "uplink.noise_psd_dbm_hz", "-175 to -140 dBm/Hz"),
    ("network.bandwidth_hz", 10.0, "network.bandwidth_hz", "did you give MHz? 10 MHz is 1e7 Hz"),
    ("network.bandwidth_hz", 1e11, "network.bandwidth_hz", "1000 to 1e10 Hz"),
    (
        "network.cell_radius_m",
        5.0,
        "network.cell_radius_m",
        "did you give kilometres? 5 km is 5000 m",
    ),
    ("network.cell_radius_m", 5e4, "network.cell_radius_m", "10 to 35000 m"),
    ("network.min_distance_m", 0.01, "network.min_distance_m", "0.01 km is 10 m"),
    ("devices.cpu_hz", 1e3, "devices.cpu_hz", "did you give MHz? 1000 MHz is 1e9 Hz"),
    ("devices.cpu_hz", 5e5, "devices.cpu_hz", "did you give kHz? 500000 kHz is 5e8 Hz"),
    ("devices.cpu_hz", 5e10, "devices.cpu_hz", "1e6 to 1e10 Hz"),
    ("devices.cycles_per_sample", 2.0, "devices.cycles_per_sample", "2 Mcycles is 2e6 cycles"),
    ("devices.cycles_per_sample", 1e12, "devices.cycles_per_sample", "cycles of a whole batch"),
    ("devices.capacitance", 1e-31, "devices.capacitance", "1e-29 to 1e-25"),
    ("devices.capacitance", 1e-20, "devices.capacitance", "1e-29 to 1e-25"),
    ("devices.batch_size", 0.3, "devices.batch_size", "counts samples per local gradient"),
    ("devices.batch_size", 1e6, "devices.batch_size", "1 to 100000 samples"),
    ("devices.peak_power_w", 23.0, "devices.peak_power_w", "did you give dBm? 23 dBm is 0.2 W"),
    ("devices.peak_power_w", 200.0, "devices.peak_power_w", "milliwatts? 200 mW is 0.2 W"),
    ("devices.peak_power_w", 1e-8, "devices.peak_power_w", "1e-6 to 10 W"),
    ("devices.energy_budget_j", 300.0, "devices.energy_budget_j", "300 mJ is 0.3 J"),
    ("devices.energy_budget_j", 1e-5, "devices.energy_budget_j", "0.0001 to 100 J"),
    ("mobility.speed_mps", 120.0, "mobility.speed_mps[0]", "120 km/h is 33.3 m/s"),
    ("channel.pathloss.slope_db", 3.76, "channel.pathloss.slope_db", "3.76 is 37.6 dB/decade"),
    ("channel.pathloss.slope_db", 90.0, "channel.pathloss.slope_db", "15 to 70 dB/decade"),
    ("channel.shadowing.decorrelation_m", 0.05, "channel.shadowing.decorrelation_m", "50 m"),
    ("channel.shadowing.decorrelation_m", 5e3, "channel.shadowing.decorrelation_m", "1 to 1000 m"),
]


@pytest.mark.parametrize(("field", "value", "named", "fix"), SLIPS)
def test_each_rule_fires_on_its_slip_with_the_likely_unit(field, value, named, fix):
    """A slipped value gives one finding on its field, whose fix names the unit and the value
    it converts to (or the plausible range)."""
    found = _findings(**_table_at(field, value))
    assert [f.field for f in found] == [named]
    assert fix in found[0].fix
    assert found[0].value == value


def test_the_slip_cases_cover_both_ends_of_every_rule():
    """Every end of every rule's range has a slip case above (a new rule needs its cases)."""
    rules = {r.field: r for r in RULES}
    covered = set()
    for field, value, _, _ in SLIPS:
        rule = rules[field]
        covered.add((field, "low" if rule.low and value < rule.low.bound else "high"))
    ends = {(r.field, end) for r in RULES for end in ("low", "high") if getattr(r, end)}
    assert ends == covered


def test_a_radius_in_kilometres_comes_with_a_minimum_distance_in_kilometres():
    """cell_radius_m = 0.5 and min_distance_m = 0.01 (both km): two findings, each converted."""
    found = _findings(network={"cell_radius_m": 0.5, "min_distance_m": 0.01})
    assert [(f.field, f.fix) for f in found] == [
        ("network.cell_radius_m", "did you give kilometres? 0.5 km is 500 m"),
        ("network.min_distance_m", "did you give kilometres? 0.01 km is 10 m"),
    ]


def test_the_message_reads_field_value_problem_and_fix():
    """The finding's line names the field, the value with its unit, the bound and the slip."""
    (f,) = _findings(run={"deadline_s": 100.0})
    assert f.one_line() == (
        "run.deadline_s: 100 s is above 10 s: unusual for a round deadline in wireless FL "
        "(did you give milliseconds? 100 ms is 0.1 s)"
    )


# ---- every value a list or a distribution can produce ----------------------------------------


def test_a_list_is_one_finding_per_end_naming_the_first_value_and_the_count():
    """A list with two slow CPUs and one fast one: one finding below (the first, index 1, and
    one more) and one above (index 4)."""
    found = _findings(devices={"cpu_hz": [2e9, 5e5, 2e9, 3e3, 5e10, 2e9]})
    assert [f.field for f in found] == ["devices.cpu_hz[1]", "devices.cpu_hz[4]"]
    assert "and 1 more value of the list" in found[0].problem
    assert "more value" not in found[1].problem


def test_a_uniform_law_is_checked_at_both_ends():
    """uniform [0.3, 450] J: its high end is a finding (mJ), its low end is not."""
    found = _findings(devices={"energy_budget_j": {"dist": "uniform", "low": 0.3, "high": 450.0}})
    assert [f.field for f in found] == ["devices.energy_budget_j.high"]
    assert "450 mJ is 0.45 J" in found[0].fix


def test_an_unclipped_normal_law_is_checked_at_mean_minus_and_plus_three_std():
    """normal(2e9, 1e9) Hz reaches -1e9 Hz at mean - 3 std (below 1e6 Hz); mean + 3 std =
    5e9 Hz is plausible."""
    found = _findings(devices={"cpu_hz": {"dist": "normal", "mean": 2e9, "std": 1e9}})
    assert [(f.field, f.value) for f in found] == [("devices.cpu_hz (mean - 3 std)", -1e9)]


def test_a_clipped_normal_law_is_checked_at_its_clips():
    """normal(2e9, 1e9) clipped to [5e5, 4e9] Hz: the low clip (5e5 Hz) is a finding."""
    cpu = {"dist": "normal", "mean": 2e9, "std": 1e9, "low": 5e5, "high": 4e9}
    found = _findings(devices={"cpu_hz": cpu})
    assert [(f.field, f.value) for f in found] == [("devices.cpu_hz.low", 5e5)]


def test_a_choice_is_checked_at_every_value():
    """choice [2e6, 1e12] cycles: the second value is a finding."""
    found = _findings(devices={"cycles_per_sample": {"dist": "choice", "values": [2e6, 1e12]}})
    assert [f.field for f in found] == ["devices.cycles_per_sample.values[1]"]


def test_zero_capacitance_is_deliberate_not_a_slip():
    """capacitance = 0 (free computation) is no finding; 1e-31 is."""
    assert _findings(devices={"capacitance": 0.0}) == []
    assert _findings(devices={"capacitance": [0.0, 1e-31, 0, 0, 0, 0]})[0].value == 1e-31


def test_fields_the_scenario_does_not_have_are_skipped():
    """A UMi path loss has no slope and 3GPP shadowing no number: nothing to check there."""
    found = _findings(
        channel={
            "pathloss": {"model": "umi"},
            "shadowing": {"sigma_db": "3gpp", "decorrelation_m": "3gpp"},
        }
    )
    assert found == []


# ---- plausible values never warn ------------------------------------------------------------


def _inside(rule: Rule) -> st.SearchStrategy[float]:
    """Values inside ``rule``'s range (log-uniform where both ends are positive)."""
    low = rule.low.bound if rule.low else 1e-3
    high = rule.high.bound if rule.high else 1e4
    if low > 0:
        return st.floats(math.log10(low), math.log10(high)).map(
            lambda e: min(max(10.0**e, low), high)
        )
    return st.floats(low, high)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(RULES).flatmap(lambda r: st.tuples(st.just(r), _inside(r))))
def test_values_inside_every_rule_never_warn(drawn):
    """A value drawn inside a rule's plausible range gives no finding."""
    rule, value = drawn
    assert _findings(**_table_at(rule.field, value)) == []


def _beyond(rule: Rule) -> st.SearchStrategy[float]:
    """Values beyond one end of ``rule``'s range, inside the field's valid range."""
    valid = {
        "run.deadline_s": (1e-6, 86_400.0),
        "network.noise_dbm": (-250.0, 100.0),
        "uplink.noise_psd_dbm_hz": (-300.0, 0.0),
        "network.bandwidth_hz": (1.0, 1e12),
        "network.cell_radius_m": (1.001, 1e5),
        "network.min_distance_m": (1e-3, 1e4),
        "devices.cpu_hz": (1e3, 1e12),
        "devices.cycles_per_sample": (1e-3, 1e15),
        "devices.capacitance": (1e-40, 1e-15),
        "devices.batch_size": (1e-3, 1e7),
        "devices.peak_power_w": (1e-9, 1e4),
        "devices.energy_budget_j": (1e-9, 1e6),
        "mobility.speed_mps": (1e-3, 1000.0),
        "channel.pathloss.slope_db": (1e-3, 200.0),
        "channel.shadowing.decorrelation_m": (1e-3, 1e6),
    }[rule.field]
    sides = []
    if rule.low:
        sides.append(st.floats(valid[0], rule.low.bound, exclude_max=True))
    if rule.high:
        sides.append(st.floats(rule.high.bound, valid[1], exclude_min=True))
    return st.one_of(sides)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(RULES).flatmap(lambda r: st.tuples(st.just(r), _beyond(r))))
def test_values_beyond_every_rule_warn_on_its_field(drawn):
    """A valid value beyond a rule's range gives one finding on the rule's field."""
    rule, value = drawn
    found = _findings(**_table_at(rule.field, value))
    assert [f.field.split("[")[0] for f in found] == [rule.field]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_shipped_scenarios_raise_no_finding(path):
    """Every scenario under scenarios/ (the paper's values) is plausible, at every value of its
    [sweep] grid too."""
    scenario, _ = load_scenario(path)
    assert findings(scenario) == []
    _, table = read_scenario_file(path)
    for key, values in sweep_defaults(table)[1].grid.items():
        for value in values:
            point = apply_overrides(table, [f"{key}={_toml_text(value, key)}"])
            assert findings(validate_scenario(point)) == [], (key, value)


def test_the_docs_table_is_the_code_table():
    """docs/scenario.md's "Plausibility warnings" table is exactly the rules of the code."""
    doc = (REPO / "docs" / "scenario.md").read_text()
    assert markdown_table() in doc
    fields = [r.field for r in RULES]
    assert len(set(fields)) == len(fields)


# ---- the application: warnings, strict, the command line ------------------------------------


def test_the_api_emits_a_plausibility_warning_and_goes_on():
    """wflsim.prepare of a slipped deadline warns (PlausibilityWarning, with field, problem and
    fix) and returns the prepared scenario."""
    with pytest.warns(PlausibilityWarning, match=r"^run\.deadline_s: 20 s") as caught:
        prep = wflsim.prepare(base_scenario(run={"deadline_s": 20.0}))
    assert prep.scenario.run.deadline_s == 20.0
    (w,) = [w.message for w in caught if isinstance(w.message, PlausibilityWarning)]
    assert (w.field, w.fix) == ("run.deadline_s", "did you give milliseconds? 20 ms is 0.02 s")


def test_a_plausible_scenario_warns_nothing():
    """The base test scenario prepares without any PlausibilityWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlausibilityWarning)
        wflsim.prepare(base_scenario())


def test_strict_raises_the_first_finding_as_a_scenario_error():
    """prepare_scenario(strict=True) refuses a slipped value, naming its field and the fix."""
    scenario = validate_scenario(base_scenario(devices={"peak_power_w": 23.0}))
    with pytest.raises(ScenarioError) as err:
        prepare_scenario(scenario, strict=True)
    assert err.value.field == "devices.peak_power_w"
    assert err.value.fix == "did you give dBm? 23 dBm is 0.2 W"


def _scenario_file(tmp_path: Path, **sections: Any) -> Path:
    path = tmp_path / "s.toml"
    table = base_scenario(run={"frames": 1, "slots_per_frame": 2}, **sections)
    path.write_text(scenario_text(table))
    return path


def test_a_sweep_reports_each_distinct_finding_once(tmp_path):
    """Three seeds with the same slip warn once; two slipped deadlines warn twice."""
    path = _scenario_file(tmp_path)
    with pytest.warns(PlausibilityWarning) as caught:
        plan_sweep(path, [], "0-2", extra_overrides=[SLIP_DEADLINE])
    assert len(caught) == 1
    with pytest.warns(PlausibilityWarning) as caught:
        plan_sweep(path, ["run.deadline_s=20,30"], "0-1")
    assert sorted(str(w.message)[:21] for w in caught) == [
        "run.deadline_s: 20 s ",
        "run.deadline_s: 30 s ",
    ]


def test_a_strict_sweep_names_the_grid_point(tmp_path):
    """plan_sweep(strict=True) refuses the first slipped point, naming it."""
    path = _scenario_file(tmp_path)
    with pytest.raises(ScenarioError, match=r"grid point deadline_s=20__seed=0"):
        plan_sweep(path, ["run.deadline_s=0.8,20"], "0", strict=True)


@pytest.mark.parametrize("command", ["run", "validate", "sweep"])
def test_strict_exits_2_with_one_line_and_writes_nothing(command, tmp_path, capsys):
    """--strict with a slipped value: exit 2, one error line naming the field, no output."""
    path = _scenario_file(tmp_path)
    out = tmp_path / "out"
    args = [command, str(path), "--set", SLIP_DEADLINE, "--strict"]
    if command != "validate":
        args += ["--out", str(out), "--quiet"]
    code = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("wflsim: error: run.deadline_s: 20 s is above")
    assert not out.exists()


@pytest.mark.parametrize("command", ["run", "validate"])
def test_without_strict_the_command_goes_on_with_one_warning_line(command, tmp_path, capsys):
    """Without --strict the command succeeds and stderr holds exactly the warning line."""
    path = _scenario_file(tmp_path)
    out = tmp_path / "out"
    args = [command, str(path), "--set", SLIP_DEADLINE]
    if command == "run":
        args += ["--out", str(out), "--quiet"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [SLIP_LINE]
    assert ("completed" if command == "run" else "ok") in captured.out
    assert out.exists() == (command == "run")


def test_a_sweep_prints_each_distinct_warning_once_and_runs(tmp_path, capsys):
    """Two seeds with the same slip run, and stderr holds the warning line once (the points do
    not warn again when they run)."""
    path = _scenario_file(tmp_path)
    out = tmp_path / "sweep"
    args = ["sweep", str(path), "--seeds", "0-1", "--set", SLIP_DEADLINE]
    assert main([*args, "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr().err.strip().splitlines() == [SLIP_LINE]
    assert len(list(out.glob("seed=*"))) == 2
