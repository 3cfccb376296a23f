"""Row lengths that a nest's loops choose, as the first row's under one check at run time.

Reverse mode of a convolution sums over the kernel of the row its loops are at:
``(sumbuild (size (index c (index o w))) (lam j ...))``.  As written, that loop's length differs per
row, and the product passes (the interchange, col2im, the blocked nest) take only loops whose lengths
are the same for every row, so the input's gradient ran as scattered one-hots.  Where every row the
nest can read has the first row's length (a weight tensor is rectangular), the nest computes the same
with ``(size (index 0 (index 0 w)))`` in its place, a length no loop chooses:

    (sumbuild n (lam o ... (size (index c (index o w))) ...))
      => (if CHECK (sumbuild n (lam o ... (size (index 0 (index 0 w))) ...)) ORIGINAL)

CHECK: the first row exists, and over the loops whose variables the read uses, no row is out of
range or of another length (counted; every read is tested in range first, and the loops' own lengths
cannot fail, so the check fails nowhere).  Where it holds, the first row's length is the length the
nest read wherever it read one: the same values and the same errors.  Where it does not, the nest runs
as written.  Taken only where it pays: the nest reaches a product with it and did not without.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import BINDERS, Op
from knossos.types import INTEGER, Kind


@dataclass(frozen=True)
class _Loop:
    size: Expr
    var: Expr
    depth: int


def _i(n: int) -> Expr:
    return E.const(n)


def _safe_size(n: Expr, bound: set[str]) -> bool:
    """Whether the loop length ``n`` can be evaluated before the nest: a variable or literal, or the
    size of a variable, none bound in the nest."""
    if n.free & bound:
        return False
    return n.op in (Op.VAR, Op.CONST) or (n.op is Op.SIZE and n.args[0].op is Op.VAR)


def _scan(e: Expr) -> tuple[dict[str, _Loop], list[Expr], set[str]] | None:
    """The loops of ``e`` by variable, its ``size`` nodes, and the names it binds; None where a name
    is bound twice or is also free in ``e`` (a read's variable would then not name one loop)."""
    loops: dict[str, _Loop] = {}
    sizes: list[Expr] = []
    bound: set[str] = set()
    seen: set[int] = set()
    stack: list[tuple[Expr, int]] = [(e, 0)]
    while stack:
        x, depth = stack.pop()
        if x.op in BINDERS:
            name = x.args[BINDERS[x.op][0]].data
            if name in bound or name in e.free:
                return None
            bound.add(name)
            if x.op in (Op.BUILD, Op.SUMBUILD):
                loops[name] = _Loop(x.args[0], x.args[1], depth)
        elif id(x) in seen:
            continue  # (a shared subtree that binds nothing is scanned once)
        seen.add(id(x))
        if x.op is Op.SIZE:
            sizes.append(x)
        inner = depth + 1 if x.op in (Op.BUILD, Op.SUMBUILD) else depth
        stack.extend((a, inner) for a in x.args)
    return loops, sizes, bound


def _chain(r: Expr) -> tuple[Expr, list[Expr]] | None:
    """``(index i_k ... (index i_1 base))`` as ``base`` and ``[i_1, ..., i_k]``; None unless ``base``
    is a variable and each index a variable or a literal >= 0."""
    indices: list[Expr] = []
    while r.op is Op.INDEX:
        i = r.args[0]
        if not (i.op is Op.VAR or (i.op is Op.CONST and i.type is INTEGER and i.data >= 0)):
            return None
        indices.append(i)
        r = r.args[1]
    if r.op is not Op.VAR or not indices:
        return None
    return r, indices[::-1]


def _read(base: Expr, indices: list[Expr]) -> Expr:
    for i in indices:
        base = E.op(Op.INDEX, i, base)
    return base


def _checks(base: Expr, indices: list[Expr], loops: list[_Loop]) -> list[Expr]:
    """That the first row exists, then that every row the ``loops`` reach is in range and of its length."""
    zeros = [_i(0)] * len(indices)
    first = E.op(Op.SIZE, _read(base, zeros))
    out = [E.op(Op.GT, E.op(Op.SIZE, _read(base, zeros[:k])), _i(0)) for k in range(len(indices))]
    count: Expr = E.op(Op.IF, E.op(Op.EQ, E.op(Op.SIZE, _read(base, indices)), first), _i(0), _i(1))
    for k in reversed(range(len(indices))):
        in_range = E.op(Op.LT, indices[k], E.op(Op.SIZE, _read(base, indices[:k])))
        count = E.op(Op.IF, in_range, count, _i(1))
    for loop in sorted(loops, key=lambda lp: lp.depth, reverse=True):
        count = E.op(Op.IF, E.op(Op.GT, loop.size, _i(0)), E.sumbuild(loop.size, loop.var, count), _i(0))
    out.append(E.op(Op.EQ, count, _i(0)))
    return out


def _substitute(root: Expr, new: dict[int, Expr]) -> Expr:
    """``root`` with the nodes whose ids ``new`` holds replaced (on an explicit stack)."""
    done: dict[int, Expr] = {}
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        x, ready = stack.pop()
        if id(x) in done:
            continue
        if id(x) in new:
            done[id(x)] = new[id(x)]
        elif ready:
            args = tuple(done[id(a)] for a in x.args)
            changed = any(a is not b for a, b in zip(args, x.args, strict=True))
            done[id(x)] = x.replace_args(args) if changed else x
        else:
            stack.append((x, True))
            stack.extend((a, False) for a in x.args if id(a) not in done)
    return done[id(root)]


def uniform_rows(e: Expr, reaches: Callable[[Expr], bool]) -> tuple[Expr, Expr] | None:
    """For a loop ``e``: the nest with each row length its loops choose taken as the first row's, and
    the check under which that computes ``e`` (see the module docstring); None where ``e`` reads no
    such length, or where ``reaches`` (whether a nest reaches a product) says it does not pay."""
    if e.op not in (Op.BUILD, Op.SUMBUILD) or e.type.kind is not Kind.VEC:
        return None
    scanned = _scan(e)
    if scanned is None:
        return None
    loops, sizes, bound = scanned
    new: dict[int, Expr] = {}
    checks: list[Expr] = []
    for s in sizes:
        found = _chain(s.args[0])
        if found is None:
            continue
        base, indices = found
        used = [loops.get(i.data) for i in indices if i.op is Op.VAR]
        if base.data in bound or not used or any(lp is None or not _safe_size(lp.size, bound) for lp in used):
            continue
        in_loops = [lp for lp in used if lp is not None]
        if len({lp.var.data for lp in in_loops}) < len(in_loops):
            continue  # (a variable twice: its rows are not every row)
        new[id(s)] = E.op(Op.SIZE, _read(base, [i if i.op is Op.CONST else _i(0) for i in indices]))
        checks += [c for c in _checks(base, indices, in_loops) if all(c is not d for d in checks)]
    if not new:
        return None
    fast = _substitute(e, new)
    if not reaches(fast) or reaches(e):
        return None
    check = checks[0]
    for c in checks[1:]:
        check = E.op(Op.AND, check, c)
    return check, fast


__all__ = ["uniform_rows"]
