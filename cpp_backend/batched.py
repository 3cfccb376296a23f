"""Batched matrix products in any loop order (attention's), computed batch by batch by the blocked nest.

Attention multiplies per batch and head: ``attn V`` and, in its gradient, ``dO V^T``, ``P^T dO``,
``dS K``, ``dS^T Q``.  The layers write them in the loop order of their tensors' layout, not in the
product's: MultiheadAttention's output is ``[t][b][h*D + d]`` (heads are slices of the embedding, so
its column loop ``k`` is read as ``(div k D)`` and ``(sub k (mul (div k D) D))``), and the gradients
accumulate one-hots, ``(deltaVec T t ...)``, in a sum of vectors over ``t``.  The blocked nest
(``build i (build k (sumbuild j (mul A[i][j] B[j][k])))``) is nowhere to be found, and these
products ran element by element, one column of V at a time.

This pass reads such a nest as what it computes, a sum of products of two reads:

    out[o] = sum_c X[fx(o, c)] * Y[fy(o, c)]

(its builds and one-hots give the output's indexes, its sums the summed variables, every index an
affine function of the loop variables; a loop read through ``(div v D)`` is split into
``v = D vh + vl``), and where that is a batched product, every variable of the output read by both
operands (the batch), those read by X only (the rows), by Y only (the columns), and the summed ones,
read by both, writes it as the blocked nest inside the batch loops, on operands laid out
``[batch][row][term]`` and ``[batch][term][column]`` (copies made once where the operand is laid
out otherwise: O(n^2) against the product's O(n^3); several rows, columns or terms are one loop of
their product's count in the copies), then the output read from it through the permutation:

    (let ((C (build B (lam b (build I (lam i (build K (lam k (sumbuild J (lam j
                  (mul (index j (index i (index b A))) (index k (index j (index b B)))))))))))))))
      (build .. output's loops .. (index k (index i (index b C)))))

An element that is a function of one such sum (``(mul (add (sumbuild ..) bias) 0.5)``, a projection
with its bias and scale) is the product's, applied where the output reads it.  A product with no
batch is left to :mod:`cpp_backend.products` (a linear layer's, a weight's
gradient) unless its output interleaves rows and columns (a projection to heads, ``[b][h][t][d]``);
so is a nest already in the blocked nest's loop order (an operand read down a column is transposed
per batch there, under exact order too).

Meaning.  Each element adds the same products, in another order (a vector sum's terms are added
element-wise, from +0.0): so, like the interchange of :mod:`cpp_backend.products`, not under
``KS_EXACT_ORDER``.  A one-hot over a summed variable becomes a build only where its length is the
variable's count (so every position is written once): checked when the program runs, with every
loop count positive (a sum of no vectors fails, and nothing is read where a loop is empty); where a
check fails, the original nest runs.  A check that the sizes known when the code is emitted prove
(:mod:`cpp_backend.static_sizes`: the rows of a vector built here with literal counts) is not made,
and with no check left the original nest is not kept.  The copies and the product read the same elements as the
original, so the same reads fail; a let dropped (its value inlined) computes only reads that the new
code makes too, sizes of them and integer arithmetic.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from cpp_backend.element_sums import operand_sums, replace_operand
from cpp_backend.let_chains import wrap_lets
from cpp_backend.static_sizes import StaticSizes
from knossos import expr as E
from knossos.expr import Expr, distinct_nodes
from knossos.op_table import FLOAT_OPS
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER, Kind, Type, vec

#: Resolved terms larger than this are left alone (the walks recurse; a product's term is small).
_TERM_MOST = 200
#: Operations a let's right-hand side may have to be inlined into the term (reads and index arithmetic).
_READS = frozenset({Op.VAR, Op.CONST, Op.INDEX, Op.SIZE, Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.GET})

#: Scalar arithmetic an element may do around its sum (no branch, no loop).
_SCALAR = FLOAT_OPS | {Op.TO_FLOAT}
#: An affine index: variable -> coefficient ("" the constant).
AffineForm = dict[str, int]


@dataclass(frozen=True)
class _Loop:
    """A loop of the nest: its variable, its count (as written; in the product, its value at the first
    iteration of the loops around), and whether it builds (an output index) or sums (of vectors:
    ``vector``, which fails when empty)."""

    var: str
    size: Expr
    builds: bool
    vector: bool


@dataclass
class _Nest:
    """What a nest computes: its loops (outermost first), its output's indexes in order (a build's
    variable, or a one-hot's length and index), the term ``(mul X Y)`` and its two reads, resolved."""

    loops: list[_Loop]
    dims: list[tuple[str, Expr, Expr]]  # ("build", size, var) | ("delta", length, index)
    term: Expr
    reads: tuple[tuple[Expr, list[Expr]], tuple[Expr, list[Expr]]]  # (matrix, indexes outermost first)
    dropped: list[Expr]  # the lets' right-hand sides, resolved
    elem: Expr | None  # the element, a function of the product (the variable ``operand``), if not the product
    operand: str


def _resolve(e: Expr, lets: dict[str, Expr]) -> Expr:
    """The binder-free ``e`` with the variables of ``lets`` replaced by their right-hand sides."""
    if e.op is Op.VAR:
        return lets.get(e.data, e)
    if not e.args or e.size > _TERM_MOST:
        return e  # (too large to walk recursively: left as it is, and so refused by the size guards)
    return e.replace_args(tuple(_resolve(a, lets) for a in e.args))


def _binder_free(e: Expr) -> bool:
    return e.size <= _TERM_MOST and all(x.op in _READS or x.op in _SCALAR for x in distinct_nodes(e))


#: Stands for the sum in an element that is a function of one (no program names a variable ``ks$...``).
OPERAND = E.var("ks$bsum", FLOAT)


def _two_reads(e: Expr) -> bool:
    """Whether ``e`` is ``(mul X Y)`` of two reads (the term of a product)."""
    return e.op is Op.MUL and all(x.op is Op.INDEX for x in e.args)


def _read_nest(e: Expr) -> _Nest | None:
    """``e`` as a nest of builds, sums and one-hots around ``(mul X Y)`` (through lets of reads), or
    around an element that is a function of one such sum; None otherwise."""
    loops: list[_Loop] = []
    dims: list[tuple[str, Expr, Expr]] = []
    lets: dict[str, Expr] = {}
    dropped: list[Expr] = []
    loop_vars: set[str] = set()
    followed: set[str] = set()
    steps: dict[str, Expr] = {}  # lets of the nest's next step, ``(let (x (build ..)) x)``: followed
    elem: Expr | None = None
    operand = OPERAND.data
    while True:
        while e.op is Op.LET or (e.op is Op.VAR and e.data in steps):
            if e.op is Op.VAR:
                e = steps.pop(e.data)
                continue
            v, rhs, e = e.args
            if v.data in lets or v.data in loop_vars or v.data in steps:
                return None  # (a shadowing name: not resolved here)
            if rhs.op in (Op.BUILD, Op.SUMBUILD, Op.DELTAVEC):
                steps[v.data] = rhs
                followed.add(v.data)
                continue
            if not _binder_free(rhs) or any(x.op not in _READS and x.op not in _SCALAR for x in distinct_nodes(rhs)):
                return None
            resolved = _resolve(rhs, lets)
            if resolved.size > _TERM_MOST:
                return None
            lets[v.data] = resolved
            dropped.append(resolved)
        if e.op in (Op.BUILD, Op.SUMBUILD):
            size = _resolve(e.args[0], lets)
            v = e.args[1].data
            if v in loop_vars or v in lets or not _binder_free(size):
                return None
            builds = e.op is Op.BUILD
            loops.append(_Loop(v, size, builds, not builds and e.type.kind is Kind.VEC))
            loop_vars.add(v)
            if builds:
                dims.append(("build", size, e.args[1]))
            e = e.args[2]
        elif e.op is Op.DELTAVEC:
            length, index = (_resolve(a, lets) for a in e.args[:2])
            if not (_binder_free(length) and _binder_free(index)):
                return None
            dims.append(("delta", length, index))
            e = e.args[2]
        elif (
            elem is None
            and e.type is FLOAT
            and e.size <= _TERM_MOST
            and not _two_reads(_resolve(e, lets))
            and loops
            and loops[-1].builds
        ):
            # An element that is a function of one sum (``(mul (add (sumbuild ..) bias) 0.5)``): the sum
            # is the product, the element is applied to it.
            inline = operand_sums(e)
            here = _resolve(e, lets).free
            sums = [n for n, x in steps.items() if x.op is Op.SUMBUILD and x.type is FLOAT and n in here]
            if len(sums) == 1 and len(steps) == 1 and not inline:
                operand = sums[0]
                e, elem = steps.pop(operand), _resolve(e, lets)
            elif len(inline) == 1 and not steps:
                operand = OPERAND.data
                e, elem = inline[0], _resolve(replace_operand(e, inline[0], OPERAND), lets)
            else:
                return None
            if not _binder_free(elem) or operand not in elem.free:
                return None
        else:
            break
    if e.type is not FLOAT or not _binder_free(e):
        return None
    term = _resolve(e, lets)
    if term.op is not Op.MUL or term.size > _TERM_MOST or steps:
        return None  # (a step not followed: the nest is something else)
    reads = []
    for x in term.args:
        indexes: list[Expr] = []
        while x.op is Op.INDEX:
            indexes.append(x.args[0])
            x = x.args[1]
        if loop_vars & x.free or x.op not in (Op.VAR, Op.GET) or not indexes:
            return None
        reads.append((x, indexes[::-1]))
    used = set(term.free).union(*(x.free for _, n, i in dims for x in (n, i)), *(lp.size.free for lp in loops))
    if elem is not None:
        used |= set(elem.free) - {operand}
    if followed & used or operand in term.free:
        return None  # (a step's value read elsewhere too)
    return _Nest(loops, dims, term, (reads[0], reads[1]), dropped, elem, operand)


class _Vars:
    """The loop variables as the product's: a variable read through ``(div v D)`` is split into
    ``v = D vh + vl``; each new variable's count and the loop it comes from."""

    def __init__(self, nest: _Nest, fresh: Callable[[str], str]) -> None:
        self.count: dict[str, Expr] = {}
        self.origin: dict[str, _Loop] = {}
        self.form: dict[str, AffineForm] = {}  # an original variable as a form over the new ones
        self.value: dict[str, Expr] = {}  # an original variable as an expression of the new ones
        self.ok = True
        splits: dict[str, int] = {}
        names = {lp.var for lp in nest.loops}
        for x in (y for z in (nest.term, *(i for _, _, i in nest.dims)) for y in distinct_nodes(z)):
            if x.op is Op.DIV and x.args[0].op is Op.VAR and x.args[0].data in names and x.args[1].op is Op.CONST:
                d = x.args[1].data
                if not isinstance(d, int) or d <= 0 or splits.setdefault(x.args[0].data, d) != d:
                    self.ok = False
        for lp in nest.loops:
            d = splits.get(lp.var)
            if d is None:
                v = fresh(lp.var)
                self.count[v], self.origin[v], self.form[lp.var] = lp.size, lp, {v: 1}
                self.value[lp.var] = E.var(v, INTEGER)
                continue
            n = lp.size.data if lp.size.op is Op.CONST else None
            if not isinstance(n, int) or n % d:
                self.ok = False
                continue
            hi, lo = fresh(lp.var + "_h"), fresh(lp.var + "_l")
            self.count[hi], self.count[lo] = E.const(n // d), E.const(d)
            self.origin[hi] = self.origin[lo] = lp
            self.form[lp.var] = {hi: d, lo: 1}
            self.value[lp.var] = E.op(Op.ADD, E.op(Op.MUL, E.var(hi, INTEGER), E.const(d)), E.var(lo, INTEGER))

    def affine(self, e: Expr) -> AffineForm | None:
        """``e`` (an Integer index) as a form over the new variables, or None where it is not one."""
        if e.op is Op.VAR:
            return dict(self.form[e.data]) if e.data in self.form else None
        if e.op is Op.CONST:
            return {"": e.data} if isinstance(e.data, int) and not isinstance(e.data, bool) else None
        if e.op in (Op.ADD, Op.SUB):
            a, b = self.affine(e.args[0]), self.affine(e.args[1])
            if a is None or b is None:
                return None
            sign = 1 if e.op is Op.ADD else -1
            for k, c in b.items():
                a[k] = a.get(k, 0) + sign * c
            return {k: c for k, c in a.items() if c}
        if e.op is Op.MUL:
            a, b = self.affine(e.args[0]), self.affine(e.args[1])
            if a is None or b is None:
                return None
            if set(a) <= {""}:
                a, b = b, a
            if not set(b) <= {""}:
                return None
            c = b.get("", 0)
            return {k: x * c for k, x in a.items() if x * c}
        if e.op is Op.DIV and e.args[1].op is Op.CONST:
            a, d = self.affine(e.args[0]), e.args[1].data
            if a is None or not isinstance(d, int) or d <= 0 or any(c < 0 for c in a.values()):
                return None
            whole = {k: c // d for k, c in a.items() if k and c % d == 0}
            rest = {k: c for k, c in a.items() if not k or c % d}
            top = 0  # the rest's largest value (every term non-negative): below d, the quotient is whole's
            for k, c in rest.items():
                n = c if not k else (self.count[k].data if self.count[k].op is Op.CONST else None)
                if not isinstance(n, int):
                    return None
                top += c if not k else c * (n - 1)
            return whole if top < d else None
        return None


def _all_hold(loops: list[_Loop], cond: Expr) -> Expr:
    """``cond`` at every iteration of ``loops`` (outermost first), counted."""
    count: Expr = E.op(Op.IF, cond, E.const(0), E.const(1))
    for lp in reversed(loops):
        count = E.sumbuild(lp.size, E.var(lp.var, INTEGER), count)
    return E.op(Op.EQ, count, E.const(0))


def _safe(rhs: Expr, reads: set[int]) -> bool:
    """Whether a dropped let computes only what the new code reads too, sizes of it, integer arithmetic."""
    for x in distinct_nodes(rhs):
        if id(x) in reads or x.op in (Op.VAR, Op.CONST, Op.SIZE):
            continue
        if x.type is not INTEGER or x.op not in (Op.ADD, Op.SUB, Op.MUL, Op.DIV):
            return False
        if x.op is Op.DIV and (x.args[1].op is not Op.CONST or x.args[1].data == 0):
            return False
    return True


def _layout(indexes: list[AffineForm], batch: list[str], row: str, term: str) -> bool:
    """Whether an operand's indexes are exactly ``[batch...][row][term]``."""
    want = [*batch, row, term]
    return len(indexes) == len(want) and all(f == {v: 1} for f, v in zip(indexes, want, strict=True))


def _read(matrix: Expr, names: list[str]) -> Expr:
    for v in names:
        matrix = E.op(Op.INDEX, E.var(v, INTEGER), matrix)
    return matrix


def batched_product(e: Expr, fresh: Callable[[str], str], sizes: StaticSizes | None = None) -> tuple[Expr, Expr] | None:
    """``e`` (a build or a sum of vectors) rewritten as a batched product in the blocked nest's shape
    (see the module docstring): the new expression and the product's nest in it; None where ``e`` is
    no batched product, or one in that shape already.  A check that ``sizes`` proves is not made;
    where none is left, the nest as written is not kept as a fallback."""
    known = sizes or StaticSizes(e)
    nest = _read_nest(e)
    if nest is None:
        return None
    # A count that an outer loop variable chooses (a row's length) is taken at the first iteration,
    # checked the same at every other (below).
    written = nest.loops
    zeros = {lp.var: E.const(0) for lp in written}
    nest.loops = [dataclasses.replace(lp, size=_substitute(lp.size, zeros)) for lp in written]
    nv = _Vars(nest, fresh)
    if not nv.ok:
        return None
    forms = []
    for _, indexes in nest.reads:
        fs = [nv.affine(x) for x in indexes]
        if any(f is None for f in fs):
            return None
        forms.append([f for f in fs if f is not None])
    # The output's indexes: a build's own variables; a one-hot's index, one variable of a sum.
    dims: list[list[tuple[str, int]]] = []
    deltas: list[tuple[Expr, str]] = []  # (length, the variable it must count)
    for kind, size, x in nest.dims:
        if kind == "build":
            f = nv.form[x.data]
        else:
            g = nv.affine(x)
            if g is None or len(g) != 1 or "" in g or next(iter(g.values())) != 1:
                return None
            v = next(iter(g))
            if nv.origin[v].builds:
                return None
            f = g
            deltas.append((size, v))
        dims.append(sorted(f.items(), key=lambda kv: -kv[1]))
    out = [v for d in dims for v, _ in d]
    if len(set(out)) != len(out):
        return None
    xv = {v for f in forms[0] for v in f if v}
    yv = {v for f in forms[1] for v in f if v}
    outs = set(out)
    batch_set, rows, cols = outs & xv & yv, (outs & xv) - yv, (outs & yv) - xv
    summed = set(nv.count) - outs
    if not rows or not cols or not summed or outs - xv - yv or summed - (xv & yv):
        return None
    row_vars, col_vars = [v for v in out if v in rows], [v for v in out if v in cols]
    by_x = [v for f in forms[0] for v, _ in sorted(f.items(), key=lambda kv: -kv[1]) if v in summed]
    sum_vars = list(dict.fromkeys(by_x))
    # A product with no batch only where its output is laid out otherwise (heads), its indexes not
    # windows (an output's and a summed variable together: a convolution's, cpp_backend.convolutions).
    window = any(set(f) & outs and set(f) & summed for fs in forms for f in fs)
    in_rows = out in ([*row_vars, *col_vars], [*col_vars, *row_vars])
    if not batch_set and (deltas or window or in_rows or any(nv.origin[v].vector for v in summed)):
        return None
    # The batch in the order of the first operand's indexes where they are its variables, else the output's.
    order = [next(iter(f)) for f in forms[0] if len(f) == 1 and "" not in f and next(iter(f)) in batch_set]
    batch = order if sorted(order) == sorted(batch_set) else [v for v in out if v in batch_set]
    evaluated = [nest.term, *(n for _, n, _ in nest.dims), *([nest.elem] if nest.elem is not None else [])]
    reads_ids = {id(x) for y in evaluated for x in distinct_nodes(y)}
    if not all(_safe(r, reads_ids) for r in nest.dropped):
        return None
    decode: dict[str, Expr] = {}  # a variable of a group of rows, columns or terms, from the group's
    row, col, j = (_group(vs, nv.count, decode, fresh) for vs in (row_vars, col_vars, sum_vars))
    direct_a = _layout(forms[0], batch, row, j)
    direct_b = _layout(forms[1], batch, j, col)
    identity = all(len(d) == 1 for d in dims) and out == [*batch, row, col]
    if identity and not deltas:
        return None  # the blocked nest's loops already: an operand read down a column is transposed per batch

    lets: list[tuple[Expr, Expr]] = []
    values = {v: _substitute(x, decode) for v, x in nv.value.items()}

    def operand(k: int, layout: list[str], direct: bool) -> Expr:
        matrix, _ = nest.reads[k]
        if direct:
            return matrix
        copy = E.var(fresh("ks$bop"), _vec_type(len(layout)))
        body = _substitute(nest.term.args[k], values)
        for v in reversed(layout):
            body = E.build(nv.count[v], E.var(v, INTEGER), body)
        lets.append((copy, body))
        return copy

    a = operand(0, [*batch, row, j], direct_a)
    b = operand(1, [*batch, j, col], direct_b)
    term = E.op(Op.MUL, _read(a, [*batch, row, j]), _read(b, [*batch, j, col]))
    product: Expr = E.sumbuild(nv.count[j], E.var(j, INTEGER), term)
    for v in reversed([*batch, row, col]):
        product = E.build(nv.count[v], E.var(v, INTEGER), product)
    if identity and nest.elem is None:
        fast: Expr = product
    else:
        c = E.var(fresh("ks$bmm"), _vec_type(len(batch) + 2))
        lets.append((c, product))
        value: dict[str, Expr] = {}
        dvars = []
        for d in dims:
            dv = E.var(fresh("ks$bo"), INTEGER)
            dvars.append(dv)
            if len(d) == 1:
                value[d[0][0]] = dv
            elif len(d) == 2 and d[1][1] == 1 and nv.count[d[1][0]].op is Op.CONST:
                (hi, w), (lo, _) = d
                q = E.op(Op.DIV, dv, E.const(w))
                value[hi], value[lo] = q, E.op(Op.SUB, dv, E.op(Op.MUL, q, E.const(w)))
            else:
                return None
        for grouped, vs in ((row, row_vars), (col, col_vars)):
            if grouped not in value:
                at = value[vs[0]]
                for v in vs[1:]:
                    at = E.op(Op.ADD, E.op(Op.MUL, at, nv.count[v]), value[v])
                value[grouped] = at
        body = c
        for v in [*batch, row, col]:
            body = E.op(Op.INDEX, value[v], body)
        if nest.elem is not None:  # the element around the sum, its loop variables the output's
            loop_values = {v: _substitute(x, value) for v, x in nv.value.items()}
            body = _substitute(nest.elem, {**loop_values, nest.operand: body})
        for d, dv in reversed(list(zip(dims, dvars, strict=True))):
            size = nv.count[d[0][0]]
            for v, _ in d[1:]:
                size = _times(size, nv.count[v])
            body = E.build(size, dv, body)
        fast = body
    fast = wrap_lets(lets, fast)
    checks: list[Expr] = []
    for lp in nest.loops:  # every loop runs (outermost first: a count is evaluated where the original does)
        if not known.holds(E.op(Op.GT, lp.size, E.const(0))):
            checks.append(E.op(Op.GT, lp.size, E.const(0)))
    for lp, as_written in zip(nest.loops, written, strict=True):
        if as_written.size is not lp.size and not known.holds(E.op(Op.EQ, as_written.size, lp.size)):
            around = [x for x in nest.loops if x.var in as_written.size.free]
            checks.append(_all_hold(around, E.op(Op.EQ, as_written.size, lp.size)))
    for length, v in deltas:  # a one-hot's length is its variable's count wherever it is evaluated
        want = nv.count[v]
        cond = E.op(Op.EQ, length, want)
        if length is want or known.holds(cond):
            continue
        around = [lp for lp in nest.loops if lp.var in length.free]
        checks.append(_all_hold(around, cond) if around else cond)
    if not checks:
        return fast, product
    cond = checks[0]
    for x in checks[1:]:
        cond = E.op(Op.AND, cond, x)
    return E.op(Op.IF, cond, fast, e), product


def _times(a: Expr, b: Expr) -> Expr:
    whole = a.op is Op.CONST and b.op is Op.CONST
    return E.const(a.data * b.data) if whole else E.op(Op.MUL, a, b)


def _group(vs: list[str], count: dict[str, Expr], decode: dict[str, Expr], fresh: Callable[[str], str]) -> str:
    """One variable for the variables ``vs`` (rows, columns or terms: the first varying slowest), its
    count added to ``count`` and each member's value from it to ``decode``; the variable itself if one."""
    if len(vs) == 1:
        return vs[0]
    g = fresh("ks$bg")
    gv = E.var(g, INTEGER)
    stride: Expr = E.const(1)
    for k in range(len(vs) - 1, -1, -1):
        n = count[vs[k]]
        at = gv if stride.op is Op.CONST and stride.data == 1 else E.op(Op.DIV, gv, stride)
        decode[vs[k]] = at if k == 0 else E.op(Op.SUB, at, E.op(Op.MUL, E.op(Op.DIV, at, n), n))
        stride = _times(stride, n)
    count[g] = stride
    return g


def _vec_type(depth: int) -> Type:
    t = FLOAT
    for _ in range(depth):
        t = vec(t)
    return t


def _substitute(e: Expr, value: dict[str, Expr]) -> Expr:
    """The binder-free ``e`` with the loop variables replaced by their expressions in the new ones."""
    if e.op is Op.VAR:
        return value.get(e.data, e)
    if not e.args:
        return e
    return e.replace_args(tuple(_substitute(a, value) for a in e.args))


__all__ = ["batched_product"]
