"""Saturation of the binder-free parts of an expression (search/egraph/parts.py) and the searches
between two saturation passes (search/saturated.py): which parts there are, meaning kept on random
well-typed defs with loops, binders never crossed, the limits, and ``--search saturate-astar``."""

from __future__ import annotations

import json
import math
import random
import time
from typing import Any

import pytest
from exprgen import example, sample

from app.optimize_cli import main
from knossos import expr as E
from knossos.errors import KsEvalError
from knossos.expr import Expr, preorder
from knossos.interpreter import Interpreter
from knossos.ops import BINDERS, Op
from knossos.parser import load_program, parse_expr
from knossos.values import isclose
from rules.sets import get_rule_set
from search.egraph.parts import PartLimits, map_parts, parts, saturate_parts, saturate_parts_report
from search.registry import get_search
from search.saturated import saturate_astar
from search.spec import SearchSpec, ctrl_c_stops_searches

from conftest import PROGRAMS, random_value, run_cli

ALL = get_rule_set("all_rules")
BINDING_SIMPLIFY = get_rule_set("binding_simplify_rules")
#: Grows without end under the arithmetic rules (tests/test_egraph.py's GROWS), here inside a loop.
GROWS = "(div (div 1.0 (mul x x)) (add (div 1.0 (mul x x)) 1.0))"


def body(ret: str, text: str) -> Expr:
    return example(ret, text).body


def skeleton(e: Expr) -> Expr:
    """``e`` with every maximal binder-free subterm replaced by a hole of its type: the binders."""
    return map_parts(e, lambda p: E.var("HOLE", p.type))


def binders(e: Expr) -> list[tuple[Op, str]]:
    return [(n.op, n.bound_var.data) for n in preorder(e) if n.op in BINDERS and n.op is not Op.LET]


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


# -- parts ------------------------------------------------------------------------------------------
def test_parts_are_the_maximal_binder_free_subterms() -> None:
    e = body("V", "(build 3 (lam (i : Integer) (add (mul x (to_float i)) (mul x (to_float i)))))")
    assert [str(p) for p in parts(e)] == ["(add (mul x (to_float i)) (mul x (to_float i)))"]
    arithmetic, _ = parse_expr("(let (a (add x y)) (div a a))")
    assert parts(arithmetic) == [arithmetic]  # lets are allowed: the e-graph inlines them
    nested = body(
        "F",
        "(let (v (build 3 (lam (i : Integer) (mul (to_float i) 1.0)))) "
        "(add (sumbuild 3 (lam (j : Integer) (index j v))) (mul x 0.0)))",
    )
    assert [str(p) for p in parts(nested)] == ["(mul x 0.0)", "(index j v)", "(mul (to_float i) 1.0)"]


def test_loop_bodies_are_saturated_with_the_index_as_a_leaf() -> None:
    e = body("V", "(build 3 (lam (i : Integer) (add (mul x (to_float i)) (mul x (to_float i)))))")
    out, report = saturate_parts_report(e, ALL)
    assert out.cost < e.cost and report.parts == 1 and report.improved == 1 and report.saturated == 1
    assert out.op is Op.BUILD and out.bound_var.data == "i" and skeleton(out) is skeleton(e)
    assert "i" in out.args[2].free


def test_a_let_bound_loop_stays_and_its_variable_is_a_leaf() -> None:
    e = body(
        "F",
        "(let (v (build 3 (lam (i : Integer) (to_float i)))) (add (mul (index 0 v) 2.0) (mul (index 0 v) 3.0)))",
    )
    out = saturate_parts(e, ALL)
    assert out.op is Op.LET and out.args[0].data == "v" and out.args[1] is e.args[1]
    assert out.cost < e.cost and "v" in out.args[2].free


def test_without_loops_it_is_the_egraph() -> None:
    from search.egraph import egraph

    start, _ = parse_expr("(div (add (mul 2.0 (add x y)) (add x y)) (mul x 2.0))")
    whole = egraph(start, SearchSpec(BINDING_SIMPLIFY, 10, 5000))
    assert saturate_parts(start, BINDING_SIMPLIFY).cost == whole.best_cost == 8.1


# -- meaning and binders --------------------------------------------------------------------------
def test_generated_defs_keep_their_meaning_and_their_binders() -> None:
    """Random well-typed defs (lets, builds, sumbuilds, lambdas, ifs, tuples, calls) under all rules."""
    interp = Interpreter(max_steps=10**6)
    compared = improved = with_loops = 0
    for seed in range(200):
        d = sample(seed).program.defs["target"]
        out = saturate_parts(d.body, ALL, PartLimits(nodes=400, iterations=4))
        assert out.cost <= d.body.cost and out.type == d.body.type and out.free <= d.body.free
        assert skeleton(out) is skeleton(d.body) and binders(out) == binders(d.body), (d.body, out)
        loops = any(n.op in (Op.BUILD, Op.SUMBUILD, Op.LAM) for n in preorder(d.body))
        with_loops += loops
        if out is d.body:
            continue
        improved += loops
        rng = random.Random(seed)
        for _ in range(3):
            env = interp.check_args(d, [random_value(p.type, rng) for p in d.params])
            try:
                expected = interp.eval_expr(d.body, env)
            except KsEvalError:
                continue
            if not _finite(expected):  # outside the domains of the rules that assume finite operands
                continue
            assert isclose(expected, interp.eval_expr(out, env), 1e-6, 1e-9), (d.body, out)
            compared += 1
    assert with_loops >= 50 and improved >= 10 and compared >= 50, (with_loops, improved, compared)


def test_blas_defs_keep_their_meaning() -> None:
    program = load_program(PROGRAMS / "blas_test.kso")
    rules = get_rule_set("ml_rules_no_bind")
    interp = Interpreter(max_steps=10**7)
    for d in program.targets:
        out = saturate_parts(d.body, rules)
        assert out.cost <= d.body.cost and skeleton(out) is skeleton(d.body)
        if out is d.body:
            continue
        rng = random.Random(0)
        env = interp.check_args(d, [random_value(p.type, rng) for p in d.params])
        assert isclose(interp.eval_expr(d.body, env), interp.eval_expr(out, env), 1e-6, 1e-9), d.name


# -- limits ---------------------------------------------------------------------------------------
def grows_in_a_loop() -> Expr:
    return body("V", f"(build 3 (lam (i : Integer) (let (x (add x (to_float i))) {GROWS})))")


def test_the_node_limit_holds_per_part() -> None:
    out, report = saturate_parts_report(grows_in_a_loop(), BINDING_SIMPLIFY, PartLimits(nodes=80, iterations=30))
    assert report.saturated == 0 and report.largest <= 80 + 10  # one application past the check at most
    assert report.part_limits == ["stopped at the limit of 80 e-nodes"] and report.stopped is None
    assert out.cost <= grows_in_a_loop().cost


def test_the_iteration_limit_holds_per_part() -> None:
    _, report = saturate_parts_report(grows_in_a_loop(), BINDING_SIMPLIFY, PartLimits(nodes=10**6, iterations=2))
    assert report.part_limits == ["stopped at the iteration limit of 2 (the depth)"]


def test_the_time_limit_holds() -> None:
    many = body(
        "T",
        "(tuple (sumbuild 3 (lam (i : Integer) (let (x (add x (to_float i))) "
        + GROWS
        + "))) (sumbuild 3 (lam (j : Integer) (let (x (add x (to_float j))) "
        + GROWS
        + "))))",
    )
    began = time.perf_counter()
    out, report = saturate_parts_report(many, BINDING_SIMPLIFY, PartLimits(nodes=10**6, iterations=100, seconds=0.2))
    assert time.perf_counter() - began < 2.0
    assert report.stopped == "stopped at the saturation time limit of 0.2 s" and report.parts <= 2
    assert out.cost <= many.cost and skeleton(out) is skeleton(many)


def test_a_stop_callback_ends_the_pass() -> None:
    calls = []

    def stop() -> str | None:
        calls.append(1)
        return "stopped at the memory limit of 1 MiB" if len(calls) > 3 else None

    out, report = saturate_parts_report(grows_in_a_loop(), BINDING_SIMPLIFY, PartLimits(10**6, 100), stop=stop)
    assert report.stopped == "stopped at the memory limit of 1 MiB" and out.cost <= grows_in_a_loop().cost


# -- the searches -----------------------------------------------------------------------------------
def test_saturate_astar_is_registered_and_beats_astar_on_an_arithmetic_expression() -> None:
    assert get_search("saturate-astar") is saturate_astar
    start, _ = parse_expr(GROWS)
    spec = SearchSpec(BINDING_SIMPLIFY, 10, 100)
    result, plain = saturate_astar(start, spec), get_search("astar")(start, spec)
    assert result.best_cost < plain.best_cost and result.best_cost == result.best.cost
    assert result.evaluations <= 100 and result.steps == [] and result.complete
    assert result.notes[0].startswith("saturation before the search: 1 parts, 1 cheaper")
    assert "no rewrite sequence: saturation keeps none" in result.notes


def test_saturate_astar_keeps_the_structural_moves_on_a_program() -> None:
    program = load_program(PROGRAMS / "blas_test.kso")
    d = program.defs["axpy"]
    rules = get_rule_set("ml_rules_no_bind")
    spec = SearchSpec(rules, 5, 200)
    result, plain = saturate_astar(d.body, spec), get_search("astar")(d.body, spec)
    assert result.best_cost <= plain.best_cost < result.start_cost
    interp = Interpreter()
    rng = random.Random(1)
    env = interp.check_args(d, [random_value(p.type, rng) for p in d.params])
    assert isclose(interp.eval_expr(d.body, env), interp.eval_expr(result.best, env), 1e-6, 1e-9)


@pytest.mark.parametrize("name", ["saturate-astar", "saturate-pseudo-beam"])
def test_saturated_searches_stop_at_the_time_limit(name: str) -> None:
    start, _ = parse_expr(GROWS)
    result = get_search(name)(start, SearchSpec(BINDING_SIMPLIFY, 30, 10**6, seconds=0.2))
    assert not result.complete and result.seconds < 5
    assert "stopped at the time limit of 0.2 s" in " ".join(result.notes)
    assert result.best_cost <= result.start_cost


@pytest.mark.parametrize("name", ["axpy", "gemv", "ger", "gemm"])
def test_saturate_pseudo_beam_keeps_meaning_and_the_structural_moves(name: str) -> None:
    """optimize.py's default on programs (depth 99, both prunings), at a small budget: the value is
    kept, and the result is no worse than pruned pseudo-beam's alone."""
    program = load_program(PROGRAMS / "blas_test.kso")
    d = program.defs[name]
    spec = SearchSpec(get_rule_set("ml_rules_no_bind"), 99, 300, prune_commutes=True, prune_inlines=True)
    result, plain = get_search("saturate-pseudo-beam")(d.body, spec), get_search("pseudo-beam")(d.body, spec)
    assert result.best_cost <= plain.best_cost < result.start_cost
    interp = Interpreter()
    rng = random.Random(2)
    for _ in range(3):
        env = interp.check_args(d, [random_value(p.type, rng) for p in d.params])
        assert isclose(interp.eval_expr(d.body, env), interp.eval_expr(result.best, env), 1e-6, 1e-9)


def test_ctrl_c_returns_the_best_or_stops_the_program() -> None:
    class CtrlC:
        pressed = False

        def __call__(self, evaluations: int, best: float) -> None:
            if not self.pressed:
                self.pressed = True
                raise KeyboardInterrupt

    start, _ = parse_expr(GROWS)
    result = saturate_astar(start, SearchSpec(BINDING_SIMPLIFY, 10, 300, progress=CtrlC()))
    assert result.interrupted and result.best_cost <= result.start_cost
    with ctrl_c_stops_searches(), pytest.raises(KeyboardInterrupt):
        saturate_astar(start, SearchSpec(BINDING_SIMPLIFY, 10, 300, progress=CtrlC()))


def test_optimize_py_search_saturate_astar(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--expr", GROWS, "--search", "saturate-astar", "--rules", "binding_simplify_rules", "--quiet"]
    code, out, err = run_cli(main, capsys, *argv, "--json")
    report = json.loads(out)
    assert code == 0 and err == "" and report["search"] == "saturate-astar"
    assert report["best_cost"] < report["start_cost"] and report["steps"] == []
