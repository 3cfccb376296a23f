"""Indexes a loop binds to a variable, written out where they are read.

A gradient names the index of a strided read: GRUCell's ``(let ((t (add i 512)) (x (index t h)))
...)`` in ``(build 256 (lam i ...))``.  The emitter recognises a read at ``s i + c``
(:func:`strided`) only when the index is written at the read: it checks the range of all
of them once before the loop and reads the elements through a pointer, so that the loop vectorises.
Through a variable it sees neither, and every iteration checks its reads.  Here such a let, at the
head of a loop's body, is inlined into the body (one capture-avoiding substitution).

Values do not change (Integer arithmetic on the loop's index is pure).  Nor do errors: ``s i + c``
with ``0 <= i < n`` overflows only past ``2^63``, which no loop of that many iterations reaches.
"""

from __future__ import annotations

from knossos.expr import Expr
from knossos.ops import Op
from knossos.substitution import substitute

#: Larger loop bodies are left as they are (the substitution recurses on the body's depth).
BODY_MOST = 400


def inline_index_lets(root: Expr) -> Expr:
    """``root`` with the lets of strided indexes at the head of every build's and sumbuild's body
    inlined (bottom-up, without recursion: a def's body may be thousands of lets deep)."""
    done: dict[int, Expr] = {}
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        e, ready = stack.pop()
        if id(e) in done:
            continue
        if not ready:
            stack.append((e, True))
            stack.extend((a, False) for a in e.args if id(a) not in done)
            continue
        args = tuple(done[id(a)] for a in e.args)
        new = e if all(x is y for x, y in zip(args, e.args, strict=True)) else e.replace_args(args)
        if new.op in (Op.BUILD, Op.SUMBUILD):
            size, var, body = new.args
            inlined = _inline_head(body, var.data)
            if inlined is not body:
                new = new.replace_args((size, var, inlined))
        done[id(e)] = new
    return done[id(root)]


def _inline_head(body: Expr, var: str) -> Expr:
    """``body`` with its leading lets whose right-hand side is ``s var + c`` inlined (up to a let
    that binds ``var`` itself)."""
    if body.size > BODY_MOST:
        return body
    kept: list[Expr] = []
    e = body
    while e.op is Op.LET:
        name, rhs, rest = e.args
        if name.data == var:
            break
        if strided(rhs, var) is not None:
            e = substitute(rest, name.data, rhs)
            continue
        kept.append(e)
        e = rest
    if not kept and e is body:
        return body
    for let in reversed(kept):
        e = let.replace_args((let.args[0], let.args[1], e))
    return e


def strided(i: Expr, var: str) -> tuple[int, int] | None:
    """(s, c) where the index ``i`` is ``s var + c`` for Integer literals ``s >= 1``, ``c >= 0``:
    ``var``, ``(mul var s)``, ``(add X c)`` (either operand order); None otherwise.  The reads of a
    loop at such an index (a pairwise fold's ``2 i`` and ``2 i + 1``) rise with ``var``: one check
    of the last one's range before the loop serves every iteration."""
    if i.op is Op.VAR:
        return (1, 0) if i.data == var else None
    if i.op not in (Op.MUL, Op.ADD):
        return None
    a, b = i.args if i.args[1].op is Op.CONST else i.args[::-1]
    if b.op is not Op.CONST or type(b.data) is not int:
        return None
    inner = strided(a, var)
    if inner is None:
        return None
    if i.op is Op.MUL:
        return (inner[0] * b.data, inner[1] * b.data) if b.data >= 1 else None
    return (inner[0], inner[1] + b.data) if b.data >= 0 else None
