"""The ``wflsim`` command.

Exit codes: 0 success; 3 a run that completed with diagnostics under ``--strict``
(``docs/diagnostics.md``); 2 bad input (scenario, data directory, output directory, a run folder in
use or made by another scenario, a mobility or availability trace to convert, a study folder
to create), reported on one line without a traceback; 1 the run failed
after it started (the manifest records the error; ``--resume`` continues it); 130 interrupted
(Ctrl-C or SIGTERM; the frames completed stay readable and ``--resume`` continues the run).

A value that passes validation but is implausible for its unit (``docs/scenario.md``,
"Plausibility warnings") is printed as one line ``warning: <field>: <problem> (<fix>)`` on stderr
and the command goes on; with ``--strict`` it is an error (exit code 2, nothing written).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from wflsim._version import __version__
from wflsim.sim.config.limits import (
    MAX_POINT_NAME_BYTES,
    MAX_SEED,
    MAX_WORKERS,
    out_path_problem,
    path_problem,
    shorten,
)
from wflsim.sim.errors import PlausibilityWarning, ScenarioError
from wflsim.sim.world.availability import AlwaysConfig

from .convert import add_availability_parser, convert_availability_command, convert_command
from .convert import add_parser as add_convert_parser
from .fetch import FETCHABLE
from .init import add_parser as add_init_parser
from .init import init_command
from .log import configure_logging
from .progress import PointBar, SlotBar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from wflsim.sim.engine import Hooks, ProgressFn, RunStats
    from wflsim.sim.errors import Diagnostic

    from .run import Prepared

EXIT_BAD_INPUT = 2
_STRICT_HELP = (
    "refuse a value that is implausible for its unit (e.g. a deadline of 100 s, likely ms) "
    "instead of warning: exit 2, nothing written (docs/scenario.md, Plausibility warnings); "
    "a run or sweep that completes with diagnostics exits with 3 (docs/diagnostics.md)"
)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are the command's one line (``wflsim: error: ...``,
    exit code 2), not argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one line and exit with code 2."""
        line = _one_line(f"{message} (fix: see {self.prog} --help)")
        self.exit(EXIT_BAD_INPUT, f"wflsim: error: {line}\n")


def _seed_arg(text: str) -> int:
    """``--seed``: a whole number in ``[0, 2^63 - 1]``."""
    value = text.strip()
    if value.isascii() and value.isdigit() and len(value) <= 20 and int(value) <= MAX_SEED:
        return int(value)
    raise argparse.ArgumentTypeError(
        f"must be a whole number from 0 to 2^63 - 1 (got {shorten(text, 30)!r})"
    )


def _add_common(p: argparse.ArgumentParser, optional: bool = False) -> None:
    if optional:
        p.add_argument(
            "scenario", nargs="?", default=None, help="scenario file (TOML); optional with --resume"
        )
    else:
        p.add_argument("scenario", help="scenario file (TOML)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field, e.g. --set learning.lr=0.01 (repeatable)",
    )
    p.add_argument("--seed", type=_seed_arg, default=None, help="override the scenario's seed")
    p.add_argument(
        "--data-dir",
        default=None,
        help="dataset folder (overrides learning.data_dir and $WFLSIM_DATA_DIR)",
    )
    p.add_argument("--strict", action="store_true", help=_STRICT_HELP)
    p.add_argument(
        "--download",
        action="store_true",
        help="download the scenario's dataset into its data folder first if it is missing "
        "(as wflsim data fetch does)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="wflsim", description="Discrete-event co-simulator for wireless federated learning."
    )
    parser.add_argument("--version", action="version", version=f"wflsim {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log what happens to stderr: -v each run, frame and sweep point; -vv also "
        "checkpoints and data loading (before the command: wflsim -v run ...)",
    )
    parser.add_argument(
        "--log-level",
        choices=["error", "warning", "info", "debug"],
        default=None,
        help="the log level (default warning; -v is info, -vv debug)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a scenario and write its event trace")
    _add_common(run, optional=True)
    run.add_argument(
        "--out", default=None, help="output directory (default: runs/<name>-<time>-s<seed>)"
    )
    run.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a previous run's folder (only a folder a wflsim run made)",
    )
    run.add_argument(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="continue a killed, failed or interrupted run from its last checkpoint",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")

    val = sub.add_parser(
        "validate",
        help="check a scenario file without running it (loads the data and builds the model)",
    )
    _add_common(val)

    sw = sub.add_parser("sweep", help="run a scenario over a grid of values and seeds")
    sw.add_argument(
        "scenario", help="scenario file (TOML); its [sweep] table gives default grid and seeds"
    )
    sw.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="FIELD=V1,V2",
        help="a swept field, e.g. --grid scheme=ideal,only_pc --grid scheme.V=10,100 (repeatable)",
    )
    sw.add_argument(
        "--seeds",
        default=None,
        help="seeds, e.g. 0-2 or 0,3,5 (default: the scenario's [sweep] seeds, else its seed)",
    )
    sw.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field in every run",
    )
    sw.add_argument("--data-dir", default=None, help="dataset folder")
    sw.add_argument("--out", default=None, help="sweep directory (default: runs/sweep-<name>)")
    sw.add_argument("--workers", type=int, default=1, help="runs in parallel (local executor)")
    sw.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local: --workers processes on this machine (default); ray: each point a Ray task "
        '(pip install -e ".[ray]"; --ray-address for a cluster)',
    )
    sw.add_argument(
        "--ray-address", default=None, help="an existing Ray cluster (default: a local one)"
    )
    sw.add_argument(
        "--overwrite",
        action="store_true",
        help="recompute the points whose folders hold runs of another scenario, --set or version",
    )
    sw.add_argument("--strict", action="store_true", help=_STRICT_HELP)
    sw.add_argument(
        "--download",
        action="store_true",
        help="download the datasets of the sweep's points into their data folders first if "
        "they are missing, each once, before any point runs (as wflsim data fetch does)",
    )
    sw.add_argument(
        "--no-dedup",
        action="store_true",
        help="give every point its own run folder, also points whose runs would be identical "
        "(by default they share the first one's)",
    )
    sw.add_argument("--quiet", action="store_true", help="no progress bar")

    rep = sub.add_parser("report", help="figures, tables and report.html for a run or a sweep")
    rep.add_argument("directory", help="a run directory or a sweep directory")
    rep.add_argument("--out", default=None, help="report directory (default: DIRECTORY/report)")
    rep.add_argument(
        "--format",
        default="png",
        help="figure files, comma-separated: png, pdf, svg (default: png; report.html always "
        "embeds a PNG)",
    )
    rep.add_argument(
        "--dpi", default="200", help="resolution of the PNG figures (50 to 600; default 200)"
    )
    rep.add_argument(
        "--claims",
        default=None,
        metavar="FILE",
        help="a TOML file whose [[claims]] the report checks (default: those of the sweep's or "
        "the runs' scenario file; docs/scenario.md)",
    )

    data = sub.add_parser("data", help="datasets: download one into the data folder")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    fetch = data_sub.add_parser(
        "fetch",
        help="download a dataset with torchvision's mirrors and checksums, in torchvision's layout",
    )
    fetch.add_argument("dataset", choices=FETCHABLE, help="the dataset")
    fetch.add_argument(
        "--dir",
        default=None,
        help="data folder (default: $WFLSIM_DATA_DIR, else ./data: where runs look by default)",
    )
    fetch.add_argument(
        "--allow-http",
        action="store_true",
        help="use plain-http mirrors too (default: https only; the MD5 of each file is checked)",
    )

    ns3 = sub.add_parser(
        "ns3", help='ns-3: build the program of [uplink] mode = "ns3_lte" (docs/ns3.md)'
    )
    ns3_sub = ns3.add_subparsers(dest="ns3_command", required=True)
    ns3_sub.add_parser(
        "build",
        help="compile wflsim's ns-3 program against the system's ns-3 into its cache (runs do "
        "it on first use); prints where it is",
    )

    add_convert_parser(sub)
    add_availability_parser(sub)
    add_init_parser(sub)
    return parser


_VERBOSITY = ["warning", "info", "debug"]


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"wflsim: error: {message}", file=sys.stderr)
    return code


def _prepare(args: argparse.Namespace) -> Prepared:
    """The scenario of ``run`` or ``validate`` with its options, prepared (``--download``: its
    missing dataset fetched first)."""
    from .run import prepare

    return prepare(
        args.scenario,
        args.overrides,
        args.seed,
        args.data_dir,
        strict=args.strict,
        download=args.download,
    )


def _validate(args: argparse.Namespace) -> int:
    from .run import make_learner

    prep = _prepare(args)
    # Build the learner as `run` would (data, model, torch device), so that what only the learner
    # can check (e.g. learning.device = "cuda" without a GPU) fails here too, not at run time.
    learner = make_learner(prep)
    _show_warnings()
    sc = prep.scenario
    what = (
        f"learning {sc.learning.dataset}/{sc.learning.model} on {sc.learning.device}"
        if sc.learning.enabled
        else "network only"
    )
    print(
        f"{args.scenario}: ok — {sc.network.num_devices} devices, {sc.run.frames} frames x "
        f"{sc.run.slots_per_frame} slots, deadline {sc.run.deadline_s:g} s, scheme {sc.scheme.name}, "
        f"{what}, D = {learner.num_params:,} parameters"
    )
    return 0


def _run(args: argparse.Namespace) -> int:
    from .run import check_out_dir, default_out_dir, execute, make_learner

    if args.resume is not None:
        return _resume(args)
    if args.scenario is None:
        raise ScenarioError("SCENARIO", "missing", "give a scenario file, or --resume RUN_DIR")
    prep = _prepare(args)
    out = Path(args.out) if args.out else default_out_dir(prep)
    check_out_path(out, "--out")
    check_out_dir(out, args.overwrite)
    learner = make_learner(prep)
    return _execute(
        args,
        prep,
        out,
        lambda progress: execute(
            prep, learner, out, overwrite=args.overwrite, progress=progress, hooks=args.hooks
        ),
    )


def _resume(args: argparse.Namespace) -> int:
    from wflsim.sim.rundir import require_run_folder

    from .run import make_learner, prepare_from_manifest, resume, resume_manifest

    check_path_arg(args.resume, "--resume")
    out = Path(args.resume)
    require_run_folder(out)
    if args.out is not None and Path(args.out).resolve() != out.resolve():
        raise ScenarioError("--out", "differs from --resume", "give only --resume RUN_DIR")
    if args.overwrite:
        raise ScenarioError(
            "--overwrite", "cannot be combined with --resume", "use one or the other"
        )
    if args.scenario is not None:
        prep = _prepare(args)
    else:
        if args.overrides or args.seed is not None:
            raise ScenarioError(
                "--set/--seed",
                "without SCENARIO they would be ignored by --resume",
                "give the run's scenario file with them, or neither",
            )
        manifest = resume_manifest(out)
        prep = prepare_from_manifest(
            manifest, args.data_dir, strict=args.strict, folder=out, download=args.download
        )
    learner = make_learner(prep)
    return _execute(
        args,
        prep,
        out,
        lambda progress: resume(prep, learner, out, progress=progress, hooks=args.hooks),
    )


def _execute(
    args: argparse.Namespace,
    prep: Prepared,
    out: Path,
    start: Callable[[ProgressFn], RunStats | None],
) -> int:
    """Run ``start(progress)`` with a progress bar, SIGTERM as Ctrl-C, and print the outcome."""
    _show_warnings()
    sc = prep.scenario
    progress = bar = SlotBar(
        sc.run.frames * sc.run.slots_per_frame,
        sc.run.slots_per_frame,
        disable=args.quiet,
        label="ns-3" if sc.uplink.mode == "ns3_lte" else None,  # slots played by ns-3
    )

    def _terminate(signum: int, frame: object) -> None:  # SIGTERM: stop like Ctrl-C, keep the trace
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        stats = start(progress)
    except KeyboardInterrupt:
        bar.close()
        return _fail(
            f"interrupted; the completed frames are in {out} (continue with --resume {out})", 130
        )
    except ScenarioError:
        bar.close()
        raise
    except Exception as err:  # the manifest has the details, where one was written
        bar.close()
        return _fail(f"run failed: {type(err).__name__}: {_one_line(str(err))} ({_kept(out)})", 1)
    finally:
        signal.signal(signal.SIGTERM, previous)
    bar.close()
    if stats is None:
        print(f"wflsim: {out} is already completed; nothing to resume")
        return 0
    print("\n".join(summary_lines(prep, stats, out)))
    return _diagnostics(out, args.strict)


def _diagnostics(out: Path, strict: bool) -> int:
    """Print the run's diagnostics after its summary (``  diagnostic: ...``, one line each);
    with ``strict`` a run with any ends in exit code 3."""
    from wflsim.analysis.diagnostics import diagnose_folder

    found = diagnose_folder(out, verify=False)  # its parts were hashed as this process wrote them
    for d in found:
        print(f"  diagnostic: {d.one_line()}")
    if found and strict:
        return _fail(
            f"--strict: the run completed with {len(found)} diagnostic(s); its trace is in {out}",
            3,
        )
    return 0


def _kept(out: Path) -> str:
    """What a failed run left in ``out``, for its one-line error: where its manifest records
    the error, or that its last manifest could not, or that none was written at all."""
    from wflsim.sim.rundir import MANIFEST, read_manifest

    manifest = read_manifest(out)
    if manifest is None:
        return f"no frame was recorded: no {MANIFEST} was written in {out}"
    done = manifest.get("frames_completed")
    if manifest.get("status") == "failed" and manifest.get("error"):
        return f"see {out / MANIFEST}; {done} completed frames are kept"
    return (
        f"{out / MANIFEST} could not record the error; it lists {done} completed frames, which "
        f"are kept (continue with --resume {out})"
    )


def summary_lines(prep: Prepared, stats: RunStats, out: Path) -> list[str]:
    """What ``wflsim run`` prints at the end: the totals, and a hint where a number needs one."""
    sc = prep.scenario
    s = stats.as_dict()
    if sc.learning.enabled:
        accuracy = (
            f"  final accuracy   {s['final_accuracy']:.4f} (initial {s['initial_accuracy']:.4f})"
        )
    else:
        accuracy = "  final accuracy   - (network only: no training)"
    lines = [
        f"wflsim: {sc.name} ({sc.scheme.name}, seed {sc.seed}) completed -> {out}",
        accuracy,
        f"  total energy     {s['total_energy_j']:.4g} J ({s['mean_energy_per_device_slot_j']:.4g} J per device-slot)",
        f"  outage rate      {s['outage_rate']:.4f} (uploads missing the deadline)"
        if sc.server.mode == "sync"
        else f"  not applied      {s['outage_rate']:.4f} of uploads (too stale, or in the buffer "
        "at the end)",
        *(
            [
                f"  server           {s['server_steps']} steps ({sc.server.mode}), "
                f"{s['updates_applied']} updates applied, mean staleness "
                f"{s['mean_staleness']:.3g}, {s['stale_discarded']} too stale, at most "
                f"{s['max_versions_kept']} model versions kept"
            ]
            if sc.server.mode != "sync"
            else []
        ),
        f"  drop-out rate    {s['dropout_rate']:.4f} (device-slots without participation)",
        *(
            [
                f"  availability     {s['available_fraction']:.4f} of device-slots online, "
                f"{s['drops']} participation(s) dropped (device went offline)"
            ]
            if not isinstance(sc.availability, AlwaysConfig)
            else []
        ),
        *(
            [
                f"  cells            {sc.cells.num_cells}, {s.get('handovers', 0)} handover(s) "
                "(devices that changed cell at a frame start)"
            ]
            if sc.cells is not None
            else []
        ),
        *(
            [
                f"  cloud rounds     {s.get('cloud_rounds', 0)} (every "
                f"{sc.server.hierarchy.cloud_every_slots} slot(s)), backhaul "
                f"{s.get('backhaul_energy_j', 0.0):.4g} J (not in the devices' energy)"
            ]
            if sc.server.hierarchy is not None
            else []
        ),
        *(
            [
                f"  over the air     {_share(s.get('aircomp_aligned_share'))} of the asked "
                "devices in the sums; mean aggregation error "
                f"{_mse(s.get('aircomp_mean_aggregation_mse'))}"
            ]
            if sc.uplink.mode == "aircomp"
            else []
        ),
        *(
            [
                f"  privacy          epsilon max {s.get('epsilon_max', 0.0):.4g}, mean "
                f"{s.get('epsilon_mean', 0.0):.4g} at delta {sc.privacy.delta:g} ("
                f"{sc.privacy.mechanism}, z = {_multiplier(s.get('dp_noise_multiplier'))}); "
                f"{s.get('dp_stopped_devices', 0)} device(s) with the budget spent (no further update fits in it)"
            ]
            if sc.privacy is not None
            else []
        ),
        f"  simulated time   {s['simulated_time_s']:.4g} s over {s['slots']} slots",
        f"  wall time        {s['wall_time_s']:.1f} s",
    ]
    budget = float(prep.devices.energy_budget_j.max())
    mean = float(s["mean_energy_per_device_slot_j"])
    if mean > budget:
        lines.append(
            f"  note: {mean:.4g} J per device-slot exceeds every device's budget (at most "
            f"{budget:.4g} J): {sc.scheme.name} does not enforce the budgets"
            + (
                " and waits for every upload, so a device in a deep fade uploads for long"
                if sc.scheme.name in ("ideal", "only_pf") and sc.server.mode == "sync"
                else ""
            )
        )
    return lines


def _multiplier(z: Any) -> str:
    """A noise multiplier for the summary ("measured" where the radio's noise is what it is)."""
    return "measured" if z is None else f"{float(z):.4g}"


def _share(value: float | None) -> str:
    """A share as a percentage, or ``n/a``."""
    return "n/a" if value is None else f"{100.0 * value:.1f} %"


def _mse(value: float | None) -> str:
    """A mean squared error per entry, or what its absence means."""
    return "n/a (no training)" if value is None else f"{value:.3g} per entry"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def check_path_arg(text: str, flag: str) -> None:
    """Refuse a path option the system could not use (too long, a control character).

    Raises:
        ScenarioError: on ``flag``, with the fix.
    """
    problem = path_problem(text)
    if problem is not None:
        raise ScenarioError(flag, f"{problem} (got {shorten(text)!r})", "give a usable path")


def check_out_path(out: Path, flag: str, sweep: bool = False) -> None:
    """Refuse an output folder that could not be created (a bad path, a parent that is a file or
    not writable, too long for the files in it: a sweep's point folders too) before anything
    is written.

    Raises:
        ScenarioError: on ``flag``, with the fix.
    """
    room = 64 + (MAX_POINT_NAME_BYTES + 1 if sweep else 0)
    problem = out_path_problem(out, room=room)
    if problem is not None:
        raise ScenarioError(flag, f"{shorten(str(out))!r} {problem}", f"choose another {flag}")


def _sweep(args: argparse.Namespace) -> int:
    from .sweep import SweepInterrupted, plan_sweep, point_counts, run_sweep

    if not 1 <= args.workers <= MAX_WORKERS:
        raise ScenarioError("--workers", f"must be in [1, {MAX_WORKERS}]", "e.g. --workers 2")
    plan = plan_sweep(
        args.scenario,
        args.grid,
        args.seeds,
        data_dir=args.data_dir,
        extra_overrides=args.overrides,
        strict=args.strict,
        dedup=not args.no_dedup,
        download=args.download,
    )
    out = Path(args.out) if args.out else Path("runs") / f"sweep-{Path(args.scenario).stem}"
    check_out_path(out, "--out", sweep=True)
    _show_warnings()
    n = point_counts(plan, out, args.overwrite)
    print(
        f"wflsim: {n['points']} points, {n['runs']} runs, {n['shared']} shared; "
        f"{n['completed']} completed before, {n['resume']} to resume, {n['start']} to start"
    )
    progress = bar = PointBar(len(plan.points), disable=args.quiet)

    def _terminate(signum: int, frame: object) -> None:  # SIGTERM: stop like Ctrl-C
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        manifest = run_sweep(
            plan,
            out,
            workers=args.workers,
            executor=args.executor,
            data_dir=args.data_dir,
            extra_overrides=args.overrides,
            ray_address=args.ray_address,
            progress=progress,
            overwrite=args.overwrite,
            hooks=args.hooks,
        )
    except SweepInterrupted as stop:
        bar.close()
        c = stop.counts
        return _fail(
            f"sweep interrupted: {c['completed']} runs completed, {c['interrupted']} interrupted, "
            f"{c['not started']} not started (repeat the command to resume) -> {out}",
            130,
        )
    except KeyboardInterrupt:  # before any point was recorded
        bar.close()
        return _fail(f"sweep interrupted (repeat the command to resume) -> {out}", 130)
    finally:
        signal.signal(signal.SIGTERM, previous)
    bar.close()
    own = {n: p for n, p in manifest["points"].items() if "same_as" not in p}
    statuses = [p["status"] for p in own.values()]
    done = sum(s == "completed" for s in statuses)
    skipped = sum(s.startswith("skipped") for s in statuses)
    failed = [n for n, p in own.items() if p["status"] == "failed"]
    print(
        f"wflsim: sweep of {len(statuses)} runs -> {out}: {done} run, {skipped} already complete, "
        f"{len(failed)} failed"
    )
    for name in failed:
        err = _one_line(str(manifest["points"][name].get("error")))
        print(f"  failed: {name}: {err}", file=sys.stderr)
    if failed:
        return 1
    return _sweep_diagnostics(out, own, args.strict)


def _sweep_diagnostics(out: Path, own: dict[str, dict[str, Any]], strict: bool) -> int:
    """Print the diagnostics of a sweep's completed runs, one line per kind (how many runs,
    and the first run's finding); with ``strict`` any ends in exit code 3."""
    from wflsim.analysis.diagnostics import diagnose_folder

    kinds: dict[str, list[tuple[str, Diagnostic]]] = {}
    for name, point in own.items():
        folder = out / str(point.get("dir", name))
        if not (folder / "manifest.json").is_file():
            continue
        for d in diagnose_folder(folder):
            kinds.setdefault(d.code, []).append((name, d))
    for code, found in kinds.items():
        name, first = found[0]
        runs = f"{len(found)} of {len(own)} runs"
        print(f"  diagnostic: {code} in {runs} (first: {name}: {first.one_line()})")
    if kinds and strict:
        return _fail(f"--strict: runs of the sweep completed with diagnostics -> {out}", 3)
    return 0


def _report(args: argparse.Namespace) -> int:
    from wflsim.analysis.report import check_dpi, check_formats, write_report

    formats = check_formats(args.format, "--format")
    dpi = check_dpi(args.dpi, "--dpi")
    check_path_arg(args.directory, "DIRECTORY")
    if args.out is not None:
        check_out_path(Path(args.out), "--out")
    src = Path(args.directory)
    if not src.is_dir():
        raise ScenarioError(
            "DIRECTORY", f"{str(src)!r} is not a directory", "give a run or sweep directory"
        )
    out = Path(args.out) if args.out else src / "report"
    if args.claims is not None:
        check_path_arg(args.claims, "--claims")
    try:
        path = write_report(src, out, dpi=dpi, formats=formats, claims=args.claims)
    except FileNotFoundError as err:
        raise ScenarioError(
            "DIRECTORY",
            str(err).splitlines()[0],
            "give a run directory (with its events/ trace) or a sweep directory",
        ) from None
    print(f"wflsim: report -> {path}")
    return 0


def _data_fetch(args: argparse.Namespace) -> int:
    from wflsim.sim.config.resolve import default_data_dir

    from .fetch import dataset_folder, fetch_dataset

    data_dir = default_data_dir(args.dir, "--dir")
    if not fetch_dataset(args.dataset, data_dir, allow_http=args.allow_http):
        print(
            f"wflsim: {args.dataset} is already in {dataset_folder(args.dataset, data_dir)}; "
            "nothing downloaded"
        )
        return 0
    print(f"wflsim: {args.dataset} -> {dataset_folder(args.dataset, data_dir)}")
    return 0


def _ns3_build(args: argparse.Namespace) -> int:
    from wflsim.sim.radio.ns3.build import ensure_program, toolchain

    tools = toolchain()
    program = ensure_program(tools)
    print(f"wflsim: ns-3 {tools.ns3_version} ({tools.compiler_version}) -> {program}")
    return 0


def _command(args: argparse.Namespace) -> int:
    if args.command == "data":
        return _data_fetch(args)
    if args.command == "ns3":
        return _ns3_build(args)
    if args.command == "validate":
        return _validate(args)
    if args.command == "sweep":
        return _sweep(args)
    if args.command == "report":
        return _report(args)
    if args.command == "convert-mobility":
        return convert_command(args)
    if args.command == "convert-availability":
        return convert_availability_command(args)
    if args.command == "init":
        return init_command(args)
    return _run(args)


@contextlib.contextmanager
def _plausibility_lines() -> Iterator[None]:
    """Within: each :class:`PlausibilityWarning` becomes one line on stderr,
    ``warning: <field>: <problem> (<fix>)`` (every one: the sweep already shows each distinct
    finding once), printed by :func:`_show_warnings` once the input is valid, before the work
    starts, or when the command ends; a command that fails on bad input prints only its one-line
    error. Other warnings as Python shows them."""
    _PENDING.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("always", PlausibilityWarning)
        show = warnings.showwarning

        def show_line(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, PlausibilityWarning):
                _PENDING.append(f"warning: {_one_line(str(message))}")
            else:
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = show_line
        try:
            yield
        except ScenarioError:
            _PENDING.clear()  # the error line alone
            raise
        finally:
            _show_warnings()


#: Plausibility warning lines not yet printed (:func:`_plausibility_lines`).
_PENDING: list[str] = []


def _show_warnings() -> None:
    """Print the plausibility warnings so far (the input is valid: the work starts)."""
    for line in _PENDING:
        print(line, file=sys.stderr)
    _PENDING.clear()


def main(argv: list[str] | None = None, *, hooks: Hooks | None = None) -> int:
    """Entry point of the ``wflsim`` console command.

    Every failure ends in one line on stderr and an exit code (see the module docstring); an
    unexpected exception is a bug, reported as ``internal error`` with exit code 1 (its
    traceback with ``WFLSIM_TRACEBACK=1``). ``hooks`` (from Python only): the engine's callbacks
    (:class:`wflsim.Hooks`) for ``run``, ``run --resume`` and a ``sweep`` run in this process.
    """
    args = _parser().parse_args(argv)
    args.hooks = hooks
    configure_logging(args.log_level or _VERBOSITY[min(args.verbose, 2)])
    try:
        with _plausibility_lines():
            return _command(args)
    except ScenarioError as err:
        return _fail(err.one_line())
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as err:
        if os.environ.get("WFLSIM_TRACEBACK"):
            raise
        return _fail(
            f"internal error: {type(err).__name__}: {_one_line(str(err))[:300]} (a bug in "
            "wflsim: please report it with the command; WFLSIM_TRACEBACK=1 shows where)",
            1,
        )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
