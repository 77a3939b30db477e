"""The ns-3 LTE uplink (``[uplink] mode = "ns3_lte"``): a
:class:`~wflsim.sim.radio.shared.SharedUplink` whose uploads ns-3 plays packet by packet.

**Who decides what.** wflsim decides everything it decides in every mode: who takes part, at
what power, what is frozen, when each computation ends (so when each upload starts), when a
device goes offline, the channel. ns-3 decides when each upload's last byte reaches the server,
or that it did not by the deadline: its LTE stack (PHY with the MI error model, HARQ, the MAC
scheduler, RLC AM, PDCP, the EPC) and TCP (or UDP) over it.

**The same channel.** At every slot's start the uplink sends ns-3 the loss of every device's
link to every base station, ``-10 log10(h)`` of the slot's gains (:mod:`wflsim.sim.fmath`):
path loss, shadowing, the slot's fading, the cell; ns-3's ``MatrixPropagationLossModel`` applies
it on the uplink and the downlink, with no fading model of its own. Each upload's transmit power
is the scheme's (ns-3's closed-loop power control is off). The eNB's noise figure is chosen so
that ns-3's noise density ``kT F`` (``kT = -174 dBm/Hz``) equals wflsim's ``N0 / W``. ns-3 reports
per upload the loss it applied at the upload's start, which the trace records
(``ns3_loss_db``) beside wflsim's gain.

**Synchronisation: conservative, wflsim's clock leads.** ns-3 never runs ahead of wflsim: when
uploads are in flight and every event of the current instant has run, ns-3 advances to the time
of wflsim's next event (``env.peek()``) but stops right after the first upload whose last byte
reaches the server; that completion becomes a SimPy event at its time, and when it has run the
same step repeats. So every command wflsim sends (an upload starts at its device's compute end,
a device goes offline, the slot's gains) carries the time ns-3 is at, and no completion is ever
reported late. The commands of one instant go to ns-3 in one write with the step that follows.
One step per wflsim event while uploads are in flight: in a synchronous slot about one per
compute end and one per completion; under stale updates also one per slot boundary.

**A fresh ns-3 process per frame.** At each frame's first slot the uplink starts a new process
(seeded with the run's ns-3 seed and the frame's index as ns-3's run number, warmed up for
``warmup_s`` over a good link to each device's serving eNB: attach, RRC connection; the
frame's first gains apply from the origin on), the devices attached to the frame's serving
cells. Uploads in flight at a frame boundary (only under stale
updates) continue in the new process as new connections with the bytes still to deliver. A
resumed run starts the same process at the same boundary with the same uploads, so a kill and
``--resume`` give the identical trace.

Devices that go offline stop transmitting at that instant (``stop``: ns-3 sets their links'
loss to a dead value and brings their IP interface down). Under a scheme that closes the slot at
the deadline, every upload still in flight there is stopped and fails (a synchronous slot that
waits for its last upload is refused before the run starts).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import simpy
from numpy.typing import NDArray

from ... import fmath
from ...errors import Ns3Failed, SlotTooLong
from ..cells.component import Cells
from ..shared import SharedUplink
from ..spec import Ns3Options
from .process import Ns3Process, UploadReport

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: ns-3's thermal noise density, dBm/Hz (``LteSpectrumValueHelper``: -174).
KT_DBM_PER_HZ = -174.0
#: How long ns-3 runs on alone when wflsim has no event left before an upload must end, s.
_LONGEST_WAIT_S = 3600.0
#: The loss ns-3 gets for a gain of 0 (a link that does not exist), dB.
DEAD_LOSS_DB = 1000.0
#: LTE's channel bandwidths and their resource blocks.
LTE_BANDWIDTHS_HZ = {1.4e6: 6, 3e6: 15, 5e6: 25, 10e6: 50, 15e6: 75, 20e6: 100}

#: The trace's ns-3 columns of an upload, from its report.
TRACE_COLUMNS = (
    "ns3_bytes",
    "ns3_tbs",
    "ns3_harq_retx",
    "ns3_tb_errors",
    "ns3_mcs_mean",
    "ns3_rb_mean",
    "ns3_goodput_bps",
    "ns3_loss_db",
    "ns3_tx_dbm",
)


def resource_blocks(bandwidth_hz: float) -> int | None:
    """LTE's resource blocks for a channel bandwidth, Hz (None: not an LTE bandwidth)."""
    for w, rbs in LTE_BANDWIDTHS_HZ.items():
        if abs(bandwidth_hz - w) <= 1e-9 * w:
            return rbs
    return None


def noise_figure_db(noise_w: float, bandwidth_hz: float) -> float:
    """The eNB noise figure that makes ns-3's noise density ``kT F`` equal ``N0 / W``, dB."""
    psd_dbm_hz = float(10.0 * fmath.log10(noise_w / bandwidth_hz)) + 30.0
    return psd_dbm_hz - KT_DBM_PER_HZ


def loss_db(gain: F64) -> F64:
    """``-10 log10(h)``: the loss of a linear power gain, dB (:data:`DEAD_LOSS_DB` for 0)."""
    g = np.asarray(gain, dtype=np.float64)
    with np.errstate(divide="ignore"):
        out = -10.0 * fmath.log10(np.where(g > 0.0, g, 1.0))
    return np.where(g > 0.0, np.minimum(out, DEAD_LOSS_DB), DEAD_LOSS_DB)


def _num(value: float) -> str:
    """A float as the protocol carries it: the shortest exact decimal."""
    return repr(float(value))


@dataclass(frozen=True)
class Finished:
    """An upload's report from ns-3 with its absolute end (or stop) time, s."""

    report: UploadReport
    end_s: float


class Ns3LteUplink(SharedUplink):
    """The uploads of a run played by ns-3's LTE module (the module docstring).

    Args:
        program: the built ns-3 program (:func:`wflsim.sim.radio.ns3.build.ensure_program`).
        options: the ``[uplink.ns3]`` settings.
        num_devices: ``N``.
        bandwidth_hz: ``W`` (an LTE channel bandwidth), Hz.
        noise_w: ``N0`` over ``W``, W.
        upload_start, upload_end: the trace's event codes the log uses.
        cells: the run's cells (one eNB each; None: one eNB).
    """

    #: an upload's time has no closed-form bound (the event kernel's drops)
    bounded: ClassVar[bool] = False

    def _can_finish(self, received_w: float, upload_full_s: float) -> bool:
        """Every upload with a signal goes to ns-3, whatever a rate model says of it."""
        return received_w > 0.0

    def __init__(
        self,
        program: Path,
        options: Ns3Options,
        num_devices: int,
        bandwidth_hz: float,
        noise_w: float,
        upload_start: int,
        upload_end: int,
        cells: Cells | None = None,
    ) -> None:
        super().__init__(bandwidth_hz, noise_w, upload_start, upload_end)
        rbs = resource_blocks(bandwidth_hz)
        if rbs is None:
            raise ValueError(f"{bandwidth_hz} Hz is not an LTE channel bandwidth")
        self.program = program
        self.options = options
        self.num_devices = int(num_devices)
        self.cells = cells
        self._rbs = rbs
        self._nf_db = noise_figure_db(noise_w, bandwidth_hz)
        self._proc: Ns3Process | None = None
        self._frame = -1  # the frame the process plays
        self._origin_s = 0.0  # the process's time origin (its frame's first slot), s
        self._ns3_ns = 0  # how far the process has run, ns from its origin
        self._queue: list[str] = []  # commands of this instant, sent with the next exchange
        self._gain = np.zeros(0)  # the slot's gains: (N,), or (N, C) with cells
        self._dbm = np.zeros(self.num_devices)  # each device's power of its latest upload
        self._flight: dict[int, int] = {}  # device -> the bytes this process delivers
        self._delivered: dict[int, int] = {}  # device -> bytes earlier processes delivered
        self._carried: list[tuple[int, int, float]] = []  # (device, bytes left, dBm)
        self._pending: UploadReport | None = None  # a completion reported, its event to come
        self._gen = 0  # the pending completion's generation (a cut makes it stale)
        self._step_token = 0  # the scheduled step's (a new slot makes it stale)
        self._stepping = False
        self._slot_start_s = 0.0
        #: each device's latest upload as ns-3 saw it (per slot: the slot's)
        self.reports: dict[int, Finished] = {}
        #: exchanges with ns-3 so far (one write and its replies)
        self.exchanges = 0

    # ------------------------------------------------------------------ the process

    def new_slot(self, frame: int, slot: int, now_s: float, gain: F64) -> None:
        """Slot ``slot`` of frame ``frame`` starts at ``now_s`` with the channel's gains
        ``gain`` (``(N,)``; with cells the cells' gains to every site): at a frame's first slot
        a fresh process, else the slot's losses to ns-3 from now on."""
        src = gain if self.cells is None else self.cells.slot_gain
        self._gain = np.asarray(src, dtype=np.float64)
        if frame != self._frame or self._proc is None:
            self._restart(frame, now_s)
        else:
            self._queue.append(f"gains {self._now_ns(now_s)} {self._losses()}")

    def _losses(self) -> str:
        """The slot's losses, device-major, as the protocol carries them."""
        g = self._gain if self._gain.ndim == 2 else self._gain[:, None]
        return " ".join(_num(v) for v in loss_db(g).ravel().tolist())

    def _restart(self, frame: int, now_s: float) -> None:
        """End the process of the frame before (its uploads in flight carried over with the
        bytes they have left) and start frame ``frame``'s at ``now_s``, warmed up with the
        slot's gains."""
        if self._proc is not None:
            self._carried = self._carry(now_s)
            self.close_process()
        self._frame, self._origin_s, self._ns3_ns = frame, now_s, 0
        for d, left, _ in self._carried:
            if left <= 0:  # its last byte came in the boundary's nanosecond, not reported yet
                self._at(now_s, self._boundary_arrival(d))
        self._carried = [c for c in self._carried if c[1] > 0]
        opts = self.options
        c = 1 if self.cells is None else self.cells.num_cells
        serving = [0] * self.num_devices if self.cells is None else self.cells.serving.tolist()
        band = [0] * c if self.cells is None else self.cells.layout.band.tolist()
        config = (
            f"config ues={self.num_devices} enbs={c} rbs={self._rbs} seed={opts.seed} "
            f"run={frame} transport={opts.transport} noise_figure_db={_num(self._nf_db)} "
            f"warmup_ms={max(1, round(opts.warmup_s * 1e3))} "
            f"backhaul_delay_us={round(opts.backhaul_delay_s * 1e6)} "
            f"tcp_segment={opts.tcp_segment_bytes} scheduler={opts.scheduler}"
        )
        # the warm-up attaches every device over a good link to its serving eNB (wflsim, not
        # ns-3's radio-link failure, decides who is connected); the slot's losses from the origin
        commands = [config]
        commands += [f"band {e} {int(b)}" for e, b in enumerate(band) if b]
        commands += [f"attach {u} {int(e)}" for u, e in enumerate(serving)]
        commands.append("ready")
        self._proc = Ns3Process(self.program, opts.exchange_timeout_s, f"ns-3 (frame {frame})")
        self._proc.request(commands)
        self.exchanges += 1
        self._queue.append(f"gains 0 {self._losses()}")
        self._flight = {}
        for d, left, dbm in self._carried:
            self._queue += [f"power 0 {d} {_num(dbm)}", f"start 0 {d} {left}"]
            self._flight[d] = left
        self._carried = []
        self._want_step()

    def _carry(self, now_s: float | None = None) -> list[tuple[int, int, float]]:
        """The uploads in flight now, with the bytes they have left and their power; the bytes
        delivered so far move to their account."""
        carried = self._peek_carry(now_s)
        for d, _, before, _ in carried:
            if before:
                self._delivered[d] = before
        self._flight = {}
        return [(d, left, dbm) for d, left, _, dbm in carried]

    def _peek_carry(self, now_s: float | None = None) -> list[tuple[int, int, int, float]]:
        """``(device, bytes left, bytes delivered, dBm)`` of each upload in flight now."""
        if self._proc is None:
            return [(d, b, self._delivered.get(d, 0), p) for d, b, p in self._carried]
        if not self._flight:
            return []
        now = self._now_ns(now_s)
        lines = self._send([f"inflight {now}"])[0]
        done = {int(w[1]): int(w[2]) for w in (ln.split() for ln in lines[:-1])}
        return [
            (
                d,
                self._flight[d] - done.get(d, 0),
                self._delivered.get(d, 0) + done.get(d, 0),
                float(self._dbm[d]),
            )
            for d in sorted(self._flight)
        ]

    def _boundary_arrival(self, device: int) -> Callable[[simpy.Event], None]:
        """The event of an upload whose last byte ns-3 delivered at the frame boundary, with
        another completion of that nanosecond reported first: it has arrived (of its ns-3
        statistics only its bytes are known)."""

        def arrive(_event: simpy.Event) -> None:
            size = self._delivered.pop(device, 0)
            nan = math.nan
            report = UploadReport(device, 0, size, 0, 0, 0, nan, nan, 0, nan, nan)
            self.reports[device] = Finished(report, self._now())
            self._end(device, self.in_time(self._now()))

        return arrive

    def close_process(self) -> None:
        """End the process now (its uploads in flight are not carried)."""
        if self._proc is not None:
            self._proc.close()
            self._proc = None

    def release(self) -> None:
        """The run ends or pauses (at a frame boundary): the uploads in flight keep what they
        have left for the next frame's process; this one ends."""
        if self._proc is not None and self._flight:
            self._carried = self._carry()
        self.close_process()
        self._frame = -1

    # ------------------------------------------------------------------ time and exchanges

    def _now_ns(self, now_s: float | None = None) -> int:
        """Now (or ``now_s``) in the process's time, ns (never before where it has run to)."""
        t = self._now() if now_s is None else now_s
        return max(int(round((t - self._origin_s) * 1e9)), self._ns3_ns)

    def _abs_s(self, t_ns: int) -> float:
        """The process's time ``t_ns`` as wflsim's, s."""
        return self._origin_s + t_ns * 1e-9

    def _send(self, commands: list[str]) -> list[list[str]]:
        """The commands queued at this instant, then ``commands``, in one exchange; the
        replies of ``commands``. The queued stops' reports are kept."""
        if self._proc is None:
            raise Ns3Failed("ns-3: an upload started before the uplink heard its slot")
        queued, self._queue = self._queue, []
        replies = self._proc.request(queued + commands)
        self.exchanges += 1
        for lines in replies[: len(queued)]:
            for line in lines[:-1]:
                if line.startswith("stopped "):
                    report = UploadReport.parse(line.split()[1:])
                    self._record(report, self._abs_s(report.time_ns))
        return replies[len(queued) :]

    def _record(self, report: UploadReport, end_s: float) -> None:
        """Keep ``report`` as its device's latest, with the bytes earlier processes delivered."""
        before = self._delivered.pop(report.device, 0)
        if before:
            report = replace(report, bytes=report.bytes + before)
        self.reports[report.device] = Finished(report, end_s)

    # ------------------------------------------------------------------ stepping ns-3

    def _want_step(self) -> None:
        """Step ns-3 once every event of this instant has run (if uploads are in flight and no
        completion is pending)."""
        if self._stepping or self._pending is not None or not self._flight:
            return
        assert self.env is not None
        self._stepping = True
        token = self._step_token
        self.env.timeout(0.0).callbacks.append(lambda _e: self._step(token))

    def _at(self, time_s: float, callback: Callable[[simpy.Event], None]) -> None:
        """``callback`` at the absolute time ``time_s`` among SimPy's own events."""
        env = self.env
        assert env is not None
        timeout_at = getattr(env, "timeout_at", None)
        if timeout_at is not None:
            timeout_at(time_s, callback)
        else:
            env.timeout(max(time_s - float(env.now), 0.0)).callbacks.append(callback)

    def _step(self, token: int) -> None:
        """Advance ns-3 to wflsim's next event, or to the first completion before it."""
        if token != self._step_token:
            return  # a step of an earlier slot
        self._stepping = False
        if self._pending is not None or not self._flight:
            return
        env = self.env
        assert env is not None
        now = float(env.now)
        nxt = float(env.peek())
        if nxt <= now:  # more events at this instant: after them
            self._want_step()
            return
        stuck = not math.isfinite(nxt)
        if stuck:  # nothing else will happen in wflsim: ns-3 alone decides when
            nxt = now + _LONGEST_WAIT_S
        t_ns = max(int(round((nxt - self._origin_s) * 1e9)), self._ns3_ns)
        lines = self._send([f"run {t_ns}"])[0]
        self._ns3_ns = int(lines[-1].split()[1])
        ended = [ln.split() for ln in lines[:-1] if ln.startswith("end ")]
        if ended:
            report = UploadReport.parse(ended[0][1:])
            self._pending = report
            self._gen += 1
            gen = self._gen
            self._at(max(self._abs_s(report.time_ns), now), lambda _e: self._completed(gen))
            return
        if stuck:
            raise SlotTooLong(
                f"ns-3: the uploads in flight (device {min(self._flight)} first) have not "
                f"reached the server {_LONGEST_WAIT_S:g} s after wflsim's last event (their SNR "
                "is below what LTE's lowest MCS decodes)"
            )
        self._stepping = True
        self._at(nxt, lambda _e: self._step(token))

    def _completed(self, gen: int) -> None:
        """The pending completion's event: its upload has arrived."""
        if gen != self._gen or self._pending is None:
            return  # cut before it came
        report, self._pending = self._pending, None
        d = report.device
        self._flight.pop(d, None)
        now = self._now()
        self._record(report, now)
        self._end(d, self.in_time(now))
        self._want_step()

    # ------------------------------------------------------------------ the discipline

    def _open(self) -> None:
        """A slot (or the run) opens: a slot's reports start empty."""
        self._slot_start_s = self._now()
        self._pending = None
        self._gen += 1
        self._step_token += 1
        self._stepping = False
        if not self.continuous:
            self.reports = {}

    def _enter(self, device: int) -> None:
        """``device``'s upload starts now: its power and its bytes to ns-3."""
        self._begin(device)
        size = math.ceil(float(self._bits[device]) / 8.0)
        if size <= 0:  # nothing to send: it arrives at once
            self._end(device, True)
            return
        if self._proc is None:
            raise Ns3Failed("ns-3: an upload started before the uplink heard its slot")
        dbm = float(10.0 * fmath.log10(self._p[device])) + 30.0
        self._dbm[device] = dbm
        now = self._now_ns()
        self._queue += [f"power {now} {device} {_num(dbm)}", f"start {now} {device} {size}"]
        self._flight[device] = size
        self._want_step()

    def _cut(self) -> None:
        """At the deadline: a completion due now arrives, every other upload stops."""
        if self._pending is not None:
            report, self._pending = self._pending, None
            self._gen += 1
            self._flight.pop(report.device, None)
            end_s = self._abs_s(report.time_ns)
            self._record(report, end_s)
            self._end(report.device, self.in_time(end_s))
        stopped = sorted(self._flight)
        if stopped:
            now = self._now_ns()
            self._queue += [f"stop {now} {d}" for d in stopped]
            self._flight = {}
            self._send([])
        for d in stopped:
            self._end(d, False)

    def _leave(self, device: int) -> bool:
        """``device`` went offline now: its upload stops (False: none in flight, or its last
        byte arrives now)."""
        if self._pending is not None and self._pending.device == device:
            return False
        if device not in self._flight:
            return False
        del self._flight[device]
        self._queue.append(f"stop {self._now_ns()} {device}")
        self._send([])  # the stop's report now (the trace's dropped row)
        self._want_step()
        return True

    def _inside(self) -> I64:
        devices = set(self._flight) | {d for d, _, _ in self._carried}
        if self._pending is not None:
            devices.add(self._pending.device)
        return np.array(sorted(devices), dtype=np.int64)

    def _settle(self, until_s: float) -> None:
        """Nothing: ns-3's completions come at their own times (to the nanosecond)."""

    def _state(self) -> dict[str, Any]:
        """The uploads in flight with the bytes they have left (asked of ns-3 now), the bytes
        delivered so far, their power, and a completion reported but not come yet."""
        carried = self._peek_carry()
        pending = self._pending
        row = [] if pending is None else _report_row(pending, self._abs_s(pending.time_ns))
        return {
            "ns3_device": np.array([c[0] for c in carried], dtype=np.int64),
            "ns3_left_bytes": np.array([c[1] for c in carried], dtype=np.int64),
            "ns3_delivered_bytes": np.array([c[2] for c in carried], dtype=np.int64),
            "ns3_dbm": np.array([c[3] for c in carried], dtype=np.float64),
            "ns3_pending": np.array(row, dtype=np.float64),
        }

    def _idle_state(self) -> dict[str, Any]:
        return {
            "ns3_device": np.zeros(0, dtype=np.int64),
            "ns3_left_bytes": np.zeros(0, dtype=np.int64),
            "ns3_delivered_bytes": np.zeros(0, dtype=np.int64),
            "ns3_dbm": np.zeros(0),
            "ns3_pending": np.zeros(0),
        }

    def _load(self, state: dict[str, Any], schedule_at: Callable[[float], simpy.Event]) -> None:
        """The uploads in flight at the boundary go on in the next frame's process."""
        devices = np.asarray(state["ns3_device"], dtype=np.int64).tolist()
        left = np.asarray(state["ns3_left_bytes"], dtype=np.int64).tolist()
        before = np.asarray(state["ns3_delivered_bytes"], dtype=np.int64).tolist()
        dbm = np.asarray(state["ns3_dbm"], dtype=np.float64).tolist()
        if not len(devices) == len(left) == len(before) == len(dbm):
            raise ValueError("uplink state: the ns-3 uploads' columns differ in length")
        self.close_process()
        self._frame = -1
        self._carried = list(zip(devices, left, dbm, strict=True))
        self._delivered = {d: b for d, b in zip(devices, before, strict=True) if b}
        for d, p in zip(devices, dbm, strict=True):
            self._dbm[d] = p
        row = np.asarray(state["ns3_pending"], dtype=np.float64)
        if row.size:
            report, at_s = _report_from_row(row)
            self._pending = report
            self._gen += 1
            gen = self._gen
            schedule_at(at_s).callbacks.append(lambda _e: self._completed(gen))

    # ------------------------------------------------------------------ the trace

    def trace_columns(self) -> dict[str, np.ma.MaskedArray]:
        """The ns-3 columns of the devices' latest uploads, ``(N,)`` each, masked where a
        device has none (per slot: the slot's uploads)."""
        return report_columns(self.reports, self._began, self.num_devices)

    def upload_columns(self, device: int) -> dict[str, Any]:
        """The ns-3 columns of ``device``'s latest upload, as scalars ({} if it has none)."""
        if device not in self.reports:
            return {}
        cols = report_columns({device: self.reports[device]}, self._began, self.num_devices)
        return {k: v[device].item() for k, v in cols.items()}


def report_columns(
    reports: dict[int, Finished], began_s: F64, num_devices: int
) -> dict[str, np.ma.MaskedArray]:
    """The trace's ns-3 columns (:data:`TRACE_COLUMNS`), ``(N,)`` each, masked where a device
    has no report; ``began_s``: each device's upload start (absolute, s), for the goodput
    (application bits delivered over the time from its start to its end or stop)."""
    n = int(num_devices)
    have = np.zeros(n, dtype=bool)
    ints = {k: np.zeros(n, dtype=np.int64) for k in TRACE_COLUMNS[:4]}
    floats = {k: np.full(n, np.nan) for k in TRACE_COLUMNS[4:]}
    for d, fin in reports.items():
        r = fin.report
        have[d] = True
        ints["ns3_bytes"][d] = r.bytes
        ints["ns3_tbs"][d] = r.tbs
        ints["ns3_harq_retx"][d] = r.harq_retx
        ints["ns3_tb_errors"][d] = r.tb_errors
        floats["ns3_mcs_mean"][d] = r.mcs_mean
        floats["ns3_rb_mean"][d] = r.rb_mean
        span = fin.end_s - float(began_s[d])
        floats["ns3_goodput_bps"][d] = 8.0 * r.bytes / span if span > 0.0 else np.nan
        floats["ns3_loss_db"][d] = r.loss_db
        floats["ns3_tx_dbm"][d] = r.tx_dbm
    out = {k: np.ma.MaskedArray(v, mask=~have) for k, v in ints.items()}
    for k, v in floats.items():
        out[k] = np.ma.MaskedArray(v, mask=~have | np.isnan(v))
    return out


def _report_row(report: UploadReport, at_s: float) -> list[float]:
    """A report and its time as one float row (a checkpoint's pending completion)."""
    r = report
    return [
        float(r.device),
        float(r.time_ns),
        float(r.bytes),
        float(r.tbs),
        float(r.harq_retx),
        float(r.tb_errors),
        r.mcs_mean,
        r.rb_mean,
        float(r.tb_bytes),
        r.loss_db,
        r.tx_dbm,
        at_s,
    ]


def _report_from_row(row: F64) -> tuple[UploadReport, float]:
    """:func:`_report_row` read back."""
    v = row.tolist()
    report = UploadReport(
        int(v[0]),
        int(v[1]),
        int(v[2]),
        int(v[3]),
        int(v[4]),
        int(v[5]),
        v[6],
        v[7],
        int(v[8]),
        v[9],
        v[10],
    )
    return report, float(v[11])
