"""Extension points: models, datasets, partitions, schemes and update rules registered from
Python, and callbacks with read-only views and early stopping."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import wflsim
from conftest import base_scenario
from wflsim.app import extensions
from wflsim.sim.errors import ScenarioError

LEARN = base_scenario(
    run={"frames": 2, "slots_per_frame": 3, "deadline_s": 0.8},
    network={"num_devices": 4, "cell_radius_m": 300.0},
    devices={"batch_size": 16},
    scheme={"name": "two_timescale", "V": 10.0},
)
LEARN["learning"] = {"enabled": True, "dataset": "digits", "model": "mlp", "eval_every_slots": 3}


def linear(input_shape, num_classes):
    """A linear classifier: prod(input_shape) * num_classes + num_classes parameters."""
    return nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(input_shape)), num_classes))


def with_learning(**learning):
    """LEARN with fields of [learning] replaced."""
    return {**LEARN, "learning": {**LEARN["learning"], **learning}}


@pytest.fixture(autouse=True)
def _forget_registrations():
    """Each test starts and ends with nothing registered from Python."""
    yield
    for kind, names in extensions.registered().items():
        for name in names:
            extensions.unregister(kind, name)


def _blobs(n=300, shape=(2, 3, 3), seed=0):
    """A tiny separable two-class dataset as tensors."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, *shape, generator=g)
    return x, (x.flatten(1).sum(1) > 0).long()


def test_a_registered_model_sets_the_payload_to_its_parameter_count():
    """learning.model = a registered factory: D is its trainable parameter count (64*10 + 10)."""
    wflsim.register_model("linear", linear)
    prep = wflsim.prepare(with_learning(model="linear"))
    assert prep.system.num_params == 64 * 10 + 10
    net = wflsim.prepare(with_learning(model="linear", enabled=False))
    assert net.system.num_params == 650  # network-only runs too


def test_a_registered_model_trains_and_is_seeded_per_run():
    """A registered model learns digits, and two runs of a seed have identical events."""
    wflsim.register_model("linear", linear)
    a = wflsim.run(with_learning(model="linear"), progress=False)
    b = wflsim.run(with_learning(model="linear"), progress=False)
    pd.testing.assert_frame_equal(a.events, b.events)
    assert a.summary["final_accuracy"] > a.summary["initial_accuracy"]


def test_tensors_and_a_dataset_object_register_the_same_data():
    """A dataset given as (x, y) tensors and as a torchvision-style object runs identically."""

    class Items:
        def __init__(self, x, y):
            self.x, self.y = x, y

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            return self.x[i], int(self.y[i])

    x, y = _blobs()
    wflsim.register_model("linear", linear)
    wflsim.register_dataset("as_tensors", (x[:250], y[:250]), (x[250:], y[250:]))
    wflsim.register_dataset("as_items", Items(x[:250], y[:250]), Items(x[250:], y[250:]))
    runs = [
        wflsim.run(with_learning(model="linear", dataset=d), progress=False).events
        for d in ("as_tensors", "as_items")
    ]
    pd.testing.assert_frame_equal(runs[0], runs[1])


def test_a_registered_partition_gives_the_devices_its_index_lists():
    """learning.partition = a registered function: the learner's parts are its lists, sorted."""
    from wflsim.app.run import make_learner

    def halves(labels, num_devices, rng):
        order = rng.permutation(len(labels))
        return [order[n::num_devices][::-1] for n in range(num_devices)]

    wflsim.register_partition("strided", halves)
    prep = wflsim.prepare(with_learning(partition="strided"))
    learner = make_learner(prep)
    expected = halves(np.zeros(1437), 4, prep.streams.global_("partition"))
    for got, want in zip(learner.parts, expected, strict=True):
        np.testing.assert_array_equal(got, np.sort(want))


@pytest.mark.parametrize(
    "bad",
    [
        lambda labels, n, rng: [np.arange(5)] * (n - 1),  # too few lists
        lambda labels, n, rng: [np.array([], dtype=np.int64)] * n,  # empty
        lambda labels, n, rng: [np.array([len(labels)])] * n,  # out of range
        lambda labels, n, rng: 1 / 0,  # raises
    ],
)
def test_a_bad_partition_is_a_one_line_error_on_learning_partition(bad, tmp_path):
    """A partition function with a bad result fails the run before anything is written."""
    wflsim.register_partition("bad", bad)
    with pytest.raises(ScenarioError) as err:
        wflsim.run(with_learning(partition="bad"), out=tmp_path / "r", progress=False)
    assert err.value.field == "learning.partition" and "\n" not in str(err.value)
    assert not (tmp_path / "r").exists()


def test_a_factory_that_returns_no_module_is_refused_on_learning_model():
    """A factory that returns something other than a module with parameters: learning.model."""
    wflsim.register_model("nothing", lambda shape, classes: None)
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(with_learning(model="nothing"))
    assert err.value.field == "learning.model"


def test_unregistered_names_are_refused_by_validation():
    """A scenario naming a model nobody registered is a ScenarioError on learning.model."""
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(with_learning(model="linear"))
    assert err.value.field == "learning.model"


def test_built_in_and_taken_names_are_refused():
    """A built-in name, a taken name (without replace) and a bad name raise ValueError."""
    with pytest.raises(ValueError, match="built-in"):
        wflsim.register_model("mlp", linear)
    wflsim.register_model("linear", linear)
    with pytest.raises(ValueError, match="already registered"):
        wflsim.register_model("linear", linear)
    wflsim.register_model("linear", linear, replace=True)
    with pytest.raises(ValueError, match="letters"):
        wflsim.register_partition("no spaces", lambda *a: [])


def test_a_registered_dataset_needs_a_registered_model():
    """Built-in models fit only built-in datasets: a clear error naming learning.model."""
    x, y = _blobs()
    wflsim.register_dataset("blobs", (x, y), (x, y))
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(with_learning(dataset="blobs"))
    assert err.value.field == "learning.model"


def test_fjord_refuses_a_registered_model():
    """FjORD needs a built-in model's layer table: learning.model names the problem."""
    wflsim.register_model("linear", linear)
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(with_learning(model="linear"), overrides={"scheme.name": "fjord"})
    assert err.value.field == "learning.model"


def test_a_shipment_installs_every_registration_after_they_are_forgotten():
    """shipment() then install() (what a worker does) registers every kind again: a model, a
    dataset, a partition, a scheme and an update rule, and a run uses them as before."""
    from dataclasses import dataclass

    from wflsim.models.learner.rules import Freezing
    from wflsim.sim.schemes.fixed_power import FixedPower

    @dataclass(frozen=True)
    class NoInputs:
        """No per-frame inputs."""

    class Peak(FixedPower):
        name = "peak_again"

    x, y = _blobs()
    wflsim.register_model("linear", linear)
    wflsim.register_dataset("blobs", (x, y), (x, y))
    wflsim.register_partition(
        "halves", lambda labels, n, rng: np.array_split(np.arange(len(labels)), n)
    )
    wflsim.register_scheme(Peak)
    wflsim.register_update_rule("same_as_freezing", lambda params, s: Freezing, inputs=NoInputs)
    table = with_learning(model="linear", dataset="blobs", partition="halves")
    table["scheme"] = {"name": "peak_again"}
    before = (wflsim.registered(), wflsim.run(table, progress=False).events)
    blob = extensions.shipment()
    for kind, names in extensions.registered().items():
        for name in names:
            extensions.unregister(kind, name)
    assert not any(wflsim.registered().values())
    with pytest.raises(ScenarioError):
        wflsim.prepare(table)
    extensions.install(blob)
    assert wflsim.registered() == before[0]
    pd.testing.assert_frame_equal(wflsim.run(table, progress=False).events, before[1])


def test_views_are_read_only_and_reading_them_leaves_the_trace_unchanged():
    """Callbacks that read every view (and edit the model copy) do not change the events."""
    plain = wflsim.run(LEARN, progress=False)
    seen = {"slots": 0, "frames": 0, "runs": 0}

    def on_slot(v):
        seen["slots"] += 1
        assert not v.outcome.energy_j.flags.writeable
        with pytest.raises(ValueError):
            v.outcome.tx_power_w[0] = 1.0

    def on_frame(v):
        seen["frames"] += 1
        model = v.model()
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()  # a copy: the run's model is untouched
        assert not v.params().flags.writeable and not v.queue_j.flags.writeable

    def on_end(v):
        seen["runs"] += 1
        assert v.stopped_early is None and v.summary["slots"] == 6

    cb = wflsim.Callbacks(on_slot_end=on_slot, on_frame_end=on_frame, on_run_end=on_end)
    res = wflsim.run(LEARN, callbacks=cb, progress=False)
    pd.testing.assert_frame_equal(res.events, plain.events)
    assert seen == {"slots": 6, "frames": 2, "runs": 1}


def test_stop_ends_the_run_after_its_frame_and_resume_keeps_it(tmp_path):
    """view.stop() in frame 0 of 3: one frame in the trace, summary says why, resume keeps it."""
    three = {**LEARN, "run": {**LEARN["run"], "frames": 3}}
    cb = wflsim.Callbacks(on_slot_end=lambda v: v.stop("enough") if v.slot == 1 else None)
    res = wflsim.run(three, callbacks=cb, out=tmp_path / "r", progress=False)
    assert res.status == "completed"
    assert res.summary["stopped_early"] == {"frame": 0, "reason": "enough"}
    assert res.summary["slots"] == 3 and res.events["frame"].max() == 0
    again = wflsim.resume(tmp_path / "r", progress=False)
    assert again.summary == res.summary
    pd.testing.assert_frame_equal(again.events, res.events)


def test_an_early_stopped_run_equals_the_first_frames_of_the_full_run():
    """Stopping after frame 0 gives exactly the full run's frame-0 events."""
    full = wflsim.run(LEARN, progress=False).events
    cb = wflsim.Callbacks(on_frame_end=lambda v: v.stop())
    short = wflsim.run(LEARN, callbacks=cb, progress=False).events
    pd.testing.assert_frame_equal(short, full[full["frame"] <= 0].reset_index(drop=True))


def test_a_stop_evaluates_the_final_model_and_checkpoints_its_frame(tmp_path):
    """A stop after frame 0 (checkpoints every 3 frames, evaluations every 5 slots): the final
    model is evaluated at the frame's last slot and the folder holds a checkpoint of frame 0."""
    three = {
        **LEARN,
        "run": {**LEARN["run"], "frames": 3, "checkpoint_every_frames": 3},
        "learning": {**LEARN["learning"], "eval_every_slots": 5},
    }
    cb = wflsim.Callbacks(on_frame_end=lambda v: v.stop("enough"))
    res = wflsim.run(three, callbacks=cb, out=tmp_path / "r", progress=False)
    evals = res.events[res.events["event"] == "eval"]
    assert list(evals["slot"]) == [-1, 2]
    assert res.summary["final_accuracy"] == evals["accuracy"].iloc[-1]
    assert res.manifest["checkpoint"] is not None and res.manifest["frames_completed"] == 1


def test_a_stopped_run_killed_before_its_manifest_closed_resumes_to_the_same_end(tmp_path):
    """A stopped run whose manifest still says running (killed before closing) resumes to the
    stopped run: no further frame, the same events and the same stopped_early."""
    import json

    three = {**LEARN, "run": {**LEARN["run"], "frames": 3, "checkpoint_every_frames": 3}}
    cb = wflsim.Callbacks(on_frame_end=lambda v: v.stop("enough"))
    res = wflsim.run(three, callbacks=cb, out=tmp_path / "r", progress=False)
    manifest_path = tmp_path / "r" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["status"] = "running"
    manifest_path.write_text(json.dumps(manifest))
    again = wflsim.resume(tmp_path / "r", progress=False)
    assert again.status == "completed"
    assert again.summary["stopped_early"] == res.summary["stopped_early"]
    pd.testing.assert_frame_equal(again.events, res.events)


def test_one_callbacks_object_serves_runs_one_after_another():
    """Callbacks reused for a second run call on_run_end once per run, with that run's view."""
    ends = []
    cb = wflsim.Callbacks(on_run_end=lambda v: ends.append(v.summary["slots"]))
    wflsim.run(LEARN, callbacks=cb, progress=False)
    wflsim.run(LEARN, overrides={"run.frames": 1}, callbacks=cb, progress=False)
    assert ends == [6, 3]


def test_local_epochs_on_a_registered_partition_need_the_data():
    """A network-only run cannot count local epochs on a registered partition: refused."""
    wflsim.register_partition(
        "halves", lambda labels, n, rng: np.array_split(np.arange(len(labels)), n)
    )
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(with_learning(enabled=False, partition="halves", local_epochs=1))
    assert err.value.field == "learning.local_epochs"


def test_a_model_count_follows_a_dataset_registered_again_with_another_shape():
    """D of a registered model is counted again when its dataset is replaced by another shape."""
    wflsim.register_model("linear", linear)
    x, y = _blobs(shape=(2, 3, 3))
    wflsim.register_dataset("blobs", (x, y), (x, y))
    assert wflsim.prepare(with_learning(model="linear", dataset="blobs")).system.num_params == 38
    x, y = _blobs(shape=(4, 3, 3))
    wflsim.register_dataset("blobs", (x, y), (x, y), replace=True)
    assert wflsim.prepare(with_learning(model="linear", dataset="blobs")).system.num_params == 74
