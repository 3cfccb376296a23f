"""Rules for ``log`` and ``exp`` (the reference's ``log_exp_rules``), and for ``sqrt``."""

from __future__ import annotations

import math
from collections.abc import Callable

from knossos.ops import Op
from rules.rule import FoldRule, Rule, Site, rule


class FoldUnary(FoldRule):
    """``(f c)`` for a literal ``c`` becomes the literal value, when it is finite."""

    def __init__(self, name: str, op: Op, fn: Callable[[float], float]) -> None:
        self.name = name
        self.heads = frozenset({op})
        self.fn = fn
        self.lhs_text = f"({op.name.lower()} c)"
        self.rhs_text = "the value"
        self.conditions_text = ("is_constant(c)", "the value is finite")

    def match(self, site: Site) -> float | None:
        arg = site.node.args[0]
        if arg.op is not Op.CONST:
            return None
        try:
            value = self.fn(arg.data)
        except (ValueError, OverflowError):
            return None
        return value if math.isfinite(value) else None


#: exp overflows above about 709.78 and loses precision (subnormal, then 0) below about -708.
EXP_NORMAL = "exp(a) is a finite, normal double (about -708 < a < 709.78)"
EXPS_NORMAL = "exp(a), exp(b) and exp(a + b) are finite, normal doubles (inf * 0 is NaN)"
LOGS_POSITIVE = "a > 0 and b > 0, and a * b is a finite, normal double (neither overflows nor underflows)"
#: sqrt(a * a) is |a| exactly in binary floating point unless a * a leaves the normal range.
SQUARE_NORMAL = "a * a is a finite, normal double (about 1.5e-154 < abs(a) < 1.3e154)"

LOG_EXP_RULES: list[Rule] = [
    rule("log_of_exp", "(log (exp ?a))", "?a", domain=EXP_NORMAL),
    rule("exp_of_log", "(exp (log ?a))", "?a", domain="a > 0"),
    FoldUnary("cprop_log", Op.LOG, math.log),
    FoldUnary("cprop_exp", Op.EXP, math.exp),
    rule("exp_of_add", "(exp (add ?a ?b))", "(mul (exp ?a) (exp ?b))", domain=EXPS_NORMAL),
    rule("mul_of_exps", "(mul (exp ?a) (exp ?b))", "(exp (add ?a ?b))", domain=EXPS_NORMAL),
    rule("log_of_mul", "(log (mul ?a ?b))", "(add (log ?a) (log ?b))", domain=LOGS_POSITIVE),
    rule("add_of_logs", "(add (log ?a) (log ?b))", "(log (mul ?a ?b))", domain=LOGS_POSITIVE),
    FoldUnary("cprop_sqrt", Op.SQRT, math.sqrt),
    rule("sqrt_of_square", "(sqrt (mul ?a ?a))", "(abs ?a)", domain=SQUARE_NORMAL),
]
