"""Element-wise loops over C's functions (exp, log, tanh...) compiled with glibc's vector math, and
Float selects computed on both sides: the same values as the interpreter's, edge values included
(libmvec's results are within a few ulp of libm's; under exact order they are libm's, to the bit)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cpp_backend import compile as cpp_compile
from cpp_backend.callable import compile_def
from cpp_backend.emit import emit_program
from knossos.interpreter import call_def
from knossos.parser import parse_program
from knossos.program import Program

FUNCTIONS = ("exp", "log", "tanh", "log1p", "expm1", "erf", "sin", "cos")

#: One loop per function over a vector, and PyTorch's softplus with its threshold as a select.
SOURCE = (
    "\n".join(f"(edef {f} Float (Float))" for f in FUNCTIONS)
    + "".join(
        f"""
(def {f}_all (Vec Float) ((v : Vec Float))
  (build (size v) (lam (i : Integer) ({f} (index i v)))))"""
        for f in FUNCTIONS
    )
    + """
(def softplus (Vec Float) ((v : Vec Float))
  (build (size v) (lam (i : Integer)
    (let (x (index i v)) (if (gt x 20.0) x (log1p (exp x)))))))
(def clamp_nan (Vec Float) ((v : Vec Float))
  (build (size v) (lam (i : Integer)
    (let (x (index i v)) (if (or (lt x 0.0) (ne x x)) x (log1p (exp (neg x))))))))
(def pow_all (Vec Float) ((v : Vec Float) (w : Vec Float))
  (build (size v) (lam (i : Integer) (pow (index i v) (index i w)))))
(edef pow Float (Float Float))
(def square_all (Vec Float) ((v : Vec Float))
  (build (size v) (lam (i : Integer) (pow (index i v) (sub 3.0 1.0)))))
(def cube_all (Vec Float) ((v : Vec Float))
  (build (size v) (lam (i : Integer) (pow (index i v) 3.0))))
(def fourth_all (Vec Float) ((v : Vec Float))
  (build (size v) (lam (i : Integer) (pow (index i v) 4.0))))
(def guarded (Vec Float) ((v : Vec Float) (n : Integer))
  (build n (lam (i : Integer) (if (lt i (size v)) (exp (index i v)) 0.0))))
"""
)

EDGES = [0.0, -0.0, 1e-300, -1e-300, 5e-324, 0.5, -0.5, 1.0, -1.0, -2.0, 20.0, 20.5, 700.0, 710.0, -745.0, -800.0]
EDGES += [1e300, -1e300, math.inf, -math.inf, math.nan, 3.14159, 1e5, -1e5, 1e22]


def _inputs() -> list[float]:
    rng = np.random.default_rng(5)
    return EDGES + list(rng.normal(0, 4, 67)) + list(rng.uniform(-800, 800, 40))


def _agree(want: float, got: float) -> bool:
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    if math.isinf(want) or math.isinf(got) or want == 0.0:
        return want == got
    return abs(want - got) <= 1e-13 * abs(want)  # a few ulp


@pytest.fixture(scope="module")
def program() -> Program:
    return parse_program(SOURCE, "vector_math.ks")


def test_the_compiler_links_vector_math_except_in_exact_order() -> None:
    if not cpp_compile.vector_math_supported():
        pytest.skip("this compiler does not link glibc's vector math (libmvec)")
    flags = cpp_compile.compile_flags()
    assert cpp_compile.VECTOR_MATH_FLAG in flags
    assert cpp_compile.link_libraries(flags) == list(cpp_compile.VECTOR_MATH_LIBS)
    exact = cpp_compile.compile_flags(exact_order=True)
    assert cpp_compile.VECTOR_MATH_FLAG not in exact and cpp_compile.link_libraries(exact) == []


@pytest.mark.parametrize("exact", [False, True], ids=["vector", "exact"])
def test_loops_over_c_functions_agree_with_the_interpreter(program: Program, exact: bool) -> None:
    xs = _inputs()
    for name in [f"{f}_all" for f in FUNCTIONS] + ["softplus", "clamp_nan"]:
        got = compile_def(program, name, exact_order=exact, threads=1)(np.array(xs))
        want = call_def(program.defs[name], xs)
        for x, w, g in zip(xs, want, got, strict=True):
            ok = (math.isnan(w) and math.isnan(g)) or (w == g and math.copysign(1, w) == math.copysign(1, g))
            assert ok if exact else _agree(w, g), f"{name}({x!r}): interpreter {w!r}, compiled {g!r}"


def test_pow_of_two_vectors_agrees_with_the_interpreter(program: Program) -> None:
    xs = _inputs()
    ys = list(np.random.default_rng(6).normal(0, 3, len(xs)))
    ys[:6] = [0.0, -0.0, 0.5, math.inf, -math.inf, math.nan]
    got = compile_def(program, "pow_all", threads=1)(np.array(xs), np.array(ys))
    want = call_def(program.defs["pow_all"], xs, ys)
    for x, y, w, g in zip(xs, ys, want, got, strict=True):
        assert _agree(w, g), f"pow({x!r}, {y!r}): interpreter {w!r}, compiled {g!r}"


@pytest.mark.parametrize("exact", [False, True], ids=["products", "exact"])
def test_pow_of_a_whole_exponent_agrees_with_the_interpreter(program: Program, exact: bool) -> None:
    xs = [*_inputs(), 1e103, -1e103, 1e-110, 1e77, -3.0, 7.0]
    for name, n in (("square_all", 2), ("cube_all", 3), ("fourth_all", 4)):
        source = emit_program(program, [name], include_runtime=False, exact_order=exact)
        assert (f"ks::pow_whole<{n}>(" in source) != exact, name  # products, but C's pow under exact order
        got = compile_def(program, name, exact_order=exact, threads=1)(np.array(xs))
        want = call_def(program.defs[name], xs)
        for x, w, g in zip(xs, want, got, strict=True):
            ok = (math.isnan(w) and math.isnan(g)) or (w == g and math.copysign(1, w) == math.copysign(1, g))
            assert ok if exact else _agree(w, g) and math.copysign(1, w) == math.copysign(1, g), (
                f"{name}({x!r}): interpreter {w!r}, compiled {g!r}"
            )


def test_a_select_is_made_only_of_branches_that_cannot_fail(program: Program) -> None:
    assert " ? " in emit_program(program, ["softplus"], include_runtime=False)  # a select: vectorised
    assert " ? " not in emit_program(program, ["guarded"], include_runtime=False)
    assert " | " in emit_program(program, ["clamp_nan"], include_runtime=False)  # an or of tests: no branch
    # guarded's read past the end of v is under its test, never computed: no error past size v
    got = compile_def(program, "guarded", threads=1)(np.array([0.0, 1.0]), 5)
    assert list(got) == pytest.approx([1.0, math.e, 0.0, 0.0, 0.0])
