"""Where does a learning slot's time go? One slot of the paper's MNIST scenario, phase by phase.

Workload: ``scenarios/paper/mnist_iid.toml`` as ``wflsim run`` builds it (``wflsim.prepare``,
``make_learner``, ``build_engine``: real MNIST, ``cnn_mnist`` with D = 440,812, 30 devices x 512
samples, the two-timescale scheme's freezing rule, FedAvg), every device computing and every
upload arriving. A slot is what the synchronous server asks of the learner
(``sim/servers/synchronous.py``): ``compute(t, all)``, ``apply(t, all)``, ``is_finite()``, the
``stable_fraction`` read; plus the test-set evaluation (``learner.evaluate()``, the whole 10,000
image test split, as the scenario does it every ``eval_every_slots`` = 20 slots), timed on its own
and counted into the slot as 1/20 of a call. Two learners, slots interleaved:

* ``frame 0``: nothing frozen (every device on the shared global model);
* ``frozen``: after a few frame-0 slots and ``end_frame``, every device freezes ``--gamma`` of
  its parameters (the stability masks of eq. 6), so each has its own ``w_tilde_n`` (eq. 1).

The phases are timed around wflsim's own calls (``time.perf_counter`` wrappers installed on the
learner's parts for the measurement; a wrapped call's time excludes the wrapped calls it makes):

* forward: ``functional_call`` of the network and the cross-entropy in ``GradientPaths``
  (at B = 512 on a CPU the per-device autograd path: one pass per device);
* backward: ``torch.autograd.grad`` of each device's loss;
* input batch: the training images indexed and normalised (``CompactImages[idx]``) and the
  minibatch draw (``LocalData.draw_steps``);
* per-device gather: the rule's ``local_params`` (eq. 1's ``w_tilde_n``), ``trained`` and
  ``uploads`` (frozen entries masked), and the per-device gradient rows written into the
  ``(n, D)`` upload matrix;
* aggregation: the strategy's ``aggregate`` (eq. 3 weighted mean through the rule) and
  ``server_step`` (eq. 4);
* bookkeeping: the rule's ``settle`` and ``after_step`` (eq. 5 accumulators), the Fig. 1
  tracker's ``track``, ``is_finite`` and the ``stable_fraction`` read;
* evaluation: ``learner.evaluate()`` (amortised: 1/20 of a call per slot);
* other: the rest of the slot's wall time (Python in ``compute`` / ``apply`` and the per-device
  loop, parameter dicts, ...).

Floor: a bare PyTorch loop over the same 30 devices x 512 samples (a plain ``nn.Module`` with
the same weights, per device: index the images, forward, cross-entropy, ``backward``), interleaved
with the slots. The ratio slot / floor compares the training part of the slot (without the
evaluation) with it. Median over ``--reps`` slots after ``--warmup`` unrecorded ones.

The simulator's own slot work outside the learner (channel, scheme, trace rows) is not included:
a network-only run of this scenario costs milliseconds per slot (docs/performance.md).

    WFLSIM_DATA_DIR=data python benchmarks/slot_profile.py     # ~5 min on 2 cores
    python benchmarks/slot_profile.py --data-dir data --quick                   # smoke: 3 devices
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import _common
import numpy as np
import torch
import torch.nn.functional as F

import wflsim
from wflsim.app.assemble import build_engine, make_learner
from wflsim.models import data as wdata
from wflsim.models.learner import TorchLearner
from wflsim.models.learner import gradients as wgrad
from wflsim.models.nets import build_model
from wflsim.sim.config.loading import read_scenario_file
from wflsim.sim.updates import FreezingInputs

SCENARIO = _common.REPO / "scenarios" / "paper" / "mnist_iid.toml"
PHASES = (
    "forward",
    "backward",
    "input batch",
    "per-device gather",
    "aggregation",
    "bookkeeping",
    "evaluation",
    "other",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=7,
        reps_help="recorded slots per variant",
        warmup=1,
        seed=False,
        threads=True,
        data_dir="MNIST folder (default: $WFLSIM_DATA_DIR or data)",
        data_dir_default=os.environ.get("WFLSIM_DATA_DIR", "data"),
        quick={"reps": 2, "warmup": 1},
        quick_help="3 devices, 2,000 test images",
    )
    p.add_argument(
        "--gamma",
        type=float,
        default=0.25,
        help="fraction each device freezes in the 'frozen' variant (default 0.25: the mean"
        " gamma of frame 1 of the scenario's run at seed 0)",
    )
    args = p.parse_args(argv)
    return args


class Phases:
    """Exclusive wall time per phase of the wrapped calls (a call's time minus the time of the
    wrapped calls inside it), while :attr:`on`."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = defaultdict(float)
        self.stack: list[float] = []
        self.on = False

    def wrap(self, name: str, fn: Callable[..., Any], top_only: bool = False) -> Callable[..., Any]:
        """``fn`` timed into ``name``; ``top_only``: only when no wrapped call is running (its
        time inside another wrapped call stays with that call)."""

        def timed(*a: Any, **k: Any) -> Any:
            if not self.on or (top_only and self.stack):
                return fn(*a, **k)
            t0 = time.perf_counter()
            self.stack.append(0.0)
            try:
                return fn(*a, **k)
            finally:
                dt = time.perf_counter() - t0
                inner = self.stack.pop()
                self.acc[name] += dt - inner
                if self.stack:
                    self.stack[-1] += dt

        return timed

    def take(self) -> dict[str, float]:
        out, self.acc = dict(self.acc), defaultdict(float)
        return out


class _TimedF:
    """``torch.nn.functional`` with ``cross_entropy`` timed (``gradients.F`` for the run)."""

    def __init__(self, cross_entropy: Callable[..., Any]) -> None:
        self.cross_entropy = cross_entropy

    def __getattr__(self, name: str) -> Any:
        return getattr(F, name)


@contextmanager
def instrumented(ph: Phases, learners: list[TorchLearner]) -> Iterator[None]:
    """Install the timing wrappers on wflsim's module functions and the learners' parts."""
    saved_module = [
        (wgrad, "functional_call", wgrad.functional_call),
        (wgrad, "F", wgrad.F),
        (torch.autograd, "grad", torch.autograd.grad),
    ]
    saved_class = [
        (wdata.CompactImages, "__getitem__", wdata.CompactImages.__getitem__),
        (torch.Tensor, "__setitem__", torch.Tensor.__setitem__),
    ]
    own = {attr for cls, attr, _ in saved_class if attr in vars(cls)}
    wgrad.functional_call = ph.wrap("forward", wgrad.functional_call)  # type: ignore[attr-defined]
    wgrad.F = _TimedF(ph.wrap("forward", F.cross_entropy))  # type: ignore[assignment]
    torch.autograd.grad = ph.wrap("backward", torch.autograd.grad)  # type: ignore[assignment]
    wdata.CompactImages.__getitem__ = ph.wrap(  # type: ignore[method-assign]
        "input batch", wdata.CompactImages.__getitem__
    )
    # at the top level of compute: the gradient and loss rows written into the (n, D) matrix
    torch.Tensor.__setitem__ = ph.wrap(  # type: ignore[method-assign]
        "per-device gather", torch.Tensor.__setitem__, top_only=True
    )
    patched: list[tuple[Any, str]] = []
    for ln in learners:
        parts: list[tuple[Any, str, str]] = [
            (ln.data, "draw_steps", "input batch"),
            (ln.rule, "local_params", "per-device gather"),
            (ln.rule, "trained", "per-device gather"),
            (ln.rule, "uploads", "per-device gather"),
            (ln.rule, "local_buffers", "per-device gather"),
            (ln.strategy, "aggregate", "aggregation"),
            (ln.strategy, "server_step", "aggregation"),
            (ln.rule, "aggregate_buffers", "aggregation"),
            (ln.rule, "settle", "bookkeeping"),
            (ln.rule, "after_step", "bookkeeping"),
            (ln.stability, "track", "bookkeeping"),
        ]
        for obj, attr, name in parts:
            setattr(obj, attr, ph.wrap(name, getattr(obj, attr)))  # an instance attribute
            patched.append((obj, attr))
    try:
        yield
    finally:
        for mod, attr, fn in saved_module:
            setattr(mod, attr, fn)
        for cls, attr, fn in saved_class:
            if attr in own:
                setattr(cls, attr, fn)
            else:  # inherited: drop the override
                delattr(cls, attr)
        for obj, attr in patched:
            delattr(obj, attr)


def scenario_data(data_dir: str, quick: bool) -> dict[str, Any]:
    _, data = read_scenario_file(SCENARIO)
    data["learning"] = {**data["learning"], "data_dir": data_dir}
    if quick:
        data["network"] = {**data["network"], "num_devices": 3}
        data["learning"]["eval_max_samples"] = 2000
    return data


def make_run_learner(data: dict[str, Any]) -> tuple[TorchLearner, int]:
    """The learner ``wflsim run`` builds for the scenario (its rule and strategy set by the
    engine), and the scenario's ``eval_every_slots``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prep = wflsim.prepare(data)
    learner = make_learner(prep)
    build_engine(prep, learner)
    assert isinstance(learner, TorchLearner)
    return learner, int(prep.scenario.learning.eval_every_slots)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    _common.print_header(
        "slot_profile: one learning slot of mnist_iid, by phase", ("numpy", "torch")
    )

    data = scenario_data(args.data_dir, args.quick)
    plain, every = make_run_learner(data)
    frozen, _ = make_run_learner(data)
    n = plain.num_devices
    b = int(plain.batch_sizes[0])
    ids = np.arange(n, dtype=np.int64)
    d = plain.num_params

    plain.begin_frame(0, FreezingInputs(np.zeros(n, dtype=np.int64)))
    frozen.begin_frame(0, FreezingInputs(np.zeros(n, dtype=np.int64)))
    for t in range(3):  # scores of a finished frame, then the masks
        frozen.compute(t, ids)
        frozen.apply(t, ids)
    frozen.end_frame(0)
    frozen.begin_frame(1, _common.frozen_counts(frozen, n, args.gamma))  # type: ignore[arg-type]
    frac = frozen.rule.frozen_fraction()
    cap = plain.paths.chunk_samples
    path = "per-device autograd" if cap is not None and cap < 2 * b else "vmap(grad)"

    # the floor: a plain module with the same weights, the same images (normalised up front)
    floor_model = build_model("cnn_mnist", "mnist")
    plain.sync_model()
    floor_model.load_state_dict(plain.model.state_dict())
    floor_model.train()
    x_all = plain.data.x_train
    x_floor = x_all.materialise() if isinstance(x_all, wdata.CompactImages) else x_all
    y_floor = plain.data.y_train
    rng = np.random.default_rng(0)
    parts = plain.parts

    ph = Phases()
    phases: dict[str, list[dict[str, float]]] = {"frame 0": [], "frozen": []}
    slot_no = {"frame 0": 0, "frozen": 3}
    learners = {"frame 0": plain, "frozen": frozen}

    def slot(key: str) -> Callable[[], float]:
        ln = learners[key]

        def run() -> float:
            t = slot_no[key]
            slot_no[key] += 1
            ph.take()
            ph.on = True
            t0 = time.perf_counter()
            ln.compute(t, ids)
            ln.apply(t, ids)
            t1 = time.perf_counter()
            ln.is_finite()
            float(ln.stable_fraction)
            t2 = time.perf_counter()
            ph.on = False
            ln.evaluate()
            t3 = time.perf_counter()
            got = ph.take()
            got["bookkeeping"] = got.get("bookkeeping", 0.0) + (t2 - t1)
            got["evaluation per call"] = t3 - t2
            got["training"] = t2 - t0
            phases[key].append(got)
            return t2 - t0

        return run

    def floor() -> None:
        for part in parts:
            idx = torch.from_numpy(part[rng.choice(part.size, size=b, replace=part.size < b)])
            floor_model.zero_grad(set_to_none=True)
            F.cross_entropy(floor_model(x_floor[idx]), y_floor[idx]).backward()

    print(f"scenario: {SCENARIO.relative_to(_common.REPO)}; data: {args.data_dir}")
    print(f"workload: {n} devices x {b} samples = {n * b:,} per slot; cnn_mnist, D = {d:,}")
    print(f"gradient path: {path} (vmap_chunk_samples {cap}); precision {plain.precision}")
    print(f"frozen variant: fraction frozen per device {frac.min():.3f}..{frac.max():.3f}")
    n_test = min(plain.x_test.shape[0], plain.eval_max_samples or plain.x_test.shape[0])
    print(f"evaluation: {n_test:,} test images, every {every} slots")
    print(f"rounds: {args.warmup} warm-up + {args.reps} recorded, order rotating each round\n")

    with instrumented(ph, [plain, frozen]):
        times = _common.interleaved(
            {"frame 0": slot("frame 0"), "frozen": slot("frozen"), "floor": floor},
            args.reps,
            args.warmup,
        )

    for key in ("frame 0", "frozen"):
        rows = phases[key][args.warmup :]
        med = {p: float(np.median([r.get(p, 0.0) for r in rows])) for p in PHASES[:-2]}
        ev = float(np.median([r["evaluation per call"] for r in rows]))
        train = float(np.median([r["training"] for r in rows]))
        # "other" per slot, then its median (the phases' medians need not add up exactly)
        other = float(
            np.median([r["training"] - sum(r.get(p, 0.0) for p in PHASES[:-2]) for r in rows])
        )
        med["evaluation"] = ev / every
        med["other"] = other
        total = train + ev / every
        print(f"\n{key}: slot = training {train:.3f} s + evaluation {ev:.3f} s / {every}")
        print(f"  {'phase':20s} {'s / slot':>9s} {'share':>7s}")
        for p in PHASES:
            print(f"  {p:20s} {med[p]:9.4f} {100 * med[p] / total:6.1f} %")
        print(f"  {'total':20s} {total:9.4f} {100.0:6.1f} %")
        print(f"  {'(sum of medians)':20s} {sum(med.values()):9.4f}")
        per_call = _common.Stats([r["evaluation per call"] for r in rows])
        print(f"  evaluation per call: {per_call.fmt(unit=' s')}")

    print("\nseconds per slot (training part, without the evaluation):")
    for key in ("frame 0", "frozen", "floor"):
        print(f"  {key:8s} {_common.Stats(times[key]).fmt(unit=' s')}")
    print("\nratios:")
    for key in ("frame 0", "frozen"):
        print(
            "  " + _common.ratio_line(f"{key}/floor", times[key], times["floor"], "(informative)")
        )
    _common.headline("frame 0/floor per slot", times["frame 0"], times["floor"])


if __name__ == "__main__":
    main()
