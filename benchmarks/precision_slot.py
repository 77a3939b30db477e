"""``learning.precision``: one learning slot of the paper's MNIST scenario (30 devices x 512
samples, ``cnn_mnist``, every device computing) in float32 and in bfloat16, interleaved (5
rounds after a warm-up), then the bfloat16 gradients' relative L2 error against float32's.

    WFLSIM_DATA_DIR=data python benchmarks/precision_slot.py
"""

import os
import warnings
from pathlib import Path

import numpy as np
import torch
from _common import add_repo_to_path, interleaved, print_header

add_repo_to_path()
import wflsim  # noqa: E402
from wflsim.app.assemble import build_engine, make_learner  # noqa: E402
from wflsim.sim.config.loading import read_scenario_file  # noqa: E402
from wflsim.sim.updates import FreezingInputs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
print_header("precision_slot", ("numpy", "torch"))
_, data = read_scenario_file(REPO / "scenarios" / "paper" / "mnist_iid.toml")
data["learning"] = {**data["learning"], "data_dir": os.environ.get("WFLSIM_DATA_DIR", "data")}
learners = {}
for p in ["float32", "bfloat16"]:
    d = {**data, "learning": {**data["learning"], "precision": p}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prep = wflsim.prepare(d)
    learner = make_learner(prep)
    build_engine(prep, learner)
    learner.begin_frame(0, FreezingInputs(np.zeros(30, dtype=np.int64)))
    learners[p] = learner
ids = np.arange(30)


def slot(p: str):
    def f() -> None:
        learners[p].compute(0, ids)

    return f


times = interleaved({p: slot(p) for p in learners}, 5, 1)
r = [b / a for a, b in zip(times["float32"], times["bfloat16"], strict=True)]
print(
    "bfloat16/float32 per slot:", [round(x, 3) for x in r], "median", round(float(np.median(r)), 3)
)
g32 = learners["float32"].gradients.clone()
learners["bfloat16"].compute(0, ids)
g16 = learners["bfloat16"].gradients
rel = (torch.linalg.vector_norm(g16 - g32, dim=1) / torch.linalg.vector_norm(g32, dim=1)).numpy()
print(f"relative gradient error per device: median {np.median(rel):.4f} max {rel.max():.4f}")
