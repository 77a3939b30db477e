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
from ..privacy.calibrate import calibrate_noise_multiplier
from ..privacy.mechanism import PrivacySpec
from ..registry import model_num_params, train_samples
from ..rng import Streams
from ..updates import OverTheAir
from ..world.availability import AlwaysConfig
from ..world.system import DeviceArrays
from .catalogue import DATASET_FILES, DatasetError, epoch_steps, iid_partition_sizes
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


#: The schemes' slot power rules under which every device is a candidate in every slot (no
#: threshold against its channel): "no outage" (Ideal FL, Only-PF) and peak power
#: (``fixed_power``); under Proposition 1's threshold who may take part depends on the channel.
EVERY_DEVICE_POWER_RULES = ("no_outage", "peak")


def privacy_updates_bound(scenario: Scenario) -> int:
    """The most updates one device can have applied in a run, for the calibration of ``z``
    (docs/privacy.md, "Calibration"): one per slot in ``sync`` and ``semi_sync`` (a cycle
    starts at a slot start only, and a device has one in flight at most), ``frames x slots``;
    ``async`` takes the same count (a device that applies more stops at its budget, which
    ``target_epsilon`` sets by default: docs/decisions.md)."""
    return scenario.run.frames * scenario.run.slots_per_frame


def resolve_privacy(
    scenario: Scenario, scheme_power: str | None = None, noise_multiplier: float | None = None
) -> PrivacySpec | None:
    """The run's ``[privacy]`` resolved (None without the table): the combinations across
    tables refused with the physical reason, ``z`` calibrated for ``target_epsilon``.

    Args:
        scenario: a validated scenario.
        scheme_power: the scheme's slot power rule (``threshold``, ``no_outage``, ``peak``;
            None: unknown, a scheme of one's own), which decides whether every device is a
            candidate in every slot (``amplification = "uniform_selection"``).
        noise_multiplier: the ``z`` a run calibrated before (a resumed run's, from its
            manifest): taken as it is, nothing calibrated again.

    Raises:
        ScenarioError: naming the ``privacy.*`` field and the fix.
    """
    cfg = scenario.privacy
    if cfg is None:
        return None
    over_air = cfg.mechanism == "over_the_air"
    if over_air and scenario.uplink.mode != "aircomp":
        raise ScenarioError(
            "privacy.mechanism",
            f'"over_the_air" makes the receiver\'s noise part of the mechanism, which needs an '
            f'over-the-air sum; uplink.mode is "{scenario.uplink.mode}" (digital uploads, each '
            "decoded on its own)",
            'set [uplink] mode = "aircomp", or use mechanism = "central" or "local"',
        )
    if over_air and "privacy_multipliers" not in getattr(OverTheAir, "__dataclass_fields__", {}):
        raise ScenarioError(
            "privacy.mechanism",
            "\"over_the_air\" needs the radio's per-device multipliers, which this build's "
            "over-the-air sum does not give",
            'use mechanism = "central" or "local"',
        )
    if cfg.amplification == "uniform_selection":
        _check_amplification(scenario, scheme_power)
    if over_air and cfg.air_noise == "channel_only" and cfg.epsilon_budget is not None:
        raise ScenarioError(
            "privacy.epsilon_budget",
            'air_noise = "channel_only" gives no floor z on the noise, so whether one more '
            "update stays within the budget is not known before it is sent",
            'remove epsilon_budget, or use air_noise = "receiver" with noise_multiplier',
        )
    n = scenario.network.num_devices
    spec = PrivacySpec.from_config(cfg, n)
    z = noise_multiplier
    if z is None and cfg.target_epsilon is not None:
        steps = privacy_updates_bound(scenario)
        q = None
        if cfg.amplification == "uniform_selection":
            k = scenario.strategy.selection.k
            assert k is not None, "a uniform selection has k"
            q = min(1.0, k / n)
        try:
            z = calibrate_noise_multiplier(
                cfg.target_epsilon,
                cfg.delta,
                steps,
                cfg.accountant,
                sampling_probability=q,
                clipped_count_std=spec.clipped_count_std,
            )
        except ValueError as err:  # its words name the field and the fix
            text = str(err).splitlines()[0].removeprefix("privacy.target_epsilon: ")
            raise ScenarioError("privacy.target_epsilon", text) from None
    spec = PrivacySpec.from_config(cfg, n, z)
    try:
        spec.update_multiplier  # noqa: B018 (adaptive clipping: the count's noise must leave room)
    except ValueError as err:
        raise ScenarioError(
            "privacy.clipped_count_std",
            str(err),
            'raise clipped_count_std above z / 2, or use clipping = "fixed"',
        ) from None
    return spec


def _check_amplification(scenario: Scenario, scheme_power: str | None) -> None:
    """``amplification = "uniform_selection"`` needs every device to be a candidate in every
    step, and the server to draw ``k`` of them uniformly: then each device is in a step with
    probability ``k / N`` whatever its data and its channel.

    Raises:
        ScenarioError: on ``privacy.amplification``, with what makes the candidates depend on
            something else.
    """
    field = "privacy.amplification"
    fix = 'or use amplification = "none"'
    if scenario.strategy.selection.rule != "uniform":
        raise ScenarioError(
            field,
            "amplification by subsampling needs a uniformly random selection; "
            f'[strategy.selection] rule is "{scenario.strategy.selection.rule}"',
            f'set [strategy.selection] rule = "uniform" with k, {fix}',
        )
    if scenario.server.mode != "sync":
        raise ScenarioError(
            field,
            f'under server.mode = "{scenario.server.mode}" a device busy with an earlier upload '
            "is no candidate, and how long it stays busy depends on its channel",
            f'use server.mode = "sync", {fix}',
        )
    if not isinstance(scenario.availability, AlwaysConfig):
        raise ScenarioError(
            field,
            "a device offline is no candidate: the selection is then among the devices "
            "online, not uniform over all",
            f'use [availability] model = "always", {fix}',
        )
    if scheme_power not in EVERY_DEVICE_POWER_RULES:
        raise ScenarioError(
            field,
            f"scheme {scenario.scheme.name!r} lets a device take part only when its channel "
            "allows (a power threshold), so the candidates depend on the channel",
            "use a scheme under which every device is a candidate in every slot (ideal, "
            f"only_pf, fixed_power), {fix}",
        )
