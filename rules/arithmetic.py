"""Arithmetic rules: the paper's Table 3 (names as in the reference), constant folding, a/a.

The rules hold in exact arithmetic (real numbers, unbounded integers).  Programs compute with IEEE
doubles and 64-bit Integers (overflow is an error in the interpreter), so every rule that reorders,
factors or cancels says in ``domain`` where that can change a result: an intermediate value that
overflows to an infinity (``0 * (b + c)`` with ``b + c`` infinite is NaN), an Integer overflow
(``a * b + a * c`` with ``a = 0`` computes ``b + c`` once factored), an infinite or NaN operand.
Reassociating Floats also rounds differently (up to rounding, relative to the largest intermediate).
Rules marked ``strict`` change no value on any input.  The division rules hold for Floats only
(Integer division truncates), and are restricted to them; the rules that regroup ``add``, ``sub`` and
``mul`` leave Integers alone unless the rule set opts in (``unsafe-int:``, see ``Rule.int_overflow``).
"""

from __future__ import annotations

from knossos.ops import Op
from knossos.types import Kind
from rules.folds import fold
from rules.rule import Condition, Rule, TableRule, condition, rule
from rules.zeros import LITERAL_ZERO, is_zero

#: Reordering or factoring: where every step is finite, only rounding differs.
FINITE_STEPS = "every value on either side is finite and no Integer overflows (Floats up to rounding)"
#: Division also amplifies what underflow lost: a subnormal divisor makes it visible.
NORMAL_STEPS = "every value on either side is finite and, if not zero, normal (no over- or underflow; up to rounding)"
NONZERO_C = f"c is not zero, and {NORMAL_STEPS}"
NONZERO_B = f"b is not zero, and {NORMAL_STEPS}"
NONZERO_BC = f"b and c are not zero, and {NORMAL_STEPS}"


def _floats_only(hole: str = "?a") -> Condition:
    return condition("float", lambda a: a.type.leaves == _FLOAT_LEAVES, hole, shallow=True)


_FLOAT_LEAVES = frozenset({Kind.FLOAT})


def _regrouping(name: str, lhs: str, rhs: str) -> TableRule:
    """A row that reorders or factors arithmetic: exact but for rounding where every step is finite, and
    it may overflow an Integer the original did not (``a*b + a*c`` computes ``b + c`` once factored), so
    it leaves Integers alone unless a set opts in (``unsafe-int:``; ?a's type says which it computes)."""
    return rule(name, lhs, rhs, domain=FINITE_STEPS, int_overflow="?a")


def _scalar(hole: str) -> Condition:
    """A Float or an Integer (``sub`` of a literal and a vector is not in the language)."""
    return condition("scalar", lambda a: a.type.is_number, hole, shallow=True)


ALGEBRAIC: list[TableRule] = [
    rule("add_zero", "(add 0 ?a)", "?a", strict=True),  # the sign of a zero aside (0.0 + -0.0 is 0.0)
    rule("mul_zero", "(mul 0 ?a)", "0", domain="a is finite (0 * inf and 0 * NaN are NaN); up to the sign of zero"),
    rule("mul_one", "(mul 1 ?a)", "?a", strict=True),
    rule("sub_zero", "(sub ?a 0)", "?a", strict=True),
    rule("div_one", "(div ?a 1)", "?a", strict=True),
    # a + b * -1 and a - b overflow together (b * -1 alone fails only before)
    rule("add_neg_to_sub", "(add ?a (mul ?b -1))", "(sub ?a ?b)", strict=True),
    # Not the paper's: the reference's parser read (neg x) as (sub 0.0 x), so its rules saw a sub there
    rule("neg_to_sub", "(neg ?a)", "(sub 0 ?a)", _scalar("?a"), strict=True),  # the sign of zero aside
    rule("commute_mul", "(mul ?a ?b)", "(mul ?b ?a)", strict=True),
    rule("commute_add", "(add ?a ?b)", "(add ?b ?a)", strict=True),
    rule("sub_self", "(sub ?a ?a)", "0", domain="a is finite (inf - inf is NaN)"),
    _regrouping("assoc_add_add", "(add (add ?a ?b) ?c)", "(add (add ?a ?c) ?b)"),
    _regrouping("assoc_sub_add", "(sub (add ?a ?b) ?c)", "(add (sub ?a ?c) ?b)"),
    _regrouping("assoc_add_sub", "(add (sub ?a ?b) ?c)", "(sub (add ?a ?c) ?b)"),
    _regrouping("assoc_sub_sub", "(sub (sub ?a ?b) ?c)", "(sub (sub ?a ?c) ?b)"),
    _regrouping("sub_sub_to_sub_add", "(sub ?a (sub ?b ?c))", "(sub (add ?a ?c) ?b)"),
    _regrouping("assoc_mul_mul", "(mul (mul ?a ?b) ?c)", "(mul (mul ?a ?c) ?b)"),
    _regrouping("mul_by_add", "(mul ?a (add ?b ?c))", "(add (mul ?a ?b) (mul ?a ?c))"),
    _regrouping("mul_by_sub", "(mul ?a (sub ?b ?c))", "(sub (mul ?a ?b) (mul ?a ?c))"),
    _regrouping("add_of_muls", "(add (mul ?a ?b) (mul ?a ?c))", "(mul ?a (add ?b ?c))"),
    _regrouping("sub_of_muls", "(sub (mul ?a ?b) (mul ?a ?c))", "(mul ?a (sub ?b ?c))"),
]

FLOAT_ONLY: list[TableRule] = [
    rule("assoc_div_mul", "(div (mul ?a ?b) ?c)", "(mul (div ?a ?c) ?b)", _floats_only(), domain=NONZERO_C),
    rule("assoc_mul_div", "(mul (div ?a ?b) ?c)", "(div (mul ?a ?c) ?b)", _floats_only(), domain=NONZERO_B),
    rule("div_by_div", "(div ?a (div ?b ?c))", "(div (mul ?a ?c) ?b)", _floats_only(), domain=NONZERO_BC),
    rule("add_of_divs", "(add (div ?a ?c) (div ?b ?c))", "(div (add ?a ?b) ?c)", _floats_only(), domain=NONZERO_C),
    rule("sub_of_divs", "(sub (div ?a ?c) (div ?b ?c))", "(div (sub ?a ?b) ?c)", _floats_only(), domain=NONZERO_C),
    rule("assoc_div_div", "(div (div ?a ?b) ?c)", "(div (div ?a ?c) ?b)", _floats_only(), domain=NONZERO_BC),
    rule("div_of_div", "(div (div ?a ?b) ?c)", "(div ?a (mul ?b ?c))", _floats_only(), domain=NONZERO_BC),
    rule("div_by_mul", "(div ?a (mul ?b ?c))", "(div (div ?a ?b) ?c)", _floats_only(), domain=NONZERO_BC),
]


CONSTANT_FOLDING: list[Rule] = [
    fold(Op.ADD),
    fold(Op.SUB),
    fold(Op.MUL),
    fold(Op.DIV),
]

DIV_BY_SELF = rule(
    "div_by_self",
    "(div ?a ?a)",
    "1",
    condition("not_zero_literal", lambda a: not is_zero(a, through=LITERAL_ZERO), "?a", shallow=True),
    domain="a is finite and not zero (0/0 and inf/inf are NaN)",
)
