"""The project's one error family.

Every problem a user can cause (bad text, ill-typed programs, failing evaluation, bad command-line
input) is raised as a :class:`KsError`, which knows where it happened and renders as the single line
``FILE:LINE:COL: error: MESSAGE``.  Command-line entry points catch exactly this type; anything else
escaping is a bug in this project.
"""

from __future__ import annotations

from dataclasses import dataclass


def one_line(text: str) -> str:
    """``text`` with its unprintable characters escaped (``\\n``, ``\\x1e``...): user text quoted in an
    error (a name, a path, an option's value) must not break the error's one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


@dataclass(frozen=True)
class Pos:
    """A 1-based line and column in a source text."""

    line: int
    col: int


class KsError(Exception):
    """Base class of every error a user can provoke."""

    def __init__(self, message: str, pos: Pos | None = None, file: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos
        self.file = file

    def located(self, pos: Pos | None = None, file: str | None = None) -> KsError:
        """Fill in a position and file name where they are still unknown; returns self."""
        if self.pos is None and pos is not None:
            self.pos = pos
        if self.file is None and file is not None:
            self.file = file
        return self

    def render(self, program: str = "knossos") -> str:
        """The one-line form printed by the command line (``program`` names it when no file does)."""
        where = self.file or program
        if self.pos is not None:
            where = f"{where}:{self.pos.line}:{self.pos.col}"
        return one_line(f"{where}: error: {self.message}")

    def __str__(self) -> str:
        return self.render() if (self.pos or self.file) else self.message


class KsSyntaxError(KsError):
    """Text that is not a well-formed Knossos program."""


class KsTypeError(KsError):
    """A well-formed program whose types do not fit together."""


class KsEvalError(KsError):
    """A run-time failure of the reference interpreter (index out of range, failed assert...)."""

    #: The expression being evaluated when it failed (set by the interpreter), to locate the error.
    node: object | None = None


class KsUsageError(KsError):
    """Bad command-line input: a missing file, an unknown def, malformed arguments."""
