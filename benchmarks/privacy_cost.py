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
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_repo_to_path()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from learner_overhead import synthetic_mnist  # noqa: E402

from wflsim.models.data import partition  # noqa: E402
from wflsim.models.learner import TorchLearner  # noqa: E402
from wflsim.models.nets import build_model  # noqa: E402
from wflsim.sim.privacy.config import PrivacyConfig  # noqa: E402
from wflsim.sim.privacy.mechanism import PrivacySpec  # noqa: E402
from wflsim.sim.rng import Streams  # noqa: E402
from wflsim.sim.updates import FreezingInputs  # noqa: E402

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
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=10, help="simulated devices (default 10)")
    p.add_argument("--batch", type=int, default=32, help="samples per device (default 32)")
    p.add_argument("--reps", type=int, default=7, help="recorded rounds (default 7)")
    p.add_argument("--warmup", type=int, default=1, help="unrecorded rounds first (default 1)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke test: 3 x 16, 2 rounds")
    args = p.parse_args(argv)
    if args.quick:
        args.devices, args.batch, args.reps, args.warmup = 3, 16, 2, 1
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    _common.print_header("privacy_cost: one slot's learning with clipping and noise vs FedAvg")
    n, b = args.devices, args.batch
    dev = torch.device(args.device)
    x_tr, y_tr, x_te, y_te = synthetic_mnist(args.seed)
    parts = partition(y_tr.numpy(), n, "iid", 1.0, np.random.default_rng(args.seed))
    torch.manual_seed(args.seed)
    state = {k: v.clone() for k, v in build_model("cnn_mnist", "mnist").state_dict().items()}
    ids = np.arange(n, dtype=np.int64)

    def variant(table: dict[str, object] | None) -> Callable[[], None]:
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
            sampling_streams=Streams(args.seed),  # every variant draws the same batches
            device=dev,
        )
        if table is not None:
            learner.set_privacy(PrivacySpec.from_config(PrivacyConfig.model_validate(table), n))
        learner.begin_frame(0, FreezingInputs(frozen_count=np.zeros(n, dtype=np.int64)))
        slot = [0]

        def one() -> None:
            learner.compute(slot[0], ids)
            learner.apply(slot[0], ids)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            slot[0] += 1

        return one

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


if __name__ == "__main__":
    main()
