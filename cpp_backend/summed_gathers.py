"""A sum of vectors that each gather from one vector the loop computes, as the gather of that vector's sum.

Reverse mode gives a weight read in chunks (``autodiff.chunks``: the rows ``h c + d`` of a projection
read per attention head ``h``) a cotangent that gathers its chunks back into the weight's shape; under
a loop over the batch that cotangent is made, and added, once per example:

    (sumbuild B (lam b (let ((x (index b X)) (C (build H (lam h ... x ...))))
                         (build n (lam i (if (lt i (mul H c)) (index (sub i ...) (index (div i c) C)) zeros))))))

The gather (here ``G``, the body after the lets) reads ``C`` and nothing else the loop computes, and
where it does not read ``C`` it is zero: it is linear in ``C``.  So the sum of the gathers is the
gather of the sum:

    (let (C (sumbuild B (lam b (let ((x (index b X))) (build H (lam h ...)))))) G)

and the sum of ``C`` is a sum of outer products over the batch that ``cpp_backend.products`` makes one
blocked product (its rows the chunks' rows, its terms the batch's rows).  Each element of the result
adds the same terms in the same order (a zero row adds +0.0 once instead of ``B`` times, and +0.0 is
the sum of ``B`` +0.0s); the gather's own work (its tests, its reads of sizes) is done once instead
of once per iteration.  Where the loop runs no iteration both fail alike (a sum of no vectors).

Only a gather that reshapes ``C`` (chunks flattened into rows) is rewritten: a gather of ``C``'s own
type (a gradient's padding of a bias to its vector's length) is left as it is, since moving the sum
would change the lets of the row products it reads, which ``cpp_backend.row_lets`` hoists and shares.

The shape of ``C`` must not depend on the loop (its builds' sizes and the tests that choose between
vectors are invariant), so that the sums of ``C`` add what the sums of the gathers added.
"""

from __future__ import annotations

from cpp_backend.let_chains import peel_lets, wrap_lets
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import Kind


def sum_of_gathers(e: Expr) -> Expr | None:
    """``e``, a sum of vectors ``(sumbuild p (lam b LETS G))`` whose body ``G`` gathers from the one
    variable ``C`` of ``LETS`` that depends on ``b`` (module docstring), as ``(let (C (sumbuild p (lam b
    LETS' C))) G)``, the lets free of ``b`` moved before it; None where ``e`` is no such sum."""
    if e.op is not Op.SUMBUILD or e.type.kind is not Kind.VEC:
        return None
    p, b, body = e.args
    lets, body = peel_lets(body)
    while lets and body is lets[-1][0]:  # (let (x r) x) is r
        body = lets.pop()[1]
    if body.op is Op.VAR:
        return None  # (no gather)
    varying = {b.data}  # b, and the lets that depend on it
    inside: list[tuple[Expr, Expr]] = []
    outside: list[tuple[Expr, Expr]] = []
    for v, rhs in lets:
        if v.data in varying or v.data in {x.data for x, _ in outside}:
            return None  # (a name bound twice)
        if rhs.free & varying:
            varying.add(v.data)
            inside.append((v, rhs))
        else:
            outside.append((v, rhs))
    read = body.free & varying
    if len(read) != 1 or b.data in read:
        return None
    (c,) = read
    source = next(rhs for v, rhs in inside if v.data == c)
    if source.type.kind is not Kind.VEC or source.type == body.type or not _linear(body, frozenset({c})):
        return None
    if not _shape_invariant(source, varying, {v.data: rhs for v, rhs in inside}):
        return None
    cv = next(v for v, _ in inside if v.data == c)
    return wrap_lets(outside, E.let(cv, E.sumbuild(p, b, wrap_lets(inside, cv)), body))


def _zero(e: Expr) -> bool:
    """Whether ``e`` is 0.0 or a vector of them (a gather's rows past its chunks)."""
    if e.op is Op.CONST:
        return e.data == 0.0 and isinstance(e.data, float)
    if e.op is Op.BUILD:
        return _zero(e.args[2])
    return False


def _linear(e: Expr, src: frozenset[str]) -> bool:
    """Whether ``e`` is a linear function of the variables ``src``: reads of them at indices free of
    them, or zero, chosen by tests free of them, in builds of sizes free of them."""
    if not e.free & src:
        return _zero(e)
    if e.op is Op.VAR:
        return True
    if e.op is Op.INDEX:
        return not e.args[0].free & src and _linear(e.args[1], src)
    if e.op is Op.LET:
        v, rhs, body = e.args
        if v.data in src:
            return False
        if not rhs.free & src:
            return _linear(body, src)
        return _linear(rhs, src) and _linear(body, src | {v.data})
    if e.op is Op.IF:
        return not e.args[0].free & src and _linear(e.args[1], src) and _linear(e.args[2], src)
    if e.op is Op.BUILD:
        return not e.args[0].free & src and e.args[1].data not in src and _linear(e.args[2], src)
    return False


def _shape_invariant(e: Expr, varying: set[str], lets: dict[str, Expr]) -> bool:
    """Whether the shape of the vector ``e`` is the same whatever the variables ``varying`` are:
    its builds' sizes and the tests choosing between vectors are free of them (``lets``: the
    right-hand sides of variables ``e`` may return)."""
    if e.op is Op.VAR and e.data in lets:
        rhs = lets.pop(e.data)  # (each right-hand side once: no cycle)
        return _shape_invariant(rhs, varying, lets)
    if not e.free & varying or e.type.kind is not Kind.VEC:
        return True  # (the same value, or a scalar)
    if e.op is Op.BUILD:
        return not e.args[0].free & varying and _shape_invariant(e.args[2], varying, lets)
    if e.op is Op.SUMBUILD:
        return _shape_invariant(e.args[2], varying, lets)
    if e.op is Op.LET:
        v, rhs, body = e.args
        inner = {**lets, v.data: rhs}
        return _shape_invariant(body, varying | {v.data} if rhs.free & varying else varying, inner)
    if e.op is Op.IF:
        return not e.args[0].free & varying and all(_shape_invariant(x, varying, lets) for x in e.args[1:])
    return False


__all__ = ["sum_of_gathers"]
