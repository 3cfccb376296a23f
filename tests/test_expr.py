"""Expression nodes: interning, alpha-equivalence, cached facts, numbering and rebuilding."""

from __future__ import annotations

import gc
import pickle

import pytest

from knossos import expr as E
from knossos.callee import edef_callee
from knossos.errors import KsTypeError
from knossos.ops import Op
from knossos.parser import parse_expr
from knossos.types import BOOL, FLOAT, INTEGER, tuple_of, vec

x = E.var("x", FLOAT)
y = E.var("y", FLOAT)


def px(text: str) -> E.Expr:
    return parse_expr(text)[0]


def test_identical_nodes_are_built_once() -> None:
    a = E.op(Op.ADD, x, E.const(1.0))
    b = E.op(Op.ADD, E.var("x", FLOAT), E.const(1.0))
    assert a is b
    assert px("(mul (add x 1.0) y)") is px("(mul (add x 1.0)   y)")


def test_constants_distinguish_type_and_sign() -> None:
    assert E.const(1) is not E.const(1.0)
    assert E.const(1) is not E.const(True)
    assert E.const(0.0) is not E.const(-0.0)
    assert E.const(1).type is INTEGER and E.const(1.0).type is FLOAT and E.const(True).type is BOOL


def test_nonfinite_float_literal_is_refused() -> None:
    with pytest.raises(KsTypeError):
        E.const(float("inf"))


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("(let (a (add x 1.0)) (mul a a))", "(let (b (add x 1.0)) (mul b b))"),
        ("(let (a x) (let (b y) (sub a b)))", "(let (p x) (let (q y) (sub p q)))"),
        ("(build 4 (lam (i : Integer) (to_float i)))", "(build 4 (lam (j : Integer) (to_float j)))"),
        (
            "(sumbuild 3 (lam (i : Integer) (sumbuild 3 (lam (j : Integer) (to_float (sub i j))))))",
            "(sumbuild 3 (lam (a : Integer) (sumbuild 3 (lam (b : Integer) (to_float (sub a b))))))",
        ),
        # shadowing on one side only
        ("(let (a x) (let (a (add a 1.0)) a))", "(let (a x) (let (b (add a 1.0)) b))"),
    ],
)
def test_alpha_equivalent_expressions_are_the_same_node(left: str, right: str) -> None:
    a, b = px(left), px(right)
    assert a is b
    assert a == b and hash(a) == hash(b)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("(let (a x) (let (b y) (sub a b)))", "(let (a x) (let (b y) (sub b a)))"),
        # inner binder captures differently
        (
            "(sumbuild 3 (lam (i : Integer) (sumbuild 3 (lam (j : Integer) (to_float (sub i j))))))",
            "(sumbuild 3 (lam (i : Integer) (sumbuild 3 (lam (j : Integer) (to_float (sub j i))))))",
        ),
        # free variable versus bound variable of the same name
        ("(let (a 1.0) (add a x))", "(let (x 1.0) (add x x))"),
        ("(let (a x) a)", "(let (a y) a)"),
    ],
)
def test_different_expressions_are_different(left: str, right: str) -> None:
    assert px(left) is not px(right)
    assert px(left) != px(right)


def test_alpha_variant_keeps_free_variables_right() -> None:
    # (lam (x) y) is not (lam (y) y): renaming must not capture
    a = E.lam(E.var("x", FLOAT), y)
    b = E.lam(E.var("y", FLOAT), y)
    assert a is not b
    assert a.free == {"y"} and b.free == frozenset()


def test_hash_is_stable_across_processes() -> None:
    import subprocess
    import sys

    code = "from knossos.parser import parse_expr; print(hash(parse_expr('(let (a (add x 1.0)) (mul a y))')[0]))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONHASHSEED": seed}, check=True
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1


def test_cached_facts() -> None:
    e = px("(let (a (add x 1.0)) (build 16 (lam (i : Integer) (mul a (to_float i)))))")
    assert e.type is vec(FLOAT)
    assert e.free == {"x"}
    assert e.size == len(list(E.preorder(e)))
    # let 0.1 + add 1 + build(2 + 16 * (mul 2 + to_float 1))
    assert e.cost == pytest.approx(0.1 + 1 + 2 + 16 * 3)


def test_ill_typed_nodes_cannot_be_built() -> None:
    with pytest.raises(KsTypeError, match="cannot combine"):
        E.op(Op.ADD, x, E.const(1))
    with pytest.raises(KsTypeError, match="condition"):
        E.op(Op.IF, x, x, x)
    with pytest.raises(KsTypeError, match="branches"):
        E.op(Op.IF, E.const(True), x, E.const(1))
    with pytest.raises(KsTypeError):
        E.get(3, 2, E.tuple_(x, y))
    with pytest.raises(KsTypeError, match="declared"):
        E.let(E.var("a", INTEGER), x, x)


def test_broadcasting_types() -> None:
    v = E.var("v", vec(FLOAT))
    t = E.var("t", tuple_of(FLOAT, vec(FLOAT)))
    assert E.op(Op.MUL, x, v).type is vec(FLOAT)
    assert E.op(Op.MUL, v, x).type is vec(FLOAT)
    assert E.op(Op.ADD, t, t).type is t.type
    assert E.op(Op.MUL, x, t).type is t.type
    with pytest.raises(KsTypeError):
        E.op(Op.ADD, v, E.var("m", vec(vec(FLOAT))))


def test_expressions_are_immutable() -> None:
    with pytest.raises(AttributeError):
        x.cost = 3.0  # type: ignore[misc]


def test_preorder_numbering_and_node_at() -> None:
    e = px("(add (mul x y) (neg x))")
    nodes = list(E.preorder(e))
    assert [n.op for n in nodes] == [Op.ADD, Op.MUL, Op.VAR, Op.VAR, Op.NEG, Op.VAR]
    for i, n in enumerate(nodes):
        assert E.node_at(e, i) is n
    with pytest.raises(IndexError):
        E.node_at(e, len(nodes))


def test_replace_at_rebuilds_ancestors() -> None:
    e = px("(add (mul x y) (neg x))")
    new = E.replace_at(e, 4, y)
    assert new is px("(add (mul x y) y)")
    assert E.replace_at(e, 0, x) is x
    assert E.replace_at(e, 1, lambda old: E.op(Op.MUL, old.args[1], old.args[0])) is px("(add (mul y x) (neg x))")


def test_nodes_are_freed_when_unused() -> None:
    gc.collect()
    before = E.live_nodes()
    e = px("(add (mul qq_unique_1 qq_unique_2) 7.5)")
    assert E.live_nodes() > before
    del e
    gc.collect()
    assert E.live_nodes() == before


def test_pickle_round_trip_preserves_identity() -> None:
    e = px("(let (a (add x 1.0)) (tuple a (build 3 (lam (i : Integer) (mul a (to_float i))))))")
    assert pickle.loads(pickle.dumps(e)) is e


def test_deep_expressions_hash_type_cost_without_recursion() -> None:
    depth = 10_000
    e = x
    for _ in range(depth):
        e = E.op(Op.ADD, e, y)
    assert e.size == 2 * depth + 1
    assert e.cost == depth
    assert e.type is FLOAT
    assert hash(e) == e.alpha_hash
    chain = y
    for i in range(depth):
        chain = E.let(E.var(f"v{i}", FLOAT), E.op(Op.ADD, x, E.const(float(i))), chain)
    assert chain.free == {"x", "y"}
    assert pickle.loads(pickle.dumps(chain)) is chain


def test_a_binder_stays_one_node_when_an_earlier_one_of_its_hash_dies() -> None:
    """Two edefs of one name and signature hash alike (the hash reads no costs), so binders over
    calls of each share an alpha-hash chain.  When the first dies, the second must still be found,
    by make and by the rebuild of an ancestor (the C loop where it is built), not built twice."""
    cheap, dear = edef_callee("f", (FLOAT,), FLOAT, 1.0), edef_callee("f", (FLOAT,), FLOAT, 2.0)
    x, y = E.var("x", FLOAT), E.var("y", FLOAT)
    first = E.let(y, E.call(cheap, x), y)
    second = E.let(y, E.call(dear, x), y)
    assert first is not second and hash(first) == hash(second)
    del first
    gc.collect()
    assert E.let(y, E.call(dear, x), y) is second
    with_literal = E.let(y, E.call(dear, x), E.const(1.0))  # nodes: let, y, call, x, the body
    assert E.replace_at(with_literal, 4, y) is second
