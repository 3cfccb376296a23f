"""The sibling ranking loss: what it rewards, that it agrees with what search reads, and its data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experiments.default_model import dataset
from gnn.model import ModelConfig
from gnn.networks import build_network, value_function
from gnn.sample import Sample
from knossos.parser import parse_expr
from knossos.printer import format_expr
from rules.sets import get_rule_set
from search.astar import astar
from search.spec import SearchSpec
from training.fit import Fitter
from training.ranking import SiblingGroup, ranking_loss, reductions


def e(text: str):  # type: ignore[no-untyped-def]
    return parse_expr(text)[0]


GROUP = SiblingGroup(
    parent=e("(mul (add x 0.0) 1.0)"),
    steps_left=3,
    children=(e("(mul x 1.0)"), e("(add x 0.0)"), e("(mul (add 0.0 x) 1.0)")),
    targets=(1.0, 1.0, 2.0),
)


def test_worth_is_the_drop_plus_the_target_below() -> None:
    c = GROUP.parent.cost
    assert GROUP.worth() == pytest.approx([c - ch.cost + t for ch, t in zip(GROUP.children, GROUP.targets)])
    assert GROUP.informative()
    same = SiblingGroup(GROUP.parent, 3, GROUP.children[:1] * 2, (1.0, 1.0))
    assert not same.informative()  # nothing to rank


@pytest.mark.parametrize("kind", ["tree", "ggnn"])
def test_reductions_are_what_search_reads(kind: str) -> None:
    torch.manual_seed(0)
    network = build_network(ModelConfig(hidden=40, steps=2, depth=4, kind=kind))
    network.eval()
    exprs = [e("(add x 1.0)"), e("(mul (add x y) (add x y))"), e("(div x 2.0)")]
    steps = [0, 2, 6]  # beyond the network's depth the value for its depth is read
    with torch.no_grad():
        got = reductions(network, exprs, torch.tensor(steps)).numpy()
    table = value_function(network, scale=1.0).values(exprs, 6)
    np.testing.assert_allclose(got, [table[i, t] for i, t in enumerate(steps)], rtol=1e-5, atol=1e-6)


def test_the_loss_is_lowest_when_the_best_child_is_ranked_first() -> None:
    torch.manual_seed(0)
    network = build_network(ModelConfig(hidden=40, steps=2, depth=4, kind="tree"))
    q = np.array(GROUP.worth())
    best = int(np.argmax(q))
    losses = []
    for temperature in (1.0, 0.1):
        with torch.no_grad():
            losses.append(float(ranking_loss(network, [GROUP], temperature)))
    assert all(loss > 0 for loss in losses)
    # fitting the loss alone puts the best child first
    fitter = Fitter(network, lr=1e-2, batch_size=4)
    sample = Sample(GROUP.parent, 3, 2.0)
    rng = np.random.default_rng(0)
    before = float(ranking_loss(network, [GROUP]).detach())
    for _ in range(60):
        fitter.fit_ranked([sample], [GROUP], rng, weight=1.0)
    after = float(ranking_loss(network, [GROUP]).detach())
    assert after < before
    with torch.no_grad():
        v = reductions(network, GROUP.children, torch.tensor([2, 2, 2])).numpy()
    drop = np.array([GROUP.parent.cost - c.cost for c in GROUP.children])
    assert int(np.argmax(drop + v)) == best


def test_fit_ranked_refuses_to_fit_nothing() -> None:
    network = build_network(ModelConfig(hidden=40, steps=2, depth=4, kind="tree"))
    with pytest.raises(ValueError, match="needs samples and sibling groups"):
        Fitter(network).fit_ranked([], [GROUP], np.random.default_rng(0), weight=1.0)


def test_sibling_groups_follow_the_path_to_the_best_state() -> None:
    start = e("(add (mul x 1.0) (add (mul y 0.0) (div x x)))")
    result = astar(start, SearchSpec(get_rule_set("simplify_rules"), depth=6, budget=400))
    groups = dataset.sibling_groups(result)
    path = result.graph.path(result.best)
    assert result.best_cost < result.start_cost and groups
    assert [g[0] for g in groups] == [format_expr(p) for p, _ in path if len(result.graph.edges[p]) >= 2]
    after = [q for q, _ in path[1:]] + [result.best]
    nxt = {format_expr(p): format_expr(c) for (p, _), c in zip(path, after, strict=True)}
    for parent, t, kids in groups:
        group = SiblingGroup(e(parent), t, tuple(e(c) for c, _ in kids), tuple(v for _, v in kids))
        q = group.worth()
        on_path = [c for c, _ in kids].index(nxt[parent])
        assert q[on_path] == pytest.approx(max(q))  # the path's child is a best one
