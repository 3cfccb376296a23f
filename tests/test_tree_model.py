"""The tree value network: features, the level plan, torch and numpy agreeing, the embedding cache,
fitting, checkpoints and search."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from gnn.model import ModelConfig, ValueNetwork
from gnn.model_file import network_from, save_model_file, value_function_from_file
from gnn.networks import build_network, value_function
from gnn.sample import Sample
from gnn.tree_features import NUM_FEATURES, node_features, plan, postorder_new
from gnn.tree_model import TreeValueNetwork
from gnn.tree_value import TreeValue
from gnn.value import NetworkValue
from knossos.errors import KsUsageError
from knossos.expr import Expr, preorder
from knossos.parser import parse_expr
from rules.sets import get_rule_set
from search.astar import astar
from search.result import SearchResult
from search.spec import SearchSpec
from training.fit import Fitter

EXPRS = [
    "(div (div 1.0 x) (add 1.0 (div 1.0 x)))",
    "(mul (div x y) (div x y))",
    "(add x 1.0)",
    "(let (a (mul x y)) (add a (div 1.0 a)))",
    "(div (mul x y) (add 1.0 (mul x y)))",
    "(let (b (add x 2.0)) (mul y 3.0))",
]


def px(text: str) -> Expr:
    return parse_expr(text)[0]


def tree_network(seed: int = 0, hidden: int = 48, depth: int = 5) -> TreeValueNetwork:
    torch.manual_seed(seed)
    return TreeValueNetwork(ModelConfig(hidden=hidden, depth=depth, kind="tree")).eval()


@pytest.fixture(scope="module")
def exprs() -> list[Expr]:
    return [px(t) for t in EXPRS]


# -- features ------------------------------------------------------------------------------------------
def test_features_mark_identical_children_and_shared_variables() -> None:
    same, shared, apart = px("(div (add x y) (add x y))"), px("(div (add x y) (mul x 2.0))"), px("(div x y)")
    assert node_features(same).shape == (NUM_FEATURES,)
    assert node_features(same)[9] == 1 and node_features(same)[12] == 1
    assert node_features(shared)[9] == 0 and node_features(shared)[12] == 1
    assert node_features(apart)[9] == 0 and node_features(apart)[12] == 0


def test_features_count_the_uses_of_a_bound_variable() -> None:
    uses = {text: node_features(px(text))[15:19].tolist() for text in EXPRS if text.startswith("(let")}
    assert uses["(let (a (mul x y)) (add a (div 1.0 a)))"] == [0, 0, 1, 0]  # twice
    assert uses["(let (b (add x 2.0)) (mul y 3.0))"] == [1, 0, 0, 0]  # never: a dead let
    assert node_features(px("(add x 1.0)"))[15:19].tolist() == [0, 0, 0, 0]  # not a binder


def test_features_carry_cost_size_and_constant() -> None:
    e = px("(add x 1.0)")
    f = node_features(e)
    assert f[1] == pytest.approx(np.log1p(e.cost) / 10) and f[2] == pytest.approx(np.log1p(3) / 5)
    assert node_features(e.args[1])[0] == pytest.approx(np.log1p(1.0))


# -- the plan --------------------------------------------------------------------------------------------
def test_postorder_puts_children_first_and_skips_known_nodes(exprs: list[Expr]) -> None:
    new = postorder_new(exprs, set())
    assert len(new) == len({n for e in exprs for n in preorder(e)})  # each distinct node once
    level = dict(new)
    for node, lv in new:
        assert all(level[a] < lv for a in node.args)
        assert lv == max((level[a] + 1 for a in node.args), default=0)
    known = {exprs[0].args[1]}
    assert exprs[0].args[1] not in dict(postorder_new(exprs[:1], known))


def test_plan_rows_are_contiguous_by_level_and_point_at_known_rows(exprs: list[Expr]) -> None:
    first = plan(exprs[:2], {}, 1)
    rows = {node: row for row, node in enumerate(first.nodes, start=1)}
    second = plan(exprs, rows, 1 + len(rows))
    assert not set(second.nodes) & set(rows)
    assert second.roots[1] == rows[exprs[1]]  # a known root reads its row
    next_row = second.first_row
    for level in second.levels:
        assert (level.slots < next_row + len(level.ops)).all()
        assert (level.slots < next_row).all()  # children are known or on lower levels
        next_row += len(level.ops)


# -- torch and numpy ---------------------------------------------------------------------------------
def test_torch_and_numpy_inference_agree(exprs: list[Expr]) -> None:
    net = tree_network()
    with torch.no_grad():
        wanted = net.predict(exprs).numpy()
    assert wanted.shape == (len(exprs), 5)
    got = TreeValue(net).per_step(exprs)
    assert np.allclose(got, wanted, atol=1e-5)


def test_cached_embeddings_give_the_same_values_as_a_fresh_pass(exprs: list[Expr]) -> None:
    net = tree_network()
    fresh = TreeValue(net).per_step(exprs)
    cached = TreeValue(net)
    for e in exprs:  # one at a time, sharing what earlier ones embedded
        cached.per_step([e])
    embedded = cached.nodes_embedded
    again = cached.per_step(exprs)
    assert cached.nodes_embedded == embedded  # nothing new to embed
    assert np.allclose(again, fresh, atol=1e-6)
    small = TreeValue(net, cache_rows=12)  # emptied whenever a batch would overflow it
    assert np.allclose(np.vstack([small.per_step([e]) for e in exprs]), fresh, atol=1e-6)
    assert len(small.rows) <= 12


def test_a_child_state_costs_the_path_it_changed() -> None:
    e = px("(add (mul (div x y) (add 1.0 z)) (sub (mul z z) (div y 2.0)))")
    value = TreeValue(tree_network())
    value.per_step([e])
    before = value.nodes_embedded
    child = px("(add (mul (div x y) (add 1.0 z)) (sub (mul z z) (mul y 0.5)))")
    value.per_step([child])
    assert value.nodes_embedded - before == 4  # (mul y 0.5), 0.5, (sub ...), the root


def test_values_scale_and_depth(exprs: list[Expr]) -> None:
    net = tree_network()
    full = TreeValue(net).values(exprs, 7)
    assert full.shape == (len(exprs), 8) and (full[:, 0] == 0).all()
    assert np.allclose(TreeValue(net, scale=0.5).values(exprs, 7), 0.5 * full)
    assert np.allclose(full[:, 7], full[:, 5]) and np.allclose(full[:, 4] / 4, TreeValue(net).per_step(exprs)[:, 3])
    with pytest.raises(ValueError, match="value scale"):
        TreeValue(net, scale=-1.0)


# -- fitting, checkpoints, search ------------------------------------------------------------------
def test_the_tree_network_fits_search_targets(exprs: list[Expr]) -> None:
    rules = get_rule_set("binding_simplify_rules")
    samples = [Sample(e, 5, _reduction(astar(e, SearchSpec(rules, 5, 200)))) for e in exprs]
    assert max(s.target for s in samples) > 1
    net = tree_network(hidden=64)
    fitter = Fitter(net, lr=3e-3, batch_size=6)
    with torch.no_grad():
        initial = fitter.loss(samples).item()
    fitter.fit(samples, 300, np.random.default_rng(0))
    with torch.no_grad():
        final = fitter.loss(samples).item()
    assert final < 0.05 * initial, (initial, final)
    got = TreeValue(net).values([s.expr for s in samples], 5)[:, 5]
    assert got == pytest.approx([s.target for s in samples], abs=0.3)


def test_networks_are_built_and_wrapped_by_kind() -> None:
    assert isinstance(build_network(ModelConfig(hidden=40, depth=5, kind="tree")), TreeValueNetwork)
    assert isinstance(build_network(ModelConfig(hidden=40, depth=5)), ValueNetwork)
    assert isinstance(value_function(tree_network(hidden=40)), TreeValue)
    assert isinstance(value_function(build_network(ModelConfig(hidden=40, steps=1, depth=5))), NetworkValue)
    with pytest.raises(ValueError, match="model kind"):
        ModelConfig(kind="transformer")


def test_a_tree_checkpoint_loads_as_a_tree_value_function(tmp_path: Path, exprs: list[Expr]) -> None:
    net = tree_network()
    path = tmp_path / "tree.pt"
    save_model_file(path, {"model": net.state_dict(), "model_config": dataclasses.asdict(net.config)})
    loaded = value_function_from_file(path)
    assert isinstance(loaded, TreeValue)
    assert np.allclose(loaded.per_step(exprs), TreeValue(net).per_step(exprs))
    # a checkpoint from before the tree network has no kind: a GGNN
    ggnn = ValueNetwork(ModelConfig(hidden=40, steps=1, depth=5))
    settings = dataclasses.asdict(ggnn.config)
    del settings["kind"]
    assert isinstance(network_from({"model": ggnn.state_dict(), "model_config": settings}, "old.pt"), ValueNetwork)
    with pytest.raises(KsUsageError, match="do not fit"):
        network_from({"model": ggnn.state_dict(), "model_config": dataclasses.asdict(net.config)}, "mixed.pt")


def test_search_with_the_tree_value_function_is_deterministic(exprs: list[Expr]) -> None:
    rules = get_rule_set("binding_simplify_rules")
    net = tree_network(hidden=40, depth=10)
    runs = [astar(exprs[0], SearchSpec(rules, 10, 150, value=TreeValue(net, scale=0.3))) for _ in range(2)]
    assert runs[0].best_cost == runs[1].best_cost and runs[0].best is runs[1].best
    assert runs[0].evaluations <= 150


def _reduction(result: SearchResult) -> float:
    return result.start_cost - result.best_cost


def test_features_mark_compound_subexpressions_shared_or_repeated() -> None:
    shared = node_features(px("(div (mul x (add y 1.0)) (add y 1.0))"))
    assert shared[20] == 1 and shared[23] == 1  # (add y 1.0) in both children
    deep = node_features(px("(add (mul (div x y) 2.0) (sub 3.0 (div x y)))"))
    assert deep[20] == 1 and deep[23] == 1
    within = node_features(px("(mul 2.0 (add (div x y) (div x y)))"))
    assert within[20] == 0 and within[23] == 1  # repeated inside child 1 only
    apart = node_features(px("(div (mul x (add y 1.0)) (add y 2.0))"))
    assert apart[20] == 0 and apart[23] == 0
    # a subexpression using a variable bound in one child is not the same as a free one elsewhere
    bound = node_features(px("(add (let (a (mul x 2.0)) (add a 1.0)) (let (a (mul x 3.0)) (add a 1.0)))"))
    assert bound[20] == 0 and bound[23] == 0


def test_cached_features_are_the_node_features_and_read_only() -> None:
    from gnn.tree_features import cached_features

    for text in EXPRS:
        node = px(text)
        first = cached_features(node)
        assert np.array_equal(first, node_features(node))
        assert cached_features(node) is first  # computed once per interned node
        assert not first.flags.writeable  # shared by every plan that meets the node
