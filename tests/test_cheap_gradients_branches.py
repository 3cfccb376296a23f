"""Branches in loops (issue 45, the cheap-gradient principle): a branch's reverse pass gives each
cotangent an ``if`` of its own, so that a loop summing a one-hot of one branch (gmm's makeQ: the
packed lower triangle ``l`` read at a computed index) adds it in place, and computes nothing of the
other cotangents' parts (makeQ's ``exp`` of the diagonal); the derivatives stay right."""

from __future__ import annotations

import random

from test_autodiff import check_finite_differences, tangent, value

from autodiff import derivative_defs, grad_program
from cpp_backend.driver import run_def
from cpp_backend.emit import emit_def
from knossos import expr as E
from knossos.expr import Expr
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.program import Def, Program
from knossos.values import isclose

SOURCE = """
(def tri Integer ((n : Integer)) (div (mul n (sub n 1)) 2))
(def lower (Vec (Vec Float)) ((q : Vec Float) (l : Vec Float))
  (build (size q) (lam (i : Integer) (build (size q) (lam (j : Integer)
    (if (lt i j) 0.0
      (if (eq i j) (exp (index i q))
        (index (add (sub (tri (size q)) (tri (sub (size q) j))) (sub (sub i j) 1)) l))))))))
(def scaled (Vec Float) ((x : Vec Float) (a : Float) (b : Float))
  (build (size x) (lam (i : Integer) (if (gt (index i x) 1.0) (mul a (index i x)) (mul b (exp (index i x)))))))
"""


def program() -> Program:
    return parse_program(SOURCE)


def made(name: str) -> dict[str, Def]:
    return {d.name: d for d in derivative_defs(program(), [name], "both").new}


def loops(root: Expr) -> list[Expr]:
    return [n for n in E.preorder(root) if n.op in (Op.BUILD, Op.SUMBUILD)]


def test_a_branch_in_a_loop_gives_each_cotangent_its_own_if() -> None:
    """No tuple of branch parts is made (and taken apart) in a loop; the loop that sums ``l``'s
    one-hots computes no ``exp`` (``q``'s part), the one that gathers ``q``'s makes no one-hot."""
    body = made("lower")["rev$lower"].body
    for loop in loops(body):
        assert not any(n.op in (Op.TUPLE, Op.GET) for n in E.preorder(loop.args[2])), E.preorder(loop)
    sums_of_one_hots = [n for n in loops(body) if any(m.op is Op.DELTAVEC for m in E.preorder(n.args[2]))]
    assert sums_of_one_hots
    for loop in sums_of_one_hots:
        assert not any(n.op is Op.EXP for n in E.preorder(loop.args[2]))


def test_floats_from_outside_get_an_if_each() -> None:
    """``scaled``'s branch gives ``a`` and ``b`` (Floats from outside) one ``if`` each."""
    body = made("scaled")["rev$scaled"].body
    assert not any(n.op in (Op.TUPLE, Op.GET) for loop in loops(body) for n in E.preorder(loop.args[2]))


def test_split_branches_match_finite_differences_and_the_compiled_code() -> None:
    p = program()
    for name in ("lower", "scaled"):
        ds = made(name)
        check_finite_differences(p.defs[name], ds[f"fwd${name}"], ds[f"rev${name}"], seed=3)
        whole = grad_program(p, [name], "rev")
        rng = random.Random(5)
        f = p.defs[name]
        args = [value(t.type, rng) for t in f.params]
        args.append(tangent(f.ret_type, Interpreter().call(f, args), rng))
        want = Interpreter().call(ds[f"rev${name}"], args)
        assert isclose(want, run_def(whole, f"rev${name}", args, exact_order=True), 0.0, 0.0)


def test_a_zero_arm_adds_nothing_in_the_sum() -> None:
    """The C++ of a sum whose term is a branch's zero vector makes no vector for it (but its first
    value: the accumulator's dense zeros), where ``ks::add_inplace`` of a ``ks::const_vec`` was
    made in every iteration; the sums still agree with the interpreter, in either order."""
    p = grad_program(program(), ["lower"], "rev")
    text = emit_def(p.defs["rev$lower"])
    assert "ks::size_mismatch" in text
    for line in text.splitlines():
        assert "ks::const_vec" not in line or "ks::copy_dense(ks::const_vec" in line, line
    rng = random.Random(7)
    for n in (1, 2, 4):
        q = [rng.uniform(-1.0, 1.0) for _ in range(n)]
        args = [q, [rng.uniform(-1.0, 1.0) for _ in range(n * (n - 1) // 2)]]
        args.append([[rng.uniform(-1.0, 1.0) for _ in range(n)] for _ in range(n)])
        want = Interpreter().call(p.defs["rev$lower"], args)
        assert isclose(want, run_def(p, "rev$lower", args, exact_order=True), 0.0, 0.0)
        assert isclose(want, run_def(p, "rev$lower", args), 1e-12, 1e-12)
