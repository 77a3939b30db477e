"""The ``wflsim`` command.

Exit codes: 0 success; 2 bad input (scenario, data directory, output directory), reported on one
line without a traceback; 1 the run failed after it started (the manifest records the error);
130 interrupted (Ctrl-C or SIGTERM; the frames written so far stay readable).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from sim import __version__
from sim.errors import ScenarioError

EXIT_BAD_INPUT = 2


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario file (TOML)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field, e.g. --set learning.lr=0.01 (repeatable)",
    )
    p.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    p.add_argument(
        "--data-dir",
        default=None,
        help="dataset folder (overrides learning.data_dir and $WFLSIM_DATA_DIR)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wflsim", description="Discrete-event co-simulator for wireless federated learning."
    )
    parser.add_argument("--version", action="version", version=f"wflsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a scenario and write its event trace")
    _add_common(run)
    run.add_argument(
        "--out", default=None, help="output directory (default: runs/<name>-<time>-s<seed>)"
    )
    run.add_argument(
        "--overwrite", action="store_true", help="replace an existing output directory"
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")

    val = sub.add_parser("validate", help="check a scenario file without running it")
    _add_common(val)
    return parser


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"wflsim: error: {message}", file=sys.stderr)
    return code


def _validate(args: argparse.Namespace) -> int:
    from sim.run import prepare

    prep = prepare(args.scenario, args.overrides, args.seed, args.data_dir)
    sc = prep.scenario
    print(
        f"{args.scenario}: ok — {sc.network.num_devices} devices, {sc.run.frames} frames x "
        f"{sc.run.slots_per_frame} slots, deadline {sc.run.deadline_s:g} s, scheme {sc.scheme.name}, "
        f"{'learning ' + sc.learning.dataset + '/' + sc.learning.model if sc.learning.enabled else 'network only'}"
    )
    return 0


def _run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from sim.run import check_out_dir, default_out_dir, execute, make_learner, prepare

    prep = prepare(args.scenario, args.overrides, args.seed, args.data_dir)
    out = Path(args.out) if args.out else default_out_dir(prep)
    check_out_dir(out, args.overwrite)
    learner = make_learner(prep)
    sc = prep.scenario
    total = sc.run.frames * sc.run.slots_per_frame
    bar = tqdm(total=total, unit="slot", disable=args.quiet, dynamic_ncols=True, file=sys.stderr)

    def progress(t: int, st) -> None:
        bar.update(1)
        if t % 5 == 0 or t == total - 1:
            bar.set_postfix(
                frame=t // sc.run.slots_per_frame,
                acc=f"{st.last_accuracy:.3f}",
                energy_J=f"{st.energy_j:.3g}",
                outage=f"{st.outage_rate:.3f}",
                refresh=False,
            )

    def _terminate(signum: int, frame: object) -> None:  # SIGTERM: stop like Ctrl-C, keep the trace
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    try:
        stats = execute(prep, learner, out, overwrite=args.overwrite, progress=progress)
    except KeyboardInterrupt:
        bar.close()
        return _fail(f"interrupted; partial trace in {out}", 130)
    except Exception as err:  # the manifest has the details
        bar.close()
        return _fail(f"run failed: {type(err).__name__}: {err} (see {out / 'manifest.json'})", 1)
    bar.close()
    s = stats.as_dict()
    print(
        "\n".join(
            [
                f"wflsim: {sc.name} ({sc.scheme.name}, seed {sc.seed}) completed -> {out}",
                f"  final accuracy   {s['final_accuracy']:.4f} (initial {s['initial_accuracy']:.4f})",
                f"  total energy     {s['total_energy_j']:.4g} J ({s['mean_energy_per_device_slot_j']:.4g} J per device-slot)",
                f"  outage rate      {s['outage_rate']:.4f} (uploads missing the deadline)",
                f"  drop-out rate    {s['dropout_rate']:.4f} (device-slots without participation)",
                f"  simulated time   {s['simulated_time_s']:.4g} s over {s['slots']} slots",
                f"  wall time        {s['wall_time_s']:.1f} s",
            ]
        )
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``wflsim`` console command."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "validate":
            return _validate(args)
        return _run(args)
    except ScenarioError as err:
        return _fail(err.one_line())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
