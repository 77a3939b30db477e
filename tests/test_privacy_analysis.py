"""Privacy in the analysis: the privacy rows of a hand-built trace against hand-computed values,
the summary's privacy columns, the report's "Privacy" section and claims on epsilon.

``write_privacy_run`` adds to :func:`test_tidy.write_synthetic_run`'s trace (2 devices, slots
0-3 ending at 1, 2, 3.5 and 4.5 s; device 0 aggregated in every slot, device 1 in slots 1 and
3) the privacy rows of its applied updates, times ``eps_scale``:

====  ===================  =================================================  ==========
slot  epsilon (dev 0 | 1)  dp_clip: norm, clipped (dev 0 | dev 1)              noise std
====  ===================  =================================================  ==========
0     0.5 | -              2.0 yes | -                                        0.5
1     0.8 | 0.6            0.5 no  | 3.0 yes                                  0.4
2     1.0 | -              0.9 no  | -                                        0.4
3     1.2 | 0.9            1.5 yes | 0.2 no                                   0.3
====  ===================  =================================================  ==========

and device 1 stops for its spent budget after slot 3 (one ``dp_budget_spent`` row). By hand:
epsilon after each slot, max over devices 0.5, 0.8, 1.0, 1.2 and mean (over both devices, 0
before an update) 0.25, 0.7, 0.8, 1.05; clipped per step 1, 0.5, 0, 0.5; over the run 3 of 6
updates clipped, mean noise std (0.5 + 2 x 0.4 + 0.4 + 2 x 0.3) / 6 = 2.3 / 6.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_tidy import write_synthetic_run
from wflsim.analysis import claims as C
from wflsim.analysis import hypotheses, privacy, stats, tidy
from wflsim.analysis.report import report_figures, write_report
from wflsim.sim.config.claims import parse_claims

END_S = [1.0, 2.0, 3.5, 4.5]
#: (slot, device, epsilon, update norm, clipped, noise std) per applied update
UPDATES = [
    (0, 0, 0.5, 2.0, True, 0.5),
    (1, 0, 0.8, 0.5, False, 0.4),
    (1, 1, 0.6, 3.0, True, 0.4),
    (2, 0, 1.0, 0.9, False, 0.4),
    (3, 0, 1.2, 1.5, True, 0.3),
    (3, 1, 0.9, 0.2, False, 0.3),
]
CENTRAL = {"mechanism": "central", "noise_multiplier": 1.0, "clip_norm": 1.0}
LOCAL = {"mechanism": "local", "noise_multiplier": 0.5, "clip_norm": 1.0}


def write_privacy_run(
    out: Path, *, config: dict | None = None, eps_scale: float = 1.0, **kw
) -> Path:
    """:func:`write_synthetic_run` with ``[privacy]`` (``config``, central by default) and the
    privacy rows of the table above (epsilons times ``eps_scale``)."""
    run = write_synthetic_run(out, extra={"privacy": config or CENTRAL}, **kw)
    path = run / "events.parquet"
    table = pq.read_table(path)
    meta = table.schema.metadata
    table = table.set_column(
        table.schema.get_field_index("event"), "event", pc.cast(table["event"], pa.string())
    )
    rows: dict[str, list] = {"event": [], "time_s": [], "frame": [], "slot": [], "device": []}
    dp = {c: [] for c in ("dp_noise_multiplier", "dp_epsilon", "dp_update_norm", "dp_clip_norm")}
    dp |= {"dp_clipped": [], "dp_noise_std": []}

    def add(event: str, slot: int, device: int, **values: object) -> None:
        for c, v in (("event", event), ("time_s", END_S[slot]), ("frame", slot // 2)):
            rows[c].append(v)
        rows["slot"].append(slot)
        rows["device"].append(device)
        for c in dp:
            dp[c].append(values.get(c))

    for slot, device, eps, norm, clipped, std in UPDATES:
        add("privacy", slot, device, dp_noise_multiplier=1.0, dp_epsilon=eps * eps_scale)
        add(
            "dp_clip", slot, device, dp_update_norm=norm, dp_clip_norm=1.0, dp_clipped=clipped,
            dp_noise_std=std,
        )  # fmt: skip
    add("dp_budget_spent", 3, 1)
    types = {f.name: f.type for f in table.schema}
    extra = pa.table(
        {c: pa.array(v, type=types.get(c)) for c, v in rows.items()}
        | {c: pa.array(v, type=pa.bool_() if c == "dp_clipped" else pa.float64())
           for c, v in dp.items()},
    )  # fmt: skip
    both = pa.concat_tables([table, extra], promote_options="permissive")
    pq.write_table(both.replace_schema_metadata(meta), path)
    return run


@pytest.fixture(scope="module")
def private_run(tmp_path_factory) -> Path:
    """One hand-built run with [privacy]."""
    return write_privacy_run(tmp_path_factory.mktemp("dp") / "run")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    """A study of central DP, local DP and no DP, 3 seeds each (local spends twice the
    epsilon of central, seed by seed)."""
    root = tmp_path_factory.mktemp("mixed") / "study"
    for seed, wobble in enumerate([1.0, 1.1, 0.9]):
        write_privacy_run(root / f"central_{seed}", seed=seed, eps_scale=wobble)
        write_privacy_run(root / f"local_{seed}", config=LOCAL, seed=seed, eps_scale=2 * wobble)
        write_synthetic_run(root / f"plain_{seed}", seed=seed)
    return root


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    """Two hand-built runs without [privacy]."""
    root = tmp_path_factory.mktemp("plain") / "study"
    write_synthetic_run(root / "a", scheme="two_timescale")
    write_synthetic_run(root / "b", scheme="ideal", scale=2.0)
    return root


def test_load_reads_the_privacy_rows(private_run):
    """tidy.load keeps each privacy row with the run's identifying columns."""
    rows = tidy.load(private_run).privacy
    assert len(rows.steps) == 6 and len(rows.clips) == 6 and len(rows.stops) == 1
    assert rows.steps["dp_epsilon"].tolist() == [u[2] for u in UPDATES]
    assert set(rows.steps["scheme"]) == {"two_timescale"}


def test_each_devices_final_epsilon(private_run):
    """A device's final epsilon is its last (largest) one; its updates are counted."""
    eps = privacy.device_epsilons(tidy.load(private_run).privacy.steps)
    assert eps["epsilon"].tolist() == [1.2, 0.9]
    assert eps["updates"].tolist() == [4, 2]


def test_epsilon_over_time_against_hand_values(private_run):
    """Per slot: the max and the mean over both devices (0 before an update) of epsilon."""
    data = tidy.load(private_run)
    t = privacy.epsilon_over_time(data.privacy.steps, data.slots, data.runs)
    np.testing.assert_allclose(t["epsilon_max"], [0.5, 0.8, 1.0, 1.2])
    np.testing.assert_allclose(t["epsilon_mean"], [0.25, 0.7, 0.8, 1.05])
    np.testing.assert_allclose(t["end_s"], END_S)


def test_clipped_fraction_per_step_against_hand_values(private_run):
    """Per server step: the share of its updates that were clipped and their noise."""
    steps = privacy.clipped_fraction(tidy.load(private_run).privacy.clips)
    np.testing.assert_allclose(steps["clipped_fraction"], [1.0, 0.5, 0.0, 0.5])
    np.testing.assert_allclose(steps["noise_std"], [0.5, 0.4, 0.4, 0.3])
    np.testing.assert_allclose(steps["time_s"], END_S)


def test_summary_has_the_privacy_measures(private_run):
    """The summary's epsilon max and mean, clipped share, mean noise and stopped devices."""
    data = tidy.load(private_run)
    s = stats.summary(
        data.device_slots, data.slots, data.evaluations, runs=data.runs, privacy=data.privacy
    ).iloc[0]
    assert s["epsilon_max"] == pytest.approx(1.2)
    assert s["epsilon_mean"] == pytest.approx(1.05)
    assert s["dp_clipped_fraction"] == pytest.approx(0.5)
    assert s["dp_noise_std"] == pytest.approx(2.3 / 6)
    assert s["dp_stopped_devices"] == 1


def test_summary_of_runs_without_privacy_is_nan(mixed):
    """Runs without [privacy] get NaN privacy measures next to those with it, no error."""
    data = tidy.load(mixed)
    s = stats.summary(
        data.device_slots, data.slots, data.evaluations, runs=data.runs, privacy=data.privacy
    ).set_index("run")
    assert s.filter(like="plain", axis=0)[privacy.SUMMARY_COLUMNS].isna().all().all()
    assert s.filter(like="central", axis=0)["epsilon_max"].notna().all()


def test_duckdb_view_gives_the_same_final_epsilon(mixed):
    """The DuckDB view over the traces gives each run's largest epsilon as the summary has it."""
    import duckdb

    con = duckdb.connect()
    tidy.duckdb_view(con, mixed)
    sql = "SELECT run, max(dp_epsilon) AS e FROM events WHERE event = 'privacy' GROUP BY run"
    by_sql = con.execute(sql).df().set_index("run")["e"].sort_index()
    data = tidy.load(mixed)
    by_pandas = privacy.privacy_summary(data.privacy, data.runs).set_index("run")["epsilon_max"]
    pd.testing.assert_series_equal(by_sql, by_pandas.dropna().sort_index(), check_names=False)


def test_summary_without_the_privacy_rows_is_nan_not_zero(private_run):
    """A summary not given the privacy rows says nothing of epsilon (NaN), not 0."""
    data = tidy.load(private_run)
    s = stats.summary(data.device_slots, data.slots, data.evaluations, runs=data.runs)
    assert s[privacy.SUMMARY_COLUMNS].isna().all().all()


def test_a_privacy_run_before_any_update_has_epsilon_zero(tmp_path):
    """A run with [privacy] whose trace has no privacy row yet has spent nothing."""
    run = write_synthetic_run(tmp_path / "r", extra={"privacy": CENTRAL})
    data = tidy.load(run)
    s = privacy.privacy_summary(data.privacy, data.runs).iloc[0]
    assert s["epsilon_max"] == 0.0 and s["epsilon_mean"] == 0.0
    assert np.isnan(s["dp_clipped_fraction"])


def test_runs_table_labels_the_privacy_settings(mixed):
    """The runs table names each run's mechanism and settings; the variant tells them apart."""
    runs = tidy.runs_table(mixed).set_index("run")
    assert runs.loc["central_0", "privacy"] == "central DP (z 1; C 1)"
    assert runs.loc["local_0", "dp_mechanism"] == "local DP"
    assert runs.loc["plain_0", "privacy"] == tidy.NO_PRIVACY
    assert runs.loc["local_0", "variant"] == "local DP (z 0.5; C 1)"


def test_report_has_a_privacy_section_with_privacy_runs(mixed, tmp_path):
    """A study with [privacy] runs gets the Privacy section, its figures and privacy.csv."""
    page = write_report(mixed, tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Privacy" in md and 'id="privacy"' in page.read_text()
    for slug in ("privacy_tradeoffs", "epsilon_evolution"):
        assert (tmp_path / "rep" / "figures" / f"{slug}.png").is_file()
    table = pd.read_csv(tmp_path / "rep" / "privacy.csv")
    assert sorted(table["epsilon_max"].round(6)) == pytest.approx([1.2, 2.4])


@pytest.mark.slow
def test_report_without_privacy_runs_has_no_privacy_section(plain, tmp_path):
    """A study without [privacy] has no Privacy section, figure, table or note about them."""
    write_report(plain, tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Privacy" not in md and "epsilon" not in md
    assert not (tmp_path / "rep" / "privacy.csv").exists()
    assert not list((tmp_path / "rep" / "figures").glob("*epsilon*"))


def test_privacy_figures_draw_each_configuration_with_units(mixed):
    """Accuracy against epsilon: a point per private configuration with its seeds' interval,
    the run without DP a line; every axis says its unit."""
    figs = report_figures(mixed)
    trade, evo = figs["privacy_tradeoffs"], figs["epsilon_evolution"]
    eps_ax, energy_ax = trade.axes[:2]
    assert "(%)" in eps_ax.get_ylabel() and "epsilon" in eps_ax.get_xlabel()
    assert "(J" in energy_ax.get_xlabel()
    assert all("(s)" in ax.get_xlabel() for ax in evo.axes[:2])
    points = {i.label: i for i in trade.intervals if i.axes is eps_ax}
    assert len(points) == 2 and all(int(i.n[0]) == 3 for i in points.values())
    assert any(ln.get_linestyle() == ":" for ln in eps_ax.get_lines())


def _claim(metric: str, a: dict, b: dict) -> list:
    table = {"name": "c", "metric": metric, "better": "lower", "a": a, "b": b}
    return parse_claims({"claims": [table]})


def test_a_claim_on_epsilon_gets_a_verdict(mixed):
    """Central DP spends less epsilon than local DP here in every seed: the claim holds."""
    for metric in ("epsilon_max", "epsilon_mean"):
        stated = _claim(metric, {"privacy.mechanism": "central"}, {"privacy.mechanism": "local"})
        verdicts = hypotheses.check_runs(mixed, stated)
        assert verdicts["verdict"].tolist() == [C.HOLDS], verdicts["evidence"].tolist()


def test_a_claim_on_epsilon_without_privacy_runs_cannot_be_checked(plain):
    """Without [privacy] runs an epsilon claim is not measurable, and says why."""
    stated = _claim("epsilon_max", {"scheme.name": "two_timescale"}, {"scheme.name": "ideal"})
    v = hypotheses.check_runs(plain, stated).iloc[0]
    assert v["verdict"] == C.NOT_MEASURABLE
    assert "[privacy]" in v["evidence"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 3), st.floats(0.0, 50.0, allow_nan=False)),
        max_size=30,
    )
)
def test_epsilon_over_time_never_falls_and_ends_at_the_summary(rows):
    """Whatever the privacy rows, the max over devices never falls from slot to slot, the mean
    never exceeds it, and the last slot's values are the summary's."""
    runs = pd.DataFrame({"run": ["r"], "num_devices": [4], "dp_mechanism": ["central DP"]})
    slots = pd.DataFrame({"run": "r", "frame": 0, "slot": range(6), "end_s": np.arange(6.0)})
    steps = pd.DataFrame(
        [
            {"run": "r", "slot": s, "device": d, "dp_epsilon": e, "dp_noise_multiplier": 1.0}
            for s, d, e in rows
        ],
        columns=["run", "slot", "device", "dp_epsilon", "dp_noise_multiplier"],
    )
    t = privacy.epsilon_over_time(steps, slots, runs)
    assert (np.diff(t["epsilon_max"]) >= 0).all()
    assert (t["epsilon_mean"] <= t["epsilon_max"] + 1e-12).all()
    s = privacy.privacy_summary(tidy.PrivacyRows(steps=steps), runs).iloc[0]
    assert t["epsilon_max"].iloc[-1] == pytest.approx(s["epsilon_max"])
    assert t["epsilon_mean"].iloc[-1] == pytest.approx(s["epsilon_mean"])


def test_the_summary_from_the_trace_agrees_with_the_runs_own(tmp_path):
    """A network-only run with [privacy]: the final epsilon max and mean computed from its
    trace's privacy rows are those its engine wrote in manifest.json."""
    import json

    from conftest import base_scenario

    sc = base_scenario(
        run={"frames": 2, "slots_per_frame": 3, "deadline_s": 0.2},
        network={"num_devices": 5, "cell_radius_m": 500.0, "bandwidth_hz": 2e6},
        scheme={"name": "ideal"},
        privacy={"mechanism": "central", "clip_norm": 1.0, "noise_multiplier": 1.0},
    )
    import wflsim

    wflsim.run(sc, out=tmp_path / "run", progress=False)
    run = tmp_path / "run"
    own = json.loads((run / "manifest.json").read_text())["summary"]
    data = tidy.load(run)
    s = privacy.privacy_summary(data.privacy, data.runs).iloc[0]
    assert s["epsilon_max"] == pytest.approx(own["epsilon_max"], rel=1e-12)
    assert s["epsilon_mean"] == pytest.approx(own["epsilon_mean"], rel=1e-12)


def test_the_study_varies_privacy_as_one_field(mixed):
    """With and without [privacy], the study varies one field, the privacy label, not each of
    the table's fields."""
    from wflsim.analysis.report.study import study_axes

    data = tidy.load(mixed)
    s = stats.summary(data.device_slots, data.slots, data.evaluations, runs=data.runs)
    axes = study_axes(tidy.run_fields(mixed), s)
    assert axes == [("privacy", ["central DP (z 1; C 1)", "local DP (z 0.5; C 1)", "no DP"])]


def test_coinciding_points_are_nested_and_said():
    """Two configurations at the same epsilon and accuracy: both visible, nested, and named."""
    from wflsim.analysis.figures import privacy_tradeoffs

    rows = [
        {"run": f"{v}{seed}", "scheme": "ideal", "seed": seed, "variant": v,
         "epsilon_max": 3.0, "final_accuracy": 0.8, "total_energy_j": 2.0}
        for v in ("central", "local")
        for seed in (0, 1)
    ]  # fmt: skip
    fig = privacy_tradeoffs(pd.DataFrame(rows))
    assert "ideal, local coincides with ideal, central" in "; ".join(fig.notes).replace(
        "Ideal FL", "ideal"
    )
    sizes = sorted(ln.get_markersize() for ln in fig.axes[0].get_lines() if ln.get_marker())
    assert sizes[-1] > sizes[0]


def test_compare_reports_epsilon_where_runs_have_privacy():
    """wflsim.compare lists epsilon max and mean by default for [privacy] runs: more noise,
    less epsilon spent."""
    import wflsim
    from conftest import base_scenario

    sc = base_scenario(
        run={"frames": 1, "slots_per_frame": 3, "deadline_s": 0.2},
        network={"num_devices": 4, "cell_radius_m": 500.0, "bandwidth_hz": 2e6},
        scheme={"name": "ideal"},
        privacy={"mechanism": "local", "clip_norm": 1.0, "noise_multiplier": 1.0},
    )
    table = wflsim.compare(
        sc, {"z1": {"privacy.noise_multiplier": 1.0}, "z2": {"privacy.noise_multiplier": 2.0}},
        seeds=[0, 1], progress=False,
    )  # fmt: skip
    eps = table[table["metric"] == "epsilon_max"].set_index("variant")["mean"]
    assert set(table["metric"]) >= {"epsilon_max", "epsilon_mean"}
    assert eps["z2"] < eps["z1"]
