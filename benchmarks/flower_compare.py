"""The same FedSGD workload in wflsim and in Flower's simulation engine, wall time side by side.

Workload: ``--clients`` 30 clients, ``--rounds`` 20 rounds, each client computes ONE gradient on
``--batch`` 512 samples drawn without replacement from its IID shard of MNIST-shaped data, the
server averages weighted by the batch sizes and takes one SGD step (lr 0.05): FedSGD, the paper
CNN (``cnn_mnist``, 440,812 parameters), CPU. The global model is evaluated on the 10,000 test
samples before the first and after the last round, on both sides.

* ``wflsim``: ``wflsim.app.run`` (``prepare_scenario`` + ``make_learner`` + ``execute``) on
  ``scenarios/paper/mnist_iid.toml`` with the ``ideal`` scheme (no freezing, no outage: every
  client's update is aggregated, as in Flower), one frame of ``--rounds`` slots,
  ``eval_every_slots = --rounds``. The network side is included: channels, powers, SimPy
  processes, energy and queues, and the full trace written to Parquet in a temporary folder.
  The learner computes all clients' gradients in one batched ``vmap`` call per slot.
* ``flower``: Flower's simulation engine (``flwr.simulation.run_simulation``, Ray backend), the
  Message API: a ``ServerApp`` running ``flwr.serverapp.strategy.FedAvg`` (``fraction_train =
  1``, no client-side evaluation, centralized ``evaluate_fn`` at rounds 0 and ``--rounds``), a
  ``ClientApp`` whose train function loads the global weights, does ONE SGD step (lr 0.05) on a
  ``--batch``-sample minibatch of its shard and returns its weights with ``num-examples =
  --batch``. FedAvg of the clients' one-step models weighted by ``num-examples`` is
  ``w - lr * sum(B_n g_n) / sum(B_n)``: the same maths as wflsim's FedSGD step.

Both sides read the same data through ``models.data.load_dataset("mnist", DIR)``: by default a
synthetic MNIST written by this script to a temporary folder in torchvision's raw layout (uniform
random pixels and labels, 60,000 + 10,000 images), or the real MNIST with ``--data-dir``. Each
side runs in a FRESH subprocess per repetition (the two interleaved, order alternating), and
reports:

* ``total``: wall time of the whole subprocess (interpreter start, imports, data loading, model
  and learner or Ray/actor start-up, the rounds, evaluation, shutdown); the headline figure;
* ``rounds``: the time of the training loop alone, measured inside (wflsim: ``execute``, which
  includes the trace and both evaluations; Flower: ``strategy.start``, which includes both
  evaluations).

Target: wflsim at least 2x faster (flower/wflsim >= 2 on ``total``). Ratios are printed, never
asserted.

Flower is not a project dependency. Install it into its own virtual environment that shares the
system's torch, and point ``--flower-python`` at it (the default is ``/tmp/flwr-venv/bin/python``
when it exists)::

    python -m venv --system-site-packages /tmp/flwr-venv
    /tmp/flwr-venv/bin/pip install "flwr[simulation]"

Without an interpreter that can import ``flwr``, the Flower part is skipped with a message and
only wflsim is timed.

    python benchmarks/flower_compare.py                                    # full size
    python benchmarks/flower_compare.py --rounds 1 --clients 4 --batch 32  # smoke test (--quick: the same, 1 rep)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common

SCENARIO = _common.REPO / "scenarios" / "paper" / "mnist_iid.toml"
DEFAULT_FLOWER_PY = "/tmp/flwr-venv/bin/python"
LR = 0.05


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=3,
        reps_help="repetitions of each side",
        warmup=0,
        data_dir="real MNIST (torchvision layout) instead of synthetic",
        quick={"rounds": 1, "clients": 4, "batch": 32, "reps": 1, "warmup": 0},
    )
    p.add_argument("--clients", type=int, default=30, help="clients / devices (default 30)")
    p.add_argument(
        "--batch", type=int, default=512, help="samples per client and round (default 512)"
    )
    p.add_argument("--rounds", type=int, default=20, help="FedSGD rounds (default 20)")
    p.add_argument("--threads", type=int, default=None, help="torch threads on the wflsim side")
    p.add_argument(
        "--client-cpus",
        type=float,
        default=None,
        help="Flower client_resources num_cpus (default: Flower's own default, 2)",
    )
    p.add_argument(
        "--flower-python",
        default=None,
        help=f"interpreter with flwr[simulation] (default {DEFAULT_FLOWER_PY} if present, else this one)",
    )
    _common.child_options(p, ["wflsim", "flower"], "data", "result")
    args = p.parse_args(argv)
    return args


# ---------------------------------------------------------------------------- data


def write_synthetic_mnist(root: Path, seed: int) -> None:
    """MNIST-shaped random data in torchvision's raw layout (``MNIST/raw/*-ubyte``)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, m in (("train", 60_000), ("t10k", 10_000)):
        images = rng.integers(0, 256, size=(m, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=m, dtype=np.uint8)
        header_i = np.array([2051, m, 28, 28], dtype=">i4").tobytes()
        header_l = np.array([2049, m], dtype=">i4").tobytes()
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(header_i + images.tobytes())
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(header_l + labels.tobytes())


def _evaluate(model, x_te, y_te, batch: int = 2048) -> tuple[float, float]:
    """Mean cross-entropy and accuracy, in batches of 2,048 like the wflsim learner."""
    import torch
    import torch.nn.functional as F

    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for s in range(0, x_te.shape[0], batch):
            logits = model(x_te[s : s + batch])
            y = y_te[s : s + batch]
            loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(1) == y).sum())
    model.train()
    return loss_sum / x_te.shape[0], correct / x_te.shape[0]


# ---------------------------------------------------------------------------- wflsim part


def part_wflsim(args: argparse.Namespace) -> dict:
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    from wflsim.app.run import execute, make_learner, prepare_scenario
    from wflsim.app.scenario import validate_scenario
    from wflsim.sim.config.loading import read_scenario_file

    text, data = read_scenario_file(SCENARIO)
    data["seed"] = args.seed
    data["run"] = {**data["run"], "frames": 1, "slots_per_frame": args.rounds}
    data["network"] = {**data["network"], "num_devices": args.clients}
    data["devices"] = {**data["devices"], "batch_size": args.batch}
    data["learning"] = {
        **data["learning"],
        "dataset": "mnist",
        "model": "cnn_mnist",
        "partition": "iid",
        "lr": LR,
        "eval_every_slots": args.rounds,
        "device": "cpu",
    }
    data["scheme"] = {"name": "ideal"}
    sc = validate_scenario(data)
    prep = prepare_scenario(sc, text=text, path=SCENARIO, data_dir=args.data)
    learner = make_learner(prep)
    out = Path(tempfile.mkdtemp(prefix="wflsim-flower-cmp-"))
    try:
        t0 = time.perf_counter()
        stats = execute(prep, learner, out / "run", overwrite=True)
        rounds_s = time.perf_counter() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    import torch

    return {
        "rounds_s": rounds_s,
        "final_loss": stats.last_loss,
        "final_accuracy": stats.last_accuracy,
        "slots": stats.slots,
        "successes": stats.successes,
        "threads": torch.get_num_threads(),
    }


# ---------------------------------------------------------------------------- flower part


def part_flower(args: argparse.Namespace) -> dict:
    import flwr
    from _flower_app import client_app
    from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg
    from flwr.simulation import run_simulation

    n, rounds, data_dir = args.clients, args.rounds, args.data
    result: dict = {}
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        import torch

        from wflsim.models.data import load_dataset
        from wflsim.models.nets import build_model

        _, _, x_te, y_te = load_dataset("mnist", data_dir)
        torch.manual_seed(args.seed)
        model = build_model("cnn_mnist", "mnist")
        evals: dict = {}

        def evaluate_fn(server_round: int, arrays: ArrayRecord):
            if server_round not in (0, rounds):
                return None
            model.load_state_dict(arrays.to_torch_state_dict())
            loss, acc = _evaluate(model, x_te, y_te)
            evals[server_round] = (loss, acc)
            return MetricRecord({"loss": loss, "accuracy": acc})

        strategy = FedAvg(
            fraction_train=1.0,
            fraction_evaluate=0.0,
            min_train_nodes=n,
            min_evaluate_nodes=0,
            min_available_nodes=n,
        )
        config = ConfigRecord(
            {
                "clients": n,
                "batch": args.batch,
                "seed": args.seed,
                "data": data_dir,
                "lr": LR,
                "threads": 0 if args.client_cpus is None else max(1, int(args.client_cpus)),
            }
        )
        t0 = time.perf_counter()
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(model.state_dict()),
            num_rounds=rounds,
            train_config=config,
            evaluate_fn=evaluate_fn,
        )
        result["rounds_s"] = time.perf_counter() - t0
        result["final_loss"], result["final_accuracy"] = evals.get(rounds, (None, None))

    backend_config: dict = {"init_args": {"log_to_driver": False}}
    if args.client_cpus is not None:
        backend_config["client_resources"] = {"num_cpus": args.client_cpus, "num_gpus": 0.0}
    run_simulation(
        server_app=server_app,
        client_app=client_app,
        num_supernodes=n,
        backend_config=backend_config,
    )
    if "rounds_s" not in result:
        raise RuntimeError("the Flower ServerApp did not finish (see the log above)")
    result["flwr"] = flwr.__version__
    result["client_resources"] = backend_config.get("client_resources", "Flower default")
    return result


# ---------------------------------------------------------------------------- parent


def flower_python(args: argparse.Namespace) -> tuple[str | None, str]:
    """The interpreter for the Flower part and why (None: skip)."""
    cands = [args.flower_python] if args.flower_python else []
    if not cands:
        if Path(DEFAULT_FLOWER_PY).exists():
            cands.append(DEFAULT_FLOWER_PY)
        cands.append(sys.executable)
    for py in cands:
        probe = subprocess.run(
            [py, "-c", "import flwr, ray; print(flwr.__version__, ray.__version__)"],
            capture_output=True,
            text=True,
        )
        if probe.returncode == 0:
            flwr_v, ray_v = probe.stdout.split()
            return py, f"{py} (flwr {flwr_v}, ray {ray_v})"
    return None, (
        f"SKIPPED: no interpreter among {cands} can import flwr and ray. Install Flower in a "
        "separate venv: python -m venv --system-site-packages /tmp/flwr-venv && "
        '/tmp/flwr-venv/bin/pip install "flwr[simulation]"'
    )


def child_cmd(py: str, part: str, args: argparse.Namespace, data: str, result: Path) -> list[str]:
    cmd = [
        py,
        str(Path(__file__).resolve()),
        "--part",
        part,
        "--clients",
        str(args.clients),
        "--batch",
        str(args.batch),
        "--rounds",
        str(args.rounds),
        "--seed",
        str(args.seed),
        "--data",
        data,
        "--result",
        str(result),
    ]
    if args.threads is not None:
        cmd += ["--threads", str(args.threads)]
    if args.client_cpus is not None:
        cmd += ["--client-cpus", str(args.client_cpus)]
    return cmd


def child_env() -> dict[str, str]:
    """The environment of a child: this folder and the repository root on ``PYTHONPATH``, so
    that Flower's Ray workers can import ``_flower_app`` and ``models``."""
    env = dict(os.environ)
    paths = [str(Path(__file__).resolve().parent), str(_common.REPO)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def run_part(cmd: list[str], result: Path, log: Path) -> dict:
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=child_env())
    total = time.perf_counter() - t0
    if proc.returncode != 0 or not result.exists():
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{tail}")
    res = json.loads(result.read_text())
    result.unlink()
    res["total_s"] = total
    return res


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.part:
        res = part_wflsim(args) if args.part == "wflsim" else part_flower(args)
        _common.write_json(args.result, res)
        return

    import torch  # noqa: F401  (for the environment report)

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    _common.print_header(
        "flower_compare: FedSGD in wflsim vs Flower simulation", ("numpy", "simpy")
    )
    fpy, fdesc = flower_python(args)
    print(
        f"workload: {args.clients} clients x {args.batch} samples, {args.rounds} rounds, cnn_mnist, "
        f"FedSGD lr {LR}, evaluation on 10,000 test samples before round 1 and after the last"
    )
    print(f"flower interpreter: {fdesc}")
    tmp = Path(tempfile.mkdtemp(prefix="wflsim-flower-"))
    try:
        if args.data_dir:
            data = str(Path(args.data_dir).resolve())
            print(f"data: real MNIST from {data}")
        else:
            write_synthetic_mnist(tmp / "data", args.seed)
            data = str(tmp / "data")
            print(f"data: synthetic MNIST (uniform random pixels/labels) written to {data}")
        parts = {"wflsim": sys.executable}
        if fpy is not None:
            parts["flower"] = fpy
        cmds = {k: child_cmd(py, k, args, data, tmp / f"{k}.json") for k, py in parts.items()}
        for k, c in cmds.items():
            print(f"{k} child: {' '.join(c)}")
        print(f"repetitions: {args.warmup} warm-up + {args.reps} recorded, order alternating\n")

        details: dict[str, list[dict]] = {k: [] for k in parts}

        def runner(k: str):
            def go() -> float:
                res = run_part(cmds[k], tmp / f"{k}.json", tmp / f"{k}.log")
                details[k].append(res)
                return res["total_s"]

            return go

        totals = _common.interleaved({k: runner(k) for k in parts}, args.reps, args.warmup)
        for k in parts:
            details[k] = details[k][args.warmup :]

        print("\nseconds (total = whole subprocess; rounds = training loop incl. evaluation):")
        for k in parts:
            st = _common.Stats(totals[k])
            sr = _common.Stats([d["rounds_s"] for d in details[k]])
            print(f"  {k:7s} total  {st.fmt(unit=' s')}")
            print(f"  {k:7s} rounds {sr.fmt(unit=' s')}   ({args.rounds / sr.median:.3g} rounds/s)")
            last = details[k][-1]
            acc = last.get("final_accuracy")
            extra = f", client_resources {last['client_resources']}" if k == "flower" else ""
            thr = f", torch threads {last['threads']}" if "threads" in last else ""
            print(f"          final test accuracy {acc}, loss {last.get('final_loss')}{thr}{extra}")
        if "flower" in parts:
            print("\nratios (flower / wflsim; > 1 means wflsim is faster):")
            print("  " + _common.ratio_line("total ", totals["flower"], totals["wflsim"], ">= 2"))
            print(
                "  "
                + _common.ratio_line(
                    "rounds",
                    [d["rounds_s"] for d in details["flower"]],
                    [d["rounds_s"] for d in details["wflsim"]],
                    "(informative)",
                )
            )
            _common.headline("flower/wflsim total", totals["flower"], totals["wflsim"], ">= 2")
        else:
            print(f"\nFlower part {fdesc}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
