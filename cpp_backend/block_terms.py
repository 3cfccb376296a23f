"""The term of a product that the blocked loop nest computes, with its lets inlined.

A gradient often writes a product's term through lets: ``(let ((w (index j W)) (d (index j dy)))
(mul d (index k w)))`` (the cotangent of a layer's input, ``dy W``).  The blocked nest
(``cpp_backend.emit_rows``' ``_block_rows``) looks for ``(mul x y)`` (one fused multiply-add per term
where sums may be reassociated) and for reads ``(index k v)`` of a ``v`` that depends on the term
only (the right-hand matrix's rows, packed into contiguous panels); through a let it sees neither,
and the term runs as a separate multiplication and addition reading B's rows where they lie.

Inlining changes no value (the term is pure), and no error that matters: the nest runs inside a
``try``, and anything that fails there sends every row to the row-wise code, which evaluates the
program's own term.  A let is inlined only where every evaluation of the term evaluates its
right-hand side as often or more (it is used, and the term has no branch), so that whatever fails
in the row-wise code fails in the nest too; and only where that costs nothing: the right-hand side
is a read (a variable, a constant, a size or an index of reads), or it is used once.  A let whose
variable is not used is dropped where the body evaluates the same right-hand side anyway.
"""

from __future__ import annotations

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.substitution import substitute

#: Larger terms are left as they are (the inlining recurses; product terms are a few nodes).
TERM_MOST = 64

#: Operations a term may have for its lets to be inlined: no branch (each use is evaluated whenever
#: the term is), no loop and no binder but lets.
_BRANCHING = frozenset({Op.IF, Op.AND, Op.OR, Op.ASSERT, Op.LAM, Op.BUILD, Op.SUMBUILD, Op.SUM, Op.APPLY})


def inline_term_lets(e: Expr) -> Expr:
    """``e`` with its lets inlined where that changes neither values nor failures and costs no work
    (see the module docstring); ``e`` itself when it is large, branches or has no let."""
    if e.size > TERM_MOST:
        return e
    nodes = _nodes(e)
    if not any(x.op is Op.LET for x in nodes) or any(x.op in _BRANCHING for x in nodes):
        return e
    return _inline(e)


def _nodes(e: Expr) -> list[Expr]:
    seen: dict[int, Expr] = {}
    stack = [e]
    while stack:
        x = stack.pop()
        if id(x) not in seen:
            seen[id(x)] = x
            stack.extend(x.args)
    return list(seen.values())


def _inline(e: Expr) -> Expr:
    if e.op is Op.LET:
        v, rhs, body = e.args[0], _inline(e.args[1]), _inline(e.args[2])
        uses = _uses(body, v.data)
        if uses == 0 and _evaluates(body, rhs):
            return body  # (the body reads the same: a let a gradient left behind)
        if uses == 1 or (uses > 1 and _read(rhs)):
            return substitute(body, v.data, rhs)
        return E.let(v, rhs, body)
    if not e.args:
        return e
    return e.replace_args(tuple(_inline(a) for a in e.args))


def _evaluates(body: Expr, rhs: Expr) -> bool:
    """Whether evaluating ``body`` (no branch) evaluates ``rhs`` with the same variables: a node of
    it (interned: the same node is the same term) under no let of one of ``rhs``'s variables."""
    nodes = _nodes(body)
    return any(x is rhs for x in nodes) and not any(x.op is Op.LET and x.args[0].data in rhs.free for x in nodes)


def _read(e: Expr) -> bool:
    """A variable, a constant, or sizes and indexes of such: as cheap to compute again as to keep."""
    return e.op in (Op.VAR, Op.CONST) or (e.op in (Op.INDEX, Op.SIZE) and all(_read(a) for a in e.args))


def _uses(e: Expr, name: str) -> int:
    """How many times ``name`` occurs free in ``e`` (lets the only binders)."""
    if name not in e.free:
        return 0
    if e.op is Op.VAR:
        return 1
    if e.op is Op.LET and e.args[0].data == name:
        return _uses(e.args[1], name)
    return sum(_uses(a, name) for a in e.args)
