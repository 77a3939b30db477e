"""Servers: what happens between "devices are told to work" and "the model moves"
(:mod:`wflsim.sim.servers.base`, the seam). One server per module:

* :class:`~wflsim.sim.servers.synchronous.SyncServer`: ``sync``, the paper's rounds;
* :class:`~wflsim.sim.servers.stale.StaleServer`: ``semi_sync`` and ``async``, stale updates.

:func:`make_server` is the one place that decides which server a scenario's ``[server]`` table
gets (:data:`SERVERS`, the server registry of :mod:`wflsim.sim.registry`: mode -> server class).
"""

from __future__ import annotations

from typing import Any

from ..registry import SERVERS  # its built-in entries are BUILT_IN_SERVERS below
from .base import Server, SlotEnd, SlotInProgress
from .config import SERVER_MODES, ServerConfig, ServerMode, StalenessConfig, staleness_weight
from .cycles import AsyncStats, Cycle
from .stale import StaleServer
from .synchronous import SyncServer

#: The built-in servers (the built-in entries of :data:`SERVERS`, one per mode they run).
BUILT_IN_SERVERS: tuple[type[Server], ...] = (SyncServer, StaleServer)


def make_server(config: ServerConfig, kernel: Any) -> Server:
    """The server of a ``[server]`` table; ``kernel`` (:func:`wflsim.sim.kernels.make_kernel`)
    plays the slots of a synchronous one."""
    return SERVERS[config.mode].build(config, kernel)


__all__ = [
    "BUILT_IN_SERVERS",
    "SERVERS",
    "SERVER_MODES",
    "AsyncStats",
    "Cycle",
    "Server",
    "ServerConfig",
    "ServerMode",
    "SlotEnd",
    "SlotInProgress",
    "StaleServer",
    "StalenessConfig",
    "SyncServer",
    "make_server",
    "staleness_weight",
]
