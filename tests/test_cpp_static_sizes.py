"""cpp_backend.static_sizes: a batched product whose checks the sizes of a let-bound, locally built
vector prove (MultiheadAttention's gradient: a loop counted by the rows of a tensor built with
literal counts) is emitted with no fallback nest; the same product on a parameter, whose sizes are
only known at run time, keeps its fallback, which runs when a row is ragged; compiled, both equal
the interpreter (its values or its failure)."""

from __future__ import annotations

import random

from interpreted import assert_agree, interpreted, random_array

from cpp_backend.driver import compile_program
from cpp_backend.product_pass import canonical_products
from cpp_backend.static_sizes import StaticSizes
from knossos import expr as E
from knossos.expr import Expr, names_in
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.types import FLOAT, INTEGER, Kind, vec

#: out[i][n][k] = sum_j a[n][i][j] t[n][j][k]: batch n, rows i, columns k (laid out [i][n][k], so the
#: batched pass rewrites it), the column loop counted by a row of t (checked the same for every n).
_PRODUCT = """
    (build 3 (lam (i : Integer)
      (build 2 (lam (n : Integer)
        (build (size (index 0 (index n t))) (lam (k : Integer)
          (sumbuild 4 (lam (j : Integer)
            (mul (index j (index i (index n a))) (index k (index j (index n t))))))))))))"""

PROGRAM = f"""
; t built here with literal counts: every row of t's rows has 5 elements, known when emitted
(def local (Vec (Vec (Vec Float))) ((a : Vec (Vec (Vec Float))) (b : Vec (Vec (Vec Float))))
  (let (t (build 2 (lam (n : Integer) (build 4 (lam (j : Integer) (build 5 (lam (k : Integer)
            (mul 2.0 (index k (index j (index n b)))))))))))
    {_PRODUCT}))

; t a parameter: its rows' lengths are only known at run time
(def given (Vec (Vec (Vec Float))) ((a : Vec (Vec (Vec Float))) (t : Vec (Vec (Vec Float))))
  {_PRODUCT})
"""


def _fallbacks(body: Expr) -> int:
    """Guards that keep a nest as written: ``(if checks fast original)`` of vectors."""
    return sum(1 for e in E.preorder(body) if e.op is Op.IF and e.type.kind is Kind.VEC)


def test_sizes_known_when_emitted_leave_no_fallback() -> None:
    program = parse_program(PROGRAM, "static.ks")
    local = canonical_products(program.defs["local"].body)
    assert any(n.startswith("ks$b") for n in names_in(local))  # (the batched product, rewritten)
    assert _fallbacks(local) == 0
    given = canonical_products(program.defs["given"].body)
    assert any(n.startswith("ks$b") for n in names_in(given))
    assert _fallbacks(given) == 1


def test_compiled_with_and_without_fallback_equals_the_interpreter() -> None:
    program = parse_program(PROGRAM, "static.ks")
    rng = random.Random(45)
    a, b = random_array((2, 3, 4), rng), random_array((2, 4, 5), rng)
    ragged = random_array((2, 4, 5), rng)
    ragged[1][2] = ragged[1][2][:3]  # type: ignore[index]  # a row of t shorter: the guard fails
    wide = random_array((2, 4, 5), rng)
    wide[1] = [[*r, 0.5] for r in wide[1]]  # type: ignore[index]  # t[1]'s rows longer than t[0]'s
    short = random_array((2, 3, 4), rng)
    short[1][2] = short[1][2][:2]  # type: ignore[index]  # a row of a short: a read out of range
    calls = [("local", [a, b]), ("local", [short, b]), ("given", [a, b]), ("given", [a, ragged])]
    calls += [("given", [a, wide]), ("given", [short, b])]
    want = interpreted(program, calls)
    assert [isinstance(w, Exception) for w in want] == [False, True, False, True, False, True]
    have = compile_program(program, ["local", "given"], threads=1).run(calls)
    assert_agree(calls, want, have)


def test_only_literal_counts_of_names_bound_once_are_known() -> None:
    i, n = E.var("i", INTEGER), E.var("n", INTEGER)
    rows = E.build(E.const(3), i, E.build(E.const(5), n, E.const(1.0)))
    t = E.var("t", vec(vec(FLOAT)))
    row_size = E.op(Op.SIZE, E.op(Op.INDEX, i, t))
    assert StaticSizes(E.let(t, rows, row_size)).size(row_size) == 5
    assert StaticSizes(E.let(t, rows, row_size)).holds(E.op(Op.EQ, row_size, E.const(5)))
    assert not StaticSizes(E.let(t, rows, row_size)).holds(E.op(Op.EQ, row_size, E.const(4)))
    m = E.var("m", INTEGER)
    ragged = E.build(E.const(3), i, E.build(m, n, E.const(1.0)))  # a count that is no literal
    assert StaticSizes(E.let(t, ragged, row_size)).size(row_size) is None
    twice = E.let(t, rows, E.let(t, ragged, row_size))  # t bound twice: which one is read is not asked
    assert StaticSizes(twice).size(row_size) is None
    assert StaticSizes(E.let(t, rows, E.lam(t, row_size))).size(row_size) is None  # and as a parameter
    branches = E.op(Op.IF, E.op(Op.GT, m, E.const(0)), rows, ragged)  # counts that differ by branch
    assert StaticSizes(E.let(t, branches, row_size)).size(row_size) is None
