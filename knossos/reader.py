"""Reading s-expression text into forms that remember where they came from.

Built on :class:`sexpdata.Parser`: atoms are scanned by sexpdata (including its backslash escapes in
symbols), but lists are assembled here with an explicit stack, because sexpdata's own list parser
recurses once per nesting level and keeps no positions.  This reader also understands ``;`` line
comments and nested ``#| ... |#`` block comments, and reports every problem as a
:class:`~knossos.errors.KsSyntaxError` with a line and column.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass

import sexpdata

from knossos.arith import INT_MAX, INT_MIN
from knossos.errors import KsSyntaxError, Pos

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?=[eE]))(?:[eE][+-]?[0-9]+)?")
_NUMBERISH = re.compile(r"[+-]?\.?[0-9]")
_WHITESPACE = re.compile(r"\s+")
_BLOCK_MARK = re.compile(r"#\||\|#")


class SList(list["Form"]):
    """A parenthesised form: a list of forms with the position of its ``(``, and where it is in the
    text (``start``, the offset of its ``(``; ``end``, just after its ``)``) for editing the text."""

    __slots__ = ("end", "pos", "start")

    def __init__(self, pos: Pos, start: int = 0) -> None:
        super().__init__()
        self.pos = pos
        self.start = start
        self.end = start


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class Literal:
    value: bool | int | float
    text: str
    pos: Pos


Form = SList | Symbol | Literal


class _AtomScanner(sexpdata.Parser):  # type: ignore[misc]
    """sexpdata's atom scanner, returning the raw (unescaped) token instead of converting it."""

    def __init__(self, text: str) -> None:
        super().__init__(text, nil=None, true=None, false=None)

    def atom(self, token: str) -> str:
        return token


class Reader:
    """Turns one source text into a list of top-level forms."""

    def __init__(self, text: str, file: str | None = None) -> None:
        self.text = text
        self.file = file
        self._line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
        self._scanner = _AtomScanner(text)
        #: Where each comment is, (start, end) offsets, in order: a ``;`` comment up to its newline, a
        #: ``#| |#`` block whole (filled by :meth:`read`).
        self.comments: list[tuple[int, int]] = []

    def pos(self, index: int) -> Pos:
        line = bisect.bisect_right(self._line_starts, index) - 1
        return Pos(line + 1, index - self._line_starts[line] + 1)

    def error(self, message: str, index: int) -> KsSyntaxError:
        return KsSyntaxError(message, self.pos(index), self.file)

    def read(self) -> list[Form]:
        text, n = self.text, len(self.text)
        top = SList(Pos(1, 1))
        stack: list[SList] = [top]
        i = 0
        while i < n:
            c = text[i]
            if c.isspace():
                m = _WHITESPACE.match(text, i)
                i = m.end() if m else i + 1
            elif c == "(":
                form = SList(self.pos(i), i)
                stack[-1].append(form)
                stack.append(form)
                i += 1
            elif c == ")":
                if len(stack) == 1:
                    raise self.error("unbalanced parentheses: ')' without a matching '('", i)
                i += 1
                stack.pop().end = i
            elif c == ";":
                end = text.find("\n", i)
                end = n if end < 0 else end
                self.comments.append((i, end))
                i = end
            elif c == "#" and text.startswith("#|", i):
                end = self._skip_block_comment(i)
                self.comments.append((i, end))
                i = end
            elif c == "|" and text.startswith("|#", i):
                raise self.error("'|#' without a matching '#|'", i)
            elif c in "\"'`,[]{}":
                raise self.error(f"unexpected character {c!r}", i)
            else:
                i = self._atom(i, stack[-1])
        if len(stack) > 1:
            opened = stack[-1].pos
            raise KsSyntaxError(
                f"unbalanced parentheses: '(' opened at line {opened.line}, column {opened.col} is never closed",
                opened,
                self.file,
            )
        return list(top)

    def _skip_block_comment(self, start: int) -> int:
        depth, i = 0, start
        while True:
            m = _BLOCK_MARK.search(self.text, i)
            if m is None:
                raise self.error("block comment '#|' is never closed", start)
            depth += 1 if m.group() == "#|" else -1
            i = m.end()
            if depth == 0:
                return i

    def _atom(self, i: int, into: SList) -> int:
        try:
            end, token = self._scanner.parse_atom(i)
        except IndexError:  # a trailing backslash escapes nothing
            raise self.error("a '\\' at the end of the text escapes nothing", i) from None
        pos = self.pos(i)
        into.append(self._classify(token, self.text[i:end], pos))
        return int(end)

    def _classify(self, token: str, raw: str, pos: Pos) -> Symbol | Literal:
        if raw == token:  # only unescaped tokens can be literals
            if _INT.fullmatch(token):
                digits = token.lstrip("+-").lstrip("0")
                value = int(token) if len(digits) <= 19 else None
                if value is None or not INT_MIN <= value <= INT_MAX:
                    raise KsSyntaxError(f"Integer literal '{_short(token)}' is out of the 64-bit range", pos, self.file)
                return Literal(value, raw, pos)
            if _FLOAT.fullmatch(token):
                fvalue = float(token)
                if not math.isfinite(fvalue):
                    raise KsSyntaxError(f"Float literal '{_short(token)}' is out of range", pos, self.file)
                return Literal(fvalue, raw, pos)
            if token == "true":
                return Literal(True, raw, pos)
            if token == "false":
                return Literal(False, raw, pos)
            if _NUMBERISH.match(token):
                raise KsSyntaxError(f"bad literal '{_short(token)}'", pos, self.file)
        if _has_bad_chars(token):
            raise KsSyntaxError(
                f"bad name {token!r}: names cannot contain control characters, tabs or newlines", pos, self.file
            )
        return Symbol(token, pos)


def _short(token: str) -> str:
    """A token for a one-line message: control characters escaped, long ones cut."""
    shown = token.encode("unicode_escape").decode("ascii") if _has_bad_chars(token) else token
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _has_bad_chars(token: str) -> bool:
    return any(ch != " " and (ord(ch) < 0x20 or ord(ch) == 0x7F or ch.isspace()) for ch in token)


def read_forms(text: str, file: str | None = None) -> list[Form]:
    """Read all top-level forms of ``text``."""
    return Reader(text, file).read()
