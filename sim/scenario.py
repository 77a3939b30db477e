"""Scenario files: TOML in, a validated :class:`Scenario` out.

A scenario is validated in full before anything is written: types and ranges (pydantic), unknown
fields, the scheme's own parameters, per-device values resolved for the actual number of devices,
feasibility of the deadline against every device's compute time, the data directory, and the
mobility trace. Every problem is reported as :class:`sim.errors.ScenarioError` naming the dotted
field and the fix.

Per-device fields (``[devices]``) accept one value, a list of ``num_devices`` values, or a
distribution table such as ``{ dist = "uniform", low = 0.30, high = 0.45 }``. Each device draws
each distributed field from its own random stream, so adding a device never changes the values of
the others.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from sim import physics
from sim.errors import ScenarioError
from sim.mobility import MobilityConfig
from sim.rng import Streams

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# ---------------------------------------------------------------- per-device values


class Uniform(_Strict):
    """Uniform on ``[low, high]``."""

    dist: Literal["uniform"]
    low: float = Field(allow_inf_nan=False)
    high: float = Field(allow_inf_nan=False)

    @model_validator(mode="after")
    def _order(self) -> Uniform:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) must be >= low ({self.low})")
        return self


class LogUniform(_Strict):
    """Log-uniform on ``[low, high]`` (both > 0)."""

    dist: Literal["loguniform"]
    low: PositiveFloat
    high: PositiveFloat

    @model_validator(mode="after")
    def _order(self) -> LogUniform:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) must be >= low ({self.low})")
        return self


class Normal(_Strict):
    """Normal ``N(mean, std^2)`` clipped to ``[low, high]`` when given."""

    dist: Literal["normal"]
    mean: float = Field(allow_inf_nan=False)
    std: NonNegFloat
    low: float | None = None
    high: float | None = None


class Choice(_Strict):
    """One of ``values``, with probabilities ``probs`` (uniform when omitted)."""

    dist: Literal["choice"]
    values: list[float] = Field(min_length=1)
    probs: list[float] | None = None

    @model_validator(mode="after")
    def _probs(self) -> Choice:
        if self.probs is not None:
            if len(self.probs) != len(self.values):
                raise ValueError("probs must have as many entries as values")
            if any(p < 0 for p in self.probs) or not np.isclose(sum(self.probs), 1.0):
                raise ValueError("probs must be >= 0 and sum to 1")
        return self


Distribution = Annotated[Uniform | LogUniform | Normal | Choice, Field(discriminator="dist")]
_DIST = TypeAdapter(Distribution)
_FLOATS = TypeAdapter(list[Annotated[float, Field(allow_inf_nan=False)]])
_FLOAT = TypeAdapter(Annotated[float, Field(allow_inf_nan=False)])


def _per_device(value: Any) -> Any:
    """Dispatch on the input's shape so that errors speak of the form the user wrote."""
    adapter = _DIST if isinstance(value, dict) else _FLOATS if isinstance(value, list) else _FLOAT
    try:
        return adapter.validate_python(value)
    except ValidationError as err:
        e = err.errors(include_url=False)[0]
        where = ".".join(
            str(x) for x in e["loc"] if x not in ("uniform", "loguniform", "normal", "choice")
        )
        msg = e["msg"].removeprefix("Value error, ")
        raise ValueError(f"{where + ': ' if where else ''}{msg}") from None


#: A per-device value: one number, a list of num_devices numbers, or a distribution table.
PerDevice = Annotated[
    float | list[float] | Uniform | LogUniform | Normal | Choice,
    PlainValidator(_per_device),
    PlainSerializer(lambda v: v.model_dump() if isinstance(v, BaseModel) else v),
]


def _draw(dist: Uniform | LogUniform | Normal | Choice, rng: np.random.Generator) -> float:
    if isinstance(dist, Uniform):
        return float(rng.uniform(dist.low, dist.high))
    if isinstance(dist, LogUniform):
        return float(np.exp(rng.uniform(np.log(dist.low), np.log(dist.high))))
    if isinstance(dist, Normal):
        x = float(rng.normal(dist.mean, dist.std))
        lo = -np.inf if dist.low is None else dist.low
        hi = np.inf if dist.high is None else dist.high
        return float(np.clip(x, lo, hi))
    return float(rng.choice(np.asarray(dist.values), p=dist.probs))


# ---------------------------------------------------------------- sections


class RunConfig(_Strict):
    """Run length and the per-round latency deadline."""

    frames: int = Field(20, ge=1, description="number of frames K")
    slots_per_frame: int = Field(20, ge=1, description="slots per frame T")
    deadline_s: PositiveFloat = Field(0.8, description="per-round latency tau_0, seconds")


class NetworkConfig(_Strict):
    """Cell, radio and channel model."""

    num_devices: int = Field(30, ge=1, le=1_000_000)
    cell_radius_m: PositiveFloat = 1000.0
    min_distance_m: PositiveFloat = 10.0
    bandwidth_hz: PositiveFloat = 10e6
    noise_dbm: float = Field(-104.0, allow_inf_nan=False, description="total noise power over W")
    pathloss_intercept_db: float = Field(physics.PATHLOSS_INTERCEPT_DB, allow_inf_nan=False)
    pathloss_slope_db: PositiveFloat = physics.PATHLOSS_SLOPE_DB
    fading: Literal["rayleigh", "none"] = "rayleigh"

    @model_validator(mode="after")
    def _radius(self) -> NetworkConfig:
        if self.min_distance_m >= self.cell_radius_m:
            raise ValueError(
                f"min_distance_m ({self.min_distance_m}) must be below cell_radius_m ({self.cell_radius_m})"
            )
        return self


class DevicesConfig(_Strict):
    """Per-device hardware and budgets: a value, a list of num_devices values, or a distribution."""

    cpu_hz: PerDevice = 2e9
    cycles_per_sample: PerDevice = 2e6
    capacitance: PerDevice = 2e-28
    batch_size: PerDevice = 512
    peak_power_w: PerDevice = 1.0
    energy_budget_j: PerDevice = Field(
        default_factory=lambda: Uniform(dist="uniform", low=0.30, high=0.45)
    )


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

DATASETS = ("digits", "mnist", "fashion_mnist", "cifar10")
MODELS = ("mlp", "cnn_mnist", "cnn_mnist_small", "mobilenet_v2", "resnet20")

#: Files each file-based dataset needs below the data directory (torchvision's layout).
DATASET_FILES: dict[str, tuple[str, ...]] = {
    "mnist": tuple(
        f"MNIST/raw/{f}"
        for f in (
            "train-images-idx3-ubyte",
            "train-labels-idx1-ubyte",
            "t10k-images-idx3-ubyte",
            "t10k-labels-idx1-ubyte",
        )
    ),
    "fashion_mnist": tuple(
        f"FashionMNIST/raw/{f}"
        for f in (
            "train-images-idx3-ubyte",
            "train-labels-idx1-ubyte",
            "t10k-images-idx3-ubyte",
            "t10k-labels-idx1-ubyte",
        )
    ),
    "cifar10": tuple(
        f"cifar-10-batches-py/{f}" for f in ("data_batch_1", "test_batch", "batches.meta")
    ),
}

#: Input shape of each dataset (channels, height, width) and trainable parameter counts of the
#: models, known without torch so that a network-only run needs no learner. Checked against the
#: real networks in tests/test_scenario.py.
DATASET_INPUT = {
    "digits": (1, 8, 8),
    "mnist": (1, 28, 28),
    "fashion_mnist": (1, 28, 28),
    "cifar10": (3, 32, 32),
}
MODEL_DATASETS = {
    "mlp": DATASETS,
    "cnn_mnist": ("mnist", "fashion_mnist"),
    "cnn_mnist_small": ("mnist", "fashion_mnist"),
    "mobilenet_v2": ("cifar10",),
    "resnet20": ("cifar10",),
}


def model_num_params(model: str, dataset: str) -> int | None:
    """Trainable parameters ``D`` of a model on a dataset, or None where only torch knows."""
    if model == "mlp":
        c, h, w = DATASET_INPUT[dataset]
        d_in = c * h * w
        return d_in * 128 + 128 + 128 * 10 + 10
    return {
        "cnn_mnist": 440_812,
        "cnn_mnist_small": 421_642,
        "mobilenet_v2": 502_538,
        "resnet20": 269_722,
    }.get(model)


class LearningConfig(_Strict):
    """The learning side: data, model, FedSGD."""

    enabled: bool = Field(
        True, description="false: network-only run (a learner that trains nothing)"
    )
    dataset: Literal["digits", "mnist", "fashion_mnist", "cifar10"] = "digits"
    data_dir: str | None = None
    partition: Literal["iid", "dirichlet"] = "iid"
    dirichlet_alpha: PositiveFloat = 0.3
    model: Literal["mlp", "cnn_mnist", "cnn_mnist_small", "mobilenet_v2", "resnet20"] = "mlp"
    lr: PositiveFloat = 0.05
    lr_schedule: Literal["constant", "half_life"] = "constant"
    aggregation: Literal["weighted", "per_coordinate"] = "weighted"
    eval_every_slots: int = Field(20, ge=1)
    eval_max_samples: int | None = Field(None, ge=1)
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    num_params: int | None = Field(None, ge=1, description="payload size D for network-only runs")
    bits_per_param: int = Field(32, ge=1)
    unmoved_stability: float = Field(1.0, ge=0, le=1)

    @model_validator(mode="after")
    def _model_fits_dataset(self) -> LearningConfig:
        if self.enabled and self.num_params is not None:
            raise ValueError(
                "num_params is only for network-only runs (enabled = false); "
                "with training the payload is the model's own parameter count"
            )
        if self.dataset not in MODEL_DATASETS[self.model]:
            raise ValueError(
                f"model {self.model!r} does not fit dataset {self.dataset!r}; "
                f"it takes {', '.join(MODEL_DATASETS[self.model])}"
            )
        return self


class TraceConfig(_Strict):
    """What the trace records and how late uploads are charged."""

    late_upload_energy: Literal["until_deadline", "full"] = Field(
        "until_deadline",
        description=(
            "energy of an upload that misses the deadline: 'until_deadline' = the device transmits until "
            "the deadline and stops; 'full' = p * tau_com for the whole payload (the paper's eq. 11)"
        ),
    )


class SchemeConfig(BaseModel):
    """``name`` plus the scheme's own parameters (validated by the scheme)."""

    model_config = ConfigDict(extra="allow")
    name: str = "ideal"

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        from sim.schemes import SCHEMES

        if v not in SCHEMES:
            raise ValueError(f"unknown scheme {v!r}; known: {', '.join(sorted(SCHEMES))}")
        return v

    @property
    def params(self) -> dict[str, Any]:
        """The scheme parameters (everything but ``name``)."""
        return dict(self.model_extra or {})


class SweepConfig(_Strict):
    """Default grid and seeds of ``wflsim sweep`` (ignored by ``wflsim run``)."""

    grid: dict[str, list[Any]] = Field(default_factory=dict, description="field -> values")
    seeds: list[int] = Field(default_factory=list)


class Scenario(_Strict):
    """A whole scenario file."""

    name: str = "scenario"
    description: str = ""
    seed: int = Field(0, ge=0)
    run: RunConfig = Field(default_factory=RunConfig)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    mobility: MobilityConfig = Field(default_factory=MobilityConfig)
    devices: DevicesConfig = Field(default_factory=DevicesConfig)
    learning: LearningConfig = Field(default_factory=LearningConfig)
    scheme: SchemeConfig = Field(default_factory=SchemeConfig)
    trace: TraceConfig = Field(default_factory=TraceConfig)
    sweep: SweepConfig = Field(default_factory=SweepConfig)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v


# ---------------------------------------------------------------- resolution


@dataclass(frozen=True)
class DeviceArrays:
    """Per-device values resolved for ``N`` devices; every array has shape ``(N,)``."""

    cpu_hz: np.ndarray
    cycles_per_sample: np.ndarray
    capacitance: np.ndarray
    batch_size: np.ndarray  # int64
    peak_power_w: np.ndarray
    energy_budget_j: np.ndarray

    @property
    def num_devices(self) -> int:
        return int(self.cpu_hz.shape[0])

    def full_compute_time_s(self) -> np.ndarray:
        """Compute time at gamma = 0, ``c B / f`` (eq. 12), seconds."""
        return physics.compute_time_s(0.0, self.cycles_per_sample, self.batch_size, self.cpu_hz)


@dataclass(frozen=True)
class SystemConstants:
    """The resolved physical system a scheme and the engine work with."""

    devices: DeviceArrays
    bandwidth_hz: float  # W, Hz
    noise_w: float  # N0, W (total over the band)
    deadline_s: float  # tau_0, s
    num_params: int  # D
    bits_per_param: int

    @property
    def num_devices(self) -> int:
        return self.devices.num_devices

    @property
    def full_payload_bits(self) -> float:
        """``S = bits_per_param * D``, bits."""
        return float(self.bits_per_param) * float(self.num_params)


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
                [_draw(spec, streams.device("device_params", n, index)) for n in range(num_devices)]
            )
        if not np.all(np.isfinite(values)):
            raise ScenarioError(field, "must be finite")
        if integer:
            values = np.rint(values)
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
    d = model_num_params(learning.model, learning.dataset)
    if d is None:
        raise ScenarioError(
            "learning.num_params",
            f"the parameter count of model {learning.model!r} is only known to the learner",
            "set learning.num_params for a network-only run",
        )
    return d


# ---------------------------------------------------------------- loading


def _from_validation_error(err: ValidationError) -> ScenarioError:
    errors = err.errors(include_url=False)
    first = errors[0]
    field = ".".join(f"[{x}]" if isinstance(x, int) else str(x) for x in first["loc"]).replace(
        ".[", "["
    )
    msg = first["msg"].removeprefix("Value error, ")
    fix = None
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
        fix = "remove it or check its spelling against docs/scenario.md"
    elif first["type"] == "missing":
        fix = "add it to the scenario"
    elif "input" in first and not isinstance(first["input"], dict | list):
        msg += f" (got {first['input']!r})"
    more = f"; and {len(errors) - 1} more problem(s)" if len(errors) > 1 else ""
    return ScenarioError(field or "(top level)", msg + more, fix)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``--set a.b.c=VALUE``; VALUE is read as a TOML value, else kept as a string."""
    if "=" not in text:
        raise ScenarioError(
            text, "override must look like section.field=value", "e.g. --set learning.lr=0.01"
        )
    key, raw = text.split("=", 1)
    path = [k.strip() for k in key.strip().split(".")]
    if not all(path):
        raise ScenarioError(key, "empty component in the field path", "e.g. --set learning.lr=0.01")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return path, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides to the raw scenario table (a deep copy is returned)."""
    import copy

    out = copy.deepcopy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for i, k in enumerate(path[:-1]):
            nxt = node.setdefault(k, {})
            if not isinstance(nxt, dict):
                raise ScenarioError(
                    ".".join(path[: i + 1]), "is a value, not a table", "check the --set path"
                )
            node = nxt
        node[path[-1]] = value
    return out


def validate_scenario(data: dict[str, Any]) -> Scenario:
    """Validate a raw scenario table (types, ranges, unknown fields, scheme parameters)."""
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as err:
        raise _from_validation_error(err) from None
    from sim.schemes import SCHEMES

    try:
        SCHEMES[scenario.scheme.name].Params.model_validate(scenario.scheme.params)
    except ValidationError as err:
        e = _from_validation_error(err)
        raise ScenarioError(f"scheme.{e.field}", e.problem, e.fix) from None
    return scenario


def read_scenario_file(path: str | Path) -> tuple[str, dict[str, Any]]:
    """Read a TOML scenario file: ``(text, table)``.

    Raises:
        ScenarioError: missing file or TOML syntax error.
    """
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(str(path), "scenario file not found", "check the path")
    text = p.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(str(path), f"not valid TOML: {err}", "fix the syntax") from None
    return text, data


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> tuple[Scenario, str]:
    """Read, override and validate a scenario file: ``(scenario, original_text)``."""
    text, data = read_scenario_file(path)
    return validate_scenario(apply_overrides(data, overrides or [])), text
