"""Monte Carlo tree search with UCT, as the paper's Appendix D (Algorithm 3) describes it.

Each iteration descends the tree from the start with the tree policy (equation 6)
``argmax X(s')/n(s') + beta * sqrt(ln n(s) / (n(s') + 1))`` while the current state has been visited,
then rolls out to the end of the episode with the rollout policy (equation 7), a softmax over
``R(s, a) + V(s')`` with sharpness ``alpha`` (probabilities proportional to ``exp(alpha * (R + V))``;
the paper writes the softmax with ``alpha`` without saying more), and backs up ``x``, the largest
cost reduction against the start that the rollout found, into every state of the descent.  A tree
state is (expression, steps left).  An unvisited child's mean ``X/n`` counts as 0.  The value
function is asked about every child a rollout chooses among, so rollouts spend the budget; a step
whose children would go over it ends the search.  Rollouts
can keep to states already evaluated, so search also stops after ``budget`` iterations (or at a limit of :mod:`search.limits`).
"""

from __future__ import annotations

import math
import random

import numpy as np

from knossos.expr import Expr
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.state import State

ALPHA = 5.0
BETA = 0.5

#: A node of the tree: a state with its steps left.
_TreeNode = tuple[State, int]


def mcts(start: Expr, spec: SearchSpec, alpha: float = ALPHA, beta: float = BETA) -> SearchResult:
    run = SearchRun(start, spec)
    graph, evaluator, cost = run.graph, run.evaluator, run.cost
    rng = random.Random(spec.seed)
    c0 = run.start_cost
    visits: dict[_TreeNode, int] = {}
    total: dict[_TreeNode, float] = {}  # X(s): summed reductions of the rollouts through s
    evaluator([run.start])
    iterations = 0
    out_of_budget = False
    try:
        while not evaluator.exhausted and not out_of_budget and iterations < spec.budget and not run.stop():
            iterations += 1
            # selection: descend while the state has been visited
            s: _TreeNode = (run.start, spec.depth)
            descent: list[_TreeNode] = []
            while s[1] > 0 and visits.get(s, 0) > 0:
                children = run.successors(s[0])
                if not children:
                    break
                log_n = math.log(visits[s])
                best_score, best_i = -math.inf, 0
                for i, (_, child) in enumerate(children):
                    key = (child, s[1] - 1)
                    n = visits.get(key, 0)
                    score = (total[key] / n if n else 0.0) + beta * math.sqrt(log_n / (n + 1))
                    if score > best_score:
                        best_score, best_i = score, i
                action, child = children[best_i]
                graph.reach(child, s[1] - 1, s[0], action)
                s = (child, s[1] - 1)
                descent.append(s)
            # simulation: roll out from the leaf to the end of the episode
            lowest = cost(s[0])
            e, t = s
            while t > 0 and not evaluator.exhausted and not run.stop():
                children = run.successors(e)
                if not children:
                    break
                fresh = {child for _, child in children if not evaluator.known(child)}
                if len(fresh) > evaluator.room:
                    out_of_budget = True  # the rollout cannot see this step's values: stop here
                    break
                rows = evaluator([child for _, child in children])
                rewards = [run.transitions.reward(e, c) for _, c in children]
                scores = np.array([r + row[t - 1] for r, row in zip(rewards, rows, strict=True)])
                weights = np.exp(alpha * (scores - scores.max()))
                i = _sample(rng, weights)
                action, child = children[i]
                graph.reach(child, t - 1, e, action)
                e, t = child, t - 1
                lowest = min(lowest, cost(e))
            # back-up
            x = c0 - lowest
            root: _TreeNode = (run.start, spec.depth)
            visits[root] = visits.get(root, 0) + 1
            for state in descent:
                visits[state] = visits.get(state, 0) + 1
                total[state] = total.get(state, 0.0) + x
            run.report()
            if not descent and not run.transitions.successors(run.start, run.stop_check()):
                break  # nothing to rewrite at all
    except KeyboardInterrupt:
        run.on_ctrl_c()
    return run.result()


def _sample(rng: random.Random, weights: np.ndarray) -> int:
    """An index drawn with probability proportional to ``weights`` (deterministic given ``rng``)."""
    r = rng.random() * float(weights.sum())
    acc = 0.0
    for i, w in enumerate(weights):
        acc += float(w)
        if r < acc:
            return i
    return len(weights) - 1
