"""Orchestration of one run: validate everything, then open the output, simulate, close.

Nothing is written before the scenario, the data directory, the mobility trace and the learner
have all been checked, so a bad input leaves no output directory behind. Once the run has
started, the trace is written frame by frame; if the run fails or is interrupted, the Parquet file
is closed properly (every frame written so far stays readable) and ``manifest.json`` records the
status (``failed`` / ``interrupted``) and the error.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim import __version__
from sim.config.loading import load_scenario
from sim.config.resolve import (
    check_data_dir,
    check_deadline,
    payload_num_params,
    resolve_data_dir,
    resolve_devices,
)
from sim.config.schema import Scenario
from sim.engine import Engine, EngineConfig, ProgressFn, RunStats
from sim.errors import ScenarioError
from sim.learner import Learner, NullLearner, build_learner
from sim.rng import Streams
from sim.schemes import build_scheme
from sim.trace import TraceWriter, write_json_atomic
from sim.world import physics
from sim.world.channel import Channel, ChannelRecorder, build_channel
from sim.world.mobility import Mobility, build_mobility
from sim.world.system import DeviceArrays, SystemConstants


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


def prepare(
    path: str | Path,
    overrides: list[str] | None = None,
    seed: int | None = None,
    data_dir: str | None = None,
) -> Prepared:
    """Load and validate a scenario file fully (no output is written).

    Raises:
        ScenarioError: any problem, naming the field and the fix.
    """
    overrides = list(overrides or [])
    if seed is not None:
        overrides.append(f"seed={int(seed)}")
    scenario, text = load_scenario(path, overrides)
    base_dir = Path(path).resolve().parent
    return prepare_scenario(
        scenario,
        text=text,
        path=Path(path),
        overrides=overrides,
        data_dir=data_dir,
        base_dir=base_dir,
    )


def prepare_scenario(
    scenario: Scenario,
    *,
    text: str = "",
    path: Path | None = None,
    overrides: list[str] | None = None,
    data_dir: str | None = None,
    base_dir: Path | None = None,
) -> Prepared:
    """Resolve an already validated :class:`Scenario` (devices, mobility, data directory)."""
    streams = Streams(scenario.seed)
    n = scenario.network.num_devices
    devices = resolve_devices(scenario.devices, n, streams)
    check_deadline(scenario.run, devices)
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
    ddir = resolve_data_dir(data_dir, scenario, base_dir)
    if scenario.learning.enabled:
        check_data_dir(scenario.learning.dataset, ddir)
    else:
        payload_num_params(scenario.learning)
    return Prepared(
        scenario, text, path, list(overrides or []), streams, devices, mobility, channel, ddir
    )


def make_learner(prep: Prepared) -> Learner:
    """The learner of a prepared scenario (a :class:`NullLearner` for network-only runs)."""
    lc = prep.scenario.learning
    if not lc.enabled:
        return NullLearner(payload_num_params(lc))
    try:
        return build_learner(
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
        )
    except FileNotFoundError as err:
        raise ScenarioError(
            "learning.data_dir", str(err).splitlines()[0], "see docs/scenario.md, [learning]"
        ) from None
    except ValueError as err:
        if lc.device != "cpu" and "cuda" in str(err).lower():
            raise ScenarioError(
                "learning.device", str(err).splitlines()[0], 'use device = "cpu" or "auto"'
            ) from None
        raise


def make_system(prep: Prepared, learner: Learner) -> SystemConstants:
    """The physical constants of the run; ``D`` is the learner's parameter count."""
    net = prep.scenario.network
    return SystemConstants(
        devices=prep.devices,
        bandwidth_hz=net.bandwidth_hz,
        noise_w=float(physics.dbm_to_w(net.noise_dbm)),
        deadline_s=prep.scenario.run.deadline_s,
        num_params=int(learner.num_params),
        bits_per_param=prep.scenario.learning.bits_per_param,
    )


def engine_config(scenario: Scenario) -> EngineConfig:
    """The engine's timing and logging settings of a scenario."""
    return EngineConfig(
        frames=scenario.run.frames,
        slots_per_frame=scenario.run.slots_per_frame,
        deadline_s=scenario.run.deadline_s,
        mobility_clock=scenario.mobility.clock,
        eval_every_slots=scenario.learning.eval_every_slots,
        evaluate=scenario.learning.enabled,
        late_upload_energy=scenario.trace.late_upload_energy,
    )


def build_engine(
    prep: Prepared,
    learner: Learner,
    *,
    writer: TraceWriter | None = None,
    progress: ProgressFn | None = None,
) -> Engine:
    """The engine of a prepared scenario: system constants, scheme, and every component."""
    system = make_system(prep, learner)
    sc = prep.scenario
    scheme = build_scheme(sc.scheme.name, sc.scheme.params, system)
    return Engine(
        engine_config(sc),
        system,
        prep.mobility,
        prep.channel,
        scheme,
        learner,
        writer=writer,
        progress=progress,
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


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def default_out_dir(prep: Prepared) -> Path:
    """``runs/<scenario name>-<UTC timestamp>-s<seed>``."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in prep.scenario.name)
    return Path("runs") / f"{safe}-{stamp}-s{prep.scenario.seed}"


#: The channel table of a run with ``[channel] record = true``.
CHANNEL_FILE = "channel.parquet"
#: What a run directory holds; ``--overwrite`` deletes nothing else.
RUN_FILES = frozenset({"events.parquet", "manifest.json", "manifest.json.tmp", CHANNEL_FILE})


def check_out_dir(out: Path, overwrite: bool) -> None:
    """An existing non-empty output directory is an error unless ``overwrite``; even then, only
    a directory that holds nothing but a previous run's files is replaced."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ScenarioError(
            "--out", f"{str(out)!r} exists and is not a directory", "choose another --out"
        )
    content = {p.name for p in out.iterdir()}
    if not content:
        return
    if not overwrite:
        raise ScenarioError(
            "--out",
            f"{str(out)!r} already exists and is not empty",
            "choose another --out or pass --overwrite",
        )
    if not content <= RUN_FILES:
        extra = ", ".join(sorted(content - RUN_FILES)[:3])
        raise ScenarioError(
            "--out",
            f"{str(out)!r} holds more than a wflsim run (e.g. {extra}); --overwrite only replaces run folders",
            "choose another --out",
        )


def _channel_recorder(
    prep: Prepared, out: Path, metadata: dict[str, str]
) -> ChannelRecorder | None:
    """With ``[channel] record = true``: the writer of ``out/channel.parquet``, attached to the
    channel (every slot's gains go to it)."""
    if not prep.scenario.channel.record:
        prep.channel.recorder = None
        return None
    keep = ("wflsim.seed", "wflsim.channel", "wflsim.scenario_resolved")
    recorder = ChannelRecorder(
        out / CHANNEL_FILE,
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
) -> RunStats:
    """Run a prepared scenario and write ``out/events.parquet`` and ``out/manifest.json`` (and
    ``out/channel.parquet`` with ``[channel] record = true``)."""
    check_out_dir(out, overwrite)
    system = make_system(prep, learner)
    sc = prep.scenario
    if out.exists() and overwrite:
        for name in RUN_FILES:
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)

    resolved = sc.model_dump(mode="json")
    manifest: dict[str, Any] = {
        "wflsim_version": __version__,
        "status": "running",
        "scenario_file": str(prep.path) if prep.path else None,
        "scenario_text": prep.text,
        "scenario_resolved": resolved,
        "overrides": prep.overrides,
        "seed": sc.seed,
        "data_dir": str(prep.data_dir) if sc.learning.enabled else None,
        "num_params": system.num_params,
        "payload_bits": system.full_payload_bits,
        "channel": prep.channel.describe(),
        "versions": package_versions(),
        "command": sys.argv,
        "started_at": _now(),
        "finished_at": None,
        "summary": None,
        "error": None,
    }
    write_json_atomic(out / "manifest.json", manifest)
    metadata = {
        "wflsim.scenario_text": prep.text,
        "wflsim.scenario_resolved": json.dumps(resolved),
        "wflsim.seed": str(sc.seed),
        "wflsim.versions": json.dumps(manifest["versions"]),
        "wflsim.num_params": str(system.num_params),
        "wflsim.channel": json.dumps(manifest["channel"]),
    }
    writer = TraceWriter(out / "events.parquet", metadata)
    recorder = _channel_recorder(prep, out, metadata)
    engine = build_engine(prep, learner, writer=writer, progress=progress)
    try:
        stats = engine.run()
    except BaseException as err:
        writer.close()
        if recorder is not None:
            recorder.close()
        manifest["status"] = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
        manifest["error"] = f"{type(err).__name__}: {err}"
        manifest["finished_at"] = _now()
        manifest["summary"] = engine.stats.as_dict()
        write_json_atomic(out / "manifest.json", manifest)
        raise
    writer.close()
    if recorder is not None:
        recorder.close()
    manifest["status"] = "completed"
    manifest["finished_at"] = _now()
    manifest["summary"] = stats.as_dict()
    write_json_atomic(out / "manifest.json", manifest)
    return stats
