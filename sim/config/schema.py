"""The scenario schema: one pydantic model per table of a scenario file.

Types, ranges, unknown fields and combinations are validated here; what needs the resolved
devices, the data directory or the scheme registry is checked by :mod:`wflsim.sim.config.resolve`
and :mod:`wflsim.sim.config.loading`. ``docs/scenario.md`` documents every field (a test keeps it
complete).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..privacy.config import PrivacyConfig
from ..radio.cells.config import CellsConfig
from ..registry import known_datasets, known_models, known_partitions, model_datasets
from ..selection import SelectionConfig
from ..servers.config import ServerConfig
from ..world.availability import AlwaysConfig, AvailabilityConfig
from ..world.channel.config import ChannelConfig
from ..world.compute import ComputeConfig
from ..world.mobility.config import MobilityConfig
from .claims import MAX_CLAIMS, ClaimConfig, named_claims
from .distributions import (
    DEVICE_BOUNDS,
    WHOLE_NUMBER,
    PerDevice,
    Strict,
    Uniform,
    check_bounds,
)
from .limits import (
    MAX_DESCRIPTION_CHARS,
    MAX_DEVICES,
    MAX_NAME_CHARS,
    MAX_SEED,
    MAX_SLOTS,
    MAX_SWEEP_POINTS,
    path_problem,
    shorten,
)

#: Fields of ``[network]`` that moved to ``[channel]`` (version 0.2): old name -> where now.
_MOVED_TO_CHANNEL = {
    "fading": 'fading = "rayleigh" (or "none")',
    "pathloss_intercept_db": "pathloss = { intercept_db = ... }",
    "pathloss_slope_db": "pathloss = { slope_db = ... }",
}


#: A finite float (``int`` values are taken as floats; bounds come with each field).
_Float = Annotated[float, Field(allow_inf_nan=False)]
#: A seed: an integer in ``[0, 2^63 - 1]``.
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]


def _path_text(value: str | None) -> str | None:
    """A path field: refused if the system could not use it as a path."""
    if value is not None:
        problem = path_problem(value)
        if problem is not None:
            raise ValueError(f"{problem} (got {shorten(value)!r})")
    return value


class RunConfig(Strict):
    """Run length and the per-round latency deadline."""

    frames: int = Field(20, ge=1, le=1_000_000, description="number of frames K")
    slots_per_frame: int = Field(20, ge=1, le=1_000_000, description="slots per frame T")
    deadline_s: _Float = Field(
        0.8, ge=1e-6, le=86_400.0, description="per-round latency tau_0, seconds"
    )
    checkpoint_every_frames: int = Field(
        1,
        ge=1,
        le=1_000_000,
        description="save every component's state after every this many frames",
    )
    kernel: Literal["auto", "closed_form", "event"] = Field(
        "auto",
        description="slot kernel: closed_form (devices do not interact), event (one SimPy "
        "process per device), auto (closed_form unless a component needs events)",
    )

    @field_validator("slots_per_frame")
    @classmethod
    def _slots(cls, v: int, info: ValidationInfo) -> int:
        frames = info.data.get("frames")
        if isinstance(frames, int) and frames * v > MAX_SLOTS:
            raise ValueError(
                f"frames x slots_per_frame = {frames * v:,} slots; a run may have at most "
                f"{MAX_SLOTS:,} (lower run.frames or run.slots_per_frame)"
            )
        return v


class NetworkConfig(Strict):
    """Cell, radio and channel model."""

    num_devices: int = Field(30, ge=1, le=MAX_DEVICES)
    cell_radius_m: _Float = Field(1000.0, gt=0, le=100_000.0)
    min_distance_m: _Float = Field(10.0, ge=1e-3, le=100_000.0)
    bandwidth_hz: _Float = Field(10e6, ge=1.0, le=1e12)
    noise_dbm: _Float = Field(-104.0, ge=-250.0, le=100.0, description="total noise power over W")

    @model_validator(mode="before")
    @classmethod
    def _moved_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in _MOVED_TO_CHANNEL.items():
                if old in data:
                    raise ValueError(
                        f"{old} has moved to the [channel] table: write {new} there "
                        "(docs/scenario.md, [channel])"
                    )
        return data

    @model_validator(mode="after")
    def _radius(self) -> NetworkConfig:
        if self.min_distance_m >= self.cell_radius_m:
            raise ValueError(
                f"min_distance_m ({self.min_distance_m}) must be below cell_radius_m ({self.cell_radius_m})"
            )
        return self


class DevicesConfig(Strict):
    """Per-device hardware and budgets: a value, a list of num_devices values, or a distribution."""

    cpu_hz: PerDevice = 2e9
    cycles_per_sample: PerDevice = 2e6
    capacitance: PerDevice = 2e-28
    batch_size: PerDevice = 512
    peak_power_w: PerDevice = 1.0
    energy_budget_j: PerDevice = Field(
        default_factory=lambda: Uniform(dist="uniform", low=0.30, high=0.45)
    )

    @field_validator("*")
    @classmethod
    def _in_bounds(cls, value: Any, info: ValidationInfo) -> Any:
        check_bounds(value, DEVICE_BOUNDS[str(info.field_name)])
        return value


class LearningConfig(Strict):
    """The learning side: data, model, FedSGD."""

    enabled: bool = Field(
        True, description="false: network-only run (a learner that trains nothing)"
    )
    dataset: str = Field("digits", description="a dataset of sim.config.catalogue")
    data_dir: str | None = None
    partition: str = Field(
        "iid", description="iid, dirichlet, or a partition registered from Python"
    )
    dirichlet_alpha: _Float = Field(0.3, gt=0, le=1e6)
    model: str = Field("mlp", description="a model of sim.config.catalogue")
    lr: _Float = Field(0.05, gt=0, le=1e3)
    lr_schedule: Literal["constant", "half_life"] = "constant"
    local_steps: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="E: local SGD steps per update (FedAvg); unset = 1, FedSGD (the paper's)",
    )
    local_epochs: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="k: local passes over the device's data, E_n = k ceil(D_n / B_n) steps "
        "(instead of local_steps)",
    )
    aggregation: Literal["weighted", "per_coordinate"] = "weighted"
    eval_every_slots: int = Field(20, ge=1, le=MAX_SLOTS)
    eval_max_samples: int | None = Field(None, ge=1, le=1_000_000_000)
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    num_params: int | None = Field(
        None, ge=1, le=10**12, description="payload size D for network-only runs"
    )
    bits_per_param: int = Field(32, ge=1, le=64)
    precision: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="the learner's arithmetic on this machine: float32 (exact) or bfloat16 "
        "(autocast); the simulated devices' costs do not change",
    )
    unmoved_stability: _Float = Field(1.0, ge=0, le=1)

    @field_validator("dataset", "model", "partition")
    @classmethod
    def _in_catalogue(cls, v: str, info: ValidationInfo) -> str:
        known = {"dataset": known_datasets, "model": known_models, "partition": known_partitions}[
            str(info.field_name)
        ]()
        if v not in known:
            raise ValueError(f"unknown {info.field_name} {shorten(v)!r}; known: {', '.join(known)}")
        dataset = info.data.get("dataset")
        if info.field_name == "model" and dataset is not None:
            fits = model_datasets(v)
            if dataset not in fits:
                raise ValueError(
                    f"model {v!r} does not fit dataset {dataset!r}; it takes {', '.join(fits)}"
                )
        return v

    @field_validator("local_epochs")
    @classmethod
    def _local_epochs(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is None:
            return v
        if info.data.get("local_steps") is not None:
            raise ValueError(
                "local_steps and local_epochs exclude each other: give local_steps = E (E steps "
                "per update) or local_epochs = k (k passes over the device's data), not both"
            )
        partition = info.data.get("partition")
        if info.data.get("enabled") is False and partition not in (None, "iid"):
            raise ValueError(
                f"a network-only run cannot count local epochs on the {partition!r} partition "
                "(its local data sizes come from the labels, which it does not load): use "
                'local_steps, partition = "iid", or enabled = true'
            )
        return v

    @field_validator("data_dir")
    @classmethod
    def _data_dir(cls, v: str | None) -> str | None:
        return _path_text(v)

    @model_validator(mode="after")
    def _num_params_network_only(self) -> LearningConfig:
        if self.enabled and self.num_params is not None:
            raise ValueError(
                "num_params is only for network-only runs (enabled = false); "
                "with training the payload is the model's own parameter count"
            )
        return self


class TraceConfig(Strict):
    """The ``[trace]`` table: what the trace records and how late uploads are charged."""

    late_upload_energy: Literal["until_deadline", "full"] = Field(
        "until_deadline",
        description=(
            "energy of an upload that misses the deadline: 'until_deadline' = the device transmits until "
            "the deadline and stops; 'full' = p * tau_com for the whole payload (the paper's eq. 11)"
        ),
    )
    level: Literal["events", "device_slots"] = Field(
        "events",
        description=(
            "'events' = one row per event (the paper's trace); 'device_slots' = the decision, "
            "compute, upload and energy rows of a device in a slot folded into one device_slot "
            "row (same information, about a third of the rows: for large network studies)"
        ),
    )
    compression: Literal["lz4", "zstd", "snappy", "none"] = Field(
        "lz4",
        description=(
            "Parquet codec of the trace's parts: 'lz4' = fastest to write; 'zstd' = about a fifth "
            "smaller files, about a third slower to write (docs/performance.md)"
        ),
    )


class Ns3Config(Strict):
    """``[uplink.ns3]``: the ns-3 LTE uplink's settings (``mode = "ns3_lte"``, docs/ns3.md)."""

    transport: Literal["tcp", "udp"] = Field(
        "tcp",
        description="tcp: every upload a new TCP connection (what FL frameworks upload over); "
        "udp: a paced UDP flow with flow control and no congestion control (the link's "
        "capacity, an upper bound)",
    )
    scheduler: Literal["pf", "rr"] = Field(
        "pf", description="ns-3's LTE MAC scheduler: pf (proportional fair) or rr (round robin)"
    )
    warmup_s: _Float = Field(
        0.2,
        gt=0.0,
        le=10.0,
        description="simulated time each frame's ns-3 process runs before its first slot "
        "(attach, RRC connection, first CQI), s",
    )
    backhaul_delay_s: _Float = Field(
        0.001,
        ge=0.0,
        le=1.0,
        description="one-way delay between the core network and the FL server, s",
    )
    tcp_segment_bytes: int = Field(
        1400, ge=500, le=9000, description="TCP's maximum segment size, bytes"
    )
    exchange_timeout_s: _Float = Field(
        60.0,
        gt=0.0,
        le=86_400.0,
        description="the longest one exchange with the ns-3 process may take (wall clock), s: "
        "a process that hangs longer fails the run (its completed frames are kept)",
    )


#: The ``[uplink]`` fields that apply to some modes only (:class:`UplinkConfig` refuses them
#: under the others): field -> those modes. A sweep over ``uplink.mode`` leaves a grid value of
#: such a field out at the points of the other modes (:mod:`wflsim.app.sweep_modes`).
UPLINK_MODE_FIELDS: dict[str, frozenset[str]] = {
    "power_control": frozenset({"aircomp"}),
    "threshold_gain_db": frozenset({"aircomp"}),
    "values_per_symbol": frozenset({"aircomp"}),
    "ns3": frozenset({"ns3_lte"}),
}


class UplinkConfig(Strict):
    """How the uploads of a slot share the band ``network.bandwidth_hz`` (``sim/radio/``)."""

    mode: Literal["dedicated", "ofdma", "tdma", "aircomp", "ns3_lte"] = Field(
        "dedicated",
        description="dedicated: each device its own band W (the paper's model); ofdma: W shared "
        "equally by the uploads in flight; tdma: one upload at a time on W; aircomp: every "
        "participant sends its update at once on W, the server receives their sum "
        "(over-the-air aggregation, docs/aircomp.md); ns3_lte: ns-3's LTE module plays the "
        "uploads packet by packet (co-simulation, docs/ns3.md)",
    )
    ns3: Ns3Config | None = Field(
        None, description="ns3_lte only: the ns-3 settings ([uplink.ns3], docs/ns3.md)"
    )
    power_control: Literal["truncated_inversion", "optimal", "controller"] | None = Field(
        None,
        description="aircomp only: truncated_inversion (BAA: a device whose gain clears "
        "threshold_gain_db inverts its channel; the default), optimal (Cao et al.'s "
        "MSE-optimal powers, no truncation) or controller (the paper's controller adapted: "
        "the scheme's drift-plus-penalty decides who inverts, against a receiver scaling "
        "fixed per frame)",
    )
    threshold_gain_db: _Float | None = Field(
        None,
        ge=-300.0,
        le=100.0,
        description="aircomp, truncated_inversion: the channel power gain under which a device "
        "stays silent, dB (default: none, every participant inverts)",
    )
    values_per_symbol: Annotated[Literal[1, 2], WHOLE_NUMBER] | None = Field(
        None,
        description="aircomp only: real values per symbol, 1 (BAA's real analog symbols; the "
        "default) or 2 (I and Q): the transmission takes ceil(D' / v) / W s",
    )
    order: Literal["fcfs", "edf"] = Field(
        "fcfs", description="tdma's queue: by ready time (fcfs) or earliest deadline first (edf)"
    )
    noise_psd_dbm_hz: _Float | None = Field(
        None,
        ge=-300.0,
        le=0.0,
        description="noise power spectral density, dBm/Hz; replaces network.noise_dbm "
        "(noise over W = this + 10 log10(W))",
    )
    planned_concurrent_uploads: int = Field(
        1,
        ge=1,
        le=MAX_DEVICES,
        description="k: the scheme computes p_min for a band W / k with noise N0 / k",
    )

    @model_validator(mode="after")
    def _aircomp_fields(self) -> UplinkConfig:
        if self.ns3 is not None and self.mode != "ns3_lte":
            raise ValueError(
                f'ns3 applies to mode = "ns3_lte" (the ns-3 co-simulation), not to mode = '
                f'"{self.mode}": remove [uplink.ns3], or set mode = "ns3_lte"'
            )
        if self.mode != "aircomp":
            for name in ("power_control", "threshold_gain_db", "values_per_symbol"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f'{name} applies to mode = "aircomp" (over-the-air aggregation), '
                        f'not to mode = "{self.mode}": remove it, or set mode = "aircomp"'
                    )
        elif self.power_control in ("optimal", "controller") and self.threshold_gain_db is not None:
            raise ValueError(
                f"threshold_gain_db is truncated inversion's; power_control = "
                f'"{self.power_control}" sets no fixed threshold: remove threshold_gain_db, '
                'or use "truncated_inversion"'
            )
        return self

    def noise_dbm(self, network: NetworkConfig) -> float:
        """The noise power over ``network.bandwidth_hz``, dBm: ``network.noise_dbm``, or
        ``noise_psd_dbm_hz + 10 log10(W)`` when the density is given."""
        if self.noise_psd_dbm_hz is None:
            return network.noise_dbm
        return self.noise_psd_dbm_hz + 10.0 * math.log10(network.bandwidth_hz)


class SchemeConfig(BaseModel):
    """``name`` plus the scheme's own parameters (both validated against the scheme registry by
    :func:`wflsim.app.scenario.validate_scenario`)."""

    model_config = ConfigDict(extra="allow")
    name: str = "ideal"

    @property
    def params(self) -> dict[str, Any]:
        """The scheme parameters (everything but ``name``)."""
        return dict(self.model_extra or {})


class StrategyConfig(BaseModel):
    """``name`` plus the server strategy's own parameters (both validated against the strategy
    registry by :func:`wflsim.app.scenario.validate_scenario`)."""

    model_config = ConfigDict(extra="allow")
    name: str = Field(
        "fedavg", description="how the server turns a step's aggregated uploads into a new model"
    )
    selection: SelectionConfig = Field(
        default_factory=SelectionConfig,
        description="which of the devices a slot's plan lets take part the server asks",
    )

    @property
    def params(self) -> dict[str, Any]:
        """The strategy parameters (everything but ``name`` and ``selection``)."""
        return dict(self.model_extra or {})


class SweepConfig(Strict):
    """Default grid and seeds of ``wflsim sweep`` (ignored by ``wflsim run``)."""

    grid: dict[str, Annotated[list[Any], Field(max_length=MAX_SWEEP_POINTS)]] = Field(
        default_factory=dict, description="field -> values"
    )
    seeds: list[Seed] = Field(default_factory=list, max_length=MAX_SWEEP_POINTS)


class Scenario(Strict):
    """A whole scenario file."""

    name: str = Field("scenario", max_length=MAX_NAME_CHARS)
    description: str = Field("", max_length=MAX_DESCRIPTION_CHARS)
    seed: Seed = 0
    run: RunConfig = Field(default_factory=RunConfig)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    channel: ChannelConfig = Field(default_factory=ChannelConfig)
    mobility: MobilityConfig = Field(default_factory=MobilityConfig)
    devices: DevicesConfig = Field(default_factory=DevicesConfig)
    compute: ComputeConfig = Field(default_factory=ComputeConfig)
    learning: LearningConfig = Field(default_factory=LearningConfig)
    scheme: SchemeConfig = Field(default_factory=SchemeConfig)
    strategy: StrategyConfig = Field(default_factory=StrategyConfig)
    trace: TraceConfig = Field(default_factory=TraceConfig)
    uplink: UplinkConfig = Field(default_factory=UplinkConfig)
    availability: AvailabilityConfig = Field(default_factory=AlwaysConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    #: several cells (docs/cells.md); None: one cell, the paper's
    cells: CellsConfig | None = None
    #: client-level differential privacy (docs/privacy.md); None: none
    privacy: PrivacyConfig | None = None
    sweep: SweepConfig = Field(default_factory=SweepConfig)
    #: the study's own claims (docs/scenario.md, "[[claims]]"); never part of a run's resolved
    #: scenario: they change no run
    claims: list[ClaimConfig] = Field(default_factory=list, max_length=MAX_CLAIMS, exclude=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        if not v.isprintable():
            raise ValueError("must be one line of text without tabs or control characters")
        return v

    @field_validator("claims")
    @classmethod
    def _claim_names(cls, v: list[ClaimConfig]) -> list[ClaimConfig]:
        return named_claims(v)
