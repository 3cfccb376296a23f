"""The rule interface, rewrite sites, and rules written as one ``rule(...)`` row.

A rule looks at a :class:`Site` (a node of an expression, with its ancestors and the variables in
scope) and may rewrite it.  Most rules are table rows::

    rule("add_zero", "(add 0 ?a)", "?a")
    rule("sumbuild_of_sum", "(sumbuild ?n (lam ?x (add ?a ?b)))",
         "(add (sumbuild ?n (lam ?x ?a)) (sumbuild ?n (lam ?x ?b)))")

A row whose replacement needs code (fresh names, a tuple of any length, a substitution) gives an
:class:`Applier` for its right side: the pattern is still written once, and the applier builds the
replacement from the hole bindings and the site (as egg's ``Applier``, tinygrad's ``(UPat, fn)``)::

    rule("cse_bind", "(let (?x ?e) (let (?y ?e) ?b))", builds("(let (?x ?e) ?b[?y := ?x])", share),
         not_free("?x", "?e"))

Rules whose match no pattern can express (a variable and the let that binds it, a node's parent, a
call of a def, constant folding) subclass :class:`Rule`.  Rows are checked when built: every hole of
a right-hand side must be bound by the left-hand side, and conditions may only name bound holes.

A rule is asked once per site: :meth:`Rule.match` returns what it found there (a row's hole
bindings, the parts a coded rule picked out) or None, and :meth:`Rule.rewrite` builds the rewrite from
that, as egg's searcher hands its substitution to the applier.  Enumerating actions only matches;
generating children matches each pattern once, never a second time to rewrite.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import BINDERS, Op
from knossos.types import Kind
from rules.pattern import (
    Bindings,
    Lit,
    OpPattern,
    Pattern,
    head_op,
    holes,
    instantiate,
    match_pattern,
    needs_applier,
    parse_pattern,
)

#: The innermost binder of each variable in scope at a node: name -> (binder, its number).
Scope = Mapping[str, tuple[Expr, int]]
#: A name and what it meant before a binder bound it (None: nothing).
Shadowed = tuple[str, tuple[Expr, int] | None]


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
    scope: Scope = field(default_factory=dict)
    #: Where the parent binds a name over ``node``: the name and its binding in the parent's scope.
    shadowed: Shadowed | None = None

    @property
    def parent_scope(self) -> Scope:
        """The scope at the parent (``scope`` but for the name the parent binds over ``node``)."""
        return self.scope if self.shadowed is None else OuterScope(self.scope, self.shadowed)

    @property
    def parent(self) -> tuple[Expr, int, int] | None:
        return self.ancestors[-1] if self.ancestors else None

    def bound_between(self, start: int) -> set[str]:
        """Names bound by the ancestors numbered ``start`` or more whose scope holds ``node``
        (what :func:`knossos.substitution.binders_on_path` finds, read off the walk already made)."""
        names: set[str] = set()
        for ancestor, number, i in reversed(self.ancestors):  # numbers fall towards the root
            if number < start:
                break
            binder = BINDERS.get(ancestor.op)
            if binder is not None and i == binder[1]:
                names.add(ancestor.args[binder[0]].data)
        return names


class OuterScope(Mapping[str, tuple[Expr, int]]):
    """A scope with one name's binding put back as it was outside a binder (constant time)."""

    def __init__(self, inner: Scope, shadowed: Shadowed) -> None:
        self._inner = inner
        self._name, self._outer = shadowed

    def __getitem__(self, name: str) -> tuple[Expr, int]:
        if name != self._name:
            return self._inner[name]
        if self._outer is None:
            raise KeyError(name)
        return self._outer

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._inner if name != self._name or self._outer is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


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
    """A named rewrite rule.  Subclasses set ``name``, ``heads`` and implement :meth:`match` and
    :meth:`rewrite`."""

    name: str = ""
    #: Ops of the nodes where the rule may act; ``None`` means any op.
    heads: frozenset[Op] | None = None
    #: Human-readable left side, right side and conditions (for ``knossos rules``).
    lhs_text: str = ""
    rhs_text: str = ""
    conditions_text: tuple[str, ...] = ()
    #: Where the rule is only valid on part of the inputs, in words (e.g. "a is finite"); None: on all
    #: of them, the edges of machine arithmetic (infinities, NaN, 64-bit Integer overflow) included.
    domain: str | None = None
    #: Whether the rewrite never changes a value the original computes, on any input: it may turn a
    #: failure into a value, never a value into another value, an infinity, NaN or a failure (up to the
    #: sign of a zero).  The ``strict:`` rule sets keep only these (see docs/rules.md).
    strict: bool = False
    #: Whether the rewrite may overflow an Integer where the original did not (it regroups Integer
    #: arithmetic: ``a*b + a*c`` computes ``b + c`` once factored).  Such a rule leaves Integers alone
    #: unless a rule set opts in (``unsafe-int:``, :meth:`with_integers`); Floats are not affected.
    int_overflow: bool = False

    def with_integers(self) -> Rule:
        """This rule applying to Integers too, where it may overflow one (``unsafe-int:``): itself
        unless it is an :attr:`int_overflow` rule."""
        return self

    def match(self, site: Site) -> Any:
        """What :meth:`rewrite` needs at ``site`` (never None), or None where the rule does not apply."""
        raise NotImplementedError

    def rewrite(self, site: Site, found: Any) -> Rewrite:
        """The rewrite at ``site``, from what :meth:`match` found there."""
        raise NotImplementedError

    def apply(self, site: Site) -> Rewrite | None:
        """The rewrite at ``site``, or None where the rule does not apply (one match)."""
        found = self.match(site)
        return None if found is None else self.rewrite(site, found)

    def __repr__(self) -> str:
        return f"<rule {self.name}>"


class FoldRule(Rule):
    """A rule that replaces a node by a literal it computes (constant folding).

    Subclasses implement :meth:`match`, the literal's value (``None`` where the rule does not apply).
    Strict: the value is what run time computes, and none is folded that is not finite or in range.
    """

    strict = True

    def match(self, site: Site) -> bool | int | float | None:
        raise NotImplementedError

    def rewrite(self, site: Site, found: bool | int | float) -> Rewrite:
        return site.number, E.const(found)


# -- conditions ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Condition:
    """A named side condition: ``test`` is given the expressions bound to the holes ``names``, in order
    (after the site, for a condition ``at_site``: one that reads the variables in scope there).

    ``shallow`` marks a test that reads of each expression no more than its type and, for a literal,
    its value: it holds alike for all expressions of one type that are equal, so an e-graph may ask it
    of any member of an e-class (search/egraph/ translates only rules whose conditions are shallow).
    """

    text: str
    names: tuple[str, ...]
    test: Callable[..., bool]
    shallow: bool = False
    at_site: bool = False

    def holds(self, bindings: Bindings, site: Site) -> bool:
        values = [bindings[n] for n in self.names]
        return self.test(site, *values) if self.at_site else self.test(*values)


def condition(
    name: str, test: Callable[..., bool], *holes_used: str, shallow: bool = False, at_site: bool = False
) -> Condition:
    """The condition ``name(?h1, ...)``: ``test`` takes the expressions bound to the holes, in order
    (after the site, if ``at_site``), so each hole is named once, here (``shallow``: see
    :class:`Condition`)."""
    for h in holes_used:
        if not h.startswith("?"):
            raise ValueError(f"conditions name holes like '?x', not {h!r}")
    if shallow and at_site:
        raise ValueError(f"condition {name}: a test that reads the site is not shallow")
    return Condition(f"{name}({', '.join(holes_used)})", tuple(h[1:] for h in holes_used), test, shallow, at_site)


def not_free(var: str, expr: str) -> Condition:
    """The variable matched by ``var`` does not occur free in the expression matched by ``expr``."""
    return condition("not_free", lambda v, e: v.data not in e.free, var, expr)


def is_constant(hole: str) -> Condition:
    return condition("is_constant", lambda e: e.op is Op.CONST, hole, shallow=True)


def all_floats(hole: str) -> Condition:
    """The matched expression is a Float or a vector/tuple of Floats only."""
    return condition("all_floats", lambda e: e.type.leaves == _FLOAT_LEAVES, hole, shallow=True)


_FLOAT_LEAVES = frozenset({Kind.FLOAT})


def no_integers(hole: str) -> Condition:
    """The matched expression holds no Integer (it is a Float, or a vector or tuple without Integers):
    the guard of an :attr:`Rule.int_overflow` row, on a hole of the arithmetic it regroups (the
    operands of add/sub/mul/div have the same leaf types, so one hole tells)."""
    return condition("no_integers", lambda e: Kind.INTEGER not in e.type.leaves, hole, shallow=True)


# -- rows: a pattern, conditions, and a right-hand pattern or an applier --------------------------
class PatternRule(Rule):
    """A rule whose match is a left-hand pattern and side conditions: what it finds is the hole bindings."""

    #: Whether the node's type must be a scalar number (a numeric literal on a table row's right side).
    needs_scalar = False

    def __init__(
        self,
        name: str,
        lhs: str,
        conditions: tuple[Condition, ...],
        domain: str | None,
        strict: bool,
        int_overflow: str | None = None,
    ) -> None:
        self.name = name
        self.lhs_text = lhs
        self.lhs: Pattern = parse_pattern(lhs)
        if int_overflow is not None:
            if strict:
                raise ValueError(f"rule {name}: a rule that may overflow an Integer is not strict")
            conditions = (*conditions, no_integers(int_overflow))
        self.conditions = conditions
        self.conditions_text = tuple(c.text for c in conditions)
        self.domain = domain
        self.strict = strict
        self.int_overflow = int_overflow is not None
        #: The same row without its Integer guard (made once, so that sets opting in share it).
        self._with_integers: PatternRule | None = None if self.int_overflow else self
        op = head_op(self.lhs)
        self.heads = None if op is None else frozenset({op})
        bound = set(holes(self.lhs))
        for c in conditions:
            unknown = [n for n in c.names if n not in bound]
            if unknown:
                raise ValueError(f"rule {name}: condition {c.text} names unbound hole(s) {unknown}")

    def with_integers(self) -> PatternRule:
        if self._with_integers is None:
            unguarded = copy.copy(self)
            unguarded.conditions = self.conditions[:-1]  # the guard is the last condition
            unguarded.conditions_text = self.conditions_text[:-1]
            unguarded._with_integers = unguarded
            self._with_integers = unguarded
        return self._with_integers

    def match(self, site: Site) -> Bindings | None:
        b = match_pattern(self.lhs, site.node)
        if b is None:
            return None
        if self.needs_scalar and not site.node.type.is_number:
            return None
        for c in self.conditions:
            if not c.holds(b, site):
                return None
        return b


class TableRule(PatternRule):
    """A rule given by a left-hand pattern, a right-hand pattern and side conditions."""

    def __init__(
        self,
        name: str,
        lhs: str,
        rhs: str,
        conditions: tuple[Condition, ...],
        domain: str | None,
        strict: bool,
        int_overflow: str | None = None,
    ) -> None:
        super().__init__(name, lhs, conditions, domain, strict, int_overflow)
        self.rhs_text = rhs
        self.rhs: Pattern = parse_pattern(rhs)
        if needs_applier(self.lhs) or needs_applier(self.rhs):
            raise ValueError(f"rule {name}: a rest hole or a get needs an applier to build the right-hand side")
        bound = set(holes(self.lhs))
        missing = [h for h in holes(self.rhs) if h not in bound]
        if missing:
            raise ValueError(f"rule {name}: right-hand side uses unbound hole(s) {', '.join('?' + m for m in missing)}")
        #: A numeric literal on the right takes the node's type, which must then be a scalar number.
        self.needs_scalar = _has_numeric_literal(self.rhs)

    def rewrite(self, site: Site, found: Bindings) -> Rewrite:
        scalar = site.node.type if site.node.type.is_number else None
        return site.number, instantiate(self.rhs, found, scalar)


@dataclass(frozen=True)
class Applier:
    """What a row builds in code (egg's ``Applier``): ``build`` makes the node's replacement from the
    site (for the scope and fresh names) and the hole bindings; ``text`` says what it builds."""

    text: str
    build: Callable[[Site, Bindings], Expr]


def builds(text: str, build: Callable[[Site, Bindings], Expr]) -> Applier:
    """The right side of a row whose replacement is built in code."""
    return Applier(text, build)


class ApplierRule(PatternRule):
    """A rule given by a left-hand pattern, side conditions and an :class:`Applier`."""

    def __init__(
        self,
        name: str,
        lhs: str,
        applier: Applier,
        conditions: tuple[Condition, ...],
        domain: str | None,
        strict: bool,
        int_overflow: str | None = None,
    ) -> None:
        super().__init__(name, lhs, conditions, domain, strict, int_overflow)
        self.applier = applier
        self.rhs_text = applier.text

    def rewrite(self, site: Site, found: Bindings) -> Rewrite:
        return site.number, self.applier.build(site, found)


def _has_numeric_literal(p: Pattern) -> bool:
    stack = [p]
    while stack:
        q = stack.pop()
        if isinstance(q, Lit) and not isinstance(q.value, bool):
            return True
        if isinstance(q, OpPattern):
            stack.extend(q.args)
    return False


@overload
def rule(
    name: str,
    lhs: str,
    rhs: str,
    *conditions: Condition,
    domain: str | None = None,
    strict: bool = False,
    int_overflow: str | None = None,
) -> TableRule: ...


@overload
def rule(
    name: str,
    lhs: str,
    rhs: Applier,
    *conditions: Condition,
    domain: str | None = None,
    strict: bool = False,
    int_overflow: str | None = None,
) -> ApplierRule: ...


def rule(
    name: str,
    lhs: str,
    rhs: str | Applier,
    *conditions: Condition,
    domain: str | None = None,
    strict: bool = False,
    int_overflow: str | None = None,
) -> TableRule | ApplierRule:
    """One row of a rule table: the right side a pattern, or an :class:`Applier` (``strict``: see
    :attr:`Rule.strict`; ``int_overflow``, a hole of the arithmetic the row regroups: the row may
    overflow an Integer where the original did not, and applies where that hole holds no Integer
    unless a set opts in, see :attr:`Rule.int_overflow`)."""
    if isinstance(rhs, Applier):
        return ApplierRule(name, lhs, rhs, conditions, domain, strict, int_overflow)
    return TableRule(name, lhs, rhs, conditions, domain, strict, int_overflow)
