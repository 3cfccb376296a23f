"""SearchGraph bookkeeping: reaching states, parent chains and the value targets, on hand-built graphs.

States are tiny distinct expressions with made-up costs (a dict), and the actions are arbitrary
(the graph never applies them), so every number here can be worked out by hand.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from knossos.expr import Expr
from knossos.parser import parse_expr
from rules.actions import Action
from rules.sets import get_rule_set
from search.exhaustive import exhaustive
from search.graph import SearchGraph
from search.mdp import RewriteStep
from search.spec import SearchSpec

RULES = get_rule_set("simplify_rules").rules


def expr(text: str) -> Expr:
    return parse_expr(text)[0]


#: Distinct states; s[i] is ``(add x i.0)``.
S = [expr(f"(add x {i}.0)") for i in range(8)]


def act(i: int) -> Action:
    """A distinguishable fake action (node ``i``, the ``i``-th rule of simplify_rules)."""
    return Action(i, RULES[i % len(RULES)])


def graph(costs: dict[Expr, float], depth: int, start: Expr | None = None) -> SearchGraph:
    return SearchGraph(S[0] if start is None else start, depth, costs.__getitem__)


def targets(g: SearchGraph) -> dict[Expr, tuple[int, list[float]]]:
    """Each state's (steps left, row of the target table)."""
    exprs, steps_left, table, _ = g.value_targets()
    assert table.shape == (len(g.states), g.depth + 1) and steps_left.shape == (len(g.states),)
    assert list(exprs) == list(g.states)
    assert np.all(table[:, 0] == 0)
    return {e: (int(t), [float(x) for x in row]) for e, t, row in zip(exprs, steps_left, table, strict=True)}


def target(g: SearchGraph, e: Expr, t: int | None = None) -> float:
    """Algorithm 2's target of ``e``: column ``t`` (default: its steps left) of its row."""
    left, row = targets(g)[e]
    return row[left if t is None else t]


def test_states_are_distinct() -> None:
    assert len(set(S)) == len(S)


def test_chain() -> None:
    s0, s1, s2 = S[:3]
    g = graph({s0: 10, s1: 8, s2: 5}, depth=2)
    assert g.steps_left(s0) == 2 and g.steps_left(s1) == -1
    assert g.reach(s1, 1, s0, act(1)) is True
    g.add_edges(s0, [s1])
    assert g.reach(s2, 0, s1, act(2)) is True
    g.add_edges(s1, [s2])
    assert (g.best, g.best_cost) == (s2, 5)
    rows = targets(g)
    assert rows[s0] == (2, [0.0, 2.0, 5.0])
    assert rows[s1] == (1, [0.0, 3.0, 3.0])
    assert rows[s2] == (0, [0.0, 0.0, 0.0])
    assert target(g, s0) == 5.0 and target(g, s0, 1) == 2.0
    assert target(g, s1) == 3.0 and target(g, s2) == 0.0


def test_reached_again_with_more_steps_left() -> None:
    s0, a, b, c, d = S[:5]
    g = graph({s0: 10, a: 9, b: 9.5, c: 6, d: 1}, depth=3)
    assert g.reach(a, 2, s0, act(1))
    assert g.reach(b, 1, a, act(2))
    assert g.reach(c, 0, b, act(3))  # first reached with no steps left
    assert g.steps_left(c) == 0
    assert g.reach(c, 2, s0, act(4)) is True  # then straight from the start, with more
    assert g.steps_left(c) == 2 and g.path(c) == [(s0, act(4))]
    assert g.reach(c, 1, a, act(5)) is False  # fewer steps left than recorded: ignored
    assert g.reach(c, 2, a, act(6)) is False  # as many: ignored (the first visit stays)
    assert g.steps_left(c) == 2 and g.path(c) == [(s0, act(4))]
    g.add_edges(s0, [a, c])
    g.add_edges(a, [b, c])
    g.add_edges(b, [c])
    assert g.reach(d, 1, c, act(7))
    g.add_edges(c, [d])
    rows = targets(g)
    assert rows[c] == (2, [0.0, 5.0, 5.0, 5.0])
    assert target(g, c) == 5.0  # with the steps left of its first visit (0) it would be 0
    assert rows[s0] == (3, [0.0, 4.0, 9.0, 9.0])
    assert rows[a][0] == 2 and rows[a][1] == [0.0, 3.0, 8.0, 8.0]
    assert g.best is d and g.best_cost == 1


def test_cheaper_state_behind_a_dearer_one() -> None:
    s0, s1, s2 = S[:3]
    g = graph({s0: 10, s1: 12, s2: 3}, depth=2)
    assert g.reach(s1, 1, s0, act(1))
    assert (g.best, g.best_cost) == (s0, 10)  # a dearer state is not the best
    assert g.reach(s2, 0, s1, act(2))
    g.add_edges(s0, [s1])
    g.add_edges(s1, [s2])
    rows = targets(g)
    assert rows[s0][1] == [0.0, 0.0, 7.0]  # within one step, staying put is best: never negative
    assert rows[s1][1] == [0.0, 9.0, 9.0]
    assert target(g, s0, 2) == 7.0 and target(g, s0, 1) == 0.0


def test_diamond() -> None:
    s0, a, b, d, e = S[:5]
    g = graph({s0: 10, a: 9, b: 11, d: 4, e: 2}, depth=3)
    g.reach(a, 2, s0, act(1))
    g.reach(b, 2, s0, act(2))
    g.add_edges(s0, [a, b])
    assert g.reach(d, 1, a, act(3)) is True
    g.add_edges(a, [d])
    assert g.reach(d, 1, b, act(4)) is False  # the shared successor keeps its first parent
    g.add_edges(b, [d])
    g.reach(e, 0, d, act(5))
    g.add_edges(d, [e])
    rows = targets(g)
    assert rows[s0][1] == [0.0, 1.0, 6.0, 8.0]
    assert rows[a][1] == [0.0, 5.0, 7.0, 7.0]
    assert rows[b][1] == [0.0, 7.0, 9.0, 9.0]
    assert rows[d][1] == [0.0, 2.0, 2.0, 2.0]
    assert g.path(e) == [(s0, act(1)), (a, act(3)), (d, act(5))]


def test_cycle_terminates_with_correct_values() -> None:
    s0, s1, s2, s3 = S[:4]
    g = graph({s0: 10, s1: 7, s2: 9, s3: 1}, depth=4)
    g.reach(s1, 3, s0, act(1))
    g.add_edges(s0, [s1])
    g.reach(s2, 2, s1, act(2))
    g.add_edges(s1, [s2])
    assert g.reach(s1, 1, s2, act(3)) is False  # back to s1 along the cycle
    g.reach(s3, 1, s2, act(4))
    g.add_edges(s2, [s1, s3])
    rows = targets(g)
    assert rows[s0][1] == [0.0, 3.0, 3.0, 9.0, 9.0]
    assert rows[s1][1] == [0.0, 0.0, 6.0, 6.0, 6.0]
    assert rows[s2][1] == [0.0, 8.0, 8.0, 8.0, 8.0]
    assert rows[s3][1] == [0.0, 0.0, 0.0, 0.0, 0.0]
    assert [left for left, _ in rows.values()] == [4, 3, 2, 1]


def test_self_loop_and_lone_start() -> None:
    s0 = S[0]
    g = graph({s0: 3}, depth=2)
    assert targets(g) == {s0: (2, [0.0, 0.0, 0.0])}
    g.add_edges(s0, [s0])
    assert g.reach(s0, 1, s0, act(1)) is False
    assert targets(g) == {s0: (2, [0.0, 0.0, 0.0])}
    assert g.path(s0) == [] and g.steps(s0) == []


def test_path_and_steps() -> None:
    s0, s1, s2, s3 = S[:4]
    costs = {s0: 10, s1: 8, s2: 5, s3: 6}
    g = graph(costs, depth=3)
    g.reach(s1, 2, s0, act(3))
    g.reach(s3, 2, s0, act(1))
    g.reach(s2, 1, s1, act(6))
    assert g.path(s0) == [] and g.steps(s0) == []
    assert g.path(s1) == [(s0, act(3))]
    assert g.path(s2) == [(s0, act(3)), (s1, act(6))]
    assert g.steps(s2) == [RewriteStep(3, RULES[3].name, 8.0), RewriteStep(6, RULES[6].name, 5.0)]
    assert g.steps(s3) == [RewriteStep(1, RULES[1].name, 6.0)]
    assert g.steps_left(S[7]) == -1
    # reaching with more steps left moves the parent, and the path follows
    assert g.reach(s2, 2, s0, act(7))
    assert g.steps(s2) == [RewriteStep(7, RULES[7].name, 5.0)]
    assert (g.best, g.best_cost) == (s2, 5)


def test_best_ties_keep_the_first() -> None:
    s0, s1, s2 = S[:3]
    g = graph({s0: 10, s1: 4, s2: 4}, depth=2)
    g.reach(s1, 1, s0, act(1))
    g.reach(s2, 1, s0, act(2))
    assert g.best is s1 and g.best_cost == 4


def brute_force_targets(g: SearchGraph) -> dict[Expr, list[float]]:
    """Row of every state by breadth-first search over the explored edges."""
    out = {}
    for s in g.states:
        lowest = [g.cost(s)] * (g.depth + 1)
        dist = {s: 0}
        queue = deque([s])
        while queue:
            e = queue.popleft()
            if dist[e] == g.depth:
                continue
            for c in g.edges.get(e, []):
                if c in g.states and c not in dist:
                    dist[c] = dist[e] + 1
                    queue.append(c)
        for e, k in dist.items():
            for t in range(k, g.depth + 1):
                lowest[t] = min(lowest[t], g.cost(e))
        out[s] = [g.cost(s) - x for x in lowest]
    return out


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        ("(div (add (mul 2.0 (add x y)) (add x y)) (mul x 2.0))", "binding_rules"),
        ("(mul (add (mul x 1.0) 0.0) (div x x))", "simplify_rules"),
    ],
)
def test_targets_of_a_real_search_graph_match_brute_force(text: str, rules: str) -> None:
    result = exhaustive(expr(text), SearchSpec(rules=get_rule_set(rules), depth=3, budget=5000))
    g = result.graph
    assert result.complete and len(g.states) > 10
    rows = targets(g)
    expected = brute_force_targets(g)
    for s in g.states:
        assert rows[s][1] == pytest.approx(expected[s], abs=1e-9), s
    # the start's target at full depth is exactly the improvement exhaustive search found
    assert rows[g.start][1][g.depth] == pytest.approx(result.start_cost - result.best_cost)


def explored(g: SearchGraph) -> dict[Expr, int]:
    vt = g.value_targets()
    return {e: int(h) for e, h in zip(vt.exprs, vt.explored, strict=True)}


def test_explored_is_the_longest_explored_path_within_the_steps_left() -> None:
    s0, a, b, c, d = S[:5]
    g = graph({s0: 10, a: 9, b: 8, c: 7, d: 6}, depth=4)
    for child, left, parent in ((a, 3, s0), (b, 2, a), (c, 1, b), (d, 3, s0)):
        g.reach(child, left, parent, act(left))
    g.add_edges(s0, [a, d])
    g.add_edges(a, [b])
    g.add_edges(b, [c])  # c and d are reached but never expanded
    h = explored(g)
    assert h == {s0: 3, a: 2, b: 1, c: 0, d: 0}


def test_explored_is_capped_by_the_steps_left_on_a_cycle() -> None:
    s0, a = S[:2]
    g = graph({s0: 10, a: 11}, depth=3)
    g.reach(a, 2, s0, act(1))
    g.add_edges(s0, [a])
    g.add_edges(a, [s0])  # a rewrite and its inverse: paths of any length
    h = explored(g)
    assert h == {s0: 3, a: 2}
