"""One ns-3 process: wflsim's LTE program (``wflsim_lte.cc``) driven over its line protocol.

The program reads one command per line on its standard input and answers each with zero or more
lines ending in ``ok ...`` (or ``error <message>``) on its standard output; its diagnostics go to
its standard error, which this module keeps (the last lines) for the error messages. Commands are
sent in batches (one write) and their replies read back in order, each batch under a timeout: a
process that dies, answers nonsense or hangs raises :class:`~wflsim.sim.errors.Ns3Failed` naming
the command and the program's last words, and is killed.

The protocol (times are integer nanoseconds from the end of the warm-up, the time origin):

* before ``ready``: ``config key=value ...``, ``band <enb> <band>``, ``attach <ue> <enb>``,
  ``gains 0 <loss_db>*(N C)``, ``power 0 <ue> <dbm>``; ``ready`` builds the topology and runs
  the warm-up (attach, RRC connection);
* ``gains <t> ...``, ``power <t> <ue> <dbm>``, ``start <t> <ue> <bytes>`` (a new TCP connection
  or UDP flow), ``stop <t> <ue>`` (the device goes offline: one ``stopped`` line with the
  upload's statistics), ``run <t>`` (advance to ``t``, but stop right after the first upload
  whose last byte reaches the server: zero or one ``end`` line, then ``ok <now>``),
  ``inflight <t>`` (the bytes each upload in flight has delivered), ``runall <t>`` (advance to
  ``t`` without stopping at completions: every ``end`` line up to it; traffic scheduled in
  advance, a plain ns-3 run), ``quit``.
"""

from __future__ import annotations

import collections
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import Ns3Failed

#: How many of the program's last stderr lines an error message quotes (the last one).
_STDERR_LINES = 20


@dataclass(frozen=True)
class UploadReport:
    """What ns-3 saw of one upload (an ``end`` or ``stopped`` line).

    Attributes:
        device: the UE.
        time_ns: when its last byte reached the server (``end``) or when it stopped, ns from
            the origin.
        bytes: application bytes delivered.
        tbs: uplink transport blocks of the UE received by its eNB during the upload (first
            transmissions and HARQ retransmissions).
        harq_retx: of those, HARQ retransmissions.
        tb_errors: of those, received in error.
        mcs_mean: their mean MCS (NaN: none).
        rb_mean: the mean number of resource blocks per uplink grant (NaN: none).
        tb_bytes: the bytes of the first transmissions.
        loss_db: the loss ns-3 applied to the UE's link to its serving eNB at the upload's start.
        tx_dbm: the UE's transmit power at the upload's start, dBm.
    """

    device: int
    time_ns: int
    bytes: int
    tbs: int
    harq_retx: int
    tb_errors: int
    mcs_mean: float
    rb_mean: float
    tb_bytes: int
    loss_db: float
    tx_dbm: float

    @classmethod
    def parse(cls, fields: Sequence[str]) -> UploadReport:
        """From the words after ``end`` / ``stopped``."""
        d, t, b, tbs, retx, err, mcs, rb, tbb, loss, tx = fields
        return cls(
            int(d),
            int(t),
            int(b),
            int(tbs),
            int(retx),
            int(err),
            float(mcs),
            float(rb),
            int(tbb),
            float(loss),
            float(tx),
        )


class Ns3Process:
    """A running ns-3 program.

    Args:
        program: the built program (:func:`wflsim.sim.radio.ns3.build.ensure_program`).
        timeout_s: the longest one batch of commands may take (wall clock), s.
        label: what the errors call the process (e.g. ``"ns-3 (frame 3)"``).
    """

    def __init__(self, program: Path, timeout_s: float, label: str = "ns-3") -> None:
        self.timeout_s = float(timeout_s)
        self.label = label
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        try:
            self._proc = subprocess.Popen(
                [str(program)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
            )
        except OSError as err:
            raise Ns3Failed(f"{label}: cannot start {program}: {err.strerror}") from None
        assert self._proc.stdin and self._proc.stdout and self._proc.stderr
        self._stdin = self._proc.stdin
        self._stdout_fd = self._proc.stdout.fileno()
        os.set_blocking(self._stdout_fd, False)
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout_fd, selectors.EVENT_READ)
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()
        #: batches sent (a benchmark's count of exchanges)
        self.exchanges = 0

    def _read_stderr(self) -> None:
        stream = self._proc.stderr
        assert stream is not None
        for raw in iter(stream.readline, b""):
            self._stderr.append(raw.decode("utf-8", "replace").rstrip())

    def request(self, commands: Sequence[str]) -> list[list[str]]:
        """Send ``commands`` in one write and return each one's reply lines (the last one
        ``ok ...``).

        Raises:
            Ns3Failed: the program answered ``error``, died, or did not answer within
                :attr:`timeout_s`; the process is killed.
        """
        if not commands:
            return []
        self.exchanges += 1
        data = ("\n".join(commands) + "\n").encode()
        try:
            self._stdin.write(data)
            self._stdin.flush()
        except (BrokenPipeError, OSError):
            self._fail(f"the process died before {commands[0]!r}")
        deadline = time.monotonic() + self.timeout_s
        replies: list[list[str]] = []
        current: list[str] = []
        while len(replies) < len(commands):
            line = self._readline(deadline, commands[len(replies)])
            current.append(line)
            if line == "ok" or line.startswith("ok "):
                replies.append(current)
                current = []
            elif line.startswith("error"):
                self._fail(f"{commands[len(replies)].split(' ', 1)[0]!r} failed: {line[6:]}")
        return replies

    def _readline(self, deadline: float, command: str) -> str:
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(left):
                self._fail(
                    f"no answer to {command.split(' ', 1)[0]!r} within {self.timeout_s:g} s "
                    "(hung; [uplink.ns3] exchange_timeout_s sets the limit)"
                )
            try:
                chunk = os.read(self._stdout_fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                self._proc.wait()
                self._fail(
                    f"the process died (exit {self._proc.returncode}) during "
                    f"{command.split(' ', 1)[0]!r}"
                )
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def _fail(self, what: str) -> None:
        self.kill()
        self._drain.join(timeout=1.0)
        last = next((ln for ln in reversed(self._stderr) if ln.strip()), "")
        said = f"; it said: {last}" if last else ""
        raise Ns3Failed(f"{self.label}: {what}{said}")

    def close(self) -> None:
        """``quit``, then wait for the process (killed if it does not end within a second)."""
        if self._proc.poll() is None:
            try:
                self._stdin.write(b"quit\n")
                self._stdin.flush()
                self._stdin.close()
                self._proc.wait(timeout=5.0)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self._selector.close()

    def kill(self) -> None:
        """End the process now."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    @property
    def pid(self) -> int:
        """The process id (tests kill it)."""
        return int(self._proc.pid)
