"""What does client-level DP cost the learner per slot? Clipping and noise against FedAvg
without privacy, on the same work.

Workload (defaults): ``--devices`` 10 devices x ``--batch`` 32 samples, the paper's MNIST CNN
(``cnn_mnist``, D = 440,812), CPU, synthetic MNIST-shaped data (60,000 x 1 x 28 x 28
standard-normal images, uniform labels). Variants, each a :class:`TorchLearner` at frame 0
(nothing frozen), one slot = ``compute(all devices)`` + ``apply(all devices)``, timed side by
side in one process, interleaved (``_common.interleaved``: the order rotates every round):

* ``fedavg``   no ``[privacy]``;
* ``fedavg*``  the same again, an A/A control: its ratio to ``fedavg`` is the noise of a pair;
* ``central``  ``set_privacy`` with central noise (z = 1, C = 1, fixed clipping): every upload
  clipped, ``N(0, sigma^2)`` on the aggregate's D entries from the keyed stream;
* ``local``    local noise: every upload clipped and noised on its D entries (one keyed draw of D
  normals per device);
* ``adaptive`` central noise with adaptive clipping (the clipped count's noise, the clip's update).

Printed: seconds per slot per variant, each variant's ratio to ``fedavg`` per round and the ratio
of the medians. Nothing is asserted; run niced on a quiet machine.

    nice python benchmarks/privacy_cost.py                # 10 x 32, 7 rounds
    nice python benchmarks/privacy_cost.py --quick        # smoke test: 3 x 16, 2 rounds
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import _common
import torch

from wflsim.sim.privacy.config import PrivacyConfig
from wflsim.sim.privacy.mechanism import PrivacySpec

#: the variants' ``[privacy]`` tables (None: none)
VARIANTS: dict[str, dict[str, object] | None] = {
    "fedavg": None,
    "fedavg*": None,
    "central": {"mechanism": "central", "clip_norm": 1.0, "noise_multiplier": 1.0},
    "local": {"mechanism": "local", "clip_norm": 1.0, "noise_multiplier": 1.0},
    "adaptive": {
        "mechanism": "central",
        "clip_norm": 1.0,
        "noise_multiplier": 1.0,
        "clipping": "adaptive",
        "clipped_count_std": 1.0,
    },
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=7,
        warmup=1,
        threads=True,
        quick={"devices": 3, "batch": 16, "reps": 2, "warmup": 1},
    )
    p.add_argument("--devices", type=int, default=10, help="simulated devices (default 10)")
    p.add_argument("--batch", type=int, default=32, help="samples per device (default 32)")
    p.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.set_threads(args.threads)
    _common.print_header("privacy_cost: one slot's learning with clipping and noise vs FedAvg")
    n, b = args.devices, args.batch
    dev = torch.device(args.device)
    work = _common.MnistWork(n, args.seed, data=_common.synthetic_mnist(args.seed))
    ids = work.ids

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def variant(table: dict[str, object] | None) -> Callable[[], None]:
        # every variant draws the same batches
        learner = work.learner(b, 0.05, args.seed, device=dev)
        if table is not None:
            learner.set_privacy(PrivacySpec.from_config(PrivacyConfig.model_validate(table), n))
        learner.begin_frame(0, _common.nothing_frozen(n))
        return _common.slot_runner(learner, ids, after=sync)

    print(f"workload: {n} devices x {b} samples, cnn_mnist (D = 440,812), {dev}, synthetic data\n")
    times = _common.interleaved(
        {name: variant(table) for name, table in VARIANTS.items()}, args.reps, args.warmup
    )
    print("\nseconds per slot")
    for name, values in times.items():
        print(f"  {name:9s} {_common.Stats(values).fmt(scale=1e3, unit=' ms')}")
    print()
    for name in VARIANTS:
        if name != "fedavg":
            print(_common.ratio_line(f"{name}/fedavg", times[name], times["fedavg"], "-"))
    _common.headline(
        "central/fedavg (clipping and central noise)", times["central"], times["fedavg"]
    )


if __name__ == "__main__":
    main()
