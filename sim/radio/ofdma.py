"""OFDMA: the uploads in flight share the band ``W`` by processor sharing, ``k`` of them ``W / k``
each (:class:`OfdmaUplink`, on :class:`~wflsim.sim.radio.sharing.ProcessorSharing`); an upload's
rate is Shannon's on its share, :func:`~wflsim.sim.radio.rates.shared_rate_bps`, recomputed
whenever an upload starts or ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import simpy
from numpy.typing import NDArray

from ..world.system import SystemConstants
from .base import UplinkMode
from .cells.component import Cells
from .cells.uplink import cellular_uplink
from .rates import equal_share_hz, noise_psd_w_per_hz, shared_rate_bps
from .shared import SharedUplink
from .sharing import ProcessorSharing
from .spec import UplinkSpec

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


class OfdmaUplink(SharedUplink):
    """Processor sharing of the band: ``k`` uploads in flight get ``W / k`` each."""

    shares_band: ClassVar[bool] = True

    def _open(self) -> None:
        assert self.env is not None
        self._psd = float(noise_psd_w_per_hz(self.noise_w, self.bandwidth_hz))
        self.sharing = ProcessorSharing(self.env, self._rates, self._complete)

    def _rates(self, jobs: I64) -> F64:
        band = equal_share_hz(self.bandwidth_hz, int(jobs.shape[0]))
        return shared_rate_bps(self._p[jobs], self._h[jobs], band, self._psd, self.rate_model)

    def _enter(self, device: int) -> None:
        self._begin(device)
        self.sharing.add(device, float(self._bits[device]))

    def _complete(self, device: int) -> None:
        self._end(device, True)

    def _leave(self, device: int) -> bool:
        return self.sharing.remove(device)

    def _cut(self) -> None:
        jobs, ends = self.sharing.cut()
        for d, end in zip(jobs.tolist(), ends.tolist(), strict=True):
            self._end(d, self.in_time(end))

    def _inside(self) -> I64:
        return self.sharing.in_flight

    def _settle(self, until_s: float) -> None:
        self.sharing.settle(until_s)

    def _state(self) -> dict[str, Any]:
        return {"sharing": self.sharing.state_dict()}

    def _idle_state(self) -> dict[str, Any]:
        return {"sharing": ProcessorSharing.idle_state()}

    def _load(self, state: dict[str, Any], schedule_at: Callable[[float], simpy.Event]) -> None:
        sharing = state["sharing"]
        if not np.array_equal(np.asarray(sharing["jobs"]), np.asarray(state["device"])):
            raise ValueError("uplink state: the jobs in flight are not its uploads")
        self.sharing.load_state_dict(sharing, schedule_at)


class Ofdma(UplinkMode):
    """``[uplink] mode = "ofdma"`` (the module docstring)."""

    name: ClassVar[str] = "ofdma"
    interacting: ClassVar[bool] = True
    summary: ClassVar[str] = "W shared equally by the uploads in flight (processor sharing)"

    def differences(self, spec: UplinkSpec, server_mode: str) -> list[str]:
        """The share changes as uploads come and go; under stale updates across slots."""
        out = [
            "OFDMA: the band W is shared equally by the uploads in flight; an upload's rate "
            "changes whenever another starts or ends, so the time p_min was computed for is "
            "not the time the upload takes"
        ]
        return out + stale_difference(server_mode)

    def build(
        self,
        spec: UplinkSpec,
        system: SystemConstants,
        upload_start: int,
        upload_end: int,
        cells: Cells | None = None,
    ) -> SharedUplink | None:
        """:class:`OfdmaUplink` on the band ``W``, or the cells' uplink."""
        if cells is not None:
            return cellular_uplink(spec, system, upload_start, upload_end, cells)
        link = OfdmaUplink(system.bandwidth_hz, system.noise_w, upload_start, upload_end)
        link.rate_model = system.rate_model
        return link


def stale_difference(server_mode: str) -> list[str]:
    """What stale updates change for a shared band (none under ``sync``)."""
    if server_mode == "sync":
        return []
    return [
        f"stale updates ({server_mode}): uploads keep their share across slot boundaries, so "
        "uploads started in different slots overlap and an upload's share changes as they join "
        "and leave; no deadline cuts an upload"
    ]
