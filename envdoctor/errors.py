"""Errors that end a command with a one-line message and exit code 2 (never a traceback)."""

from __future__ import annotations


class EnvdoctorError(Exception):
    """An expected failure the user can act on: bad input file, bad option, unreadable table.

    ``where`` names the file (and line) at fault when there is one; ``hint`` says what to do.
    """

    def __init__(self, message: str, *, where: str = "", hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def one_line(self) -> str:
        prefix = f"{self.where}: " if self.where else ""
        suffix = f" ({self.hint})" if self.hint else ""
        return f"{prefix}{self.message}{suffix}"
