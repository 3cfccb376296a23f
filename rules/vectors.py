"""Vector and tuple rules: the paper's Table 4 (names as in the reference's ``vector_tuple_rules``).

Summing over no elements is defined differently before and after some of these rewrites (an error for
vector sums, zero for scalars), so several hold for sizes of at least one: ``domain`` says so.  Rules
that regroup a sum add its terms in another order: Floats round differently, and a partial sum, Float
or Integer, may overflow in one order only.
"""

from __future__ import annotations

from knossos import expr as E
from knossos.expr import Expr, names_in
from knossos.ops import Op
from knossos.substitution import fresh_name, substitute
from knossos.types import Kind
from rules.pattern import Bindings
from rules.rule import Rule, Site, all_floats, builds, condition, not_free, rule
from rules.zeros import CONSTVEC_ZERO, is_zero

IN_RANGE = "the index is within the vector"
#: Regrouped sums: every partial sum is finite and no Integer one overflows, in either order.
SUMS_REORDERED = "no partial sum overflows, in either order (Floats up to rounding)"


def _swap_loops(site: Site, b: Bindings) -> Expr:
    # the binders swap places: the inner index is renamed when the outer one has its name or o uses
    # it (interning may give both indices one name even where the source did not)
    o, oi, n, ni, e = b["o"], b["oi"], b["n"], b["ni"], b["e"]
    if ni.data == oi.data or ni.data in o.free:
        fresh = E.var(fresh_name([names_in(site.node)], base=ni.data), ni.type)
        e = substitute(e, ni.data, fresh)
        ni = fresh
    return E.build(n, ni, E.sumbuild(o, oi, e))


def _same_length(a: Expr, b: Expr) -> bool:
    return len(a.args) == len(b.args)


def _is_scalar(z: Expr) -> bool:
    return z.type.kind in (Kind.FLOAT, Kind.INTEGER)


VECTOR_RULES: list[Rule] = [
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
    rule(
        "select_of_tuple",
        "(get$?i$?n (tuple ?es...))",
        builds("element ?i of ?es", lambda site, b: b["es"].args[site.node.data[0] - 1]),
        domain="evaluating the other elements does not fail",
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
        int_overflow="?v",  # the sum of v, computed where i is out of range
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
        "sumbuild_of_tuple",
        "(sumbuild ?n (lam ?x (tuple ?es...)))",
        builds(
            "(tuple (sumbuild ?n (lam ?x e1)) ... (sumbuild ?n (lam ?x ek))) for the elements e1 ... ek of ?es",
            lambda site, b: E.tuple_(*(E.sumbuild(b["n"], b["x"], e) for e in b["es"].args)),
        ),
        domain=SUMS_REORDERED,
    ),
    rule(
        "add_tuples",
        "(add (tuple ?as...) (tuple ?bs...))",
        builds(
            "(tuple (add a1 b1) ... (add ak bk)) for the elements of ?as and ?bs",
            lambda site, b: E.tuple_(*(E.op(Op.ADD, x, y) for x, y in zip(b["as"].args, b["bs"].args, strict=True))),
        ),
        condition("same_length", _same_length, "?as", "?bs"),
        strict=True,
    ),
    rule(
        "mul_tuple_scalar",
        "(mul (tuple ?as...) ?z)",
        builds(
            "(tuple (mul a1 ?z) ... (mul ak ?z)) for the elements of ?as",
            lambda site, b: E.tuple_(*(E.op(Op.MUL, x, b["z"]) for x in b["as"].args)),
        ),
        condition("scalar", _is_scalar, "?z", shallow=True),
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
        int_overflow="?e1",
    ),
    rule(
        "sumbuild_of_sum",
        "(sumbuild ?n (lam ?x (add ?a ?b)))",
        "(add (sumbuild ?n (lam ?x ?a)) (sumbuild ?n (lam ?x ?b)))",
        domain=f"n >= 1; {SUMS_REORDERED}",
        int_overflow="?a",
    ),
    rule(
        "sumbuild_of_build",
        "(sumbuild ?o (lam ?oi (build ?n (lam ?ni ?e))))",
        builds(
            "(build ?n (lam ?ni (sumbuild ?o (lam ?oi ?e)))), ?ni renamed if it is ?oi's name or free in ?o",
            _swap_loops,
        ),
        not_free("?oi", "?n"),
        domain=f"o >= 1; {SUMS_REORDERED}",
    ),
]
