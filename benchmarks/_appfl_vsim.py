"""Per-update cost of APPFL 1.12's virtual-time simulator ("vsim") running FedBuff.

The peer measurement of ``async_overhead.py``. NOT part of wflsim and not run with the project's
interpreter: it needs APPFL, installed in its own virtual environment that shares the system's
torch (nothing is upgraded)::

    python -m venv --system-site-packages /tmp/appfl-venv
    /tmp/appfl-venv/bin/pip install --no-deps appfl==1.12.0 omegaconf antlr4-python3-runtime==4.9.3 \\
        PyYAML colorama wandb opacus piq seaborn platformdirs protobuf xxhash \\
        opentelemetry-api opentelemetry-sdk opentelemetry-exporter-otlp-proto-http \\
        opentelemetry-semantic-conventions opentelemetry-proto opentelemetry-exporter-otlp-proto-common
    /tmp/appfl-venv/bin/python benchmarks/_appfl_vsim.py --clients 30 --updates 3000 --model tiny --train stub

What runs
---------
APPFL's own objects, driven the way ``examples/vsim/run_vsim.py`` of APPFL's repository drives
them in its async mode (the example is not in the wheel; ``appfl.vsim`` is):

* one ``appfl.agent.ServerAgent`` built from an OmegaConf config with
  ``server_configs.scheduler = "AsyncScheduler"`` and ``server_configs.aggregator =
  "FedBuffAggregator"``, ``aggregator_kwargs``: ``K`` = ``--buffer`` (default 10: the server
  applies one step per 10 client updates), ``alpha`` 0.9, ``staleness_fn`` "polynomial"
  (``a`` 0.5), ``client_weights_mode`` "equal" (the settings of APPFL's
  ``examples/resources/configs/mnist/server_fedbuff.yaml``, K aside; clients send weights,
  ``send_gradient`` False);
  ``num_global_epochs`` = ``--updates`` (APPFL's AsyncScheduler counts one global epoch per client
  update it receives, so the run stops after exactly that many updates);
* ``--clients`` ``appfl.agent.ClientAgent`` objects, each given the server's client configuration
  through ``ClientAgent.load_config(server.get_client_configs())``;
* one ``appfl.vsim.ClientProfile`` per client (compute slowdown ~ lognormal(0, 0.5), bandwidth
  ~ uniform(150, 600) Mbps, drawn from a private seeded RNG, the distributions of the vsim
  README's example), so that virtual completion times differ between clients;
* ``appfl.vsim.AsyncSimDriver(server, clients, profiles, max_in_flight=--concurrency (default:
  all clients), logger, seed, base_step_time, eval_every=0)`` and its ``run()``: a min-heap of
  virtual-time events; at each ``train_start`` it fetches the global model
  (``ServerAgent.get_parameters(serial_run=True, client_id=...)``), loads it into the client, calls
  ``ClientAgent.train()`` and ``get_parameters()`` and schedules the completion at
  dispatch + compute + communication time; at each ``train_complete`` it hands the update to
  ``ServerAgent.global_update`` (FedBuff buffer, a global step every K updates) and refills the
  in-flight slots from the idle clients.

``optimize_memory`` is OFF everywhere APPFL reads it (it defaults to ON, and then runs
``gc.collect()`` several times per update): ``server_configs.optimize_memory``,
``server_configs.scheduler_kwargs.optimize_memory``, ``server_configs.aggregator_kwargs.
optimize_memory``, ``client_configs.train_configs.optimize_memory`` (the trainer) and the
top-level ``optimize_memory`` of every client's own configuration; the script checks the flag on
the built objects. ``--optimize-memory`` turns it on everywhere, for comparison.

Models (``--model``): ``tiny`` = one ``Linear(784, 10)`` (7,850 float32 parameters, 31 KB);
``cnn`` = the classic two-convolution MNIST CNN (conv 5x5 1->32, max-pool, conv 5x5 32->64,
max-pool, FC 1024->512, FC 512->10; 582,026 float32 parameters, 2.33 MB). Both are defined in
this file and passed to APPFL by path (``model_configs.model_path`` = this file), as APPFL does
with user models; the trainer and metric are passed the same way.

Local training (``--train``):

* ``stub``: APPFL's trainer is replaced (``train_configs.trainer_path`` = this file,
  ``trainer`` = ``StubTrainer``, an ``appfl.algorithm.trainer.BaseTrainer``) by one whose
  ``train()`` does nothing (it only counts the call) and whose ``get_parameters()`` returns the
  client model's current ``state_dict()`` (the global model it was just loaded with, no copy, no
  perturbation) plus the metadata vsim needs (``current_local_steps`` = ``--local-steps``). The
  simulator cannot time a training that does not happen, so the per-step compute time is fixed:
  ``base_step_time`` = ``--base-step-time`` (default 0.01 s of virtual time per step). What
  remains timed is APPFL's own per-update machinery: the event heap, the global-model copy per
  dispatch, ``load_state_dict`` into the client, the FedBuff arithmetic and the copy of the global
  model it returns, the bookkeeping and the dispatch of the next client.
* ``real``: APPFL's ``VanillaTrainer`` in ``mode: step`` with ``num_local_steps`` =
  ``--local-steps`` (20) SGD steps (lr 0.01) of batch ``--batch-size`` (64) with
  ``CrossEntropyLoss`` on the client's IID shard of the real MNIST training set (torchvision
  layout under ``--data-dir``, default the ``shared/datasets`` folder beside the checkout,
  normalised once into tensors; no per-client validation). The per-step time is the one APPFL's
  trainer measures (``base_step_time`` unset) unless ``--base-step-time`` is given.

Timed: ``driver.run()`` only (``time.perf_counter``), after every object is built, the data are
loaded and the driver's constructor has pushed the initial model to all clients. Imports, data
loading and set-up are excluded. ``per_update_ms`` = wall / updates the server processed
(``ServerAgent.scheduler.get_num_global_epochs()``, equal to ``--updates``). Note that the
driver trains every dispatched client at its ``train_start`` event, so a run also trains the
clients still in flight when the target is reached (up to ``concurrency - 1`` trainings whose
update is never aggregated); they are in the wall time, and ``train_calls`` reports the total.

The simulator's event table (two log rows per event) is still built in the timed loop, but by
default (``--log quiet``) it goes to a logger set to WARNING, so no console I/O is timed;
``--log console`` uses APPFL's ``VsimLogger`` on stderr, as ``run_vsim.py`` does.

Output: ONE JSON line on stdout, last: ``clients``, ``updates`` (processed), ``model``,
``train``, ``wall_s``, ``per_update_ms``, ``appfl_version``, and for the record
``requested_updates``, ``buffer_size``, ``concurrency``, ``train_calls``, ``global_steps``
(FedBuff server steps, = updates / K), ``model_params``,
``model_mb``, ``optimize_memory``, ``log``, ``setup_s``, ``torch_threads``, ``virtual_time_s``,
``checks_ok`` (``AsyncSimDriver.verify``). All log output goes to stderr.
"""

from __future__ import annotations

import sys

import torch
from appfl.algorithm.trainer import BaseTrainer
from torch import nn

# ---------------------------------------------------------------------------------------------
# Objects APPFL loads from this file by path (model, trainer, metric, dataset). APPFL executes
# this file as a fresh module for each of them, so nothing here may have side effects.
# ---------------------------------------------------------------------------------------------


class TinyNet(nn.Module):
    """A linear classifier on flattened 28x28 images: 7,850 parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(28 * 28, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(x, 1))


class MnistCNN(nn.Module):
    """The classic two-convolution MNIST CNN: 582,026 parameters (2.33 MB in float32)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, kernel_size=5)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=5)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(64 * 4 * 4, 512)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


class StubTrainer(BaseTrainer):
    """No local training: ``train`` only counts the call, ``get_parameters`` returns the model's
    current weights (references, no copy) and the metadata APPFL's vsim driver reads."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.num_steps = int(self.train_configs.get("num_local_steps", 20))

    def train(self, **kwargs) -> None:
        self.round += 1

    def get_parameters(self):
        meta = {"round": self.round, "current_local_steps": self.num_steps}
        return self.model.state_dict(), meta


def accuracy(y_true, y_pred) -> float:
    """Classification accuracy (%) from labels and logits (numpy arrays)."""
    import numpy as np

    if y_pred.ndim > 1:
        y_pred = np.argmax(y_pred, axis=1)
    return float(100.0 * np.mean(y_pred == y_true))


def get_mnist_shard(data_dir: str, num_clients: int, client_id: int, seed: int = 42):
    """The client's IID shard of the MNIST training set (normalised tensors), and no
    validation set. The decoded set is cached process-wide (APPFL re-executes this file for each
    client), so it is read from disk once."""
    import types

    from torch.utils.data import TensorDataset

    cache = sys.modules.setdefault("_appfl_vsim_mnist_cache", types.ModuleType("_cache"))
    if not hasattr(cache, "xy"):
        from torchvision.datasets import MNIST

        ds = MNIST(data_dir, train=True, download=False)
        x = ds.data.unsqueeze(1).float().div_(255.0).sub_(0.1307).div_(0.3081)
        y = ds.targets.long()
        perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
        cache.xy = (x, y, perm)
    x, y, perm = cache.xy
    idx = perm[client_id::num_clients]
    return TensorDataset(x[idx].clone(), y[idx].clone()), None


# ---------------------------------------------------------------------------------------------
# The benchmark.
# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    import argparse

    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--clients", type=int, default=30, help="simulated clients (30, 100, 1000)")
    p.add_argument("--updates", type=int, default=3000, help="client updates the server processes")
    p.add_argument("--model", choices=["tiny", "cnn"], default="tiny")
    p.add_argument("--train", choices=["stub", "real"], default="stub")
    p.add_argument("--buffer", type=int, default=10, help="FedBuff buffer size K (default 10)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="AsyncSimDriver max_in_flight (default: all clients)",
    )
    p.add_argument("--local-steps", type=int, default=20, help="local steps per update (20)")
    p.add_argument("--batch-size", type=int, default=64, help="real training: batch size (64)")
    p.add_argument("--lr", type=float, default=0.01, help="real training: SGD learning rate")
    p.add_argument(
        "--base-step-time",
        type=float,
        default=None,
        help="virtual seconds per local step (stub default 0.01; real default: measured)",
    )
    p.add_argument("--data-dir", default=None, help="MNIST root (torchvision layout)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: as is)"
    )
    p.add_argument(
        "--log",
        choices=["quiet", "console"],
        default="quiet",
        help="vsim event table: quiet (logger at WARNING) or console (VsimLogger, stderr)",
    )
    p.add_argument(
        "--optimize-memory",
        action="store_true",
        help="turn APPFL's optimize_memory ON everywhere (default OFF)",
    )
    args = p.parse_args(argv)
    if args.concurrency is None:
        args.concurrency = args.clients
    if args.base_step_time is None and args.train == "stub":
        args.base_step_time = 0.01
    return args


def default_data_dir() -> str:
    """``../shared/datasets`` relative to the checkout (this file is in ``benchmarks/``), else
    ``./data``."""
    from pathlib import Path

    cand = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    return str(cand) if cand.is_dir() else "./data"


def build(args, logdir: str):
    """The ServerAgent, ClientAgents, profiles and AsyncSimDriver, as configured by ``args``."""
    import logging
    import random
    from pathlib import Path

    from appfl.agent import ClientAgent, ServerAgent
    from appfl.vsim import AsyncSimDriver, ClientProfile, VsimLogger
    from omegaconf import OmegaConf

    here = str(Path(__file__).resolve())
    om = bool(args.optimize_memory)
    train_configs = {
        "mode": "step",
        "num_local_steps": args.local_steps,
        "optim": "SGD",
        "optim_args": {"lr": args.lr},
        "loss_fn": "CrossEntropyLoss",
        "metric_path": here,
        "metric_name": "accuracy",
        "do_validation": False,
        "do_pre_validation": False,
        "send_gradient": False,
        "train_batch_size": args.batch_size,
        "train_data_shuffle": True,
        "optimize_memory": om,
    }
    if args.train == "stub":
        train_configs.update({"trainer": "StubTrainer", "trainer_path": here})
    else:
        train_configs["trainer"] = "VanillaTrainer"
    server_config = OmegaConf.create(
        {
            "client_configs": {
                "train_configs": train_configs,
                "model_configs": {
                    "model_path": here,
                    "model_name": "TinyNet" if args.model == "tiny" else "MnistCNN",
                },
                "comm_configs": {"compressor_configs": {"enable_compression": False}},
            },
            "server_configs": {
                "num_clients": args.clients,
                "scheduler": "AsyncScheduler",
                "scheduler_kwargs": {"same_init_model": True, "optimize_memory": om},
                "aggregator": "FedBuffAggregator",
                "aggregator_kwargs": {
                    "client_weights_mode": "equal",
                    "staleness_fn": "polynomial",
                    "staleness_fn_kwargs": {"a": 0.5},
                    "alpha": 0.9,
                    "K": args.buffer,
                    "optimize_memory": om,
                },
                "device": "cpu",
                "num_global_epochs": args.updates,
                "optimize_memory": om,
            },
        }
    )
    server = ServerAgent(server_agent_config=server_config)

    data_dir = args.data_dir or default_data_dir()
    clients = []
    for i in range(args.clients):
        own = {
            "client_id": f"Client{i + 1}",
            "optimize_memory": om,
            # An empty file name: console logging only, no per-client log file.
            "train_configs": {
                "device": "cpu",
                "logging_output_dirname": logdir,
                "logging_output_filename": "",
            },
        }
        if args.train == "real":
            own["data_configs"] = {
                "dataset_path": here,
                "dataset_name": "get_mnist_shard",
                "dataset_kwargs": {
                    "data_dir": data_dir,
                    "num_clients": args.clients,
                    "client_id": i,
                    "seed": args.seed,
                },
            }
        client = ClientAgent(client_agent_config=OmegaConf.create(own))
        client.load_config(server.get_client_configs())
        clients.append(client)

    # optimize_memory must be what was asked for on every object that reads it.
    flags = [server.optimize_memory, server.scheduler.optimize_memory]
    flags.append(server.aggregator.optimize_memory)
    for c in clients:
        flags.append(c.optimize_memory)
        flags.append(getattr(c.trainer, "optimize_memory", om))
    if any(bool(f) != om for f in flags):
        raise RuntimeError(f"optimize_memory is not {om} everywhere: {set(flags)}")
    if type(server.aggregator).__name__ != "FedBuffAggregator":
        raise RuntimeError(f"aggregator is {type(server.aggregator).__name__}")

    rng = random.Random(args.seed)
    profiles = {
        c.get_id(): ClientProfile(
            compute_factor=rng.lognormvariate(0.0, 0.5), bandwidth=rng.uniform(150.0, 600.0)
        )
        for c in clients
    }
    if args.log == "console":
        logger = VsimLogger(logging_id="vsim")
    else:
        logger = logging.getLogger("appfl_vsim_bench")
        logger.setLevel(logging.WARNING)
        logger.propagate = False
        if not logger.handlers:
            logger.addHandler(logging.StreamHandler(sys.stderr))
    driver = AsyncSimDriver(
        server_agent=server,
        client_agents=clients,
        profiles=profiles,
        max_in_flight=args.concurrency,
        logger=logger,
        seed=args.seed,
        base_step_time=args.base_step_time,
        eval_every=0,
    )
    return server, clients, driver


def main(argv=None) -> int:
    import gc
    import json
    import tempfile
    import time
    from importlib.metadata import version

    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t_setup = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="appfl-vsim-") as logdir:
        server, clients, driver = build(args, logdir)
        setup_s = time.perf_counter() - t_setup
        gc.collect()

        t0 = time.perf_counter()
        driver.run()
        wall = time.perf_counter() - t0

        updates = int(server.scheduler.get_num_global_epochs())
        checks = driver.verify(args.updates)
        n_params = sum(p.numel() for p in server.model.parameters())
        result = {
            "clients": args.clients,
            "updates": updates,
            "model": args.model,
            "train": args.train,
            "wall_s": round(wall, 6),
            "per_update_ms": round(1e3 * wall / max(updates, 1), 4),
            "appfl_version": version("appfl"),
            "requested_updates": args.updates,
            "buffer_size": args.buffer,
            "concurrency": args.concurrency,
            "train_calls": int(sum(c.trainer.round for c in clients)),
            "global_steps": int(server.aggregator.global_step),
            "model_params": int(n_params),
            "model_mb": round(4 * n_params / 1e6, 3),
            "optimize_memory": bool(args.optimize_memory),
            "log": args.log,
            "setup_s": round(setup_s, 2),
            "torch_threads": torch.get_num_threads(),
            "virtual_time_s": round(driver.virtual_time, 3),
            "checks_ok": all(v for v in checks.values() if isinstance(v, bool)),
        }
    sys.stdout.flush()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
