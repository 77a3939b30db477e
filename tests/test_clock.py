"""The run's clock (sim/clock.py): what it relies on in SimPy, absolute times, the order."""

from __future__ import annotations

import heapq

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from wflsim.sim.clock import Clock, Order, priority


def test_simpy_queue_is_a_heap_of_time_priority_id_event():
    """SimPy keeps scheduled events as (time, priority, id, event) heap entries with ids from _eid."""
    env = simpy.Environment()
    ev = env.timeout(2.5)
    (entry,) = env._queue  # noqa: SLF001
    assert len(entry) == 4
    time_s, prio, eid, event = entry
    assert (time_s, prio, event) == (2.5, simpy.events.NORMAL, ev)
    assert isinstance(eid, int) and next(env._eid) == eid + 1  # noqa: SLF001


def test_simpy_priorities_are_urgent_zero_and_normal_one():
    """The clock's negative priorities sort before SimPy's URGENT (0) and NORMAL (1)."""
    assert (simpy.events.URGENT, simpy.events.NORMAL) == (0, 1)
    assert priority(Order.RESTART, 2**32 - 1) < simpy.events.URGENT


def test_simpy_step_pops_the_smallest_entry():
    """Environment.step processes the heap's smallest entry (heapq order on the tuple)."""
    env = simpy.Environment()
    seen: list[str] = []
    for name, prio in (("b", 1), ("a", 0)):
        ev = simpy.Event(env)
        ev._ok, ev._value = True, None  # noqa: SLF001
        ev.callbacks.append(lambda _e, name=name: seen.append(name))
        heapq.heappush(env._queue, (1.0, prio, next(env._eid), ev))  # noqa: SLF001
    env.run()
    assert seen == ["a", "b"]


def test_event_at_lands_on_the_absolute_time():
    """An event at t is processed with now == t exactly, where now + (t - now) would round."""
    now, target = 0.3, 0.9
    assert now + (target - now) != target  # the rounding the clock avoids
    clock = Clock(initial_time=now)
    seen: list[float] = []
    clock.at(target, Order.SERVER, callback=lambda _e: seen.append(clock.now))
    clock.run()
    assert seen == [target]


def test_simultaneous_events_follow_the_order_then_the_rank():
    """At one instant: availability, devices by rank, server, restarts by rank, then SimPy's own."""
    clock = Clock()
    seen: list[str] = []

    def log(name: str):
        return lambda _e: seen.append(name)

    clock.timeout(1.0).callbacks.append(log("simpy"))
    clock.at(1.0, Order.RESTART, 0, log("restart0"))
    clock.at(1.0, Order.SERVER, 0, log("server"))
    clock.at(1.0, Order.DEVICE, 7, log("device7"))
    clock.at(1.0, Order.DEVICE, 2, log("device2"))
    clock.at(1.0, Order.AVAILABILITY, 0, log("availability"))
    clock.run()
    assert seen == ["availability", "device2", "device7", "server", "restart0", "simpy"]


def test_a_process_can_yield_an_event_at():
    """A SimPy process waits on an absolute-time event and resumes at its time."""
    clock = Clock()
    woke: list[float] = []

    def proc():
        yield clock.at(0.3, Order.SERVER)
        woke.append(clock.now)

    clock.run(until=clock.process(proc()))
    assert woke == [0.3]


def test_event_in_the_past_is_refused():
    """Scheduling before now is a RuntimeError."""
    clock = Clock(initial_time=2.0)
    with pytest.raises(RuntimeError, match="scheduled at 2.0"):
        clock.at(1.0, Order.DEVICE)


def test_rank_outside_the_range_is_refused():
    """A rank below 0 or from 2**32 would leak into the next order: ValueError."""
    with pytest.raises(ValueError, match="rank"):
        priority(Order.DEVICE, 2**32)
    with pytest.raises(ValueError, match="rank"):
        priority(Order.DEVICE, -1)


@given(
    a=st.tuples(st.sampled_from(list(Order)), st.integers(0, 2**32 - 1)),
    b=st.tuples(st.sampled_from(list(Order)), st.integers(0, 2**32 - 1)),
)
def test_priority_orders_lexicographically_by_order_then_rank(a, b):
    """priority(order, rank) sorts as the pair (order, rank)."""
    assert (priority(*a) < priority(*b)) == (a < b)


def test_timeout_at_is_the_timeout_scheduled_when_now_plus_delay_was_its_time():
    """timeout_at(t) goes among SimPy's own events at t, in scheduling order, after the clock's."""
    clock = Clock(initial_time=0.3)
    seen: list[tuple[str, float]] = []

    def log(name: str):
        return lambda _e: seen.append((name, clock.now))

    clock.timeout(0.6).callbacks.append(log("timeout"))
    clock.timeout_at(0.3 + 0.6, log("timeout_at"))
    clock.at(0.3 + 0.6, Order.RESTART, 0, log("restart"))
    clock.run()
    t = 0.3 + 0.6  # 0.8999999999999999: where SimPy puts now + delay
    assert seen == [("restart", t), ("timeout", t), ("timeout_at", t)]
    with pytest.raises(RuntimeError, match="scheduled at"):
        clock.timeout_at(0.5)
