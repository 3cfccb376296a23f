"""The C++ backend (cpp_backend): emitted programs compile with -Wall -Werror and agree with the interpreter.

Each program file is compiled once, as one translation unit holding every def and the test driver
(``-O1`` to keep compile time down; one test compiles with the default ``-O3 -march=native``).  Calls
use random arguments whose vectors all have one length n in 2-4; where the interpreter fails (a
failed assert, an index out of range) the C++ code must fail too.
"""

from __future__ import annotations

import math
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpp_backend import compile as cpp_compile
from cpp_backend.compile import KsCompileError, compile_cpp
from cpp_backend.cpp_text import def_symbol, escape_name, unescape_name
from cpp_backend.driver import CompiledProgram, compile_program, run_def, serializable
from cpp_backend.emit import emit_def, emit_program
from knossos.errors import KsError, KsEvalError, KsUsageError
from knossos.interpreter import Interpreter
from knossos.parser import load_program, parse_program
from knossos.printer import quote_name
from knossos.program import Program
from knossos.types import Kind, Type
from knossos.values import isclose

from conftest import PROGRAMS

TEST_FLAGS = ("-O1", "-Wall", "-Werror")
FILES = ["blas_test.kso", "conv1d_rev_test.kso", "gelu.kso", "gmm_test.kso"]
#: Defs checked per file in the default run (the slow test checks every def).
QUICK_DEFS = 12


#: Each module compiles into a fresh cache of its own (see conftest.cpp_cache).
pytestmark = pytest.mark.usefixtures("cpp_cache")


_compiled: dict[str, tuple[Program, CompiledProgram]] = {}


def compiled_file(name: str) -> tuple[Program, CompiledProgram]:
    if name not in _compiled:
        program = load_program(PROGRAMS / name)
        _compiled[name] = (program, compile_program(program, extra_flags=TEST_FLAGS))
    return _compiled[name]


def random_arg(t: Type, rng: random.Random, n: int) -> object:
    """A random value of type ``t`` whose vectors all have ``n`` elements; Floats in [-2, 2], Integers 1-3."""
    if t.kind is Kind.FLOAT:
        return rng.uniform(-2.0, 2.0)
    if t.kind is Kind.INTEGER:
        return rng.randint(1, 3)
    if t.kind is Kind.BOOL:
        return rng.random() < 0.5
    if t.kind is Kind.VEC:
        return [random_arg(t.elem, rng, n) for _ in range(n)]
    if t.kind is Kind.TUPLE:
        return tuple(random_arg(c, rng, n) for c in t.children)
    raise TypeError(f"cannot make a value of type {t}")


def compare(program: Program, compiled: CompiledProgram, calls: list[tuple[str, list[object]]]) -> tuple[int, int]:
    """Run the calls both ways and assert agreement; returns (calls compared by value, calls that failed)."""
    expected: list[object] = []
    for name, args in calls:
        try:
            expected.append(Interpreter(max_steps=10**7).call(program.defs[name], args))
        except KsError as err:  # a run-time error, or sizes of sized vectors that disagree
            expected.append(err)
    got = compiled.run(calls)
    values = failures = 0
    for (name, args), want, have in zip(calls, expected, got, strict=True):
        if isinstance(want, KsError) or isinstance(have, KsError):
            assert isinstance(want, KsError) and isinstance(have, KsError), (name, args, want, have)
            failures += 1
        else:
            assert isclose(want, have, rel=1e-9, abs_tol=1e-12), (name, args, want, have)
            values += 1
    return values, failures


def file_calls(program: Program, names: list[str], seeds: int, rng: random.Random) -> list[tuple[str, list[object]]]:
    calls = []
    for name in names:
        d = program.defs[name]
        for n in (2, 3, 4):
            for _ in range(seeds):
                calls.append((name, [random_arg(p.type, rng, n) for p in d.params]))
    return calls


# -- the program files ------------------------------------------------------------------------------
@pytest.mark.parametrize("file", FILES)
def test_program_file_matches_interpreter(file: str) -> None:
    program, compiled = compiled_file(file)
    names = [d.name for d in program.targets][:QUICK_DEFS]
    values, _ = compare(program, compiled, file_calls(program, names, 1, random.Random(file)))
    assert values >= len(names)  # every def gave a value at some size


@pytest.mark.slow
@pytest.mark.parametrize("file", FILES)
def test_every_def_matches_interpreter(file: str) -> None:
    program, compiled = compiled_file(file)
    names = list(program.defs)
    values, failures = compare(program, compiled, file_calls(program, names, 3, random.Random(file + "slow")))
    assert values >= 3 * len(names)
    if file == "gmm_test.kso":
        assert failures > 0  # makeQ's assert fails unless n = 3


def test_default_flags_o3_march_native() -> None:
    program = load_program(PROGRAMS / "gelu.kso")
    compiled = compile_program(program, ["rev$gelu"], extra_flags=("-Wall", "-Werror"))
    assert "-O3" in cpp_compile.compile_flags()
    for x in (-1.5, 0.0, 0.3, 2.0):
        want = Interpreter().call(program.defs["rev$gelu"], [(x, 1.25)])
        assert isclose(compiled.call("rev$gelu", [(x, 1.25)]), want)


# -- every construct ----------------------------------------------------------------------------------
CONSTRUCTS = r"""
(edef lgamma Float (Float))
(edef fwd$lgamma Float (Float Float))
(edef rev$lgamma Float (Float Float))
(edef cosh Float (Float))
(edef dotv Float ((Vec Float) (Vec Float)))
(edef mul$Mat$Vec (Vec Float) ((Vec (Vec Float)) (Vec Float)))
(edef rev$mul$Mat$Vec (Tuple (Vec (Vec Float)) (Vec Float)) ((Vec (Vec Float)) (Vec Float) (Vec Float)))
(def scalars (Tuple Float Float Float Float Float Float Float Float Float Bool Bool Bool Bool)
     ((x : Float) (y : Float))
  (tuple (max x y) (abs x) (pow (abs x) y) (tanh x) (exp x) (log (abs y)) (neg x) (div x y) (sqrt x)
         (eq x y) (lte x y) (ne x y) (gt x x)))
(def ints (Tuple Integer Integer Integer Integer Integer Integer Float Bool Bool)
     ((a : Integer) (b : Integer))
  (tuple (add a b) (sub a b) (mul a b) (div a b) (max a (neg b)) (abs (neg a)) (to_float a) (lt a b) (gte a a)))
(def lazy Float ((v : Vec Float) (i : Integer))
  (if (or (lt i 0) (gte i (size v)))
      0.0
      (if (and (gt i 0) (gt (index (sub i 1) v) 0.0)) (index i v) (neg (index i v)))))
(def closures Float ((x : Float) (n : Integer))
  (let (f (lam (z : Float) (mul z x)))
    (let (g (lam (t : Tuple Float Float) (add (get$1$2 t) (f (get$2$2 t)))))
      (add (f 2.0) (add (g x 3.0) (sumbuild n (lam (i : Integer) (f (to_float i)))))))))
(def asserts Float ((v : Vec Float)) (assert (gt (size v) 2) (index 2 v)))
(def vectors (Tuple (Vec Float) (Vec (Vec Float)) Float (Vec Float) (Tuple Float (Vec Float)) (Vec Float))
     ((v : Vec Float) (m : Vec (Vec Float)) (x : Float))
  (tuple (add (mul 2.0 v) (div v x))
         (sub m (build (size m) (lam (i : Integer) (mul x (index i m)))))
         (sum (add (constVec (size v) x) (deltaVec (size v) 1 x)))
         (sum m)
         (sumbuild (size v) (lam (i : Integer) (tuple (index i v) (deltaVec (size v) i (mul x (index i v))))))
         (sumbuild (size v) (lam (i : Integer) (if (lt i 1) (constVec (size v) 0.0) (neg (deltaVec (size v) i x)))))))
(def nested_deltas (Vec (Vec Float)) ((m : Vec (Vec Float)) (x : Float))
  (sumbuild (size m) (lam (i : Integer)
    (add (build (size m) (lam (j : Integer) (constVec (size (index j m)) 0.0)))
         (deltaVec (size m) i (mul x (index i m)))))))
(def lazy_arith (Tuple (Vec Float) (Vec Float) (Vec Float) (Vec Float) Float)
     ((n : Integer) (x : Float) (y : Float))
  (let ((z (constVec n 0.0)) (d (deltaVec n 1 x)) (e (deltaVec n 1 y)))
    (tuple (add z d) (sub d e) (mul d (constVec n y)) (div (mul y d) x) (index 0 (mul -1.0 d)))))
(def const_rows (Tuple (Vec Float) (Vec Float) (Vec Float) (Vec Float) (Vec Float) (Vec Float) (Vec Float))
     ((v : Vec Float) (x : Float))
  (let ((c (constVec (size v) x)) (d (deltaVec (size v) 1 x)) (far (deltaVec (size v) 7 x))
        (w (build (size v) (lam (i : Integer) (index i v)))))
    (tuple (add v c) (sub c v) (div v c) (add c d) (mul d v) (sub far v) (add w (build 2 (lam (i : Integer) (index i w)))))))
(def pairs (Vec Float) ((v : Vec Float) (n : Integer))
  (build n (lam (i : Integer)
    (let ((a (index (mul i 2) v)) (b (index (add (mul 2 i) 1) v)) (c (index (add 3 (mul i 3)) v)))
      (if (ne b b) b (max a (add b c)))))))
(def empty_sums (Tuple Float (Tuple) Integer) ((n : Integer))
  (sumbuild n (lam (i : Integer) (tuple (to_float i) (tuple) (mul i i)))))
(def empty_vector_sum (Vec Float) ((n : Integer) (v : Vec Float))
  (sumbuild n (lam (i : Integer) v)))
(def sized Float ((a : Vec n Float) (b : Vec n Float))
  (sumbuild n (lam (i : Integer) (mul (index i a) (index i b)))))
(def sized_nested Integer ((m : Vec r (Vec c Float))) (mul r c))
(def natives (Tuple Float Float Float Float Float (Vec Float) (Tuple (Vec (Vec Float)) (Vec Float)) Float)
     ((x : Float) (v : Vec Float) (m : Vec (Vec Float)))
  (tuple (lgamma x) (fwd$lgamma x 2.0) (rev$lgamma x 3.0) (cosh x) (dotv v v)
         (mul$Mat$Vec m v) (rev$mul$Mat$Vec m v v) ($ranhashdoub 12345)))
(def prelude (Tuple Float Integer (Vec Float) Bool Bool)
     ((x : Float) (i : Integer) (v : Vec Float))
  (tuple (add$ff (mul$ff x x) (div$ff x 3.0)) (add$ii (mul$ii i 2) (div$ii i 2)) (add$vfvf v v)
         (gt$ff x 0.0) (eq$ii i 2)))
(def bools (Tuple Bool Bool Bool) ((p : Bool) (q : Bool)) (tuple (eq p q) (ne p q) (and p (or q p))))
(def delta_out_of_range (Vec Float) ((x : Float)) (deltaVec 3 7 x))
(def negative_size (Vec Float) ((n : Integer)) (build (sub 0 n) (lam (i : Integer) 1.0)))
(def tuple_math (Tuple Float (Vec Float)) ((t : Tuple Float (Vec Float)) (x : Float))
  (add (mul t x) (sub (neg t) (div t 2.0))))
(def int_vectors (Vec Integer) ((v : Vec Integer) (k : Integer)) (div (mul k v) (add v 1)))
(def shadowing Float ((x : Float))
  (let (x (mul x 2.0))
    (let (y (let (x (add x 1.0)) (mul x x)))
      (add (sumbuild 3 (lam (x : Integer) (to_float x))) (add x y)))))
(def dead_let Float ((v : Vec Float)) (let (unused (index 5 v)) 1.0))
(def vectors_first (Vec Float) ((v : Vec Float)) (get$1$6 (vectors v (build (size v) (lam (i : Integer) v)) 1.5)))
(def calls (Vec Float) ((v : Vec Float)) (add$vfvf (vectors_first v) v))
(def twice (Vec Float) ((f : Lam (Vec Float) (Vec Float)) (v : Vec Float)) (f (f v)))
(def higher_order (Tuple (Vec Float) Float) ((v : Vec Float) (x : Float))
  (let ((g (lam (u : Vec Float) (mul x (add u v))))
        (pick (if (gt x 0.0) (lam (y : Float) (neg y)) (lam (y : Float) (mul y y))))
        (pair (tuple g pick)))
    (let (h (get$2$2 pair)) (tuple (twice (get$1$2 pair) v) (h x)))))
"""


def constructs_calls(program: Program, rng: random.Random) -> list[tuple[str, list[object]]]:
    callable_from_python = [d.name for d in program.defs.values() if all(serializable(p.type) for p in d.params)]
    calls = file_calls(program, callable_from_python, 2, rng)
    special = [
        ("scalars", [0.0, -0.0]),
        ("scalars", [-0.0, 0.0]),
        ("scalars", [math.inf, -1.0]),
        ("scalars", [math.nan, 2.0]),
        ("scalars", [-3.0, 0.5]),
        ("ints", [7, -2]),
        ("ints", [-7, 2]),
        ("ints", [1, 0]),  # division by zero
        ("ints", [2**62, 2]),  # overflow
        ("ints", [-(2**63), -1]),  # overflow
        ("ints", [-(2**63), 1]),  # abs overflows
        ("lazy", [[1.0, 2.0], 5]),
        ("lazy", [[1.0, 2.0], -1]),
        ("lazy", [[1.0, -2.0, 3.0], 2]),
        ("asserts", [[1.0, 2.0]]),
        ("empty_sums", [0]),
        ("empty_vector_sum", [0, [1.0]]),
        ("empty_vector_sum", [2, [1.0, -0.0]]),
        ("sized", [[1.0, 2.0], [3.0]]),
        ("sized_nested", [[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]]),
        ("sized_nested", [[[1.0, 2.0], [3.0]]]),
        ("sized_nested", [[]]),
        ("negative_size", [2]),
        ("lazy_arith", [0, 1.0, 2.0]),
        ("const_rows", [[1.0, -0.0, 3.0, 0.5, -2.0], -0.0]),
        ("const_rows", [[0.0, 2.0, -0.0], 0.0]),
        ("const_rows", [[], 1.0]),
        ("const_rows", [[3.0, -0.0], 2.5]),
        ("pairs", [[1.0, -2.0, math.nan, 4.0, 0.5, -0.0, 7.0, 2.0, 3.0, -1.0], 3]),
        ("pairs", [[1.0, -2.0, 3.0, 4.0, 0.5, -0.0, 7.0, 2.0, 3.0], 3]),
        ("pairs", [[1.0], 0]),
        ("lazy_arith", [3, -0.0, 0.0]),
        ("lazy_arith", [3, math.inf, -1.0]),
        ("vectors", [[-0.0, 0.0], [[-0.0, 1.0], [2.0, -0.0]], -0.0]),
        ("vectors", [[1.0, 2.0], [[1.0], [2.0, 3.0]], 1.0]),  # ragged
        ("dead_let", [[1.0, 2.0]]),
        ("natives", [-2.5, [1.0, 2.0, 0.5], [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0], [5.0, 6.0, 7.0]]]),
        ("natives", [0.0, [1.0], [[1.0]]]),
        ("natives", [-3.0, [], []]),
        ("int_vectors", [[1, -1, 3], 4]),
        ("int_vectors", [[2**62, 1], 4]),
        ("higher_order", [[1.0, -2.0], -1.5]),
    ]
    return calls + [(name, list(args)) for name, args in special]


def test_every_construct_matches_interpreter() -> None:
    program = parse_program(CONSTRUCTS, "constructs.ks")
    compiled = compile_program(program, extra_flags=TEST_FLAGS)
    values, failures = compare(program, compiled, constructs_calls(program, random.Random(1)))
    assert values > 100 and failures > 10


def test_errors_are_reported_as_ks_eval_errors() -> None:
    program = parse_program(CONSTRUCTS, "constructs.ks")
    assert "ks::check_strided" in emit_def(program.defs["pairs"])  # reads at 2 i, 2 i + 1, 3 i + 3: checked once
    with pytest.raises(KsEvalError, match="index 9 is out of range for a vector of size 9"):
        run_def(program, "pairs", [[1.0] * 9, 3], extra_flags=TEST_FLAGS)
    with pytest.raises(KsEvalError, match="index 3 is out of range for a vector of size 3"):
        run_def(program, "pairs", [[1.0] * 3, 1], extra_flags=TEST_FLAGS)
    with pytest.raises(KsEvalError, match="index 5 is out of range for a vector of size 2"):
        run_def(program, "dead_let", [[1.0, 2.0]], extra_flags=TEST_FLAGS)
    with pytest.raises(KsEvalError, match="assertion failed"):
        run_def(program, "asserts", [[1.0, 2.0]], extra_flags=TEST_FLAGS)
    with pytest.raises(KsEvalError, match="Integer division by zero"):
        run_def(program, "ints", [1, 0], extra_flags=TEST_FLAGS)
    with pytest.raises(KsEvalError, match="overflow"):
        run_def(program, "ints", [2**62, 2], extra_flags=TEST_FLAGS)
    with pytest.raises(KsEvalError, match="negative size"):
        run_def(program, "negative_size", [1], extra_flags=TEST_FLAGS)
    with pytest.raises(KsEvalError, match="no defined size"):
        run_def(program, "empty_vector_sum", [0, [1.0]], extra_flags=TEST_FLAGS)
    with pytest.raises(KsUsageError, match="takes 2 argument"):
        run_def(program, "ints", [1], extra_flags=TEST_FLAGS)
    with pytest.raises(KsUsageError, match="must be a Float"):
        run_def(program, "scalars", ["1", 2.0], extra_flags=TEST_FLAGS)


def test_generated_expressions_match_interpreter() -> None:
    """Random well-typed defs from the rule tests' generator, 150 in one translation unit."""
    from exprgen import PRELUDE_DEFS, sample

    texts = [
        sample(seed, 4).text[len(PRELUDE_DEFS) :].replace("(def target ", f"(def target_{seed} ", 1)
        for seed in range(150)
    ]
    program = parse_program(PRELUDE_DEFS + "\n".join(texts), "generated.ks")
    compiled = compile_program(program, extra_flags=TEST_FLAGS)
    rng = random.Random(7)
    calls: list[tuple[str, list[object]]] = []
    for seed in range(150):
        for x, y in ((rng.uniform(-2, 2), rng.uniform(-2, 2)), (0.0, -0.0), (1.0, 3.0)):
            calls.append((f"target_{seed}", [x, y]))
    values, _ = compare(program, compiled, calls)
    assert values > 300


# -- loops: hoisting, range checks, row-wise sums (cpp_backend.emit, "Loops") ---------------------------
LOOPS = r"""
(def mm (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)))
  (build (size a) (lam (i : Integer)
    (build (size (index 0 b)) (lam (k : Integer)
      (sumbuild (size b) (lam (j : Integer) (mul (index j (index i a)) (index k (index j b))))))))))
(def mm_sized (Vec (Vec Float)) ((n : Integer) (m : Integer) (a : Vec (Vec Float)) (b : Vec (Vec Float)))
  (build (size a) (lam (i : Integer)
    (build n (lam (k : Integer)
      (sumbuild m (lam (j : Integer) (mul (index j (index i a)) (index k (index j b))))))))))
(def mm_lazy (Tuple (Vec (Vec Float)) (Vec (Vec Float))) ((a : Vec (Vec Float)) (r : Vec Float) (x : Float))
  (tuple (mm a (constVec (size a) r))
         (mm a (build (size a) (lam (j : Integer)
                 (if (eq j 1) (deltaVec (size r) 0 x) (constVec (size r) x)))))))
(def mv (Vec Float) ((m : Vec (Vec Float)) (v : Vec Float))
  (build (size m) (lam (i : Integer) (sumbuild (size v) (lam (j : Integer) (mul (index j (index i m)) (index j v)))))))
(def triangle (Vec Float) ((v : Vec Float))
  (build (size v) (lam (k : Integer) (sumbuild k (lam (j : Integer) (mul (index j v) (index k v)))))))
(def k_invariant (Vec Float) ((v : Vec Float) (n : Integer))
  (build n (lam (k : Integer) (sumbuild (size v) (lam (j : Integer) (mul (index j v) (index j v)))))))
(def guarded (Vec Float) ((v : Vec Float) (n : Integer))
  (build n (lam (i : Integer) (if (lt (size v) 3) 0.0 (add (index 2 v) (index i v))))))
(def empty_loops (Tuple (Vec Float) Float) ((v : Vec Float) (n : Integer))
  (tuple (build n (lam (i : Integer) (index 5 v)))
         (sumbuild n (lam (i : Integer) (mul (index 5 v) (index i v))))))
(def shadows (Vec Float) ((v : Vec Float) (w : Vec Float))
  (build (size v) (lam (i : Integer)
    (add (add (index i v) (sum v))
         (let (v w) (add (index i v) (sum v)))))))
(def loop_var_shadowed (Vec Float) ((v : Vec Float) (n : Integer))
  (build n (lam (i : Integer) (let (i (div i 2)) (index i v)))))
(def reuse (Vec Float) ((v : Vec Float) (x : Float))
  (build (size v) (lam (i : Integer) (add (sum v) (if (gt x 0.0) (sum v) (index i v))))))
(def gemm_fused (Vec (Vec Float)) ((x : Float) (a : Vec (Vec Float)) (b : Vec (Vec Float)) (y : Float)
                                   (c : Vec (Vec Float)))
  (let (n (size (index 0 b)))
    (build (size a) (lam (i : Integer)
      (build n (lam (k : Integer)
        (add (mul x (sumbuild (size b) (lam (j : Integer) (mul (index j (index i a)) (index k (index j b))))))
             (mul y (index k (index i c))))))))))
(def sum_in_a_branch (Vec Float) ((m : Vec (Vec Float)) (v : Vec Float) (x : Float))
  (build (size v) (lam (k : Integer)
    (if (gt x 0.0) (sumbuild (size m) (lam (j : Integer) (mul (index j v) (index k (index j m))))) x))))
(def sum_of_a_let (Vec Float) ((m : Vec (Vec Float)) (v : Vec Float))
  (build (size v) (lam (k : Integer)
    (let (w (index k v)) (add w (sumbuild (size m) (lam (j : Integer) (mul w (index k (index j m))))))))))
"""


def test_loops_match_interpreter() -> None:
    program = parse_program(LOOPS, "loops.ks")
    compiled = compile_program(program, extra_flags=TEST_FLAGS)
    sq = [[1.0, 2.0], [3.0, 4.0]]
    calls: list[tuple[str, list[object]]] = [
        ("mm", [sq, [[1.5, -2.0], [0.5, 4.0]]]),
        ("mm", [[[1.0, 2.0, 3.0]], [[1.0], [2.0], [3.0]]]),
        ("mm", [sq, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]),  # wider rows of b
        ("mm", [sq, [[1.0, 2.0], [3.0]]]),  # a short row of b: out of range
        ("mm", [[[1.0]], sq]),  # a short row of a: out of range
        ("mm", [[], sq]),
        ("mm", [sq, []]),  # (index 0 b) fails
        ("mm_sized", [0, 5, sq, []]),  # no k: nothing is read
        ("mm_sized", [2, 0, [[], []], []]),  # no j: zeros
        ("mm_sized", [3, 2, sq, sq]),  # k out of range
        ("mm_sized", [2, 3, sq, sq]),  # j out of range
        ("mm_sized", [2, 2, [[1.0, -0.0]], [[-0.0, 0.0], [-0.0, -0.0]]]),
        ("mm_lazy", [sq, [1.0, -2.0], 3.0]),
        ("mm_lazy", [[[1.0, 2.0, 3.0]] * 3, [0.5], -1.0]),
        ("mv", [sq, [1.0, 2.0]]),
        ("mv", [sq, [1.0, 2.0, 3.0]]),
        ("triangle", [[1.0, 2.0, -3.0]]),
        ("k_invariant", [[1.0, 2.0], 3]),
        ("k_invariant", [[], 2]),
        ("guarded", [[1.0, 2.0], 4]),  # the branch that reads index 2 never runs
        ("guarded", [[1.0, 2.0, 3.0], 3]),
        ("guarded", [[1.0, 2.0, 3.0], 4]),
        ("empty_loops", [[1.0], 0]),  # index 5 is never read
        ("empty_loops", [[1.0, 2.0], 1]),
        ("shadows", [[1.0, 2.0], [3.0, 4.0]]),
        ("shadows", [[1.0, 2.0], [3.0]]),
        ("shadows", [[1.0], [3.0, 4.0]]),
        ("loop_var_shadowed", [[1.0, 2.0], 3]),  # reads 0, 0, 1: not every i
        ("loop_var_shadowed", [[1.0], 3]),
        ("loop_var_shadowed", [[1.0, 2.0, 3.0], 0]),
        ("reuse", [[1.0, 2.0], 1.0]),
        ("reuse", [[1.0, 2.0], -1.0]),
        ("gemm_fused", [2.0, sq, [[1.5, -2.0, 1.0], [0.5, 4.0, -3.0]], -1.0, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]),
        ("gemm_fused", [2.0, sq, sq, -1.0, [[1.0, 2.0], [3.0]]]),  # a short row of c: out of range
        ("gemm_fused", [2.0, sq, [[1.0, 2.0], [3.0]], -1.0, sq]),  # a short row of b: out of range
        ("gemm_fused", [2.0, [], sq, -1.0, []]),
        ("sum_in_a_branch", [sq, [1.0, 2.0], 1.0]),
        ("sum_in_a_branch", [[[1.0]], [1.0, 2.0], -1.0]),  # the sum that would fail never runs
        ("sum_of_a_let", [sq, [1.0, 2.0]]),
    ]
    values, failures = compare(program, compiled, calls)
    assert values == 27 and failures == 12


def test_row_wise_sums_add_in_the_order_of_the_program() -> None:
    """The GEMM of blas_test.kso runs with j outside k, and each element is still ((0 + t0) + t1) + ...
    to the bit, as in the interpreter (knossos.arith.fsum_in_order; not math.fsum's rounded exact sum)."""
    program = parse_program(LOOPS, "loops.ks")
    source = emit_program(program, ["mm"], include_runtime=False)
    assert "ks::check_range(" in source and re.search(r"\.data\[v[0-9]+_k\] \+= ", source)
    rng = random.Random(3)
    n = 5
    a = [[rng.choice([1e16, 1.0, -1e16, 0.5, 3.0]) for _ in range(n)] for _ in range(n)]
    b = [[rng.choice([1.0, -1.0, 1e-3, 7.0]) for _ in range(n)] for _ in range(n)]
    want = []
    for i in range(n):
        row = []
        for k in range(n):
            acc = 0.0
            for j in range(n):
                acc += a[i][j] * b[j][k]
            row.append(acc)
        want.append(row)
    assert run_def(program, "mm", [a, b], extra_flags=TEST_FLAGS, exact_order=True) == want
    assert Interpreter().call(program.defs["mm"], [a, b]) == want
    gemm = emit_program(load_program(PROGRAMS / "blas_test.kso"), ["gemm"], include_runtime=False)
    multiply = gemm.split("ks_matrix_matrix_multiply(const", 2)[2].split("\n}\n", 1)[0]
    innermost = multiply.rsplit("for (", 1)[1]  # reads rows, with no check per element
    assert "+= " in innermost and "ks::index" not in innermost


def test_a_sum_inside_each_element_is_computed_row_wise_first() -> None:
    """Fused GEMM: the element is alpha * (sum over j) + beta * c[i][k]; the sums of a row go first,
    j outside k, and the element loop reads them.  Not where the sum may not run (an if branch) or
    depends on a let of the element."""
    program = parse_program(LOOPS, "loops.ks")

    def innermost_sum_loop(name: str) -> str:
        source = emit_program(program, [name], include_runtime=False)
        body = source.split(f"ks_{name}(", 2)[2].split("\n}\n", 1)[0]
        body = body.split("compute their own sums", 1)[-1]  # the row-wise code (after a blocked loop nest)
        return body.split("+= ", 1)[0].rsplit("for (", 1)[1]

    assert "_k = 0;" in innermost_sum_loop("gemm_fused")  # k inside j: reads rows of b
    assert "_j = 0;" in innermost_sum_loop("sum_in_a_branch")
    assert "_j = 0;" in innermost_sum_loop("sum_of_a_let")
    rng = random.Random(5)
    a = [[rng.choice([1e16, 1.0, -1e16, 0.5]) for _ in range(4)] for _ in range(3)]
    b = [[rng.choice([1.0, -1.0, 1e-3, 7.0]) for _ in range(5)] for _ in range(4)]
    c = [[rng.random() for _ in range(5)] for _ in range(3)]
    want = [
        [2.0 * sum_in_order(a[i][j] * b[j][k] for j in range(4)) - 0.5 * c[i][k] for k in range(5)] for i in range(3)
    ]
    assert run_def(program, "gemm_fused", [2.0, a, b, -0.5, c], extra_flags=TEST_FLAGS, exact_order=True) == want


def sum_in_order(terms: Iterable[float]) -> float:
    acc = 0.0
    for t in terms:
        acc += t
    return acc


def test_adding_zeros_keeps_signs_of_zeros() -> None:
    """A sum equal to its left operand to the bit is that operand (no copy), and only then."""
    text = """(def zeros (Tuple (Vec (Vec Float)) (Vec (Vec Float)) (Vec (Vec Float)) (Vec (Vec Float))
                          (Vec (Vec Float)) (Vec (Vec Float)))
                   ((m : Vec (Vec Float)) (x : Float))
      (let ((z (build (size m) (lam (i : Integer) (constVec (size (index i m)) 0.0))))
            (c (constVec (size m) (constVec 2 x))))
        (tuple (add m z) (add z m) (add c (constVec (size m) (constVec 2 0.0)))
               (add z (deltaVec (size m) 1 (index 0 m))) (add z z) (add c c))))"""
    program = parse_program(text, "zeros.ks")
    m = [[-0.0, 1.0], [2.0, -0.0]]
    got = run_def(program, "zeros", [m, -0.0], extra_flags=TEST_FLAGS, exact_order=True)
    assert got == Interpreter().call(program.defs["zeros"], [m, -0.0])
    signs = [[math.copysign(1.0, x) for row in part for x in row] for part in got]
    assert signs == [[1.0] * 4] * 5 + [[-1.0] * 4]


# -- names --------------------------------------------------------------------------------------------
TRICKY = [
    "int",
    "return",
    "main",
    "new",
    "class",
    "ks",
    "std",
    "t1",
    "p0_x",
    "ks_int",
    "a'b",
    'q"q',
    "back\\slash",
    "semi;colon",
    "rev$f",
    "x y",
    "é",
    "_",
    "__",
    "Z",
    "Z5fZ",
    "(paren)",
    "a.b",
    "-",
    "double",
    "while",
    "for",
    "const",
    "operator",
    "#define",
    "*/",
    "//",
    "\\n",
    "define",
    "NULL",
    "errno",
]


def _tricky_program() -> tuple[str, list[str]]:
    defs = []
    names = []
    for k, name in enumerate(TRICKY):
        param = TRICKY[(k + 1) % len(TRICKY)]
        other = TRICKY[(k + 2) % len(TRICKY)]
        call = f"({quote_name(TRICKY[k - 1])} {quote_name(param)} {quote_name(other)})" if k else quote_name(param)
        body = f"(let ({quote_name(other)} (add {quote_name(param)} {quote_name(other)})) (mul {call} {quote_name(other)}))"
        defs.append(
            f"(def {quote_name(name)} Float (({quote_name(param)} : Float) ({quote_name(other)} : Float)) {body})"
        )
        names.append(name)
    return "\n".join(defs), names


#: Every identifier the emitter writes that is not a mangled name of the input.
_VOCABULARY = frozenset(
    [
        "const",
        "double",
        "std",
        "int64_t",
        "LL",
        "tuple",
        "get",
        "ks",
        "Vec",
        "bool",
        "return",
        "if",
        "else",
        "for",
        "add",
        "mul",
        "sub",
        "div",
        "add_i",
        "fail",
        "check_size",
        "make_vec",
        "data",
        "index",
        "size",
        "void",
    ]
)
_MANGLED = re.compile(r"^(ks|p[0-9]+|v[0-9]+|z[0-9]+)_[A-Za-z0-9_]*$|^[tmsfke][0-9]+$|^k[0-9]+_[0-9]+$")


def test_tricky_names_compile_to_safe_cpp() -> None:
    text, names = _tricky_program()
    program = parse_program(text, "names.ks")
    assert list(program.defs) == names
    source = emit_program(program)
    generated = source.split("// ---- end of runtime.h ----", 1)[1]
    literals = re.findall(r'"(?:[^"\\]|\\.)*"', generated)
    assert set(literals) <= {'"build"', '"sumbuild"', '"assertion failed"'}
    code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', generated)
    code = re.sub(r"\b0x[0-9a-f.]+p[+-][0-9]+|\b[0-9]+(LL)?\b", "0", code)
    assert code.isascii() and not re.search(r"['\\$#]|/\*|//", code)
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code):
        assert word in _VOCABULARY or _MANGLED.match(word), word
    compiled = compile_program(program, extra_flags=TEST_FLAGS)
    calls = [(name, [1.5, -0.25 * k]) for k, name in enumerate(names)]
    values, failures = compare(program, compiled, calls)
    assert values == len(names) and failures == 0


@pytest.mark.parametrize("name", TRICKY)
def test_escape_is_an_identifier_that_reads_back(name: str) -> None:
    escaped = escape_name(name)
    assert re.fullmatch(r"[A-Za-z0-9_]*", escaped) and "__" not in "ks_" + escaped
    assert unescape_name(escaped) == name
    assert def_symbol(name) == "ks_" + escaped


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=6), min_size=2, max_size=8, unique=True))
def test_escape_is_injective(names: list[str]) -> None:
    escaped = [escape_name(n) for n in names]
    assert len(set(escaped)) == len(names)
    for n, e in zip(names, escaped, strict=True):
        assert unescape_name(e) == n and "__" not in "v1_" + e


def test_escape_is_injective_on_confusable_names() -> None:
    names = ["_", "__", "Z", "Z5fZ", "Z5f", "5f", "a_", "a__", "a_Z5fZ", "x", "x78_", "Z24Z", "$", "é", "Ze9Z"]
    assert len({escape_name(n) for n in names}) == len(names)


# -- compilation --------------------------------------------------------------------------------------
def test_compile_error_is_one_line_naming_the_log(tmp_path: Path) -> None:
    with pytest.raises(KsCompileError) as info:
        compile_cpp("int main() { return undefined_thing; }\n")
    message = str(info.value)
    assert "\n" not in message and "compilation failed" in message
    log = Path(re.findall(r"(/\S+compile\.log)", message)[0])
    assert "undefined_thing" in log.read_text()


def test_missing_compiler_is_one_line_naming_the_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KNOSSOS_CXX", str(tmp_path / "no-such-g++"))
    with pytest.raises(KsCompileError) as info:
        compile_cpp("int main() { return 0; }\n")
    message = str(info.value)
    assert "\n" not in message and "not found" in message
    assert Path(re.findall(r"(/\S+compile\.log)", message)[0]).exists()


def test_cache_returns_the_same_executable_without_compiling() -> None:
    source = '#include <cstdio>\nint main() { std::puts("cached"); return 0; }\n'
    first = compile_cpp(source, ("-O1",))
    count, mtime = cpp_compile.stats.compilations, first.stat().st_mtime_ns
    second = compile_cpp(source, ("-O1",))
    assert second == first and cpp_compile.stats.compilations == count and second.stat().st_mtime_ns == mtime
    assert subprocess.run([str(second)], capture_output=True, text=True, check=True).stdout == "cached\n"
    third = compile_cpp(source, ("-O0",))  # other flags: another compilation
    assert third != first and cpp_compile.stats.compilations == count + 1


# -- depth and laziness ---------------------------------------------------------------------------------
def test_deep_let_chain() -> None:
    depth = 3000
    text = "(def deep Float ((x : Float)) " + "".join(f"(let (v{k} (add x {k}.0)) " for k in range(depth))
    text += "(add v0 v2999)" + ")" * depth + ")"
    program = parse_program(text, "deep.ks")
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # emission must not recurse on depth
    try:
        compiled = compile_program(program, extra_flags=("-O0",))
    finally:
        sys.setrecursionlimit(old)
    assert compiled.call("deep", [1.0]) == 3001.0


def test_reverse_mode_sumbuild_of_deltas_is_linear() -> None:
    """(sumbuild n (lam i (add zeros (deltaVec n i ...)))) costs O(n), not O(n^2): zero vectors are lazy."""
    text = """(def grad (Vec Float) ((v : Vec Float))
      (sumbuild (size v) (lam (i : Integer)
        (add (build (size v) (lam (j : Integer) 0.0)) (deltaVec (size v) i (mul 2.0 (index i v)))))))"""
    program = parse_program(text, "grad.ks")
    compiled = compile_program(program, extra_flags=TEST_FLAGS)
    n = 200_000  # dense zero vectors would be 4e10 element operations
    start = time.perf_counter()
    result = compiled.call("grad", [[float(k) for k in range(n)]])
    assert time.perf_counter() - start < 10.0
    assert result[:3] == [0.0, 2.0, 4.0] and result[-1] == 2.0 * (n - 1)


def test_timing_request() -> None:
    program, compiled = compiled_file("gelu.kso")
    timing = compiled.time("gelu", [0.5], min_seconds=0.01)
    assert timing.runs >= 1 and 0 <= timing.min_s <= timing.median_s
    assert isclose(timing.value, Interpreter().call(program.defs["gelu"], [0.5]))


# -- the command line ------------------------------------------------------------------------------
def test_cli_emits_cpp(tmp_path: Path) -> None:
    from knossos.cli import main

    out = tmp_path / "gemm.cpp"
    src = str(PROGRAMS / "blas_test.kso")
    assert main(["cpp", src, "--def", "gemm", "-o", str(out)]) == 0
    text = out.read_text()
    assert "ks_gemm(" in text and "ks_matrix_matrix_multiply(" in text and "ks_dot(" not in text
    assert main(["cpp", src, "--def", "gemm", "-o", str(out)]) == 1  # an existing output needs --force
    assert main(["cpp", src, "--def", "gemm", "-o", str(out), "--force"]) == 0
    exe = compile_cpp(text + "int main() { return 0; }\n", TEST_FLAGS)
    assert exe.exists()


def test_cli_refuses_to_overwrite_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from knossos.cli import main

    src = tmp_path / "p.ks"
    src.write_text("(def f Float ((x : Float)) x)\n")
    assert main(["cpp", str(src), "-o", str(src)]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err
    assert src.read_text() == "(def f Float ((x : Float)) x)\n"


def test_cli_reports_unsupported_edefs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from knossos.cli import main

    src = tmp_path / "p.ks"
    src.write_text("(edef mystery Float (Float))\n(def f Float ((x : Float)) (mystery x))\n")
    assert main(["cpp", str(src)]) == 1
    err = capsys.readouterr().err
    assert "no implementation of edef 'mystery'" in err and err.count("\n") == 1


def test_blocked_matrix_products_match_the_row_wise_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Matrices large enough for the register-blocked loop nest (emit_rows.RowProducts._block_rows: rows 8 at a time,
    16 columns, 256-row panels, a last short tile and rows left to the row-wise code): to the bit the
    interpreter's values under exact order, within the tolerance otherwise; an error, a short row or a
    lazy vector falls back to the row-wise code, with the same errors in the same order."""
    from cpp_backend import emit
    from cpp_backend.bench import values_agree

    program = parse_program(LOOPS, "loops.ks")
    rng = random.Random(11)

    def matrix(rows: int, cols: int) -> list[list[float]]:
        return [[rng.choice([1e16, 1.0, -1e16, 0.5, 3.0, -7.25]) for _ in range(cols)] for _ in range(rows)]

    a, b, c = matrix(19, 13), matrix(13, 37), matrix(19, 37)
    tall = matrix(300, 3)
    short_b = [row[:] for row in b]
    short_b[6] = short_b[6][:20]
    short_a, short_c = [row[:] for row in a], [row[:] for row in c]
    short_a[2], short_c[1] = short_a[2][:5], short_c[1][:4]  # row 1 fails first, on c
    calls: list[tuple[str, list[object]]] = [
        ("mm", [a, b]),
        ("mm", [tall, matrix(3, 17)]),  # two panels, the second of 44 rows
        ("mm", [a, short_b]),
        ("mm", [short_a, b]),
        ("gemm_fused", [2.0, a, b, -0.5, c]),
        ("gemm_fused", [2.0, short_a, b, -0.5, short_c]),
        ("gemm_fused", [2.0, a, short_b, -0.5, c]),
        ("mm_lazy", [matrix(9, 9), [1.0] * 20, 3.0]),  # lazy rows of b: the row-wise code
        ("mm_sized", [40, 13, a, b]),  # k out of range, in the last columns
        ("mm_sized", [37, 14, a, b]),  # j out of range
    ]
    interpreter = Interpreter(max_steps=10**8)
    want: list[object] = []
    for name, args in calls:
        try:
            want.append(interpreter.call(program.defs[name], args))
        except KsError as err:
            want.append(err)
    assert "ks::Fallback" in emit_program(program, ["mm"], include_runtime=False)
    blocked = compile_program(program, extra_flags=TEST_FLAGS, exact_order=True).run(calls)
    fast = compile_program(program, extra_flags=TEST_FLAGS).run(calls)
    monkeypatch.setattr(emit.FunctionEmitter, "_blockable", lambda self, node: None)  # the row-wise code
    row_wise = compile_program(program, extra_flags=TEST_FLAGS, exact_order=True).run(calls)
    failures = 0
    for (name, _), w, have, quick, rows in zip(calls, want, blocked, fast, row_wise, strict=True):
        if isinstance(w, KsError):
            assert isinstance(have, KsError) and isinstance(quick, KsError), (name, have, quick)
            assert str(have) == str(rows) == str(quick), name
            failures += 1
        else:
            assert have == w == rows, name  # to the bit
            assert values_agree(w, quick), name
    assert failures == 6
