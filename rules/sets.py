"""The named rule sets of the paper and the reference (names as in ksdata/README.md).

Sets are built here, explicitly, from the rule families; nothing registers itself on import.
"""

from __future__ import annotations

from knossos.errors import KsUsageError
from rules.arithmetic import ALGEBRAIC, CONSTANT_FOLDING, DIV_BY_SELF, FLOAT_ONLY
from rules.binding import CSE_BIND, DELETE_LET, INLINE_LET, LET_RECOVER, LIFT_BIND, NEW_BIND
from rules.calls import INLINE_CALL
from rules.conditionals import IF_RULES
from rules.gradients import GRADIENT_RULES
from rules.log_exp import LOG_EXP_RULES
from rules.rule_set import RuleSet
from rules.vectors import VECTOR_RULES
from rules.zeros import ZERO_TENSOR_RULES

_GRADIENT_ALGEBRA = {"add_zero", "mul_zero", "mul_one", "sub_zero", "div_one", "sub_self"}

simplify_rules = RuleSet(
    "simplify_rules", [*ALGEBRAIC, *FLOAT_ONLY, *CONSTANT_FOLDING, INLINE_LET, DELETE_LET, DIV_BY_SELF]
)
binding_rules = RuleSet("binding_rules", [NEW_BIND, LIFT_BIND, CSE_BIND, INLINE_LET, DELETE_LET, LET_RECOVER])
binding_simplify_rules = (simplify_rules + binding_rules).named("binding_simplify_rules")
if_rules = RuleSet("if_rules", IF_RULES)
log_exp_rules = RuleSet("log_exp_rules", LOG_EXP_RULES)
vector_tuple_rules = RuleSet("vector_tuple_rules", VECTOR_RULES)
inline_call_rules = RuleSet("inline_call", [INLINE_CALL])
ml_rules = (simplify_rules + binding_rules + vector_tuple_rules + if_rules + inline_call_rules).named("ml_rules")
ml_rules_no_bind = (ml_rules - ["new_bind", "lift_bind", "cse_bind", "let_recover"]).named("ml_rules_no_bind")
#: The Table 4 rules marked for the first phase of two-phase search (sumbuild-of-if is lift_if).
phase1 = RuleSet(
    "phase1",
    [
        vector_tuple_rules.rule(n)
        for n in (
            "index_of_build",
            "mk_sumbuild",
            "sumbuild_other_deltavec",
            "sumbuild_of_tuple",
            "sumbuild_invariant",
            "sumbuild_of_sum",
            "sumbuild_of_build",
            "sum_of_deltavecs",
            "add_tuples",
            "mul_tuple_scalar",
        )
    ]
    + [if_rules.rule("lift_if")],
)
#: Not the paper's: additions of zero vectors and one-hot builds (rules/zeros.py), for reverse-mode code.
zero_tensor_rules = RuleSet("zero_tensor_rules", ZERO_TENSOR_RULES)
#: Not the paper's: what turns reverse-mode code's sums of one-hot terms into gathers (rules/gradients.py),
#: with the paper's rules that those sequences pass through (vectors, tuples, lets, ifs, zeros and
#: constants) and without the ones that only reorder arithmetic or lift ifs out, which multiply the
#: states a search must look at and shorten none of the sequences.
gradient_rules = (
    (ml_rules_no_bind - [r.name for r in ALGEBRAIC if r.name not in _GRADIENT_ALGEBRA] - ["div_by_self", "lift_if"])
    + zero_tensor_rules
    + RuleSet("gradients", [*GRADIENT_RULES, LET_RECOVER])
).named("gradient_rules")
all_rules = (ml_rules + log_exp_rules + zero_tensor_rules + RuleSet("gradients", GRADIENT_RULES)).named("all_rules")

RULE_SETS: dict[str, RuleSet] = {
    s.name: s
    for s in (
        simplify_rules,
        binding_rules,
        binding_simplify_rules,
        if_rules,
        log_exp_rules,
        vector_tuple_rules,
        inline_call_rules,
        ml_rules,
        ml_rules_no_bind,
        phase1,
        zero_tensor_rules,
        gradient_rules,
        all_rules,
    )
}


#: ``strict:NAME`` is the set NAME (or union) without the rules that may change a value (Rule.strict).
STRICT_PREFIX = "strict:"
#: ``unsafe-int:NAME`` is the set NAME whose Integer-overflow rules (Rule.int_overflow) also rewrite
#: Integer arithmetic, where they may overflow an Integer the original did not: the opt-in.
UNSAFE_INT_PREFIX = "unsafe-int:"


def strict(rule_set: RuleSet) -> RuleSet:
    """``rule_set`` with only its strict rules: those that change no value on any input, the edges of
    machine arithmetic (infinities, NaN, 64-bit Integer overflow) included."""
    return RuleSet(STRICT_PREFIX + rule_set.name, [r for r in rule_set if r.strict])


def unsafe_int(rule_set: RuleSet) -> RuleSet:
    """``rule_set`` with its Integer-overflow rules applying to Integers too (by default they apply
    where the arithmetic they regroup holds no Integer, so that no Integer overflows that did not)."""
    return RuleSet(UNSAFE_INT_PREFIX + rule_set.name, [r.with_integers() for r in rule_set])


_PREFIXES = {STRICT_PREFIX: strict, UNSAFE_INT_PREFIX: unsafe_int}


def get_rule_set(name: str) -> RuleSet:
    """A rule set by name, or the union of several joined by ``+`` (``ml_rules_no_bind+zero_tensor_rules``),
    ``strict:`` before either for its strict rules only, ``unsafe-int:`` for its Integer-overflow rules
    on Integers too; a one-line error listing the names otherwise."""
    stripped = name.strip()
    for prefix, make in _PREFIXES.items():
        if stripped.startswith(prefix):
            return make(get_rule_set(stripped[len(prefix) :]))
    found: RuleSet | None = None
    for part in name.split("+"):
        one = RULE_SETS.get(part.strip())
        if one is None:
            where = f" in '{name}'" if "+" in name else ""
            known = ", ".join(RULE_SETS)
            raise KsUsageError(
                f"unknown rule set '{part.strip()}'{where} (known: {known}; join names with +, "
                f"put {STRICT_PREFIX} first for the strict rules only, {UNSAFE_INT_PREFIX} to let the rules "
                "that may overflow an Integer rewrite Integer arithmetic)"
            )
        found = one if found is None else found + one
    assert found is not None
    return found
