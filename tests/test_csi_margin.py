"""The CSI margin of the Proposition-1 schemes (``[scheme] csi_margin``): the quantile of the true
gain given the estimate against a Monte Carlo of the CSI model, the realised outage rate against
the target, nothing changed under perfect CSI, the power's bounds, and refused values.

Statistical tests use fixed seeds and state their tolerance (a number of binomial standard errors,
or a binomial 99 % interval)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from test_channel import channel, motion, speed_for_rho

from conftest import REPO, base_scenario, events, network_only, run_in_memory
from wflsim.app.scenario import validate_scenario
from wflsim.sim.errors import ScenarioError
from wflsim.sim.schemes.base import SlotContext
from wflsim.sim.schemes.common import threshold_slot_plan
from wflsim.sim.world.channel.csi import NONCENTRALITY_ASYMPTOTIC, CsiPosterior

#: Every scheme whose slot rule is Proposition 1 (and so takes a CSI margin).
THRESHOLD_SCHEMES = [
    "two_timescale",
    "only_pc",
    "random_freezing",
    "topk_ef",
    "pruning",
    "fedhq",
    "fjord",
]
GAUSS_MARKOV = {"model": "rayleigh", "correlation": {"model": "gauss_markov", "carrier_ghz": 2.0}}


def draws(ch, n: int, n_slots: int, speed_mps: float = 0.0):
    """True and seen small-scale powers and the posteriors of ``n_slots`` slots, pooled over
    slots: ``(g, g_hat, [posterior per slot])``."""
    large = ch.large_scale(0, motion(n, speed_mps=speed_mps))
    out = [ch.slot(t, large) for t in range(n_slots)]
    g = np.concatenate([o.gain / large.gain for o in out])
    seen = np.concatenate([o.seen_gain / large.gain for o in out])
    return g, seen, [o.posterior for o in out]


# ------------------------------------------------------------------ 1. the quantile


@pytest.mark.parametrize(
    ("cfg", "rho"),
    [
        ({"csi": {"error_variance": 0.1}}, 0.0),
        ({"csi": {"error_variance": 0.6}}, 0.0),
        ({"fading": {"model": "rician", "k_db": 6.0}, "csi": {"error_variance": 0.2}}, 0.0),
        ({"fading": GAUSS_MARKOV, "csi": {"error_variance": 0.1, "delay_slots": 2}}, 0.7),
        ({"csi": {"delay_slots": 1}}, 0.0),
    ],
    ids=["rayleigh-e2-0.1", "rayleigh-e2-0.6", "rician-6dB", "gauss-markov-delay-2", "iid-delay"],
)
@pytest.mark.parametrize("q", [0.05, 0.3])
def test_power_quantile_matches_a_monte_carlo_of_the_csi_model(cfg, rho, q):
    """The channel's own draws (40,000 devices x 3 slots): the true power falls below the closed-
    form q-quantile given the estimate in a share q of the draws, overall and in each fifth of
    the estimates (4.5 binomial SE); Gauss-Markov at 2 GHz with rho = 0.7 (its speed)."""
    n = 40_000
    speed = speed_for_rho(rho, 2.0) if rho else 0.0
    g, seen, posts = draws(channel(n, 31, **cfg), n, 3, speed)
    g_q = np.concatenate([p.power_quantile(q) for p in posts])
    below = g < g_q
    assert abs(below.mean() - q) < 4.5 * math.sqrt(q * (1 - q) / g.size)
    fifths = np.array_split(np.argsort(seen), 5)
    for idx in fifths:
        assert abs(below[idx].mean() - q) < 4.5 * math.sqrt(q * (1 - q) / idx.size)


def test_posterior_of_rayleigh_without_delay_is_the_shrunk_estimate():
    """Rayleigh, e2 = 0.3, no delay: mu = sqrt(1 - e2) c_hat, so |mu|^2 = 0.7 |c_hat|^2, v = 0.3."""
    n = 1000
    _, seen, posts = draws(channel(n, 32, csi={"error_variance": 0.3}), n, 1)
    np.testing.assert_allclose(posts[0].mean_power, 0.7 * seen, rtol=1e-12)
    np.testing.assert_allclose(posts[0].variance, 0.3, rtol=1e-12)


def test_an_outdated_estimate_of_iid_fading_says_nothing():
    """i.i.d. Rayleigh, delay 1: the posterior is the prior Exp(1), g_q = -ln(1 - q) for every
    estimate."""
    n = 500
    _, _, posts = draws(channel(n, 33, csi={"delay_slots": 1, "error_variance": 0.2}), n, 2)
    for p in posts:
        np.testing.assert_allclose(p.power_quantile(0.1), -math.log(0.9), rtol=1e-9)


def test_power_quantile_is_the_rice_quantile_and_continuous_at_the_switch():
    """g_q = (v/2) x^2, x the q-quantile of scipy's Rice(|mu| / sqrt(v/2)); the large-noncentrality
    form agrees with the exact one at the switch (1e-9); v = 0 gives |mu|^2."""
    m2 = np.array([0.0, 0.3, 2.0, 50.0])
    v = np.array([0.5, 0.1, 0.02, 1e-3])
    got = CsiPosterior(m2, v).power_quantile(0.07)
    rice = v / 2 * stats.rice.ppf(0.07, np.sqrt(m2 / (v / 2))) ** 2
    np.testing.assert_allclose(got, rice, rtol=1e-9)
    half = np.array([1.0, 1.0])
    m2_edge = NONCENTRALITY_ASYMPTOTIC * np.array([1.0, 1.0 + 1e-12])
    a, b = CsiPosterior(m2_edge * half, 2 * half).power_quantile(0.05)
    assert b == pytest.approx(a, rel=1e-9)
    np.testing.assert_array_equal(CsiPosterior(m2, np.zeros(4)).power_quantile(0.2), m2)


def test_nakagami_has_no_posterior_and_perfect_csi_none():
    """Nakagami-m (m = 2) with CSI error and any perfect-CSI channel give no posterior."""
    _, _, posts = draws(
        channel(10, 34, fading={"model": "nakagami", "m": 2.0}, csi={"error_variance": 0.1}), 10, 1
    )
    assert posts == [None]
    _, _, posts = draws(channel(10, 34, csi={"error_variance": 0.0}), 10, 1)
    assert posts == [None]


# ------------------------------------------------------------------ 2. realised outage


def _outage_scenario(**scheme: Any) -> dict[str, Any]:
    """50 static devices in a 300 m cell with 5 J budgets (the queues stay empty: p_max = P_bar,
    which almost never binds), Rayleigh with e2 = 0.1, 20 frames x 20 slots."""
    return base_scenario(
        seed=7,
        run={"frames": 20, "slots_per_frame": 20, "deadline_s": 0.8},
        network={"num_devices": 50, "cell_radius_m": 300.0},
        devices={"batch_size": 128, "energy_budget_j": 5.0},
        channel={"csi": {"error_variance": 0.1}},
        scheme={"name": "two_timescale", **scheme},
    )


def test_realised_outage_rate_is_the_target():
    """Stationary CSI error (e2 = 0.1, i.i.d. Rayleigh), target 0.1: the share of participating
    uploads that miss the deadline lies in the binomial 99 % interval of the target, while the
    paper's rule loses about half; powers stay within [p_min, p_max] and p_max <= P_bar."""
    q = 0.1
    table, st_ = run_in_memory(_outage_scenario(csi_margin={"target_outage": q}))
    dec, en = events(table, "decision"), events(table, "energy")
    part = en["participating"].astype(bool).to_numpy()
    failed = int((part & ~en["success"].astype(bool).to_numpy()).sum())
    n = int(part.sum())
    assert n > 0.9 * len(en)  # the threshold does not bind
    lo, hi = stats.binom.interval(0.99, n, q)
    assert lo <= failed <= hi, (failed, n)
    p = dec["tx_power_w"].to_numpy()[part]
    assert np.all(p <= dec["max_tx_power_w"].to_numpy()[part])
    assert np.all(dec["max_tx_power_w"].to_numpy() <= 1.0)  # the default peak power
    assert np.all(p >= dec["min_tx_power_w"].to_numpy()[part])
    _, paper = run_in_memory(_outage_scenario())
    assert paper.outage_rate > 0.4


# ------------------------------------------------------------------ 3. perfect CSI


@pytest.mark.parametrize("name", THRESHOLD_SCHEMES)
@pytest.mark.parametrize("csi", [None, {"error_variance": 0.0, "delay_slots": 0}])
def test_perfect_csi_gives_the_same_trace_as_no_margin(name, csi):
    """Without CSI error or delay the margin changes nothing: every column of every row equals
    the run without it, for every Proposition-1 scheme."""
    channel_table = {} if csi is None else {"csi": csi}
    off = network_only(scheme={"name": name}, channel=channel_table)
    on = network_only(scheme={"name": name, "csi_margin": {"target_outage": 0.05}})
    on["channel"] = channel_table
    a, _ = run_in_memory(off)
    b, _ = run_in_memory(on)
    assert a.equals(b)


def test_the_manifest_states_the_rule():
    """The run's channel description names the margin's rule (imperfect CSI) or says it has no
    effect (perfect CSI); without a margin it says nothing of it."""
    import wflsim
    from wflsim.app.run import channel_description

    rule = "slot_power_rule"
    on = _outage_scenario(csi_margin={"target_outage": 0.05})
    text = channel_description(wflsim.prepare(on))["controller_assumption"][rule]
    assert "quantile" in text and "0.95" in text
    on["channel"] = {}
    text = channel_description(wflsim.prepare(on))["controller_assumption"][rule]
    assert "no effect" in text
    off = channel_description(wflsim.prepare(_outage_scenario()))
    assert rule not in off["controller_assumption"]


def test_a_run_folder_records_the_rule_and_the_analysis_reads_the_target(tmp_path):
    """A run with a margin writes the rule into manifest.json and the trace's wflsim.channel;
    analysis.channel reports its target (NaN for the paper's rule) and a lower outage rate."""
    import json

    import pyarrow.parquet as pq

    from wflsim.analysis import channel as study
    from wflsim.app.run import execute, make_learner, prepare_scenario

    short = {"frames": 2, "slots_per_frame": 10, "deadline_s": 0.8}
    for name, margin in (("margin", {"csi_margin": {"target_outage": 0.05}}), ("paper", {})):
        data = _outage_scenario(**margin)
        data["run"] = short
        prep = prepare_scenario(validate_scenario(data))
        execute(prep, make_learner(prep), tmp_path / name)
    manifest = json.loads((tmp_path / "margin" / "manifest.json").read_text())
    assert "quantile" in manifest["channel"]["controller_assumption"]["slot_power_rule"]
    part = next((tmp_path / "margin" / "events").glob("*.parquet"))
    meta = json.loads(pq.read_schema(part).metadata[b"wflsim.channel"])
    assert meta["controller_assumption"] == manifest["channel"]["controller_assumption"]
    table = study.outcomes([tmp_path / "margin", tmp_path / "paper"])
    on = table.loc[table["csi_target_outage"] == 0.05, "outage_rate"]
    off = table.loc[table["csi_target_outage"].isna(), "outage_rate"]
    assert len(on) == 1 and len(off) == 1
    assert on.iloc[0] < off.iloc[0]


# ------------------------------------------------------------------ 4. bounds of the power


def _context(
    p_min: np.ndarray, seen: np.ndarray, big_h: np.ndarray, post: CsiPosterior
) -> SlotContext:
    n = p_min.shape[0]
    return SlotContext(
        slot=0,
        frame=0,
        channel_gain=seen,
        large_scale_gain=big_h,
        gamma=np.zeros(n),
        queue_j=np.zeros(n),
        compute_s=np.zeros(n),
        payload_bits=np.where(p_min > 0.0, 1e6, 0.0),
        min_tx_power_w=p_min,
        csi_posterior=post,
    )


positive = st.floats(1e-12, 1e3)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.just(0.0), st.just(math.inf), st.floats(1e-9, 1e4)),  # p_min
            positive,  # seen gain / H
            st.floats(1e-12, 1e-3),  # H
            st.floats(0.0, 1e3),  # |mu|^2
            st.floats(0.0, 10.0),  # v
            st.floats(0.0, 1.0),  # p_max / P_bar
            st.floats(1e-9, 1e3),  # P_bar
        ),
        min_size=1,
        max_size=8,
    ),
    q=st.floats(1e-6, 1 - 1e-6),
)
def test_margin_power_lies_between_p_min_and_p_max(rows, q):
    """For any estimate and posterior: a device transmits at a power in [p_min, p_max] (so at most
    P_bar), only where the paper's rule would transmit too, and not at all otherwise."""
    p_min, seen, big_h, m2, v, frac, peak = np.array(rows, dtype=np.float64).T
    p_max = frac * peak
    ctx = _context(p_min, seen * big_h, big_h, CsiPosterior(m2, v))
    plan = threshold_slot_plan(ctx, p_max, q)
    paper = threshold_slot_plan(ctx, p_max)
    on, p = plan.participate, plan.tx_power_w
    assert np.all(p[on] >= p_min[on]) and np.all(p[on] <= p_max[on]) and np.all(p[on] <= peak[on])
    assert np.all(p[~on] == 0.0)
    assert np.all(paper.participate[on])


@settings(max_examples=50, deadline=None)
@given(
    p_min=st.lists(st.floats(0.0, 1e4), min_size=1, max_size=6),
    q=st.floats(1e-6, 1 - 1e-6),
)
def test_no_posterior_is_the_papers_rule(p_min, q):
    """Without a posterior (perfect CSI) the margin's plan equals Proposition 1's, bit for bit."""
    pm = np.array(p_min)
    n = pm.shape[0]
    ctx = _context(pm, np.ones(n), np.ones(n), CsiPosterior(np.ones(n), np.ones(n)))
    ctx = SlotContext(**{**ctx.__dict__, "csi_posterior": None})
    a, b = threshold_slot_plan(ctx, np.full(n, 5.0), q), threshold_slot_plan(ctx, np.full(n, 5.0))
    np.testing.assert_array_equal(a.tx_power_w, b.tx_power_w)
    np.testing.assert_array_equal(a.participate, b.participate)


# ------------------------------------------------------------------ 5. refused values


def _refusal(scheme: dict[str, Any], **sections: Any) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        validate_scenario(base_scenario(scheme=scheme, **sections))
    return info.value


FIELD = "scheme.csi_margin.target_outage"


@pytest.mark.parametrize(
    ("margin", "field"),
    [
        ({"target_outage": 0.0}, FIELD),
        ({"target_outage": -0.1}, FIELD),
        ({"target_outage": 1.0}, FIELD),
        ({"target_outage": 1.5}, FIELD),
        ({"target_outage": math.nan}, FIELD),
        ({"target_outage": "0.05"}, FIELD),
        ({"target_outage": True}, FIELD),
        ({}, FIELD),
        ({"target_outage": 0.05, "target": 0.1}, "scheme.csi_margin.target"),
        (0.05, "scheme.csi_margin"),
        ("0.05", "scheme.csi_margin"),
    ],
)
def test_bad_margins_are_refused_naming_the_field(margin, field):
    """Out of (0, 1), not a number, missing, an unknown key, or not a table: refused, naming it."""
    err = _refusal({"name": "two_timescale", "csi_margin": margin})
    assert err.field == field, err


@settings(max_examples=60, deadline=None)
@given(q=st.floats(allow_nan=False).filter(lambda x: not 0.0 < x < 1.0))
def test_any_target_outside_the_open_unit_interval_is_refused(q):
    """Every float outside (0, 1) is refused, naming the target."""
    err = _refusal({"name": "only_pc", "csi_margin": {"target_outage": q}})
    assert err.field == FIELD


@pytest.mark.parametrize("name", ["only_pf", "ideal", "fixed_power"])
def test_schemes_without_proposition_1_refuse_a_margin(name):
    """Schemes whose slot rule is not Proposition 1 have no csi_margin: an unknown field."""
    err = _refusal({"name": name, "csi_margin": {"target_outage": 0.05}})
    assert err.field == "scheme.csi_margin" and "unknown field" in err.problem


@pytest.mark.parametrize(
    ("channel_table", "text"),
    [
        ({"fading": {"model": "nakagami", "m": 2.0}, "csi": {"error_variance": 0.1}}, "Nakagami"),
        ({"replay": "gains.parquet"}, "replay"),
    ],
)
def test_a_margin_without_a_closed_form_is_refused(channel_table, text):
    """A margin on Nakagami-m fading (m != 1) or a replayed table is refused, naming the margin."""
    err = _refusal(
        {"name": "two_timescale", "csi_margin": {"target_outage": 0.05}}, channel=channel_table
    )
    assert err.field == "scheme.csi_margin" and text in err.one_line()


def test_the_command_line_refuses_a_bad_margin_with_exit_code_2():
    """`wflsim validate --set scheme.csi_margin.target_outage=0` exits 2 with one line naming it."""
    import contextlib
    import io

    from wflsim.app.cli import main

    err = io.StringIO()
    args = [
        "validate",
        str(REPO / "scenarios" / "channel" / "csi_error.toml"),
        "--set",
        "scheme.csi_margin.target_outage=0",
    ]
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    assert code == 2
    line = err.getvalue().strip()
    assert len(line.splitlines()) == 1 and f"error: {FIELD}" in line, line
