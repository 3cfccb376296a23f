"""Rules for reverse-mode code: scatters become gathers, sums split and sink, one-hot sums collapse.

Not in the paper's tables.  ksc's reverse mode writes a gradient as a sum, over every loop index of
the primal, of a tuple of one-hot (``deltaVec``) contributions.  Evaluated as written that costs the
size of the whole gradient per iteration.  A compiler writer would turn the sum of one-hot terms
into a build that gathers; these rules are the steps of that, each meaning-preserving on its own:

* ``sumbuild_tuple_split``: a sum of tuples is a tuple of sums, each projected (``get$i`` pushed
  through lets, ifs, adds and inner sums, and the lets it no longer needs dropped);
* ``let_into_deltavec``, ``sumbuild_let_out``, ``build_let_out``: lets sink into one-hot values and
  float out of loops that do not depend on them, so that sums meet the deltaVecs they sum;
* ``if_zero_inward``: an ``if`` with an all-zero branch moves into one-hot values and builds;
* ``sumbuild_swap``: two nested sums swap, so that the one a one-hot index inverts best is inside;
* ``sumbuild_of_onehot``: ``sum_x deltaVec m x e`` is ``build m (x -> e)``;
* ``sumbuild_of_shifted_onehot``: ``sum_x deltaVec m (x + c) e`` is a build whose element ``y``
  is ``e`` at ``x = y - c`` when that is in range (the index inverted);
* ``sumbuild_of_if_eq``: ``sum_x (if x + c == j then e else 0)`` is ``e`` at ``x = j - c`` when
  that is in range;
* ``sumbuild_of_let_build``: a sum over a build moves inside it, with the cheap lets between them;
* ``let_substitute``: a let whose value is cheap (no loop) is inlined everywhere at once.

Index arithmetic is Integer arithmetic, so inverting ``x + c`` (coefficient +1 or -1) is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from knossos import expr as E
from knossos.expr import Expr, names_in
from knossos.ops import Op
from knossos.substitution import fresh_name, substitute
from knossos.types import FLOAT, INTEGER, Kind
from rules.pattern import Bindings
from rules.rule import Rewrite, Rule, Site, builds, condition, not_free, rule
from rules.vectors import SUMS_REORDERED
from rules.zeros import all_zeros, is_zero

GRADIENT_TABLE = [
    rule(
        "let_into_deltavec",
        "(let (?v ?e) (deltaVec ?n ?i ?b))",
        "(deltaVec ?n ?i (let (?v ?e) ?b))",
        not_free("?v", "?n"),
        not_free("?v", "?i"),
        strict=True,
    ),
    rule(
        "sumbuild_let_out",
        "(sumbuild ?n (lam ?x (let (?v ?e) ?b)))",
        "(let (?v ?e) (sumbuild ?n (lam ?x ?b)))",
        not_free("?x", "?e"),
        not_free("?v", "?n"),
        condition("distinct_names", lambda x, v: x.data != v.data, "?x", "?v"),
        domain="n >= 1 (e is now evaluated even when the sum is empty)",
    ),
    rule(
        "build_let_out",
        "(build ?n (lam ?x (let (?v ?e) ?b)))",
        "(let (?v ?e) (build ?n (lam ?x ?b)))",
        not_free("?x", "?e"),
        not_free("?v", "?n"),
        condition("distinct_names", lambda x, v: x.data != v.data, "?x", "?v"),
        domain="n >= 1 (e is now evaluated even when the build is empty)",
    ),
    rule(
        "sumbuild_swap",
        "(sumbuild ?n (lam ?x (sumbuild ?m (lam ?y ?e))))",
        "(sumbuild ?m (lam ?y (sumbuild ?n (lam ?x ?e))))",
        not_free("?x", "?m"),
        not_free("?y", "?n"),
        condition("distinct_names", lambda x, y: x.data != y.data, "?x", "?y"),
        domain=f"n >= 1 and m >= 1 (a sum of no vectors fails); {SUMS_REORDERED}",
        int_overflow="?e",  # the partial sums come in another order
    ),
    rule(
        "sumbuild_of_onehot",
        "(sumbuild ?n (lam ?x (deltaVec ?m ?x ?e)))",
        "(build ?m (lam ?x ?e))",
        not_free("?x", "?m"),
        domain="n >= m and n >= 1 (indices from m on add nothing; a sum of no vectors fails)",
    ),
]


# -- index arithmetic ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Affine:
    """``sign * x + offset`` for an Integer variable ``x``; ``offset`` is None for zero."""

    sign: int
    offset: Expr | None


def affine_in(e: Expr, x: str) -> Affine | None:
    """``e`` as ``±x + c`` with ``c`` free of ``x`` (through add, sub and neg), or None."""
    if e.op is Op.VAR and e.data == x:
        return Affine(1, None)
    if x not in e.free or e.type is not INTEGER:
        return None
    if e.op is Op.NEG:
        inner = affine_in(e.args[0], x)
        return None if inner is None else Affine(-inner.sign, _neg(inner.offset))
    if e.op in (Op.ADD, Op.SUB):
        a, b = e.args
        sub = e.op is Op.SUB
        if x not in b.free:
            inner = affine_in(a, x)
            if inner is None:
                return None
            return Affine(inner.sign, _plus(inner.offset, E.op(Op.NEG, b) if sub else b))
        if x not in a.free:
            inner = affine_in(b, x)
            if inner is None:
                return None
            sign = -inner.sign if sub else inner.sign
            offset = _neg(inner.offset) if sub else inner.offset
            return Affine(sign, _plus(offset, a))
    return None


def _neg(e: Expr | None) -> Expr | None:
    return None if e is None else E.op(Op.NEG, e)


def _plus(a: Expr | None, b: Expr) -> Expr:
    return b if a is None else E.op(Op.ADD, a, b)


def solve(form: Affine, target: Expr) -> Expr:
    """The ``x`` with ``sign * x + offset == target``."""
    moved = target if form.offset is None else E.op(Op.SUB, target, form.offset)
    return moved if form.sign == 1 else E.op(Op.NEG, moved)


def _in_range(x: Expr, n: Expr) -> Expr:
    """``0 <= x < n``."""
    return E.op(Op.AND, E.op(Op.GTE, x, E.const(0)), E.op(Op.LT, x, n))


def scalar_zero(e: Expr) -> Expr | None:
    """The literal zero of ``e``'s type when it is a Float or Integer."""
    if e.type is FLOAT:
        return E.const(0.0)
    if e.type is INTEGER:
        return E.const(0)
    return None


# -- appliers, conditions and coded rules ------------------------------------------------------------
MAX_PROJECT_DEPTH = 200


def _split(site: Site, b: Bindings) -> Expr:
    n, x, body = b["n"], b["x"], b["e"]
    count = len(body.type.children)
    return E.tuple_(*(E.sumbuild(n, x, project(body, i, count)) for i in range(1, count + 1)))


def _tuple_not_literal(e: Expr) -> bool:
    return e.type.kind is Kind.TUPLE and e.op is not Op.TUPLE  # sumbuild_of_tuple does literal tuples


def _parts_summable(e: Expr) -> bool:
    return all(part.is_numeric_structure for part in e.type.children)  # an empty tuple part is not


def project(e: Expr, i: int, count: int, depth: int = 0) -> Expr:
    """``get$i$count e`` with the get pushed as far in as lets, ifs, adds, sums and tuples allow
    (and no further than ``MAX_PROJECT_DEPTH`` nodes down, so that deep programs cannot overflow)."""
    op = e.op
    if depth > MAX_PROJECT_DEPTH:
        return E.get(i, count, e)
    if op is Op.TUPLE:
        return e.args[i - 1]
    if op is Op.LET:
        var, value, body = e.args
        inner = project(body, i, count, depth + 1)
        return E.let(var, value, inner) if var.data in inner.free else inner
    if op is Op.IF:
        return E.op(Op.IF, e.args[0], project(e.args[1], i, count, depth + 1), project(e.args[2], i, count, depth + 1))
    if op is Op.ADD:  # a scalar operand is broadcast over the tuple: it stays as it is
        a, b = (project(a, i, count, depth + 1) if a.type is e.type else a for a in e.args)
        return E.op(Op.ADD, a, b)
    if op is Op.SUMBUILD:
        return E.sumbuild(e.args[0], e.args[1], project(e.args[2], i, count, depth + 1))
    return E.get(i, count, e)


class IfZeroInward(Rule):
    """``(if p z (deltaVec n i (build m (lam x ... v))))`` -> ``(deltaVec n i (build m (lam x ... (if p 0 v))))``.

    Also with the branches swapped.  ``z`` is all zeros; the other branch is a nest of deltaVecs
    (through their values) and builds (through their bodies, whose index ``p`` does not use) around
    a number ``v``, whose zero is a literal.  Where ``p`` is false the result is the same; where it
    is true every number of the nest is now zero, which is what ``z`` was.
    """

    name = "if_zero_inward"
    heads = frozenset({Op.IF})
    lhs_text = "(if p z (deltaVec n i v)), (if p z (build m (lam x v))), also with the branches swapped"
    rhs_text = "(deltaVec n i (if p 0 v)), (build m (lam x (if p 0 v))), through nests of them"
    conditions_text = (
        "z is all zeros (see rules/zeros.py)",
        "no build on the way binds a variable of p",
        "the innermost value is a number",
    )
    domain = "z has the other branch's shape"

    def match(self, site: Site) -> int | None:
        """Which branch is the nest (1 or 2)."""
        p, a, b = site.node.args
        for branch, other in ((2, a), (1, b)):
            nest = _nest(site.node.args[branch], p)
            if nest is not None and is_zero(other, site):
                return branch
        return None

    def rewrite(self, site: Site, found: int) -> Rewrite:
        p = site.node.args[0]
        chain = _nest(site.node.args[found], p)
        assert chain is not None
        inner = chain[-1].args[2]  # a deltaVec's value and a build's body are both child 2
        zero = scalar_zero(inner)
        assert zero is not None
        value = E.op(Op.IF, p, inner, zero) if found == 1 else E.op(Op.IF, p, zero, inner)
        for node in reversed(chain):
            value = node.replace_args((*node.args[:2], value))
        return site.number, value


def _nest(e: Expr, p: Expr) -> list[Expr] | None:
    """The deltaVecs and builds from ``e`` down to a number, or None (none, or a build binds a name of p)."""
    chain: list[Expr] = []
    while e.op is Op.DELTAVEC or (e.op is Op.BUILD and e.args[1].data not in p.free):
        chain.append(e)
        e = e.args[2]
    return chain if chain and scalar_zero(e) is not None else None


def _shifted(i: Expr, x: Expr) -> bool:
    """Whether ``i`` is ``±x + c`` and not ``x`` itself (sumbuild_of_onehot does that)."""
    form = affine_in(i, x.data)
    return form is not None and not (form.sign == 1 and form.offset is None)


def _gather(site: Site, b: Bindings) -> Expr:
    # element y of the sum is e at the one x whose index is y, when that x is in the loop
    n, x, m, e = b["n"], b["x"], b["m"], b["e"]
    form = affine_in(b["i"], x.data)
    assert form is not None
    y = E.var(fresh_name([names_in(site.node)], base="y"), INTEGER)
    x, e = _apart(x, e, n, {y.data})
    zero = scalar_zero(e)
    assert zero is not None
    return E.build(m, y, E.let(x, solve(form, y), E.op(Op.IF, _in_range(x, n), e, zero)))


def _solvable(left: Expr, right: Expr, x: Expr) -> tuple[Affine, Expr] | None:
    """One side of ``(eq left right)`` as ``±x + c`` and the other, free of ``x``: the left side first."""
    for side, other in ((left, right), (right, left)):
        if x.data in other.free:
            continue
        form = affine_in(side, x.data)
        if form is not None:
            return form, other
    return None


def _pick(site: Site, b: Bindings) -> Expr:
    # only one x contributes: the one where the index side equals the other
    n, x = b["n"], b["x"]
    found = _solvable(b["left"], b["right"], x)
    assert found is not None
    form, target = found
    x, e = _apart(x, b["e"], n, set())
    zero = scalar_zero(b["e"])
    assert zero is not None
    return E.let(x, solve(form, target), E.op(Op.IF, _in_range(x, n), e, zero))


def _apart(x: Expr, e: Expr, n: Expr, taken: set[str]) -> tuple[Expr, Expr]:
    """The index ``x`` and the body ``e`` that uses it, ``x`` renamed (avoiding ``taken``) where ``n``,
    now evaluated where ``x`` is bound, has a free variable of its name."""
    if x.data not in n.free:
        return x, e
    fresh = E.var(fresh_name([names_in(e), n.free, taken], base=x.data), x.type)
    return fresh, substitute(e, x.data, fresh)


class SumbuildOfLetBuild(Rule):
    """``(sumbuild o (lam oi (let (v e) ... (build n (lam ni b)))))`` -> ``(build n (lam ni (sumbuild o (lam oi (let (v e) ... b)))))``.

    ``sumbuild_of_build`` through the lets between the sum and the build.  The lets are now
    evaluated per element, so only loop-free values (sizes, indices, scalar arithmetic) may move.
    """

    name = "sumbuild_of_let_build"
    heads = frozenset({Op.SUMBUILD})
    lhs_text = "(sumbuild o (lam oi (let (v1 e1) ... (build n (lam ni b)))))"
    rhs_text = "(build n (lam ni (sumbuild o (lam oi (let (v1 e1) ... b)))))"
    domain = SUMS_REORDERED
    conditions_text = (
        "at least one let; every e is loop-free (see let_substitute)",
        "n uses neither oi nor any v",
        "ni is renamed if it clashes",
    )

    def match(self, site: Site) -> list[Expr] | None:
        """The lets, outermost first."""
        _, oi, body = site.node.args
        lets: list[Expr] = []
        while body.op is Op.LET and loop_free(body.args[1]):
            lets.append(body)
            body = body.args[2]
        if not lets or body.op is not Op.BUILD:
            return None
        bound = {oi.data, *(let.args[0].data for let in lets)}
        return None if body.args[0].free & bound else lets

    def rewrite(self, site: Site, found: list[Expr]) -> Rewrite:
        o, oi, _ = site.node.args
        n, ni, b = found[-1].args[2].args
        clash = {oi.data, *o.free}
        for let in found:
            clash |= {let.args[0].data, *let.args[1].free}
        if ni.data in clash:
            fresh = E.var(fresh_name([names_in(site.node)], base=ni.data), ni.type)
            b = substitute(b, ni.data, fresh)
            ni = fresh
        for let in reversed(found):
            b = E.let(let.args[0], let.args[1], b)
        return site.number, E.build(n, ni, E.sumbuild(o, oi, b))


def loop_free(e: Expr) -> bool:
    """Whether ``e`` has no build, sumbuild, sum, constVec, deltaVec, call or lambda: it is cheap to repeat."""
    return not any(node.op in _LOOPS for node in E.preorder(e))


_LOOPS = frozenset({Op.BUILD, Op.SUMBUILD, Op.SUM, Op.CONSTVEC, Op.DELTAVEC, Op.CALL, Op.APPLY, Op.LAM})


def _number(e: Expr) -> bool:
    return scalar_zero(e) is not None


GRADIENT_RULES: list[Rule] = [
    rule(
        "sumbuild_tuple_split",
        "(sumbuild ?n (lam ?x ?e))",
        builds(
            "(tuple (sumbuild ?n (lam ?x π1 ?e)) ... (sumbuild ?n (lam ?x πk ?e))), πi ?e is get$i pushed in", _split
        ),
        condition("tuple_not_literal", _tuple_not_literal, "?e"),
        condition("parts_summable", _parts_summable, "?e"),
        domain=SUMS_REORDERED,
    ),
    *GRADIENT_TABLE,
    IfZeroInward(),
    rule(
        "sumbuild_of_shifted_onehot",
        "(sumbuild ?n (lam ?x (deltaVec ?m ?i ?e)))",
        builds(
            "(build ?m (lam y (let (?x (±(y - c))) (if (and (gte ?x 0) (lt ?x ?n)) ?e 0)))) for ?i = ±?x + c", _gather
        ),
        not_free("?x", "?m"),
        condition("number", _number, "?e"),
        condition("shifted", _shifted, "?i", "?x"),
        domain="y - c does not overflow for 0 <= y < m (it is now computed for every y)",
    ),
    rule(
        "sumbuild_of_if_eq",
        "(sumbuild ?n (lam ?x (if (eq ?left ?right) ?e ?z)))",
        builds("(let (?x (±(j - c))) (if (and (gte ?x 0) (lt ?x ?n)) ?e 0)) for one side ±?x + c, the other j", _pick),
        condition("number", _number, "?e"),
        all_zeros("?z"),
        not_free("?x", "?z"),
        condition("solvable", lambda left, right, x: _solvable(left, right, x) is not None, "?left", "?right", "?x"),
        domain=(
            "n >= 1, or evaluating j and c does not fail (they are now evaluated even when the sum is empty); "
            "j - c does not overflow"
        ),
    ),
    SumbuildOfLetBuild(),
    rule(
        "let_substitute",
        "(let (?x ?e) ?b)",
        builds("?b[?x := ?e]", lambda site, b: substitute(b["b"], b["x"].data, b["e"])),
        condition("free_in", lambda x, body: x.data in body.free, "?x", "?b"),
        not_free("?x", "?e"),
        condition("loop_free", loop_free, "?e"),
        strict=True,
    ),
]
