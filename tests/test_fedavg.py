"""FedAvg: ``[learning] local_steps`` / ``local_epochs`` (local SGD steps on the devices).

References are independent of the learner: per-device ``nn.Module`` copies trained with
``torch.optim.SGD`` on the minibatches the learner drew, and the paper's cost formulas by hand.
Tolerance of the learner against the reference loop: ``rtol = 1e-5``, ``atol = 1e-6`` on models
of magnitude ~0.1. Not exact because both compute in float32 and round differently: the learner
runs ``torch.func`` (``vmap``) or ``functional_call`` passes and sums the step gradients into
its upload, the reference runs ``nn.Module`` autograd and subtracts models; each of the ``E``
steps adds rounding of order 1e-7 relative.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from conftest import LOCKSTEP, base_scenario, events, run_in_memory
from wflsim.models.data import load_dataset, partition
from wflsim.models.learner import TorchLearner
from wflsim.models.learner.aggregate import weighted_mean
from wflsim.sim.config.catalogue import TRAIN_SAMPLES, epoch_steps, iid_partition_sizes
from wflsim.sim.config.loading import validate_scenario
from wflsim.sim.errors import ScenarioError
from wflsim.sim.learner import UpdateRuleSpec
from wflsim.sim.rng import Streams
from wflsim.sim.updates import FreezingInputs, OrderedDropoutInputs, PruningInputs

RTOL, ATOL = 1e-5, 1e-6

#: The learner's two gradient paths: one vmap over all devices, plain autograd per device.
PATHS = ["vmap", "per_device"]


# ----------------------------------------------------------------------------- helpers


def digits_learner(batch_sizes: list[int], path: str = "vmap", **kwargs: Any) -> TorchLearner:
    """A digits MLP learner on an IID partition, minibatches from the run's streams; ``path``
    ``"per_device"`` bounds a vmap chunk to one device's batch, which selects plain autograd."""
    b = np.asarray(batch_sizes, dtype=np.int64)
    chunk = None if path == "vmap" else int(b.max())
    config: dict[str, Any] = dict(
        dataset="digits",
        data_dir=None,
        model="mlp",
        partition="iid",
        dirichlet_alpha=None,
        batch_sizes=b,
        lr=0.2,
        total_slots=100,
        streams=Streams(7),
        vmap_chunk_samples=chunk,
    )
    config.update(kwargs)
    return TorchLearner.from_config(**config)


def reference_finals(
    learner: TorchLearner, starts: torch.Tensor, lr: float, trained: torch.Tensor | None = None
) -> tuple[torch.Tensor, list[nn.Module]]:
    """Each device of the last compute trained alone: an ``nn.Module`` copy from its start
    ``(n, D)``, one ``torch.optim.SGD`` step per minibatch the learner drew for it (the gradient
    of the frozen coordinates zeroed, ``trained`` ``(n, D)``). Its final models ``(n, D)``."""
    x, y = learner.data.x_train, learner.data.y_train
    finals, nets = [], []
    for row, steps in enumerate(learner.last_local_batches):
        net = copy.deepcopy(learner.model).train()
        vector_to_parameters(starts[row].clone(), net.parameters())
        opt = torch.optim.SGD(net.parameters(), lr=lr)
        for idx in steps:
            sel = torch.as_tensor(idx)
            opt.zero_grad()
            F.cross_entropy(net(x[sel]), y[sel]).backward()
            if trained is not None:
                keep = torch.split(trained[row], [p.numel() for p in net.parameters()])
                for p, k in zip(net.parameters(), keep, strict=True):
                    p.grad.mul_(k.view_as(p))
            opt.step()
        finals.append(parameters_to_vector(net.parameters()).detach())
        nets.append(net)
    return torch.stack(finals), nets


def check_slot_against_reference(
    learner: TorchLearner,
    slot: int,
    trained: torch.Tensor | None = None,
    per_coordinate: bool = False,
) -> None:
    """One slot of every device: each device's model after its local steps (start minus lr
    times its upload) and the server's FedAvg step equal the reference loop (eq. 3's weighted
    mean of the pseudo-gradients, or each coordinate's mean over the devices that trained it)."""
    ids = np.arange(learner.num_devices)
    lr = learner.lr_at(slot)
    w0 = learner.global_params()
    starts = learner.local_params(ids)
    learner.compute(slot, ids)
    assert [len(s) for s in learner.last_local_batches] == learner.local_steps.tolist()
    finals, _ = reference_finals(learner, starts, lr, trained)
    torch.testing.assert_close(starts - lr * learner.gradients, finals, rtol=RTOL, atol=ATOL)
    learner.apply(slot, ids)
    b = torch.as_tensor(learner.batch_sizes, dtype=torch.float32)[:, None]
    pseudo = (starts - finals) / lr
    weight = (b * trained).sum(0) if per_coordinate and trained is not None else b.sum()
    g = (b * pseudo).sum(0) / weight
    expected = w0 - lr * torch.nan_to_num(g)  # a coordinate nobody trained stays
    torch.testing.assert_close(learner.global_params(), expected, rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------------------- E = 1 is FedSGD


def test_local_steps_one_is_fedsgd_after_every_slot():
    """local_steps = 1: after every slot the model is bit for bit FedSGD's (one gradient per
    device at the global model, eq. 3's weighted mean, one step)."""
    learner = digits_learner([16, 8, 24], local_steps=1)
    paths, data = learner.paths, learner.data
    w = learner.global_params()
    ids = np.arange(3)
    learner.begin_frame(0, FreezingInputs(frozen_count=np.zeros(3, dtype=np.int64)))
    for t in range(4):
        grads, _, _ = paths.compute(w, data.draw(t, ids), learner.buffers)
        bw = torch.as_tensor(learner.batch_sizes, dtype=torch.float32)
        w = w - learner.lr_at(t) * weighted_mean(grads, bw)
        learner.compute(t, ids)
        learner.apply(t, ids)
        assert torch.equal(learner.global_params(), w)


def test_local_epochs_of_one_step_each_are_fedsgd():
    """local_epochs = 1 with every B_n >= D_n (one step each) gives FedSGD's models exactly."""
    fedsgd = digits_learner([500, 480, 490])
    epochs = digits_learner([500, 480, 490], local_epochs=1)
    assert epochs.local_steps.tolist() == [1, 1, 1]  # D_n = 479: ceil(479 / B) = 1
    ids = np.arange(3)
    for learner in (fedsgd, epochs):
        learner.begin_frame(0, FreezingInputs(frozen_count=np.zeros(3, dtype=np.int64)))
        for t in range(3):
            learner.compute(t, ids)
            learner.apply(t, ids)
    assert torch.equal(fedsgd.global_params(), epochs.global_params())


def test_scenario_with_local_steps_one_equals_the_default_trace():
    """A run with learning.local_steps = 1 writes the default run's trace, loss included."""
    data = base_scenario(
        learning={"enabled": True, "dataset": "digits", "model": "mlp", "eval_every_slots": 5},
        devices={"batch_size": 16},
        scheme={"name": "two_timescale"},
    )
    del data["learning"]["num_params"]
    steps = copy.deepcopy(data)
    steps["learning"]["local_steps"] = 1
    assert run_in_memory(data)[0].equals(run_in_memory(steps)[0])


# ----------------------------------------------------------------------------- sampling


def test_each_local_step_draws_the_next_batch_of_the_slots_stream():
    """Step e of device n in slot t is the e-th B_n-sample draw of streams.device("sampling",
    n, t); its first step is FedSGD's batch."""
    learner = digits_learner([16, 8], local_steps=3)
    learner.begin_frame(0, FreezingInputs(frozen_count=np.zeros(2, dtype=np.int64)))
    learner.compute(5, np.array([1, 0]))
    for row, n in enumerate([1, 0]):
        local = learner.parts[n]
        rng = Streams(7).device("sampling", n, 5)
        b = int(learner.batch_sizes[n])
        expected = [local[rng.choice(local.size, size=b, replace=False)] for _ in range(3)]
        got = learner.last_local_batches[row]
        assert len(got) == 3
        assert all(np.array_equal(a, e) for a, e in zip(got, expected, strict=True))
        assert np.array_equal(learner.last_batches[row], expected[0])


# ----------------------------------------------------------------------------- E > 1


@pytest.mark.parametrize("path", PATHS)
def test_three_local_steps_match_a_reference_loop(path: str):
    """E = 3, unequal B_n: per-device models and the FedAvg step equal nn.Module copies trained
    with torch.optim.SGD on the same minibatches, on both gradient paths."""
    learner = digits_learner([16, 8, 24, 12], path, local_steps=3)
    learner.begin_frame(0, FreezingInputs(frozen_count=np.zeros(4, dtype=np.int64)))
    for t in range(2):
        check_slot_against_reference(learner, t)


@pytest.mark.parametrize("path", PATHS)
def test_local_epochs_match_a_reference_loop_with_steps_per_device(path: str):
    """local_epochs = 1: E_n = ceil(D_n / B_n) differs per device; models match the reference."""
    learner = digits_learner([60, 100, 150, 400], path, local_epochs=1)
    d_n = np.array([p.size for p in learner.parts])
    assert d_n.tolist() == [360, 359, 359, 359]
    assert learner.local_steps.tolist() == [6, 4, 3, 1]  # ceil(360/60), ceil(359/100), ...
    learner.begin_frame(0, FreezingInputs(frozen_count=np.zeros(4, dtype=np.int64)))
    check_slot_against_reference(learner, 0)


def test_local_steps_use_the_learning_rate_of_the_slot():
    """Under the half_life schedule the local steps of slot 60 run at lr 0.5^(60/100) (and the
    server steps with it: FedAvg's average of the final models)."""
    learner = digits_learner([16, 8], local_steps=2, lr_schedule="half_life")
    learner.begin_frame(0, FreezingInputs(frozen_count=np.zeros(2, dtype=np.int64)))
    assert learner.lr_at(60) == pytest.approx(0.2 * 0.5**0.6)
    check_slot_against_reference(learner, 60)


@pytest.mark.parametrize("path", PATHS)
def test_frozen_parameters_stay_frozen_through_the_local_steps(path: str):
    """Freezing with E = 4: frozen entries get no gradient at any step (the reference zeroes
    them at every step), so they keep their frame-start values and upload 0."""
    learner = digits_learner([16, 8, 24], path, local_steps=4)
    learner.set_update_rule(UpdateRuleSpec("freezing", {"selection": "random"}))
    d = learner.num_params
    learner.begin_frame(0, FreezingInputs(frozen_count=np.array([d // 2, 0, d // 5])))
    frozen = learner.rule.masks()
    assert frozen.any()
    for t in range(2):
        check_slot_against_reference(learner, t, trained=~frozen)


@pytest.mark.parametrize(
    "name, inputs",
    [
        ("pruning", lambda d: PruningInputs(kept=np.array([d // 2, d, d // 3]))),
        ("ordered_dropout", lambda d: OrderedDropoutInputs(width=np.array([0.5, 1.0, 0.25]))),
    ],
)
def test_pruned_and_dropped_coordinates_get_no_gradient_at_any_step(name, inputs):
    """Pruning and FjORD's sub-models with E = 3: a device trains from w * m_n and its other
    coordinates stay 0 at every step (the reference zeroes their gradient at every step);
    FjORD's server averages each coordinate over the devices whose sub-model holds it."""
    learner = digits_learner([16, 8, 24], local_steps=3)
    learner.set_update_rule(UpdateRuleSpec(name, {}))
    learner.begin_frame(0, inputs(learner.num_params))
    starts = learner.local_params(np.arange(3))  # w * m_n: 0 exactly where m_n = 0
    assert (starts == 0).any()
    check_slot_against_reference(
        learner, 0, trained=starts != 0, per_coordinate=name == "ordered_dropout"
    )


def test_batchnorm_statistics_carry_through_the_local_steps():
    """A BatchNorm model, E = 3: each device's running statistics after its steps equal the
    reference module's, and the global ones are their average."""
    split = dict(
        zip(("x_train", "y_train", "x_test", "y_test"), load_dataset("digits"), strict=True)
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Flatten(), nn.Linear(64, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 10)
        )
    parts = partition(split["y_train"].numpy(), 3, "iid", 1.0, np.random.default_rng(0))
    learner = TorchLearner(
        model=model,
        **split,
        parts=parts,
        batch_sizes=np.array([16, 16, 16]),
        lr=0.2,
        sampling_streams=Streams(3),
        local_steps=3,
    )
    learner.begin_frame(0, FreezingInputs(frozen_count=np.zeros(3, dtype=np.int64)))
    ids = np.arange(3)
    starts = learner.local_params(ids)
    learner.compute(0, ids)
    finals, nets = reference_finals(learner, starts, 0.2)
    torch.testing.assert_close(starts - 0.2 * learner.gradients, finals, rtol=RTOL, atol=ATOL)
    for row, net in enumerate(nets):
        for name, buf in net.named_buffers():
            torch.testing.assert_close(learner.device_buffers[name][row], buf, rtol=RTOL, atol=ATOL)
    learner.apply(0, ids)
    mean = torch.stack([dict(n.named_buffers())["2.running_mean"] for n in nets]).mean(0)
    torch.testing.assert_close(learner.buffers["2.running_mean"], mean, rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------------------- stale updates


def test_a_stale_update_trains_at_the_rate_of_the_slot_it_started_in():
    """An update started in slot 0 and applied in slot 60 (half_life): its local steps run at
    lr(0), the server's step at lr(60)."""
    stale = digits_learner([16, 8], local_steps=3, lr_schedule="half_life")
    sync = digits_learner([16, 8], local_steps=3, lr_schedule="half_life")
    for learner in (stale, sync):
        learner.begin_frame(0, FreezingInputs(frozen_count=np.zeros(2, dtype=np.int64)))
    w0 = sync.global_params()
    sync.compute(0, np.array([1]))  # slot 0's batches and rate
    stale.start_update(0, device=1, sample_key=0, slot=0)
    stale.apply_updates(60, np.array([0]), np.array([1.0]), 1.0)
    expected = w0 - stale.lr_at(60) * sync.gradients[0]
    torch.testing.assert_close(stale.global_params(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "server, schedule",
    [({"mode": "semi_sync"}, "half_life"), ({"mode": "async", "buffer_size": 5}, "constant")],
)
def test_stale_modes_without_late_uploads_equal_the_synchronous_fedavg_run(server, schedule):
    """semi_sync (decaying rate), and async with a buffer of every device, in lockstep with
    E = 3: the synchronous FedAvg model, bit for bit. (An async cycle restarted at its arrival
    runs on that slot's plan and rate, one slot earlier than sync's; hence the constant rate.)"""
    import wflsim
    from wflsim.app.run import build_engine, make_learner

    models = []
    for extra in ({}, {"server": server}):
        data = {
            **LOCKSTEP,
            "run": {"frames": 2, "slots_per_frame": 3, "deadline_s": 0.1},
            "learning": {**LOCKSTEP["learning"], "local_steps": 3, "lr_schedule": schedule},
            **extra,
        }
        prep = wflsim.prepare(data)
        engine = build_engine(prep, make_learner(prep))
        engine.run()
        models.append(engine.learner.global_params())
    assert torch.equal(models[0], models[1])


# ----------------------------------------------------------------------------- costs


def _network(devices: dict[str, Any], **learning: Any) -> dict[str, Any]:
    """A network-only fixed-power scenario on the digits MLP's D (gamma = 0: u = 1)."""
    data = base_scenario(devices=devices)
    data["learning"] = {"enabled": False, "dataset": "digits", "model": "mlp", **learning}
    return data


def test_compute_time_and_energy_scale_with_local_steps():
    """tau_cmp = c B E / f and E_cmp = (alpha/2) c B E f^2 on every participating device."""
    table, _ = run_in_memory(_network({"batch_size": 128}, local_steps=3))
    dec, energy = events(table, "decision"), events(table, "energy")
    part = dec["participating"].astype(bool)
    assert part.any()
    np.testing.assert_allclose(dec.loc[part, "compute_s"], 2e6 * 128 * 3 / 2e9, rtol=1e-12)
    spent = energy["energy_compute_j"].to_numpy()
    assert (spent > 0).sum() == part.sum()
    np.testing.assert_allclose(spent[spent > 0], 0.5 * 2e-28 * 2e6 * 128 * 3 * 2e9**2, rtol=1e-12)


def test_network_only_local_epochs_take_the_iid_partition_sizes():
    """Network only, IID, local_epochs = 2: D_n are 1437 split over 6 devices (240 x 3, 239 x
    3) and tau_cmp = c B_n E_n / f with E_n = 2 ceil(D_n / B_n)."""
    b = [60, 80, 120, 240, 100, 50]
    table, _ = run_in_memory(_network({"batch_size": b}, local_epochs=2))
    steps = 2 * np.array([4, 3, 2, 1, 3, 5])  # ceil(240/60), ceil(240/80), ..., ceil(239/50)
    dec = events(table, "decision")
    part = dec["participating"].to_numpy().astype(bool)
    n = dec["device"].to_numpy().astype(np.int64)
    expect = 2e6 * np.asarray(b)[n] * steps[n] / 2e9
    np.testing.assert_allclose(dec["compute_s"].to_numpy()[part], expect[part], rtol=1e-12)


def test_dirichlet_local_epochs_take_the_learners_partition():
    """With training on a Dirichlet partition, E_n comes from the partition the learner made:
    the trace's compute time is c B E_n / f with E_n = ceil(num_samples / B) of device_config."""
    data = _network({"batch_size": 64, "cpu_hz": 2e10}, local_epochs=1)
    data["learning"] = {**data["learning"], "enabled": True, "partition": "dirichlet"}
    data["learning"]["dirichlet_alpha"] = 0.5
    data["run"] = {**data["run"], "frames": 1, "slots_per_frame": 2}
    table, _ = run_in_memory(data)
    d_n = events(table, "device_config").sort_values("device")["num_samples"].to_numpy()
    steps = np.ceil(d_n / 64)
    assert len(set(steps)) > 1  # the partition is uneven
    dec = events(table, "decision")
    part = dec["participating"].to_numpy().astype(bool)
    expect = 2e6 * 64 * steps[dec["device"].to_numpy().astype(np.int64)] / 2e10
    np.testing.assert_allclose(dec["compute_s"].to_numpy()[part], expect[part], rtol=1e-12)


def test_the_controller_plans_on_the_scaled_compute_costs():
    """two_timescale with E = 4 local steps decides as with 4 c cycles per sample and E = 1
    (theta = c B E / f, e_cmp = (alpha/2) c B E f^2; the value V lam B unchanged)."""

    def paper(cycles: float, **learning: Any) -> dict[str, Any]:
        return base_scenario(
            run={"frames": 3, "slots_per_frame": 10, "deadline_s": 0.8},
            network={"num_devices": 30, "cell_radius_m": 1000.0},
            devices={"batch_size": 128, "cycles_per_sample": cycles},
            learning={"enabled": False, "num_params": 440_812, **learning},
            scheme={"name": "two_timescale", "V": 100.0},
        )

    a = run_in_memory(paper(2e6, local_steps=4))[0]
    b = run_in_memory(paper(8e6))[0]
    fa, fb = events(a, "freeze"), events(b, "freeze")
    assert (fa["gamma"] > 0).any()  # the controller freezes something
    for col in ("gamma", "max_tx_power_w", "expected_cost"):
        np.testing.assert_allclose(fa[col], fb[col], rtol=1e-9, err_msg=col)
    da, db = events(a, "decision"), events(b, "decision")
    np.testing.assert_allclose(da["compute_s"], db["compute_s"], rtol=1e-12)
    np.testing.assert_array_equal(da["participating"], db["participating"])


def test_the_controllers_inputs_scale_theta_and_compute_energy_by_hand():
    """The frame controller of two_timescale sees theta = c B E_n / f and e_cmp =
    (alpha/2) c B E_n f^2 per device, and the value V lam B without E_n."""
    import wflsim
    from wflsim.sim.registry import build_scheme
    from wflsim.sim.schemes.base import FrameContext

    data = _network({"batch_size": [100, 100, 50, 100, 100, 100]}, local_epochs=1)
    prep = wflsim.prepare(data)
    steps = prep.system.devices.local_steps  # ceil(240 / 100) = 3, ceil(240 / 50) = 5, ...
    assert steps.tolist() == [3, 3, 5, 3, 3, 3]
    scheme: Any = build_scheme("two_timescale", {}, prep.system)
    ctx = FrameContext(1, np.full(6, 1e-10), np.full(6, 0.5))
    params = scheme.controller.params(ctx)
    b = np.array([100, 100, 50, 100, 100, 100])
    np.testing.assert_allclose(params.theta_s, 2e6 * b * steps / 2e9, rtol=1e-15)
    np.testing.assert_allclose(params.e_cmp_j, 0.5 * 2e-28 * 2e6 * b * steps * 4e18, rtol=1e-12)
    lam = 1.0 / b.sum()
    np.testing.assert_allclose(params.net_value, 100.0 * b * lam - 0.5 * params.e_cmp_j)


# ----------------------------------------------------------------------------- E_n by hand


@settings(max_examples=50, deadline=None)
@given(m=st.integers(1, 5000), n=st.integers(1, 60), seed=st.integers(0, 2**32 - 1))
def test_iid_partition_sizes_are_those_of_the_real_partition(m, n, seed):
    """The catalogue's torch-free IID sizes equal models.data.partition's for any M >= N."""
    if m < n:
        with pytest.raises(ValueError):
            iid_partition_sizes(m, n)
        return
    labels = np.arange(m) % 10
    parts = partition(labels, n, "iid", 1.0, np.random.default_rng(seed))
    assert iid_partition_sizes(m, n).tolist() == [p.size for p in parts]


def test_epoch_steps_by_hand():
    """E_n = k ceil(D_n / B_n)."""
    got = epoch_steps(3, np.array([10, 9, 1, 512]), np.array([5, 5, 7, 512]))
    assert got.tolist() == [6, 6, 3, 3]


def test_catalogue_training_sizes_match_the_digits_split():
    """TRAIN_SAMPLES["digits"] is the training split load_dataset gives."""
    assert TRAIN_SAMPLES["digits"] == len(load_dataset("digits")[1])


# ----------------------------------------------------------------------------- bad input


def _learning(**fields: Any) -> dict[str, Any]:
    return base_scenario(learning={"enabled": True, "dataset": "digits", **fields})


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"local_steps": 0}, "learning.local_steps"),
        ({"local_steps": -3}, "learning.local_steps"),
        ({"local_steps": 2.5}, "learning.local_steps"),
        ({"local_steps": "3"}, "learning.local_steps"),
        ({"local_steps": 10**7}, "learning.local_steps"),
        ({"local_epochs": 0}, "learning.local_epochs"),
        ({"local_epochs": -1}, "learning.local_epochs"),
        ({"local_steps": 2, "local_epochs": 1}, "learning.local_epochs"),
        ({"local_steps": 1, "local_epochs": 1}, "learning.local_epochs"),
    ],
)
def test_bad_local_step_settings_are_refused_with_their_field(fields, field):
    """0, negative, non-integer, too large, or both fields: one ScenarioError naming the field."""
    data = _learning(**fields)
    data["learning"].pop("num_params", None)
    with pytest.raises(ScenarioError) as err:
        validate_scenario(data)
    assert err.value.field == field


@settings(max_examples=60, deadline=None)
@given(field=st.sampled_from(["local_steps", "local_epochs"]), value=st.integers(-(2**70), 2**70))
def test_any_integer_is_accepted_exactly_in_its_range(field, value):
    """local_steps / local_epochs: every integer in [1, 1,000,000] validates, every other one
    is refused naming the field."""
    data = _learning(**{field: value})
    data["learning"].pop("num_params", None)
    if 1 <= value <= 1_000_000:
        assert getattr(validate_scenario(data).learning, field) == value
        return
    with pytest.raises(ScenarioError) as err:
        validate_scenario(data)
    assert err.value.field == f"learning.{field}"


def test_network_only_dirichlet_local_epochs_are_refused():
    """A network-only run has no labels to size a Dirichlet partition: refused, naming the field."""
    data = _network({}, local_epochs=1, partition="dirichlet")
    with pytest.raises(ScenarioError, match="dirichlet") as err:
        validate_scenario(data)
    assert err.value.field == "learning.local_epochs"


def test_local_steps_that_miss_the_deadline_are_refused():
    """c B E / f >= tau_0 while one step fits: refused on learning.local_steps with how many fit."""
    import wflsim

    data = _network({"batch_size": 128}, local_steps=7)  # 7 x 0.128 s > 0.8 s
    with pytest.raises(ScenarioError, match="6 local step") as err:
        wflsim.prepare(data)
    assert err.value.field == "learning.local_steps"


def test_dirichlet_local_epochs_that_miss_the_deadline_are_refused_once_partitioned():
    """A Dirichlet partition's E_n are known once the learner has made it: a device whose
    ceil(D_n / B) steps miss the deadline is refused then, on learning.local_epochs."""
    import wflsim
    from wflsim.app.run import make_learner

    data = _network({"batch_size": 256}, local_epochs=1)
    data["learning"] = {**data["learning"], "enabled": True, "partition": "dirichlet"}
    data["run"] = {**data["run"], "deadline_s": 0.3}  # one step takes 0.256 s, two do not fit
    prep = wflsim.prepare(data)  # every device takes at least one step: fits
    with pytest.raises(ScenarioError, match="local steps take") as err:
        make_learner(prep)
    assert err.value.field == "learning.local_epochs"


def test_cli_refuses_both_fields_in_one_line_and_writes_nothing(tmp_path, capsys):
    """`wflsim run` with local_steps and local_epochs: exit 2, one line naming the field."""
    from pathlib import Path

    from wflsim.app.cli import main

    out = tmp_path / "run"
    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.toml"
    args = ["run", str(scenario), "--out", str(out), "--quiet"]
    rc = main([*args, "--set", "learning.local_steps=2", "--set", "learning.local_epochs=1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and not out.exists()
    assert len(err) == 1 and err[0].startswith("wflsim: error: learning.local_epochs:")
