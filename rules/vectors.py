"""Vector and tuple rules: the paper's Table 4 (names as in the reference's ``vector_tuple_rules``).

Summing over no elements is defined differently before and after some of these rewrites (an error for
vector sums, zero for scalars), so several hold for sizes of at least one: ``domain`` says so.  Rules
that regroup a sum add its terms in another order: Floats round differently, and a partial sum, Float
or Integer, may overflow in one order only.
"""

from __future__ import annotations

from knossos import expr as E
from knossos.expr import names_in
from knossos.ops import Op
from knossos.types import Kind
from rules.rule import Rewrite, Rule, Site, all_floats, condition, not_free, rule
from rules.substitution import fresh_name, substitute
from rules.zeros import CONSTVEC_ZERO, is_zero

IN_RANGE = "the index is within the vector"
#: Regrouped sums: every partial sum is finite and no Integer one overflows, in either order.
SUMS_REORDERED = "no partial sum overflows, in either order (Floats up to rounding)"


VECTOR_TABLE = [
    # strict, as several below: outside the domain the original fails (a build of negative size, an
    # index out of range, a sum of no vectors) and the rewrite may not
    rule("size_of_build", "(size (build ?n (lam ?x ?b)))", "?n", domain="n >= 0", strict=True),
    rule(
        "index_of_build",
        "(index ?arg (build ?sz (lam ?x ?body)))",
        "(let (?x ?arg) ?body)",
        domain=IN_RANGE,
        strict=True,
    ),
    rule("mk_sumbuild", "(sum (build ?n (lam ?x ?e)))", "(sumbuild ?n (lam ?x ?e))", strict=True),
    rule(
        "sumbuild_other_deltavec",
        "(sumbuild ?n (lam ?x (deltaVec ?m ?i ?v)))",
        "(deltaVec ?m ?i (sumbuild ?n (lam ?x ?v)))",
        not_free("?x", "?m"),
        not_free("?x", "?i"),
        domain=f"n >= 1; {SUMS_REORDERED}; where i is out of range, the sum of v is now computed",
    ),
    rule(
        "sumbuild_of_deltavec",
        "(sumbuild ?n (lam ?x (deltaVec ?n ?x ?e)))",
        "(build ?n (lam ?x ?e))",
        not_free("?x", "?n"),
        domain="n >= 1",
        strict=True,
    ),
    rule(
        "sumbuild_invariant",
        "(sumbuild ?n (lam ?x ?c))",
        "(mul (to_float ?n) ?c)",
        not_free("?x", "?c"),
        all_floats("?c"),
        domain="n >= 1, or c evaluates to a finite value (it is now evaluated; 0 * inf is NaN); Floats up to rounding",
    ),
    rule(
        "sumbuild_of_zero_vec",
        "(sumbuild ?n (lam ?x ?z))",
        "?z",
        not_free("?x", "?z"),
        condition("is_zero_vec", lambda z: is_zero(z, through=CONSTVEC_ZERO), "?z"),
        domain="n >= 1",
        strict=True,
    ),
    rule(
        "sum_of_deltavecs",
        "(add (deltaVec ?n ?i ?e1) (deltaVec ?n ?i ?e2))",
        "(deltaVec ?n ?i (add ?e1 ?e2))",
        condition("same type", lambda e1, e2: e1.type is e2.type, "?e1", "?e2", shallow=True),
        domain="i is within the vector, or e1 + e2 does not overflow (it is now computed)",
    ),
    rule(
        "sumbuild_of_sum",
        "(sumbuild ?n (lam ?x (add ?a ?b)))",
        "(add (sumbuild ?n (lam ?x ?a)) (sumbuild ?n (lam ?x ?b)))",
        domain=f"n >= 1; {SUMS_REORDERED}",
    ),
]


class SumbuildOfBuild(Rule):
    """``(sumbuild o (lam oi (build n (lam ni e))))`` -> ``(build n (lam ni (sumbuild o (lam oi e))))``.

    The two binders swap places, so the inner index is renamed when the outer one has its name or
    ``o`` uses it (interning may give both indices one name even where the source did not).
    """

    name = "sumbuild_of_build"
    heads = frozenset({Op.SUMBUILD})
    lhs_text = "(sumbuild o (lam oi (build n (lam ni e))))"
    rhs_text = "(build n (lam ni (sumbuild o (lam oi e))))"
    conditions_text = ("not_free(oi, n)", "ni is renamed if it is oi's name or free in o")
    domain = f"o >= 1; {SUMS_REORDERED}"

    def match(self, site: Site) -> bool | None:
        _, oi, body = site.node.args
        return (body.op is Op.BUILD and oi.data not in body.args[0].free) or None

    def rewrite(self, site: Site, found: bool) -> Rewrite:
        o, oi, build = site.node.args
        n, ni, e = build.args
        if ni.data == oi.data or ni.data in o.free:
            fresh = E.var(fresh_name([names_in(site.node)], base=ni.data), ni.type)
            e = substitute(e, ni.data, fresh)
            ni = fresh
        return site.number, E.build(n, ni, E.sumbuild(o, oi, e))


class SelectOfTuple(Rule):
    """``(get$i$n (tuple e1 ... en))`` -> ``ei``."""

    name = "select_of_tuple"
    heads = frozenset({Op.GET})
    lhs_text = "(get$i$n (tuple e1 ... en))"
    rhs_text = "ei"
    domain = "evaluating the other elements does not fail"
    strict = True

    def match(self, site: Site) -> bool | None:
        return site.node.args[0].op is Op.TUPLE or None

    def rewrite(self, site: Site, found: bool) -> Rewrite:
        return site.number, site.node.args[0].args[site.node.data[0] - 1]


class SumbuildOfTuple(Rule):
    """``(sumbuild n (lam x (tuple e1 ...)))`` -> ``(tuple (sumbuild n (lam x e1)) ...)``."""

    name = "sumbuild_of_tuple"
    heads = frozenset({Op.SUMBUILD})
    lhs_text = "(sumbuild n (lam x (tuple e1 ... ek)))"
    rhs_text = "(tuple (sumbuild n (lam x e1)) ... (sumbuild n (lam x ek)))"
    domain = SUMS_REORDERED

    def match(self, site: Site) -> bool | None:
        return site.node.args[2].op is Op.TUPLE or None

    def rewrite(self, site: Site, found: bool) -> Rewrite:
        n, x, body = site.node.args
        return site.number, E.tuple_(*(E.sumbuild(n, x, e) for e in body.args))


class AddTuples(Rule):
    """``(add (tuple a1 ...) (tuple b1 ...))`` -> ``(tuple (add a1 b1) ...)``."""

    name = "add_tuples"
    heads = frozenset({Op.ADD})
    lhs_text = "(add (tuple a1 ... ak) (tuple b1 ... bk))"
    rhs_text = "(tuple (add a1 b1) ... (add ak bk))"
    strict = True

    def match(self, site: Site) -> bool | None:
        a, b = site.node.args
        return (a.op is Op.TUPLE and b.op is Op.TUPLE and len(a.args) == len(b.args)) or None

    def rewrite(self, site: Site, found: bool) -> Rewrite:
        a, b = site.node.args
        return site.number, E.tuple_(*(E.op(Op.ADD, x, y) for x, y in zip(a.args, b.args, strict=True)))


class MulTupleScalar(Rule):
    """``(mul (tuple a1 ...) z)`` -> ``(tuple (mul a1 z) ...)`` for a scalar ``z``."""

    name = "mul_tuple_scalar"
    heads = frozenset({Op.MUL})
    lhs_text = "(mul (tuple a1 ... ak) z)"
    rhs_text = "(tuple (mul a1 z) ... (mul ak z))"
    conditions_text = ("z is a scalar",)
    strict = True

    def match(self, site: Site) -> bool | None:
        a, z = site.node.args
        return (a.op is Op.TUPLE and z.type.kind in (Kind.FLOAT, Kind.INTEGER)) or None

    def rewrite(self, site: Site, found: bool) -> Rewrite:
        a, z = site.node.args
        return site.number, E.tuple_(*(E.op(Op.MUL, x, z) for x in a.args))


VECTOR_RULES: list[Rule] = [
    VECTOR_TABLE[0],  # size_of_build
    VECTOR_TABLE[1],  # index_of_build
    SelectOfTuple(),
    VECTOR_TABLE[2],  # mk_sumbuild
    VECTOR_TABLE[3],  # sumbuild_other_deltavec
    VECTOR_TABLE[4],  # sumbuild_of_deltavec
    SumbuildOfTuple(),
    AddTuples(),
    MulTupleScalar(),
    VECTOR_TABLE[5],  # sumbuild_invariant
    VECTOR_TABLE[6],  # sumbuild_of_zero_vec
    VECTOR_TABLE[7],  # sum_of_deltavecs
    VECTOR_TABLE[8],  # sumbuild_of_sum
    SumbuildOfBuild(),
]
