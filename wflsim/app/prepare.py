"""Preparing a run: a scenario (a file, a table, a manifest's text) validated and resolved in full
(devices, mobility, channel, availability, data folder, the scheme built once) before anything is
written, so a bad input leaves no output behind. :class:`Prepared` is what the rest of a run
is built from (:mod:`wflsim.app.assemble`, :mod:`wflsim.app.runner`)."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wflsim.sim.config.catalogue import MODELS
from wflsim.sim.config.derived import (
    check_derived,
    check_slot_wait,
    costly_wait_fix,
    longest_wait_s,
    wait_events_per_s,
    wait_limit_text,
)
from wflsim.sim.config.limits import MAX_SLOT_WAIT_S
from wflsim.sim.config.loading import (
    Override,
    apply_overrides,
    check_cells,
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
    resolve_privacy,
)
from wflsim.sim.config.schema import Scenario
from wflsim.sim.errors import ScenarioError
from wflsim.sim.privacy.compose import check_scenario as check_privacy
from wflsim.sim.privacy.mechanism import PrivacySpec
from wflsim.sim.radio.cells.component import Cells, build_cells
from wflsim.sim.radio.cells.config import cell_uplink_mode, resolve_sites_file
from wflsim.sim.radio.cells.layout import build_layout
from wflsim.sim.radio.modes import uplink_mode
from wflsim.sim.radio.ns3.build import ensure_program
from wflsim.sim.registry import STRATEGIES, UPDATE_RULES, build_scheme
from wflsim.sim.rng import Streams
from wflsim.sim.world import physics
from wflsim.sim.world.availability import Availability, build_availability
from wflsim.sim.world.channel import Channel, build_channel
from wflsim.sim.world.mobility import Mobility, build_mobility
from wflsim.sim.world.system import DeviceArrays, SystemConstants

from .fetch import FETCHABLE, fetch_dataset
from .scenario import (
    check_scheme,
    check_strategy,
    report_findings,
    report_implausible,
    validate_scenario,
)


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
    #: several cells (``[cells]``; None: one cell)
    cells: Cells | None = field(default=None)
    #: ``[privacy]`` resolved, ``z`` calibrated (None: no privacy)
    privacy: PrivacySpec | None = field(default=None)


@dataclass(frozen=True)
class ScenarioSource:
    """A scenario as the text it is read from, with the folder its relative paths (a mobility
    trace, a channel table, the data folder) are resolved against: a file's text and folder, or a
    table given from Python with the working directory. A table is kept as the values it holds
    (:meth:`table` gives them back; they are never written out and read back) and written as
    TOML only for the record (``text``: the manifest's ``scenario_text``, from which a run
    continued from its folder reads the same table). A sweep's points are prepared from their
    sweep's source, so every point runs the same scenario even if the file changes meanwhile."""

    text: str
    base_dir: Path
    path: Path | None = None
    #: the table given from Python (plain values, ``None`` values left out), None for a file
    data: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)

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
        data = _without_nones(plain_value(table))
        return cls(scenario_text(data), base_dir or Path.cwd(), data=data)

    @classmethod
    def of(cls, scenario: str | Path | ScenarioSource) -> ScenarioSource:
        """``scenario`` itself, or the source of the scenario file it names."""
        return scenario if isinstance(scenario, ScenarioSource) else cls.from_file(scenario)

    def table(self) -> dict[str, Any]:
        """The scenario's table: a copy of the table given from Python, or the file's text
        parsed."""
        if self.data is not None:
            return copy.deepcopy(dict(self.data))
        return parse_scenario_text(self.text, str(self.path) if self.path else "scenario")


def _without_nones(value: Any) -> Any:
    """A plain table without its ``None`` values, at any depth (as its TOML text leaves them
    out: a ``None`` is "the default", :func:`wflsim.app.scenario.check_nones`)."""
    if isinstance(value, dict):
        return {k: _without_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nones(v) for v in value]
    return value


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
    overrides: Sequence[str | Override] | None = None,
    seed: int | None = None,
    data_dir: str | None = None,
    *,
    strict: bool = False,
    warn: bool = True,
    download: bool = False,
    check_data: bool = True,
) -> Prepared:
    """Validate and resolve a scenario's source with overrides (``--set`` texts, or values given
    from Python as :class:`~wflsim.sim.config.loading.Override`, set as they are; the run
    records each as its ``--set`` text) (no output is written); implausible values as in
    :func:`prepare_scenario` (``strict``, ``warn``, ``download``, ``check_data``).

    Raises:
        ScenarioError: any problem, naming the field and the fix.
    """
    items: list[str | Override] = (
        [overrides] if isinstance(overrides, str) else [*(overrides or [])]
    )
    if seed is not None:
        items.append(Override.of("seed", int(seed)))
    scenario = validate_scenario(apply_overrides(source.table(), items))
    return prepare_scenario(
        scenario,
        text=source.text,
        path=source.path,
        overrides=[o.text if isinstance(o, Override) else o for o in items],
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
    privacy_noise_multiplier: float | None = None,
) -> Prepared:
    """Resolve an already validated :class:`Scenario` (devices, mobility, data directory; its
    scheme and strategy are checked against their registries first,
    :func:`wflsim.app.scenario.check_scheme`, :func:`~wflsim.app.scenario.check_strategy`).

    Values implausible for their unit (``docs/scenario.md``, "Plausibility warnings") are
    reported before the rest is resolved: each as a
    :class:`~wflsim.sim.errors.PlausibilityWarning`; with ``strict`` the first is an error
    instead. ``warn=False`` leaves them to the caller (a sweep reports each distinct finding of
    its points once, and its points do not report them again). ``download``: a missing
    MNIST, Fashion-MNIST or CIFAR-10 is downloaded into the data directory
    (:func:`wflsim.app.fetch.fetch_dataset`) once everything else has been checked, instead
    of being refused. ``check_data=False``: the dataset is neither checked nor downloaded (a
    sweep planned with ``download`` fetches its points' datasets once, then checks them:
    :func:`wflsim.app.sweep.run_sweep`). ``privacy_noise_multiplier``: the ``z`` a run
    calibrated for its ``privacy.target_epsilon`` (a resumed run's, from its manifest), taken
    as it is.

    Raises:
        ScenarioError: any problem, naming the field and the fix (with ``strict``, an
            implausible value too).
    """
    check_scheme(scenario)
    check_strategy(scenario)
    if scenario.cells is not None and scenario.cells.sites_file is not None:
        # the file's sites become the scenario's (its manifest, fingerprint and kernel see them)
        resolved = resolve_sites_file(scenario.cells, base_dir)
        scenario = scenario.model_copy(update={"cells": resolved})
        check_cells(scenario)
    if strict or warn:
        report_implausible(scenario, strict=strict)
    streams = Streams(scenario.seed)
    n = scenario.network.num_devices
    devices = resolve_devices(scenario.devices, n, streams)
    devices = devices.with_local_steps(resolve_local_steps(scenario.learning, devices.batch_size))
    check_deadline(scenario.run, strategy_devices(scenario, devices), scenario.learning)
    # with several cells the devices live in the layout's area, and a link may be as long as
    # its diameter plus the farthest site's distance
    area_m = link_m = scenario.network.cell_radius_m
    if scenario.cells is not None:
        lay = build_layout(scenario.cells, area_m, cell_uplink_mode(scenario.uplink.mode))
        area_m = lay.area_radius_m
        link_m = area_m + float(np.hypot(lay.sites_m[:, 0], lay.sites_m[:, 1]).max())
    mobility = build_mobility(
        scenario.mobility,
        num_devices=n,
        cell_radius_m=area_m,
        min_distance_m=scenario.network.min_distance_m,
        streams=streams,
        base_dir=base_dir,
    )
    channel = build_channel(
        scenario.channel,
        num_devices=n,
        min_distance_m=scenario.network.min_distance_m,
        cell_radius_m=link_m,
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
    system = resolve_system(scenario, devices)  # the devices with the strategy's extra cycles
    check_derived(scenario, system.devices, channel, num_params)
    wait_events = wait_events_per_s(
        mobility, availability, simulated_clock=scenario.mobility.clock == "simulated"
    )
    check_hierarchy(scenario, system, wait_events)
    if scenario.learning.enabled:
        check_learner_memory(scenario)
    cells = None
    if scenario.cells is not None:
        cells = build_cells(
            scenario.cells,
            channel=channel,
            channel_cfg=scenario.channel,
            system=system,
            uplink_mode=cell_uplink_mode(scenario.uplink.mode),
            cell_radius_m=scenario.network.cell_radius_m,
            streams=streams,
        )
    if strict or warn:
        report_findings(cross_findings(scenario, system.devices), strict=strict)
    ddir = resolve_data_dir(data_dir, scenario, base_dir)
    if scenario.learning.enabled and check_data and not download:
        check_data_dir(scenario.learning.dataset, ddir)
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
    check_slot_wait(scenario, system, channel, scheme.closes_at, wait_events)
    if scenario.learning.enabled:
        check_stale_rule(scenario, scheme.update_rule.name)
    check_aircomp(scenario, scheme.update_rule.name, scheme)
    check_privacy(scenario, scheme.update_rule.name)
    check_ns3(scenario, scheme.closes_at)
    check_truncated_wait(scenario, scheme.closes_at, cells)
    privacy = resolve_privacy(scenario, getattr(scheme, "power", None), privacy_noise_multiplier)
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
        cells,
        privacy,
    )


def check_hierarchy(
    scenario: Scenario, system: SystemConstants, events_per_s: dict[str, float] | None = None
) -> None:
    """Bound a cloud round (both ways at the longest latency its spec can draw,
    :meth:`~wflsim.sim.servers.hierarchy.HierarchyConfig.max_round_s`). Under ``sync`` the next
    slot waits for it: refuse a round longer than the clock may wait at once
    (:func:`~wflsim.sim.config.derived.longest_wait_s`, as a slot that waits for its last
    upload). Under stale updates a cloud round must end before the next one starts (the edges
    keep serving while the models travel): refuse a round trip that can last ``k2 tau_0`` or
    more.

    Raises:
        ScenarioError: naming ``server.hierarchy.backhaul_rate_bps`` (with the least rate that
            fits) or ``backhaul_latency_s``, the field that makes waiting costly, or
            ``server.hierarchy.cloud_every_slots``.
    """
    h = scenario.server.hierarchy
    if h is None:
        return
    bits = system.full_payload_bits
    longest = h.max_round_s(bits)
    if scenario.server.mode == "sync":
        events = events_per_s or {}
        limit_s, why = longest_wait_s(events)
        if longest <= limit_s:
            return
        latency_s = 2.0 * h.max_latency_s()
        other = 'or use server.mode = "semi_sync" or "async" (the edges keep serving while the '
        other += "models travel)"
        if why is not None and longest <= MAX_SLOT_WAIT_S:
            field = why
            fix = f"{costly_wait_fix(why)}, shorten the backhaul's latency, {other}"
        elif latency_s >= limit_s / 2.0:
            field = "server.hierarchy.backhaul_latency_s"
            fix = f"give a latency of at most {limit_s / 2.0 - bits / h.backhaul_rate_bps:.3g} s, {other}"
        else:
            field = "server.hierarchy.backhaul_rate_bps"
            fix = f"give a rate of at least {2.0 * bits / (limit_s - latency_s):.3g} bit/s, {other}"
        raise ScenarioError(
            field,
            f"a cloud round can take {longest:.4g} s (the model's {bits:.4g} bits both ways "
            f"at server.hierarchy.backhaul_rate_bps = {h.backhaul_rate_bps:g} bit/s and the "
            f"longest latency, {h.max_latency_s():g} s) and the edges wait for it "
            f'(server.mode = "sync"); {wait_limit_text("a cloud round", limit_s, why, events)}',
            fix,
        )
    period = h.cloud_every_slots * scenario.run.deadline_s
    if longest >= period:
        raise ScenarioError(
            "server.hierarchy.cloud_every_slots",
            f"a cloud round can take {longest:.4g} s (the model's {bits:.4g} "
            f"bit both ways at the longest latency) but one starts every {period:.4g} s "
            f"(server.mode = {scenario.server.mode!r} keeps the slots' grid)",
            "take cloud rounds less often, or give the backhaul a higher rate or less latency",
        )


def strategy_devices(scenario: Scenario, devices: DeviceArrays) -> DeviceArrays:
    """``devices`` with the ``[strategy]``'s extra cycles per local step on their own ``E_n``
    local steps (:meth:`~wflsim.sim.strategies.StrategyCosts.extra_cycles_per_step`; SCAFFOLD's
    ``D + 4 D / E_n``, so ``D E_n + 4 D`` cycles an update); ``devices`` as they are for a
    strategy that costs no cycles. Call it again whenever ``E_n`` change."""
    costs = STRATEGIES[scenario.strategy.name].costs
    extra = costs.extra_cycles_per_step(payload_num_params(scenario.learning), devices.local_steps)
    if not np.any(np.asarray(extra) != 0):
        return devices
    return devices.with_extra_cycles(
        np.broadcast_to(np.asarray(extra, dtype=np.float64), (devices.num_devices,)).copy()
    )


#: Bytes of one model parameter in the learner (float32).
PARAM_BYTES = 4
#: Copies of the model the learner keeps besides one gradient per device: the model, the next
#: model and the aggregated step.
MODEL_COPIES = 3


def available_memory_bytes(device: str = "cpu") -> tuple[int | None, str]:
    """Memory a new allocation may take now, bytes: on a GPU (``device`` ``"cuda"``, or
    ``"auto"`` with one) its free memory; else the host's available memory (``psutil`` when
    installed, else Linux's ``MemAvailable``, else the free pages of ``os.sysconf``); None
    where it cannot be read; with where it was read (``"the GPU"``, ``"the host"``)."""
    if device != "cpu":
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.mem_get_info()[0]), "the GPU"
    try:
        import psutil

        return int(psutil.virtual_memory().available), "the host"
    except ImportError:
        pass
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "the host"
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE")), "the host"
    except (OSError, ValueError, AttributeError):
        return None, "the host"


def learner_memory_bytes(num_params: int, num_devices: int) -> int:
    """A lower bound on the learner's memory, bytes: ``D`` float32 parameters times the
    :data:`MODEL_COPIES` copies of the model it keeps and one gradient per device of a slot
    (``N``, computed together)."""
    return PARAM_BYTES * int(num_params) * (MODEL_COPIES + int(num_devices))


def check_learner_memory(scenario: Scenario) -> None:
    """Refuse, before the model is built, a learner that cannot fit in the memory available
    now (:func:`learner_memory_bytes` against :func:`available_memory_bytes`); the model's
    parameter count comes from the catalogue, or, for a registered model, from a model built on
    torch's meta device (which allocates nothing). Nothing is checked where the available
    memory cannot be read.

    Raises:
        ScenarioError: naming ``learning.model``, with the estimate and the memory available.
    """
    lc = scenario.learning
    n = scenario.network.num_devices
    num_params = payload_num_params(lc.model_copy(update={"num_params": None}))
    need = learner_memory_bytes(num_params, n)
    have, where = available_memory_bytes(lc.device)
    if have is None or need <= have:
        return
    gib = 2.0**30
    raise ScenarioError(
        "learning.model",
        f"model {lc.model!r} has {num_params:,} parameters: the learner keeps at least "
        f"{MODEL_COPIES + n} float32 copies of them (the model, its next version and step, and "
        f"the gradients of {n} devices), {need / gib:.3g} GiB, but {have / gib:.3g} GiB of "
        f"memory is available on {where}",
        "use a smaller model, or fewer devices (network.num_devices)",
    )


def resolve_system(scenario: Scenario, devices: DeviceArrays) -> SystemConstants:
    """The physical constants of a run: devices, radio, ``D`` (the model's, from the catalogue,
    or ``learning.num_params``), the architecture behind ``D`` when it is the model's, and what
    the ``[strategy]`` costs a device (:class:`~wflsim.sim.strategies.StrategyCosts`: its extra
    cycles per local step on ``D`` parameters, in the devices' ``extra_cycles_per_step``, and its
    upload factor; network-only runs are charged them too)."""
    net, lc = scenario.network, scenario.learning
    num_params = payload_num_params(lc)
    costs = STRATEGIES[scenario.strategy.name].costs
    return SystemConstants(
        devices=strategy_devices(scenario, devices),
        bandwidth_hz=net.bandwidth_hz,
        noise_w=float(physics.dbm_to_w(scenario.uplink.noise_dbm(net))),
        deadline_s=scenario.run.deadline_s,
        num_params=num_params,
        bits_per_param=lc.bits_per_param,
        architecture=(lc.model, lc.dataset)
        if lc.num_params is None and lc.model in MODELS
        else None,
        upload_factor=costs.upload_factor,
        rate_model=scenario.channel.rate(),
    )


#: The server strategies whose step needs only the weighted sum of the updates (what an
#: over-the-air sum delivers).
SUM_STRATEGIES = ("fedavg", "fedavgm", "fedadagrad", "fedadam", "fedyogi", "fedprox", "fednova")

#: Why an update rule's uploads cannot be summed over the air (the others can).
_NOT_OVER_THE_AIR = {
    "quantisation": "its updates are quantised to bits per value (a digital payload); analog "
    "symbols carry the real values",
    "topk_ef": "each device sends its own K coordinates with their indices (a digital, sparse "
    "payload): the symbols of a sum carry one coordinate each, the same for every device",
}


def check_truncated_wait(scenario: Scenario, closes_at: str, cells: Cells | None) -> None:
    """A synchronous slot that waits for its last upload on a shared band under the truncated
    rate model is refused: an upload below SNR_min on its share never ends, and nothing cuts it.

    Raises:
        ScenarioError: on ``scheme.name``, with the physical reason.
    """
    if scenario.channel.rate_model != "truncated_shannon" or closes_at != "last_upload":
        return
    shared = uplink_mode(scenario.uplink.mode).interacting or (
        cells is not None and cells.layout.interacts
    )
    if scenario.server.mode != "sync" or not shared or scenario.uplink.mode == "ns3_lte":
        return
    raise ScenarioError(
        "scheme.name",
        f"scheme {scenario.scheme.name!r} promises no outage: a synchronous slot waits for its "
        'last upload, but rate_model = "truncated_shannon" carries nothing below SNR_min and the '
        "channel does not change within a slot, so on a shared band one device in a deep fade "
        "would hold the slot forever",
        "use a scheme that closes the slot at the deadline (two_timescale, only_pc, "
        'fixed_power, ...), rate_model = "shannon", or server.mode = "semi_sync" or "async"',
    )


def check_ns3(scenario: Scenario, closes_at: str) -> None:
    """``[uplink] mode = "ns3_lte"``: a synchronous slot that waits for its last upload is
    refused (the physical reason in the message); then ns-3 must be installed and wflsim's
    program built (built now if it is not yet).

    Raises:
        ScenarioError: on ``scheme.name``; :class:`~wflsim.sim.errors.Ns3Unavailable` (on
            ``uplink.mode``) where ns-3 or a compiler is missing or the build fails.
    """
    if scenario.uplink.mode != "ns3_lte":
        return
    if closes_at == "last_upload" and scenario.server.mode == "sync":
        raise ScenarioError(
            "scheme.name",
            f"scheme {scenario.scheme.name!r} promises no outage: a synchronous slot waits for its "
            "last upload, but LTE decodes nothing below its lowest MCS (in ns-3 about -2 dB of "
            "SNR over the band) and the channel does not change within a slot, so one device in "
            "a deep fade would hold the slot forever",
            "use a scheme that closes the slot at the deadline (two_timescale, only_pc, "
            'fixed_power, ...), or server.mode = "semi_sync" or "async" (the channel changes '
            "every slot while an upload waits)",
        )
    ensure_program()


def check_aircomp(scenario: Scenario, rule: str, scheme: object = None) -> None:
    """``[uplink] mode = "aircomp"``: refused where the over-the-air sum cannot be what the
    scenario asks (the physical reason in the message).

    Raises:
        ScenarioError: on the field that conflicts, with the reason.
    """
    if scenario.uplink.mode != "aircomp":
        return
    fix = "or another uplink.mode (docs/aircomp.md)"
    if scenario.server.mode != "sync":
        raise ScenarioError(
            "server.mode",
            f'"{scenario.server.mode}" lets each device upload when it is done, so there is no '
            "common transmission: an over-the-air sum needs every update on the same symbols at "
            "one instant",
            f'use server.mode = "sync", {fix}',
        )
    if rule in _NOT_OVER_THE_AIR:
        raise ScenarioError(
            "scheme.name",
            f"scheme {scenario.scheme.name!r} trains with update rule {rule!r}: "
            f"{_NOT_OVER_THE_AIR[rule]}",
            f"use a scheme that sends real-valued updates (e.g. two_timescale, ideal), {fix}",
        )
    controlled = getattr(scheme, "power", None) == "threshold" and (
        getattr(scheme, "controller", None) is not None
    )
    if scenario.uplink.power_control == "controller" and not controlled:
        raise ScenarioError(
            "uplink.power_control",
            f'"controller" is the paper\'s controller adapted: the scheme decides who inverts '
            f"its channel by the drift-plus-penalty against the frame's threshold, and scheme "
            f"{scenario.scheme.name!r} does not (it has no Proposition-1 threshold)",
            "use scheme two_timescale, only_pc or random_freezing, or power_control = "
            '"truncated_inversion" or "optimal"',
        )
    if scenario.strategy.selection.rule == "rate_per_joule":
        raise ScenarioError(
            "strategy.selection.rule",
            '"rate_per_joule" ranks devices by their digital upload rate per joule; over the air '
            "every device transmits for the same window at the power its channel inversion needs, "
            "so there is no rate to rank",
            f'use "uniform", "queue_slack" or "power_of_choice", {fix}',
        )
    name = scenario.strategy.name
    if name not in SUM_STRATEGIES:
        raise ScenarioError(
            "strategy.name",
            f"{name!r} needs each device's update (order statistics, distances or per-device "
            "state), and the server of an over-the-air sum receives only their weighted sum",
            f"use one of {', '.join(SUM_STRATEGIES)}, {fix}",
        )


def check_stale_rule(scenario: Scenario, rule: str) -> None:
    """A scheme that trains with ``rule`` under stale updates: refused where the learner cannot
    compute the rule's updates stale (``wflsim.sim.registry.UPDATE_RULES``, ``no_stale_updates``:
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
