"""Rules for ``log`` and ``exp`` (the reference's ``log_exp_rules``), and for ``sqrt``."""

from __future__ import annotations

from knossos.ops import Op
from rules.folds import fold
from rules.rule import Rule, rule

#: exp overflows above about 709.78 and loses precision (subnormal, then 0) below about -708.
EXP_NORMAL = "exp(a) is a finite, normal double (about -708 < a < 709.78)"
EXPS_NORMAL = "exp(a), exp(b) and exp(a + b) are finite, normal doubles (inf * 0 is NaN)"
LOGS_POSITIVE = "a > 0 and b > 0, and a * b is a finite, normal double (neither overflows nor underflows)"
#: sqrt(a * a) is |a| exactly in binary floating point unless a * a leaves the normal range.
SQUARE_NORMAL = "a * a is a finite, normal double (about 1.5e-154 < abs(a) < 1.3e154)"

LOG_EXP_RULES: list[Rule] = [
    rule("log_of_exp", "(log (exp ?a))", "?a", domain=EXP_NORMAL),
    rule("exp_of_log", "(exp (log ?a))", "?a", domain="a > 0"),
    fold(Op.LOG),
    fold(Op.EXP),
    rule("exp_of_add", "(exp (add ?a ?b))", "(mul (exp ?a) (exp ?b))", domain=EXPS_NORMAL),
    rule("mul_of_exps", "(mul (exp ?a) (exp ?b))", "(exp (add ?a ?b))", domain=EXPS_NORMAL),
    rule("log_of_mul", "(log (mul ?a ?b))", "(add (log ?a) (log ?b))", domain=LOGS_POSITIVE),
    rule("add_of_logs", "(add (log ?a) (log ?b))", "(log (mul ?a ?b))", domain=LOGS_POSITIVE),
    fold(Op.SQRT),
    rule("sqrt_of_square", "(sqrt (mul ?a ?a))", "(abs ?a)", domain=SQUARE_NORMAL),
]
