"""A sum of vectors that reads a matrix down its columns, W^T dy, reaches the vectorised dot products:
its padded gradient's loop-invariant size test is taken out of the sum (cpp_backend/unswitch.py), and
the vector of sums it becomes reads rows (cpp_backend/row_dots.py); values as the interpreter's."""

from __future__ import annotations

import pytest

from autodiff import grad_program
from cpp_backend import emit
from cpp_backend.driver import run_def
from cpp_backend.product_pass import canonical_products
from knossos.errors import KsEvalError
from knossos.interpreter import Interpreter
from knossos.parser import parse_program
from knossos.program import Program
from knossos.values import isclose

#: out[oi] = sum_ki w[ki][oi] image[ki] (conv1d_rev_template.kso's matrix_multiply_transpose).
SOURCE = """
(def mmt (Vec Float) ((w : Vec (Vec Float)) (image : Vec Float))
  (let (k (size w))
    (build (size (index 0 w)) (lam (oi : Integer)
      (sumbuild k (lam (ki : Integer) (mul (index oi (index ki w)) (index ki image))))))))
"""


def program() -> Program:
    return grad_program(parse_program(SOURCE, "mmt.ks"), ["mmt"], "rev")


def test_the_image_cotangent_is_a_vector_of_dot_products() -> None:
    """d$image[ki] = sum_oi d$r[oi] w[ki][oi]: one vectorised sum along each row of w (a sum of
    scaled columns with a size test in each term before: 7x the def's time)."""
    text = emit.emit_program(program(), ["rev$mmt"], include_runtime=False)
    assert "KS_SIMD_SUM(" in text


W = [[0.5, -1.0, 2.0, 0.25], [1.5, 0.75, -0.5, 1.0], [-2.0, 0.5, 1.25, -0.75]]
#: image as long as w, longer (the padded branch: zeros past w's rows), shorter (a read fails).
CASES = [
    (W, [1.0, -2.0, 0.5]),
    (W, [1.0, -2.0, 0.5, 3.0, -1.0]),
    ([W[0], W[1] + [2.0], W[2]], [1.0, -2.0, 0.5]),
    (W, [1.0, -2.0]),
]


@pytest.mark.parametrize(("w", "image"), CASES)
def test_compiled_agrees_with_the_interpreter(w: list[list[float]], image: list[float]) -> None:
    p = program()
    args = [w, image, [0.5, -1.5, 2.0, 1.0]]
    try:
        want = Interpreter().call(p.defs["rev$mmt"], args)
    except KsEvalError:  # (image shorter than w: the compiled code fails too)
        with pytest.raises(KsEvalError):
            run_def(p, "rev$mmt", args)
        return
    assert isclose(want, run_def(p, "rev$mmt", args, exact_order=True), 0.0, 0.0)
    assert isclose(want, run_def(p, "rev$mmt", args), 1e-12, 1e-12)


def test_a_branch_is_taken_out_of_a_sum_only_where_it_pays() -> None:
    """A sum of rows (contiguous already) under a loop-invariant test keeps its branch inside: the
    two copies of the loop that unswitching makes would give no product, only more code."""
    rows = parse_program(
        """
        (def rows (Vec Float) ((x : Vec (Vec Float)) (y : Vec Float))
          (let (n (size (index 0 x)))
            (sumbuild (size x) (lam (j : Integer)
              (let (t (size y))
                (if (eq n t)
                    (build n (lam (k : Integer) (mul (index k (index j x)) (index k y))))
                    (build t (lam (k : Integer) 0.0))))))))
        """,
        "rows.ks",
    ).defs["rows"]
    assert canonical_products(rows.body) is rows.body
    mmt = program().defs["rev$mmt"]
    assert canonical_products(mmt.body) is not mmt.body
