"""The GGNN value network of the Knossos paper (section 3.2, equations 4 and 5).

Nodes start from a one-hot of their type, zero-padded to ``hidden`` features (optionally with the
squashed constant value in the last feature).  :class:`GatedGraphConv` then runs ``steps`` rounds of
equation 4: every edge type ``p`` has a dense message function ``m_p``, incoming messages are
summed, and a GRU cell updates each node.  The readout (equation 5) is

    V(e) = O( sum_v sigmoid(g(h_v^T, h_v^0)) * r(h_v^T) )

with ``g``, ``r`` and ``O`` dense layers (or, with ``mlp_head``, ``O`` replaced by the paper's MLP of
two hidden layers of 200 units, tanh and dropout 0.2).  The output has one *per-step* value per
number of steps left ``t = 1..depth``; the value function multiplies it by ``t`` (section 3.2:
targets are normalised by the steps left).  ``steps=0`` is the paper's NoGNN ablation.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnn.graph import NUM_EDGE_TYPES, NUM_NODE_TYPES, GraphBatch, batch_graphs
from gnn.model_config import ModelConfig
from knossos.expr import Expr

#: Edges sorted by type: (sources, targets, boundaries of each type's run).
EdgeGroups = tuple[Tensor, Tensor, list[int]]


class GatedGraphConv(nn.Module):
    r"""One propagation step of a gated graph neural network with typed edges (Li et al., 2016).

    .. math::
        \mathbf{m}_v = \sum_{p} \sum_{u \in \mathcal{N}_p(v)} \left( \mathbf{W}_p^\top \mathbf{h}_u
        + \mathbf{b}_p \right), \qquad \mathbf{h}'_v = \mathrm{GRU}(\mathbf{m}_v, \mathbf{h}_v)

    where :math:`\mathcal{N}_p(v)` are the nodes with an edge of type :math:`p` into :math:`v`
    (equation 4 of the paper; the GRU cell is ``torch.nn.GRUCell``, with the message as its input and
    the node's state as its hidden state).

    Args:
        channels: node feature size (input and output).
        num_edge_types: number of edge types ``p``; each has its own dense message function.

    Shapes:
        - **input:** node features ``(N, channels)``, edge indices ``(2, E)`` (source, target),
          edge types ``(E,)``; optionally the edges grouped by type (:meth:`group_edges`)
        - **output:** node features ``(N, channels)``

    Messages are computed per edge, grouped by type: one ``(E_p, channels) x (channels, channels)``
    product per edge type, ``E * channels^2`` work in all, rather than projecting every node for
    every type (``N * P * channels^2``, about three times more on expression graphs).

    The layer has PyTorch Geometric's shape (``forward``, ``message(x_j, ...)``,
    ``reset_parameters``, ``__repr__``, the PyG batch convention) but is a plain ``nn.Module``
    that sums the messages with ``index_add_``, without ``MessagePassing.propagate``:

    - importing ``torch_geometric`` takes 1.4 s after torch (it imports ``torch._dynamo``), more
      than torch itself (1.0 s) and five times a whole A* search at 300 evaluations with the shipped
      GGNN (0.26 s; ``optimize.py --model ggnn`` takes 1.8 s in all), and search never needs it;
    - ``propagate`` with the same grouped ``message`` is no faster: 0.93-1.05 times this layer's
      graphs per second on bindgen batches of 16 and 64 and on gemm, paper size, one thread (with
      the per-edge ``bmm`` message that typed-edge PyG layers use, 0.03 times);
    - it would only gather ``x_j`` and sum per node, two lines here.

    A test checks that a ``MessagePassing`` layer written with ``propagate`` gives the same output,
    and one that inference never imports ``torch_geometric``.
    """

    def __init__(self, channels: int, num_edge_types: int) -> None:
        super().__init__()
        self.channels = channels
        self.num_edge_types = num_edge_types
        self.weight = nn.Parameter(torch.empty(num_edge_types, channels, channels))
        self.bias = nn.Parameter(torch.empty(num_edge_types, channels))
        self.gru = nn.GRUCell(channels, channels)  # initialises itself
        self._reset_messages()

    def reset_parameters(self) -> None:
        """New weights: the GRU cell's as ``nn.GRUCell`` draws them, each ``W_p`` uniform in
        ``+-1/sqrt(channels)``, the biases ``b_p`` zero."""
        self.gru.reset_parameters()
        self._reset_messages()

    def _reset_messages(self) -> None:
        bound = 1.0 / self.channels**0.5
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.zeros_(self.bias)

    def forward(  # type: ignore[override]
        self, x: Tensor, edge_index: Tensor, edge_type: Tensor, groups: EdgeGroups | None = None
    ) -> Tensor:
        """``groups`` (from :meth:`group_edges`) saves sorting the edges again at every step."""
        if groups is None:
            groups = self.group_edges(edge_index, edge_type)
        source, target, bounds = groups
        incoming = torch.zeros_like(x).index_add_(0, target, self.message(x[source], bounds))
        out: Tensor = self.gru(incoming, x)
        return out

    def message(self, x_j: Tensor, bounds: list[int]) -> Tensor:
        """``W_p^T h_u + b_p`` (``x_j @ W_p + b_p``) for every edge ``u -> v``, the edges sorted by type
        ``p`` (its run is ``bounds[p]:bounds[p + 1]``)."""
        parts = [
            torch.addmm(self.bias[p], x_j[start:stop], self.weight[p])
            for p, (start, stop) in enumerate(itertools.pairwise(bounds))
            if stop > start
        ]
        return torch.cat(parts) if parts else x_j[:0]

    def group_edges(self, edge_index: Tensor, edge_type: Tensor) -> EdgeGroups:
        """Edges sorted by type: sources, targets and each type's ``[start, stop)`` boundaries."""
        order = torch.argsort(edge_type, stable=True)
        counts = torch.bincount(edge_type, minlength=self.num_edge_types)
        bounds = [0, *torch.cumsum(counts, 0).tolist()]
        return edge_index[0, order], edge_index[1, order], bounds

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.channels}, num_edge_types={self.num_edge_types})"


class ValueNetwork(nn.Module):
    """Expression graphs in, per-step values ``(graphs, depth)`` out."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.hidden
        self.conv = GatedGraphConv(d, NUM_EDGE_TYPES)
        self.gate = nn.Linear(2 * d, d)  # g
        self.readout = nn.Linear(d, d)  # r
        if config.mlp_head:
            self.out: nn.Module = nn.Sequential(
                nn.Linear(d, 200),
                nn.Tanh(),
                nn.Dropout(config.dropout),
                nn.Linear(200, 200),
                nn.Tanh(),
                nn.Dropout(config.dropout),
                nn.Linear(200, config.depth),
            )
        else:
            self.out = nn.Linear(d, config.depth)  # O

    def predict(self, exprs: Sequence[Expr]) -> Tensor:
        """Per-step values of ``exprs``, ``(len(exprs), depth)``."""
        out: Tensor = self(batch_graphs(exprs))
        return out

    def initial_features(self, graphs: GraphBatch) -> Tensor:
        d = self.config.hidden
        h0 = F.one_hot(graphs.node_type, NUM_NODE_TYPES).to(torch.float32)
        h0 = F.pad(h0, (0, d - NUM_NODE_TYPES))
        if self.config.constant_values:
            h0[:, -1] = graphs.node_value
        return h0

    def forward(self, graphs: GraphBatch) -> Tensor:
        h0 = self.initial_features(graphs).to(self.gate.weight.dtype)
        h = h0
        groups = self.conv.group_edges(graphs.edge_index, graphs.edge_type)
        for _ in range(self.config.steps):
            h = self.conv(h, graphs.edge_index, graphs.edge_type, groups)
        weights = torch.sigmoid(self.gate(torch.cat([h, h0], dim=1)))
        gated = weights * self.readout(h)
        pooled = gated.new_zeros(graphs.num_graphs, gated.shape[1]).index_add_(0, graphs.batch, gated)
        values: Tensor = self.out(pooled)
        return values.float()
