"""Products computed row by row inside a let (an MLP's layers, attention's scores) are hoisted into a
matrix computed before the row loop (cpp_backend.row_lets) and so reach the blocked nest; compiled
results equal the interpreter's on random inputs (to the bit under exact order), at shapes of 1 and
shapes that are no multiple of the block, and ragged inputs fail as the interpreter does."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from interpreted import interpreted, random_array

from autodiff import grad_program
from cpp_backend import cpp_text, emit, product_pass
from cpp_backend.bench import values_agree
from cpp_backend.driver import compile_program
from cpp_backend.product_pass import canonical_products
from knossos.errors import KsError
from knossos.expr import names_in
from knossos.interpreter import Interpreter
from knossos.parser import parse_program

LAYERS = Path(__file__).resolve().parent.parent / "benchmarks" / "programs" / "layers.ks"

ROWS = """
; the let's right-hand side reads an earlier let of the row (not hoisted), then a product that is
(def two_lets (Vec (Vec Float)) ((x : Vec (Vec Float)) (w : Vec (Vec Float)))
  (build (size x) (lam (b : Integer)
    (let ((s (mul 2.0 (index 0 (index b x))))
          (h (build (size w) (lam (o : Integer) (mul s (index 0 (index o w))))))
          (g (build (size w) (lam (o : Integer)
               (sumbuild (size (index b x)) (lam (k : Integer) (mul (index k (index b x)) (index k (index o w)))))))))
      (build (size g) (lam (o : Integer) (add (index o g) (index o h))))))))

; the product reads a row computed by a loop (no read, no scalar): that row's let hoisted first
(def vec_let (Vec (Vec Float)) ((x : Vec (Vec Float)) (w : Vec (Vec Float)))
  (build (size x) (lam (b : Integer)
    (let ((xr (build (size (index b x)) (lam (c : Integer) (mul 2.0 (index c (index b x))))))
          (g (build (size w) (lam (o : Integer)
               (sumbuild (size xr) (lam (k : Integer) (mul (index k xr) (index k (index o w)))))))))
      g))))

; as vec_let, with a let after the hoisted row that nothing reads, and that fails on short rows
(def late_let (Vec (Vec Float)) ((x : Vec (Vec Float)) (w : Vec (Vec Float)))
  (build (size x) (lam (b : Integer)
    (let ((xr (build (size (index b x)) (lam (c : Integer) (mul 2.0 (index c (index b x))))))
          (unread (index 3 (index b x)))
          (g (build (size w) (lam (o : Integer)
               (sumbuild (size xr) (lam (k : Integer) (mul (index k xr) (index k (index o w)))))))))
      g))))
"""

#: Each def's arguments as shapes, from (rows, inputs, outputs).
SHAPES = {
    "mlp": lambda r, m, n: [(r, m), (n, m), (n,), (m, n), (m,)],
    "attention_scores": lambda r, m, n: [(r, m), (n, m)],
    "two_lets": lambda r, m, n: [(r, m), (n, m)],
    "vec_let": lambda r, m, n: [(r, m), (n, m)],
}
SIZES = [(1, 1, 1), (1, 9, 1), (3, 5, 7), (9, 17, 20), (16, 8, 33)]


def test_row_products_equal_the_interpreter() -> None:
    program = parse_program(LAYERS.read_text() + ROWS, "layers_rows.ks")
    rng = random.Random(45)
    calls = [(name, [random_array(s, rng) for s in make(*size)]) for size in SIZES for name, make in SHAPES.items()]
    want = interpreted(program, calls)
    defs = list(SHAPES)
    exact = compile_program(program, defs, exact_order=True, threads=1).run(calls)
    fast = compile_program(program, defs, threads=1).run(calls)
    for (name, args), w, bits, quick in zip(calls, want, exact, fast, strict=True):
        assert not isinstance(w, KsError), (name, w)
        assert bits == w, (name, [len(a) for a in args])  # type: ignore[arg-type]
        assert values_agree(w, quick), (name, [len(a) for a in args])  # type: ignore[arg-type]


def test_ragged_rows_fail_as_the_interpreter_does() -> None:
    program = parse_program(LAYERS.read_text() + ROWS, "layers_rows.ks")
    rng = random.Random(7)
    x, w1, b1, w2, b2 = (random_array(s, rng) for s in SHAPES["mlp"](9, 17, 20))
    short = [list(r) for r in x]  # type: ignore[union-attr]
    short[4] = short[4][:11]
    long_ = [list(r) for r in x]  # type: ignore[union-attr]
    long_[2] = long_[2] + [1.0]
    calls: list[tuple[str, list[object]]] = [
        ("mlp", [short, w1, b1, w2, b2]),
        ("mlp", [long_, w1, b1, w2, b2]),
        ("attention_scores", [short, w1]),
        ("attention_scores", [x, short]),
        ("vec_let", [short, w1]),
        ("vec_let", [long_, w1]),  # (reads past w's rows: fails)
    ]
    want = interpreted(program, calls)
    for exact_order in (True, False):
        defs = ["mlp", "attention_scores", "vec_let"]
        have = compile_program(program, defs, exact_order=exact_order, threads=1).run(calls)
        for (name, _), w_, h in zip(calls, want, have, strict=True):
            if isinstance(w_, KsError):
                assert isinstance(h, KsError), (name, h)
            else:
                assert values_agree(w_, h, exact=exact_order), name


#: Each def's products that reach the blocked nest, and the matrices hoisted out of its rows.
REACHED = {"mlp": (2, 1), "attention_scores": (1, 1), "two_lets": (1, 1), "vec_let": (1, 2)}


@pytest.mark.parametrize("name", list(REACHED))
def test_row_products_reach_the_blocked_nest(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """mlp: its first layer hoisted, its second (reading the first's row from the hoisted matrix) a
    product over the rows as it stands; two_lets: only the let that is a product; vec_let: the row
    its product reads, computed by a loop, hoisted as a matrix (row_lets.hoist_row_chain)."""
    program = parse_program(LAYERS.read_text() + ROWS, "layers_rows.ks")
    products_, hoists = REACHED[name]

    def blocked(**options: bool) -> int:
        cpp = emit.emit_program(program, [name], include_runtime=False, **options)  # type: ignore[arg-type]
        return cpp.count("throw ks::Fallback();")

    assert blocked() == products_
    assert blocked(exact_order=True) == products_  # hoists and transposes keep every sum to the bit
    hoisted = {n for n in names_in(canonical_products(program.defs[name].body)) if n.startswith("ks$rows")}
    assert len(hoisted) == hoists
    monkeypatch.setattr(product_pass, "hoist_row_let", lambda *args: None)
    monkeypatch.setattr(product_pass, "hoist_row_chain", lambda *args: None)
    assert blocked() == 0  # without the hoists: each row's product computed on its own


#: rev$ of each layer: its products that reach the blocked nest only through hoists, and how many
#: matrices it hoists (the same one hoisted from several sums over the rows counts once).  rev$mlp's
#: dw1 = x^T (dh * (1 - h^2)) reads dh from its hoisted matrix, its operand computed element by element.
#: rev$attention_scores' dk = sum_i ds_i^T q_i and dq_i = ds_i k read the row ds_i of the softmax's
#: cotangent, computed by loops in each row's lets: that row hoisted once as a matrix, both are products.
GRADIENTS = {"mlp": (3, 3), "attention_scores": (3, 2)}


@pytest.mark.parametrize("name", list(GRADIENTS))
def test_gradients_row_products_equal_the_interpreter_and_reach_the_blocked_nest(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rev$mlp (knossos grad --mode rev) recomputes the first layer, and dh = dy w2 in three sums over
    the batch, per row inside lets; rev$attention_scores recomputes q k^T / sqrt(width) per row in
    three places (its row's scale a let before it).  Each is hoisted (the row's reads inlined, its
    scalars moved into each element), blocked, and the identical ones computed once; so is a row that
    its sums of products read (attention's ds)."""
    source = parse_program(LAYERS.read_text(), "layers.ks")
    program = grad_program(source, defs=[name], mode="rev")
    rev = "rev$" + name

    def blocked() -> int:
        cpp = emit.emit_program(program, [rev], include_runtime=False)
        return cpp.split(f"{cpp_text.def_symbol(rev)}(", 2)[-1].count("throw ks::Fallback();")

    rng = random.Random(11)
    for size in [(1, 1, 1), (3, 5, 7), (9, 17, 20)]:
        args = [random_array(s, rng) for s in SHAPES[name](*size)]
        out = Interpreter().call(source.defs[name], args)
        args.append(random_array((len(out), len(out[0])), rng))  # type: ignore[arg-type]  # d$r
        want = Interpreter().call(program.defs[rev], args)
        for exact_order in (True, False):
            have = compile_program(program, [rev], exact_order=exact_order, threads=1).call(rev, args)
            assert values_agree(want, have, exact=exact_order), (size, exact_order)
    more, hoists = GRADIENTS[name]
    hoisted = {n for n in names_in(canonical_products(program.defs[rev].body)) if n.startswith("ks$rows")}
    assert len(hoisted) == hoists
    with_hoist = blocked()
    monkeypatch.setattr(product_pass, "hoist_row_let", lambda *args: None)
    monkeypatch.setattr(product_pass, "hoist_row_chain", lambda *args: None)
    assert with_hoist == blocked() + more


def test_a_hoisted_rows_later_lets_are_still_evaluated() -> None:
    """hoist_row_chain drops the lets before the hoisted one that the product no longer reads (the
    hoisted build evaluated them), never one after it: late_let's unread ``(index 3 row)`` fails on
    rows shorter than 4, compiled as interpreted, and the product still reaches the blocked nest."""
    program = parse_program(LAYERS.read_text() + ROWS, "layers_rows.ks")
    rng = random.Random(9)
    calls: list[tuple[str, list[object]]] = [
        ("late_let", [random_array((r, m), rng), random_array((n, m), rng)]) for r, m, n in ((5, 6, 7), (5, 3, 7))
    ]
    want = interpreted(program, calls)
    assert not isinstance(want[0], KsError) and isinstance(want[1], KsError)
    for exact_order in (True, False):
        have = compile_program(program, ["late_let"], exact_order=exact_order, threads=1).run(calls)
        assert values_agree(want[0], have[0], exact=exact_order)  # type: ignore[arg-type]
        assert isinstance(have[1], KsError) and str(have[1]).endswith(str(want[1])), have[1]
    cpp = emit.emit_program(program, ["late_let"], include_runtime=False)
    assert cpp.count("throw ks::Fallback();") == 1
