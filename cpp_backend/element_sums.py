"""Sums that every element of a matrix evaluates, found, and hoisted into matrices of their own.

A layer whose gates are written element by element computes several products per element: a GRU
cell's update gate is ``(tanh (add (add b (sumbuild p (lam j x[i][j] w[k][j]))) (mul (add c (sumbuild
...)) ...)))``.  The blocked loop nest (:mod:`cpp_backend.products`) computes one sum per element; the
others would run as dot products, one element at a time.  Each such sum becomes a matrix of its own,
computed before the elements, and the element reads it:

    (build n (lam i (build m (lam k E[s1, s2]))))
      => (let ((S1 (build n (lam i (build m (lam k s1))))) (S2 ...))
           (build n (lam i (build m (lam k E[(index k (index i S1)), (index k (index i S2))])))))

A sum is taken only where the element evaluates it whatever the values (through lets and strict
arithmetic, never inside a branch) and it depends on no variable that the element binds: the same
terms are evaluated, all of them before the elements instead of interleaved, so the same calls fail,
possibly with another of their errors first; ``(index k (index i S))`` cannot fail (``i < n``,
``k < m``, the sizes of the matrix).
"""

from __future__ import annotations

from collections.abc import Callable

from knossos import expr as E
from knossos.expr import Expr
from knossos.op_table import FLOAT_OPS
from knossos.ops import Op
from knossos.types import FLOAT, vec


def operand_sums(elem: Expr) -> list[Expr]:
    """The distinct Float sums that evaluating ``elem`` evaluates whatever the values, through lets
    and strict arithmetic (as the emitter's row sums find them), depending on no variable that
    ``elem`` binds; in the order of evaluation."""
    found: list[Expr] = []
    stack: list[tuple[Expr, frozenset[str]]] = [(elem, frozenset())]
    while stack:
        x, bound = stack.pop()
        if x.op is Op.SUMBUILD and x.type is FLOAT and not bound & x.free:
            if all(s is not x for s in found):
                found.append(x)
        elif x.op is Op.LET:
            stack += [(x.args[2], bound | {x.args[0].data}), (x.args[1], bound)]
        elif x.op in FLOAT_OPS:  # (they evaluate every operand whatever the values)
            stack.extend((a, bound) for a in reversed(x.args))
    return found


def replace_operand(e: Expr, old: Expr, new: Expr) -> Expr:
    """``e`` with the node ``old`` (one found by :func:`operand_sums`: not under a binder of its
    variables) replaced by ``new`` wherever :func:`operand_sums` walks."""
    if e is old:
        return new
    if old.size > e.size or (e.op not in FLOAT_OPS and e.op is not Op.LET):
        return e
    return e.replace_args(tuple(replace_operand(a, old, new) for a in e.args))


def hoist_element_sums(
    e: Expr, fresh: Callable[[], str], small: Callable[[Expr], bool], reaches: Callable[[Expr], bool]
) -> Expr | None:
    """``e`` = ``(build n (lam i (build m (lam k elem))))`` with the operand sums of ``elem`` for which
    ``reaches(build n (lam i (build m (lam k s))))`` (a product that reaches the blocked nest) hoisted
    into matrices (see the module docstring), where ``elem`` has two or more operand sums and is no
    sum itself (one sum is the blocked nest's own case); None otherwise."""
    if e.op is not Op.BUILD or e.args[2].op is not Op.BUILD:
        return None
    n, iv, inner = e.args
    m, kv, elem = inner.args
    if elem.op is Op.SUMBUILD or not small(n) or not small(m) or iv.data in m.free:
        return None
    sums = operand_sums(elem)
    if len(sums) < 2:
        return None
    lets: list[tuple[Expr, Expr]] = []
    for s in sums:
        whole = E.build(n, iv, E.build(m, kv, s))
        if not reaches(whole):
            continue
        big = E.var(fresh(), vec(vec(FLOAT)))
        lets.append((big, whole))
        elem = replace_operand(elem, s, E.op(Op.INDEX, kv, E.op(Op.INDEX, iv, big)))
    if not lets:
        return None
    out = E.build(n, iv, E.build(m, kv, elem))
    for big, whole in reversed(lets):
        out = E.let(big, whole, out)
    return out


__all__ = ["hoist_element_sums", "operand_sums", "replace_operand"]
