"""Extraction: the cheapest expression of an e-class under the reference cost model, shared
subexpressions bound by lets.

Two choices of one e-node per e-class are made, then each is written out as an expression:

* **tree**: the e-node whose expression (its children's best expressions below it) has the lowest
  reference cost, iterated to a fixed point (optimal for the cost of a tree, since the cost of a node
  grows with its children's);
* **greedy DAG** (extraction-gym's ``greedy-dag``): the e-node whose sub-DAG, each e-class counted
  once, has the lowest sum of own costs, so that a subexpression used twice is paid for once.  The
  sub-DAG of an e-class is kept as a set of e-classes up to :data:`SHARING_HORIZON` of them; a larger
  one is folded into a single entry (the e-class, at its sub-DAG's total), so that sharing is seen
  within that horizon and beyond it counted as a tree's.  Exact sets would make a chain ``n`` deep
  cost ``n**2 / 2`` entries (a 20,000-deep chain: 200 million, 7 GB); folded, at most
  ``n * SHARING_HORIZON``.

Writing a choice out binds with a ``let`` every e-class it uses more than once and evaluates
unconditionally (never one only under an ``if`` branch or the second operand of ``and``/``or``,
which a let would evaluate where the original did not), then drops the lets that do not lower the
reference cost.  The lower of the two is the result; its cost is the built expression's own
``.cost``, so the reported cost is exactly the reference model's.

Every loop here looks at ``stop`` (the search's time and memory limits) every :data:`_CHECK_EVERY`
steps and raises :class:`search.limits.LimitReached` once it says a limit is reached; the drop-let
loop of :func:`write_out` instead returns the expression it has (every one it tries is whole).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Set

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.substitution import fresh_name
from search.egraph.graph import EGraph, ENode, node_term
from search.limits import LimitReached, Stop, check_stop

Choice = dict[int, ENode]
#: The most e-classes a sub-DAG's set holds before it is folded into one entry (see above).
SHARING_HORIZON = 256
#: Look at ``stop`` after this many e-nodes offered or e-classes written.
_CHECK_EVERY = 256
#: Children evaluated only under a condition: the branches of an if, the second operand of and/or.
CONDITIONAL: dict[Op, frozenset[int]] = {Op.IF: frozenset({1, 2}), Op.AND: frozenset({1}), Op.OR: frozenset({1})}


def _parents_of(g: EGraph, cls: int) -> set[int]:
    return {g.find(p) for _, p in g.classes[cls].parents}


def _relax(g: EGraph, ready: Callable[[int], bool], improve: Callable[[int, ENode], bool], stop: Stop | None) -> None:
    """Offer every e-node whose children are all ``ready`` to ``improve`` (which says whether it
    bettered its e-class), revisiting the parents of each bettered e-class, until nothing changes."""
    todo = set(g.classes)
    offered = 0
    while todo:
        after: set[int] = set()
        for cls in sorted(todo):
            improved = False
            for node in g.classes[cls].nodes:
                offered += 1
                if offered % _CHECK_EVERY == 0:
                    check_stop(stop)
                if all(ready(k) for k in node[2]) and improve(cls, node):
                    improved = True
            if improved:
                after |= _parents_of(g, cls)
        todo = after


def tree_choice(g: EGraph, stop: Stop | None = None) -> tuple[Choice, dict[int, Expr]]:
    """Per e-class, the e-node with the cheapest tree, and that tree."""
    best: dict[int, Expr] = {}
    choice: Choice = {}

    def improve(cls: int, node: ENode) -> bool:
        e = node_term(node, tuple(best[k] for k in node[2]))
        current = best.get(cls)
        if current is None or e.cost < current.cost:
            best[cls], choice[cls] = e, node
            return True
        return False

    _relax(g, best.__contains__, improve, stop)
    return choice, best


def dag_choice(g: EGraph, trees: dict[int, Expr], stop: Stop | None = None) -> Choice:
    """Per e-class, the e-node whose sub-DAG has the lowest sum of own costs (each e-class once, within
    :data:`SHARING_HORIZON`).

    An e-node's own cost is its cost over its children's best trees less theirs (exact for the
    arithmetic ops, whose cost is their own plus their children's)."""
    sets: dict[int, dict[int, float]] = {}
    totals: dict[int, float] = {}
    choice: Choice = {}
    own: dict[ENode, float] = {}

    def improve(cls: int, node: ENode) -> bool:
        kids = node[2]
        merged: dict[int, float] = {}
        for k in kids:
            merged.update(sets[k])
        if cls in merged:  # the e-class in its own sub-DAG: a cycle
            return False
        if node not in own:
            own[node] = node_term(node, tuple(trees[k] for k in kids)).cost - sum(trees[k].cost for k in kids)
        merged[cls] = own[node]
        total = math.fsum(merged.values())
        if total < totals.get(cls, math.inf) - 1e-12:
            if len(merged) > SHARING_HORIZON:
                merged = {cls: total}
            sets[cls], totals[cls], choice[cls] = merged, total, node
            return True
        return False

    _relax(g, sets.__contains__, improve, stop)
    return choice


def write_out(
    root: int, choice: Choice, avoid: Set[str], cost: Callable[[Expr], float], stop: Stop | None = None
) -> Expr | None:
    """The expression of ``choice`` from ``root``, with lets where they lower ``cost``; None if the
    choice has a cycle (which a folded sub-DAG, see :data:`SHARING_HORIZON`, can hide from
    :func:`dag_choice`).  Stopped while dropping lets, the expression with the lets not yet tried."""
    order, uses, always = _walk(root, choice)
    if order is None:
        return None
    shared = [c for c in order if uses[c] >= 2 and choice[c][2] and c in always]
    names: dict[int, str] = {}
    for c in shared:
        names[c] = fresh_name([avoid, set(names.values())])

    def build(bound: set[int]) -> Expr:
        term: dict[int, Expr] = {}
        lets: list[tuple[Expr, Expr]] = []
        for i, c in enumerate(order):  # children first
            if i % _CHECK_EVERY == _CHECK_EVERY - 1:
                check_stop(stop)
            node = choice[c]
            e = node_term(node, tuple(term[k] for k in node[2]))
            if c in bound:
                v = E.var(names[c], e.type)
                lets.append((v, e))
                e = v
            term[c] = e
        body = term[root]
        for v, value in reversed(lets):
            body = E.let(v, value, body)
        return body

    bound = set(shared)
    best = build(bound)
    for c in shared:  # drop each let that does not pay for itself
        if stop is not None and stop() is not None:
            break
        try:
            trial = build(bound - {c})
        except LimitReached:
            break
        if cost(trial) <= cost(best):
            best, bound = trial, bound - {c}
    return best


def _walk(root: int, choice: Choice) -> tuple[list[int] | None, Counter[int], set[int]]:
    """E-classes reached from ``root`` children first (None on a cycle), how many parents use each,
    and those evaluated whenever the root is."""
    order: list[int] = []
    uses: Counter[int] = Counter()
    state: dict[int, int] = {}  # 1: on the stack, 2: done
    stack: list[tuple[int, bool]] = [(root, False)]
    while stack:
        c, leaving = stack.pop()
        if leaving:
            state[c] = 2
            order.append(c)
            continue
        if state.get(c) == 2:
            continue
        if state.get(c) == 1:
            return None, uses, set()
        state[c] = 1
        stack.append((c, True))
        for k in choice[c][2]:
            uses[k] += 1
            if state.get(k) == 1:
                return None, uses, set()
            stack.append((k, False))
    always = {root}
    for c in reversed(order):  # parents first
        if c in always:
            op, _, kids = choice[c]
            skip = CONDITIONAL.get(op, frozenset())
            always.update(k for i, k in enumerate(kids) if i not in skip)
    return order, uses, always
