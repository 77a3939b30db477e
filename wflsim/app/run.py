"""One run, from scenario to run folder: the names the CLI, the sweep and the API use, gathered
from the modules that hold them.

Nothing is written before the scenario, the data directory, the mobility trace, the derived
constants and the learner have all been checked (:mod:`wflsim.app.prepare`,
:mod:`wflsim.app.assemble`), so a bad input leaves no output folder behind. Once the run has
started (:mod:`wflsim.app.runner`), each completed frame is a complete Parquet file and every
``run.checkpoint_every_frames`` frames the state of every component is saved
(:mod:`wflsim.app.recorder`); a run killed at any instant loses at most the frame in flight, and
:func:`resume` (:mod:`wflsim.app.resume`) continues it so that its events equal the
uninterrupted run's. What the folder records of the run is :mod:`wflsim.app.manifest`; its
format is :mod:`wflsim.sim.rundir`; its lock and marker are written by :mod:`wflsim.app.folders`.
"""

from __future__ import annotations

from .assemble import (
    build_engine,
    engine_config,
    kernel_of,
    make_learner,
    partition_system,
    uplink_of,
)
from .folders import check_out_dir
from .manifest import (
    channel_description,
    default_out_dir,
    fingerprint,
    fingerprint_difference,
    package_versions,
)
from .prepare import (
    Prepared,
    ScenarioSource,
    check_stale_rule,
    prepare,
    prepare_scenario,
    prepare_source,
    resolve_system,
)
from .resume import prepare_from_manifest, resume, resume_manifest
from .runner import check_out_dir_locked, execute

__all__ = [
    "Prepared",
    "ScenarioSource",
    "build_engine",
    "channel_description",
    "check_out_dir",
    "check_out_dir_locked",
    "check_stale_rule",
    "default_out_dir",
    "engine_config",
    "execute",
    "fingerprint",
    "fingerprint_difference",
    "kernel_of",
    "make_learner",
    "package_versions",
    "partition_system",
    "prepare",
    "prepare_from_manifest",
    "prepare_scenario",
    "prepare_source",
    "resolve_system",
    "resume",
    "resume_manifest",
    "uplink_of",
]
