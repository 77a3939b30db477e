"""Scenario configuration: the schema, per-device distributions, the torch-free catalogue of
datasets and models, resolution against the world, and file loading with overrides.

* :mod:`sim.config.schema` -- :class:`~sim.config.schema.Scenario` and its tables.
* :mod:`sim.config.distributions` -- per-device values (a number, a list, a distribution).
* :mod:`sim.config.catalogue` -- datasets, models, input shapes, files, parameter counts.
* :mod:`sim.config.architectures` -- each model's layer table; FjORD sub-model parameters and
  MACs per width.
* :mod:`sim.config.resolve` -- per-device arrays, deadline feasibility, data directory, ``D``.
* :mod:`sim.config.loading` -- read a TOML file, apply ``--set`` overrides, validate.
* :mod:`sim.config.plausibility` -- values valid but implausible for their unit (unit slips).
"""
