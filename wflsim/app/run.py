"""Orchestration of one run: validate everything, then lock the output, simulate, record.

Nothing is written before the scenario, the data directory, the mobility trace, the derived
constants and the learner have all been checked, so a bad input leaves no output folder behind.
Once the run has started, each completed frame is a complete Parquet file and every
``run.checkpoint_every_frames`` frames the state of every component is saved
(:mod:`wflsim.app.recorder`); a run killed at any instant loses at most the frame in flight, and
:func:`resume` continues it so that its events equal the uninterrupted run's. The run folder's
format is :mod:`wflsim.sim.rundir`; its lock and marker are written by :mod:`wflsim.app.folders`.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import logging
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from wflsim._version import __version__
from wflsim.sim import rundir
from wflsim.sim import state as checkpoints
from wflsim.sim.config.catalogue import MODELS, DatasetError
from wflsim.sim.config.derived import check_derived, check_slot_wait
from wflsim.sim.config.loading import (
    apply_overrides,
    parse_scenario_text,
    plain_value,
    read_scenario_file,
    scenario_text,
)
from wflsim.sim.config.plausibility import cross_findings
from wflsim.sim.config.resolve import (
    check_data_dir,
    check_deadline,
    payload_num_params,
    resolve_data_dir,
    resolve_devices,
    resolve_local_steps,
)
from wflsim.sim.config.schema import Scenario
from wflsim.sim.engine import Engine, EngineConfig, FrameSink, Hooks, ProgressFn, RunStats
from wflsim.sim.errors import ScenarioError
from wflsim.sim.kernels import KernelName, make_kernel
from wflsim.sim.learner import Learner, NullLearner
from wflsim.sim.rng import Streams
from wflsim.sim.schemes import build_scheme
from wflsim.sim.schemes.csi_margin import slot_power_rule
from wflsim.sim.servers import Server, make_server
from wflsim.sim.trace import EVENTS_DIR, list_parts
from wflsim.sim.updates import UPDATE_RULES
from wflsim.sim.world import physics
from wflsim.sim.world.availability import AlwaysConfig, Availability, build_availability
from wflsim.sim.world.channel import Channel, ChannelRecorder, build_channel
from wflsim.sim.world.compute import build_jitter
from wflsim.sim.world.mobility import Mobility, build_mobility
from wflsim.sim.world.system import DeviceArrays, SystemConstants
from wflsim.sim.world.uplink import UplinkSpec

from . import folders
from .fetch import FETCHABLE, fetch_dataset
from .folders import check_out_dir
from .recorder import RunRecorder
from .scenario import check_scheme, report_findings, report_implausible, validate_scenario

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    """A validated scenario with everything resolved that needs no learner."""

    scenario: Scenario
    text: str
    path: Path | None
    overrides: list[str]
    streams: Streams
    devices: DeviceArrays
    mobility: Mobility
    channel: Channel
    data_dir: Path
    system: SystemConstants
    #: the folder relative paths of the scenario are resolved against (its file's folder)
    base_dir: Path | None = field(default=None)
    #: when devices are online (``[availability]``; None: always)
    availability: Availability | None = field(default=None)


@dataclass(frozen=True)
class ScenarioSource:
    """A scenario as the text it is read from, with the folder its relative paths (a mobility
    trace, a channel table, the data folder) are resolved against: a file's text and folder, or a
    table written as TOML with the working directory. A sweep's points are prepared from their
    sweep's source, so every point runs the same text even if the file changes meanwhile."""

    text: str
    base_dir: Path
    path: Path | None = None

    @classmethod
    def from_file(cls, path: str | Path) -> ScenarioSource:
        """A scenario file (read now).

        Raises:
            ScenarioError: missing, unreadable or not TOML.
        """
        text, _ = read_scenario_file(path)
        return cls(text, Path(path).resolve().parent, Path(path))

    @classmethod
    def from_table(cls, table: Mapping[str, Any], base_dir: Path | None = None) -> ScenarioSource:
        """A table shaped like a scenario file (relative paths: to ``base_dir``, default the
        working directory).

        Raises:
            ScenarioError: a value TOML cannot hold (names its field).
        """
        return cls(scenario_text(plain_value(table)), base_dir or Path.cwd())

    @classmethod
    def of(cls, scenario: str | Path | ScenarioSource) -> ScenarioSource:
        """``scenario`` itself, or the source of the scenario file it names."""
        return scenario if isinstance(scenario, ScenarioSource) else cls.from_file(scenario)

    def table(self) -> dict[str, Any]:
        """The scenario's table (as parsed from its text)."""
        return parse_scenario_text(self.text, str(self.path) if self.path else "scenario")


def prepare(
    path: str | Path,
    overrides: list[str] | None = None,
    seed: int | None = None,
    data_dir: str | None = None,
    *,
    strict: bool = False,
    warn: bool = True,
    download: bool = False,
) -> Prepared:
    """Load and validate a scenario file fully (no output is written); values implausible for
    their unit are reported as :class:`~wflsim.sim.errors.PlausibilityWarning` (see
    :func:`prepare_scenario` for ``strict``, ``warn`` and ``download``).

    Raises:
        ScenarioError: any problem, naming the field and the fix.
    """
    return prepare_source(
        ScenarioSource.from_file(path),
        overrides,
        seed,
        data_dir,
        strict=strict,
        warn=warn,
        download=download,
    )


def prepare_source(
    source: ScenarioSource,
    overrides: list[str] | None = None,
    seed: int | None = None,
    data_dir: str | None = None,
    *,
    strict: bool = False,
    warn: bool = True,
    download: bool = False,
    check_data: bool = True,
) -> Prepared:
    """Validate and resolve a scenario's source with ``--set`` overrides (no output is written);
    implausible values as in :func:`prepare_scenario` (``strict``, ``warn``, ``download``,
    ``check_data``).

    Raises:
        ScenarioError: any problem, naming the field and the fix.
    """
    overrides = list(overrides or [])
    if seed is not None:
        overrides.append(f"seed={int(seed)}")
    scenario = validate_scenario(apply_overrides(source.table(), overrides))
    return prepare_scenario(
        scenario,
        text=source.text,
        path=source.path,
        overrides=overrides,
        data_dir=data_dir,
        base_dir=source.base_dir,
        strict=strict,
        warn=warn,
        download=download,
        check_data=check_data,
    )


def prepare_scenario(
    scenario: Scenario,
    *,
    text: str = "",
    path: Path | None = None,
    overrides: list[str] | None = None,
    data_dir: str | None = None,
    base_dir: Path | None = None,
    strict: bool = False,
    warn: bool = True,
    download: bool = False,
    check_data: bool = True,
) -> Prepared:
    """Resolve an already validated :class:`Scenario` (devices, mobility, data directory; its
    scheme is checked against the registry first, :func:`wflsim.app.scenario.check_scheme`).

    Values implausible for their unit (``docs/scenario.md``, "Plausibility warnings") are
    reported before the rest is resolved: each as a
    :class:`~wflsim.sim.errors.PlausibilityWarning`; with ``strict`` the first is an error
    instead. ``warn=False`` leaves them to the caller (a sweep reports each distinct finding of
    its points once, and its points do not report them again). ``download``: a missing
    MNIST, Fashion-MNIST or CIFAR-10 is downloaded into the data directory
    (:func:`wflsim.app.fetch.fetch_dataset`) once everything else has been checked, instead
    of being refused. ``check_data=False``: the dataset is neither checked nor downloaded (a
    sweep planned with ``download`` fetches its points' datasets once, then checks them:
    :func:`wflsim.app.sweep.run_sweep`).

    Raises:
        ScenarioError: any problem, naming the field and the fix (with ``strict``, an
            implausible value too).
    """
    check_scheme(scenario)
    if strict or warn:
        report_implausible(scenario, strict=strict)
    streams = Streams(scenario.seed)
    n = scenario.network.num_devices
    devices = resolve_devices(scenario.devices, n, streams)
    devices = devices.with_local_steps(resolve_local_steps(scenario.learning, devices.batch_size))
    check_deadline(scenario.run, devices, scenario.learning)
    mobility = build_mobility(
        scenario.mobility,
        num_devices=n,
        cell_radius_m=scenario.network.cell_radius_m,
        min_distance_m=scenario.network.min_distance_m,
        streams=streams,
        base_dir=base_dir,
    )
    channel = build_channel(
        scenario.channel,
        num_devices=n,
        min_distance_m=scenario.network.min_distance_m,
        cell_radius_m=scenario.network.cell_radius_m,
        slot_s=scenario.run.deadline_s,
        frames=scenario.run.frames,
        slots_per_frame=scenario.run.slots_per_frame,
        streams=streams,
        base_dir=base_dir,
    )
    availability = build_availability(
        scenario.availability,
        num_devices=n,
        streams=streams,
        base_dir=base_dir,
        deadline_s=scenario.run.deadline_s,
    )
    num_params = payload_num_params(scenario.learning)
    check_derived(scenario, devices, channel, num_params)
    if strict or warn:
        report_findings(cross_findings(scenario, devices), strict=strict)
    ddir = resolve_data_dir(data_dir, scenario, base_dir)
    if scenario.learning.enabled and check_data and not download:
        check_data_dir(scenario.learning.dataset, ddir)
    system = resolve_system(scenario, devices)
    # Build the scheme once: what only a scheme can check (e.g. that its cost model knows the
    # model's architecture) fails here, before anything is written.
    try:
        scheme = build_scheme(scenario.scheme.name, scenario.scheme.params, system)
    except ScenarioError as err:
        lc = scenario.learning
        if system.architecture is None and lc.num_params is None and lc.model not in MODELS:
            raise ScenarioError(
                "learning.model",
                f"scheme {scenario.scheme.name} needs the layer table of a built-in model; "
                f"{lc.model!r} is registered from Python ({err.problem})",
                "use a built-in model with this scheme (docs/scenario.md, [learning])",
            ) from None
        raise
    check_slot_wait(scenario, system, channel, scheme.closes_at)
    if scenario.learning.enabled:
        check_stale_rule(scenario, scheme.update_rule.name)
    # last: nothing is fetched for a bad scenario
    if scenario.learning.enabled and check_data and download:
        if scenario.learning.dataset in FETCHABLE:
            fetch_dataset(scenario.learning.dataset, ddir, "learning.data_dir")
        check_data_dir(scenario.learning.dataset, ddir)
    return Prepared(
        scenario,
        text,
        path,
        list(overrides or []),
        streams,
        devices,
        mobility,
        channel,
        ddir,
        system,
        base_dir,
        availability,
    )


def prepare_from_manifest(
    manifest: dict[str, Any],
    data_dir: str | None = None,
    *,
    strict: bool = False,
    folder: Path | None = None,
) -> Prepared:
    """The prepared scenario of a run folder's manifest: its scenario text, overrides and the
    folder its scenario file was in (``data_dir``: where the data is now, if it moved);
    implausible values as :func:`prepare_scenario` reports them (``strict``: the first is an
    error). ``folder``: the run folder, to name in a refusal.

    Raises:
        ScenarioError: the manifest lacks the scenario (edited or damaged), or it no longer
            validates.
    """
    text = manifest.get("scenario_text")
    overrides = manifest.get("overrides")
    if not isinstance(text, str) or not isinstance(overrides, list):
        lacks = "scenario_text" if not isinstance(text, str) else "overrides"
        raise _unresumable(Path("DIR") if folder is None else Path(folder), lacks)
    table = parse_scenario_text(text, "manifest.json scenario_text")
    scenario = validate_scenario(apply_overrides(table, [str(o) for o in overrides]))
    base = manifest.get("scenario_dir")
    if data_dir is None and manifest.get("data_dir"):
        data_dir = str(manifest["data_dir"])
    file = manifest.get("scenario_file")
    return prepare_scenario(
        scenario,
        text=text,
        path=Path(file) if isinstance(file, str) else None,
        overrides=[str(o) for o in overrides],
        data_dir=data_dir,
        base_dir=Path(base) if isinstance(base, str) else None,
        strict=strict,
    )


def resume_manifest(out: Path) -> dict[str, Any]:
    """The manifest of the run folder ``out`` that ``--resume DIR`` (no SCENARIO) continues.

    Raises:
        ScenarioError: not a run folder; no frame completed (nothing says what to run: run it
            again); a manifest that does not parse (truncated, edited).
    """
    rundir.require_run_folder(out)
    manifest = rundir.read_manifest(out)
    if manifest is not None:
        return manifest
    if folders.never_started(out):
        raise ScenarioError(
            "--resume",
            f"{str(out)!r} holds no completed frame (its run stopped before the first)",
            f"run it again: wflsim run SCENARIO --out {out} (or --resume with SCENARIO)",
        )
    raise rundir.unreadable_manifest(out)


def make_learner(prep: Prepared) -> Learner:
    """The learner of a prepared scenario, for the engine: the PyTorch learner of
    :mod:`wflsim.models.learner` when learning is enabled (torch is imported here, and only
    then), else a :class:`~wflsim.sim.learner.NullLearner` (network-only runs).

    Raises:
        ScenarioError: missing data files, a dataset the catalogue does not know, a torch
            device that is not there, local epochs whose steps on the partition miss the
            deadline (:func:`partition_system`).
    """
    lc = prep.scenario.learning
    if not lc.enabled:
        return NullLearner(payload_num_params(lc))
    from wflsim.models.learner import TorchLearner

    try:
        learner = TorchLearner.from_config(
            dataset=lc.dataset,
            data_dir=str(prep.data_dir),
            model=lc.model,
            partition=lc.partition,
            dirichlet_alpha=lc.dirichlet_alpha,
            batch_sizes=prep.devices.batch_size,
            lr=lc.lr,
            lr_schedule=lc.lr_schedule,
            total_slots=prep.scenario.run.frames * prep.scenario.run.slots_per_frame,
            streams=prep.streams,
            device=lc.device,
            eval_max_samples=lc.eval_max_samples,
            unmoved_stability=lc.unmoved_stability,
            aggregation=lc.aggregation,
            local_steps=lc.local_steps or 1,
            local_epochs=lc.local_epochs,
        )
    except FileNotFoundError as err:
        raise ScenarioError(
            "learning.data_dir", str(err).splitlines()[0], "see docs/scenario.md, [learning]"
        ) from None
    except DatasetError as err:
        raise ScenarioError(err.field, err.problem, err.fix) from None
    except ValueError as err:
        if lc.device != "cpu" and "cuda" in str(err).lower():
            raise ScenarioError(
                "learning.device", str(err).splitlines()[0], 'use device = "cpu" or "auto"'
            ) from None
        raise
    partition_system(prep, learner)  # local epochs on its partition must fit the deadline
    return learner


def resolve_system(scenario: Scenario, devices: DeviceArrays) -> SystemConstants:
    """The physical constants of a run: devices, radio, ``D`` (the model's, from the catalogue,
    or ``learning.num_params``) and the architecture behind ``D`` when it is the model's."""
    net, lc = scenario.network, scenario.learning
    return SystemConstants(
        devices=devices,
        bandwidth_hz=net.bandwidth_hz,
        noise_w=float(physics.dbm_to_w(scenario.uplink.noise_dbm(net))),
        deadline_s=scenario.run.deadline_s,
        num_params=payload_num_params(lc),
        bits_per_param=lc.bits_per_param,
        architecture=(lc.model, lc.dataset)
        if lc.num_params is None and lc.model in MODELS
        else None,
    )


def engine_config(scenario: Scenario) -> EngineConfig:
    """The engine's timing and logging settings of a scenario."""
    return EngineConfig(
        frames=scenario.run.frames,
        slots_per_frame=scenario.run.slots_per_frame,
        mobility_clock=scenario.mobility.clock,
        eval_every_slots=scenario.learning.eval_every_slots,
        evaluate=scenario.learning.enabled,
        late_upload_energy=scenario.trace.late_upload_energy,
        kernel=kernel_of(scenario),
        trace_level=scenario.trace.level,
        uplink=uplink_of(scenario),
    )


def uplink_of(scenario: Scenario) -> UplinkSpec:
    """The uplink of a scenario (its ``[uplink]`` table)."""
    up = scenario.uplink
    return UplinkSpec(
        mode=up.mode, order=up.order, planned_concurrent_uploads=up.planned_concurrent_uploads
    )


def kernel_of(scenario: Scenario) -> KernelName:
    """The slot kernel a scenario runs on: its ``[run] kernel``, with ``auto`` resolved (the
    event kernel for a shared uplink, where uploads interact, and for devices that go offline,
    whose work a drop interrupts; else the closed form)."""
    kernel = scenario.run.kernel
    if kernel != "auto":
        return kernel
    interacting = uplink_of(scenario).shared or not isinstance(scenario.availability, AlwaysConfig)
    return "event" if interacting else "closed_form"


def build_engine(
    prep: Prepared,
    learner: Learner,
    *,
    writer: FrameSink | None = None,
    progress: ProgressFn | None = None,
    hooks: Hooks | None = None,
    server: Server | None = None,
) -> Engine:
    """The engine of a prepared scenario with a fresh scheme, on ``learner``, with the server
    of its ``[server]`` table (:func:`wflsim.sim.servers.make_server`) unless ``server`` is
    given (a server of one's own, docs/architecture.md, "A new server").

    Raises:
        ValueError: the learner's ``D`` or local steps differ from the scenario's (a custom
            learner that does not fit the scenario).
    """
    system = partition_system(prep, learner)
    if int(learner.num_params) != system.num_params:
        raise ValueError(
            f"the learner has {learner.num_params} parameters but the scenario's D is "
            f"{system.num_params} (learning.model / learning.num_params)"
        )
    steps = getattr(learner, "local_steps", None)
    if steps is not None and not np.array_equal(steps, system.devices.local_steps):
        raise ValueError(
            "the learner's local steps per device differ from the scenario's "
            "(learning.local_steps / learning.local_epochs), which the compute costs follow"
        )
    sc = prep.scenario
    # the scheme plans on the band it expects ([uplink] planned_concurrent_uploads)
    scheme = build_scheme(sc.scheme.name, sc.scheme.params, uplink_of(sc).planned_system(system))
    parts = (engine_config(sc), system, prep.mobility, prep.channel, scheme, learner)
    options: dict[str, Any] = {
        "writer": writer,
        "progress": progress,
        "hooks": hooks,
        "jitter": build_jitter(sc.compute, system.num_devices, prep.streams),
        "availability": prep.availability,
    }
    if not isinstance(learner, NullLearner):
        check_stale_rule(sc, scheme.update_rule.name)
    config = parts[0]
    kernel = make_kernel(config.kernel, config.uplink, system)
    if server is None:
        server = make_server(sc.server, kernel)
    return Engine(*parts, server=server, **options)


def partition_system(prep: Prepared, learner: Learner) -> SystemConstants:
    """The system of a prepared scenario with the local steps of the learner's partition.

    With ``learning.local_epochs`` a device's ``E_n = k ceil(D_n / B_n)`` depends on its local
    data size ``D_n``: :func:`prepare_scenario` knows it for an IID partition (the catalogue's
    sizes), not for a Dirichlet one (the labels decide); here it comes from the partition the
    learner made (``learner.num_samples``), and the deadline is checked again on it.

    Raises:
        ScenarioError: a device's ``E_n`` local steps do not fit before the deadline.
    """
    sc = prep.scenario
    if sc.learning.local_epochs is None or learner.num_samples is None:
        return prep.system
    dev = prep.system.devices
    steps = resolve_local_steps(sc.learning, dev.batch_size, np.asarray(learner.num_samples))
    if np.array_equal(steps, dev.local_steps):
        return prep.system
    devices = dev.with_local_steps(steps)
    check_deadline(sc.run, devices, sc.learning)
    check_derived(sc, devices, prep.channel, prep.system.num_params)
    return replace(prep.system, devices=devices)


def check_stale_rule(scenario: Scenario, rule: str) -> None:
    """A scheme that trains with ``rule`` under stale updates: refused where the learner cannot
    compute the rule's updates stale (``wflsim.sim.updates.UPDATE_RULES``, ``no_stale_updates``:
    a rule registered from Python that says so; every built-in rule computes them).

    Raises:
        ScenarioError: on ``server.mode``, with the reason.
    """
    mode = scenario.server.mode
    refusal = UPDATE_RULES[rule].no_stale_updates
    if mode == "sync" or refusal is None:
        return
    raise ScenarioError(
        "server.mode",
        f'scheme {scenario.scheme.name!r} trains with update rule {rule!r}, which "{mode}" '
        f"cannot run: {refusal}",
        'use server.mode = "sync", a scheme whose update rule computes stale updates (every '
        "built-in rule does), or learning.enabled = false (network only)",
    )


def package_versions() -> dict[str, str]:
    """Versions of the packages that shape a run's numbers."""
    out = {"python": platform.python_version(), "wflsim": __version__}
    for pkg in (
        "numpy",
        "scipy",
        "simpy",
        "pyarrow",
        "pandas",
        "pydantic",
        "torch",
        "torchvision",
        "scikit-learn",
    ):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def default_out_dir(prep: Prepared) -> Path:
    """``runs/<scenario name>-<UTC timestamp>-s<seed>``."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in prep.scenario.name)
    return Path("runs") / f"{safe}-{stamp}-s{prep.scenario.seed}"


# ---------------------------------------------------------------------- fingerprint

#: What each fingerprint entry means, for the one-line refusal of a mismatch.
_FINGERPRINT_WORDS = {
    "wflsim_version": "the wflsim version",
    "scenario_text_sha256": "the scenario file's text",
    "overrides": "the --set overrides",
    "seed": "the seed",
    "scenario_sha256": "the resolved scenario",
    "mobility_file_sha256": "the mobility trace file",
    "availability_file_sha256": "the availability trace file",
}


def fingerprint(prep: Prepared) -> dict[str, Any]:
    """What produced a run: wflsim version, scenario text, overrides, seed, the resolved
    scenario and the content of the input files it names (the mobility and availability
    traces). A run folder is only continued (``--resume``, a sweep's repeat) by a run with the
    same fingerprint."""
    sc = prep.scenario
    resolved = json.dumps(sc.model_dump(mode="json"), sort_keys=True)
    fp: dict[str, Any] = {
        "wflsim_version": __version__,
        "scenario_text_sha256": folders.sha256_text(prep.text),
        "overrides": list(prep.overrides),
        "seed": sc.seed,
        "scenario_sha256": folders.sha256_text(resolved),
    }
    files = {
        "mobility_file_sha256": sc.mobility.file if sc.mobility.model == "trace" else None,
        "availability_file_sha256": getattr(sc.availability, "file", None),
    }
    for key, name in files.items():
        if name:
            path = Path(name).expanduser()
            if not path.is_absolute() and prep.base_dir is not None:
                path = prep.base_dir / path
            fp[key] = folders.sha256_file(path)
    return fp


def fingerprint_difference(made: Any, now: dict[str, Any]) -> str | None:
    """The first entry in which fingerprint ``made`` (from a manifest) differs from ``now``,
    in words; None when they agree."""
    if not isinstance(made, dict):  # every run folder since 0.3 records one
        return "its manifest.json records no fingerprint (edited or damaged)"
    keys = [*_FINGERPRINT_WORDS, *sorted((now.keys() | made.keys()) - _FINGERPRINT_WORDS.keys())]
    for key in keys:
        if made.get(key) != now.get(key):
            what = _FINGERPRINT_WORDS.get(key, key)
            if key == "wflsim_version":
                return (
                    f"{what} differs (the run was made by {made.get(key)}, this is {now.get(key)})"
                )
            if key in ("overrides", "seed"):
                return f"{what} differ (the run had {made.get(key)!r}, now {now.get(key)!r})"
            return f"{what} differs"
    return None


# ---------------------------------------------------------------------- running


def channel_description(prep: Prepared) -> dict[str, Any]:
    """The channel's models and what the controller assumes (``manifest.json``'s ``channel``, the
    trace's ``wflsim.channel``), with the slot power rule of a scheme's CSI margin stated in
    ``controller_assumption.slot_power_rule``."""
    out = prep.channel.describe()
    csi = prep.scenario.channel.csi
    perfect = csi is None or (csi.error_variance == 0.0 and csi.delay_slots == 0)
    rule = slot_power_rule(prep.scenario.scheme.params, perfect)
    if rule is not None:
        out["controller_assumption"] = {**out["controller_assumption"], "slot_power_rule": rule}
    return out


def _manifest(prep: Prepared, system: SystemConstants) -> dict[str, Any]:
    sc = prep.scenario
    return {
        "wflsim_version": __version__,
        "layout": 2,
        "kernel": kernel_of(sc),
        "status": "running",
        "writer": folders.writer_identity(),
        "scenario_file": str(prep.path) if prep.path else None,
        "scenario_dir": str(prep.base_dir.resolve()) if prep.base_dir else None,
        "scenario_text": prep.text,
        "scenario_resolved": sc.model_dump(mode="json"),
        "overrides": prep.overrides,
        "seed": sc.seed,
        "fingerprint": fingerprint(prep),
        "data_dir": str(prep.data_dir.resolve()) if sc.learning.enabled else None,
        "num_params": system.num_params,
        "payload_bits": system.full_payload_bits,
        "channel": channel_description(prep),
        "uplink": uplink_of(sc).describe(system, sc.server.mode),
        "availability": {"model": "always"}
        if prep.availability is None
        else prep.availability.describe(),
        "versions": package_versions(),
        "command": sys.argv,
        "started_at": folders.now_iso(),
        "heartbeat_at": None,
        "finished_at": None,
        "frames": sc.run.frames,
        "checkpoint_every_frames": sc.run.checkpoint_every_frames,
        "frames_completed": 0,
        "parts": [],
        "checkpoint": None,
        "previous_checkpoint": None,
        "resumed": [],
        "summary": None,
        "error": None,
    }


def _trace_metadata(manifest: dict[str, Any]) -> dict[str, str]:
    return {
        "wflsim.scenario_text": manifest["scenario_text"],
        "wflsim.scenario_resolved": json.dumps(manifest["scenario_resolved"]),
        "wflsim.seed": str(manifest["seed"]),
        "wflsim.versions": json.dumps(manifest["versions"]),
        "wflsim.num_params": str(manifest["num_params"]),
        "wflsim.channel": json.dumps(manifest["channel"]),
    }


def _recorder(out: Path, manifest: dict[str, Any], prep: Prepared) -> RunRecorder:
    sc = prep.scenario
    metadata = _trace_metadata(manifest)
    return RunRecorder(
        out,
        manifest,
        metadata,
        frames=sc.run.frames,
        checkpoint_every=sc.run.checkpoint_every_frames,
        channel=_channel_recorder(prep, metadata),
        compression=sc.trace.compression,
    )


def _drive(engine: Engine, recorder: RunRecorder) -> RunStats:
    """Run the engine to the end with ``recorder`` as its sink and write the final manifest.

    On an exception the manifest records ``interrupted`` (KeyboardInterrupt) or ``failed`` with
    the error; its summary stays the one of the last completed frame; the exception is re-raised.
    """
    try:
        stats = engine.run()
        recorder.flush()
    except BaseException as err:
        status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
        log.info("run %s %s: %s: %s", recorder.folder, status, type(err).__name__, err)
        try:
            recorder.close(
                status=status, error=f"{type(err).__name__}: {err}", finished_at=folders.now_iso()
            )
        except OSError:  # a full disk: the manifest keeps its last state (writer dead: crashed)
            pass
        raise
    recorder.close(
        status="completed", summary=stats.as_dict(), error=None, finished_at=folders.now_iso()
    )
    log.info("run %s completed: %d events, %.1f J", recorder.folder, stats.rows, stats.energy_j)
    return stats


def _channel_recorder(prep: Prepared, metadata: dict[str, str]) -> ChannelRecorder | None:
    """With ``[channel] record = true``: the gatherer of every slot's channel, attached to the
    channel; the run folder's writer takes a frame's rows at a time (``channel/`` parts)."""
    if not prep.scenario.channel.record:
        prep.channel.recorder = None
        return None
    keep = ("wflsim.seed", "wflsim.channel", "wflsim.scenario_resolved")
    recorder = ChannelRecorder(
        prep.channel.num_devices,
        shadowing=prep.channel.has_shadowing,
        los=prep.channel.has_los,
        metadata={k: metadata[k] for k in keep},
    )
    prep.channel.recorder = recorder
    return recorder


def execute(
    prep: Prepared,
    learner: Learner,
    out: Path,
    *,
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    hooks: Hooks | None = None,
) -> RunStats:
    """Run a prepared scenario into the run folder ``out`` (:mod:`wflsim.sim.rundir`).

    ``out`` must not exist or be empty, or (``overwrite``) carry the marker of a wflsim run:
    its previous run's files are removed only once this run has the lock and its engine is
    built. Raises :class:`ScenarioError` (nothing written) for a folder in use or not a run's.
    """
    out = Path(out)
    check_out_dir(out, overwrite)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    lock = folders.RunLock(out)
    try:
        lock.acquire()
        check_out_dir_locked(out, overwrite)
    except BaseException:
        lock.release()
        if created:
            _remove_empty(out)
        raise
    try:
        try:
            system = prep.system
            engine = build_engine(prep, learner, progress=progress, hooks=hooks)
        except BaseException:
            lock.release()
            if created:
                _remove_empty(out)
            raise
        # the new run has started cleanly: now the previous run's files go
        return _begin(prep, system, engine, out)
    finally:
        lock.release()


def _begin(prep: Prepared, system: SystemConstants, engine: Engine, out: Path) -> RunStats:
    """Replace the run files in ``out`` (locked by this process) by a new run of ``prep`` on
    ``engine`` from frame 0, and run it to the end."""
    log.info(
        "run %s: scenario %r, scheme %s, seed %d, %d frames x %d slots, %d devices",
        out,
        prep.scenario.name,
        prep.scenario.scheme.name,
        prep.scenario.seed,
        prep.scenario.run.frames,
        prep.scenario.run.slots_per_frame,
        prep.scenario.network.num_devices,
    )
    folders.clear_run_files(out)
    folders.write_marker(out, __version__)
    manifest = _manifest(prep, system)
    recorder = _recorder(out, manifest, prep)
    engine.writer = recorder
    return _drive(engine, recorder)


def check_out_dir_locked(out: Path, overwrite: bool) -> None:
    """:func:`wflsim.app.folders.check_out_dir` again once this process holds the folder's lock
    (another run may have written the folder meanwhile)."""
    check_out_dir(out, overwrite)


def _remove_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


def resume(
    prep: Prepared,
    learner: Learner,
    out: Path,
    *,
    progress: ProgressFn | None = None,
    hooks: Hooks | None = None,
) -> RunStats | None:
    """Continue the run in folder ``out`` from its last checkpoint (None: it had completed).

    Every file kept is checked first against the SHA-256 the manifest records for it: the
    checkpoint and the parts of the frames before it (a damaged or edited one is refused).
    Whether the run is complete is decided from these files, not from the manifest's
    ``status``. The parts of frames after the checkpoint are discarded, so the events equal the
    uninterrupted run's. A folder whose run stopped before it wrote its first manifest (no frame
    completed: :func:`wflsim.app.folders.never_started`) is started from frame 0. ``prep`` must
    have the run's fingerprint (:func:`fingerprint`).

    Raises:
        ScenarioError: not a run folder, in use, another fingerprint, a symbolic link inside
            it, or a damaged checkpoint or trace (the message says which, and the fix).
    """
    out = Path(out)
    rundir.require_run_folder(out)
    with folders.RunLock(out, option="--resume"):
        rundir.check_no_links(out, "--resume")  # again, now that no other wflsim writes it
        manifest = rundir.read_manifest(out)
        if manifest is None:
            if not folders.never_started(out):
                raise rundir.unreadable_manifest(out)
            log.info("resume %s: no frame was completed; starting from frame 0", out)
            return _begin(
                prep, prep.system, build_engine(prep, learner, progress=progress, hooks=hooks), out
            )
        _check_resumable_manifest(manifest, out)
        diff = fingerprint_difference(manifest.get("fingerprint"), fingerprint(prep))
        if diff:
            raise ScenarioError(
                "--resume",
                f"{str(out)!r} was made by another run: {diff}",
                "resume with the run's own scenario, --set and --seed (or just --resume DIR), "
                "or start a new run with --overwrite",
            )
        engine = build_engine(prep, learner, progress=progress, hooks=hooks)
        checkpoint = _load_verified_checkpoint(engine, manifest, out)
        start = engine.next_frame
        events_dir = out / EVENTS_DIR
        completed = manifest.get("status") == "completed"
        parts = _verified_parts(
            events_dir, start, engine.stats.rows, out, manifest.get("parts"), completed
        )
        channel_parts = None
        if prep.scenario.channel.record:
            rows = start * prep.scenario.run.slots_per_frame * prep.channel.num_devices
            channel_parts = _verified_parts(
                out / rundir.CHANNEL_DIR, start, rows, out, manifest.get("channel_parts"), completed
            )
        frames = prep.scenario.run.frames
        if start >= frames and manifest.get("status") == "completed":
            return None
        if engine.stats.stopped_early is not None and manifest.get("status") == "completed":
            return None  # stopped on purpose (a callback): complete as it is
        if manifest.get("status") == "completed":
            log.warning("%s says completed but holds %d of %d frames: resuming", out, start, frames)
        log.info("resume %s from frame %d of %d", out, start, frames)
        folders.remove_parts_from(events_dir, start)
        if channel_parts is not None:
            folders.remove_parts_from(out / rundir.CHANNEL_DIR, start)
            manifest["channel_parts"] = channel_parts
        manifest.update(
            status="running",
            writer=folders.writer_identity(),
            error=None,
            finished_at=None,
            parts=parts,
            frames_completed=start,
            checkpoint=checkpoint,
            previous_checkpoint=None,
            command=sys.argv,
            resumed=[
                *(manifest.get("resumed") or []),
                {"at": folders.now_iso(), "from_frame": start, "host": rundir.hostname()},
            ],
        )
        if start == 0:
            manifest.update(summary=None)
        recorder = _recorder(out, manifest, prep)
        engine.writer = recorder
        return _drive(engine, recorder)


#: What the writer of a resumed run takes from its manifest (the trace's metadata) and what
#: tells which run made it, with the JSON type each must have.
_RESUMED_KEYS: dict[str, type | tuple[type, ...]] = {
    "fingerprint": dict,
    "scenario_text": str,
    "scenario_resolved": dict,
    "seed": int,
    "versions": dict,
    "num_params": int,
    "channel": dict,
}


def _check_resumable_manifest(manifest: dict[str, Any], out: Path) -> None:
    """Refuse a manifest that lacks what resuming needs (edited or damaged; every run since 0.3
    records it), naming the first missing field instead of failing on it later."""
    for key, kind in _RESUMED_KEYS.items():
        value = manifest.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _unresumable(out, key)


def _unresumable(out: Path, key: str) -> ScenarioError:
    """The refusal of a run folder whose manifest lacks ``key`` that resuming needs."""
    return ScenarioError(
        "--resume",
        f"{str(out / rundir.MANIFEST)!r} has no valid {key!r} (edited or damaged), so the run "
        "cannot be continued",
        f"compute the run again: wflsim run SCENARIO --out {out} --overwrite",
    )


def _tampered(path: Path, what: str) -> ScenarioError:
    """The refusal of a run file that the manifest does not vouch for."""
    return ScenarioError(
        "--resume",
        f"{str(path)!r} {what} (damaged or edited)",
        "start the run again with --overwrite",
    )


def _load_verified_checkpoint(
    engine: Engine, manifest: dict[str, Any], out: Path
) -> dict[str, Any] | None:
    """Load ``out``'s checkpoint into ``engine`` once its SHA-256 equals the one the manifest
    records for it (``checkpoint``, or ``previous_checkpoint`` after a kill before the new one
    replaced it); the manifest's entry of the checkpoint loaded (None: there is none yet, the run
    starts from frame 0).

    Raises:
        ScenarioError: the checkpoint is missing though one was complete, or it matches no
            recorded hash, or it is damaged.
    """
    ckpt = out / rundir.CHECKPOINT
    known = [
        e
        for e in (manifest.get("checkpoint"), manifest.get("previous_checkpoint"))
        if isinstance(e, dict)
    ]
    if not ckpt.exists():
        if isinstance(manifest.get("previous_checkpoint"), dict):
            raise _tampered(ckpt, "is missing, but manifest.json records a completed one")
        return None  # no checkpoint was complete yet: the run starts from frame 0
    digest = folders.sha256_file(ckpt)
    entry = next((e for e in known if e.get("sha256") == digest), None)
    if entry is None:
        raise _tampered(ckpt, "does not match the SHA-256 that manifest.json records for it")
    try:
        checkpoints.load_run_state(engine, checkpoints.load(ckpt))
    except (ValueError, KeyError, TypeError) as err:
        raise ScenarioError(
            "--resume",
            f"the checkpoint of {str(out)!r} is damaged ({type(err).__name__})",
            "start the run again with --overwrite",
        ) from None
    if entry.get("next_frame") != engine.next_frame:
        raise _tampered(ckpt, "is not the checkpoint manifest.json records for it")
    return entry


def _recorded_hashes(entries: Any) -> dict[int, str]:
    """Frame -> SHA-256 of the part entries a manifest lists (malformed entries are skipped)."""
    out: dict[int, str] = {}
    for e in entries if isinstance(entries, list) else []:
        if (
            isinstance(e, dict)
            and isinstance(e.get("frame"), int)
            and isinstance(e.get("sha256"), str)
        ):
            out[e["frame"]] = e["sha256"]
    return out


def _verified_parts(
    events_dir: Path,
    frames: int,
    rows: int,
    out: Path,
    recorded: Any = None,
    completed: bool = False,
) -> list[dict[str, Any]]:
    """The manifest entries of the parts ``0 .. frames-1`` in ``events_dir`` (the events or the
    channel table), checked complete against the checkpoint's row count ``rows`` and each
    against the SHA-256 the manifest lists for it (``recorded``: its ``parts`` entries), after
    refusing a part the manifest does not list (copied in), except the frame in flight of a run
    that did not complete (``completed``: its manifest says it did), which resume recomputes
    (:func:`wflsim.sim.rundir.unlisted_parts`)."""
    import pyarrow.parquet as pq

    found = dict(list_parts(events_dir))
    missing = [f for f in range(frames) if f not in found]
    hashes = _recorded_hashes(recorded)
    in_flight = None if completed else next(f for f in range(len(hashes) + 1) if f not in hashes)
    foreign = [p for f, p in sorted(found.items()) if f not in hashes and f != in_flight]
    if foreign:
        raise rundir.foreign_part_error(foreign[0])
    entries, total = [], 0
    if not missing:
        for f in range(frames):
            p = found[f]
            digest = folders.sha256_file(p)
            if hashes.get(f) != digest:
                what = "is not listed in" if f not in hashes else "does not match the SHA-256 in"
                raise _tampered(p, f"{what} manifest.json")
            try:
                n = pq.ParquetFile(p).metadata.num_rows
            except Exception:  # a damaged part: reported below
                missing.append(f)
                continue
            total += n
            entries.append(
                {
                    "file": f"{events_dir.name}/{p.name}",
                    "frame": f,
                    "rows": n,
                    "sha256": digest,
                }
            )
    if missing or total != rows:
        what = f"frame {missing[0]}'s part is missing or damaged" if missing else "row counts"
        raise ScenarioError(
            "--resume",
            f"the trace of {str(out)!r} does not match its checkpoint ({what})",
            "start the run again with --overwrite",
        )
    return entries
