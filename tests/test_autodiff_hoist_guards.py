"""An invariant call in a loop nest over a matrix's rows and their elements (blas_test.kso's
amxmy_hillclimbed, ``(index j (index i (g x)))``): autodiff/hoist.py moves it out of both loops, under
"some row is not empty", so rev$ calls ``g`` and ``rev$g`` once, not once per row; the derivative stays
right, and where every row is empty ``g`` is not called at all (it could fail there)."""

from __future__ import annotations

import pytest
from test_autodiff import check_finite_differences

from autodiff import derivative_defs, grad_program
from knossos import expr as E
from knossos.expr import Expr
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.program import Def, Program

SOURCE = """
(def g (Vec (Vec Float)) ((x : Vec (Vec Float)))
  (let (first (index 0 (index 0 x)))
    (build (size x) (lam (i : Integer) (build (size (index i x)) (lam (j : Integer)
      (mul first (index j (index i x)))))))))
(def nest (Vec (Vec Float)) ((a : Float) (x : Vec (Vec Float)))
  (build (size x) (lam (i : Integer)
    (build (size (index i x)) (lam (j : Integer) (mul a (index j (index i (g x)))))))))
"""


def program() -> Program:
    return parse_program(SOURCE, "nest.ks")


def rev() -> Def:
    return {d.name: d for d in derivative_defs(program(), ["nest"], "rev").new}["rev$nest"]


def calls_in_loops(root: Expr) -> list[str]:
    """The names of the defs called inside a build or sumbuild of ``root``."""
    loops = [n for n in E.preorder(root) if n.op in (Op.BUILD, Op.SUMBUILD)]
    return [m.data.name for n in loops for m in E.preorder(n.args[2]) if m.op is Op.CALL]


def test_the_call_and_its_derivative_are_made_once() -> None:
    body = rev().body
    assert not {"g", "rev$g"} & set(calls_in_loops(body))
    assert [n.data.name for n in E.preorder(body) if n.op is Op.CALL].count("rev$g") == 1


def test_the_derivative_is_right() -> None:
    made = {d.name: d for d in derivative_defs(program(), ["nest"], "both").new}
    check_finite_differences(program().defs["nest"], made["fwd$nest"], made["rev$nest"], seed=2, trials=3)


@pytest.mark.parametrize("x", [[[]], [[], [], []]])
def test_empty_rows_call_nothing(x: list[list[float]]) -> None:
    """g fails on these (it reads x[0][0]); nest never calls it, and neither does rev$nest."""
    p = grad_program(program(), ["nest"], "rev")
    dr: list[list[float]] = [[] for _ in x]
    assert Interpreter().call(p.defs["nest"], [2.0, x]) == dr
    assert Interpreter().call(p.defs["rev$nest"], [2.0, x, dr]) == (0.0, dr)


BRANCH = """
(def total Float ((y : Vec Float)) (sumbuild (size y) (lam (q : Integer) (index q y))))
(def rows (Vec Float) ((x : Vec (Vec Float)) (y : Vec Float))
  (build (size x) (lam (i : Integer)
    (let (m (size (index i x))) (if (gt m 0) (total y) 0.0)))))
"""


def test_a_branch_of_the_def_is_not_taken_for_a_guard() -> None:
    """The def's own ``(if (gt m 0) (total y) 0.0)`` is read where m is 0 (the empty row's 0.0): it
    stays per row, and y's cotangent counts only the rows that are not empty."""
    p = grad_program(parse_program(BRANCH, "rows.ks"), ["rows"], "rev")
    x = [[1.0], [], [2.0, 3.0]]
    y = [1.0, 2.0]
    assert Interpreter().call(p.defs["rows"], [x, y]) == [3.0, 0.0, 3.0]
    d_x, d_y = Interpreter().call(p.defs["rev$rows"], [x, y, [1.0, 10.0, 100.0]])
    assert d_y == [101.0, 101.0] and d_x == [[0.0], [], [0.0, 0.0]]
