"""How much does wflsim's batched learner cost over plain PyTorch? One simulated slot's learning.

Workload (defaults = the paper's MNIST setting): ``--devices`` 30 devices x ``--batch`` 512
samples, the paper's MNIST CNN (``build_model("cnn_mnist", "mnist")``, 440,812 parameters), CPU (``--device cuda``: a GPU),
synthetic MNIST-shaped data (60,000 x 1 x 28 x 28 standard-normal images, uniform labels) or the
real MNIST with ``--data-dir``. Variants, timed side by side in one process, interleaved:

* ``a``  wflsim: ``TorchLearner.compute(all devices)`` + ``apply(all devices)``, nothing frozen
  (frame 0): minibatch sampling from per-(device, slot) streams as ``from_config`` sets it up,
  the per-device gradients (at B = 512 on a CPU one plain autograd pass per device, as the
  learner decides; ``--chunk 0`` forces one ``vmap(grad)`` over all devices), weighted
  aggregation, SGD step, stability accumulators (eq. 5) and the Fig. 1 stability tracking.
* ``a'`` the same with freezing active: one frame with gamma = 0 is run first, then every device
  freezes gamma = 0.3 of its parameters (``begin_frame(1, FreezingInputs(frozen_count=rint(0.3 D)))``), so each device has its own
  parameter copy ``w_tilde_n``.
* ``b``  raw PyTorch floor: forward + backward of the same number of samples (devices x batch) as
  ONE batch (mean cross-entropy: with equal batches this is exactly the B-weighted mean of the
  per-device gradients), then one ``torch.optim.SGD`` step.
* ``c``  a plain Python loop over the devices: per device forward + backward on its own batch,
  keep its flat gradient (the simulator needs each upload separately: only the uploads that
  arrive in time are aggregated), B-weighted average of the gradients, one SGD step.

Every variant draws its indices the same way (per device, without replacement from a
2,000-sample IID shard) and gathers its samples from the same training tensor inside the timed
region. Targets: a/b <= 1.15, c/a >= 1.8. Ratios are printed, never asserted.

    python benchmarks/learner_overhead.py                 # full size (30 x 512); expect 10-15 min on 2 cores
    python benchmarks/learner_overhead.py --quick         # smoke test: 4 devices x 64 samples
"""

from __future__ import annotations

import argparse
import sys

import _common
import numpy as np
import torch
import torch.nn.functional as F

from wflsim.models.learner import TorchLearner


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=15,
        warmup=2,
        threads=True,
        data_dir=_common.MNIST_DIR,
        quick={"devices": 4, "batch": 64, "reps": 3, "warmup": 1},
    )
    p.add_argument("--devices", type=int, default=30, help="simulated devices (default 30)")
    p.add_argument("--batch", type=int, default=512, help="samples per device (default 512)")
    p.add_argument("--gamma", type=float, default=0.3, help="freezing fraction of a' (default 0.3)")
    p.add_argument(
        "--chunk",
        default="auto",
        help="the learner's vmap_chunk_samples: 'auto' (the learner's default), N, or 0 = no bound",
    )
    p.add_argument(
        "--device",
        default="cpu",
        help="torch device of every variant: cpu (default) or cuda (each slot ends synchronised)",
    )
    p.add_argument("--lr", type=float, default=0.05)
    return p.parse_args(argv)


synthetic_mnist = _common.synthetic_mnist


class Sampler:
    """Per-device minibatch indices, drawn like the learner draws them."""

    def __init__(self, parts: list[np.ndarray], batch: int, seed: int) -> None:
        self.parts = parts
        self.batch = batch
        self.rngs = [np.random.default_rng([seed, n]) for n in range(len(parts))]

    def draw(self) -> list[np.ndarray]:
        out = []
        for part, rng in zip(self.parts, self.rngs, strict=True):
            pick = rng.choice(part.size, size=self.batch, replace=part.size < self.batch)
            out.append(part[pick])
        return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.set_threads(args.threads)
    _common.print_header("learner_overhead: one slot's learning, wflsim vs raw PyTorch")

    n, b = args.devices, args.batch
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("learner_overhead: --device cuda but torch sees no CUDA device")

    def sync() -> None:
        """Wait for the device's queued kernels, so that a slot's wall time is all its work."""
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    work = _common.MnistWork(n, args.seed, args.data_dir)
    x_tr, y_tr, parts, ids = work.x_tr, work.y_tr, work.parts, work.ids
    chunk = args.chunk if args.chunk == "auto" else (int(args.chunk) or None)
    fresh_model = work.model

    def learner(seed_off: int) -> TorchLearner:
        # keyed draws as from_config: per (device, slot)
        return work.learner(b, args.lr, args.seed + seed_off, vmap_chunk_samples=chunk, device=dev)

    # a: nothing frozen (frame 0)
    la = learner(1)
    la.begin_frame(0, _common.nothing_frozen(n))
    # a': one warm-up frame, then gamma per device
    lf = learner(2)
    lf.begin_frame(0, _common.nothing_frozen(n))
    for t in range(3):
        lf.compute(t, ids)
        lf.apply(t, ids)
    lf.end_frame(0)
    lf.begin_frame(1, _common.frozen_counts(lf, n, args.gamma))
    frozen = lf.rule.frozen_fraction()
    run_a = _common.slot_runner(la, ids, 0, sync)
    run_f = _common.slot_runner(lf, ids, 3, sync)

    # b: one batch
    x_dev, y_dev = x_tr.to(dev), y_tr.to(dev)  # b and c gather on the device, as the learner
    mb = fresh_model().to(dev).train()
    opt_b = torch.optim.SGD(mb.parameters(), lr=args.lr)
    samp_b = Sampler(parts, b, args.seed + 10)

    def run_b() -> None:
        idx = torch.from_numpy(np.concatenate(samp_b.draw())).to(dev)
        x, y = x_dev[idx], y_dev[idx]
        opt_b.zero_grad(set_to_none=True)
        F.cross_entropy(mb(x), y).backward()
        opt_b.step()
        sync()

    # c: Python loop over devices
    mc = fresh_model().to(dev).train()
    params_c = [p for p in mc.parameters() if p.requires_grad]
    sizes_c = [p.numel() for p in params_c]
    d = sum(sizes_c)
    opt_c = torch.optim.SGD(params_c, lr=args.lr)
    samp_c = Sampler(parts, b, args.seed + 20)
    grads_c = torch.empty(n, d, device=dev)
    bw = torch.full((n,), float(b), device=dev)

    def run_c() -> None:
        for row, idx_np in enumerate(samp_c.draw()):
            idx = torch.from_numpy(idx_np).to(dev)
            opt_c.zero_grad(set_to_none=True)
            F.cross_entropy(mc(x_dev[idx]), y_dev[idx]).backward()
            torch.cat([p.grad.reshape(-1) for p in params_c], out=grads_c[row])
        g = (bw @ grads_c) / bw.sum()
        for p, piece in zip(params_c, torch.split(g, sizes_c), strict=True):
            p.grad = piece.view_as(p)
        opt_c.step()
        sync()

    print(f"workload: {n} devices x {b} samples = {n * b:,} samples per slot; cnn_mnist, D = {d:,}")
    print(f"data: {work.desc}")
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    print(f"device: {dev} ({name}), torch {torch.__version__}")
    print(f"learner vmap_chunk_samples: {chunk}")
    print(
        f"a': frozen fraction per device {frozen.min():.3f}..{frozen.max():.3f} (gamma {args.gamma})"
    )
    print(f"rounds: {args.warmup} warm-up + {args.reps} recorded, order rotating each round\n")

    times = _common.interleaved(
        {"a": run_a, "a'": run_f, "b": run_b, "c": run_c}, args.reps, args.warmup
    )

    labels = {
        "a": "a  wflsim compute+apply (no freezing)",
        "a'": "a' wflsim compute+apply (gamma frozen, per-device params)",
        "b": "b  raw PyTorch, one batch + SGD step",
        "c": "c  Python loop over devices + average + step",
    }
    print("\nseconds per slot:")
    for k, lab in labels.items():
        s = _common.Stats(times[k])
        print(f"  {lab:58s} {s.fmt(unit=' s')}   {n * b / s.median:,.0f} samples/s")
    print("\nratios:")
    print("  " + _common.ratio_line("a/b ", times["a"], times["b"], "<= 1.15"))
    print("  " + _common.ratio_line("c/a ", times["c"], times["a"], ">= 1.8"))
    print("  " + _common.ratio_line("a'/b", times["a'"], times["b"], "(informative)"))
    print("  " + _common.ratio_line("a'/a", times["a'"], times["a"], "(informative)"))
    print("  " + _common.ratio_line("c/b ", times["c"], times["b"], "(informative)"))
    _common.headline("a/b (wflsim / raw PyTorch, one slot)", times["a"], times["b"], "<= 1.15")


if __name__ == "__main__":
    main()
