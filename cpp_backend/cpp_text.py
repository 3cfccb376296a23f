"""How names, types and literals are written in C++.

Identifiers.  No text of the input ever reaches the C++ source: a def ``f`` becomes ``ks_`` followed by
:func:`escape_name` of ``f`` (ASCII letters but ``Z``, digits and single underscores kept, every other
character ``c`` written ``Z<hex code of c>Z``: ``rev$conv1d`` is ``ks_revZ24Zconv1d``), which is
injective, never a keyword and never contains ``__``; parameters are ``p<k>_<escape>``, other
variables ``v<n>_<escape>``, size variables ``z<k>_<escape>``, temporaries ``t<n>``, and nothing
else the code declares has one of these forms.  Literals are written from their values: Floats as
exact hexadecimal literals (``0x1.8p+1``), Integers as ``std::int64_t(...LL)``, Bools as
``true``/``false``.
"""

from __future__ import annotations

import functools
from pathlib import Path

from knossos.arith import INT_MIN
from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type

RUNTIME_HEADER = Path(__file__).resolve().parent / "runtime.h"

_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYabcdefghijklmnopqrstuvwxyz0123456789")  # not 'Z': it escapes


def escape_name(name: str) -> str:
    """``name`` as ``[A-Za-z0-9_]`` text to follow a prefix ending in ``_``.

    ASCII letters other than ``Z`` and digits are kept, and so is ``_`` unless the text so far ends
    in ``_``; every other character ``c`` is written ``Z<lower-case hex of ord(c)>Z``.  Escapes are
    self-delimiting and everything else stands for itself, so the name can be read back: the map is
    injective.  The result never contains ``__`` (so, after the prefix, the identifier is not one
    reserved to the implementation) and is never a keyword.
    """
    out: list[str] = []
    previous = "_"
    for c in name:
        if c in _KEPT or (c == "_" and previous != "_"):
            out.append(c)
            previous = c
        else:
            out.append(f"Z{ord(c):x}Z")
            previous = "Z"
    return "".join(out)


def unescape_name(text: str) -> str:
    """The inverse of :func:`escape_name`."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "Z":
            end = text.index("Z", i + 1)
            out.append(chr(int(text[i + 1 : end], 16)))
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def def_symbol(name: str) -> str:
    """The C++ function of the def ``name``."""
    return "ks_" + escape_name(name)


@functools.cache
def runtime_source() -> str:
    """The text of ``runtime.h``."""
    return RUNTIME_HEADER.read_text(encoding="utf-8")


# -- types -----------------------------------------------------------------------------------------
_type_cache: dict[Type, str] = {}


def cpp_type(t: Type) -> str:
    """The C++ type of values of ``t``."""
    found = _type_cache.get(t)
    if found is not None:
        return found
    if t is FLOAT:
        text = "double"
    elif t is INTEGER:
        text = "std::int64_t"
    elif t is BOOL:
        text = "bool"
    elif t.kind is Kind.VEC:
        if Kind.LAM in t.elem.leaves:
            raise KsUsageError(f"the C++ backend does not support vectors of functions ({t})")
        text = f"ks::Vec<{cpp_type(t.elem)}>"
    elif t.kind is Kind.TUPLE:
        text = f"std::tuple<{', '.join(cpp_type(c) for c in t.children)}>"
    else:
        text = f"std::function<{cpp_type(t.lam_ret)}(const {cpp_type(t.lam_arg)}&)>"
    _type_cache[t] = text
    return text


def param_decl(t: Type, name: str) -> str:
    return f"{cpp_type(t)} {name}" if t.is_scalar else f"const {cpp_type(t)}& {name}"


def c_string(text: str) -> str:
    """A C++ string literal of ``text`` (every character outside a small safe set escaped in octal)."""
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        out.append(c if c.isascii() and (c.isalnum() or c in " ()") else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


# -- literals --------------------------------------------------------------------------------------
def float_literal(x: float) -> str:
    """An exact C++ literal of a finite double."""
    text = float(x).hex()  # e.g. 0x1.8000000000000p+1
    return f"({text})" if text.startswith("-") else text


def int_literal(v: int) -> str:
    if v == INT_MIN:
        return f"(std::int64_t({v + 1}LL) - 1)"
    return f"std::int64_t({v}LL)"


def literal(node: Expr) -> str:
    if node.type is BOOL:
        return "true" if node.data else "false"
    if node.type is INTEGER:
        return int_literal(int(node.data))
    return float_literal(float(node.data))
