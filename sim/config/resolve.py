"""Resolving a validated scenario against the world: per-device values, the deadline's
feasibility, the data directory and the model size. Every problem is a
:class:`wflsim.sim.errors.ScenarioError` naming the field and the fix; nothing is written.
"""

from __future__ import annotations

import math
import os
import shlex
from pathlib import Path

import numpy as np

from ..errors import ScenarioError
from ..rng import Streams
from ..world.system import DeviceArrays
from .catalogue import (
    DATASET_FILES,
    DatasetError,
    epoch_steps,
    iid_partition_sizes,
    model_num_params,
    train_samples,
)
from .distributions import DEVICE_BOUNDS, per_device_values
from .limits import path_problem, shorten
from .schema import DevicesConfig, LearningConfig, RunConfig, Scenario

#: The per-device fields in stream order (the index keys each field's random stream) and
#: whether each is an integer; their ranges are :data:`DEVICE_BOUNDS`, checked after resolution.
_DEVICE_FIELDS: dict[str, bool] = {
    "cpu_hz": False,
    "cycles_per_sample": False,
    "capacitance": False,
    "batch_size": True,
    "peak_power_w": False,
    "energy_budget_j": False,
}


def resolve_devices(cfg: DevicesConfig, num_devices: int, streams: Streams) -> DeviceArrays:
    """Resolve every per-device field to an array of ``num_devices`` values.

    Raises:
        ScenarioError: a list of the wrong length, or a value out of range.
    """
    out: dict[str, np.ndarray] = {}
    for index, (name, integer) in enumerate(_DEVICE_FIELDS.items()):
        values = per_device_values(
            getattr(cfg, name),
            num_devices,
            streams,
            index,
            f"devices.{name}",
            DEVICE_BOUNDS[name],
            integer,
        )
        out[name] = values.astype(np.int64) if integer else values
    return DeviceArrays(**out)


def check_deadline(
    run: RunConfig, devices: DeviceArrays, learning: LearningConfig | None = None
) -> None:
    """Every device must be able to compute a full (gamma = 0) local update before the deadline.

    Raises:
        ScenarioError: on ``run.deadline_s``, naming the slowest device and its compute time;
            on ``learning.local_steps`` / ``learning.local_epochs`` when one gradient would fit
            but the device's ``E_n`` local steps do not.
    """
    t = devices.full_compute_time_s()
    worst = int(np.argmax(t))
    if t[worst] < run.deadline_s:
        return
    steps = int(devices.local_steps[worst])
    one = float(t[worst]) / steps
    if steps > 1 and one < run.deadline_s:
        epochs = learning is not None and learning.local_epochs is not None
        fits = math.ceil(run.deadline_s / one) - 1
        raise ScenarioError(
            "learning.local_epochs" if epochs else "learning.local_steps",
            f"device {worst}'s {steps} local steps take c*B*E/f = {t[worst]:.4g} s, not below "
            f"run.deadline_s = {run.deadline_s:g} s, so no upload could ever arrive in time",
            f"{fits} local step(s) fit on that device: "
            + (f"use learning.local_steps <= {fits}" if epochs else "lower learning.local_steps")
            + ", or raise run.deadline_s or devices.cpu_hz",
        )
    raise ScenarioError(
        "run.deadline_s",
        f"{run.deadline_s:g} s is not above device {worst}'s compute time c*B*E/f = {t[worst]:.4g} s, "
        "so no upload could ever arrive in time",
        f"raise run.deadline_s above {t[worst]:.4g} s, or raise devices.cpu_hz / lower devices.batch_size",
    )


def resolve_local_steps(
    learning: LearningConfig, batch_size: np.ndarray, num_samples: np.ndarray | None = None
) -> np.ndarray:
    """``E_n``, the local SGD steps of each device per update, ``(N,)`` int64.

    ``learning.local_steps`` (unset: 1, FedSGD) for every device, or with ``local_epochs = k``
    ``k ceil(D_n / B_n)``. ``D_n`` are ``num_samples`` (the partition's sizes, which the learner
    knows once it has made the partition); without them, the IID partition's sizes of the
    dataset's training split (the catalogue's, no data loaded), or, for a Dirichlet partition
    (known only from the labels), ``k`` (a lower bound: every device takes at least ``k``
    steps) until the learner has made the partition (``wflsim.app.run.partition_system``).
    """
    n = batch_size.shape[0]
    if learning.local_epochs is None:
        return np.full(n, learning.local_steps or 1, dtype=np.int64)
    if num_samples is None:
        if learning.partition != "iid":
            return np.full(n, learning.local_epochs, dtype=np.int64)
        m = train_samples(learning.dataset)
        if m < n:
            raise ScenarioError(
                "network.num_devices",
                f"{n} devices but dataset {learning.dataset!r} has {m} training samples; every "
                "device needs at least one",
                f"use at most {m} devices, or a larger dataset",
            )
        num_samples = iid_partition_sizes(m, n)
    return epoch_steps(learning.local_epochs, num_samples, batch_size)


def resolve_data_dir(cli_value: str | None, scenario: Scenario, base_dir: Path | None) -> Path:
    """The data directory: ``--data-dir`` > ``learning.data_dir`` > ``$WFLSIM_DATA_DIR`` > ``./data``.

    A relative ``learning.data_dir`` is relative to the scenario file's folder; the others to the
    current directory.
    """
    if cli_value:
        return default_data_dir(cli_value)
    if scenario.learning.data_dir:
        p = Path(scenario.learning.data_dir).expanduser()
        return p if p.is_absolute() or base_dir is None else base_dir / p
    return default_data_dir(None)


def default_data_dir(cli_value: str | None, flag: str = "--data-dir") -> Path:
    """The data directory without a scenario (``wflsim data fetch``): ``cli_value`` (the option
    ``flag``) > ``$WFLSIM_DATA_DIR`` > ``./data``, relative to the current directory.

    Raises:
        ScenarioError: on ``flag`` or ``WFLSIM_DATA_DIR``, a path the system could not use.
    """
    if cli_value:
        _check_path(cli_value, flag)
        return Path(cli_value).expanduser()
    env = os.environ.get("WFLSIM_DATA_DIR")
    if env:
        _check_path(env, "WFLSIM_DATA_DIR")
        return Path(env).expanduser()
    return Path("data")


def _check_path(text: str, field: str) -> None:
    problem = path_problem(text)
    if problem is not None:
        raise ScenarioError(field, f"{problem} (got {shorten(text)!r})", "give a usable path")


def check_data_dir(dataset: str, data_dir: Path) -> None:
    """Check that a file-based dataset's files are where torchvision will look for them.

    Raises:
        ScenarioError: on ``learning.data_dir`` with the missing file and the fix.
    """
    needed = DATASET_FILES.get(dataset)
    if not needed:
        return
    try:
        missing = [f for f in needed if not (data_dir / f).is_file()]
    except OSError as err:
        raise ScenarioError(
            "learning.data_dir",
            f"cannot look into {shorten(str(data_dir))!r} ({err.strerror or type(err).__name__})",
            "point --data-dir, learning.data_dir or WFLSIM_DATA_DIR at a readable folder",
        ) from None
    if missing:
        raise ScenarioError(
            "learning.data_dir",
            f"dataset {dataset!r} not found in {str(data_dir)!r} (missing {missing[0]})",
            f"download it with wflsim data fetch {dataset} --dir {shlex.quote(str(data_dir))} "
            "(or add --download to run or validate), or point --data-dir, learning.data_dir or "
            f"WFLSIM_DATA_DIR at the folder that holds {needed[0].split('/')[0]}/ (torchvision's "
            'layout), or use dataset = "digits"',
        )


def payload_num_params(learning: LearningConfig) -> int:
    """``D`` for the payload ``S = bits_per_param * D``: ``learning.num_params`` or the model's count."""
    if learning.num_params is not None:
        return learning.num_params
    try:
        return model_num_params(learning.model, learning.dataset)
    except DatasetError as err:  # a model registered from Python that cannot be built
        raise ScenarioError(err.field, err.problem, err.fix) from None
