"""Errors a user can cause, and the diagnostics that explain them.

Exit codes (documented in the README):
  0  success / clean / certified
  1  warnings with --strict, or a result that is not certified
  2  usage or configuration errors (bad site file, missing tool)
  70 an internal error (a bug in podctl; -v shows the traceback)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

EXIT_OK = 0
EXIT_WARNINGS = 1
EXIT_ERRORS = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in podctl, not a user error


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Location:
    file: str
    line: int  # 1-based
    column: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Diagnostic:
    """One problem in a site file: what, where (YAML path and file position), how to fix."""

    severity: Severity
    path: str  # YAML path such as "nodes[1].profile"
    message: str
    location: Location | None = None
    hint: str | None = None
    code: str = "invalid"

    def render(self) -> str:
        where = f"{self.location}: " if self.location else ""
        text = f"{where}{self.severity.value}: {self.path or '<root>'}: {self.message}"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text

    def as_dict(self) -> dict[str, object]:
        loc = self.location
        return {
            "severity": self.severity.value,
            "code": self.code,
            "path": self.path,
            "message": self.message,
            "hint": self.hint,
            "file": loc.file if loc else None,
            "line": loc.line if loc else None,
            "column": loc.column if loc else None,
        }


class PodctlError(Exception):
    """An error the user can fix; the CLI prints it without a traceback."""

    exit_code = EXIT_ERRORS


class SiteError(PodctlError):
    """A site file that cannot be turned into a model; carries every diagnostic found."""

    def __init__(self, source: str, diagnostics: list[Diagnostic]) -> None:
        self.source = source
        self.diagnostics = diagnostics
        errors = [d for d in diagnostics if d.severity is Severity.ERROR]
        body = "\n".join(d.render() for d in diagnostics)
        super().__init__(f"{source}: {len(errors)} error(s)\n{body}")
