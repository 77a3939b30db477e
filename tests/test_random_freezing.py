"""random_freezing: the two-timescale controller with a random choice of frozen parameters."""

from __future__ import annotations

import numpy as np
import torch

from conftest import events, run_in_memory
from golden_runs import digits, paper_network
from wflsim.app.run import build_engine, make_learner, prepare_scenario
from wflsim.models.learner import Freezing
from wflsim.sim.config.loading import validate_scenario


def test_network_side_equals_two_timescale():
    """Network only: every event (gamma, power, energy, queues, outages) equals two_timescale's."""
    ours, _ = run_in_memory(paper_network("random_freezing", 0))
    theirs, _ = run_in_memory(paper_network("two_timescale", 0))
    assert ours.equals(theirs)
    assert (events(ours, "freeze")["gamma"] > 0).any()  # the controller does freeze


def _engine(scheme: str):
    prep = prepare_scenario(validate_scenario(digits(scheme, 0)))
    return build_engine(prep, make_learner(prep))


def test_with_training_freezes_random_parameters_at_the_controllers_gamma():
    """With training: the same frozen counts as two_timescale, other parameters, and learning."""
    masks = {}
    for scheme in ("random_freezing", "two_timescale"):
        eng = _engine(scheme)
        eng.run(stop_frame=2)  # frame 1 freezes
        rule = eng.learner.rule
        assert isinstance(rule, Freezing)
        masks[scheme] = rule.masks().numpy()
        if scheme == "random_freezing":
            assert rule.selection == "random"
            eng.run()
            acc = eng.stats.last_accuracy
    rnd, stab = masks["random_freezing"], masks["two_timescale"]
    np.testing.assert_array_equal(rnd.sum(axis=1), stab.sum(axis=1))
    assert rnd.sum() > 0 and not np.array_equal(rnd, stab)
    assert acc > 0.5  # digits, 12 slots: learning happens (measured 0.7-0.8)


def test_random_masks_are_not_the_stable_parameters():
    """The randomly frozen parameters' stability scores are not the smallest ones: their mean
    score lies well above the stability criterion's (which picks the minimum)."""
    eng = _engine("random_freezing")
    eng.run(stop_frame=2)
    rule = eng.learner.rule
    assert isinstance(rule, Freezing)
    mask = rule.masks()
    scores = torch.as_tensor(rule.score_array())
    busy = mask.sum(dim=1) > 0
    assert busy.any()
    for n in torch.nonzero(busy).flatten().tolist():
        k = int(mask[n].sum())
        smallest = scores[n].sort().values[:k].mean()
        assert scores[n][mask[n]].mean() > smallest + 0.05
