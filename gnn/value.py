"""The trained network as a value function for search (see :class:`search.value.ValueFunction`).

Inference runs under ``torch.no_grad`` in eval mode, on batches cut by a node budget so that one
huge expression does not share a forward pass with hundreds of small ones.  The network predicts a
per-step value for ``t = 1..D`` steps left; the value for ``t`` is ``t`` times it, and for ``t > D``
the value at ``D`` (more steps never lose: the MDP has a no-op).

``precision="bfloat16"`` runs inference on a bfloat16 copy of the network: about twice the
throughput on CPUs with AMX or AVX512-BF16 units (benchmarks/bench_gnn.py), per-step values within
about 1% of float32's; slower than float32 on CPUs without them.  Its batches are padded to a few
repeated shapes (oneDNN builds a kernel per new bfloat16 shape, which would cost more than it saves).  The copy is a snapshot, so use it
for fixed models (optimize.py), not for a network that is being trained.

``scale`` multiplies every value: A* orders states by ``c(s0) - c(s) + scale * V(s)``.  A network
whose estimates are noisy ranks states better with its values shrunk towards the zero value
function's (greedy) order; the scale is chosen per model on a validation set and kept in its
checkpoint (weighted A*, with the learned term weighted rather than the cost so far).

Threads: a forward pass over at most :data:`ONE_THREAD_NODES` nodes (every batch of A* on
arithmetic expressions, about 16 graphs of 10-40 nodes) runs on one thread, larger ones on the
threads torch had when the value function was made.  Splitting a small batch costs more than it
saves, and on a busy machine the extra threads wait for a core (benchmarks/bench_default_model.py
measures searches beside a busy process on one thread and on two).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch

from gnn.graph import batch_graphs, padded
from gnn.model import ValueNetwork
from gnn.model_config import CostNormalization
from gnn.normalization import from_network
from knossos.cost_models import get_cost_model
from knossos.expr import Expr
from search.settings import PRECISIONS, Precision, SearchSettings
from search.value import check_value_scale

DEFAULT_NODE_BUDGET = 20_000
#: Forward passes over at most this many nodes run on one thread.
ONE_THREAD_NODES = 4096


class NetworkValue:
    def __init__(
        self,
        network: ValueNetwork,
        node_budget: int = DEFAULT_NODE_BUDGET,
        precision: Precision = "float32",
        scale: float = 1.0,
        *,
        settings: SearchSettings | None = None,
        rules: str | None = None,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        self.scale = check_value_scale(scale)
        #: How a search with this model is set by default, and the rule set it was trained with
        #: (None: not loaded from a checkpoint); optimize.py's defaults with it.
        self.settings = settings
        self.rules = rules
        if precision == "bfloat16":
            network = copy.deepcopy(network).to(torch.bfloat16)
        self.network = network
        self.node_budget = node_budget
        self.precision = precision
        #: Batches of at most this many nodes run on one thread, larger ones on ``max_threads``.
        self.one_thread_nodes = ONE_THREAD_NODES
        self.max_threads = torch.get_num_threads()
        #: Forward passes and graphs seen, for benchmarks.
        self.forward_calls = 0
        self.graphs_seen = 0

    def per_step(self, exprs: Sequence[Expr]) -> np.ndarray:
        """The network's raw output, shape ``(len(exprs), D)``."""
        self.network.eval()
        out = np.zeros((len(exprs), self.network.config.depth), dtype=np.float64)
        with torch.no_grad():
            for start, stop in _chunks([e.size for e in exprs], self.node_budget):
                batch = batch_graphs(exprs[start:stop])
                with _threads(1 if batch.num_nodes <= self.one_thread_nodes else self.max_threads):
                    if self.precision == "bfloat16":  # a few repeated shapes: see gnn.graph.padded
                        out[start:stop] = self.network(padded(batch)).numpy()[:-1]
                    else:
                        out[start:stop] = self.network(batch).numpy()
                self.forward_calls += 1
        self.graphs_seen += len(exprs)
        return out

    def values(self, exprs: Sequence[Expr], depth: int) -> np.ndarray:
        config = self.network.config
        return values_table(
            exprs, self.per_step(exprs), depth, self.scale, config.cost_normalization, config.cost_model
        )


def values_table(
    exprs: Sequence[Expr],
    per_step: np.ndarray,
    depth: int,
    scale: float,
    normalization: CostNormalization = "none",
    cost_model: str = "reference",
) -> np.ndarray:
    """Values for ``0..depth`` steps left from a network's per-step outputs ``(n, D)``: ``t`` times
    the output for ``t`` (the output for ``D`` beyond it), as cost reductions (see
    :mod:`gnn.normalization`), times ``scale``."""
    d = per_step.shape[1]
    t = np.arange(depth + 1)
    columns = np.minimum(t, d)  # the value for t > D is the value at D
    table = np.zeros((per_step.shape[0], depth + 1))
    table[:, 1:] = per_step[:, columns[1:] - 1] * columns[1:]
    if normalization != "none":
        cost = get_cost_model(cost_model)
        table = from_network(normalization, np.array([cost(e) for e in exprs]), table)
    return table * scale


@contextmanager
def _threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` for the block (a process-wide setting, put back after)."""
    before = torch.get_num_threads()
    if n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _chunks(sizes: list[int], budget: int) -> list[tuple[int, int]]:
    """Consecutive ranges whose node counts stay within ``budget`` (a larger graph goes alone)."""
    out: list[tuple[int, int]] = []
    start, total = 0, 0
    for i, n in enumerate(sizes):
        if i > start and total + n > budget:
            out.append((start, i))
            start, total = i, 0
        total += n
    if start < len(sizes):
        out.append((start, len(sizes)))
    return out
