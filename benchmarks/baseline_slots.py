"""What does a slot of each state-of-the-art baseline cost against the proposed scheme's slot?

Workload (defaults = the paper's MNIST setting): ``--devices`` 30 devices x ``--batch`` 512 samples,
the paper's CNN (``cnn_mnist``, 440,812 parameters), CPU, synthetic MNIST-shaped data (or the real
MNIST with ``--data-dir``). One learner per scheme, each with the scheme's own update rule; each
runs one warm-up frame (3 slots at gamma = 0: frame 0 of a run) and then opens frame 1 at
``gamma = --gamma`` for every device, turned into the rule's inputs by the scheme's own cost model
(the integers a run would use: frozen counts, Top-K's K, pruning's kept counts, FedHQ-like's bits,
FjORD's widths). A timed slot is ``compute(all devices) + apply(all devices)``: every device
trains and every upload arrives. The variants run interleaved, the order rotating each round.

Target (issue 12): every baseline's slot at most 1.5 x the proposed scheme's. Printed, never
asserted.

    python benchmarks/baseline_slots.py                 # full size; expect 15-25 min on 2 cores
    python benchmarks/baseline_slots.py --quick         # smoke test: 4 devices x 64 samples
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_repo_to_path()

import numpy as np  # noqa: E402
import torch  # noqa: E402

from wflsim.models.data import load_dataset, partition  # noqa: E402
from wflsim.models.learner import TorchLearner  # noqa: E402
from wflsim.models.nets import build_model  # noqa: E402
from wflsim.sim.registry import SCHEMES, build_scheme  # noqa: E402
from wflsim.sim.rng import Streams  # noqa: E402
from wflsim.sim.schemes.common import freezing_plan  # noqa: E402
from wflsim.sim.updates import UpdateInputs  # noqa: E402
from wflsim.sim.world.system import DeviceArrays, SystemConstants  # noqa: E402

#: The proposed scheme first (the denominator), then the baselines and the ablation.
VARIANTS = ("two_timescale", "topk_ef", "pruning", "fedhq", "fjord", "random_freezing")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=30, help="simulated devices (default 30)")
    p.add_argument("--batch", type=int, default=512, help="samples per device (default 512)")
    p.add_argument("--gamma", type=float, default=0.3, help="the controller's gamma (default 0.3)")
    p.add_argument("--reps", type=int, default=6, help="recorded rounds (default 6)")
    p.add_argument("--warmup", type=int, default=1, help="unrecorded rounds first (default 1)")
    p.add_argument("--data-dir", default=None, help="use the real MNIST from this folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--quick", action="store_true", help="smoke test: 4 devices x 64 samples, 2 reps"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.devices, args.batch, args.reps, args.warmup = 4, 64, 2, 1
    return args


def system_for(n: int, d: int) -> SystemConstants:
    """The paper's MNIST devices (what the cost models need: D, bits, the architecture)."""
    devices = DeviceArrays(
        cpu_hz=np.full(n, 2e9),
        cycles_per_sample=np.full(n, 2e6),
        capacitance=np.full(n, 2e-28),
        batch_size=np.full(n, 512, dtype=np.int64),
        peak_power_w=np.ones(n),
        energy_budget_j=np.full(n, 0.4),
    )
    return SystemConstants(devices, 10e6, 4e-14, 0.8, d, 32, ("cnn_mnist", "mnist"))


def frame_inputs(scheme: object, system: SystemConstants, gamma: float) -> UpdateInputs:
    """The rule inputs the scheme's own cost model gives at ``gamma`` in frame 1 (freezing
    schemes: ``freezing_plan``; baselines: their ``cost_model``)."""
    g = np.full(system.num_devices, gamma)
    model = getattr(scheme, "cost_model", None)
    if model is not None:
        return model(g, 1).update
    return freezing_plan(g, 1, system, {}).update


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.print_header("baseline_slots: one slot of each baseline vs the proposed scheme")
    n, b = args.devices, args.batch
    if args.data_dir:
        x_tr, y_tr, x_te, y_te = load_dataset("mnist", args.data_dir)
    else:
        gen = torch.Generator().manual_seed(args.seed)
        x_tr, y_tr = torch.randn(60_000, 1, 28, 28, generator=gen), torch.randint(0, 10, (60_000,))
        x_te, y_te = x_tr[:1000], y_tr[:1000]
    parts = partition(y_tr.numpy(), n, "iid", 1.0, np.random.default_rng(args.seed))
    torch.manual_seed(args.seed)
    init = build_model("cnn_mnist", "mnist")
    state = {k: v.clone() for k, v in init.state_dict().items()}
    ids = np.arange(n, dtype=np.int64)
    names = [v for v in VARIANTS if v in SCHEMES]
    learners: dict[str, TorchLearner] = {}
    slots: dict[str, int] = {}
    for name in names:
        model = build_model("cnn_mnist", "mnist")
        model.load_state_dict(state)
        learner = TorchLearner(
            model=model,
            x_train=x_tr,
            y_train=y_tr,
            x_test=x_te,
            y_test=y_te,
            parts=parts,
            batch_sizes=np.full(n, b, dtype=np.int64),
            lr=0.05,
            sampling_streams=Streams(args.seed),
            architecture=("cnn_mnist", "mnist"),  # FjORD's sub-models are cut from it
        )
        system = system_for(n, learner.num_params)
        scheme = build_scheme(name, {}, system)
        learner.set_update_rule(scheme.update_rule)
        learner.begin_frame(0, frame_inputs(scheme, system, 0.0))
        for t in range(3):
            learner.compute(t, ids)
            learner.apply(t, ids)
        learner.end_frame(0)
        learner.begin_frame(1, frame_inputs(scheme, system, args.gamma))
        learners[name], slots[name] = learner, 3

    def variant(name: str) -> Callable[[], None]:
        def run() -> None:
            learners[name].compute(slots[name], ids)
            learners[name].apply(slots[name], ids)
            slots[name] += 1

        return run

    print(f"workload: {n} devices x {b} samples; cnn_mnist; gamma {args.gamma} in frame 1")
    print(f"rounds: {args.warmup} warm-up + {args.reps} recorded, order rotating each round\n")
    times = _common.interleaved({k: variant(k) for k in names}, args.reps, args.warmup)
    print("\nseconds per slot:")
    for k in names:
        print(f"  {k:16s} {_common.Stats(times[k]).fmt(unit=' s')}")
    print("\nratios to the proposed scheme (target <= 1.5):")
    for k in names[1:]:
        print("  " + _common.ratio_line(f"{k}/two_timescale", times[k], times[names[0]], "<= 1.5"))


if __name__ == "__main__":
    main()
