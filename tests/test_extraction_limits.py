"""Every loop of the e-graph's building, rebuilding and extraction looks at the search's limits, and
extraction's memory grows linearly with the depth of a chain (issue 44: the default pipeline on a
20,000-deep chain ran 29 s at 7.2 GiB for ``--seconds 2 --max-memory 1000``)."""

from __future__ import annotations

import tracemalloc

import pytest

from knossos.cost_models import reference_cost
from knossos.expr import Expr
from knossos.parser import parse_expr
from rules.sets import get_rule_set
from search.egraph import egraph
from search.egraph.extract import SHARING_HORIZON, dag_choice, tree_choice, write_out
from search.egraph.graph import EGraph
from search.egraph.parts import PartLimits, saturate_parts_report
from search.limits import LimitReached
from search.spec import SearchSpec

NOTE = "stopped at the time limit of 1 s"


class StopAfter:
    """A stop that says a limit is reached from its ``n``-th look on, and counts the looks."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.looks = 0

    def __call__(self) -> str | None:
        self.looks += 1
        return NOTE if self.looks >= self.n else None


def chain(depth: int) -> Expr:
    text = "x"
    for _ in range(depth):
        text = f"(add 1.0 {text})"
    return parse_expr(text)[0]


def graph_of(e: Expr) -> tuple[EGraph, int]:
    g = EGraph()
    root = g.add_expr(e)
    g.rebuild()
    return g, root


def test_building_and_rebuilding_look_at_the_limit() -> None:
    stop = StopAfter(1)
    with pytest.raises(LimitReached, match=NOTE):
        EGraph().add_expr(chain(3000), stop)
    assert stop.looks == 1
    g = EGraph()
    g.add_expr(chain(3000))
    g.union(2, 3)  # a merge for the rebuild to repair, then 3,000 e-classes to tidy
    with pytest.raises(LimitReached):
        g.rebuild(StopAfter(1))


@pytest.mark.parametrize("which", ["tree", "dag", "write"])
def test_each_extraction_stops_at_its_limit(which: str) -> None:
    g, root = graph_of(chain(3000))
    stop = StopAfter(3)
    with pytest.raises(LimitReached, match=NOTE):
        if which == "tree":
            tree_choice(g, stop)
        trees = tree_choice(g)[1]
        if which == "dag":
            dag_choice(g, trees, stop)
        write_out(g.find(root), tree_choice(g)[0], frozenset(), reference_cost, stop)
    assert stop.looks == 3  # it stopped at the first look that said so


def test_dropping_lets_stops_with_a_whole_expression() -> None:
    """Stopped while it tries lets one by one, write_out returns the expression it has (lets and all)."""
    e = parse_expr("(let (a (mul x y)) (let (b (add x y)) (add (mul a b) (add (mul a b) (add a b)))))")[0]
    g, root = graph_of(e)
    choice = tree_choice(g)[0]
    full = write_out(g.find(root), choice, e.free, reference_cost)
    stopped = write_out(g.find(root), choice, e.free, reference_cost, StopAfter(1))
    assert full is not None and stopped is not None
    assert stopped.type == e.type and stopped.free <= e.free and stopped.cost >= full.cost


def test_dag_extraction_memory_is_linear_in_a_chains_depth() -> None:
    """Exact sub-DAG sets hold depth**2 / 2 entries (3,000 deep: 4.5 million, 167 MiB at their peak);
    folded past the horizon, at most depth * SHARING_HORIZON (16 MiB)."""
    g, root = graph_of(chain(3000))
    trees = tree_choice(g)[1]
    tracemalloc.start()
    try:
        choice = dag_choice(g, trees)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3000 * SHARING_HORIZON * 64  # bytes (47 MiB): a third of what exact sets took
    out = write_out(g.find(root), choice, frozenset(), reference_cost)
    assert out is not None and out.cost == 3000


def test_a_part_stopped_in_extraction_stays_as_it_was() -> None:
    start = chain(3000)
    rules = get_rule_set("simplify_rules")
    out, report = saturate_parts_report(start, rules, PartLimits(nodes=10**6, iterations=1), stop=StopAfter(20))
    assert out is start and report.stopped == NOTE


def test_the_egraph_search_stopped_before_its_extraction_keeps_the_start() -> None:
    start = chain(3000)
    result = egraph(start, SearchSpec(get_rule_set("simplify_rules"), 10, 5000, seconds=0.0))
    assert result.best is start and result.complete is False
    assert "time limit of 0 s" in result.notes[-1] and "the best found so far" in result.notes[-1]
