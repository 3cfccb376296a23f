"""The searches: quality on bindgen_test, replayable results that keep the meaning, determinism,
the evaluation budget and batches, the value function in A*'s priority, exhaustive search's limits,
and Ctrl-C."""

from __future__ import annotations

import json
import random
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from itertools import pairwise
from typing import Any

import numpy as np
import pytest

from knossos.errors import KsEvalError
from knossos.expr import Expr, preorder
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import load_program, parse_expr
from knossos.program import Program
from knossos.types import FLOAT, vec
from knossos.values import isclose
from rules.actions import Action, actions, apply
from rules.rule_set import RuleSet
from rules.sets import get_rule_set
from search.astar import astar, greedy
from search.beam import beam
from search.exhaustive import exhaustive
from search.lazy_astar import lazy_astar
from search.mdp import Transitions
from search.pseudo_beam import pseudo_beam
from search.random_search import random_search
from search.registry import SEARCHES, get_search
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.value import Evaluator, ZeroValue

from conftest import DATA, PROGRAMS, random_value

ALL_RULES = get_rule_set("all_rules")
#: The searches whose budget counts value-function evaluations (exhaustive's is a state limit).
#: The searches that return the rewrite sequence they found (the e-graph keeps none: tests/test_egraph.py;
#: nor do the searches between saturation passes: tests/test_saturated.py).
SEQUENCE_SEARCHES = [name for name in SEARCHES if name != "egraph" and not name.startswith("saturate-")]
VALUE_SEARCHES = [name for name in SEQUENCE_SEARCHES if name != "exhaustive"]
SEED_SEARCHES = ["random", "mcts"]
FIRST = "(div (add (mul 2.0 (add x y)) (add x y)) (mul x 2.0))"  # bindgen_test's first, 9 -> 8.1


@cache
def arithmetic_sets() -> dict[str, Any]:
    sets: dict[str, Any] = json.loads((DATA / "arithmetic_sets.json").read_text())["sets"]
    return sets


@cache
def blas() -> Program:
    return load_program(PROGRAMS / "blas_test.kso")


def expr(text: str) -> Expr:
    return parse_expr(text)[0]


class SearchHung(Exception):
    pass


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Turn a search that never returns into a test failure (SIGALRM; the tests run on the main thread)."""

    def on_alarm(signum: int, frame: object) -> None:
        raise SearchHung(f"did not return within {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_search(name: str, start: Expr, spec: SearchSpec, seconds: float = 20.0) -> SearchResult:
    with time_limit(seconds):
        return get_search(name)(start, spec)


# -- fake value functions ---------------------------------------------------------------------------
class Recording:
    """Zero values; remembers the size of every batch."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.seen: list[Expr] = []

    def values(self, exprs: Sequence[Expr], depth: int) -> np.ndarray:
        self.batches.append(len(exprs))
        self.seen.extend(exprs)
        return np.zeros((len(exprs), depth + 1))


class Favour:
    """Value ``bonus`` for ``target`` in the given columns (all by default), zero elsewhere."""

    def __init__(self, target: Expr, bonus: float = 100.0, columns: Sequence[int] | None = None) -> None:
        self.target, self.bonus, self.columns = target, bonus, columns

    def values(self, exprs: Sequence[Expr], depth: int) -> np.ndarray:
        out = np.zeros((len(exprs), depth + 1))
        for i, e in enumerate(exprs):
            if e is self.target:
                if self.columns is None:
                    out[i, :] = self.bonus
                else:
                    out[i, list(self.columns)] = self.bonus
        return out


class WrongShape:
    def __init__(self, shape: Callable[[int, int], tuple[int, ...]]) -> None:
        self.shape = shape

    def values(self, exprs: Sequence[Expr], depth: int) -> np.ndarray:
        return np.zeros(self.shape(len(exprs), depth))


class InterruptOn:
    """Zero values, but Ctrl-C on call number ``n``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    def values(self, exprs: Sequence[Expr], depth: int) -> np.ndarray:
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return np.zeros((len(exprs), depth + 1))


# -- checking a result ------------------------------------------------------------------------------
def replay(result: SearchResult, rules: RuleSet = ALL_RULES) -> None:
    """The steps lead from the start to exactly ``best``, with the costs they claim."""
    e = result.start
    assert result.start_cost == e.cost
    for i, step in enumerate(result.steps):
        e = apply(e, Action(step.node, rules.rule(step.rule)))
        assert e.cost == pytest.approx(step.cost, abs=1e-9), f"step {i} ({step})"
    assert e is result.best
    assert result.best_cost == result.best.cost
    assert result.best_cost <= result.start_cost


def replay_graph(result: SearchResult, rules: RuleSet = ALL_RULES, sample: int = 300) -> None:
    """Every explored state's parent chain has strictly growing steps left and replays from the start."""
    g = result.graph
    states = list(g.states)
    assert g.steps_left(g.start) == g.depth
    for e in random.Random(0).sample(states, min(sample, len(states))):
        path = g.path(e)
        assert len(path) <= g.depth - g.steps_left(e)
        lefts = [g.steps_left(parent) for parent, _ in path] + [g.steps_left(e)]
        assert all(a > b for a, b in pairwise(lefts)), lefts
        x = g.start
        for (parent, action), step in zip(path, g.steps(e), strict=True):
            assert x is parent
            x = apply(x, Action(step.node, rules.rule(step.rule)))
            assert action.node == step.node and action.rule.name == step.rule
            assert x.cost == step.cost
        assert x is e
    assert g.best_cost == min(g.cost(e) for e in states) and g.best in g.states


def same_value(before: Expr, after: Expr, env_for: Callable[[random.Random], dict[str, Any]]) -> None:
    interp = Interpreter(max_steps=10**7)
    rng = random.Random(1)
    compared = 0
    for _ in range(3):
        env = env_for(rng)
        try:
            expected = interp.eval_expr(before, env)
        except KsEvalError:
            continue
        got = interp.eval_expr(after, env)
        assert isclose(expected, got, 1e-6, 1e-9), (env, expected, got)
        compared += 1
    assert compared, "the original never evaluated"


def float_env(free: Sequence[Expr]) -> Callable[[random.Random], dict[str, Any]]:
    return lambda rng: {v.data: rng.choice([1.3, 2.7, 3.1, 0.6]) for v in free}


# -- quality ----------------------------------------------------------------------------------------
BINDGEN_TEST = arithmetic_sets()["bindgen_test"]


@pytest.mark.parametrize("case", BINDGEN_TEST["expressions"], ids=[str(i) for i in range(12)])
def test_astar_reaches_best_known_on_bindgen_test(case: dict[str, Any]) -> None:
    start = expr(case["expr"])
    assert start.cost == case["start_cost"]
    result = astar(start, SearchSpec(rules=get_rule_set(BINDGEN_TEST["rule_set"]), depth=10, budget=5000))
    assert result.best_cost == pytest.approx(case["best_known_cost"], abs=1e-9)
    assert result.evaluations <= 5000 and len(result.steps) <= 10
    replay(result)


def test_bindgen_test_has_twelve_expressions() -> None:
    assert len(BINDGEN_TEST["expressions"]) == 12 and BINDGEN_TEST["rule_set"] == "binding_rules"


# -- replay and meaning -----------------------------------------------------------------------------
ARITHMETIC_CASES = [
    (FIRST, "binding_rules", 6),
    ("(sub (mul (mul 2.0 (log x)) (log x)) (add x y))", "binding_rules", 6),
    ("(add (div (div 1.0 x) (add (div 1.0 x) 1.0)) (div 1.0 x))", "binding_simplify_rules", 5),
]
#: The searches sure to find the improvements of ARITHMETIC_CASES with budget 300.
SYSTEMATIC = ("astar", "lazy-astar", "greedy", "beam", "pseudo-beam", "exhaustive")


def budget_for(name: str) -> int:
    return 20000 if name == "exhaustive" else 300


@pytest.mark.parametrize("name", SEQUENCE_SEARCHES)
@pytest.mark.parametrize(
    ("text", "rules", "depth"), ARITHMETIC_CASES, ids=["bindgen0", "bindgen5", "binding_simplify1"]
)
def test_arithmetic_results_replay_and_keep_meaning(name: str, text: str, rules: str, depth: int) -> None:
    start, free = parse_expr(text)
    spec = SearchSpec(rules=get_rule_set(rules), depth=depth, budget=budget_for(name))
    result = run_search(name, start, spec)
    assert result.start is start and not result.interrupted and result.complete
    assert len(result.steps) <= spec.depth and result.best_cost <= result.start_cost
    if name in SYSTEMATIC or rules == "binding_simplify_rules":
        assert result.best_cost < result.start_cost
    if name in ("astar", "lazy-astar", "greedy", "exhaustive"):
        assert result.best_cost == pytest.approx(brute_force_best(start, rules, depth), abs=1e-12)
    replay(result)
    replay_graph(result)
    same_value(start, result.best, float_env(free))


@pytest.mark.parametrize("name", SEQUENCE_SEARCHES)
def test_def_results_replay_and_keep_meaning(name: str) -> None:
    d = blas().defs["axpy"]
    spec = SearchSpec(rules=get_rule_set("ml_rules_no_bind"), depth=5, budget=20000 if name == "exhaustive" else 200)
    result = run_search(name, d.body, spec)
    assert result.best_cost < result.start_cost and len(result.steps) <= spec.depth
    replay(result)
    replay_graph(result)
    interp = Interpreter()
    same_value(d.body, result.best, lambda rng: interp.check_args(d, [random_value(p.type, rng) for p in d.params]))


def test_two_phase_uses_phase1_rules_first() -> None:
    d = blas().defs["gemm_climbed_mat_y"]
    spec = SearchSpec(rules=get_rule_set("ml_rules_no_bind"), depth=6, budget=200)
    result = run_search("two-phase", d.body, spec)
    phase1 = get_rule_set("phase1")
    assert result.steps and result.steps[0].rule in phase1
    assert result.best_cost < result.start_cost / 5
    assert result.evaluations <= 200
    replay(result)
    interp = Interpreter()
    same_value(d.body, result.best, lambda rng: interp.check_args(d, [random_value(p.type, rng) for p in d.params]))


# -- determinism ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", SEQUENCE_SEARCHES)
def test_same_seed_same_result(name: str) -> None:
    start = expr(FIRST)
    spec = SearchSpec(
        rules=get_rule_set("binding_rules"), depth=6, budget=2000 if name == "exhaustive" else 150, seed=7
    )
    a = run_search(name, start, spec)
    b = run_search(name, start, replace(spec))
    assert a.steps == b.steps and a.best is b.best and a.best_cost == b.best_cost
    assert a.evaluations == b.evaluations and a.expanded == b.expanded
    assert list(a.graph.states) == list(b.graph.states)


@pytest.mark.parametrize("name", SEED_SEARCHES)
def test_other_seeds_still_give_valid_results(name: str) -> None:
    start = expr(FIRST)
    for seed in (1, 2, 3):
        result = run_search(
            name, start, SearchSpec(rules=get_rule_set("binding_rules"), depth=6, budget=150, seed=seed)
        )
        replay(result)


# -- budget and batches -----------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [1, 2, 7, 16, 17, 100, 1000])
def test_astar_keeps_to_the_budget(budget: int) -> None:
    rec = Recording()
    result = astar(expr(FIRST), SearchSpec(rules=get_rule_set("binding_rules"), depth=10, budget=budget, value=rec))
    assert result.evaluations == sum(rec.batches) == len(rec.seen) == len(set(rec.seen))
    assert result.evaluations == budget  # the space is far larger than these budgets
    replay(result)


def test_astar_with_budget_one_evaluates_only_the_start() -> None:
    rec = Recording()
    start = expr(FIRST)
    result = astar(start, SearchSpec(rules=get_rule_set("binding_rules"), depth=10, budget=1, value=rec))
    assert rec.batches == [1] and rec.seen == [start] and result.evaluations == 1
    replay(result)


@pytest.mark.parametrize("name", VALUE_SEARCHES)
@pytest.mark.parametrize("budget", [1, 2, 17, 100])
def test_every_search_keeps_to_the_evaluation_budget(name: str, budget: int) -> None:
    """SearchSpec.budget is "the most expressions sent to the value function"."""
    rec = Recording()
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=10, budget=budget, value=rec)
    result = run_search(name, expr(FIRST), spec)
    if name != "greedy":  # greedy swaps in the zero value function
        assert result.evaluations == len(rec.seen)
    assert result.evaluations <= budget


def test_astar_sends_batches_of_at_least_16() -> None:
    rec = Recording()
    result = astar(expr(FIRST), SearchSpec(rules=get_rule_set("binding_rules"), depth=10, budget=2000, value=rec))
    assert result.evaluations == 2000 == sum(rec.batches)
    assert rec.batches[0] == 1  # the start alone
    # a smaller batch goes only when the frontier is empty; following a plateau to its end (the tie
    # order) empties it now and then, when the deep states' children are already known
    big = sum(1 for n in rec.batches if n >= 16)
    assert big >= 0.6 * len(rec.batches), rec.batches
    assert sum(rec.batches) / len(rec.batches) >= 14, rec.batches


def test_astar_batch_size_is_a_setting() -> None:
    rec = Recording()
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=10, budget=500, value=rec, batch_size=64)
    astar(expr(FIRST), spec)
    assert sum(1 for n in rec.batches if n >= 64) >= 0.4 * len(rec.batches), rec.batches
    assert max(rec.batches) >= 64 and sum(rec.batches) / len(rec.batches) >= 40, rec.batches
    rec1 = Recording()
    astar(expr(FIRST), replace(spec, value=rec1, batch_size=1))
    assert len(rec1.batches) > len(rec.batches) * 4


@pytest.mark.parametrize(
    "shape",
    [lambda n, d: (n, d), lambda n, d: (n + 1, d + 1), lambda n, d: (n,), lambda n, d: (d + 1, n + 1)],
    ids=["too-few-columns", "too-many-rows", "flat", "transposed"],
)
def test_a_wrong_shape_from_the_value_function_is_an_error(shape: Callable[[int, int], tuple[int, ...]]) -> None:
    start = expr(FIRST)
    children = [c for _, c in Transitions(get_rule_set("binding_rules")).successors(start)]
    evaluator = Evaluator(WrongShape(shape), depth=4, budget=100)
    with pytest.raises(ValueError, match="shape"):
        evaluator([start, *children])
    assert evaluator.evaluations == 0
    with pytest.raises(ValueError, match="shape"):
        astar(start, SearchSpec(rules=get_rule_set("binding_rules"), depth=4, budget=100, value=WrongShape(shape)))


def test_evaluator_caches_and_counts_distinct_expressions() -> None:
    a, b, c = expr("(add x 1.0)"), expr("(add x 2.0)"), expr("(add x 3.0)")
    rec = Recording()
    evaluator = Evaluator(rec, depth=3, budget=3)
    rows = evaluator([a, b, a])
    assert rec.batches == [2] and evaluator.evaluations == 2 and len(rows) == 3 and rows[0] is rows[2]
    assert rows[0].shape == (4,) and not rows[0].flags.writeable
    evaluator([b, a])
    assert rec.batches == [2] and not evaluator.exhausted and evaluator.known(a) and not evaluator.known(c)
    evaluator([c])
    assert rec.batches == [2, 1] and evaluator.evaluations == 3 and evaluator.exhausted


# -- the value function guides A* ------------------------------------------------------------------
def children_of(start: Expr, rules: str) -> list[Expr]:
    return list(dict.fromkeys(c for _, c in Transitions(get_rule_set(rules)).successors(start)))


def test_a_high_value_child_is_expanded_first() -> None:
    start = expr(FIRST)
    children = children_of(start, "binding_rules")
    assert len(children) >= 3
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=4, budget=60)
    plain = list(astar(start, spec).graph.edges)
    favoured = max(reversed(children), key=lambda c: c.cost)  # the dearest child, late in the order
    assert plain[1] is not favoured
    guided = list(astar(start, replace(spec, value=Favour(favoured))).graph.edges)
    assert guided[0] is start and guided[1] is favoured
    # greedy ignores the value function
    assert list(greedy(start, replace(spec, value=Favour(favoured))).graph.edges) == plain


def test_the_value_column_is_the_steps_left() -> None:
    """A child has depth - 1 steps left: only that column of its row may count."""
    start = expr(FIRST)
    children = children_of(start, "binding_rules")
    favoured = max(reversed(children), key=lambda c: c.cost)
    depth = 4
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=depth, budget=60)
    plain = list(astar(start, spec).graph.edges)
    right = list(astar(start, replace(spec, value=Favour(favoured, columns=[depth - 1]))).graph.edges)
    assert right[1] is favoured
    others = [t for t in range(depth + 1) if t != depth - 1]
    wrong = list(astar(start, replace(spec, value=Favour(favoured, columns=others))).graph.edges)
    assert wrong[:2] == plain[:2] and wrong[1] is not favoured


def test_a_low_value_makes_astar_stay_away() -> None:
    """A large negative value for the best child keeps A* from expanding it while others remain."""
    start = expr(FIRST)
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=6, budget=200)
    plain = list(astar(start, spec).graph.edges)
    shunned = plain[1]
    guided = list(astar(start, replace(spec, value=Favour(shunned, bonus=-1000.0))).graph.edges)
    assert shunned not in guided


# -- ties ------------------------------------------------------------------------------------------
def commuting() -> RuleSet:
    """Rewrites that keep the cost: with the zero value function every state has the same priority."""
    return RuleSet("commuting", [r for r in get_rule_set("simplify_rules") if r.name in ("commute_add", "commute_mul")])


def expansion_order(start: Expr, depth: int, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Expr, int]]:
    """(state, steps left) in the order A* expanded them, every state queued as soon as it is reached."""
    popped: list[tuple[Expr, int]] = []
    expand = SearchRun.expand

    def recording(run: SearchRun, e: Expr, steps_left: int) -> list[Expr]:
        popped.append((e, steps_left))
        return expand(run, e, steps_left)

    monkeypatch.setattr(SearchRun, "expand", recording)
    astar(start, SearchSpec(rules=commuting(), depth=depth, budget=10_000, batch_size=1))
    return popped


def test_equal_priorities_pop_the_fewest_steps_left_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a plateau A* follows one path down (depth first), as the reference's heap does: each
    expansion is one step deeper than the one before it until the path ends."""
    start = expr("(add (mul x y) (add (mul y x) (mul x 2.0)))")
    steps = [t for _, t in expansion_order(start, 6, monkeypatch)]
    assert steps[:5] == [6, 5, 4, 3, 2]  # children with 1 step left are reached, not queued
    # with breadth-first ties (insertion order alone) every child of the start (5 steps left) would
    # be expanded before any grandchild
    assert steps.index(4) < len(Transitions(commuting()).successors(start))


def test_equal_priorities_and_steps_left_keep_the_order_they_were_queued_in(monkeypatch: pytest.MonkeyPatch) -> None:
    start = expr("(add (mul x y) (add (mul y x) (mul x 2.0)))")
    popped = expansion_order(start, 2, monkeypatch)
    children = list(dict.fromkeys(c for _, c in Transitions(commuting()).successors(start)))
    # depth 2: the children (1 step left each) are expanded in the order the rules produced them
    assert popped[0] == (start, 2) and [e for e, _ in popped[1:]] == children


# -- exhaustive -------------------------------------------------------------------------------------
@cache
def brute_force_best(start: Expr, rules: str, depth: int) -> float:
    """The cheapest cost within ``depth`` rewrites, by plain breadth-first enumeration."""
    rule_set = get_rule_set(rules)
    level, seen = {start}, {start}
    for _ in range(depth):
        level = {apply(e, a) for e in level for a in actions(e, rule_set)} - seen
        seen |= level
    return min(e.cost for e in seen)


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        ("(add (div (div 1.0 x) (add (div 1.0 x) 1.0)) (div 1.0 x))", "binding_simplify_rules"),
        ("(add (mul (div 1.0 x) x) (mul 1.0 x))", "simplify_rules"),
    ],
    ids=["binding_simplify1", "simplify3"],
)
def test_exhaustive_is_optimal_and_at_least_as_good_as_astar(text: str, rules: str) -> None:
    start, depth = expr(text), 3
    spec = SearchSpec(rules=get_rule_set(rules), depth=depth, budget=100000)
    result = exhaustive(start, spec)
    assert result.complete and result.notes == [] and not result.interrupted
    assert result.best_cost == pytest.approx(brute_force_best(start, rules, depth), abs=1e-12)
    assert result.best_cost < result.start_cost
    assert result.best_cost <= astar(start, replace(spec, budget=5000)).best_cost
    assert result.evaluations == len(result.graph.states)
    replay(result)


def test_exhaustive_stops_at_the_state_limit() -> None:
    result = exhaustive(expr(FIRST), SearchSpec(rules=get_rule_set("binding_rules"), depth=3, budget=10))
    assert result.complete is False
    assert len(result.notes) == 1 and "state limit of 10" in result.notes[0]
    replay(result)


def test_exhaustive_stops_at_the_time_limit() -> None:
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=8, budget=10**6, seconds=0.0)
    result = exhaustive(expr(FIRST), spec)
    assert result.complete is False and "time limit" in result.notes[0]
    replay(result)


# -- settings ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [{"depth": 0}, {"depth": -3}, {"budget": 0}, {"budget": -1}, {"batch_size": 0}],
    ids=["depth0", "depth-3", "budget0", "budget-1", "batch0"],
)
def test_search_spec_rejects_bad_settings(bad: dict[str, int]) -> None:
    settings: dict[str, Any] = {"depth": 5, "budget": 10, **bad}
    with pytest.raises(ValueError, match="at least 1"):
        SearchSpec(rules=get_rule_set("binding_rules"), **settings)


def test_search_spec_defaults() -> None:
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=1, budget=1)
    assert isinstance(spec.value, ZeroValue) and spec.batch_size == 16 and spec.seed == 0


def test_unknown_search_name() -> None:
    from knossos.errors import KsUsageError

    with pytest.raises(KsUsageError, match="unknown search 'nope'"):
        get_search("nope")
    assert set(SEARCHES) == {
        "astar",
        "lazy-astar",
        "greedy",
        "beam",
        "pseudo-beam",
        "mcts",
        "random",
        "exhaustive",
        "two-phase",
        "egraph",
        "saturate-astar",
        "saturate-lazy-astar",
        "saturate-pseudo-beam",
    }
    assert all(get_search(n) is SEARCHES[n] for n in SEARCHES)


# -- lazy A* ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [1, 2, 9, 100, 1000])
def test_lazy_astar_evaluates_only_states_at_the_top(budget: int) -> None:
    """Every state it expands was evaluated first, batches hold at most 8 new states, and the
    budget counts them as in eager A*."""
    rec = Recording()
    result = lazy_astar(
        expr(FIRST), SearchSpec(rules=get_rule_set("binding_rules"), depth=10, budget=budget, value=rec)
    )
    assert result.evaluations == sum(rec.batches) == len(set(rec.seen)) == budget
    assert rec.batches[0] == 1 and max(rec.batches) <= 8
    assert set(result.graph.edges) <= set(rec.seen)
    replay(result)


def test_lazy_astar_one_at_a_time_expands_about_one_state_per_evaluation() -> None:
    """Eager A* spends an evaluation on every child; evaluated one at a time, nearly every state
    evaluated is expanded (in larger batches, the top's other states are often siblings that wait)."""
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=10, budget=300, value=Recording())
    eager, lazy = astar(expr(FIRST), spec), lazy_astar(expr(FIRST), replace(spec, value=Recording()), batch=1)
    assert eager.evaluations == lazy.evaluations == 300
    assert lazy.expanded >= 0.8 * 300 > 2 * eager.expanded


def test_lazy_astar_follows_a_states_own_value_once_it_is_evaluated() -> None:
    """The start's five children cost the same and are queued at its estimate (zero here). The last
    of them, once evaluated, is worth 100 within its steps left: it is the next state expanded.
    Worth 100 only with no steps left, it waits its turn."""
    start = expr(FIRST)
    target = [c for _, c in Transitions(get_rule_set("binding_rules")).successors(start)][-1]
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=4, budget=40, value=Favour(target))
    favoured = list(lazy_astar(start, spec, batch=1).graph.edges)
    assert favoured[:2] == [start, target]
    waiting = list(lazy_astar(start, replace(spec, value=Favour(target, columns=[0])), batch=1).graph.edges)
    assert waiting.index(target) > 5


def test_lazy_astar_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        lazy_astar(expr(FIRST), SearchSpec(rules=get_rule_set("binding_rules"), depth=3, budget=10), batch=0)


# -- pseudo-beam ------------------------------------------------------------------------------------
def test_pseudo_beam_sweeps_down_the_depths_one_state_each() -> None:
    """Each sweep expands one state of each depth, from the top down; the start's depth has only the
    start, so every later sweep begins one below it."""
    depth = 4
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=depth, budget=400, value=Recording())
    result = pseudo_beam(expr(FIRST), spec)
    expanded = list(result.graph.edges)
    steps_left = [result.graph.steps_left(e) for e in expanded]
    assert steps_left[: depth + 2 * (depth - 1)] == [4, 3, 2, 1, 3, 2, 1, 3, 2, 1]
    replay(result)


def test_pseudo_beam_expands_every_child_of_the_start_in_order_of_priority() -> None:
    """A beam of width 2 expands two of the start's children and forgets the rest; the sweeps reach
    them all, best first (with the zero value function: cheapest first)."""
    start = expr(FIRST)
    rules = get_rule_set("binding_rules")
    children = {c for _, c in Transitions(rules).successors(start)}
    spec = SearchSpec(rules=rules, depth=3, budget=5000)
    swept = pseudo_beam(start, spec)
    order = [e for e in swept.graph.edges if e in children]
    assert set(order) == children and len(children) > 2
    costs = [spec.cost(e) for e in order]
    assert costs == sorted(costs)
    narrow = beam(start, spec, width=2)
    assert sum(1 for e in narrow.graph.edges if e in children) == 2


def test_pseudo_beam_climbs_to_a_fusion_that_beam_search_misses() -> None:
    """blas_test's amxpamy: plain pseudo-beam reaches the best-known cost (1,829.2 whole-def, one
    fused loop) where a beam of width 16 with the same budget and depth ends at 1,859.4."""
    d = blas().defs["amxpamy"]
    spec = SearchSpec(rules=get_rule_set("ml_rules_no_bind"), depth=60, budget=5000)
    offset = blas().def_cost("amxpamy") - d.body.cost
    swept = run_search("pseudo-beam", d.body, spec)
    assert swept.best_cost + offset < 1829.6 < beam(d.body, spec).best_cost + offset
    replay(swept)
    interp = Interpreter()
    same_value(d.body, swept.best, lambda rng: interp.check_args(d, [random_value(p.type, rng) for p in d.params]))


def test_pruning_lets_plain_pseudo_beam_fuse_a_gemm_stepping_stone() -> None:
    """blas_test's gemm_no_maty at 5000 evaluations: with every commutation the plateau of relabelled
    states keeps the search above 30,800; pruned, it fuses both temporaries with the sizes still
    bound (the reference's best known, 30,246.3 whole-def)."""
    program = blas()
    d = program.defs["gemm_no_maty"]
    offset = program.def_cost("gemm_no_maty") - d.body.cost
    plain = pseudo_beam(d.body, SearchSpec(get_rule_set("ml_rules_no_bind"), depth=60, budget=5000))
    pruned = pseudo_beam(
        d.body, SearchSpec(get_rule_set("ml_rules_no_bind"), depth=60, budget=5000, prune_commutes=True)
    )
    assert pruned.best_cost + offset < 30_247 < 30_800 < plain.best_cost + offset
    replay(pruned)
    interp = Interpreter()
    same_value(d.body, pruned.best, lambda rng: interp.check_args(d, [random_value(p.type, rng) for p in d.params]))


def test_pruned_searches_are_deterministic() -> None:
    d = blas().defs["rot"]
    spec = SearchSpec(get_rule_set("ml_rules_no_bind"), depth=30, budget=1500, prune_commutes=True)
    first, second = pseudo_beam(d.body, spec), pseudo_beam(d.body, spec)
    assert [s.to_json() for s in first.steps] == [s.to_json() for s in second.steps]


def test_pruning_idle_inlines_keeps_gemms_sizes_bound() -> None:
    """blas_test's gemm_climbed_mat_y at 5000 evaluations: with commutations pruned the search still
    copies the sizes into the loops first (30,276 whole-def); with idle inlines pruned too it fuses
    with the sizes let-bound, at the reference agent's best known (30,246.5; compared on the body,
    as experiments/blas_test does)."""
    program = blas()
    d = program.defs["gemm_climbed_mat_y"]
    rules = get_rule_set("ml_rules_no_bind")
    commutes = pseudo_beam(d.body, SearchSpec(rules, depth=60, budget=5000, prune_commutes=True))
    both = pseudo_beam(d.body, SearchSpec(rules, depth=60, budget=5000, prune_commutes=True, prune_inlines=True))
    assert both.best_cost <= 30_246.5 < 30_270 < commutes.best_cost
    replay(both)
    interp = Interpreter()
    same_value(d.body, both.best, lambda rng: interp.check_args(d, [random_value(p.type, rng) for p in d.params]))


def test_gemm_as_written_fuses_with_its_column_count_let_bound() -> None:
    """blas_test's gemm (three calls) at 5000 evaluations, depth 99: with both prunings the search
    fuses away every matrix temporary and keeps ``(size (index 0 b))`` bound outside the loops, at
    the expert's best known 30,501.7; with commutations alone it copies that size into the outer
    loop (30,530; compared on the body, as experiments/blas_test does)."""
    d = blas().defs["gemm"]
    rules = get_rule_set("ml_rules_no_bind")
    commutes = pseudo_beam(d.body, SearchSpec(rules, depth=99, budget=5000, prune_commutes=True))
    both = pseudo_beam(d.body, SearchSpec(rules, depth=99, budget=5000, prune_commutes=True, prune_inlines=True))
    assert both.best_cost <= 30_501.7 < 30_520 < commutes.best_cost
    bound = [node.args[1].type for node in preorder(both.best) if node.op is Op.LET]
    assert bound and all(t != vec(vec(FLOAT)) for t in bound)  # a size stays bound; no matrix does
    replay(both)
    interp = Interpreter()
    same_value(d.body, both.best, lambda rng: interp.check_args(d, [random_value(p.type, rng) for p in d.params]))


# -- termination --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", VALUE_SEARCHES)
@pytest.mark.parametrize(
    ("text", "rules", "depth"),
    [(FIRST, "binding_rules", 1), ("(add x 0.0)", "simplify_rules", 3), ("(add x 1.0)", "binding_rules", 5)],
    ids=["one-step", "tiny", "no-rewrite"],
)
def test_search_ends_when_the_space_is_smaller_than_the_budget(name: str, text: str, rules: str, depth: int) -> None:
    start = expr(text)
    spec = SearchSpec(rules=get_rule_set(rules), depth=depth, budget=500)
    optimum = brute_force_best(start, rules, depth)
    result = run_search(name, start, spec, seconds=2.0)
    assert result.evaluations <= len(result.graph.states) + 1
    assert result.best_cost >= optimum - 1e-12
    if name in ("astar", "lazy-astar", "greedy", "beam", "pseudo-beam"):
        assert result.best_cost == pytest.approx(optimum, abs=1e-12)
    replay(result)


# -- Ctrl-C -----------------------------------------------------------------------------------------
def interrupted(name: str, start: Expr, spec: SearchSpec) -> SearchResult:
    """Run a search whose value function presses Ctrl-C; the search must catch it, not pytest."""
    try:
        return run_search(name, start, spec)
    except KeyboardInterrupt:
        pytest.fail(f"{name} let KeyboardInterrupt through")


def test_astar_interrupted_returns_the_best_so_far() -> None:
    value = InterruptOn(3)
    start = expr(FIRST)
    result = interrupted(
        "astar", start, SearchSpec(rules=get_rule_set("binding_rules"), depth=10, budget=5000, value=value)
    )
    assert value.calls == 3 and result.interrupted
    assert 1 < result.evaluations < 40  # the start and one batch of its children
    assert result.best_cost <= result.start_cost and result.best_cost == result.graph.best_cost
    replay(result)


@pytest.mark.parametrize("name", [n for n in VALUE_SEARCHES if n != "greedy"])
def test_every_search_can_be_interrupted(name: str) -> None:
    value = InterruptOn(3)
    spec = SearchSpec(rules=get_rule_set("binding_rules"), depth=8, budget=5000, value=value)
    result = interrupted(name, expr(FIRST), spec)
    assert result.interrupted and value.calls == 3
    replay(result)


def test_random_search_without_rewrites_returns_the_start() -> None:
    start = expr("(add x 1.0)")
    result = run_search("random", start, SearchSpec(rules=get_rule_set("binding_rules"), depth=3, budget=50), 3.0)
    assert result.best is start and result.steps == [] and result.evaluations == 1
    assert random_search is SEARCHES["random"]
