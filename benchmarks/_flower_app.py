"""The Flower ClientApp of ``flower_compare.py`` (imported only by the Flower interpreter).

It lives in its own importable module, as Flower apps usually do (``task.py``): Flower's Ray
backend pickles the ClientApp with every message, so a per-process cache of the data and the
model must sit in a module that the Ray workers import by reference, not in ``__main__``.
``flower_compare.py`` puts this folder and the repository root on ``PYTHONPATH`` for them.

The run's settings (clients, batch, seed, data folder, learning rate) arrive in each training
message's ``ConfigRecord``, as Flower intends.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

_CACHE: dict = {}  # per Ray worker process: data shards and a model instance


def _shards(data_dir: str, n: int, seed: int):
    key = ("data", data_dir, n, seed)
    if key not in _CACHE:
        from wflsim.models.data import load_dataset, partition

        x_tr, y_tr, _, _ = load_dataset("mnist", data_dir)
        parts = partition(y_tr.numpy(), n, "iid", 1.0, np.random.default_rng(seed))
        _CACHE[key] = (x_tr, y_tr, parts)
    return _CACHE[key]


def _model(seed: int):
    if "model" not in _CACHE:
        from wflsim.models.nets import build_model

        torch.manual_seed(seed)
        _CACHE["model"] = build_model("cnn_mnist", "mnist")
    return _CACHE["model"]


client_app = ClientApp()


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    """One SGD step on ``batch`` samples of this client's shard; reply with the new weights."""
    cfg = msg.content["config"]
    n, b, seed = int(cfg["clients"]), int(cfg["batch"]), int(cfg["seed"])
    threads = int(cfg.get("threads", 0))
    if threads > 0 and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    pid = int(context.node_config["partition-id"])
    x_tr, y_tr, parts = _shards(str(cfg["data"]), n, seed)
    model = _model(seed)
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    model.train()
    local = parts[pid]
    rng = np.random.default_rng([seed, pid, int(cfg["server-round"])])
    pick = torch.from_numpy(local[rng.choice(local.size, size=b, replace=local.size < b)])
    opt = torch.optim.SGD(model.parameters(), lr=float(cfg["lr"]))
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x_tr[pick]), y_tr[pick])
    loss.backward()
    opt.step()
    content = RecordDict(
        {
            "arrays": ArrayRecord(model.state_dict()),
            "metrics": MetricRecord({"num-examples": b, "train_loss": float(loss)}),
        }
    )
    return Message(content=content, reply_to=msg)
