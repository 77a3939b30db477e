"""wflsim's Python API: run scenarios and sweeps from Python and load their results.

    import wflsim

    result = wflsim.run("scenarios/quickstart.toml", overrides=["run.frames=2"])
    result.events          # the trace as a DataFrame (docs/trace.md)
    result.summary         # the run's totals
    result.slots           # one row per slot (analysis.tidy)

Every function here is what the ``wflsim`` command line does (``docs/api.md``): a run from the
API and from the CLI with the same scenario and seed have identical events.
"""

from wflsim.api import (
    RunResult,
    SweepResult,
    load_run,
    load_sweep,
    prepare,
    resume,
    run,
    sweep,
)

__all__ = [
    "RunResult",
    "SweepResult",
    "load_run",
    "load_sweep",
    "prepare",
    "resume",
    "run",
    "sweep",
]
