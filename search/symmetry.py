"""Pruning commutations that only relabel: search's answer to the plateaus of commute_add/commute_mul.

Swapping the operands of an ``add`` or a ``mul`` changes neither cost nor meaning.  Every such node of
a state is one commutation away, so a state with k of them has 2^k relabellings of equal cost and
equal value, and a search that ranks states by cost and value spends its budget on them before it
takes the uphill step a fusion needs.  A commutation is worth taking only where the swapped order
lets another rule do something it could not do before: ``(mul (sub 0 s) x)`` must become ``(mul x
(sub 0 s))`` for ``mul_by_sub`` to match, ``(mul a 0)`` must become ``(mul 0 a)`` for ``mul_zero``.

:class:`CommuteFilter` keeps a commutation child only when a rule other than a commutation, applied
at the swapped node or at its parent, gives a result that no such rule gives there before the swap,
results compared up to the order of commutative operands (:meth:`CommuteFilter.canonical`).  It
looks one step ahead and one node up: a swap that pays off only after a second swap, or further up
the tree, is pruned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from knossos.expr import Expr
from knossos.ops import Op
from rules.actions import Action, site_at
from rules.lazy_children import Sketch
from rules.rule import Rule, Scope, Site, TableRule
from rules.rule_set import RuleSet

#: Ops whose operands commute (canonical forms sort them).
COMMUTATIVE = frozenset({Op.ADD, Op.MUL})


def is_commutation(rule: Rule) -> bool:
    """Whether ``rule`` is ``(op ?a ?b) -> (op ?b ?a)`` for a commutative op."""
    if not isinstance(rule, TableRule) or rule.heads is None or not rule.heads <= COMMUTATIVE:
        return False
    op = next(iter(rule.heads)).name.lower()
    return rule.lhs_text.split() == [f"({op}", "?a", "?b)"] and rule.rhs_text.split() == [f"({op}", "?b", "?a)"]


class LocalRules:
    """The rules of a set other than its commutations, asked at an action's node and its parent:
    what both pruning filters compare before and after a step (here and search/idle_inlines.py).

    The sites come from walking to the node (:meth:`around`, :meth:`sites`), or, for a sketched
    child of a deep program (:mod:`rules.lazy_children`), from the enumeration's own site
    (:meth:`sites_before`, :meth:`sites_after`): those carry ancestors up to the parent's parent only,
    which is all a rule looks at (its ``parent``), so no walk and no built child is needed."""

    def __init__(self, rules: RuleSet) -> None:
        self.commutations = frozenset(r for r in rules.rules if is_commutation(r))
        self._by_op = {op: tuple(r for r in rs if r not in self.commutations) for op, rs in rules.by_op.items()}

    def around(self, root: Expr, action: Action) -> tuple[Site, list[int]]:
        """The site of ``action`` in ``root``, and the numbers of its node and of its parent.  A step
        at a node keeps the numbers of the node and its ancestors, so they name the same places after."""
        site = site_at(root, action.node)
        return site, [action.node] + ([site.parent[1]] if site.parent is not None else [])

    def sites(self, root: Expr, numbers: list[int]) -> list[Site]:
        return [site_at(root, number) for number in numbers]

    def sites_before(self, site: Site, parent_scope: Scope | None) -> list[Site]:
        """The sites of ``site``'s node and its parent, from an enumeration's ``site``."""
        if site.parent is None or parent_scope is None:
            return [site]
        parent, number, _ = site.parent
        return [site, Site(site.root, parent, number, site.ancestors[-2:-1], parent_scope)]

    def sites_after(self, site: Site, parent_scope: Scope | None, replacement: Expr) -> list[Site]:
        """The sites of the same numbers in the child that replaces ``site``'s node with ``replacement``:
        the parent and the grandparent rebuilt over it."""
        if site.parent is None or parent_scope is None:
            return [Site(site.root, replacement, site.number, [], site.scope)]
        parent, number, i = site.parent
        parent_after = parent.replace_args((*parent.args[:i], replacement, *parent.args[i + 1 :]))
        grand: list[tuple[Expr, int, int]] = []
        if len(site.ancestors) >= 2:
            g, g_number, j = site.ancestors[-2]
            grand = [(g.replace_args((*g.args[:j], parent_after, *g.args[j + 1 :])), g_number, j)]
        return [
            Site(site.root, replacement, site.number, [(parent_after, number, i)], site.scope),
            Site(site.root, parent_after, number, grand, parent_scope),
        ]

    def matches(self, sites: list[Site]) -> Iterator[tuple[Site, Rule, Any]]:
        """(site, rule, what it matched) of every such rule that matches at ``sites``."""
        for site in sites:
            for rule in self._by_op.get(site.node.op, ()):
                found = rule.match(site)
                if found is not None:
                    yield site, rule, found


class CommuteFilter:
    """Decides which commutation children of a state to keep (see the module docstring)."""

    def __init__(self, rules: RuleSet) -> None:
        self._local = LocalRules(rules)
        self._canonical: dict[Expr, Expr] = {}
        #: Commutation children pruned so far.
        self.pruned = 0

    def keep(self, root: Expr, action: Action, child: Expr) -> bool:
        if action.rule not in self._local.commutations:
            return True
        _, numbers = self._local.around(root, action)
        return self._decide(self._local.sites(child, numbers), self._local.sites(root, numbers))

    def keep_sketch(self, site: Site, parent_scope: Scope | None, sketch: Sketch) -> bool:
        """:meth:`keep` for a sketched child, from the site it was made at (a commutation rewrites its own node)."""
        if sketch.action.rule not in self._local.commutations:
            return True
        after = self._local.sites_after(site, parent_scope, sketch.replacement)
        return self._decide(after, self._local.sites_before(site, parent_scope))

    def _decide(self, after: list[Site], before: list[Site]) -> bool:
        results = self._local_results(after)
        if results and not results <= self._local_results(before):
            return True
        self.pruned += 1
        return False

    def _local_results(self, sites: list[Site]) -> set[tuple[int, Expr]]:
        """What the rules other than commutations make at ``sites``: (the node each rewrite
        replaces, the canonical form of its replacement).  A root and its commutation differ only
        below the swapped node, which these rewrites replace whole, so comparing replacements
        compares the resulting expressions."""
        out: set[tuple[int, Expr]] = set()
        for site, rule, found in self._local.matches(sites):
            target, replacement = rule.rewrite(site, found)
            out.add((target, self.canonical(replacement)))
        return out

    def canonical(self, e: Expr) -> Expr:
        """``e`` with the operands of every commutative node in a fixed order (by hash), memoised."""
        memo = self._canonical
        stack = [e]
        while stack:
            node = stack[-1]
            if node in memo:
                stack.pop()
                continue
            todo = [a for a in node.args if a not in memo]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            args = tuple(memo[a] for a in node.args)
            if (
                node.op in COMMUTATIVE
                and len(args) == 2
                and args[0].type is args[1].type
                and hash(args[1]) < hash(args[0])
            ):
                args = (args[1], args[0])
            memo[node] = node.replace_args(args)
        return memo[e]
