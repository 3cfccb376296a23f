"""Index arithmetic simplified with loop ranges (knossos.index_ranges): a reshape and its inverse read
rows plainly, and every simplification keeps the values (random index terms, the interpreter)."""

from __future__ import annotations

import random

from knossos.index_ranges import simplify_indices
from knossos.interpreter import Interpreter, evaluate
from knossos.parser import parse_expr, parse_program

ROUND_TRIP = """
(def rows (Vec (Vec Float)) ((x : Vec (Vec Float)))
  (build 8 (lam (i : Integer) (build 16 (lam (j : Integer)
    (index (sub (add (mul i 16) j) (mul (div (add (mul i 16) j) 16) 16))
           (index (div (add (mul i 16) j) 16) x)))))))
"""


def test_a_reshape_and_its_inverse_read_rows_plainly() -> None:
    program = parse_program(ROUND_TRIP, "rows.ks")
    body = program.defs["rows"].body
    simple = simplify_indices(body)
    assert (
        " ".join(str(simple).split())
        == "(build 8 (lam (i : Integer) (build 16 (lam (j : Integer) (index j (index i x))))))"
    )
    x = [[float(16 * r + c) for c in range(16)] for r in range(8)]
    assert Interpreter().call(program.defs["rows"], [x]) == x


def test_a_flat_index_split_and_joined_again_is_the_index() -> None:
    # Llama's MLP reads its (8, 128, c) input as rows through a view and its inverse
    e, _ = parse_expr("(build 40 (lam (v : Integer) (add (mul (div v 5) 5) (sub v (mul (div v 5) 5)))))")
    assert " ".join(str(simplify_indices(e)).split()) == "(build 40 (lam (v : Integer) v))"


def test_what_the_ranges_do_not_allow_stays() -> None:
    kept = [
        # j may reach 16: (16 i + 16) / 16 is i + 1
        "(build 8 (lam (i : Integer) (build 17 (lam (j : Integer) (div (add (mul i 16) j) 16)))))",
        # i of a lam: its range is not known (negative i truncates towards zero)
        "(lam (i : Integer) (build 16 (lam (j : Integer) (div (add (mul i 16) j) 16))))",
        # nor is it for a quotient times its divisor plus the remainder (an overflow could differ)
        "(lam (i : Integer) (add (mul (div i 5) 5) (sub i (mul (div i 5) 5))))",
    ]
    for text in kept:
        e, _ = parse_expr(text)
        assert simplify_indices(e) is e, text


def _term(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(["i", "j", str(rng.randint(0, 5))])
    op = rng.choice(["add", "sub", "mul", "div", "div", "reshape", "rejoin"])
    if op == "reshape":  # the shape of a reshape's index: (div (add (mul a c) b) c), or its remainder
        a, b, c = _term(rng, depth - 1), _term(rng, depth - 1), rng.randint(1, 9)
        flat = f"(add (mul {a} {c}) {b})"
        return f"(div {flat} {c})" if rng.random() < 0.5 else f"(sub {flat} (mul (div {flat} {c}) {c}))"
    if op == "rejoin":  # a quotient times its divisor plus the remainder, either way round
        a, c = _term(rng, depth - 1), rng.randint(1, 9)
        q, r = f"(mul (div {a} {c}) {c})", f"(sub {a} (mul (div {a} {c}) {c}))"
        return f"(add {q} {r})" if rng.random() < 0.5 else f"(add {r} {q})"
    if op in ("mul", "div"):
        return f"({op} {_term(rng, depth - 1)} {rng.randint(1, 9)})"
    return f"({op} {_term(rng, depth - 1)} {_term(rng, depth - 1)})"


def test_random_index_terms_keep_their_values() -> None:
    rng = random.Random(2026)
    changed = 0
    for _ in range(300):
        n, m = rng.randint(1, 6), rng.randint(1, 12)
        text = f"(build {n} (lam (i : Integer) (build {m} (lam (j : Integer) {_term(rng, 3)}))))"
        e, _ = parse_expr(text)
        simple = simplify_indices(e)
        changed += simple is not e
        assert evaluate(simple, {}) == evaluate(e, {}), text
    assert changed > 30  # the simplifications were exercised


def test_heads_viewed_as_a_batch_read_their_batch_and_column_plainly() -> None:
    # attention's (b, t, h*d) projection read as (b*h, t, d): batch-head bh < 4, d < 3 of a width 6
    e, _ = parse_expr(
        "(build 4 (lam (bh : Integer) (build 3 (lam (d : Integer)"
        " (add (mul (div (add (mul bh 3) d) 6) 100) (sub (add (mul bh 3) d) (mul (div (add (mul bh 3) d) 6) 6)))))))"
    )
    simple = simplify_indices(e)
    text = " ".join(str(simple).split())
    assert "(div bh 2)" in text and "(add (mul (sub bh (mul (div bh 2) 2)) 3) d)" in text, text
    assert evaluate(simple, {}) == evaluate(e, {})


def _strided(rng: random.Random, depth: int) -> str:
    """An index of mixed strides: a flat index ``a·c + b`` divided by, or reduced modulo, another stride."""
    strides = [1, 2, 3, 4, 6, 8, 12]
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(["i", "j", str(rng.randint(0, 7))])
    a, b = _strided(rng, depth - 1), _strided(rng, depth - 1)
    c, d = rng.choice(strides), rng.choice(strides)
    flat = f"(add (mul {a} {c}) {b})" if rng.random() < 0.8 else f"(mul {c} {a})"
    return f"(div {flat} {d})" if rng.random() < 0.5 else f"(sub {flat} (mul (div {flat} {d}) {d}))"


def test_random_mixed_strides_keep_their_values() -> None:
    rng = random.Random(45)
    changed = 0
    for _ in range(400):
        n, m = rng.randint(1, 8), rng.randint(1, 12)
        text = f"(build {n} (lam (i : Integer) (build {m} (lam (j : Integer) {_strided(rng, 3)}))))"
        e, _ = parse_expr(text)
        simple = simplify_indices(e)
        changed += simple is not e
        assert evaluate(simple, {}) == evaluate(e, {}), text
    assert changed > 100  # the rules were exercised
