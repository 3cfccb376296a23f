"""The GGNN value network: message passing, readout, heads, the value function and fitting."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gnn.graph import NUM_EDGE_TYPES, NUM_NODE_TYPES, batch_graphs, padded
from gnn.model import GatedGraphConv, ModelConfig, ValueNetwork
from gnn.sample import Sample
from gnn.value import NetworkValue, _chunks
from knossos.expr import Expr
from knossos.parser import parse_expr
from training.fit import Fitter, normalised_target

from conftest import DATA

EXPRS = [
    "(div (div 1.0 x) (add 1.0 (div 1.0 x)))",
    "(mul (div x y) (div x y))",
    "(add x 1.0)",
    "(let (a (mul x y)) (add a (div 1.0 a)))",
    "(div (mul x y) (add 1.0 (mul x y)))",
]


def setup_module() -> None:
    torch.set_num_threads(1)


def px(text: str) -> Expr:
    return parse_expr(text)[0]


def small_network(seed: int = 0, **kw: object) -> ValueNetwork:
    torch.manual_seed(seed)
    settings: dict[str, object] = {"hidden": 48, "steps": 2, "depth": 5}
    settings.update(kw)
    return ValueNetwork(ModelConfig(**settings))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def exprs() -> list[Expr]:
    return [px(t) for t in EXPRS]


@pytest.fixture(scope="module")
def binding_simplify_8() -> list[Expr]:
    sets = json.loads((DATA / "arithmetic_sets.json").read_text())["sets"]
    return [px(item["expr"]) for item in sets["binding_simplify_8"]["expressions"]]


# -- GatedGraphConv ----------------------------------------------------------------------------------------
def _chain() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Nodes 0 -> 1 -> 2 -> 3 (directed edges, types 0, 1, 2) and node features."""
    torch.manual_seed(1)
    x = torch.randn(4, 16)
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    edge_type = torch.tensor([0, 1, 2])
    return x, edge_index, edge_type


def test_conv_output_shape() -> None:
    torch.manual_seed(0)
    conv = GatedGraphConv(16, NUM_EDGE_TYPES)
    x, edge_index, edge_type = _chain()
    assert conv(x, edge_index, edge_type).shape == (4, 16)
    assert repr(conv) == "GatedGraphConv(16, num_edge_types=9)"


def test_conv_messages_flow_along_edges_only() -> None:
    torch.manual_seed(0)
    conv = GatedGraphConv(16, NUM_EDGE_TYPES)
    x, edge_index, edge_type = _chain()
    with torch.no_grad():
        base = conv(x, edge_index, edge_type)
        y = x.clone()
        y[1] += 1.0  # node 1 sends to node 2 only
        changed = conv(y, edge_index, edge_type)
    # node 1 itself changes (its GRU state), node 2 (its out-neighbour) changes
    assert not torch.allclose(changed[1], base[1])
    assert not torch.allclose(changed[2], base[2])
    # node 0 (edges are directed: 0 -> 1, nothing back) and node 3 (two edges away) do not, for one step
    assert torch.equal(changed[0], base[0])
    assert torch.equal(changed[3], base[3])


def test_conv_two_steps_reach_two_edges_away() -> None:
    torch.manual_seed(0)
    conv = GatedGraphConv(16, NUM_EDGE_TYPES)
    x, edge_index, edge_type = _chain()
    with torch.no_grad():
        base = conv(conv(x, edge_index, edge_type), edge_index, edge_type)
        y = x.clone()
        y[1] += 1.0
        changed = conv(conv(y, edge_index, edge_type), edge_index, edge_type)
    assert not torch.allclose(changed[3], base[3])
    assert torch.equal(changed[0], base[0])


def test_conv_without_edges_is_a_gru_on_zero_messages() -> None:
    torch.manual_seed(0)
    conv = GatedGraphConv(16, NUM_EDGE_TYPES)
    x = torch.randn(3, 16)
    empty = torch.zeros((2, 0), dtype=torch.long)
    with torch.no_grad():
        out = conv(x, empty, torch.zeros(0, dtype=torch.long))
        assert torch.allclose(out, conv.gru(torch.zeros(3, 16), x))


def test_conv_edge_types_matter() -> None:
    torch.manual_seed(0)
    conv = GatedGraphConv(16, NUM_EDGE_TYPES)
    x, edge_index, edge_type = _chain()
    with torch.no_grad():
        a = conv(x, edge_index, edge_type)
        b = conv(x, edge_index, torch.tensor([2, 0, 1]))  # the same edges, types permuted
        c = conv(x, edge_index, torch.tensor([8, 7, 6]))
    assert not torch.allclose(a[1:], b[1:])
    assert not torch.allclose(a[1:], c[1:])
    assert torch.equal(a[0], b[0])  # node 0 receives nothing either way


class PygTypedConv:
    """The same layer written with PyTorch Geometric's ``propagate`` (the reference for our own sum)."""

    def __new__(cls, conv: GatedGraphConv) -> nn.Module:  # a factory: PyG is imported only here
        from torch_geometric.nn import MessagePassing

        class Layer(MessagePassing):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__(aggr="add")

            def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor) -> torch.Tensor:
                incoming = self.propagate(edge_index, x=x, edge_type=edge_type)
                return conv.gru(incoming, x)  # type: ignore[no-any-return]

            def message(self, x_j: torch.Tensor, edge_type: torch.Tensor) -> torch.Tensor:
                return torch.bmm(x_j.unsqueeze(1), conv.weight[edge_type]).squeeze(1) + conv.bias[edge_type]

        return Layer()


def test_conv_agrees_with_a_pyg_message_passing_layer() -> None:
    torch.manual_seed(0)
    conv = GatedGraphConv(16, NUM_EDGE_TYPES)
    with torch.no_grad():
        conv.bias.uniform_(-0.5, 0.5)  # zero at initialisation: make it count
    x = torch.randn(7, 16)
    edge_index = torch.randint(0, 7, (2, 30))
    edge_type = torch.randint(0, NUM_EDGE_TYPES, (30,))
    with torch.no_grad():
        ours = conv(x, edge_index, edge_type)
        theirs = PygTypedConv(conv)(x, edge_index, edge_type)
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_conv_reset_parameters_draws_new_weights() -> None:
    torch.manual_seed(0)
    conv = GatedGraphConv(16, NUM_EDGE_TYPES)
    before = {k: v.clone() for k, v in conv.state_dict().items()}
    conv.reset_parameters()
    after = conv.state_dict()
    assert not torch.equal(before["weight"], after["weight"])
    assert not torch.equal(before["gru.weight_ih"], after["gru.weight_ih"])
    assert torch.equal(after["bias"], torch.zeros_like(after["bias"]))


def test_conv_on_a_four_node_graph_with_fixed_weights_is_the_equations_written_out() -> None:
    """Equation 4 by hand (a loop over the edges, the GRU's gates written out) on nodes 0 -> 1 -> 2 -> 3
    and 3 -> 1, with weights set to fixed values (no random draw)."""
    channels = 6
    conv = GatedGraphConv(channels, 3)
    with torch.no_grad():
        for i, (_, p) in enumerate(sorted(conv.named_parameters(), key=lambda item: item[0])):
            p.copy_(torch.linspace(-1, 1, p.numel()).reshape(p.shape) * (0.3 + 0.1 * i))
    x = torch.linspace(-2, 2, 4 * channels).reshape(4, channels)
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 1]])
    edge_type = torch.tensor([0, 1, 2, 0])
    with torch.no_grad():
        got = conv(x, edge_index, edge_type)
        m = torch.zeros(4, channels)
        for (u, v), p in zip(edge_index.t().tolist(), edge_type.tolist(), strict=True):
            m[v] += conv.weight[p].t() @ x[u] + conv.bias[p]
        g = conv.gru
        r_i, z_i, n_i = (m @ g.weight_ih.t() + g.bias_ih).chunk(3, dim=1)
        r_h, z_h, n_h = (x @ g.weight_hh.t() + g.bias_hh).chunk(3, dim=1)
        r, z = torch.sigmoid(r_i + r_h), torch.sigmoid(z_i + z_h)
        want = (1 - z) * torch.tanh(n_i + r * n_h) + z * x
    assert torch.allclose(got, want, atol=1e-5)
    assert torch.equal(got[0], conv.gru(torch.zeros(1, channels), x[:1])[0])  # node 0 receives nothing


#: The shipped GGNN (gnn/models/ggnn.pt) on EXPRS: its per-step values for 1..10 steps left, as the
#: layer computed them before it was documented and tested as PyG layers are (issue 19): unchanged.
GGNN_VALUES = [
    [0.294750, 0.322946, 0.297352, 0.242853, 0.243088, 0.169693, 0.185387, 0.088001, 0.165332, 0.180085],
    [0.720322, 0.957652, 0.807697, 0.718149, 0.661845, 0.740093, 0.600129, 0.435277, 0.258500, 0.352166],
    [0.311834, 0.340290, 0.302002, 0.260786, 0.271212, 0.217733, 0.144954, 0.119765, 0.193989, 0.130998],
    [0.148041, 0.238046, 0.229423, 0.190012, 0.179399, 0.130877, 0.103584, 0.064281, 0.200598, 0.143639],
    [0.105124, 0.230802, 0.184249, 0.157605, 0.146559, 0.113737, 0.057974, 0.073508, 0.147071, 0.055984],
]


def test_the_shipped_ggnn_gives_the_values_it_gave(exprs: list[Expr]) -> None:
    from gnn.model_file import network_from, shipped_model
    from training.checkpoint import load_checkpoint

    path = shipped_model("ggnn")
    assert path is not None
    network = network_from(load_checkpoint(path), str(path))
    with torch.no_grad():
        got = network.predict(exprs)
    assert np.allclose(got.numpy(), np.array(GGNN_VALUES), atol=1e-5)


# -- ValueNetwork ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 5])
def test_network_output_shape(exprs: list[Expr], n: int) -> None:
    net = small_network()
    out = net(batch_graphs(exprs[:n]))
    assert out.shape == (n, 5)
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_paper_size_network(exprs: list[Expr]) -> None:
    config = ModelConfig(hidden=200, steps=10)
    assert (config.hidden, config.steps, config.depth) == (200, 10, 10)
    torch.manual_seed(0)
    net = ValueNetwork(config)
    with torch.no_grad():
        out = net(batch_graphs(exprs[:3]))
    assert out.shape == (3, 10)
    assert torch.isfinite(out).all()


def test_no_gnn_ablation(exprs: list[Expr]) -> None:
    net = small_network(steps=0)
    with torch.no_grad():
        out = net(batch_graphs(exprs))
    assert out.shape == (5, 5)
    # without propagation a node's state is its initial features: the readout sees node types only,
    # so two expressions with the same multiset of node types (and constants) get the same value
    a, b = px("(add x (mul x y))"), px("(mul x (add x y))")
    with torch.no_grad():
        va, vb = net(batch_graphs([a, b]))
    assert torch.allclose(va, vb, atol=1e-6)
    with torch.no_grad():
        wa, wb = small_network(steps=2)(batch_graphs([a, b]))
    assert not torch.allclose(wa, wb, atol=1e-6)


def test_mlp_head_structure() -> None:
    net = small_network(mlp_head=True, hidden=64)
    head = net.out
    assert isinstance(head, nn.Sequential)
    kinds = [type(m) for m in head]
    assert kinds == [nn.Linear, nn.Tanh, nn.Dropout, nn.Linear, nn.Tanh, nn.Dropout, nn.Linear]
    assert (head[0].in_features, head[0].out_features) == (64, 200)
    assert (head[3].in_features, head[3].out_features) == (200, 200)
    assert (head[6].in_features, head[6].out_features) == (200, 5)
    assert head[2].p == head[5].p == 0.2
    plain = small_network(hidden=64)
    assert isinstance(plain.out, nn.Linear)
    assert (plain.out.in_features, plain.out.out_features) == (64, 5)


def test_mlp_head_train_and_eval_differ_only_through_dropout(exprs: list[Expr]) -> None:
    net = small_network(mlp_head=True)
    batch = batch_graphs(exprs)
    with torch.no_grad():
        net.eval()
        ev = net(batch)
        assert torch.equal(ev, net(batch))  # eval is deterministic
        net.train()
        tr1, tr2 = net(batch), net(batch)
        assert not torch.allclose(tr1, ev)  # dropout is active in training
        assert not torch.allclose(tr1, tr2)
        for m in net.modules():  # training mode with dropout switched off is eval mode
            if isinstance(m, nn.Dropout):
                m.eval()
        assert torch.allclose(net(batch), ev, atol=1e-6)
    no_dropout = small_network(mlp_head=True, dropout=0.0)
    with torch.no_grad():
        no_dropout.train()
        tr = no_dropout(batch)
        no_dropout.eval()
        assert torch.allclose(tr, no_dropout(batch), atol=1e-6)


def test_readout_is_per_graph(exprs: list[Expr]) -> None:
    """A batch's outputs equal each graph's alone: no leakage across the graphs of a batch."""
    for kw in ({}, {"mlp_head": True}, {"steps": 0}):
        net = small_network(**kw)
        net.eval()
        with torch.no_grad():
            together = net(batch_graphs(exprs))
            alone = torch.cat([net(batch_graphs([e])) for e in exprs])
            reversed_ = net(batch_graphs(exprs[::-1])).flip(0)
        assert torch.allclose(together, alone, atol=1e-5), kw
        assert torch.allclose(together, reversed_, atol=1e-5), kw


def test_readout_is_a_sum_over_nodes() -> None:
    """With r, g fixed so that every node contributes the same, the pooled vector counts nodes."""
    net = small_network(steps=0, depth=1)
    with torch.no_grad():
        for layer in (net.gate, net.readout):
            layer.weight.zero_()
        net.gate.bias.fill_(100.0)  # sigmoid -> 1
        net.readout.bias.fill_(1.0)  # r(h) = 1 per feature
        net.out.weight.fill_(1.0 / 48)
        net.out.bias.zero_()
        small, big = px("(add x 1.0)"), px("(div (div 1.0 x) (add 1.0 (div 1.0 x)))")
        out = net(batch_graphs([small, big]))
    assert out[:, 0].tolist() == pytest.approx([small.size, big.size], abs=1e-4)


def test_constant_values_feature(exprs: list[Expr]) -> None:
    a, b = px("(add x 1.0)"), px("(add x 2.0)")
    with_values = small_network()
    without = small_network(constant_values=False)
    with torch.no_grad():
        va, vb = with_values(batch_graphs([a, b]))
        wa, wb = without(batch_graphs([a, b]))
    assert not torch.allclose(va, vb)
    assert torch.allclose(wa, wb, atol=1e-6)
    h0 = with_values.initial_features(batch_graphs([a]))
    assert h0.shape == (3, 48)
    assert h0[:, :NUM_NODE_TYPES].sum(dim=1).tolist() == [1.0, 1.0, 1.0]
    assert h0[2, -1].item() == pytest.approx(np.log1p(1.0))


def test_model_config_rejects_small_hidden() -> None:
    ModelConfig(hidden=NUM_NODE_TYPES + 1)
    with pytest.raises(ValueError, match="hidden"):
        ModelConfig(hidden=NUM_NODE_TYPES)
    with pytest.raises(ValueError):
        ModelConfig(hidden=64, steps=-1)
    with pytest.raises(ValueError):
        ModelConfig(hidden=64, depth=0)


# -- NetworkValue ------------------------------------------------------------------------------------------
def test_values_table(exprs: list[Expr]) -> None:
    net = small_network()  # depth 5
    value = NetworkValue(net)
    per_step = value.per_step(exprs)
    assert per_step.shape == (5, 5)
    table = value.values(exprs, 5)
    assert table.shape == (5, 6)
    assert (table[:, 0] == 0).all()
    for t in range(1, 6):
        assert np.allclose(table[:, t], t * per_step[:, t - 1])
    assert not net.training  # inference runs in eval mode


def test_values_beyond_the_model_depth_stay_at_the_model_depth(exprs: list[Expr]) -> None:
    value = NetworkValue(small_network())  # depth 5
    per_step = value.per_step(exprs)
    table = value.values(exprs, 8)
    assert table.shape == (5, 9)
    assert np.allclose(table[:, :6], value.values(exprs, 5))
    for t in range(6, 9):
        assert np.allclose(table[:, t], 5 * per_step[:, 4])
    shallow = value.values(exprs, 2)
    assert shallow.shape == (5, 3)
    assert np.allclose(shallow, table[:, :3])


def test_values_of_no_expressions() -> None:
    value = NetworkValue(small_network())
    assert value.values([], 4).shape == (0, 5)


def test_chunking_by_node_budget_gives_the_same_numbers(exprs: list[Expr]) -> None:
    net = small_network()
    whole = NetworkValue(net)
    chunked = NetworkValue(net, node_budget=5)
    a = whole.values(exprs, 5)
    b = chunked.values(exprs, 5)
    assert whole.forward_calls == 1
    assert chunked.forward_calls > 1
    assert chunked.graphs_seen == whole.graphs_seen == 5
    assert np.allclose(a, b, atol=1e-5)


def test_bfloat16_inference_uses_a_copy_and_returns_float_values(exprs: list[Expr]) -> None:
    net = small_network()
    fast = NetworkValue(net, precision="bfloat16")
    assert fast.network is not net
    assert next(net.parameters()).dtype == torch.float32  # the original is untouched
    assert next(fast.network.parameters()).dtype == torch.bfloat16
    a, b = NetworkValue(net).per_step(exprs), fast.per_step(exprs)
    assert b.dtype == np.float64
    assert np.abs(a - b).max() <= 0.03 * np.abs(a).max() + 1e-3


def test_padding_a_batch_changes_no_value_and_rounds_the_shapes(exprs: list[Expr]) -> None:
    net = small_network()
    batch = batch_graphs(exprs)
    bigger = padded(batch)
    assert bigger.num_nodes % 64 == 0 and bigger.num_nodes > batch.num_nodes
    assert all(c % 32 == 0 for c in torch.bincount(bigger.edge_type, minlength=NUM_EDGE_TYPES).tolist())
    assert bigger.num_graphs == batch.num_graphs + 1
    with torch.no_grad():
        assert torch.allclose(net(bigger)[:-1], net(batch), atol=1e-6)


def test_an_unknown_precision_is_an_error() -> None:
    with pytest.raises(ValueError, match="precision must be one of float32, bfloat16"):
        NetworkValue(small_network(), precision="float16")  # type: ignore[arg-type]


def test_chunks() -> None:
    assert _chunks([], 5) == []
    assert _chunks([3, 3, 3], 5) == [(0, 1), (1, 2), (2, 3)]
    assert _chunks([2, 3, 9, 1, 1], 5) == [(0, 2), (2, 3), (3, 5)]
    assert _chunks([9], 5) == [(0, 1)]
    ranges = _chunks([4, 1, 7, 2, 2, 2, 6], 6)
    assert [i for a, b in ranges for i in range(a, b)] == list(range(7))


# -- fitting -----------------------------------------------------------------------------------------------
def test_normalised_target() -> None:
    e = px("(add x 1.0)")
    assert normalised_target(Sample(e, 4, 2.0)) == 0.5
    assert normalised_target(Sample(e, 1, 3.0)) == 3.0


def test_loss_uses_the_column_of_the_steps_left(exprs: list[Expr], monkeypatch: pytest.MonkeyPatch) -> None:
    net = small_network()  # depth 5
    fitter = Fitter(net, huber_delta=1.0)
    # output[i, j] = 10 i + j, so the column each sample reads is visible in the loss
    table = torch.tensor([[10.0 * i + j for j in range(5)] for i in range(3)])
    monkeypatch.setattr(net, "forward", lambda graphs: table[: graphs.num_graphs])
    samples = [
        Sample(exprs[0], 1, 0.5),  # column 0: 0.0, wanted 0.5 -> diff 0.5 -> 0.125
        Sample(exprs[1], 3, 36.0),  # column 2: 12.0, wanted 12.0 -> 0
        Sample(exprs[2], 5, 120.0),  # column 4: 24.0, wanted 24.0 -> 0
    ]
    assert fitter.loss(samples).item() == pytest.approx(0.125 / 3)
    samples[2] = Sample(exprs[2], 2, 42.0)  # column 1: 21.0, wanted 21.0
    assert fitter.loss(samples).item() == pytest.approx(0.125 / 3)
    samples[1] = Sample(exprs[1], 4, 40.0)  # column 3: 13.0, wanted 10.0 -> diff 3 -> 2.5 (linear part)
    assert fitter.loss(samples).item() == pytest.approx((0.125 + 2.5) / 3)


def test_loss_matches_a_manual_huber(exprs: list[Expr]) -> None:
    net = small_network()
    fitter = Fitter(net, huber_delta=0.5)
    samples = [Sample(e, t, float(t) * 0.3 - 0.2) for e, t in zip(exprs, [1, 2, 3, 4, 5])]
    out = net(batch_graphs(exprs))
    predicted = torch.stack([out[i, s.steps_left - 1] for i, s in enumerate(samples)])
    wanted = torch.tensor([s.target / s.steps_left for s in samples])
    diff = (predicted - wanted).abs()
    manual = torch.where(diff <= 0.5, 0.5 * diff**2, 0.5 * (diff - 0.25)).mean()
    assert fitter.loss(samples).item() == pytest.approx(manual.item(), rel=1e-5)
    assert fitter.loss(samples).item() == pytest.approx(F.huber_loss(predicted, wanted, delta=0.5).item(), rel=1e-5)


def test_fit_skips_states_without_steps_left(exprs: list[Expr]) -> None:
    net = small_network()
    before = [p.detach().clone() for p in net.parameters()]
    fitter = Fitter(net, lr=1e-2)
    assert fitter.fit([Sample(e, 0, 1.0) for e in exprs], 3, np.random.default_rng(0)) == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
    loss = fitter.fit([Sample(exprs[0], 0, 1.0), Sample(exprs[1], 2, 1.0)], 1, np.random.default_rng(0))
    assert loss > 0
    assert not all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
    assert net.training


def _search_samples(exprs: list[Expr]) -> list[Sample]:
    """8 samples from short A* searches: distinct expressions, spread over steps left and targets."""
    from rules.sets import get_rule_set
    from search.astar import astar
    from search.spec import SearchSpec
    from training.trainer import samples_of

    rules = get_rule_set("binding_simplify_rules")
    candidates = [s for e in exprs for s in samples_of(astar(e, SearchSpec(rules, 5, 100)))]
    candidates.sort(key=lambda s: (-s.target, s.steps_left, str(s.expr)))  # deterministic, largest first
    picked: list[Sample] = []
    seen_exprs: set[Expr] = set()
    seen_kinds: set[tuple[int, float]] = set()
    for s in candidates:
        kind = (s.steps_left, round(s.target, 1))
        if s.expr not in seen_exprs and kind not in seen_kinds:
            picked.append(s)
            seen_exprs.add(s.expr)
            seen_kinds.add(kind)
        if len(picked) == 8:
            break
    assert len(picked) == 8
    return picked


def test_overfits_eight_expressions(binding_simplify_8: list[Expr]) -> None:
    samples = _search_samples(binding_simplify_8)
    assert max(s.target for s in samples) >= 2.0
    assert {s.steps_left for s in samples} <= set(range(1, 6))
    net = small_network(seed=0, hidden=64, steps=3, depth=5)
    fitter = Fitter(net, lr=1e-3, batch_size=8)
    with torch.no_grad():
        initial = fitter.loss(samples).item()
    assert initial > 0.1
    rng = np.random.default_rng(0)
    final = initial
    for _ in range(40):
        fitter.fit(samples, 10, rng)
        with torch.no_grad():
            final = fitter.loss(samples).item()
        if final < 0.001 * initial:
            break
    assert final < 0.1 * initial, (initial, final)
    # the value function now reproduces the targets
    table = NetworkValue(net).values([s.expr for s in samples], 5)
    got = [table[i, s.steps_left] for i, s in enumerate(samples)]
    assert got == pytest.approx([s.target for s in samples], abs=0.25)
