"""Schemes: the seam that decides freezing (or compression), participation and power.

* :mod:`wflsim.sim.schemes.base` -- the seam: contexts, plans, the
  :class:`~wflsim.sim.schemes.base.Scheme` protocol.
* :mod:`wflsim.sim.schemes.common` -- building blocks: parameters, the paper's frame controller, the
  Proposition-1 and no-outage slot rules, the freezing cost model.
* :mod:`wflsim.sim.schemes.controller` -- the Lyapunov / MM controller's mathematics (Theorem 2).
* one module per scheme, registered by name in :data:`SCHEMES`:
  ``two_timescale`` (the paper's), ``only_pc``, ``only_pf``, ``ideal`` (its baselines),
  ``random_freezing`` (the ablation of the stability criterion) and ``fixed_power`` (the
  validation scheme).
"""

from __future__ import annotations

from . import (  # noqa: F401 (each module registers its scheme)
    fedhq,
    fixed_power,
    fjord,
    ideal,
    only_pc,
    only_pf,
    pruning,
    random_freezing,
    topk_ef,
    two_timescale,
)
from .base import Scheme
from .registry import SCHEMES, build_scheme, register

__all__ = ["SCHEMES", "Scheme", "build_scheme", "register"]
