"""FedAvg's local steps: wflsim's batched local SGD against raw PyTorch on model copies.

Workload (defaults): ``--devices`` 30 devices x ``--batch`` 64 samples, the paper's MNIST CNN
(``cnn_mnist``, 440,812 parameters), CPU, synthetic MNIST-shaped data (or the real MNIST with
``--data-dir``), ``--steps`` E local SGD steps per device and slot. Variants, timed side by side
in one process, interleaved (``_common.interleaved``):

* ``a1`` wflsim, FedSGD: ``TorchLearner.compute(all devices)`` + ``apply(all devices)`` with
  ``local_steps = 1`` (one gradient per device, the paper's);
* ``aE`` wflsim, FedAvg: the same with ``local_steps = E``: E steps per device, each on a fresh
  minibatch, at the slot's learning rate; the upload is the pseudo-gradient (its step
  gradients summed), aggregated and applied as FedSGD's;
* ``cE`` raw PyTorch on model copies, the textbook FedAvg loop: per device, a copy of the global
  ``nn.Module`` (``load_state_dict``), E ``torch.optim.SGD`` steps on its own minibatches, its
  model difference kept; the batch-weighted average of the differences applied to the global
  model.

Printed: seconds per slot, aE/a1 (the cost of E steps; E is the floor: the compute is E times
FedSGD's), aE/cE (wflsim against the plain loop on the same work; target <= 1). Nothing is
asserted; run on a quiet machine.

    python benchmarks/fedavg_local_steps.py                 # 30 x 64, E = 5
    python benchmarks/fedavg_local_steps.py --quick         # smoke test
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import _common
import torch
import torch.nn.functional as F
from learner_overhead import Sampler


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=5,
        warmup=1,
        data_dir=_common.MNIST_DIR,
        quick={"devices": 4, "steps": 2, "reps": 2},
    )
    p.add_argument("--devices", type=int, default=30, help="simulated devices (default 30)")
    p.add_argument("--batch", type=int, default=64, help="samples per step (default 64)")
    p.add_argument("--steps", type=int, default=5, help="local steps E (default 5)")
    p.add_argument("--lr", type=float, default=0.05)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.print_header("fedavg_local_steps: E local SGD steps, wflsim vs raw PyTorch")
    n, b, e = args.devices, args.batch, args.steps
    work = _common.MnistWork(n, args.seed, args.data_dir)
    x_tr, y_tr, parts, ids = work.x_tr, work.y_tr, work.parts, work.ids
    fresh_model = work.model

    def slot_of(steps: int) -> Callable[[], None]:
        learner = work.learner(b, args.lr, args.seed + steps, local_steps=steps)
        learner.begin_frame(0, _common.nothing_frozen(n))
        return _common.slot_runner(learner, ids)

    glob = fresh_model().train()
    local = fresh_model().train()
    opt = torch.optim.SGD(local.parameters(), lr=args.lr)
    samp = Sampler(parts, b, args.seed + 20)
    weights = torch.full((n,), float(b)) / (n * b)

    def run_c() -> None:
        start = {k: v.clone() for k, v in glob.state_dict().items()}
        delta = {k: torch.zeros_like(v) for k, v in glob.named_parameters()}
        batches = [samp.draw() for _ in range(e)]
        for dev in range(n):
            local.load_state_dict(start)
            for step in range(e):
                idx = torch.from_numpy(batches[step][dev])
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(local(x_tr[idx]), y_tr[idx]).backward()
                opt.step()
            with torch.no_grad():
                for k, p in local.named_parameters():
                    delta[k] += weights[dev] * (start[k] - p)
        with torch.no_grad():
            for k, p in glob.named_parameters():
                p -= delta[k]

    print(f"workload: {n} devices x {b} samples x E = {e} local steps; cnn_mnist")
    print(f"rounds: {args.warmup} warm-up + {args.reps} recorded, order rotating each round\n")
    times = _common.interleaved(
        {"a1": slot_of(1), "aE": slot_of(e), "cE": run_c}, args.reps, args.warmup
    )
    labels = {
        "a1": "a1 wflsim, FedSGD (1 step)",
        "aE": f"aE wflsim, FedAvg ({e} steps)",
        "cE": f"cE raw PyTorch loop on model copies ({e} steps)",
    }
    print("\nseconds per slot:")
    _common.print_stats({labels[k]: times[k] for k in labels}, width=50)
    print("\nratios:")
    print("  " + _common.ratio_line("aE/a1", times["aE"], times["a1"], f"(E = {e})"))
    print("  " + _common.ratio_line("aE/cE", times["aE"], times["cE"], "<= 1"))
    _common.headline(
        f"aE/cE (wflsim FedAvg / raw PyTorch copies, E = {e})", times["aE"], times["cE"], "<= 1"
    )


if __name__ == "__main__":
    main()
