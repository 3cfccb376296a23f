"""The reference cost model, op by op, and the size-aware model."""

from __future__ import annotations

import pytest

from knossos.errors import KsUsageError
from knossos.parser import load_program, parse_expr, parse_program
from knossos.sized_cost import SizedCost, parse_sizes, sized_def_cost

from conftest import PROGRAM_FILES, PROGRAMS


def cost(text: str) -> float:
    return parse_expr(text)[0].cost


V = "(build 16 (lam (i : Integer) x))"  # a vector: 2 + 16 * 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x", 0.0),
        ("1.0", 0.0),
        ("(add x y)", 1.0),
        ("(sub x y)", 1.0),
        ("(mul x y)", 2.0),
        ("(div x y)", 2.0),
        ("(neg x)", 1.0),  # the reference's (sub 0.0 x)
        ("(exp x)", 4.0),
        ("(log x)", 4.0),
        ("(eq x y)", 1.0),
        ("(lt x y)", 1.0),
        ("(and (gt x y) (gte x y))", 3.0),  # as an if: 1 + condition + branch
        ("(to_float 1)", 1.0),
        ("(let (a (mul x y)) a)", 2.1),
        ("(tuple x y (mul x y))", 2.3),
        ("(get$1$2 (tuple x y))", 0.2),
        ("(if (gt x y) (mul x y) x)", 1 + 1 + 2 + 0.0001 * 0),
        ("(if (gt x y) (mul x y) (add x y))", 1 + 1 + 2 + 0.0001 * 1),
        (V, 2.0),
        ("(build 16 (lam (i : Integer) (mul x x)))", 2 + 16 * 2),
        ("(sumbuild 16 (lam (i : Integer) (mul x x)))", 16 * 2 + 15),
        ("(sumbuild 16 (lam (i : Integer) (tuple x x)))", 16 * 0.2 + 15 * 2),
        (f"(index 0 {V})", 3.0),
        (f"(size {V})", 3.0),
        (f"(sum {V})", 17.0),
        ("(constVec 16 x)", 2.0),
        ("(deltaVec 16 0 x)", 2.0),
        (f"(mul x {V})", 2 + 2 * 16 + 2),  # broadcast: 2 per element + malloc
        (f"(add {V} {V})", 2 + 2 + 16 + 2),
        ("(add (tuple x y) (tuple y x))", 0.2 + 0.2 + 2 + 2),  # a 2-element tuple counts as a structure
        ("(assert (gt x y) x)", 2.0),
    ],
)
def test_reference_costs(text: str, expected: float) -> None:
    assert cost(text) == pytest.approx(expected)


def test_call_costs() -> None:
    prog = parse_program(
        """(edef e1 Float (Float))
           (edef e2 Float (Float))
           (def cost$e2 Float ((x : Float)) 5.0)
           (def sq Float ((x : Float)) (mul x x))
           (def both Float ((x : Float) (y : Float)) (add (e1 x) (e2 y)))
           (def f Float ((x : Float)) (add (sq x) (both x x)))""",
        "c.ks",
    )
    assert prog.defs["sq"].body.cost == 2.0
    # e1: call 2 + default edef 7; e2: call 2 + declared 5; add 1
    assert prog.defs["both"].body.cost == pytest.approx(1 + 9 + 7)
    # sq call: 2 + 2; both call: 2 + 0.2 (argument tuple) + 17 + 0.2 (unpacking two parameters)
    assert prog.defs["f"].body.cost == pytest.approx(1 + 4 + 2.2 + 17.2)
    # the def as the reference costed it: one let per def in its closure, plus its own unpacking
    assert prog.def_cost("f") == pytest.approx(0.1 * 3 + prog.defs["f"].body.cost)
    assert prog.def_cost("both") == pytest.approx(0.1 + 0.2 + 17)


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda p: p.name)
def test_sized_cost_without_sizes_is_the_reference(path: object) -> None:
    prog = load_program(path)  # type: ignore[arg-type]
    for d in prog.targets:
        assert sized_def_cost(prog, d.name, {}) == pytest.approx(prog.def_cost(d.name), rel=1e-9)


def test_sized_cost_scales_with_real_sizes() -> None:
    prog = load_program(PROGRAMS / "blas_test.kso")
    costs = {n: sized_def_cost(prog, "gemm", {"a": (n, n), "b": (n, n), "c": (n, n)}) for n in (16, 32, 64)}
    assert costs[16] == pytest.approx(prog.def_cost("gemm"))
    # the matrix product dominates: cost grows nearly 8x per doubling
    assert 7.0 < costs[64] / costs[32] < 8.5
    # the size of one vector parameter propagates through size and build
    dot = {n: sized_def_cost(prog, "dot", {"x": n}) for n in (100, 1000)}
    assert dot[1000] > 9 * dot[100]


def test_sized_vectors_in_signatures() -> None:
    prog = parse_program(
        "(def f Float ((x : Vec n Float)) (sumbuild n (lam (i : Integer) (mul (index i x) (index i x)))))", "s.ks"
    )
    # sumbuild n: n * (mul 2 + 2 index) + (n - 1) adds; plus the def's let
    assert sized_def_cost(prog, "f", {"n": 1000}) == pytest.approx(0.1 + 1000 * 4 + 999)
    assert sized_def_cost(prog, "f", {"x": 10}) == pytest.approx(0.1 + 10 * 4 + 9)


def test_literal_sizes_are_used() -> None:
    e, _ = parse_expr("(build 1000 (lam (i : Integer) (mul x x)))")
    c, shape = SizedCost().cost(e, {"x": None})
    assert c == 2 + 1000 * 2
    assert shape is not None and getattr(shape, "length", None) == 1000
    assert e.cost == 2 + 16 * 2


def test_bad_sizes() -> None:
    with pytest.raises(KsUsageError, match="bad size"):
        parse_sizes(["n=ten"])
    with pytest.raises(KsUsageError, match="bad size"):
        parse_sizes(["=3"])
    assert parse_sizes(["n=3", "m=2x5"]) == {"n": 3, "m": (2, 5)}
    prog = load_program(PROGRAMS / "blas_test.kso")
    with pytest.raises(KsUsageError, match="more dimensions"):
        sized_def_cost(prog, "dot", {"x": (3, 3)})
    with pytest.raises(KsUsageError, match="cannot be given"):
        sized_def_cost(prog, "scal", {"a": 3})
