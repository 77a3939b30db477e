"""The registry of uplink modes: every ``[uplink] mode`` by name, built-ins listed here, above the
modules they come from (so that no mode module imports the registry back), and what a run asks
of its mode: :func:`uplink_mode`, :func:`build_uplink`, :func:`describe_uplink`."""

from __future__ import annotations

from typing import Any

from .. import fmath
from ..world.system import SystemConstants
from .aircomp import AirComp
from .base import UplinkMode
from .cells.component import Cells
from .dedicated import Dedicated
from .ns3 import Ns3Lte
from .ofdma import Ofdma
from .rates import noise_psd_w_per_hz
from .shared import SharedUplink
from .spec import CONTROLLER_ASSUMPTION, UplinkSpec
from .tdma import Tdma

#: The uplink modes by name (``[uplink] mode``).
MODES: dict[str, UplinkMode] = {
    m.name: m for m in (Dedicated(), Ofdma(), Tdma(), AirComp(), Ns3Lte())
}


def uplink_mode(spec: UplinkSpec | str) -> UplinkMode:
    """The mode of ``spec`` (or the mode called so).

    Raises:
        ValueError: an unknown mode.
    """
    name = spec if isinstance(spec, str) else spec.mode
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown uplink mode {name!r}; known: {', '.join(MODES)}") from None


def build_uplink(
    spec: UplinkSpec,
    system: SystemConstants,
    upload_start: int,
    upload_end: int,
    cells: Cells | None = None,
) -> SharedUplink | None:
    """The component of ``spec``'s mode that decides when each upload ends (None: a closed form:
    dedicated bands, over the air, cells on bands of their own); with several cells whose
    uploads interact (a cell shares its band, or two cells share one), the digital modes give
    the cells' uplink with inter-cell interference
    (:class:`~wflsim.sim.radio.cells.uplink.CellularUplink`)."""
    return uplink_mode(spec).build(spec, system, upload_start, upload_end, cells)


def describe_uplink(
    spec: UplinkSpec, system: SystemConstants, server_mode: str = "sync"
) -> dict[str, Any]:
    """The uplink, what the scheme plans on and what the controller assumes of it (for the
    run's manifest); ``server_mode``: the ``[server] mode`` it runs under."""
    mode = uplink_mode(spec)
    psd = float(noise_psd_w_per_hz(system.noise_w, system.bandwidth_hz))
    k = spec.planned_concurrent_uploads
    differences = mode.differences(spec, server_mode)
    notes: list[str] = []
    if k > 1:
        differences.append(
            f"the scheme plans on a band W / {k} with noise N0 / {k} (p_min for {k} "
            "concurrent uploads), not on W"
        )
        if not mode.interacting and not mode.over_the_air:
            notes.append("on a dedicated band W this over-provisions power")
    details = mode.details(spec)
    return {
        "mode": spec.mode,
        "bandwidth_hz": system.bandwidth_hz,
        "noise_psd_dbm_hz": float(10.0 * fmath.log10(psd) + 30.0),
        "order": details.pop("order", None),
        "planned_concurrent_uploads": k,
        "plans_on": (
            f"p_min (Proposition 1) and the controller's costs for one upload on a band "
            f"W / {k} = {system.bandwidth_hz / k:.6g} Hz with noise power N0 / {k} over it, "
            f"whatever the uplink and the server mode"
        ),
        "controller_assumption": {
            "assumption": CONTROLLER_ASSUMPTION,
            "matches": not differences,
            "differences": differences,
            "notes": notes,
        },
        **details,
    }
