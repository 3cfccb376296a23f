"""Expression graphs for the GGNN: nodes, typed edges, node features, batches and the cache."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch

from gnn.graph import (
    EDGE_TYPE_NAMES,
    IDENTICAL,
    NODE_TYPE_INDEX,
    NUM_EDGE_TYPES,
    NUM_NODE_TYPES,
    TO_CHILD,
    TO_PARENT,
    ExprGraph,
    batch_graphs,
    clear_graph_cache,
    expr_graph,
    graph_cache_info,
    squash,
)
from knossos import expr as E
from knossos.expr import Expr, node_at, preorder
from knossos.ops import BINDERS, Op
from knossos.parser import parse_expr, parse_program, read_source
from knossos.types import FLOAT

from conftest import PROGRAMS


def px(text: str) -> Expr:
    return parse_expr(text)[0]


def edges(g: ExprGraph, *types: int) -> set[tuple[int, int, int]]:
    """(source, target, type) of the edges of the given types (all edges if none)."""
    return {
        (int(s), int(d), int(t))
        for s, d, t in zip(g.edge_index[0], g.edge_index[1], g.edge_type, strict=True)
        if not types or t in types
    }


def reference_graph(root: Expr) -> tuple[list[int], set[tuple[int, int, int]]]:
    """Node types and edges computed the obvious way (explicit stack with each node's scope as a dict,
    dict of occurrences keyed by the node and the binders of its free variables)."""
    node_types: list[int] = []
    found: set[tuple[int, int, int]] = set()
    last: dict[tuple[int, tuple[tuple[str, int], ...]], int] = {}
    stack: list[tuple[Expr, int, int, dict[str, int]]] = [(root, -1, 0, {})]
    while stack:
        node, parent, position, scope = stack.pop()
        i = len(node_types)
        node_types.append(NODE_TYPE_INDEX[node.op])
        if parent >= 0:
            p = min(position, 3)
            found.add((parent, i, TO_CHILD + p))
            found.add((i, parent, TO_PARENT + p))
        key = (id(node), tuple(sorted((v, scope.get(v, -1)) for v in node.free)))
        previous = last.get(key)
        if previous is not None:
            found.add((previous, i, IDENTICAL))
            found.add((i, previous, IDENTICAL))
        last[key] = i
        inner = dict(scope)
        if node.op in BINDERS:
            inner[node.args[BINDERS[node.op][0]].data] = i
        scopes = [inner if node.op in BINDERS and k in BINDERS[node.op] else scope for k in range(len(node.args))]
        stack.extend((a, i, k, scopes[k]) for k, a in reversed(list(enumerate(node.args))))
    return node_types, found


def test_node_and_edge_types_are_numbered_densely() -> None:
    assert len(Op) == NUM_NODE_TYPES
    assert sorted(NODE_TYPE_INDEX.values()) == list(range(NUM_NODE_TYPES))
    assert set(NODE_TYPE_INDEX) == set(Op)
    assert NUM_EDGE_TYPES == 9
    assert len(EDGE_TYPE_NAMES) == NUM_EDGE_TYPES == len(set(EDGE_TYPE_NAMES))
    assert (TO_CHILD, TO_PARENT, IDENTICAL) == (0, 4, 8)
    assert EDGE_TYPE_NAMES[IDENTICAL] == "identical"


def test_small_expression() -> None:
    e = px("(let (a (add x 1.0)) (mul a (add x 1.0)))")
    g = expr_graph(e)
    # 0 let, 1 a, 2 (add x 1.0), 3 x, 4 1.0, 5 (mul ...), 6 a, 7 (add x 1.0), 8 x, 9 1.0
    assert g.num_nodes == 10 == e.size
    ops = [Op.LET, Op.VAR, Op.ADD, Op.VAR, Op.CONST, Op.MUL, Op.VAR, Op.ADD, Op.VAR, Op.CONST]
    assert g.node_type.tolist() == [NODE_TYPE_INDEX[op] for op in ops]
    assert g.node_type.dtype == np.int64 and g.node_value.dtype == np.float32
    assert g.edge_index.dtype == np.int64 and g.edge_type.dtype == np.int64
    assert g.edge_index.shape == (2, g.num_edges)
    # the let's binding occurrence and the use of its variable are one object
    assert node_at(e, 1) is node_at(e, 6)

    per_type = Counter(g.edge_type.tolist())
    assert [per_type[t] for t in range(NUM_EDGE_TYPES)] == [4, 4, 1, 0, 4, 4, 1, 0, 8]
    down = {(0, 1, 0), (0, 2, 1), (0, 5, 2), (2, 3, 0), (2, 4, 1), (5, 6, 0), (5, 7, 1), (7, 8, 0), (7, 9, 1)}
    assert edges(g, 0, 1, 2, 3) == down
    assert edges(g, 4, 5, 6, 7) == {(d, s, t + TO_PARENT) for s, d, t in down}
    same = {(2, 7), (3, 8), (4, 9), (1, 6)}  # (add x 1.0), x, 1.0 and a
    assert edges(g, IDENTICAL) == {(a, b, IDENTICAL) for a, b in same} | {(b, a, IDENTICAL) for a, b in same}
    assert g.num_edges == len(edges(g))  # no duplicates

    assert g.node_value[[4, 9]].tolist() == pytest.approx([math.log(2.0)] * 2)
    assert np.count_nonzero(g.node_value) == 2


def test_identical_occurrences_form_a_chain() -> None:
    g = expr_graph(px("(add (add x x) (mul x 2.0))"))
    # 0 add, 1 add, 2 x, 3 x, 4 mul, 5 x, 6 2.0
    assert edges(g, IDENTICAL) == {(2, 3, 8), (3, 2, 8), (3, 5, 8), (5, 3, 8)}


def test_identical_means_the_same_binders_not_the_same_names() -> None:
    # the free x and the x bound by the inner let are different variables; the let's two x are one
    g = expr_graph(px("(add (let (x 1.0) (mul x x)) x)"))
    # 0 add, 1 let, 2 x, 3 1.0, 4 mul, 5 x, 6 x, 7 x
    assert edges(g, IDENTICAL) == {(2, 5, 8), (5, 2, 8), (5, 6, 8), (6, 5, 8)}
    # shadowing: the inner use of y is the inner binder's, the outer use the outer one's
    g = expr_graph(px("(let (y 2.0) (add y (let (y 3.0) y)))"))
    # 0 let, 1 y, 2 2.0, 3 add, 4 y, 5 let, 6 y, 7 3.0, 8 y
    assert edges(g, IDENTICAL) == {(1, 4, 8), (4, 1, 8), (6, 8, 8), (8, 6, 8)}
    # an open subexpression is one only where its free variables are bound by the same binders
    e = px("(tuple (let (a 1.0) (add a 1.0)) (let (b 1.0) (add b 1.0)))")
    adds = [i for i, n in enumerate(preorder(e)) if n.op is Op.ADD]
    assert len(adds) == 2 and node_at(e, adds[0]) is node_at(e, adds[1])  # one node, named alike
    linked = {(s, d) for s, d, _ in edges(expr_graph(e), IDENTICAL)}
    assert (adds[0], adds[1]) not in linked
    # (the two lets themselves are closed and alpha-equivalent: one subexpression)
    assert (1, 1 + node_at(e, 1).size) in linked


def test_graph_does_not_depend_on_which_alpha_variant_was_built_first() -> None:
    # binders are interned modulo alpha: after (let (b 1.0) b) exists, parsing (let (a 1.0) a) returns
    # that node, named b.  The graph of the whole expression must come out the same either way.
    clear_graph_cache()
    text = "(add (let (a 1.0) (mul a x)) (let (x 2.0) (mul x x)))"
    fresh = expr_graph(px(text))
    clear_graph_cache()
    keep = [px("(let (x 1.0) (mul x x))"), px("(let (a 2.0) (mul a a))")]  # alive until the end
    renamed = px(text)
    assert str(renamed) != text  # the interned variants' names were used
    again = expr_graph(renamed)
    for a, b in zip(
        (fresh.node_type, fresh.node_value, fresh.edge_index, fresh.edge_type),
        (again.node_type, again.node_value, again.edge_index, again.edge_type),
        strict=True,
    ):
        assert np.array_equal(a, b)
    del keep


def test_positions_from_three_share_an_edge_type() -> None:
    g = expr_graph(px("(tuple p q r s t)"))
    assert g.node_type.tolist() == [NODE_TYPE_INDEX[Op.TUPLE]] + [NODE_TYPE_INDEX[Op.VAR]] * 5
    assert edges(g, 0, 1, 2, 3) == {(0, 1, 0), (0, 2, 1), (0, 3, 2), (0, 4, 3), (0, 5, 3)}
    assert edges(g, 4, 5, 6, 7) == {(1, 0, 4), (2, 0, 5), (3, 0, 6), (4, 0, 7), (5, 0, 7)}
    assert edges(g, IDENTICAL) == set()


def test_build_positions_count_the_index_variable() -> None:
    e = px("(build 4 (lam (i : Integer) (to_float i)))")
    g = expr_graph(e)
    kinds = [n.op for n in preorder(e)]
    assert kinds[0] is Op.BUILD
    assert g.node_type.tolist() == [NODE_TYPE_INDEX[op] for op in kinds]
    # build (n, var, body): the size, the index variable and the body at positions 0, 1, 2
    assert {(s, d, t) for s, d, t in edges(g, 0, 1, 2) if s == 0} == {(0, 1, 0), (0, 2, 1), (0, 3, 2)}


def test_constant_values_are_squashed() -> None:
    e = px("(if (gt x -3.0) (to_float 5) (if true 0.0 x))")
    g = expr_graph(e)
    values = {n.data: float(g.node_value[i]) for i, n in enumerate(preorder(e)) if n.op is Op.CONST}
    assert values[-3.0] == pytest.approx(-math.log1p(3.0))
    assert values[5] == pytest.approx(math.log1p(5.0))
    assert values[True] == pytest.approx(math.log(2.0))
    assert values[0.0] == 0.0
    assert all(g.node_value[i] == 0.0 for i, n in enumerate(preorder(e)) if n.op is not Op.CONST)
    assert squash(10**400) == pytest.approx(400 * math.log(10))
    assert squash(-(10**400)) == pytest.approx(-400 * math.log(10))
    assert squash(False) == 0.0


def test_graphs_of_programs_match_a_reference_construction() -> None:
    program = parse_program(read_source(PROGRAMS / "gmm_test.kso"))
    checked = 0
    for d in program.defs.values():
        g = expr_graph(d.body)
        node_types, expected = reference_graph(d.body)
        assert g.node_type.tolist() == node_types
        assert edges(g) == expected
        assert g.num_edges == len(expected)
        checked += 1
    assert checked > 0
    # and by node numbers: a to_child edge of position p < 3 goes to the p-th child
    body = max((d.body for d in program.defs.values()), key=lambda b: b.size)
    g = expr_graph(body)
    for (s, d), t in zip(g.edge_index.T.tolist(), g.edge_type.tolist(), strict=True):
        if TO_CHILD <= t < TO_CHILD + 3:
            assert node_at(body, s).args[t - TO_CHILD] is node_at(body, d)
        elif t == IDENTICAL:
            assert node_at(body, s) is node_at(body, d)


def test_edge_order_is_deterministic() -> None:
    e = px("(mul (add x 1.0) (add (add x 1.0) (add x 1.0)))")
    first = expr_graph(e)
    clear_graph_cache()
    again = expr_graph(e)
    assert again is not first
    for a, b in zip(
        (first.node_type, first.node_value, first.edge_index, first.edge_type),
        (again.node_type, again.node_value, again.edge_index, again.edge_type),
        strict=True,
    ):
        assert np.array_equal(a, b)
    # tree edges first, by child number; then identical pairs
    n = first.num_nodes
    assert first.edge_index[1, : n - 1].tolist() == list(range(1, n))
    assert first.edge_index[0, n - 1 : 2 * (n - 1)].tolist() == list(range(1, n))


def test_batch_of_three_graphs() -> None:
    exprs = [px("(let (a (add x 1.0)) (mul a (add x 1.0)))"), px("(tuple p q r s t)"), px("(exp (neg y))")]
    graphs = [expr_graph(e) for e in exprs]
    b = batch_graphs(exprs)
    assert b.num_graphs == 3
    sizes = [g.num_nodes for g in graphs]
    assert b.num_nodes == sum(sizes) == 10 + 6 + 3
    assert b.batch.tolist() == [0] * 10 + [1] * 6 + [2] * 3
    assert b.node_type.dtype == torch.long and b.edge_index.dtype == torch.long
    assert b.edge_type.dtype == torch.long and b.batch.dtype == torch.long
    assert b.node_value.dtype == torch.float32
    assert b.edge_index.shape == (2, sum(g.num_edges for g in graphs))
    start = edge_start = 0
    for k, g in enumerate(graphs):
        stop, edge_stop = start + g.num_nodes, edge_start + g.num_edges
        part = b.edge_index[:, edge_start:edge_stop]
        assert bool(((part >= start) & (part < stop)).all())  # graph k's edges stay in its node range
        assert np.array_equal(part.numpy() - start, g.edge_index)
        assert np.array_equal(b.edge_type[edge_start:edge_stop].numpy(), g.edge_type)
        assert np.array_equal(b.node_type[start:stop].numpy(), g.node_type)
        assert np.array_equal(b.node_value[start:stop].numpy(), g.node_value)
        assert bool((b.batch[start:stop] == k).all())
        start, edge_start = stop, edge_stop
    # the batch owns its memory: writing to it leaves the cached graphs alone
    b.edge_index.zero_()
    assert expr_graph(exprs[2]).edge_index.max() > 0


def test_empty_batch() -> None:
    b = batch_graphs([])
    assert b.num_graphs == 0 and b.num_nodes == 0
    assert b.edge_index.shape == (2, 0) and b.edge_index.dtype == torch.long


def test_deep_expressions_without_recursion() -> None:
    x, y = E.var("x", FLOAT), E.var("y", FLOAT)
    depth = 50_000
    e = x
    for _ in range(depth):
        e = E.op(Op.ADD, e, y)
    g = expr_graph(e)
    assert g.num_nodes == 2 * depth + 1
    counts = Counter(g.edge_type.tolist())
    assert counts[TO_CHILD] == counts[TO_CHILD + 1] == depth
    assert counts[IDENTICAL] == 2 * (depth - 1)  # the chain of the depth occurrences of y
    # nodes 0..depth-1 are the adds, outermost first; node depth is x, the innermost add's left child
    assert (depth - 1, depth, TO_CHILD) in edges(g, TO_CHILD)
    assert g.node_type[depth] == NODE_TYPE_INDEX[Op.VAR] and g.node_type[depth - 1] == NODE_TYPE_INDEX[Op.ADD]
    chain = y
    for i in range(depth // 5):
        chain = E.let(E.var(f"g{i}", FLOAT), E.op(Op.ADD, x, E.const(float(i))), chain)
    b = batch_graphs([e, chain])
    assert b.num_nodes == e.size + chain.size


def test_cache_returns_the_same_graph() -> None:
    e = px("(div (mul x y) (add 1.0 (mul x y)))")
    g = expr_graph(e)
    assert expr_graph(e) is g
    assert expr_graph(px("(div (mul x y) (add 1.0 (mul x y)))")) is g  # interned: the same expression
    graphs, nodes = graph_cache_info()
    assert graphs >= 1 and nodes >= g.num_nodes
    for array in (g.node_type, g.node_value, g.edge_index, g.edge_type):
        assert not array.flags.writeable
    clear_graph_cache()
    assert graph_cache_info() == (0, 0)
    assert expr_graph(e) is not g
