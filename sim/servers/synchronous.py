"""The synchronous server (``[server] mode = "sync"``, the paper's): rounds of one slot.

Per slot (DESIGN.md, "One slot, as data flows through it"): the engine's slot plan
(:meth:`~wflsim.sim.engine.Engine.plan_slot`: the channel draw, ``p_min``, the scheme's plan);
:func:`~wflsim.sim.slot.slot_uploads` turns plan and true gains into who uploads what at which
power; the learner computes the participants' uploads in one batched call (virtual time does not
advance); the slot kernel (:mod:`wflsim.sim.kernels`) plays their compute and uploads out on the
clock; the server closes the slot at the deadline ``tau_0`` or, for schemes that promise no
outage, when the last upload has arrived or been dropped (the later of the two);
:func:`~wflsim.sim.slot.settle_slot` turns the kernel's report into the outcome; the learner
aggregates the uploads that arrived in time.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from .. import slot as slots
from ..errors import RunDiverged, SlotTooLong
from ..kernels import C_END, DROPPED, U_END, U_START, SlotActivity, SlotKernel
from ..learner import AirCompLearner
from ..radio.aircomp import AirCompPlan
from ..radio.modes import uplink_mode
from ..slot import SlotOutcome
from ..trace import event_code
from ..world.availability import Changes
from .aircomp import over_the_air, over_the_air_sum, received_noise_w
from .base import (
    Server,
    SlotEnd,
    SlotInProgress,
    SlotPlay,
    account_privacy,
    decision_columns,
    log_strategy_rows,
    select,
)
from .config import ServerConfig

_ONLINE, _OFFLINE = event_code("online"), event_code("offline")


class SyncServer(Server):
    """Rounds of one slot played by a slot kernel (the module docstring).

    Args:
        kernel: plays each slot's device activity on the clock (:func:`wflsim.sim.kernels.make_kernel`).
    """

    modes: ClassVar[tuple[str, ...]] = ("sync",)

    @classmethod
    def build(cls, config: ServerConfig, kernel: SlotKernel) -> SyncServer:
        """A synchronous server on ``kernel``."""
        return cls(kernel)

    def __init__(self, kernel: SlotKernel) -> None:
        super().__init__()
        self.kernel = kernel
        self._slot: SlotInProgress | None = None

    @property
    def in_slot(self) -> bool:
        """Whether a slot is in progress."""
        return self._slot is not None

    def start_run(self, env: Any) -> None:
        """The kernel's per-device processes on the run's clock."""
        self.kernel.start_run(env, self.host.num_devices)

    def close(self) -> None:
        """The kernel's uplink releases what it holds."""
        self.kernel.close()

    def play_slot(self, k: int, t: int) -> SlotPlay:
        """The slot's plan, the kernel playing it out, its outcome."""
        eng = self.host
        self._slot_start(k, t)
        sl = self._slot
        assert sl is not None
        if sl.probe_phase_s > 0:  # power_of_choice: the server waits for the loss probes
            yield eng.clock.timeout(sl.probe_phase_s)
        if sl.aircomp is not None:
            result = yield from self.kernel.play_aircomp(
                eng.clock,
                sl.uploads,
                sl.aircomp.latency_s,
                eng.system.deadline_s,
                eng.rules.closes_at,
                record=eng.record_events,
                online_until_s=sl.online_until_s,
                group=None if eng.cells is None else sl.aircomp.group,
                num_groups=None if eng.cells is None else eng.cells.num_cells,
            )
        else:
            result = yield from self.kernel.play_slot(
                eng.clock,
                sl.uploads,
                eng.system.deadline_s,
                eng.rules.closes_at,
                record=eng.record_events,
                online_until_s=sl.online_until_s,
            )
        self._check_wait(t, eng.clock.now - sl.start_s - sl.probe_phase_s)
        return self._slot_end(k, t, result)

    def _check_wait(self, t: int, waited_s: float) -> None:
        """Stop the run if slot ``t`` waited more than the engine's ``max_wait_s`` for its last
        upload (:data:`wflsim.sim.config.limits.MAX_SLOT_WAIT_S`, or less where a wait costs
        many events: :func:`wflsim.sim.config.derived.longest_wait_s`), before anything that
        follows the slot in simulated time (availability changes, the next frame's positions)
        is computed over that span.

        Raises:
            SlotTooLong: naming the slot and its slowest upload.
        """
        limit_s = self.host.max_wait_s
        if not waited_s > limit_s:
            return
        sl = self._slot
        assert sl is not None
        up = sl.uploads
        ends = up.compute_s + up.upload_full_s
        ends = np.where(up.participating & np.isfinite(ends), ends, -np.inf)
        n = int(np.argmax(ends))
        raise SlotTooLong.at(
            t,
            waited_s,
            limit_s,
            f"device {n} at {up.tx_power_w[n]:.3g} W over a channel gain of "
            f"{up.channel_gain[n]:.3g} needs {ends[n]:.3g} s to compute and upload",
        )

    def _slot_start(self, k: int, t: int) -> None:
        eng = self.host
        now = eng.clock.now
        fr = eng.frame
        assert fr is not None
        sp = eng.plan_slot(k, t)
        gains, costs, planned = sp.gains, sp.costs, sp.planned
        self.kernel.new_slot(k, t, now, gains.gain)
        available, online_until, plan = sp.available, sp.online_until_s, sp.plan
        participate = plan.participate if available is None else plan.participate & available
        up = slots.slot_uploads(
            participate, plan.tx_power_w, costs, gains.gain, eng.system, eng.rules.closes_at
        )
        selected: dict[str, Any] = {"selected": None}
        probe_energy, probe_phase_s = None, 0.0
        if eng.selection.active:  # the candidates the strategy asks ([strategy.selection])
            size = eng.selection.k
            assert size is not None
            pick = select(eng, t, sp, up, up.participating, size)
            selected, probe_energy = pick.columns, pick.probe_energy_j
            probe_phase_s = pick.probe_phase_s
            up = slots.slot_uploads(
                pick.chosen, plan.tx_power_w, costs, gains.gain, eng.system, eng.rules.closes_at
            )
        air = None
        if uplink_mode(
            eng.config.uplink
        ).over_the_air:  # the power rule's aligned devices, powers and receiver
            gain = fr.planned_gain if fr.planned_gain is not None else fr.large.gain
            # over-the-air privacy: the radio plans the public scale and the noise to reach z
            private = {} if eng.privacy is None else {"privacy": eng.privacy.spec}
            up, air = over_the_air(
                up, sp, costs, eng.system, eng.config.uplink, eng.cells, gain, **private
            )
        who = np.flatnonzero(up.participating)
        planned_compute_s = (
            up.compute_s
            if eng.jitter is None
            else np.where(up.participating, planned.compute_s, 0.0)
        )
        decision = {**decision_columns(fr, sp, up, planned_compute_s), **selected}
        eng.buffer.add("slot_start", now, k, t)
        if eng.record_events:
            eng.buffer.add("decision", now, k, t, eng.ids, **decision)
            decision = {}
        self._slot = SlotInProgress(
            slot=t,
            frame=k,
            start_s=now,
            deadline_s=now + probe_phase_s + eng.system.deadline_s,
            uploads=up,
            costs=costs,
            who=who,
            decision=decision,
            online_until_s=online_until,
            available=available,
            probe_energy_j=probe_energy,
            probe_phase_s=probe_phase_s,
            aircomp=air,
        )
        eng.learner.compute(t, who)

    def _slot_end(self, k: int, t: int, result: Any) -> SlotEnd:
        eng = self.host
        now = eng.clock.now
        b, sl = eng.buffer, self._slot
        assert sl is not None
        out = slots.settle_slot(
            sl.uploads,
            result.transmitted_s,
            result.arrived,
            sl.costs,
            eng.queue_j,
            eng.system,
            eng.rules,
            computed_s=result.computed_s,
            dropped=result.dropped,
            probe_energy_j=sl.probe_energy_j,
        )
        changes = Changes.empty()
        if eng.availability is not None:  # the changes during the slot, up to its end
            changes = eng.availability.advance(now)
        cols = eng.cost_columns(out)
        link_cols = result.columns or {}  # the uplink's own columns (ns-3's per upload)
        if sl.aircomp is not None:  # the side information the sum's devices normalised by
            link_cols = {**link_cols, **self._moment_columns(out.success)}
        if eng.hierarchy is not None and eng.cells is not None:  # each upload's edge server
            edge = eng.cells.serving.astype(np.int32)
            link_cols = {**link_cols, "edge": np.ma.MaskedArray(edge, ~out.participating)}
        if eng.record_events:
            self._log_activity(k, t, out, result.activity, changes, link_cols)
        else:  # the decision and the outcome in one row, at the slot's start
            # participating and tx_power_w are the decision's; upload_s and compute_s become the
            # outcome's (the time actually transmitted and computed)
            row = {
                **sl.decision,
                "upload_planned_s": sl.decision["upload_s"],
                "compute_s": out.compute_s,
                **eng.outcome_columns(out),
                **cols,
                **link_cols,
            }
            b.add("device_slot", sl.start_s, k, t, eng.ids, **row)
            eng.log_changes(changes, k, t)
        if eng.rules.closes_at == "deadline":
            b.add("deadline", sl.deadline_s, k, t)
        ok = np.flatnonzero(out.success)
        air_multipliers = None
        if sl.aircomp is not None:  # the learner applies the received sums, not the uploads'
            air = sl.aircomp
            received = received_noise_w(
                air, sl.uploads, result.transmitted_s, eng.system, eng.rules.closes_at, eng.cells
            )
            learner = eng.learner
            assert isinstance(learner, AirCompLearner), "checked when the engine was built"
            summed = over_the_air_sum(air, ok, t, received)
            air_multipliers = getattr(summed, "privacy_multipliers", None)
            learner.receive_over_the_air(summed)
        eng.learner.apply(t, ok)
        if eng.cells is not None:  # what each edge aggregated (under a hierarchy)
            self.count_by_edge(ok, eng.cells.serving[ok])
        if not eng.learner.is_finite():
            raise RunDiverged.at(t, "the global model has non-finite weights")
        if sl.aircomp is not None:  # before the aggregate row: what the aggregate applied
            self._log_sums(k, t, sl.aircomp, received, out.success)
        stable = float(eng.learner.stable_fraction)
        b.add(
            "aggregate",
            now,
            k,
            t,
            n_participants=int(out.participating.sum()),
            n_success=len(ok),
            slot_duration_s=now - sl.start_s,
            stable_fraction=None if np.isnan(stable) else stable,
        )
        if eng.privacy is not None:  # the step's privacy, each device at its own multiplier
            edges = None
            if eng.hierarchy is not None and eng.cells is not None:  # each edge's own step
                edges = eng.cells.serving[ok]
            account_privacy(
                eng,
                now,
                k,
                t,
                ok,
                eng.system.devices.batch_size[ok].astype(np.float64),
                edges,
                air_multipliers,
            )
        log_strategy_rows(eng, now, k, t)
        eng.stats.successes += len(ok)
        self._slot = None
        return SlotEnd(out, sl.available, cols)

    def _moment_columns(self, in_sum: np.ndarray) -> dict[str, np.ma.MaskedArray]:
        """Over the air, learning runs: ``update_mean`` and ``update_std`` of the devices in
        the slot's sums (``in_sum``, ``(N,)``), the learner's (its floats never reach the
        network side: they only go to the trace), masked elsewhere; none without training."""
        moments = getattr(self.host.learner, "upload_moments", None)
        if moments is None:
            return {}
        ids = np.flatnonzero(in_sum)
        mu, sigma = moments(ids)
        n = in_sum.shape[0]
        mean, std = np.zeros(n), np.zeros(n)
        mean[ids], std[ids] = mu, sigma
        return {
            "update_mean": np.ma.MaskedArray(mean, ~in_sum),
            "update_std": np.ma.MaskedArray(std, ~in_sum),
        }

    def _log_sums(
        self, k: int, t: int, air: AirCompPlan, noise_w: np.ndarray, arrived: np.ndarray
    ) -> None:
        """One ``aircomp`` row per sum (per cell with ``[cells]``), before the aggregate row:
        its receiver's ``eta``, the devices aligned and truncated, the closed-form MSE with the
        noise received and the learner's measured error of the aggregate it went into."""
        eng = self.host
        now = eng.clock.now
        measured = getattr(eng.learner, "last_aggregation_mse", None)
        mse = air.mse(noise_w, arrived)
        num = air.eta.shape[0]
        aligned = np.bincount(air.group[air.aligned], minlength=num)
        truncated = np.bincount(air.group[air.truncated], minlength=num)
        per_sum = np.full(num, np.nan)
        if measured is not None:
            per_sum[:] = np.asarray(measured, dtype=np.float64)  # one value, or one per sum
        st = eng.stats
        st.air_aligned = (st.air_aligned or 0) + int(air.aligned.sum())
        st.air_asked = (st.air_asked or 0) + int((air.aligned | air.truncated).sum())
        if measured is not None:  # each aggregate once: one value, or one per edge
            values = np.atleast_1d(np.asarray(measured, dtype=np.float64))
            values = values[np.isfinite(values)]
            st.air_mse_total = (st.air_mse_total or 0.0) + float(values.sum())
            st.air_mse_count = (st.air_mse_count or 0) + int(values.size)
        drawn = getattr(eng.learner, "last_air_noise", None)  # one aggregate's, or per edge
        for g in range(num):
            m = float(per_sum[g])
            nz = drawn[g] if isinstance(drawn, list) else drawn
            learned = {} if nz is None else {
                "aircomp_scale": _or_none(nz.scale),
                "aircomp_noise_std": _or_none(nz.noise_std),
                "aircomp_noise_mean": _or_none(nz.noise_mean),
                "aircomp_noise_rms": _or_none(nz.noise_rms),
            }  # fmt: skip
            eng.buffer.add(
                "aircomp",
                now,
                k,
                t,
                cell=None if eng.cells is None else g,
                eta_w=float(air.eta[g]),
                n_aligned=int(aligned[g]),
                n_truncated=int(truncated[g]),
                aircomp_mse=None if np.isnan(mse[g]) else float(mse[g]),
                aggregation_mse=None if np.isnan(m) else m,
                **learned,
            )

    def _log_activity(
        self,
        k: int,
        t: int,
        out: SlotOutcome,
        activity: SlotActivity,
        changes: Changes,
        link_cols: dict[str, np.ma.MaskedArray],
    ) -> None:
        """The slot's device rows, in the kernel's event order, with the availability changes
        during the slot merged in by time (before the device events at the same instant);
        unless the kernel logged the ``upload_start`` events (a shared uplink), every
        ``compute_end`` is followed, at the same instant, by the device's ``upload_start``; the
        uplink's own columns (``link_cols``, ``(N,)`` masked) on the ``upload_end`` and
        ``dropped`` rows."""
        eng = self.host
        if not len(activity):
            eng.log_changes(changes, k, t)
            return
        if activity.has_upload_start:
            times, devs, codes = activity.time_s, activity.device, activity.code
        else:
            twice = np.where(activity.code == C_END, 2, 1)
            times = np.repeat(activity.time_s, twice)
            devs = np.repeat(activity.device, twice)
            codes = np.repeat(activity.code, twice)
            codes[np.flatnonzero(codes == C_END)[1::2]] = U_START
        if len(changes):
            at = np.searchsorted(times, changes.time_s, side="left")
            times = np.insert(times, at, changes.time_s)
            devs = np.insert(devs, at, changes.device)
            codes = np.insert(codes, at, np.where(changes.online, _ONLINE, _OFFLINE))
        is_ce, is_us, is_ue = codes == C_END, codes == U_START, codes == U_END
        is_drop = codes == DROPPED

        def masked(values: np.ndarray, keep: np.ndarray) -> np.ma.MaskedArray:
            return np.ma.MaskedArray(values[devs], mask=~keep)

        link = {
            name: np.ma.MaskedArray(
                values.data[devs], mask=np.ma.getmaskarray(values)[devs] | ~(is_ue | is_drop)
            )
            for name, values in link_cols.items()
        }

        eng.buffer.add(
            codes,
            times,
            k,
            t,
            devs.astype(np.int32),
            compute_s=masked(out.compute_s, is_ce | is_drop),
            tx_power_w=masked(out.tx_power_w, is_us | is_ue | is_drop),
            upload_s=masked(out.upload_s, is_ue | is_drop),
            success=masked(out.success, is_ue),
            energy_upload_j=masked(out.energy_upload_j, is_ue),
            **link,
        )


def _or_none(value: float) -> float | None:
    """``value``, or None (a null in the trace) where it is NaN."""
    return None if np.isnan(value) else float(value)
