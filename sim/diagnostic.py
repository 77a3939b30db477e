"""A finding on a finished run (:class:`Diagnostic`) and the error ``strict`` makes of them.

The checks that make them read the trace (:mod:`wflsim.analysis.diagnostics`); these records
are here, free of pandas, so that the API can name them without loading it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


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
