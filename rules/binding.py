"""Binding rules: introducing, lifting, sharing, inlining and deleting ``let``s.

``inline_let`` acts at one occurrence of a let-bound variable (the action's node is the occurrence)
and replaces it by the bound value, renaming any binder in between that would capture one of the
value's free variables.  ``new_bind``, ``lift_bind`` (and ``lift_if`` in :mod:`rules.conditionals`)
act at a node but rewrite its parent, as in the reference.
"""

from __future__ import annotations

from knossos import expr as E
from knossos.expr import Expr, names_in
from knossos.ops import BINDERS, Op
from knossos.substitution import fresh_name, replace_occurrence, substitute
from rules.pattern import Bindings
from rules.rule import Rewrite, Rule, Site, builds, can_leave_parent, not_free, rule, with_child


class InlineLet(Rule):
    """``(let (x e) ... x ...)`` -> ``(let (x e) ... e ...)`` at one occurrence of ``x``."""

    name = "inline_let"
    strict = True
    heads = frozenset({Op.VAR})
    lhs_text = "(let (x e) ...x...)"
    rhs_text = "(let (x e) ...e...)"
    conditions_text = ("x is bound by a let, the occurrence is not the binding one",)

    def match(self, site: Site) -> tuple[Expr, int] | None:
        """The let binding the occurrence, with its number."""
        parent = site.parent
        if parent is None:
            return None
        parent_node, _, index = parent
        binder = BINDERS.get(parent_node.op)
        if binder is not None and index == binder[0]:
            return None  # the binding occurrence itself
        found = site.scope.get(site.node.data)
        if found is None or found[0].op is not Op.LET or found[0].args[0] is not site.node:
            return None  # bound by a lambda/build, or by a let of another type
        return found

    def rewrite(self, site: Site, found: tuple[Expr, int]) -> Rewrite:
        let_node, let_number = found
        value = let_node.args[1]
        body = let_node.args[2]
        # the occurrence's number inside the body; binders on the way that capture `value` are renamed
        if let_node.args[0].data not in value.free and not site.bound_between(let_number) & value.free:
            return site.number, value  # nothing can capture: just replace the occurrence
        offset = site.number - (let_number + 1 + let_node.args[0].size + value.size)
        var = let_node.args[0]
        if var.data in value.free:  # (let (x (f x)) ...x...): the let itself would capture the value's x
            new_var = E.var(fresh_name([names_in(let_node)], base=var.data), var.type)
            body = substitute(body, var.data, new_var)  # same shape, so the occurrence keeps its number
            var = new_var
        return let_number, E.let(var, value, replace_occurrence(body, offset, value))


class NewBind(Rule):
    """``e`` -> ``(let (x e) x)`` for a compound ``e`` whose parent is not a let."""

    name = "new_bind"
    strict = True
    heads = None
    lhs_text = "e"
    rhs_text = "(let (x e) x)"
    conditions_text = ("e is not a variable, literal or let", "the parent is not a let or lambda")

    def match(self, site: Site) -> bool | None:
        parent = site.parent
        if parent is None or not site.node.args or site.node.op is Op.LET:
            return None
        parent_node, _, index = parent
        if parent_node.op in (Op.LET, Op.LAM):
            return None
        binder = BINDERS.get(parent_node.op)
        return None if binder is not None and index == binder[0] else True

    def rewrite(self, site: Site, found: bool) -> Rewrite:
        e = site.node
        x = E.var(fresh_name([e.free]), e.type)
        return site.number, E.let(x, e, x)


class LiftBind(Rule):
    """``(op ... (let (x e) b) ...)`` -> ``(let (x e) (op ... b ...))`` when ``op`` binds nothing in ``e``."""

    name = "lift_bind"
    heads = frozenset({Op.LET})
    lhs_text = "(op ... (let (x e) b) ...)"
    rhs_text = "(let (x e) (op ... b ...))"
    conditions_text = ("op binds no variable free in e", "x is renamed if op's other children use it")
    domain = "evaluating e does not fail (it may now be evaluated where it was not: out of an if branch, the right side of and/or, or a build of size 0)"

    def match(self, site: Site) -> bool | None:
        return can_leave_parent(site, site.node.args[1]) or None

    def rewrite(self, site: Site, found: bool) -> Rewrite:
        parent = site.parent
        assert parent is not None
        parent_node, parent_number, index = parent
        var, value, body = site.node.args
        siblings = [c for i, c in enumerate(parent_node.args) if i != index]
        if any(var.data in c.free or (c.op is Op.VAR and c.data == var.data) for c in siblings):
            avoid = names_in(parent_node)
            new_var = E.var(fresh_name([avoid]), var.type)
            body = substitute(body, var.data, new_var)
            var = new_var
        return parent_number, E.let(var, value, with_child(parent_node, index, body))


def _share(site: Site, b: Bindings) -> Expr:
    x, y, body = b["x"], b["y"], b["b"]
    return E.let(x, b["e"], body if y is x else substitute(body, y.data, x))


DELETE_LET = rule("delete_let", "(let (?x ?e) ?b)", "?b", not_free("?x", "?b"), strict=True)
LET_RECOVER = rule("let_recover", "(let (?x ?e) ?x)", "?e", strict=True)
CSE_BIND = rule(
    "cse_bind",
    "(let (?x ?e) (let (?y ?e) ?b))",
    builds("(let (?x ?e) ?b[?y := ?x])", _share),
    not_free("?x", "?e"),
    strict=True,
)

INLINE_LET = InlineLet()
NEW_BIND = NewBind()
LIFT_BIND = LiftBind()
