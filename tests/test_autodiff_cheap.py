"""The shape of reverse-mode derivatives (issue 45, the cheap-gradient principle): element reads
transpose to gathers, not to one-hot vectors summed over a loop; and those derivatives stay right
(finite differences, the interpreter against the compiled C++, random programs against forward mode)."""

from __future__ import annotations

import math
import random

import pytest
from exprgen import sample
from test_autodiff import check_finite_differences, dot, tangent, value

from autodiff import derivative_defs, grad_program
from cpp_backend.driver import run_def
from knossos import expr as E
from knossos.errors import KsError
from knossos.expr import Expr
from knossos.interpreter import Interpreter
from knossos.natives import NATIVES
from knossos.ops import Op
from knossos.parser import parse_program
from knossos.program import Def, Program
from knossos.values import isclose

SOURCE = """
(def matvec (Vec Float) ((W : Vec (Vec Float)) (x : Vec Float))
  (build (size W) (lam (i : Integer) (sumbuild (size x) (lam (j : Integer) (mul (index j (index i W)) (index j x)))))))
(def dense (Vec Float) ((w : Vec (Vec Float)) (x : Vec Float) (b : Vec Float))
  (build (size w) (lam (i : Integer)
    (tanh (add (index i b) (sumbuild (size x) (lam (j : Integer) (mul (index j (index i w)) (index j x)))))))))
(def shorter (Vec Float) ((x : Vec Float) (y : Vec Float))
  (build (size x) (lam (i : Integer) (mul (index i x) (index i y)))))
(def shifted Float ((w : Vec Float) (x : Vec Float))
  (sumbuild (add (sub (size x) (size w)) 1) (lam (t : Integer)
    (sumbuild (size w) (lam (j : Integer) (mul (index j w) (index (add t j) x)))))))
(def fixed Float ((x : Vec Float) (y : Vec Float))
  (sumbuild (size x) (lam (i : Integer) (mul (index i x) (index 0 y)))))
(def branch (Vec Float) ((x : Vec Float) (c : Float))
  (build (size x) (lam (i : Integer) (if (gt (index i x) c) (mul c (index i x)) (exp (index i x))))))
(def padded (Vec Float) ((w : Vec Float) (x : Vec (Vec Float)))
  (build (size (index 0 x)) (lam (t : Integer)
    (sumbuild (size x) (lam (c : Integer)
      (sumbuild (size w) (lam (j : Integer)
        (let (p (sub (add t j) 1))
          (mul (index j w) (if (or (lt p 0) (gte p (size (index c x)))) 0.0 (index p (index c x))))))))))))
(def centred (Vec Float) ((x : Vec Float))
  (let (m (sumbuild (size x) (lam (i : Integer) (index i x))))
    (build (size x) (lam (i : Integer) (mul (index i x) (sub (index i x) m))))))
(def rownorm (Vec (Vec Float)) ((x : Vec (Vec Float)))
  (let (m (build (size x) (lam (i : Integer)
            (let (r (index i x)) (sumbuild (size r) (lam (j : Integer) (mul (index j r) (index j r))))))))
    (build (size x) (lam (i : Integer)
      (let (r (index i x)) (build (size r) (lam (j : Integer) (mul (index j r) (index i m)))))))))
(edef tanh Float (Float))
"""


def program() -> Program:
    return parse_program(SOURCE)


def rev(name: str) -> Def:
    return derivative_defs(program(), [name], "rev").new[-1]


def loops_with_deltavec(root: Expr) -> list[Expr]:
    """The build/sumbuild nodes of ``root`` with a deltaVec in their body."""
    return [
        n
        for n in E.preorder(root)
        if n.op in (Op.BUILD, Op.SUMBUILD) and any(m.op is Op.DELTAVEC for m in E.preorder(n.args[2]))
    ]


@pytest.mark.parametrize("name", ["matvec", "dense", "shorter", "branch"])
def test_reads_at_the_loop_index_are_gathers(name: str) -> None:
    """A read at the loop's own index gives its vector a build of the elements' cotangents: no
    one-hot deltaVec anywhere, so nothing is accumulated into a full-size cotangent in a loop."""
    body = rev(name).body
    assert not loops_with_deltavec(body)
    assert not any(n.op is Op.DELTAVEC for n in E.preorder(body))


def test_matvec_derivative_is_a_gather_over_rows() -> None:
    """rev$matvec: W's cotangent is a build over the rows of W (not a sumbuild over them)."""
    body = rev("matvec").body
    matrix = program().defs["matvec"].params[0].type
    assert any(n.op is Op.BUILD and n.type is matrix and n.args[1].data == "i" for n in E.preorder(body))
    assert not any(n.op is Op.SUMBUILD and n.type is matrix for n in E.preorder(body))


@pytest.mark.parametrize("name", ["centred", "rownorm"])
def test_gathers_of_one_vector_are_one_loop(name: str) -> None:
    """x is read at the loop index in two loops (a mean, then the output): its cotangent is one
    gather of the sum of both elements, one pass writing it, not two gathers and an add of vectors."""
    x_type = program().defs[name].params[0].type
    body = rev(name).body
    assert not [n for n in E.preorder(body) if n.op is Op.ADD and n.type is x_type]
    assert len([n for n in E.preorder(body) if n.op is Op.BUILD and n.type is x_type]) == 1


@pytest.mark.parametrize(
    "name", ["matvec", "dense", "shorter", "shifted", "fixed", "branch", "padded", "centred", "rownorm"]
)
def test_derivatives_are_right(name: str) -> None:
    made = {d.name: d for d in derivative_defs(program(), [name], "both").new}
    check_finite_differences(program().defs[name], made[f"fwd${name}"], made[f"rev${name}"], seed=5, trials=3)


def test_gather_over_a_shorter_loop_pads_with_zeros() -> None:
    """``shorter`` reads y only where x has elements: y's cotangent is zero past them."""
    d = rev("shorter")
    got = Interpreter().call(d, [[1.0, 2.0], [3.0, 4.0, 5.0], [1.0, 1.0]])
    assert got == ([3.0, 4.0], [1.0, 2.0, 0.0])


def test_a_padding_branch_makes_no_zero_of_the_whole_input() -> None:
    """A read of row c of x in one branch of an if: the other branch completes it with a zero *row*
    (the record of x at c goes out of the branch), not with a zero of all of x in every iteration."""
    x_type = program().defs["padded"].params[1].type
    body = rev("padded").body

    def zero_of_x(n: Expr) -> bool:
        inner = n.args[2] if n.op is Op.BUILD else None
        return n.type is x_type and inner is not None and inner.op is Op.BUILD and inner.args[2].op is Op.CONST

    loops = [n for n in E.preorder(body) if n.op in (Op.BUILD, Op.SUMBUILD)]
    assert not [z for loop in loops for z in E.preorder(loop.args[2]) if zero_of_x(z)]


def test_no_iteration_evaluates_nothing() -> None:
    """An element read that could fail (y[0] of an empty y) is not moved out of a loop of no iterations."""
    d = rev("fixed")
    assert Interpreter().call(d, [[], [], 1.0]) == ([], [])


@pytest.mark.parametrize("name", ["matvec", "dense", "shorter", "shifted", "branch", "padded", "centred", "rownorm"])
def test_compiled_derivative_agrees_with_the_interpreter(name: str) -> None:
    p = grad_program(program(), [name], "rev")
    rng = random.Random(2)
    f = p.defs[name]
    args = [value(q.type, rng) for q in f.params]
    args.append(tangent(f.ret_type, Interpreter().call(f, args), rng))
    want = Interpreter().call(p.defs[f"rev${name}"], args)
    assert isclose(want, run_def(p, f"rev${name}", args, exact_order=True), 0.0, 0.0)


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_reverse_agrees_with_forward(seed: int) -> None:
    """Generated defs (tests/exprgen.py): <rev$f(x, dr), v> equals <fwd$f(x, v), dr> (forward mode
    is made independently of the reverse pass's gathers and element records)."""
    example = sample(seed, max_depth=5)
    p = example.program
    try:
        made = {d.name: d for d in derivative_defs(p, ["target"], "both").new}
    except KsError:
        pytest.skip("not differentiable")
    d = p.defs["target"]
    rng = random.Random(seed)
    run = Interpreter(max_steps=10**6)
    xs = [rng.uniform(0.5, 1.5) for _ in d.params]
    vs = [rng.uniform(-1.0, 1.0) for _ in d.params]
    try:
        out = run.call(d, xs)
        dr = tangent(d.ret_type, out, rng)
        forward = dot(d.ret_type, run.call(made["fwd$target"], [*xs, *vs]), dr)
        cot = run.call(made["rev$target"], [*xs, dr])
    except KsError:
        pytest.skip("the def fails at this point")
    reverse = sum(c * v for c, v in zip(cot, vs, strict=True))
    if not (math.isfinite(forward) and math.isfinite(reverse)):
        pytest.skip("not finite here")
    assert abs(forward - reverse) <= 1e-9 * max(1.0, abs(forward)), (example.text, forward, reverse)


TAPED = """
(edef erf Float (Float))
(def f Float ((x : Vec (Vec Float)))
  (let (v (build (size x) (lam (i : Integer)
            (let (row (index i x))
              (log (sumbuild (size row) (lam (j : Integer) (erf (index j row)))))))))
    (sumbuild (size v) (lam (i : Integer) (mul (index i v) (index i v))))))
"""


def test_a_rows_inner_sum_is_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """rev$f reads each row's sum of erf (a Float loop inside the row's loop, not its element) from a
    tape that the forward pass computes and reads (v, whose elements the reverse pass of the squares
    needs): erf is evaluated once per element, where the reverse pass once computed the sums again;
    the gradient is right (d/dx_ij of sum_i log(S_i)^2 = 2 log(S_i) erf'(x_ij) / S_i)."""
    program = grad_program(parse_program(TAPED, "taped.ks"), defs=["f"], mode="rev")
    calls = 0
    erf = NATIVES["erf"]

    def counted(x: float) -> float:
        nonlocal calls
        calls += 1
        return erf(x)

    monkeypatch.setitem(NATIVES, "erf", counted)
    x = [[0.5, 1.25, -0.75], [2.0, 0.25, 1.0]]
    got = Interpreter().call(program.defs["rev$f"], [x, 1.0])
    assert calls == 6
    for row, drow in zip(x, got, strict=True):  # type: ignore[call-overload]
        total = sum(math.erf(v) for v in row)
        for v, dv in zip(row, drow, strict=True):
            slope = 2 / math.sqrt(math.pi) * math.exp(-v * v)
            assert dv == pytest.approx(2 * math.log(total) * slope / total, rel=1e-12)


GROUPS = """
(def groups (Vec Float) ((x : Vec Float))
  (build 2 (lam (g : Integer)
    (sumbuild 3 (lam (h : Integer)
      (let (e (index (add (mul g 3) h) x)) (mul (to_float (add g 1)) (mul e e))))))))
(def group_rows (Vec Float) ((x : Vec (Vec Float)))
  (build 2 (lam (g : Integer)
    (sumbuild 3 (lam (h : Integer)
      (let (row (index (add h (mul 3 g)) x))
        (sumbuild (size row) (lam (j : Integer)
          (mul (to_float (add g 1)) (mul (index j row) (index j row)))))))))))
"""


@pytest.mark.parametrize("name", ["groups", "group_rows"])
def test_a_vector_read_in_chunks_gets_a_gather(name: str) -> None:
    """Group g reads elements 3 g + h, h < 3 (a flattened dimension nested in two loops, GroupNorm's
    channels): the cotangent is the chunks' gather flattened once, no one-hot per element; it is right
    (d/dx_k = 2 (g + 1) x_k dr_g for k < 6, zero past the groups), and the C++ agrees."""
    p = grad_program(parse_program(GROUPS, "groups.ks"), [name], "rev")
    d = p.defs[f"rev${name}"]
    assert not any(n.op is Op.DELTAVEC for n in E.preorder(d.body))
    rng = random.Random(3)
    scalar = name == "groups"
    x = [rng.uniform(-1.0, 1.0) if scalar else [rng.uniform(-1.0, 1.0) for _ in range(2)] for _ in range(7)]
    dr = [0.5, -2.0]
    got = Interpreter().call(d, [x, dr])

    def want(k: int, v: float) -> float:
        return 2 * (k // 3 + 1) * v * dr[k // 3] if k < 6 else 0.0

    expected = [want(k, v) if scalar else [want(k, u) for u in v] for k, v in enumerate(x)]  # type: ignore[union-attr]
    assert isclose(got, expected, 1e-12, 1e-12)
    assert isclose(run_def(p, f"rev${name}", [x, dr], exact_order=True), got, 0.0, 0.0)
    with pytest.raises(KsError, match="out of range"):  # too short for the groups: fails as the function does
        Interpreter().call(d, [x[:5], dr])
