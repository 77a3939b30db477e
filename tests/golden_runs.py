"""Golden traces: short runs of every scheme whose events tables must not change under refactors.

Each run is a scenario table; its events table is reduced to one SHA-256 per column (values and
null mask, independent of Arrow chunking and Parquet encoding) plus the row count. The hashes live
in ``tests/golden/hashes.json`` (the tables themselves are never committed).

Record (only after a deliberate change of results, in a commit of its own that says why)::

    WFLSIM_DATA_DIR=../shared/datasets python tests/golden_runs.py --record

Floating-point results depend on the platform (CPU instruction set, numpy and torch builds, the
number of torch threads), so the file also records the platform it was made on; on another
platform the golden tests skip with that reason instead of failing spuriously.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
GOLDEN_FILE = HERE / "golden" / "hashes.json"
SCHEMES = ("ideal", "fixed_power", "only_pc", "only_pf", "two_timescale")
SEEDS = (0, 1)


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
    return runs


def column_hashes(table: pa.Table) -> dict[str, str]:
    """One SHA-256 per column over its values and null mask (``event`` as decoded strings)."""
    out: dict[str, str] = {"__rows__": str(table.num_rows)}
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        h = hashlib.sha256(str(col.type).encode())
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        h.update(np.packbits(valid).tobytes())
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            values = "\x00".join("" if v is None else v for v in col.to_pylist())
            h.update(values.encode())
        else:
            filled = col.fill_null(False if pa.types.is_boolean(col.type) else 0)
            h.update(np.ascontiguousarray(filled.to_numpy(zero_copy_only=False)).tobytes())
        out[name] = h.hexdigest()
    return out


def platform_fingerprint() -> dict[str, str]:
    """What floating-point results depend on besides the code."""
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
    return {
        "machine": platform.machine(),
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


def record() -> None:
    """Run every golden run that can run here and write the hashes file."""
    from conftest import HAS_MNIST

    hashes: dict[str, dict[str, str]] = {}
    for name, (scenario, needs_mnist) in golden_runs().items():
        if needs_mnist and not HAS_MNIST:
            raise SystemExit(f"{name} needs MNIST: set WFLSIM_DATA_DIR")
        hashes[name] = column_hashes(run_table(scenario))
        print(f"recorded {name}: {hashes[name]['__rows__']} rows", file=sys.stderr)
    GOLDEN_FILE.parent.mkdir(exist_ok=True)
    GOLDEN_FILE.write_text(
        json.dumps({"platform": platform_fingerprint(), "runs": hashes}, indent=1, sort_keys=True)
        + "\n"
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit("usage: python tests/golden_runs.py --record")
    sys.path.insert(0, str(HERE))
    record()
