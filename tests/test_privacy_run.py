"""[privacy] in a run: the refusals before anything runs, the ledger's epsilon against an
independent composition of the trace's multipliers, the budget, the calibration, every server
mode and trace level, and resume (docs/privacy.md, "In a run")."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
from typing import Any

import dp_accounting
import numpy as np
import pandas as pd
import pytest
from dp_accounting import rdp
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import events, failing_at_frame, run_in_memory, saved_and_continued
from golden_runs import column_hashes
from wflsim.app.cli import main
from wflsim.sim.errors import ScenarioError
from wflsim.sim.privacy.ledger import step_multipliers
from wflsim.sim.privacy.mechanism import PrivacySpec

SERVERS = ("sync", "semi_sync", "async")
LEVELS = ("events", "device_slots")


def scenario(
    server: str = "sync",
    *,
    privacy: dict[str, Any] | None = None,
    training: bool = False,
    level: str = "events",
    scheme: str = "ideal",
    frames: int = 2,
) -> dict[str, Any]:
    """5 devices of unequal batches, ``frames`` frames of 3 slots, central noise at z = 1."""
    data: dict[str, Any] = {
        "name": "privacy",
        "seed": 7,
        "run": {"frames": frames, "slots_per_frame": 3, "deadline_s": 0.2},
        "network": {"num_devices": 5, "cell_radius_m": 500.0, "bandwidth_hz": 2e6},
        "channel": {"fading": "rayleigh"},
        "mobility": {"model": "static"},
        "devices": {"batch_size": [16, 16, 24, 24, 32]},
        "learning": {"dataset": "digits", "model": "mlp", "lr": 0.3, "eval_every_slots": 3}
        if training
        else {"enabled": False, "dataset": "digits", "model": "mlp"},
        "scheme": {"name": scheme},
        "trace": {"level": level},
        "privacy": {
            "mechanism": "central",
            "clip_norm": 1.0,
            "noise_multiplier": 1.0,
            **(privacy or {}),
        },
    }
    if server == "async":
        data["server"] = {"mode": "async", "buffer_size": 2}
    elif server == "semi_sync":
        data["server"] = {"mode": "semi_sync"}
    if "noise_multiplier" in data["privacy"] and "target_epsilon" in data["privacy"]:
        del data["privacy"]["noise_multiplier"]
    return data


def toml_of(data: dict[str, Any]) -> str:
    """A scenario table as TOML (tables of scalars and lists, one level of nesting)."""

    def value(v: Any) -> str:
        return json.dumps(v) if not isinstance(v, bool) else str(v).lower()

    head = [f"{k} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    body = []
    for name, table in data.items():
        if isinstance(table, dict):
            body.append(f"[{name}]")
            for k, v in table.items():
                if isinstance(v, dict):
                    inner = ", ".join(f"{a} = {value(b)}" for a, b in v.items())
                    body.append(f"{k} = {{ {inner} }}")
                else:
                    body.append(f"{k} = {value(v)}")
    return "\n".join(head + body) + "\n"


def cli(args: list[str]) -> tuple[int, str]:
    """The wflsim command in this process: (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    return code, err.getvalue().strip()


def independent_epsilon(multipliers: list[float], q: float | None, delta: float) -> float:
    """Epsilon of a device's events composed by dp_accounting's RdpAccountant directly."""
    acc = rdp.RdpAccountant()
    for z in multipliers:
        event: Any = dp_accounting.GaussianDpEvent(z)
        if q is not None:
            event = dp_accounting.PoissonSampledDpEvent(q, event)
        acc.compose(event)
    return float(acc.get_epsilon(delta))


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"privacy": {"mechanism": "over_the_air"}}, "privacy.mechanism"),
        ({"privacy": {"amplification": "uniform_selection"}}, "privacy.amplification"),
        (
            {
                "privacy": {"amplification": "uniform_selection"},
                "strategy": {"selection": {"rule": "uniform", "k": 2}},
                "scheme": {"name": "two_timescale"},
            },
            "privacy.amplification",
        ),
        (
            {
                "privacy": {"amplification": "uniform_selection"},
                "strategy": {"selection": {"rule": "uniform", "k": 2}},
                "server": {"mode": "semi_sync"},
            },
            "privacy.amplification",
        ),
        (
            {
                "privacy": {"amplification": "uniform_selection"},
                "strategy": {"selection": {"rule": "uniform", "k": 2}},
                "availability": {
                    "model": "markov",
                    "online_s": {"dist": "exponential", "mean": 0.5},
                    "offline_s": {"dist": "exponential", "mean": 0.2},
                },
            },
            "privacy.amplification",
        ),
        ({"privacy": {"target_epsilon": 1e-6}}, "privacy.target_epsilon"),
        ({"privacy": {"target_epsilon": -1.0}}, "privacy.target_epsilon"),
        ({"privacy": {"delta": -1e-5}}, "privacy.delta"),
        ({"privacy": {"delta": 1.0}}, "privacy.delta"),
        ({"privacy": {"clip_norm": 0.0}}, "privacy.clip_norm"),
        (
            {"privacy": {"clipping": "adaptive", "clipped_count_std": 0.1}},
            "privacy.clipped_count_std",
        ),
    ],
)
def test_cli_refuses_in_one_line_and_writes_nothing(tmp_path, change, field) -> None:
    """Each impossible [privacy] is one line naming the field, exit 2, no run folder."""
    data = scenario()
    for name, table in change.items():
        data[name] = {**data.get(name, {}), **table}
    if "target_epsilon" in data["privacy"]:
        del data["privacy"]["noise_multiplier"]
    path, out = tmp_path / "s.toml", tmp_path / "run"
    path.write_text(toml_of(data))
    code, err = cli(["run", str(path), "--out", str(out), "--quiet"])
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert field in err, err
    assert not out.exists()


# ------------------------------------------------------------------ accounting


def test_step_multipliers_central_by_hand() -> None:
    """Central noise: weights 1, 2, 4 in one aggregate give z * 4 / w (4z, 2z, z)."""
    spec = PrivacySpec.from_config(_config(noise_multiplier=2.0), num_devices=3)
    ids, mult = step_multipliers(spec, [2, 0, 1], [4.0, 1.0, 2.0])
    np.testing.assert_array_equal(ids, [0, 1, 2])
    np.testing.assert_allclose(mult, [8.0, 4.0, 2.0])


def test_step_multipliers_per_edge_aggregate() -> None:
    """Under a hierarchy each edge's aggregate has its own largest weight."""
    spec = PrivacySpec.from_config(_config(noise_multiplier=1.0), num_devices=4)
    ids, mult = step_multipliers(spec, [0, 1, 2, 3], [1.0, 2.0, 3.0, 6.0], groups=[0, 0, 1, 1])
    np.testing.assert_allclose(mult, [2.0, 1.0, 2.0, 1.0])


def test_a_device_twice_in_a_central_step_adds_its_sensitivities() -> None:
    """Two updates of weight 1 and 2 beside one of 2: sensitivity 3 C / 5, noise 2 z C / 5,
    multiplier 2 z / 3."""
    spec = PrivacySpec.from_config(_config(noise_multiplier=1.5), num_devices=2)
    ids, mult = step_multipliers(spec, [0, 0, 1], [1.0, 2.0, 2.0])
    np.testing.assert_allclose(mult, [1.5 * 2.0 / 3.0, 1.5])


def test_a_device_twice_in_a_local_step_composes_two_releases() -> None:
    """Local noise: two releases at z compose to one at z / sqrt(2) (Gaussian, exact)."""
    spec = PrivacySpec.from_config(_config(mechanism="local", noise_multiplier=2.0), 2)
    ids, mult = step_multipliers(spec, [1, 0, 1], [1.0, 1.0, 5.0])
    np.testing.assert_allclose(mult, [2.0, 2.0 / math.sqrt(2.0)])


def _config(**fields: Any) -> Any:
    from wflsim.sim.privacy.config import PrivacyConfig

    return PrivacyConfig(**{"mechanism": "central", "clip_norm": 1.0, **fields})


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("mechanism", ["central", "local"])
def test_epsilon_equals_an_independent_composition(server, mechanism) -> None:
    """Each privacy row's dp_epsilon equals dp_accounting's RDP composition of the device's
    dp_noise_multiplier rows so far."""
    table, stats = run_in_memory(scenario(server, privacy={"mechanism": mechanism}))
    rows = events(table, "privacy")
    assert len(rows)
    for _, dev in rows.groupby("device"):
        mults = dev["dp_noise_multiplier"].tolist()
        for i in range(len(mults)):
            want = independent_epsilon(mults[: i + 1], None, 1e-5)
            assert dev["dp_epsilon"].iloc[i] == pytest.approx(want, rel=1e-9)
    assert (rows["dp_noise_multiplier"] >= 1.0 - 1e-12).all()
    final = rows.groupby("device")["dp_epsilon"].last()
    assert stats.epsilon_max == pytest.approx(final.max())


def test_local_noise_accounts_every_update_at_z() -> None:
    """Local noise: a device's multiplier is z whatever the step's weights."""
    table, _ = run_in_memory(scenario(privacy={"mechanism": "local", "noise_multiplier": 0.7}))
    np.testing.assert_allclose(events(table, "privacy")["dp_noise_multiplier"], 0.7)


def test_rows_match_the_applied_updates_in_sync() -> None:
    """Sync: one privacy row per update that arrived in time, at the aggregate's time."""
    table, _ = run_in_memory(scenario())
    rows = events(table, "privacy")
    ok = events(table, "upload_end")
    ok = ok[ok["success"]]
    assert sorted(zip(rows.slot, rows.device, strict=True)) == sorted(
        zip(ok.slot, ok.device, strict=True)
    )


def test_amplification_accounts_every_device_every_step() -> None:
    """uniform_selection: every device composes the sampled event at z in every slot, with
    q = k / N, and its epsilon is the independent composition's."""
    data = scenario(privacy={"amplification": "uniform_selection"})
    data["strategy"] = {"selection": {"rule": "uniform", "k": 2}}
    table, _ = run_in_memory(data)
    rows = events(table, "privacy")
    assert len(rows) == 5 * 6
    np.testing.assert_allclose(rows["dp_noise_multiplier"], 1.0)
    last = rows.groupby("device")["dp_epsilon"].last()
    np.testing.assert_allclose(last, independent_epsilon([1.0] * 6, 2 / 5, 1e-5), rtol=1e-9)


# ------------------------------------------------------------------ the budget


@pytest.mark.parametrize("server", SERVERS)
def test_the_budget_stops_devices_and_none_passes_it(server) -> None:
    """With a budget, every device stops once (one dp_budget_spent row), no privacy row passes
    the budget, and a stopped device has no privacy row afterwards."""
    budget = 7.5
    table, stats = run_in_memory(scenario(server, privacy={"epsilon_budget": budget}, frames=3))
    rows, spent = events(table, "privacy"), events(table, "dp_budget_spent")
    assert (rows["dp_epsilon"] <= budget).all()
    assert spent["device"].is_unique and len(spent) == stats.dp_stopped_devices > 0
    for _, stop in spent.iterrows():
        later = rows[(rows.device == stop.device) & (rows.time_s > stop.time_s)]
        assert later.empty
    assert stats.epsilon_max <= budget


def test_a_budget_below_one_step_stops_every_device_before_the_first_slot() -> None:
    """A budget smaller than one update's epsilon: every device stops at slot -1 and nobody
    takes part."""
    table, stats = run_in_memory(scenario(privacy={"epsilon_budget": 0.5}))
    spent = events(table, "dp_budget_spent")
    assert sorted(spent["device"]) == [0, 1, 2, 3, 4] and (spent["slot"] == -1).all()
    assert events(table, "privacy").empty and stats.participations == 0


# ------------------------------------------------------------------ calibration


def test_target_epsilon_is_met_and_recorded(tmp_path) -> None:
    """target_epsilon: z is calibrated before the run (the manifest records it), every
    device ends within the target."""
    import wflsim

    data = scenario(privacy={"target_epsilon": 4.0}, frames=2)
    res = wflsim.run(data, out=tmp_path / "run", progress=False)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    z = manifest["privacy"]["noise_multiplier"]
    assert manifest["privacy"]["calibrated"] and z > 0
    assert manifest["privacy"]["calibrated_for_updates"] == 6
    # the calibrated z spends at most the target over 6 updates
    assert independent_epsilon([z] * 6, None, 1e-5) <= 4.0 * (1 + 1e-6)
    assert res.summary["epsilon_max"] <= 4.0 * (1 + 1e-6)
    assert res.summary["dp_noise_multiplier"] == z


# ------------------------------------------------------------------ the matrix


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("mechanism", ["central", "local"])
def test_every_server_and_level_runs_with_training(server, level, mechanism) -> None:
    """Every server mode x trace level x digital mechanism trains on the digits data and
    accounts its steps."""
    data = scenario(server, privacy={"mechanism": mechanism}, training=True, level=level)
    table, stats = run_in_memory(data)
    assert len(events(table, "privacy")) > 0
    assert stats.epsilon_max > 0 and np.isfinite(stats.last_accuracy)


def test_network_only_hierarchy_accounts_each_edges_step() -> None:
    """Two cells' edge servers: every applied update is accounted, at z or more."""
    data = scenario()
    data["cells"] = {"sites_m": [[-300.0, 0.0], [300.0, 0.0]]}
    data["network"]["cell_radius_m"] = 400.0
    data["server"] = {"hierarchy": {"cloud_every_slots": 2, "backhaul_rate_bps": 1e12}}
    table, _ = run_in_memory(data)
    rows = events(table, "privacy")
    ok = events(table, "upload_end")
    assert len(rows) == int(ok["success"].sum()) > 0
    assert (rows["dp_noise_multiplier"] >= 1.0 - 1e-12).all()


# ------------------------------------------------------------------ reproducibility


def test_same_seed_gives_the_same_trace() -> None:
    """Two runs of one network-only scenario give the same trace, epsilon included."""
    data = scenario("async", privacy={"epsilon_budget": 7.5})
    first, _ = run_in_memory(data)
    second, _ = run_in_memory(copy.deepcopy(data))
    assert column_hashes(first) == column_hashes(second)


@pytest.mark.parametrize("server", SERVERS)
def test_save_and_continue_gives_the_same_trace(tmp_path, server) -> None:
    """Saved at frame 1 and continued in fresh objects: the uninterrupted trace and epsilon."""
    data = scenario(server, privacy={"epsilon_budget": 7.5}, frames=3)
    whole, stats = run_in_memory(data)
    both = saved_and_continued(data, 1, tmp_path / "state")
    assert column_hashes(both) == column_hashes(whole)


@pytest.mark.parametrize("server", SERVERS)
def test_kill_and_resume_gives_the_same_trace(tmp_path, server) -> None:
    """A run failed as frame 2 starts and resumed gives the uninterrupted events and summary
    epsilon, with a calibrated z."""
    import wflsim

    data = scenario(server, privacy={"target_epsilon": 6.0}, frames=3)
    whole = wflsim.run(data, progress=False)
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="injected"):
        wflsim.run(data, out=out, hooks=failing_at_frame(2), progress=False)
    resumed = wflsim.resume(out, progress=False)
    pd.testing.assert_frame_equal(resumed.events, whole.events)
    assert resumed.summary["epsilon_max"] == whole.summary["epsilon_max"]


def test_a_checkpoint_with_another_z_is_refused(tmp_path) -> None:
    """A saved state continued by a run of another noise multiplier is refused."""
    from wflsim.app.run import build_engine, make_learner, prepare_scenario
    from wflsim.sim import state
    from wflsim.sim.config.loading import validate_scenario

    def engine(z: float) -> Any:
        data = scenario(privacy={"noise_multiplier": z})
        prep = prepare_scenario(validate_scenario(data))
        return build_engine(prep, make_learner(prep))

    first = engine(1.0)
    first.run(stop_frame=1)
    state.save(tmp_path / "s", state.run_state(first))
    with pytest.raises(ValueError, match="noise multiplier"):
        state.load_run_state(engine(2.0), state.load(tmp_path / "s"))


def test_over_the_air_without_aircomp_names_the_uplink() -> None:
    """over_the_air on a digital uplink is refused through the API too, naming the field."""
    import wflsim

    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(scenario(privacy={"mechanism": "over_the_air"}))
    assert err.value.field == "privacy.mechanism" and "aircomp" in str(err.value)


def test_a_resume_calibrates_nothing_again(tmp_path, monkeypatch) -> None:
    """--resume takes the manifest's z: with the calibration broken it still completes, and
    gives the uninterrupted events."""
    import wflsim
    from wflsim.sim.config import resolve

    data = scenario(privacy={"target_epsilon": 6.0}, frames=3)
    whole = wflsim.run(data, progress=False)
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="injected"):
        wflsim.run(data, out=out, hooks=failing_at_frame(2), progress=False)

    def broken(*args: Any, **kwargs: Any) -> float:
        raise AssertionError("calibrated again")

    monkeypatch.setattr(resolve, "calibrate_noise_multiplier", broken)
    resumed = wflsim.resume(out, progress=False)
    pd.testing.assert_frame_equal(resumed.events, whole.events)


def test_pld_is_at_most_rdp_in_a_run() -> None:
    """The PLD accountant (exact for Gaussians) gives every device at most RDP's epsilon."""
    _, rdp_stats = run_in_memory(scenario())
    _, pld_stats = run_in_memory(scenario(privacy={"accountant": "pld"}))
    assert 0 < pld_stats.epsilon_max <= rdp_stats.epsilon_max


def test_adaptive_clipping_accounts_the_largest_weight_at_z() -> None:
    """Adaptive clipping, central noise: the count's noise composed with z_delta gives exactly
    z for each step's device of the largest weight, more for the others."""
    z = 1.2
    data = scenario(
        privacy={"noise_multiplier": z, "clipping": "adaptive", "clipped_count_std": 2.0}
    )
    table, _ = run_in_memory(data)
    rows = events(table, "privacy")
    per_step = rows.groupby("slot")["dp_noise_multiplier"].min()
    np.testing.assert_allclose(per_step, z, rtol=1e-12)


def test_stale_hierarchy_accounts_each_edges_flush() -> None:
    """semi_sync under two edge servers: every flushed update is accounted, at z or more."""
    data = scenario("semi_sync")
    data["cells"] = {"sites_m": [[-300.0, 0.0], [300.0, 0.0]]}
    data["network"]["cell_radius_m"] = 400.0
    data["server"]["hierarchy"] = {"cloud_every_slots": 2, "backhaul_rate_bps": 1e12}
    table, _ = run_in_memory(data)
    rows = events(table, "privacy")
    flushed = int(events(table, "flush")["n_success"].sum())
    assert len(rows) == flushed > 0
    assert (rows["dp_noise_multiplier"] >= 1.0 - 1e-12).all()


@pytest.mark.parametrize("server", ["sync", "semi_sync"])
def test_the_accounted_multiplier_is_the_learners_noise_over_the_sensitivity(server) -> None:
    """Central noise with training: each privacy row's multiplier is the dp_clip row's noise
    standard deviation over the device's sensitivity B_n C / sum B (one step per slot)."""
    from wflsim.models.learner import TorchLearner

    if not hasattr(TorchLearner, "set_privacy"):
        pytest.skip("the learner adds no noise (no set_privacy)")
    table, _ = run_in_memory(scenario(server, training=True))
    acc = events(table, "privacy")[["slot", "device", "dp_noise_multiplier"]]
    clip = events(table, "dp_clip")[["slot", "device", "dp_noise_std", "dp_clip_norm"]]
    both = acc.merge(clip, on=["slot", "device"], validate="one_to_one")
    assert len(both) == len(acc) > 0
    batch = np.array([16.0, 16.0, 24.0, 24.0, 32.0])
    for _, step in both.groupby("slot"):
        b = batch[step["device"].to_numpy(dtype=int)]
        sensitivity = b * step["dp_clip_norm"].to_numpy() / b.sum()
        np.testing.assert_allclose(
            step["dp_noise_std"].to_numpy() / sensitivity,
            step["dp_noise_multiplier"].to_numpy(),
            rtol=1e-9,
        )


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.lists(st.tuples(st.integers(0, 3), st.floats(0.1, 10.0)), min_size=1, max_size=6),
        min_size=1,
        max_size=25,
    ),
    mechanism=st.sampled_from(["central", "local"]),
)
def test_no_admitted_step_passes_the_budget(steps, mechanism) -> None:
    """Whatever the steps (devices repeated, any weights), the updates the ledger admits never
    take a device past its budget, and a stopped device is never admitted again."""
    from wflsim.sim.privacy.ledger import PrivacyLedger
    from wflsim.sim.trace import TraceBuffer

    budget = 6.0
    cfg = _config(mechanism=mechanism, noise_multiplier=1.0, epsilon_budget=budget)
    ledger = PrivacyLedger(PrivacySpec.from_config(cfg, 4), 4, TraceBuffer())
    ledger.start(0.0)
    for t, step in enumerate(steps):
        devices = np.array([d for d, _ in step])
        weights = np.array([w for _, w in step])
        before = ledger.blocked()
        keep = ledger.admitted(devices, weights)
        assert not (keep & before[devices]).any()
        ids, mult = step_multipliers(ledger.spec, devices[keep], weights[keep])
        ledger.account(float(t), 0, t, ids, mult)
        assert (ledger.epsilon() <= budget).all()


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("uplink", ["dedicated", "ofdma", "tdma"])
@pytest.mark.parametrize("churn", [False, True])
def test_every_uplink_and_availability_composes(server, uplink, churn) -> None:
    """Every server mode x digital uplink x availability runs with a budget, and no privacy row
    passes it (network only)."""
    data = scenario(server, privacy={"epsilon_budget": 9.0}, frames=3)
    if uplink != "dedicated":
        data["uplink"] = {"mode": uplink, "planned_concurrent_uploads": 2}
    if churn:
        data["availability"] = {
            "model": "markov",
            "online_s": {"dist": "exponential", "mean": 0.5},
            "offline_s": {"dist": "exponential", "mean": 0.2},
        }
    table, stats = run_in_memory(data)
    rows = events(table, "privacy")
    assert len(rows) > 0 and (rows["dp_epsilon"] <= 9.0).all()
    assert stats.epsilon_max <= 9.0


def test_a_device_twice_under_adaptive_clipping_counts_both_indicators() -> None:
    """Adaptive clipping: a device with two updates in one step moves the clipped count by
    2 x 1/2, so its count's multiplier is sigma_b, not 2 sigma_b (Andrew et al., Theorem 1)."""
    cfg = _config(noise_multiplier=1.0, clipping="adaptive", clipped_count_std=2.0)
    spec = PrivacySpec.from_config(cfg, 2)
    z_delta = spec.update_multiplier
    ids, mult = step_multipliers(spec, [0, 0, 1], [1.0, 1.0, 1.0])
    # device 0: sensitivities 2 C / 3 against sigma = z_delta C / 3 -> z_delta / 2; count: 2
    want_0 = ((z_delta / 2.0) ** -2 + 2.0**-2) ** -0.5
    want_1 = (z_delta**-2 + 4.0**-2) ** -0.5
    np.testing.assert_allclose(mult, [want_0, want_1], rtol=1e-12)


def test_stale_steps_under_adaptive_clipping_give_every_update_its_multiplier() -> None:
    """Central noise, adaptive clipping, async updates clipped at their versions' clips: the
    learner's noise over each update's sensitivity B_n s_n C_n / sum B (C_n its own dp_clip_norm,
    s_n <= 1) reaches the update's part of the multiplier the ledger accounted."""
    sigma_b = 1.0
    data = scenario(
        "async",
        privacy={
            "clipping": "adaptive",
            "clip_norm": 20.0,
            "clip_learning_rate": 2.0,
            "clipped_count_std": sigma_b,
        },
        training=True,
        frames=3,
    )
    table, _ = run_in_memory(data)
    acc = events(table, "privacy").reset_index(drop=True)
    clip = events(table, "dp_clip").reset_index(drop=True)
    assert len(acc) == len(clip) > 0 and (acc["device"] == clip["device"]).all()
    batch = np.array([16.0, 16.0, 24.0, 24.0, 32.0])
    clip["mult"] = acc["dp_noise_multiplier"]
    mixed = 0
    for _, step in clip.groupby(["time_s", "dp_noise_std"], sort=False):
        dev = step["device"].to_numpy(dtype=int)
        if len(set(dev.tolist())) < len(dev):
            continue  # a device twice: one release of their summed sensitivities
        b = batch[dev]
        sensitivity = b * step["dp_clip_norm"].to_numpy() / b.sum()  # an upper bound (s_n <= 1)
        measured = step["dp_noise_std"].to_numpy() / sensitivity
        update_part = (step["mult"].to_numpy() ** -2 - (2 * sigma_b) ** -2) ** -0.5
        mixed += int(step["dp_clip_norm"].nunique() > 1)
        assert (measured >= update_part * (1 - 1e-9)).all(), (step, measured, update_part)
    assert mixed > 0, "no step mixed clips: the check saw nothing"


@pytest.mark.slow
@pytest.mark.parametrize("server", ["semi_sync", "async"])
def test_kill_and_resume_under_adaptive_clipping_with_training(tmp_path, server) -> None:
    """Central noise, adaptive clipping, stale updates, training: a run failed as frame 2 starts
    and resumed gives the uninterrupted events (clips and noise included) and final model."""
    from conftest import assert_resume_equals_whole

    data = scenario(
        server,
        privacy={
            "clipping": "adaptive",
            "clip_norm": 20.0,
            "clip_learning_rate": 2.0,
            "clipped_count_std": 1.0,
        },
        training=True,
        frames=3,
    )
    assert_resume_equals_whole(data, tmp_path / "run")
