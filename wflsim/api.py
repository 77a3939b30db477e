"""The functions behind :mod:`wflsim` (see ``docs/api.md``).

A scenario is given as a TOML file path, a table (a ``dict`` shaped like the file) or a
:class:`wflsim.sim.config.schema.Scenario`; ``overrides`` are ``--set`` strings (``"run.frames=2"``;
a single string is one override) applied to it, ``seed`` replaces its seed. Values are checked as
strictly as in a file (NumPy scalars count as the Python values they hold). Problems with the
input raise
:class:`wflsim.sim.errors.ScenarioError` (its ``field``, ``problem`` and ``fix`` are what the
command line prints) before anything is written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wflsim.app import progress as _progress
from wflsim.app import run as _run

# re-exported by wflsim (docs/api.md)
from wflsim.app.callbacks import Callbacks as Callbacks
from wflsim.app.callbacks import FrameView as FrameView
from wflsim.app.callbacks import RunView as RunView
from wflsim.app.callbacks import SlotView as SlotView
from wflsim.app.extensions import register_dataset as register_dataset
from wflsim.app.extensions import register_model as register_model
from wflsim.app.extensions import register_partition as register_partition
from wflsim.app.extensions import register_scheme as register_scheme
from wflsim.app.extensions import register_strategy as register_strategy
from wflsim.app.extensions import register_update_rule as register_update_rule
from wflsim.app.extensions import registered as registered
from wflsim.app.extensions import unregister as unregister
from wflsim.app.inputs import (
    Overrides,
    ScenarioLike,
    check_out,
    check_workers,
    folder_of,
    grid_of,
    overrides_of,
    scenario_source,
    seed_of,
    seeds_text,
)
from wflsim.sim import rundir
from wflsim.sim.config.loading import Override
from wflsim.sim.engine import Hooks, ProgressFn
from wflsim.sim.errors import Diagnostic as Diagnostic
from wflsim.sim.errors import DiagnosticsError as DiagnosticsError
from wflsim.sim.errors import ScenarioError

if TYPE_CHECKING:  # analysis (pandas) is imported when a result's tables are first used
    import pandas as pd

    from wflsim.analysis.tidy import Tidy
    from wflsim.app.sweep import SweepPlan

#: Called after every slot with the global slot index and the run's totals so far.
Progress = ProgressFn


def prepare(
    scenario: ScenarioLike,
    *,
    overrides: Overrides = (),
    seed: int | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    strict: bool = False,
    download: bool = False,
) -> _run.Prepared:
    """Validate and resolve a scenario fully (devices, positions, channel, data folder) without
    running it or writing anything: ``wflsim validate``.

    Relative paths in a table or ``Scenario`` (a mobility trace, a channel table, the data
    folder) are taken relative to the working directory; in a file, to the file's folder.
    Values valid but implausible for their unit (``run.deadline_s = 100`` meant as ms) are
    :class:`~wflsim.sim.errors.PlausibilityWarning` warnings; ``strict=True`` makes them errors.
    ``download=True`` downloads a missing MNIST, Fashion-MNIST or CIFAR-10 into the data folder
    (as ``wflsim data fetch`` does) once the rest of the scenario has been checked.

    Raises:
        ScenarioError: any problem, naming the field and the fix (with ``strict``, also an
            implausible value).
    """
    ovr = overrides_of(overrides)
    if seed is not None:
        ovr.append(Override.of("seed", seed_of(seed)))
    ddir = None if data_dir is None else str(data_dir)
    return _run.prepare_source(
        scenario_source(scenario), ovr, None, ddir, strict=strict, download=bool(download)
    )


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
        """One row per device and slot (decision and outcome; ``wflsim.analysis.tidy``)."""
        from wflsim.analysis.tidy import device_slots_from_events

        return device_slots_from_events(self.events)

    @cached_property
    def slots(self) -> pd.DataFrame:
        """One row per slot (latency, participation, energy, accuracy; ``wflsim.analysis.tidy``)."""
        from wflsim.analysis.tidy import slots_from_events

        return slots_from_events(self.events, self.device_slots)

    @cached_property
    def frames(self) -> pd.DataFrame:
        """One row per frame (the controller's plan; ``wflsim.analysis.tidy``)."""
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
        ``[server] mode`` semi_sync or async; empty for synchronous runs;
        ``wflsim.analysis.tidy``)."""
        from wflsim.analysis.tidy import plain_dtypes, updates_from_events

        return updates_from_events(plain_dtypes(self.events))

    @cached_property
    def diagnostics(self) -> list[Diagnostic]:
        """What went wrong in the run, computed from its trace, each with the field to change
        (every upload lost, accuracy back at its start, ...; ``wflsim.analysis.diagnostics``;
        empty for a run without findings)."""
        from wflsim.analysis.diagnostics import diagnose

        return diagnose(self.events, self.scenario, self.summary)


def run(
    scenario: ScenarioLike,
    *,
    overrides: Overrides = (),
    seed: int | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    progress: bool | Progress | None = None,
    hooks: Hooks | None = None,
    callbacks: Callbacks | None = None,
    strict: bool = False,
    download: bool = False,
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
        progress: a progress bar (``True``; ``tqdm.auto``: a widget in a notebook), none
            (``False``), a bar where one can be seen (``None``: a notebook or a terminal), or a
            function called after every slot with the slot index and the totals so far.
        hooks: callbacks at each frame's start and end and each slot's end
            (:class:`wflsim.Hooks`); an exception they raise fails the run (a run folder keeps
            its completed frames and can be resumed).
        callbacks: ``on_slot_end``, ``on_frame_end``, ``on_run_end`` with read-only views of
            the outcome, the model and the summary (:class:`wflsim.Callbacks`; a view's
            ``stop()`` ends the run early, after its frame).
        strict: implausible values are errors, not warnings (:func:`prepare`), and a run
            that completes with diagnostics (:attr:`RunResult.diagnostics`) raises
            :class:`DiagnosticsError` (its ``result`` holds the run; its folder is complete).
        download: download the scenario's dataset into its data folder first if it is
            missing (:func:`prepare`).

    Raises:
        ScenarioError: bad input (nothing written); a folder in use or not a run's; with
            ``download``, a download that fails or does not match its checksum.
        DiagnosticsError: with ``strict``, the run completed with diagnostics.
    """
    if callbacks is not None:
        hooks = callbacks.hooks(hooks)
    prep = prepare(
        scenario,
        overrides=overrides,
        seed=seed,
        data_dir=data_dir,
        strict=strict,
        download=download,
    )
    folder = None if out is None else folder_of(out)
    if folder is not None:
        check_out(folder, "out")
    learner = _run.make_learner(prep)
    sc = prep.scenario
    bar, close = _progress.callback(
        progress, sc.run.frames * sc.run.slots_per_frame, sc.run.slots_per_frame
    )
    try:
        if folder is not None:
            _run.execute(prep, learner, folder, overwrite=overwrite, progress=bar, hooks=hooks)
        else:
            engine = _run.build_engine(prep, learner, progress=bar, hooks=hooks)
            stats = engine.run()
    finally:
        close()
    if callbacks is not None:
        callbacks.run_ended()
    if folder is not None:
        result = load_run(folder)
    else:
        from wflsim.analysis.io import events_frame

        result = RunResult(
            scenario=prep.scenario.model_dump(mode="json"),
            summary=stats.as_dict(),
            _events=events_frame(engine.table()),
        )
    if strict and result.diagnostics:
        raise DiagnosticsError(result.diagnostics, result)
    return result


def resume(
    folder: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    progress: bool | Progress | None = None,
    hooks: Hooks | None = None,
    callbacks: Callbacks | None = None,
    download: bool = False,
) -> RunResult:
    """Continue a killed, failed or interrupted run from its last checkpoint: ``wflsim run
    --resume``. A completed run is returned as it is. ``data_dir``: where the run's data is now,
    if it moved; ``download=True`` downloads its MNIST, Fashion-MNIST or CIFAR-10 there first if
    it is missing (``wflsim run --resume DIR --download``).

    Raises:
        ScenarioError: not a run folder, in use, or damaged (the message says which).
    """
    path = Path(folder)
    manifest = _run.resume_manifest(path)
    prep = _run.prepare_from_manifest(
        manifest,
        None if data_dir is None else str(data_dir),
        folder=path,
        download=bool(download),
    )
    if callbacks is not None:
        hooks = callbacks.hooks(hooks)
    sc = prep.scenario
    bar, close = _progress.callback(
        progress, sc.run.frames * sc.run.slots_per_frame, sc.run.slots_per_frame
    )
    try:
        _run.resume(prep, _run.make_learner(prep), path, progress=bar, hooks=hooks)
    finally:
        close()
    if callbacks is not None:
        callbacks.run_ended()
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
        """The result of the point ``name`` (a key of :attr:`points`). A point sharing another
        point's run (``same_as``) gets that run's folder, manifest and summary, with its own
        scheme values in ``scenario``, and where the run was made at another ``V``, ``events``
        with the cost at its own (``wflsim.analysis.tidy.with_cost_at``)."""
        from dataclasses import replace

        from wflsim.analysis.tidy import point_cost_v, point_scenario, with_cost_at

        point = self.points.get(name)
        if point is None:
            raise KeyError(f"no point {name!r} in {self.folder} (see .points)")
        result = load_run(self.folder / str(point.get("dir", name)))
        if "same_as" not in point or result.folder is None:
            return result
        v = point_cost_v(point, result.folder)
        return replace(
            result,
            scenario=point_scenario(result.scenario, point),
            _events=None if v is None else with_cost_at(result.events, v),
        )

    def runs_table(self) -> pd.DataFrame:
        """One row per run (a point sharing another's run too) with its configuration, a
        column per field the grid sweeps (by its dotted name: ``scheme.V``) and the run's summary
        measures (``final_accuracy``, ``total_energy_j``, ...;
        ``wflsim.analysis.tidy.runs_table``)."""
        from wflsim.analysis.tidy import runs_table

        return runs_table(self.folder)

    def claims(self, claims: Sequence[Mapping[str, Any]] | str | None = None) -> pd.DataFrame:
        """The verdicts of the study's claims on these runs, as the report's ``claims.csv``
        (``wflsim.analysis.hypotheses.check_runs``): ``claims`` as ``[[claims]]`` tables or a
        file holding them; by default those of the sweep's scenario file.

        Raises:
            ScenarioError: a bad claim (naming it and its field).
        """
        from wflsim.analysis.hypotheses import check_runs

        return check_runs(self.folder, claims)

    def load(self, tables: Sequence[str] | None = None) -> Tidy:
        """The tidy tables of every run (``wflsim.analysis.tidy.load``)."""
        from wflsim.analysis.tidy import load

        return load(self.folder, tables)


def sweep(
    scenario: ScenarioLike,
    grid: Mapping[str, Sequence[Any]] | Sequence[str] | None = None,
    seeds: str | Sequence[int] | None = None,
    *,
    out: str | os.PathLike[str],
    overrides: Overrides = (),
    data_dir: str | os.PathLike[str] | None = None,
    workers: int = 1,
    executor: str = "local",
    overwrite: bool = False,
    hooks: Hooks | None = None,
    progress: bool | None = None,
    strict: bool = False,
    dedup: bool = True,
    download: bool = False,
) -> SweepResult:
    """Run a sweep over a grid and seeds: ``wflsim sweep``. Repeating it resumes it.

    Args:
        scenario: a TOML file, a table shaped like one, or a ``Scenario`` (its ``[sweep]``
            table is used where ``grid`` or ``seeds`` is None).
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
        progress: a bar with one step a run (``True``), none (``False``), or a bar where one
            can be seen (``None``: a notebook or a terminal).
        strict: implausible values are errors, not warnings (each distinct one is reported
            once for the whole sweep).
        dedup: points whose runs would be identical share the first one's run (``same_as`` in
            their record; the readers show the run under each point); False: a folder each.
        download: download the datasets of the points into their data folders first if they
            are missing (MNIST, Fashion-MNIST, CIFAR-10; each once, in this process, once every
            point has been checked and before any runs), as ``wflsim sweep --download``.

    Raises:
        ScenarioError: a bad grid or point (nothing written), or a point folder that another
            scenario made (without ``overwrite``); with ``download``, a download that fails
            (nothing written to the sweep folder).
        wflsim.app.sweep.SweepInterrupted: Ctrl-C (``sweep.json`` records every point's state).
    """
    from wflsim.app.sweep import plan_sweep

    check_workers(workers)
    folder = folder_of(out)
    seed_text = seeds_text(seeds)
    ddir = None if data_dir is None else str(data_dir)
    extra = overrides_of(overrides)
    plan = plan_sweep(
        scenario_source(scenario),
        grid_of(grid),
        seed_text,
        data_dir=ddir,
        extra_overrides=extra,
        strict=strict,
        dedup=dedup,
        download=bool(download),
    )
    _run_plan(plan, folder, workers, executor, ddir, extra, overwrite, hooks, progress)
    return load_sweep(folder)


def _run_plan(
    plan: SweepPlan,
    folder: Path,
    workers: int,
    executor: str,
    data_dir: str | None,
    extra: list[str | Override],
    overwrite: bool,
    hooks: Hooks | None,
    progress: bool | None,
) -> None:
    """Run a planned sweep into ``folder`` with a bar of its points where wanted."""
    from wflsim.app.sweep import run_sweep

    check_out(folder, "out", room=64 + 161)
    bar = _progress.PointBar(len(plan.points)) if _progress.wanted(progress) else None
    try:
        run_sweep(
            plan,
            folder,
            workers=int(workers),
            executor=executor,
            data_dir=data_dir,
            extra_overrides=extra,
            overwrite=overwrite,
            hooks=hooks,
            progress=bar,
        )
    finally:
        if bar is not None:
            bar.close()


def load_sweep(folder: str | os.PathLike[str]) -> SweepResult:
    """A sweep folder's result.

    Raises:
        FileNotFoundError: no ``sweep.json`` in ``folder``.
        ScenarioError: ``sweep.json`` is not a regular file holding a JSON object (a link, a
            FIFO, damaged).
    """
    path = Path(folder)
    file = path / "sweep.json"
    if not os.path.lexists(file):
        raise FileNotFoundError(f"no sweep.json in {folder}")
    manifest = rundir.read_json(file)
    if manifest is None:
        raise ScenarioError(
            str(file),
            "is not a regular file holding a JSON object (a link, a FIFO, or damaged)",
            "give the folder a sweep wrote",
        )
    return SweepResult(path, manifest)


#: The run summary's measures :func:`compare` reports by default (those a run measured).
COMPARE_METRICS = (
    "final_accuracy",
    "final_loss",
    "total_energy_j",
    "mean_energy_per_device_slot_j",
    "outage_rate",
    "dropout_rate",
    "simulated_time_s",
    # [privacy] runs only (docs/privacy.md); left out where no run has them
    "epsilon_max",
    "epsilon_mean",
)


def compare(
    scenario: ScenarioLike,
    variants: Mapping[str, Overrides],
    seeds: str | Sequence[int] = (0, 1, 2),
    *,
    overrides: Overrides = (),
    metrics: Sequence[str] | None = None,
    reference: str | None = None,
    level: float = 0.95,
    out: str | os.PathLike[str] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    workers: int = 1,
    executor: str = "local",
    progress: bool | None = None,
    strict: bool = False,
    claims: Sequence[Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Run several variants of a scenario over the same seeds and compare their summaries.

    Each variant is a set of overrides (``{"proposed": {"scheme.name": "two_timescale"},
    "Only-PC": {"scheme.name": "only_pc"}}``) applied after ``overrides``; every variant runs
    with every seed. A seed fixes the channels, positions, data and initial model of a run
    whatever the scheme (common random numbers), so variants are compared on the same draws and
    a difference to ``reference`` is paired by seed (its interval is narrower than the two
    variants' intervals suggest).

    Args:
        scenario: a TOML file, a table shaped like one, or a ``Scenario``.
        variants: label -> overrides (a mapping or ``--set`` strings, as ``run`` takes them).
        seeds: ``[0, 1, 2]`` or ``"0-2"``.
        overrides: applied to every variant first.
        metrics: summary measures to compare (default: :data:`COMPARE_METRICS` that were
            measured; any numeric key of ``RunResult.summary``).
        reference: a variant's label: adds each variant's paired difference to it.
        level: the confidence level of the Student-t intervals over seeds.
        out: a sweep folder that keeps the runs (repeating the call then reuses completed
            runs and resumes the others); None runs in a temporary folder, deleted after.
        data_dir, workers, executor: as :func:`sweep` (``workers=2``: two runs at a time).
        progress: a bar with one step a run (``None``: where one can be seen).
        strict: implausible values are errors, not warnings.
        claims: the comparison's hypotheses, each a ``[[claims]]`` table (docs/scenario.md):
            ``{"metric": "final_accuracy", "better": "higher", "a": {"variant": "FedAdam"},
            "b": {"variant": "FedAvg"}}``; a side selects runs by variant label or by any
            scenario field. Those of the scenario file are checked too.

    Returns:
        pandas.DataFrame: one row per variant and metric; columns ``variant``, ``metric``, ``mean``, ``ci_low``,
        ``ci_high``, ``n`` (seeds with a finite value), ``ci_clipped`` (the interval reached
        beyond the values the measure can take, a rate's [0, 1] or a count's, energy's or
        time's 0, and was cut there: ``wflsim.analysis.stats.within``) and, with
        ``reference``, ``diff`` (mean of variant - reference over the seeds where both are
        finite), ``diff_ci_low``, ``diff_ci_high``, ``diff_n`` (those seeds),
        ``diff_ci_clipped`` (a rate's difference cut to [-1, 1]). The runs
        themselves (one row per variant and seed, with every metric) are in ``.attrs["runs"]``;
        the claims' verdicts (as the report's ``claims.csv``: holds, does not hold,
        inconclusive with the seeds it would take, or not measurable here) in
        ``.attrs["claims"]``.

    Raises:
        ScenarioError: a bad variant, seed, metric or reference (nothing run); a run that
            failed (its error; with ``out`` its folder keeps the details).
    """
    import tempfile

    import pandas as pd

    from wflsim.analysis.stats import difference_range, measure_range, seed_interval
    from wflsim.app.sweep import GridPoint, parse_seeds, plan_points

    check_workers(workers)
    if not isinstance(variants, Mapping) or not variants:
        raise ScenarioError(
            "variants", "must be a non-empty dict: label -> overrides", 'e.g. {"a": {}}'
        )
    labels = [str(k) for k in variants]
    given = {str(k): v for k, v in variants.items()}
    if len(given) != len(variants):
        raise ScenarioError("variants", "two labels are the same text", "give distinct labels")
    if reference is not None and reference not in labels:
        raise ScenarioError("reference", f"{reference!r} is not a variant", f"one of {labels}")
    if not 0 < float(level) < 1:
        raise ScenarioError("level", f"must be in (0, 1) (got {level})", "e.g. level=0.95")
    seed_text = seeds_text(seeds)
    if seed_text is None:
        raise ScenarioError("seeds", "is None", "give the seeds, e.g. seeds=[0, 1, 2]")
    source = scenario_source(scenario)
    stated = _compare_claims(source.table(), claims)
    seed_list = parse_seeds(seed_text)
    given_out = None if out is None else folder_of(out)
    extra = overrides_of(overrides)
    points = [
        GridPoint(tuple(overrides_of(given[label])), s, label=label)
        for label in labels
        for s in seed_list
    ]
    names = [p.name for p in points]
    if len(set(names)) != len(names):
        raise ScenarioError(
            "variants",
            "two labels differ only in characters a folder name cannot hold",
            "use labels of letters, digits and -_.",
        )
    ddir = None if data_dir is None else str(data_dir)
    plan = plan_points(
        source,
        [("variant", labels)],
        seed_list,
        points,
        data_dir=ddir,
        extra_overrides=extra,
        strict=strict,
        as_written=True,
    )
    with tempfile.TemporaryDirectory(prefix="wflsim-compare-") as tmp:
        folder = given_out if given_out is not None else Path(tmp) / "compare"
        _run_plan(plan, folder, workers, executor, ddir, extra, False, None, progress)
        records = load_sweep(folder).points
        ran = all(isinstance(records[p.name].get("summary"), dict) for p in points)
        verdicts = _check_compare_claims(stated if ran else [], folder)
    rows = []
    for p in points:
        rec = records[p.name]
        summary = rec.get("summary")
        if not isinstance(summary, dict):
            raise ScenarioError(
                f"variants.{p.label}",
                f"the run with seed {p.seed} {rec.get('status')}: {rec.get('error', '')}".strip(),
                "fix the variant (with out=..., its folder has the details)",
            )
        rows.append({"variant": p.label, "seed": p.seed, **summary})
    runs = pd.DataFrame(rows)
    for c in runs.columns.drop(["variant", "seed"]):  # null in JSON: a value not measured
        if all(v is None or isinstance(v, int | float) for v in runs[c]):
            runs[c] = runs[c].astype(float)
    wanted = list(metrics) if metrics is not None else list(COMPARE_METRICS)
    if metrics is None:  # a default measure no run has (the privacy ones without [privacy])
        wanted = [m for m in wanted if m in runs.columns]
    for m in wanted:
        if m not in runs.columns or not pd.api.types.is_numeric_dtype(runs[m]):
            known = [c for c in runs.columns if c not in ("variant", "seed")]
            raise ScenarioError("metrics", f"{m!r} is not a run measure", f"one of {known}")
    if metrics is None:
        wanted = [m for m in wanted if runs[m].notna().any()]
    table = []
    for label in labels:
        mine = runs[runs["variant"] == label].set_index("seed")
        for m in wanted:
            ci = seed_interval(mine[m].to_numpy(float), level, measure_range(m))
            row: dict[str, Any] = {"variant": label, "metric": m, **ci}
            if reference is not None:
                ref = runs[runs["variant"] == reference].set_index("seed")[m]
                d = (mine[m] - ref.reindex(mine.index)).to_numpy(float)
                dci = seed_interval(d, level, difference_range(m))
                row |= {"diff": dci.pop("mean")} | {f"diff_{k}": v for k, v in dci.items()}
            table.append(row)
    result = pd.DataFrame(table)
    result.attrs["runs"] = runs[["variant", "seed", *wanted]]
    result.attrs["claims"] = verdicts
    return result


def _compare_claims(
    table: Mapping[str, Any], given: Sequence[Mapping[str, Any]] | None
) -> list[Any]:
    """The claims :func:`compare` checks: the scenario's ``[[claims]]`` and ``given``, validated
    before anything runs (``ScenarioError`` naming ``claims[i]`` and the field)."""
    from wflsim.sim.config.claims import parse_claims

    stated = parse_claims(table)
    if given is None:
        return stated
    if isinstance(given, Mapping | str) or not all(isinstance(c, Mapping) for c in given):
        raise ScenarioError(
            "claims", "must be a list of claim tables", 'e.g. claims=[{"metric": ...}]'
        )
    return parse_claims({"claims": [*(c.model_dump() for c in stated), *map(dict, given)]})


def _check_compare_claims(stated: Sequence[Any], folder: Path) -> pd.DataFrame:
    """The verdicts of ``stated`` on the comparison's runs in ``folder`` (a claim selects a
    variant by its label, ``variant``, which ``sweep.json`` records)."""
    from wflsim.analysis import hypotheses

    if not stated:
        return hypotheses.claims_table([])
    return hypotheses.check_runs(folder, stated)
