"""A search's result that loses a matrix product the C++ backend blocks is cut back to where it had them.

The cost models price a program's work, not what the backend makes of it: a rewrite that moves a read
under a padding's test, or substitutes a let that a pattern looked through, may cut the cost by a
percent and take a product off the blocked kernel (:mod:`cpp_backend.products`), which costs a
hundred times that on the clock (Conv1d's optimised gradient: 3.3x -> 385x PyTorch eager).  Where
the best program has fewer blocked products than the start (the ``ks$`` copies and results the
product pass makes), the result is the cheapest of the search's programs before the first rewrite
that lost one, with a note.
"""

from __future__ import annotations

import dataclasses

from cpp_backend.product_pass import canonical_products
from knossos.expr import Expr, names_in
from rules.actions import Action, apply
from rules.rule_set import RuleSet
from search.result import SearchResult


def blocked_products(e: Expr) -> int:
    """How many matrices (operand copies, products) the product pass makes for ``e``."""
    return sum(1 for name in names_in(canonical_products(e)) if name.startswith("ks$"))


def keep_blocked_products(result: SearchResult, rules: RuleSet) -> SearchResult:
    """``result``, or its cheapest program before the first rewrite that lost a blocked product (the
    module docstring); ``rules`` has the search's rules (its steps are replayed)."""
    if result.best is result.start:
        return result
    wanted = blocked_products(result.start)
    if wanted == 0 or blocked_products(result.best) >= wanted:
        return result
    searched = len(result.steps) - len(result.tidied)
    e, best, best_cost, kept = result.start, result.start, result.start_cost, 0
    why = "the tidying lost a matrix product the C++ backend blocks"
    for k, step in enumerate(result.steps[:searched], 1):
        try:
            rule = rules.rule(step.rule)
        except KeyError:  # (a step of another phase's rules)
            why = f"rewrite {k} ({step.rule}) could not be replayed"
            break
        e = apply(e, Action(step.node, rule))
        if blocked_products(e) < wanted:
            why = f"rewrite {k} ({step.rule}) lost a matrix product the C++ backend blocks"
            break
        if step.cost < best_cost:
            best, best_cost, kept = e, step.cost, k
    note = (
        f"kept the first {kept} of {len(result.steps)} rewrites: {why} ({wanted} copies and products as "
        f"written), cost {result.best_cost:g} -> {best_cost:g}"
    )
    return dataclasses.replace(
        result,
        best=best,
        best_cost=best_cost,
        steps=result.steps[:kept],
        notes=[*result.notes, note],
        searched_best=None,
        tidied=[],
    )
