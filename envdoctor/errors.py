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


# What an error message may show: no value of a file not everyone may read.
_PRIVATE: list[str] = []  # files read that not everyone may read (inputfile.read_bounded)


def keep_private(source: str) -> None:
    """A file that not everyone may read was read: from now on no message quotes a value (it
    may come from that file: `spec validate /etc/shadow` must not print its first line, and
    an error line ends up in logs and CI jobs that other users read)."""
    if source not in _PRIVATE:
        _PRIVATE.append(source)


def values_hidden() -> str:
    """Why values are not quoted in messages ("" when they are): see ``keep_private``."""
    return f"not shown: {_PRIVATE[0]} is not readable by everyone" if _PRIVATE else ""


def forget_private() -> None:
    """A new command starts with no private file read (``cli.main.dispatch``)."""
    _PRIVATE.clear()
