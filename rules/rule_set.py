"""Rule sets: ordered, named collections of rules with unique names, combined with ``+``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from knossos.expr import Expr
from knossos.ops import Op
from rules.rule import Rule, Site


class RuleSet:
    """An ordered set of rules.  ``a + b`` keeps the order and drops rules already in ``a``."""

    def __init__(self, name: str, rules: Iterable[Rule]) -> None:
        self.name = name
        unique: list[Rule] = []
        for r in rules:
            if r in unique:
                continue
            clash = next((u for u in unique if u.name == r.name), None)
            if clash is not None:
                raise ValueError(f"rule set {name}: two different rules named {r.name}")
            unique.append(r)
        self.rules: tuple[Rule, ...] = tuple(unique)
        #: Rules by the op of the nodes they may act on: matching dispatches on the head op.
        self.by_op: dict[Op, tuple[Rule, ...]] = {
            op: tuple(r for r in self.rules if r.heads is None or op in r.heads) for op in Op
        }
        self._by_name = {r.name: r for r in self.rules}

    def __add__(self, other: RuleSet) -> RuleSet:
        return RuleSet(f"{self.name}+{other.name}", [*self.rules, *other.rules])

    def __sub__(self, names: Iterable[str]) -> RuleSet:
        drop = set(names)
        return RuleSet(self.name, [r for r in self.rules if r.name not in drop])

    def named(self, name: str) -> RuleSet:
        return RuleSet(name, self.rules)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def rule(self, name: str) -> Rule:
        return self._by_name[name]

    def index(self, rule: Rule) -> int:
        return self.rules.index(rule)

    def __repr__(self) -> str:
        return f"RuleSet({self.name}, {len(self.rules)} rules)"


def rewrite_root(node: Expr, rule_set: RuleSet) -> Expr | None:
    """The first rule of ``rule_set`` (in its order) that applies at the root of ``node``, applied;
    None if none does.  Rules see the node alone: no parent, nothing in scope."""
    candidates = rule_set.by_op[node.op]
    if not candidates:  # most nodes: no site to make
        return None
    site = Site(node, node, 0)
    for r in candidates:
        rewrite = r.apply(site)
        if rewrite is not None:
            number, replacement = rewrite
            if number != 0 or replacement.type is not node.type:
                raise AssertionError(f"rule {r.name} rewrote outside the node or changed its type")
            return replacement
    return None


def rewrite_to_fixed_point(node: Expr, rule_set: RuleSet) -> Expr:
    """``node`` rewritten at its root by :func:`rewrite_root` until no rule applies.  Ends only if
    every rule lowers some measure: the caller's rule set must have one (the baseline's does)."""
    while True:
        new = rewrite_root(node, rule_set)
        if new is None or new is node:
            return node
        node = new
