"""What a run folder records of the run that made it: the manifest's first state, the trace's
metadata, the package versions, and the fingerprint that decides whether a run may continue a
folder (``--resume``, a sweep's repeat)."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import platform
import sys
from pathlib import Path
from typing import Any

from wflsim._version import __version__
from wflsim.sim.config.resolve import privacy_updates_bound
from wflsim.sim.radio.modes import describe_uplink
from wflsim.sim.schemes.csi_margin import slot_power_rule
from wflsim.sim.world.system import SystemConstants

from . import folders
from .assemble import kernel_of, uplink_of
from .prepare import Prepared


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


def channel_description(prep: Prepared) -> dict[str, Any]:
    """The channel's models and what the controller assumes (``manifest.json``'s ``channel``, the
    trace's ``wflsim.channel``), with the slot power rule of a scheme's CSI margin stated in
    ``controller_assumption.slot_power_rule``."""
    out = prep.channel.describe()
    model = prep.system.rate_model
    out["rate_model"] = model.describe()
    if not model.is_shannon:  # the controller's closed forms are Shannon's
        assumption = out["controller_assumption"]
        out["controller_assumption"] = {
            **assumption,
            "matches": False,
            "differences": [
                *assumption["differences"],
                "the rate is the truncated Shannon bound (alpha log2(1 + SNR), 0 below SNR_min, "
                "at most SE_max): Theorem 2 plans on its middle piece (the band alpha W) with "
                "payloads above SE_max infeasible; SNR_min enters Proposition 1 per slot only",
            ],
        }
    csi = prep.scenario.channel.csi
    perfect = csi is None or (csi.error_variance == 0.0 and csi.delay_slots == 0)
    rule = slot_power_rule(prep.scenario.scheme.params, perfect)
    if rule is not None:
        out["controller_assumption"] = {**out["controller_assumption"], "slot_power_rule": rule}
    return out


def run_manifest(prep: Prepared, system: SystemConstants) -> dict[str, Any]:
    """The manifest of a new run of ``prep`` (``status`` running, no frame completed yet;
    :mod:`wflsim.sim.rundir` documents each key)."""
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
        "uplink": describe_uplink(uplink_of(sc), system, sc.server.mode),
        "availability": {"model": "always"}
        if prep.availability is None
        else prep.availability.describe(),
        "cells": None if prep.cells is None else prep.cells.describe(system),
        "privacy": privacy_description(prep),
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


def privacy_description(prep: Prepared) -> dict[str, Any] | None:
    """The run's resolved privacy (``manifest.json``'s ``privacy``; None without
    ``[privacy]``): the noise multiplier ``z`` the run uses (calibrated for
    ``target_epsilon``: a resumed run takes this one, and calibrates nothing again), whether it
    was calibrated and for how many updates per device."""
    spec = prep.privacy
    if spec is None:
        return None
    cfg = prep.scenario.privacy
    calibrated = cfg is not None and cfg.target_epsilon is not None
    return {
        "mechanism": spec.mechanism,
        "noise_multiplier": spec.noise_multiplier,
        "update_multiplier": spec.update_multiplier,
        "clipped_count_std": spec.clipped_count_std,
        "calibrated": calibrated,
        "calibrated_for_updates": privacy_updates_bound(prep.scenario) if calibrated else None,
        "epsilon_budget": spec.epsilon_budget,
    }


def trace_metadata(manifest: dict[str, Any]) -> dict[str, str]:
    """The key-value metadata every Parquet part of the run carries (``wflsim.*``), from its
    manifest."""
    return {
        "wflsim.scenario_text": manifest["scenario_text"],
        "wflsim.scenario_resolved": json.dumps(manifest["scenario_resolved"]),
        "wflsim.seed": str(manifest["seed"]),
        "wflsim.versions": json.dumps(manifest["versions"]),
        "wflsim.num_params": str(manifest["num_params"]),
        "wflsim.channel": json.dumps(manifest["channel"]),
    }
