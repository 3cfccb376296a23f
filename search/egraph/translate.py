"""The rules of a rule set as e-graph rewrites, read off the same tables the other searches use.

Each rule of the set is, for the e-graph, one of:

* a **rewrite**: a table row (:class:`rules.rule.TableRule`) whose patterns bind no variable (no let,
  build or sumbuild) and whose side conditions are all *shallow* (they read only a hole's type and,
  for a literal, its value: ``float``, ``all_floats``, ``is_constant``, ``not_zero_literal``, ``same
  type``), so that they can be asked of an e-class through any of its members (a literal member if it
  has one).  Its left side is matched against e-classes, its right side is added and merged in;
* a **fold**: a :class:`rules.rule.FoldRule` (constant folding), run by the e-graph's constant
  analysis on every e-node whose children have literal members, with the rule's own code;
* a **let rule** (``inline_let``, ``delete_let``, ``new_bind``, ``lift_bind``, ``cse_bind``,
  ``let_recover``): not rewrites; the e-graph inlines the start's lets and its DAG extraction binds
  shared subexpressions with lets (see :mod:`search.egraph.extract`);
* **left out**: every other rule (rules with binders, rules written as code other than folds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import BINDERS, Op
from knossos.types import Type
from rules.binding import CSE_BIND, DELETE_LET, INLINE_LET, LET_RECOVER, LIFT_BIND, NEW_BIND
from rules.pattern import Hole, Lit, OpPattern, Pattern, literal_matches, literal_value
from rules.rule import FoldRule, Rule, Site, TableRule
from rules.rule_set import RuleSet
from search.egraph.graph import EGraph, ENode, Fold

#: The rules the e-graph does not run but stands in for: lets are inlined, and extraction makes them.
LET_RULES: tuple[Rule, ...] = (INLINE_LET, DELETE_LET, NEW_BIND, LIFT_BIND, CSE_BIND, LET_RECOVER)

#: The e-classes bound to a rule's holes, in the order of the holes' first appearance.
Match = tuple[int, ...]
#: Matches a pattern against an e-class, extending each of the partial matches given.
Matcher = Callable[[EGraph, int, list[Match]], list[Match]]
#: Adds a right side to an e-graph for a match: (e-graph, match, type of numeric literals) -> its e-class.
Builder = Callable[[EGraph, Match, Type | None], int]


@dataclass(frozen=True)
class ERewrite:
    """A table rule as an e-graph rewrite."""

    rule: TableRule
    lhs: OpPattern
    #: A numeric literal on the right takes the matched node's type, which must then be a number.
    needs_scalar: bool
    #: Matchers of the left side's arguments, and the index of each hole in a match.
    args: tuple[Matcher, ...]
    holes: dict[str, int]
    #: Every argument of the left side is a hole of its own (``(add ?a ?b)``): no matchers to run.
    flat: bool
    #: The indices of the holes the conditions read.
    condition_holes: tuple[int, ...]
    #: Adds the right side for a match (see :func:`_builder`).
    build: Builder
    #: Whether the conditions hold, by the types and literals of those holes' e-classes.
    held: dict[tuple[tuple[Type, Expr | None], ...], bool] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.rule.name

    def search(self, g: EGraph, by_op: dict[Op, list[tuple[int, ENode]]], most: int) -> list[tuple[int, Match]]:
        """The matches (e-class, holes) in ``g`` (just rebuilt: every id is canonical, so no ``find``), at
        most ``most`` (then the caller bans the rule)."""
        out: list[tuple[int, Match]] = []
        arity = len(self.args)
        classes = g.classes
        conditions = self.rule.conditions
        single = self.condition_holes[0] if len(self.condition_holes) == 1 else None
        by_class: dict[int, bool] = {}  # e-classes do not change while matching
        for cls, node in by_op.get(self.lhs.op, ()):
            kids = node[2]
            if len(kids) != arity or (self.needs_scalar and not classes[cls].type.is_number):
                continue
            if self.flat:  # every argument a hole of its own: the children are the match
                found: list[Match] = [kids]
            else:
                found = [()]
                for matcher, kid in zip(self.args, kids, strict=True):
                    found = matcher(g, kid, found)
                    if not found:
                        break
            if not conditions:
                out.extend([(cls, m) for m in found])
            elif single is not None:  # one hole tested: whether they hold is known per e-class
                for m in found:
                    c = m[single]
                    ok = by_class.get(c)
                    if ok is None:
                        ok = by_class[c] = self._held(g, m)
                    if ok:
                        out.append((cls, m))
            else:
                out.extend([(cls, m) for m in found if self._held(g, m)])
            if len(out) >= most:
                return out
        return out

    def _held(self, g: EGraph, m: Match) -> bool:
        """Whether the conditions hold for ``m``.  Shallow conditions read only the types and literals of
        the holes' e-classes: cached on those."""
        classes = g.classes
        key = tuple([(classes[m[i]].type, classes[m[i]].const) for i in self.condition_holes])
        held = self.held.get(key)
        if held is None:
            terms = [classes[c].term for c in m]
            held = self.held[key] = all(c.test(*[terms[self.holes[n]] for n in c.names]) for c in self.rule.conditions)
        return held

    def apply(self, g: EGraph, cls: int, m: Match) -> bool:
        """Add the right side for match ``m`` at ``cls`` and merge it in; True if that changed ``g``."""
        t = g.classes[g.find(cls)].type
        return g.union(cls, self.build(g, m, t if t.is_number else None))


def _compile(p: Pattern, holes: dict[str, int]) -> Matcher:
    """A matcher of ``p``; ``holes`` gets the index of each hole first seen in ``p`` (left to right).
    Matchers run on a rebuilt e-graph, where every id is canonical."""
    if isinstance(p, Hole):
        if p.name in holes:
            i = holes[p.name]
            return lambda g, cls, ms: [m for m in ms if m[i] == cls]
        holes[p.name] = len(holes)
        return lambda g, cls, ms: [(*m, cls) for m in ms]
    if isinstance(p, Lit):
        value = p.value

        def match_literal(g: EGraph, cls: int, ms: list[Match]) -> list[Match]:
            literals = g.classes[cls].by_op.get(Op.CONST, ())
            return ms if any(literal_matches(value, n[1]) for n in literals) else []

        return match_literal
    op, arity = p.op, len(p.args)
    if _fresh_holes(p.args, holes):  # (op ?x ?y) with new holes: a match per member, its children appended
        for a in p.args:
            holes[a.name] = len(holes)  # type: ignore[union-attr]

        def match_flat(g: EGraph, cls: int, ms: list[Match]) -> list[Match]:
            out: list[Match] = []
            for node in g.classes[cls].by_op.get(op, ()):
                kids = node[2]
                if len(kids) == arity:
                    if len(ms) == 1:
                        out.append(ms[0] + kids)
                    else:
                        out.extend([m + kids for m in ms])
            return out

        return match_flat
    subs = tuple(_compile(a, holes) for a in p.args)

    def match_node(g: EGraph, cls: int, ms: list[Match]) -> list[Match]:
        out: list[Match] = []
        for node in g.classes[cls].by_op.get(op, ()):
            kids = node[2]
            if len(kids) != arity:
                continue
            found = ms
            for sub, kid in zip(subs, kids, strict=True):
                found = sub(g, kid, found)
                if not found:
                    break
            out.extend(found)
        return out

    return match_node


def _fresh_holes(args: tuple[Pattern, ...], holes: dict[str, int]) -> bool:
    """Whether every one of ``args`` is a hole not seen before, each a different one."""
    names = [a.name for a in args if isinstance(a, Hole)]
    return len(names) == len(args) and len(set(names)) == len(names) and not any(n in holes for n in names)


def _builder(p: Pattern, holes: dict[str, int]) -> Builder:
    """What adds ``p`` to an e-graph for a match, its holes numbered by ``holes``; a numeric literal
    takes the type given to the builder (the matched node's, when that is a number)."""
    if isinstance(p, Hole):
        i = holes[p.name]
        return lambda g, m, scalar: m[i]
    if isinstance(p, Lit):
        value = p.value
        leaves: dict[Type | None, Expr] = {}

        def literal(g: EGraph, m: Match, scalar: Type | None) -> int:
            leaf = leaves.get(scalar)
            if leaf is None:
                leaf = leaves[scalar] = E.const(literal_value(value, scalar))
            return g.add_leaf(leaf)

        return literal
    op = p.op
    subs = tuple(_builder(a, holes) for a in p.args)
    if len(subs) == 2:
        first, second = subs
        return lambda g, m, scalar: g.add((op, None, (first(g, m, scalar), second(g, m, scalar))))
    return lambda g, m, scalar: g.add((op, None, tuple([sub(g, m, scalar) for sub in subs])))


def _rewrite(r: TableRule) -> ERewrite:
    """``r`` as an e-graph rewrite (``r`` must be translatable)."""
    assert isinstance(r.lhs, OpPattern)
    holes: dict[str, int] = {}
    flat = _fresh_holes(r.lhs.args, holes)
    args = tuple(_compile(a, holes) for a in r.lhs.args)
    tested = tuple(sorted({holes[n] for c in r.conditions for n in c.names}))
    return ERewrite(r, r.lhs, r.needs_scalar, args, holes, flat, tested, _builder(r.rhs, holes))


def _has_binder(p: Pattern) -> bool:
    stack = [p]
    while stack:
        q = stack.pop()
        if isinstance(q, OpPattern):
            if q.op in BINDERS:
                return True
            stack.extend(q.args)
    return False


def _fold(rule: FoldRule) -> Fold:
    def fold(node: Expr) -> Expr | None:
        site = Site(node, node, 0)
        found = rule.match(site)
        return None if found is None else rule.rewrite(site, found)[1]

    return fold


@dataclass
class Translation:
    """A rule set as the e-graph runs it."""

    rewrites: list[ERewrite] = field(default_factory=list)
    folds: dict[Op, list[Fold]] = field(default_factory=dict)
    #: Names of the rules of each kind, in the set's order.
    fold_names: list[str] = field(default_factory=list)
    let_rules: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def translate_rules(rules: RuleSet) -> Translation:
    out = Translation()
    for r in rules:
        if r in LET_RULES:
            out.let_rules.append(r.name)
        elif isinstance(r, TableRule) and _translatable(r):
            out.rewrites.append(_rewrite(r))
        elif isinstance(r, FoldRule) and r.heads is not None:
            out.fold_names.append(r.name)
            for op in r.heads:
                out.folds.setdefault(op, []).append(_fold(r))
        else:
            out.left_out.append(r.name)
    return out


def _translatable(r: TableRule) -> bool:
    return (
        isinstance(r.lhs, OpPattern)
        and not _has_binder(r.lhs)
        and not _has_binder(r.rhs)
        and all(c.shallow for c in r.conditions)
    )
