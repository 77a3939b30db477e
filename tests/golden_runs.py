"""Golden traces: short runs of every scheme whose events tables must not change under refactors.

Each run is a scenario table. Its events table is held in two parts, both in
``tests/golden/hashes.json`` (the tables themselves are never committed):

* every column that does not depend on floating-point training (all network-side columns, the
  events, times, energies, queues, decisions; and the null masks of the training columns) as one
  SHA-256 per column (values and null mask, independent of Arrow chunking and Parquet encoding)
  plus the row count: these are bit-identical on every machine (numpy's elementwise float64
  arithmetic is IEEE-exact, the transcendental functions are the C library's on every CPU
  through wflsim.sim.fmath, and the network side never reads a training result);
* the training columns (:data:`TRAINING_COLUMNS`: evaluation loss and accuracy, and the stable
  fraction measured on parameter updates) as stored values, compared with the tolerances
  :data:`LOSS_RTOL` and :data:`ACCURACY_ATOL`. The same code gives different training results on
  different CPUs (torch picks AVX-512, AVX2 or plain kernels and blocks its reductions by the
  number of threads), so these cannot be hashed. The tolerances come from a measurement of that
  drift (``python tests/golden_runs.py --drift``; docs/decisions.md, "Golden traces").

Record (only after a deliberate change of results, in a commit of its own that says why)::

    WFLSIM_DATA_DIR=../shared/datasets python tests/golden_runs.py --record

or, for runs added to :func:`golden_runs` (the others' records are kept as they are)::

    WFLSIM_DATA_DIR=../shared/datasets python tests/golden_runs.py --record-new
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
GOLDEN_FILE = HERE / "golden" / "hashes.json"
SCHEMES = ("ideal", "fixed_power", "only_pc", "only_pf", "two_timescale")
SEEDS = (0, 1)

#: Columns computed from trained weights; everything else is network-side and hashed exactly.
#: (AirComp's normalisation and noise statistics are the learner's floats too.)
TRAINING_COLUMNS = (
    "loss",
    "accuracy",
    "stable_fraction",
    "aircomp_scale",
    "aircomp_noise_std",
    "aircomp_noise_mean",
    "aircomp_noise_rms",
    "update_mean",
    "update_std",
)
#: Relative tolerance on the evaluation loss between machines. Measured drift across torch's and
#: oneDNN's CPU kernels (AVX-512 / AVX2 / SSE / none) and 1, 2 or 4 threads on the golden runs: at
#: most 1.4e-5 (``--drift``; docs/decisions.md, "Golden traces"); a 1 % change of the learning
#: rate moves it by 7e-4 or more. 1e-4 sits 7x from both.
LOSS_RTOL = 1e-4
#: Absolute tolerance on the accuracy: single test images flip between CPU kernels (measured: one
#: of 2000 MNIST images; Intel vs AMD: 5 of 10 MNIST runs differ); 0.006 is two digits images (of
#: 360) or twelve MNIST ones (of 2000).
ACCURACY_ATOL = 0.006
#: Relative tolerance on the stable fraction (a count ratio over parameters; like the loss).
STABLE_RTOL = 1e-4


def paper_network(scheme: str, seed: int) -> dict[str, Any]:
    """The paper's MNIST setting (30 devices, 1000 m, tau_0 = 0.8 s), network only, 3 frames."""
    return {
        "name": "golden_network",
        "seed": seed,
        "run": {"frames": 3, "slots_per_frame": 20, "deadline_s": 0.8},
        "network": {"num_devices": 30, "cell_radius_m": 1000.0},
        "mobility": {"model": "static"},
        "devices": {
            "batch_size": 512,
            "energy_budget_j": {"dist": "uniform", "low": 0.30, "high": 0.45},
        },
        "learning": {"enabled": False, "num_params": 440_812},
        "scheme": {"name": scheme, "V": 100.0},
    }


def digits(scheme: str, seed: int) -> dict[str, Any]:
    """Digits MLP with training, moving devices, small batches (the vmap gradient path); a 1 MHz
    band makes the upload cost enough for the controller to freeze."""
    return {
        "name": "golden_digits",
        "seed": seed,
        "run": {"frames": 3, "slots_per_frame": 4, "deadline_s": 0.1},
        "network": {"num_devices": 12, "cell_radius_m": 1000.0, "bandwidth_hz": 1e6},
        "mobility": {"model": "random_waypoint", "speed_mps": [0.5, 1.5], "pause_s": 5.0},
        "devices": {
            "batch_size": 32,
            "energy_budget_j": {"dist": "uniform", "low": 0.01, "high": 0.02},
        },
        "learning": {
            "dataset": "digits",
            "model": "mlp",
            "lr": 0.5,
            "eval_every_slots": 4,
        },
        "scheme": {"name": scheme, "V": 100.0},
    }


def digits_per_device(scheme: str, seed: int) -> dict[str, Any]:
    """Digits MLP with batches of 300 (> 256: the per-device autograd path), unequal budgets."""
    return {
        "name": "golden_digits_b300",
        "seed": seed,
        "run": {"frames": 3, "slots_per_frame": 3, "deadline_s": 0.8},
        "network": {"num_devices": 4, "cell_radius_m": 500.0, "bandwidth_hz": 0.2e6},
        "mobility": {"model": "static"},
        "devices": {"batch_size": 300, "energy_budget_j": [0.05, 0.1, 0.15, 0.2]},
        "learning": {"dataset": "digits", "model": "mlp", "lr": 0.3, "eval_every_slots": 3},
        "scheme": {"name": scheme, "V": 1.0},
        "trace": {"late_upload_energy": "full"},
    }


def mnist_cnn(scheme: str, seed: int) -> dict[str, Any]:
    """The paper's CNN on non-IID MNIST with training, 8 devices x 64 samples, 3 frames x 3 slots."""
    return {
        "name": "golden_mnist",
        "seed": seed,
        "run": {"frames": 3, "slots_per_frame": 3, "deadline_s": 0.8},
        "network": {"num_devices": 8, "cell_radius_m": 1000.0},
        "mobility": {"model": "static"},
        "devices": {
            "batch_size": 64,
            "energy_budget_j": {"dist": "uniform", "low": 0.03, "high": 0.06},
        },
        "learning": {
            "dataset": "mnist",
            "model": "cnn_mnist",
            "partition": "dirichlet",
            "dirichlet_alpha": 0.3,
            "lr": 0.05,
            "eval_every_slots": 3,
            "eval_max_samples": 2000,
        },
        "scheme": {"name": scheme, "V": 100.0},
    }


def composed(server: str, uplink: str, churn: bool, training: bool) -> dict[str, Any]:
    """A small cell whose features compose: Rayleigh fading, unequal batch sizes, compute
    jitter, optionally churn ([availability]) and a shared uplink, under a server mode."""
    data: dict[str, Any] = {
        "name": f"golden_{server}_{uplink}",
        "seed": 5,
        "run": {"frames": 3, "slots_per_frame": 4, "deadline_s": 0.1},
        "network": {"num_devices": 10, "cell_radius_m": 500.0},
        "channel": {"fading": "rayleigh"},
        "mobility": {"model": "static"},
        "devices": {
            "batch_size": [16, 16, 24, 24, 32, 16, 16, 24, 24, 32],
            "cpu_hz": 2e9,
            "cycles_per_sample": 2e6,
            "energy_budget_j": 0.04,
        },
        "compute": {"jitter": {"model": "background_load", "probability": 0.3, "mean_extra": 2.0}},
        "learning": {"dataset": "digits", "model": "mlp", "lr": 0.3, "eval_every_slots": 4}
        if training
        else {"enabled": False, "num_params": 20_000},
        "scheme": {"name": "ideal" if server != "sync" else "two_timescale", "V": 50.0},
    }
    if server == "semi_sync":
        data["server"] = {"mode": "semi_sync", "staleness": {"function": "polynomial"}}
    elif server == "async":
        data["server"] = {"mode": "async", "buffer_size": 3, "max_staleness": 4}
    if uplink != "dedicated":
        data["uplink"] = {"mode": uplink, "planned_concurrent_uploads": 3}
    if churn:
        data["availability"] = {
            "model": "markov",
            "online_s": {"dist": "exponential", "mean": 0.6},
            "offline_s": {"dist": "exponential", "mean": 0.3},
        }
    return data


#: The composition runs (server mode, uplink, churn, training): recorded before the server seam
#: was built, so that every server mode keeps its trace through refactors; the last two (a shared
#: uplink under stale updates) when stale servers learned to share the band.
COMPOSED = (
    ("sync", "ofdma", True, False),
    ("sync", "tdma", False, False),
    ("sync", "dedicated", True, True),
    ("semi_sync", "dedicated", True, True),
    ("semi_sync", "dedicated", False, False),
    ("async", "dedicated", True, True),
    ("async", "dedicated", True, False),
    ("async", "ofdma", True, False),
    ("semi_sync", "tdma", False, False),
)


def golden_runs() -> dict[str, tuple[dict[str, Any], bool]]:
    """Run name -> (scenario table, needs MNIST)."""
    runs: dict[str, tuple[dict[str, Any], bool]] = {}
    for scheme in SCHEMES:
        for seed in SEEDS:
            runs[f"network-{scheme}-s{seed}"] = (paper_network(scheme, seed), False)
            runs[f"digits-{scheme}-s{seed}"] = (digits(scheme, seed), False)
            runs[f"mnist-{scheme}-s{seed}"] = (mnist_cnn(scheme, seed), True)
    for scheme in ("two_timescale", "only_pf"):
        runs[f"digits_b300-{scheme}-s0"] = (digits_per_device(scheme, 0), False)
    for server, uplink, churn, training in COMPOSED:
        name = f"composed-{server}-{uplink}{'-churn' if churn else ''}"
        runs[name + ("-digits" if training else "-network")] = (
            composed(server, uplink, churn, training),
            False,
        )
    return runs


def column_hashes(table: pa.Table, exclude: tuple[str, ...] = ()) -> dict[str, str]:
    """One SHA-256 per column over its values and null mask (``event`` as decoded strings);
    a column in ``exclude`` is hashed by its null mask only (``name#valid``)."""
    out: dict[str, str] = {"__rows__": str(table.num_rows)}
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        h = hashlib.sha256(str(col.type).encode())
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        h.update(np.packbits(valid).tobytes())
        if name in exclude:
            out[f"{name}#valid"] = h.hexdigest()
            continue
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            values = "\x00".join("" if v is None else v for v in col.to_pylist())
            h.update(values.encode())
        else:
            filled = col.fill_null(False if pa.types.is_boolean(col.type) else 0)
            h.update(np.ascontiguousarray(filled.to_numpy(zero_copy_only=False)).tobytes())
        out[name] = h.hexdigest()
    return out


def training_values(table: pa.Table) -> dict[str, list[float]]:
    """The non-null values of each training column, in row order (NaN kept as NaN)."""
    out: dict[str, list[float]] = {}
    for name in TRAINING_COLUMNS:
        if name in table.column_names:
            col = table.column(name).drop_null()
            out[name] = [float(v) for v in col.to_numpy(zero_copy_only=False)]
    return out


def golden_record(table: pa.Table) -> dict[str, Any]:
    """What is stored of one golden run: exact hashes and the training values."""
    return {
        "hashes": column_hashes(table, exclude=TRAINING_COLUMNS),
        "training": training_values(table),
        # columns that record nothing in this run (null in every row): a column added to the
        # schema later is null in every row of a run that does not use it
        "null_columns": sorted(
            n for n in table.column_names if table.column(n).null_count == len(table)
        ),
    }


def compare(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Differences between two golden records, one line each (empty: equal within tolerance)."""
    problems = [
        f"column {k} changed"
        for k in sorted(expected["hashes"])
        if got["hashes"].get(k) != expected["hashes"][k]
    ]
    null = set(got.get("null_columns", ()))
    # a column added later is null in every row of a run that does not use it (a training
    # column's hash is of its null mask alone: "name#valid")
    new = {k for k in set(got["hashes"]) - set(expected["hashes"]) if k.split("#")[0] not in null}
    problems += [f"column {k} is new" for k in sorted(new)]
    tolerances = {
        "loss": (LOSS_RTOL, 0.0),
        "accuracy": (0.0, ACCURACY_ATOL),
        "stable_fraction": (STABLE_RTOL, 0.0),
        # statistics of updates and of the noise drawn on them: as the loss (no golden run is
        # over the air yet: measure their drift with --drift when one is added)
        **{name: (LOSS_RTOL, 0.0) for name in TRAINING_COLUMNS[3:]},
    }
    for name, want in expected["training"].items():
        have = got["training"].get(name, [])
        if len(have) != len(want):
            problems.append(f"{name}: {len(have)} values, expected {len(want)}")
            continue
        rtol, atol = tolerances[name]
        a, b = np.asarray(have, dtype=float), np.asarray(want, dtype=float)
        bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        if bad.any():
            i = int(np.argmax(bad))
            problems.append(
                f"{name}: {int(bad.sum())} of {len(b)} values differ beyond rtol={rtol}, "
                f"atol={atol} (first: {a[i]!r} vs recorded {b[i]!r})"
            )
    return problems


def platform_fingerprint() -> dict[str, str]:
    """The machine a record was made on (informational: the tests run on every machine)."""
    import torch

    flags = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        line = next(x for x in text.splitlines() if x.startswith("flags"))
        have = set(line.split(":", 1)[1].split())
        flags = ",".join(
            f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if f in have
        )
    except (OSError, StopIteration):
        pass
    model = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        model = next(x for x in text.splitlines() if x.startswith("model name")).split(":")[1]
    except (OSError, StopIteration, IndexError):
        pass
    return {
        "machine": platform.machine(),
        "cpu": model.strip() or platform.processor(),
        "cpu_flags": flags,
        "numpy": np.__version__,
        "torch": torch.__version__,
        "torch_threads": str(torch.get_num_threads()),
    }


def run_table(scenario: dict[str, Any]) -> pa.Table:
    """The events table of one scenario run in memory (no files)."""
    sys.path.insert(0, str(HERE))
    from conftest import run_in_memory

    table, _ = run_in_memory(scenario)
    return table


def _runnable() -> dict[str, tuple[dict[str, Any], bool]]:
    from conftest import HAS_MNIST

    runs = golden_runs()
    missing = [name for name, (_, needs_mnist) in runs.items() if needs_mnist and not HAS_MNIST]
    if missing:
        raise SystemExit(f"{missing[0]} needs MNIST: set WFLSIM_DATA_DIR")
    return runs


def record(only_new: bool = False) -> None:
    """Run every golden run and write the golden file (hashes and training values); with
    ``only_new``, run only those the file does not hold yet and keep the others' records."""
    runs: dict[str, dict[str, Any]] = {}
    known: dict[str, Any] = {}
    machine = platform_fingerprint()
    if only_new and GOLDEN_FILE.is_file():
        old = json.loads(GOLDEN_FILE.read_text())
        known, machine = old["runs"], old["recorded_on"]
    for name, (scenario, _) in _runnable().items():
        if name in known:
            runs[name] = known[name]
            continue
        runs[name] = golden_record(run_table(scenario))
        print(f"recorded {name}: {runs[name]['hashes']['__rows__']} rows", file=sys.stderr)
    GOLDEN_FILE.parent.mkdir(exist_ok=True)
    GOLDEN_FILE.write_text(
        json.dumps({"recorded_on": machine, "runs": runs}, indent=1, sort_keys=True) + "\n"
    )


def dump(out: Path) -> None:
    """Write every training golden run's record to ``out`` (JSON), for :func:`drift`."""
    runs = {
        name: golden_record(run_table(scenario))
        for name, (scenario, _) in _runnable().items()
        if scenario["learning"].get("enabled", True)
    }
    out.write_text(json.dumps({"platform": platform_fingerprint(), "runs": runs}))


#: The variants :func:`drift` runs: torch's own CPU kernel family (``ATEN_CPU_CAPABILITY``; on a
#: CPU without AVX-512 the first falls back to AVX2), oneDNN's instruction set (its convolutions and
#: matrix products choose their blocking by it, as they do by CPU vendor and cache sizes) and the
#: number of threads.
DRIFT_VARIANTS: dict[str, dict[str, str]] = {
    "avx512, 2 threads": {"ATEN_CPU_CAPABILITY": "avx512", "OMP_NUM_THREADS": "2"},
    "avx2, 2 threads": {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "2"},
    "no SIMD, 2 threads": {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "2"},
    "avx512, 1 thread": {"ATEN_CPU_CAPABILITY": "avx512", "OMP_NUM_THREADS": "1"},
    "avx2, 4 threads": {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "4"},
    "oneDNN AVX2, 2 threads": {"ONEDNN_MAX_CPU_ISA": "AVX2", "OMP_NUM_THREADS": "2"},
    "oneDNN SSE4.1, no SIMD, 2 threads": {
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "ATEN_CPU_CAPABILITY": "default",
        "OMP_NUM_THREADS": "2",
    },
}


def drift() -> None:
    """Measure how far the training columns move between kernel families and thread counts.

    Runs the training golden runs once per :data:`DRIFT_VARIANTS` entry (a fresh process each),
    checks that every exact hash agrees, and prints the largest relative loss difference and the
    largest accuracy difference against the first variant."""
    records: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, env in DRIFT_VARIANTS.items():
            out = Path(tmp) / "dump.json"
            subprocess.run(
                [sys.executable, __file__, "--dump", str(out)],
                env={**os.environ, **env},
                check=True,
            )
            records[label] = json.loads(out.read_text())["runs"]
            print(f"ran {label}", file=sys.stderr)
    base_label, base = next(iter(records.items()))
    print(f"reference: {base_label}; {len(base)} training runs")
    print("| variant | hashed columns equal | max rel. loss diff | max accuracy diff |")
    print("|---|---|---|---|")
    for label, runs in list(records.items())[1:]:
        equal = all(runs[n]["hashes"] == base[n]["hashes"] for n in base)
        loss = max(
            float(np.max(np.abs(np.subtract(runs[n]["training"]["loss"], ref)) / np.abs(ref)))
            for n in base
            if (ref := np.asarray(base[n]["training"]["loss"])).size
        )
        acc = max(
            float(np.max(np.abs(np.subtract(runs[n]["training"]["accuracy"], ref))))
            for n in base
            if (ref := np.asarray(base[n]["training"]["accuracy"])).size
        )
        print(f"| {label} | {equal} | {loss:.2e} | {acc:.2e} |")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    parser = argparse.ArgumentParser(description="Record the golden traces or measure CPU drift.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--record", action="store_true", help="write tests/golden/hashes.json")
    group.add_argument(
        "--record-new",
        action="store_true",
        help="record only the runs tests/golden/hashes.json does not hold yet",
    )
    group.add_argument("--drift", action="store_true", help="measure the training columns' drift")
    group.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.record or args.record_new:
        record(only_new=args.record_new)
    elif args.drift:
        drift()
    else:
        dump(args.dump)
