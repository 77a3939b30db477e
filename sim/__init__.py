"""wflsim.sim: the world and its clock, the simulation library.

``config`` (scenario schema, catalogue, loading), ``world`` (physics, mobility, channel),
``schemes`` (the scheme seam and the controller), ``slot`` (pure slot resolution), ``kernels``
(slot kernels), ``engine`` (SimPy orchestration), ``trace`` (the event trace's format),
``rundir`` (the run folder's format and its readers), ``state`` (checkpoints), ``rng``, and
``learner`` (the learner interface). Nothing in this package imports torch: the learning side
lives in :mod:`models` and is reached through the :class:`sim.learner.Learner` protocol only;
the application that runs scenarios into folders is :mod:`wflsim.app`
(``docs/architecture.md``).
"""

from wflsim._version import __version__

__all__ = ["__version__"]
