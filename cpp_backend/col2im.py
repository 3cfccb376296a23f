"""A sum of one-hots at a shifted index whose values also sum over loops the index does not use, as one
matrix product then a gather (col2im).

Reverse mode writes the cotangent of a convolution's input as one-hots at the read's index, over the
output channels ``o``, the output positions ``t`` and the kernel offsets ``k``:

    dx[b][c] = sum_{o,t,k} (deltaVec W (clamp (t s + k d - p)) (if (valid t k) (mul dy[b][o][t] w[o][c][k]) 0.0))

The one-hots are linear and ``o`` is in neither the index nor the test, so the sum over ``o`` goes
inside: ``Q[b][t][c][k] = sum_o dy[b][o][t] w[o][c][k]`` is one product, (b t) x o times o x (c k),
of the two reads copied as matrices (no window, no zeros: the forward's multiply-adds, whatever the
stride), and ``dx[b][c][u]`` gathers ``Q`` at the ``(t, k)`` that reach ``u``
(:func:`cpp_backend.scatters.gather_one_hots`: a sum over ``k`` of tested reads).  Gathering the
products first instead (the im2col of ``dy``, then a product over ``(o, k)``) multiplies, at stride
``s``, ``s`` zeros per term in each dimension.

Meaning: ``(if g (sum_o v) 0.0)`` is ``sum_o (if g v 0.0)`` (and ``(if g 0.0 v)`` likewise) but for
the sign of a zero, so the pass runs only where the order is free, as the gather's.  ``Q`` is
computed at every ``(t, k)``, where the test fails too: only from reads that the nest makes at every
iteration whatever its tests (its lets' reads), so that none fails that did not fail; a value there
that is not finite is never read (the gather tests it).  The caller probes every read of the original terms.
"""

from __future__ import annotations

from collections.abc import Callable

from cpp_backend.convolutions import decode, flat, inlined, made_reads
from cpp_backend.let_chains import Lets, wrap_lets
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER, vec

Loops = list[tuple[Expr, Expr]]


def _plain_read(e: Expr, loop_vars: frozenset[str]) -> list[str] | None:
    """The loop variables of ``(index v_m ... (index v_1 base))``, outermost first, each index a loop
    variable and ``base`` free of them; None for any other term."""
    found: list[str] = []
    while e.op is Op.INDEX and e.args[0].op is Op.VAR and e.args[0].data in loop_vars:
        found.append(e.args[0].data)
        e = e.args[1]
    if e.free & loop_vars or not found or len(set(found)) < len(found):
        return None
    return found[::-1]


def _zero(e: Expr) -> bool:
    return e.op is Op.CONST and e.type is FLOAT and e.data == 0.0


def factor_plain_sums(
    one_hot: Expr, sums: Loops, lets: Lets, loops: Loops, fresh: Callable[[str], str]
) -> tuple[Lets, Expr, Loops, Lets, list[Expr]] | None:
    """``one_hot`` = ``(deltaVec W index v)`` (or one-hots of one-hots), summed over ``sums`` under
    ``lets`` (variable, right-hand side), ``v`` (its lets inlined) a product of two reads of loop
    variables, maybe under a test: the sums over loops that neither the indices, the widths nor the
    test use, as a product computed first (see the module docstring).  ``loops``: every loop around
    the term, outermost first (size and variable; sizes resolved).  Returns (the lets that compute
    the product, outside every loop; the one-hot reading it; the sums left; the lets left; the checks
    that the loops the product does not run run), or None."""
    hots: list[tuple[Expr, Expr]] = []
    value = one_hot
    while value.op is Op.DELTAVEC:
        hots.append((value.args[0], value.args[1]))
        value = value.args[2]
    whole = wrap_lets(lets, value)
    core = inlined(whole)
    if value.type is not FLOAT or not hots or core is None:
        return None
    test: Expr | None = None
    zero_first = False  # (if g 0.0 v), ksc's padded read, as well as (if g v 0.0)
    if core.op is Op.IF and _zero(core.args[2]):
        test, core = core.args[0], core.args[1]
    elif core.op is Op.IF and _zero(core.args[1]):
        test, core, zero_first = core.args[0], core.args[2], True
    if core.op is not Op.MUL:
        return None
    loop_vars = frozenset(v.data for _, v in loops)
    x, y = core.args
    rx, ry = _plain_read(x, loop_vars), _plain_read(y, loop_vars)
    if rx is None or ry is None:
        return None
    used: set[str] = set(test.free) if test is not None else set()
    for width, index in hots:
        for part in (width, index):
            resolved = inlined(wrap_lets(lets, part))
            if resolved is None:
                return None
            used |= resolved.free
    plain = [(n, v) for n, v in sums if v.data not in used and v.data in rx and v.data in ry]
    rest = [(n, v) for n, v in sums if v.data not in {p.data for _, p in plain}]
    plain_vars = {v.data for _, v in plain}
    if not plain or not rest or set(rx) & set(ry) - plain_vars:
        return None  # (nothing to factor, or a loop both reads use and the product keeps: a batch)
    a_loops = [(n, v) for n, v in loops if v.data in rx and v.data not in plain_vars]
    b_loops = [(n, v) for n, v in loops if v.data in ry and v.data not in plain_vars]
    if not a_loops or not b_loops or any(n.free & loop_vars for n, _ in a_loops + b_loops + plain):
        return None  # (a row's length chosen by a loop: not one matrix)
    # Each copy makes its reads even where a loop of the other, or one of neither, has no iteration,
    # and the nest none: every loop runs (checked by the caller), or the nest runs as written.
    others = [(n, v) for n, v in loops if v.data not in plain_vars]
    if any(n.free & loop_vars for n, _ in others):
        return None
    runs = [E.op(Op.GT, n, E.const(0)) for n, _ in others]
    if test is not None:  # the product is computed where the test fails: from reads made whatever it is
        unconditional = {id(r) for r, path in made_reads(whole) or [] if not path}
        if id(x) not in unconditional or id(y) not in unconditional:
            return None
    # The lets left are those the indices use (the gather resolves the widths; the reads of the
    # others are probed by the caller).
    needed = {x for _, i in hots for x in i.free}
    for v, rhs in reversed(lets):
        if v.data in needed:
            needed |= rhs.free
    kept = [(v, rhs) for v, rhs in lets if v.data in needed]
    if any(rhs.free & plain_vars for _, rhs in kept):
        return None
    na, fa = flat(a_loops)
    nb, fb = flat(b_loops)
    nj, _ = flat(plain)
    ia, ja, jb, kb, i, k, j = (E.var(fresh(f"ks${s}"), INTEGER) for s in ("qi", "qj", "qj", "qk", "i", "k", "j"))
    ca, cb, cc = (E.var(fresh(f"ks${s}"), vec(vec(FLOAT))) for s in ("qa", "qb", "qc"))
    copy_a = E.build(na, ia, decode(ia, a_loops, E.build(nj, ja, decode(ja, plain, x, fresh)), fresh))
    copy_b = E.build(nj, jb, decode(jb, plain, E.build(nb, kb, decode(kb, b_loops, y, fresh)), fresh))
    term = E.op(Op.MUL, E.op(Op.INDEX, j, E.op(Op.INDEX, i, ca)), E.op(Op.INDEX, k, E.op(Op.INDEX, j, cb)))
    product = E.build(na, i, E.build(nb, k, E.sumbuild(nj, j, term)))
    entry: Expr = E.op(Op.INDEX, fb, E.op(Op.INDEX, fa, cc))
    if test is not None:
        entry = E.op(Op.IF, test, E.const(0.0), entry) if zero_first else E.op(Op.IF, test, entry, E.const(0.0))
    for width, index in reversed(hots):
        entry = E.op(Op.DELTAVEC, width, index, entry)
    return [(ca, copy_a), (cb, copy_b), (cc, product)], entry, rest, kept, runs


__all__ = ["factor_plain_sums"]
