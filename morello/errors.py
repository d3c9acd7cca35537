"""User-facing errors: one hierarchy, one GCC-style format.

Every error a user can cause is a ``MorelloError``; the CLI prints it and exits with its code.
Anything else that escapes is a bug of ours and keeps its traceback.
"""

from __future__ import annotations

import enum
from pathlib import Path

import attrs


class ExitCode(enum.IntEnum):
    """Process exit codes of the CLI."""

    OK = 0
    CHECK_FAILED = 1
    USAGE_ERROR = 2
    #: The output was piped into a program that stopped reading (``| head``): what a shell
    #: reports for a command killed by SIGPIPE (128 + 13).
    #: Interrupted (Ctrl-C): what a shell reports for a command killed by SIGINT (128 + 2).
    INTERRUPTED = 130
    BROKEN_PIPE = 141


@attrs.frozen
class SourceLocation:
    """A place in a source file: 1-based line and column."""

    path: str
    line: int
    column: int
    end_line: int | None = None
    end_column: int | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


class MorelloError(Exception):
    """Base of every error caused by user input; printed without a traceback."""

    exit_code: ExitCode = ExitCode.USAGE_ERROR

    def __init__(self, message: str, loc: SourceLocation | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc

    def format(self) -> str:
        """Render the error as GCC does: ``path:line:col: error: msg`` plus the source line."""
        head = self.headline()
        if self.loc is None:
            return head
        source_line = _read_line(self.loc.path, self.loc.line)
        if source_line is None or not source_line.strip():
            return head
        # Columns count characters; expand tabs the same way in the line and before the caret.
        indent = len(source_line[: max(self.loc.column - 1, 0)].expandtabs(4))
        return f"{head}\n    {source_line.expandtabs(4)}\n    {' ' * indent}^"

    def headline(self) -> str:
        """The first line of ``format()``: ``path:line:col: error: msg`` (or no place)."""
        where = "morello" if self.loc is None else str(self.loc)
        return f"{where}: error: {self.message}"

    def __str__(self) -> str:
        return self.headline()


def _read_line(path: str, line: int) -> str | None:
    try:
        # Split as the parsers count lines: on "\n" only.
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError):
        return None
    if 1 <= line <= len(lines):
        return lines[line - 1].rstrip("\r")
    return None


class SourceError(MorelloError):
    """A syntax error in a source file."""


class SpecSyntaxError(SourceError):
    """A spec file does not follow the spec grammar."""


class RuleSyntaxError(SourceError):
    """A rule file does not follow the rule grammar."""


class SpecError(MorelloError):
    """A spec file is well-formed but wrong: unknown op, shape or dtype mismatch."""


class RuleError(MorelloError):
    """A rule file is well-formed but wrong: unknown placeholder, coefficient or level."""


class TargetError(MorelloError):
    """Unknown target, or an invalid or duplicate target plugin."""


class NoImplementationError(MorelloError):
    """No implementation of a Spec fits within its memory limits."""


class MemoTableError(MorelloError):
    """The memo table is damaged, incompatible or locked."""


class CompileError(MorelloError):
    """The C compiler rejected generated code; names the log file."""


class CheckFailed(MorelloError):
    """Generated code ran but its output differs from the reference."""

    exit_code = ExitCode.CHECK_FAILED


def read_failure(exc: OSError | UnicodeDecodeError) -> str:
    """Why a file could not be read or written, lowercase: ``no such file or directory``."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start})"
    if exc.strerror:
        return exc.strerror.lower()
    return str(exc).lower()
