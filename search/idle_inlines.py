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
it uses up the variable, or when a rule other than a commutation matches at the inlined node or its
parent that did not match there before.  The check is local, like the commutation filter's
(search/symmetry.py): an inline that pays off only further up the tree, or only after other
occurrences are inlined too, is pruned.
"""

from __future__ import annotations

from collections.abc import Callable

from knossos.expr import Expr
from knossos.ops import Op
from rules.actions import Action, site_at
from rules.rule_set import RuleSet
from search.symmetry import LocalRules


class IdleInlineFilter:
    """Decides which ``inline_let`` children of a state to keep (see the module docstring), uphill
    meaning under the search's ``cost``."""

    def __init__(self, rules: RuleSet, cost: Callable[[Expr], float]) -> None:
        self._local = LocalRules(rules)
        self._cost = cost
        #: Inline children pruned so far.
        self.pruned = 0

    def keep(self, root: Expr, action: Action, child: Expr) -> bool:
        if action.rule.name != "inline_let" or self._cost(child) <= self._cost(root):
            return True
        site, numbers = self._local.around(root, action)
        found = site.scope.get(site.node.data)
        if found is not None:  # the last occurrence: delete_let follows
            let_after = site_at(child, found[1]).node
            if let_after.op is Op.LET and let_after.args[0].data not in let_after.args[2].free:
                return True
        if self._matched(child, numbers) - self._matched(root, numbers):
            return True
        self.pruned += 1
        return False

    def _matched(self, root: Expr, numbers: list[int]) -> set[tuple[int, str]]:
        """(node, rule) of every rule other than a commutation that matches ``root`` at ``numbers``."""
        return {(site.number, rule.name) for site, rule, _ in self._local.matches(root, numbers)}
