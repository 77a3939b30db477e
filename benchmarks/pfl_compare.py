"""The same FedAvg work in wflsim and in Apple's pfl-research (pfl 0.6.0), side by side.

Workload (issue 49): MNIST, the paper's CNN (``cnn_mnist``, 440,812 parameters), an IID
partition of the 60,000 training images into ``--users`` users; per round a cohort of
``--cohort`` users drawn uniformly, each doing 5 local SGD steps (lr 0.05) on minibatches of 32
of its own samples; the server takes the weighted (by samples) mean of the model deltas with a
server learning rate of 1 (FedAvg); no differential privacy, no client-side evaluation; the
global model evaluated on the 10,000 test images before the first round and after the last one,
on both sides (wflsim always evaluates at the start of a run: ``docs/performance/peers.md``).
Presets (``--preset``): ``small`` = 100 users / cohort 10 / 20 rounds, ``large`` = 1,000 / 100 /
5; ``--users``/``--cohort``/``--rounds`` give one workload of their own instead.

* ``wflsim``: ``wflsim.app.run`` (``prepare_scenario`` + ``make_learner`` + ``execute``) on a
  scenario file the script writes from ``scenarios/paper/mnist_iid.toml``: ``--users`` devices,
  the ``ideal`` scheme (no freezing, no outage: the server waits for every upload),
  ``[strategy.selection] rule = "uniform"`` with ``k = --cohort``, ``learning.local_steps = 5``,
  ``devices.batch_size = 32``, lr 0.05, one frame of ``--rounds`` slots,
  ``eval_every_slots = --rounds``; the network side (channels, powers, SimPy, energy, queues)
  and the Parquet trace written to a temporary folder are included.
* ``pfl``: ``FederatedAveraging.run`` with a ``SimulatedBackend`` (``_pfl_app.py``), in the
  interpreter of ``--pfl-python``.

Both sides read the same data (``wflsim.models.data.load_dataset("mnist", DIR)``: the real MNIST
from ``--data-dir``, by default ``$WFLSIM_DATA_DIR`` or the project machine's dataset folder when
they hold MNIST, else a synthetic MNIST written by the script), the same partition (computed once
here as wflsim computes it from the seed; the wflsim child checks its learner has it, the pfl
child receives it) and the same initial model (built here as wflsim builds it; the wflsim child
checks its learner starts from it, the pfl child loads it).

Each side runs in a FRESH subprocess per repetition; all variants (side x ``--threads``) are
interleaved, the order rotating (``_common.interleaved``). Each child sets its torch threads
(and OMP/MKL threads) to the variant's count. Reported per repetition and variant: the whole
subprocess's wall time, seconds per round (the training loop divided by the rounds: wflsim's
``execute``, pfl's ``FederatedAveraging.run``, both including the two central evaluations), peak
resident memory of the child (``wait4``'s ``ru_maxrss``) and the final test accuracy. wflsim's
time per round is split, by ``perf_counter`` wrappers installed in its child only, into
``learning`` (the learner's ``compute``, ``apply``, ``begin_frame``, ``end_frame``,
``is_finite``, ``stable_fraction``), ``evaluation`` (``evaluate``), ``trace`` (the run folder's
writer on the simulation's thread: ``slot_done``, ``frame_done`` with its checkpoint, ``flush``,
``close``), ``radio`` (the rest of ``Engine.run``: scheme, channel, selection, SimPy clock,
energy, queues, the trace rows buffered) and ``setup`` (the rest of ``execute``: the engine
built, the folder and manifest). The trace writer's background thread is timed on its own
(it overlaps the rest).

Targets (issue 49; printed, never asserted): pfl / wflsim per round >= 1.2 at one thread and
>= 1.0 at two, at both presets, with equal accuracy (within 1 point); peak memory at 1,000 users
wflsim / pfl <= 1.

pfl is not a project dependency. Install it into its own virtual environment that shares the
system's torch (it pins dp-accounting < 0.6) and point ``--pfl-python`` at it (the default is
``/tmp/pfl-venv/bin/python`` when it exists)::

    python -m venv --system-site-packages /tmp/pfl-venv
    /tmp/pfl-venv/bin/pip install "pfl[pytorch]==0.6.0"

Without an interpreter that can import pfl, the pfl part is skipped with a message and only
wflsim is timed.

    python benchmarks/pfl_compare.py                              # both presets, 1 and 2 threads
    python benchmarks/pfl_compare.py --preset small --threads 1 --reps 1
    python benchmarks/pfl_compare.py --quick                      # smoke test
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common

SCENARIO = _common.REPO / "scenarios" / "paper" / "mnist_iid.toml"
DEFAULT_PFL_PY = "/tmp/pfl-venv/bin/python"
SHARED_DATA = "/work/shared/datasets"  # the project machine's dataset folder
LR = 0.05
LOCAL_STEPS = 5
BATCH = 32
PRESETS = {"small": (100, 10, 20), "large": (1000, 100, 5)}
SPLIT = ("learning", "radio", "trace", "evaluation", "setup")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _common.parser(
        __doc__,
        reps=3,
        reps_help="recorded repetitions",
        warmup=0,
        data_dir="MNIST in torchvision's layout (default $WFLSIM_DATA_DIR or the project's dataset folder when they hold it, else a synthetic MNIST)",
        quick={"users": 20, "cohort": 4, "rounds": 2, "threads": "1", "reps": 1, "warmup": 0},
    )
    p.add_argument(
        "--preset",
        choices=["small", "large", "both"],
        default="both",
        help="small = 100 users / cohort 10 / 20 rounds, large = 1,000 / 100 / 5 (default both)",
    )
    p.add_argument("--users", type=int, default=None, help="one workload of this many users")
    p.add_argument("--cohort", type=int, default=None, help="its cohort per round")
    p.add_argument("--rounds", type=int, default=None, help="its rounds")
    p.add_argument(
        "--threads", default="1,2", help="torch threads per child, comma-separated (default 1,2)"
    )
    p.add_argument(
        "--pfl-python",
        default=None,
        help=f"interpreter with pfl 0.6.0 (default {DEFAULT_PFL_PY} if present)",
    )
    _common.child_options(p, ["wflsim", "pfl"], "data", "inputs", "result")
    args = p.parse_args(argv)
    try:
        args.thread_counts = [int(t) for t in str(args.threads).split(",") if t.strip()]
    except ValueError:
        p.error(f"--threads: a comma-separated list of integers, got {args.threads!r}")
    if not args.thread_counts or min(args.thread_counts) < 1:
        p.error(f"--threads: integers >= 1, got {args.threads!r}")
    for name in ("users", "cohort", "rounds", "reps"):
        v = getattr(args, name)
        if v is not None and v < 1:
            p.error(f"--{name} must be >= 1, got {v}")
    if args.warmup < 0:
        p.error(f"--warmup must be >= 0, got {args.warmup}")
    args.custom = None
    if args.users is not None or args.cohort is not None or args.rounds is not None:
        users, cohort, rounds = PRESETS["small"]
        users = args.users if args.users is not None else users
        cohort = args.cohort if args.cohort is not None else min(cohort, users)
        rounds = args.rounds if args.rounds is not None else rounds
        if cohort > users:
            p.error(f"--cohort {cohort} is larger than --users {users}: use at most {users}")
        args.custom = (users, cohort, rounds)
    if args.data_dir and not args.part:
        from wflsim.models.data import dataset_available

        if not dataset_available("mnist", args.data_dir):
            p.error(
                f"--data-dir {args.data_dir}: no MNIST there (MNIST/raw/*-ubyte); fetch it with "
                "`wflsim data fetch mnist` or leave the option out"
            )
    return args


def workloads(args: argparse.Namespace) -> list[tuple[str, int, int, int]]:
    """``(label, users, cohort, rounds)`` of each workload to run."""
    if args.custom is not None:
        return [("custom", *args.custom)]
    names = ["small", "large"] if args.preset == "both" else [args.preset]
    return [(n, *PRESETS[n]) for n in names]


# ---------------------------------------------------------------------------- inputs


def data_folder(args: argparse.Namespace, tmp: Path) -> tuple[str, str]:
    """The MNIST folder both sides read, and how it was chosen."""
    from flower_compare import write_synthetic_mnist

    from wflsim.models.data import dataset_available

    if args.data_dir:
        return str(Path(args.data_dir).resolve()), "real MNIST from --data-dir"
    for cand, why in ((os.environ.get("WFLSIM_DATA_DIR"), "$WFLSIM_DATA_DIR"), (SHARED_DATA, "")):
        if cand and dataset_available("mnist", cand):
            return str(Path(cand).resolve()), f"real MNIST ({why or 'the dataset folder'})"
    write_synthetic_mnist(tmp / "data", args.seed)
    return str(tmp / "data"), "synthetic MNIST (uniform random pixels/labels)"


def schedule(parts: list[Any], cohort: int, rounds: int, seed: int) -> tuple[list[Any], list[Any]]:
    """Each round's cohort and each cohort user's minibatches, drawn as wflsim draws them with
    the run's streams: the ``uniform`` selection of ``cohort`` of all devices in slot ``r``
    (ascending ids), then per device ``n`` ``LOCAL_STEPS`` minibatches of ``BATCH`` samples of
    its part from ``streams.device("sampling", n, r)`` (each without replacement unless the part
    is smaller). Returns ``cohorts[r]`` ``(cohort,)`` and ``batches[r]``
    ``(cohort, LOCAL_STEPS * BATCH)``."""
    import numpy as np

    from wflsim.sim.rng import Streams
    from wflsim.sim.selection import Selection, SelectionConfig

    streams = Streams(seed)
    selection = Selection(SelectionConfig(rule="uniform", k=cohort), streams)
    everyone = np.ones(len(parts), dtype=bool)
    cohorts, batches = [], []
    for r in range(rounds):
        ids = np.flatnonzero(selection.choose(r, everyone, cohort, None))  # type: ignore[arg-type]
        rows = []
        for n in ids:
            rng, local = streams.device("sampling", int(n), r), parts[n]
            draws = [
                local[rng.choice(local.size, size=BATCH, replace=local.size < BATCH)]
                for _ in range(LOCAL_STEPS)
            ]
            rows.append(np.concatenate(draws))
        cohorts.append(ids.astype(np.int64))
        batches.append(np.stack(rows).astype(np.int64))
    return cohorts, batches


def write_inputs(data: str, wl: tuple[str, int, int, int], seed: int, path: Path) -> None:
    """What both sides start from, computed as wflsim computes it from the seed
    (``Streams(seed)``): the partition (the ``partition`` stream), the initial model (the
    ``torch_init`` seed) and the rounds' cohorts and minibatches (:func:`schedule`)."""
    import numpy as np
    import torch

    from wflsim.models.data import load_dataset, partition
    from wflsim.models.nets import build_model
    from wflsim.sim.rng import Streams

    _, users, cohort, rounds = wl
    streams = Streams(seed)
    _, y_tr, _, _ = load_dataset("mnist", data, compact=True)
    parts = partition(y_tr.numpy(), users, "iid", 1.0, streams.global_("partition"))
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(streams.int_seed("torch_init"))
        net = build_model("cnn_mnist", "mnist")
    cohorts, batches = schedule(parts, cohort, rounds, seed)
    torch.save(
        {
            "parts": [torch.from_numpy(np.asarray(p, dtype=np.int64)) for p in parts],
            "state": {k: v.clone() for k, v in net.state_dict().items()},
            "cohorts": [torch.from_numpy(c) for c in cohorts],
            "batches": [torch.from_numpy(b) for b in batches],
        },
        path,
    )


def read_inputs(path: str) -> dict[str, Any]:
    """:func:`write_inputs`'s file: ``parts``, ``cohorts``, ``batches`` as numpy arrays,
    ``state`` the initial state dict."""
    import torch

    blob = torch.load(path, weights_only=True)
    out: dict[str, Any] = {"state": blob["state"]}
    for key in ("parts", "cohorts", "batches"):
        out[key] = [t.numpy() for t in blob[key]]
    return out


def scenario_table(users: int, cohort: int, rounds: int, seed: int) -> dict[str, Any]:
    """``scenarios/paper/mnist_iid.toml`` with the workload's overrides."""
    from wflsim.sim.config.loading import read_scenario_file

    _, data = read_scenario_file(SCENARIO)
    data["name"] = f"pfl_compare_{users}_{cohort}_{rounds}"
    data["seed"] = seed
    data["run"] = {**data["run"], "frames": 1, "slots_per_frame": rounds}
    data["network"] = {**data["network"], "num_devices": users}
    data["devices"] = {**data["devices"], "batch_size": BATCH}
    data["learning"] = {
        **data["learning"],
        "dataset": "mnist",
        "model": "cnn_mnist",
        "partition": "iid",
        "lr": LR,
        "local_steps": LOCAL_STEPS,
        "eval_every_slots": rounds,
        "device": "cpu",
    }
    data["scheme"] = {"name": "ideal"}
    data["strategy"] = {"name": "fedavg", "selection": {"rule": "uniform", "k": cohort}}
    return data


# ---------------------------------------------------------------------------- children


def set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def peak_rss_bytes() -> float:
    import resource

    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024.0  # kB on Linux


class Timers:
    """Seconds spent in wrapped calls, per key."""

    def __init__(self) -> None:
        self.s: dict[str, float] = {}

    def wrap(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        self.s.setdefault(key, 0.0)

        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.s[key] += time.perf_counter() - t0

        return timed


def install_timers(timers: Timers, learner: Any) -> None:
    """Time wflsim's phases in this child only: the learner's calls on the instance (its
    ``stable_fraction`` property on the class), the run folder's writer on its class, and the
    engine ``execute`` builds (its ``run``)."""
    import wflsim.app.runner as runner
    from wflsim.app import recorder as rec

    for name in ("compute", "apply", "begin_frame", "end_frame", "is_finite"):
        setattr(learner, name, timers.wrap("learning", getattr(learner, name)))
    learner.evaluate = timers.wrap("evaluation", learner.evaluate)
    cls = type(learner)
    prop = cls.__dict__.get("stable_fraction")
    if isinstance(prop, property) and prop.fget is not None:
        cls.stable_fraction = property(timers.wrap("learning", prop.fget))  # type: ignore[attr-defined]
    for name in ("slot_done", "frame_done"):
        setattr(rec.RunRecorder, name, timers.wrap("trace_in_run", getattr(rec.RunRecorder, name)))
    for name in ("flush", "close"):
        setattr(
            rec.RunRecorder, name, timers.wrap("trace_after_run", getattr(rec.RunRecorder, name))
        )
    rec.PartWriter.write = timers.wrap("trace_thread", rec.PartWriter.write)  # type: ignore[method-assign]
    rec.RunRecorder._commit = timers.wrap("trace_thread", rec.RunRecorder._commit)  # type: ignore[method-assign]
    build = runner.build_engine

    def build_timed(*a: Any, **k: Any) -> Any:
        engine = build(*a, **k)
        engine.run = timers.wrap("run", engine.run)
        return engine

    runner.build_engine = build_timed  # type: ignore[assignment]


def check_inputs(learner: Any, inputs: dict[str, Any]) -> None:
    """The wflsim learner holds the partition and initial model the pfl side gets."""
    import numpy as np
    import torch

    mine, parts, state = learner.parts, inputs["parts"], inputs["state"]
    if len(mine) != len(parts) or not all(
        np.array_equal(a, b) for a, b in zip(mine, parts, strict=True)
    ):
        raise SystemExit("wflsim's partition differs from the one computed for both sides")
    w = learner.param_dict(learner.global_params())
    if not set(w) <= set(state) or not all(torch.equal(w[k], state[k]) for k in w):
        raise SystemExit("wflsim's initial model differs from the one computed for both sides")


def record_computes(learner: Any) -> list[tuple[int, Any, Any]]:
    """Wrap ``learner.compute`` to keep, per call, the slot, the devices and their local
    minibatches (``(n, steps * batch)``)."""
    import numpy as np

    seen: list[tuple[int, Any, Any]] = []
    inner = learner.compute

    def compute(slot: int, ids: Any) -> None:
        inner(slot, ids)
        rows = [np.concatenate(steps) for steps in learner.last_local_batches]
        seen.append((int(slot), np.asarray(ids, dtype=np.int64).copy(), np.stack(rows)))

    learner.compute = compute
    return seen


def check_schedule(seen: list[tuple[int, Any, Any]], inputs: dict[str, Any]) -> None:
    """wflsim trained the cohorts on the minibatches the pfl side gets, round by round."""
    import numpy as np

    cohorts, batches = inputs["cohorts"], inputs["batches"]
    if [s for s, _, _ in seen] != list(range(len(cohorts))):
        raise SystemExit(f"wflsim computed in slots {[s for s, _, _ in seen]}, not one per round")
    for (slot, ids, rows), cohort, batch in zip(seen, cohorts, batches, strict=True):
        if not (np.array_equal(ids, cohort) and np.array_equal(rows, batch)):
            raise SystemExit(
                f"wflsim's cohort or minibatches of round {slot} differ from the ones computed "
                "for both sides"
            )


def part_wflsim(args: argparse.Namespace) -> dict[str, Any]:
    set_threads(args.threads_child)
    from wflsim.app.run import execute, make_learner, prepare_scenario
    from wflsim.app.scenario import validate_scenario
    from wflsim.sim.config.loading import read_scenario_file, scenario_text

    users, cohort, rounds = args.users, args.cohort, args.rounds
    out = Path(tempfile.mkdtemp(prefix="wflsim-pfl-cmp-"))
    try:
        path = out / "scenario.toml"
        path.write_text(scenario_text(scenario_table(users, cohort, rounds, args.seed)))
        text, data = read_scenario_file(path)
        prep = prepare_scenario(validate_scenario(data), text=text, path=path, data_dir=args.data)
        learner = make_learner(prep)
        inputs = read_inputs(args.inputs)
        check_inputs(learner, inputs)
        timers = Timers()
        install_timers(timers, learner)
        seen = record_computes(learner)
        t0 = time.perf_counter()
        stats = execute(prep, learner, out / "run", overwrite=True)
        loop_s = time.perf_counter() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    check_schedule(seen, inputs)
    import torch

    s = timers.s
    split = {
        "learning": s["learning"],
        "evaluation": s["evaluation"],
        "trace": s["trace_in_run"] + s["trace_after_run"],
        "radio": s["run"] - s["learning"] - s["evaluation"] - s["trace_in_run"],
        "setup": loop_s - s["run"] - s["trace_after_run"],
    }
    return {
        "loop_s": loop_s,
        "eval_s": s["evaluation"],
        "split": split,
        "trace_thread_s": s["trace_thread"],
        "final_loss": stats.last_loss,
        "final_accuracy": stats.last_accuracy,
        "updates": stats.successes,
        "threads": torch.get_num_threads(),
        "peak_rss_self": peak_rss_bytes(),
    }


def part_pfl(args: argparse.Namespace) -> dict[str, Any]:
    set_threads(args.threads_child)
    import pfl
    import torch
    from _pfl_app import run_fedavg

    from wflsim.models.data import load_dataset
    from wflsim.models.nets import build_model

    x_tr, y_tr, x_te, y_te = load_dataset("mnist", args.data)
    inputs = read_inputs(args.inputs)
    net = build_model("cnn_mnist", "mnist")
    net.load_state_dict(inputs["state"])
    res = run_fedavg(
        net=net,
        x_train=x_tr,
        y_train=y_tr,
        x_test=x_te,
        y_test=y_te,
        cohorts=inputs["cohorts"],
        batches=inputs["batches"],
        batch=BATCH,
        steps=LOCAL_STEPS,
        lr=LR,
    )
    res["loop_s"] = res.pop("run_s")
    res["threads"] = torch.get_num_threads()
    res["pfl"] = getattr(pfl, "__version__", "?")
    res["peak_rss_self"] = peak_rss_bytes()
    return res


# ---------------------------------------------------------------------------- parent


def pfl_python(args: argparse.Namespace) -> tuple[str | None, str]:
    """The interpreter for the pfl part and why (None: skip)."""
    cands = [args.pfl_python] if args.pfl_python else []
    if not cands and Path(DEFAULT_PFL_PY).exists():
        cands.append(DEFAULT_PFL_PY)
    for py in cands:
        try:
            probe = subprocess.run(
                [py, "-c", "import pfl, torch; print(pfl.__version__)"],
                capture_output=True,
                text=True,
            )
        except OSError:
            continue
        if probe.returncode == 0:
            return py, f"{py} (pfl {probe.stdout.strip()})"
    return None, (
        f"SKIPPED: no interpreter among {cands or [DEFAULT_PFL_PY]} can import pfl. Install it in "
        "a separate venv: python -m venv --system-site-packages /tmp/pfl-venv && "
        '/tmp/pfl-venv/bin/pip install "pfl[pytorch]==0.6.0"'
    )


def child_env(threads: int) -> dict[str, str]:
    """A child's environment: ``flower_compare.py``'s (this folder and the repository first on
    ``PYTHONPATH``), with its thread count for OpenMP and MKL too."""
    from flower_compare import child_env as paths_env

    env = paths_env()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


def run_child(cmd: list[str], threads: int, result: Path, log: Path) -> dict[str, Any]:
    """Run a child; its result plus its wall time (``total_s``) and peak RSS (``peak_bytes``,
    ``wait4``'s ``ru_maxrss``)."""
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=child_env(threads))
        _, status, usage = os.wait4(proc.pid, 0)
    total = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0 or not result.exists():
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{' '.join(cmd)} failed (exit {code}):\n{tail}")
    res = json.loads(result.read_text())
    result.unlink()
    res["total_s"] = total
    res["peak_bytes"] = float(usage.ru_maxrss) * 1024.0
    return res


def child_cmd(
    py: str, part: str, wl: tuple[str, int, int, int], threads: int, args: argparse.Namespace,
    data: str, inputs: Path, result: Path,
) -> list[str]:  # fmt: skip
    _, users, cohort, rounds = wl
    return [
        py,
        str(Path(__file__).resolve()),
        "--part", part,
        "--users", str(users),
        "--cohort", str(cohort),
        "--rounds", str(rounds),
        "--threads", str(threads),
        "--seed", str(args.seed),
        "--data", data,
        "--inputs", str(inputs),
        "--result", str(result),
    ]  # fmt: skip


def variant(
    cmd: list[str], threads: int, result: Path, log: Path, into: list[dict[str, Any]], rounds: int
) -> Callable[[], float]:
    """One variant for ``_common.interleaved``: run the child, keep its result in ``into``,
    return its seconds per round."""

    def go() -> float:
        out = run_child(cmd, threads, result, log)
        into.append(out)
        return float(out["loop_s"]) / rounds

    return go


def report(
    wl: tuple[str, int, int, int],
    details: dict[str, list[dict[str, Any]]],
    per_round: dict[str, list[float]],
    threads: list[int],
    has_pfl: bool,
) -> list[str]:
    """Print one workload's results; its headline lines."""
    label, users, cohort, rounds = wl
    print(f"\n-- {label}: {users} users / cohort {cohort} / {rounds} rounds")
    print(
        "seconds per round (training loop incl. both evaluations / rounds), whole child, peak RSS:"
    )
    for k, ds in details.items():
        print(f"  {k:10s} per round {_common.Stats(per_round[k]).fmt(unit=' s')}")
        print(f"  {'':10s} total     {_common.Stats([d['total_s'] for d in ds]).fmt(unit=' s')}")
        print(
            f"  {'':10s} peak RSS  {_common.Stats([d['peak_bytes'] for d in ds]).fmt(1e-9, ' GB')}"
        )
        ex = _common.Stats([(d["loop_s"] - d["eval_s"]) / rounds for d in ds])
        print(f"  {'':10s} per round without the evaluations {ex.fmt(unit=' s')}")
        accs = ", ".join(f"{d['final_accuracy']:.4f}" for d in ds)
        extra = f", updates {ds[-1]['updates']}" if "updates" in ds[-1] else ""
        print(f"  {'':10s} final test accuracy {accs} (torch threads {ds[-1]['threads']}{extra})")
    print("wflsim's time per round by phase (median over repetitions; share of the loop):")
    for t in threads:
        ds = details[f"wflsim/{t}t"]
        loop = _common.Stats([d["loop_s"] for d in ds]).median
        parts = []
        for key in SPLIT:
            med = _common.Stats([d["split"][key] for d in ds]).median
            parts.append(f"{key} {med / rounds:.4g} s ({100 * med / loop:.1f} %)")
        thread = _common.Stats([d["trace_thread_s"] for d in ds]).median
        print(f"  {t} thread(s): " + ", ".join(parts))
        print(f"  {'':12s} (trace writer thread, overlapping: {thread / rounds:.4g} s per round)")
    heads: list[str] = []
    if not has_pfl:
        return heads
    print("ratios (pfl / wflsim: > 1 means wflsim is faster; wflsim / pfl for memory):")
    for t in threads:
        w, p = details[f"wflsim/{t}t"], details[f"pfl/{t}t"]
        target = ">= 1.2" if t == 1 else ">= 1.0"
        heads.append(
            f"{label} {t}t "
            + _common.ratio_line(
                "pfl/wflsim per round", per_round[f"pfl/{t}t"], per_round[f"wflsim/{t}t"], target
            )
        )
        heads.append(
            f"{label} {t}t "
            + _common.ratio_line(
                "pfl/wflsim per round without the evaluations",
                [d["loop_s"] - d["eval_s"] for d in p],
                [d["loop_s"] - d["eval_s"] for d in w],
                "(informative)",
            )
        )
        heads.append(
            f"{label} {t}t "
            + _common.ratio_line(
                "peak RSS wflsim/pfl",
                [d["peak_bytes"] for d in w],
                [d["peak_bytes"] for d in p],
                "<= 1" if users >= 1000 else "(informative)",
            )
        )
        da = max(abs(a["final_accuracy"] - b["final_accuracy"]) for a, b in zip(w, p, strict=True))
        acc_w = _common.Stats([d["final_accuracy"] for d in w]).median
        acc_p = _common.Stats([d["final_accuracy"] for d in p]).median
        heads.append(
            f"{label} {t}t final accuracy wflsim {acc_w:.4f}, pfl {acc_p:.4f}; largest difference "
            f"in a repetition {100 * da:.2f} points   target: <= 1 point"
        )
    for line in heads:
        print("  " + line)
    for t in threads:
        _common.headline(
            f"pfl/wflsim per round, {label} {t}t",
            per_round[f"pfl/{t}t"],
            per_round[f"wflsim/{t}t"],
            ">= 1.2" if t == 1 else ">= 1.0",
        )
    return heads


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.part:
        args.threads_child = args.thread_counts[0]
        res = part_wflsim(args) if args.part == "wflsim" else part_pfl(args)
        _common.write_json(args.result, res)
        return

    import torch  # noqa: F401  (for the environment report)

    _common.print_header("pfl_compare: FedAvg in wflsim vs pfl-research", ("numpy", "simpy"))
    ppy, pdesc = pfl_python(args)
    print(
        f"workload: MNIST IID, cnn_mnist, {LOCAL_STEPS} local SGD steps of {BATCH} samples at lr "
        f"{LR}, FedAvg (server lr 1), evaluation on the 10,000 test images before and after"
    )
    print(f"pfl interpreter: {pdesc}")
    tmp = Path(tempfile.mkdtemp(prefix="wflsim-pfl-"))
    heads: list[str] = []
    try:
        data, how = data_folder(args, tmp)
        print(f"data: {how}: {data}")
        sides = {"wflsim": sys.executable}
        if ppy is not None:
            sides["pfl"] = ppy
        threads = args.thread_counts
        print(
            f"variants: {', '.join(f'{s}/{t}t' for t in threads for s in sides)}; "
            f"{args.warmup} warm-up + {args.reps} recorded repetitions, order rotating"
        )
        for wl in workloads(args):
            inputs = tmp / f"inputs-{wl[0]}.pt"
            write_inputs(data, wl, args.seed, inputs)
            details: dict[str, list[dict[str, Any]]] = {}
            variants: dict[str, Callable[[], float | None]] = {}
            for t in threads:
                for side, py in sides.items():
                    key = f"{side}/{t}t"
                    details[key] = []
                    res_path = tmp / f"{side}-{t}.json"
                    cmd = child_cmd(py, side, wl, t, args, data, inputs, res_path)
                    variants[key] = variant(
                        cmd, t, res_path, tmp / "child.log", details[key], wl[3]
                    )
            print(f"\n{wl[0]}: {wl[1]} users / cohort {wl[2]} / {wl[3]} rounds (s per round):")
            per_round = _common.interleaved(variants, args.reps, args.warmup)
            for k in details:
                details[k] = details[k][args.warmup :]
            heads += report(wl, details, per_round, threads, ppy is not None)
        if ppy is None:
            print(f"\npfl part {pdesc}")
        elif heads:
            print("\nsummary of every workload:")
            for line in heads:
                print("  " + line)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
