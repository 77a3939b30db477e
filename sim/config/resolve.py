"""Resolving a validated scenario against the world: per-device values, the deadline's
feasibility, the data directory and the model size. Every problem is a
:class:`sim.errors.ScenarioError` naming the field and the fix; nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from wflsim.sim.config.catalogue import DATASET_FILES, model_num_params
from wflsim.sim.config.distributions import draw
from wflsim.sim.config.schema import DevicesConfig, LearningConfig, RunConfig, Scenario
from wflsim.sim.errors import ScenarioError
from wflsim.sim.rng import Streams
from wflsim.sim.world.system import DeviceArrays

#: Lower bounds of the per-device fields (strict: > bound), checked after resolution.
_DEVICE_FIELDS: dict[str, tuple[float, bool]] = {
    # name: (bound, integer)
    "cpu_hz": (0.0, False),
    "cycles_per_sample": (0.0, False),
    "capacitance": (-1.0, False),  # >= 0 checked separately (0 = free computation)
    "batch_size": (0.0, True),
    "peak_power_w": (0.0, False),
    "energy_budget_j": (-1.0, False),  # >= 0
}


def resolve_devices(cfg: DevicesConfig, num_devices: int, streams: Streams) -> DeviceArrays:
    """Resolve every per-device field to an array of ``num_devices`` values.

    Raises:
        ScenarioError: a list of the wrong length, or a value out of range.
    """
    out: dict[str, np.ndarray] = {}
    for index, (name, (bound, integer)) in enumerate(_DEVICE_FIELDS.items()):
        spec = getattr(cfg, name)
        field = f"devices.{name}"
        if isinstance(spec, list):
            if len(spec) != num_devices:
                raise ScenarioError(
                    field,
                    f"has {len(spec)} values but network.num_devices is {num_devices}",
                    "give one value, a list of num_devices values, or a distribution",
                )
            values = np.asarray(spec, dtype=np.float64)
        elif isinstance(spec, int | float):
            values = np.full(num_devices, float(spec))
        else:
            values = np.array(
                [draw(spec, streams.device("device_params", n, index)) for n in range(num_devices)]
            )
        if not np.all(np.isfinite(values)):
            raise ScenarioError(field, "must be finite")
        if integer:
            values = np.rint(values)
            if np.any(values > 2**31 - 1):
                n = int(np.argmax(values > 2**31 - 1))
                raise ScenarioError(
                    field,
                    f"must be at most {2**31 - 1} (device {n} has {values[n]:g})",
                    "use a realistic value",
                )
        if bound < 0:
            bad = values < 0
            need = ">= 0"
        else:
            bad = values <= bound
            need = f"> {bound:g}"
        if np.any(bad):
            n = int(np.argmax(bad))
            raise ScenarioError(
                field, f"must be {need} for every device (device {n} has {values[n]:g})"
            )
        out[name] = values.astype(np.int64) if integer else values
    return DeviceArrays(**out)


def check_deadline(run: RunConfig, devices: DeviceArrays) -> None:
    """Every device must be able to compute a full (gamma = 0) gradient before the deadline.

    Raises:
        ScenarioError: on ``run.deadline_s``, naming the slowest device and its compute time.
    """
    t = devices.full_compute_time_s()
    worst = int(np.argmax(t))
    if t[worst] >= run.deadline_s:
        raise ScenarioError(
            "run.deadline_s",
            f"{run.deadline_s:g} s is not above device {worst}'s compute time c*B/f = {t[worst]:.4g} s, "
            "so no upload could ever arrive in time",
            f"raise run.deadline_s above {t[worst]:.4g} s, or raise devices.cpu_hz / lower devices.batch_size",
        )


def resolve_data_dir(cli_value: str | None, scenario: Scenario, base_dir: Path | None) -> Path:
    """The data directory: ``--data-dir`` > ``learning.data_dir`` > ``$WFLSIM_DATA_DIR`` > ``./data``.

    A relative ``learning.data_dir`` is relative to the scenario file's folder; the others to the
    current directory.
    """
    if cli_value:
        return Path(cli_value).expanduser()
    if scenario.learning.data_dir:
        p = Path(scenario.learning.data_dir).expanduser()
        return p if p.is_absolute() or base_dir is None else base_dir / p
    env = os.environ.get("WFLSIM_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path("data")


def check_data_dir(dataset: str, data_dir: Path) -> None:
    """Check that a file-based dataset's files are where torchvision will look for them.

    Raises:
        ScenarioError: on ``learning.data_dir`` with the missing file and the fix.
    """
    needed = DATASET_FILES.get(dataset)
    if not needed:
        return
    missing = [f for f in needed if not (data_dir / f).is_file()]
    if missing:
        raise ScenarioError(
            "learning.data_dir",
            f"dataset {dataset!r} not found in {str(data_dir)!r} (missing {missing[0]})",
            "point --data-dir, learning.data_dir or WFLSIM_DATA_DIR at the folder that holds "
            f'{needed[0].split("/")[0]}/ (torchvision\'s layout), or use dataset = "digits"',
        )


def payload_num_params(learning: LearningConfig) -> int:
    """``D`` for the payload ``S = bits_per_param * D``: ``learning.num_params`` or the model's count."""
    if learning.num_params is not None:
        return learning.num_params
    return model_num_params(learning.model, learning.dataset)
