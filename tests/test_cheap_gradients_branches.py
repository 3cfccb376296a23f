"""Branches in loops (issue 45, the cheap-gradient principle): a branch's reverse pass gives each
cotangent an ``if`` of its own, so that a loop summing a one-hot of one branch (gmm's makeQ: the
packed lower triangle ``l`` read at a computed index) adds it in place, and computes nothing of the
other cotangents' parts (makeQ's ``exp`` of the diagonal); and a def called in a loop nest on the
inner index alone (gmm's makeQ of component ``k`` in the loop over points ``i``) is taped once per
``k``, its ``rev$`` called once per ``k``.  The derivatives stay right."""

from __future__ import annotations

import random

from test_autodiff import check_compiled_rev, check_finite_differences

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
        check_compiled_rev(p, name, ds[f"rev${name}"], seed=5)


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


TAPED = """
(def sqn Float ((v : Vec Float))
  (assert (gt (size v) 0) (sumbuild (size v) (lam (j : Integer) (mul (index j v) (exp (index j v)))))))
(def mix Float ((x : Vec Float) (w : Vec (Vec Float)))
  (sumbuild (size x) (lam (i : Integer)
    (sumbuild (size w) (lam (k : Integer) (mul (index i x) (sqn (index k w))))))))
"""


def call_depths(root: Expr, name: str) -> list[int]:
    """How many loops are around each call of the def ``name`` in ``root``."""
    depths: list[int] = []
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if node.op is Op.CALL and node.data.name == name:
            depths.append(depth)
        inner = depth + 1 if node.op in (Op.BUILD, Op.SUMBUILD) else depth
        stack += [
            (a, inner if node.op in (Op.BUILD, Op.SUMBUILD) and k == 2 else depth) for k, a in enumerate(node.args)
        ]
    return depths


def test_a_call_invariant_in_the_outer_loop_is_taped_once_per_inner_index() -> None:
    """``sqn`` of row ``k`` in the loop over ``i`` (gmm's makeQ of component k): the reverse pass
    calls it and ``rev$sqn`` in one loop (over ``k``), not in the nest, under a guard that the loop
    over ``i`` runs (``sqn`` fails on an empty row); the derivative stays right."""
    p = parse_program(TAPED)
    ds = {d.name: d for d in derivative_defs(p, ["mix"], "both").new}
    body = ds["rev$mix"].body
    assert call_depths(body, "rev$sqn") == [1]
    assert call_depths(body, "sqn") and all(d <= 1 for d in call_depths(body, "sqn"))
    check_finite_differences(p.defs["mix"], ds["fwd$mix"], ds["rev$mix"], seed=2)
    whole = grad_program(p, ["mix"], "rev")
    rng = random.Random(3)
    guards = [n.args[0] for n in E.preorder(body) if n.op is Op.IF and n.args[0].op is Op.GT]
    assert any(g.args[1] is E.const(0) for g in guards)
    for x, w in (([1.0, 2.0, 0.5], [[0.1, 0.2], [0.3, -0.4], [0.5, 0.6]]), ([3.0], [[0.7]])):
        args = [x, w, rng.uniform(0.5, 2.0)]
        want = Interpreter().call(whole.defs["rev$mix"], args)
        assert isclose(want, run_def(whole, "rev$mix", args, exact_order=True), 0.0, 0.0)
        assert isclose(want, run_def(whole, "rev$mix", args), 1e-12, 1e-12)
