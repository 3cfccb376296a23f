"""Derivative calls that several cotangent loops of one loop need, made once per iteration.

The reverse pass of ``build n (lam i B)`` is one loop per cotangent (:mod:`autodiff.reverse`), each
over ``B``'s reverse pass and only the part of it that its cotangent needs.  A call of a def in ``B``
gives all its arguments' cotangents at once: ``d$f = rev$f args d$r``, the Float part summed by one
loop, the row part gathered by another.  Each loop then makes the whole call and keeps its part, so
the derivative's work and allocations are done twice (gmm's ``mul$R$VecVecR``: a row scaled by a
Float).  Such a call is made once per iteration, in a *tape* ``build n (lam i d$f)`` before the
loops, and each loop reads ``(index i tape)``.

Only where the tape costs no more memory than the gathers it feeds: every argument of the call that
is not a number is a row of the loop, ``(index i V)`` (its cotangent is then a row of ``V``'s, which a
gather stores anyway); a call with a whole vector from outside the loop as an argument would store
that vector's cotangent once per iteration.
"""

from __future__ import annotations

from autodiff.anf import Bind, Block, Loop, Names, value_expr
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op


def tape_shared_calls(names: Names, out: Block, at: int, loop: Loop, inner: Block, results: list[Expr]) -> None:
    """Tape (in ``out`` at position ``at``, before this loop's cotangent loops) each derivative call
    bound in ``inner``, the reverse pass of ``loop``'s body, that two or more of ``results`` (the
    cotangent loops' bodies' results) need; ``inner`` then reads it from the tape, in place, so every
    loop made over ``inner.binds`` reads it."""
    needs = [_needed(inner.binds, r) for r in results]
    for k, bind in enumerate(inner.binds):
        call = bind.value
        if not _derivative_call(call) or sum(bind.var.data in n for n in needs) < 2:
            continue
        assert isinstance(call, Expr)
        if not all(_number(a) or _row_of(inner.binds[:k], a, loop.index) for a in call.args[:-1]):
            continue
        body = Block(list(inner.binds[: k + 1]), bind.var)
        value = Loop(Op.BUILD, loop.n, loop.index, body)
        tape = E.var(names.fresh(f"{bind.var.data}$tape"), value.type)
        out.binds.insert(at, Bind(tape, value, bind.source))
        at += 1
        inner.binds[k] = Bind(bind.var, E.op(Op.INDEX, loop.index, tape), bind.source)


def _derivative_call(value: object) -> bool:
    """Whether ``value`` is the call of a def's reverse-mode derivative (made by the reverse pass)."""
    return isinstance(value, Expr) and value.op is Op.CALL and value.data.name.startswith("rev$")


def _number(a: Expr) -> bool:
    return a.type.is_scalar


def _row_of(binds: list[Bind], a: Expr, index: Expr) -> bool:
    """Whether ``a`` is a variable bound in ``binds`` to a row ``(index i V)`` at the loop's index."""
    if a.op is not Op.VAR:
        return False
    for b in reversed(binds):
        if b.var.data == a.data:
            v = b.value
            return isinstance(v, Expr) and v.op is Op.INDEX and v.args[0].op is Op.VAR and v.args[0].data == index.data
    return False


def _needed(binds: list[Bind], result: Expr) -> set[str]:
    """The variables of ``binds`` that computing ``result`` after them needs (as
    :func:`autodiff.anf.to_expr` keeps them)."""
    free = set(result.free)
    needed: set[str] = set()
    for b in reversed(binds):
        if b.var.data in free:
            needed.add(b.var.data)
            free |= value_expr(b.value).free
    return needed
