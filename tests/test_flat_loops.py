"""Loops over a flattened index become nested loops in translations (frontends.flat_loops): sums add
the same terms in another association, let-bound tensors hold the same elements nested and are read
in place; left alone where the index or the tensor is used otherwise."""

from __future__ import annotations

import math
import random

from frontends.flat_loops import nest_flat_loops, split_flat_loops
from knossos.index_ranges import simplify_indices
from knossos.interpreter import Interpreter
from knossos.parser import parse_program

FLAT = """
(def group_sum Float ((x : Vec (Vec Float)) (g : Integer))
  (sumbuild 12 (lam (v : Integer)
    (mul (index (sub v (mul (div v 4) 4)) (index (add (mul g 3) (div v 4)) x)) 2.0))))

(def plain_use Float ((x : Vec Float))
  (sumbuild 12 (lam (v : Integer) (mul (index (div v 4) x) (to_float v)))))

(def two_strides Float ((x : Vec Float))
  (sumbuild 12 (lam (v : Integer) (add (index (div v 4) x) (index (div v 3) x)))))
"""


def test_a_sum_over_a_flattened_index_is_nested_and_keeps_its_value() -> None:
    program = parse_program(FLAT, "flat.ks")
    d = program.defs["group_sum"]
    split = split_flat_loops(d.body)
    text = " ".join(str(split).split())
    assert text.startswith("(sumbuild 3 (lam (v_hi_0 : Integer) (sumbuild 4 (lam (v_lo_0 : Integer)")
    assert "(div v " not in text and "(sub v " not in text  # no quotient or remainder of v is left
    rng = random.Random(3)
    for g in range(2):
        x = [[rng.uniform(-2, 2) for _ in range(4)] for _ in range(6)]
        want = Interpreter().call(d, [x, g])
        got = Interpreter().eval_expr(split, {"x": x, "g": g})
        assert math.isclose(got, want, rel_tol=1e-12)  # type: ignore[arg-type]


def test_an_index_used_otherwise_is_left_alone() -> None:
    program = parse_program(FLAT, "flat.ks")
    for name in ("plain_use", "two_strides"):
        body = program.defs[name].body
        assert split_flat_loops(body) is body, name


BUILT = """
(def rows (Vec (Vec (Vec Float))) ((x : Vec (Vec (Vec Float))))
  (let (h (build 6 (lam (v : Integer) (build 4 (lam (c : Integer)
            (tanh (index c (index (sub v (mul (div v 3) 3)) (index (div v 3) x)))))))))
    (build 2 (lam (a : Integer) (build 3 (lam (b : Integer) (build 4 (lam (c : Integer)
      (add (index c (index (add (mul a 3) b) h)) (index c (index (sub 5 (add (mul a 3) b)) h)))))))))))

(def whole (Vec (Vec Float)) ((x : Vec (Vec (Vec Float))))
  (let (h (build 6 (lam (v : Integer) (build 4 (lam (c : Integer)
            (index c (index (sub v (mul (div v 3) 3)) (index (div v 3) x))))))))
    h))
"""


def test_a_tensor_built_over_a_flattened_index_is_nested_and_read_in_place() -> None:
    program = parse_program(BUILT, "built.ks")
    d = program.defs["rows"]
    split = simplify_indices(split_flat_loops(d.body))
    text = " ".join(str(split).split())
    assert "(let (h (build 2 (lam (v_hi_0 : Integer) (build 3 (lam (v_lo_0 : Integer)" in text
    assert "(index b (index a h))" in text  # the view back reads rows plainly
    assert "(div v " not in text and "(div (add (mul a 3) b) 3)" not in text
    rng = random.Random(5)
    x = [[[rng.uniform(-2, 2) for _ in range(4)] for _ in range(3)] for _ in range(2)]
    assert Interpreter().eval_expr(split, {"x": x}) == Interpreter().call(d, [x])  # the same elements


def test_a_tensor_used_whole_keeps_its_flat_shape() -> None:
    body = parse_program(BUILT, "built.ks").defs["whole"].body
    assert split_flat_loops(body) is body  # its shape is what the def returns


CHAIN = """
(def heads (Vec (Vec (Vec Float))) ((x : Vec (Vec (Vec Float))))
  (let ((q (build 4 (lam (bh : Integer) (build 3 (lam (t : Integer) (build 2 (lam (d : Integer)
             (mul 2.0 (index (sub (add (mul bh 2) d) (mul (div (add (mul bh 2) d) 4) 4))
                             (index t (index (div (add (mul bh 2) d) 4) x)))))))))))
        (s (build 4 (lam (bh : Integer) (build 3 (lam (t : Integer)
             (sumbuild 2 (lam (d : Integer) (exp (index d (index t (index bh q))))))))))))
    (build 2 (lam (b : Integer) (build 3 (lam (t : Integer) (build 2 (lam (h : Integer)
      (index t (index (add (mul b 2) h) s))))))))))
"""


def test_a_chain_of_tensors_over_batch_heads_is_nested_let_after_let() -> None:
    # attention's (b, t, h*d) input read as (b*h, t, d): q, then s that reads q over b*h, both nested
    program = parse_program(CHAIN, "chain.ks")
    d = program.defs["heads"]
    nested = nest_flat_loops(d.body)
    text = " ".join(str(nested).split())
    assert "(let ((q (build 2 (lam (bh_hi_0 : Integer) (build 2 (lam (bh_lo_0 : Integer)" in text, text
    assert "(s (build 2 (lam (bh_hi_1 : Integer) (build 2 (lam (bh_lo_1 : Integer)" in text, text
    assert "(div " not in text  # every read is plain
    assert (
        " ".join(str(simplify_indices(split_flat_loops(d.body))).split()).count("(div ") > 0
    )  # (one round is not enough)
    rng = random.Random(9)
    x = [[[rng.uniform(-2, 2) for _ in range(4)] for _ in range(3)] for _ in range(2)]
    assert Interpreter().eval_expr(nested, {"x": x}) == Interpreter().call(d, [x])  # the same elements
