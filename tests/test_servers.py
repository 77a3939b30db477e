"""The server seam (sim/servers/): one place picks the server, the engine binds it, a new server
is one class (the worked example of docs/architecture.md, "A new server")."""

from __future__ import annotations

import copy
import inspect
import math
import re
from typing import Any

import numpy as np
import pytest

from conftest import LOCKSTEP, REPO
from wflsim.sim.engine import Engine
from wflsim.sim.kernels import ClosedFormKernel, EventKernel
from wflsim.sim.registry import SERVERS, make_server
from wflsim.sim.servers import SERVER_MODES, ServerConfig, StaleServer, SyncServer
from wflsim.sim.servers.base import Host


def _example_namespace() -> dict[str, Any]:
    """The worked example of docs/architecture.md ("A new server"), executed as written."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("### A new server", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    source = code.group(1)
    namespace: dict[str, Any] = {}
    exec(compile(source, "docs/architecture.md", "exec"), namespace)  # noqa: S102
    return namespace


def _churn_network(devices: int = 10) -> dict[str, Any]:
    """LOCKSTEP, network only, with fading and churn, as a stale-update (async) run."""
    data = copy.deepcopy(LOCKSTEP)
    data["network"] = {"num_devices": devices, "cell_radius_m": 500.0}
    data["channel"] = {"fading": "rayleigh"}
    data["mobility"] = {"model": "static"}
    data["scheme"] = {"name": "ideal"}
    data["learning"] = {"enabled": False, "num_params": 20_000}
    data["availability"] = {
        "model": "markov",
        "online_s": {"dist": "exponential", "mean": 0.6},
        "offline_s": {"dist": "exponential", "mean": 0.3},
    }
    data["server"] = {"mode": "async"}
    return data


def _engine(data: dict[str, Any], server: Any = None) -> Engine:
    import wflsim
    from wflsim.app.run import build_engine, make_learner

    prep = wflsim.prepare(data)
    return build_engine(prep, make_learner(prep), server=server)


def test_every_server_mode_has_one_server():
    """SERVERS maps each [server] mode to exactly one server class."""
    assert set(SERVERS) == set(SERVER_MODES)
    assert SERVERS["sync"] is SyncServer
    assert SERVERS["semi_sync"] is SERVERS["async"] is StaleServer


@pytest.mark.parametrize("mode", SERVER_MODES)
def test_make_server_builds_the_server_of_the_mode(mode):
    """make_server gives the mode's server on the event kernel; a stale one keeps the [server]
    table."""
    server = make_server(ServerConfig(mode=mode), EventKernel())
    assert type(server) is SERVERS[mode]
    if mode != "sync":
        assert isinstance(server, StaleServer) and server.config.mode == mode


@pytest.mark.parametrize("mode", ["semi_sync", "async"])
def test_a_stale_mode_on_the_closed_form_kernel_gets_the_closed_form_clock(mode):
    """make_server with the closed-form kernel: the stale modes get ClosedFormStaleServer (a
    StaleServer), keeping the [server] table."""
    from wflsim.sim.servers.stale_closed import ClosedFormStaleServer

    server = make_server(ServerConfig(mode=mode), ClosedFormKernel())
    assert type(server) is ClosedFormStaleServer
    assert isinstance(server, StaleServer) and server.config.mode == mode


def test_engine_provides_everything_the_host_protocol_names():
    """Every member of the Host protocol exists on a built engine."""
    engine = _engine(_churn_network())
    names = [n for n in vars(Host) if not n.startswith("_")]
    names += list(inspect.get_annotations(Host))
    missing = [n for n in set(names) if not hasattr(engine, n)]
    assert names and not missing, missing


def test_a_server_binds_to_one_engine_only_when_used():
    """A server not bound to an engine says so when its host is read."""
    server = SyncServer(ClosedFormKernel())
    with pytest.raises(RuntimeError, match="not bound"):
        _ = server.host


def test_stale_server_refuses_the_sync_mode():
    """A StaleServer built for mode = "sync" is a ValueError."""
    with pytest.raises(ValueError, match="not a stale-update mode"):
        StaleServer(ServerConfig(mode="sync"))


def test_the_worked_example_server_steps_at_its_quorum():
    """The docs' QuorumServer, all 10 devices online: every step applies exactly 5 updates."""
    quorum_cls = _example_namespace()["QuorumServer"]
    data = _churn_network()
    del data["availability"]
    engine = _engine(data, server=quorum_cls.build(ServerConfig(mode="async"), None))
    stats = engine.run()
    trace = engine.table().to_pandas()
    flushes = trace[trace.event == "flush"]
    assert stats.server_steps == len(flushes) > 0
    assert set(flushes.n_success) == {5}


def test_the_worked_example_differs_from_fedasync():
    """The quorum server steps less often than FedAsync (buffer 1) on the same scenario."""
    quorum_cls = _example_namespace()["QuorumServer"]
    data = _churn_network()
    quorum = _engine(data, server=quorum_cls.build(ServerConfig(mode="async"), None)).run()
    fedasync = _engine(data).run()
    assert 0 < quorum.server_steps < fedasync.server_steps
    assert math.isclose(quorum.energy_j, fedasync.energy_j, rel_tol=0.5)


def test_only_a_server_with_state_adds_it_to_the_checkpoint():
    """The stale server's state is in the engine's checkpoint; the synchronous one keeps none."""
    stale = _engine(_churn_network())
    assert isinstance(stale.server, StaleServer) and not stale.server.in_slot
    assert "server" in stale.state_dict()
    sync = _engine({**_churn_network(), "server": {"mode": "sync"}})
    assert not sync.server.in_slot and "server" not in sync.state_dict()


def test_a_waiting_slot_ends_at_the_later_of_the_deadline_and_the_last_arrival_or_drop():
    """Ideal (waits for uploads) with churn: each slot ends at max(tau_0, last upload_end or dropped)."""
    data = _churn_network(12)
    data["server"] = {"mode": "sync"}
    data["channel"] = {"fading": "rayleigh"}
    data["devices"] = {**data["devices"], "peak_power_w": 0.02}  # some arrive late
    engine = _engine(data)
    engine.run()
    trace = engine.table().to_pandas()
    tau0 = data["run"]["deadline_s"]
    starts = trace[trace.event == "slot_start"].set_index("slot").time_s
    ends = trace[trace.event == "aggregate"].set_index("slot").time_s
    work = trace[trace.event.isin(["upload_end", "dropped"])].groupby("slot").time_s.max()
    late = 0
    for slot, start in starts.items():
        want = max(start + tau0, work.get(slot, -np.inf))
        assert ends[slot] == pytest.approx(want, rel=1e-12, abs=1e-12), slot
        late += bool(ends[slot] > start + tau0 * (1 + 1e-9))
    dropped_last = [
        s
        for s, g in trace[trace.event.isin(["upload_end", "dropped"])].groupby("slot")
        if g.sort_values("time_s").event.iloc[-1] == "dropped" and g.time_s.max() > starts[s] + tau0
    ]
    assert late > 0 and dropped_last, (late, dropped_last)


def _resumable(server: str, uplink: str, level: str) -> dict[str, Any]:
    """The composed golden cell (churn, jitter, fading) under a server, uplink and trace level."""
    from golden_runs import composed

    data = composed(server, uplink, churn=True, training=False)
    data["run"] = {**data["run"], "frames": 4}
    data["trace"] = {"level": level}
    return data


#: every (server, uplink) pair
_RESUMABLE = [(s, u) for s in SERVER_MODES for u in ("dedicated", "ofdma", "tdma")]


@pytest.mark.parametrize("level", ["events", "device_slots"])
@pytest.mark.parametrize("server, uplink", _RESUMABLE)
def test_a_run_killed_mid_run_resumes_to_the_uninterrupted_events(tmp_path, server, uplink, level):
    """Every server mode with every uplink, churn and jitter: a run folder failed at frame 2 and resumed has the uninterrupted run's events."""
    import wflsim
    from conftest import failing_at_frame

    data = _resumable(server, uplink, level)
    whole = wflsim.run(data)
    with pytest.raises(RuntimeError, match="injected"):
        wflsim.run(data, out=tmp_path / "run", hooks=failing_at_frame(2))
    again = wflsim.resume(tmp_path / "run")
    assert again.status == "completed"
    assert whole.events.equals(again.events)
