"""A study's own claims ([[claims]]): their validation, their verdicts on hand-built tables
against hand computations, and their place in the report, claims.csv and compare()."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from conftest import base_scenario
from wflsim.analysis import claims as C
from wflsim.analysis.hypotheses import check_claim, claims_from_text
from wflsim.app.cli import main as cli_main
from wflsim.app.manifest import fingerprint
from wflsim.app.run import prepare_scenario
from wflsim.sim.config.claims import CLAIM_METRICS, ClaimConfig
from wflsim.sim.config.loading import parse_claims, scenario_text, validate_scenario
from wflsim.sim.errors import ScenarioError


def claim(**kw: Any) -> ClaimConfig:
    """A claim: fedadam has a higher final accuracy than fedavg, with ``kw`` changed."""
    table = {
        "name": "c",
        "metric": "final_accuracy",
        "better": "higher",
        "a": {"strategy.name": "fedadam"},
        "b": {"strategy.name": "fedavg"},
        **kw,
    }
    return parse_claims({"claims": [table]})[0]


def study(
    values: dict[str, list[float]], noise: dict[str, float] | None = None, metric="final_accuracy"
):
    """Summary rows and fields of runs: per strategy its per-seed metric values (seed i gets
    the i-th); ``noise``: each strategy's runs get this ``network.noise_dbm`` (else -104)."""
    rows, fields = [], {}
    for strat, vals in values.items():
        for seed, v in enumerate(vals):
            for dbm in [(noise or {}).get(strat, -104.0)]:
                run = f"{strat}_{dbm:g}_s{seed}"
                rows.append({"run": run, "seed": seed, metric: v})
                fields[run] = {
                    "strategy.name": strat.split("@")[0],
                    "network.noise_dbm": dbm,
                    "seed": seed,
                    "name": "x",
                }
    return pd.DataFrame(rows), fields


def _ev() -> pd.DataFrame:
    return pd.DataFrame(
        columns=["run", "slot", "time_s", "accuracy", "cum_energy_j", "cum_latency_s"]
    )


def test_a_claim_holds_when_the_paired_interval_lies_above_zero():
    """Three seeds, a - b = 0.05, 0.06, 0.07: holds, and the evidence gives scipy's interval."""
    summary, fields = study({"fedadam": [0.95, 0.96, 0.97], "fedavg": [0.90, 0.90, 0.90]})
    v, m = check_claim(claim(), summary, _ev(), fields)
    assert v.status == C.HOLDS
    d = np.array([0.05, 0.06, 0.07])
    lo, hi = sps.t.interval(0.95, 2, loc=d.mean(), scale=sps.sem(d))
    assert m[0].low == pytest.approx(lo) and m[0].high == pytest.approx(hi)
    assert f"[{lo:.3g}, {hi:.3g}]" in v.evidence


def test_a_claim_does_not_hold_when_the_interval_lies_on_the_other_side():
    """fedadam lower in every seed by about 0.05: does not hold."""
    summary, fields = study({"fedadam": [0.85, 0.86, 0.84], "fedavg": [0.90, 0.91, 0.90]})
    assert check_claim(claim(), summary, _ev(), fields)[0].status == C.FAILS


def test_an_inconclusive_claim_says_the_seeds_it_would_take():
    """Differences +0.02, -0.01, +0.03 straddle zero: inconclusive, 2 of 3 seeds the claimed
    way, and the seed count that the brute-force search over n finds."""
    summary, fields = study({"fedadam": [0.92, 0.89, 0.93], "fedavg": [0.90, 0.90, 0.90]})
    v, _ = check_claim(claim(), summary, _ev(), fields)
    assert v.status == C.INCONCLUSIVE
    d = np.array([0.02, -0.01, 0.03])
    need = next(
        n
        for n in range(2, 10_000)
        if d.mean() - sps.t.ppf(0.975, n - 1) * d.std(ddof=1) / np.sqrt(n) > 0
    )
    assert "2 of 3 seeds point the claimed way" in v.evidence
    assert f"{need} seeds with this mean and spread would exclude zero" in v.evidence


def test_the_margin_moves_the_threshold():
    """a - b = 0.05 in every seed: holds with margin 0.04, does not hold with margin 0.06."""
    summary, fields = study({"fedadam": [0.95, 0.951, 0.949], "fedavg": [0.90, 0.90, 0.90]})
    assert check_claim(claim(margin=0.04), summary, _ev(), fields)[0].status == C.HOLDS
    v, _ = check_claim(claim(margin=0.06), summary, _ev(), fields)
    assert v.status == C.FAILS and "the other side of the margin (0.06)" in v.evidence


def test_a_lower_claim_reads_the_other_side():
    """better = lower on energy: a below b in every seed holds."""
    summary, fields = study(
        {"fedadam": [1.0, 1.1, 0.9], "fedavg": [2.0, 2.1, 2.0]}, metric="total_energy_j"
    )
    c = claim(metric="total_energy_j", better="lower")
    assert check_claim(c, summary, _ev(), fields)[0].status == C.HOLDS


def test_a_field_both_sides_vary_splits_the_claim_into_contexts():
    """Swept at two noise levels, the claim holds at one and fails at the other: the claim
    does not hold, and the evidence names each context."""
    s1, f1 = study({"fedadam": [0.95, 0.96, 0.97], "fedavg": [0.90, 0.90, 0.90]})
    s2, f2 = study(
        {"fedadam": [0.80, 0.81, 0.79], "fedavg": [0.90, 0.91, 0.90]},
        noise={"fedadam": -94.0, "fedavg": -94.0},
    )
    summary, fields = pd.concat([s1, s2]), {**f1, **f2}
    v, m = check_claim(claim(), summary, _ev(), fields)
    assert v.status == C.FAILS
    assert "network.noise_dbm=-104" in v.evidence and "network.noise_dbm=-94" in v.evidence
    assert sorted(x.status for x in m) == sorted([C.HOLDS, C.FAILS])


def make(rows: list[tuple[dict[str, Any], list[float]]], metric: str = "final_accuracy"):
    """Summary rows and fields of runs: per configuration (its fields) its per-seed values."""
    summary, fields = [], {}
    for i, (conf, vals) in enumerate(rows):
        for seed, v in enumerate(vals):
            run = f"r{i}_s{seed}"
            summary.append({"run": run, "seed": seed, metric: v})
            fields[run] = {**conf, "seed": seed}
    return pd.DataFrame(summary), fields


def test_a_field_the_other_side_holds_at_one_value_is_matched_not_pooled():
    """fedadam at deadline 1 and 2, fedavg only at 1: fedadam at 2 is not compared with fedavg
    at 1; it is named as having no counterpart."""
    summary, fields = make(
        [
            ({"strategy.name": "fedadam", "run.deadline_s": 1.0}, [0.80, 0.81, 0.79]),
            ({"strategy.name": "fedadam", "run.deadline_s": 2.0}, [0.99, 0.99, 0.99]),
            ({"strategy.name": "fedavg", "run.deadline_s": 1.0}, [0.90, 0.91, 0.90]),
        ]
    )
    v, m = check_claim(claim(), summary, _ev(), fields)
    assert v.status == C.FAILS and len(m) == 1
    assert "Not compared" in v.evidence and "run.deadline_s=2" in v.evidence


def test_a_field_only_one_side_has_splits_that_side_against_the_whole_other():
    """AirComp's power rule exists only on a's runs: each rule against all of b."""
    summary, fields = make(
        [
            ({"uplink.mode": "aircomp", "uplink.power_control": "controller"}, [0.95, 0.96, 0.97]),
            ({"uplink.mode": "aircomp", "uplink.power_control": "truncated"}, [0.94, 0.95, 0.96]),
            ({"uplink.mode": "ofdma", "uplink.power_control": None}, [0.90, 0.90, 0.90]),
        ]
    )
    c = claim(a={"uplink.mode": "aircomp"}, b={"uplink.mode": "ofdma"})
    v, m = check_claim(c, summary, _ev(), fields)
    assert v.status == C.HOLDS and len(m) == 2 and all(x.n == 3 for x in m)


def test_a_field_one_selector_names_holds_for_the_other_side_too():
    """a = fedadam at deadline 1 against b = fedavg compares with fedavg at deadline 1 only
    (pooled with deadline 2 the claim would wrongly hold)."""
    summary, fields = make(
        [
            ({"strategy.name": "fedadam", "run.deadline_s": 1.0}, [0.93, 0.93, 0.93]),
            ({"strategy.name": "fedavg", "run.deadline_s": 1.0}, [0.95, 0.95, 0.95]),
            ({"strategy.name": "fedavg", "run.deadline_s": 2.0}, [0.85, 0.85, 0.85]),
        ]
    )
    c = claim(a={"strategy.name": "fedadam", "run.deadline_s": 1.0})
    assert check_claim(c, summary, _ev(), fields)[0].status == C.FAILS


def test_an_integer_and_a_float_of_one_value_are_one_context():
    """-104 (a sweep's grid value) and -104.0 (a resolved scenario) agree."""
    summary, fields = make(
        [
            ({"strategy.name": "fedadam", "network.noise_dbm": -104}, [0.95, 0.96, 0.97]),
            ({"strategy.name": "fedadam", "network.noise_dbm": -94}, [0.95, 0.96, 0.97]),
            ({"strategy.name": "fedavg", "network.noise_dbm": -104.0}, [0.90, 0.90, 0.90]),
            ({"strategy.name": "fedavg", "network.noise_dbm": -94.0}, [0.90, 0.90, 0.90]),
        ]
    )
    v, m = check_claim(claim(), summary, _ev(), fields)
    assert v.status == C.HOLDS and len(m) == 2


def test_a_context_that_cannot_be_measured_keeps_the_claim_from_holding():
    """At -94 dBm the sides share no seed: the claim holds at -104 only, so it is
    inconclusive, and the evidence names the context not measured."""
    summary, fields = make(
        [
            ({"strategy.name": "fedadam", "network.noise_dbm": -104.0}, [0.95, 0.96, 0.97]),
            ({"strategy.name": "fedavg", "network.noise_dbm": -104.0}, [0.90, 0.90, 0.90]),
            ({"strategy.name": "fedadam", "network.noise_dbm": -94.0}, [0.5]),
            ({"strategy.name": "fedavg", "network.noise_dbm": -94.0}, [np.nan]),
        ]
    )
    v, _ = check_claim(claim(), summary, _ev(), fields)
    assert v.status == C.INCONCLUSIVE and "Not measured: network.noise_dbm=-94" in v.evidence


def test_where_restricts_both_sides():
    """where noise = -104 leaves out the context that fails."""
    s1, f1 = study({"fedadam": [0.95, 0.96, 0.97], "fedavg": [0.90, 0.90, 0.90]})
    s2, f2 = study(
        {"fedadam": [0.80, 0.81, 0.79], "fedavg": [0.90, 0.91, 0.90]},
        noise={"fedadam": -94.0, "fedavg": -94.0},
    )
    c = claim(where={"network.noise_dbm": -104.0})
    assert check_claim(c, pd.concat([s1, s2]), _ev(), {**f1, **f2})[0].status == C.HOLDS


@pytest.mark.parametrize(
    "kw, why",
    [
        ({"a": {"strategy.name": "scaffold"}}, "no run of scaffold"),
        ({"a": {"uplink.mode": "ofdma"}}, "no run has the field uplink.mode"),
        ({"metric": "best_accuracy"}, "no run of these has best_accuracy"),
    ],
)
def test_a_claim_the_runs_cannot_test_is_not_measurable_with_the_reason(kw, why):
    """A side without runs, a field no run has, a metric no run measured: not measurable."""
    summary, fields = study({"fedadam": [0.95, 0.96], "fedavg": [0.90, 0.90]})
    summary["best_accuracy"] = np.nan
    v, _ = check_claim(claim(**kw), summary, _ev(), fields)
    assert v.status == C.NOT_MEASURABLE and why in v.evidence


def test_one_seed_decides_by_its_sign_with_a_warning():
    """With one seed the direction decides, and the verdict says it is drawn from one seed."""
    summary, fields = study({"fedadam": [0.95], "fedavg": [0.90]})
    v, _ = check_claim(claim(), summary, _ev(), fields)
    assert v.status == C.HOLDS and v.warning == C.ONE_SEED_WARNING


def _evaluations(curves: dict[str, list[tuple[float, float]]]) -> pd.DataFrame:
    """Evaluations: per run, (cumulative energy = latency, accuracy) points."""
    rows = []
    for run, points in curves.items():
        for i, (x, acc) in enumerate(points):
            rows.append(
                {"run": run, "slot": i, "time_s": x, "accuracy": acc,
                 "cum_energy_j": x, "cum_latency_s": x}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_accuracy_at_the_same_energy_interpolates_at_the_smaller_reach():
    """fedadam reaches 10 J, fedavg 20 J: both read at 10 J, linearly interpolated (hand)."""
    summary, fields = study({"fedadam": [0.0, 0.0], "fedavg": [0.0, 0.0]})
    ev = _evaluations(
        {
            "fedadam_-104_s0": [(0, 0.1), (10, 0.9)],
            "fedavg_-104_s0": [(0, 0.1), (20, 0.9)],
            "fedadam_-104_s1": [(0, 0.1), (10, 0.8)],
            "fedavg_-104_s1": [(0, 0.1), (20, 0.9)],
        }
    )
    _, m = check_claim(claim(metric="accuracy_at_same_energy"), summary, ev, fields)
    # seed 0: 0.9 - 0.5 = 0.4; seed 1: 0.8 - 0.5 = 0.3
    assert m[0].mean == pytest.approx(0.35)


def test_time_to_accuracy_reads_the_first_evaluation_at_the_target():
    """fedadam reaches 0.8 at 5 s, fedavg at 12 s and 11 s: differences -7 and -6 s."""
    summary, fields = study({"fedadam": [0.0, 0.0], "fedavg": [0.0, 0.0]})
    ev = _evaluations(
        {
            "fedadam_-104_s0": [(0, 0.1), (5, 0.85), (9, 0.7)],
            "fedavg_-104_s0": [(0, 0.1), (12, 0.8)],
            "fedadam_-104_s1": [(0, 0.1), (5, 0.8)],
            "fedavg_-104_s1": [(0, 0.1), (11, 0.81)],
        }
    )
    c = claim(metric="time_to_accuracy", target=0.8, better="lower")
    v, m = check_claim(c, summary, ev, fields)
    assert m[0].mean == pytest.approx(-6.5)
    assert v.status == C.HOLDS


def test_a_censored_claimed_side_cannot_hold():
    """fedadam never reaches the target (its end value is only a bound) in one seed: the
    difference is biased toward the claim, so the verdict is at best inconclusive."""
    summary, fields = study({"fedadam": [0.0, 0.0, 0.0], "fedavg": [0.0, 0.0, 0.0]})
    ev = _evaluations(
        {
            "fedadam_-104_s0": [(0, 0.1), (5, 0.85)],
            "fedavg_-104_s0": [(0, 0.1), (30, 0.8)],
            "fedadam_-104_s1": [(0, 0.1), (5, 0.81)],
            "fedavg_-104_s1": [(0, 0.1), (31, 0.81)],
            "fedadam_-104_s2": [(0, 0.1), (6, 0.5)],
            "fedavg_-104_s2": [(0, 0.1), (32, 0.8)],
        }
    )
    c = claim(metric="time_to_accuracy", target=0.8, better="lower")
    v, _ = check_claim(c, summary, ev, fields)
    assert v.status == C.INCONCLUSIVE
    assert "seed 2: fedadam never reached 0.8" in v.evidence


@pytest.mark.parametrize("better", ["lower", "higher"])
def test_a_censored_other_side_cannot_make_the_claim_fail(better):
    """The side the claim needs larger never reaches the target (its end value, 50 s, is only
    a lower bound): the difference is biased against the claim, so it cannot "not hold"."""
    summary, fields = study({"fedadam": [0.0, 0.0, 0.0], "fedavg": [0.0, 0.0, 0.0]})
    slow, fast = ("fedavg", "fedadam") if better == "lower" else ("fedadam", "fedavg")
    curves = {}
    for s in range(3):
        curves[f"{fast}_-104_s{s}"] = [(0, 0.1), (100 + s, 0.85)]
        curves[f"{slow}_-104_s{s}"] = [(0, 0.1), (50, 0.5)]
    c = claim(metric="time_to_accuracy", target=0.8, better=better)
    v, _ = check_claim(c, summary, _evaluations(curves), fields)
    assert v.status == C.INCONCLUSIVE and "biased against the claim" in v.evidence


def test_neither_side_reaching_the_target_is_said_so():
    """Neither run of any seed reaches the target: not measurable, and the reason says it."""
    summary, fields = study({"fedadam": [0.0, 0.0], "fedavg": [0.0, 0.0]})
    curves = {f"{n}_-104_s{s}": [(0, 0.1), (9, 0.5)] for n in ("fedadam", "fedavg") for s in (0, 1)}
    c = claim(metric="time_to_accuracy", target=0.8, better="lower")
    v, _ = check_claim(c, summary, _evaluations(curves), fields)
    assert v.status == C.NOT_MEASURABLE and "neither fedadam nor fedavg reached 0.8" in v.evidence


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"metric": "speed"}, "claims[0].metric"),
        ({"better": "more"}, "claims[0].better"),
        ({"metric": "time_to_accuracy"}, "claims[0]"),
        ({"target": 0.9}, "claims[0]"),
        ({"a": {"seed": 1}}, "claims[0].a"),
        ({"a": {}}, "claims[0].a"),
        ({"b": {"strategy.name": "fedadam"}}, "claims[0]"),
        ({"margin": -1.0}, "claims[0].margin"),
        ({"where": {"strategy.name": "fedavg"}}, "claims[0]"),
        ({"colour": "red"}, "claims[0].colour"),
    ],
)
def test_a_bad_claim_is_refused_naming_its_field(kw, field):
    """Unknown metric, bad direction, a target missing or misplaced, a seed selector, empty or
    equal sides, a negative margin, where overlapping a side, an unknown key: refused."""
    with pytest.raises(ScenarioError) as err:
        claim(**kw)
    assert err.value.one_line().startswith(field)


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1, max_size=30).filter(lambda s: s not in CLAIM_METRICS))
def test_any_other_metric_name_is_refused(name):
    """No text but the listed metrics is taken as a metric."""
    with pytest.raises(ScenarioError):
        claim(metric=name)


def test_claims_are_not_part_of_the_run_fingerprint():
    """A scenario with claims resolves and fingerprints as the same scenario without them."""
    plain = base_scenario()
    with_claims = {**plain, "claims": [{"metric": "final_accuracy", "better": "higher",
                                        "a": {"scheme.name": "x"}, "b": {"scheme.name": "y"}}]}  # fmt: skip
    a, b = validate_scenario(plain), validate_scenario(with_claims)
    assert len(b.claims) == 1
    assert a.model_dump(mode="json") == b.model_dump(mode="json")
    fa = fingerprint(prepare_scenario(a))
    fb = fingerprint(prepare_scenario(b))
    assert fa["scenario_sha256"] == fb["scenario_sha256"]


def test_unnamed_claims_are_numbered_and_names_must_differ():
    """Claims without a name are "claim 1", "claim 2"; two equal names are refused."""
    text = (
        '[[claims]]\nmetric = "final_accuracy"\nbetter = "higher"\n'
        'a = { "scheme.name" = "x" }\nb = { "scheme.name" = "y" }\n'
    )
    assert [c.name for c in claims_from_text(text * 2)] == ["claim 1", "claim 2"]
    with pytest.raises(ScenarioError, match="two claims are named"):
        claims_from_text((text + 'name = "k"\n') * 2)


# ------------------------------------------------------------------------ report and compare


@pytest.fixture(scope="module")
def noise_sweep(tmp_path_factory) -> Path:
    """A network-only sweep: fixed_power at two receiver noise levels, two seeds."""
    out = tmp_path_factory.mktemp("noise") / "sweep"
    sc = tmp_path_factory.mktemp("sc") / "s.toml"
    table = base_scenario(
        run={"frames": 1, "slots_per_frame": 3, "deadline_s": 0.2},
        network={"num_devices": 6},
        scheme={"name": "fixed_power"},
    )
    sc.write_text(
        scenario_text(table)
        + '\n[[claims]]\nname = "noise_costs_outage"\nmetric = "outage_rate"\nbetter = "higher"\n'
        'a = { "network.noise_dbm" = -70.0 }\nb = { "network.noise_dbm" = -104.0 }\n',
        encoding="utf-8",
    )
    rc = cli_main(
        ["sweep", str(sc), "--grid", "network.noise_dbm=-104,-70", "--seeds", "0-1",
         "--out", str(out), "--quiet"]
    )  # fmt: skip
    assert rc == 0
    return out


def test_the_report_gives_the_sweeps_own_claims_a_verdict(noise_sweep, tmp_path):
    """The claim of the sweep's scenario file has a verdict in claims.csv, report.md and
    report.html, its figure is drawn, and the page says what the study varies."""
    from wflsim.analysis.report import write_report

    page = write_report(noise_sweep, tmp_path / "r")
    table = pd.read_csv(tmp_path / "r" / "claims.csv", dtype=str, keep_default_na=False)
    row = table[table["key"] == "noise_costs_outage"].iloc[0]
    assert row["source"] == "study" and row["verdict"] == C.HOLDS  # outage 0.06 vs 1.0
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert f"**{row['verdict']}**" in md and "## The study's claims" in md
    assert "network.noise_dbm (-104, -70)" in md
    assert (tmp_path / "r" / "figures" / "study_claims.png").is_file()
    text = page.read_text(encoding="utf-8")
    assert re.search(
        r"noise_dbm=-70 has a higher outage_rate[^<]*</td><td><span class=\"ok\">holds", text
    )


def test_the_report_checks_a_claims_file_given_after_the_runs(noise_sweep, tmp_path):
    """wflsim report --claims FILE checks that file's claims instead of the scenario's."""
    f = tmp_path / "claims.toml"
    f.write_text(
        '[[claims]]\nname = "later"\nmetric = "total_energy_j"\nbetter = "lower"\n'
        'a = { "network.noise_dbm" = -104.0 }\nb = { "network.noise_dbm" = -70.0 }\n',
        encoding="utf-8",
    )
    assert (
        cli_main(["report", str(noise_sweep), "--out", str(tmp_path / "r"), "--claims", str(f)])
        == 0
    )
    table = pd.read_csv(tmp_path / "r" / "claims.csv")
    study = table[table["source"] == "study"]
    assert list(study["key"]) == ["later"] and list(study["verdict"]) == [C.HOLDS]


def test_a_bad_claims_file_exits_2_and_writes_nothing(noise_sweep, tmp_path, capsys):
    """A claims file with a bad metric: exit 2, one line naming the claim's field, no report."""
    f = tmp_path / "claims.toml"
    f.write_text('[[claims]]\nmetric = "speed"\nbetter = "higher"\na = {x = 1}\nb = {x = 2}\n')
    out = tmp_path / "r"
    assert cli_main(["report", str(noise_sweep), "--out", str(out), "--claims", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "claims[0].metric" in err[0]
    assert not out.exists()


def test_the_papers_claims_are_left_out_without_the_papers_scheme(noise_sweep, tmp_path):
    """A study with one scheme, not the paper's: the page checks none of the paper's claims
    and says why; claims.csv still gives each with its verdict."""
    from wflsim.analysis.report import write_report

    write_report(noise_sweep, tmp_path / "r")
    table = pd.read_csv(tmp_path / "r" / "claims.csv")
    assert (table["source"] == "paper").sum() == len(C.CLAIMS)
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "so the page checks none of them" in md
    assert not any(f"## {c.section}" in md for c in C.CLAIMS)


def test_compare_gives_its_claims_verdicts(tmp_path):
    """compare(claims=...) selects by variant label and returns the verdicts in attrs."""
    import wflsim

    table = base_scenario(
        run={"frames": 1, "slots_per_frame": 3, "deadline_s": 0.2},
        network={"num_devices": 6},
        scheme={"name": "fixed_power"},
    )
    result = wflsim.compare(
        table,
        {"quiet": {"network.noise_dbm": -104.0}, "noisy": {"network.noise_dbm": -70.0}},
        seeds=[0, 1],
        claims=[
            {
                "name": "n",
                "metric": "outage_rate",
                "better": "higher",
                "a": {"variant": "noisy"},
                "b": {"variant": "quiet"},
            }
        ],  # fmt: skip
        progress=False,
    )
    verdicts = result.attrs["claims"]
    assert list(verdicts["key"]) == ["n"]
    assert verdicts["verdict"].iloc[0] == C.HOLDS
    assert "noisy" in verdicts["evidence"].iloc[0]


def test_compare_refuses_a_bad_claim_before_running(tmp_path):
    """A claim with a bad field is refused before any run starts."""
    import wflsim

    with pytest.raises(ScenarioError, match=r"claims\[0\]\.better"):
        wflsim.compare(
            base_scenario(), {"a": {}, "b": {"seed": 3}}, seeds=[0],
            claims=[{"metric": "outage_rate", "better": "up", "a": {"variant": "a"},
                     "b": {"variant": "b"}}],
            out=tmp_path / "never",
        )  # fmt: skip
    assert not (tmp_path / "never").exists()


def test_every_claim_metric_is_a_summary_column_or_derived(tmp_path):
    """The summary metrics a claim may name are exactly the report summary's numeric columns."""
    from test_tidy import write_synthetic_run
    from wflsim.analysis import stats, tidy
    from wflsim.sim.config.claims import DERIVED_METRICS, SUMMARY_METRICS

    run = write_synthetic_run(tmp_path / "run")
    data = tidy.load(run)
    s = stats.summary(data.device_slots, data.slots, data.evaluations, runs=data.runs)
    numeric = {
        c for c in s.columns if pd.api.types.is_float_dtype(s[c]) and c not in tidy.ID_COLUMNS
    }
    assert set(SUMMARY_METRICS) == numeric - {"V", "energy_budget_mean_j"}
    assert not set(DERIVED_METRICS) & set(s.columns)


def test_the_report_draws_what_the_study_varies(noise_sweep, tmp_path):
    """The study's figure has one row of panels for its one varied field, with the field's
    two values along x, and report.md shows it in the study's section."""
    from wflsim.analysis.report import report_figures

    fig = report_figures(noise_sweep)["study_axes"]
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["-104", "-70"]
    assert {ax.get_xlabel() for ax in fig.axes} == {"network.noise_dbm"}


def test_the_axes_figure_refuses_runs_that_differ_only_in_seed():
    """Without a varied field there is nothing to draw: InsufficientData."""
    from wflsim.analysis.figures import InsufficientData, axes_figure

    with pytest.raises(InsufficientData, match="only in their seed"):
        axes_figure(pd.DataFrame({"run": ["a"], "seed": [0], "final_accuracy": [0.9]}))


def test_a_sweep_result_gives_its_scenarios_claims_verdicts(noise_sweep):
    """load_sweep(folder).claims() checks the claims of the sweep's scenario file."""
    import wflsim

    table = wflsim.load_sweep(noise_sweep).claims()
    assert list(table["key"]) == ["noise_costs_outage"]
    assert table["verdict"].iloc[0] == C.HOLDS
