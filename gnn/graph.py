"""Expressions as graphs for the gated graph neural network (Knossos paper, section 3.2, Table 2b).

The nodes of an expression's graph are its subexpression *occurrences*: the tree's nodes, numbered
in pre-order (:func:`knossos.expr.preorder`), so a graph node's id is the node number that rules,
actions and search use everywhere else.  Edges are directed and typed (:data:`EDGE_TYPE_NAMES`):

=====  ==========================  ========================================================
type   name                        from -> to
=====  ==========================  ========================================================
0-2    ``to_child_0`` .. ``_2``    a node -> its child at argument position 0, 1, 2
3      ``to_child_3+``             a node -> its child at any position >= 3 (calls, tuples)
4-6    ``to_parent_0`` .. ``_2``   a child at position 0, 1, 2 -> its parent
7      ``to_parent_3+``            a child at any position >= 3 -> its parent
8      ``identical``               an occurrence of a subexpression <-> its next occurrence
=====  ==========================  ========================================================

Positions count every child, so a binder's bound variable has its own position (``let``: the
variable 0, the value 1, the body 2; ``build``: the size 0, the index variable 1, the body 2).

*Is-identical* edges join the occurrences of one subexpression *in context*: the same interned
:class:`~knossos.expr.Expr` object (alpha-equivalence) whose free variables are bound by the same
binders of the whole expression (or are free in it).  The occurrences of each subexpression are
joined as a chain in pre-order (occurrence ``k`` with occurrence ``k + 1``, an edge in each
direction) rather than as a clique, so the number of edges stays linear in the expression's size.
Leaves are included: identical variable occurrences are what links a binder's binding occurrence
with its uses (``(let (a e) (mul a a))`` chains the three ``a``), and equal constants are linked
too.  Names play no part: binders are interned modulo alpha, so the names inside a node are those
of whichever alpha-variant the process built first, and a graph that linked occurrences of one
name under different binders would depend on the process's history (so would the value network's
output, and a resumed training run would not repeat an uninterrupted one).

Node features are an integer node type (:data:`NODE_TYPE_INDEX`: one per :class:`~knossos.ops.Op`,
``NUM_NODE_TYPES`` in all; the model one-hots or embeds it) and a float value: ``sign(v) *
log1p(|v|)`` of a constant's value ``v`` (Booleans as 0 and 1), 0 for every other node.

:func:`expr_graph` builds the arrays of one expression in a single iterative pass (no recursion, so
expressions 100,000 levels deep are fine) and keeps them in a cache bounded by the total number of
nodes it holds; :func:`batch_graphs` concatenates cached graphs into torch tensors for a batch
without per-node Python work.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Final

import numpy as np
import numpy.typing as npt
import torch

from knossos.expr import Expr, preorder
from knossos.ops import BINDERS, Op

# -- node types ------------------------------------------------------------------------------------
#: The node type index of each op (its position in :class:`~knossos.ops.Op`).
NODE_TYPE_INDEX: Final[dict[Op, int]] = {op: i for i, op in enumerate(Op)}
NUM_NODE_TYPES: Final = len(NODE_TYPE_INDEX)
#: The node-type vocabulary: the op of each node type index, by name.  Checkpoints store it, so that
#: reordering or extending :class:`~knossos.ops.Op` cannot silently remap a trained model's inputs.
NODE_TYPES: Final[tuple[str, ...]] = tuple(op.name for op in NODE_TYPE_INDEX)
#: Op value -> node type index, for vectorised lookup (-1 where no op has that value).
_OP_VALUE_TO_INDEX: Final = np.full(max(int(op) for op in Op) + 1, -1, dtype=np.int64)
for _op, _index in NODE_TYPE_INDEX.items():
    _OP_VALUE_TO_INDEX[int(_op)] = _index
_CONST_OP: Final = int(Op.CONST)
_get_op: Final = attrgetter("op")
_IS_BINDER: Final = np.zeros(max(int(op) for op in Op) + 1, dtype=bool)  # by op value
_IS_BINDER[[int(op) for op in BINDERS]] = True

# -- edge types ------------------------------------------------------------------------------------
#: Tree edge types per direction: positions 0, 1 and 2 have one each, positions from 3 on share the last.
NUM_POSITIONS: Final = 4
TO_CHILD: Final = 0  # + min(position, 3)
TO_PARENT: Final = TO_CHILD + NUM_POSITIONS  # + min(position, 3)
IDENTICAL: Final = TO_PARENT + NUM_POSITIONS
NUM_EDGE_TYPES: Final = IDENTICAL + 1
EDGE_TYPE_NAMES: Final[tuple[str, ...]] = (
    *(f"to_child_{p}" for p in range(NUM_POSITIONS - 1)),
    f"to_child_{NUM_POSITIONS - 1}+",
    *(f"to_parent_{p}" for p in range(NUM_POSITIONS - 1)),
    f"to_parent_{NUM_POSITIONS - 1}+",
    "identical",
)
assert len(EDGE_TYPE_NAMES) == NUM_EDGE_TYPES == 9

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ExprGraph:
    """The graph of one expression, as read-only numpy arrays (shared through the cache)."""

    #: Node type index of each node, by pre-order number: int64 ``[N]``.
    node_type: IntArray
    #: Squashed constant value of each node (0 for non-constants): float32 ``[N]``.
    node_value: FloatArray
    #: Source (row 0) and target (row 1) node of each edge: int64 ``[2, E]``.
    edge_index: IntArray
    #: Type of each edge (see :data:`EDGE_TYPE_NAMES`): int64 ``[E]``.
    edge_type: IntArray

    @property
    def num_nodes(self) -> int:
        return int(self.node_type.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_type.shape[0])


def squash(value: bool | int | float) -> float:
    """``sign(v) * log1p(|v|)``, defined for every literal (huge Integers included)."""
    v = abs(value)
    try:
        m = math.log1p(v)
    except OverflowError:  # an Integer beyond the float range: log1p(v) == log(v) there
        m = math.log(v)
    return m if value >= 0 else -m


def _occurrence_groups(nodes: list[Expr], ops: IntArray, parent: list[int], position: list[int]) -> IntArray:
    """A number per node (in pre-order), equal exactly for occurrences of one subexpression in context.

    The key of an occurrence is its node object and, for each of its free variables, the pre-order
    number of the binder that binds it there (-1 where it is free in the whole expression); a
    binder's binding occurrence counts as bound by that binder.  One pass with a scoped symbol
    table; a scope is its node's interval of pre-order numbers.  ``parent`` and ``position`` are
    each node's parent and argument position (as :func:`_build` has them).
    """
    is_binder = _IS_BINDER[ops]
    if not is_binder.any():  # nothing is bound: the node objects alone
        return np.fromiter(map(id, nodes), dtype=np.uint64, count=len(nodes)).astype(np.int64)
    binder_at = is_binder.tolist()
    groups = np.empty(len(nodes), dtype=np.int64)
    numbers: dict[object, int] = {}
    in_scope: dict[str, list[int]] = {}  # name -> the binders in scope that bind it, innermost last
    open_scopes: list[tuple[int, str]] = []  # (end of the scope, name), innermost last
    for i, node in enumerate(nodes):
        while open_scopes and open_scopes[-1][0] <= i:
            in_scope[open_scopes.pop()[1]].pop()
        binding = -1  # the binder whose binding occurrence this node is
        p = parent[i]
        if i and binder_at[p]:
            var_index, scope_index = BINDERS[nodes[p].op]
            if position[i] == var_index:
                binding = p
            elif position[i] == scope_index:
                name = nodes[p].args[var_index].data
                open_scopes.append((i + node.size, name))
                in_scope.setdefault(name, []).append(p)
        key: object = id(node)  # closed, or free in the whole expression: the node alone
        if binding >= 0:
            key = (key, binding)
        elif open_scopes and node.free:
            # the same node has the same frozenset, so its iteration order is the same at every occurrence
            bound_by = tuple(in_scope[v][-1] if in_scope.get(v) else -1 for v in node.free)
            if any(b >= 0 for b in bound_by):
                key = (key, *bound_by)
        groups[i] = numbers.setdefault(key, len(numbers))
    return groups


def _build(root: Expr) -> ExprGraph:
    """The graph of ``root``: one iterative pre-order pass, then numpy."""
    n = root.size
    nodes = list(preorder(root))
    assert len(nodes) == n, "an expression's size must count its nodes"
    ops = np.fromiter(map(_get_op, nodes), dtype=np.int64, count=n)
    # parent and argument position of each node (node 0's stay 0 and are left out below); the
    # children of node i are numbered i + 1, then on by the sizes of their elder siblings
    parent = [0] * n
    position = [0] * n
    for i, node in enumerate(nodes):
        args = node.args
        if args:
            c = i + 1
            for k, a in enumerate(args):
                parent[c] = i
                position[c] = k
                c += a.size
    keys = _occurrence_groups(nodes, ops, parent, position)

    node_type = _OP_VALUE_TO_INDEX[ops]
    node_value = np.zeros(n, dtype=np.float32)
    where = np.flatnonzero(ops == _CONST_OP)
    if where.size:
        node_value[where] = [squash(nodes[j].data) for j in where.tolist()]

    # tree edges, in order of the child's number: parent -> child, then child -> parent
    child = np.arange(1, n, dtype=np.int64)
    par_of = np.array(parent, dtype=np.int64)[1:]
    slot = np.minimum(np.array(position, dtype=np.int64)[1:], NUM_POSITIONS - 1)

    # is-identical chains: a stable sort by group number groups the occurrences of each subexpression
    # in pre-order; neighbours in a group are consecutive occurrences.  Sorting the pairs by their
    # first node (unique: each occurrence has at most one next) fixes the edges' order.
    order = np.argsort(keys, kind="stable")
    same = keys[order[1:]] == keys[order[:-1]]
    first, second = order[:-1][same], order[1:][same]
    by_first = np.argsort(first, kind="stable")
    first, second = first[by_first].astype(np.int64), second[by_first].astype(np.int64)

    src = np.concatenate([par_of, child, first, second])
    dst = np.concatenate([child, par_of, second, first])
    edge_type = np.concatenate(
        [slot + TO_CHILD, slot + TO_PARENT, np.full(2 * first.shape[0], IDENTICAL, dtype=np.int64)]
    )
    edge_index = np.stack([src, dst])
    for array in (node_type, node_value, edge_index, edge_type):
        array.flags.writeable = False
    return ExprGraph(node_type, node_value, edge_index, edge_type)


# -- the cache ---------------------------------------------------------------------------------------
#: The cache holds graphs of at most this many nodes in all (about 100 bytes a node).
CACHE_MAX_NODES: Final = 2_000_000
_cache: OrderedDict[Expr, ExprGraph] = OrderedDict()
_cache_nodes = 0
_cache_lock = threading.Lock()


def expr_graph(e: Expr) -> ExprGraph:
    """The graph of ``e`` (cached; least recently used graphs are dropped beyond ``CACHE_MAX_NODES``)."""
    global _cache_nodes
    with _cache_lock:
        g = _cache.get(e)
        if g is not None:
            _cache.move_to_end(e)
            return g
    g = _build(e)
    with _cache_lock:
        if e not in _cache:
            _cache[e] = g
            _cache_nodes += g.num_nodes
            while _cache_nodes > CACHE_MAX_NODES and len(_cache) > 1:
                _, old = _cache.popitem(last=False)
                _cache_nodes -= old.num_nodes
        else:
            g = _cache[e]
    return g


def clear_graph_cache() -> None:
    """Forget every cached graph."""
    global _cache_nodes
    with _cache_lock:
        _cache.clear()
        _cache_nodes = 0


def graph_cache_info() -> tuple[int, int]:
    """(graphs, nodes) in the cache."""
    with _cache_lock:
        return len(_cache), _cache_nodes


# -- batches -----------------------------------------------------------------------------------------
@dataclass
class GraphBatch:
    """A batch of graphs as one disjoint graph (the PyG convention), node ids offset per graph.

    It holds what a ``torch_geometric.data.Batch`` would, under the same names (``edge_index``,
    ``batch``, ``num_graphs``, ``num_nodes``), without importing PyG: see
    :class:`gnn.model.GatedGraphConv` for what that import costs search.
    """

    #: long ``[sum N]``
    node_type: torch.Tensor
    #: float32 ``[sum N]``
    node_value: torch.Tensor
    #: long ``[2, sum E]``: source and target, offsets applied
    edge_index: torch.Tensor
    #: long ``[sum E]``
    edge_type: torch.Tensor
    #: long ``[sum N]``: the graph of each node
    batch: torch.Tensor
    num_graphs: int

    @property
    def num_nodes(self) -> int:
        return int(self.node_type.shape[0])

    def to(self, device: torch.device | str) -> GraphBatch:
        """The same batch on ``device``."""
        return GraphBatch(
            self.node_type.to(device),
            self.node_value.to(device),
            self.edge_index.to(device),
            self.edge_type.to(device),
            self.batch.to(device),
            self.num_graphs,
        )


def batch_graphs(exprs: Sequence[Expr]) -> GraphBatch:
    """The graphs of ``exprs`` as one batch: graph ``k``'s nodes follow those of graphs ``0..k-1``."""
    graphs = [expr_graph(e) for e in exprs]
    if not graphs:
        empty = torch.zeros(0, dtype=torch.long)
        return GraphBatch(empty, torch.zeros(0), torch.zeros((2, 0), dtype=torch.long), empty, empty.clone(), 0)
    nodes = np.array([g.node_type.shape[0] for g in graphs], dtype=np.int64)
    edges = np.array([g.edge_type.shape[0] for g in graphs], dtype=np.int64)
    offsets = np.cumsum(nodes) - nodes
    edge_index = np.concatenate([g.edge_index for g in graphs], axis=1)
    edge_index += np.repeat(offsets, edges)
    return GraphBatch(
        node_type=torch.from_numpy(np.concatenate([g.node_type for g in graphs])),
        node_value=torch.from_numpy(np.concatenate([g.node_value for g in graphs])),
        edge_index=torch.from_numpy(edge_index),
        edge_type=torch.from_numpy(np.concatenate([g.edge_type for g in graphs])),
        batch=torch.from_numpy(np.repeat(np.arange(len(graphs), dtype=np.int64), nodes)),
        num_graphs=len(graphs),
    )


def padded(batch: GraphBatch, node_multiple: int = 64, edge_multiple: int = 32) -> GraphBatch:
    """``batch`` plus an extra graph of padding: its node count becomes a multiple of
    ``node_multiple`` and each edge type's count a multiple of ``edge_multiple``.

    Why: oneDNN builds a bfloat16 matrix-product kernel for every new shape, which costs more than
    the product on search-sized batches; padded batches repeat a few shapes.  The padding nodes (at
    least one) and their self-loops form graph ``num_graphs``, so no real node sends them a message
    or receives one from them; drop the last row of the network's output.
    """
    n = batch.num_nodes
    extra_nodes = node_multiple - n % node_multiple
    counts = np.bincount(batch.edge_type.numpy(), minlength=NUM_EDGE_TYPES)
    extra_edges = (-counts) % edge_multiple
    loop_types = np.repeat(np.arange(NUM_EDGE_TYPES, dtype=np.int64), extra_edges)
    loops = np.full((2, loop_types.shape[0]), n, dtype=np.int64)  # every loop on the first padding node
    return GraphBatch(
        node_type=torch.cat([batch.node_type, torch.zeros(extra_nodes, dtype=torch.long)]),
        node_value=torch.cat([batch.node_value, torch.zeros(extra_nodes, dtype=batch.node_value.dtype)]),
        edge_index=torch.cat([batch.edge_index, torch.from_numpy(loops)], dim=1),
        edge_type=torch.cat([batch.edge_type, torch.from_numpy(loop_types)]),
        batch=torch.cat([batch.batch, torch.full((extra_nodes,), batch.num_graphs, dtype=torch.long)]),
        num_graphs=batch.num_graphs + 1,
    )
