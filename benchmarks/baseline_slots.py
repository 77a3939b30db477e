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

import _common
import numpy as np
import torch

from wflsim.models.learner import TorchLearner
from wflsim.sim.registry import SCHEMES, build_scheme
from wflsim.sim.schemes.common import freezing_plan
from wflsim.sim.updates import UpdateInputs
from wflsim.sim.world.system import DeviceArrays, SystemConstants

#: The proposed scheme first (the denominator), then the baselines and the ablation.
VARIANTS = ("two_timescale", "topk_ef", "pruning", "fedhq", "fjord", "random_freezing")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=6,
        warmup=1,
        data_dir=_common.MNIST_DIR,
        quick={"devices": 4, "batch": 64, "reps": 2, "warmup": 1},
    )
    p.add_argument("--devices", type=int, default=30, help="simulated devices (default 30)")
    p.add_argument("--batch", type=int, default=512, help="samples per device (default 512)")
    p.add_argument("--gamma", type=float, default=0.3, help="the controller's gamma (default 0.3)")
    return p.parse_args(argv)


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
    data = None
    if not args.data_dir:
        gen = torch.Generator().manual_seed(args.seed)
        x_tr, y_tr = torch.randn(60_000, 1, 28, 28, generator=gen), torch.randint(0, 10, (60_000,))
        data = (x_tr, y_tr, x_tr[:1000], y_tr[:1000])
    work = _common.MnistWork(n, args.seed, args.data_dir, data)
    ids = work.ids
    names = [v for v in VARIANTS if v in SCHEMES]
    learners: dict[str, TorchLearner] = {}
    for name in names:
        # FjORD's sub-models are cut from the architecture
        learner = work.learner(b, 0.05, args.seed, architecture=("cnn_mnist", "mnist"))
        system = system_for(n, learner.num_params)
        scheme = build_scheme(name, {}, system)
        learner.set_update_rule(scheme.update_rule)
        learner.begin_frame(0, frame_inputs(scheme, system, 0.0))
        for t in range(3):
            learner.compute(t, ids)
            learner.apply(t, ids)
        learner.end_frame(0)
        learner.begin_frame(1, frame_inputs(scheme, system, args.gamma))
        learners[name] = learner

    print(f"workload: {n} devices x {b} samples; cnn_mnist; gamma {args.gamma} in frame 1")
    print(f"rounds: {args.warmup} warm-up + {args.reps} recorded, order rotating each round\n")
    variants = {k: _common.slot_runner(learners[k], ids, start=3) for k in names}
    times = _common.interleaved(variants, args.reps, args.warmup)
    print("\nseconds per slot:")
    _common.print_stats(times)
    print("\nratios to the proposed scheme (target <= 1.5):")
    for k in names[1:]:
        print("  " + _common.ratio_line(f"{k}/two_timescale", times[k], times[names[0]], "<= 1.5"))
    slowest = max(names[1:], key=lambda k: _common.Stats(times[k]).median)
    _common.headline(
        f"slowest baseline {slowest}/two_timescale", times[slowest], times[names[0]], "<= 1.5"
    )


if __name__ == "__main__":
    main()
