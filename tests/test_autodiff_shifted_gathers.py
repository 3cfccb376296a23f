"""Reads at a shifted index ``(index (add j c) v)`` in a loop over ``(sub N c)`` iterations (a
triangular matrix-vector product, blas_test.kso's trmv): the index map is invertible, so ``v``'s
cotangent is a gather ``build (size v) (lam u .. iteration u - c ..)`` per ``c``, where it was a
one-hot per element added into an accumulator.  A window of a fixed size (a convolution's kernel)
keeps its one-hots: a gather of the whole vector per window would cost its length per output."""

from __future__ import annotations

import pytest
from test_autodiff import check_finite_differences

from autodiff import derivative_defs, grad_program
from knossos import expr as E
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.program import Program

SOURCE = """
(def trmv (Vec Float) ((a : Vec (Vec Float)) (x : Vec Float))
  (let ((m (size a)) (n (size (index 0 a))))
    (build m (lam (i : Integer) (sumbuild (sub n i) (lam (j : Integer)
      (let (j1 (add j i)) (mul (index j1 (index i a)) (index j1 x)))))))))
(def window (Vec Float) ((w : Vec Float) (x : Vec Float))
  (build (add (sub (size x) (size w)) 1) (lam (t : Integer)
    (sumbuild (size w) (lam (j : Integer) (mul (index j w) (index (add t j) x)))))))
"""


def program() -> Program:
    return parse_program(SOURCE, "shifted.ks")


def rev(name: str) -> E.Expr:
    return {d.name: d for d in derivative_defs(program(), [name], "rev").new}[f"rev${name}"].body


def test_a_triangular_reads_cotangents_are_gathers() -> None:
    assert not any(n.op is Op.DELTAVEC for n in E.preorder(rev("trmv")))


def test_a_windows_cotangent_keeps_its_one_hots() -> None:
    assert any(n.op is Op.DELTAVEC for n in E.preorder(rev("window")))


@pytest.mark.parametrize("name", ["trmv", "window"])
def test_the_derivatives_are_right(name: str) -> None:
    made = {d.name: d for d in derivative_defs(program(), [name], "both").new}
    check_finite_differences(program().defs[name], made[f"fwd${name}"], made[f"rev${name}"], seed=7, trials=3)


def test_rows_longer_and_shorter_than_the_loop() -> None:
    """Row i of a is read from i to n - 1 (n its first row's length): a longer row's end gets zeros."""
    p = grad_program(program(), ["trmv"], "rev")
    a = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0]]
    x = [1.0, -1.0, 2.0, 0.5]
    dr = [1.0, 2.0, 3.0]
    da, dx = Interpreter().call(p.defs["rev$trmv"], [a, x, dr])
    n = len(a[0])
    assert da == [[dr[i] * x[j] if i <= j < n else 0.0 for j in range(len(a[i]))] for i in range(len(a))]
    want = [sum(dr[i] * a[i][j] for i in range(len(a)) if i <= j < n) for j in range(len(x))]
    assert dx == pytest.approx(want, rel=1e-15)
