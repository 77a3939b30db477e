"""Power-of-choice selection ([strategy.selection] rule = "power_of_choice", sim/selection.py):
d candidates drawn uniformly, each probes its loss on the global model, the k highest are asked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from test_learner import tiny_learner

import wflsim
from conftest import run_in_memory, saved_and_continued, tiny_learning_scenario
from golden_runs import column_hashes
from wflsim.app.cli import main
from wflsim.app.run import build_engine, make_learner
from wflsim.app.scenario import validate_scenario
from wflsim.sim.config.loading import ScenarioError
from wflsim.sim.learner import NullLearner
from wflsim.sim.rng import Streams
from wflsim.sim.selection import Selection, SelectionConfig, SelectionInputs

MODES = ("sync", "semi_sync", "async")
N = 12


def pow_d(k: int = 3, d: int | None = 6, seed: int = 0) -> Selection:
    """A power-of-choice rule on the streams of ``seed``."""
    return Selection(SelectionConfig(rule="power_of_choice", k=k, d=d), Streams(seed))


def no_inputs(n: int = N) -> SelectionInputs:
    """Slot inputs power_of_choice does not read."""
    z = np.zeros(n)
    return SelectionInputs(z, z, z, z, z, 1e6, 1e-13)


def top_k(losses: dict[int, float], k: int) -> set[int]:
    """The ``k`` devices of highest loss, ties to the lower index, by a plain sort."""
    return {n for _, n in sorted((-v, n) for n, v in losses.items())[:k]}


def scenario(mode: str = "sync", k: int = 1, d: int = 2, **sections) -> dict:
    """The tiny learning run (3 devices) under power_of_choice."""
    data = tiny_learning_scenario()
    data["server"] = {"mode": mode}
    data["strategy"] = {"name": "fedavg", "selection": {"rule": "power_of_choice", "k": k, "d": d}}
    data.update(sections)
    return data


def decisions_at_slot_starts(table) -> pd.DataFrame:
    """The decision rows written at each slot's start."""
    ev = table.to_pandas()
    starts = ev[ev.event == "slot_start"][["slot", "time_s"]]
    return ev[ev.event == "decision"].merge(starts, on=["slot", "time_s"])


# ---------------------------------------------------------------------------- the rule


def test_asks_the_k_highest_losses_of_the_d_drawn():
    """The asked devices are the k highest probe losses of the d drawn (ties: lower index)."""
    rng = np.random.default_rng(0)
    sel = pow_d()
    for slot in range(300):
        cand = rng.random(N) < 0.8
        table = rng.integers(0, 4, N).astype(float)  # many ties

        def probe(t, ids, table=table):
            return table[ids]

        c = sel.decide(slot, cand, 3, no_inputs(), probe)
        drawn = np.flatnonzero(sel.pool(slot, cand))
        if drawn.size <= 3:
            assert set(np.flatnonzero(c.chosen)) == set(drawn) and not c.probed.any()
            continue
        assert set(np.flatnonzero(c.probed)) == set(drawn)
        assert set(np.flatnonzero(c.chosen)) == top_k({int(n): table[n] for n in drawn}, 3)


def test_draws_d_candidates_and_no_other_device():
    """The draw holds min(d, candidates) devices, all of them candidates."""
    rng = np.random.default_rng(1)
    sel = pow_d(d=5)
    for slot in range(200):
        cand = rng.random(N) < rng.random()
        drawn = sel.pool(slot, cand)
        assert drawn.sum() == min(5, cand.sum()) and not (drawn & ~cand).any()


def test_the_draw_is_keyed_by_slot():
    """Same seed and slot: the same draw (any call order); another slot or seed: another draw."""
    cand = np.ones(N, dtype=bool)
    a, b, other = pow_d(), pow_d(), pow_d(seed=1)
    draws = [a.pool(t, cand) for t in range(40)]
    assert all((b.pool(t, cand) == draws[t]).all() for t in reversed(range(40)))
    assert any((draws[t] != draws[t + 1]).any() for t in range(39))
    assert any((other.pool(t, cand) != draws[t]).any() for t in range(40))


def test_every_device_is_drawn_about_equally_often():
    """Over 3000 slots (seed 0) each of 12 devices is drawn 1000 times +- 130 (d = 4: p = 1/3,
    binomial sd 25.8; 130 is 5 sd)."""
    sel = pow_d(k=2, d=4)
    cand = np.ones(N, dtype=bool)
    counts = sum(sel.pool(t, cand).astype(int) for t in range(3000))
    assert np.abs(counts - 1000).max() < 130


def test_the_draw_is_not_the_uniform_rules():
    """power_of_choice's draw (stream selection_pool) is not the uniform rule's picks."""
    cand = np.ones(N, dtype=bool)
    sel, uni = pow_d(k=3, d=3), Selection(SelectionConfig(rule="uniform", k=3), Streams(0))
    assert any((sel.pool(t, cand) != uni.choose(t, cand, 3, no_inputs())).any() for t in range(20))


def test_no_probe_when_the_draw_leaves_no_choice():
    """With at most k candidates every one is asked and nobody is probed."""

    def probe(t, ids):
        raise AssertionError("probed")

    cand = np.zeros(N, dtype=bool)
    cand[[2, 7]] = True
    c = pow_d().decide(0, cand, 3, no_inputs(), probe)
    assert (c.chosen == cand).all() and not c.probed.any() and np.isnan(c.probe_loss).all()


def test_d_defaults_to_twice_k():
    """Without d, power_of_choice probes 2 k candidates."""
    assert SelectionConfig(rule="power_of_choice", k=4).probe_size == 8


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"rule": "power_of_choice", "k": 3, "d": 2}, "d must be >= k"),
        ({"rule": "uniform", "k": 3, "d": 4}, "takes none"),
        ({"rule": "power_of_choice", "k": 3, "d": 0}, "greater than or equal to 1"),
    ],
)
def test_bad_d_is_refused(table, words):
    """d below k, d under another rule, d < 1: ScenarioError on the selection table."""
    data = tiny_learning_scenario()
    data["strategy"] = {"name": "fedavg", "selection": table}
    with pytest.raises(ScenarioError) as err:
        validate_scenario(data)
    assert err.value.field.startswith("strategy.selection") and words in str(err.value)


# ---------------------------------------------------------------------------- the learner


@pytest.mark.parametrize("batchnorm", [False, True])
def test_probe_losses_match_the_per_device_autograd_losses(batchnorm):
    """The batched probe equals each device's loss by plain autograd on the same batch."""
    lr = tiny_learner([4, 6, 6, 5], batchnorm=batchnorm, sampling_streams=Streams(3))
    ids = np.array([0, 1, 3])
    got = lr.probe_losses(5, ids)
    batch = lr.data.draw_probe(5, ids)
    _, ref, _ = lr.paths.per_device_grads(lr._w, batch.idx, batch.sizes, lr.buffers)
    assert got.dtype == np.float64 and got.shape == (3,)
    np.testing.assert_allclose(got, ref.double().numpy(), rtol=1e-6)


def test_a_devices_probe_does_not_depend_on_the_others_probed():
    """A device's probe is keyed by (slot, device): the same alone or with others; another slot
    draws another batch."""
    lr = tiny_learner([8, 8, 8], hidden=None, sampling_streams=Streams(4))
    both = lr.probe_losses(2, np.array([0, 2]))
    assert lr.probe_losses(2, np.array([2]))[0] == pytest.approx(both[1], rel=1e-6)
    a, b = lr.data.draw_probe(2, np.array([2])), lr.data.draw_probe(3, np.array([2]))
    assert not np.array_equal(a.idx, b.idx)


def test_the_probe_changes_neither_the_model_nor_the_training_batches():
    """Probing before a slot's compute leaves its batches, gradients, model and buffers as
    without the probe."""
    plain = tiny_learner([5, 5, 5], batchnorm=True, sampling_streams=Streams(2))
    probed = tiny_learner([5, 5, 5], batchnorm=True, sampling_streams=Streams(2))
    probed.probe_losses(0, np.arange(3))
    for lr in (plain, probed):
        lr.compute(0, np.arange(3))
    pairs = zip(plain.last_batches, probed.last_batches, strict=True)
    assert all(np.array_equal(a, b) for a, b in pairs)
    torch.testing.assert_close(plain.gradients, probed.gradients, rtol=0, atol=0)
    torch.testing.assert_close(plain.global_params(), probed.global_params(), rtol=0, atol=0)
    for k, v in plain.buffers.items():
        torch.testing.assert_close(v, probed.buffers[k], rtol=0, atol=0)


# ---------------------------------------------------------------------------- runs


@pytest.mark.parametrize("mode", MODES)
def test_a_run_asks_the_highest_probe_losses_in_every_mode(mode):
    """In sync, semi_sync and async every slot start asks the highest probe losses of the
    devices probed (at most k), and only asked devices participate."""
    table, stats = run_in_memory(scenario(mode, k=1, d=2))
    dec = decisions_at_slot_starts(table)
    assert stats.slots == 6 and dec.probe_loss.notna().any()
    for _, rows in dec.groupby("slot"):
        asked = set(rows.device[rows.selected.eq(True)])
        assert len(asked) <= 1
        probed = rows[rows.probe_loss.notna()]
        if len(probed):
            losses = dict(zip(probed.device, probed.probe_loss, strict=True))
            assert asked == top_k(losses, len(asked))
    assert not dec[dec.selected.eq(False)].participating.any()


def test_the_traced_probe_losses_are_the_learners():
    """Slot 0's probe_loss values are the learner's probe_losses on the initial model."""
    data = scenario("sync", k=1, d=2)
    dec = decisions_at_slot_starts(run_in_memory(data)[0])
    first = dec[(dec.slot == 0) & dec.probe_loss.notna()].sort_values("device")
    learner = make_learner(wflsim.prepare(data))
    want = learner.probe_losses(0, first.device.to_numpy().astype(np.int64))
    np.testing.assert_allclose(first.probe_loss.to_numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("mode", ["sync", "semi_sync"])
def test_probe_energy_is_charged_by_the_compute_physics(mode):
    """probe_energy_j = (alpha/2) (c B / 3) f^2; it is in the slot's energy_compute_j and energy_j
    of each probed device (a probed device not asked spends exactly it), and in the queue."""
    table, _ = run_in_memory(scenario(mode, k=1, d=2))
    ev = table.to_pandas()
    cfg = ev[ev.event == "device_config"].set_index("device")
    dec = decisions_at_slot_starts(table)
    probed = dec[dec.probe_energy_j.notna()]
    dev = cfg.loc[probed.device]
    want = 0.5 * dev.capacitance * (dev.cycles_per_sample * dev.batch_size / 3) * dev.cpu_hz**2
    np.testing.assert_allclose(probed.probe_energy_j.to_numpy(), want.to_numpy(), rtol=1e-12)
    energy = ev[ev.event == "energy"].set_index(["slot", "device"])
    idle = probed[probed.selected.eq(False)]
    assert len(idle)
    rows = energy.loc[list(zip(idle.slot, idle.device, strict=True))]
    np.testing.assert_allclose(rows.energy_compute_j.to_numpy(), idle.probe_energy_j.to_numpy())
    np.testing.assert_allclose(rows.energy_j.to_numpy(), idle.probe_energy_j.to_numpy())
    if mode == "sync":  # semi_sync: an asked cycle starts after the probes and ends a slot later
        plain = energy[energy.participating.eq(False)].drop(rows.index, errors="ignore")
        assert (plain.energy_j == 0).all()
    budget = cfg.energy_budget_j
    for (t, n), row in energy.iterrows():
        before = 0.0 if t == 0 else energy.loc[(t - 1, n)].queue_j
        assert row.queue_j == pytest.approx(max(before + row.energy_j - budget[n], 0.0))


def test_other_rules_record_no_probe():
    """Under uniform selection the probe columns are null in every row."""
    data = scenario("sync")
    data["strategy"]["selection"] = {"rule": "uniform", "k": 1}
    table, _ = run_in_memory(data)
    for name in ("probe_loss", "probe_energy_j"):
        assert table.column(name).null_count == len(table)


# ---------------------------------------------------------------------------- refusals


def test_a_network_only_run_is_refused(tmp_path, capsys):
    """power_of_choice in a network-only run: exit 2, one line naming strategy.selection.rule
    and the reason, nothing written."""
    path, out = tmp_path / "s.toml", tmp_path / "out"
    path.write_text(
        "[learning]\nenabled = false\nnum_params = 1000\n"
        '[strategy.selection]\nrule = "power_of_choice"\nk = 2\n'
    )
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "strategy.selection.rule" in err
    assert "network-only run does not compute" in err
    assert not out.exists()


def test_the_engine_refuses_a_learner_without_probes():
    """An engine built with power_of_choice on a NullLearner: ValueError."""
    prep = wflsim.prepare(scenario("sync"))
    with pytest.raises(ValueError, match="power_of_choice ranks devices by their local loss"):
        build_engine(prep, NullLearner(prep.system.num_params))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_resumed_run_probes_and_asks_as_the_uninterrupted_one(tmp_path, mode):
    """Saved after frame 0 and continued in fresh objects, a power_of_choice run has the
    uninterrupted run's events (the probes' draws and batches are keyed, no state)."""
    data = scenario(mode, k=1, d=2)
    whole, _ = run_in_memory(data)
    resumed = saved_and_continued(data, 1, tmp_path / "state")
    assert column_hashes(resumed) == column_hashes(whole)


def probe_phases(ev: pd.DataFrame) -> pd.Series:
    """Per slot with probes, the longest probe's time c B / (3 f) over its probed devices."""
    cfg = ev[ev.event == "device_config"].set_index("device")
    probe_s = cfg.cycles_per_sample * cfg.batch_size / 3 / cfg.cpu_hz
    dec = ev[(ev.event == "decision") & ev.probe_loss.notna()]
    return dec.groupby("slot").device.agg(lambda d: float(probe_s.loc[list(d)].max()))


def test_a_sync_slot_waits_for_its_probes_before_anyone_computes():
    """fixed_power, sync: in a slot with probes every compute_start is at the slot's start plus
    the longest probe, and the deadline tau_0 after that."""
    data = scenario("sync", k=1, d=2, scheme={"name": "fixed_power"})
    table, _ = run_in_memory(data)
    ev = table.to_pandas()
    phase = probe_phases(ev)
    assert len(phase) and (phase > 0).all()
    starts = ev[ev.event == "slot_start"].set_index("slot").time_s
    tau0 = data["run"]["deadline_s"]
    for t, p in phase.items():
        here = ev[ev.slot == t]
        comp = here[here.event == "compute_start"].time_s.to_numpy()
        assert len(comp) == 1
        np.testing.assert_allclose(comp, starts[t] + p, rtol=0, atol=1e-12)
        deadline = here[here.event == "deadline"].time_s.to_numpy()
        np.testing.assert_allclose(deadline, starts[t] + p + tau0, rtol=0, atol=1e-12)


def test_an_async_cycle_starts_after_its_slots_probes():
    """async: a cycle asked at a slot's start after probes ends its compute at the slot's start
    plus the longest probe plus its compute time."""
    table, _ = run_in_memory(scenario("async", k=1, d=2))
    ev = table.to_pandas()
    phase = probe_phases(ev)
    assert len(phase)
    starts = ev[ev.event == "slot_start"].set_index("slot").time_s
    dec = ev[(ev.event == "decision") & ev.selected.eq(True) & ev.slot.isin(phase.index)]
    ends = ev[ev.event == "compute_end"]
    checked = 0
    for _, row in dec.iterrows():
        if row.time_s != starts[row.slot]:
            continue
        want = starts[row.slot] + phase[row.slot] + row.compute_s
        mine = ends[(ends.device == row.device) & (ends.time_s >= starts[row.slot])]
        np.testing.assert_allclose(mine.time_s.iloc[0], want, rtol=1e-12)
        checked += 1
    assert checked
