"""Reductions that are not sums (a maximum, the first matching index) as loops.

The language's only loops are ``build`` and ``sumbuild``, and no construct keeps a running maximum,
so such a reduction is a balanced tree of its binary operation.  Unrolled over the whole dimension
that tree has as many nodes as the dimension has elements (a 1,000-class softmax made a gradient of
~190,000 lines of C++).  Here it is cut into levels instead: each level is one ``build`` whose body
combines :data:`FAN_IN` consecutive elements of the level below, so the program has
``FAN_IN * ceil(log_FAN_IN(n))`` leaves, whatever the size, and the work stays ``O(n)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from frontends.tensor import Index, LetBlock, Tensor, iadd, ic, imul
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op

#: Elements one level combines: 1,000 classes are ten loops (1000 -> 500 -> ... -> 2 -> 1).  Cross-entropy's
#: gradient at 512x1000, one thread, against PyTorch eager in the same process: 2 leaves 17.0x (9,300 lines
#: of C++), 4: 15.1x, 8: 24.0x (the tree unrolled over all 1,000: 233x, 192,368 lines).
FAN_IN = 2

Combine = Callable[[Expr, Expr], Expr]


def balanced(leaves: Sequence[Expr], combine: Combine) -> Expr:
    """``combine`` over ``leaves`` as a balanced tree, pairing neighbours (so that, where ``combine``
    keeps its left operand on a tie, the earliest leaf wins)."""
    level = list(leaves)
    while len(level) > 1:
        pairs = [combine(level[k], level[k + 1]) for k in range(0, len(level) - 1, 2)]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def _level(x: Tensor, d: int, combine: Combine) -> Tensor:
    """``x`` with dimension ``d`` cut into groups of :data:`FAN_IN` consecutive elements, each
    combined into one.  The last group, where it is short, reads the last element again in its
    missing places (an operand repeated leaves a maximum or a first index as it was)."""
    n = x.shape[d]
    groups = -(-n // FAN_IN)
    width = min(n, FAN_IN)

    def at(idx: Index) -> Expr:
        g = idx[d]
        leaves = []
        for j in range(width):
            i = iadd(imul(g, FAN_IN), ic(j))
            if (groups - 1) * FAN_IN + j >= n:  # past the end in the last group: read element n - 1
                i = E.op(Op.IF, E.op(Op.LT, i, ic(n)), i, ic(n - 1))
            leaves.append(x.at((*idx[:d], i, *idx[d + 1 :])))
        return balanced(leaves, combine)

    return Tensor((*x.shape[:d], groups, *x.shape[d + 1 :]), at, cheap=False, elem=x.elem)


def tree_reduce(block: LetBlock, x: Tensor, d: int, combine: Combine, prefix: str = "level") -> Tensor:
    """``x`` reduced along dimension ``d`` (kept, of size 1) with the associative ``combine``: every
    level but the last is materialised (a loop), the last is read lazily (at most FAN_IN leaves).
    Each element of ``x`` is read once (the last one up to FAN_IN times): ``x`` may be lazy."""
    if x.shape[d] == 0:
        raise ValueError("a reduction over no elements")
    while True:
        level = _level(x, d, combine)
        if level.shape[d] == 1:
            return level
        x = block.materialise(level, prefix)
