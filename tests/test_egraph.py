"""The equality-saturation search (search/egraph/): which rules it translates from the tables, the
simplifications it finds, extraction at the reference cost with shared subexpressions as lets, the
meaning of its results, its limits, Ctrl-C, its one-line errors and ``optimize.py --search egraph``."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from exprgen import sample

from app.optimize_cli import main
from knossos.errors import KsEvalError, KsUsageError
from knossos.expr import Expr, preorder
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import parse_expr
from knossos.values import isclose
from rules.sets import get_rule_set
from search.egraph import egraph
from search.egraph.parts import saturate_parts
from search.egraph.translate import translate_rules
from search.limits import resident_mib
from search.registry import get_search
from search.result import SearchResult
from search.spec import SearchSpec, ctrl_c_stops_searches

from conftest import random_value, run_cli

SIMPLIFY = get_rule_set("simplify_rules")
BINDING_SIMPLIFY = get_rule_set("binding_simplify_rules")


def run(
    text: str, rules: str = "binding_simplify_rules", depth: int = 10, budget: int = 5000, **kw: Any
) -> SearchResult:
    start, _ = parse_expr(text)
    return egraph(start, SearchSpec(rules=get_rule_set(rules), depth=depth, budget=budget, **kw))


def same_meaning(before: Expr, after: Expr, seed: int = 0) -> int:
    """How many random inputs both were compared on (Floats in [0.5, 2])."""
    interp = Interpreter(max_steps=10**6)
    rng = random.Random(seed)
    compared = 0
    for _ in range(4):
        env = {v: random_value(t, rng) for v, t in _free_types(before).items()}
        try:
            expected = interp.eval_expr(before, env)
        except KsEvalError:
            continue
        assert isclose(expected, interp.eval_expr(after, env), 1e-6, 1e-9), (before, after, env)
        compared += 1
    return compared


def _free_types(e: Expr) -> dict[str, Any]:
    return {n.data: n.type for n in preorder(e) if n.op is Op.VAR and n.data in e.free}


# -- which rules translate ------------------------------------------------------------------------
def test_simplify_rules_translate_but_for_the_let_rules() -> None:
    t = translate_rules(SIMPLIFY)
    assert [r.name for r in t.rewrites] == [
        *("add_zero", "mul_zero", "mul_one", "sub_zero", "div_one", "add_neg_to_sub", "neg_to_sub"),
        *("commute_mul", "commute_add"),
        *("sub_self", "assoc_add_add", "assoc_sub_add", "assoc_add_sub", "assoc_sub_sub", "sub_sub_to_sub_add"),
        *("assoc_mul_mul", "mul_by_add", "mul_by_sub", "add_of_muls", "sub_of_muls"),
        *("assoc_div_mul", "assoc_mul_div", "div_by_div", "add_of_divs", "sub_of_divs", "assoc_div_div"),
        *("div_of_div", "div_by_mul", "div_by_self"),
    ]
    assert t.fold_names == ["cprop_add", "cprop_sub", "cprop_mul", "cprop_div"]
    assert t.let_rules == ["inline_let", "delete_let"] and t.left_out == []


def test_the_rules_left_out_are_named() -> None:
    """Rules with binders and rules written as code (other than folds) do not translate."""
    t = translate_rules(get_rule_set("all_rules"))
    assert t.left_out == [
        *("size_of_build", "index_of_build", "select_of_tuple", "mk_sumbuild", "sumbuild_other_deltavec"),
        *("sumbuild_of_deltavec", "sumbuild_of_tuple", "add_tuples", "mul_tuple_scalar", "sumbuild_invariant"),
        *("sumbuild_of_zero_vec", "sumbuild_of_sum", "sumbuild_of_build", "lift_if", "inline_call", "add_zero_vec"),
        "build_of_delta",
        *("sumbuild_tuple_split", "let_into_deltavec", "sumbuild_let_out", "build_let_out", "sumbuild_swap"),
        *("sumbuild_of_onehot", "if_zero_inward", "sumbuild_of_shifted_onehot", "sumbuild_of_if_eq"),
        *("sumbuild_of_let_build", "let_substitute"),
    ]
    assert set(t.let_rules) == {"inline_let", "delete_let", "new_bind", "lift_bind", "cse_bind", "let_recover"}
    assert "sum_of_deltavecs" in [r.name for r in t.rewrites]  # its condition ("same type") is shallow
    assert {"eq_self", "if_both_same", "log_of_exp"} <= {r.name for r in t.rewrites}
    assert t.fold_names == [
        *("cprop_add", "cprop_sub", "cprop_mul", "cprop_div", "cprop_eq", "cprop_gt", "cprop_gteq", "cprop_log"),
        "cprop_exp",
        "cprop_sqrt",
    ]


# -- what saturation finds -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "best"),
    [
        ("(mul x 1.0)", "x"),
        ("(div x x)", "1.0"),
        ("(div 0.0 0.0)", "(div 0.0 0.0)"),  # div_by_self's condition: a is not a literal zero
        ("(div (sub 1.0 1.0) (sub 1.0 1.0))", "(div 0.0 0.0)"),  # nor where a's e-class holds the literal 0.0
        ("(add (div x y) (div 2.0 y))", "(div (add x 2.0) y)"),  # a sum of fractions
        ("(mul (add 1.0 2.0) x)", "(mul 3.0 x)"),  # constant folding
        ("(add (div 1.0 0.0) x)", "(add (div 1.0 0.0) x)"),  # a fold that is not finite is not made
        ("(let (a (div 1.0 x)) (div a (add 1.0 a)))", "(div 1.0 (add x 1.0))"),
    ],
)
def test_saturation_finds_known_simplifications(text: str, best: str) -> None:
    result = run(text)
    assert result.best is parse_expr(best)[0], str(result.best)
    assert result.best_cost == result.best.cost


def test_common_subexpressions_come_out_as_lets() -> None:
    """With binding_rules alone nothing is rewritten: DAG extraction is CSE."""
    result = run("(mul (mul x y) (mul x y))", rules="binding_rules")
    assert result.best.op is Op.LET and result.best_cost == pytest.approx(4.1) == result.best.cost
    assert result.complete and same_meaning(result.start, result.best)


def test_no_let_takes_a_value_out_of_an_if_branch() -> None:
    """A let evaluates its value where the if would not have: shared parts of a branch stay inside."""
    result = run("(if (gt x 0.0) (mul (div 1.0 x) (div 1.0 x)) 0.0)", rules="binding_rules")
    assert result.best.op is Op.IF


def test_results_keep_the_meaning_and_their_cost_is_the_reference_cost() -> None:
    from ksdata.loader import DataSource, load_targets

    for t in load_targets(DataSource(set="simplify_expressions+binding_simplify_8"), "test"):
        result = egraph(t.expr, SearchSpec(rules=BINDING_SIMPLIFY, depth=10, budget=2000))
        assert result.best_cost == result.best.cost <= result.start_cost
        assert t.best_known is not None and result.best_cost <= t.best_known + 1e-9, t.name
        assert same_meaning(t.expr, result.best), t.name


@pytest.mark.parametrize("seed", range(300))
def test_generated_expressions_keep_their_meaning(seed: int) -> None:
    """Random well-typed defs (ifs, tuples, calls, lets, vectors) under all rules that translate."""
    d = sample(seed).program.defs["target"]
    spec = SearchSpec(rules=get_rule_set("all_rules"), depth=4, budget=400)
    try:
        result = egraph(d.body, spec)
    except KsUsageError as err:  # a build, sumbuild or lambda
        assert "cannot hold" in str(err)
        return
    assert result.best_cost == result.best.cost <= result.start_cost
    interp = Interpreter(max_steps=10**6)
    rng = random.Random(seed)
    for _ in range(3):
        args = [random_value(p.type, rng) for p in d.params]
        env = interp.check_args(d, args)
        try:
            expected = interp.eval_expr(d.body, env)
        except KsEvalError:
            continue
        if not _finite(expected):  # outside the domains of the rules that assume finite operands
            continue
        assert isclose(expected, interp.eval_expr(result.best, env), 1e-6, 1e-9), (d.body, result.best)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    return True


# -- limits, notes, Ctrl-C -------------------------------------------------------------------------
GROWS = "(div (div 1.0 (mul x x)) (add (div 1.0 (mul x x)) 1.0))"  # does not saturate in 30 iterations


def test_saturation_is_said() -> None:
    result = run("(mul x 1.0)")
    assert result.complete and result.steps == [] and result.evaluations == 0
    assert result.notes[-1].startswith("saturated after ") and "e-nodes" in result.notes[-1]
    assert "no rewrite sequence: the e-graph keeps none" in result.notes


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"budget": 60}, "stopped at the limit of 60 e-nodes"),
        ({"budget": 5000, "max_states": 60}, "stopped at the limit of 60 e-nodes"),
        ({"depth": 2}, "stopped at the iteration limit of 2 (the depth)"),
        ({"seconds": 0.0}, "stopped at the time limit of 0 s"),
        ({"max_memory_mib": resident_mib() / 2}, "stopped at the memory limit"),
    ],
    ids=["e-nodes", "max-states", "iterations", "seconds", "memory"],
)
def test_a_limit_ends_saturation_with_a_note(settings: dict[str, Any], fragment: str) -> None:
    result = run(GROWS, **{"depth": 30, **settings})
    assert not result.complete and fragment in result.notes[-1], result.notes
    assert result.notes[-1].startswith("not saturated: ") and result.notes[-1].endswith("the best found so far")
    assert result.best_cost == result.best.cost <= result.start_cost
    assert same_meaning(result.start, result.best)
    if "budget" in settings:
        assert result.to_json()["complete"] is False


class CtrlC:
    """A progress callback that presses Ctrl-C once, at its first call (after the first iteration)."""

    def __init__(self) -> None:
        self.pressed = False

    def __call__(self, size: int, best: float) -> None:
        if not self.pressed:
            self.pressed = True
            raise KeyboardInterrupt


def test_ctrl_c_returns_the_best_or_stops_the_program() -> None:
    result = run(GROWS, depth=30, progress=CtrlC())
    assert result.interrupted and not result.complete and result.best_cost <= result.start_cost
    assert result.notes[-1].startswith("interrupted after ")
    with ctrl_c_stops_searches(), pytest.raises(KeyboardInterrupt):
        run(GROWS, depth=30, progress=CtrlC())


def test_same_settings_same_result() -> None:
    a, b = run(GROWS, depth=30), run(GROWS, depth=30)
    assert a.best is b.best and a.notes == b.notes


# -- errors and optimize.py ----------------------------------------------------------------------------
def test_refuses_what_it_cannot_hold() -> None:
    with pytest.raises(KsUsageError, match="can run none of the rules of inline_call"):
        run("(mul x 1.0)", rules="inline_call")
    d = sample(next(s for s in range(100) if "(build" in sample(s).text)).program.defs["target"]
    with pytest.raises(KsUsageError, match="the e-graph search cannot hold a build"):
        egraph(d.body, SearchSpec(rules=SIMPLIFY, depth=10, budget=100))


def test_optimize_py_search_egraph(capsys: pytest.CaptureFixture[str]) -> None:
    assert get_search("egraph") is egraph
    argv = ["--expr", "(add (div x y) (div 2.0 y))", "--search", "egraph", "--quiet"]
    code, out, err = run_cli(main, capsys, *argv, "--rules", "simplify_rules", "--json")
    report = json.loads(out)
    assert code == 0 and err == "" and report["search"] == "egraph"
    assert report["best"] == "(div (add x 2.0) y)" and report["best_cost"] == 3.0 and report["steps"] == []
    assert report["complete"] is True
    code, out, err = run_cli(main, capsys, *argv)  # ml_rules, the default: the rules left out are named
    assert code == 0 and "cost 5 -> 3 (-2) in 0 steps" in out
    assert "note: rules the e-graph cannot run, left out: size_of_build, index_of_build," in out


def test_optimize_py_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--expr", "(mul x 1.0)", "--search", "egraph", "--quiet", "--rules", "inline_call"]
    code, out, err = run_cli(main, capsys, *argv)
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("optimize.py: error: the e-graph search can run none of the rules of inline_call")


def test_the_report_runs_quick(tmp_path: Any) -> None:
    """experiments/egraph_baseline/run.py --quick: every search of every public set, resumable."""
    from experiments.egraph_baseline.run import main as report

    out = tmp_path / "results.jsonl"
    report(["--quick", "--quiet", "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 * 2 * 3  # sets x expressions x searches
    assert {(r["search"], r["model"]) for r in rows} == {("egraph", "none"), ("astar", "none"), ("astar", "default")}
    assert all(r["best_cost"] <= r["start_cost"] for r in rows)
    report(["--quick", "--quiet", "--out", str(out)])  # all done: nothing added
    assert len(out.read_text().splitlines()) == len(rows)


def test_a_node_without_children_is_built_not_taken_for_a_leaf() -> None:
    """``(tuple)`` has no children and no payload: the e-graph builds it (it crashed on it)."""
    e = parse_expr("(tuple (add x 0.0) (tuple))")[0]
    result = egraph(e, SearchSpec(get_rule_set("ml_rules"), 10, 1000))
    assert str(result.best) == "(tuple x (tuple))"
    assert (
        saturate_parts(
            parse_expr("(let (t (tuple)) (mul 1.0 (get$1$2 (tuple x t))))")[0], get_rule_set("ml_rules")
        ).cost
        <= 1.0
    )
