"""The reference interpreter's semantics, construct by construct, and against direct Python evaluation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knossos.errors import KsEvalError, KsUsageError
from knossos.interpreter import Interpreter, call_def, evaluate
from knossos.parser import parse_expr, parse_program
from knossos.values import isclose


def ev(text: str, **env: object) -> object:
    e, _ = parse_expr(text)
    return evaluate(e, dict(env))


def test_float_division_is_ieee() -> None:
    assert ev("(div x 0.0)", x=1.0) == math.inf
    assert ev("(div x 0.0)", x=-2.0) == -math.inf
    assert math.isnan(ev("(div x 0.0)", x=0.0))  # type: ignore[arg-type]
    assert ev("(log x)", x=0.0) == -math.inf
    assert math.isnan(ev("(log x)", x=-1.0))  # type: ignore[arg-type]
    assert ev("(exp x)", x=1000.0) == math.inf


def test_integer_division_truncates_and_checks_zero() -> None:
    p = parse_program("(def f Integer ((a : Integer) (b : Integer)) (div a b))", "t.ks")
    assert call_def(p.defs["f"], 7, 2) == 3
    assert call_def(p.defs["f"], -7, 2) == -3
    assert call_def(p.defs["f"], 7, -2) == -3
    with pytest.raises(KsEvalError, match="division by zero"):
        call_def(p.defs["f"], 1, 0)


def test_if_and_or_are_lazy() -> None:
    # the untaken branch would index out of range
    prog = parse_program(
        """(def f Float ((v : Vec Float) (i : Integer))
             (if (or (lt i 0) (gte i (size v))) 0.0 (index i v)))
           (def g Bool ((v : Vec Float) (i : Integer))
             (and (lt i (size v)) (gt (index i v) 0.0)))""",
        "t.ks",
    )
    assert call_def(prog.defs["f"], [1.0, 2.0], 5) == 0.0
    assert call_def(prog.defs["f"], [1.0, 2.0], 1) == 2.0
    assert call_def(prog.defs["g"], [1.0], 3) is False


def test_vectors_tuples_and_broadcasting() -> None:
    assert ev("(build 3 (lam (i : Integer) (to_float (mul i i))))") == [0.0, 1.0, 4.0]
    assert ev("(sumbuild 4 (lam (i : Integer) (tuple (to_float i) (build 2 (lam (j : Integer) (to_float j))))))") == (
        6.0,
        [0.0, 4.0],
    )
    assert ev("(mul 2.0 (tuple x (build 2 (lam (i : Integer) x))))", x=1.5) == (3.0, [3.0, 3.0])
    assert ev("(add (build 2 (lam (i : Integer) x)) (build 2 (lam (i : Integer) (to_float i))))", x=1.0) == [1.0, 2.0]
    assert ev("(deltaVec 4 2 x)", x=5.0) == [0.0, 0.0, 5.0, 0.0]
    assert ev("(constVec 3 x)", x=5.0) == [5.0, 5.0, 5.0]
    assert ev("(sum (build 4 (lam (i : Integer) (to_float i))))") == 6.0
    assert ev("(get$2$3 (tuple 1 x true))", x=2.0) == 2.0
    assert ev("(select (tuple 1 x true) 2)", x=2.0) is True
    assert ev("(neg (tuple x (build 2 (lam (i : Integer) x))))", x=1.0) == (-1.0, [-1.0, -1.0])


def test_empty_sums() -> None:
    assert ev("(sumbuild 0 (lam (i : Integer) (tuple x 1)))", x=1.0) == (0.0, 0)
    with pytest.raises(KsEvalError, match="no defined size"):
        ev("(sumbuild 0 (lam (i : Integer) (build 2 (lam (j : Integer) x))))", x=1.0)


def test_let_shadowing_and_restoration() -> None:
    assert ev("(add (let (x (mul x 10.0)) x) x)", x=1.0) == 11.0
    assert ev("(let (a x) (let (a (add a 1.0)) (let (b a) (mul a b))))", x=1.0) == 4.0


def test_lambda_values_and_apply() -> None:
    prog = parse_program(
        """(def twice Float ((f : Lam Float Float) (x : Float)) (f (f x)))
           (def main Float ((y : Float)) (twice (lam (z : Float) (mul z y)) 3.0))""",
        "t.ks",
    )
    assert call_def(prog.defs["main"], 2.0) == 12.0


def test_runtime_errors() -> None:
    with pytest.raises(KsEvalError, match="out of range"):
        ev("(index 3 (build 2 (lam (i : Integer) x)))", x=1.0)
    with pytest.raises(KsEvalError, match="assertion failed"):
        ev("(assert (gt x 1.0) x)", x=0.0)
    with pytest.raises(KsEvalError, match="sizes 2 and 3"):
        ev("(add (build 2 (lam (i : Integer) x)) (build 3 (lam (i : Integer) x)))", x=1.0)
    prog = parse_program("(edef mystery Float (Float)) (def f Float ((x : Float)) (mystery x))", "t.ks")
    with pytest.raises(KsEvalError, match="no implementation"):
        call_def(prog.defs["f"], 1.0)
    with pytest.raises(KsEvalError, match="more than 50 steps"):
        Interpreter(max_steps=50).eval_expr(parse_expr("(sumbuild 1000 (lam (i : Integer) x))")[0], {"x": 1.0})


def test_sized_parameters_bind_their_sizes() -> None:
    prog = parse_program(
        "(def f Float ((x : Vec n Float) (y : Vec n Float)) (sumbuild n (lam (i : Integer) (mul (index i x) (index i y)))))",
        "t.ks",
    )
    assert call_def(prog.defs["f"], [1.0, 2.0], [3.0, 4.0]) == 11.0
    with pytest.raises(KsUsageError, match="already 2"):
        call_def(prog.defs["f"], [1.0, 2.0], [3.0])


def test_argument_checking() -> None:
    prog = parse_program("(def f Float ((x : Float) (t : Tuple Integer (Vec Float))) x)", "t.ks")
    assert call_def(prog.defs["f"], 1, (2, [1.0])) == 1.0
    with pytest.raises(KsUsageError, match="must be a Float"):
        call_def(prog.defs["f"], True, (2, [1.0]))
    with pytest.raises(KsUsageError, match="Integer"):
        call_def(prog.defs["f"], 1.0, (2.5, [1.0]))
    with pytest.raises(KsUsageError, match="vector"):
        call_def(prog.defs["f"], 1.0, (2, 3.0))


def test_calls_edefs_and_prelude() -> None:
    prog = parse_program(
        """(edef pow Float (Tuple Float Float))
           (edef abs Float (Float))
           (def sq Float ((x : Float)) (mul x x))
           (def f Float ((x : Float)) (add (sq (abs x)) (add$ff (pow x 2.0) (tanh 0.0))))""",
        "t.ks",
    )
    assert call_def(prog.defs["f"], -3.0) == 18.0


def test_deep_let_chain_evaluates() -> None:
    depth = 10_000
    text = "(def f Float ((x0 : Float)) " + " ".join(f"(let (x{i + 1} (add x{i} 1.0))" for i in range(depth))
    text += f" x{depth}" + ")" * depth + ")"
    assert call_def(parse_program(text, "deep.ks").defs["f"], 0.5) == depth + 0.5


# -- random arithmetic against Python --------------------------------------------------------------
def _py_div(a: float, b: float) -> float:
    if b == 0.0:
        return math.nan if a == 0.0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


leaves = st.sampled_from(["x", "y", "1.0", "2.5", "-0.5", "0.0"])


def _combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(st.sampled_from(["add", "sub", "mul", "div", "max"]), children, children).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})"
    )
    unary = st.tuples(st.sampled_from(["neg", "exp", "log", "tanh", "abs", "sqrt"]), children).map(
        lambda t: f"({t[0]} {t[1]})"
    )
    let = st.tuples(children, children).map(lambda t: f"(let (z {t[0]}) (add z {t[1]}))")
    cond = st.tuples(children, children, children).map(lambda t: f"(if (gt {t[0]} {t[1]}) {t[1]} {t[2]})")
    return st.one_of(binary, unary, let, cond)


expressions = st.recursive(leaves, _combine, max_leaves=12)


def _python(text: str, x: float, y: float) -> float:
    """Evaluate the same text with a tiny independent evaluator (Python semantics made IEEE)."""
    import sexpdata

    def go(s: object, env: dict[str, float]) -> float:
        if isinstance(s, sexpdata.Symbol):
            return env[s.value()]
        if isinstance(s, float | int):
            return float(s)
        assert isinstance(s, list)
        head = s[0].value()
        if head == "let":
            name = s[1][0].value()
            return go(s[2], {**env, name: go(s[1][1], env)})
        if head == "if":
            cond = s[1]
            return go(s[2], env) if go(cond[1], env) > go(cond[2], env) else go(s[3], env)
        args = [go(a, env) for a in s[1:]]
        fns = {
            "add": lambda a, b: a + b,
            "sub": lambda a, b: a - b,
            "mul": lambda a, b: a * b,
            "div": _py_div,
            "max": lambda a, b: b if a < b else a,
            "neg": lambda a: -a,
            "exp": lambda a: math.inf if a > 709 else math.exp(a),
            "log": lambda a: math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan),
            "tanh": math.tanh,
            "abs": abs,
            "sqrt": lambda a: math.sqrt(a) if a >= 0 else math.nan,
        }
        return float(fns[head](*args))

    return go(sexpdata.loads(text), {"x": x, "y": y})


@settings(max_examples=300, deadline=None)
@given(expressions, st.floats(-3, 3), st.floats(-3, 3))
def test_random_arithmetic_matches_python(text: str, x: float, y: float) -> None:
    e, _ = parse_expr(text)
    got = evaluate(e, {"x": x, "y": y})
    want = _python(text, x, y)
    assert isclose(got, want, rel=1e-12, abs_tol=1e-300) or (math.isinf(want) and got == want)
