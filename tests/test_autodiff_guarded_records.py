"""A row read at a loop's index and hoisted out of an inner loop under ``(if (gt n 0) ..)``
(autodiff/hoist.py): its element record leaves the guard, so the row's cotangent is a gather (one row
per iteration, no full-size one-hot added per row; issue 45's transpose of a gather), and the
derivative stays right, also where the guard fails or the loop runs past the matrix's rows."""

from __future__ import annotations

import pytest
from test_autodiff import check_finite_differences

from autodiff import derivative_defs, grad_program
from knossos import expr as E
from knossos.errors import KsError
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.program import Program

#: blas_template.kso's transpose (it reads mat_x[i][j] with i below the rows' length): the row
#: ``(index i mat_x)`` moves out of the loop over j under ``(gt n 0)``.
SOURCE = """
(def rows (Vec (Vec Float)) ((x : Vec (Vec Float)))
  (let ((n (size x)) (m (size (index 0 x))))
    (build m (lam (i : Integer) (build n (lam (j : Integer) (mul 2.0 (index j (index i x)))))))))
"""


def program() -> Program:
    return parse_program(SOURCE, "rows.ks")


def test_the_rows_cotangent_is_a_gather() -> None:
    """No deltaVec: each iteration's row goes to its place, nothing is summed into a matrix."""
    made = {d.name: d for d in derivative_defs(program(), ["rows"], "rev").new}
    assert not any(n.op is Op.DELTAVEC for n in E.preorder(made["rev$rows"].body))


def test_the_derivative_is_right() -> None:
    made = {d.name: d for d in derivative_defs(program(), ["rows"], "both").new}
    check_finite_differences(program().defs["rows"], made["fwd$rows"], made["rev$rows"], seed=5, trials=3)


@pytest.mark.parametrize(
    ("x", "dr"),
    [
        ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),
        ([[1.0, 2.0], [3.0, 4.0, 5.0]], [[1.0, 2.0], [3.0, 4.0]]),  # a longer row: its end gets zeros
    ],
)
def test_rev_agrees_on_ragged_rows(x: list[list[float]], dr: list[list[float]]) -> None:
    """rev$'s row i is 2 dr[i] where the def read it, zeros past its end."""
    p = grad_program(program(), ["rows"], "rev")
    got = Interpreter().call(p.defs["rev$rows"], [x, dr])
    assert got == [[2.0 * dr[i][j] if j < len(dr[i]) else 0.0 for j in range(len(x[i]))] for i in range(len(x))]


def test_rev_fails_where_the_guarded_row_does_not_exist() -> None:
    """The loop over i runs past x's one row: the def fails reading it, and so does rev$."""
    p = grad_program(program(), ["rows"], "rev")
    run = Interpreter()
    with pytest.raises(KsError):
        run.call(p.defs["rows"], [[[1.0, 2.0, 3.0]]])
    with pytest.raises(KsError):
        run.call(p.defs["rev$rows"], [[[1.0, 2.0, 3.0]], [[1.0], [2.0], [3.0]]])
