"""The functions behind :mod:`wflsim` (see ``docs/api.md``).

A scenario is given as a TOML file path, a table (a ``dict`` shaped like the file) or a
:class:`sim.config.schema.Scenario`; ``overrides`` are ``--set`` strings (``"run.frames=2"``; a
single string is one override) applied to it, ``seed`` replaces its seed. Values are checked as
strictly as in a file (NumPy scalars count as the Python values they hold). Problems with the
input raise
:class:`sim.errors.ScenarioError` (its ``field``, ``problem`` and ``fix`` are what the command
line prints) before anything is written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from wflsim.app import run as _run
from wflsim.app.scenario import validate_scenario
from wflsim.sim.config.limits import MAX_WORKERS, out_path_problem, shorten
from wflsim.sim.config.loading import apply_overrides, plain_value, scenario_text
from wflsim.sim.config.schema import Scenario
from wflsim.sim.engine import Hooks, ProgressFn
from wflsim.sim.errors import ScenarioError

if TYPE_CHECKING:  # analysis (pandas) is imported when a result's tables are first used
    import pandas as pd

    from wflsim.analysis.tidy import Tidy

#: A scenario: a TOML file, a table shaped like one, or a validated ``Scenario``.
ScenarioLike = str | os.PathLike[str] | Mapping[str, Any] | Scenario
#: Called after every slot with the global slot index and the run's totals so far.
Progress = ProgressFn


def prepare(
    scenario: ScenarioLike,
    *,
    overrides: Sequence[str] = (),
    seed: int | None = None,
    data_dir: str | os.PathLike[str] | None = None,
) -> _run.Prepared:
    """Validate and resolve a scenario fully (devices, positions, channel, data folder) without
    running it or writing anything: ``wflsim validate``.

    Relative paths in a table or ``Scenario`` (a mobility trace, a channel table, the data
    folder) are taken relative to the working directory; in a file, to the file's folder.

    Raises:
        ScenarioError: any problem, naming the field and the fix.
    """
    ovr = _overrides(overrides)
    if seed is not None:
        ovr.append(f"seed={_seed(seed)}")
    ddir = None if data_dir is None else str(data_dir)
    if isinstance(scenario, (str, os.PathLike)):
        return _run.prepare(Path(scenario), ovr, None, ddir)
    if isinstance(scenario, Scenario):
        table = scenario.model_dump(mode="json", exclude_none=True)
    elif isinstance(scenario, Mapping):
        table = plain_value(scenario)
    else:
        raise ScenarioError(
            "scenario",
            f"is a {type(scenario).__name__}",
            "give a TOML file path, a dict shaped like the file, or a Scenario",
        )
    validated = validate_scenario(apply_overrides(table, ovr))
    return _run.prepare_scenario(
        validated,
        text=scenario_text(table),
        overrides=ovr,
        data_dir=ddir,
        base_dir=Path.cwd(),
    )


def _overrides(overrides: Sequence[str] | str) -> list[str]:
    """``--set`` strings as a list (a single string is one override, not its characters)."""
    if isinstance(overrides, str):
        return [overrides]
    out = []
    for o in overrides:
        if not isinstance(o, str):
            raise ScenarioError(
                "overrides",
                f"holds a {type(o).__name__} ({shorten(repr(o))}), not a --set string",
                'give strings like "run.frames=3"',
            )
        out.append(str(o))
    return out


def _seed(seed: Any) -> int:
    """A seed given from Python: an int or a NumPy integer (not a bool, a float or text)."""
    value = plain_value(seed)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(
            "seed", f"must be a whole number >= 0 (got {shorten(repr(seed))})", "e.g. seed=3"
        )
    return value


def _check_out(out: Path, field: str, room: int = 64) -> None:
    problem = out_path_problem(out, room=room)
    if problem is not None:
        raise ScenarioError(field, f"{shorten(str(out))!r} {problem}", f"choose another {field}")


@dataclass
class RunResult:
    """One run: its events and what was measured, in memory or from a run folder.

    Attributes:
        scenario: the resolved scenario (every field, as the manifest stores it).
        summary: the run's totals (``manifest.json``'s ``summary``: slots, final accuracy,
            energy, outage and dropout rates, simulated and wall time, trace rows).
        manifest: the run folder's ``manifest.json`` (None for a run kept in memory).
        folder: the run folder (None for a run kept in memory).
    """

    scenario: dict[str, Any]
    summary: dict[str, Any] | None
    manifest: dict[str, Any] | None = None
    folder: Path | None = None
    _events: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def status(self) -> str:
        """``completed`` for a run kept in memory; else the folder's status (``running``,
        ``completed``, ``failed``, ``interrupted``, or ``crashed`` for a dead writer)."""
        from wflsim.analysis.tidy import run_status

        return "completed" if self.folder is None else run_status(self.folder)

    @cached_property
    def events(self) -> pd.DataFrame:
        """The trace, one row per event (``docs/trace.md``), nullable dtypes."""
        if self._events is not None:
            return self._events
        from wflsim.analysis.io import load_events

        assert self.folder is not None
        return load_events(self.folder)

    @cached_property
    def device_slots(self) -> pd.DataFrame:
        """One row per device and slot (decision and outcome; ``analysis.tidy``)."""
        from wflsim.analysis.tidy import device_slots_from_events

        return device_slots_from_events(self.events)

    @cached_property
    def slots(self) -> pd.DataFrame:
        """One row per slot (latency, participation, energy, accuracy; ``analysis.tidy``)."""
        from wflsim.analysis.tidy import slots_from_events

        return slots_from_events(self.events, self.device_slots)

    @cached_property
    def frames(self) -> pd.DataFrame:
        """One row per frame (the controller's plan; ``analysis.tidy``)."""
        from wflsim.analysis.tidy import frames_from_events

        return frames_from_events(self.events, self.device_slots)

    @cached_property
    def evaluations(self) -> pd.DataFrame:
        """One row per evaluation of the global model (accuracy, loss, time, energy so far)."""
        from wflsim.analysis.tidy import evaluations_from_events

        return evaluations_from_events(self.events, self.slots)

    @cached_property
    def updates(self) -> pd.DataFrame:
        """One row per upload cycle that ended, with its model version and staleness (runs with
        ``[server] mode`` semi_sync or async; empty for synchronous runs; ``analysis.tidy``)."""
        from wflsim.analysis.tidy import plain_dtypes, updates_from_events

        return updates_from_events(plain_dtypes(self.events))


def run(
    scenario: ScenarioLike,
    *,
    overrides: Sequence[str] = (),
    seed: int | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    progress: Progress | None = None,
    hooks: Hooks | None = None,
) -> RunResult:
    """Run a scenario: ``wflsim run``.

    Args:
        scenario: a TOML file, a table shaped like one, or a ``Scenario``.
        overrides: ``--set`` strings applied to it (``"scheme.V=10"``).
        seed: replaces the scenario's seed.
        data_dir: where the datasets are (default: the scenario's, else ``$WFLSIM_DATA_DIR``).
        out: a run folder to write (crash-safe, resumable; ``docs/trace.md``); None keeps the
            run in memory and writes nothing.
        overwrite: replace a previous run's folder at ``out``.
        progress: called after every slot.
        hooks: callbacks at each frame's start and end and each slot's end
            (:class:`wflsim.Hooks`); an exception they raise fails the run (a run folder keeps
            its completed frames and can be resumed).

    Raises:
        ScenarioError: bad input (nothing written); a folder in use or not a run's.
    """
    prep = prepare(scenario, overrides=overrides, seed=seed, data_dir=data_dir)
    if out is not None:
        folder = Path(out)
        _check_out(folder, "out")
        learner = _run.make_learner(prep)
        _run.execute(prep, learner, folder, overwrite=overwrite, progress=progress, hooks=hooks)
        return load_run(folder)
    engine = _run.build_engine(prep, _run.make_learner(prep), progress=progress, hooks=hooks)
    stats = engine.run()
    from wflsim.analysis.io import events_frame

    return RunResult(
        scenario=prep.scenario.model_dump(mode="json"),
        summary=stats.as_dict(),
        _events=events_frame(engine.table()),
    )


def resume(
    folder: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    hooks: Hooks | None = None,
) -> RunResult:
    """Continue a killed, failed or interrupted run from its last checkpoint: ``wflsim run
    --resume``. A completed run is returned as it is.

    Raises:
        ScenarioError: not a run folder, in use, or damaged (the message says which).
    """
    from wflsim.sim.rundir import read_manifest, require_run_folder

    path = Path(folder)
    require_run_folder(path)
    manifest = read_manifest(path)
    if manifest is None:
        raise ScenarioError("--resume", f"{str(path)!r} has no readable manifest.json")
    prep = _run.prepare_from_manifest(manifest, None if data_dir is None else str(data_dir))
    _run.resume(prep, _run.make_learner(prep), path, progress=progress, hooks=hooks)
    return load_run(path)


def load_run(folder: str | os.PathLike[str]) -> RunResult:
    """A run folder's result (its events are read when first used).

    Raises:
        FileNotFoundError: no ``manifest.json`` in ``folder``.
    """
    from wflsim.analysis.io import load_manifest

    path = Path(folder)
    manifest = load_manifest(path)
    return RunResult(
        scenario=manifest.get("scenario_resolved") or {},
        summary=manifest.get("summary"),
        manifest=manifest,
        folder=path,
    )


@dataclass
class SweepResult:
    """A sweep folder: ``sweep.json`` and one run folder per grid point.

    Attributes:
        folder: the sweep folder.
        manifest: its ``sweep.json`` (grid, seeds, every point's status and summary).
    """

    folder: Path
    manifest: dict[str, Any]

    @property
    def points(self) -> dict[str, dict[str, Any]]:
        """Each point's record by name (overrides, seed, folder, status, summary)."""
        return dict(self.manifest.get("points", {}))

    def run(self, name: str) -> RunResult:
        """The result of the point ``name`` (a key of :attr:`points`)."""
        point = self.points.get(name)
        if point is None:
            raise KeyError(f"no point {name!r} in {self.folder} (see .points)")
        return load_run(self.folder / str(point.get("dir", name)))

    def runs_table(self) -> pd.DataFrame:
        """One row per run folder with its configuration (``analysis.tidy.runs_table``)."""
        from wflsim.analysis.tidy import runs_table

        return runs_table(self.folder)

    def load(self, tables: Sequence[str] | None = None) -> Tidy:
        """The tidy tables of every run (``analysis.tidy.load``)."""
        from wflsim.analysis.tidy import load

        return load(self.folder, tables)


def _grid_specs(grid: Mapping[str, Sequence[Any]] | Sequence[str] | None) -> list[str]:
    if grid is None:
        return []
    if isinstance(grid, str):  # one --grid string, not its characters
        return [grid]
    if isinstance(grid, Mapping):
        return [
            f"{key}={','.join(_grid_value(key, v) for v in _grid_values(key, values))}"
            for key, values in grid.items()
        ]
    return [str(g) for g in grid]


def _grid_values(key: str, values: Any) -> list[Any]:
    """A grid entry's values (a single number or text is one value)."""
    if isinstance(values, str) or not isinstance(values, Sequence | np.ndarray):
        return [values]
    return list(values)


def _grid_value(key: str, value: Any) -> str:
    """A grid value as ``--grid`` writes it (strings bare, as on the command line)."""
    value = plain_value(value, f"grid {key}")
    if isinstance(value, bool):
        return str(value).lower()
    text = str(value)
    if "," in text:
        raise ScenarioError(
            f"grid {key}", f"value {text!r} holds a comma", "use values without commas"
        )
    return text


def sweep(
    scenario: str | os.PathLike[str],
    grid: Mapping[str, Sequence[Any]] | Sequence[str] | None = None,
    seeds: str | Sequence[int] | None = None,
    *,
    out: str | os.PathLike[str],
    overrides: Sequence[str] = (),
    data_dir: str | os.PathLike[str] | None = None,
    workers: int = 1,
    executor: str = "local",
    overwrite: bool = False,
    hooks: Hooks | None = None,
) -> SweepResult:
    """Run a sweep over a grid and seeds: ``wflsim sweep``. Repeating it resumes it.

    Args:
        scenario: the scenario file (its ``[sweep]`` table is used where ``grid`` or ``seeds``
            is None).
        grid: ``{"scheme.V": [10, 100], "scheme.name": ["two_timescale", "only_pc"]}`` or
            ``--grid`` strings (``"scheme.V=10,100"``).
        seeds: ``[0, 1, 2]`` or ``"0-2"``.
        out: the sweep folder.
        overrides: ``--set`` strings applied to every point.
        workers: runs at a time.
        executor: ``local`` (processes) or ``ray``.
        overwrite: recompute points whose folder a different scenario made.
        hooks: the engine's callbacks for every point (:class:`wflsim.Hooks`); the points then
            run in this process (``workers = 1``, ``local``).

    Raises:
        ScenarioError: a bad grid or point (nothing written), or a point folder that another
            scenario made (without ``overwrite``).
        wflsim.app.sweep.SweepInterrupted: Ctrl-C (``sweep.json`` records every point's state).
    """
    from wflsim.app.sweep import plan_sweep, run_sweep

    if isinstance(workers, bool) or not isinstance(plain_value(workers), int):
        raise ScenarioError("workers", f"must be a whole number (got {shorten(repr(workers))})")
    if not 1 <= workers <= MAX_WORKERS:
        raise ScenarioError("workers", f"must be in [1, {MAX_WORKERS}]", "e.g. workers=2")
    if seeds is None or isinstance(seeds, str):
        seed_text = seeds
    else:
        seed_text = ",".join(str(_seed(s)) for s in seeds)
    ddir = None if data_dir is None else str(data_dir)
    extra = _overrides(overrides)
    plan = plan_sweep(
        Path(scenario), _grid_specs(grid), seed_text, data_dir=ddir, extra_overrides=extra
    )
    folder = Path(out)
    _check_out(folder, "out", room=64 + 161)
    run_sweep(
        plan,
        folder,
        workers=int(workers),
        executor=executor,
        data_dir=ddir,
        extra_overrides=extra,
        overwrite=overwrite,
        hooks=hooks,
    )
    return load_sweep(folder)


def load_sweep(folder: str | os.PathLike[str]) -> SweepResult:
    """A sweep folder's result.

    Raises:
        FileNotFoundError: no ``sweep.json`` in ``folder``.
    """
    path = Path(folder)
    manifest = json.loads((path / "sweep.json").read_text(encoding="utf-8"))
    return SweepResult(path, manifest)
