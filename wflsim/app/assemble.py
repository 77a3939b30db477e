"""Assembling a run's parts from a prepared scenario: its learner (PyTorch or network-only), its
engine settings, uplink and slot kernel, and the engine with its scheme and server."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from wflsim.sim.config.catalogue import DatasetError
from wflsim.sim.config.derived import check_derived
from wflsim.sim.config.resolve import (
    check_deadline,
    payload_num_params,
    resolve_local_steps,
)
from wflsim.sim.config.schema import Ns3Config, Scenario
from wflsim.sim.engine import Engine, EngineConfig, FrameSink, Hooks, ProgressFn
from wflsim.sim.errors import ScenarioError
from wflsim.sim.kernels import KernelName, make_kernel
from wflsim.sim.learner import AirCompLearner, Learner, NullLearner
from wflsim.sim.radio.cells.config import cell_uplink_mode
from wflsim.sim.radio.cells.layout import build_layout
from wflsim.sim.radio.modes import uplink_mode
from wflsim.sim.radio.spec import Ns3Options, UplinkSpec
from wflsim.sim.registry import build_scheme, make_server
from wflsim.sim.rng import Streams
from wflsim.sim.selection import Selection
from wflsim.sim.servers import Server
from wflsim.sim.servers.hierarchy import CloudRounds
from wflsim.sim.strategies import StrategySpec
from wflsim.sim.world.availability import AlwaysConfig
from wflsim.sim.world.compute import NoJitterConfig, build_jitter
from wflsim.sim.world.system import SystemConstants

from .prepare import Prepared, check_stale_rule, strategy_devices


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
            precision=lc.precision,
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
    if prep.scenario.server.hierarchy is not None and prep.cells is not None:
        from wflsim.models.learner.hierarchy import HierarchicalLearner

        return HierarchicalLearner(learner, prep.cells.num_cells)
    return learner


def partition_system(prep: Prepared, learner: Learner) -> SystemConstants:
    """The system of a prepared scenario with the local steps of the learner's partition.

    With ``learning.local_epochs`` a device's ``E_n = k ceil(D_n / B_n)`` depends on its local
    data size ``D_n``: :func:`~wflsim.app.prepare.prepare_scenario` knows it for an IID partition (the catalogue's
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
    # the strategy's extra cycles per step follow the new E_n (SCAFFOLD's 4 D per update)
    devices = strategy_devices(sc, dev.with_local_steps(steps))
    check_deadline(sc.run, devices, sc.learning)
    check_derived(sc, devices, prep.channel, prep.system.num_params)
    return replace(prep.system, devices=devices)


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
    if up.mode == "ns3_lte":
        cfg = up.ns3 or Ns3Config()
        return UplinkSpec(
            mode=up.mode,
            order=up.order,
            planned_concurrent_uploads=up.planned_concurrent_uploads,
            ns3=Ns3Options(
                transport=cfg.transport,
                scheduler=cfg.scheduler,
                warmup_s=cfg.warmup_s,
                backhaul_delay_s=cfg.backhaul_delay_s,
                tcp_segment_bytes=cfg.tcp_segment_bytes,
                exchange_timeout_s=cfg.exchange_timeout_s,
                seed=Streams(scenario.seed).ns3_seed(),
                slots_per_frame=scenario.run.slots_per_frame,
            ),
        )
    if up.mode != "aircomp":
        return UplinkSpec(
            mode=up.mode, order=up.order, planned_concurrent_uploads=up.planned_concurrent_uploads
        )
    return UplinkSpec(
        mode=up.mode,
        order=up.order,
        planned_concurrent_uploads=up.planned_concurrent_uploads,
        power_control=up.power_control or "truncated_inversion",
        threshold_gain=0.0 if up.threshold_gain_db is None else 10.0 ** (up.threshold_gain_db / 10),
        values_per_symbol=up.values_per_symbol or 1,
    )


def kernel_of(scenario: Scenario) -> KernelName:
    """The slot kernel a scenario runs on: its ``[run] kernel``, with ``auto`` resolved (the
    event kernel for a shared uplink, where uploads interact, for devices that go offline,
    whose work a drop interrupts, and for ``[server] mode = "async"`` under ``[compute]
    jitter``, whose cycles draw (and may be planned on) their own slowdowns one at a time;
    else the closed form)."""
    kernel = scenario.run.kernel
    if kernel != "auto":
        return kernel
    interacting = uplink_mode(uplink_of(scenario)).interacting or not isinstance(
        scenario.availability, AlwaysConfig
    )
    if scenario.cells is not None and scenario.uplink.mode != "aircomp":
        # a cell shares its band, or two cells share one (over the air: a closed form anyway)
        layout = build_layout(
            scenario.cells, scenario.network.cell_radius_m, cell_uplink_mode(scenario.uplink.mode)
        )
        interacting = interacting or layout.interacts
    per_cycle = scenario.server.mode == "async" and not isinstance(
        scenario.compute.jitter, NoJitterConfig
    )
    return "event" if interacting or per_cycle else "closed_form"


def build_engine(
    prep: Prepared,
    learner: Learner,
    *,
    writer: FrameSink | None = None,
    progress: ProgressFn | None = None,
    hooks: Hooks | None = None,
    server: Server | None = None,
) -> Engine:
    """The engine of a prepared scenario with a fresh scheme and its ``[strategy]``, on
    ``learner``, with the server of its ``[server]`` table
    (:func:`wflsim.sim.registry.make_server`) unless ``server`` is given (a server of one's own,
    docs/architecture.md, "A new server").

    Raises:
        ValueError: the learner's ``D`` or local steps differ from the scenario's (a custom
            learner that does not fit the scenario), or a strategy other than ``fedavg`` for a
            learner without ``set_strategy``.
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
        "cells": prep.cells,
    }
    if not isinstance(learner, NullLearner):
        check_stale_rule(sc, scheme.update_rule.name)
    if sc.uplink.mode == "aircomp" and not isinstance(learner, AirCompLearner):
        raise ScenarioError(
            "uplink.mode",
            f"the learner ({type(learner).__name__}) cannot apply an over-the-air sum: it has "
            "no receive_over_the_air (wflsim.sim.learner.AirCompLearner)",
            "give the learner that method, or another uplink.mode (docs/aircomp.md)",
        )
    config = parts[0]
    kernel = make_kernel(config.kernel, config.uplink, system, prep.cells)
    if server is None:
        server = make_server(sc.server, kernel)
    strategy = StrategySpec(sc.strategy.name, sc.strategy.params)
    selection = Selection(sc.strategy.selection, prep.streams)
    hierarchy = None
    if sc.server.hierarchy is not None and prep.cells is not None:
        streams = prep.streams
        hierarchy = CloudRounds(
            sc.server.hierarchy,
            prep.cells.num_cells,
            system.full_payload_bits,
            lambda r: streams.device("backhaul", int(r)),
        )
    return Engine(
        *parts,
        server=server,
        strategy=strategy,
        selection=selection,
        hierarchy=hierarchy,
        privacy=prep.privacy,
        **options,
    )
