"""wflsim.sim: the world and its clock (scenario schema, physics, SimPy engine, schemes, trace, CLI).

Nothing in this package imports torch: the learning side lives in :mod:`models` and is reached
through the :class:`sim.learner.Learner` protocol only.
"""

__version__ = "0.1.0"
