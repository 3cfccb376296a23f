"""What the alloc cost model charges an ``if`` (knossos/alloc_cost.py): both branches of a scalar one (a
select in compiled loops), the taken branch of one on a literal condition, the dearer branch of a
vector one; and optimize.py's default pipeline for reverse-mode code, which minimises that model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.optimize_cli import main
from knossos import expr as E
from knossos.alloc_cost import JUMP_COST, AllocCost, alloc_cost
from knossos.expr import Expr, preorder
from knossos.ops import Op
from knossos.parser import Parser, parse_program
from knossos.reader import read_forms
from knossos.types import FLOAT, vec
from search.plan import PROGRAM_PLAN, REVERSE_PLAN, Plan, choose_plan


def expr(text: str) -> Expr:
    """``text`` with the free variables ``x`` (a vector), ``d`` and ``y`` (Floats)."""
    parser = Parser("<if>")
    for name, t in {"x": vec(FLOAT), "d": FLOAT, "y": FLOAT}.items():
        parser.scope.bind(E.var(name, t))
    (form,) = read_forms(text, "<if>")
    return parser.convert(form)


#: BCEWithLogitsLoss's gradient per element, as reverse mode writes it (the exp once, then a select)
#: and as equality saturation extracted it under the reference model (the exp in both branches).
SHARED = "(build 1024 (lam (i : Integer) (let (z (mul d (exp (neg (abs (index i x)))))) (if (lt (index i x) 0.0) z (neg z)))))"
DUPLICATED = (
    "(build 1024 (lam (i : Integer) (if (lt (index i x) 0.0) (mul d (exp (neg (abs (index i x))))) "
    "(neg (mul d (exp (neg (abs (index i x)))))))))"
)


def test_work_copied_into_both_branches_of_a_scalar_if_costs_twice() -> None:
    shared, duplicated = expr(SHARED), expr(DUPLICATED)
    assert duplicated.cost <= shared.cost  # the reference charges the dearer branch only: the copy is free
    assert alloc_cost(duplicated) > alloc_cost(shared)  # compiled, both branches run
    assert AllocCost({"x": 1024})(duplicated) > AllocCost({"x": 1024})(shared)


def test_a_select_costs_its_condition_and_both_branches() -> None:
    e = expr("(if (lt y 0.0) (neg d) (mul y d))")
    parts = sum(alloc_cost(expr(t)) for t in ("(lt y 0.0)", "(neg d)", "(mul y d)"))
    assert alloc_cost(e) == 1.0 + parts


def test_a_branch_that_loads_or_calls_is_a_jump() -> None:
    e = expr("(if (lt y 0.0) (exp y) (mul y y))")
    parts = sum(alloc_cost(expr(t)) for t in ("(lt y 0.0)", "(exp y)", "(mul y y)"))
    assert alloc_cost(e) == 1.0 + JUMP_COST + parts
    # SmoothL1Loss's gradient: the load copied into both branches ran 1.2x slower than the select of it
    copied = expr("(build 1024 (lam (i : Integer) (if (lt (index i x) 0.0) (neg (index i x)) (index i x))))")
    select = expr("(build 1024 (lam (i : Integer) (let (v (index i x)) (if (lt v 0.0) (neg v) v))))")
    assert alloc_cost(copied) > alloc_cost(select) + 1024 * (JUMP_COST - 1)


def test_an_if_on_a_literal_condition_costs_the_branch_taken() -> None:
    small, zeros = "(build 4 (lam (i : Integer) y))", "(build 1024 (lam (i : Integer) 0.0))"
    taken = expr(f"(if (gt 1024 0) {small} {zeros})")
    other = expr(f"(if (lt 1024 0) {small} {zeros})")
    assert alloc_cost(taken) == pytest.approx(1.0 + alloc_cost(expr("(gt 1024 0)")) + alloc_cost(expr(small)))
    assert alloc_cost(other) == pytest.approx(1.0 + alloc_cost(expr("(lt 1024 0)")) + alloc_cost(expr(zeros)))
    assert alloc_cost(expr(f"(if true {small} {zeros})")) < alloc_cost(expr(f"(if false {small} {zeros})"))


def test_a_vector_if_on_data_still_costs_its_dearer_branch() -> None:
    small, big = "(build 4 (lam (i : Integer) y))", "(build 1024 (lam (i : Integer) y))"
    e = expr(f"(if (lt y 0.0) {small} {big})")
    assert alloc_cost(e) < alloc_cost(expr(small)) + alloc_cost(expr(big))
    assert alloc_cost(e) > alloc_cost(expr(big))


REV = """
(def rev$softplus_sum (Vec Float) ((x : Vec Float) (d$r : Float))
  (build (size x) (lam (i : Integer)
    (let ((t_10 (index i x))
          (t_11 (abs t_10))
          (t_12 (neg t_11))
          (t_13 (exp t_12))
          (d$t_15 (neg d$r))
          (d$t_14 (neg d$t_15))
          (d$t_13 (mul d$t_14 (div 1.0 (add 1.0 t_13))))
          (d$t_12 (mul d$t_13 t_13))
          (d$t_11 (neg d$t_12))
          (d$t_10 (if (lt t_10 0.0) (neg d$t_11) d$t_11)))
      d$t_10))))
"""


def test_reverse_mode_code_gets_its_own_default_pipeline() -> None:
    d = parse_program(REV, "rev.ks").defs["rev$softplus_sum"]
    assert Plan.default_for(d.name, d.body) is REVERSE_PLAN and Plan.default_for(None, d.body) is PROGRAM_PLAN
    assert Plan.default_for("rev$f", expr("(add y 1.0)")).search.algorithm == "saturate-astar"  # arithmetic stays
    t = choose_plan(d.body, d.name)
    assert (t.rules, t.search.cost, t.search.algorithm, t.seconds) == (REVERSE_PLAN.rules, "alloc", "pseudo-beam", 20.0)


def test_optimize_keeps_reverse_mode_selects_cheap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "rev.ks"
    src.write_text(REV)
    assert main([str(src), "--json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (report["rules"], report["cost_model"]) == (REVERSE_PLAN.rules, "alloc")
    head = REV[: REV.index("(build")]
    best = parse_program(f"{head}{report['best']})", "best.ks").defs["rev$softplus_sum"].body
    assert report["best_cost"] <= report["start_cost"]
    exps = sum(1 for n in preorder(best) if n.op is Op.EXP)
    assert exps == 1  # never copied into both branches of the select (the reference's saturation copies it)
