"""Strided indexes bound to a let at the head of a loop's body (cpp_backend.index_lets): read as the
emitter's strided reads (one range check before the loop), with the interpreter's values and errors."""

from __future__ import annotations

import re

import pytest

from cpp_backend.driver import compile_program
from cpp_backend.emit import emit_def
from cpp_backend.index_lets import inline_index_lets
from knossos.errors import KsEvalError
from knossos.interpreter import Interpreter
from knossos.parser import parse_program

pytestmark = pytest.mark.usefixtures("cpp_cache")

FLAGS = ("-O1", "-Wall", "-Werror")
# GRUCell's gradient reads the third gate's rows as (let ((t (add i 512)) (x (index t h))) ...)
TEXT = """
(def gate (Vec Float) ((h : Vec Float))
  (build (div (size h) 3) (lam (i : Integer)
    (let ((t (add i (mul 2 (div (size h) 3))))
          (u (add (mul i 2) 1))
          (x (index t h))
          (y (index u h)))
      (add (mul x y) (index i h))))))
(def total Float ((h : Vec Float))
  (sumbuild 4 (lam (i : Integer) (let ((t (add i 2)) (x (index t h))) (mul x 0.1)))))
(def shadowed Float ((h : Vec Float))
  (sumbuild 3 (lam (i : Integer) (let ((i (add i 1)) (t (add i 1))) (index t h)))))
"""


def test_strided_lets_are_checked_once_and_agree_with_the_interpreter() -> None:
    program = parse_program(TEXT, "p.ks")
    compiled = compile_program(program, extra_flags=FLAGS)
    exact = compile_program(program, extra_flags=FLAGS, exact_order=True)
    h = [0.25 * k - 1.0 for k in range(9)]
    for name in ("gate", "total", "shadowed"):
        want = Interpreter().call(program.defs[name], [h])
        assert compiled.call(name, [h]) == pytest.approx(want, rel=1e-15)
        assert exact.call(name, [h]) == want  # bit-identical in exact order
    # the reads at u = 2 i + 1 and t = i + 2 are checked before their loops (t = i + 2 (size h) / 3 is
    # not a literal offset: read with its own check)
    check = r"ks::check_strided\([^,]+, std::int64_t\({}LL\), std::int64_t\({}LL\), p0_h\)"
    assert re.search(check.format(2, 1), emit_def(program.defs["gate"]))
    assert re.search(check.format(1, 2), emit_def(program.defs["total"]))


def test_reads_past_the_end_fail_as_the_interpreter_does() -> None:
    program = parse_program(TEXT, "p.ks")
    compiled = compile_program(program, extra_flags=FLAGS)
    with pytest.raises(KsEvalError, match="out of range"):
        Interpreter().call(program.defs["total"], [[1.0, 2.0, 3.0]])
    with pytest.raises(KsEvalError, match="out of range"):
        compiled.call("total", [[1.0, 2.0, 3.0]])


def test_a_let_of_the_loop_variable_stops_the_inlining() -> None:
    body = parse_program(TEXT, "p.ks").defs["shadowed"].body
    assert inline_index_lets(body) is body
