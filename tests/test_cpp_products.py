"""Products in the shapes gradients write them reach the blocked loop nest (cpp_backend.products), and
mean what they meant: compiled results equal the interpreter's on random inputs (to the bit under exact
order), at shapes of 1 and shapes that are no multiple of the block; ragged inputs take the original
code, failing or not as the interpreter does."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from interpreted import interpreted, random_array

from autodiff import grad_program
from cpp_backend import cpp_text, emit
from cpp_backend.bench import values_agree
from cpp_backend.driver import compile_program
from cpp_backend.patterns import Bound, Cap, Where, alt, first, match, node
from cpp_backend.product_pass import canonical_products
from knossos import expr as E
from knossos.errors import KsError
from knossos.expr import Expr, names_in
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import load_program, parse_program
from knossos.types import FLOAT, INTEGER, vec
from ksdata.loader import DATA

PRODUCTS = """
; x^T w: x read down its columns
(def xt_w (Vec (Vec Float)) ((x : Vec (Vec Float)) (w : Vec (Vec Float)))
  (build (size (index 0 x)) (lam (i : Integer)
    (build (size (index 0 w)) (lam (k : Integer)
      (sumbuild (size x) (lam (j : Integer) (mul (index i (index j x)) (index k (index j w))))))))))

; a b^T as dot products of rows (a linear layer, x w^T): b read down its columns
(def a_bt (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)))
  (let (p (size (index 0 a)))
    (build (size a) (lam (i : Integer)
      (build (size b) (lam (k : Integer)
        (sumbuild p (lam (j : Integer)
          (let ((r (index k b)) (y (index j r))) (mul y (index j (index i a))))))))))))

; w^T dy with both read down columns, the product written right operand first
(def wt_dyt (Vec (Vec Float)) ((w : Vec (Vec Float)) (dy : Vec (Vec Float)))
  (build (size (index 0 w)) (lam (i : Integer)
    (build (size dy) (lam (k : Integer)
      (sumbuild (size w) (lam (j : Integer) (mul (index j (index k dy)) (index i (index j w))))))))))

; dx = dy w as a gradient writes it: per row, a sum over the outputs of scaled rows of w
(def dy_w_rows (Vec (Vec Float)) ((dy : Vec (Vec Float)) (w : Vec (Vec Float)))
  (let (n (size (index 0 w)))
    (build (size dy) (lam (i : Integer)
      (let (g (index i dy))
        (sumbuild (size w) (lam (o : Integer)
          (let (d (index o g)) (build n (lam (c : Integer) (mul d (index c (index o w)))))))))))))

; dw = sum over a batch of outer(dy_b, x_b)
(def outer_acc (Vec (Vec Float)) ((dy : Vec (Vec Float)) (x : Vec (Vec Float)))
  (let ((m (size (index 0 dy))) (n (size (index 0 x))))
    (sumbuild (size x) (lam (b : Integer)
      (build m (lam (o : Integer)
        (build n (lam (c : Integer) (mul (index o (index b dy)) (index c (index b x)))))))))))

; the same accumulation as one-hots, as reverse mode writes the cotangent of (index c (index o w))
(def outer_delta (Vec (Vec Float)) ((dy : Vec (Vec Float)) (x : Vec (Vec Float)) (w : Vec (Vec Float)))
  (let (n (size (index 0 x)))
    (sumbuild (size x) (lam (b : Integer)
      (let ((xb (index b x)) (g (index b dy)))
        (sumbuild n (lam (c : Integer)
          (let (xc (index c xb))
            (build (size w) (lam (o : Integer)
              (let (row (index o w)) (deltaVec (size row) c (mul (index o g) xc)))))))))))))

; a fused GEMM, alpha a b^T + beta c: the sum an operand of each element
(def fused_abt (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)) (c : Vec (Vec Float)))
  (let (p (size (index 0 a)))
    (build (size a) (lam (i : Integer)
      (build (size b) (lam (k : Integer)
        (add (mul 2.0 (sumbuild p (lam (j : Integer) (mul (index j (index i a)) (index j (index k b))))))
             (mul -0.5 (index k (index i c))))))))))

; an RNN cell's dw: outer products over the batch of x with dy * (1 - h^2), computed element by element
(def outer_made (Vec (Vec Float)) ((dy : Vec (Vec Float)) (h : Vec (Vec Float)) (x : Vec (Vec Float)))
  (let ((m (size (index 0 dy))) (n (size (index 0 x))))
    (sumbuild (size x) (lam (b : Integer)
      (build m (lam (o : Integer)
        (let (g (mul (index o (index b dy)) (sub 1.0 (mul (index o (index b h)) (index o (index b h))))))
          (build n (lam (c : Integer) (mul g (index c (index b x))))))))))))

; a SwiGLU gate's dw: its operand, sigmoid's derivative with its lets inlined, reads exp (neg h) three times
(def sigmoid_made (Vec (Vec Float)) ((dy : Vec (Vec Float)) (h : Vec (Vec Float)) (x : Vec (Vec Float)))
  (let ((m (size (index 0 dy))) (n (size (index 0 x))))
    (sumbuild (size x) (lam (b : Integer)
      (build m (lam (o : Integer)
        (let (g (mul (index o (index b dy))
                     (add (div 1.0 (add 1.0 (exp (neg (index o (index b h))))))
                          (div (exp (neg (index o (index b h)))) (add 1.0 (exp (neg (index o (index b h)))))))))
          (build n (lam (c : Integer) (mul g (index c (index b x))))))))))))

; both operands computed element by element, (a + 1) (2 b)
(def made_both (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)))
  (build (size a) (lam (i : Integer)
    (build (size (index 0 b)) (lam (k : Integer)
      (sumbuild (size b) (lam (j : Integer)
        (mul (add (index j (index i a)) 1.0) (mul 2.0 (index k (index j b)))))))))))

; two products in each element, as a GRU cell's gate: each sum hoisted into a matrix of its own
(def two_sums (Vec (Vec Float)) ((x : Vec (Vec Float)) (h : Vec (Vec Float)) (w : Vec (Vec Float)) (u : Vec (Vec Float)))
  (build (size x) (lam (i : Integer)
    (build (size w) (lam (k : Integer)
      (tanh (add (sumbuild (size (index i x)) (lam (j : Integer) (mul (index j (index i x)) (index j (index k w)))))
                 (mul 0.5 (sumbuild (size (index i h)) (lam (j : Integer)
                            (mul (index j (index i h)) (index j (index k u)))))))))))))

; attention's scores per head: q k^T for each b
(def batched (Vec (Vec (Vec Float))) ((q : Vec (Vec (Vec Float))) (k : Vec (Vec (Vec Float))))
  (build (size q) (lam (b : Integer)
    (let ((qb (index b q)) (kb (index b k)))
      (build (size qb) (lam (i : Integer)
        (build (size kb) (lam (t : Integer)
          (sumbuild (size (index i qb)) (lam (c : Integer)
            (mul (index c (index i qb)) (index c (index t kb)))))))))))))
"""

#: Each def's arguments as (rows, columns) of its matrices (or a batch of them), from (r, m, n).
SHAPES = {
    "xt_w": lambda r, m, n: [(r, m), (r, n)],
    "a_bt": lambda r, m, n: [(r, m), (n, m)],
    "wt_dyt": lambda r, m, n: [(r, m), (n, r)],
    "dy_w_rows": lambda r, m, n: [(r, m), (m, n)],
    "outer_acc": lambda r, m, n: [(r, m), (r, n)],
    "outer_delta": lambda r, m, n: [(r, m), (r, n), (m, n)],
    "batched": lambda r, m, n: [(2, r, n), (2, m, n)],
    "fused_abt": lambda r, m, n: [(r, m), (n, m), (r, n)],
    "outer_made": lambda r, m, n: [(r, m), (r, m), (r, n)],
    "made_both": lambda r, m, n: [(r, m), (m, n)],
    "sigmoid_made": lambda r, m, n: [(r, m), (r, m), (r, n)],
    "two_sums": lambda r, m, n: [(r, m), (r, m), (n, m), (n, m)],
}
#: The transposed copies each def's product needs: of its left (ks$at) or right (ks$bt) operand.
COPIES = {
    "xt_w": {"ks$at"},
    "a_bt": {"ks$bt"},
    "wt_dyt": {"ks$at", "ks$bt"},
    "dy_w_rows": set(),
    "outer_acc": {"ks$at"},
    "outer_delta": {"ks$at"},
    "batched": {"ks$bt"},
    "fused_abt": {"ks$bt"},
    "outer_made": {"ks$am", "ks$cs"},  # the computed operand's values, once (h[b][o] read once: ks$cse0)
    "made_both": {"ks$am", "ks$bm"},
    "sigmoid_made": {"ks$am", "ks$cs"},  # exp (neg h) and 1 + exp (neg h) once (ks$cse...)
    "two_sums": {"ks$bt", "ks$ro"},  # each sum's matrix (ks$rows), each reading w or u transposed
}
SIZES = [(1, 1, 1), (1, 9, 1), (3, 5, 7), (9, 17, 20), (16, 8, 33)]


def _calls() -> list[tuple[str, list[object]]]:
    rng = random.Random(45)
    return [(name, [random_array(s, rng) for s in make(*size)]) for size in SIZES for name, make in SHAPES.items()]


def _reaches_blocked_nest(program: object, name: str, **options: bool) -> bool:
    return "throw ks::Fallback();" in emit.emit_program(program, [name], include_runtime=False, **options)  # type: ignore[arg-type]


def test_products_equal_the_interpreter() -> None:
    program = parse_program(PRODUCTS, "products.ks")
    calls = _calls()
    want = interpreted(program, calls)
    exact = compile_program(program, exact_order=True, threads=1).run(calls)
    fast = compile_program(program, threads=1).run(calls)
    for (name, args), w, bits, quick in zip(calls, want, exact, fast, strict=True):
        assert not isinstance(w, KsError), (name, w)
        assert bits == w, (name, [len(a) for a in args])  # type: ignore[arg-type]
        assert values_agree(w, quick), (name, [len(a) for a in args])  # type: ignore[arg-type]


def test_a_computed_operand_computes_each_repeated_value_once() -> None:
    """sigmoid_made's copy binds exp (neg h) by a let: one exp per element, not three (the values are
    the interpreter's: test_products_equal_the_interpreter)."""
    program = parse_program(PRODUCTS, "products.ks")
    assert emit.emit_program(program, ["sigmoid_made"], include_runtime=False).count("ks::math::exp(") == 1


def test_ragged_inputs_take_the_original_code() -> None:
    """A short row (the checks of row lengths fail): the values or the errors of the interpreter."""
    program = parse_program(PRODUCTS, "products.ks")
    rng = random.Random(7)
    x, w = random_array((9, 17), rng), random_array((9, 20), rng)
    short = [list(r) for r in w]  # type: ignore[union-attr]
    short[4] = short[4][:11]
    long_x = [list(r) for r in x]  # type: ignore[union-attr]
    long_x[3] = long_x[3] + [1.0]
    calls: list[tuple[str, list[object]]] = [
        ("xt_w", [x, short]),  # fails on the short row
        ("a_bt", [long_x, w]),  # a longer row: never read
        ("dy_w_rows", [x, short[:17]]),
        ("outer_acc", [x, short]),
        ("outer_delta", [x, w, short[:17]]),
        ("outer_delta", [x, w, [r[:12] for r in short[:17]]]),  # one-hots past the rows' end: zeros
        ("outer_made", [x, short, w]),  # fails on the short row of h
        ("made_both", [x, short[:17]]),  # fails on the short row of b
        ("two_sums", [x, x, w[:5], short[:6]]),  # fails on u's short row
    ]
    want = interpreted(program, calls)
    for exact_order in (True, False):
        have = compile_program(program, exact_order=exact_order, threads=1).run(calls)
        for (name, _), w_, h in zip(calls, want, have, strict=True):
            if isinstance(w_, KsError):
                assert isinstance(h, KsError), (name, h)
            else:
                assert values_agree(w_, h, exact=exact_order), name


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_product_reaches_the_blocked_nest(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    program = parse_program(PRODUCTS, "products.ks")
    assert _reaches_blocked_nest(program, name)
    # transposes and hoists only: the same sums to the bit
    exact = name in ("xt_w", "a_bt", "wt_dyt", "batched", "fused_abt", "made_both", "two_sums")
    assert _reaches_blocked_nest(program, name, exact_order=True) == exact
    copies = {n[:5] for n in names_in(canonical_products(program.defs[name].body)) if n.startswith("ks$")}
    assert copies == COPIES[name]  # the operands read down a column are read from transposed copies
    monkeypatch.setattr(emit, "canonical_products", lambda body, exact_order=False: body)
    # Without the pass: no nest, or one that reads x[j][i] (x^T w) or b[k] (a b^T) at every term, or
    # computes both operands at every term (made_both: n m p times what the copies compute n p + p m).
    assert _reaches_blocked_nest(program, name) == (name in ("xt_w", "a_bt", "made_both"))


def test_gradients_products_reach_the_blocked_nest() -> None:
    """rev$ of a matrix product (knossos grad --mode rev) computes both its products, dx = dr w^T and
    dw = x^T dr (one-hots accumulated over the batch), with the blocked nest; equal to the interpreter."""
    layers = load_program(Path(__file__).resolve().parent.parent / "benchmarks" / "programs" / "layers.ks")
    blas = load_program(DATA / "programs" / "blas_test.kso")
    for source, primal in ((layers, "matmul"), (blas, "matrix_matrix_multiply")):
        program = grad_program(source, defs=[primal], mode="rev")
        cpp = emit.emit_program(program, ["rev$" + primal], include_runtime=False)
        body = cpp.split(f"{cpp_text.def_symbol('rev$' + primal)}(", 2)[-1]
        assert body.count("throw ks::Fallback();") == 2, primal
        rng = random.Random(3)
        x, w, dr = random_array((5, 9), rng), random_array((9, 19), rng), random_array((5, 19), rng)
        args = [x, [list(r) for r in zip(*w, strict=True)], dr] if primal == "matmul" else [x, w, dr]
        want = Interpreter().call(program.defs["rev$" + primal], args)
        have = compile_program(program, ["rev$" + primal], threads=1).call("rev$" + primal, args)
        assert values_agree(want, have), primal


def test_patterns_alternates_guards_and_lets() -> None:
    i, j = E.var("i", INTEGER), E.var("j", INTEGER)
    a = E.var("a", vec(vec(FLOAT)))
    read = E.op(Op.INDEX, j, E.op(Op.INDEX, i, a))  # a[i][j]
    rows = node(Op.INDEX, Bound("col"), node(Op.INDEX, Bound("row"), Cap("M")))
    either = alt("walk", rows=rows, cols=node(Op.INDEX, Bound("row"), node(Op.INDEX, Bound("col"), Cap("M"))))
    found = [(b["walk"], b["row"], b["col"]) for b in match(either, read)]
    assert found == [("rows", "i", "j"), ("cols", "j", "i")]  # both alternates, in order
    assert first(either, read, given={"row": "j"}) == {"row": "j", "col": "i", "M": a, "walk": "cols"}
    guarded = Where(either, lambda b: b["walk"] == "cols")
    assert [b["walk"] for b in match(guarded, read)] == ["cols"]
    t = E.var("t", vec(FLOAT))
    through_let = E.op(Op.INDEX, j, t)  # t bound to a[i] by a let around it
    assert first(rows, through_let) is None
    assert first(rows, through_let, lets={"t": E.op(Op.INDEX, i, a)}) == {"col": "j", "row": "i", "M": a}
    same = node(Op.MUL, Cap("x"), Cap("x"))  # a capture bound twice must be the same node
    assert first(same, E.op(Op.MUL, read, read)) is not None
    assert first(same, E.op(Op.MUL, read, E.const(1.0))) is None


def test_deep_terms_and_let_chains_are_walked_without_recursion() -> None:
    """A term 5,000 nodes deep is no product (left as it is); a let chain 5,000 long around a sum of
    vectors is peeled on the way (and the sum, a matrix-vector one, kept: no product comes of it)."""
    i, j, k = (E.var(x, INTEGER) for x in "ijk")
    a, b = E.var("a", vec(vec(FLOAT))), E.var("b", vec(vec(FLOAT)))
    term = E.op(Op.MUL, E.op(Op.INDEX, j, E.op(Op.INDEX, i, a)), E.op(Op.INDEX, j, E.op(Op.INDEX, k, b)))
    for _ in range(5000):
        term = E.op(Op.ADD, E.const(0.0), term)
    nest = E.build(E.op(Op.SIZE, a), i, E.build(E.op(Op.SIZE, b), k, E.sumbuild(E.const(3), j, term)))
    assert canonical_products(nest) is nest
    x = E.var("x", FLOAT)
    body: Expr = E.build(E.const(4), k, E.op(Op.MUL, x, E.op(Op.INDEX, k, E.op(Op.INDEX, j, b))))
    for n in range(5000):
        body = E.let(E.var(f"y{n}", FLOAT), E.const(float(n)), body)
    sums = E.sumbuild(E.op(Op.SIZE, b), j, E.let(x, E.const(2.0), body))
    assert canonical_products(sums) is sums


#: dx = dr w as a search leaves a gradient's: the size test on a term, ``(eq 5 (size t1))``, and the
#: padded branch's element with a let that the other branch's has inlined (rev$ of torch.nn.Linear
#: after optimize.py: both had kept the product out of the blocked nest, 1.6x slower).
SEARCHED = """
(def dx_searched (Vec (Vec Float)) ((weight : Vec (Vec Float)) (input0 : Vec (Vec Float)) (dr : Vec (Vec Float)))
  (build 9 (lam (i1 : Integer)
    (let ((t1 (index i1 input0)) (dr1 (index i1 dr)))
      (sumbuild 4 (lam (i2 : Integer)
        (let ((t3 (index i2 weight)) (dr2 (index i2 dr1)))
          (if (eq 5 (size t1))
              (build 5 (lam (i3 : Integer) (mul dr2 (index i3 t3))))
              (build (size t1) (lam (i3 : Integer)
                (if (lt i3 5) (let (t4 (index i3 t3)) (mul dr2 t4)) 0.0)))))))))))
"""


def test_a_searched_gradients_size_test_still_reaches_the_blocked_nest() -> None:
    program = parse_program(SEARCHED, "searched.ks")
    assert _reaches_blocked_nest(program, "dx_searched")
    rng = random.Random(11)
    calls: list[tuple[str, list[object]]] = [
        ("dx_searched", [random_array((4, 5), rng), random_array((9, cols), rng), random_array((9, 4), rng)])
        for cols in (5, 7)
    ]
    want = interpreted(program, calls)
    got = compile_program(program, threads=1).run(calls)
    for w, g in zip(want, got, strict=True):
        assert not isinstance(w, KsError) and values_agree(w, g)


#: dw = sum over a batch of outer(dr_b, x_b) as rev$ of torch.nn.Linear writes it: each level under a
#: size test whose padded branch's else is a zero row (no branch to pick statically: checked at run time).
SIZE_TESTED = """
(def dw_tested (Vec (Vec Float)) ((weight : Vec (Vec Float)) (input0 : Vec (Vec Float)) (dr : Vec (Vec Float)))
  (sumbuild 9 (lam (i1 : Integer)
    (let ((t1 (index i1 input0)) (dr1 (index i1 dr)) (t12 (size weight)))
      (if (eq 4 t12)
          (build 4 (lam (i2 : Integer)
            (let (dr2 (index i2 dr1))
              (if (eq 5 (size (index i2 weight)))
                  (build 5 (lam (i3 : Integer) (mul dr2 (index i3 t1))))
                  (build (size (index i2 weight)) (lam (i3 : Integer)
                    (if (lt i3 5) (let (t2 (index i3 t1)) (mul dr2 t2)) 0.0)))))))
          (build t12 (lam (i2 : Integer)
            (if (lt i2 4)
                (let ((dr2 (index i2 dr1)) (t10 (size (index i2 weight))))
                  (if (eq 5 t10)
                      (build 5 (lam (i3 : Integer) (mul dr2 (index i3 t1))))
                      (build t10 (lam (i3 : Integer) (if (lt i3 5) (mul dr2 (index i3 t1)) 0.0)))))
                (build (size (index i2 weight)) (lam (i : Integer) 0.0))))))))))
"""


def test_size_tests_without_a_static_branch_are_checked_at_run_time() -> None:
    program = parse_program(SIZE_TESTED, "tested.ks")
    assert _reaches_blocked_nest(program, "dw_tested")
    rng = random.Random(12)
    x, dr = random_array((9, 5), rng), random_array((9, 4), rng)
    weights = [
        random_array((4, 5), rng),
        random_array((6, 5), rng),
        random_array((4, 7), rng),
    ]  # the tests hold; fail; fail
    ragged = [list(r) for r in weights[0]]  # type: ignore[union-attr]
    ragged[2] = ragged[2] + [1.0, 2.0]  # one row's test fails: the original code
    calls: list[tuple[str, list[object]]] = [("dw_tested", [w, x, dr]) for w in [*weights, ragged]]
    want = interpreted(program, calls)
    got = compile_program(program, threads=1).run(calls)
    for w, g in zip(want, got, strict=True):
        assert not isinstance(w, KsError) and values_agree(w, g)


BATCH = """
; dW of a layer on a batch of sequences, as a search leaves it: per sequence a product x_b^T dy_b, not
; let-bound, summed over the batch
(def batch_xt_dy (Vec (Vec Float)) ((x : Vec (Vec (Vec Float))) (dy : Vec (Vec (Vec Float))))
  (sumbuild (size x) (lam (b : Integer)
    (build (size (index 0 (index b x))) (lam (i : Integer)
      (build (size (index 0 (index b dy))) (lam (k : Integer)
        (sumbuild (size (index b x)) (lam (j : Integer)
          (mul (index i (index j (index b x))) (index k (index j (index b dy)))))))))))))

; a linear layer on a batch of sequences after a search's tidying: each sequence's rows, a read of
; the sequence then the product as the row's value (no let holds it)
(def batch_rows (Vec (Vec (Vec Float))) ((x : Vec (Vec (Vec Float))) (w : Vec (Vec Float)))
  (build (size x) (lam (b : Integer)
    (let (xb (index b x))
      (build (size xb) (lam (t : Integer)
        (let (r (index t xb))
          (build (size w) (lam (o : Integer)
            (sumbuild (size r) (lam (c : Integer) (mul (index c r) (index c (index o w))))))))))))))
"""


def test_a_product_summed_over_a_batch_reaches_the_blocked_nest() -> None:
    """Each sequence's product is made by the blocked nest and added (the first one copied), not taken
    apart into scalar loops adding into the sum, which walk a column; the interpreter's."""
    program = parse_program(BATCH, "batch.ks")
    cpp = emit.emit_program(program, ["batch_xt_dy"], include_runtime=False)
    assert cpp.count("throw ks::Fallback();") == 1  # one nest, for the first sequence and the later ones
    rng = random.Random(11)
    calls: list[tuple[str, list[object]]] = [
        ("batch_xt_dy", [random_array((b, t, n), rng), random_array((b, t, m), rng)])
        for b, t, n, m in ((1, 1, 1, 1), (3, 5, 7, 9), (4, 17, 20, 33), (2, 1, 3, 4))
    ]
    want = interpreted(program, calls)
    for w, h in zip(want, compile_program(program, threads=1).run(calls), strict=True):
        assert values_agree(w, h)  # type: ignore[arg-type]


def test_a_row_whose_value_is_a_product_is_hoisted_without_a_let() -> None:
    """A row computed after a read let with the product as its value (no let holding it) is hoisted
    into a matrix computed before the rows, as the let-bound row is (cpp_backend.row_lets): the
    blocked nest; the interpreter's values."""
    program = parse_program(BATCH, "batch.ks")
    hoisted = canonical_products(program.defs["batch_rows"].body)
    assert any(n.startswith("ks$rows") for n in names_in(hoisted))
    assert _reaches_blocked_nest(program, "batch_rows")
    rng = random.Random(12)
    calls: list[tuple[str, list[object]]] = [
        ("batch_rows", [random_array((b, t, c), rng), random_array((o, c), rng)])
        for b, t, c, o in ((1, 1, 1, 1), (2, 9, 17, 20), (3, 16, 8, 33))
    ]
    want = interpreted(program, calls)
    for exact_order in (True, False):
        have = compile_program(program, exact_order=exact_order, threads=1).run(calls)
        for w, h in zip(want, have, strict=True):
            assert values_agree(w, h, exact=exact_order)  # type: ignore[arg-type]
