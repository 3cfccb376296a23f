"""A sumbuild whose body has loops adds them straight into its accumulator in the C++ (no value of
an iteration made first): the same values as the interpreter, the same errors (issue 45)."""

from __future__ import annotations

import random

import pytest

from cpp_backend.bench import same_bits, values_agree
from cpp_backend.cpp_text import float_literal
from cpp_backend.driver import compile_program, run_def
from cpp_backend.emit import emit_program
from knossos.errors import KsEvalError
from knossos.interpreter import Interpreter
from knossos.parser import parse_program
from knossos.values import isclose

SOURCE = """
(def nested (Tuple (Vec (Vec Float)) (Vec Float)) ((v : Vec Float) (n : Integer))
  (sumbuild n (lam (i : Integer)
    (let ((a (build (size v) (lam (j : Integer)
               (build 3 (lam (k : Integer) (mul (to_float (add i k)) (index j v)))))))
          (b (sumbuild (size v) (lam (j : Integer) (deltaVec (size v) (sub (add i j) 1) (index j v))))))
      (tuple a b)))))
(def windows (Vec Float) ((w : Vec Float) (x : Vec Float))
  (sumbuild (add (sub (size x) (size w)) 1) (lam (t : Integer)
    (sumbuild (size w) (lam (j : Integer) (deltaVec (size x) (add t j) (mul (index j w) (index (add t j) x))))))))
(def grows (Vec Float) ((n : Integer))
  (sumbuild n (lam (i : Integer) (build (add i 1) (lam (j : Integer) 1.0)))))
(def empty_sum (Vec Float) ((n : Integer))
  (sumbuild n (lam (i : Integer) (sumbuild (sub 1 i) (lam (j : Integer) (constVec 2 1.0))))))
"""

CASES = [
    ("nested", [[1.5, -2.0, 0.25, 3.0], 4]),
    ("windows", [[1.0, 2.0, -1.0], [0.5, 1.5, 2.5, -3.0, 4.0, 1.0]]),
]


def _body(text: str) -> str:
    return text.split("// ---- end of runtime.h ----", 1)[1]


def test_the_direct_accumulation_is_emitted() -> None:
    """Not in exact order: the deltaVecs are added at their index, made only as the first value."""
    text = _body(emit_program(parse_program(SOURCE), ["windows"]))
    assert "ks::add_inplace" not in text
    assert text.count("ks::delta_vec") == text.count("ks::copy_dense(ks::delta_vec") > 0
    exact = _body(emit_program(parse_program(SOURCE), ["windows"], exact_order=True))
    assert "ks::add_inplace" in exact  # in exact order, each iteration's value is made, then added


def _nest(depth: int) -> str:
    index = "j"
    for d in range(depth):
        index = f"(add i{d} {index})"
    body = f"(build n (lam (j : Integer) (mul 7.5 (to_float {index}))))"
    for d in range(depth):
        body = f"(sumbuild n (lam (i{d} : Integer) {body}))"
    return f"(def nest (Vec Float) ((n : Integer)) {body})"


@pytest.mark.parametrize("exact", [False, True])
def test_each_sum_body_is_written_once(exact: bool) -> None:
    """Nested sums of loops: the C++ grows with the depth, not twice per level (compile time)."""
    for depth in (1, 4):
        text = _body(emit_program(parse_program(_nest(depth)), ["nest"], exact_order=exact))
        assert "KS_EXACT_ORDER" not in text
        assert text.count(float_literal(7.5)) == 1, (depth, text)


# Sums of vectors of loops, of 0, 1 or more terms, with -0.0 and NaN in the terms: the first iteration
# assigns (a vector sum starts at its first term: -0.0 stays -0.0), an inner Float sum starts at +0.0.
EDGES = """
(def edges (Tuple (Vec Float) (Vec Float) (Vec (Vec Float))) ((v : Vec Float) (n : Integer) (m : Integer))
  (sumbuild n (lam (i : Integer)
    (tuple
      (build (size v) (lam (j : Integer)
        (sumbuild m (lam (k : Integer) (mul (index j v) (to_float (sub k i)))))))
      (sumbuild m (lam (k : Integer)
        (build (size v) (lam (j : Integer) (mul (index j v) (to_float (add k i)))))))
      (build 2 (lam (a : Integer)
        (sumbuild m (lam (k : Integer) (deltaVec (size v) (add a k) (mul (index k v) (to_float i)))))))))))
(def fails (Vec Float) ((v : Vec Float) (n : Integer) (c : Integer))
  (sumbuild n (lam (i : Integer)
    (build (size v) (lam (j : Integer) (index (add j (add c i)) v))))))
"""
EDGE_V = [-0.0, 1.0, float("nan"), 0.0, -2.0]


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize(("n", "m"), [(1, 1), (1, 3), (3, 1), (3, 3)])
def test_first_terms_agree_to_the_bit(n: int, m: int, exact: bool) -> None:
    """The terms are small integers, -0.0 and NaN, so that the first iteration (all there is when
    ``n`` is 1) gives the interpreter's bits in any order of addition, signs of zeros included; so does
    exact order.  Later iterations not in exact order: equal values (their zeros skipped in a part
    normalise the whole accumulator, signs of zeros aside)."""
    program = parse_program(EDGES)
    want = Interpreter().call(program.defs["edges"], [EDGE_V, n, m])
    have = run_def(program, "edges", [EDGE_V, n, m], exact_order=exact)
    assert same_bits(want, have) if exact or n == 1 else values_agree(want, have), (want, have)


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("edges", [EDGE_V, 0, 2]),
        ("edges", [EDGE_V, 1, 0]),
        ("edges", [EDGE_V, 2, 7]),
        ("fails", [[1.0, 2.0], 1, 1]),
        ("fails", [[1.0, 2.0], 2, 0]),
    ],
)
def test_errors_in_the_body_are_the_interpreters(name: str, args: list[object], exact: bool) -> None:
    """No terms, outside or inside (a vector sum of nothing has no size), an index out of range in the first iteration's
    body or in a later one's: an error, as in the interpreter."""
    program = parse_program(EDGES)
    with pytest.raises(KsEvalError):
        Interpreter().call(program.defs[name], args)
    with pytest.raises(KsEvalError):
        run_def(program, name, args, exact_order=exact)


@pytest.mark.parametrize(("name", "args"), CASES)
@pytest.mark.parametrize("exact", [False, True])
def test_values_agree_with_the_interpreter(name: str, args: list[object], exact: bool) -> None:
    program = parse_program(SOURCE)
    want = Interpreter().call(program.defs[name], args)
    have = run_def(program, name, args, exact_order=exact)
    assert isclose(want, have, 0.0 if exact else 1e-12, 0.0 if exact else 1e-12)


@pytest.mark.parametrize(("name", "args"), [("grows", [3]), ("empty_sum", [2])])
def test_errors_are_the_interpreters(name: str, args: list[object]) -> None:
    """A later iteration of another size, or an inner sum of no vectors, fails as in the interpreter."""
    program = parse_program(SOURCE)
    with pytest.raises(KsEvalError):
        Interpreter().call(program.defs[name], args)
    with pytest.raises(KsEvalError):
        run_def(program, name, args)


def test_generated_derivatives_match_the_interpreter() -> None:
    """rev$ of random defs (tests/exprgen.py), compiled in one translation unit: their sums of loops
    take the direct path; every value agrees with the interpreter's."""
    from exprgen import PRELUDE_DEFS, sample

    from autodiff import NotDifferentiable, grad_program

    texts = [
        sample(seed, 4).text[len(PRELUDE_DEFS) :].replace("(def target ", f"(def target_{seed} ", 1)
        for seed in range(60)
    ]
    program = parse_program(PRELUDE_DEFS + "\n".join(texts), "generated.ks")
    names = []
    for d in program.targets:
        if d.name.startswith("target_"):
            try:
                grad_program(program, [d.name], "rev")
                names.append(d.name)
            except NotDifferentiable:
                pass
    program = grad_program(program, names, "rev")
    compiled = compile_program(program, [f"rev${n}" for n in names])
    interp = Interpreter()
    rng = random.Random(11)
    agreed = 0
    for n in names:
        f = program.defs[n]
        args: list[object] = [rng.uniform(-2, 2), rng.uniform(-2, 2)]
        try:
            out = interp.call(f, args)
            rev_args = [*args, _like(out, rng)]
            want = interp.call(program.defs[f"rev${n}"], rev_args)
        except KsEvalError:
            continue
        have = compiled.run([(f"rev${n}", rev_args)])[0]
        assert not isinstance(have, KsEvalError), (n, have)
        assert values_agree(want, have), (n, want, have)
        agreed += 1
    assert agreed > 30


def _like(value: object, rng: random.Random) -> object:
    if isinstance(value, bool | int):
        return ()
    if isinstance(value, float):
        return rng.uniform(-1.0, 1.0)
    if isinstance(value, list):
        return [_like(v, rng) for v in value]
    assert isinstance(value, tuple)
    return tuple(_like(v, rng) for v in value)


# A sum of one-hots whose terms come from a def that allocates nothing (rev$maxpool's rev$max_), or from an
# inner Float sum over a lazy vector (whose copy, ks::DenseRead, is its loop's own): no arena mark and reset
# per iteration; where a term calls a def that makes a vector, each iteration still releases its memory.
RESETS = """
(def pick (Tuple Float Float) ((a : Float) (b : Float) (d : Float)) (if (gt a b) (tuple d 0.0) (tuple 0.0 d)))
(def row (Vec Float) ((a : Float)) (build 2 (lam (j : Integer) a)))
(def pool (Tuple (Vec Float) (Vec Float)) ((v : Vec Float) (dr : Vec Float))
  (sumbuild (size dr) (lam (i : Integer)
    (let (p (pick (index (mul 2 i) v) (index (add (mul 2 i) 1) v) (index i dr)))
      (tuple (deltaVec (size v) (mul 2 i) (get$1$2 p)) (deltaVec (size v) (add (mul 2 i) 1) (get$2$2 p)))))))
(def pool_rows (Vec (Vec Float)) ((v : Vec Float) (dr : Vec Float))
  (sumbuild (size dr) (lam (i : Integer) (deltaVec (size v) (mul 2 i) (row (index i dr))))))
(def lazy_inner (Vec Float) ((v : Vec Float) (k : Integer))
  (let (d (deltaVec (size v) k 1.5))
    (sumbuild (size v) (lam (i : Integer)
      (deltaVec (size v) i (sumbuild (size v) (lam (j : Integer) (mul (index j d) (index i v)))))))))
"""


@pytest.mark.parametrize(("name", "resets"), [("pool", False), ("pool_rows", True), ("lazy_inner", False)])
def test_iterations_release_memory_only_where_they_may_allocate(name: str, resets: bool) -> None:
    program = parse_program(RESETS)
    text = _body(emit_program(program, [name]))
    mine = text[text.index(f"{name}(const") :]
    assert ("ks::arena().mark()" in mine) == resets, mine
    v, dr = [1.0, -2.0, 3.0, 0.5, -0.0, 0.0], [0.25, -1.5, 2.0]
    args: list[object] = [v, 2] if name == "lazy_inner" else [v, dr]
    want = Interpreter().call(program.defs[name], args)
    assert same_bits(want, run_def(program, name, args)), (want, args)
