"""Stale updates in closed form (sim/servers/stale_closed.py): the same traces as the clock's
cycles (the event path, the reference), mode for mode, rule for rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import base_scenario, run_in_memory, saved_and_continued, tiny_learning_scenario
from wflsim.sim.config.loading import validate_scenario
from wflsim.sim.learner import NullLearner

JITTER = {"jitter": {"model": "background_load", "probability": 0.3, "mean_extra": 2.0}}


def scenario(server: dict[str, Any], devices: int = 12, **sections: Any) -> dict[str, Any]:
    """:func:`base_scenario` with ``devices`` devices and the ``[server]`` table ``server``
    (``buffer_size`` kept in ``async`` only)."""
    if server.get("mode") != "async":
        server = {k: v for k, v in server.items() if k != "buffer_size"}
    return base_scenario(
        server=server, network={"num_devices": devices, "cell_radius_m": 500.0}, **sections
    )


def on(data: dict[str, Any], kernel: str, learner: Any = None) -> tuple[pd.DataFrame, Any]:
    """The trace (a DataFrame) and the totals of ``data`` on ``kernel``."""
    out = copy.deepcopy(data)
    out["run"]["kernel"] = kernel
    table, stats = run_in_memory(out, learner)
    return table.to_pandas(), stats


def totals(stats: Any) -> dict[str, Any]:
    """A run's totals without its wall time (as text: NaN equals NaN)."""
    return {k: repr(v) for k, v in stats.as_dict().items() if "wall" not in k}


def assert_same_runs(data: dict[str, Any]) -> pd.DataFrame:
    """The closed form's trace and totals equal the event path's; returns the trace."""
    closed, closed_stats = on(data, "closed_form")
    event, event_stats = on(data, "event")
    pd.testing.assert_frame_equal(closed, event)
    assert totals(closed_stats) == totals(event_stats)
    return closed


def count(trace: pd.DataFrame, event: str) -> int:
    """Rows of ``event`` in ``trace``."""
    return int((trace["event"] == event).sum())


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("buffer_size", [1, 3, 10])
def test_async_traces_are_identical_for_every_buffer_size(buffer_size):
    """async with buffers of 1, 3 and 10: the same trace and totals, restarts and flushes."""
    trace = assert_same_runs(scenario({"mode": "async", "buffer_size": buffer_size}))
    assert count(trace, "flush") > 0 and count(trace, "decision") > 12


@pytest.mark.parametrize("scheme", ["fixed_power", "two_timescale", "ideal"])
def test_async_traces_are_identical_under_every_scheme(scheme):
    """async under fixed_power, two_timescale and ideal: the same trace."""
    assert_same_runs(scenario({"mode": "async", "buffer_size": 3}, scheme={"name": scheme}))


@pytest.mark.parametrize("scheme", ["fixed_power", "two_timescale", "ideal"])
def test_semi_sync_traces_are_identical_with_late_uploads(scheme):
    """semi_sync under jitter (late uploads, applied a slot later): the same trace."""
    data = scenario({"mode": "semi_sync"}, scheme={"name": scheme}, compute=JITTER)
    trace = assert_same_runs(data)
    assert (trace.loc[trace["event"] == "upload_end", "staleness"] > 0).any()


def test_async_max_staleness_discards_the_same_updates():
    """async with max_staleness 1: the same stale rows and flushes."""
    trace = assert_same_runs(scenario({"mode": "async", "buffer_size": 2, "max_staleness": 1}))
    assert count(trace, "stale") > 0


def test_semi_sync_max_staleness_discards_the_same_updates():
    """semi_sync with max_staleness 0 under jitter: the same stale rows."""
    data = scenario({"mode": "semi_sync", "max_staleness": 0}, compute=JITTER)
    assert count(assert_same_runs(data), "stale") > 0


@pytest.mark.parametrize("mode", ["semi_sync", "async"])
def test_device_slots_level_traces_are_identical(mode):
    """At trace level device_slots: the same folded rows, stale and flush rows."""
    server = {"mode": mode, "buffer_size": 3, "max_staleness": 1}
    data = scenario(server, trace={"level": "device_slots"}, compute=JITTER)
    if mode == "async":
        del data["compute"]  # per-cycle jitter plays on the clock
    assert count(assert_same_runs(data), "device_slot") > 0


@pytest.mark.parametrize("rule", ["uniform", "rate_per_joule", "queue_slack"])
@pytest.mark.parametrize("mode", ["semi_sync", "async"])
def test_selection_rules_give_identical_traces(rule, mode):
    """[strategy.selection] uniform, rate_per_joule and queue_slack (k = 4): the same trace."""
    data = scenario({"mode": mode, "buffer_size": 2})
    data["strategy"] = {"name": "fedavg", "selection": {"rule": rule, "k": 4}}
    trace = assert_same_runs(data)
    assert trace["selected"].notna().any()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("mode", ["semi_sync", "async"])
def test_power_of_choice_learning_runs_are_identical(mode):
    """power_of_choice on the digits learner (probes, then starts after the probe phase)."""
    data = tiny_learning_scenario()
    data["server"] = {"mode": mode, "buffer_size": 2} if mode == "async" else {"mode": mode}
    data["strategy"] = {"name": "fedavg", "selection": {"rule": "power_of_choice", "k": 2}}
    assert_same_runs(data)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_async_learning_run_is_identical():
    """A digits MLP run in async (buffer 2, max_staleness 1): the same trace, evaluations
    included."""
    data = tiny_learning_scenario()
    data["network"]["num_devices"] = 5
    data["server"] = {"mode": "async", "buffer_size": 2, "max_staleness": 1}
    trace = assert_same_runs(data)
    assert count(trace, "eval") > 0


class Recording(NullLearner):
    """A network-only learner that records the calls a stale server makes."""

    def __init__(self, num_params: int) -> None:
        super().__init__(num_params)
        self.calls: list[tuple[Any, ...]] = []

    def start_update(self, key: int, device: int, sample_key: int, slot: int = 0) -> None:
        self.calls.append(("start", key, device, sample_key, slot))

    def drop_update(self, key: int) -> None:
        self.calls.append(("drop", key))

    def apply_updates(self, slot: int, keys: Any, weights: Any, server_lr: float) -> None:
        self.calls.append(("apply", slot, keys.tolist(), weights.tolist(), server_lr))


@pytest.mark.parametrize("mode", ["semi_sync", "async"])
def test_the_learner_is_called_in_the_same_order(mode):
    """start_update, drop_update (made too stale) and apply_updates: the same calls in the
    same order, with the same arguments."""
    data = scenario({"mode": mode, "buffer_size": 2, "max_staleness": 0})
    data["learning"]["num_params"] = 100_000
    if mode == "semi_sync":
        data["compute"] = JITTER
    closed, event = Recording(100_000), Recording(100_000)
    on(data, "closed_form", closed)
    on(data, "event", event)
    assert closed.calls == event.calls
    assert any(c[0] == "drop" for c in event.calls)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    devices=st.integers(1, 40),
    slots=st.integers(1, 6),
    mode=st.sampled_from(["semi_sync", "async"]),
    buffer_size=st.integers(1, 6),
    max_staleness=st.one_of(st.none(), st.integers(0, 3)),
    scheme=st.sampled_from(["fixed_power", "two_timescale", "ideal"]),
    deadline_s=st.sampled_from([0.2, 0.5, 0.8]),
)
def test_random_small_scenarios_give_identical_traces(
    seed, devices, slots, mode, buffer_size, max_staleness, scheme, deadline_s
):
    """Drawn seeds, device counts (1-40), slots, modes, buffers, limits, schemes and slot
    lengths: the same trace and totals on both paths."""
    server: dict[str, Any] = {"mode": mode, "buffer_size": buffer_size}
    if max_staleness is not None:
        server["max_staleness"] = max_staleness
    data = scenario(server, devices, scheme={"name": scheme}, seed=seed)
    data["run"] = {"frames": 2, "slots_per_frame": slots, "deadline_s": deadline_s}
    if mode == "semi_sync":
        data["compute"] = JITTER
    assert_same_runs(data)


@pytest.mark.parametrize("mode", ["semi_sync", "async"])
@pytest.mark.parametrize("first", ["closed_form", "event"])
def test_a_resumed_run_equals_the_uninterrupted_one_on_either_path(mode, first, tmp_path: Path):
    """Saved after frame 1 on one path and continued on the closed form: the uninterrupted
    run's trace (the cycles in flight and the buffer are the same state on both paths)."""
    data = scenario({"mode": mode, "buffer_size": 4, "max_staleness": 1}, compute=JITTER)
    data["run"] = {"frames": 3, "slots_per_frame": 3, "deadline_s": 0.8}
    if mode == "async":
        del data["compute"]
    whole, _ = on(data, "event")
    from wflsim.app.run import build_engine, make_learner, prepare_scenario
    from wflsim.sim import state

    def engine(kernel: str) -> Any:
        table = copy.deepcopy(data)
        table["run"]["kernel"] = kernel
        prep = prepare_scenario(validate_scenario(table))
        return build_engine(prep, make_learner(prep))

    one = engine(first)
    one.run(stop_frame=1)
    state.save(tmp_path / "c.npz", state.run_state(one))
    two = engine("closed_form")
    state.load_run_state(two, state.load(tmp_path / "c.npz"))
    two.run()
    got = pd.concat([one.table().to_pandas(), two.table().to_pandas()], ignore_index=True)
    pd.testing.assert_frame_equal(got, whole)


def test_a_resumed_closed_form_run_equals_the_uninterrupted_one(tmp_path: Path):
    """saved_and_continued on the closed form (async, buffer 3): the uninterrupted trace."""
    data = scenario({"mode": "async", "buffer_size": 3})
    data["run"] = {"frames": 3, "slots_per_frame": 2, "deadline_s": 0.8, "kernel": "closed_form"}
    whole, _ = on(data, "closed_form")
    continued = saved_and_continued(data, 2, tmp_path / "c.npz").to_pandas()
    pd.testing.assert_frame_equal(continued, whole)


def test_auto_takes_the_closed_form_where_cycles_do_not_interact():
    """auto: the closed form for async and semi_sync on a dedicated band, the event path for
    async under jitter."""
    from wflsim.app.run import kernel_of

    assert kernel_of(validate_scenario(scenario({"mode": "async"}))) == "closed_form"
    assert kernel_of(validate_scenario(scenario({"mode": "semi_sync"}, compute=JITTER))) == (
        "closed_form"
    )
    assert kernel_of(validate_scenario(scenario({"mode": "async"}, compute=JITTER))) == "event"


def test_async_jitter_on_an_explicit_closed_form_plays_on_the_clock():
    """kernel = closed_form with async jitter falls back to the clock: the event path's trace."""
    import wflsim
    from wflsim.app.run import build_engine, make_learner

    data = scenario({"mode": "async", "buffer_size": 2}, compute=JITTER)
    trace = assert_same_runs(data)
    data["run"]["kernel"] = "closed_form"
    prep = wflsim.prepare(data)
    engine = build_engine(prep, make_learner(prep))
    assert engine.server.closed is False
    assert count(trace, "flush") > 0
