"""Rules for ``if`` and comparisons (the reference's ``if_rules``)."""

from __future__ import annotations

from knossos import expr as E
from knossos.ops import Op
from rules.folds import fold
from rules.rule import Rewrite, Rule, Site, can_leave_parent, rule, with_child

IF_TABLE = [
    rule("if_true", "(if true ?a ?b)", "?a", strict=True),
    rule("if_false", "(if false ?a ?b)", "?b", strict=True),
    rule("if_return_p", "(if ?p true false)", "?p", strict=True),
    # strict: outside the domain the original fails (p does) and the rewrite may not
    rule("if_both_same", "(if ?p ?a ?a)", "?a", domain="evaluating p does not fail", strict=True),
    rule("eq_self", "(eq ?a ?a)", "true", domain="a is not NaN (NaN equals nothing)"),
]


class LiftIf(Rule):
    """``(op ... (if p x y) ...)`` -> ``(if p (op ... x ...) (op ... y ...))`` when op binds nothing in p."""

    name = "lift_if"
    heads = frozenset({Op.IF})
    lhs_text = "(op ... (if p x y) ...)"
    rhs_text = "(if p (op ... x ...) (op ... y ...))"
    conditions_text = ("op binds no variable free in p", "op is not a lambda")
    domain = "evaluating p does not fail where op would not have evaluated it (e.g. under and/or/if)"

    def match(self, site: Site) -> bool | None:
        return can_leave_parent(site, site.node.args[0]) or None

    def rewrite(self, site: Site, found: bool) -> Rewrite:
        parent = site.parent
        assert parent is not None
        parent_node, parent_number, index = parent
        p, x, y = site.node.args
        return parent_number, E.op(Op.IF, p, with_child(parent_node, index, x), with_child(parent_node, index, y))


IF_RULES: list[Rule] = [
    *IF_TABLE,
    fold(Op.EQ),
    fold(Op.GT),
    fold(Op.GTE),
    LiftIf(),
]
