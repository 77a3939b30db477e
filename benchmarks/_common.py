"""Helpers shared by the benchmark scripts: environment report, timing statistics, printing.

Not a benchmark itself. Every script in this folder puts the repository root on ``sys.path``
and imports this module, so ``python benchmarks/NAME.py`` works from any directory.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


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


def ratio_line(label: str, num: Sequence[float], den: Sequence[float], target: str) -> str:
    """``label = median(num)/median(den)`` plus the spread of the per-round ratios."""
    r_med = statistics.median(num) / statistics.median(den)
    per = Stats([a / b for a, b in zip(num, den, strict=True)])
    return (
        f"{label} = {r_med:.3f}   (ratio of medians; per-round ratios: median {per.median:.3f},"
        f" min {per.min:.3f}, max {per.max:.3f})   target: {target}"
    )


def add_repo_to_path() -> None:
    """Make ``sim`` and ``models`` importable when the package is not installed."""
    root = str(REPO)
    if root not in sys.path:
        sys.path.insert(0, root)


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
