"""A matrix read transposed to its loop nest, ``(index i (index j V))`` with ``i`` an outer loop's index
and ``j`` an inner one's (autodiff/columns.py): its cotangent is one gather over V's elements, no
one-hot row per iteration; and the derivatives stay right (finite differences, forward mode, the
compiled C++ against the interpreter), zeros where the loops do not reach."""

from __future__ import annotations

import random

import pytest
from test_autodiff import check_finite_differences, tangent, value

from autodiff import derivative_defs, grad_program
from cpp_backend import emit
from cpp_backend.driver import run_def
from knossos import expr as E
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.program import Def, Program
from knossos.types import FLOAT, vec
from knossos.values import isclose

SOURCE = """
(edef tanh Float (Float))
(def scaled (Vec (Vec Float)) ((a : Float) (x : Vec (Vec Float)))
  (let ((n (size (index 0 x))) (m (size x)))
    (build n (lam (i : Integer) (build m (lam (j : Integer) (mul a (index i (index j x)))))))))
(def part (Vec (Vec Float)) ((x : Vec (Vec Float)) (n : Integer) (m : Integer))
  (build n (lam (i : Integer) (build m (lam (j : Integer) (exp (index i (index j x))))))))
(def product (Vec (Vec Float)) ((x : Vec (Vec Float)) (y : Vec (Vec Float)))
  (let ((n (size (index 0 x))) (m (size y)) (l (size (index 0 y))))
    (build n (lam (i : Integer) (build l (lam (k : Integer)
      (sumbuild m (lam (j : Integer) (mul (index i (index j x)) (index j (index k y)))))))))))
(def gemm (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)) (alpha : Float))
  (build (size a) (lam (i : Integer) (build (size (index 0 b)) (lam (k : Integer)
    (sumbuild (size b) (lam (j : Integer) (mul (mul alpha (index j (index i a))) (index k (index j b))))))))))
(def tanhs (Vec (Vec Float)) ((x : Vec (Vec Float)) (w : Vec Float))
  (build (size w) (lam (i : Integer)
    (build (size x) (lam (j : Integer) (tanh (mul (index i w) (index i (index j x)))))))))
(def inside (Vec (Vec Float)) ((x : Vec (Vec Float)))
  (build (size (index 0 x)) (lam (i : Integer)
    (let (y (build (size x) (lam (r : Integer) (build (size (index r x)) (lam (c : Integer)
              (mul 2.0 (index c (index r x))))))))
      (build (size y) (lam (j : Integer) (index i (index j y))))))))
"""
NAMES = ["scaled", "part", "product", "gemm", "tanhs", "inside"]


def program() -> Program:
    return parse_program(SOURCE, "columns.ks")


def rev(name: str) -> Def:
    return derivative_defs(program(), [name], "rev").new[-1]


def one_hots(d: Def) -> int:
    """The one-hot rows (of Floats) in ``d``: a row of x per element read (y's in ``product`` are
    one-hots of whole rows, a rank-1 update each)."""
    return sum(n.op is Op.DELTAVEC and n.type is vec(FLOAT) for n in E.preorder(d.body))


@pytest.mark.parametrize("name", ["scaled", "part", "product"])
def test_a_transposed_read_is_one_gather(name: str) -> None:
    """x's cotangent is a build over x's rows of builds over their elements: no one-hot row."""
    d = rev(name)
    assert one_hots(d) == 0
    matrix = program().defs[name].params[0 if name != "scaled" else 1].type
    assert any(n.op is Op.BUILD and n.type is matrix for n in E.preorder(d.body))


def test_a_nest_in_another_loop_keeps_its_one_hots() -> None:
    """In ``gemm`` b is read as b[j][k] in loops k, j inside the loop over i: a gather there would be
    made and added once per i, where the one-hot rows summed over i are a product the C++ backend
    recognises."""
    assert one_hots(rev("gemm")) > 0


def test_the_gather_reads_what_the_forward_pass_computed() -> None:
    """In ``tanhs`` the element's cotangent needs the tanh it read: the gather reads it back from the
    forward pass's value (tanh is evaluated once per element in rev$tanhs, in its forward pass)."""
    d = rev("tanhs")
    assert one_hots(d) == 0
    assert sum(n.op is Op.CALL and n.data.name == "tanh" for n in E.preorder(d.body)) == 1


@pytest.mark.parametrize("name", NAMES)
def test_derivatives_are_right(name: str) -> None:
    made = {d.name: d for d in derivative_defs(program(), [name], "both").new}
    check_finite_differences(program().defs[name], made[f"fwd${name}"], made[f"rev${name}"], seed=3, trials=3)


def test_elements_past_the_loops_get_zeros() -> None:
    """``part`` reads x[j][i] for i < n, j < m only: the rest of x's cotangent is zero."""
    x = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    dr = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]  # (n, m) = (2, 3): dr[i][j] is x[j][i]'s
    got = Interpreter().call(rev("part"), [x, 2, 3, dr])
    assert got[0] == [[1.0, 4.0, 0.0], [2.0, 5.0, 0.0], [3.0, 6.0, 0.0], [0.0, 0.0, 0.0]]


@pytest.mark.parametrize("name", NAMES)
def test_compiled_derivative_agrees_with_the_interpreter(name: str) -> None:
    p = grad_program(program(), [name], "rev")
    rng = random.Random(4)
    f = p.defs[name]
    args = [value(q.type, rng) for q in f.params]
    if name == "part":
        args[1:] = [2, 1]
    args.append(tangent(f.ret_type, Interpreter().call(f, args), rng))
    want = Interpreter().call(p.defs[f"rev${name}"], args)
    assert isclose(want, run_def(p, f"rev${name}", args, exact_order=True), 0.0, 0.0)


def _blocked_nests(name: str) -> int:
    """The products of rev$name that the C++ backend computes with its blocked loop nest."""
    text = emit.emit_program(grad_program(program(), [name], "rev"), [f"rev${name}"], include_runtime=False)
    return text.count("throw ks::Fallback();")


def test_the_gather_of_a_product_reaches_the_blocked_nest() -> None:
    """x's cotangent in ``product`` is itself a product, dx[j][i] = sum_k dr[i][k] y[k][j]: under one
    check that x has the rows the nest reads, each as long, the gather is a plain nest of loops (no
    test per row, no let between them) that the C++ backend blocks, as it does y's (15x the def's
    time in matrix_matrix_multiply of blas_template.kso before, 2x after)."""
    assert _blocked_nests("product") == 2


#: x as the nest reads it (3 rows of 2: n = 2, m = 3), with a longer row, with a row more.
SHAPED_X = [[[0.5, 1.5], [1.0, -0.5], [2.0, 0.25]]]
RAGGED_X = [[[0.5, 1.5], [1.0, -0.5, 3.0], [2.0, 0.25]], [[0.5, 1.5], [1.0, -0.5], [2.0, 0.25], [1.0, 1.0]]]


@pytest.mark.parametrize("x", SHAPED_X + RAGGED_X)
def test_the_gather_falls_back_where_the_rows_are_not_as_read(x: list[list[float]]) -> None:
    """Rows of x longer than the first, or more rows than the loop over them reads, fail the check:
    the gather row by row gives them their zeros, compiled as interpreted."""
    p = grad_program(program(), ["product"], "rev")
    y = [[0.5, -1.0, 2.0], [1.25, 0.5, -0.5], [0.25, 2.0, 1.5]]
    dr = [[1.0, -2.0, 0.5], [0.75, 1.5, -1.0]]
    args = [x, y, dr]
    want = Interpreter().call(p.defs["rev$product"], args)
    assert want[0][1][2:] == [0.0] * (len(x[1]) - 2) and len(want[0]) == len(x)
    assert isclose(want, run_def(p, "rev$product", args, exact_order=True), 0.0, 0.0)
    assert isclose(want, run_def(p, "rev$product", args), 1e-12, 1e-12)
