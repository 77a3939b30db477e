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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_repo_to_path()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from wflsim.models.data import load_dataset, partition  # noqa: E402
from wflsim.models.learner import TorchLearner  # noqa: E402
from wflsim.models.nets import build_model  # noqa: E402
from wflsim.sim.rng import Streams  # noqa: E402
from wflsim.sim.updates import FreezingInputs  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=30, help="simulated devices (default 30)")
    p.add_argument("--batch", type=int, default=512, help="samples per device (default 512)")
    p.add_argument("--reps", type=int, default=15, help="recorded rounds (default 15)")
    p.add_argument("--warmup", type=int, default=2, help="unrecorded rounds first (default 2)")
    p.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)"
    )
    p.add_argument("--gamma", type=float, default=0.3, help="freezing fraction of a' (default 0.3)")
    p.add_argument(
        "--chunk",
        default="auto",
        help="the learner's vmap_chunk_samples: 'auto' (the learner's default), N, or 0 = no bound",
    )
    p.add_argument("--data-dir", default=None, help="use the real MNIST from this folder")
    p.add_argument(
        "--device",
        default="cpu",
        help="torch device of every variant: cpu (default) or cuda (each slot ends synchronised)",
    )
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--quick", action="store_true", help="smoke test: 4 devices x 64 samples, 3 reps, 1 warm-up"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.devices, args.batch, args.reps, args.warmup = 4, 64, 3, 1
    return args


def synthetic_mnist(seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x_tr = torch.randn(60_000, 1, 28, 28, generator=g)
    y_tr = torch.randint(0, 10, (60_000,), generator=g)
    x_te = torch.randn(1_000, 1, 28, 28, generator=g)
    y_te = torch.randint(0, 10, (1_000,), generator=g)
    return x_tr, y_tr, x_te, y_te


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
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    _common.print_header("learner_overhead: one slot's learning, wflsim vs raw PyTorch")

    n, b = args.devices, args.batch
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("learner_overhead: --device cuda but torch sees no CUDA device")

    def sync() -> None:
        """Wait for the device's queued kernels, so that a slot's wall time is all its work."""
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    if args.data_dir:
        x_tr, y_tr, x_te, y_te = load_dataset("mnist", args.data_dir)
        data_desc = f"real MNIST from {args.data_dir}"
    else:
        x_tr, y_tr, x_te, y_te = synthetic_mnist(args.seed)
        data_desc = "synthetic MNIST-shaped (60,000 x 1 x 28 x 28, N(0,1), uniform labels)"
    parts = partition(y_tr.numpy(), n, "iid", 1.0, np.random.default_rng(args.seed))
    chunk = args.chunk if args.chunk == "auto" else (int(args.chunk) or None)

    torch.manual_seed(args.seed)
    init = build_model("cnn_mnist", "mnist")
    state = {k: v.clone() for k, v in init.state_dict().items()}

    def fresh_model() -> torch.nn.Module:
        m = build_model("cnn_mnist", "mnist")
        m.load_state_dict(state)
        return m

    def learner(seed_off: int) -> TorchLearner:
        return TorchLearner(
            model=fresh_model(),
            x_train=x_tr,
            y_train=y_tr,
            x_test=x_te,
            y_test=y_te,
            parts=parts,
            batch_sizes=np.full(n, b, dtype=np.int64),
            lr=args.lr,
            sampling_streams=Streams(args.seed + seed_off),  # as from_config: per (device, slot)
            vmap_chunk_samples=chunk,
            device=dev,
        )

    ids = np.arange(n, dtype=np.int64)
    # a: nothing frozen (frame 0)
    la = learner(1)
    la.begin_frame(0, FreezingInputs(frozen_count=np.zeros(n, dtype=np.int64)))
    # a': one warm-up frame, then gamma per device
    lf = learner(2)
    lf.begin_frame(0, FreezingInputs(frozen_count=np.zeros(n, dtype=np.int64)))
    for t in range(3):
        lf.compute(t, ids)
        lf.apply(t, ids)
    lf.end_frame(0)
    lf.begin_frame(1, _common.frozen_counts(lf, n, args.gamma))
    frozen = lf.rule.frozen_fraction()
    slot = {"a": 0, "f": 3}

    def run_a() -> None:
        la.compute(slot["a"], ids)
        la.apply(slot["a"], ids)
        sync()
        slot["a"] += 1

    def run_f() -> None:
        lf.compute(slot["f"], ids)
        lf.apply(slot["f"], ids)
        sync()
        slot["f"] += 1

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
    print(f"data: {data_desc}")
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


if __name__ == "__main__":
    main()
