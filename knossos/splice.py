"""A program's source text with one def replaced, and every other character kept as written.

``optimize.py FILE --def NAME -o OUT`` (and ``--in-place``) writes the user's file back: the comments,
the other defs and edefs and their formatting stay exactly as they were, and only the text of the
def's form, from its ``(`` to its ``)``, becomes the optimised def.  The comments written inside that
form cannot follow a rewritten body (its parts may be gone, merged or moved), so they are kept above
the def, one per line, in their order; :class:`Spliced` says how many moved.
"""

from __future__ import annotations

from dataclasses import dataclass

from knossos.errors import KsUsageError, Pos
from knossos.reader import Reader, SList


@dataclass(frozen=True)
class Spliced:
    """The new text, and how many comments of the replaced def were moved above it."""

    text: str
    moved_comments: int


def replace_def(text: str, at: Pos, new_def: str, file: str | None = None) -> Spliced:
    """``text`` (a program's source) with the top-level form that begins at ``at`` (a def's ``pos``)
    replaced by ``new_def``."""
    reader = Reader(text, file)
    form = next((f for f in reader.read() if isinstance(f, SList) and f.pos == at), None)
    if form is None:
        raise KsUsageError(f"no top-level form at line {at.line}, column {at.col} of the source text", None, file)
    inside = [text[a:b].rstrip() for a, b in reader.comments if form.start <= a < form.end]
    before = text[: form.start]
    indent = before[before.rfind("\n") + 1 :]
    if not indent or indent.isspace():  # the def begins its line: the comments go on lines above it
        before += "".join(f"{c}\n{indent}" for c in inside)
    elif inside:  # something before it on its line: the comments start a line of their own
        before = before.rstrip(" \t") + "".join(f"\n{c}" for c in inside) + "\n"
    return Spliced(before + new_def + text[form.end :], len(inside))
