"""The tree network as a value function for search, embedding each interned node once.

Search evaluates children that share all but a path with states evaluated before; the tree
network's embedding of a node depends only on the node (:mod:`gnn.tree_model`), so embeddings are
kept, by node object, for as long as the value function lives (one search, or one optimize.py run),
and a batch costs the nodes no earlier batch had.  Inference is in numpy on a float32 snapshot of
the weights: a level of a search batch is a few dozen rows, where torch's per-operation overhead
costs more than the arithmetic.  The cache is dropped when it reaches ``cache_rows`` embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gnn.tree_features import NUM_CHILD_SLOTS, Level, plan
from gnn.tree_model import TreeValueNetwork
from gnn.value import values_table
from knossos.expr import Expr
from search.settings import SearchSettings
from search.value import check_value_scale

#: Embeddings kept before the cache is emptied (two float32 rows of ``hidden`` each, plus the node).
DEFAULT_CACHE_ROWS = 200_000


def _relu(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.maximum(x, 0.0)
    return out


def _sigmoid(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow warnings for large |x|
    return out


class TreeValue:
    def __init__(
        self,
        network: TreeValueNetwork,
        scale: float = 1.0,
        cache_rows: int = DEFAULT_CACHE_ROWS,
        *,
        settings: SearchSettings | None = None,
        rules: str | None = None,
    ) -> None:
        self.scale = check_value_scale(scale)
        #: How a search with this model is set by default, and the rule set it was trained with
        #: (None: not loaded from a checkpoint); optimize.py's defaults with it.
        self.settings = settings
        self.rules = rules
        self.config = network.config
        self.cache_rows = cache_rows
        w = {k: v.detach().float().numpy().copy() for k, v in network.state_dict().items()}
        self._embed = w["embed.weight"]
        self._layers = {
            name: (w[f"{name}.weight"].T.copy(), w[f"{name}.bias"])
            for name in ("cell_in", "cell_out", "gate", "readout", "head_in", "head_out")
        }
        #: Forward passes, expressions and new nodes embedded, for benchmarks.
        self.forward_calls = 0
        self.graphs_seen = 0
        self.nodes_embedded = 0
        self.clear()

    def clear(self) -> None:
        d = self.config.hidden
        self.rows: dict[Expr, int] = {}
        self._h = np.zeros((1024, d), dtype=np.float32)  # row 0: an absent child
        self._p = np.zeros((1024, d), dtype=np.float32)
        self._used = 1

    def _linear(self, name: str, x: np.ndarray) -> np.ndarray:
        weight, bias = self._layers[name]
        out: np.ndarray = x @ weight + bias
        return out

    def per_step(self, exprs: Sequence[Expr]) -> np.ndarray:
        """The network's raw output, shape ``(len(exprs), D)``."""
        if self._used + sum(e.size for e in exprs) > self.cache_rows:
            self.clear()
        p = plan(exprs, self.rows, self._used)
        self._reserve(self._used + len(p.nodes))
        for level in p.levels:
            self._level(level)
        for row, node in enumerate(p.nodes, start=p.first_row):
            self.rows[node] = row
        self.nodes_embedded += len(p.nodes)
        self.forward_calls += 1
        self.graphs_seen += len(exprs)
        h, pooled = self._h[p.roots], self._p[p.roots]
        out = self._linear("head_out", _relu(self._linear("head_in", np.concatenate([h, pooled], 1))))
        return out.astype(np.float64)

    def values(self, exprs: Sequence[Expr], depth: int) -> np.ndarray:
        return values_table(
            exprs, self.per_step(exprs), depth, self.scale, self.config.cost_normalization, self.config.cost_model
        )

    def _reserve(self, rows: int) -> None:
        if rows <= self._h.shape[0]:
            return
        size = max(rows, 2 * self._h.shape[0])
        for name in ("_h", "_p"):
            old = getattr(self, name)
            grown = np.zeros((size, old.shape[1]), dtype=np.float32)
            grown[: self._used] = old[: self._used]
            setattr(self, name, grown)

    def _level(self, level: Level) -> None:
        """Embed one level's nodes into the next rows (the same arithmetic as TreeValueNetwork.level)."""
        n = level.ops.shape[0]
        d = self.config.hidden
        x = np.concatenate([self._embed[level.ops], level.features], 1)
        slots = self._h[level.slots.reshape(-1)].reshape(n, NUM_CHILD_SLOTS * d)
        rest = np.zeros((n, d), dtype=np.float32)
        if level.rest_node.size:
            np.add.at(rest, level.rest_node, self._h[level.rest_child])
            rest /= level.rest_count
        h = np.tanh(self._linear("cell_out", _relu(self._linear("cell_in", np.concatenate([x, slots, rest], 1)))))
        pooled = _sigmoid(self._linear("gate", np.concatenate([h, x], 1))) * self._linear("readout", h)
        if level.child_node.size:
            np.add.at(pooled, level.child_node, self._p[level.child_row])
        start = self._used
        self._h[start : start + n] = h
        self._p[start : start + n] = pooled
        self._used = start + n
