"""Reads that autodiff hoisted under ``(if (gt n 0) ..)`` (autodiff/hoist.py): written back into the
terms that use them before the products pass (cpp_backend/guarded_reads.py), so that a gradient's
products reach the blocked nest; and their sizes known to the reverse pass (autodiff/extents.py), so
that their cotangents are plain gathers.  Meaning is checked against the interpreter."""

from __future__ import annotations

import random

from interpreted import assert_agree, interpreted, random_array

from autodiff import derivative_defs, with_derivatives, without_derivatives
from cpp_backend.driver import compile_program
from cpp_backend.guarded_reads import guarded_read, sink_guarded_reads
from cpp_backend.product_pass import canonical_products
from cpp_backend.products import has_product
from knossos import expr as E
from knossos.expr import Expr
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import load_program, parse_program
from knossos.program import Program
from knossos.types import FLOAT, INTEGER, vec
from ksdata.loader import DATA

#: C = (alpha X)(beta Y), blas_test.kso's amxbmy: its gradient reads the rows of alpha X and beta Y
#: hoisted out of the product's loops under guards.
AMXBMY = "amxbmy"


def _with_rev(name: str) -> Program:
    base = without_derivatives(load_program(DATA / "programs" / "blas_test.kso"), orphans=True)
    return with_derivatives(base, derivative_defs(base, [name], "rev"))


def _guarded_vars(root: Expr) -> set[str]:
    """The variables of ``root``'s lets whose value is a guarded read."""
    return {x.args[0].data for x in E.preorder(root) if x.op is Op.LET and guarded_read(x.args[1]) is not None}


def test_a_gradients_guarded_rows_reach_the_blocked_product() -> None:
    """rev$amxbmy has guarded reads; once they are sunk, a cotangent that was a sum of one-hot
    columns per row of the product (O(n^4)) is a blocked product, and the compiled rev$ agrees
    with the interpreter's (on square and rectangular shapes, and where a loop runs no iteration)."""
    program = _with_rev(AMXBMY)
    body = program.defs[f"rev${AMXBMY}"].body
    assert _guarded_vars(body)
    sunk = sink_guarded_reads(body)
    assert sunk is not body
    assert has_product(canonical_products(body))
    rng = random.Random(3)
    calls: list[tuple[str, list[object]]] = []
    for rows, m, n in ((3, 4, 5), (4, 4, 4), (2, 3, 1)):
        x, y = random_array((rows, m), rng), random_array((m, n), rng)
        dr = random_array((rows, n), rng)
        calls.append((f"rev${AMXBMY}", [x, y, 0.5, -1.5, dr]))
    calls.append((f"rev${AMXBMY}", [[[]], [[1.0]], 0.5, 1.0, [[1.0]]]))  # m = 0 in X, 1 row in Y
    compiled = compile_program(program, [f"rev${AMXBMY}"])
    assert_agree(calls, interpreted(program, calls), compiled.run(calls))


def test_guarded_values_have_the_sizes_of_their_reads() -> None:
    """The cotangent of a guarded row of a matrix the def builds is a plain gather: rev$amxbmy reads
    no guarded variable's size (the padded copy for rows of other lengths tested it)."""
    body = _with_rev(AMXBMY).defs[f"rev${AMXBMY}"].body
    guarded = _guarded_vars(body)
    sizes = {x.args[0].data for x in E.preorder(body) if x.op is Op.SIZE and x.args[0].op is Op.VAR}
    assert guarded
    assert not sizes & guarded - {"t_4"}  # (t_4: a row of the parameter mat_y, whose sizes are unknown)


def _guarded_row(n: Expr, i: Expr, v: Expr) -> Expr:
    t1 = E.var("t1", vec(FLOAT))
    empty = E.build(E.const(0), E.var("z", INTEGER), E.const(0.0))
    return E.op(Op.IF, E.op(Op.GT, n, E.const(0)), E.let(t1, E.op(Op.INDEX, i, v), t1), empty)


def test_a_read_is_sunk_only_where_its_guard_holds() -> None:
    """A guarded row used in a loop of the guard's size is read there; one whose size is also read
    outside the loop (where the guard may fail, and the row may not exist) stays as it is.  Both
    keep their values, and a read out of range still fails only where the loop runs."""
    n, i, j = E.var("n", INTEGER), E.var("i", INTEGER), E.var("j", INTEGER)
    v, t = E.var("v", vec(vec(FLOAT))), E.var("t", vec(FLOAT))
    inside = E.sumbuild(n, j, E.op(Op.INDEX, j, t))
    used_in_loop = E.let(t, _guarded_row(n, i, v), inside)
    sunk = sink_guarded_reads(used_in_loop)
    assert sunk is not used_in_loop and "t" not in sunk.free and not _guarded_vars(sunk)
    used_outside = E.let(t, _guarded_row(n, i, v), E.op(Op.ADD, E.op(Op.TO_FLOAT, E.op(Op.SIZE, t)), inside))
    assert sink_guarded_reads(used_outside) is used_outside
    run = Interpreter()
    matrix = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    for nv, iv in ((2, 1), (3, 0), (0, 7)):  # (n = 0 and row 7: no read, no failure)
        env = {"n": nv, "i": iv, "v": matrix}
        assert run.eval_expr(sunk, env) == run.eval_expr(used_in_loop, env)


def test_a_read_of_a_row_a_binder_between_captures_stays() -> None:
    """Where a binder between the guard and a use rebinds a name the read mentions, nothing moves."""
    n, i, j = E.var("n", INTEGER), E.var("i", INTEGER), E.var("j", INTEGER)
    v, t = E.var("v", vec(vec(FLOAT))), E.var("t", vec(FLOAT))
    rebound = E.sumbuild(n, j, E.let(i, E.const(0), E.op(Op.INDEX, j, t)))
    e = E.let(t, _guarded_row(n, i, v), rebound)
    assert sink_guarded_reads(e) is e


def test_deep_terms_around_a_guarded_read_need_no_recursion() -> None:
    """A let chain 5,000 long inside the loop that uses a guarded row is walked on explicit stacks."""
    n, i, j = E.var("n", INTEGER), E.var("i", INTEGER), E.var("j", INTEGER)
    v, t = E.var("v", vec(vec(FLOAT))), E.var("t", vec(FLOAT))
    body: Expr = E.op(Op.INDEX, j, t)
    for k in range(5000):
        body = E.let(E.var(f"y{k}", FLOAT), E.const(float(k)), body)
    e = E.let(t, _guarded_row(n, i, v), E.sumbuild(n, j, body))
    assert "t" not in sink_guarded_reads(e).free


def test_parsed_guard_of_a_user_branch_is_no_loop_guard() -> None:
    """A branch the program wrote, read outside any loop, is left alone (its empty vector is used)."""
    program = parse_program(
        """
(def f Float ((v : Vec (Vec Float)) (n : Integer))
  (let (t (if (gt n 0) (index 0 v) (build 0 (lam (z : Integer) 0.0))))
    (to_float (size t))))
"""
    )
    body = program.defs["f"].body
    assert sink_guarded_reads(body) is body


def test_a_size_shown_positive_by_an_earlier_read_lets_its_guard_go() -> None:
    """blas_template.kso's matrix_matrix_multiply reads ``(index 0 mat_y)`` first, so ``(size mat_y)``
    is positive below: its rev$'s guards on it hold, and the cotangent of mat_y (a sum over rows of
    rows read down columns) becomes a blocked product; compiled, it agrees with the interpreter."""
    base = without_derivatives(load_program(DATA / "programs" / "blas_template.kso"), orphans=True)
    program = with_derivatives(base, derivative_defs(base, ["matrix_matrix_multiply"], "rev"))
    body = program.defs["rev$matrix_matrix_multiply"].body
    canonical = canonical_products(body)
    assert any(x.op is Op.LET and x.args[0].data.startswith("ks$bt") for x in E.preorder(canonical))
    rng = random.Random(5)
    calls: list[tuple[str, list[object]]] = []
    for n, m, k in ((3, 4, 5), (4, 4, 4), (1, 2, 3)):
        x, y, dr = random_array((m, n), rng), random_array((k, m), rng), random_array((n, k), rng)
        calls.append(("rev$matrix_matrix_multiply", [x, y, dr]))
    compiled = compile_program(program, ["rev$matrix_matrix_multiply"])
    assert_agree(calls, interpreted(program, calls), compiled.run(calls))


def test_a_fact_about_a_shadowed_name_is_dropped() -> None:
    """``(size v)`` is shown positive by ``(index 0 v)``, but a let rebinding ``v`` below makes the
    fact about another vector: the guard on the new ``(size v)`` stays."""
    n, v, w = E.var("n", INTEGER), E.var("v", vec(vec(FLOAT))), E.var("w", vec(FLOAT))
    size = E.op(Op.SIZE, v)
    guard = E.op(Op.IF, E.op(Op.GT, size, E.const(0)), E.const(1.0), E.const(2.0))
    e = E.let(w, E.op(Op.INDEX, E.const(0), v), E.let(v, E.build(n, E.var("z", INTEGER), w), guard))
    assert sink_guarded_reads(e) is e
    kept = E.let(w, E.op(Op.INDEX, E.const(0), v), guard)
    assert sink_guarded_reads(kept) is E.let(w, E.op(Op.INDEX, E.const(0), v), E.const(1.0))
