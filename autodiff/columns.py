"""Reads of a matrix transposed to its loops, ``(index i (index j V))``: their cotangent as one gather.

A loop nest ``i``, then loops summed over (``k``), then ``j`` that reads ``V[j][i]`` (the element
``i`` of the row ``t = (index j V)``) reads each element once per iteration of the loops between: the
index map (i, j) -> (j, i) is invertible, so the cotangent of ``V`` is the *gather*

    build (size V) (lam j' (build (size (index j' V)) (lam i
      (if (lt i n_i) (let <i's body> (sumbuild n_k (lam k (let <k's body>
        (if (lt j' n_j) (let (j j') <j's body> d$elem) 0.0))))) 0.0))))

made once, where the record of ``t`` alone would be a one-hot row per iteration, added into a
matrix-sized accumulator at a stride (JAX transposes a gather so; Dex's "Getting to the point").
The bodies are computed again in the gather, so a record goes this way only where what its
element needs from them has no loop (a read, a product of two: a constant per element), and only
where each loop of the nest binds the next one directly (no branch between), the nest is in no
other loop, and ``V`` comes from outside the nest: then the record is consumed by the loop over
``i`` for certain (:func:`nest_path` checks it where the record is made).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autodiff.anf import Bind, Block, Branch, Loop, Names, rename, to_expr, value_expr
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER, vec

#: A matrix of Floats, the only type of ``V`` taken here (its element's zero is 0.0).
MATRIX = vec(vec(FLOAT))


@dataclass
class Column:
    """The cotangent of ``V[j][i]`` for every ``j``: ``part``, bound in the reverse body of the loop
    over ``j`` (the first of ``loops``); the loops after it are summed over, out to the loop over
    ``at`` (``i``), which gathers it."""

    v: Expr
    at: Expr
    part: Expr
    #: The gather's index over V's rows (fresh).
    row: Expr
    loops: list[tuple[Loop, Block]] = field(default_factory=list)


def _bound(b: Block) -> set[str]:
    return {x.var.data for x in b.binds}


def nest_path(stack: list[tuple[Block, Block]], enclosing: dict[int, Loop], v: Expr, j: Expr, i: Expr) -> bool:
    """Whether the record at ``i`` of ``(index j v)``, made in the block on top of ``stack`` (forward
    blocks and their reverse blocks, innermost last), can become a :class:`Column`: that block is the
    body of the loop over ``j``, each block out from it is the body of a loop binding the previous
    loop directly, up to the loop over ``i``; none binds ``v`` or ``i``; and what the record's
    element needs from the reverse blocks (see :func:`cheap_element`) is checked by the caller."""
    if v.type is not MATRIX or j.op is not Op.VAR or i.op is not Op.VAR or i.data == j.data:
        return False
    inner = enclosing.get(id(stack[-1][0])) if stack else None
    if inner is None or inner.index.data != j.data or v.data in _bound(stack[-1][0]):
        return False
    for k in range(len(stack) - 2, -1, -1):
        b = stack[k][0]
        loop = enclosing.get(id(b))
        if loop is None or v.data in _bound(b) or not any(x.value is inner for x in b.binds):
            return False
        if loop.index.data == i.data:
            # only a nest in no other loop: in one, the gather would be made (and added) once per
            # iteration of it, a sum of rank-1 updates that the C++ backend's products recognise
            # in the one-hot form (cpp_backend/products.py), not in this one
            return not any(id(outer) in enclosing for outer, _ in stack[:k])
        inner = loop
    return False


def cheap_element(stack: list[tuple[Block, Block]], part: Expr, depth: int) -> bool:
    """Whether ``part`` (bound in the innermost reverse block) needs no loop or branch with loops from
    the ``depth`` innermost reverse blocks of ``stack`` (the gather computes them again per element)."""
    needed = set(part.free)
    for _, out in reversed(stack[-depth:]):
        for x in reversed(out.binds):
            if x.var.data not in needed:
                continue
            if isinstance(x.value, Loop) or (isinstance(x.value, Branch) and _has_loop(x.value)):
                return False
            needed.update(value_expr(x.value).free)
    return True


def _has_loop(branch: Branch) -> bool:
    return any(isinstance(x.value, (Loop, Branch)) for b in (branch.then, branch.other) for x in b.binds)


def depth_to(stack: list[tuple[Block, Block]], enclosing: dict[int, Loop], i: Expr) -> int:
    """How many blocks of ``stack``, innermost first, down to the body of the loop over ``i``."""
    for k, (b, _) in enumerate(reversed(stack), 1):
        loop = enclosing.get(id(b))
        if loop is not None and loop.index.data == i.data:
            return k
    raise AssertionError("nest_path found the loop")  # pragma: no cover


def gather(names: Names, out: Block, col: Column, loop: Loop, body: Block) -> Expr:
    """The cotangent of ``col.v`` (bound in ``out``): ``col`` gathered by ``loop`` (over ``col.at``),
    whose reverse body is ``body`` (the structure in the module docstring).  The tests of range are
    made where they cost least: ``j' < n_j`` once per row where ``n_j`` is known outside the nest, and
    ``i < n_i`` not at all in a row as long as ``n_i`` (one test per row picks the plain loop), so that
    the usual gather, every loop covering ``V``, is a plain nest of builds and sums.  Where ``n_j`` is
    known outside the nest, one check that ``V`` has ``n_j`` rows, each ``n_i`` long, picks the gather
    as a single expression with no test nor let between its loops (what the C++ backend recognises
    as a product), the gather row by row computing every other shape."""
    v = col.v
    (first, first_body), *between = col.loops
    jj = col.row
    zero = E.const(0.0)
    blocks = [body, *(b for _, b in between), first_body]
    row_test = first.n.op is Op.CONST or not any(first.n.data in _bound(b) for b in blocks)
    # innermost: the loop over j's body at j = jj (tested to be in its range here unless per row)
    elem = Block([Bind(first.index, jj), *first_body.binds], col.part)
    if not row_test:
        tested = Block()
        tested.result = names.bind(tested, Branch(E.op(Op.LT, jj, first.n), elem, Block([], zero)), "d$elem")
        elem = tested
    for mid, mid_body in between:  # the loops between, summed over (innermost first)
        summed = Block([*mid_body.binds, *elem.binds], elem.result)
        elem = Block()
        elem.result = names.bind(elem, Loop(Op.SUMBUILD, mid.n, mid.index, summed), f"d${v.data}")
    at_i = Block([*body.binds, *elem.binds], elem.result)
    padded = Block()
    padded.result = names.bind(padded, Branch(E.op(Op.LT, loop.index, loop.n), at_i, Block([], zero)), "d$elem")
    row = Block()
    width = names.bind(row, E.op(Op.SIZE, E.op(Op.INDEX, jj, v)), "t")
    plain = _row(names, col, loop, body, width, at_i, row_test and not between)
    short = Block()
    short.result = names.bind(short, Loop(Op.BUILD, width, loop.index, padded), f"d${v.data}")
    row.result = names.bind(row, Branch(E.op(Op.EQ, width, loop.n), plain, short), f"d${v.data}")
    if row_test:
        zeros = Block()
        i = E.var(names.fresh("i"), INTEGER)
        zeros.result = names.bind(zeros, Loop(Op.BUILD, width, i, Block([], zero)), f"d${v.data}")
        tested = Block(row.binds[:1])
        tested.result = names.bind(
            tested, Branch(E.op(Op.LT, jj, first.n), Block(row.binds[1:], row.result), zeros), f"d${v.data}"
        )
        row = tested
    size = names.bind(out, E.op(Op.SIZE, v), "t")
    if not row_test:
        return names.bind(out, Loop(Op.BUILD, size, jj, row), f"d${v.data}")
    # where V is as the nest reads it (n_j rows, each n_i long: checked once, reading only rows that
    # exist), the gather is a plain nest that the C++ backend's products recognise; else per row
    rowwise = Block()
    rowwise.result = names.bind(rowwise, Loop(Op.BUILD, size, jj, row), f"d${v.data}")
    nest = Block()
    # (written as one expression: a nest of loops, no let between them, is what the products match)
    fast = _reads_written(E.build(first.n, jj, _direct(_row(names, col, loop, body, loop.n, at_i, not between))))
    nest.result = names.bind(nest, fast, f"d${v.data}")
    k = E.var(names.fresh("j"), INTEGER)
    ragged = E.sumbuild(
        size, k, E.op(Op.IF, E.op(Op.EQ, E.op(Op.SIZE, E.op(Op.INDEX, k, v)), loop.n), E.const(0), E.const(1))
    )
    shaped = E.op(Op.AND, E.op(Op.EQ, size, first.n), E.op(Op.EQ, ragged, E.const(0)))
    return names.bind(out, Branch(names.bind(out, shaped, "t"), nest, rowwise), f"d${v.data}")


def _is_read(e: Expr) -> bool:
    return e.op is Op.VAR or (e.op is Op.INDEX and all(_is_read(a) or a.op is Op.CONST for a in e.args))


def _reads_written(e: Expr) -> Expr:
    """``e`` with the lets of reads (and of variables) written where they are used: a loop nest then
    has no let between its loops (the names are the def's own, bound once, so nothing is captured)."""
    while e.op is Op.LET and _is_read(e.args[1]):
        e = rename(e.args[2], {e.args[0].data: e.args[1]})
    args = tuple(_reads_written(a) for a in e.args)
    return e.replace_args(args) if any(a is not b for a, b in zip(args, e.args, strict=True)) else e


def _direct(b: Block) -> Expr:
    """The expression of ``b``, without the let of a block that only names its value."""
    if len(b.binds) == 1 and b.result is b.binds[0].var:
        return value_expr(b.binds[0].value)
    return to_expr(b)


def _row(names: Names, col: Column, loop: Loop, body: Block, width: Expr, at_i: Block, once: bool) -> Block:
    """The row ``jj`` of the gather where it is ``width`` long, as long as the loop over ``i``."""
    plain = _plain_row(names, col, loop, body, width, at_i) if once else None
    if plain is None:
        plain = Block()
        plain.result = names.bind(plain, Loop(Op.BUILD, width, loop.index, at_i), f"d${col.v.data}")
    return plain


def _plain_row(names: Names, col: Column, loop: Loop, body: Block, width: Expr, at_i: Block) -> Block | None:
    """The row ``jj`` of a gather of two loops where it is as long as the loop over ``i``: what the
    loop over j's body computes from ``jj`` alone (``(index jj t)``, a product with it) once per row,
    before the loop over ``i`` (in a row of at least one element, where the forward pass computed
    it too); None where it computes nothing so."""
    first, first_body = col.loops[0]
    inner = {loop.index.data} | _bound(body)
    outer: list[Bind] = []
    rest: list[Bind] = []
    for x in [Bind(first.index, col.row), *first_body.binds]:
        free = x.value.free if isinstance(x.value, Expr) else value_expr(x.value).free
        if any(name in inner for name in free):
            rest.append(x)
            inner.add(x.var.data)
        else:
            outer.append(x)
    if len(outer) < 2:  # only j = jj
        return None
    once = Block(outer)
    once.result = names.bind(once, Loop(Op.BUILD, width, loop.index, Block([*body.binds, *rest], col.part)), "d$row")
    empty = Block()
    empty.result = names.bind(
        empty, Loop(Op.BUILD, width, E.var(names.fresh("i"), INTEGER), Block([], E.const(0.0))), "d$row"
    )
    plain = Block()
    plain.result = names.bind(plain, Branch(E.op(Op.GT, width, E.const(0)), once, empty), f"d${col.v.data}")
    return plain
