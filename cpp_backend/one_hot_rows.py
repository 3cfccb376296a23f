"""A sum of one-hot rows at an index made of summed variables, as the matrix of those rows' sums.

Reverse mode gives a slice of a weight matrix read at a computed row (the key rows of attention's fused
``in_proj_weight``, row ``8 + 4 h + d`` for head ``h`` and feature ``d``) a one-hot row per term:

    (sumbuild B (lam b ... (sumbuild H (lam h ... (sumbuild T (lam t ... (sumbuild D (lam d ...
      (deltaVec N (add (add (mul h D) d) 8) row)))))))))

Where the row index is ``a0 + c_1 s_1 + ... + c_K s_K`` for summed variables ``s_k`` whose coefficients
are a mixed radix (``c_1 = 1``, ``c_{k+1} = c_k n_k``, ``n_k`` the constant size of ``s_k``'s loop),
the index takes each value of ``[a0, a0 + n_1 ... n_K)`` at exactly one ``(s_1 .. s_K)``, so the sum is
the matrix whose row ``a0 + r`` is the sum, over the other loops, of the rows at the digits of ``r``:

    (let (C (build (n_1 ... n_K) (lam r (let (digits of r) (sumbuild B (lam b ... row))))))
      (build N (lam u (if (a0 <= u < a0 + n) (index (u - a0) C) zeros))))

``C`` is a sum of outer products over the other loops, which :mod:`cpp_backend.products` makes one
blocked product.  Every term is computed as before (the same reads, the lets of the loops in their
order), and each row adds its terms in the loops' order, but without the +0.0s of the other terms'
one-hots (a row whose terms are all -0.0 ends -0.0 where it ended +0.0), so the pass runs only where
the order is free.  Where a loop runs no iteration (a sum of no vectors) or the rows' lengths differ
(their one-hots do not add) the sum fails, and so does the gather: an assertion, so that the sum as
written is not compiled again beside it (its error's message is another).
"""

from __future__ import annotations

from collections.abc import Callable

from knossos import expr as E
from knossos.expr import Expr, distinct_nodes
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER, Kind, vec

#: A resolved index has at most this many nodes.
_INDEX_MAX = 64
_LOOPING = frozenset({Op.BUILD, Op.SUMBUILD, Op.SUM, Op.CALL, Op.APPLY, Op.LAM, Op.CONSTVEC, Op.DELTAVEC})


def one_hot_rows(e: Expr, fresh: Callable[[str], str]) -> Expr | None:
    """``e``, a sum of one-hot rows at a mixed-radix index of its summed variables (module docstring), as
    the gather of the rows' sums, failing (an assertion) where ``e`` fails for a loop that runs no
    iteration or rows of different lengths; None where ``e`` is no such sum.  ``fresh`` gives unused variable names."""
    if e.op is not Op.SUMBUILD or e.type.kind is not Kind.VEC:
        return None
    chain: list[tuple[str, Expr, Expr]] = []  # ("sum", size, var) | ("let", var, rhs)
    body = e
    while True:
        if body.op is Op.SUMBUILD and body.type.kind is Kind.VEC:
            chain.append(("sum", body.args[0], body.args[1]))
        elif body.op is Op.LET:
            chain.append(("let", body.args[0], body.args[1]))
        elif body.op is Op.VAR and chain and chain[-1][0] == "let" and chain[-1][1] is body:
            body = chain.pop()[2]  # (let (x r) x) is r
            continue
        else:
            break
        body = body.args[2]
    if body.op is not Op.DELTAVEC or body.args[2].type != vec(FLOAT):
        return None
    width, index, row = body.args
    bound = [x.data for kind, a, b in chain for x in ((b,) if kind == "sum" else (a,))]
    if len(set(bound)) < len(bound) or set(bound) & (width.free | _binders(row)):
        return None
    lets = {v.data: rhs for kind, v, rhs in chain if kind == "let" and _loop_free(rhs)}
    sums = [(n, v) for kind, n, v in chain if kind == "sum"]
    if any(set(bound) & n.free for n, _ in sums):
        return None  # (a size the loops decide)
    resolved = _resolve(index, lets)
    if resolved is None:
        return None
    parts = _affine(resolved, {v.data for _, v in sums})
    if parts is None:
        return None
    coefficients, a0 = parts
    radix = _radix(coefficients, sums)
    if radix is None or a0.free & set(bound):
        return None
    count = 1
    for _, n in radix:
        count *= n
    digits = [v.data for v, _ in radix]
    # The rows: the loops and lets as written, but the digits' loops, whose values r decodes (and the
    # index, a let's, is r + a0: the same value, written smaller for the checks of sizes it decides).
    r = E.var(fresh("ks$r"), INTEGER)
    at = r if a0.op is Op.CONST and a0.data == 0 else E.op(Op.ADD, r, a0)
    inner = row
    for kind, a, b in reversed(chain):
        if kind == "let":
            inner = E.let(a, at if a is index else b, inner)
        elif b.data not in digits:
            inner = E.sumbuild(a, b, inner)
    rest: Expr = r
    decoded: list[tuple[Expr, Expr]] = []
    for (v, _), c in sorted(zip(radix, _coefficients(radix), strict=True), key=lambda x: -x[1]):
        if c == 1:
            decoded.append((v, rest))
            continue
        decoded.append((v, E.op(Op.DIV, rest, E.const(c))))
        left = E.var(fresh("ks$rest"), INTEGER)
        decoded.append((left, E.op(Op.SUB, rest, E.op(Op.MUL, E.const(c), v))))
        rest = left
    for v, rhs in reversed(decoded):
        inner = E.let(v, rhs, inner)
    rows = E.var(fresh("ks$hots"), vec(vec(FLOAT)))
    total = E.const(count)
    first = E.op(Op.SIZE, E.op(Op.INDEX, E.const(0), rows))
    u, w, z, k = (E.var(fresh(f"ks${s}"), INTEGER) for s in ("u", "w", "z", "k"))
    inside = E.op(Op.AND, E.op(Op.GTE, w, E.const(0)), E.op(Op.LT, w, total))
    zeros = E.build(first, z, E.const(0.0))
    gathered = E.build(width, u, E.let(w, E.op(Op.SUB, u, a0), E.op(Op.IF, inside, E.op(Op.INDEX, w, rows), zeros)))
    differ = E.sumbuild(total, k, E.op(Op.IF, E.op(Op.EQ, E.op(Op.SIZE, E.op(Op.INDEX, k, rows)), first), _i(0), _i(1)))
    runs = _all([E.op(Op.GT, n, _i(0)) for n, _ in sums])
    same = E.op(Op.ASSERT, E.op(Op.EQ, differ, _i(0)), gathered)
    return E.op(Op.ASSERT, runs, E.let(rows, E.build(total, r, inner), same))


def _i(n: int) -> Expr:
    return E.const(n)


def _all(conds: list[Expr]) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = E.op(Op.AND, out, c)
    return out


def _binders(e: Expr) -> set[str]:
    return {x.args[0].data for x in distinct_nodes(e) if x.op in (Op.LET, Op.LAM)} | {
        x.args[1].data for x in distinct_nodes(e) if x.op in (Op.BUILD, Op.SUMBUILD)
    }


def _loop_free(e: Expr) -> bool:
    return e.size <= _INDEX_MAX and not any(x.op in _LOOPING or x.op is Op.LET for x in distinct_nodes(e))


def _resolve(e: Expr, lets: dict[str, Expr]) -> Expr | None:
    """``e`` (binder-free) with the variables of ``lets`` replaced by their right-hand sides, resolved;
    None where it grows past :data:`_INDEX_MAX`."""
    if e.op is Op.VAR:
        rhs = lets.get(e.data)
        return e if rhs is None else _resolve(rhs, {k: v for k, v in lets.items() if k != e.data})
    if not e.args:
        return e
    args = []
    for a in e.args:
        x = _resolve(a, lets)
        if x is None:
            return None
        args.append(x)
    out = e.replace_args(tuple(args))
    return out if out.size <= _INDEX_MAX else None


def _affine(a: Expr, names: set[str]) -> tuple[dict[str, int], Expr] | None:
    """``a`` as ``a0 + sum c_s s`` over the variables ``names`` (integer constants ``c_s``), ``a0`` free
    of them; None where it is not affine in them."""
    if not a.free & names:
        return {}, a
    if a.op is Op.VAR:
        return {a.data: 1}, _i(0)
    if a.op in (Op.ADD, Op.SUB):
        left, right = _affine(a.args[0], names), _affine(a.args[1], names)
        if left is None or right is None:
            return None
        sign = 1 if a.op is Op.ADD else -1
        coefficients = dict(left[0])
        for s, c in right[0].items():
            coefficients[s] = coefficients.get(s, 0) + sign * c
        return coefficients, _fold(a.op, left[1], right[1])
    if a.op is Op.MUL:
        k, x = a.args if a.args[0].op is Op.CONST else a.args[::-1]
        if k.op is not Op.CONST or not isinstance(k.data, int) or isinstance(k.data, bool):
            return None
        inner = _affine(x, names)
        if inner is None:
            return None
        return {s: c * k.data for s, c in inner[0].items()}, _fold(Op.MUL, k, inner[1])
    return None


def _fold(op: Op, a: Expr, b: Expr) -> Expr:
    """``(op a b)``, folded where both are integer constants or one is a neutral 0 (1 for ``mul``)."""
    ints = [x.data if x.op is Op.CONST and isinstance(x.data, int) else None for x in (a, b)]
    if ints[0] is not None and ints[1] is not None:
        return E.const(ints[0] + ints[1] if op is Op.ADD else ints[0] - ints[1] if op is Op.SUB else ints[0] * ints[1])
    if op is Op.MUL and 0 in ints:
        return _i(0)
    if (op is Op.ADD and ints[0] == 0) or (op is Op.MUL and ints[0] == 1):
        return b
    if (op in (Op.ADD, Op.SUB) and ints[1] == 0) or (op is Op.MUL and ints[1] == 1):
        return a
    return E.op(op, a, b)


def _radix(coefficients: dict[str, int], sums: list[tuple[Expr, Expr]]) -> list[tuple[Expr, int]] | None:
    """The summed variables of ``coefficients`` (each with its loop's constant size), ascending by
    coefficient, where the coefficients are a mixed radix of the sizes (``c_1 = 1``, ``c_{k+1} = c_k
    n_k``); None otherwise."""
    size = {v.data: (v, n) for n, v in sums}
    used = sorted(((c, s) for s, c in coefficients.items() if c != 0), key=lambda x: x[0])
    if not used:
        return None
    out: list[tuple[Expr, int]] = []
    expect = 1
    for c, s in used:
        v, n = size[s]
        if c != expect or n.op is not Op.CONST or not isinstance(n.data, int) or n.data < 1:
            return None
        out.append((v, n.data))
        expect = c * n.data
    return out


def _coefficients(radix: list[tuple[Expr, int]]) -> list[int]:
    out, c = [], 1
    for _, n in radix:
        out.append(c)
        c *= n
    return out


__all__ = ["one_hot_rows"]
