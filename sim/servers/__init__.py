"""Servers: what happens between "devices are told to work" and "the model moves"
(:mod:`wflsim.sim.servers.base`, the seam). One server per module:

* :class:`~wflsim.sim.servers.synchronous.SyncServer`: ``sync``, the paper's rounds;
* :class:`~wflsim.sim.servers.stale.StaleServer`: ``semi_sync`` and ``async``, stale updates.

:func:`wflsim.sim.registry.make_server` is the one place that decides which server a scenario's
``[server]`` table gets (:data:`wflsim.sim.registry.SERVERS`, the server registry: mode -> server
class, whose built-in entries are :data:`BUILT_IN_SERVERS`).
"""

from __future__ import annotations

from .base import Server, SlotEnd, SlotInProgress
from .config import SERVER_MODES, ServerConfig, ServerMode, StalenessConfig, staleness_weight
from .cycles import AsyncStats, Cycle
from .stale import StaleServer
from .stale_closed import ClosedFormStaleServer
from .synchronous import SyncServer

#: The built-in servers (the built-in entries of ``wflsim.sim.registry.SERVERS``, one per mode
#: they run).
BUILT_IN_SERVERS: tuple[type[Server], ...] = (SyncServer, StaleServer)
#: the stale-update server of the ``closed_form`` kernel (wired here, above both modules, so that
#: :mod:`~wflsim.sim.servers.stale` never imports its subclass)
StaleServer.closed_form = ClosedFormStaleServer


__all__ = [
    "BUILT_IN_SERVERS",
    "SERVER_MODES",
    "AsyncStats",
    "ClosedFormStaleServer",
    "Cycle",
    "Server",
    "ServerConfig",
    "ServerMode",
    "SlotEnd",
    "SlotInProgress",
    "StaleServer",
    "StalenessConfig",
    "SyncServer",
    "staleness_weight",
]
