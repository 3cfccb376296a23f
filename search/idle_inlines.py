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

from knossos.expr import Expr, replace_at
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
        if found is not None:
            let_number = found[1]
            let_after = site_at(child, let_number).node
            if let_after.op is Op.LET and let_after.args[0].data not in let_after.args[2].free:
                # the last occurrence: delete_let follows, which frees the let's parent; a let on the
                # outermost chain has none, so there the pair must pay for itself
                if let_number not in body_spine(root):
                    return True
                if self._cost(replace_at(child, let_number, let_after.args[2])) <= self._cost(root):
                    return True
        if self._matched(child, numbers) - self._matched(root, numbers):
            return True
        self.pruned += 1
        return False

    def _matched(self, root: Expr, numbers: list[int]) -> set[tuple[int, str]]:
        """(node, rule) of every rule other than a commutation that matches ``root`` at ``numbers``."""
        return {(site.number, rule.name) for site, rule, _ in self._local.matches(root, numbers)}


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
