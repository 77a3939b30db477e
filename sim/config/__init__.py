"""Scenario configuration: the schema, per-device distributions, the torch-free catalogue of
datasets and models, resolution against the world, and file loading with overrides.

* :mod:`wflsim.sim.config.schema` -- :class:`~wflsim.sim.config.schema.Scenario` and its tables.
* :mod:`wflsim.sim.config.distributions` -- per-device values (a number, a list, a distribution).
* :mod:`wflsim.sim.config.catalogue` -- datasets, models, input shapes, files, parameter counts.
* :mod:`wflsim.sim.config.architectures` -- each model's layer table; FjORD sub-model parameters and
  MACs per width.
* :mod:`wflsim.sim.config.resolve` -- per-device arrays, deadline feasibility, data directory,
  ``D``.
* :mod:`wflsim.sim.config.loading` -- read a TOML file, apply ``--set`` overrides, validate.
* :mod:`wflsim.sim.config.plausibility` -- values valid but implausible for their unit (unit slips).
"""
