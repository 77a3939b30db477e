"""wflsim: a discrete-event co-simulator for wireless federated learning.

One import name holds the whole project:

* :mod:`wflsim.sim` -- the world and its clock (scenario schema, physics, channel, mobility,
  schemes, slot resolution, the SimPy engine, the trace, checkpoints); never imports torch;
* :mod:`wflsim.models` -- the learning side (datasets, networks, the federated learner);
* :mod:`wflsim.analysis` -- reading and analysing traces (pandas, DuckDB, figures, report);
* :mod:`wflsim.app` -- the application: running scenarios into run folders, sweeps, the
  ``wflsim`` command;
* :mod:`wflsim.schemes` and :mod:`wflsim.rules` -- what a scheme or an update rule of one's own
  is written against (imported on first use);
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
        register_strategy,
        register_update_rule,
        registered,
        resume,
        run,
        sweep,
        unregister,
    )
    from wflsim.models.learner.strategies import Strategy
    from wflsim.sim.errors import PlausibilityWarning, ScenarioError
    from wflsim.sim.strategies import StrategyCosts

__all__ = [
    "Callbacks",
    "Diagnostic",
    "DiagnosticsError",
    "FrameView",
    "Hooks",
    "PlausibilityWarning",
    "RunResult",
    "RunView",
    "ScenarioError",
    "SlotView",
    "Strategy",
    "StrategyCosts",
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
    "register_strategy",
    "register_update_rule",
    "registered",
    "unregister",
    "resume",
    "run",
    "sweep",
]

#: The errors and warnings a scenario raises, from the light :mod:`wflsim.sim.errors`.
_ERRORS = frozenset({"PlausibilityWarning", "ScenarioError"})
#: Names from their own modules: the base class of a strategy of one's own (its module loads
#: torch) and the record of what a strategy costs a device (torch-free).
_TORCH = {
    "Strategy": "wflsim.models.learner.strategies",
    "StrategyCosts": "wflsim.sim.strategies",
}
_API = frozenset(__all__) - {"__version__"} - _ERRORS - set(_TORCH)
#: The public submodules for extensions, imported when first asked for (``wflsim.schemes``
#: loads no torch, ``wflsim.rules`` does).
_SUBMODULES = frozenset({"schemes", "rules"})


def __getattr__(name: str) -> Any:
    """The API's names, imported from :mod:`wflsim.api` when first asked for, the scenario's
    error and warning, the base class :class:`Strategy` (loading torch) and
    :class:`~wflsim.sim.strategies.StrategyCosts`, and the public
    submodules :mod:`wflsim.schemes` and :mod:`wflsim.rules`
    (PEP 562)."""
    if name in _API:
        value = getattr(importlib.import_module("wflsim.api"), name)
        globals()[name] = value
        return value
    if name in _ERRORS:
        value = getattr(importlib.import_module("wflsim.sim.errors"), name)
        globals()[name] = value
        return value
    if name in _TORCH:
        value = getattr(importlib.import_module(_TORCH[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"wflsim.{name}")
    raise AttributeError(f"module 'wflsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The API's names and the public submodules, imported or not."""
    return sorted(set(globals()) | _API | _ERRORS | set(_TORCH) | _SUBMODULES)
