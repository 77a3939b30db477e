"""``learning.precision``: one learning slot of the paper's MNIST scenario (30 devices x 512
samples, ``cnn_mnist``, every device computing) in float32 and in bfloat16, interleaved (5
rounds after a warm-up), then the bfloat16 gradients' relative L2 error against float32's.

    WFLSIM_DATA_DIR=data python benchmarks/precision_slot.py
    python benchmarks/precision_slot.py --data-dir data --quick    # smoke test: 4 devices x 16
"""

from __future__ import annotations

import argparse
import os
import warnings

import _common
import numpy as np
import torch

import wflsim
from wflsim.app.assemble import build_engine, make_learner
from wflsim.sim.config.loading import read_scenario_file


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=5,
        warmup=1,
        seed=False,
        data_dir="MNIST in torchvision's layout (default $WFLSIM_DATA_DIR, else data)",
        quick={"devices": 4, "batch": 16, "reps": 2},
    )
    p.add_argument("--devices", type=int, default=30, help="devices (default 30)")
    p.add_argument("--batch", type=int, default=None, help="B per device (default the scenario's)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    _common.print_header("precision_slot", ("numpy", "torch"))
    _, data = read_scenario_file(_common.REPO / "scenarios" / "paper" / "mnist_iid.toml")
    data_dir = args.data_dir or os.environ.get("WFLSIM_DATA_DIR", "data")
    data["learning"] = {**data["learning"], "data_dir": data_dir}
    data["network"] = {**data["network"], "num_devices": args.devices}
    if args.batch is not None:
        data["devices"] = {**data["devices"], "batch_size": args.batch}
    learners = {}
    for p in ["float32", "bfloat16"]:
        d = {**data, "learning": {**data["learning"], "precision": p}}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prep = wflsim.prepare(d)
        learner = make_learner(prep)
        build_engine(prep, learner)
        learner.begin_frame(0, _common.nothing_frozen(args.devices))
        learners[p] = learner
    ids = np.arange(args.devices)

    def slot(p: str):  # noqa: ANN202
        def f() -> None:
            learners[p].compute(0, ids)

        return f

    times = _common.interleaved({p: slot(p) for p in learners}, args.reps, args.warmup)
    r = [b / a for a, b in zip(times["float32"], times["bfloat16"], strict=True)]
    print(
        "bfloat16/float32 per slot:",
        [round(x, 3) for x in r],
        "median",
        round(float(np.median(r)), 3),
    )
    g32 = learners["float32"].gradients.clone()
    learners["bfloat16"].compute(0, ids)
    g16 = learners["bfloat16"].gradients
    norm = torch.linalg.vector_norm
    rel = (norm(g16 - g32, dim=1) / norm(g32, dim=1)).numpy()
    print(f"relative gradient error per device: median {np.median(rel):.4f} max {rel.max():.4f}")
    _common.headline("bfloat16/float32 per slot", times["bfloat16"], times["float32"])


if __name__ == "__main__":
    main()
