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
anything else (a let-bound size, arithmetic) counts as 16.

Element counts follow the same recognition (:meth:`AllocCost.length`), so that a loop and the vector
it makes are charged alike: a ``deltaVec`` or ``constVec`` whose size is recognised holds that many
times its element's count, a vector-valued ``build`` its trip count times its body's, a parameter
(indexed or not) the lengths ``sizes`` gives it; an ``if``, ``sumbuild``, ``tuple`` (and a ``get``
of one) and element-wise arithmetic pass their parts' counts on, and a ``let`` its body's, where a
variable it binds is on the body's spine of lets, tuples and ifs counted as what it is bound to
(``(let (d$w (deltaVec ...)) (tuple d$w ...))``, as reverse mode writes).  Every other vector (a
variable elsewhere, a call's result), and every level not recognised, counts 16 as in the reference.
The counts set a vector's stores, the adds and accumulator stores of a ``sumbuild`` of vector terms
(per term, at the term's count) and the per-element charge of element-wise arithmetic.  Without that, a one-hot vector of ``(size x)`` counted 16 stores
while ``(build (size x) ...)`` counted its real trips, and the gather rated dearer than the scatter it
replaces (rev$dense_relu at N = 256, docs/autodiff.md).

A scalar-valued ``if`` on Float data costs both of its branches, not the dearer one as in the reference:
in compiled loops g++ makes it a select, evaluating both branches for every element (vectorised, lane by
lane), or
a branch on the data that the processor mispredicts half the time: a select when both branches are
small arithmetic on values at hand, a jump (:data:`JUMP_COST` more) when a branch loads through
``index`` or calls (``(if c (neg (index i v)) (index i v))`` for ``(let (x (index i v)) (if c (neg x)
x))`` made SmoothL1Loss's gradient 1.2x slower per copy).  An ``if`` on indices and sizes only (a
loop's bounds guard) is predicted right, and costs its dearer branch as in the reference.  An ``if`` on a literal condition
(``(gt 1024 0)``, a shape guard of reverse mode's) costs only the branch taken, as g++ folds it: the
reference charges its dearer branch, often a dense vector of zeros that never runs.  Under the reference's charge,
work moved into both branches (``(if c (f x) (neg (f x)))`` for ``(let (y (f x)) (if c y (neg y)))``,
what equality saturation extracts from reverse-mode code) is free, and it made BCEWithLogitsLoss's
gradient 1.8x slower (benchmarks/bench_cost_rank.py, docs/cost.md).

Recognising sizes and lengths from the expression alone keeps every node's cost independent of its
context, so costs are computed once per interned node and cached.  Code without vectors or
literal-size loops costs what the reference says.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from knossos.cost import (
    ASSUMED_VECTOR_SIZE,
    IF_SELECTION_COST,
    LET_COST,
    MALLOC_COST,
    OWN_COST,
    call_overhead,
    if_cost,
)
from knossos.expr import Expr, preorder
from knossos.ops import Op
from knossos.sized_cost import Sizes
from knossos.types import Kind

#: Cost of storing one element of a new vector, in the reference model's units (an add is 1.0).
STORE_COST = 1.0
#: A scalar ``if`` whose branches are not both :func:`_select` values is a jump on the data: half of a
#: mispredicted branch (some 16 cycles), in adds.
JUMP_COST = 8.0
#: What g++ evaluates unconditionally to make an ``if`` a select: arithmetic, comparisons, variables and
#: literals (no load through ``index``, which is range-checked, and no call).
_SELECT_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.NEG, Op.EQ, Op.NE, Op.GT, Op.GTE, Op.LT, Op.LTE})
_SELECT_NODES = 16
_CONDITION_NODES = 64
#: Ops whose result is a new vector (or tuple of vectors) when their type is not a scalar.
_MAKERS = frozenset({Op.BUILD, Op.DELTAVEC, Op.CONSTVEC, Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.NEG})
_ARITHMETIC = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.NEG})
#: How far a let's length follows its spine of lets, tuples and ifs (nodes; nesting of tuples and ifs).
_SPINE_STEPS, _SPINE_DEPTH = 256, 32
#: A cache is cleared when it grows past this many nodes (searches make millions of states).
_CACHE_LIMIT = 2_000_000


class AllocCost:
    """The allocation-aware cost model; ``sizes`` maps a parameter to its lengths at each nesting level
    (a single int: its length, as ``parse_sizes`` gives ``x=100``)."""

    def __init__(self, sizes: Sizes | None = None) -> None:
        self.sizes: dict[str, tuple[int, ...]] = {
            name: dims if isinstance(dims, tuple) else (dims,) for name, dims in (sizes or {}).items()
        }
        self._cache: dict[Expr, float] = {}
        #: Scalars in each costed node's value, by :meth:`length`, filled alongside ``_cache``.
        self._lengths: dict[Expr, int] = {}

    def __call__(self, e: Expr) -> float:
        found = self._cache.get(e)
        if found is not None:
            return found
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
            self._lengths.clear()
        cache, lengths = self._cache, self._lengths
        stack: list[tuple[Expr, bool]] = [(e, False)]
        while stack:  # children before parents, without recursion
            node, ready = stack.pop()
            if node in cache:
                continue
            if not ready:
                stack.append((node, True))
                stack.extend((a, False) for a in node.args if a not in cache)
                continue
            lengths[node] = self._node_length(node)
            cache[node] = self._node_cost(node)
        return cache[e]

    def __repr__(self) -> str:
        return f"AllocCost({self.sizes})" if self.sizes else "AllocCost()"

    # -- one node, its children's costs cached ---------------------------------------------------------
    def _node_cost(self, node: Expr) -> float:
        op, args, c, n = node.op, node.args, self._cache, self._lengths
        stores = 0.0 if node.type.is_scalar or op not in _MAKERS else STORE_COST * n[node]
        if op is Op.BUILD:
            return MALLOC_COST + stores + c[args[0]] + self.trip_count(args[0]) * c[args[2]]
        if op is Op.SUMBUILD:
            trips = self.trip_count(args[0])
            elements = n[args[2]]
            accumulate = float(max(trips - 1, 0) * elements)
            if not args[2].type.is_scalar:
                accumulate += trips * STORE_COST * elements
            return accumulate + c[args[0]] + trips * c[args[2]]
        if op is Op.IF:
            taken = _constant_condition(args[0])
            if taken is not None:  # g++ folds it: only the taken branch runs
                return IF_SELECTION_COST + c[args[0]] + c[args[1] if taken else args[2]]
            if node.type.is_scalar and _on_floats(args[0]):  # see the module's docstring
                jump = 0.0 if _select(args[1]) and _select(args[2]) else JUMP_COST
                return IF_SELECTION_COST + jump + c[args[0]] + c[args[1]] + c[args[2]]
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
        if op in _ARITHMETIC:
            own = OWN_COST[op]
            if all(a.type.elements16 == 1 for a in args):
                return own + children
            # the reference's elementwise_cost, per element of the longer operand at its real length
            return own * max(n[a] for a in args) + MALLOC_COST + stores + children
        return OWN_COST[op] + stores + children

    # -- one node's length, its children's cached ------------------------------------------------------
    def _node_length(self, node: Expr) -> int:
        """Scalars in the value of ``node``: real lengths for the vectors whose length is recognised
        (see :meth:`length`), 16 per level for the others."""
        t = node.type
        if t.is_scalar:
            return 1
        op, args, n = node.op, node.args, self._lengths
        if op is Op.DELTAVEC:
            return self.trip_count(args[0]) * n[args[2]]
        if op is Op.CONSTVEC:
            return self.trip_count(args[0]) * n[args[1]]
        if op is Op.BUILD:
            return self.trip_count(args[0]) * n[args[2]]
        if op is Op.LET:
            return self._let_length(node)
        if op is Op.SUMBUILD:
            return n[args[2]]
        if op is Op.IF:
            return max(n[args[1]], n[args[2]])
        if op is Op.TUPLE:
            return sum(n[a] for a in args)
        if op is Op.GET and args[0].op is Op.TUPLE:
            return n[args[0].args[node.data[0] - 1]]
        if op in _ARITHMETIC:
            return max(n[a] for a in args)
        if op is Op.VAR or op is Op.INDEX:
            return self._parameter_length(node)
        return t.elements16

    def _let_length(self, node: Expr) -> int:
        """A let's value, along its spine of lets, tuples and ifs with the lengths of the variables it binds
        (``(let (d$w (deltaVec ...)) (tuple d$w ...))``, as reverse mode writes, holds the deltaVec's
        elements, not 16 per level of d$w's type).  Elsewhere a bound variable counts 16 per level."""
        n = self._lengths
        budget = _SPINE_STEPS

        def spine(e: Expr, bound: dict[Expr, int], depth: int) -> int:
            nonlocal budget
            while e.op is Op.LET and budget > 0:
                budget -= 1
                bound[e.args[0]] = bound.get(e.args[1], n[e.args[1]])
                e = e.args[2]
            if e.op is Op.VAR:
                return bound.get(e, n[e])
            if depth < _SPINE_DEPTH and budget > 0:
                budget -= 1
                if e.op is Op.TUPLE:
                    return sum(spine(a, dict(bound), depth + 1) for a in e.args)
                if e.op is Op.IF:
                    return max(spine(e.args[1], dict(bound), depth + 1), spine(e.args[2], dict(bound), depth + 1))
            return n[e]

        return spine(node, {}, 0)

    def _parameter_length(self, node: Expr) -> int:
        """A parameter indexed zero or more times, at the lengths ``sizes`` gives it (16 for the levels it
        does not give); anything else 16 per level."""
        depth, inner = 0, node
        while inner.op is Op.INDEX:
            depth, inner = depth + 1, inner.args[1]
        dims = self.sizes.get(inner.data) if inner.op is Op.VAR else None
        if dims is None:
            return node.type.elements16
        count, t, levels = 1, node.type, dims[depth:]
        while t.kind is Kind.VEC:
            count *= levels[0] if levels else ASSUMED_VECTOR_SIZE
            levels, t = levels[1:], t.elem
        return count * t.elements16

    def length(self, e: Expr) -> int:
        """Scalars in the value of ``e``, as this model counts the stores that make it: a ``deltaVec``,
        ``constVec`` or ``build`` of recognised size (:meth:`trip_count`) that many times its element's,
        a parameter (indexed or not) the lengths ``sizes`` gives it; lets, ifs, sums, tuples and
        element-wise ops pass lengths on; every other vector 16 per level."""
        self(e)  # fills both caches, clearing them together
        return self._lengths[e]

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


def _on_floats(cond: Expr) -> bool:
    """Whether the condition ``cond`` compares Float values (data, which a branch predictor cannot
    learn) rather than indices and sizes (loop guards, predicted right); a large one counts as data."""
    if cond.size > _CONDITION_NODES:
        return True
    return any(n.type.kind is Kind.FLOAT for n in preorder(cond))


def _select(e: Expr) -> bool:
    """Whether ``e`` is a small tree of arithmetic on variables and literals (at most
    :data:`_SELECT_NODES` nodes), which g++ computes in both arms of a select."""
    if e.size > _SELECT_NODES:
        return False
    stack = [e]
    while stack:
        node = stack.pop()
        if node.op in (Op.VAR, Op.CONST):
            continue
        if node.op not in _SELECT_OPS or not node.type.is_scalar:
            return False
        stack.extend(node.args)
    return True


_COMPARE: dict[Op, Callable[[Any, Any], bool]] = {
    Op.EQ: operator.eq,
    Op.NE: operator.ne,
    Op.GT: operator.gt,
    Op.GTE: operator.ge,
    Op.LT: operator.lt,
    Op.LTE: operator.le,
}


def _constant_condition(cond: Expr) -> bool | None:
    """The value of an ``if``'s condition when it is a literal Bool or a comparison of two literal
    numbers (``(gt 1024 0)``, as reverse mode writes shape guards); None otherwise."""
    if cond.op is Op.CONST and isinstance(cond.data, bool):
        return cond.data
    test = _COMPARE.get(cond.op)
    if test is None or any(a.op is not Op.CONST or isinstance(a.data, bool) for a in cond.args):
        return None
    return bool(test(cond.args[0].data, cond.args[1].data))


#: The model with the reference's sizes (every vector 16 long): ``--cost alloc``.
alloc_cost = AllocCost()
