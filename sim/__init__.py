"""wflsim.sim: the world and its clock, the simulation library.

``config`` (scenario schema, catalogue, loading), ``world`` (physics, mobility, channel),
``schemes`` (the scheme seam and the controller), ``slot`` (pure slot resolution), ``kernels``
(slot kernels), ``engine`` (SimPy orchestration), ``trace`` (the event trace's format),
``rundir`` (the run folder's format and its readers), ``state`` (checkpoints), ``rng``, and
``learner`` (the learner protocol and the network-only learner). Nothing in this package
imports torch, nor anything of :mod:`wflsim.models`, :mod:`wflsim.analysis`, :mod:`wflsim.app`
or :mod:`wflsim.api`: the application (:mod:`wflsim.app`) builds the learner and hands it to the
engine, which sees it through the :class:`wflsim.sim.learner.Learner` protocol only
(``docs/architecture.md``, "Layers").
"""

from wflsim._version import __version__

__all__ = ["__version__"]
