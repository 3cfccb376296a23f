"""Two-phase search returns one explored graph covering both phases (for value targets)."""

from __future__ import annotations

from knossos.parser import load_program
from rules.sets import get_rule_set
from search.astar import astar
from search.spec import SearchSpec
from search.two_phase import two_phase

from conftest import PROGRAMS


def test_two_phase_graph_joins_both_phases() -> None:
    body = load_program(PROGRAMS / "blas_train.kso").defs["gemm_climbed_mat_y"].body
    spec = SearchSpec(get_rule_set("ml_rules_no_bind"), depth=6, budget=300)
    result = two_phase(body, spec)
    graph = result.graph
    assert graph.start is body and graph.depth == 6
    assert graph.steps_left(body) == 6
    # the sequence read back from the joined graph is the one returned
    assert graph.steps(result.best) == result.steps
    assert graph.best_cost == result.best_cost
    # every state of the first phase is there, with steps left counted to the end of both
    first = astar(body, SearchSpec(get_rule_set("phase1"), depth=3, budget=150))
    assert first.steps, "phase 1 should find something on this def"
    for e in first.graph.states:
        assert graph.steps_left(e) >= first.graph.steps_left(e) + 3
    exprs, steps_left, table, _ = graph.value_targets()
    assert len(exprs) == len(graph.states) and table.shape == (len(exprs), 7)
    start_row = exprs.index(body)
    assert steps_left[start_row] == 6
    assert table[start_row, 6] == result.start_cost - result.best_cost
