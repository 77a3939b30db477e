"""wflsim.sim: the world and its clock.

``config`` (scenario schema, catalogue, loading), ``world`` (physics, mobility, channel),
``schemes`` (the scheme seam and the controller), ``slot`` (pure slot resolution), ``engine``
(SimPy orchestration), ``trace``, ``state`` (checkpoints), ``rng``, and the application
(``run``, ``recorder`` and ``rundir`` (the run folder), ``sweep``, ``cli``). Nothing in this package imports torch: the learning side lives in
:mod:`models` and is reached through the :class:`sim.learner.Learner` protocol only
(``docs/architecture.md``).
"""

from wflsim._version import __version__

__all__ = ["__version__"]
