"""wflsim: a discrete-event co-simulator for wireless federated learning.

One import name holds the whole project:

* :mod:`wflsim.sim` -- the world and its clock (scenario schema, physics, channel, mobility,
  schemes, slot resolution, the SimPy engine, the trace, checkpoints); never imports torch;
* :mod:`wflsim.models` -- the learning side (datasets, networks, the federated learner);
* :mod:`wflsim.analysis` -- reading and analysing traces (pandas, DuckDB, figures, report);
* :mod:`wflsim.app` -- the application: running scenarios into run folders, sweeps, the
  ``wflsim`` command;
* the Python API below (``docs/api.md``)::

    import wflsim

    result = wflsim.run("scenarios/quickstart.toml", overrides=["run.frames=2"])
    result.events          # the trace as a DataFrame (docs/trace.md)
    result.summary         # the run's totals
    result.slots           # one row per slot (analysis.tidy)

Every function here is what the ``wflsim`` command line does: a run from the API and from the CLI
with the same scenario and seed have identical events. The API is imported on first use, so that
``import wflsim.sim`` stays light and loads neither pandas nor torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from wflsim._version import __version__

if TYPE_CHECKING:
    from wflsim.api import (
        Callbacks,
        Diagnostic,
        DiagnosticsError,
        FrameView,
        Hooks,
        RunResult,
        RunView,
        SlotView,
        SweepResult,
        compare,
        load_run,
        load_sweep,
        prepare,
        register_dataset,
        register_model,
        register_partition,
        register_scheme,
        register_update_rule,
        registered,
        resume,
        run,
        sweep,
        unregister,
    )

__all__ = [
    "Callbacks",
    "Diagnostic",
    "DiagnosticsError",
    "FrameView",
    "Hooks",
    "RunResult",
    "RunView",
    "SlotView",
    "SweepResult",
    "__version__",
    "compare",
    "load_run",
    "load_sweep",
    "prepare",
    "register_dataset",
    "register_model",
    "register_partition",
    "register_scheme",
    "register_update_rule",
    "registered",
    "unregister",
    "resume",
    "run",
    "sweep",
]

_API = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    """The API's names, imported from :mod:`wflsim.api` when first asked for (PEP 562)."""
    if name in _API:
        value = getattr(importlib.import_module("wflsim.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'wflsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _API)
