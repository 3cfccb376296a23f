"""The register-blocked loop nest (cpp_backend.emit's _block_rows) at sizes around its tile: rows,
terms and columns of 1, a tile less one, a tile, a tile plus one (BLOCK_ROWS rows, BLOCK_COLS
columns), and rows past a panel (BLOCK_PANEL: the right-hand matrix packed once serves every panel).
Compiled values equal the interpreter's to the bit under exact order (each element adds its terms in
the order of the sum), within the tolerance otherwise; a short row fails as the interpreter does."""

from __future__ import annotations

import itertools
import random

from interpreted import interpreted, random_array

from cpp_backend import emit, emit_rows
from cpp_backend.bench import values_agree
from cpp_backend.driver import compile_program
from knossos.errors import KsError
from knossos.parser import parse_program

PROGRAM = """
(def mm (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)))
  (build (size a) (lam (i : Integer)
    (build (size (index 0 b)) (lam (k : Integer)
      (sumbuild (size b) (lam (j : Integer) (mul (index j (index i a)) (index k (index j b))))))))))

; the right-hand row bound by a let inside the term; a factor computed per row and term
(def mm_let (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)))
  (build (size a) (lam (i : Integer)
    (build (size (index 0 b)) (lam (k : Integer)
      (sumbuild (size b) (lam (j : Integer)
        (let (r (index j b)) (mul (mul 2.0 (index j (index i a))) (index k r))))))))))

; lets a gradient leaves behind once its reads are written out (rev$ of a Llama MLP's down_projection)
(def mm_lets (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)))
  (build (size a) (lam (i : Integer)
    (build (size (index 0 b)) (lam (k : Integer)
      (sumbuild (size b) (lam (j : Integer)
        (let ((ar (index i a)) (w (index j b)) (x (index j (index i a))))
          (mul (index j (index i a)) (index k (index j b)))))))))))

; a dead let the body does not read: kept, so that its failure is the row-wise code's
(def mm_dead (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)) (n : Integer))
  (build (size a) (lam (i : Integer)
    (build (size (index 0 b)) (lam (k : Integer)
      (sumbuild (size b) (lam (j : Integer)
        (let (bad (index n (index i a))) (mul (index j (index i a)) (index k (index j b)))))))))))

; GEMM: the sums first, then each element reads its sum
(def gemm (Vec (Vec Float)) ((a : Vec (Vec Float)) (b : Vec (Vec Float)) (c : Vec (Vec Float)))
  (build (size a) (lam (i : Integer)
    (build (size (index 0 b)) (lam (k : Integer)
      (add (mul 0.5 (sumbuild (size b) (lam (j : Integer) (mul (index j (index i a)) (index k (index j b))))))
           (index k (index i c))))))))

; a weight's gradient: outer products summed over a batch (rewritten into the nest's shape)
(def dw (Vec (Vec Float)) ((dy : Vec (Vec Float)) (x : Vec (Vec Float)))
  (sumbuild (size dy) (lam (n : Integer)
    (build (size (index 0 dy)) (lam (o : Integer)
      (build (size (index 0 x)) (lam (q : Integer) (mul (index o (index n dy)) (index q (index n x))))))))))
"""

EDGES = (1, emit_rows.BLOCK_ROWS - 1, emit_rows.BLOCK_ROWS, emit_rows.BLOCK_ROWS + 1)
COLUMNS = (1, emit_rows.BLOCK_COLS - 1, emit_rows.BLOCK_COLS, emit_rows.BLOCK_COLS + 1, 2 * emit_rows.BLOCK_COLS + 1)
#: (rows, terms, columns): every edge, and rows into a second and third panel.
SIZES = [
    *itertools.product(EDGES, EDGES, COLUMNS),
    (emit_rows.BLOCK_PANEL + 9, 9, 17),
    (2 * emit_rows.BLOCK_PANEL + 8, 3, 33),
]


def _calls(rng: random.Random) -> list[tuple[str, list[object]]]:
    calls: list[tuple[str, list[object]]] = []
    for rows, terms, cols in SIZES:
        a, b = random_array((rows, terms), rng), random_array((terms, cols), rng)
        calls += [("mm", [a, b]), ("mm_let", [a, b]), ("mm_lets", [a, b]), ("mm_dead", [a, b, terms - 1])]
        calls.append(("gemm", [a, b, random_array((rows, cols), rng)]))
        calls.append(("dw", [random_array((terms, rows), rng), random_array((terms, cols), rng)]))
    return calls


def test_products_at_the_tiles_edges_equal_the_interpreter() -> None:
    program = parse_program(PROGRAM, "blocks.ks")
    for name in ("mm", "mm_let", "mm_lets", "mm_dead", "gemm", "dw"):  # every def reaches the nest
        assert "throw ks::Fallback();" in emit.emit_program(program, [name], include_runtime=False), name
    assert "throw ks::Fallback();" in emit.emit_program(program, ["mm"], include_runtime=False, exact_order=True)
    calls = _calls(random.Random(45))
    want = interpreted(program, calls)
    exact = compile_program(program, exact_order=True, threads=1).run(calls)
    fast = compile_program(program, threads=1).run(calls)
    for (name, args), w, bits, quick in zip(calls, want, exact, fast, strict=True):
        shape = (name, len(args[0]), len(args[1]), len(args[1][0]))  # type: ignore[arg-type]
        assert not isinstance(w, KsError), (shape, w)
        assert bits == w, shape  # to the bit
        assert values_agree(w, quick), shape


def test_terms_written_through_lets_are_fused_and_packed() -> None:
    """The term's lets inlined (cpp_backend.block_terms): a fused multiply-add per term and B's rows
    from packed panels, as for the term written out; not the dead let the body does not read."""
    program = parse_program(PROGRAM, "blocks.ks")

    def nest(name: str) -> str:
        cpp = emit.emit_program(program, [name], include_runtime=False)
        return cpp.split("throw ks::Fallback();", 1)[1].split("catch (...)", 1)[0]

    for name in ("mm", "mm_let", "mm_lets"):
        assert "= KS_MADD(" in nest(name) and "__restrict pack" in nest(name), name
        assert nest(name).count("= KS_MADD(") == emit_rows.BLOCK_ROWS, name  # one copy for every tile
    assert "= KS_MADD(" not in nest("mm_dead")


def test_a_dead_let_fails_in_the_nest_as_in_the_interpreter() -> None:
    program = parse_program(PROGRAM, "blocks.ks")
    rng = random.Random(3)
    a, b = random_array((2 * emit_rows.BLOCK_ROWS, 5), rng), random_array((5, 20), rng)
    calls: list[tuple[str, list[object]]] = [("mm_dead", [a, b, 5]), ("mm_dead", [a, b, 4])]
    want = interpreted(program, calls)
    assert isinstance(want[0], KsError) and not isinstance(want[1], KsError)
    for exact_order in (True, False):
        have = compile_program(program, exact_order=exact_order, threads=1).run(calls)
        assert isinstance(have[0], KsError) and str(have[0]).endswith(str(want[0])), have[0]
        assert values_agree(want[1], have[1], exact=exact_order)


def test_a_short_row_of_the_packed_matrix_fails_as_the_interpreter_does() -> None:
    """A row of b shorter than the first (read at every column): the packing stops, every row
    computes its own sums, and the first that reads past the short row fails with the interpreter's
    error; in a later panel too (the packed copy is kept only when complete)."""
    program = parse_program(PROGRAM, "blocks.ks")
    rng = random.Random(7)
    rows = emit_rows.BLOCK_PANEL + emit_rows.BLOCK_ROWS
    a, b = random_array((rows, 5), rng), random_array((5, 20), rng)
    short = [row[:] for row in b]  # type: ignore[union-attr]
    short[3] = short[3][:11]
    calls: list[tuple[str, list[object]]] = [("mm", [a, short]), ("mm_let", [a, short]), ("mm", [a, b])]
    want = interpreted(program, calls)
    assert isinstance(want[0], KsError) and isinstance(want[1], KsError) and not isinstance(want[2], KsError)
    for exact_order in (True, False):
        have = compile_program(program, exact_order=exact_order, threads=1).run(calls)
        for w, h in zip(want, have, strict=True):
            if isinstance(w, KsError):
                assert isinstance(h, KsError) and str(h).endswith(str(w)), (h, w)  # (the interpreter's has no place)
            else:
                assert values_agree(w, h, exact=exact_order)


TERMS = [
    # (term, what inline_term_lets makes of it: None for unchanged)
    ("(let (w (index j b)) (mul x (index k w)))", "(mul x (index k (index j b)))"),
    ("(let (w (index j b)) (mul (index k w) (index 0 w)))", "(mul (index k (index j b)) (index 0 (index j b)))"),
    ("(let (e (exp x)) (mul e e))", None),  # computed twice: not inlined
    ("(let (w (index j b)) (if (gt x 0.0) (index k w) 0.0))", None),  # a branch: w might not be read
    ("(let (w (index j b)) (let (j 0) (index k w)))", "(let (j0 0) (index k (index j b)))"),  # the inner j renamed
    ("(let (w (index 5 b)) x)", None),  # dead, and its read is not the body's: kept, failing as it may
    ("(let (w (index j b)) (index k (index j b)))", "(index k (index j b))"),  # dead, its read the body's
]


def test_term_lets_are_inlined_only_where_nothing_changes() -> None:
    from cpp_backend.block_terms import inline_term_lets
    from knossos.printer import format_expr

    head = "(def t Float ((x : Float) (b : Vec (Vec Float)) (j : Integer) (k : Integer)) "
    for term, want in TERMS:
        e = parse_program(head + term + ")", "t.ks").defs["t"].body
        got = inline_term_lets(e)
        if want is None:
            assert got is e, term
        else:
            assert format_expr(got) == format_expr(parse_program(head + want + ")", "t.ks").defs["t"].body), term
