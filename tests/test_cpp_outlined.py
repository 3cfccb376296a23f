"""A top-level let's loop nest is emitted in a lambda g++ keeps as a function of its own
(cpp_backend.emit's _outlined: g++'s superlinear passes then see one nest at a time).  Values equal
the interpreter's (to the bit under exact order), an error inside the nest is the interpreter's, and
nothing computed inside is read after it (the C++ compiles)."""

from __future__ import annotations

import random
import re

from interpreted import interpreted, random_array

from cpp_backend import emit
from cpp_backend.bench import values_agree
from cpp_backend.driver import compile_program
from knossos.errors import KsError
from knossos.parser import parse_program

PROGRAM = """
; two nests in lets, the second reading the first and the same sizes; a sum of rows; a scalar after
(def f (Tuple (Vec (Vec Float)) Float) ((a : Vec (Vec Float)) (b : Vec Float) (n : Integer))
  (let ((s (build (size a) (lam (i : Integer)
              (build (size b) (lam (k : Integer) (mul (index k (index i a)) (index k b)))))))
        (t (sumbuild (size a) (lam (i : Integer)
              (build (size b) (lam (k : Integer) (add (index k (index i s)) (index n b))))))))
    (tuple s (add (index 0 t) (index 0 (index 0 s))))))
"""


def test_top_level_nests_are_outlined_and_equal_the_interpreter() -> None:
    program = parse_program(PROGRAM, "outlined.ks")
    cpp = emit.emit_program(program, ["f"], include_runtime=False)
    assert cpp.count("__attribute__((noinline))") == 2
    # the scalar the second nest reads is copied into a local first (by reference, every store in the
    # nest could alias it, and g++ would not vectorise the loop)
    second = cpp.split("__attribute__((noinline))")[2].splitlines()
    assert re.fullmatch(r"\s*const std::int64_t t\d+ = p2_n;", second[1]), second[1]
    rng = random.Random(7)
    calls: list[tuple[str, list[object]]] = []
    for rows, cols in ((1, 1), (3, 5), (9, 17)):
        a, b = random_array((rows, cols), rng), random_array((cols,), rng)
        calls += [("f", [a, b, cols - 1]), ("f", [a, b, cols])]  # the second reads past b: an error
    want = interpreted(program, calls)
    assert isinstance(want[1], KsError) and not isinstance(want[0], KsError)
    for exact_order in (True, False):
        have = compile_program(program, exact_order=exact_order, threads=1).run(calls)
        for w, h in zip(want, have, strict=True):
            if isinstance(w, KsError):
                assert isinstance(h, KsError) and str(h).endswith(str(w)), h
            elif exact_order:
                assert h == w  # to the bit
            else:
                assert values_agree(w, h)


SHADOWED = """
; the nest reads the Integer t and binds a Float t of its own inside (autodiff's rev$ reuses names so)
(def g (Vec Float) ((y : Vec Float) (d : Vec (Vec Float)))
  (let ((t (size y))
        (r (build (size d) (lam (i : Integer)
              (let ((di (index i d))
                    (s (sumbuild t (lam (j : Integer) (let (t (index j y)) (mul t (index j di)))))))
                (if (gt t 0) s 0.0))))))
    r))
"""


def test_a_nest_copies_its_free_scalars_with_their_own_types_not_a_shadowing_bindings() -> None:
    # free_scalars took each name's type from any node of that name, the inner Float t's included:
    # `const double t = <the Integer>` and a loop bounded by it (blas_test.kso's rev$avxvy did not compile)
    program = parse_program(SHADOWED, "shadowed.ks")
    rng = random.Random(3)
    calls = [("g", [random_array((m,), rng), random_array((n, m), rng)]) for n, m in ((3, 4), (2, 0), (70, 5))]
    want = interpreted(program, calls)
    have = compile_program(program, threads=1).run(calls)
    for w, h in zip(want, have, strict=True):
        assert values_agree(w, h), (w, h)
