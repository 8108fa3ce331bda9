"""CommandResult: what one bounded subprocess did.

Its own module, apart from the Host protocol, because the start-up probe starts no process and
so never builds one (each frozen dataclass costs about 0.5 ms to create at import).
"""

from __future__ import annotations

from envdoctor.model.record import record


@record
class CommandResult:
    """The outcome of one bounded subprocess.

    ``status`` is "ok" (it ran; look at ``returncode``), "not-found" (no such program),
    "timeout" (killed at the deadline), "overflow" (killed for printing more than the cap;
    ``error`` says how much; the output up to the cap is kept) or "error" (could not start;
    ``error`` says why).
    A negative ``returncode`` is the signal that ended the process.
    """

    argv: tuple[str, ...]
    status: str
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.returncode == 0

    def describe(self) -> str:
        """One line for evidence: what happened to this command."""
        cmd = " ".join(self.argv[:3]) + (" …" if len(self.argv) > 3 else "")
        if self.status == "ok":
            tail = self.stderr.strip().splitlines()[-1:] or [""]
            return f"`{cmd}` exited {self.returncode}" + (f": {tail[0]}" if tail[0] else "")
        if self.status == "timeout":
            return f"`{cmd}` did not finish within {self.seconds:.1f} s and was killed"
        if self.status == "overflow":
            return f"`{cmd}` {self.error} and was stopped"
        if self.status == "not-found":
            return f"`{self.argv[0]}` not found"
        return f"`{cmd}` could not start: {self.error}"
