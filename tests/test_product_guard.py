"""app.product_guard: a search's result that loses a matrix product the C++ backend blocks is cut
back to the cheapest of its programs before the rewrite that lost one."""

from __future__ import annotations

import contextlib
import io

import pytest

from app.product_guard import blocked_products, keep_blocked_products
from autodiff import grad_program
from frontends.torch import translate
from knossos.expr import Expr
from ksdata.torch_suite import SUITE, available, function
from rules.actions import Action, apply
from rules.sets import get_rule_set
from search.plan import choose_plan, run


def _reverse_mode(name: str, size: str) -> Expr:
    """The body of ``rev$layer`` for the suite's layer ``name`` at ``size``, as bench_layers makes it."""
    layer = SUITE[name]
    if not available(layer):
        pytest.skip(f"{layer.package} is not installed")
    fn, examples = function(layer, size)
    with contextlib.redirect_stdout(io.StringIO()):
        program = grad_program(translate(fn, *examples, name="layer", check=False), defs=["layer"], mode="rev")
    return program.defs["rev$layer"].body


def test_the_default_pipeline_keeps_a_convolution_s_products() -> None:
    """Conv1d's gradient at the benchmark's shapes: the default reverse-mode search substitutes a
    weight read into the padding's test (cheaper by the cost, off the blocked kernel on the clock);
    the guarded result keeps every blocked product, and its steps replay to it."""
    start = _reverse_mode("Conv1d", "realistic")
    plan = choose_plan(start, "rev$layer", None)
    rules = get_rule_set(plan.rules)
    result = run(start, plan)
    wanted = blocked_products(start)
    assert wanted > 0
    assert blocked_products(result.best) < wanted  # the case the guard is for (the search as it is)
    kept = keep_blocked_products(result, rules)
    assert blocked_products(kept.best) >= wanted
    assert kept.steps == result.steps[: len(kept.steps)] and kept.best_cost >= result.best_cost
    assert any(
        note.startswith(f"kept the first {len(kept.steps)} of") and "lost a matrix product" in note
        for note in kept.notes
    )
    e = start
    for step in kept.steps:
        e = apply(e, Action(step.node, rules.rule(step.rule)))
    assert e is kept.best


def test_a_result_that_keeps_its_products_is_unchanged() -> None:
    start = _reverse_mode("Linear", "fast")
    plan = choose_plan(start, "rev$layer", None, seconds=2.0)
    result = run(start, plan)
    assert blocked_products(result.best) >= blocked_products(start) > 0
    assert keep_blocked_products(result, get_rule_set(plan.rules)) is result
