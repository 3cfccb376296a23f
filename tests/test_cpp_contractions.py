"""A scaled product's gradient (blas_test.kso's gemm_half_inlined, ``alpha A B + beta C``): the scale's
cotangent, a triple sum of three factors, is a blocked product then an element-wise dot product
(cpp_backend/contractions.py), and the operand's cotangent, a product with the scale in its term,
reaches the blocked nest (products.py: the scale moved into an operand computed once).  Compiled
against the interpreter, on square, rectangular and empty shapes."""

from __future__ import annotations

import random

from interpreted import assert_agree, interpreted, random_array

from autodiff import grad_program
from cpp_backend.driver import compile_program
from cpp_backend.product_pass import canonical_products
from cpp_backend.products import has_product
from knossos import expr as E
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.program import Program

SOURCE = """
(def scaled (Vec (Vec Float)) ((alpha : Float) (a : Vec (Vec Float)) (b : Vec (Vec Float)))
  (let ((l (size a)) (m (size b)) (n (size (index 0 b))))
    (build l (lam (i : Integer) (build n (lam (k : Integer)
      (sumbuild m (lam (j : Integer) (mul (mul alpha (index j (index i a))) (index k (index j b)))))))))))
(def contracted Float ((x : Vec (Vec Float)) (y : Vec (Vec Float)) (z : Vec (Vec Float)))
  (sumbuild (size x) (lam (i : Integer)
    (sumbuild (size y) (lam (k : Integer)
      (sumbuild (size z) (lam (j : Integer)
        (mul (mul (index k (index i x)) (index j (index k y))) (index i (index j z))))))))))
"""


def program() -> Program:
    return grad_program(parse_program(SOURCE, "scaled.ks"), ["scaled"], "rev")


def _float_sums_of_three(root: E.Expr) -> int:
    """How many Float sums of ``root`` have two more Float sums nested directly under their lets."""
    count = 0
    for x in E.preorder(root):
        depth, e = 0, x
        while e.op is Op.SUMBUILD and e.type.kind.name == "FLOAT":
            depth += 1
            e = e.args[2]
            while e.op is Op.LET:
                e = e.args[2] if e.args[2] is not e.args[0] else e.args[1]
        count += depth >= 3
    return count


def test_the_scale_and_the_operand_reach_the_blocked_product() -> None:
    """rev$scaled's alpha cotangent (a triple sum) and a's (a scaled product) are blocked products; the
    triple sum is computed only where a loop runs no iteration (the original, as the fallback)."""
    body = program().defs["rev$scaled"].body
    assert _float_sums_of_three(body) >= 1
    canonical = canonical_products(body)
    assert has_product(canonical)
    dots = [x for x in E.preorder(canonical) if x.op is Op.LET and x.args[0].data.startswith("ks$pm")]
    assert dots and has_product(dots[0].args[1])
    copies = {x.args[0].data for x in E.preorder(canonical) if x.op is Op.LET}
    assert "ks$bm0" in copies  # (b scaled by alpha once, for a's cotangent d$r (alpha b)^T)
    exact = canonical_products(body, exact_order=True)  # (the sums' order kept: no contraction)
    assert not any(x.op is Op.LET and x.args[0].data.startswith("ks$pm") for x in E.preorder(exact))


def test_a_plain_three_factor_sum_is_contracted() -> None:
    """sum x[i][k] y[k][j] z[j][i]: the product of x and y first, its element (i, j) times z[j][i]."""
    p = parse_program(SOURCE, "scaled.ks")
    canonical = canonical_products(p.defs["contracted"].body)
    assert any(x.op is Op.LET and x.args[0].data.startswith("ks$pm") for x in E.preorder(canonical))


def test_compiled_gradients_agree_with_the_interpreter() -> None:
    p = program()
    rng = random.Random(11)
    calls: list[tuple[str, list[object]]] = []
    for rows, m, n in ((3, 4, 5), (4, 4, 4), (1, 2, 1)):
        a, b, dr = random_array((rows, m), rng), random_array((m, n), rng), random_array((rows, n), rng)
        calls.append(("rev$scaled", [0.75, a, b, dr]))
        x, y, z = random_array((rows, m), rng), random_array((m, n), rng), random_array((n, rows), rng)
        calls.append(("contracted", [x, y, z]))
    calls.append(("rev$scaled", [2.0, [[]], [], [[]]]))  # m = 0: no term, the fallback
    calls.append(("contracted", [[[1.0]], [], [[1.0]]]))  # no k: 0.0, z not read
    calls.append(("contracted", [[[1.0]], [[2.0]], [[1.0, 2.0], [3.0]]]))  # z[1] too short: both fail
    compiled = compile_program(p, ["rev$scaled", "contracted"])
    assert_agree(calls, interpreted(p, calls), compiled.run(calls))
