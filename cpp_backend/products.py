"""Matrix products in any of their written shapes, rewritten into the one the blocked loop nest computes.

The emitter computes one shape of product with a register-blocked loop nest (:mod:`cpp_backend.emit_rows`; ``emit.py``, Loops):

    (build n (lam i (build m (lam k (sumbuild p (lam j (mul (index j (index i A)) (index k (index j B))))))))))

C[i][k] = sum_j A[i][j] B[j][k], both operands walked along their rows.  Gradients write their products
otherwise: x^T W and W^T dy read an operand down a column, dX = dY W^T is a sum over k of scaled rows
(a sum of vectors), dW accumulates outer products over a batch.  This pass, run over a def's body
before emission, recognises them with patterns (:mod:`cpp_backend.patterns`: alternates for which
operand walks rows or columns and in which order the product is written, guards for the loop
variables and loop-invariance) and rewrites each into the shape above:

- ``transpose``: an operand read down a column (``(index i (index j A))``) is read from a transposed
  copy made once, before the loops (O(n^2) against the product's O(n^3)); the copy holds exactly
  the elements the product reads (an empty copy where the loops run no term), so the same reads
  fail.  The terms and their order are unchanged: the sums are the same to the bit.
- ``interchange``: a sum of vectors of Float terms, ``(sumbuild p (lam j (build m (lam k e))))``
  (through lets, nested builds, and an enclosing ``build``), becomes a vector of sums,
  ``(build m (lam k (sumbuild p (lam j e))))``, when ``p > 0`` (a sum of no vectors fails, as before).
  Each element adds the same terms in the same order, but from +0.0 where the vector sum starts
  from its first term: a sum of terms that are all -0.0 gives +0.0.  So it is not done under
  ``KS_EXACT_ORDER`` (``exact_order``), which keeps the interpreter's result to the bit.

Before these, a product computed row by row inside a let is hoisted into a matrix computed before the
rows (:mod:`cpp_backend.row_lets`), and identical hoisted matrices are computed once.

Sizes that the rewrite evaluates again (in a guard or a copy's size) must be small pure expressions.
"""

from __future__ import annotations

from collections.abc import Callable

from cpp_backend.col2im import factor_plain_sums
from cpp_backend.convolutions import guarded
from cpp_backend.element_sums import operand_sums, replace_operand
from cpp_backend.let_chains import peel_lets, wrap_lets
from cpp_backend.patterns import Bound, Cap, Captures, Pat, Where, alt, first, match, node
from cpp_backend.row_dots import row_dots
from cpp_backend.row_lets import LOOPING, straight_line
from cpp_backend.scatters import gather_one_hots, one_hots_inside
from cpp_backend.shared_terms import share_repeats
from knossos import expr as E
from knossos.expr import Expr, distinct_nodes, names_in
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER, Kind, Type, vec

#: The names of the matrices hoisted out of rows (cpp_backend.row_lets).
ROWS_PREFIX = "ks$rows"
#: A size expression evaluated again by a rewrite has at most this many nodes.
_SMALL = 8
#: A product's term (and a let's right-hand side moved into one) has at most this many nodes: the
#: walks over them recurse, and a product's term is small.
_TERM_MAX = 400


def small(e: Expr) -> bool:
    return e.size <= _SMALL and straight_line(e)


def _i(n: int) -> Expr:
    return E.const(n)


# -- transpose: operands walked down a column -------------------------------------------------------
def _made(name: str, other: str) -> Pat:
    """An operand computed element by element (a gradient's ``dy * (1 - h * h)``), depending on no loop
    variable but its own two: ``other``, the other operand's own variable, is not free in it."""

    def guard(b: Captures) -> bool:
        x, v = b[name], b[other]
        assert isinstance(x, Expr)
        return x.type is FLOAT and v not in x.free and x.op is not Op.CONST and straight_line(x)

    return Where(Cap(name), guard)


_LEFT = alt(
    "a",
    rows=node(Op.INDEX, Bound("j"), node(Op.INDEX, Bound("i"), Cap("A"))),
    cols=node(Op.INDEX, Bound("i"), node(Op.INDEX, Bound("j"), Cap("A"))),
    made=_made("A", "k"),
)
_RIGHT = alt(
    "b",
    rows=node(Op.INDEX, Bound("k"), node(Op.INDEX, Bound("j"), Cap("B"))),
    cols=node(Op.INDEX, Bound("j"), node(Op.INDEX, Bound("k"), Cap("B"))),
    made=_made("B", "i"),
)
#: The term of a product: its two reads in either order.
TERM = alt("order", ab=node(Op.MUL, _LEFT, _RIGHT), ba=node(Op.MUL, _RIGHT, _LEFT))


def _nest_guard(b: Captures) -> bool:
    """Three distinct loop variables; sizes small; the terms' count invariant of the columns."""
    i, k, j = b["i"], b["k"], b["j"]
    n, m, p = (b[x] for x in "nmp")
    assert isinstance(n, Expr) and isinstance(m, Expr) and isinstance(p, Expr)
    return len({i, j, k}) == 3 and k not in p.free and j not in m.free and all(small(x) for x in (n, m, p))


#: The loop nest of a product: rows i, columns k, terms j; the term ``e`` (checked by :data:`TERM`).
NEST: Pat = Where(
    node(
        Op.BUILD,
        Cap("n"),
        Bound("i"),
        node(Op.BUILD, Cap("m"), Bound("k"), node(Op.SUMBUILD, Cap("p"), Bound("j"), Cap("e"))),
    ),
    _nest_guard,
)

#: The same nest where the sum is an operand of each element (``(add (index k bias) (sumbuild ...))``).
NEST_OPERAND: Pat = node(Op.BUILD, Cap("n"), Bound("i"), node(Op.BUILD, Cap("m"), Bound("k"), Cap("elem")))


def _operand_sum(elem: Expr) -> Expr | None:
    """The first Float sum that evaluating ``elem`` evaluates whatever the values (see
    :func:`cpp_backend.element_sums.operand_sums`), or None."""
    sums = operand_sums(elem)
    return sums[0] if sums else None


_ZERO = Where(Cap("zero"), lambda b: isinstance(b["zero"], Expr) and b["zero"].op is Op.CONST and b["zero"].data == 0.0)
#: A term, or a term of columns below a bound ``S`` (a gradient's read of a shorter vector, padded).
PADDED = alt("pad", plain=TERM, below=node(Op.IF, node(Op.LT, Bound("k"), Cap("S")), TERM, _ZERO))

#: ``(size (index v M))``: the length of a row of ``M`` that a loop variable chooses.
ROW_SIZE = node(Op.SIZE, node(Op.INDEX, Bound("v"), Cap("M")))


def _resolve(e: Expr, lets: dict[str, Expr]) -> Expr:
    """``e`` (binder-free) with the variables of ``lets`` replaced by their (resolved) right-hand sides."""
    if e.op is Op.VAR:
        return lets.get(e.data, e)
    if not e.args or e.size > _TERM_MAX:
        return e  # (too large to walk recursively: left as it is, and so refused by the guards)
    return e.replace_args(tuple(_resolve(a, lets) for a in e.args))


def _unwrap(e: Expr) -> Expr:
    """``(let (x r) x)`` is ``r`` (through a chain: the last let's variable as the chain's value)."""
    lets, body = peel_lets(e)
    while lets and body.op is Op.VAR and body.data == lets[-1][0].data and body.data not in lets[-1][1].free:
        body = lets.pop()[1]
        more, body = peel_lets(body)
        lets += more
    return wrap_lets(lets, body)


def _pick_branch(e: Expr, resolved: dict[str, Expr]) -> Expr | None:
    """The branch that ``(if (eq a b) X Y)`` takes whatever ``a`` and ``b`` (atoms): ``X`` where they are
    the same expression; ``Y`` where it is ``X`` padded, ``X`` = ``(build a (lam k t))`` and ``Y`` =
    ``(build b (lam k (if (lt k a) t 0.0)))`` (a gradient's cotangent of a vector that a loop of
    ``a`` reads: equal to ``X`` when a = b).  None otherwise."""
    cond, x, y = e.args
    if cond.op is not Op.EQ or not all(small(a) for a in cond.args):
        return None  # (atoms, or small terms where a search inlined a size: ``(eq 768 (size t))``)
    ra, rb = (_resolve(a, resolved) for a in cond.args)
    if ra is rb:
        return x
    x, y = _unwrap(x), _unwrap(y)
    if x.op is not Op.BUILD or y.op is not Op.BUILD or x.args[1] is not y.args[1]:
        return None
    if max(x.args[0].size, y.args[0].size) > _TERM_MAX:
        return None
    sx, sy = _resolve(x.args[0], resolved), _resolve(y.args[0], resolved)
    if {id(sx), id(sy)} != {id(ra), id(rb)}:
        return None
    pad = _unwrap(y.args[2])
    if (
        pad.op is Op.IF
        and pad.args[0].op is Op.LT
        and pad.args[0].args[0] is x.args[1]
        and _resolve(pad.args[0].args[1], resolved) is sx
        and _same_term(pad.args[1], x.args[2])
        and pad.args[2].op is Op.CONST
        and pad.args[2].data == 0.0
    ):
        return y
    return None


def _gathered_first(lets: list[tuple[Expr, Expr]], body: Expr) -> tuple[list[tuple[Expr, Expr]], Expr]:
    """``(let (x X) (if test x Y))`` as ``(if test X Y)`` (``Y`` may read ``x``: a gradient's gather
    ``X``, then its copy padded to the vector's size where the loop does not cover it): the size test's
    first branch is then ``X`` itself, for :func:`_branch_checked`.  Other lets and bodies unchanged."""
    if not lets or body.op is not Op.IF:
        return lets, body
    x, rhs = lets[-1]
    cond, then, other = body.args
    if then is not x or x.data in cond.free or straight_line(rhs):
        return lets, body
    return lets[:-1], body.replace_args((cond, rhs, other))


def _branch_checked(e: Expr, resolved: dict[str, Expr], loops: list[tuple[Expr, Expr]]) -> tuple[Expr, Expr] | None:
    """A size test ``(if (eq a b) X Y)`` of small terms as (a check, ``X``): the check holds where the
    test is true at every iteration of ``loops`` (the enclosing builds and sums, outermost first), and
    then ``X`` is the branch taken throughout; the caller runs the original where it fails.  A
    gradient's padded branch whose else is a zero vector (a row of a weight matrix) is this case."""
    cond = e.args[0]
    if cond.op is not Op.EQ or not all(small(a) for a in cond.args) or e.args[1].type.kind is not Kind.VEC:
        return None
    test = E.op(Op.EQ, *(_resolve(a, resolved) for a in cond.args))
    if not small(test):
        return None
    bound = {v.data for _, v in loops}
    return (_all_hold(loops, test) if bound & test.free else test), e.args[1]


def _same_term(a: Expr, b: Expr) -> bool:
    """Whether ``a`` and ``b`` are one term, or the same loop-free term once their lets are inlined
    (a search may have substituted a let in one copy of an element and not in the other)."""
    if a is b:
        return True
    if max(a.size, b.size) > _TERM_MAX:
        return False
    ia, ib = _inline(a, {}, []), _inline(b, {}, [])
    return ia is not None and ia is ib


def _inline(e: Expr, lets: dict[str, Expr], rhss: list[Expr]) -> Expr | None:
    """The loop-free term ``e`` with its lets (and those of ``lets``) inlined; every let's inlined
    right-hand side is added to ``rhss``.  None where ``e`` binds anything but lets."""
    if e.op is Op.LET:
        if not straight_line(e.args[1]):
            return None
        rhs = _inline(e.args[1], lets, rhss)
        if rhs is None:
            return None
        rhss.append(rhs)
        return _inline(e.args[2], {**lets, e.args[0].data: rhs}, rhss)
    if e.op is Op.VAR:
        return lets.get(e.data, e)
    if e.op in LOOPING or (e.op not in (Op.INDEX, Op.VAR, Op.SIZE, Op.GET) and e.type.kind in (Kind.VEC, Kind.TUPLE)):
        return None
    if not e.args:
        return e
    args = []
    for a in e.args:
        x = _inline(a, lets, rhss)
        if x is None:
            return None
        args.append(x)
    return e.replace_args(tuple(args))


def _scale_inside(term: Expr, loop_vars: set[str]) -> Expr:
    """``(mul (mul x y) s)`` (or ``(mul s (mul x y))``), ``s`` invariant of the loops, as ``(mul x (mul y
    s))``: a product scaled in its term (a gradient's ``alpha`` of ``alpha A B``) with the scale in an
    operand that :data:`TERM` takes as computed (``made``: scaled once per element, before the loops);
    also as the first branch of a padded term.  The product rounds otherwise: not under exact order."""
    if term.op is Op.IF:
        inner = _scale_inside(term.args[1], loop_vars)
        return term if inner is term.args[1] else term.replace_args((term.args[0], inner, term.args[2]))
    if term.op is not Op.MUL:
        return term
    a, b = term.args
    prod, scale = (a, b) if a.op is Op.MUL and not loop_vars & b.free else (b, a)
    if prod.op is not Op.MUL or loop_vars & scale.free:
        return term
    x, y = prod.args
    if not (loop_vars & x.free and loop_vars & y.free):
        return term
    return E.op(Op.MUL, x, E.op(Op.MUL, y, scale))


def _subterms(e: Expr) -> set[int]:
    return {id(x) for x in distinct_nodes(e)}


class ProductNames:
    """Fresh variable names for the copies, none of them used anywhere in the def; the fallbacks."""

    def __init__(self, root: Expr, *, exact_order: bool = False) -> None:
        self.used = set(names_in(root)) | set(root.free)
        #: Only the rewrites that keep every sum to the bit (KS_EXACT_ORDER).
        self.exact_order = exact_order
        #: Originals kept as the fallback of a guarded rewrite: not rewritten again (kept alive: ids).
        self.fallbacks: dict[int, Expr] = {}

    def fresh(self, base: str) -> str:
        k = 0
        while f"{base}{k}" in self.used:
            k += 1
        self.used.add(f"{base}{k}")
        return f"{base}{k}"


class _Rectangular:
    """Row lengths that loop variables choose, assumed equal to the first row's: the checks that make
    it so (each cannot fail: it reads only rows that exist), and the assumed lengths."""

    def __init__(self) -> None:
        self.checks: list[Expr] = []
        self.width: dict[str, Expr] = {}

    def assume(self, size: Expr, var: str, count: Expr) -> Expr | None:
        """``size``, ``(size (index var M))`` for ``var`` below ``count``, as M's first row's length
        under the check that rows 0..count-1 exist, there is one, and all have that length."""
        b = first(ROW_SIZE, size, given={"v": var})
        if b is None:
            return None
        m = b["M"]
        assert isinstance(m, Expr)
        if m.op is not Op.VAR:
            return None
        w = self.width.get(m.data)
        if w is None:
            w = E.op(Op.SIZE, E.op(Op.INDEX, _i(0), m))
            self.width[m.data] = w
        v = E.var(var, INTEGER)
        rows_differ = E.sumbuild(
            count, v, E.op(Op.IF, E.op(Op.EQ, E.op(Op.SIZE, E.op(Op.INDEX, v, m)), w), _i(0), _i(1))
        )
        exists = E.op(Op.AND, E.op(Op.GT, count, _i(0)), E.op(Op.LTE, count, E.op(Op.SIZE, m)))
        self.checks.append(E.op(Op.AND, exists, E.op(Op.EQ, rows_differ, _i(0))))
        return w

    def guard(self, fast: Expr, original: Expr) -> Expr:
        if not self.checks:
            return fast
        cond = self.checks[-1]
        for c in reversed(self.checks[:-1]):
            cond = E.op(Op.AND, c, cond)
        return E.op(Op.IF, cond, fast, original)


def transpose(e: Expr, names: ProductNames) -> Expr | None:
    """``e`` (a :data:`NEST`) with every operand that its term reads down a column read from a
    transposed copy, or None where it is no product or already in the blocked nest's shape.

    Row lengths chosen by the row or term variable (a gradient's sizes, ``(size (index i x))``) are
    taken as the first row's under a check (:class:`_Rectangular`), the original nest computing
    otherwise; so is a term padded with zeros past such a length (``(if (lt k S) term 0.0)``)."""
    b = first(NEST, e)
    elem: Expr | None = None
    if b is None:
        b = first(NEST_OPERAND, e)
        elem = None if b is None else _operand_sum(b["elem"])  # type: ignore[arg-type]
        if b is None or elem is None:
            return None
        b = {**b, "p": elem.args[0], "j": elem.args[1].data, "e": elem.args[2]}
        if not _nest_guard(b):
            return None
    body = b["e"]
    assert isinstance(body, Expr)
    i, k, j = (str(b[x]) for x in "ikj")
    n, m, p = (b[x] for x in "nmp")
    assert isinstance(n, Expr) and isinstance(m, Expr) and isinstance(p, Expr)
    whole = b.get("elem", body)
    assert isinstance(whole, Expr)
    if body.type is not FLOAT or whole.size > _TERM_MAX:
        return None
    rhss: list[Expr] = []
    core = _inline(body, {}, rhss)
    if core is None:
        return None
    loop_vars = {i, j, k}
    if not names.exact_order:
        core = _scale_inside(core, loop_vars)

    def invariant(x: Captures) -> bool:
        """The matrices read are loop-invariant (an operand computed in the loops has its guard)."""
        a, m = x["A"], x["B"]
        assert isinstance(a, Expr) and isinstance(m, Expr)
        return not loop_vars & ((a.free if x["a"] != "made" else set()) | (m.free if x["b"] != "made" else set()))

    t = next((x for x in match(PADDED, core, given={"i": i, "j": j, "k": k}) if invariant(x)), None)
    if t is None:
        return None
    # Lets are dropped: each must compute what the new code reads too (the term, the sizes, the checks
    # of row lengths), failing alike, or read a variable.
    reads = _subterms(core) | _subterms(n) | _subterms(m) | _subterms(p)

    def kept(r: Expr) -> bool:
        """Read by the new code, a variable or its size, or Float arithmetic on those (which cannot fail:
        a product of a scaled term, its scale moved, no longer has its first product as a subterm)."""
        if id(r) in reads or r.op is Op.VAR or (r.op is Op.SIZE and r.args[0].op is Op.VAR):
            return True
        return r.op in (Op.MUL, Op.ADD, Op.SUB) and r.type is FLOAT and all(kept(a) for a in r.args)

    if not all(kept(r) for r in rhss):
        return None
    rect = _Rectangular()
    if i in m.free:
        w = rect.assume(m, i, n)
        if w is None:
            return None
        m = w
    if i in p.free:
        w = rect.assume(p, i, n)
        if w is None:
            return None
        p = w
    if t["pad"] == "below":  # k < m <= every row's length that S is
        s = t["S"]
        assert isinstance(s, Expr)
        w = rect.assume(s, j, p) if j in s.free else s
        if w is None or loop_vars & w.free:
            return None
        if w is not m:
            rect.checks.append(E.op(Op.LTE, m, w))
    if (t["a"], t["b"]) == ("rows", "rows") and not rect.checks:
        return None
    a_mat, b_mat = t["A"], t["B"]
    assert isinstance(a_mat, Expr) and isinstance(b_mat, Expr)
    iv, kv = e.args[1], e.args[2].args[1]
    jv = (elem if elem is not None else e.args[2].args[2]).args[1]
    # The loops read anything only when n > 0 and m > 0 (p > 0 too, which the copy's loops check).
    runs = E.op(Op.AND, E.op(Op.GT, n, _i(0)), E.op(Op.GT, m, _i(0)))
    copies: list[tuple[Expr, Expr]] = []
    if t["a"] == "cols":  # A read as A[j][i]: At[i][j], i < n, j < p
        at = E.var(names.fresh("ks$at"), a_mat.type)
        size = E.op(Op.IF, runs, n, _i(0))
        copies.append((at, E.build(size, iv, E.build(p, jv, E.op(Op.INDEX, iv, E.op(Op.INDEX, jv, a_mat))))))
        a_mat = at
    if t["a"] == "made":  # A computed from i and j: its values At[i][j], i < n, j < p, computed once
        at = E.var(names.fresh("ks$am"), vec(vec(FLOAT)))
        size = E.op(Op.IF, runs, n, _i(0))
        copies.append((at, E.build(size, iv, E.build(p, jv, share_repeats(a_mat, names.fresh)))))
        a_mat = at
    if t["b"] == "made":  # B computed from j and k: Bt[j][k], j < p, k < m
        bt = E.var(names.fresh("ks$bm"), vec(vec(FLOAT)))
        size = E.op(Op.IF, runs, p, _i(0))
        copies.append((bt, E.build(size, jv, E.build(m, kv, share_repeats(b_mat, names.fresh)))))
        b_mat = bt
    if t["b"] == "cols":  # B read as B[k][j]: Bt[j][k], j < p, k < m
        bt = E.var(names.fresh("ks$bt"), b_mat.type)
        size = E.op(Op.IF, runs, p, _i(0))
        copies.append((bt, E.build(size, jv, E.build(m, kv, E.op(Op.INDEX, jv, E.op(Op.INDEX, kv, b_mat))))))
        b_mat = bt
    left = E.op(Op.INDEX, jv, E.op(Op.INDEX, iv, a_mat))
    right = E.op(Op.INDEX, kv, E.op(Op.INDEX, jv, b_mat))
    term = E.op(Op.MUL, left, right) if t["order"] == "ab" else E.op(Op.MUL, right, left)
    new_sum = E.sumbuild(p, jv, term)
    if elem is not None:  # the sum was an operand: the element around it stays
        if (t["a"], t["b"]) == ("rows", "rows") and not rect.checks:
            return None  # (the emitter blocks it as it is)
        outer = b["elem"]
        assert isinstance(outer, Expr)
        new_sum = replace_operand(outer, elem, new_sum)
    fast = wrap_lets(copies, E.build(n, iv, E.build(m, kv, new_sum)))
    names.fallbacks[id(e)] = e
    return rect.guard(fast, e)


# -- interchange: a sum of vectors becomes a vector of sums -----------------------------------------
def _zero(t: Type, index: Expr) -> Expr:
    """A value of type ``t`` (its vectors empty): the body of a sum that runs no iteration."""
    if t.kind is Kind.VEC:
        return E.build(_i(0), index, _zero(t.children[0], index))
    return E.const(0.0) if t is FLOAT else E.const(0)


def _all_hold(loops: list[tuple[Expr, Expr]], cond: Expr) -> Expr:
    """``cond`` at every iteration of the nest of builds ``loops`` (size, variable), counted."""
    count: Expr = E.op(Op.IF, cond, _i(0), _i(1))
    for size, v in reversed(loops):
        count = E.sumbuild(size, v, count)
    return E.op(Op.EQ, count, _i(0))


def interchange(e: Expr, names: ProductNames, rewrite: Callable[[Expr], Expr]) -> Expr | None:
    """A sum of vectors as a vector of sums: ``(sumbuild p (lam j LETS (build m (lam k LETS t))))``,
    ``t`` a Float term, as ``(build m (lam k (sumbuild p (lam j LETS t))))``; through lets, nested
    builds and nested sums of vectors, and where a ``build`` (and lets) encloses the sum.  A sum
    of one-hots ``(deltaVec s k v)`` over the innermost sum's ``k`` < ``q`` is the vector of
    ``(if (lt k q) v 0.0)`` for ``k`` < ``s``, where ``q <= s`` (checked; the same ``v`` are computed).
    None where ``e`` is no such sum.  ``rewrite`` is applied to the result (its products)."""
    outer: tuple[Expr, Expr] | None = None
    outer_lets: list[tuple[Expr, Expr]] = []
    s = e
    if e.op is Op.BUILD:
        outer = (e.args[0], e.args[1])
        outer_lets, s = peel_lets(_unwrap(e.args[2]))
    if s.op is not Op.SUMBUILD or s.type.kind is not Kind.VEC:
        return None
    chain: list[tuple[str, Expr, Expr]] = []  # ("let", var, rhs) | ("build" | "sum", size, var)
    resolved: dict[str, Expr] = {}
    branch_checks: list[Expr] = []  # (outermost first) that a size test takes its first branch throughout

    def add_lets(lets: list[tuple[Expr, Expr]]) -> bool:
        for v, rhs in lets:
            if rhs.size > _TERM_MAX or rhs.op is Op.LET or not straight_line(rhs):
                return False
            chain.append(("let", v, rhs))
            resolved[v.data] = _resolve(rhs, resolved)
        return True

    if not add_lets(outer_lets):
        return None
    body = s
    while True:
        lets, body = _gathered_first(*peel_lets(_unwrap(body)))
        lets, body = one_hots_inside(lets, body)
        if not add_lets(lets):
            return None
        if body.op is Op.IF:
            picked = _pick_branch(body, resolved)
            if picked is None:
                loops = ([outer] if outer is not None else []) + [(n, v) for kind, n, v in chain if kind != "let"]
                taken = _branch_checked(body, resolved, loops)
                if taken is None:
                    break  # the term's own branches
                check, picked = taken
                branch_checks.append(check)
            body = picked
        elif body.op is Op.BUILD or (body.op is Op.SUMBUILD and body.type.kind is Kind.VEC):
            if body.args[0].size > _TERM_MAX:
                return None
            size = _resolve(body.args[0], resolved)
            if not small(size):
                return None
            chain.append(("build" if body.op is Op.BUILD else "sum", size, body.args[1]))
            body = body.args[2]
        else:
            break
    builds = [(size, v) for kind, size, v in chain if kind == "build"]
    sums = [(size, v) for kind, size, v in chain if kind == "sum"]
    product_lets: list[tuple[Expr, Expr]] = []
    lets_all = [(v, rhs) for kind, v, rhs in chain if kind == "let"]
    checks = [E.op(Op.GT, size, _i(0)) for size, _ in sums]  # a sum of no vectors fails
    checks += branch_checks  # after: a test's sizes may read rows that an outer test keeps in range
    if body.op is Op.DELTAVEC and body.args[1] is sums[-1][1]:  # one-hots at the innermost sum's index
        if body.args[2].type is not FLOAT:
            return None  # one-hot rows of a matrix, not elements: no product (their gather is below a Float's)
        q, kv = sums.pop()
        width = _resolve(body.args[0], resolved)
        if not small(width):
            return None
        checks.append(_all_hold(list(builds), E.op(Op.LTE, q, width)))
        builds.append((width, kv))
        body = E.op(Op.IF, E.op(Op.LT, kv, q), body.args[2], E.const(0.0))
    elif body.op is Op.DELTAVEC and sums:  # one-hots at a shifted index (of one-hots: a matrix element)
        around = ([outer] if outer is not None else []) + [(n, v) for kind, n, v in chain if kind != "let"]
        value = body
        while value.op is Op.DELTAVEC:
            value = value.args[2]
        original = wrap_lets(lets_all, value)  # (its reads are probed, whatever computes the terms)
        factored = factor_plain_sums(body, sums, lets_all, around, names.fresh)
        if factored is not None:  # the sums the index does not use: a product first (cpp_backend.col2im)
            product_lets, body, sums, lets_all, runs = factored
            checks += runs
        gathered = gather_one_hots(body, sums, lets_all, lambda x: _resolve(x, resolved), around, names.fresh, original)
        if gathered is None:
            return None
        gather, body, probed = gathered
        if not all(small(n) for n, _ in gather):
            return None
        sums = [(n, v) for n, v in sums if v.data in body.free or v.data not in names_in(body)]
        builds += gather
        lets_all = []  # (inside the term, under the test that its summed variable is in range)
        checks += probed
    if not builds or not sums or body.type is not FLOAT or body.size > _TERM_MAX or not straight_line(body):
        return None
    names_bound = [v.data for v, _ in lets_all] + [v.data for _, v in builds] + [v.data for _, v in sums]
    if outer is not None:
        names_bound.append(outer[1].data)
    if len(set(names_bound)) < len(names_bound):
        return None
    let_names = {v.data for v, _ in lets_all}
    sum_names = {v.data for _, v in sums}
    if any(not small(size) or (let_names | {v.data for _, v in builds}) & size.free for size, _ in sums):
        return None
    if any((let_names | sum_names) & size.free for size, _ in builds):
        return None  # a length that a term decides
    if outer is not None and (outer[1].data in sums[0][0].free or not small(outer[0])):
        return None
    # A let moves inside the loops after it: none of their variables may be free in it.
    later: set[str] = set()
    for kind, _, y in reversed(chain):
        if kind == "let":
            if later & y.free:
                return None
        else:
            later.add(y.data)
    new: Expr = wrap_lets(lets_all, body)
    for size, v in reversed(sums):
        new = E.sumbuild(size, v, new)
    for size, v in reversed(builds):
        new = E.build(size, v, new)
    fallback = e
    if len(checks) == 1:  # only p > 0, and a sum of no vectors fails: any vector serves as the body
        p, jv = sums[0]
        fallback = E.sumbuild(p, jv, _zero(s.type, jv))
        if outer is not None:
            fallback = E.build(outer[0], outer[1], fallback)
    else:
        names.fallbacks[id(e)] = e
    if outer is not None:
        n, iv = outer
        new = E.build(n, iv, new)
        checks.insert(0, E.op(Op.GT, n, _i(0)))
    new = rewrite(wrap_lets(product_lets, new))
    if not has_product(new):
        dots = row_dots(new)
        if dots is None:
            names.fallbacks.pop(id(e), None)
            return None  # a vector of sums is no faster than the sum of vectors added in place
        new = dots
    out = guarded(checks, new, fallback)
    if out.op is not Op.IF:
        names.fallbacks.pop(id(e), None)
    return out


def has_product(e: Expr) -> bool:
    """Whether ``e`` has a product in the blocked nest's shape (both operands walked along rows)."""
    for x in distinct_nodes(e):
        if x.op is Op.BUILD:
            b = first(NEST, x)
            if b is None:  # the sum an operand of each element
                b = first(NEST_OPERAND, x)
                found = None if b is None else _operand_sum(b["elem"])  # type: ignore[arg-type]
                b = (
                    None
                    if b is None or found is None
                    else {**b, "p": found.args[0], "j": found.args[1].data, "e": found.args[2]}
                )
            if b is not None:
                body, m, p = b["e"], b["m"], b["p"]
                assert isinstance(body, Expr) and isinstance(m, Expr) and isinstance(p, Expr)
                if b["i"] in m.free | p.free:  # (the emitter blocks only sizes the same for every row)
                    continue
                core = _inline(body, {}, [])
                given = {v: b[v] for v in "ijk"}
                if core is not None and any(t["a"] == t["b"] == "rows" for t in match(TERM, core, given=given)):
                    return True
    return False


__all__ = ["NEST", "TERM", "ProductNames", "has_product", "interchange", "small", "transpose"]
