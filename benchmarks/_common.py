"""Helpers shared by the benchmark scripts: the common options, environment report, timing,
interleaving, statistics, the headline line and JSON results.

Not a benchmark itself. Every script in this folder imports this module first (``python
benchmarks/NAME.py`` has the folder on ``sys.path``; ``python -m benchmarks NAME`` and the tests
put it there), which puts the repository first on ``sys.path``, so both work from any directory.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import itertools
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def summary(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    para = " ".join((doc or "").strip().split("\n\n")[0].split())
    end = re.search(r"(?<!\.\w)\.\s(?=[A-Z`])", para)  # not after an abbreviation (i.i.d.)
    return para if end is None else para[: end.start() + 1]


def command_line() -> str:
    """The exact command that started this process (interpreter included)."""
    return shlex.join([sys.executable, *sys.argv])


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(packages: Sequence[str] = ("numpy", "simpy", "pyarrow")) -> dict[str, str]:
    """Facts that shape the numbers: versions, threads, CPUs, load."""
    env: dict[str, str] = {
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "os.cpu_count": str(os.cpu_count()),
    }
    if hasattr(os, "sched_getaffinity"):
        env["usable cpus (affinity)"] = str(len(os.sched_getaffinity(0)))
    if hasattr(os, "getloadavg"):
        env["load average (1/5/15 min)"] = " ".join(f"{v:.2f}" for v in os.getloadavg())
    if "torch" in sys.modules:
        import torch

        env["torch"] = torch.__version__
        env["torch threads (intra-op)"] = str(torch.get_num_threads())
        env["torch interop threads"] = str(torch.get_num_interop_threads())
    for pkg in packages:
        v = _version(pkg)
        if v is not None:
            env[pkg] = v
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if var in os.environ:
            env[var] = os.environ[var]
    return env


def print_header(title: str, packages: Sequence[str] = ("numpy", "simpy", "pyarrow")) -> None:
    """Title, command line and environment."""
    print(f"== {title}")
    print(f"command: {command_line()}")
    print(f"started: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    print("environment:")
    for k, v in environment(packages).items():
        print(f"  {k}: {v}")
    print()


class Stats:
    """Median and spread of a list of measurements."""

    def __init__(self, values: Sequence[float]) -> None:
        if not values:
            raise ValueError("no measurements")
        self.values = list(values)
        s = sorted(self.values)
        self.n = len(s)
        self.median = statistics.median(s)
        self.min, self.max = s[0], s[-1]
        if self.n >= 4:
            q = statistics.quantiles(s, n=4, method="inclusive")
            self.q1, self.q3 = q[0], q[2]
        else:
            self.q1, self.q3 = self.min, self.max

    def fmt(self, scale: float = 1.0, unit: str = "", digits: int = 3) -> str:
        f = f"{{:.{digits}g}}"
        m = f.format(self.median * scale)
        lo, hi = f.format(self.min * scale), f.format(self.max * scale)
        q1, q3 = f.format(self.q1 * scale), f.format(self.q3 * scale)
        return f"median {m}{unit}  [min {lo}, q1 {q1}, q3 {q3}, max {hi}]  (n={self.n})"


def interleaved(
    variants: dict[str, Callable[[], float | None]], reps: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Run the variants in turn, ``warmup`` unrecorded rounds then ``reps`` recorded ones.

    Each round runs every variant once; the order rotates from round to round, so slow drifts of
    the machine (other load, thermal state) hit every variant alike. A variant returns ``None``
    to be timed here (wall time of the call) or its own measurement in seconds.
    """
    names = list(variants)
    out: dict[str, list[float]] = {k: [] for k in names}
    for r in range(warmup + reps):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            t0 = time.perf_counter()
            got = variants[name]()
            dt = time.perf_counter() - t0 if got is None else float(got)
            if r >= warmup:
                out[name].append(dt)
        if r >= warmup:
            done = r - warmup + 1
            line = "  ".join(f"{k} {out[k][-1]:.4g}s" for k in names)
            print(f"  rep {done}/{reps}: {line}", flush=True)
        else:
            print(f"  warm-up {r + 1}/{warmup} done", flush=True)
    return out


def ratio_of(num: Sequence[float], den: Sequence[float]) -> tuple[float, Stats]:
    """``median(num) / median(den)`` and the statistics of the per-round ratios ``num/den``."""
    r_med = statistics.median(num) / statistics.median(den)
    return r_med, Stats([a / b for a, b in zip(num, den, strict=True)])


def ratio_line(label: str, num: Sequence[float], den: Sequence[float], target: str) -> str:
    """``label = median(num)/median(den)`` plus the spread of the per-round ratios."""
    r_med, per = ratio_of(num, den)
    return (
        f"{label} = {r_med:.3f}   (ratio of medians; per-round ratios: median {per.median:.3f},"
        f" min {per.min:.3f}, max {per.max:.3f})   target: {target}"
    )


HEADLINE_PREFIX = "headline: "


def headline(
    what: str,
    num: Sequence[float],
    den: Sequence[float] | None = None,
    target: str | None = None,
    unit: str = "",
) -> str:
    """Print (after a blank line) and return the one line that states a benchmark's result, the
    same in every script.

    With ``den``: ``headline: <what> = <ratio of the medians> (<min>-<max> of the per-round
    ratios over N reps) [target <target>]``; without: the median of ``num`` (in ``unit``) and its
    min-max. ``target`` is the stated target (``">= 0.5"``), or ``None``: ``[no target]``.
    """
    if den is None:
        st = Stats(num)
        value, lo, hi, n = f"{st.median:.4g}", f"{st.min:.4g}", f"{st.max:.4g}", st.n
    else:
        r_med, per = ratio_of(num, den)
        value, lo, hi, n = f"{r_med:.3f}", f"{per.min:.3f}", f"{per.max:.3f}", per.n
    goal = "no target" if target is None else f"target {target}"
    reps = "rep" if n == 1 else "reps"
    line = f"{HEADLINE_PREFIX}{what} = {value}{unit} ({lo}-{hi}{unit} over {n} {reps}) [{goal}]"
    print(f"\n{line}", flush=True)
    return line


def print_stats(
    times: dict[str, Sequence[float]], width: int = 16, unit: str = " s", indent: str = "  "
) -> None:
    """One line per variant: its name and :meth:`Stats.fmt` of its measurements."""
    for name, values in times.items():
        print(f"{indent}{name:{width}s} {Stats(values).fmt(unit=unit)}")


class Parser(argparse.ArgumentParser):
    """A script's argument parser; ``--quick`` gives the options the values of its smoke-test
    preset (:attr:`quick_preset`), as every script's own ``if args.quick:`` block did."""

    quick_preset: dict[str, Any]

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        ns = super().parse_args(args, namespace)
        if getattr(ns, "quick", False):
            for key, value in getattr(self, "quick_preset", {}).items():
                setattr(ns, key, value)
        return ns


def _option_value(value: object) -> str:
    if isinstance(value, list | tuple):
        return " ".join(map(str, value))
    return "(none)" if value is None else str(value)


def parser(
    doc: str | None,
    *,
    reps: int | None,
    warmup: int | None = None,
    seed: bool = True,
    threads: bool = False,
    quick: dict[str, Any] | None = None,
    quick_help: str | None = None,
    data_dir: str | None = None,
    data_dir_default: str | None = None,
    tmp_dir: bool = False,
    reps_help: str = "recorded rounds",
    full_help: bool = False,
) -> Parser:
    """An argument parser with the options the scripts share, each script's defaults given here.

    ``--reps`` (recorded rounds; unless ``reps`` is ``None``), ``--warmup`` (unrecorded rounds
    first; unless ``warmup`` is ``None``), ``--seed``, ``--threads`` (torch intra-op threads),
    ``--quick`` (a smoke test: the options take the values in ``quick``; ``quick_help`` says what
    else it changes), ``--data-dir`` (``data_dir`` is its help text, ``data_dir_default`` its
    default; :data:`MNIST_DIR`: the real MNIST) and ``--tmp-dir``. The description is the first
    sentence of ``doc`` (the script's docstring), or all of it as written with ``full_help``.
    """
    if full_help:
        p = Parser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    else:
        p = Parser(description=summary(doc))
    if reps is not None:
        p.add_argument("--reps", type=int, default=reps, help=f"{reps_help} (default {reps})")
    if warmup is not None:
        p.add_argument(
            "--warmup", type=int, default=warmup, help=f"unrecorded rounds first (default {warmup})"
        )
    if seed:
        p.add_argument("--seed", type=int, default=0)
    if threads:
        p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    if data_dir is not None:
        p.add_argument("--data-dir", default=data_dir_default, help=data_dir)
    if tmp_dir:
        p.add_argument("--tmp-dir", default=None, help="where the run folders go (default $TMPDIR)")
    if quick is not None:
        p.quick_preset = dict(quick)
        said = " ".join(f"--{k.replace('_', '-')} {_option_value(v)}" for k, v in quick.items())
        extra = f"; {quick_help}" if quick_help else ""
        p.add_argument("--quick", action="store_true", help=f"smoke test: {said}{extra}")
    return p


def child_options(p: argparse.ArgumentParser, parts: Sequence[str], *files: str) -> None:
    """The hidden options by which a comparison script runs one side in a child process:
    ``--part`` (one of ``parts``) and one ``--<file>`` per file the parent hands over."""
    p.add_argument("--part", choices=list(parts), help=argparse.SUPPRESS)
    for name in files:
        p.add_argument(f"--{name}", help=argparse.SUPPRESS)


#: ``--data-dir`` of the learner benchmarks
MNIST_DIR = "use the real MNIST from this folder (torchvision's layout), not a synthetic one"


def set_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)`` unless ``threads`` is ``None``."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


@contextlib.contextmanager
def scratch(prefix: str, tmp_dir: str | None = None) -> Iterator[Path]:
    """A temporary folder (in ``tmp_dir``, else ``$TMPDIR``), removed with its content at exit."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix=prefix, dir=tmp_dir))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def timed(fn: Callable[[], object]) -> float:
    """Wall time of ``fn()`` in seconds (``time.perf_counter``)."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def execute_variants(
    root: Path,
    names: Sequence[str],
    prepare: Callable[[str], Any],
    learner: Callable[[], Any],
    inspect: Callable[[str, Any, Path], None] | None = None,
) -> dict[str, Callable[[], float]]:
    """One timed call per variant name for :func:`interleaved`: each call prepares the variant's
    scenario (``prepare(name)``, not timed), times ``wflsim.app.run.execute`` into a fresh run
    folder under ``root`` with a new ``learner()``, lets ``inspect(name, prep, folder)`` read
    the folder (not timed), removes it and returns the seconds ``execute`` took."""
    from wflsim.app.run import execute

    calls = itertools.count(1)

    def variant(name: str) -> Callable[[], float]:
        def run() -> float:
            prep = prepare(name)
            out = root / f"{name}-{next(calls)}"
            dt = timed(lambda: execute(prep, learner(), out, overwrite=True))
            if inspect is not None:
                inspect(name, prep, out)
            shutil.rmtree(out, ignore_errors=True)
            return dt

        return run

    return {name: variant(name) for name in names}


def run_bare(env: Any, n: int, device: Callable[[int], Any], server: Callable[[], Any]) -> None:
    """A bare SimPy model's run: ``n`` device processes and the server process, to the end."""
    for d in range(n):
        env.process(device(d))
    env.process(server())
    env.run()


def slot_end(env: Any, deadline: Any, done: Any, busy: bool) -> Any:
    """What a bare model's server waits for at a slot: the deadline and, when devices were woken
    (``busy``), the event that they are all done."""
    return env.all_of([deadline, done]) if busy else deadline


def write_json(path: str | Path, result: object) -> None:
    """Write ``result`` as JSON to ``path`` (a child's result file, or ``--out``)."""
    Path(path).write_text(json.dumps(result))


def add_repo_to_path() -> None:
    """Make ``sim`` and ``models`` importable when the package is not installed."""
    root = str(REPO)
    if root not in sys.path:
        sys.path.insert(0, root)


# Importing this module puts the repository first on the path: the scripts import it first (the
# first import of their third-party block; ``wflsim`` is first-party, below), so that they run
# this tree's ``wflsim`` whatever is installed.
add_repo_to_path()


def frozen_counts(learner: object, n: int, gamma: float) -> object:
    """The freezing rule's frame input for ``n`` devices that each freeze ``gamma`` of ``D``."""
    import numpy as np

    from wflsim.sim.updates import FreezingInputs

    d = int(learner.num_params)  # type: ignore[attr-defined]
    return FreezingInputs(frozen_count=np.full(n, int(round(gamma * d)), dtype=np.int64))


def run_child(cmd: Sequence[str], out: Path, label: str) -> dict[str, Any]:
    """Run ``cmd`` (a ``wflsim run ... --out out`` command) as a child process: its wall time
    (``process_s``), peak resident memory (``peak_bytes``, from ``wait4``) and the run's
    manifest (``manifest``). Exits with the child's stderr if it fails (``label`` names it)."""
    import json
    import subprocess

    t0 = time.perf_counter()
    proc = subprocess.Popen(list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"{label}: wflsim exited {code}: {err.strip()[-2000:]}")
    return {
        "process_s": wall,
        "peak_bytes": float(usage.ru_maxrss) * 1024.0,  # kilobytes on Linux
        "manifest": json.loads((Path(out) / "manifest.json").read_text()),
    }


# -- the learner side (torch imported on first use) ------------------------------------------


def synthetic_mnist(seed: int) -> tuple[Any, ...]:
    """MNIST-shaped data: 60,000 train and 1,000 test images of N(0, 1), uniform labels."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x_tr = torch.randn(60_000, 1, 28, 28, generator=g)
    y_tr = torch.randint(0, 10, (60_000,), generator=g)
    x_te = torch.randn(1_000, 1, 28, 28, generator=g)
    y_te = torch.randint(0, 10, (1_000,), generator=g)
    return x_tr, y_tr, x_te, y_te


class MnistWork:
    """The learner benchmarks' common work: MNIST (real from ``data_dir``, else
    :func:`synthetic_mnist` or the given ``data``), split i.i.d. over ``devices``, and the initial
    ``cnn_mnist`` weights drawn after ``torch.manual_seed(seed)``, which every learner starts from."""

    def __init__(
        self,
        devices: int,
        seed: int,
        data_dir: str | None = None,
        data: tuple[Any, ...] | None = None,
    ) -> None:
        import numpy as np
        import torch

        from wflsim.models.data import load_dataset, partition
        from wflsim.models.nets import build_model

        if data_dir:
            data = load_dataset("mnist", data_dir)
            self.desc = f"real MNIST from {data_dir}"
        elif data is None:
            data = synthetic_mnist(seed)
            self.desc = "synthetic MNIST-shaped (60,000 x 1 x 28 x 28, N(0,1), uniform labels)"
        else:
            self.desc = "synthetic MNIST-shaped"
        self.x_tr, self.y_tr, self.x_te, self.y_te = data
        self.devices = devices
        self.parts = partition(self.y_tr.numpy(), devices, "iid", 1.0, np.random.default_rng(seed))
        torch.manual_seed(seed)
        init = build_model("cnn_mnist", "mnist")
        self.state = {k: v.clone() for k, v in init.state_dict().items()}
        self.ids = np.arange(devices, dtype=np.int64)

    def model(self) -> Any:
        """A fresh ``cnn_mnist`` with the initial weights."""
        from wflsim.models.nets import build_model

        m = build_model("cnn_mnist", "mnist")
        m.load_state_dict(self.state)
        return m

    def learner(self, batch: int, lr: float, seed: int, **options: Any) -> Any:
        """A ``TorchLearner`` over this work: ``batch`` samples per device, keyed draws from
        ``Streams(seed)``; ``options`` go to ``TorchLearner`` as they are."""
        from wflsim.sim.rng import Streams

        data = (self.x_tr, self.y_tr, self.x_te, self.y_te)
        return torch_learner(
            self.model(), data, self.parts, batch, lr, sampling_streams=Streams(seed), **options
        )


def torch_learner(
    model: Any, data: tuple[Any, ...], parts: Any, batch: int, lr: float, **options: Any
) -> Any:
    """A ``TorchLearner`` of ``model`` on ``data`` (train x, train y, test x, test y) split into
    ``parts`` (one per device), ``batch`` samples per device and slot, learning rate ``lr``;
    ``options`` go to ``TorchLearner`` as they are."""
    import numpy as np

    from wflsim.models.learner import TorchLearner

    x_tr, y_tr, x_te, y_te = data
    return TorchLearner(
        model=model,
        x_train=x_tr,
        y_train=y_tr,
        x_test=x_te,
        y_test=y_te,
        parts=parts,
        batch_sizes=np.full(len(parts), batch, dtype=np.int64),
        lr=lr,
        **options,
    )


def nothing_frozen(n: int) -> object:
    """The freezing rule's frame input with no parameter frozen on any of ``n`` devices."""
    import numpy as np

    from wflsim.sim.updates import FreezingInputs

    return FreezingInputs(frozen_count=np.zeros(n, dtype=np.int64))


def slot_runner(
    learner: Any, ids: Any, start: int = 0, after: Callable[[], None] | None = None
) -> Callable[[], None]:
    """A callable that runs one slot of ``learner`` (``compute`` then ``apply`` on ``ids``) per
    call, at slots ``start``, ``start + 1``, ...; ``after`` runs at the end of each (a device
    synchronisation, so that the wall time holds all the slot's work)."""
    slot = [start]

    def run() -> None:
        learner.compute(slot[0], ids)
        learner.apply(slot[0], ids)
        if after is not None:
            after()
        slot[0] += 1

    return run
