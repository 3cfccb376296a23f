r"""A value network whose work is done once per interned node: a bottom-up tree network.

The GGNN (:mod:`gnn.model`) passes messages both ways along the tree, so every node's state depends
on the whole expression and a search state that differs from its parent in one subtree costs a full
forward pass.  Here a node's embedding depends only on the node and its children's embeddings:

.. math::
    x_v = [E(\mathrm{op}_v), f_v], \qquad
    h_v = \tanh\big(W_2\,\mathrm{relu}(W_1 [x_v, h_{c_0}, h_{c_1}, h_{c_2}, \bar h_{c_{3+}}])\big)

with ``f_v`` the node's features (:mod:`gnn.tree_features`), ``c_k`` its child at position ``k``
(zeros where there is none) and :math:`\bar h_{c_{3+}}` the mean over later positions.  The readout
keeps equation 5's gated sum over every occurrence of every node, computed bottom-up as well:

.. math::
    p_v = \sigma(g([h_v, x_v])) \odot r(h_v) + \sum_{c \in \mathrm{children}(v)} p_c, \qquad
    V(e) = O_2\,\mathrm{relu}(O_1 [h_e, p_e])

so an expression's value needs the embeddings of the nodes it does not share with anything embedded
before: a rewrite's child state costs the path from the rewritten node to the root.
:class:`gnn.tree_value.TreeValue` keeps that cache during search; :meth:`TreeValueNetwork.predict`
(for fitting) embeds a batch's distinct nodes once, level by level.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from gnn.graph import NUM_NODE_TYPES
from gnn.model_config import ModelConfig
from gnn.tree_features import NUM_CHILD_SLOTS, NUM_FEATURES, Level, plan
from knossos.expr import Expr


class TreeValueNetwork(nn.Module):
    """Expressions in, per-step values ``(len(exprs), depth)`` out (as :class:`gnn.model.ValueNetwork`)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.hidden
        e = self.embedding_size
        x = e + NUM_FEATURES
        self.embed = nn.Embedding(NUM_NODE_TYPES, e)
        self.cell_in = nn.Linear(x + (NUM_CHILD_SLOTS + 1) * d, d)
        self.cell_out = nn.Linear(d, d)
        self.gate = nn.Linear(d + x, d)
        self.readout = nn.Linear(d, d)
        self.head_in = nn.Linear(2 * d, d)
        self.head_out = nn.Linear(d, config.depth)

    @property
    def embedding_size(self) -> int:
        return self.config.hidden // 2

    def predict(self, exprs: Sequence[Expr]) -> Tensor:
        p = plan(exprs, {}, 1)
        d = self.config.hidden
        dtype = self.cell_in.weight.dtype
        h_all = torch.zeros(1, d, dtype=dtype)  # row 0: an absent child
        p_all = torch.zeros(1, d, dtype=dtype)
        for level in p.levels:
            h, pooled = self.level(level, h_all, p_all)
            h_all = torch.cat([h_all, h])
            p_all = torch.cat([p_all, pooled])
        roots = torch.from_numpy(p.roots)
        return self.head(h_all[roots], p_all[roots]).float()

    def level(self, level: Level, h_all: Tensor, p_all: Tensor) -> tuple[Tensor, Tensor]:
        """Embeddings and pooled readouts of one level's nodes, from the rows filled so far."""
        n = level.ops.shape[0]
        d = self.config.hidden
        x = torch.cat([self.embed(torch.from_numpy(level.ops)), torch.from_numpy(level.features).to(h_all.dtype)], 1)
        slots = h_all[torch.from_numpy(level.slots).reshape(-1)].reshape(n, NUM_CHILD_SLOTS * d)
        rest = h_all.new_zeros(n, d)
        if level.rest_node.size:
            rest = rest.index_add(0, torch.from_numpy(level.rest_node), h_all[torch.from_numpy(level.rest_child)])
            rest = rest / torch.from_numpy(level.rest_count).to(h_all.dtype)
        h = torch.tanh(self.cell_out(torch.relu(self.cell_in(torch.cat([x, slots, rest], 1)))))
        pooled = torch.sigmoid(self.gate(torch.cat([h, x], 1))) * self.readout(h)
        if level.child_node.size:
            pooled = pooled.index_add(0, torch.from_numpy(level.child_node), p_all[torch.from_numpy(level.child_row)])
        return h, pooled

    def head(self, h: Tensor, pooled: Tensor) -> Tensor:
        out: Tensor = self.head_out(torch.relu(self.head_in(torch.cat([h, pooled], 1))))
        return out
