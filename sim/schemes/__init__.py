"""Schemes: the seam that decides freezing (or compression), participation and power.

* :mod:`wflsim.sim.schemes.base` -- the seam: contexts, plans, the
  :class:`~wflsim.sim.schemes.base.Scheme` protocol.
* :mod:`wflsim.sim.schemes.common` -- building blocks: parameters, the paper's frame controller, the
  Proposition-1 and no-outage slot rules, the freezing cost model.
* :mod:`wflsim.sim.schemes.controller` -- the Lyapunov / MM controller's mathematics (Theorem 2).
* one module per scheme, listed in :data:`BUILT_IN` (the built-in entries of
  :data:`wflsim.sim.registry.SCHEMES`): ``two_timescale`` (the paper's), ``only_pc``, ``only_pf``,
  ``ideal`` (its baselines), ``random_freezing`` (the ablation of the stability criterion),
  ``fixed_power`` (the validation scheme), ``topk_ef``, ``pruning``, ``fedhq`` and ``fjord`` (the
  state-of-the-art baselines).

The scheme registry and what reads it (:func:`wflsim.sim.registry.register_scheme`, the way in for
a scheme registered from Python, ``wflsim.register_scheme``, and
:func:`wflsim.sim.registry.build_scheme`) are in :mod:`wflsim.sim.registry`, above this package.
"""

from __future__ import annotations

from typing import Any

from .base import Scheme
from .fedhq import FedHQ
from .fixed_power import FixedPower
from .fjord import FjORD
from .ideal import Ideal
from .only_pc import OnlyPC
from .only_pf import OnlyPF
from .pruning import Pruning
from .random_freezing import RandomFreezing
from .topk_ef import TopKEF
from .two_timescale import TwoTimescale

#: The built-in schemes, registered under their names when ``wflsim.sim.registry.SCHEMES`` is
#: first read.
BUILT_IN: tuple[type[Any], ...] = (
    FedHQ,
    FixedPower,
    FjORD,
    Ideal,
    OnlyPC,
    OnlyPF,
    Pruning,
    RandomFreezing,
    TopKEF,
    TwoTimescale,
)

__all__ = ["BUILT_IN", "Scheme"]
