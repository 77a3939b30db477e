"""Logging of the command line: what a run, a sweep and the data loading do, on stderr.

The library logs to the standard :mod:`logging` loggers of its modules (``wflsim.app.run``,
``wflsim.app.recorder``, ``wflsim.app.sweep``, ``wflsim.models.data``, ...) and configures
nothing itself; a notebook turns it on with ``logging.basicConfig(level=logging.INFO)``. The ``wflsim`` command
calls :func:`configure_logging` with its ``-v`` / ``--log-level``; the level also reaches a
sweep's worker processes (through :data:`ENV`).
"""

from __future__ import annotations

import logging
import os
import sys

#: The environment variable that carries the level to a sweep's worker processes.
ENV = "WFLSIM_LOG_LEVEL"
#: The loggers of the project's packages.
PACKAGES = ("sim", "models", "wflsim", "analysis")
_FORMAT = "wflsim %(levelname)s %(asctime)s [%(process)d] %(name)s: %(message)s"


def configure_logging(level: str | None) -> None:
    """Send the project's log records at ``level`` (``error``, ``warning``, ``info``, ``debug``;
    ``None``: :data:`ENV`, else ``warning``) and above to stderr, one line each."""
    name = (level or os.environ.get(ENV) or "warning").upper()
    if name not in ("ERROR", "WARNING", "INFO", "DEBUG"):
        name = "WARNING"
    os.environ[ENV] = name.lower()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
    for pkg in PACKAGES:
        logger = logging.getLogger(pkg)
        logger.handlers = [handler]
        logger.setLevel(name)
        logger.propagate = False
