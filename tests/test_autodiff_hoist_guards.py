"""An invariant call in a loop nest over a matrix's rows and their elements (blas_test.kso's
amxmy_hillclimbed, ``(index j (index i (g x)))``): autodiff/hoist.py moves it out of both loops, under
"some row is not empty", so rev$ calls ``g`` and ``rev$g`` once, not once per row; the derivative stays
right, and where every row is empty ``g`` is not called at all (it could fail there)."""

from __future__ import annotations

import numpy as np
import pytest
from test_autodiff import check_finite_differences

from autodiff import derivative_defs, grad_program
from cpp_backend.bench import values_agree
from cpp_backend.driver import compile_program
from knossos import expr as E
from knossos.errors import KsError
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


READ_BY_SIZE = """
(def rowdots (Vec Float) ((w : Vec (Vec Float)) (x : Vec Float))
  (build (size x) (lam (c : Integer)
    (sumbuild (size (index c w)) (lam (j : Integer) (mul (index j (index c w)) (index j x)))))))
"""


def test_a_read_its_loops_size_made_moves_out_unguarded() -> None:
    """``(index c w)`` (c over x's length, not w's) is read by the j loop's size already: out of the j
    loop it needs no ``(if (gt m 0) ...)``, and w's cotangent is a gather of rows, not a one-hot of
    w's whole shape per c (layers.ks conv1d's dw: one per output channel, input channel and position)."""
    source = parse_program(READ_BY_SIZE, "rowdots.ks")
    p = grad_program(source, ["rowdots"], "rev")
    body = p.defs["rev$rowdots"].body
    assert not [n for n in E.preorder(body) if n.op is Op.DELTAVEC]
    assert not [n for n in E.preorder(body) if n.op is Op.GT]
    check_finite_differences(source.defs["rowdots"], *_fwd_rev(source), seed=3, trials=3)
    rng = np.random.default_rng(5)
    w = rng.normal(size=(4, 3)).tolist()
    x, dr = rng.normal(size=3).tolist(), rng.normal(size=3).tolist()
    d_w, d_x = Interpreter().call(p.defs["rev$rowdots"], [w, x, dr])
    assert np.allclose(d_w, [[dr[c] * xj for xj in x] if c < 3 else [0.0] * 3 for c in range(4)])
    assert np.allclose(d_x, np.asarray(dr) @ np.asarray(w)[:3])
    have = compile_program(p, ["rev$rowdots"], threads=1).run(
        [("rev$rowdots", [w, x, dr]), ("rev$rowdots", [w[:2], x, dr])]
    )
    assert values_agree((d_w, d_x), have[0])
    with pytest.raises(KsError):  # w has fewer rows than x is long: rowdots fails, and so does rev$
        Interpreter().call(p.defs["rev$rowdots"], [w[:2], x, dr])
    assert isinstance(have[1], KsError)


def _fwd_rev(source: Program) -> tuple[Def, Def]:
    made = {d.name: d for d in derivative_defs(source, ["rowdots"], "both").new}
    return made["fwd$rowdots"], made["rev$rowdots"]
