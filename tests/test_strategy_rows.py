"""The trace's ``strategy`` rows: what a strategy decided about each applied upload (Krum's kept
set, FedProx's proximal term, SCAFFOLD's control-variate update) and the server step's size,
checked against closed forms on steps of one upload; none under FedAvg or without a learner."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import wflsim
from conftest import base_scenario, tiny_learning_scenario

#: 3 devices learning the digits MLP, 2 frames of 3 slots.
LEARN = tiny_learning_scenario()
MODES = ("sync", "semi_sync", "async")
#: the learning rate of LEARN (learning.lr's default)
LR = 0.05


def events_of(strategy: dict[str, Any], mode: str = "sync", **extra: Any) -> pd.DataFrame:
    """The events of the tiny digits run with ``strategy`` in ``mode`` (``extra``: more tables
    or a ``local_steps``)."""
    steps = extra.pop("local_steps", 1)
    data = {
        **LEARN,
        "learning": {**LEARN["learning"], "local_steps": steps},
        "strategy": strategy,
        "server": {"mode": mode},
        **extra,
    }
    return wflsim.run(data, progress=False).events


def rows(events: pd.DataFrame) -> pd.DataFrame:
    """The strategy rows."""
    return events[events.event == "strategy"]


@pytest.mark.parametrize("mode", MODES)
def test_every_applied_upload_has_one_strategy_row(mode):
    """fedadam: as many strategy rows as uploads the server applied (sync: successful uploads;
    semi_sync / async: the flushes' n_success), each with kept true and a positive step size."""
    events = events_of({"name": "fedadam"}, mode)
    mine = rows(events)
    if mode == "sync":
        applied = int(events[events.event == "aggregate"].n_success.sum())
    else:
        applied = int(events[events.event == "flush"].n_success.sum())
    assert applied > 0 and len(mine) == applied
    assert mine.kept.astype(bool).all()
    assert (mine.server_step_norm.astype(float) > 0).all()
    assert mine.prox_term.isna().all() and mine.control_update_norm.isna().all()


def test_fedavg_and_network_only_runs_write_no_strategy_rows():
    """fedavg (learning) and fedadam without a learner: no strategy rows."""
    assert rows(events_of({"name": "fedavg"})).empty
    net = wflsim.run(base_scenario(strategy={"name": "fedadam"}), progress=False).events
    assert rows(net).empty


def test_krum_marks_the_one_upload_it_kept_per_step():
    """krum (f = 0, m = 1), 3 uploads per sync step: exactly one row of each step is kept."""
    mine = rows(events_of({"name": "krum"}))
    per_step = mine.groupby("slot").kept.agg(["sum", "size"])
    assert (per_step["size"] == 3).all()
    assert (per_step["sum"] == 1).all()


def one_upload_per_step(strategy: dict[str, Any], steps: int) -> pd.DataFrame:
    """Strategy rows of a sync run where the server asks one device per slot."""
    selection = {"rule": "uniform", "k": 1}
    mine = rows(events_of({**strategy, "selection": selection}, local_steps=steps))
    assert len(mine) and mine.groupby("slot").size().eq(1).all()
    return mine


def test_fedprox_logs_its_proximal_term():
    """fedprox (mu = 0.5), E = 2, one upload per step: prox_term = (mu / 2) |w_E - w_0|^2 =
    (mu / 2) server_step_norm^2 (the step moves the model by lr u, as the device moved)."""
    mine = one_upload_per_step({"name": "fedprox", "mu": 0.5}, 2)
    step = mine.server_step_norm.astype(float).to_numpy()
    np.testing.assert_allclose(mine.prox_term.astype(float), 0.25 * step**2, rtol=1e-4)
    assert (step > 0).all()


def test_scaffold_logs_its_first_control_variate_update():
    """scaffold, E = 2, one upload per step: the first step's |dc_i| = |u| / E (c = 0 then) =
    server_step_norm / (lr E)."""
    mine = one_upload_per_step({"name": "scaffold"}, 2)
    first = mine.iloc[0]
    np.testing.assert_allclose(
        float(first.control_update_norm), float(first.server_step_norm) / (LR * 2), rtol=1e-4
    )
    assert mine.control_update_norm.astype(float).gt(0).all()


@pytest.mark.parametrize("mode", MODES)
def test_strategy_rows_are_written_at_the_device_slots_level(mode):
    """[trace] level = "device_slots": the strategy rows are there too."""
    events = events_of({"name": "fedyogi"}, mode, trace={"level": "device_slots"})
    assert (events.event == "device_slot").any()
    assert len(rows(events)) > 0
