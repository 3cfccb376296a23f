"""Pruning uphill inlines that open nothing: the other plateau of program searches.

``inline_let`` replaces one occurrence of a let-bound variable by its value.  That is worth a step for
one of two reasons: the value meets a rule where it lands (``(index i m)`` with ``m`` a ``build``
becomes ``(index i (build ...))`` for ``index_of_build``; ``(size x)`` for ``size_of_build``), or the
occurrence was the last one and ``delete_let`` can drop the binding.  An inline that raises the cost
and does neither (a ``size`` copied into a loop: +1 to +256 per occurrence, in any of 2^k subsets of
k occurrences) is a step a search ranks just behind the cost-neutral ones, so it floods the budget
before the large uphill inlines that fusions need.  On blas_test it kept the GEMM stepping stones at
30,276 instead of 30,246: the sizes went into the loops first.

:class:`IdleInlineFilter` keeps an ``inline_let`` child when it costs no more than its parent, when
it uses up the variable of a let that something consumes, or when a rule other than a commutation
matches at the inlined node or its parent that did not match there before.  A let on the expression's
outermost chain (:func:`body_spine`) is consumed by nothing: using it up is kept only when the inline
and the ``delete_let`` after it together cost no more than before.  Keeping such inlines sent GEMM's
``(size (index 0 b))`` into the outer loop (30,531 against the expert's 30,501.7), and the sizes of
ger, simple_syr2 and mxmypmzt likewise.  The check is local, like the commutation filter's
(search/symmetry.py): an inline that pays off only further up the tree, or only after other
occurrences are inlined too, is pruned.
"""

from __future__ import annotations

from collections.abc import Callable

from knossos.cost import LET_COST
from knossos.expr import Expr, occurrences, replace_at
from knossos.ops import Op
from rules.actions import Action, site_at
from rules.lazy_children import Sketch
from rules.rule import Scope, Site
from rules.rule_set import RuleSet
from search.symmetry import LocalRules


class IdleInlineFilter:
    """Decides which ``inline_let`` children of a state to keep (see the module docstring), uphill
    meaning under the search's ``cost``."""

    def __init__(self, rules: RuleSet, cost: Callable[[Expr], float]) -> None:
        self._local = LocalRules(rules)
        self._cost = cost
        self._spine: tuple[Expr | None, set[int]] = (None, set())
        #: Inline children pruned so far.
        self.pruned = 0

    def keep(self, root: Expr, action: Action, child: Expr) -> bool:
        if action.rule.name != "inline_let" or self._cost(child) <= self._cost(root):
            return True
        site, numbers = self._local.around(root, action)
        found = site.scope.get(site.node.data)
        if found is not None:
            let_number = found[1]
            let_after = site_at(child, let_number).node
            if let_after.op is Op.LET and let_after.args[0].data not in let_after.args[2].free:
                # the last occurrence: delete_let follows, which frees the let's parent; a let on the
                # outermost chain has none, so there the pair must pay for itself
                if let_number not in self.spine(root):
                    return True
                if self._cost(replace_at(child, let_number, let_after.args[2])) <= self._cost(root):
                    return True
        return self._decide(self._local.sites(child, numbers), self._local.sites(root, numbers))

    def keep_sketch(self, site: Site, parent_scope: Scope | None, sketch: Sketch) -> bool:
        """:meth:`keep` for a sketched child, from the site it was made at, under the reference cost
        (the one lazy states carry).  An inline that renames binders to avoid capture rewrites the
        let, not the occurrence: that rare child is built and decided as :meth:`keep` decides."""
        root = site.root
        if sketch.action.rule.name != "inline_let" or sketch.cost <= root.cost:
            return True
        if sketch.target != site.number:
            return self.keep(root, sketch.action, replace_at(root, sketch.target, sketch.replacement))
        name = site.node.data
        let_node, let_number = site.scope[name]  # inline_let matched: a let binds the occurrence
        if occurrences(let_node.args[2], name) == 1:  # the last occurrence (see keep)
            if let_number not in self.spine(root):
                return True
            # the let is on the outermost chain (lets' bodies all the way up, each adding its body's
            # cost): dropping it saves its own cost and its value's
            if sketch.cost - LET_COST - let_node.args[1].cost <= root.cost:
                return True
        after = self._local.sites_after(site, parent_scope, sketch.replacement)
        return self._decide(after, self._local.sites_before(site, parent_scope))

    def spine(self, root: Expr) -> set[int]:
        """:func:`body_spine` of ``root``, remembered for the last root asked about."""
        if self._spine[0] is not root:
            self._spine = (root, body_spine(root))
        return self._spine[1]

    def _decide(self, after: list[Site], before: list[Site]) -> bool:
        if self._matched(after) - self._matched(before):
            return True
        self.pruned += 1
        return False

    def _matched(self, sites: list[Site]) -> set[tuple[int, str]]:
        """(node, rule) of every rule other than a commutation that matches at ``sites``."""
        return {(site.number, rule.name) for site, rule, _ in self._local.matches(sites)}


def body_spine(root: Expr) -> set[int]:
    """Numbers of the lets of ``root``'s outermost chain: ``root`` itself if a let, its body if a let,
    and so on.

    Nothing consumes these lets (no rule looks through one to a parent), so deleting one frees
    nothing but the let itself: a ``size`` copied into the loop it bounds and then deleted is uphill
    all the same."""
    numbers = set()
    number = 0
    while root.op is Op.LET:
        numbers.add(number)
        number += 1 + root.args[0].size + root.args[1].size
        root = root.args[2]
    return numbers
