"""What the tree value network reads at each interned node, and the order it visits nodes in.

The tree network (:mod:`gnn.tree_model`) computes one embedding per *interned* node from the node
alone and its children's embeddings, so that an expression shared by many search states is embedded
once.  Everything here is therefore a function of the node object only, and invariant under renaming
bound variables (binders are interned modulo alpha: whichever alpha-variant was built first supplies
the names inside, and nothing below may depend on which one that was).  Names never appear; what
the GGNN learns from is-identical edges is given as relations between a node's children and as
repeated subexpressions below a node (a *compound* subexpression has children; those that use a
variable bound inside the child being walked are left out, as their names are an alpha-variant's):

=========  =====================================================================================
features   meaning
=========  =====================================================================================
0          ``sign(v) * log1p(|v|)`` of a constant's value (0 for other nodes)
1          ``log1p(cost) / 10``: the cost of the subexpression (the MDP's reward is its drop)
2          ``log1p(size) / 5``
3-8        the type's kind: Integer, Float, Bool, Vec, Tuple, function
9-11       children 0 and 1, 0 and 2, 1 and 2 are the same subexpression
12-14      children 0 and 1, 0 and 2, 1 and 2 share a free variable
15-18      a binder's variable is used 0, 1, 2, 3 or more times in its scope (all 0 elsewhere)
19         the number of free variables, at most 4, over 4
20-22      children 0 and 1, 0 and 2, 1 and 2 have a compound subexpression in common
23         a compound subexpression occurs twice or more below the node
=========  =====================================================================================
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from gnn.graph import NODE_TYPE_INDEX, squash
from knossos.expr import Expr, occurrences
from knossos.ops import BINDERS, Op
from knossos.types import Kind

#: Children at positions 0, 1 and 2 have their own slot; later ones (calls, tuples) are averaged.
NUM_CHILD_SLOTS: Final = 3
NUM_FEATURES: Final = 24
#: Nodes larger than this get no shared-subexpression features (walking them would cost too much).
SHARING_LIMIT: Final = 256
_KIND_COLUMN: Final = {Kind.INTEGER: 3, Kind.FLOAT: 4, Kind.BOOL: 5, Kind.VEC: 6, Kind.TUPLE: 7, Kind.LAM: 8}
_PAIRS: Final = tuple(itertools.combinations(range(NUM_CHILD_SLOTS), 2))
_USES_COLUMN: Final = 15
_MAX_USES: Final = 3


def node_features(node: Expr) -> np.ndarray:
    """The feature vector of one node (float32, :data:`NUM_FEATURES` long; see the module docstring)."""
    f = np.zeros(NUM_FEATURES, dtype=np.float32)
    if node.op is Op.CONST:
        f[0] = squash(node.data)
    f[1] = math.log1p(max(node.cost, 0.0)) / 10 if math.isfinite(node.cost) else 5.0
    f[2] = math.log1p(node.size) / 5
    f[_KIND_COLUMN[node.type.kind]] = 1.0
    args = node.args
    for k, (i, j) in enumerate(_PAIRS):
        if j < len(args):
            f[9 + k] = args[i] is args[j]
            f[12 + k] = not args[i].free.isdisjoint(args[j].free)
    binder = BINDERS.get(node.op)
    if binder is not None:
        var_index, scope_index = binder
        uses = occurrences(args[scope_index], args[var_index].data)
        f[_USES_COLUMN + min(uses, _MAX_USES)] = 1.0
    f[19] = min(len(node.free), 4) / 4
    if 1 < node.size <= SHARING_LIMIT:
        _sharing(node, f)
    return f


#: node -> its features, for :func:`cached_features` (emptied when it holds this many).
_FEATURES: dict[Expr, np.ndarray] = {}
FEATURE_CACHE_ROWS: Final = 1 << 22


def cached_features(node: Expr) -> np.ndarray:
    """:func:`node_features`, remembered: fitting meets the same interned nodes in every pass and in
    neighbouring states of one search, and computing them is most of a fitting step's time."""
    f = _FEATURES.get(node)
    if f is None:
        if len(_FEATURES) >= FEATURE_CACHE_ROWS:
            _FEATURES.clear()
        f = _FEATURES[node] = node_features(node)
        f.flags.writeable = False
    return f


def _sharing(node: Expr, f: np.ndarray) -> None:
    """Features 20-23: compound subexpressions shared between children or repeated below ``node``."""
    binder = BINDERS.get(node.op)
    below: list[list[Expr]] = []
    for k, a in enumerate(node.args):
        bound = frozenset((node.args[binder[0]].data,)) if binder is not None and k == binder[1] else frozenset()
        below.append(_compounds(a, bound))
    sets = [set(b) for b in below]
    for k, (i, j) in enumerate(_PAIRS):
        if j < len(sets):
            f[20 + k] = not sets[i].isdisjoint(sets[j])
    f[23] = sum(map(len, sets)) < sum(map(len, below)) or any(
        not sets[i].isdisjoint(sets[j]) for i, j in itertools.combinations(range(len(sets)), 2)
    )


def _compounds(root: Expr, bound: frozenset[str]) -> list[Expr]:
    """Every occurrence of a compound subexpression of ``root`` that uses none of ``bound`` nor any
    variable bound inside ``root``."""
    out: list[Expr] = []
    stack = [(root, bound)]
    while stack:
        node, names = stack.pop()
        if not node.args:
            continue
        if node.free.isdisjoint(names):
            out.append(node)
        binder = BINDERS.get(node.op)
        for k, a in enumerate(node.args):
            inner = names | {node.args[binder[0]].data} if binder is not None and k == binder[1] else names
            stack.append((a, inner))
    return out


def postorder_new(roots: Iterable[Expr], known: dict[Expr, int] | set[Expr]) -> list[tuple[Expr, int]]:
    """The distinct nodes under ``roots`` that are not ``known``, each with its level, children first.

    A node's level is 0 when none of its children is new, else one more than its highest new child's:
    the nodes of one level depend only on known nodes and on lower levels, so a level is one batched
    step of the network.  Iterative (expressions may be deeper than Python's recursion limit).
    """
    level: dict[Expr, int] = {}
    out: list[tuple[Expr, int]] = []
    for root in roots:
        if root in known or root in level:
            continue
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                if node not in level:
                    lv = max((level[a] + 1 for a in node.args if a in level), default=0)
                    level[node] = lv
                    out.append((node, lv))
                continue
            if node in level:
                continue
            stack.append((node, True))
            stack.extend((a, False) for a in node.args if a not in known and a not in level)
    return out


@dataclass(frozen=True)
class Level:
    """One batched step of the tree network: nodes whose children are all embedded already.

    Child references are *rows* of the embedding table, where row 0 is all zeros (an absent child)
    and the level's own nodes take the next ``len(ops)`` rows.
    """

    #: Node type index per node: int64 ``[n]``.
    ops: np.ndarray
    #: :func:`node_features` per node: float32 ``[n, NUM_FEATURES]``.
    features: np.ndarray
    #: Rows of the children at positions 0, 1, 2 (0 where there is none): int64 ``[n, 3]``.
    slots: np.ndarray
    #: (node, child row) of every child at position 3 or later, and how many each node has.
    rest_node: np.ndarray
    rest_child: np.ndarray
    rest_count: np.ndarray
    #: (node, child row) of every child, for summing the children's pooled readouts.
    child_node: np.ndarray
    child_row: np.ndarray


@dataclass(frozen=True)
class TreePlan:
    levels: list[Level]
    #: The row of each root, in the order given.
    roots: np.ndarray
    #: The new nodes in row order (the first is row ``first_row``).
    nodes: list[Expr]
    first_row: int


def plan(roots: Sequence[Expr], known: dict[Expr, int], first_row: int) -> TreePlan:
    """How to embed ``roots``: the nodes not ``known`` (node -> row of a table already filled),
    level by level, given rows from ``first_row`` on in that order (``known`` is not changed)."""
    by_level: list[list[Expr]] = []
    for node, lv in postorder_new(roots, known):
        while len(by_level) <= lv:
            by_level.append([])
        by_level[lv].append(node)
    new: dict[Expr, int] = {}
    ordered: list[Expr] = []
    for nodes in by_level:
        for node in nodes:
            new[node] = first_row + len(new)
        ordered.extend(nodes)
    rows = _Rows(known, new)
    return TreePlan(
        [_level(nodes, rows) for nodes in by_level],
        np.array([rows[r] for r in roots], dtype=np.int64),
        ordered,
        first_row,
    )


class _Rows:
    """Rows of known nodes and of new ones, without copying the (large) known table."""

    def __init__(self, known: dict[Expr, int], new: dict[Expr, int]) -> None:
        self.known = known
        self.new = new

    def __getitem__(self, node: Expr) -> int:
        row = self.new.get(node)
        return self.known[node] if row is None else row


def _level(nodes: list[Expr], rows: _Rows) -> Level:
    n = len(nodes)
    slots = np.zeros((n, NUM_CHILD_SLOTS), dtype=np.int64)
    rest_node: list[int] = []
    rest_child: list[int] = []
    rest_count = np.zeros(n, dtype=np.float32)
    child_node: list[int] = []
    child_row: list[int] = []
    for i, node in enumerate(nodes):
        for k, a in enumerate(node.args):
            r = rows[a]
            child_node.append(i)
            child_row.append(r)
            if k < NUM_CHILD_SLOTS:
                slots[i, k] = r
            else:
                rest_node.append(i)
                rest_child.append(r)
                rest_count[i] += 1
    return Level(
        ops=np.array([NODE_TYPE_INDEX[node.op] for node in nodes], dtype=np.int64),
        features=np.stack([cached_features(node) for node in nodes]),
        slots=slots,
        rest_node=np.array(rest_node, dtype=np.int64),
        rest_child=np.array(rest_child, dtype=np.int64),
        rest_count=np.maximum(rest_count, 1.0)[:, None],
        child_node=np.array(child_node, dtype=np.int64),
        child_row=np.array(child_row, dtype=np.int64),
    )
