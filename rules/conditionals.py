"""Rules for ``if`` and comparisons (the reference's ``if_rules``)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from knossos import expr as E
from knossos.ops import BINDERS, Op
from rules.rule import Rewrite, Rule, Site, rule

IF_TABLE = [
    rule("if_true", "(if true ?a ?b)", "?a"),
    rule("if_false", "(if false ?a ?b)", "?b"),
    rule("if_return_p", "(if ?p true false)", "?p"),
    rule("if_both_same", "(if ?p ?a ?a)", "?a", domain="evaluating p does not fail"),
    rule("eq_self", "(eq ?a ?a)", "true", domain="a is not NaN"),
]


class CompareConstants(Rule):
    """A comparison of two literals becomes its Bool value."""

    def __init__(self, name: str, op: Op, test: Callable[[Any, Any], Any]) -> None:
        self.name = name
        self.heads = frozenset({op})
        self.test = test
        self.lhs_text = f"({op.name.lower()} c1 c2)"
        self.rhs_text = "true or false"
        self.conditions_text = ("is_constant(c1)", "is_constant(c2)")

    def matches(self, site: Site) -> bool:
        return all(a.op is Op.CONST for a in site.node.args)

    def rewrite(self, site: Site) -> Rewrite:
        a, b = site.node.args
        return site.number, E.const(bool(self.test(a.data, b.data)))


class LiftIf(Rule):
    """``(op ... (if p x y) ...)`` -> ``(if p (op ... x ...) (op ... y ...))`` when op binds nothing in p."""

    name = "lift_if"
    heads = frozenset({Op.IF})
    lhs_text = "(op ... (if p x y) ...)"
    rhs_text = "(if p (op ... x ...) (op ... y ...))"
    conditions_text = ("op binds no variable free in p", "op is not a lambda")
    domain = "evaluating p does not fail where op would not have evaluated it (e.g. under and/or/if)"

    def matches(self, site: Site) -> bool:
        parent = site.parent
        if parent is None:
            return False
        parent_node, _, index = parent
        if parent_node.op is Op.LAM:
            return False
        binder = BINDERS.get(parent_node.op)
        if binder is not None and index == binder[1]:
            return parent_node.args[binder[0]].data not in site.node.args[0].free
        return True

    def rewrite(self, site: Site) -> Rewrite:
        parent = site.parent
        assert parent is not None
        parent_node, parent_number, index = parent
        p, x, y = site.node.args

        def with_child(c: E.Expr) -> E.Expr:
            args = list(parent_node.args)
            args[index] = c
            return parent_node.replace_args(tuple(args))

        return parent_number, E.op(Op.IF, p, with_child(x), with_child(y))


IF_RULES: list[Rule] = [
    *IF_TABLE,
    CompareConstants("cprop_eq", Op.EQ, operator.eq),
    CompareConstants("cprop_gt", Op.GT, operator.gt),
    CompareConstants("cprop_gteq", Op.GTE, operator.ge),
    LiftIf(),
]
