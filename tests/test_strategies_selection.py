"""Device selection ([strategy.selection], sim/selection.py): which of a slot's candidates the
server asks, in every server mode and in network-only runs."""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_resume import NETWORK, disk_hashes

import wflsim
from conftest import base_scenario, failing_at_frame, run_in_memory
from golden_runs import column_hashes
from wflsim.app.cli import main
from wflsim.app.scenario import validate_scenario
from wflsim.sim.config.loading import ScenarioError
from wflsim.sim.registry import STRATEGIES
from wflsim.sim.rng import Streams
from wflsim.sim.selection import (
    SELECTION_RULES,
    Selection,
    SelectionConfig,
    SelectionInputs,
    rate_per_joule,
)

MODES = ("sync", "semi_sync", "async")
RULES = ("uniform", "rate_per_joule", "queue_slack")
K = 3


def selection(rule: str, k: int | None = K, seed: int = 0) -> Selection:
    """A selection rule on the streams of ``seed``."""
    return Selection(SelectionConfig(rule=rule, k=k), Streams(seed))


def random_inputs(rng: np.random.Generator, n: int, ties: bool = False) -> SelectionInputs:
    """Random slot inputs for ``n`` devices (integer queues with many ties when ``ties``)."""
    queue = rng.integers(0, 4, n).astype(float) if ties else rng.exponential(1.0, n)
    return SelectionInputs(
        tx_power_w=rng.uniform(0.01, 0.2, n),
        seen_gain=rng.exponential(1e-10, n),
        payload_bits=rng.uniform(1e5, 1e6, n),
        compute_energy_j=rng.uniform(1e-3, 1e-1, n),
        queue_j=queue,
        bandwidth_hz=1e6,
        noise_w=1e-13,
    )


def brute_force(candidates: np.ndarray, keys: list[float], k: int) -> np.ndarray:
    """The ``k`` candidates of smallest key, ties to the lower index, by a plain sort."""
    order = sorted((keys[n], n) for n in range(len(keys)) if candidates[n])
    out = np.zeros(len(keys), dtype=bool)
    for _, n in order[:k]:
        out[n] = True
    return out


# ---------------------------------------------------------------------------- the rules


def test_uniform_picks_min_k_eligible_from_the_eligible():
    """uniform asks exactly min(k, candidates) devices, all of them candidates."""
    rng = np.random.default_rng(0)
    sel = selection("uniform")
    for slot in range(200):
        cand = rng.random(12) < rng.random()
        chosen = sel.choose(slot, cand, K, random_inputs(rng, 12))
        assert chosen.sum() == min(K, cand.sum())
        assert not (chosen & ~cand).any()


def test_uniform_same_seed_same_picks():
    """Two selections on one seed pick the same devices in every slot; another seed differs."""
    rng = np.random.default_rng(1)
    cand = np.ones(20, dtype=bool)
    x = random_inputs(rng, 20)
    a, b, c = (
        selection("uniform", seed=4),
        selection("uniform", seed=4),
        selection("uniform", seed=5),
    )
    picks = [a.choose(t, cand, K, x) for t in range(50)]
    assert all((p == b.choose(t, cand, K, x)).all() for t, p in enumerate(picks))
    assert any((p != c.choose(t, cand, K, x)).any() for t, p in enumerate(picks))


def test_uniform_is_statistically_uniform():
    """Over 6000 slots (seed 0) each of 10 candidates is asked 1800 +- chance times: the
    chi-square statistic of the counts (9 degrees of freedom) is below 27.88 (p = 0.001)."""
    sel = selection("uniform")
    cand = np.ones(10, dtype=bool)
    x = random_inputs(np.random.default_rng(2), 10)
    counts = sum(sel.choose(t, cand, K, x).astype(int) for t in range(6000))
    expected = 6000 * K / 10
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 27.88, (counts, chi2)


def test_rate_per_joule_matches_a_brute_force_sort():
    """rate_per_joule asks the k candidates of highest r / (E_cmp + p L / r), r = W log2(1 + p h
    / N0), as a plain sort of the hand-computed scores."""
    rng = np.random.default_rng(3)
    sel = selection("rate_per_joule")
    for slot in range(100):
        x = random_inputs(rng, 15)
        cand = rng.random(15) < 0.6
        scores = []
        for n in range(15):
            p, h = x.tx_power_w[n], x.seen_gain[n]
            r = x.bandwidth_hz * math.log2(1 + p * h / x.noise_w)
            scores.append(-r / (x.compute_energy_j[n] + p * x.payload_bits[n] / r))
        assert np.allclose(-np.array(scores), rate_per_joule(x), rtol=1e-12)
        want = brute_force(cand, scores, K)
        assert (sel.choose(slot, cand, K, x) == want).all()


def test_queue_slack_matches_a_brute_force_sort():
    """queue_slack asks the k candidates of smallest Q_n, ties to the lower index, as a plain
    sort (integer queues: many ties)."""
    rng = np.random.default_rng(4)
    sel = selection("queue_slack")
    for slot in range(100):
        x = random_inputs(rng, 15, ties=True)
        cand = rng.random(15) < 0.7
        want = brute_force(cand, list(x.queue_j), K)
        assert (sel.choose(slot, cand, K, x) == want).all()


# ---------------------------------------------------------------------------- runs


def network(mode: str, rule: str | None, k: int = K, **sections) -> dict:
    """A network-only run of 12 devices, the paper's controller, some devices offline."""
    data = base_scenario(
        network={"num_devices": 12, "cell_radius_m": 500.0},
        scheme={"name": "two_timescale", "V": 10.0},
        server={"mode": mode},
        availability={
            "model": "markov",
            "online_s": {"dist": "exponential", "mean": 4.0},
            "offline_s": {"dist": "exponential", "mean": 2.0},
        },
        run={"frames": 3, "slots_per_frame": 4, "deadline_s": 0.8, "kernel": "auto"},
        **sections,
    )
    if rule is not None:
        data["strategy"] = {"name": "fedavg", "selection": {"rule": rule, "k": k}}
    return data


def test_rule_all_leaves_the_trace_identical():
    """rule = "all" (with a k, which it ignores) gives the events of a run without the table."""
    plain, _ = run_in_memory(network("async", None))
    every, _ = run_in_memory(network("async", "all"))
    assert column_hashes(every) == column_hashes(plain)


def cycles(events: pd.DataFrame) -> pd.DataFrame:
    """Each cycle's start and end times (a decision row that participates; upload_end or
    dropped), per device."""
    starts = events[(events.event == "decision") & events.participating.eq(True)]
    starts = starts.sort_values(["device", "time_s"])
    ends = events[events.event.isin(["upload_end", "dropped"])].sort_values(["device", "time_s"])
    starts = starts.assign(i=starts.groupby("device").cumcount())
    ends = ends.assign(i=ends.groupby("device").cumcount())
    m = starts[["device", "i", "time_s"]].merge(
        ends[["device", "i", "time_s"]], on=["device", "i"], how="left", suffixes=("", "_end")
    )
    return m.fillna({"time_s_end": np.inf})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rule", RULES)
def test_every_rule_and_mode_asks_only_online_feasible_devices(rule, mode):
    """A network-only run completes; every device asked was online with a feasible power
    (p_min <= P_bar), asked ones participate, unasked candidates do not, and at most k are
    asked per slot (async: at most k in cycles at once)."""
    table, stats = run_in_memory(network(mode, rule))
    ev = table.to_pandas()
    assert stats.slots == 12
    rows = ev[ev.slot >= 0]
    assert (rows.frame == rows.slot // 4).all()
    dec = ev[ev.event == "decision"]
    peak = ev[ev.event == "device_config"].set_index("device").peak_power_w
    asked = dec[dec.selected.eq(True)]
    assert len(asked) and dec.selected.eq(False).any()
    assert asked.available.eq(True).all()
    assert (asked.min_tx_power_w.to_numpy() <= peak[asked.device].to_numpy()).all()
    assert asked.participating.eq(True).all()
    assert not dec[dec.selected.eq(False)].participating.any()
    assert not dec[dec.selected.isna()].participating.any()
    at_start = dec.merge(ev[ev.event == "slot_start"][["slot", "time_s"]], on=["slot", "time_s"])
    assert at_start.groupby("slot").selected.sum().max() <= K
    c = cycles(ev)
    running = [((c.time_s <= s) & (s < c.time_s_end)).sum() for s in c.time_s]
    assert len(c) and (c.time_s_end >= c.time_s).all()
    if mode == "async":
        assert max(running) <= K
    if mode == "sync":
        assert (ev[ev.event == "energy"].groupby("slot").participating.sum() <= K).all()


def test_device_slots_level_records_the_selection():
    """At trace level device_slots the device_slot rows carry the same selected column."""
    events = run_in_memory(network("sync", "uniform"))[0].to_pandas()
    folded = run_in_memory(network("sync", "uniform", trace={"level": "device_slots"}))[0]
    dec = events[events.event == "decision"].sort_values(["slot", "device"])
    rows = folded.to_pandas()
    rows = rows[rows.event == "device_slot"].sort_values(["slot", "device"])
    assert dec.selected.tolist() == rows.selected.tolist()


@pytest.mark.parametrize("name", STRATEGIES.names())
def test_selection_composes_with_every_strategy(name):
    """Every strategy name takes a selection table, its parameters kept apart."""
    sc = validate_scenario(
        base_scenario(strategy={"name": name, "selection": {"rule": "uniform", "k": 2}})
    )
    assert sc.strategy.selection.rule == "uniform" and "selection" not in sc.strategy.params


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_resumed_uniform_selection_run_equals_the_uninterrupted_one(tmp_path: Path, mode):
    """A uniform-selection run killed in frame 4 and resumed has the uninterrupted events."""
    text = NETWORK.format(every=1) + (
        f'[server]\nmode = "{mode}"\n[strategy.selection]\nrule = "uniform"\nk = 4\n'
    )
    path, out = tmp_path / "s.toml", tmp_path / "run"
    path.write_text(text)
    failed = main(["run", str(path), "--out", str(out), "--quiet"], hooks=failing_at_frame(4))
    assert failed == 1
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    table, _ = run_in_memory(tomllib.loads(text))
    assert disk_hashes(out) == column_hashes(table)
    assert table.column("selected").null_count < len(table)


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"rule": "best"}, "strategy.selection.rule"),
        ({"rule": "uniform", "k": 0}, "strategy.selection.k"),
        ({"rule": "uniform", "k": 2.5}, "strategy.selection.k"),
        ({"rule": "uniform", "k": "3"}, "strategy.selection.k"),
        ({"rule": "uniform", "k": 2, "size": 2}, "strategy.selection.size"),
        ({"rule": "queue_slack"}, "strategy.selection"),
        ("uniform", "strategy.selection"),
    ],
)
def test_bad_selection_is_refused_naming_the_field(table, field):
    """A bad rule, k, unknown field, missing k or a non-table: ScenarioError on its field."""
    data = base_scenario(strategy={"name": "fedadam", "selection": copy.deepcopy(table)})
    with pytest.raises(ScenarioError) as err:
        validate_scenario(data)
    assert err.value.field == field
    if field == "strategy.selection" and isinstance(table, dict):
        assert "needs k" in str(err.value)


def test_every_rule_is_documented():
    """Every selection rule and field has its place in docs/scenario.md."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "scenario.md").read_text()
    assert "### `[strategy.selection]`" in doc
    for rule in SELECTION_RULES:
        assert f'`"{rule}"`' in doc, rule
    for field in SelectionConfig.model_fields:
        assert f"| `{field}` |" in doc, field


def test_wflsim_run_accepts_a_selection():
    """wflsim.run of a network-only scenario with fedadam and uniform selection asks k devices."""
    events = wflsim.run(network("sync", "uniform"), progress=False).events
    dec = events[events.event == "decision"]
    assert dec.groupby("slot").selected.sum().max() <= K
