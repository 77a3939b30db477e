"""Errors a user can fix. The CLI prints them as one line and exits with code 2.

Also the record of a finding on a finished run (:class:`Diagnostic`, computed from its trace by
:mod:`wflsim.analysis.diagnostics`) and the error ``strict`` makes of them
(:class:`DiagnosticsError`; the CLI exits with code 3): here, free of pandas, so that the API can
name them without loading it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


class ScenarioError(ValueError):
    """A scenario field is malformed or impossible.

    Attributes:
        field: dotted path of the offending field (e.g. ``"network.bandwidth_hz"``).
        problem: what is wrong.
        fix: what the user should do about it (optional).
    """

    def __init__(self, field: str, problem: str, fix: str | None = None) -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """The message on one line: ``field: problem (fix: ...)``."""
        text = f"{self.field}: {self.problem}"
        if self.fix:
            text += f" (fix: {self.fix})"
        return " ".join(text.split())


class Ns3Unavailable(ScenarioError):
    """``[uplink] mode = "ns3_lte"`` cannot run here: ns-3 or a C++ compiler is missing, or
    building wflsim's ns-3 program failed (the message names the compiler log). Raised before
    anything is written; the CLI prints one line and exits with code 2."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__("uplink.mode", problem, fix)


class Ns3Failed(RuntimeError):
    """The ns-3 process of ``[uplink] mode = "ns3_lte"`` died, answered an error or did not
    answer in time (``[uplink.ns3] exchange_timeout_s``) during a run. The run stops (status
    ``failed``, exit code 1); its completed frames stay in the trace and ``--resume`` continues
    from the last one once the cause is fixed."""


class PlausibilityWarning(UserWarning):
    """A scenario value passes validation but is implausible for its unit (e.g. a deadline of
    100 s, likely milliseconds): :mod:`wflsim.sim.config.plausibility` finds it, the application
    warns.

    Attributes:
        field: dotted path of the value (e.g. ``"run.deadline_s"``, ``"devices.cpu_hz[3]"``).
        problem: what is implausible.
        fix: the likely unit slip, or the plausible range.
    """

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}: {problem} ({fix})")


class RunDiverged(RuntimeError):
    """Training diverged: the global model's loss or weights are no longer finite. The run stops
    (status ``failed``, exit code 1); the frames before stay in the trace.

    Built from one message (SimPy re-creates exceptions from their ``args``): use :meth:`at`.
    """

    @classmethod
    def at(cls, slot: int, what: str) -> RunDiverged:
        """The error for slot ``slot``: ``what`` is not finite."""
        return cls(
            f"training diverged in slot {slot}: {what} (fix: lower learning.lr, or use "
            'learning.lr_schedule = "half_life")'
        )


@dataclass(frozen=True)
class Diagnostic:
    """One finding on a finished run.

    Attributes:
        code: a stable name (``all_uploads_lost``; :data:`wflsim.analysis.diagnostics.CODES`).
        problem: what the trace shows, with its numbers.
        field: the scenario field to change (dotted).
        fix: how to change it.
    """

    code: str
    problem: str
    field: str
    fix: str

    def one_line(self) -> str:
        """``problem (field: fix)``."""
        return f"{self.problem} ({self.field}: {self.fix})"

    def as_dict(self) -> dict[str, str]:
        """The fields as a plain dict (JSON, a report's table)."""
        return asdict(self)


class DiagnosticsError(Exception):
    """A run with diagnostics under ``strict`` (:func:`wflsim.run`); the run itself completed.

    Attributes:
        diagnostics: the findings.
        result: the run's :class:`~wflsim.api.RunResult` (its folder is complete).
    """

    def __init__(self, diagnostics: list[Diagnostic], result: Any = None) -> None:
        self.diagnostics = diagnostics
        self.result = result
        first = diagnostics[0].one_line() if diagnostics else ""
        more = f" (and {len(diagnostics) - 1} more)" if len(diagnostics) > 1 else ""
        super().__init__(f"the run completed with diagnostics: {first}{more}")


class SlotTooLong(RuntimeError):
    """A slot that waits for its last upload (a scheme that promises no outage) lasted longer
    than :data:`wflsim.sim.config.limits.MAX_SLOT_WAIT_S`: a fade so deep that the upload would
    take longer than the run can follow in simulated time. The run stops (status ``failed``,
    exit code 1); the frames before stay in the trace.

    Built from one message (SimPy re-creates exceptions from their ``args``): use :meth:`at`.
    """

    @classmethod
    def at(cls, slot: int, waited_s: float, limit_s: float, what: str) -> SlotTooLong:
        """The error for slot ``slot``, which waited ``waited_s`` seconds (more than
        ``limit_s``) for ``what`` (the slowest upload)."""
        return cls(
            f"slot {slot} waited {waited_s:.3g} s for its last upload ({what}); a slot may wait "
            f"at most {limit_s:g} s (fix: raise devices.peak_power_w, lower network.noise_dbm "
            "or network.cell_radius_m, or use a scheme that closes the slot at the deadline, "
            'e.g. scheme.name = "only_pc"; docs/scenario.md, "Slots that wait")'
        )
