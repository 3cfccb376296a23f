"""Sums over a flattened index become nested sums in translations (frontends.flat_loops): the same
terms, another association; left alone where the index is used otherwise."""

from __future__ import annotations

import math
import random

from frontends.flat_loops import split_flat_sums
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
    split = split_flat_sums(d.body)
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
        assert split_flat_sums(body) is body, name
