"""A derivative call that two cotangent loops of one loop need is made once per iteration, in a tape
before them (autodiff/shared_calls.py; issue 45, the cheap-gradient principle): gmm's
``mul$R$VecVecR`` scales each row by a Float, and its rev$ called ``rev$mul$R$VecR`` in full in the
loop summing the Float's cotangent and again in the loop gathering the rows'.  Where an argument is a
whole vector from outside the loop, the call is not taped (the tape would hold that vector's
cotangent once per iteration).  The derivatives stay right."""

from __future__ import annotations

from test_autodiff import check_compiled_rev, check_finite_differences

from autodiff import derivative_defs, grad_program
from cpp_backend.driver import run_def
from knossos import expr as E
from knossos.expr import Expr
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.program import Def, Program
from knossos.values import isclose

SOURCE = """
(def scale (Vec Float) ((r : Float) (a : Vec Float)) (build (size a) (lam (i : Integer) (mul r (index i a)))))
(def scale_rows (Vec (Vec Float)) ((r : Float) (a : Vec (Vec Float)))
  (build (size a) (lam (i : Integer) (scale r (index i a)))))
(def dot Float ((a : Vec Float) (b : Vec Float)) (sumbuild (size a) (lam (i : Integer) (mul (index i a) (index i b)))))
(def dots (Vec Float) ((m : Vec (Vec Float)) (x : Vec Float))
  (build (size m) (lam (i : Integer) (dot (index i m) x))))
"""


def program() -> Program:
    return parse_program(SOURCE)


def made(name: str) -> dict[str, Def]:
    return {d.name: d for d in derivative_defs(program(), [name], "both").new}


def calls_of(root: Expr, callee: str) -> list[Expr]:
    return [n for n in E.preorder(root) if n.op is Op.CALL and n.data.name == callee]


def test_a_call_two_cotangent_loops_need_is_made_once_in_a_tape() -> None:
    body = made("scale_rows")["rev$scale_rows"].body
    (call,) = calls_of(body, "rev$scale")  # once, where it was once in each of two loops
    tapes = [n for n in E.preorder(body) if n.op is Op.BUILD and any(m is call for m in E.preorder(n))]
    assert tapes and tapes[-1].type.elem == call.type  # the tape: a build of the call's results
    loops = [n for n in E.preorder(body) if n.op in (Op.BUILD, Op.SUMBUILD) and n not in tapes]
    assert len(loops) >= 2 and all(not calls_of(loop, "rev$scale") for loop in loops)


def test_a_call_on_a_vector_from_outside_the_loop_is_not_taped() -> None:
    """``dot (index i m) x``: ``x``'s cotangent per iteration is as long as ``x``; no tape of them."""
    body = made("dots")["rev$dots"].body
    for call in calls_of(body, "rev$dot"):
        assert not any(n.op is Op.BUILD and n.type.elem == call.type for n in E.preorder(body)), (
            "a tape of x's cotangents"
        )


def test_taped_derivatives_match_finite_differences_and_the_compiled_code() -> None:
    p = program()
    for name in ("scale_rows", "dots"):
        ds = made(name)
        check_finite_differences(p.defs[name], ds[f"fwd${name}"], ds[f"rev${name}"], seed=7)
        check_compiled_rev(p, name, ds[f"rev${name}"], seed=11)


def test_ragged_rows_are_taped_and_gathered_with_their_own_lengths() -> None:
    """Rows of different lengths: each tape entry holds its row's cotangent, as long as the row."""
    p = program()
    rev = made("scale_rows")["rev$scale_rows"]
    whole = grad_program(p, ["scale_rows"], "rev")
    rows = [[1.0, 2.0, 3.0], [0.5], [], [4.0, -1.0]]
    seed = [[0.25 * (k + 1) for k in range(len(row))] for row in rows]
    args = [1.5, rows, seed]
    want = Interpreter().call(rev, args)
    assert want == (
        sum(x * s for row, srow in zip(rows, seed) for x, s in zip(row, srow)),
        [[1.5 * s for s in srow] for srow in seed],
    )
    assert isclose(want, run_def(whole, "rev$scale_rows", args, exact_order=True), 0.0, 0.0)
