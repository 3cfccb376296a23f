"""A sumbuild whose body has loops adds them straight into its accumulator in the C++ (no value of
an iteration made first): the same values as the interpreter, the same errors (issue 45)."""

from __future__ import annotations

import random

import pytest

from cpp_backend.bench import values_agree
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


def test_the_direct_accumulation_is_emitted() -> None:
    text = emit_program(parse_program(SOURCE), ["windows"])
    assert "#ifndef KS_EXACT_ORDER" in text
    assert "ks::delta_vec" not in text.split("#ifndef KS_EXACT_ORDER", 1)[1].split("#endif", 1)[0]


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
