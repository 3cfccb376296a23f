"""Parsing and type-checking each construct of the language, with error positions."""

from __future__ import annotations

import pytest

from knossos.errors import KsError, KsSyntaxError, KsTypeError, Pos
from knossos.ops import Op
from knossos.parser import parse_expr, parse_program
from knossos.types import BOOL, FLOAT, INTEGER, Kind, lam_type, tuple_of, vec


def ty(text: str) -> object:
    return parse_expr(text)[0].type


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", INTEGER),
        ("-12", INTEGER),
        ("1.5", FLOAT),
        ("-4.4715e-2", FLOAT),
        ("1e3", FLOAT),
        (".5", FLOAT),
        ("true", BOOL),
        ("(add x 1.0)", FLOAT),
        ("(eq 1 2)", BOOL),
        ("(ne x x)", BOOL),
        ("(lte 1.0 x)", BOOL),
        ("(and true (or false (gt x 0.0)))", BOOL),
        ("(to_float 3)", FLOAT),
        ("(abs -3)", INTEGER),
        ("(max x 2.0)", FLOAT),
        ("(pow x 2.0)", FLOAT),
        ("(tanh x)", FLOAT),
        ("(sqrt x)", FLOAT),
        ("(build 3 (lam (i : Integer) x))", vec(FLOAT)),
        ("(build 3 (lam i (to_float i)))", vec(FLOAT)),
        ("(sumbuild 3 (lam (i : Integer) (tuple x 1)))", tuple_of(FLOAT, INTEGER)),
        ("(index 0 (build 3 (lam (i : Integer) x)))", FLOAT),
        ("(size (constVec 3 x))", INTEGER),
        ("(deltaVec 3 1 x)", vec(FLOAT)),
        ("(sum (build 3 (lam (i : Integer) x)))", FLOAT),
        ("(tuple)", tuple_of()),
        ("(get$1$2 (tuple x 1))", FLOAT),
        ("(select (tuple x 1) 1)", INTEGER),
        ("(if (gt x 0.0) x 0.0)", FLOAT),
        ("(assert (gt x 0.0) 1)", INTEGER),
        ("(let (a 1) (add a 2))", INTEGER),
        ("(let ((a 1) (b (add a 1))) (mul a b))", INTEGER),
        ("(let a 1.0 (add a x))", FLOAT),
        ("(lam (z : Float) (mul z x))", lam_type(FLOAT, FLOAT)),
        ("(mul 2.0 (build 3 (lam (i : Integer) x)))", vec(FLOAT)),
    ],
)
def test_types_of_constructs(text: str, expected: object) -> None:
    assert ty(text) is expected


@pytest.mark.parametrize(
    ("text", "message", "pos"),
    [
        ("(add x 1)", "cannot combine Float and Integer", (1, 1)),
        ("(let (a 1) (add a 1.0))", "cannot combine Integer and Float", (1, 12)),
        ("(if 1 x x)", "condition of 'if' must be Bool", (1, 1)),
        ("(if true x 1)", "different types", (1, 1)),
        ("(index x (build 2 (lam (i : Integer) x)))", "must be an Integer", (1, 1)),
        ("(size x)", "must be a vector", (1, 1)),
        ("(get$3$2 (tuple x x))", "between 1 and 2", (1, 2)),
        ("(get$1$3 (tuple x x))", "tuple of 3 elements", (1, 1)),
        ("(select (tuple x x) 2)", "out of range", (1, 21)),
        ("(add x)", "takes 2 argument(s), not 1", (1, 1)),
        ("(exp 1)", "needs Float", (1, 1)),
        ("(foo x)", "unknown function 'foo'", (1, 2)),
        ("(let (a 1.0) (a 2.0))", "variable of type Float, not a function", (1, 15)),
        ("(build 3 (lam (i : Float) x))", "must be an Integer", (1, 15)),
        ("(let (let 1) x)", "built-in name", (1, 7)),
        ("()", "empty form", (1, 1)),
        ("(1 2)", "expected an operator", (1, 2)),
        ("(lam (z : Foo) z)", "unknown type 'Foo'", (1, 11)),
    ],
)
def test_type_and_form_errors_have_positions(text: str, message: str, pos: tuple[int, int]) -> None:
    with pytest.raises(KsError) as info:
        parse_expr(text)
    assert message in info.value.message
    assert info.value.pos == Pos(*pos)
    assert info.value.render().startswith(f"<expr>:{pos[0]}:{pos[1]}: error: ")


def test_programs_defs_edefs_and_calls() -> None:
    prog = parse_program(
        """
        (edef dotv Float ((Vec Float) (Vec Float)))
        (edef pow Float (Tuple Float Float))
        (edef nothing Float ())
        (def cost$pow Float ((x : Float) (p : Float)) 10.0)
        (def sq Float (x : Float) (mul x x))
        (def norm Float ((v : Vec Float)) (pow (dotv v v) 0.5))
        (def f Float ((v : Vec Float)) (add (sq (norm v)) (nothing)))
        """,
        "p.ks",
    )
    assert list(prog.defs) == ["cost$pow", "sq", "norm", "f"]
    assert [d.name for d in prog.targets] == ["sq", "norm", "f"]
    assert prog.edefs["dotv"].param_types == (vec(FLOAT), vec(FLOAT))
    assert prog.edefs["pow"].param_types == (FLOAT, FLOAT)
    assert prog.edefs["nothing"].param_types == ()
    assert [d.name for d in prog.closure("f")] == ["sq", "norm", "f"]
    # the cost$ declaration prices pow: call overhead 2.1 + 10
    pow_call = prog.defs["norm"].body
    assert pow_call.op is Op.CALL and pow_call.data.body_cost == 10.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("(def f Float ((x : Float)) x) (def f Float ((x : Float)) x)", "already defined"),
        ("(def f Float ((x : Float) (x : Float)) x)", "appears twice"),
        ("(def f Integer ((x : Float)) x)", "declared to return Integer"),
        ("(def g Float ((x : Float)) (f x)) (def f Float ((x : Float)) x)", "unknown function 'f'"),
        ("(def f Float ((x : Float)) (f x))", "unknown function 'f'"),
        ("(def add Float ((x : Float)) x)", "built-in"),
        ("(edef let Float (Float))", "built-in"),
        ("(def f Float ((x : Float)) y)", "undefined variable 'y'"),
        ("(def g Float ((x : Float)) x) (def f Float ((x : Float)) g)", "is a function"),
        ("(def f Float ((x : Float)))", "a def is"),
        ("(add 1 2)", "expected (def ...) or (edef ...)"),
        ("(def f Float ((n : Integer) (x : Vec n Float)) x)", "names both"),
        ("(def f Float ((x : Float)) (def g Float ((y : Float)) y))", "only allowed at the top level"),
    ],
)
def test_program_errors(text: str, message: str) -> None:
    with pytest.raises((KsTypeError, KsSyntaxError)) as info:
        parse_program(text, "p.ks")
    assert message in info.value.message
    assert info.value.file == "p.ks"


def test_edef_may_redeclare_math_primitives() -> None:
    prog = parse_program("(edef tanh Float (Float)) (def f Float ((x : Float)) (tanh x))", "p.ks")
    assert prog.defs["f"].body.op is Op.CALL
    plain = parse_program("(def f Float ((x : Float)) (tanh x))", "p.ks")
    assert plain.defs["f"].body.op is Op.TANH


def test_param_type_forms() -> None:
    prog = parse_program(
        """(def f Float ((a : Vec (Vec Float)) (b : (Vec Float)) (c : Vec n Float) (d : Tuple Float Integer)
                         (e : Lam Float Float)) 1.0)""",
        "p.ks",
    )
    types = [p.type for p in prog.defs["f"].params]
    assert types == [vec(vec(FLOAT)), vec(FLOAT), vec(FLOAT), tuple_of(FLOAT, INTEGER), lam_type(FLOAT, FLOAT)]
    assert prog.defs["f"].size_vars == ("n",)
    assert types[4].kind is Kind.LAM


def test_names_with_special_characters_round_trip() -> None:
    from knossos.printer import format_program

    text = r"(def f\ \(odd\) Float ((a\;b : Float) (c\\d : Float)) (add a\;b c\\d))"
    prog = parse_program(text, "p.ks")
    assert list(prog.defs) == ["f (odd)"]
    assert [p.name for p in prog.defs["f (odd)"].params] == ["a;b", "c\\d"]
    again = parse_program(format_program(prog), "again.ks")
    assert again.defs["f (odd)"] == prog.defs["f (odd)"]
