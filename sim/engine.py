"""The SimPy engine: a server process and one process per device.

Per slot (DESIGN.md, "One slot, as data flows through it"):

1. the server draws the channels ``h = g H`` and asks the scheme for every device's decision
   (vectorised); the learner computes the participating devices' gradients in one batched call
   (virtual time does not advance);
2. each participating device's process plays its slot out in virtual time: compute
   (``tau_cmp``), then upload (``tau_com``);
3. the server closes the slot at the deadline ``tau_0`` (uploads still running are cut there:
   outages) or, for schemes that promise no outage, when the last upload arrives; it aggregates
   the uploads that arrived in time, updates the queues and logs the energy.

Timing rule: an upload counts as in time iff ``tau_cmp + tau_com <= tau_0 (1 + 1e-9)``. The
relative tolerance absorbs floating-point rounding of uploads sent at exactly ``p_min``, which
land on the deadline by construction. The decision is made from these numbers, never from the
order in which SimPy happens to process simultaneous events.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from sim import physics
from sim.learner import Learner
from sim.mobility import Mobility
from sim.rng import Streams
from sim.scenario import Scenario, SystemConstants
from sim.schemes import FrameInputs, Scheme, SlotInputs
from sim.trace import TraceBuffer, TraceWriter, event_code

#: Relative tolerance of the deadline test (see the module docstring).
DEADLINE_REL_TOL = 1e-9

_C_START, _C_END, _U_START, _U_END = (
    event_code("compute_start"),
    event_code("compute_end"),
    event_code("upload_start"),
    event_code("upload_end"),
)


@dataclass
class RunStats:
    """Running totals of a simulation (what the CLI's summary prints)."""

    slots: int = 0
    device_slots: int = 0
    participations: int = 0
    successes: int = 0
    energy_j: float = 0.0
    last_loss: float = float("nan")
    last_accuracy: float = float("nan")
    first_accuracy: float = float("nan")
    simulated_time_s: float = 0.0
    wall_time_s: float = 0.0
    rows: int = 0
    energy_per_device_j: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def outage_rate(self) -> float:
        """Uploads that missed the deadline, per participation."""
        return (
            (self.participations - self.successes) / self.participations
            if self.participations
            else 0.0
        )

    @property
    def dropout_rate(self) -> float:
        """Device-slots in which the device did not participate, per device-slot."""
        return 1.0 - self.participations / self.device_slots if self.device_slots else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "slots": self.slots,
            "final_accuracy": self.last_accuracy,
            "initial_accuracy": self.first_accuracy,
            "final_loss": self.last_loss,
            "total_energy_j": self.energy_j,
            "mean_energy_per_device_slot_j": self.energy_j / self.device_slots
            if self.device_slots
            else 0.0,
            "outage_rate": self.outage_rate,
            "dropout_rate": self.dropout_rate,
            "simulated_time_s": self.simulated_time_s,
            "wall_time_s": self.wall_time_s,
            "trace_rows": self.rows,
        }


ProgressFn = Callable[[int, RunStats], None]


class Engine:
    """One simulation run. Build it with every part resolved, then call :meth:`run`."""

    def __init__(
        self,
        scenario: Scenario,
        system: SystemConstants,
        mobility: Mobility,
        scheme: Scheme,
        learner: Learner,
        streams: Streams,
        writer: TraceWriter | None = None,
        progress: ProgressFn | None = None,
        evaluate: bool = True,
    ) -> None:
        self.scenario = scenario
        self.system = system
        self.mobility = mobility
        self.scheme = scheme
        self.learner = learner
        self.writer = writer
        self.progress = progress
        self.evaluate_enabled = evaluate
        self.buffer = TraceBuffer()
        self.stats = RunStats()

        net = scenario.network
        n = system.num_devices
        self.N = n
        self.T = scenario.run.slots_per_frame
        self.K = scenario.run.frames
        self.tau0 = scenario.run.deadline_s
        self.noise_w = system.noise_w
        self.bandwidth_hz = system.bandwidth_hz
        self._fading = streams.keyed("fading") if net.fading == "rayleigh" else None
        self._ids = np.arange(n, dtype=np.int64)
        self.queue_j = np.zeros(n)
        self.stats.energy_per_device_j = np.zeros(n)

        self.env = simpy.Environment()
        self._wake: list[simpy.Event | None] = [None] * n
        self._proc_log: list[tuple[float, int, int]] = []
        self._remaining = 0
        self._all_done: simpy.Event | None = None
        # per-slot plan (read by the device processes)
        self._compute_s = np.zeros(n)
        self._upload_s = np.zeros(n)
        # The same plan as Python floats for the device processes: SimPy's event heap compares
        # times, and Python floats compare several times faster than NumPy scalars.
        self._compute_list: list[float] = [0.0] * n
        self._upload_list: list[float] = [0.0] * n
        for d in range(n):
            self.env.process(self._device(d))

    # ------------------------------------------------------------------ processes

    def _device(self, d: int):
        """A device: wakes when it participates in a slot, computes, uploads, reports."""
        env = self.env
        log = self._proc_log
        while True:
            wake = env.event()
            self._wake[d] = wake
            yield wake
            log.append((env.now, d, _C_START))
            yield env.timeout(self._compute_list[d])
            # compute_end; its upload_start (same instant, next) is added by _log_processes
            log.append((env.now, d, _C_END))
            yield env.timeout(self._upload_list[d])
            log.append((env.now, d, _U_END))
            self._remaining -= 1
            if self._remaining == 0:
                self._all_done.succeed()

    def _server(self):
        env = self.env
        self._log_device_config()
        if self.evaluate_enabled:
            self._eval(frame=0, slot=-1)
        for k in range(self.K):
            self._frame_start(k)
            for j in range(self.T):
                t = k * self.T + j
                t0 = env.now
                self._slot_start(k, t)
                deadline = env.timeout(self.tau0)
                if self._remaining > 0:
                    yield env.all_of([deadline, self._all_done])
                else:
                    yield deadline
                self._slot_end(k, t, t0)
            self._frame_end(k)

    # ------------------------------------------------------------------ frame

    def _frame_start(self, k: int) -> None:
        now = self.env.now
        b = self.buffer
        b.add("frame_start", now, k, k * self.T)
        when = k * self.T * self.tau0 if self.scenario.mobility.clock == "nominal" else now
        pos = np.asarray(self.mobility.positions_m(when), dtype=np.float64)
        dist = physics.distance_m(pos)
        net = self.scenario.network
        pl = physics.path_loss_db(
            dist, net.min_distance_m, net.pathloss_intercept_db, net.pathloss_slope_db
        )
        self.H = physics.large_scale_gain(pl)
        self.dist = dist
        ids = np.arange(self.N, dtype=np.int32)
        b.add(
            "position",
            now,
            k,
            k * self.T,
            ids,
            x_m=pos[:, 0],
            y_m=pos[:, 1],
            distance_m=dist,
            large_scale_gain=self.H,
        )

        self.queue_frame_j = self.queue_j.copy()
        plan = self.scheme.plan_frame(
            FrameInputs(frame=k, large_scale_gain=self.H, queue_j=self.queue_frame_j)
        )
        self.learner.begin_frame(k, np.clip(np.asarray(plan.gamma, dtype=np.float64), 0.0, 1.0))
        # Account with what the learner actually froze (rounded to whole parameters; frame 0).
        gamma = np.asarray(self.learner.frozen_fraction(), dtype=np.float64)
        self.gamma = gamma
        b.add(
            "freeze",
            now,
            k,
            k * self.T,
            ids,
            gamma=gamma,
            queue_j=self.queue_frame_j,
            **plan.columns,
        )

        dev = self.system.devices
        self.payload_bits = physics.payload_bits(
            self.system.num_params, gamma, self.system.bits_per_param
        )
        self.compute_plan_s = physics.compute_time_s(
            gamma, dev.cycles_per_sample, dev.batch_size, dev.cpu_hz
        )
        self.compute_energy_plan_j = physics.compute_energy_j(
            gamma, dev.cycles_per_sample, dev.batch_size, dev.cpu_hz, dev.capacitance
        )

    def _frame_end(self, k: int) -> None:
        self.learner.end_frame(k)
        self.buffer.add("frame_end", self.env.now, k, (k + 1) * self.T - 1)
        self._flush()

    # ------------------------------------------------------------------ slot

    def _slot_start(self, k: int, t: int) -> None:
        now = self.env.now
        sysc = self.system
        dev = sysc.devices
        # Fading g ~ Exp(1), keyed by (device, slot): no generator state, the same draw for a
        # device and slot whatever came before (sim.rng.KeyedStream).
        g = (
            np.ones(self.N)
            if self._fading is None
            else self._fading.standard_exponential(self._ids, t)
        )
        h = physics.rayleigh_channel_gain(self.H, g)
        p_min = physics.min_tx_power_w(
            self.payload_bits, h, self.bandwidth_hz, self.noise_w, self.tau0, self.compute_plan_s
        )
        plan = self.scheme.plan_slot(
            SlotInputs(
                slot=t,
                frame=k,
                channel_gain=h,
                large_scale_gain=self.H,
                gamma=self.gamma,
                queue_j=self.queue_frame_j,
                compute_s=self.compute_plan_s,
                payload_bits=self.payload_bits,
                min_tx_power_w=p_min,
            )
        )
        # A device with nothing to send (gamma = 1) neither computes nor uploads.
        part = np.asarray(plan.participate, dtype=bool) & (self.payload_bits > 0)
        p = np.where(
            part, np.minimum(np.asarray(plan.tx_power_w, dtype=np.float64), dev.peak_power_w), 0.0
        )
        rate = physics.rate_bps(p, h, self.bandwidth_hz, self.noise_w)
        upload_full_s = np.where(part, physics.upload_time_s(self.payload_bits, rate), 0.0)
        compute_s = np.where(part, self.compute_plan_s, 0.0)
        arrival_s = compute_s + upload_full_s
        in_time = arrival_s <= self.tau0 * (1.0 + DEADLINE_REL_TOL)
        if self.scheme.wait_for_all:
            success = part & np.isfinite(arrival_s)
        else:
            success = part & in_time
        cut_s = np.maximum(self.tau0 - compute_s, 0.0)
        upload_s = np.where(
            success, upload_full_s, np.where(part, np.minimum(upload_full_s, cut_s), 0.0)
        )
        if self.scenario.trace.late_upload_energy == "full":
            charged_s = np.where(part & np.isfinite(upload_full_s), upload_full_s, upload_s)
        else:
            charged_s = upload_s

        self.h, self.p, self.part, self.success = h, p, part, success
        self.upload_s, self.energy_compute_j = (
            upload_s,
            np.where(part, self.compute_energy_plan_j, 0.0),
        )
        self.energy_upload_j = np.where(part, physics.upload_energy_j(p, charged_s), 0.0)
        self._compute_s = compute_s
        self._upload_s = upload_s
        self._compute_list = compute_s.tolist()
        self._upload_list = upload_s.tolist()

        ids = np.arange(self.N, dtype=np.int32)
        self.buffer.add("slot_start", now, k, t)
        self.buffer.add(
            "decision",
            now,
            k,
            t,
            ids,
            distance_m=self.dist,
            large_scale_gain=self.H,
            channel_gain=h,
            gamma=self.gamma,
            payload_bits=self.payload_bits,
            min_tx_power_w=p_min,
            tx_power_w=p,
            participating=part,
            compute_s=compute_s,
            upload_s=upload_full_s,
            **plan.columns,
        )

        who = np.flatnonzero(part)
        self.learner.compute(t, who)
        self._remaining = len(who)
        self._all_done = self.env.event()
        self._proc_log.clear()
        for d in who:
            self._wake[d].succeed()

    def _slot_end(self, k: int, t: int, t0: float) -> None:
        now = self.env.now
        b = self.buffer
        self._log_processes(k, t)
        if not self.scheme.wait_for_all:
            b.add("deadline", t0 + self.tau0, k, t)
        ok = np.flatnonzero(self.success)
        self.learner.apply(t, ok)
        n_part = int(self.part.sum())
        stable = float(getattr(self.learner, "stable_fraction", float("nan")))
        b.add(
            "aggregate",
            now,
            k,
            t,
            n_participants=n_part,
            n_success=len(ok),
            slot_duration_s=now - t0,
            stable_fraction=None if np.isnan(stable) else stable,
        )

        energy = self.energy_compute_j + self.energy_upload_j
        dev = self.system.devices
        self.queue_j = np.maximum(self.queue_j + energy - dev.energy_budget_j, 0.0)
        cols: dict[str, Any] = {}
        weights = self.scheme.cost_weights()
        if weights is not None:
            v, lam = weights
            x = lam * self.success * dev.batch_size * (self.gamma - 1.0)
            cols = {"conv_error": x, "cost": v * x + self.queue_frame_j * energy}
        b.add(
            "energy",
            now,
            k,
            t,
            np.arange(self.N, dtype=np.int32),
            participating=self.part,
            success=self.success,
            tx_power_w=self.p,
            upload_s=self.upload_s,
            energy_compute_j=self.energy_compute_j,
            energy_upload_j=self.energy_upload_j,
            energy_j=energy,
            queue_j=self.queue_j,
            **cols,
        )

        st = self.stats
        st.slots += 1
        st.device_slots += self.N
        st.participations += n_part
        st.successes += len(ok)
        st.energy_j += float(energy.sum())
        st.energy_per_device_j += energy
        st.simulated_time_s = now
        last = t == self.K * self.T - 1
        if self.evaluate_enabled and (
            (t + 1) % self.scenario.learning.eval_every_slots == 0 or last
        ):
            self._eval(k, t)
        if self.progress is not None:
            self.progress(t, st)

    def _log_processes(self, k: int, t: int) -> None:
        if not self._proc_log:
            return
        arr = np.array(self._proc_log, dtype=np.float64)
        # every compute_end is followed, at the same instant, by the device's upload_start
        arr = np.repeat(arr, np.where(arr[:, 2] == _C_END, 2, 1), axis=0)
        second = np.flatnonzero(arr[:, 2] == _C_END)[1::2]
        arr[second, 2] = _U_START
        times, devs, codes = arr[:, 0], arr[:, 1].astype(np.int64), arr[:, 2].astype(np.int8)
        is_ce, is_us, is_ue = codes == _C_END, codes == _U_START, codes == _U_END

        def masked(values: np.ndarray, keep: np.ndarray) -> np.ma.MaskedArray:
            return np.ma.MaskedArray(values[devs], mask=~keep)

        self.buffer.add(
            codes,
            times,
            k,
            t,
            devs.astype(np.int32),
            compute_s=masked(self._compute_s, is_ce),
            tx_power_w=masked(self.p, is_us | is_ue),
            upload_s=masked(self.upload_s, is_ue),
            success=masked(self.success, is_ue),
            energy_upload_j=masked(self.energy_upload_j, is_ue),
        )

    # ------------------------------------------------------------------ logging helpers

    def _log_device_config(self) -> None:
        dev = self.system.devices
        num_samples = getattr(self.learner, "num_samples", None)
        self.buffer.add(
            "device_config",
            0.0,
            0,
            -1,
            np.arange(self.N, dtype=np.int32),
            cpu_hz=dev.cpu_hz,
            cycles_per_sample=dev.cycles_per_sample,
            capacitance=dev.capacitance,
            batch_size=dev.batch_size,
            peak_power_w=dev.peak_power_w,
            energy_budget_j=dev.energy_budget_j,
            num_samples=None if num_samples is None else np.asarray(num_samples, dtype=np.int64),
        )

    def _eval(self, frame: int, slot: int) -> None:
        loss, acc = self.learner.evaluate()
        self.buffer.add("eval", self.env.now, frame, slot, loss=float(loss), accuracy=float(acc))
        st = self.stats
        if np.isnan(st.first_accuracy):
            st.first_accuracy = float(acc)
        st.last_loss, st.last_accuracy = float(loss), float(acc)

    def _flush(self) -> None:
        self.stats.rows += self.buffer.num_rows
        if self.writer is not None:
            self.writer.write(self.buffer)
        else:
            self._tables.append(self.buffer.to_table())

    # ------------------------------------------------------------------ run

    def run(self) -> RunStats:
        """Run all frames; returns the totals. The trace goes to the writer (or :meth:`table`)."""
        self._tables: list = []
        start = time.perf_counter()
        self.env.process(self._server())
        self.env.run()
        self.stats.wall_time_s = time.perf_counter() - start
        return self.stats

    def table(self):
        """The whole trace as one Arrow table (runs without a writer only)."""
        import pyarrow as pa

        from sim.trace import SCHEMA

        return pa.concat_tables(self._tables) if self._tables else SCHEMA.empty_table()
