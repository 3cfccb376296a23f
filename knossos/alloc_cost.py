"""A cost model that charges what compiled code does with memory and, where told, the real loop sizes.

The reference model (:mod:`knossos.cost`) charges a ``deltaVec`` or ``constVec`` a flat 2.0, however
many elements it fills, and a vector-valued ``build`` or sum its arithmetic but not its stores.
Compiled, a one-hot vector inside a loop is a fresh array of zeros per iteration, and a sum of
vectors stores its whole accumulator once per term: a scatter (``sum_x deltaVec n x e``) costs
``n`` per term where the gather that replaces it costs 1.  The reference model charges the one-hot
vectors nothing per element, so it underrates scatters inside loops.  :class:`AllocCost` is the
reference model plus ``STORE_COST`` per element of every vector an op makes (per term, for a sum of
vectors).

A loop of literal size counts that many iterations; others count the reference's 16 unless sizes are
given: ``AllocCost({"image": (16, 128)})`` counts a loop over ``(size (index i image))`` as 128
iterations.  A size is recognised when it is the ``size`` of a parameter indexed zero or more times;
anything else (a let-bound size, arithmetic) counts as 16.  Recognising sizes from the expression
alone keeps every node's cost independent of its context, so costs are computed once per interned
node and cached.  Element
counts of vector types stay 16 per level.  Code without vectors or literal-size loops costs what
the reference says.
"""

from __future__ import annotations

from collections.abc import Mapping

from knossos.cost import ASSUMED_VECTOR_SIZE, LET_COST, MALLOC_COST, OWN_COST, call_overhead, elementwise_cost, if_cost
from knossos.expr import Expr
from knossos.ops import Op

#: Cost of storing one element of a new vector, in the reference model's units (an add is 1.0).
STORE_COST = 1.0
#: Ops whose result is a new vector (or tuple of vectors) when their type is not a scalar.
_MAKERS = frozenset({Op.BUILD, Op.DELTAVEC, Op.CONSTVEC, Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.NEG})
#: A cache is cleared when it grows past this many nodes (searches make millions of states).
_CACHE_LIMIT = 2_000_000

Dims = Mapping[str, int | tuple[int, ...]]


class AllocCost:
    """The allocation-aware cost model; ``sizes`` maps a parameter to its lengths at each nesting level
    (a single int: its length, as ``parse_sizes`` gives ``x=100``)."""

    def __init__(self, sizes: Dims | None = None) -> None:
        self.sizes: dict[str, tuple[int, ...]] = {
            name: dims if isinstance(dims, tuple) else (dims,) for name, dims in (sizes or {}).items()
        }
        self._cache: dict[Expr, float] = {}

    def __call__(self, e: Expr) -> float:
        found = self._cache.get(e)
        if found is not None:
            return found
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
        cache = self._cache
        stack: list[tuple[Expr, bool]] = [(e, False)]
        while stack:  # children before parents, without recursion
            node, ready = stack.pop()
            if node in cache:
                continue
            if not ready:
                stack.append((node, True))
                stack.extend((a, False) for a in node.args if a not in cache)
                continue
            cache[node] = self._node_cost(node)
        return cache[e]

    def __repr__(self) -> str:
        return f"AllocCost({self.sizes})" if self.sizes else "AllocCost()"

    # -- one node, its children's costs cached ---------------------------------------------------------
    def _node_cost(self, node: Expr) -> float:
        op, args, c = node.op, node.args, self._cache
        stores = 0.0 if node.type.is_scalar or op not in _MAKERS else STORE_COST * node.type.elements16
        if op is Op.BUILD:
            return MALLOC_COST + stores + c[args[0]] + self.trip_count(args[0]) * c[args[2]]
        if op is Op.SUMBUILD:
            trips = self.trip_count(args[0])
            elements = args[2].type.elements16
            accumulate = float(max(trips - 1, 0) * elements)
            if not args[2].type.is_scalar:
                accumulate += trips * STORE_COST * elements
            return accumulate + c[args[0]] + trips * c[args[2]]
        if op is Op.IF:
            return if_cost(c[args[0]], c[args[1]], c[args[2]])
        if op is Op.LET:
            return LET_COST + c[args[1]] + c[args[2]]
        if op is Op.LAM:
            return c[args[1]]
        if op is Op.TUPLE:
            return LET_COST * len(args) + sum(c[a] for a in args)
        if op is Op.CALL:
            body_cost: float = node.data.body_cost
            return call_overhead(len(args)) + body_cost + sum(c[a] for a in args)
        if op is Op.APPLY:
            return 2.0 + c[args[0]] + c[args[1]]
        if op in (Op.CONST, Op.VAR):
            return 0.0
        children = sum(c[a] for a in args)
        if op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.NEG):
            own = OWN_COST[op]
            if all(a.type.elements16 == 1 for a in args):
                return own + children
            left, right = (args[0], args[0]) if op is Op.NEG else args
            return elementwise_cost(own, left.type, right.type) + stores + children
        return OWN_COST[op] + stores + children

    def trip_count(self, n: Expr) -> int:
        """The value of the size expression ``n`` where it is recognised, else the reference's 16."""
        if n.op is Op.CONST and isinstance(n.data, int) and not isinstance(n.data, bool):
            return max(n.data, 0)
        if n.op is not Op.SIZE or not self.sizes:
            return ASSUMED_VECTOR_SIZE
        depth, inner = 0, n.args[0]
        while inner.op is Op.INDEX:
            depth, inner = depth + 1, inner.args[1]
        dims = self.sizes.get(inner.data) if inner.op is Op.VAR else None
        return dims[depth] if dims is not None and depth < len(dims) else ASSUMED_VECTOR_SIZE


#: The model with the reference's sizes (every vector 16 long): ``--cost alloc``.
alloc_cost = AllocCost()
