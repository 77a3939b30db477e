"""Whole runs of ``[privacy] mechanism = "over_the_air"`` on the digits data (docs/privacy.md,
"Over the air"): each ``air_noise`` and ``air_power = "privacy"`` under each power rule, on two
cells' edge servers, the trace's multipliers against ``z``, the epsilon against dp_accounting's
``RdpAccountant`` fed the rows by hand, the energy against the scheme's own powers, and
kill-and-resume."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_privacy_run import independent_epsilon, scenario

from conftest import events, failing_at_frame, run_in_memory

Z = 1.0
#: (power rule, scheme): the controller needs the paper's scheme
RULES = (
    ("truncated_inversion", "ideal"),
    ("optimal", "ideal"),
    ("controller", "two_timescale"),
)
#: (air_noise, air_power) of ``[privacy]``
PLACEMENTS = (
    ("receiver", "scheme"),
    ("devices", "scheme"),
    ("channel_only", "scheme"),
    ("receiver", "privacy"),
)


def air(rule: str, scheme: str, air_noise: str, air_power: str, *, cells: bool = False,
        frames: int = 2) -> dict[str, Any]:  # fmt: skip
    """5 devices over AirComp under ``rule``, training on the digits MLP, noise placed by
    ``air_noise`` (no target under channel_only), powers by ``air_power``; ``cells``: two
    sites whose base stations are edge servers under a cloud every 2 slots."""
    privacy = {"mechanism": "over_the_air", "air_noise": air_noise, "air_power": air_power}
    data = scenario(privacy=privacy, training=True, scheme=scheme, frames=frames)
    if air_noise == "channel_only":
        del data["privacy"]["noise_multiplier"]
    data["uplink"] = {"mode": "aircomp", "power_control": rule}
    if cells:
        data["cells"] = {"sites_m": [[-250.0, 0.0], [250.0, 0.0]], "hysteresis_db": 0.0}
        data["server"] = {"hierarchy": {"cloud_every_slots": 2, "backhaul_rate_bps": 1e12}}
    return data


def check_rows(table: Any, stats: Any, air_noise: str) -> pd.DataFrame:
    """The privacy rows: one per applied update, at z or more (measured and positive under
    channel_only), each dp_epsilon dp_accounting's RDP composition of the device's rows so far."""
    rows = events(table, "privacy")
    applied = events(table, "dp_clip")
    assert len(rows) == len(applied) > 0
    mult = rows["dp_noise_multiplier"].to_numpy()
    if air_noise == "channel_only":
        assert (mult > 0).all()
    else:
        assert (mult >= Z * (1 - 1e-9)).all()
    for _, dev in rows.groupby("device"):
        zs = dev["dp_noise_multiplier"].tolist()
        for i in range(len(zs)):
            want = independent_epsilon(zs[: i + 1], None, 1e-5)
            assert dev["dp_epsilon"].iloc[i] == pytest.approx(want, rel=1e-9)
    final = rows.groupby("device")["dp_epsilon"].last()
    assert np.isfinite(final).all() and stats.epsilon_max == pytest.approx(final.max())
    return rows


def _cases(cells: bool) -> list[Any]:
    """Every rule x placement; the first placement of each rule in the default run."""
    out = []
    for (rule, scheme), (noise, power) in [(r, p) for r in RULES for p in PLACEMENTS]:
        marks = () if (noise, power) == ("receiver", "scheme") and not cells else pytest.mark.slow
        out.append(pytest.param(rule, scheme, noise, power, marks=marks))
    return out


@pytest.mark.parametrize(("rule", "scheme", "air_noise", "air_power"), _cases(False))
def test_a_run_accounts_every_applied_update_at_z(rule, scheme, air_noise, air_power) -> None:
    """One cell: every applied update's multiplier reaches z (channel_only: measured) and its
    epsilon is the independent composition of the rows."""
    table, stats = run_in_memory(air(rule, scheme, air_noise, air_power))
    check_rows(table, stats, air_noise)
    assert np.isfinite(stats.last_accuracy)


@pytest.mark.parametrize(("rule", "scheme", "air_noise", "air_power"), _cases(True))
def test_a_run_on_edge_servers_accounts_every_applied_update_at_z(
    rule, scheme, air_noise, air_power
) -> None:
    """Two cells' edge servers (one sum per cell): every applied update reaches z (channel_only:
    measured) and its epsilon is the independent composition of the rows."""
    table, stats = run_in_memory(air(rule, scheme, air_noise, air_power, cells=True))
    check_rows(table, stats, air_noise)


@pytest.mark.parametrize(
    ("rule", "scheme"),
    [pytest.param(*r, marks=() if r[0] == "truncated_inversion" else pytest.mark.slow)
     for r in RULES],
)  # fmt: skip
def test_privacy_powers_spend_at_most_the_schemes_energy(rule, scheme) -> None:
    """air_power = "privacy" only lowers the powers: its run's energy is at most the scheme's
    powers' run on the same seed (the receiver filling), and both reach z."""
    private, p_stats = run_in_memory(air(rule, scheme, "receiver", "privacy"))
    plain, s_stats = run_in_memory(air(rule, scheme, "receiver", "scheme"))
    check_rows(private, p_stats, "receiver")
    check_rows(plain, s_stats, "receiver")
    assert 0 < p_stats.energy_j <= s_stats.energy_j * (1 + 1e-12)


@pytest.mark.parametrize(
    ("cells", "air_noise"),
    [(False, "receiver"), pytest.param(True, "devices", marks=pytest.mark.slow)],
)
def test_kill_and_resume_over_the_air_gives_the_same_trace(tmp_path, cells, air_noise) -> None:
    """A run failed as frame 2 starts and resumed gives the uninterrupted events and epsilon."""
    import wflsim

    data = air("truncated_inversion", "ideal", air_noise, "scheme", cells=cells, frames=3)
    whole = wflsim.run(copy.deepcopy(data), progress=False)
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="injected"):
        wflsim.run(data, out=out, hooks=failing_at_frame(2), progress=False)
    resumed = wflsim.resume(out, progress=False)
    pd.testing.assert_frame_equal(resumed.events, whole.events)
    assert resumed.summary["epsilon_max"] == whole.summary["epsilon_max"]


@pytest.mark.parametrize("air_noise", ["receiver", "devices", "channel_only"])
def test_the_learners_noise_gives_the_multipliers_the_ledger_accounts(monkeypatch, air_noise):
    """Synthetic uploads of norm C through the learner's over-the-air apply (D = 16,003
    entries): the noise measured in the model's step over each device's sensitivity
    (c_n / s) C is the multiplier the sum hands the ledger (privacy_multipliers), within 3 %
    (the std's relative error is 1 / sqrt(2 D), 0.6 %)."""
    import torch
    from test_learner import tiny_learner
    from test_privacy_air import BATCH, N0, PEAK, SEEN, TRUE, planned, spec

    from wflsim.models.learner.core import TorchLearner
    from wflsim.sim.servers.aircomp import over_the_air_sum

    clip = 0.7
    monkeypatch.setattr(TorchLearner, "clip_norm", property(lambda self: clip), raising=False)
    learner = tiny_learner([3, 5, 4], hidden=2000, lr=1.0)
    d = learner.num_params
    z = None if air_noise == "channel_only" else 1.0
    privacy = spec(air_noise=air_noise, z=z)
    _, plan = planned("truncated_inversion", SEEN, TRUE, PEAK, BATCH, N0, privacy, [d] * 3)
    air_sum = over_the_air_sum(plan, np.arange(3), 0, np.array([N0]))
    accounted = np.asarray(air_sum.privacy_multipliers, dtype=np.float64)
    learner.compute(0, np.arange(3))
    u = torch.randn(3, d, generator=torch.Generator().manual_seed(5))
    u = u / u.norm(dim=1, keepdim=True) * clip
    learner._uploads = u
    w0 = learner._w.double().clone()
    learner.receive_over_the_air(air_sum)
    learner.apply(0, np.arange(3))
    weight = torch.tensor(BATCH / BATCH.sum() * air_sum.ratio, dtype=torch.float64)
    noise = (w0 - learner._w.double()) - weight @ u.double()
    measured = float(noise.std()) / (weight.numpy() * clip)
    np.testing.assert_allclose(measured, accounted, rtol=0.03)
    if z is not None:
        assert (accounted >= z * (1 - 1e-9)).all()
