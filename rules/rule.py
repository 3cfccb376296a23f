"""The rule interface, rewrite sites, and table rules written as one ``rule(...)`` row.

A rule looks at a :class:`Site` (a node of an expression, with its ancestors and the variables in
scope) and may rewrite it.  Most rules are table rows::

    rule("add_zero", "(add 0 ?a)", "?a")
    rule("sumbuild_of_build", "(sumbuild ?o (lam ?oi (build ?n (lam ?ni ?e))))",
         "(build ?n (lam ?ni (sumbuild ?o (lam ?oi ?e))))", not_free("?oi", "?n"), not_free("?ni", "?o"))

Rules that need real code (capture-avoiding inlining, constant folding, rules that rewrite a node's
parent) subclass :class:`Rule`.  Rules are checked when built: every hole of a right-hand side must
be bound by the left-hand side, and conditions may only name bound holes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import BINDERS, Op
from knossos.types import Kind
from rules.pattern import Bindings, Lit, Node, Pattern, head_op, holes, instantiate, match, parse_pattern


@dataclass
class Site:
    """A place in ``root`` where a rule may act."""

    root: Expr
    node: Expr
    #: Pre-order number of ``node`` in ``root``.
    number: int
    #: Ancestors from the root down: (ancestor, its number, index of the child on the way to ``node``).
    ancestors: list[tuple[Expr, int, int]] = field(default_factory=list)
    #: Innermost binder of each variable in scope at ``node``: name -> (binder, its number).
    scope: dict[str, tuple[Expr, int]] = field(default_factory=dict)

    @property
    def parent(self) -> tuple[Expr, int, int] | None:
        return self.ancestors[-1] if self.ancestors else None

    def bound_between(self, start: int) -> set[str]:
        """Names bound by the ancestors numbered ``start`` or more whose scope holds ``node``
        (what :func:`rules.substitution.binders_on_path` finds, read off the walk already made)."""
        names: set[str] = set()
        for ancestor, number, i in self.ancestors:
            if number >= start:
                binder = BINDERS.get(ancestor.op)
                if binder is not None and i == binder[1]:
                    names.add(ancestor.args[binder[0]].data)
        return names


Rewrite = tuple[int, Expr]  # (number of the node to replace, its replacement)


def can_leave_parent(site: Site, moved: Expr) -> bool:
    """Whether ``moved``, a part of the node at ``site``, may be evaluated outside the node's parent.

    Rules that lift something over the parent (lift_bind, lift_if) need the parent to exist, not to
    be a lambda, and not to bind a variable that ``moved`` uses.
    """
    parent = site.parent
    if parent is None:
        return False
    parent_node, _, index = parent
    if parent_node.op is Op.LAM:
        return False
    binder = BINDERS.get(parent_node.op)
    return not (binder is not None and index == binder[1] and parent_node.args[binder[0]].data in moved.free)


def with_child(node: Expr, index: int, child: Expr) -> Expr:
    """``node`` with its child ``index`` replaced."""
    args = list(node.args)
    args[index] = child
    return node.replace_args(tuple(args))


class Rule:
    """A named rewrite rule.  Subclasses set ``name``, ``heads`` and implement the two methods."""

    name: str = ""
    #: Ops of the nodes where the rule may act; ``None`` means any op.
    heads: frozenset[Op] | None = None
    #: Human-readable left side, right side and conditions (for ``knossos rules``).
    lhs_text: str = ""
    rhs_text: str = ""
    conditions_text: tuple[str, ...] = ()
    #: Where the rule is only valid on part of the inputs, in words (e.g. "a is finite").
    domain: str | None = None

    def matches(self, site: Site) -> bool:
        raise NotImplementedError

    def rewrite(self, site: Site) -> Rewrite:
        """The rewrite at a site where :meth:`matches` is true."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<rule {self.name}>"


class FoldRule(Rule):
    """A rule that replaces a node by a literal it computes (constant folding).

    Subclasses implement :meth:`value`, which is ``None`` where the rule does not apply.
    """

    def value(self, site: Site) -> bool | int | float | None:
        raise NotImplementedError

    def matches(self, site: Site) -> bool:
        return self.value(site) is not None

    def rewrite(self, site: Site) -> Rewrite:
        value = self.value(site)
        assert value is not None
        return site.number, E.const(value)


# -- conditions ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Condition:
    """A named side condition over the hole bindings of a match."""

    text: str
    names: tuple[str, ...]
    test: Callable[[Bindings], bool]


def _hole_name(h: str) -> str:
    if not h.startswith("?"):
        raise ValueError(f"conditions name holes like '?x', not {h!r}")
    return h[1:]


def not_free(var: str, expr: str) -> Condition:
    """The variable matched by ``var`` does not occur free in the expression matched by ``expr``."""
    v, e = _hole_name(var), _hole_name(expr)
    return Condition(f"not_free({var}, {expr})", (v, e), lambda b: b[v].data not in b[e].free)


def is_constant(hole: str) -> Condition:
    h = _hole_name(hole)
    return Condition(f"is_constant({hole})", (h,), lambda b: b[h].op is Op.CONST)


def all_floats(hole: str) -> Condition:
    """The matched expression is a Float or a vector/tuple of Floats only."""
    h = _hole_name(hole)
    return Condition(f"all_floats({hole})", (h,), lambda b: b[h].type.leaves == _FLOAT_LEAVES)


_FLOAT_LEAVES = frozenset({Kind.FLOAT})


def condition(text: str, test: Callable[[Bindings], bool], *holes_used: str) -> Condition:
    """Any other condition, with its text for listings."""
    return Condition(text, tuple(_hole_name(h) for h in holes_used), test)


# -- table rules ---------------------------------------------------------------------------------
class TableRule(Rule):
    """A rule given by a left-hand pattern, a right-hand pattern and side conditions."""

    def __init__(self, name: str, lhs: str, rhs: str, conditions: tuple[Condition, ...], domain: str | None) -> None:
        self.name = name
        self.lhs_text, self.rhs_text = lhs, rhs
        self.lhs: Pattern = parse_pattern(lhs)
        self.rhs: Pattern = parse_pattern(rhs)
        self.conditions = conditions
        self.conditions_text = tuple(c.text for c in conditions)
        self.domain = domain
        op = head_op(self.lhs)
        self.heads = None if op is None else frozenset({op})
        bound = set(holes(self.lhs))
        missing = [h for h in holes(self.rhs) if h not in bound]
        if missing:
            raise ValueError(f"rule {name}: right-hand side uses unbound hole(s) {', '.join('?' + m for m in missing)}")
        for c in conditions:
            unknown = [n for n in c.names if n not in bound]
            if unknown:
                raise ValueError(f"rule {name}: condition {c.text} names unbound hole(s) {unknown}")
        #: A numeric literal on the right takes the node's type, which must then be a scalar number.
        self._needs_scalar = _has_numeric_literal(self.rhs)

    def _bindings(self, site: Site) -> Bindings | None:
        b = match(self.lhs, site.node)
        if b is None:
            return None
        if self._needs_scalar and not site.node.type.is_number:
            return None
        for c in self.conditions:
            if not c.test(b):
                return None
        return b

    def matches(self, site: Site) -> bool:
        return self._bindings(site) is not None

    def rewrite(self, site: Site) -> Rewrite:
        b = self._bindings(site)
        assert b is not None, f"{self.name} does not apply here"
        scalar = site.node.type if site.node.type.is_number else None
        return site.number, instantiate(self.rhs, b, scalar)


def _has_numeric_literal(p: Pattern) -> bool:
    stack = [p]
    while stack:
        q = stack.pop()
        if isinstance(q, Lit) and not isinstance(q.value, bool):
            return True
        if isinstance(q, Node):
            stack.extend(q.args)
    return False


def rule(name: str, lhs: str, rhs: str, *conditions: Condition, domain: str | None = None) -> TableRule:
    """One row of a rule table."""
    return TableRule(name, lhs, rhs, conditions, domain)
