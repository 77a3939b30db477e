"""wflsim.app: the application on top of the simulation library.

``run`` (a scenario's parts wired, run into a run folder, resumed; the learner built and handed
to the engine), ``scenario`` (a scenario validated, its scheme against the scheme registry),
``recorder`` (the run folder written frame by frame), ``folders`` (the writer's lock, creating,
clearing and resuming run folders), ``sweep`` (grids of runs, the executors), ``cli`` (the
``wflsim`` command) and ``log`` (the command's logging). Layers, bottom to top:
:mod:`wflsim.sim` < :mod:`wflsim.models`, :mod:`wflsim.analysis` < ``wflsim.app`` <
:mod:`wflsim.api` (``docs/architecture.md``, "Layers").
"""
